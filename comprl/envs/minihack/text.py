"""Compact text view of a NetHack screen for a small language model.

The view has four parts, all derived from NLE's `glyphs`, `chars`, `blstats` and `message` arrays:

- ``Message:`` the game's top-line message (or "none");
- ``You see:`` a language description of the surroundings, following the algorithm of the MIT-licensed
  nle-language-wrapper (re-implemented here on NLE's own glyph tables): every "interesting" glyph on the
  screen (monsters, objects, stairs, doors, water, traps, ...) plus eight ray-marches from the agent that
  report the first wall or dark area in each compass direction; each thing gets a distance word and a
  16-wind direction, and things with the same name and distance word are grouped on one line, e.g.
  "stairs down near east-southeast" or "dark area adjacent north, east, and west";
- ``Map:`` NetHack's own fog-of-war map (unseen squares are blank), cropped to the bounding box of what has
  been seen instead of the full 79x21 screen, without the status lines;
- ``Legend:`` the symbols present on the cropped map, e.g. "@ you, . floor, > stairs down, | - wall".
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np
from nle import nethack

# NetHack 3.6 screen-symbol (cmap) indices used below (the `S_*` enum of display.h; nle 1.3.0 ships 3.6.6).
S_STONE = 0
"""Solid rock or never-seen squares; NetHack 3.6 explains it as "dark part of a room"."""
S_ROOM = 19
S_DARKROOM = 20
"""A remembered floor square that is not currently lit."""
S_CORR = 21
S_LITCORR = 22
_FLOOR_CMAPS = frozenset({S_ROOM, S_DARKROOM, S_CORR, S_LITCORR})
_WALL_CMAPS = frozenset(
    cmap for cmap in range(nethack.MAXPCHARS) if nethack.symdef.from_idx(cmap).explanation == "wall"
)

CMAP_RENAMES: Mapping[int, str] = {
    S_STONE: "dark area",
    S_ROOM: "floor",
    S_DARKROOM: "floor",
    S_CORR: "corridor",
    S_LITCORR: "corridor",
    23: "stairs up",
    24: "stairs down",
}
"""Shorter or clearer names for some cmap entries than NetHack's own explanations."""

DARK_AREA = "dark area"
WALL = "wall"
YOU = "you"

RAY_LENGTH = 9
"""Squares a wall/dark-area ray travels before giving up (as in nle-language-wrapper)."""

COMPASS_8: tuple[tuple[str, int, int], ...] = (
    ("north", 0, -1),
    ("northeast", 1, -1),
    ("east", 1, 0),
    ("southeast", 1, 1),
    ("south", 0, 1),
    ("southwest", -1, 1),
    ("west", -1, 0),
    ("northwest", -1, -1),
)
"""The eight move directions as (name, dx, dy), with y growing southwards as on the screen."""

WINDS_16: tuple[str, ...] = (
    "east",
    "east-northeast",
    "northeast",
    "north-northeast",
    "north",
    "north-northwest",
    "northwest",
    "west-northwest",
    "west",
    "west-southwest",
    "southwest",
    "south-southwest",
    "south",
    "south-southeast",
    "southeast",
    "east-southeast",
)
"""The 16-wind compass, counter-clockwise from east in steps of 22.5 degrees."""

_WIND_ORDER: Mapping[str, int] = {name: rank for rank, name in enumerate(WINDS_16[4::-1] + WINDS_16[:4:-1])}
"""Clockwise from north: the order in which directions are listed inside one description line."""


def glyph_name(glyph: int) -> str:
    """The English name of what a glyph shows, from NLE's monster, object and screen-symbol tables."""
    if nethack.glyph_is_monster(glyph):
        name = nethack.permonst(nethack.glyph_to_mon(glyph)).mname
        return f"tame {name}" if nethack.glyph_is_pet(glyph) else name
    if nethack.glyph_is_invisible(glyph):
        return "unseen monster"
    if nethack.glyph_is_statue(glyph):
        return f"{nethack.permonst(glyph - nethack.GLYPH_STATUE_OFF).mname} statue"
    if nethack.glyph_is_body(glyph):
        return f"{nethack.permonst(glyph - nethack.GLYPH_BODY_OFF).mname} corpse"
    if nethack.glyph_is_normal_object(glyph):
        return nethack.OBJ_NAME(nethack.objclass(nethack.glyph_to_obj(glyph)))
    if nethack.glyph_is_cmap(glyph):
        cmap = nethack.glyph_to_cmap(glyph)
        return CMAP_RENAMES.get(cmap) or nethack.symdef.from_idx(cmap).explanation or "unknown"
    if nethack.glyph_is_warning(glyph):
        return "warning"
    if nethack.glyph_is_swallow(glyph):
        return "inside of a monster"
    return "unknown"


