"""ALFWorld scenes for `comprl.envs.alfworld.env`: the official goals, each set in a generated room.

Scene i of a split plays official goal i of that split (`comprl.envs.alfworld.goals`): the task type, the
object type, the target receptacle type (or the desk lamp), the goal sentence and the ALFRED floorplan number
are the official game's, and the floorplan number fixes the room type (1-30 kitchen, 201-230 living room,
301-330 bedroom, 401-430 bathroom). So the training split is the 1,466 official training goals on their 108
floorplans, and the evaluation split the 134 out-of-distribution goals on the four ``valid_unseen``
floorplans (10, 219, 308, 424) that no training goal uses: out of distribution the way ALFWorld's is, unseen
rooms with a shared vocabulary.

The room is generated, since the lists carry no layout. A floorplan's receptacles are drawn from per-room
tables (`ROOM_LAYOUTS`) with a generator seeded by the floorplan number, then completed, one instance each,
with every receptacle type that an official goal set in that floorplan needs and the draw left out (its
target, the appliance of its treatment, a place where its object may start, a table for the lamp), so all
scenes of one floorplan share one room. A scene then places numbered objects ("mug 1", "mug 2"): 1 to 3 of
the goal's object type (2 or 3 for pick_two_obj_and_place), never in a receptacle of the target type, and 6
to 12 other types that occur in that room; bedrooms and living rooms get a desk lamp. Everything is drawn
from numpy generators seeded with fixed integer tuples, so scenes are the same in every process.

What the simulator can express. `unsupported_reason` says why an official goal could not be played (an object
or receptacle type the tables lack, an object its task cannot clean, heat or cool, a light other than the desk
lamp, a look_at_obj_in_light goal in a room without one, a sentence no template of its task type produces);
`unsupported_games` lists them per split. With the tables below every official goal of both splits plays
(``tests/test_alfworld.py`` checks it); the tables include the types and the skill that only a few official goals
need: the receptacles cart (18 training goals) and ottoman (13), the objects glassbottle (6) and wateringcan (1),
and a cleanable kettle (19; ALFWorld's ``VAL_ACTION_OBJECTS`` lists it). What no scene reproduces is the
official game's room: ALFRED's receptacle set and numbering, the trial's objects and where they start (the lists
do not record them); ALFWorld's per-receptacle ``canContain`` limits are not modelled either (any object fits in
any receptacle).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from types import MappingProxyType

import numpy as np

from comprl.envs.alfworld.goals import SPLITS, OfficialGoal, official_goals

_ROOM_BY_HUNDREDS = MappingProxyType({0: "kitchen", 2: "living room", 3: "bedroom", 4: "bathroom"})
FLOORPLANS_PER_ROOM = 30
"""ALFRED has 30 floorplans of each room type, numbered 1-30, 201-230, 301-330 and 401-430."""

LAMP = "desklamp"
"""The light for look_at_obj_in_light: a fixed object (never taken) standing on a desk, side table or dresser."""
LAMP_HOSTS: tuple[str, ...] = ("desk", "sidetable", "dresser")
LOOK_ROOMS: tuple[str, ...] = ("bedroom", "living room")
"""The room types whose scenes have a desk lamp (ALFWorld sets look_at_obj_in_light only in these)."""

TREATMENTS = MappingProxyType(
    {"pick_clean_then_place": "clean", "pick_heat_then_place": "heat", "pick_cool_then_place": "cool"}
)
"""The treatment each task type asks for before placing its object."""
TREATMENT_APPLIANCES = MappingProxyType({"heat": ("microwave",), "cool": ("fridge",), "clean": ("sinkbasin",)})
"""Where each treatment works, as ALFWorld's HeatObject, CoolObject and CleanObject actions allow."""

