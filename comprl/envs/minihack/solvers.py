"""A scripted MiniHack agent that reads the env's screen: a test oracle and a sanity baseline, not a learner.

`StairsSeeker` plays Room, Maze and KeyRoom the way a careful human would on a dark level, where only the
squares next to the agent are visible: once the stairs down have been seen it walks a shortest known path to
them (breadth-first search over 8-connected squares); before that it picks up a key it has seen, unlocks and
opens a closed door with it, and otherwise walks to the nearest square that borders unexplored space.

On River, where water stands between the agent and the stairs, it builds a crossing (`BridgePlanner`): it
pushes boulders into the water one at a time, each push sequence found by breadth-first search on what the
screen shows, and searches again whenever the screen differs from what the plan predicted. Water blocks
sight, so the river's next column shows up only once the first is filled.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
from nle import nethack

from comprl.envs.minihack.env import APPLY_KEY, PICK_UP, MiniHackScreen, MiniHackTextEnv
from comprl.envs.minihack.text import COMPASS_8, GLYPH_NAMES, S_STONE, is_floor

Position = tuple[int, int]

_ORTHOGONAL = frozenset({"north", "east", "south", "west"})
_CLOSED_DOOR = "closed door"
_OPEN_DOOR = "open door"
_WALKABLE_NAMES = frozenset({"stairs down", "stairs up", "doorway", _OPEN_DOOR})
_FALLBACK_MOVE = "north"
"""What the seeker plays when it knows no useful move."""


def _is_walkable(glyph: int) -> bool:
    """Floor, stairs, doorways, open doors, monsters and objects other than boulders; never traps or water."""
    name = GLYPH_NAMES[glyph]
    if is_floor(glyph) or nethack.glyph_is_monster(glyph) or name in _WALKABLE_NAMES:
        return True
    return bool(nethack.glyph_is_object(glyph)) and name != "boulder"


WALKABLE: np.ndarray = np.array([_is_walkable(glyph) for glyph in range(nethack.MAX_GLYPH)])
"""Read-only lookup table: ``WALKABLE[glyphs]`` marks the squares the seeker may step on."""
WALKABLE.flags.writeable = False
MONSTER: np.ndarray = np.array([bool(nethack.glyph_is_monster(glyph)) for glyph in range(nethack.MAX_GLYPH)])
"""Read-only lookup table of monster glyphs."""
MONSTER.flags.writeable = False


@dataclass(frozen=True)
class _View:
    """Per-square lookups of one screen."""

    names: np.ndarray
    walkable: np.ndarray
    monster: np.ndarray
    unseen: np.ndarray
    here: Position
    doors: frozenset[Position]
    """Squares known to hold a door, also while the agent stands on one and hides it."""

    @classmethod
    def of(cls, screen: MiniHackScreen, known_doors: set[Position]) -> _View:
        glyphs = screen.glyphs
        names = GLYPH_NAMES[glyphs]
        doors = _positions((names == _OPEN_DOOR) | (names == _CLOSED_DOOR))
        return cls(
            names=names,
            walkable=WALKABLE[glyphs],
            monster=MONSTER[glyphs],
            unseen=glyphs == nethack.GLYPH_CMAP_OFF + S_STONE,
            here=(screen.agent_x, screen.agent_y),
            doors=frozenset(doors | known_doors),
        )

    def inside(self, square: Position) -> bool:
        rows, columns = self.names.shape
        return 0 <= square[0] < columns and 0 <= square[1] < rows

    def find(self, name: str) -> set[Position]:
        return _positions(self.names == name)

    def neighbours(self, square: Position) -> Iterator[tuple[str, Position]]:
        for direction, dx, dy in COMPASS_8:
            neighbour = (square[0] + dx, square[1] + dy)
            if self.inside(neighbour):
                yield direction, neighbour


class StairsSeeker:
    """Explore, fetch the key and open the door if needed, walk to the stairs. One instance per episode."""

    def __init__(self) -> None:
        self._rock: set[Position] = set()
        """Never-seen squares next to a square the agent stood on: solid rock on a dark level."""
        self._key_position: Position | None = None
        self._doors: set[Position] = set()
        self._unlocked_doors: set[Position] = set()
        self._door_being_unlocked: Position | None = None
        self._bridge = BridgePlanner()

    def act(self, env: MiniHackTextEnv) -> str:
        """The next action word for the env's current screen."""
        screen = env.screen
        view = _View.of(screen, self._doors)
        self._remember(screen, view)
        stairs = view.find("stairs down")
        if stairs:
            move = _shortest_path_move(view, stairs)
            if move is not None:
                return move
        if view.find("water"):
            move = self._bridge.next_move(view, self._rock)
            if move is not None:
                return move
        if stairs:
            return _FALLBACK_MOVE
        holding_key = any("key" in item for item in screen.picked_up)
        if not holding_key and self._key_position is not None:
            if view.here == self._key_position:
                return PICK_UP
            return self._walk_towards(view, {self._key_position})
        doors = view.find(_CLOSED_DOOR)
        if holding_key and doors:
            return self._open_door(view, doors)
        frontier = {square for square in _positions(view.walkable) if self._borders_unexplored(view, square)}
        return self._walk_towards(view, frontier)

    def _remember(self, screen: MiniHackScreen, view: _View) -> None:
        """Update the rock, key and unlocked-door memories from the latest screen."""
        self._rock.update((x, y) for _, (x, y) in view.neighbours(view.here) if view.unseen[y, x])
        self._doors.update(view.doors)
        keys = view.find("skeleton key")
        if keys:
            self._key_position = min(keys)
        if self._door_being_unlocked is not None and "succeed in unlocking" in screen.message:
            self._unlocked_doors.add(self._door_being_unlocked)
        self._door_being_unlocked = None

    def _open_door(self, view: _View, doors: set[Position]) -> str:
        """Unlock an orthogonally adjacent door, walk into it to open it, or walk next to one."""
        for direction, square in view.neighbours(view.here):
            if square in doors and direction in _ORTHOGONAL:
                if square in self._unlocked_doors:
                    return direction
                self._door_being_unlocked = square
                return f"{APPLY_KEY} {direction}"
        approaches = {
            (x - dx, y - dy) for x, y in doors for direction, dx, dy in COMPASS_8 if direction in _ORTHOGONAL
        }
        return self._walk_towards(view, {square for square in approaches if view.inside(square)})

    def _borders_unexplored(self, view: _View, square: Position) -> bool:
        return any(view.unseen[y, x] and (x, y) not in self._rock for _, (x, y) in view.neighbours(square))

    def _walk_towards(self, view: _View, targets: set[Position]) -> str:
        """The first move of a shortest path to any target (around monsters if possible); "north" if none."""
        return _shortest_path_move(view, targets) or _FALLBACK_MOVE


