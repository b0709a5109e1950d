"""Procedural ALFWorld-style household scenes and goals for `comprl.envs.alfworld.env`.

A *floorplan* fixes a room type and its receptacles ("cabinet 1" ... "fridge 1"); a *scene* places numbered
objects ("mug 1", "mug 2") on a floorplan's receptacles and sets one goal of a task type. Everything is drawn
from numpy generators seeded with fixed integer tuples, so scenes are the same in every process.

Splits. The training split has `TRAIN_SIZE` (1,466) scenes and the evaluation split `EVAL_SIZE` (134), with
exactly the task-type counts of the official ALFWorld goal lists (`TRAIN_TASK_COUNTS`, `EVAL_TASK_COUNTS`).
Each room type has `FLOORPLANS_PER_ROOM` floorplans; training scenes use only floorplans outside
`EVAL_FLOORPLANS` and evaluation scenes only those inside it. So the evaluation split is out of distribution
the way ALFWorld's ``valid_unseen`` is: its room layouts (receptacle sets and numbering) never occur in
training, while the object and receptacle vocabularies are shared.

Goals are solvable by construction: the goal object (two of them for pick_two_obj_and_place) sits in an
existing receptacle, the target receptacle type and the appliance the task needs (microwave, fridge, a basin,
a desk lamp) exist, and no goal object starts in a receptacle of the target type.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from types import MappingProxyType

import numpy as np

TASK_TYPES: tuple[str, ...] = (
    "pick_and_place_simple",
    "pick_two_obj_and_place",
    "pick_clean_then_place",
    "pick_heat_then_place",
    "pick_cool_then_place",
    "look_at_obj_in_light",
)
"""ALFWorld's six task types (short names; the official directories add ``_in_recep`` to three of them)."""

TRAIN_TASK_COUNTS = MappingProxyType(
    {
        "pick_and_place_simple": 322,
        "pick_two_obj_and_place": 354,
        "pick_clean_then_place": 269,
        "pick_cool_then_place": 212,
        "pick_heat_then_place": 186,
        "look_at_obj_in_light": 123,
    }
)
"""Training scenes per task type (ALFWorld's 1,466 training goals)."""

EVAL_TASK_COUNTS = MappingProxyType(
    {
        "pick_clean_then_place": 31,
        "pick_heat_then_place": 23,
        "pick_and_place_simple": 24,
        "pick_cool_then_place": 21,
        "look_at_obj_in_light": 18,
        "pick_two_obj_and_place": 17,
    }
)
"""Evaluation scenes per task type (ALFWorld's 134 out-of-distribution goals)."""

TRAIN_SIZE = sum(TRAIN_TASK_COUNTS.values())
EVAL_SIZE = sum(EVAL_TASK_COUNTS.values())
SPLITS = ("train", "eval")

ROOMS: tuple[str, ...] = ("kitchen", "bathroom", "bedroom", "living room")
FLOORPLANS_PER_ROOM = 30
EVAL_FLOORPLANS: frozenset[int] = frozenset({10, 19, 28})
"""Floorplan numbers (1..30, per room type) held out for the evaluation split."""

LAMP = "desklamp"
"""The light for look_at_obj_in_light: a fixed object (never taken) standing on a desk, side table or dresser."""
LAMP_HOSTS: tuple[str, ...] = ("desk", "sidetable", "dresser")

_SEED_TAG = 0xA1F0
"""First word of every generator seed in this module, so its streams differ from other comprl modules'."""


@dataclass(frozen=True)
class ReceptacleType:
    """A kind of receptacle: whether it opens and closes, and the preposition goals use with it."""

    name: str
    openable: bool
    preposition: str


@dataclass(frozen=True)
class ObjectType:
    """A kind of portable object: the rooms it occurs in, where it may lie, and what can be done to it."""

    name: str
    rooms: frozenset[str]
    places: tuple[str, ...]
    cleanable: bool
    heatable: bool
    coolable: bool


def _receptacles(spec: str) -> dict[str, ReceptacleType]:
    kinds = {}
    for entry in spec.split():
        name, flags = entry.split(":")
        kinds[name] = ReceptacleType(name, openable="o" in flags, preposition="in" if "i" in flags else "on")
    return kinds


