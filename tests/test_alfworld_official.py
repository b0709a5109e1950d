"""The official-ALFWorld adapter and the cross-check of our simulator against alfworld's engine.

Every test but the first needs the optional ``alfworld`` package (``pip install 'comprl[alfworld]'``) and is
skipped without it (the ``alfworld`` fixture). The first checks the error a user without the extra gets.
"""

from __future__ import annotations

import importlib.util
import random
import re
from pathlib import Path

import pytest

from comprl.envs.alfworld.env import AlfWorldTextEnv, scene_indices
from comprl.envs.alfworld.official import (
    DATA_ENV_VAR,
    OFFICIAL_TASK_TYPES,
    AlfWorldOfficialEnv,
    expert_plan,
    export_pddl_game,
    make_engine,
)
from comprl.envs.alfworld.goals import TASK_TYPES
from comprl.envs.alfworld.scenes import RECEPTACLE_TYPES, Scene, kind_of, scene
from comprl.envs.base import EVAL_SEED_OFFSET

WALK_STEPS = 20
TREAT_VERBS = ("heat", "cool", "clean")


def test_missing_extra_raises_import_error_naming_the_extra(tmp_path: Path) -> None:
    if importlib.util.find_spec("alfworld") is not None:
        pytest.skip("alfworld is installed; this checks the message shown without it")
    with pytest.raises(ImportError, match=r"pip install 'comprl\[alfworld\]'"):
        AlfWorldOfficialEnv(data_dir=tmp_path)
    with pytest.raises(ImportError, match=r"comprl\[alfworld\]"):
        export_pddl_game(scene("train", 0), tmp_path / "game")


@pytest.fixture
def alfworld():
    return pytest.importorskip("alfworld")


def _seeds_per_task(per_task: int) -> list[int]:
    """Training seeds covering every task type, `per_task` of each."""
    return [index for task in TASK_TYPES for index in scene_indices("train", task)[:per_task]]


def _answer(command: str) -> str:
    return f"<answer>{command}</answer>"


def _listed(text: str) -> list[str]:
    """The entity names an observation lists ("a mug 1, and a fork 2" -> ["mug 1", "fork 2"]), sorted."""
    return sorted(re.findall(r"\ban? ([a-z]+ \d+)", text))


class _Pair:
    """Our simulator and alfworld's engine on the same exported scene."""

    def __init__(self, played: Scene, folder: Path) -> None:
        self.game_file = export_pddl_game(played, folder)
        self.ours = AlfWorldTextEnv(max_turns=1000, action_prompt=False)
        self.ours.reset(options={"scene": played})
        self.engine = make_engine()
        self.engine.load(str(self.game_file))
        self.state = self.engine.reset()
        self.intro = str(self.state["feedback"])

    def commands(self) -> tuple[set[str], set[str]]:
        return set(self.ours.action_words), set(self.state["admissible_commands"])

    def play(self, command: str) -> tuple[tuple[str, bool, bool], tuple[str, bool, bool]]:
        observation, _, terminated, _, info = self.ours.step(_answer(command))
        self.state, _, done = self.engine.step(command)
        return (observation, info["won"], terminated), (str(self.state["feedback"]), bool(self.state["won"]), done)


def _masked(text: str) -> str:
    """`text` with every entity name replaced by one placeholder (so the listing order does not matter)."""
    return re.sub(r"\ban? [a-z]+ \d+", "a THING", text)


def _check_feedback(command: str, ours: str, theirs: str) -> None:
    """Same text for state changes; for views of a receptacle the same first sentence and the same things
    listed (the engine lists a receptacle's contents in its own order)."""
    verb, _, rest = command.partition(" ")
    if verb in ("take", "move", "close", *TREAT_VERBS, "inventory"):
        assert ours.strip() == theirs.strip(), command
    viewed = rest[len("to ") :] if verb == "go" else rest
    if verb in ("go", "open") or (verb == "examine" and kind_of(viewed) in RECEPTACLE_TYPES):
        assert _masked(ours.split(". ", 1)[0]) == _masked(theirs.split(". ", 1)[0]), command
        assert _listed(ours) == _listed(theirs), command


@pytest.mark.parametrize("seed", _seeds_per_task(2))
def test_random_walks_agree_with_the_alfworld_engine(alfworld, tmp_path: Path, seed: int) -> None:
    played = scene("train", seed)
    pair = _Pair(played, tmp_path / "game")
    assert pair.intro.rstrip().endswith(f"Your task is to: {played.goal.text}")
    assert _listed(pair.intro) == sorted(played.receptacles)
    rng = random.Random(seed)
    for _ in range(WALK_STEPS):
        ours, theirs = pair.commands()
        assert ours == theirs
        command = rng.choice(sorted(ours))
        (our_text, our_won, our_done), (their_text, their_won, their_done) = pair.play(command)
        _check_feedback(command, our_text, their_text)
        assert our_won == their_won
        assert our_done == their_done
        if our_done:
            break


