"""The reference bank (comprl.kit.reference_bank): lessons written from the experts' play on training seeds."""

from __future__ import annotations

import functools
import re
import shutil

import pytest

from comprl.config import make_config
from comprl.envs.base import EVAL_SEED_OFFSET
from comprl.evaluation import evaluation_rows, lookups
from comprl.experience import connect
from comprl.experience.bank import Embedder, ExperienceBank
from comprl.kit.guidance import guidance_row, guided_and_free
from comprl.kit.reference_bank import (
    ALFWORLD,
    MAX_LESSON_TOKENS,
    ORIGIN,
    REFERENCE_TASKS,
    ROOM_LIT,
    SOKOBAN,
    WEBSHOP,
    lesson_tokens,
    play_expert,
    rule_moves,
    training_seeds,
    write_reference_bank,
)
from comprl.llm import HFEngine, load_model, load_tokenizer
from comprl.loop import make_envs

pytest.importorskip("nle", reason="nle/minihack wheels exist only for Linux x86_64")

EPISODES = 6  # expert episodes per task: enough for every kind of lesson, cheap
TASKS = (ROOM_LIT, SOKOBAN, ALFWORLD, WEBSHOP)


@pytest.fixture(scope="module")
def config():
    return make_config("smoke", env_id=ROOM_LIT, method="static")


@pytest.fixture(scope="module")
def bank_file(tmp_path_factory, config):
    path = tmp_path_factory.mktemp("reference") / "reference.duckdb"
    write_reference_bank(path, REFERENCE_TASKS, seed=0, config=config, episodes=EPISODES)
    return path


def _entries(path, config):
    with ExperienceBank(path, Embedder(config.bank.embedder)) as bank:
        return bank.entries(), bank.operations()


def test_every_task_gets_whole_lessons_within_the_cap_written_as_reference_adds(bank_file, config):
    entries, operations = _entries(bank_file, config)
    assert set(entries["task"]) == set(REFERENCE_TASKS)
    tokenizer = load_tokenizer(config.extractor.model)
    for title, content in zip(entries["title"], entries["content"]):
        assert title.strip() and content.strip()
        assert lesson_tokens(tokenizer, title, content) <= MAX_LESSON_TOKENS
    assert set(operations["op"]) == {"add"} and set(operations["origin"]) == {ORIGIN}
    alfworld = entries[entries["task"] == ALFWORLD]
    steps = [content.split("Steps: ")[1].split(". Expert")[0] for content in alfworld["content"]]
    # roles, not names: nothing numbered ("mug 1") outside the [placeholders]
    assert all("[object" in plan and not re.search(r"\d", re.sub(r"\[[^]]*\]", "", plan)) for plan in steps)


def test_lessons_come_from_training_seeds_only():
    for env_id in REFERENCE_TASKS:
        seeds = training_seeds(env_id, EPISODES, seed=3)
        assert len(set(seeds)) == EPISODES and max(seeds) < EVAL_SEED_OFFSET
    with pytest.raises(ValueError, match="not a training seed"):
        play_expert(ROOM_LIT, EVAL_SEED_OFFSET)


WINDS = ("north", "north-northeast", "northeast", "east-northeast", "east", "east-southeast", "southeast",
         "south-southeast", "south", "south-southwest", "southwest", "west-southwest", "west", "west-northwest",
         "northwest", "north-northwest")


def test_the_lit_room_rule_maps_each_stairs_direction_to_one_of_the_eight_moves(bank_file, config):
    entries, _ = _entries(bank_file, config)
    (rule,) = entries[entries["task"] == ROOM_LIT]["content"]
    table = rule_moves(rule)
    assert table and set(table) <= set(WINDS) and set(table.values()) <= set(WINDS[::2])
    made, turns = map(int, re.search(r"on (\d+) of (\d+) turns", rule).groups())
    assert turns >= made >= turns / 2  # each direction's move is the expert's commonest there
    assert rule_moves("Search with the words of the instruction.") == {}


def test_the_same_seed_writes_the_same_bank_and_another_seed_another_order(tmp_path, config):
    def written(name, seed):
        write_reference_bank(tmp_path / name, TASKS, seed=seed, config=config, episodes=EPISODES)
        entries, _ = _entries(tmp_path / name, config)
        return list(zip(entries["id"], entries["task"], entries["title"], entries["content"]))

    first, again, other = written("a.duckdb", 0), written("b.duckdb", 0), written("c.duckdb", 1)
    assert first == again
    # the seed draws other training seeds (so other counts) and writes the tasks in another order
    assert list(dict.fromkeys(task for _, task, _, _ in first)) != list(dict.fromkeys(task for _, task, _, _ in other))


def test_bad_requests_are_refused(tmp_path, config, bank_file):
    with pytest.raises(ValueError, match="accepted"):
        write_reference_bank(tmp_path / "x.duckdb", ["comprl/SWE-Lite-v0"], config=config)
    with pytest.raises(FileExistsError):
        write_reference_bank(bank_file, [ROOM_LIT], config=config)


def test_a_smoke_evaluation_over_a_copy_of_the_bank_guides_every_episode(bank_file, config, tmp_path):
    copy = tmp_path / "bank.duckdb"
    shutil.copyfile(bank_file, copy)  # as bank.init_from does
    config = make_config("smoke", env_id=ROOM_LIT, method="static", eval_episodes=4, **{"experience.warmup": 0})
    model, tokenizer = load_model("tiny-random", seed=0)
    engine = HFEngine(model, tokenizer)
    envs = make_envs(config)
    experience = connect(config, copy, device="cpu")
    try:
        search = functools.partial(experience.search, record=False)
        found = lookups(envs, config, search)[ROOM_LIT]
        assert found is not None and all(entry is not None and entry.task == ROOM_LIT for entry in found)
        metrics = evaluation_rows(engine, envs, config, search)
        assert metrics["guided_eval_gated"] == 0.0 and metrics["episodes"] == 4
    finally:
        experience.close()


def test_guided_and_free_play_the_same_seeds_and_the_row_adds_up(bank_file):
    config = make_config("smoke", env_id=ROOM_LIT, method="static", eval_episodes=4, **{"experience.warmup": 0})
    passes = guided_and_free(config, bank_file, progress=False)
    assert [t.seed for t in passes.free] == [t.seed for t in passes.guided]  # the same held-out seeds, in order
    assert len(passes.shown) == 4 and all(entry is not None for _, entry in passes.shown)
    row = guidance_row(passes)
    assert row["episodes"] == 4 and row["guided_with_entry"] == 4
    assert row["guided_minus_free"] == pytest.approx((row["won_only_guided"] - row["won_only_free"]) / 4)
    assert row["free_low"] <= row["free_success"] <= row["free_high"]
    with pytest.raises(ValueError, match="retrieves nothing"):
        guided_and_free(make_config("smoke", env_id=ROOM_LIT, method="baseline"), bank_file)