RECEPTACLE_TYPES = MappingProxyType(
    _receptacles(
        "cabinet:oi drawer:oi fridge:oi microwave:oi safe:oi countertop:n diningtable:n coffeemachine:i "
        "sinkbasin:i bathtubbasin:i stoveburner:n garbagecan:i shelf:n sidetable:n desk:n dresser:n bed:n "
        "sofa:n armchair:n coffeetable:n tvstand:n toilet:n towelholder:n handtowelholder:n "
        "toiletpaperhanger:n laundryhamper:i"
    )
)
"""Receptacle types by name; flags: ``o`` openable, ``i`` goals say "in" (else "on")."""

_K, _BA, _BE, _L = ("kitchen",), ("bathroom",), ("bedroom",), ("living room",)


def _object(name: str, rooms: tuple[str, ...], places: str, skills: str = "") -> ObjectType:
    return ObjectType(
        name, frozenset(rooms), tuple(places.split()), cleanable="w" in skills, heatable="h" in skills,
        coolable="c" in skills,
    )


_KITCHEN_FOOD = "countertop diningtable fridge microwave sinkbasin garbagecan"
_KITCHEN_DISH = "countertop diningtable cabinet fridge microwave shelf sinkbasin"
_CUTLERY = "countertop diningtable drawer sinkbasin"
_DESK_SMALL = "desk sidetable dresser shelf drawer coffeetable"

OBJECT_TYPES = MappingProxyType(
    {
        kind.name: kind
        for kind in (
            _object("apple", _K, _KITCHEN_FOOD, "whc"),
            _object("tomato", _K, _KITCHEN_FOOD, "whc"),
            _object("potato", _K, _KITCHEN_FOOD, "whc"),
            _object("egg", _K, _KITCHEN_FOOD, "whc"),
            _object("bread", _K, "countertop diningtable fridge microwave cabinet", "hc"),
            _object("lettuce", _K, "countertop diningtable fridge sinkbasin", "wc"),
            _object("mug", _K + _BE, _KITCHEN_DISH + " coffeemachine desk sidetable", "whc"),
            _object("cup", _K, _KITCHEN_DISH, "whc"),
            _object("plate", _K, _KITCHEN_DISH, "whc"),
            _object("bowl", _K + _BE + _L, _KITCHEN_DISH + " desk dresser coffeetable", "wc"),
            _object("pan", _K, "countertop diningtable stoveburner cabinet fridge sinkbasin", "wc"),
            _object("pot", _K, "countertop diningtable stoveburner cabinet fridge sinkbasin", "wc"),
            _object("kettle", _K, "countertop stoveburner cabinet shelf"),
            _object("winebottle", _K, "countertop diningtable cabinet fridge shelf", "c"),
            _object("butterknife", _K, _CUTLERY, "w"),
            _object("knife", _K, _CUTLERY, "w"),
            _object("fork", _K, _CUTLERY, "w"),
            _object("spoon", _K, _CUTLERY, "w"),
            _object("spatula", _K, _CUTLERY, "w"),
            _object("ladle", _K, _CUTLERY, "w"),
            _object("dishsponge", _K + _BA, "countertop sinkbasin drawer cabinet garbagecan", "w"),
            _object("saltshaker", _K, "countertop diningtable cabinet drawer shelf"),
            _object("peppershaker", _K, "countertop diningtable cabinet drawer shelf"),
            _object("soapbottle", _K + _BA, "countertop cabinet shelf garbagecan toilet drawer"),
            _object("soapbar", _BA, "countertop sinkbasin bathtubbasin toilet cabinet garbagecan", "w"),
            _object("cloth", _BA, "countertop sinkbasin bathtubbasin cabinet drawer toilet", "w"),
            _object("spraybottle", _BA, "countertop cabinet toilet garbagecan drawer shelf"),
            _object("toiletpaper", _BA, "countertop cabinet toilet toiletpaperhanger drawer garbagecan shelf"),
            _object("candle", _BA + _L, "countertop cabinet toilet shelf drawer coffeetable sidetable"),
            _object("towel", _BA, "towelholder countertop cabinet"),
            _object("handtowel", _BA, "handtowelholder countertop cabinet"),
            _object("tissuebox", _BA + _BE + _L, "countertop toilet shelf cabinet sidetable coffeetable dresser"),
            _object("alarmclock", _BE, _DESK_SMALL),
            _object("book", _BE + _L, "bed desk sidetable dresser shelf drawer sofa coffeetable armchair"),
            _object("cd", _BE + _L, _DESK_SMALL + " safe garbagecan"),
            _object("cellphone", _BE + _L, "bed desk sidetable dresser drawer safe sofa armchair coffeetable"),
            _object("creditcard", _BE + _L, _DESK_SMALL + " sofa armchair diningtable"),
            _object("keychain", _BE + _L, _DESK_SMALL + " safe sofa armchair"),
            _object("laptop", _BE + _L, "bed desk sofa armchair coffeetable diningtable dresser"),
            _object("pen", _BE, _DESK_SMALL + " garbagecan"),
            _object("pencil", _BE, _DESK_SMALL + " garbagecan"),
            _object("pillow", _BE + _L, "bed sofa armchair"),
            _object("teddybear", _BE, "bed armchair dresser"),
            _object("basketball", _BE, "bed desk armchair"),
            _object("remotecontrol", _L, "sofa armchair coffeetable sidetable tvstand dresser drawer"),
            _object("statue", _L, "coffeetable sidetable shelf tvstand dresser diningtable"),
            _object("vase", _L, "coffeetable sidetable shelf tvstand dresser cabinet"),
            _object("watch", _L, "coffeetable sidetable shelf dresser drawer safe"),
            _object("newspaper", _L, "sofa armchair coffeetable sidetable diningtable"),
            _object("box", _L, "sofa armchair coffeetable sidetable dresser shelf"),
        )
    }
)
"""Portable object types by name; skills: ``w`` cleanable, ``h`` heatable, ``c`` coolable."""

