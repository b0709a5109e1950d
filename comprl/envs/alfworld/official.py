"""Official ALFWorld through the real engine, and export of comprl's generated scenes as ALFWorld games.

Both parts need the optional ``alfworld`` package (``pip install 'comprl[alfworld]'``); importing this module
does not, only using it does.

`AlfWorldOfficialEnv` plays the games of the official ALFWorld data set (downloaded elsewhere with
``alfworld-download``; the folder is the ``data_dir`` argument or the ``ALFWORLD_DATA`` environment variable)
through alfworld's TextWorld PDDL engine, with the conventions of `comprl.envs.alfworld.env.AlfWorldTextEnv`:
text in and out, ``<answer>command</answer>`` replies, ``info["admissible_actions"]`` from the engine's
admissible commands, +1 on the winning command, -1 on the step that truncates an unsolved episode, and
``max_turns`` 40 by default. Layout read (the one ``alfworld-download`` writes)::

    $ALFWORLD_DATA/json_2.1.1/{train,valid_seen,valid_unseen}/<task>-.../<trial>/{traj_data.json,game.tw-pddl}

`export_pddl_game` writes one of comprl's generated scenes (`comprl.envs.alfworld.scenes`) as such a game
folder, so the real engine can play exactly the room our simulator plays; ``tests/test_alfworld_official.py``
uses it to check the two engines against each other. `expert_plan` is a short solving command sequence for a
scene, stored as the game's walkthrough.

Export choices (so the two engines agree as far as ALFWorld's PDDL domain allows):

- each receptacle stands at its own location; entity ids are built so that alfworld's demangler gives every
  receptacle and object exactly the name it has in our scene ("cabinet 3", "sinkbasin 1", "mug 2");
- every object may be put in every receptacle (``canContain`` for all pairs), as in our simulator;
- the goal is ALFWorld's own PDDL goal of the task type (``alfworld/gen/goal_library.py``), written here.

Agreement with the engine (alfworld 0.4.2, textworld 1.7.0) is checked along seeded random walks of admissible
commands from scenes of every task type, training and evaluation: both engines list the same admissible commands
at every step and agree on win and done, and `expert_plan` wins in both on exactly its last command. Texts are
compared by their first sentence and the things they list (the engine orders contents its own way); ``look``,
``help`` and object ``examine`` texts are not compared.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from comprl.envs.alfworld.env import DEFAULT_MAX_TURNS, AlfWorldTextEnv
from comprl.envs.alfworld.goals import OFFICIAL_TASK_TYPES
from comprl.envs.alfworld.scenes import (
    LAMP,
    OBJECT_TYPES,
    RECEPTACLE_TYPES,
    TREATMENT_APPLIANCES,
    TREATMENTS,
    Scene,
    kind_of,
)
from comprl.envs.base import (
    ANSWER_CLOSE,
    ANSWER_OPEN,
    GameStep,
    TextEnv,
    choose_by_seed,
    extract_answer,
    seed_split,
)

INSTALL_HINT = "pip install 'comprl[alfworld]'"
DATA_ENV_VAR = "ALFWORLD_DATA"
DATA_VERSION = "json_2.1.1"
SPLIT_FOLDERS = {
    "train": "train",
    "eval_out_of_distribution": "valid_unseen",
    "eval_in_distribution": "valid_seen",
}
"""alfworld's split names and the folders under ``json_2.1.1`` that hold them."""
SPLIT_CHOICES = ("auto", *SPLIT_FOLDERS)
EXPECTED_LAYOUT = f"${DATA_ENV_VAR}/{DATA_VERSION}/{{train,valid_seen,valid_unseen}}/<task>/<trial>/" + (
    "{traj_data.json,game.tw-pddl}"
)

_KNOWN_VERBS = re.compile(
    r"(go to|open|close|take|move|put|heat|cool|clean|slice|use|examine|toggle) .+|inventory|look|help"
)
"""Replies that are commands (sent to the engine, which may answer "Nothing happens."); others are invalid."""
_PUT_ALIAS = re.compile(r"put (?P<o>.+?) (?:in/on|in|on) (?P<r>.+)")


def require_alfworld() -> None:
    """Raise ImportError, naming the extra to install, when the ``alfworld`` package is missing."""
    if importlib.util.find_spec("alfworld") is None:
        raise ImportError(f"the official ALFWorld engine needs the optional 'alfworld' package: {INSTALL_HINT}")