GOAL_TEMPLATES = MappingProxyType(
    {
        "pick_and_place_simple": ("put a {o} in {r}.", "put some {o} on {r}."),
        "pick_two_obj_and_place": ("put two {o} in {r}.", "find two {o} and put them in {r}."),
        "pick_clean_then_place": ("put a clean {o} in {r}.", "clean some {o} and put it in {r}."),
        "pick_heat_then_place": ("put a hot {o} in {r}.", "heat some {o} and put it in {r}."),
        "pick_cool_then_place": ("put a cool {o} in {r}.", "cool some {o} and put it in {r}."),
        "look_at_obj_in_light": ("look at {o} under the {r}.", "examine the {o} with the {r}."),
    }
)
"""ALFWorld's two goal sentences per task type (``alfworld/gen/goal_library.py``), ending with the period the
games add. The preposition belongs to the wording, not to the receptacle: "put some X on Y" and "put a X in Y"
whatever Y is."""

_SEED_TAG = 0xA1F0
"""First word of every generator seed in this module, so its streams differ from other comprl modules'."""


@dataclass(frozen=True)
class ReceptacleType:
    """A kind of receptacle and whether it opens and closes (hiding its contents while closed)."""

    name: str
    openable: bool


_OPENABLE = ("cabinet", "drawer", "fridge", "microwave", "safe")
_OPEN = (
    "countertop diningtable coffeemachine sinkbasin bathtubbasin stoveburner garbagecan shelf sidetable desk "
    "dresser bed sofa armchair coffeetable tvstand toilet towelholder handtowelholder toiletpaperhanger "
    "laundryhamper cart ottoman"
)
RECEPTACLE_TYPES = MappingProxyType(
    {name: ReceptacleType(name, name in _OPENABLE) for name in (*_OPENABLE, *_OPEN.split())}
)
"""Receptacle types by name; the openable ones are ALFWorld's (``OPENABLE_CLASS_LIST`` less the box)."""


@dataclass(frozen=True)
class ObjectType:
    """A kind of portable object: the rooms it occurs in, where it may lie, and what can be done to it."""

    name: str
    rooms: frozenset[str]
    places: tuple[str, ...]
    cleanable: bool
    heatable: bool
    coolable: bool

    def can(self, treatment: str) -> bool:
        """Whether this object can be given `treatment` ("clean", "heat" or "cool")."""
        return {"clean": self.cleanable, "heat": self.heatable, "cool": self.coolable}[treatment]


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
            _object("kettle", _K, "countertop stoveburner cabinet shelf", "w"),
            _object("winebottle", _K, "countertop diningtable cabinet fridge shelf", "c"),
            _object("butterknife", _K, _CUTLERY, "w"),
            _object("knife", _K, _CUTLERY, "w"),
            _object("fork", _K, _CUTLERY, "w"),
            _object("spoon", _K, _CUTLERY, "w"),
            _object("spatula", _K, _CUTLERY, "w"),
            _object("ladle", _K, _CUTLERY, "w"),
            _object("dishsponge", _K + _BA, "countertop sinkbasin drawer cabinet garbagecan", "w"),
            _object("glassbottle", _K, "countertop diningtable cabinet fridge shelf"),
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
            _object("wateringcan", _L, "sidetable coffeetable shelf dresser cabinet drawer"),
            _object("newspaper", _L, "sofa armchair coffeetable sidetable diningtable"),
            _object("box", _L, "sofa armchair coffeetable sidetable dresser shelf"),
        )
    }
)
"""Portable object types by name; skills: ``w`` cleanable, ``h`` heatable, ``c`` coolable (exactly ALFWorld's
``VAL_ACTION_OBJECTS`` for unsliced objects). ``rooms`` and ``places`` say where an object is a distractor and where
it may start; an official goal's object is placed in its goal's floorplan whatever its ``rooms``."""

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
            ("drawer", 0, 4), ("shelf", 0, 2), ("cart", 0, 1),
        ),
        "bedroom": (
            ("bed", 1, 1), ("desk", 0, 1), ("sidetable", 1, 2), ("dresser", 0, 1), ("drawer", 2, 8), ("shelf", 0, 4),
            ("garbagecan", 1, 1), ("safe", 0, 1), ("laundryhamper", 0, 1), ("armchair", 0, 1),
            ("ottoman", 0, 1),
        ),
        "living room": (
            ("sofa", 1, 1), ("armchair", 0, 2), ("coffeetable", 1, 2), ("sidetable", 1, 3), ("tvstand", 0, 1),
            ("drawer", 0, 6), ("cabinet", 0, 4), ("shelf", 0, 3), ("garbagecan", 1, 1), ("safe", 0, 1),
            ("diningtable", 0, 1), ("dresser", 0, 1), ("ottoman", 0, 1),
        ),
    }
)
"""Per room type: (receptacle type, fewest, most) instances in one of its floorplans, before `floorplan` adds
what the floorplan's official goals need. Every kitchen has a microwave, a fridge and a sink basin, every bathroom
a sink basin, and every bedroom and living room a side table for the desk lamp."""


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
    game: str = ""
    """The official ALFWorld game whose goal this scene plays (`OfficialGoal.game`); "" for a hand-built scene."""