ROOM_LAYOUTS = MappingProxyType(
    {
        "kitchen": (
            ("cabinet", 4, 12), ("drawer", 2, 8), ("countertop", 1, 3), ("fridge", 1, 1), ("microwave", 1, 1),
            ("sinkbasin", 1, 1), ("stoveburner", 2, 4), ("coffeemachine", 1, 1), ("diningtable", 0, 1),
            ("garbagecan", 1, 1), ("shelf", 0, 3),
        ),
        "bathroom": (
            ("cabinet", 1, 4), ("countertop", 1, 1), ("sinkbasin", 1, 2), ("toilet", 1, 1), ("towelholder", 0, 1),
            ("handtowelholder", 0, 2), ("toiletpaperhanger", 1, 1), ("bathtubbasin", 0, 1), ("garbagecan", 1, 1),
            ("drawer", 0, 4), ("shelf", 0, 2),
        ),
        "bedroom": (
            ("bed", 1, 1), ("desk", 0, 1), ("sidetable", 1, 2), ("dresser", 0, 1), ("drawer", 2, 8), ("shelf", 0, 4),
            ("garbagecan", 1, 1), ("safe", 0, 1), ("laundryhamper", 0, 1), ("armchair", 0, 1),
        ),
        "living room": (
            ("sofa", 1, 1), ("armchair", 0, 2), ("coffeetable", 1, 2), ("sidetable", 1, 3), ("tvstand", 0, 1),
            ("drawer", 0, 6), ("cabinet", 0, 4), ("shelf", 0, 3), ("garbagecan", 1, 1), ("safe", 0, 1),
            ("diningtable", 0, 1), ("dresser", 0, 1),
        ),
    }
)
"""Per room type: (receptacle type, fewest, most) instances in one of its floorplans."""

TASK_ROOMS = MappingProxyType(
    {
        "pick_and_place_simple": ROOMS,
        "pick_two_obj_and_place": ROOMS,
        "pick_clean_then_place": ("kitchen", "bathroom"),
        "pick_heat_then_place": ("kitchen",),
        "pick_cool_then_place": ("kitchen",),
        "look_at_obj_in_light": ("bedroom", "living room"),
    }
)
"""The room types whose floorplans can host each task type."""

