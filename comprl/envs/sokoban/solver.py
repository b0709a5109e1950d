"""An optimal Sokoban solver: breadth-first search over (player, boxes) states with dead-square pruning.

Breadth-first search over single moves returns a shortest solution in moves, which is what the text env
counts (one action per turn). A box pushed onto a dead square (one from which no sequence of pushes can bring
it to any target, such as a corner without a target) can never be solved, so such pushes are not explored.
Comprl's rooms are small (6x6 with the border), so the search visits at most a few thousand states.
"""

from __future__ import annotations

from collections import deque

from comprl.envs.sokoban.puzzle import MOVES, Room, Square, State, push_or_move, shifted


def live_squares(room: Room) -> frozenset[Square]:
    """The floor squares from which a lone box can still be pushed onto some target.

    A box moves from s to s + d when the player can stand on s - d; working backwards from the targets,
    s is live when some neighbour s + d is live and both s + d and s - d are floor.
    """
    live = set(room.targets)
    frontier = deque(room.targets)
    while frontier:
        square = frontier.popleft()
        for offset in MOVES.values():
            previous = shifted(square, offset, -1)  # where the box came from
            player = shifted(square, offset, -2)  # where the player pushed it from
            if previous not in live and previous in room.floor and player in room.floor:
                live.add(previous)
                frontier.append(previous)
    return frozenset(live)


def solve(room: Room, start: State, max_moves: int | None = None) -> tuple[str, ...] | None:
    """A shortest list of move words that solves the level, or None when none has at most `max_moves` moves.

    Raises:
        ValueError: `max_moves` is negative, or `start` has a different number of boxes than `room` targets.
    """
    if max_moves is not None and max_moves < 0:
        raise ValueError(f"max_moves must be >= 0, got {max_moves}")
    if len(start.boxes) != len(room.targets):
        raise ValueError(f"the level has {len(start.boxes)} boxes but {len(room.targets)} targets")
    live = live_squares(room)
    parents: dict[State, tuple[State, str] | None] = {start: None}
    depth = {start: 0}
    queue = deque([start])
    while queue:
        state = queue.popleft()
        if state.is_solved(room):
            return _moves_to(state, parents)
        if max_moves is not None and depth[state] >= max_moves:
            continue
        for move in MOVES:
            following = push_or_move(room, state, move)
            if following is None or following in parents or not following.boxes <= live:
                continue
            parents[following] = (state, move)
            depth[following] = depth[state] + 1
            queue.append(following)
    return None


def _moves_to(state: State, parents: dict[State, tuple[State, str] | None]) -> tuple[str, ...]:
    """The move words on the search tree's path from the start to `state`."""
    moves = []
    link = parents[state]
    while link is not None:
        state, move = link
        moves.append(move)
        link = parents[state]
    return tuple(reversed(moves))