def _alfworld_data_file(name: str) -> str:
    """The text of ``alfworld/data/<name>`` (the PDDL domain or the text grammar) from the installed package."""
    require_alfworld()
    import alfworld

    path = Path(alfworld.__file__).parent / "data" / name
    return path.read_text()


# ---- export of comprl scenes -------------------------------------------------------------------------------


def _entity_id(name: str) -> str:
    """A PDDL id for the numbered entity `name` that alfworld's demangler turns back into `name`.

    The demangler names an id by its text before ``_bar_`` (adding "basin" when the id contains "basin") and
    numbers same-named ids from the highest number down, in sorted id order; so number n gets the rank
    ``999 - n``, and "sinkbasin 1" is written ``sink_bar_998_bar_basin``.
    """
    kind, number = name.rsplit(" ", 1)
    rank = f"{999 - int(number):03d}"
    if kind.endswith("basin"):
        return f"{kind[: -len('basin')]}_bar_{rank}_bar_basin"
    return f"{kind}_bar_{rank}"


def _type_id(kind: str) -> str:
    return f"{kind}type"


def _goal_pddl(scene: Scene) -> str:
    goal = scene.goal
    obj, target = _type_id(goal.object_type), _type_id(goal.target_type)
    if goal.task_type == "look_at_obj_in_light":
        return (
            "(and (exists (?ot - object ?r - receptacle ?a - agent ?l - location) (and "
            f"(objectType ?ot {_type_id(LAMP)}) (toggleable ?ot) (isToggled ?ot) (receptacleAtLocation ?r ?l) "
            "(atLocation ?a ?l) (inReceptacle ?ot ?r))) "
            f"(exists (?o - object ?a - agent) (and (objectType ?o {obj}) (holds ?a ?o))))"
        )
    if goal.task_type == "pick_two_obj_and_place":
        return (
            "(exists (?r - receptacle) (exists (?o1 - object) (and "
            f"(objectType ?o1 {obj}) (receptacleType ?r {target}) (inReceptacle ?o1 ?r) "
            f"(exists (?o2 - object) (and (not (= ?o1 ?o2)) (objectType ?o2 {obj}) (inReceptacle ?o2 ?r))))))"
        )
    state = {
        "pick_clean_then_place": "(cleanable ?o) (isClean ?o) ",
        "pick_heat_then_place": "(heatable ?o) (isHot ?o) ",
        "pick_cool_then_place": "(coolable ?o) (isCool ?o) ",
    }.get(goal.task_type, "")
    return (
        "(exists (?r - receptacle) (exists (?o - object) (and "
        f"{state}(objectType ?o {obj}) (receptacleType ?r {target}) (inReceptacle ?o ?r))))"
    )


def pddl_problem(scene: Scene, name: str = "comprl") -> str:
    """The PDDL problem (for alfworld's ``alfred.pddl`` domain) of `scene`'s start state and goal."""
    receptacles = list(scene.receptacles)
    objects = [obj for obj, _ in scene.placements]
    location = {r: f"loc{i + 1}" for i, r in enumerate(receptacles)}
    receptacle_kinds = sorted({kind_of(r) for r in receptacles})
    object_kinds = sorted({kind_of(o) for o in objects})
    declared = (
        ["agent1 - agent", "start - location"]
        + [f"{loc} - location" for loc in location.values()]
        + [f"{_entity_id(r)} - receptacle" for r in receptacles]
        + [f"{_entity_id(o)} - object" for o in objects]
        + [f"{_type_id(kind)} - rtype" for kind in receptacle_kinds]
        + [f"{_type_id(kind)} - otype" for kind in object_kinds]
    )
    facts = ["(atLocation agent1 start)"]
    for r in receptacles:
        facts.append(f"(receptacleAtLocation {_entity_id(r)} {location[r]})")
        facts.append(f"(receptacleType {_entity_id(r)} {_type_id(kind_of(r))})")
        if RECEPTACLE_TYPES[kind_of(r)].openable:
            facts.append(f"(openable {_entity_id(r)})")
    for obj, host in scene.placements:
        kind, ident = kind_of(obj), _entity_id(obj)
        facts.append(f"(inReceptacle {ident} {_entity_id(host)})")
        facts.append(f"(objectAtLocation {ident} {location[host]})")
        facts.append(f"(objectType {ident} {_type_id(kind)})")
        if kind == LAMP:
            facts.append(f"(toggleable {ident})")
            continue
        facts.append(f"(pickupable {ident})")
        skills = OBJECT_TYPES[kind]
        for flag, able in (
            ("cleanable", skills.cleanable),
            ("heatable", skills.heatable),
            ("coolable", skills.coolable),
        ):
            if able:
                facts.append(f"({flag} {ident})")
    facts.extend(
        f"(canContain {_type_id(r_kind)} {_type_id(o_kind)})" for r_kind in receptacle_kinds for o_kind in object_kinds
    )
    body = "\n        ".join
    return (
        f"(define (problem {name})\n    (:domain alfred)\n    (:objects\n        {body(declared)}\n    )\n"
        f"    (:init\n        {body(facts)}\n    )\n    (:goal {_goal_pddl(scene)})\n)\n"
    )