APPLIANCES = MappingProxyType(
    {
        "pick_clean_then_place": ("sinkbasin", "bathtubbasin"),
        "pick_heat_then_place": ("microwave",),
        "pick_cool_then_place": ("fridge",),
    }
)
"""The receptacle types that clean, heat and cool; never a target of the task type that needs them."""

_GOAL_TEMPLATES = MappingProxyType(
    {
        "pick_and_place_simple": ("put a {o} {p} {r}.", "put some {o} {p} {r}."),
        "pick_two_obj_and_place": ("put two {o} {p} {r}.", "find two {o} and put them {p} {r}."),
        "pick_clean_then_place": ("put a clean {o} {p} {r}.", "clean some {o} and put it {p} {r}."),
        "pick_heat_then_place": ("put a hot {o} {p} {r}.", "heat some {o} and put it {p} {r}."),
        "pick_cool_then_place": ("put a cool {o} {p} {r}.", "cool some {o} and put it {p} {r}."),
        "look_at_obj_in_light": ("look at {o} under the {r}.", "examine the {o} with the {r}."),
    }
)


@dataclass(frozen=True)
class Goal:
    """One task: its type, the object type it is about, and the target receptacle type (or the lamp)."""

    task_type: str
    object_type: str
    target_type: str
    text: str
    """The goal sentence shown after "Your task is to: "."""

    @property
    def count(self) -> int:
        """How many objects of `object_type` must end up in one target receptacle."""
        return 2 if self.task_type == "pick_two_obj_and_place" else 1


@dataclass(frozen=True)
class Scene:
    """A room ready to play: receptacles in the order the room description lists them, objects, a goal."""

    room: str
    floorplan: int
    receptacles: tuple[str, ...]
    placements: tuple[tuple[str, str], ...]
    """(object name, receptacle name) pairs, in the order a receptacle lists its contents."""
    goal: Goal


def kind_of(name: str) -> str:
    """The type of a numbered entity name: "mug 2" -> "mug"."""
    return name.rsplit(" ", 1)[0]


def goal_text(task_type: str, object_type: str, target_type: str, variant: int) -> str:
    """The goal sentence of `task_type` in wording `variant` (0 or 1)."""
    preposition = "" if task_type == "look_at_obj_in_light" else RECEPTACLE_TYPES[target_type].preposition
    return _GOAL_TEMPLATES[task_type][variant].format(o=object_type, p=preposition, r=target_type)


@lru_cache(maxsize=None)
def floorplan(room: str, number: int) -> tuple[str, ...]:
    """The receptacle names of floorplan `number` (1..30) of `room`, in a fixed shuffled order."""
    if room not in ROOM_LAYOUTS:
        raise ValueError(f"unknown room type {room!r}; accepted: {', '.join(ROOMS)}")
    if not 1 <= number <= FLOORPLANS_PER_ROOM:
        raise ValueError(f"floorplan number must be in 1..{FLOORPLANS_PER_ROOM}, got {number}")
    rng = np.random.default_rng([_SEED_TAG, 1, ROOMS.index(room), number])
    names = [
        f"{kind} {n}"
        for kind, fewest, most in ROOM_LAYOUTS[room]
        for n in range(1, int(rng.integers(fewest, most + 1)) + 1)
    ]
    return tuple(names[i] for i in rng.permutation(len(names)))


@lru_cache(maxsize=None)
def split_task_types(split: str) -> tuple[str, ...]:
    """The task type of every scene of `split`, by index: the split's exact counts in a fixed shuffled order."""
    counts = _split_counts(split)
    types = [task for task in TASK_TYPES for _ in range(counts[task])]
    order = np.random.default_rng([_SEED_TAG, 2, SPLITS.index(split)]).permutation(len(types))
    return tuple(types[i] for i in order)


def split_size(split: str) -> int:
    """The number of scenes in `split`."""
    return sum(_split_counts(split).values())


