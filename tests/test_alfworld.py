"""Behaviour of comprl's built-in ALFWorld: scenes, splits, commands, feedback, goals, reward and an expert."""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from dataclasses import replace

import numpy as np
import pytest

import comprl.envs
from comprl.envs.base import EVAL_SEED_OFFSET
from comprl.envs.alfworld.env import (
    DEFAULT_MAX_TURNS,
    NOTHING_HAPPENS,
    TREATMENT_APPLIANCES,
    AlfWorldTextEnv,
    scene_indices,
)
from comprl.envs.alfworld.goals import DATA_DIR, EVAL_SIZE, LIST_FILES, TASK_TYPES, TRAIN_SIZE, official_goals
from comprl.envs.alfworld.scenes import (
    LAMP,
    LAMP_HOSTS,
    LOOK_ROOMS,
    OBJECT_TYPES,
    TREATMENTS,
    Goal,
    Scene,
    floorplan,
    goal_text,
    kind_of,
    room_of,
    scene,
    unsupported_games,
    unsupported_reason,
)

ENV_ID = "comprl/ALFWorld-v0"
KITCHEN = ("countertop 1", "cabinet 1", "microwave 1", "fridge 1", "sinkbasin 1", "coffeemachine 1", "diningtable 1")


def make_scene(task_type: str, object_type: str, target_type: str, placements: tuple[tuple[str, str], ...],
               receptacles: tuple[str, ...] = KITCHEN) -> Scene:
    goal = Goal(task_type, object_type, target_type, goal_text(task_type, object_type, target_type, 0))
    return Scene("kitchen", 1, receptacles, placements, goal)


MUG_SCENE = make_scene(
    "pick_clean_then_place", "mug", "coffeemachine",
    (("mug 1", "countertop 1"), ("apple 1", "countertop 1"), ("cup 1", "cabinet 1"), ("mug 2", "diningtable 1")),
)
LAMP_SCENE = make_scene(
    "look_at_obj_in_light", "book", LAMP,
    (("book 1", "bed 1"), ("desklamp 1", "sidetable 1"), ("pen 1", "sidetable 1")),
    receptacles=("bed 1", "sidetable 1", "drawer 1"),
)


def start(scene_: Scene, max_turns: int = 40) -> AlfWorldTextEnv:
    env = AlfWorldTextEnv(max_turns=max_turns, action_prompt=False)
    env.reset(options={"scene": scene_})
    return env


def play(env: AlfWorldTextEnv, *commands: str) -> list[str]:
    return [env.step(command)[0] for command in commands]


# ---- scenes, splits and seeds ------------------------------------------------------------------------------


LIST_SHA256 = {
    "train": "0e2d7e466721c46da91ef878522248619efa69655ce926f195321856fd3a26dd",
    "eval": "05b9b5dbe9b9c9f5da39331c9b2ede007100e3b0fef0ea03900f8d0bc07fd4c5",
}
"""The official lists as shipped in the paper's repository (data/README.md names the commit)."""
OFFICIAL_TASK_COUNTS = {
    "train": {"pick_and_place_simple": 322, "pick_two_obj_and_place": 354, "pick_clean_then_place": 269,
              "pick_cool_then_place": 212, "pick_heat_then_place": 186, "look_at_obj_in_light": 123},
    "eval": {"pick_clean_then_place": 31, "pick_heat_then_place": 23, "pick_and_place_simple": 24,
             "pick_cool_then_place": 21, "look_at_obj_in_light": 18, "pick_two_obj_and_place": 17},
}


def _official_records(split: str) -> list[dict]:
    """The split's list read straight from its JSONL file, independently of comprl's reader."""
    with (DATA_DIR / LIST_FILES[split]).open(encoding="utf-8") as file:
        return [json.loads(line) for line in file]


@pytest.mark.parametrize("split", ["train", "eval"])
def test_shipped_lists_are_the_official_files(split: str) -> None:
    assert hashlib.sha256((DATA_DIR / LIST_FILES[split]).read_bytes()).hexdigest() == LIST_SHA256[split]
    assert len(official_goals(split)) == {"train": TRAIN_SIZE, "eval": EVAL_SIZE}[split]
    assert (TRAIN_SIZE, EVAL_SIZE) == (1466, 134)
    assert Counter(goal.task_type for goal in official_goals(split)) == OFFICIAL_TASK_COUNTS[split]


