"""The official ALFWorld goal lists: the 1,466 training goals and the 134 out-of-distribution evaluation goals.

The lists ship in ``comprl/envs/alfworld/data/`` (``rl_train.jsonl`` and ``test.jsonl``, copied from the paper's
repository; ``data/README.md`` there gives the commit, the hashes and the licences). Each line names one
official ALFWorld game, e.g. ``pick_heat_then_place_in_recep-Cup-None-Fridge-18/trial_T20190908_142219_648949``
(task type, object, movable receptacle, receptacle, ALFRED floorplan number, trial), and its task sentence
("put a hot cup in fridge."). The evaluation list is ALFWorld's ``valid_unseen``: its 134 games use floorplans
10, 219, 308 and 424, which no training game uses.

`official_goals` reads a split into `OfficialGoal` records, in file order (record i has ``id`` i); the
simulator (`comprl.envs.alfworld.scenes`) builds its scene i of a split from record i.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from types import MappingProxyType

OFFICIAL_TASK_TYPES = MappingProxyType(
    {
        "pick_and_place_simple": "pick_and_place_simple",
        "pick_two_obj_and_place": "pick_two_obj_and_place",
        "pick_clean_then_place": "pick_clean_then_place_in_recep",
        "pick_heat_then_place": "pick_heat_then_place_in_recep",
        "pick_cool_then_place": "pick_cool_then_place_in_recep",
        "look_at_obj_in_light": "look_at_obj_in_light",
    }
)
"""comprl's short task type names and ALFWorld's directory names for them."""

TASK_TYPES: tuple[str, ...] = tuple(OFFICIAL_TASK_TYPES)
"""ALFWorld's six task types (short names; the official directories add ``_in_recep`` to three of them)."""

_SHORT_TASK_TYPES = {official: short for short, official in OFFICIAL_TASK_TYPES.items()}

SPLITS = ("train", "eval")
DATA_DIR = Path(__file__).with_name("data")
LIST_FILES = MappingProxyType({"train": "rl_train.jsonl", "eval": "test.jsonl"})
"""The file of each split's list in `DATA_DIR`."""

TRAIN_SIZE = 1466
"""Goals in the official training list."""
EVAL_SIZE = 134
"""Goals in the official out-of-distribution evaluation list (ALFWorld's ``valid_unseen``)."""
_SIZES = MappingProxyType({"train": TRAIN_SIZE, "eval": EVAL_SIZE})


@dataclass(frozen=True)
class OfficialGoal:
    """One line of an official list: which ALFWorld game it is and what its goal asks."""

    split: str
    index: int
    """Position in the split's list (its ``id``)."""
    game: str
    """The ALFWorld game: ``<task type>-<Object>-None-<Receptacle>-<floorplan>/<trial>``."""
    task_type: str
    """Short task type name (`TASK_TYPES`)."""
    object_type: str
    """Lower-case object type, as the task sentence names it ("cup", "keychain")."""
    target_type: str
    """Lower-case receptacle type the object must end in, or the light to look under ("desklamp")."""
    floorplan: int
    """ALFRED floorplan number: 1-30 kitchens, 201-230 living rooms, 301-330 bedrooms, 401-430 bathrooms."""
    text: str
    """The task sentence ("put a hot cup in fridge.")."""


def _parse(split: str, line_number: int, line: str) -> OfficialGoal:
    where = f"{LIST_FILES[split]}:{line_number}"
    record = json.loads(line)
    game = record["additional_info"]["description"]
    folder = game.split("/", 1)[0]
    fields = folder.split("-")
    if len(fields) != 5:
        raise ValueError(f"{where}: game {game!r} is not <task>-<Object>-<Mrecep>-<Receptacle>-<floorplan>/<trial>")
    official_task, object_name, movable, receptacle, floorplan = fields
    if official_task not in _SHORT_TASK_TYPES or movable != "None":
        raise ValueError(
            f"{where}: game {game!r} is not one of the six task types without a movable receptacle "
            f"({', '.join(_SHORT_TASK_TYPES)})"
        )
    if record["id"] != line_number - 1:
        raise ValueError(f"{where}: id {record['id']} out of order (expected {line_number - 1})")
    return OfficialGoal(
        split=split,
        index=record["id"],
        game=game,
        task_type=_SHORT_TASK_TYPES[official_task],
        object_type=object_name.lower(),
        target_type=receptacle.lower(),
        floorplan=int(floorplan),
        text=record["goal"],
    )


@lru_cache(maxsize=None)
def official_goals(split: str) -> tuple[OfficialGoal, ...]:
    """The official goals of `split` ("train" or "eval"), in list order."""
    if split not in SPLITS:
        raise ValueError(f"unknown ALFWorld split {split!r}; accepted: {', '.join(SPLITS)}")
    path = DATA_DIR / LIST_FILES[split]
    with path.open(encoding="utf-8") as file:
        goals = tuple(_parse(split, number, line) for number, line in enumerate(file, start=1))
    if len(goals) != _SIZES[split]:
        raise ValueError(f"{path} has {len(goals)} goals; the official {split} list has {_SIZES[split]}")
    return goals
