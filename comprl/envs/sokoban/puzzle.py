"""The rules of Sokoban, independent of any text or generator: a room, a position of player and boxes, moves.

A level is a rectangular grid whose border is wall (the 6x6 rooms of RAGEN/ROLL include that border, leaving
a 4x4 interior at most). The player moves one square up, down, left or right; walking into a box pushes it
one square further when that square is open floor without a box; otherwise nothing moves. The puzzle is
solved when every box stands on a target. Squares are (row, column) pairs, row 0 at the top.

The generator plays the game backwards: `pull` is the inverse of a push, so any position reached from a
solved one by pulls can be solved by replaying those moves forwards.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType

Square = tuple[int, int]
"""(row, column), row 0 at the top."""

MOVES: Mapping[str, Square] = MappingProxyType({"up": (-1, 0), "down": (1, 0), "left": (0, -1), "right": (0, 1)})
"""The four move words and their (row, column) offsets."""


def shifted(square: Square, offset: Square, times: int = 1) -> Square:
    """`square` moved `times` steps by `offset`."""
    return square[0] + times * offset[0], square[1] + times * offset[1]


@dataclass(frozen=True)
class Room:
    """The fixed part of a level: grid size, open floor and targets."""

    height: int
    width: int
    floor: frozenset[Square]
    """Every square that is not wall (targets included)."""
    targets: frozenset[Square]

    def __post_init__(self) -> None:
        if not self.targets <= self.floor:
            raise ValueError(f"targets {sorted(self.targets - self.floor)} are not on the room's floor")


@dataclass(frozen=True)
class State:
    """The moving part of a level: where the player and the boxes are."""

    player: Square
    boxes: frozenset[Square]

    def is_solved(self, room: Room) -> bool:
        """True when every box stands on a target."""
        return self.boxes <= room.targets


def push_or_move(room: Room, state: State, move: str) -> State | None:
    """The state after playing `move` (a key of `MOVES`), or None when a wall or a blocked box stops it."""
    offset = MOVES[move]
    ahead = shifted(state.player, offset)
    if ahead not in room.floor:
        return None
    if ahead not in state.boxes:
        return State(ahead, state.boxes)
    beyond = shifted(ahead, offset)
    if beyond not in room.floor or beyond in state.boxes:
        return None
    return State(ahead, (state.boxes - {ahead}) | {beyond})


def reverse_moves(room: Room, state: State) -> Iterator[tuple[State, Square | None]]:
    """Every state a backward step leads to, with the box square pulled from (None for a plain step back).

    Undoing a move walks the player the opposite way; undoing a push also drags the box that is now just
    ahead of the player (on the side opposite to the step) into the square the player leaves.
    """
    for offset in MOVES.values():
        back = shifted(state.player, offset, -1)
        if back not in room.floor or back in state.boxes:
            continue
        yield State(back, state.boxes), None
        box = shifted(state.player, offset)
        if box in state.boxes:
            yield State(back, (state.boxes - {box}) | {state.player}), box
