"""A scripted MiniHack agent that reads the env's screen: a test oracle and a sanity baseline, not a learner.

`StairsSeeker` plays Room, Maze and KeyRoom the way a careful human would on a dark level, where only the
squares next to the agent are visible: once the stairs down have been seen it walks a shortest known path to
them (breadth-first search over 8-connected squares); before that it picks up a key it has seen, unlocks and
opens a closed door with it, and otherwise walks to the nearest square that borders unexplored space.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
from nle import nethack

from comprl.envs.minihack import APPLY_KEY, PICK_UP, MiniHackScreen, MiniHackTextEnv
from comprl.envs.minihack_text import COMPASS_8, GLYPH_NAMES, S_STONE, is_floor

Position = tuple[int, int]

_ORTHOGONAL = frozenset({"north", "east", "south", "west"})
_CLOSED_DOOR = "closed door"
_OPEN_DOOR = "open door"
_WALKABLE_NAMES = frozenset({"stairs down", "stairs up", "doorway", _OPEN_DOOR})


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

    def act(self, env: MiniHackTextEnv) -> str:
        """The next action word for the env's current screen."""
        screen = env.screen
        view = _View.of(screen, self._doors)
        self._remember(screen, view)
        stairs = view.find("stairs down")
        if stairs:
            return self._walk_towards(view, stairs)
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
        for avoid_monsters in (True, False):
            first_move = _first_move_of_shortest_path(view, targets, avoid_monsters)
            if first_move is not None:
                return first_move
        return "north"


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
