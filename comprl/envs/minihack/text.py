"""comprl's text views of a NetHack screen: ``view="full"`` (the default) and ``view="brief"``.

Neither is the official code's view (that is `official_view`). The full view has four parts, all derived from
NLE's `glyphs`, `chars`, `blstats` and `message` arrays:

- ``Message:`` the game's top-line message (or "none");
- ``You see:`` a language description of the surroundings in the manner of the MIT-licensed
  nle-language-wrapper that BALROG uses (written here on NLE's own glyph tables; not its exact text: the wrapper
  reports everything along its rays, words and orders things its own way): every "interesting" glyph on the
  screen (monsters, objects, stairs, doors, water, traps, ...) plus eight ray-marches from the agent that
  report the first wall or dark area in each compass direction; each thing gets a distance word and a
  16-wind direction, and things with the same name and distance word are grouped on one line, e.g.
  "stairs down near east-southeast" or "dark area adjacent north, east, and west";
- ``Map:`` NetHack's own fog-of-war map (unseen squares are blank), cropped to the bounding box of what has
  been seen instead of the full 79x21 screen, without the status lines;
- ``Legend:`` the symbols present on the cropped map, e.g. "@ you, . floor, > stairs down, | - wall".

The brief view keeps the message and the interesting things. Both are vectorised with NumPy tables built at import.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping

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
        # 23 scroll glyphs have a label and no name (NetHack's spare random labels): named by the label
        obj = nethack.objclass(nethack.glyph_to_obj(glyph))
        return nethack.OBJ_NAME(obj) or nethack.OBJ_DESCR(obj)
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


# The language view is vectorised: tables built once here classify a whole screen with one lookup each, and
# the "You see" lines are assembled from integer codes in the order the sightings are listed.
ROWS, COLUMNS = nethack.DUNGEON_SHAPE
"""The map's shape in squares (21 x 79)."""
NAMES: tuple[str, ...] = tuple(sorted(set(GLYPH_NAMES)))
"""Every glyph name, sorted: a name's index orders names as the strings do."""
_NAME_INDEX = np.searchsorted(np.array(NAMES, dtype=object), GLYPH_NAMES)
_PLURALS = tuple(pluralize(name) for name in NAMES)
_DISTANCE_WORDS = ("adjacent", "very near", "near", "far", "very far")

_CMAPS = np.array([_cmap_of(glyph) if _cmap_of(glyph) is not None else -1 for glyph in range(nethack.MAX_GLYPH)])
_DESCRIBED = ~np.isin(_CMAPS, [*_FLOOR_CMAPS, *_WALL_CMAPS, S_STONE])
"""Glyphs of the screen pass: all but floor, corridors, walls and dark area (which only the rays report)."""
_COUNTABLE = np.array(
    [bool(nethack.glyph_is_monster(glyph) or nethack.glyph_is_object(glyph)) for glyph in range(nethack.MAX_GLYPH)]
)
"""Monsters and objects, whose names take a plural when several share a line and direction."""
_THING = _NAME_INDEX * 2 + _COUNTABLE
"""A sighting's "thing" code: name index and countable."""

_FLOOR, _WALL, _DARK, _BLOCKED = range(4)
_RAY_STOP = np.where(_CMAPS == S_STONE, _DARK, np.where(np.isin(_CMAPS, list(_WALL_CMAPS)), _WALL, _BLOCKED))
_RAY_STOP[np.isin(_CMAPS, list(_FLOOR_CMAPS))] = _FLOOR
"""What a ray does at each glyph: passes over floor, reports a wall or dark area, or stops silently."""
_RAY_THING = {_WALL: NAMES.index(WALL) * 2, _DARK: NAMES.index(DARK_AREA) * 2}