GLYPH_NAMES: np.ndarray = np.array([glyph_name(glyph) for glyph in range(nethack.MAX_GLYPH)], dtype=object)
"""`glyph_name` of every glyph id, read-only: ``GLYPH_NAMES[glyphs]`` names a whole screen."""
GLYPH_NAMES.flags.writeable = False


def _cmap_of(glyph: int) -> int | None:
    """The cmap index of a plain screen-symbol glyph, else None (monsters, objects, ...)."""
    return nethack.glyph_to_cmap(glyph) if nethack.glyph_is_cmap(glyph) else None


def is_wall(glyph: int) -> bool:
    """True for any wall segment."""
    return _cmap_of(glyph) in _WALL_CMAPS


def is_dark_area(glyph: int) -> bool:
    """True for solid rock or a square never seen."""
    return _cmap_of(glyph) == S_STONE


def is_floor(glyph: int) -> bool:
    """True for plain room floor (lit or remembered) and corridors: nothing worth describing."""
    return _cmap_of(glyph) in _FLOOR_CMAPS


def distance_word(distance: int) -> str:
    """nle-language-wrapper's distance scale for a distance in moves (Chebyshev distance)."""
    if distance <= 1:
        return "adjacent"
    if distance == 2:
        return "very near"
    if distance <= 5:
        return "near"
    if distance <= 19:
        return "far"
    return "very far"


def wind_direction(dx: int, dy: int) -> str:
    """The 16-wind direction of the offset (dx, dy) on the screen (y grows southwards)."""
    angle = math.degrees(math.atan2(-dy, dx))
    return WINDS_16[round(angle / 22.5) % 16]


def pluralize(name: str) -> str:
    """A simple English plural for thing names ("boulder" -> "boulders")."""
    if name.endswith(("s", "x", "z", "ch", "sh")):
        return f"{name}es"
    if name.endswith("y") and name[-2:-1] not in ("a", "e", "i", "o", "u"):
        return f"{name[:-1]}ies"
    return f"{name}s"


@dataclass(frozen=True)
class Sighting:
    """One thing the agent can see: its name, distance in moves and 16-wind direction."""

    name: str
    distance: int
    direction: str
    countable: bool = False
    """True for monsters and objects, whose names take a plural when several share a line and direction."""


def _interesting_sightings(glyphs: np.ndarray, agent_x: int, agent_y: int) -> list[Sighting]:
    """Everything on the screen except the agent, floor, walls and dark area."""
    sightings = []
    for y, x in zip(*np.nonzero(glyphs != nethack.GLYPH_CMAP_OFF + S_STONE)):
        glyph = int(glyphs[y, x])
        if (x, y) == (agent_x, agent_y) or is_floor(glyph) or is_wall(glyph):
            continue
        dx, dy = int(x) - agent_x, int(y) - agent_y
        countable = bool(nethack.glyph_is_monster(glyph) or nethack.glyph_is_object(glyph))
        distance = max(abs(dx), abs(dy))
        sightings.append(Sighting(GLYPH_NAMES[glyph], distance, wind_direction(dx, dy), countable))
    return sightings


def _ray_sightings(glyphs: np.ndarray, agent_x: int, agent_y: int) -> list[Sighting]:
    """The first wall or dark area along each of the eight compass rays, if within `RAY_LENGTH`."""
    rows, columns = glyphs.shape
    sightings = []
    for direction, dx, dy in COMPASS_8:
        for step in range(1, RAY_LENGTH + 1):
            x, y = agent_x + dx * step, agent_y + dy * step
            if not (0 <= x < columns and 0 <= y < rows):
                break
            glyph = int(glyphs[y, x])
            if is_wall(glyph) or is_dark_area(glyph):
                sightings.append(Sighting(WALL if is_wall(glyph) else DARK_AREA, step, direction))
                break
            if not is_floor(glyph):
                break  # Something interesting blocks the ray; the screen pass already reports it.
    return sightings