@pytest.mark.parametrize("split", ["train", "eval"])
def test_each_scene_plays_the_official_goal_of_its_index(split: str) -> None:
    records = _official_records(split)
    for index, record in enumerate(records):
        played = scene(split, index)
        task, obj, _, target, number = record["additional_info"]["description"].split("/")[0].split("-")
        assert record["id"] == index
        assert played.goal.text == record["goal"]
        assert played.game == record["additional_info"]["description"]
        assert (played.goal.object_type, played.goal.target_type) == (obj.lower(), target.lower())
        assert task.startswith(played.goal.task_type) and played.floorplan == int(number)
        assert played.room == room_of(played.floorplan)


def test_evaluation_floorplans_are_the_unseen_ones() -> None:
    train = {goal.floorplan for goal in official_goals("train")}
    evaluation = {goal.floorplan for goal in official_goals("eval")}
    assert evaluation == {10, 219, 308, 424} and not train & evaluation and len(train) == 108
    assert {room_of(number) for number in evaluation} == {"kitchen", "living room", "bedroom", "bathroom"}


def test_every_official_goal_is_expressible() -> None:
    assert unsupported_games("train") == {} and unsupported_games("eval") == {}


def test_goal_sentences_follow_the_official_templates() -> None:
    expected = {
        "pick_and_place_simple": ("put a mug in shelf.", "put some mug on shelf."),
        "pick_two_obj_and_place": ("put two mug in shelf.", "find two mug and put them in shelf."),
        "pick_clean_then_place": ("put a clean mug in shelf.", "clean some mug and put it in shelf."),
        "pick_heat_then_place": ("put a hot mug in shelf.", "heat some mug and put it in shelf."),
        "pick_cool_then_place": ("put a cool mug in shelf.", "cool some mug and put it in shelf."),
        "look_at_obj_in_light": ("look at mug under the shelf.", "examine the mug with the shelf."),
    }
    for task_type, wordings in expected.items():
        assert tuple(goal_text(task_type, "mug", "shelf", variant) for variant in (0, 1)) == wordings
    # The preposition follows the wording, whatever the receptacle: both occur with the same goal.
    texts = {goal.text for goal in official_goals("eval")}
    assert {"put a vase in safe.", "put some vase on safe."} <= texts
    for split in ("train", "eval"):
        used = Counter()
        for goal in official_goals(split):
            wordings = [goal_text(goal.task_type, goal.object_type, goal.target_type, v) for v in (0, 1)]
            used[(goal.task_type, wordings.index(goal.text))] += 1
        assert len(used) == 12, used  # every wording of every task type occurs in both lists


def test_unsupported_goals_are_named_with_the_reason() -> None:
    goal = official_goals("train")[0]
    assert unsupported_reason(goal) is None
    cases = {
        "no object type 'dragon'": replace(goal, object_type="dragon"),
        "no receptacle type 'trampoline'": replace(goal, target_type="trampoline"),
        "no light 'floorlamp'": replace(goal, task_type="look_at_obj_in_light", target_type="floorlamp"),
        "no desklamp in a kitchen": replace(goal, task_type="look_at_obj_in_light", target_type=LAMP, floorplan=5),
        "pen cannot be given the treatment 'heat'": replace(
            goal, task_type="pick_heat_then_place", object_type="pen"
        ),
        "sentence 'put some creditcard in diningtable.' is neither": replace(
            goal, text="put some creditcard in diningtable."
        ),
    }
    for reason, unsupported in cases.items():
        assert unsupported_reason(unsupported).startswith(reason), reason
    with pytest.raises(ValueError, match="floorplan numbers"):
        room_of(31)


@pytest.mark.parametrize("split", ["train", "eval"])
def test_every_scene_is_solvable_and_its_floorplan_is_shared(split: str) -> None:
    rooms: dict[int, tuple[str, ...]] = {}
    for index in range(len(official_goals(split))):
        s = scene(split, index)
        assert s.receptacles == floorplan(s.floorplan) == rooms.setdefault(s.floorplan, s.receptacles)
        held = [obj for obj, _ in s.placements if kind_of(obj) == s.goal.object_type]
        assert len(held) >= s.goal.count
        assert all(kind_of(host) != s.goal.target_type for obj, host in s.placements if obj in held)
        assert all(host in s.receptacles for _, host in s.placements)
        kinds = {kind_of(r) for r in s.receptacles}
        if s.goal.task_type == "look_at_obj_in_light":
            assert s.room in LOOK_ROOMS and kinds & set(LAMP_HOSTS)
            assert any(kind_of(obj) == LAMP for obj, _ in s.placements)
        else:
            assert s.goal.target_type in kinds
        treatment = TREATMENTS.get(s.goal.task_type)
        assert treatment is None or kinds & set(TREATMENT_APPLIANCES[treatment])
        assert treatment is None or OBJECT_TYPES[s.goal.object_type].can(treatment)