@pytest.mark.parametrize("seed", _seeds_per_task(2))
def test_expert_plan_wins_in_both_engines_on_its_last_command(alfworld, tmp_path: Path, seed: int) -> None:
    played = scene("train", seed)
    pair = _Pair(played, tmp_path / "game")
    plan = expert_plan(played)
    for i, command in enumerate(plan):
        ours, theirs = pair.commands()
        assert command in ours and command in theirs
        (_, our_won, _), (_, their_won, _) = pair.play(command)
        last = i == len(plan) - 1
        assert our_won == last and their_won == last, command


def test_a_lamp_used_twice_still_counts_as_on_in_both(alfworld, tmp_path: Path) -> None:
    played = scene("train", scene_indices("train", "look_at_obj_in_light")[0])
    pair = _Pair(played, tmp_path / "game")
    host = dict(played.placements)
    lamp_host = host["desklamp 1"]
    obj = next(o for o, _ in played.placements if kind_of(o) == played.goal.object_type)
    commands = [f"go to {lamp_host}", "use desklamp 1", "use desklamp 1", f"go to {host[obj]}"]
    if RECEPTACLE_TYPES[kind_of(host[obj])].openable:
        commands.append(f"open {host[obj]}")
    commands.append(f"take {obj} from {host[obj]}")
    if host[obj] != lamp_host:
        commands.append(f"go to {lamp_host}")
    for command in commands:
        (_, our_won, _), (_, their_won, _) = pair.play(command)
    assert their_won and our_won


def _fake_data(root: Path) -> dict[str, list[int]]:
    """An ALFWORLD_DATA tree of exported comprl scenes: 3 training games, 2 out-of-distribution ones."""
    chosen = {"train": [0, 1, 2], "valid_unseen": [0, 1]}
    for folder, indices in chosen.items():
        split = "train" if folder == "train" else "eval"
        for index in indices:
            played = scene(split, index)
            task = OFFICIAL_TASK_TYPES[played.goal.task_type]
            export_pddl_game(played, root / "json_2.1.1" / folder / f"{task}-comprl-{index}" / "trial_1")
    return chosen


def test_official_adapter_plays_a_game_folder_laid_out_as_alfworld_data(
    alfworld, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fake_data(tmp_path)
    monkeypatch.setenv(DATA_ENV_VAR, str(tmp_path))
    env = AlfWorldOfficialEnv()
    assert len(env.game_files("train")) == 3 and len(env.game_files("eval_out_of_distribution")) == 2

    observation, info = env.reset(seed=1)
    assert observation.startswith("-= Welcome to TextWorld, ALFRED! =-")
    assert info["admissible_actions"] and "look" in info["admissible_actions"]
    first = env.game_file
    env.reset(seed=4)
    assert env.game_file == first  # seed mod 3
    env.reset(seed=EVAL_SEED_OFFSET + 1)
    assert "valid_unseen" in str(env.game_file)

    # An invalid reply is answered by text and counted; an inadmissible command gets "Nothing happens.".
    env.reset(seed=0)
    observation, reward, terminated, truncated, info = env.step("no tags, no command")
    assert info["invalid_action"] and reward == 0.0 and not (terminated or truncated)
    observation, reward, terminated, _, info = env.step(_answer("go to nowhere 7"))
    assert not info["invalid_action"] and observation.startswith("Nothing happens.")

    # The walkthrough stored in the game wins with +1.
    seed = next(i for i, path in enumerate(env.game_files("train")) if "-comprl-0" in str(path))
    env.reset(seed=seed)
    played = scene("train", 0)
    reward = 0.0
    for command in expert_plan(played):
        assert command in env.action_words
        _, reward, terminated, truncated, info = env.step(_answer(command))
    assert reward == 1.0 and terminated and info["won"] and not truncated

    # Truncating an unsolved episode costs -1.
    short = AlfWorldOfficialEnv(data_dir=tmp_path, split="train", max_turns=2)
    short.reset(seed=2)
    assert short.step(_answer("look"))[1] == 0.0
    _, reward, terminated, truncated, _ = short.step(_answer("look"))
    assert reward == -1.0 and truncated and not terminated


def test_official_adapter_names_the_data_variable_when_data_is_missing(
    alfworld, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(DATA_ENV_VAR, raising=False)
    with pytest.raises(FileNotFoundError, match=DATA_ENV_VAR):
        AlfWorldOfficialEnv()
    with pytest.raises(FileNotFoundError, match=r"json_2\.1\.1"):
        AlfWorldOfficialEnv(data_dir=tmp_path)
