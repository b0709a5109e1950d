"""comprl/Room-Dark-Fixed-5x5-v0: a dark 5x5 room whose stairs down always stand in its south-east corner (issue 68).

A check of comprl's machinery, not a task of the paper. MiniHack's own Room tasks draw the stairs anew per seed, so
nothing one episode learns about them helps the next. Here the stairs stand on the same square for every seed
(training and held-out alike), in a corner, where a random walk seldom ends up within a few moves (`TURN_CAP`),
while the player starts on a square the game draws per seed (never the stairs). The room is dark: as in MiniHack's
dark rooms the player sees only the squares next to it, so no observation shows the stairs before they are adjacent,
and the instruction does not say where they are. "The stairs are in the south-east corner" is thus knowledge that
persists across episodes, is absent from the first observation and fits in a lesson the actor can copy.

This module holds what needs no game: the fixed square, the turn cap, `states_secret` (the check that a lesson
states the corner) and `CornerWalker` (a scripted player that knows it). It is imported with `comprl.envs`, so it
imports neither nle nor minihack. The env itself is `comprl.envs.minihack.env.MiniHackTextEnv` with task
``"room-dark-fixed"``, registered as ``comprl/Room-Dark-Fixed-5x5-v0``.
"""

from __future__ import annotations

import re

ROOM_SIZE = 5
"""Width and height of the room in squares (as MiniHack's Room-5x5 tasks)."""

FIXED_STAIRS: tuple[int, int] = (ROOM_SIZE - 1, ROOM_SIZE - 1)
"""The stairs' square in room coordinates (x eastwards, y southwards, (0, 0) the north-west corner): the
south-east corner, for every seed."""

STAIRS_CORNER = "southeast"
"""The compass word of the stairs' corner (also the move that leads towards it from anywhere in the room)."""

TURN_CAP = 10
"""comprl's turn cap for this room, chosen so that a random mover rarely wins and a player who knows the corner
always does. Measured on 500 held-out seeds (``benchmarks/hidden_room.py``): a uniformly random mover wins 0.10
(``random_policy_success`` 0.094), the exploring `StairsSeeker` 0.79, `CornerWalker` 1.00 (it needs at most 6
moves), always moving south-east 0.18."""

ROOM_ORIGIN_ON_SCREEN: tuple[int, int] = (36, 9)
"""Screen square (x, y) of the room's north-west corner: MiniHack centres the 5x5 map on NetHack's 79x21 screen
(measured: the player's start squares over 100 seeds cover x 36-40, y 9-13)."""

_CORNER_SPELLINGS: dict[str, tuple[str, ...]] = {
    "southeast": (r"south[- ]?east", r"bottom[- ]right", r"lower[- ]right", r"se"),
    "southwest": (r"south[- ]?west", r"bottom[- ]left", r"lower[- ]left", r"sw"),
    "northeast": (r"north[- ]?east", r"top[- ]right", r"upper[- ]right", r"ne"),
    "northwest": (r"north[- ]?west", r"top[- ]left", r"upper[- ]left", r"nw"),
}
"""How a lesson may name each corner of the room: its compass word (joined, hyphenated or as two words), its
screen words, or the move abbreviation the MiniHack envs accept."""

# A spelling counts only as a word of its own: not inside a longer word, and not as the second half of a 16-wind
# word ("east-southeast" and "south-southeast", which the observations use for things two or more squares away, name
# no corner).
_CORNER_PATTERNS: dict[str, re.Pattern[str]] = {
    corner: re.compile(r"(?<![a-z-])(?:" + "|".join(spellings) + r")(?![a-z])")
    for corner, spellings in _CORNER_SPELLINGS.items()
}


def named_corners(text: str) -> frozenset[str]:
    """The corners (their compass words) that `text` names, in any letter case; see `_CORNER_SPELLINGS`."""
    lowered = text.lower()
    return frozenset(corner for corner, pattern in _CORNER_PATTERNS.items() if pattern.search(lowered))


def states_secret(seed: int, text: str) -> bool:
    """Whether lesson `text` states where the stairs are: it names the south-east corner ("south-east",
    "southeast", "south east", "bottom right", "lower right" or "SE", in any case) and no other corner. A lesson
    that names two corners does not say which one holds the stairs. "East" or "south" alone names no corner. The
    stairs' square is the same for every seed, so `seed` (the argument every check of
    `comprl.envs.SECRET_CHECKS` takes) changes nothing."""
    return named_corners(text) == {STAIRS_CORNER}


_STAIRS_ADJACENT = re.compile(r"^stairs down adjacent (\w+)$", re.MULTILINE)
"""The line of the "brief" and "full" views that shows the stairs on a square next to the player."""
_BLOCKED = "It's solid stone."
"""NetHack's message after a move into the rock around the room: the player stands at its edge."""
_LEGS = (STAIRS_CORNER, "east", "south")
"""The corner walker's moves in turn: towards the corner, then along the bottom edge, then down the east edge."""


class CornerWalker:
    """A player that knows the stairs' corner and reads only the text the actor reads: it steps onto the stairs
    once a "stairs down adjacent <direction>" line shows them, and otherwise walks south-east until the rock stops
    it, then east, then south. From any start it needs at most 6 moves (the north-east corner: south-east and east
    blocked, 3 moves south, one onto the stairs). One instance per episode; a reference for what a lesson naming the
    corner is worth, not a learner."""

    def __init__(self) -> None:
        self._leg = 0

    def act(self, observation: str) -> str:
        """The move for `observation` (the env's text after the last move, or after reset)."""
        stairs = _STAIRS_ADJACENT.search(observation)
        if stairs:
            return stairs.group(1)
        if _BLOCKED in observation and self._leg < len(_LEGS) - 1:
            self._leg += 1
        return _LEGS[self._leg]