def test_seeds_map_to_train_and_eval_scenes_deterministically() -> None:
    env = AlfWorldTextEnv()
    for seed, expected in (
        (5, scene("train", 5)),
        (TRAIN_SIZE + 5, scene("train", 5)),
        (EVAL_SEED_OFFSET + 7, scene("eval", 7)),
        (EVAL_SEED_OFFSET + EVAL_SIZE + 7, scene("eval", 7)),
    ):
        env.reset(seed=seed)
        assert env.scene == expected
    first = AlfWorldTextEnv().reset(seed=42)
    assert AlfWorldTextEnv().reset(seed=42) == first
    assert AlfWorldTextEnv(split="eval").reset(seed=3)[0] == AlfWorldTextEnv().reset(seed=EVAL_SEED_OFFSET + 3)[0]
    heat = AlfWorldTextEnv(task="pick_heat_then_place")
    heat.reset(seed=0)
    assert heat.scene == scene("train", scene_indices("train", "pick_heat_then_place")[0])


def test_same_seed_same_trajectory() -> None:
    runs = []
    for _ in range(2):
        env = AlfWorldTextEnv()
        obs, info = env.reset(seed=77)
        trace = [obs]
        for i in range(25):
            actions = info["admissible_actions"]
            obs, _, terminated, truncated, info = env.step(actions[(i * 7) % len(actions)])
            trace.append(obs)
            if terminated or truncated:
                break
        runs.append(trace)
    assert runs[0] == runs[1]


def test_registered_id_and_constructor_errors() -> None:
    env = comprl.envs.make(ENV_ID)
    obs, info = env.reset(seed=1)
    assert obs.startswith("-= Welcome to TextWorld, ALFRED! =-\n\nYou are in the middle of a room.")
    assert "\n\nYour task is to: " in obs
    assert env.unwrapped.max_turns == DEFAULT_MAX_TURNS == 40
    assert info["task_type"] in TASK_TYPES
    with pytest.raises(ValueError, match="split"):
        AlfWorldTextEnv(split="valid")
    with pytest.raises(ValueError, match="task"):
        AlfWorldTextEnv(task="slice")


# ---- commands and feedback ---------------------------------------------------------------------------------


def test_every_command_feedback_on_a_hand_built_scene() -> None:
    env = start(MUG_SCENE)
    assert play(env, "look") == [
        "You are in the middle of a room. Looking quickly around you, you see a countertop 1, a cabinet 1, "
        "a microwave 1, a fridge 1, a sinkbasin 1, a coffeemachine 1, and a diningtable 1."
    ]
    assert play(
        env, "go to countertop 1", "examine countertop 1", "examine apple 1", "take mug 1 from countertop 1",
        "inventory", "look", "go to cabinet 1", "open cabinet 1", "close cabinet 1",
    ) == [
        "You arrive at countertop 1. On the countertop 1, you see a mug 1, and a apple 1.",
        "On the countertop 1, you see a mug 1, and a apple 1.",
        NOTHING_HAPPENS,  # as ALFWorld's engine: only the object held can be examined
        "You pick up the mug 1 from the countertop 1.",
        "You are carrying: a mug 1.",
        "You are facing the countertop 1. Next to it, you see nothing.",
        "You arrive at cabinet 1. The cabinet 1 is closed.",
        "You open the cabinet 1. The cabinet 1 is open. In it, you see a cup 1.",
        "You close the cabinet 1.",
    ]
    assert play(env, "go to microwave 1", "heat mug 1 with microwave 1", "go to fridge 1",
                "cool mug 1 with fridge 1", "go to sinkbasin 1", "examine mug 1") == [
        "You arrive at microwave 1. The microwave 1 is closed.",
        "You heat the mug 1 using the microwave 1.",
        "You arrive at fridge 1. The fridge 1 is closed.",
        "You cool the mug 1 using the fridge 1.",
        "You arrive at sinkbasin 1. On the sinkbasin 1, you see nothing.",
        "There's nothing special about mug 1.",
    ]
    assert env.step("help")[0].startswith("Available commands:")
    obs, reward, terminated, _, info = env.step("clean mug 1 with sinkbasin 1")
    assert (obs, reward, terminated) == ("You clean the mug 1 using the sinkbasin 1.", 0.0, False)
    assert play(env, "go to coffeemachine 1") == [
        "You arrive at coffeemachine 1. On the coffeemachine 1, you see nothing."
    ]
    obs, reward, terminated, truncated, info = env.step("move mug 1 to coffeemachine 1")
    assert (obs, reward, terminated, truncated) == ("You move the mug 1 to the coffeemachine 1.", 1.0, True, False)
    assert info["success"] and info["won"] and not info["invalid_action"]

    lamp = start(LAMP_SCENE)
    assert play(lamp, "go to sidetable 1", "take desklamp 1 from sidetable 1", "use desklamp 1", "use desklamp 1") == [
        "You arrive at sidetable 1. On the sidetable 1, you see a desklamp 1, and a pen 1.",
        NOTHING_HAPPENS,
        "You turn on the desklamp 1.",
        "You turn on the desklamp 1.",  # as ALFWorld: a lamp once on stays on for the goal
    ]