def expert_plan(scene: Scene) -> list[str]:
    """A command sequence that solves `scene` from its start (valid in our simulator and in ALFWorld)."""
    goal = scene.goal
    host_of = dict(scene.placements)
    here: str | None = None
    opened: set[str] = set()
    plan: list[str] = []

    def go_and_open(r: str) -> None:
        nonlocal here
        if here != r:
            plan.append(f"go to {r}")
            here = r
        if RECEPTACLE_TYPES[kind_of(r)].openable and r not in opened:
            plan.append(f"open {r}")
            opened.add(r)

    candidates = [obj for obj, _ in scene.placements if kind_of(obj) == goal.object_type]
    if goal.task_type == "look_at_obj_in_light":
        obj = candidates[0]
        go_and_open(host_of[obj])
        plan.append(f"take {obj} from {host_of[obj]}")
        lamp = next(o for o, _ in scene.placements if kind_of(o) == LAMP)
        if here != host_of[lamp]:
            plan.append(f"go to {host_of[lamp]}")
        plan.append(f"use {lamp}")
        return plan
    treatment = TREATMENTS.get(goal.task_type)
    target = next(r for r in scene.receptacles if kind_of(r) == goal.target_type)
    for obj in candidates[: goal.count]:
        go_and_open(host_of[obj])
        plan.append(f"take {obj} from {host_of[obj]}")
        if treatment is not None:
            appliance = next(r for r in scene.receptacles if kind_of(r) in TREATMENT_APPLIANCES[treatment])
            go_and_open(appliance)
            plan.append(f"{treatment} {obj} with {appliance}")
        go_and_open(target)
        plan.append(f"move {obj} to {target}")
    return plan


def _scene_of(scene_or_env: Scene | AlfWorldTextEnv) -> Scene:
    if isinstance(scene_or_env, Scene):
        return scene_or_env
    if isinstance(scene_or_env, AlfWorldTextEnv):
        return scene_or_env.scene
    raise TypeError(f"expected a Scene or an AlfWorldTextEnv, got {type(scene_or_env).__name__}")


def export_pddl_game(scene_or_env: Scene | AlfWorldTextEnv, folder: str | os.PathLike[str]) -> Path:
    """Write a comprl scene (or the scene an `AlfWorldTextEnv` is playing) as an ALFWorld game folder.

    The folder gets ``game.tw-pddl`` (alfworld's own domain and grammar with the goal text filled in, the
    scene's PDDL problem, ``solvable: true`` and `expert_plan` as walkthrough) and a minimal
    ``traj_data.json`` (task type, PDDL parameters and the goal text as a single annotation). Returns the path
    of ``game.tw-pddl``. The export is of the scene's start state, whatever an env has played since.
    """
    scene = _scene_of(scene_or_env)
    goal = scene.goal
    goal_text = goal.text.rstrip(".")
    grammar = _alfworld_data_file("alfred.twl2")
    if "UNKNOWN GOAL" not in grammar:
        raise RuntimeError("the installed alfworld grammar (alfred.twl2) has no 'UNKNOWN GOAL' placeholder")
    game = {
        "pddl_domain": _alfworld_data_file("alfred.pddl"),
        "grammar": grammar.replace("UNKNOWN GOAL", goal_text),
        "pddl_problem": pddl_problem(scene),
        "solvable": True,
        "walkthrough": expert_plan(scene),
    }
    is_look = goal.task_type == "look_at_obj_in_light"
    traj_data = {
        "task_type": OFFICIAL_TASK_TYPES[goal.task_type],
        "pddl_params": {
            "object_target": goal.object_type,
            "parent_target": "" if is_look else goal.target_type,
            "toggle_target": LAMP if is_look else "",
            "mrecep_target": "",
            "object_sliced": False,
        },
        "scene": {"room": scene.room, "floorplan": scene.floorplan, "official_game": scene.game},
        "turk_annotations": {"anns": [{"task_desc": goal_text}]},
        "comprl_generated": True,
    }
    target = Path(folder)
    target.mkdir(parents=True, exist_ok=True)
    (target / "traj_data.json").write_text(json.dumps(traj_data, indent=1))
    game_file = target / "game.tw-pddl"
    game_file.write_text(json.dumps(game))
    return game_file