def _split_counts(split: str) -> MappingProxyType[str, int]:
    if split not in SPLITS:
        raise ValueError(f"unknown ALFWorld split {split!r}; accepted: {', '.join(SPLITS)}")
    return TRAIN_TASK_COUNTS if split == "train" else EVAL_TASK_COUNTS


_MAX_DRAWS = 200
"""Floorplan/goal draws before `scene` gives up (a few suffice in practice; the tests build every scene)."""


@lru_cache(maxsize=4096)
def scene(split: str, index: int) -> Scene:
    """Scene `index` (0-based, below `split_size(split)`) of `split`."""
    task_types = split_task_types(split)
    if not 0 <= index < len(task_types):
        raise ValueError(f"{split} scene index must be in 0..{len(task_types) - 1}, got {index}")
    task_type = task_types[index]
    plans = [n for n in range(1, FLOORPLANS_PER_ROOM + 1) if (n in EVAL_FLOORPLANS) == (split == "eval")]
    rng = np.random.default_rng([_SEED_TAG, 3, SPLITS.index(split), index])
    for _ in range(_MAX_DRAWS):
        room = TASK_ROOMS[task_type][int(rng.integers(len(TASK_ROOMS[task_type])))]
        number = plans[int(rng.integers(len(plans)))]
        built = _build_scene(rng, task_type, room, number)
        if built is not None:
            return built
    raise RuntimeError(f"no solvable {task_type} scene found for {split} scene {index}")


def _goal_options(task_type: str, room: str, present: set[str]) -> list[tuple[str, str]]:
    """(object type, target type) pairs that make a solvable goal in a room with receptacle types `present`."""
    appliances = APPLIANCES.get(task_type, ())
    if appliances and not present.intersection(appliances):
        return []
    if task_type == "look_at_obj_in_light" and not present.intersection(LAMP_HOSTS):
        return []
    options = []
    for kind in OBJECT_TYPES.values():
        able = {
            "pick_clean_then_place": kind.cleanable,
            "pick_heat_then_place": kind.heatable,
            "pick_cool_then_place": kind.coolable,
        }.get(task_type, True)
        places = [place for place in kind.places if place in present]
        if room not in kind.rooms or not able or not places:
            continue
        if task_type == "look_at_obj_in_light":
            options.append((kind.name, LAMP))
            continue
        options.extend(
            (kind.name, target)
            for target in places
            if target not in appliances and any(place != target for place in places)
        )
    return options


def _build_scene(rng: np.random.Generator, task_type: str, room: str, number: int) -> Scene | None:
    receptacles = floorplan(room, number)
    present = {kind_of(name) for name in receptacles}
    options = _goal_options(task_type, room, present)
    if not options:
        return None
    object_type, target_type = options[int(rng.integers(len(options)))]
    goal = Goal(task_type, object_type, target_type, goal_text(task_type, object_type, target_type, int(rng.integers(2))))
    by_type: dict[str, list[str]] = {}
    for name in receptacles:
        by_type.setdefault(kind_of(name), []).append(name)

    counts = {object_type: int(rng.integers(goal.count, 4))}
    others = [
        kind.name
        for kind in OBJECT_TYPES.values()
        if room in kind.rooms and kind.name != object_type and any(place in present for place in kind.places)
    ]
    for i in rng.permutation(len(others))[: int(rng.integers(6, 13))]:
        counts[others[i]] = int(rng.choice((1, 1, 1, 2, 2, 3)))

    placements = []
    for kind_name in sorted(counts):
        places = [place for place in OBJECT_TYPES[kind_name].places if place in present]
        if kind_name == object_type:
            places = [place for place in places if place != target_type]
        for n in range(1, counts[kind_name] + 1):
            hosts = by_type[places[int(rng.integers(len(places)))]]
            placements.append((f"{kind_name} {n}", hosts[int(rng.integers(len(hosts)))]))
    if room in ("bedroom", "living room"):
        lamp_hosts = [name for name in receptacles if kind_of(name) in LAMP_HOSTS]
        placements.append((f"{LAMP} 1", lamp_hosts[int(rng.integers(len(lamp_hosts)))]))
    order = rng.permutation(len(placements))
    return Scene(room, number, receptacles, tuple(placements[i] for i in order), goal)