def _shortest_path_move(view: _View, targets: set[Position]) -> str | None:
    """The first move of a shortest path to any target, around monsters if possible; None when none is known."""
    for avoid_monsters in (True, False):
        first_move = _first_move_of_shortest_path(view, targets, avoid_monsters)
        if first_move is not None:
            return first_move
    return None


def _positions(mask: np.ndarray) -> set[Position]:
    """The (x, y) squares where a screen-shaped boolean mask is True."""
    return {(int(x), int(y)) for y, x in zip(*np.nonzero(mask))}


def _legal_moves(view: _View, square: Position, avoid_monsters: bool) -> Iterator[tuple[str, Position]]:
    """Moves from `square` onto walkable squares; NetHack forbids diagonal moves into or out of doors."""
    for direction, (x, y) in view.neighbours(square):
        if direction not in _ORTHOGONAL and (square in view.doors or (x, y) in view.doors):
            continue
        if view.walkable[y, x] and not (avoid_monsters and view.monster[y, x]):
            yield direction, (x, y)


def _first_move_of_shortest_path(view: _View, targets: set[Position], avoid_monsters: bool) -> str | None:
    """Breadth-first search from the agent: the first move word towards the nearest target, or None."""
    first_moves: dict[Position, str | None] = {view.here: None}
    queue = deque([view.here])
    while queue:
        square = queue.popleft()
        for direction, neighbour in _legal_moves(view, square, avoid_monsters):
            if neighbour in first_moves:
                continue
            first_moves[neighbour] = first_moves[square] or direction
            if neighbour in targets:
                return first_moves[neighbour]
            queue.append(neighbour)
    return None