def kind_of(name: str) -> str:
    """The type of a numbered entity name: "mug 2" -> "mug"."""
    return name.rsplit(" ", 1)[0]


def goal_text(task_type: str, object_type: str, target_type: str, variant: int) -> str:
    """The goal sentence of `task_type` in wording `variant` (0 or 1) of `GOAL_TEMPLATES`."""
    return GOAL_TEMPLATES[task_type][variant].format(o=object_type, r=target_type)


def room_of(floorplan_number: int) -> str:
    """The room type of ALFRED floorplan `floorplan_number` (see `FLOORPLANS_PER_ROOM`)."""
    room = _ROOM_BY_HUNDREDS.get(floorplan_number // 100)
    if room is None or not 1 <= floorplan_number % 100 <= FLOORPLANS_PER_ROOM:
        raise ValueError(
            f"ALFRED floorplan numbers are 1-30, 201-230, 301-330 and 401-430; got {floorplan_number}"
        )
    return room


def unsupported_reason(goal: OfficialGoal) -> str | None:
    """Why the simulator cannot play official goal `goal`, or None when it can."""
    kind = OBJECT_TYPES.get(goal.object_type)
    if kind is None:
        return f"no object type {goal.object_type!r}"
    if goal.task_type == "look_at_obj_in_light":
        if goal.target_type != LAMP:
            return f"no light {goal.target_type!r} (the simulator's only light is the {LAMP})"
        if room_of(goal.floorplan) not in LOOK_ROOMS:
            return f"no {LAMP} in a {room_of(goal.floorplan)} (only in {' and '.join(LOOK_ROOMS)} scenes)"
    elif goal.target_type not in RECEPTACLE_TYPES:
        return f"no receptacle type {goal.target_type!r}"
    treatment = TREATMENTS.get(goal.task_type)
    if treatment is not None and not kind.can(treatment):
        return f"{goal.object_type} cannot be given the treatment {treatment!r}"
    wordings = [goal_text(goal.task_type, goal.object_type, goal.target_type, v) for v in (0, 1)]
    if goal.text not in wordings:
        return f"sentence {goal.text!r} is neither {wordings[0]!r} nor {wordings[1]!r}"
    return None


def unsupported_games(split: str) -> dict[str, str]:
    """Official game -> why the simulator cannot play it, for every such goal of `split` (empty: all play)."""
    return {
        goal.game: reason
        for goal in official_goals(split)
        if (reason := unsupported_reason(goal)) is not None
    }


def _needs(goal: OfficialGoal) -> Iterator[tuple[str, ...]]:
    """The receptacle types `goal` needs in its floorplan, each as alternatives (any one of them will do)."""
    places = OBJECT_TYPES[goal.object_type].places
    if goal.task_type == "look_at_obj_in_light":
        yield LAMP_HOSTS
        yield places
        return
    yield (goal.target_type,)
    yield tuple(place for place in places if place != goal.target_type)
    treatment = TREATMENTS.get(goal.task_type)
    if treatment is not None:
        yield TREATMENT_APPLIANCES[treatment]


@lru_cache(maxsize=None)
def _goals_by_floorplan() -> MappingProxyType[int, tuple[OfficialGoal, ...]]:
    grouped: dict[int, list[OfficialGoal]] = {}
    for split in SPLITS:
        for goal in official_goals(split):
            if unsupported_reason(goal) is None:
                grouped.setdefault(goal.floorplan, []).append(goal)
    return MappingProxyType({number: tuple(goals) for number, goals in grouped.items()})


@lru_cache(maxsize=None)
def floorplan(number: int) -> tuple[str, ...]:
    """The receptacle names of ALFRED floorplan `number`, in a fixed shuffled order (see the module doc)."""
    rng = np.random.default_rng([_SEED_TAG, 1, number])
    counts = {kind: int(rng.integers(fewest, most + 1)) for kind, fewest, most in ROOM_LAYOUTS[room_of(number)]}
    for goal in _goals_by_floorplan().get(number, ()):
        for alternatives in _needs(goal):
            if not any(counts.get(kind, 0) for kind in alternatives):
                counts[alternatives[0]] = 1
    names = [f"{kind} {n}" for kind, count in counts.items() for n in range(1, count + 1)]
    return tuple(names[i] for i in rng.permutation(len(names)))


@lru_cache(maxsize=None)
def split_task_types(split: str) -> tuple[str, ...]:
    """The task type of every scene of `split`, by index (the official list's, in its order)."""
    return tuple(goal.task_type for goal in official_goals(split))


def split_size(split: str) -> int:
    """The number of scenes in `split`: the length of its official list."""
    return len(official_goals(split))


@lru_cache(maxsize=4096)
def scene(split: str, index: int) -> Scene:
    """Scene `index` (0-based, below `split_size(split)`) of `split`: official goal `index`, set in its room."""
    goals = official_goals(split)
    if not 0 <= index < len(goals):
        raise ValueError(f"{split} scene index must be in 0..{len(goals) - 1}, got {index}")
    official = goals[index]
    reason = unsupported_reason(official)
    if reason is not None:
        raise ValueError(f"official {split} goal {index} ({official.game}) cannot be played here: {reason}")
    return _build_scene(np.random.default_rng([_SEED_TAG, 3, SPLITS.index(split), index]), official)


def _build_scene(rng: np.random.Generator, official: OfficialGoal) -> Scene:
    room = room_of(official.floorplan)
    receptacles = floorplan(official.floorplan)
    present = {kind_of(name) for name in receptacles}
    by_type: dict[str, list[str]] = {}
    for name in receptacles:
        by_type.setdefault(kind_of(name), []).append(name)
    goal = Goal(official.task_type, official.object_type, official.target_type, official.text)

    counts = {goal.object_type: int(rng.integers(goal.count, 4))}
    others = [
        kind.name
        for kind in OBJECT_TYPES.values()
        if room in kind.rooms and kind.name != goal.object_type and any(place in present for place in kind.places)
    ]
    for i in rng.permutation(len(others))[: int(rng.integers(6, 13))]:
        counts[others[i]] = int(rng.choice((1, 1, 1, 2, 2, 3)))

    placements = []
    for kind_name in sorted(counts):
        places = [place for place in OBJECT_TYPES[kind_name].places if place in present]
        if kind_name == goal.object_type:
            places = [place for place in places if place != goal.target_type]
        for n in range(1, counts[kind_name] + 1):
            hosts = by_type[places[int(rng.integers(len(places)))]]
            placements.append((f"{kind_name} {n}", hosts[int(rng.integers(len(hosts)))]))
    if room in LOOK_ROOMS:
        lamp_hosts = [name for name in receptacles if kind_of(name) in LAMP_HOSTS]
        placements.append((f"{LAMP} 1", lamp_hosts[int(rng.integers(len(lamp_hosts)))]))
    order = rng.permutation(len(placements))
    return Scene(room, official.floorplan, receptacles, tuple(placements[i] for i in order), goal, official.game)