# ---- the official engine -----------------------------------------------------------------------------------


def find_game_files(data_dir: str | os.PathLike[str], split: str) -> list[Path]:
    """The solvable ``game.tw-pddl`` files of `split` under `data_dir`, sorted (as alfworld collects them).

    Like alfworld's ``AlfredTWEnv``: a game is a folder with ``traj_data.json`` and ``game.tw-pddl`` whose
    ``solvable`` is true; "movable" and "Sliced" trials are skipped.
    """
    root = Path(data_dir) / DATA_VERSION / SPLIT_FOLDERS[split]
    games = []
    for traj in sorted(root.rglob("traj_data.json")):
        game_file = traj.parent / "game.tw-pddl"
        relative = str(traj.parent.relative_to(root))
        if "movable" in relative or "Sliced" in relative or not game_file.is_file():
            continue
        try:
            solvable = json.loads(game_file.read_text()).get("solvable", False)
        except (OSError, ValueError):
            continue
        if solvable:
            games.append(game_file)
    return games


@dataclass
class _Engine:
    env: Any
    state: Any


class AlfWorldOfficialEnv(TextEnv):
    """The official ALFWorld games, played by alfworld's engine, as a comprl text env (see the module doc).

    `split` is "auto" (seeds below `EVAL_SEED_OFFSET` play training game ``s mod n``, seeds at or above it
    play out-of-distribution game ``(s - EVAL_SEED_OFFSET) mod n``), or one of "train",
    "eval_out_of_distribution", "eval_in_distribution" (every seed plays game ``s mod n`` of that split).
    ``seed=None`` draws a game from the env's generator. ``reset(options={"game_file": path})`` plays one
    given ``game.tw-pddl``.
    """

    unsolved_truncation_reward = -1.0

    def __init__(
        self,
        data_dir: str | os.PathLike[str] | None = None,
        split: str = "auto",
        max_turns: int = DEFAULT_MAX_TURNS,
        action_prompt: bool = True,
    ) -> None:
        super().__init__(max_turns=max_turns, action_prompt=action_prompt)
        require_alfworld()
        if split not in SPLIT_CHOICES:
            raise ValueError(f"unknown ALFWorld split {split!r}; accepted: {', '.join(SPLIT_CHOICES)}")
        chosen = data_dir if data_dir is not None else os.environ.get(DATA_ENV_VAR)
        if not chosen:
            raise FileNotFoundError(
                f"no ALFWorld data: pass data_dir or set {DATA_ENV_VAR} to the folder alfworld-download "
                f"fills, laid out as {EXPECTED_LAYOUT}"
            )
        self.data_dir = Path(chosen).expanduser()
        self.split = split
        wanted = ("train", "eval_out_of_distribution") if split == "auto" else (split,)
        self._games = {name: find_game_files(self.data_dir, name) for name in wanted}
        empty = [SPLIT_FOLDERS[name] for name, files in self._games.items() if not files]
        if empty:
            raise FileNotFoundError(
                f"no solvable ALFWorld games for {', '.join(empty)} under {self.data_dir} "
                f"(from data_dir or {DATA_ENV_VAR}); expected layout: {EXPECTED_LAYOUT}"
            )
        self._engine: _Engine | None = None
        self._game_file: Path | None = None
        self._goal_text = ""
        self._last_feedback = ""

    # ---- public state -------------------------------------------------------------------------------------

    def game_files(self, split: str) -> list[Path]:
        """The game files this env plays for `split` (one of those it was created for)."""
        return list(self._games[split])

    @property
    def game_file(self) -> Path:
        """The ``game.tw-pddl`` being played."""
        if self._game_file is None:
            raise RuntimeError("no game yet: call reset() first")
        return self._game_file

    @property
    def goal_text(self) -> str:
        """The task sentence of the current game ("put a clean mug in coffeemachine.")."""
        return self._goal_text

    @property
    def instruction(self) -> str:
        """The household setting, the command syntax and the reply format, for the system prompt."""
        return (
            "You are a household robot in a text world (ALFWorld). Each observation describes what you see; the "
            "first one ends with your task. Commands: go to [receptacle], open [receptacle], close [receptacle], "
            "take [object] from [receptacle], move [object] to [receptacle], heat [object] with [microwave], "
            "cool [object] with [fridge], clean [object] with [sinkbasin], slice [object] with [knife], use "
            "[desklamp or floorlamp], examine [something], inventory, look. Name things exactly as the text "
            "does, with their number (e.g. mug 1, cabinet 3). You can carry one object at a time; closed "
            f"receptacles must be opened to see or take what is inside. You have {self.max_turns} actions. "
            f"Reply with exactly one command as {ANSWER_OPEN}COMMAND{ANSWER_CLOSE}, for example "
            f"{ANSWER_OPEN}go to countertop 1{ANSWER_CLOSE}."
        )

    @property
    def action_words(self) -> tuple[str, ...]:
        """The engine's admissible commands for the current state."""
        if self._engine is None:
            return ()
        return tuple(self._engine.state["admissible_commands"])

    def describe_actions(self) -> str:
        return ", ".join(self.action_words)

    def parse_action(self, text: str) -> str | None:
        """The command to send to the engine, or None when the reply is no command at all.

        Admissible commands are sent as they are; other well-formed commands (a known verb) are sent too
        and answered "Nothing happens." by the engine; ``put O in/on R`` is read as ``move O to R``.
        """
        candidate = extract_answer(text)
        if not candidate:
            return None
        if candidate in self.action_words:
            return candidate
        alias = _PUT_ALIAS.fullmatch(candidate)
        if alias is not None:
            return f"move {alias['o']} to {alias['r']}"
        return candidate if _KNOWN_VERBS.fullmatch(candidate) else None

    def _info(self, invalid_action: bool) -> dict[str, Any]:
        info = super()._info(invalid_action)
        info["game_file"] = str(self._game_file) if self._game_file is not None else None
        return info

    def close(self) -> None:
        if self._engine is not None:
            self._engine.env.close()
            self._engine = None
        super().close()

    # ---- game ---------------------------------------------------------------------------------------------

    def _choose_game(self) -> Path:
        """``options["game_file"]`` when given, else the game the seed picks (see the class doc)."""
        chosen = self._options.get("game_file")
        if chosen is not None:
            return Path(chosen)
        split, seed = seed_split(self.split, self._seed, "eval_out_of_distribution")
        return choose_by_seed(self._games[split], seed, self.np_random)

    def _reset_game(self) -> str:
        game_file = self._choose_game()
        if self._engine is not None:
            self._engine.env.close()
        env = make_engine()
        env.load(str(game_file))
        state = env.reset()
        self._engine = _Engine(env, state)
        self._game_file = game_file
        feedback = str(state["feedback"]).strip()
        match = re.search(r"Your task is to: (.*)$", feedback, re.DOTALL)
        self._goal_text = match.group(1).strip() if match else ""
        self._last_feedback = feedback
        return feedback

    def _observe(self) -> str:
        return f"{self._last_feedback}\nYour task is to: {self._goal_text}"

    def _play(self, action_word: str) -> GameStep:
        assert self._engine is not None
        state, _, _ = self._engine.env.step(action_word)
        self._engine.state = state
        won = bool(state["won"])
        feedback = str(state["feedback"]).strip()
        self._last_feedback = feedback
        return GameStep(feedback, 1.0 if won else 0.0, won, won)


def make_engine() -> Any:
    """A fresh alfworld text engine: TextWorld's ``PddlEnv`` with alfworld's demangler and info wrappers."""
    require_alfworld()
    textworld = importlib.import_module("textworld")
    pddl = importlib.import_module("textworld.envs.pddl")
    tw_env = importlib.import_module("alfworld.agents.environment.alfred_tw_env")
    infos = textworld.EnvInfos(won=True, admissible_commands=True, feedback=True, extras=["gamefile"])
    return tw_env.AlfredInfos(tw_env.AlfredDemangler(pddl.PddlEnv(infos)))