@dataclass(frozen=True)
class _PlannedStep:
    """One move of a bridge plan and the screen it should lead to."""

    direction: str
    here: Position
    """Where the agent should stand afterwards."""
    boulders: frozenset[Position]
    water: frozenset[Position]
    push_target: Position | None
    """The square the move pushes a boulder onto, if it pushes one."""
    fills: bool
    """True when the move pushes a boulder into water (assumed to fill it)."""


_OUTSIDE = -1
"""Grid index of a square outside the planning grid."""
_NOT_DIAGONAL: tuple[int, ...] = ()
"""The side squares of an orthogonal move: none to squeeze between."""


class BridgePlanner:
    """Fill water with boulders until the agent can cross; the plan is searched again when the screen surprises.

    Each plan comes from a breadth-first search over the agent's square and the position of a single pushed
    boulder (the others stand still). Pushing a boulder into water is assumed to fill it (NetHack fills a
    pool 9 times in 10). Squares never seen are assumed to be floor, except known rock, rows outside those
    seen so far, unseen squares of a column where only water has been seen, and, right after the first
    filled square, the unseen columns beside it: MiniHack's rivers are 2 or 3 squares wide, and NLE shows
    what lies beyond a filled square only a turn later.

    Before the crossing starts, a plan ends with its first fill, chosen by its length plus a rough estimate
    of bringing a second boulder through the filled square, so that the crossing is made where another
    boulder is near. Once it has started, a plan ends on a square beyond the water. A push that leaves agent
    and boulder where they were ("You try to move the boulder, but in vain.", e.g. because of a boulder
    hidden in the water) closes the square behind the boulder to boulders.
    """

    def __init__(self) -> None:
        self._plan: deque[_PlannedStep] = deque()
        self._expected: _PlannedStep | None = None
        self._closed_to_boulders: set[Position] = set()
        self._fills = 0
        """Squares of water this planner has filled so far."""

    def next_move(self, view: _View, rock: set[Position]) -> str | None:
        """The next move of the current or a new plan; None when no crossing plan exists."""
        boulders = frozenset(view.find("boulder"))
        water = frozenset(view.find("water"))
        expected, just_filled = self._expected, None
        on_plan = expected is not None and (expected.here, expected.boulders, expected.water) == (
            view.here, boulders, water
        )
        if expected is not None and expected.push_target is not None:
            if expected.fills and view.here == expected.here and expected.push_target not in water | boulders:
                self._fills += 1
                just_filled = expected.push_target
            elif boulders == expected.boulders - {expected.push_target} | {expected.here}:
                self._closed_to_boulders.add(expected.push_target)  # Neither agent nor boulder moved.
        if just_filled is not None or not (on_plan and self._plan):
            lagging = just_filled if self._fills == 1 else None
            grid = _BridgeGrid(view, rock, self._closed_to_boulders, lagging)
            self._plan = deque(grid.plan(crossing_started=self._fills > 0))
        self._expected = self._plan.popleft() if self._plan else None
        return None if self._expected is None else self._expected.direction