def test_put_aliases_map_to_move() -> None:
    env = AlfWorldTextEnv()
    for text in ("put mug 1 in coffeemachine 1", "put mug 1 on coffeemachine 1", "put mug 1 in/on coffeemachine 1",
                 "<answer>Move mug 1 to coffeemachine 1.</answer>"):
        assert env.parse_action(text) == "move mug 1 to coffeemachine 1"


def test_openable_receptacles_hide_contents_until_opened() -> None:
    env = start(MUG_SCENE)
    obs = play(env, "go to cabinet 1")[0]
    assert "cup 1" not in obs
    assert not any("cup 1" in a for a in env.action_words)
    assert play(env, "take cup 1 from cabinet 1", "examine cup 1") == [NOTHING_HAPPENS, NOTHING_HAPPENS]
    assert "cup 1" in play(env, "open cabinet 1")[0]
    assert "take cup 1 from cabinet 1" in env.action_words
    assert play(env, "close cabinet 1", "examine cabinet 1") == ["You close the cabinet 1.", "The cabinet 1 is closed."]
    assert play(env, "open cabinet 1", "take cup 1 from cabinet 1", "move cup 1 to cabinet 1") == [
        "You open the cabinet 1. The cabinet 1 is open. In it, you see a cup 1.",
        "You pick up the cup 1 from the cabinet 1.",
        "You move the cup 1 to the cabinet 1.",
    ]


@pytest.mark.parametrize(
    "command",
    ["go to countertop 1", "open cabinet 1", "close cabinet 1", "take mug 1 from countertop 1", "use desklamp 1",
     "move mug 1 to countertop 1", "heat mug 1 with microwave 1", "examine cup 1", "go to fridge 9",
     "take dragon 1 from countertop 1"],
)
def test_inapplicable_commands_answer_nothing_happens(command: str) -> None:
    env = start(MUG_SCENE)
    env.step("go to countertop 1")
    if command == "go to countertop 1":
        assert env.step(command)[0] == NOTHING_HAPPENS
        return
    env.step("take apple 1 from countertop 1")
    obs, reward, terminated, truncated, info = env.step(command)
    assert (obs, reward, terminated, truncated, info["invalid_action"]) == (NOTHING_HAPPENS, 0.0, False, False, False)


@pytest.mark.parametrize(
    "reply",
    ["", "   ", "x" * 10_000, "go to " + "cabinet 1 " * 1000, "dance", "fly to the moon", "take", "go to",
     "<answer>look", "</answer>", "héat mug 1 with microwave 1", "take mug 1 from", "\x00\x01", "take mug 1"],
)
def test_adversarial_replies_get_feedback_and_never_raise(reply: str) -> None:
    env = start(MUG_SCENE)
    obs, reward, terminated, truncated, info = env.step(reply)
    assert obs and reward == 0.0 and not terminated and not truncated
    assert obs == NOTHING_HAPPENS or (info["invalid_action"] and obs.startswith("Invalid action"))