def _offset_tables() -> tuple[np.ndarray, np.ndarray]:
    """For every offset (dx, dy) on the screen, at ``[dy + ROWS - 1, dx + COLUMNS - 1]``: the listing order
    ``distance * 16 + clockwise rank of the direction`` and the code ``distance word * 16 + 16-wind index``."""
    order = np.empty((2 * ROWS - 1, 2 * COLUMNS - 1), dtype=np.int64)
    word_wind = np.empty_like(order)
    for dy in range(1 - ROWS, ROWS):
        for dx in range(1 - COLUMNS, COLUMNS):
            distance, wind = max(abs(dx), abs(dy)), WINDS_16.index(wind_direction(dx, dy))
            order[dy + ROWS - 1, dx + COLUMNS - 1] = distance * 16 + (4 - wind) % 16  # clockwise from north
            word_wind[dy + ROWS - 1, dx + COLUMNS - 1] = _DISTANCE_WORDS.index(distance_word(distance)) * 16 + wind
    return order, word_wind


_ORDER, _WORD_WIND = _offset_tables()


def _ray_squares() -> tuple[np.ndarray, np.ndarray]:
    """For every agent square [y, x]: the flat screen index of each ray square (8 rays x `RAY_LENGTH` steps,
    clipped to the screen), and `_BLOCKED` where the square is off the screen (else 0)."""
    steps = np.arange(1, RAY_LENGTH + 1)
    dx = np.array([dx for _, dx, _ in COMPASS_8])[:, None] * steps
    dy = np.array([dy for _, _, dy in COMPASS_8])[:, None] * steps
    ys, xs = np.mgrid[0:ROWS, 0:COLUMNS]
    ray_x, ray_y = xs[:, :, None, None] + dx, ys[:, :, None, None] + dy
    outside = (ray_x < 0) | (ray_x >= COLUMNS) | (ray_y < 0) | (ray_y >= ROWS)
    return ray_y.clip(0, ROWS - 1) * COLUMNS + ray_x.clip(0, COLUMNS - 1), np.where(outside, _BLOCKED, 0)


_RAY_INDEX, _RAY_OFF_SCREEN = _ray_squares()
_RAY_WINDS = [WINDS_16.index(name) for name, _, _ in COMPASS_8]
_RAY_WORD_WIND = [[_DISTANCE_WORDS.index(distance_word(step + 1)) * 16 + wind for step in range(RAY_LENGTH)]
                  for wind in _RAY_WINDS]
_RAY_ORDER = [[(step + 1) * 16 + (4 - wind) % 16 for step in range(RAY_LENGTH)] for wind in _RAY_WINDS]
"""Per ray and step: the sighting's word-and-wind code and its listing order (as in `_offset_tables`)."""