class _BridgeGrid:
    """The planning model of `BridgePlanner`: the seen rows, from the leftmost seen column to the rightmost,
    widened to one column beyond the water on either side; squares are numbered row by row.

    A search state is one int, ``mover * len(squares) + agent square``. The mover code tells which boulder
    the plan has pushed and where it is: 0 for none yet, else ``1 + 2 * (boulder * len(squares) + square)
    + sunk``, where `boulder` numbers the boulders of the screen and `sunk` is 1 once it filled water.
    """

    def __init__(
        self, view: _View, rock: set[Position], closed_to_boulders: set[Position], lagging: Position | None
    ) -> None:
        """`lagging` is a square just filled whose surroundings the screen does not show yet."""
        boulders = view.find("boulder")
        self.seen_water = frozenset(view.find("water"))
        seen_ys, seen_xs = np.nonzero(~view.unseen)
        beside_fill = {x for _, (x, y) in view.neighbours(lagging) if view.unseen[y, x]} if lagging else set()
        wet_columns = {x for x, _ in self.seen_water} | beside_fill
        self.left = max(0, min(int(seen_xs.min()), min(wet_columns) - 1))
        self.right = min(view.names.shape[1] - 1, max(int(seen_xs.max()), max(wet_columns) + 1))
        self.top, self.bottom = int(seen_ys.min()), int(seen_ys.max())
        self.width = self.right - self.left + 1
        self.squares = [(x, y) for y in range(self.top, self.bottom + 1) for x in range(self.left, self.right + 1)]
        river_columns = wet_columns - {x for x, y in self.squares if view.walkable[y, x]}
        self.water: list[bool] = []
        self.open: list[bool] = []
        for x, y in self.squares:
            unseen = bool(view.unseen[y, x]) and (x, y) not in rock
            is_water = (x, y) in self.seen_water or unseen and x in river_columns
            self.water.append(is_water)
            self.open.append(not is_water and ((x, y) in boulders or bool(view.walkable[y, x]) or unseen))
        self.boulder_ok = [
            (is_open or is_water) and square not in closed_to_boulders
            for square, is_open, is_water in zip(self.squares, self.open, self.water)
        ]
        """Squares a boulder may be pushed onto."""
        self.boulders = [self.index(square) for square in sorted(boulders)]
        self.boulder_at = {square: number for number, square in enumerate(self.boulders)}
        self.start = self.index(view.here)
        self.moves_from = [self._moves_from(square) for square in range(len(self.squares))]
        self.goal = self._far_side()
        self._boulder_maps: dict[int, dict[int, int]] = {}

    def index(self, square: Position) -> int:
        return (square[1] - self.top) * self.width + (square[0] - self.left)

    def _moves_from(self, square: int) -> tuple[tuple[str, int, int, tuple[int, ...]], ...]:
        """(direction, next square, the square after it, side squares of a diagonal) for moves staying inside."""
        x, y = self.squares[square]

        def inside(dx: int, dy: int) -> int:
            if self.left <= x + dx <= self.right and self.top <= y + dy <= self.bottom:
                return self.index((x + dx, y + dy))
            return _OUTSIDE

        table = []
        for direction, dx, dy in COMPASS_8:
            ahead = inside(dx, dy)
            if ahead != _OUTSIDE:
                sides = (inside(dx, 0), inside(0, dy)) if dx and dy else _NOT_DIAGONAL
                table.append((direction, ahead, inside(2 * dx, 2 * dy), sides))
        return tuple(table)

    def _far_side(self) -> list[bool]:
        """Open squares that the agent cannot reach without crossing water (boulders counted as passable)."""
        reached = {self.start}
        frontier = [self.start]
        while frontier:
            square = frontier.pop()
            for _, neighbour, _, _ in self.moves_from[square]:
                if neighbour not in reached and self.open[neighbour]:
                    reached.add(neighbour)
                    frontier.append(neighbour)
        return [is_open and square not in reached for square, is_open in enumerate(self.open)]

    def _mover(self, boulder: int, square: int, sunk: bool) -> int:
        return 1 + 2 * (boulder * len(self.squares) + square) + sunk

    def _decode(self, mover: int) -> tuple[int, int, bool]:
        """(boulder number, square, sunk) of a nonzero mover code."""
        boulder, square = divmod((mover - 1) // 2, len(self.squares))
        return boulder, square, bool((mover - 1) % 2)

    def plan(self, crossing_started: bool) -> list[_PlannedStep]:
        """The cheapest plan (see `BridgePlanner`) with the screens it predicts; [] when there is none."""
        if not any(self.goal):
            return []
        size = len(self.squares)
        parents: dict[int, tuple[int, str, int] | None] = {self.start: None}
        layer, depth = [self.start], 0
        best_cost, best_state = math.inf, None
        while layer and depth + 1 < best_cost:
            depth += 1
            following_layer = []
            for state in layer:
                mover, here = divmod(state, size)
                for direction, following_mover, ahead, push_target in self._moves(here, mover):
                    following = following_mover * size + ahead
                    if following in parents:
                        continue
                    parents[following] = (state, direction, push_target)
                    sunk = following_mover != 0 and self._decode(following_mover)[2]
                    if self.goal[ahead] and (crossing_started or not sunk):
                        cost = float(depth)
                    elif sunk and not crossing_started and push_target != _OUTSIDE:
                        cost = depth + self._second_boulder_estimate(ahead, following_mover)
                    else:
                        following_layer.append(following)
                        continue
                    if cost < best_cost:
                        best_cost, best_state = cost, following
            layer = following_layer
        return [] if best_state is None else self._unwind(best_state, parents)

    def _second_boulder_estimate(self, here: int, mover: int) -> float:
        """Moves to bring another boulder through the square just filled and step beyond it (a rough guess)."""
        sunk_boulder, filled, _ = self._decode(mover)
        others = [self.squares[square] for number, square in enumerate(self.boulders) if number != sunk_boulder]
        if not others:
            return float(len(self.squares))
        target = self.squares[filled]
        return min(_distance(self.squares[here], square) + _distance(square, target) + 2 for square in others)

    def _moves(self, here: int, mover: int) -> Iterator[tuple[str, int, int, int]]:
        """(direction, next mover code, next agent square, square a boulder is pushed onto or _OUTSIDE)."""
        boulders = self._boulders(mover)
        moved_boulder, filled = _OUTSIDE, _OUTSIDE
        if mover:
            moved_boulder, square, sunk = self._decode(mover)
            filled = square if sunk else _OUTSIDE
        for direction, ahead, beyond, sides in self.moves_from[here]:
            if not (self.open[ahead] or ahead == filled):
                continue
            if sides and all(side == _OUTSIDE or side in boulders or not self.open[side] for side in sides):
                continue  # NetHack may refuse to squeeze diagonally between two boulders or rock.
            if ahead not in boulders:
                yield direction, mover, ahead, _OUTSIDE
                continue
            number = boulders[ahead]
            if filled != _OUTSIDE or moved_boulder not in (_OUTSIDE, number):
                continue  # A plan moves a single boulder.
            if beyond == _OUTSIDE or beyond in boulders or not self.boulder_ok[beyond]:
                continue
            yield direction, self._mover(number, beyond, self.water[beyond]), ahead, beyond

    def _boulders(self, mover: int) -> dict[int, int]:
        """Boulder squares to boulder numbers, with the moved boulder where it is (gone once it sank)."""
        squares = self._boulder_maps.get(mover)
        if squares is None:
            squares = dict(self.boulder_at)
            if mover:
                boulder, square, sunk = self._decode(mover)
                del squares[self.boulders[boulder]]
                if not sunk:
                    squares[square] = boulder
            self._boulder_maps[mover] = squares
        return squares

    def _unwind(self, state: int, parents: dict[int, tuple[int, str, int] | None]) -> list[_PlannedStep]:
        """The planned steps on the search tree's path to `state`, each with the screen it predicts."""
        links = []
        link = parents[state]
        while link is not None:
            previous, direction, push_target = link
            links.append((state, direction, push_target))
            state, link = previous, parents[previous]
        steps = []
        for state, direction, push_target in reversed(links):
            mover, here = divmod(state, len(self.squares))
            sunk_square = _OUTSIDE
            if mover and self._decode(mover)[2]:
                sunk_square = self._decode(mover)[1]
            boulders = frozenset(self.squares[square] for square in self._boulders(mover))
            water = self.seen_water - ({self.squares[sunk_square]} if sunk_square != _OUTSIDE else set())
            target = None if push_target == _OUTSIDE else self.squares[push_target]
            fills = push_target != _OUTSIDE and push_target == sunk_square
            steps.append(_PlannedStep(direction, self.squares[here], boulders, water, target, fills))
        return steps


def _distance(first: Position, second: Position) -> int:
    """Moves between two squares on open ground (8-connected)."""
    return max(abs(first[0] - second[0]), abs(first[1] - second[1]))
