"""The official code's MiniHack text view (``view="official"``, the paper profile's).

What the official env (pUmpKin-Co/ComplementaryRL, ``roll/pipeline/agentic/env/minihack/env.py``, method
``_obs_to_text``) shows its actor, rebuilt from that code's behaviour on the NLE observation of one step. Which
parts appear depends only on which NLE observation keys the official task config requests
(``examples/singletask-agentic/multitask_env.yaml``); a part is written when its key is in the observation:

- ``message``: ``Message: <text>``, left out when the message is empty;
- ``blstats``: ``Position: (b[20], b[21])`` and ``Health: b[24]/b[25]`` (``b[25]`` replaced by ``max(b[24], 1)``
  when it is <= 0). The official code takes indices 20, 21, 24, 25 for x, y, hp and max hp, but in NLE they
  are game time, hunger state, level number and condition mask (x, y, hp, max hp are 0, 1, 10, 11); this view
  reproduces the official numbers as they are. Only the official MazeWalk config requests ``blstats``;
- ``chars_crop``: an empty line, ``Dungeon view:`` and MiniHack's 9x9 crop centred on the agent, 9 characters
  per row (NUL shown as a space), left out when the crop is all blank;
- always: the line ``The meaning of common symbols in the dungeon view is (same symbol may have different
  descriptions):`` then, when ``screen_descriptions`` is requested, one line ``<symbol>: [<descriptions>]`` per
  symbol (Python's list notation, descriptions sorted) in reading order of the symbol's first square. The
  official code pairs the descriptions with the grid of their own shape, the full 21x79 ``chars``, so the
  symbols are those of the whole remembered map, not only of the 9x9 crop; each part ends with a newline;
- ``inv_strs``: an empty line, ``Inventory:`` and one line per inventory item.

The parts are joined with newlines. The official step appends its action list to this text; comprl's env lists
its actions in the instruction and its action prompt instead, and writes its own text when an episode ends. The
view reads the arrays of the observation comprl's env ends its step on, NLE's message line included as it is, so
comprl's own notes (e.g. "You are not carrying a key.") and its removal of NLE's missing-rumors-file complaint
do not show in it.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

OFFICIAL_KEYS_ROOM: tuple[str, ...] = ("message", "chars_crop", "chars", "screen_descriptions")
"""The view's keys the official Room-Ultimate config requests (``glyphs, message, chars_crop, glyphs_crop,
screen_descriptions``; the env adds ``chars`` itself)."""
OFFICIAL_KEYS_MAZE: tuple[str, ...] = ("message", "blstats", "chars_crop", "chars", "inv_strs")
"""The view's keys the official MazeWalk config requests (``glyphs, blstats, message, inv_strs, chars_crop,
glyphs_crop``; the env adds ``chars``): no ``screen_descriptions``, so no symbol meanings."""

SYMBOLS_HEADER = (
    "The meaning of common symbols in the dungeon view is (same symbol may have different descriptions):\n"
)


def _text(row: bytes, errors: str) -> str:
    """A NUL-padded byte row as the official code decodes it: UTF-8, trailing NULs and then blanks removed."""
    return row.decode("utf-8", errors=errors).rstrip("\x00").strip()


def _rows(array: np.ndarray) -> list[bytes]:
    """The rows of a 2-D byte array as bytes, trailing NULs dropped (NumPy's fixed-width bytes do that)."""
    return np.ascontiguousarray(array).view(f"S{array.shape[-1]}").ravel().tolist()


def _blank(chars: np.ndarray) -> np.ndarray:
    """Squares shown as a space: NUL or blank."""
    return (chars == 0) | (chars == ord(" "))


def _grid(chars: np.ndarray) -> str:
    """A character grid with NUL and blank shown as a space, rows joined by newlines ("" when all blank)."""
    blank = _blank(chars)
    if blank.all():
        return ""
    shown = np.where(blank, ord(" "), chars).astype(np.uint8)
    return "\n".join(row.tobytes().decode("latin-1") for row in shown)


def _symbol_meanings(chars: np.ndarray, descriptions: np.ndarray) -> str:
    """``<symbol>: [<descriptions>]`` lines for every non-blank square of `chars` that has a description."""
    shown = ~_blank(chars)
    meanings: dict[str, set[str]] = {}
    for symbol, row in dict.fromkeys(zip(chars[shown].tolist(), _rows(descriptions[shown]))):
        description = _text(row, errors="replace")
        if description:
            meanings.setdefault(chr(symbol), set()).add(description)
    return "".join(f"{symbol}: {sorted(names)}\n" for symbol, names in meanings.items())


def official_text(observation: Mapping[str, np.ndarray]) -> str:
    """The official env's text for an NLE observation holding exactly the keys its task config requests."""
    parts = []
    message = _text(bytes(observation["message"]), errors="ignore") if "message" in observation else ""
    if message:
        parts.append(f"Message: {message}")
    if "blstats" in observation:
        shown_x, shown_y, shown_hp, shown_max = (int(observation["blstats"][index]) for index in (20, 21, 24, 25))
        shown_max = shown_max if shown_max > 0 else max(shown_hp, 1)
        parts += [f"Position: ({shown_x}, {shown_y})", f"Health: {shown_hp}/{shown_max}"]
    grid = _grid(observation["chars_crop"]) if "chars_crop" in observation else ""
    if grid.strip():
        parts += ["\nDungeon view:", grid]
    meanings = (
        _symbol_meanings(observation["chars"], observation["screen_descriptions"])
        if "screen_descriptions" in observation and "chars" in observation
        else ""
    )
    parts.append(SYMBOLS_HEADER + meanings)
    if "inv_strs" in observation:
        items = [item for item in (_text(row, errors="ignore") for row in _rows(observation["inv_strs"])) if item]
        if items:
            parts.append("\nInventory:\n" + "\n".join(items))
    return "\n".join(parts)