def test_admissible_actions_parse_and_all_do_something() -> None:
    rng = np.random.default_rng(1)
    for seed in (0, 1, 2, 3, 4, 5, EVAL_SEED_OFFSET, EVAL_SEED_OFFSET + 1):
        env = AlfWorldTextEnv(max_turns=60, action_prompt=False)
        _, info = env.reset(seed=seed)
        for _ in range(60):
            actions = info["admissible_actions"]
            assert all(env.parse_action(a) == a for a in actions)
            assert all(env.parse_action(f"<answer>{a.upper()}.</answer>") == a for a in actions)
            obs, _, terminated, truncated, info = env.step(actions[int(rng.integers(len(actions)))])
            assert obs != NOTHING_HAPPENS and not info["invalid_action"]
            if terminated or truncated:
                break


# ---- goals and reward --------------------------------------------------------------------------------------

KITCHEN_ITEMS = (("apple 1", "countertop 1"), ("apple 2", "diningtable 1"), ("mug 1", "countertop 1"))
_FETCH = ("go to countertop 1", "take apple 1 from countertop 1")
_PLACE = ("go to cabinet 1", "open cabinet 1", "move apple 1 to cabinet 1")
GOAL_CASES = {
    "pick_and_place_simple": (
        make_scene("pick_and_place_simple", "apple", "cabinet", KITCHEN_ITEMS),
        _FETCH + _PLACE,
        _FETCH + ("go to diningtable 1", "move apple 1 to diningtable 1"),
    ),
    "pick_two_obj_and_place": (
        make_scene("pick_two_obj_and_place", "apple", "cabinet", KITCHEN_ITEMS),
        _FETCH + _PLACE + ("go to diningtable 1", "take apple 2 from diningtable 1", "go to cabinet 1",
                           "move apple 2 to cabinet 1"),
        _FETCH + _PLACE + ("go to countertop 1", "take mug 1 from countertop 1", "go to cabinet 1",
                           "move mug 1 to cabinet 1"),
    ),
    "pick_clean_then_place": (
        make_scene("pick_clean_then_place", "apple", "cabinet", KITCHEN_ITEMS),
        _FETCH + ("go to sinkbasin 1", "clean apple 1 with sinkbasin 1") + _PLACE,
        _FETCH + ("go to microwave 1", "heat apple 1 with microwave 1") + _PLACE,
    ),
    "pick_heat_then_place": (
        make_scene("pick_heat_then_place", "apple", "cabinet", KITCHEN_ITEMS),
        _FETCH + ("go to microwave 1", "heat apple 1 with microwave 1") + _PLACE,
        _FETCH + ("go to microwave 1", "heat apple 1 with microwave 1", "go to fridge 1",
                  "cool apple 1 with fridge 1") + _PLACE,
    ),
    "pick_cool_then_place": (
        make_scene("pick_cool_then_place", "apple", "cabinet", KITCHEN_ITEMS),
        _FETCH + ("go to fridge 1", "cool apple 1 with fridge 1") + _PLACE,
        _FETCH + ("go to fridge 1", "cool apple 1 with fridge 1", "go to diningtable 1",
                  "move apple 1 to diningtable 1"),
    ),
    "look_at_obj_in_light": (
        LAMP_SCENE,
        ("go to bed 1", "take book 1 from bed 1", "go to sidetable 1", "use desklamp 1"),
        ("go to sidetable 1", "use desklamp 1", "take pen 1 from sidetable 1", "go to bed 1", "go to sidetable 1"),
    ),
}


@pytest.mark.parametrize("task_type", TASK_TYPES)
def test_goal_checking_success_and_near_miss(task_type: str) -> None:
    scene_, solution, near_miss = GOAL_CASES[task_type]
    env = start(scene_)
    results = [env.step(command) for command in solution]
    assert all(obs != NOTHING_HAPPENS for obs, *_ in results)
    assert [r[2] for r in results] == [False] * (len(solution) - 1) + [True]
    assert results[-1][1] == 1.0 and results[-1][4]["success"]

    env = start(scene_)
    results = [env.step(command) for command in near_miss]
    assert all(obs != NOTHING_HAPPENS for obs, *_ in results)
    assert not any(r[2] for r in results) and not results[-1][4]["success"]