def _lines(sightings: list[int]) -> list[str]:
    """Lines "<name> <distance word> <directions>" from sightings coded ``(thing * 5 + word) * 16 + wind``, in
    listing order: one line per (thing, word) in the order of its first sighting, its directions in the order of
    their first sighting; a countable name is plural when two of its sightings on the line share a direction."""
    distinct = dict.fromkeys(sightings)
    plural = set()
    if len(distinct) < len(sightings):
        plural = {code >> 4 for code, count in Counter(sightings).items() if count > 1 and (code >> 4) // 5 & 1}
    directions: dict[int, list[str]] = {}
    for code in distinct:
        directions.setdefault(code >> 4, []).append(WINDS_16[code & 15])
    lines = []
    for line, winds in directions.items():
        thing, word = divmod(line, len(_DISTANCE_WORDS))
        label = _PLURALS[thing >> 1] if line in plural else NAMES[thing >> 1]
        lines.append(f"{label} {_DISTANCE_WORDS[word]} {join_words(winds)}")
    return lines


def _interesting_lines(glyphs: np.ndarray, agent_x: int, agent_y: int) -> list[str]:
    """Lines for everything on the screen but the agent, floor, walls and dark area, listed by distance, then
    clockwise from north, then name (ties in reading order)."""
    described = _DESCRIBED[glyphs]
    described[agent_y, agent_x] = False
    ys, xs = np.nonzero(described)
    # the tables' window centred on the agent holds the codes of every screen square's offset from the agent
    window = np.s_[ROWS - 1 - agent_y : 2 * ROWS - 1 - agent_y, COLUMNS - 1 - agent_x : 2 * COLUMNS - 1 - agent_x]
    order = _ORDER[window][ys, xs]
    things = _THING[glyphs[ys, xs]]
    listing = np.argsort(order * (2 * len(NAMES)) + things, kind="stable")
    return _lines(((things * 80 + _WORD_WIND[window][ys, xs])[listing]).tolist())


def _ray_lines(glyphs: np.ndarray, agent_x: int, agent_y: int) -> tuple[list[str], list[str]]:
    """Wall lines and dark-area lines: the first square that is not floor along each of the eight compass rays
    (within `RAY_LENGTH`), when it is a wall or dark area; anything else there (reported by the screen pass) or
    the screen's edge ends the ray unreported."""
    stops = (_RAY_STOP[glyphs.ravel()[_RAY_INDEX[agent_y, agent_x]]] | _RAY_OFF_SCREEN[agent_y, agent_x]).tolist()
    hits: dict[int, list[tuple[int, int]]] = {_WALL: [], _DARK: []}
    for ray, squares in enumerate(stops):
        for step, stop in enumerate(squares):
            if stop != _FLOOR:
                if stop in hits:
                    code = (_RAY_THING[stop] * 5) * 16 + _RAY_WORD_WIND[ray][step]
                    hits[stop].append((_RAY_ORDER[ray][step], code))
                break
    return _lines([code for _, code in sorted(hits[_WALL])]), _lines([code for _, code in sorted(hits[_DARK])])


def join_words(words: list[str]) -> str:
    """English enumeration: "a", "a and b", "a, b, and c"."""
    if len(words) <= 2:
        return " and ".join(words)
    return ", ".join(words[:-1]) + f", and {words[-1]}"


def describe_surroundings(glyphs: np.ndarray, agent_x: int, agent_y: int) -> list[str]:
    """The language observation: interesting things first (nearest first), then walls, then dark area."""
    walls, dark = _ray_lines(glyphs, agent_x, agent_y)
    return _interesting_lines(glyphs, agent_x, agent_y) + walls + dark


def cropped_map(chars: np.ndarray, glyphs: np.ndarray, agent_x: int, agent_y: int) -> tuple[list[str], list[str]]:
    """The seen part of the map (right-stripped rows) and its legend entries ("<symbols> <name>").

    The crop is the bounding box of all non-blank squares. Legend entries list each distinct name once with
    all symbols that show it, "@ you" first, then in reading order of first appearance.
    """
    seen_rows, seen_columns = np.nonzero(chars != ord(" "))
    top, bottom = min(seen_rows.min(), agent_y), max(seen_rows.max(), agent_y)
    left, right = min(seen_columns.min(), agent_x), max(seen_columns.max(), agent_x)
    crop = chars[top : bottom + 1, left : right + 1]
    lines = [row.tobytes().decode("latin-1").rstrip() for row in crop.astype(np.uint8)]
    shown = crop != ord(" ")
    shown[agent_y - top, agent_x - left] = False
    pairs = _NAME_INDEX[glyphs[top : bottom + 1, left : right + 1][shown]] * 256 + crop[shown]
    symbols_by_name: dict[str, list[str]] = {YOU: ["@"]}
    for pair in dict.fromkeys(pairs.tolist()):  # distinct (name, symbol) pairs in reading order of first square
        symbols_by_name.setdefault(NAMES[pair >> 8], []).append(chr(pair & 255))
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
        _interesting_lines(glyphs, agent_x, agent_y) if brief else describe_surroundings(glyphs, agent_x, agent_y)
    )
    parts = [f"Message: {message or 'none'}", "You see:" if surroundings else "You see: nothing"]
    parts += [*surroundings, *extra_lines]
    if not brief:
        map_lines, legend = cropped_map(chars, glyphs, agent_x, agent_y)
        parts += ["Map:", *map_lines, "Legend: " + ", ".join(legend)]
    return "\n".join(parts)