def _group_lines(sightings: Iterable[Sighting]) -> list[str]:
    """One line per (name, distance word): "<name> <distance word> <dir>, <dir>, and <dir>"."""
    ordered = sorted(sightings, key=lambda s: (s.distance, _WIND_ORDER[s.direction], s.name))
    groups: dict[tuple[str, str, bool], dict[str, int]] = {}
    for sighting in ordered:
        key = (sighting.name, distance_word(sighting.distance), sighting.countable)
        directions = groups.setdefault(key, {})
        directions[sighting.direction] = directions.get(sighting.direction, 0) + 1
    lines = []
    for (name, word, countable), directions in groups.items():
        label = pluralize(name) if countable and max(directions.values()) > 1 else name
        lines.append(f"{label} {word} {join_words(list(directions))}")
    return lines


def join_words(words: list[str]) -> str:
    """English enumeration: "a", "a and b", "a, b, and c"."""
    if len(words) <= 2:
        return " and ".join(words)
    return ", ".join(words[:-1]) + f", and {words[-1]}"


def describe_surroundings(glyphs: np.ndarray, agent_x: int, agent_y: int) -> list[str]:
    """The language observation: interesting things first (nearest first), then walls, then dark area."""
    interesting = _group_lines(_interesting_sightings(glyphs, agent_x, agent_y))
    rays = _ray_sightings(glyphs, agent_x, agent_y)
    walls = _group_lines(s for s in rays if s.name == WALL)
    dark = _group_lines(s for s in rays if s.name == DARK_AREA)
    return interesting + walls + dark


def cropped_map(chars: np.ndarray, glyphs: np.ndarray, agent_x: int, agent_y: int) -> tuple[list[str], list[str]]:
    """The seen part of the map (right-stripped rows) and its legend entries ("<symbols> <name>").

    The crop is the bounding box of all non-blank squares. Legend entries list each distinct name once with
    all symbols that show it, "@ you" first, then in reading order of first appearance.
    """
    seen_rows, seen_columns = np.nonzero(chars != ord(" "))
    top, bottom = min(seen_rows.min(), agent_y), max(seen_rows.max(), agent_y)
    left, right = min(seen_columns.min(), agent_x), max(seen_columns.max(), agent_x)
    symbols_by_name: dict[str, list[str]] = {YOU: ["@"]}
    lines = []
    for y in range(top, bottom + 1):
        row = []
        for x in range(left, right + 1):
            symbol = chr(int(chars[y, x]))
            row.append(symbol)
            if symbol == " " or (x, y) == (agent_x, agent_y):
                continue
            symbols = symbols_by_name.setdefault(GLYPH_NAMES[glyphs[y, x]], [])
            if symbol not in symbols:
                symbols.append(symbol)
        lines.append("".join(row).rstrip())
    legend = [f"{' '.join(symbols)} {name}" for name, symbols in symbols_by_name.items()]
    return lines, legend


def message_text(message: np.ndarray) -> str:
    """NetHack's top-line message as text ("" when there is none)."""
    return bytes(message).split(b"\0", 1)[0].decode("ascii", errors="ignore").strip()


def render_screen(
    glyphs: np.ndarray,
    chars: np.ndarray,
    agent_x: int,
    agent_y: int,
    message: str,
    extra_lines: Iterable[str] = (),
    brief: bool = False,
) -> str:
    """The text observation: message, surroundings, `extra_lines` (e.g. inventory), map and legend.

    ``brief`` keeps the message, the interesting things in view and `extra_lines`, and drops the walls and dark
    area in view, the map and the legend (comprl's short view; the full one is BALROG's)."""
    surroundings = (
        _group_lines(_interesting_sightings(glyphs, agent_x, agent_y))
        if brief
        else describe_surroundings(glyphs, agent_x, agent_y)
    )
    parts = [f"Message: {message or 'none'}", "You see:" if surroundings else "You see: nothing"]
    parts += [*surroundings, *extra_lines]
    if not brief:
        map_lines, legend = cropped_map(chars, glyphs, agent_x, agent_y)
        parts += ["Map:", *map_lines, "Legend: " + ", ".join(legend)]
    return "\n".join(parts)