def test_failure_is_rewarded_minus_one_at_truncation_only() -> None:
    env = start(MUG_SCENE, max_turns=3)
    steps = [env.step(reply) for reply in ("look", "gibberish", "inventory")]
    assert [s[1] for s in steps] == [0.0, 0.0, -1.0]
    assert [s[3] for s in steps] == [False, False, True]
    env = start(MUG_SCENE, max_turns=3)
    steps = [env.step(reply) for reply in ("look", "inventory", "gibberish")]
    assert steps[-1][1] == -1.0 and steps[-1][4]["invalid_action"]


# ---- scripted expert ---------------------------------------------------------------------------------------


class _EpisodeOver(Exception):
    pass


class Expert:
    """Reads the text only (plus the goal): explores receptacles where the object may lie, then fetches,
    treats and places it, remembering every object and lamp it has seen."""

    def __init__(self, env: AlfWorldTextEnv) -> None:
        self.env = env
        self.won = False

    def play(self, seed: int) -> bool:
        obs, _ = self.env.reset(seed=seed)
        goal = self.env.goal
        self.receptacles = re.findall(r"a ([a-z]+ \d+)", obs.split("you see ", 1)[1].split(".\n", 1)[0])
        self.seen: dict[str, str] = {}
        self.lamp: str | None = None
        self.where: str | None = None
        places = OBJECT_TYPES[goal.object_type].places
        self.todo = [r for r in self.receptacles if kind_of(r) in places and kind_of(r) != goal.target_type]
        self.todo += [r for r in self.receptacles if r not in self.todo]
        target = next((r for r in self.receptacles if kind_of(r) == goal.target_type), None)
        try:
            for _ in range(goal.count):
                obj = self.fetch(goal.object_type, exclude=target)
                verb = TREATMENTS.get(goal.task_type)
                if verb is not None:
                    appliance = next(r for r in self.receptacles if kind_of(r) in TREATMENT_APPLIANCES[verb])
                    self.visit(appliance)
                    self.send(f"{verb} {obj} with {appliance}")
                if goal.task_type == "look_at_obj_in_light":
                    while self.lamp is None:
                        self.visit(self.todo[0])
                    self.visit(self.lamp)
                    self.send("use desklamp 1")
                else:
                    assert target is not None
                    self.visit(target)
                    self.send(f"move {obj} to {target}")
        except _EpisodeOver:
            pass
        return self.won

    def send(self, command: str) -> str:
        obs, _, terminated, truncated, info = self.env.step(command)
        self.won = info["won"]
        if terminated or truncated:
            raise _EpisodeOver
        if "you see" in obs and self.where is not None:
            for item in re.findall(r"a ([a-z]+ \d+)", obs.split("you see ", 1)[1]):
                if kind_of(item) == LAMP:
                    self.lamp = self.where
                self.seen[item] = self.where
        return obs

    def visit(self, receptacle: str) -> None:
        if self.where != receptacle:
            self.where = receptacle
            obs = self.send(f"go to {receptacle}")
            if obs.endswith("is closed."):
                self.send(f"open {receptacle}")
        if receptacle in self.todo:
            self.todo.remove(receptacle)

    def fetch(self, object_type: str, exclude: str | None) -> str:
        while True:
            found = [o for o, r in self.seen.items() if kind_of(o) == object_type and r != exclude]
            if found:
                obj = found[0]
                self.visit(self.seen.pop(obj))
                self.send(f"take {obj} from {self.where}")
                return obj
            self.visit(self.todo[0])


def test_scripted_expert_wins_every_task_type() -> None:
    env = AlfWorldTextEnv(action_prompt=False)
    seeds = list(range(100)) + [EVAL_SEED_OFFSET + i for i in range(EVAL_SIZE)]
    wins: Counter[str] = Counter()
    totals: Counter[str] = Counter()
    for seed in seeds:
        won = Expert(env).play(seed)
        totals[env.goal.task_type] += 1
        wins[env.goal.task_type] += won
    rates = {task: f"{wins[task]}/{totals[task]}" for task in TASK_TYPES}
    print(f"expert wins over {len(seeds)} episodes (100 train + {EVAL_SIZE} eval): {rates}")
    assert all(wins[task] >= 20 for task in TASK_TYPES), rates
    assert sum(wins.values()) >= 0.9 * len(seeds), rates
