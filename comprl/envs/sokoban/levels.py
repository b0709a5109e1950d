"""Random Sokoban levels by reverse play, following the generator of RAGEN and ROLL (itself gym-sokoban's).

One attempt:

1. Room topology: a random walk of ``int(1.7 * (height + width))`` steps through the interior of an all-wall
   grid, turning with probability 0.35 per step, opens a randomly chosen 3x3 pattern (a line across, a line
   down, two L shapes or a 2x2 block) around each square it visits; the border stays wall.
2. The targets and the player go on distinct random floor squares, with every box on a target: the solved
   position.
3. Reverse play: a depth-first search in random order over backward steps (`reverse_moves`), at most
   `search_depth` steps deep, keeps the position with the best score, the number of times the pulled box
   changes times the boxes' summed Manhattan distance from the targets they started on. Positions with a box
   on any target score 0, as in gym-sokoban.
4. The level is kept when its best score is positive and the solver's shortest solution has between
   `min_moves` and `search_depth` moves (replaying the pulls forwards solves it within `search_depth`, so
   the upper bound is a check); otherwise the next attempt runs.

Deliberate differences from RAGEN/ROLL:

- Attempt k for seed s draws everything from ``numpy.random.default_rng([s, k])``. RAGEN and ROLL seed the
  global `random` and `numpy.random` and retry a failed seed with ``hash(str(seed))``, which Python salts per
  process, so their retries differ between runs; ours are the same in every process.
- "Box changes" counts switches between different boxes (gym-sokoban compares the last pull's square, so it
  counts nearly every pull).
- The player is not moved at random after generation (ROLL takes up to 3 random steps).
- The solver check and `min_moves` reject levels that are solved in a few moves.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from comprl.envs.sokoban.puzzle import MOVES, Room, Square, State, reverse_moves, shifted
from comprl.envs.sokoban.solver import solve

WALK_STEPS_PER_SIDE = 1.7
"""Random-walk length of the topology step, per unit of height + width (gym-sokoban's value)."""
TURN_PROBABILITY = 0.35
"""Chance per walk step of picking a new random direction (gym-sokoban's value)."""
PATTERNS: tuple[tuple[Square, ...], ...] = (
    ((1, 0), (1, 1), (1, 2)),
    ((0, 1), (1, 1), (2, 1)),
    ((1, 0), (1, 1), (2, 1)),
    ((1, 0), (1, 1), (2, 0), (2, 1)),
    ((1, 1), (1, 2), (2, 1)),
)
"""The 3x3 patterns the walk opens, as the (row, column) cells set inside the 3x3 box (gym-sokoban's five)."""
MAX_ATTEMPTS = 200
"""Attempts per seed before giving up (in practice a handful suffice)."""


@dataclass(frozen=True)
class SokobanLevel:
    """A generated level with the shortest solution the solver found for it."""

    room: Room
    start: State
    solution: tuple[str, ...]
    """A shortest list of move words that solves the level."""
    seed: int
    attempt: int
    """Which attempt for `seed` produced the level (0 when the first one was kept)."""


def generate_level(
    seed: int, size: int = 6, num_boxes: int = 2, search_depth: int = 30, min_moves: int = 4
) -> SokobanLevel:
    """The level for `seed`: the same arguments give the same level in every process.

    Raises:
        ValueError: an argument is out of range.
        RuntimeError: no attempt in `MAX_ATTEMPTS` gave an acceptable level.
    """
    if seed < 0:
        raise ValueError(f"seed must be >= 0, got {seed}")
    if size < 4:
        raise ValueError(f"size must be >= 4 (the border is wall), got {size}")
    if not 1 <= num_boxes <= (size - 2) ** 2 - 1:
        raise ValueError(f"num_boxes must be between 1 and {(size - 2) ** 2 - 1} for size {size}, got {num_boxes}")
    if not 1 <= min_moves <= search_depth:
        raise ValueError(f"need 1 <= min_moves <= search_depth, got min_moves={min_moves}, search_depth={search_depth}")
    for attempt in range(MAX_ATTEMPTS):
        rng = np.random.default_rng([seed, attempt])
        solved = _solved_position(rng, size, num_boxes)
        if solved is None:
            continue
        room, start = solved
        puzzle = _reverse_play(rng, room, start, search_depth)
        if puzzle is None:
            continue
        solution = solve(room, puzzle, max_moves=search_depth)
        if solution is not None and len(solution) >= min_moves:
            return SokobanLevel(room, puzzle, solution, seed, attempt)
    raise RuntimeError(f"no acceptable Sokoban level for seed {seed} in {MAX_ATTEMPTS} attempts")


def _carve_floor(rng: np.random.Generator, size: int) -> frozenset[Square]:
    """Step 1: the floor squares opened by the random walk (never on the border)."""
    directions = list(MOVES.values())
    position = (int(rng.integers(1, size - 1)), int(rng.integers(1, size - 1)))
    direction = directions[rng.integers(len(directions))]
    floor: set[Square] = set()
    for _ in range(int(WALK_STEPS_PER_SIDE * (size + size))):
        if rng.random() < TURN_PROBABILITY:
            direction = directions[rng.integers(len(directions))]
        row, column = (min(max(value, 1), size - 2) for value in shifted(position, direction))
        position = (row, column)
        for cell_row, cell_column in PATTERNS[rng.integers(len(PATTERNS))]:
            floor.add((row - 1 + cell_row, column - 1 + cell_column))
    return frozenset((row, column) for row, column in floor if 0 < row < size - 1 and 0 < column < size - 1)


def _solved_position(rng: np.random.Generator, size: int, num_boxes: int) -> tuple[Room, State] | None:
    """Steps 1-2: a room and its solved position, or None when the floor is too small to hold them."""
    floor = sorted(_carve_floor(rng, size))
    if len(floor) < num_boxes + 2:
        return None
    chosen = rng.choice(len(floor), size=num_boxes + 1, replace=False)
    player, *targets = (floor[int(index)] for index in chosen)
    room = Room(size, size, frozenset(floor), frozenset(targets))
    return room, State(player, frozenset(targets))


def _reverse_play(rng: np.random.Generator, room: Room, solved: State, search_depth: int) -> State | None:
    """Step 3: the best-scoring position reached by backward steps, or None when every position scores 0."""
    best: tuple[int, State | None] = (0, None)
    visited: set[State] = set()

    def search(state: State, origins: dict[Square, Square], last_box: Square | None, changes: int, ttl: int) -> None:
        """Visit `state`; `origins` maps each box's square to the target it started on, `last_box` names the
        last pulled box by its target, `changes` counts switches between pulled boxes."""
        nonlocal best
        visited.add(state)
        if not state.boxes & room.targets:
            score = changes * sum(abs(b[0] - o[0]) + abs(b[1] - o[1]) for b, o in origins.items())
            if score > best[0]:
                best = (score, state)
        if ttl == 0:
            return
        steps = list(reverse_moves(room, state))
        for index in rng.permutation(len(steps)):
            following, pulled = steps[index]
            if following in visited:
                continue
            if pulled is None:
                search(following, origins, last_box, changes, ttl - 1)
                continue
            origin = origins[pulled]
            moved = {square: start for square, start in origins.items() if square != pulled}
            moved[state.player] = origin
            search(following, moved, origin, changes + (origin != last_box), ttl - 1)

    search(solved, {box: box for box in solved.boxes}, None, 0, search_depth)
    return best[1]
