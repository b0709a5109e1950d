"""Evaluation without duplicate work: its own random streams, the shared step-0 rows, the gated guided pass."""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass

import pytest
import torch

from comprl import loop
from comprl.config import make_config
from comprl.evaluation import SHARED_FOLDER, evaluate, evaluation_rows
from comprl.llm import HFEngine

TIMING = ("seconds", "per_second", "_ms_")


@pytest.fixture(scope="module")
def setup(tiny):
    model, tokenizer = tiny
    config = make_config("smoke", eval_episodes=3, max_turns=2)
    return HFEngine(model, tokenizer), loop.make_envs(config), config


@dataclass(frozen=True)
class Lesson:
    """An entry as the actor sees it."""

    id: int
    text: str


def _nothing(queries, tasks, seeds):
    return [None] * len(queries)


def test_an_evaluation_depends_on_its_config_not_on_the_callers_random_stream(setup):
    engine, envs, config = setup
    torch.manual_seed(1)
    first = evaluate(engine, envs, config)
    after = torch.rand(1)
    torch.manual_seed(2)
    assert evaluate(engine, envs, config) == first
    torch.manual_seed(1)
    evaluate(engine, envs, config)
    assert torch.equal(torch.rand(1), after)  # the caller's stream is where it would be without the evaluation


def test_a_bank_that_answers_nothing_gives_the_free_episodes_without_playing_them_again(setup):
    engine, envs, config = setup
    free = evaluate(engine, envs, config)
    played = engine.stats["generated_tokens"]
    rows = evaluation_rows(engine, envs, config, _nothing)
    assert engine.stats["generated_tokens"] - played == pytest.approx(rows["mean_action_tokens"] * rows["episodes"])
    assert rows["guided_eval_gated"] == 1.0
    assert rows["eval_pass_seconds"] == rows["eval_seconds"] > 0  # one pass played
    assert {k: rows[f"guided_{k}"] for k in free if not k.endswith("episodes")} == {
        k: v for k, v in free.items() if not k.endswith("episodes")
    }
    # and the guided pass, played, is indeed the free one: the same prompts on the same random streams
    assert evaluate(engine, envs, config, search=_nothing) == free


def test_an_answering_bank_gets_a_guided_pass_of_its_own(setup):
    engine, envs, config = setup
    lesson = Lesson(7, "Walk to the stairs and step on them.")
    rows = evaluation_rows(engine, envs, config, lambda queries, tasks, seeds: [lesson] * len(queries))
    assert rows["guided_eval_gated"] == 0.0
    assert rows["guided_mean_sequence_tokens"] > rows["mean_sequence_tokens"]  # the lesson is in every prompt
    assert rows["eval_pass_seconds"] == pytest.approx(rows["eval_seconds"] / 2)  # two passes played


def test_the_step_0_rows_are_shared_by_the_runs_of_one_folder_and_keyed_by_their_config(tmp_path):
    def run(**overrides):
        config = make_config("smoke", steps=1, eval_episodes=2, **overrides)
        return loop.run_experiment(config, tmp_path, progress=False).metrics()

    baseline = run(method="baseline")
    comp_rl = run(method="comp_rl")
    other = run(method="baseline", eval_temperature=0.5)
    rows = [r[(r["phase"] == "eval") & (r["step"] == 0)].iloc[0] for r in (baseline, comp_rl, other)]
    assert [r["eval_shared"] for r in rows] == [0.0, 1.0, 0.0]
    keep = [c for c in baseline.columns if c != "eval_shared" and not any(t in c for t in TIMING)]
    free = rows[0][keep].dropna()
    assert rows[1][free.index].to_dict() == free.to_dict()  # the same numbers, read, not played
    assert rows[1]["guided_eval_gated"] == 1.0  # an empty bank answers nothing: no guided pass either
    assert math.isnan(rows[1]["eval_pass_seconds"]) and rows[0]["eval_pass_seconds"] > 0  # no pass played to time
    assert rows[1]["guided_success_rate"] == rows[1]["success_rate"]
    assert len(list((tmp_path / SHARED_FOLDER).glob("*.json"))) == 2


def test_without_a_bar_an_evaluation_logs_a_line_per_chunk_with_the_time_left(setup, caplog):
    engine, _, smoke = setup
    chunk = smoke.batch_instances * smoke.group_size  # a task's envs: the episodes played at once
    config = make_config("smoke", eval_episodes=2 * chunk + 1, max_turns=1)
    envs = loop.make_envs(config)
    lesson = Lesson(7, "Walk to the stairs and step on them.")

    def answers(queries, tasks, seeds):  # every query answered: two passes, free and guided
        return [lesson] * len(queries)

    say = logging.getLogger("comprl.test_evaluation")
    with caplog.at_level(logging.INFO, logger="comprl"):
        evaluation_rows(engine, envs, config, answers)  # neither a bar nor a logger to tell: silent
        assert caplog.messages == []
        evaluation_rows(engine, envs, config, answers, progress=False, say=say)
    total = 2 * config.eval_episodes
    done = [chunk, 2 * chunk, config.eval_episodes, config.eval_episodes + chunk, config.eval_episodes + 2 * chunk]
    assert [m.split(" in ")[0] for m in caplog.messages] == [f"evaluation: {n} of {total} episodes" for n in done]
    assert all(m.endswith(" min left") for m in caplog.messages)
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="comprl"):
        evaluation_rows(engine, envs, config, answers, progress=True, say=say)  # a bar instead
    assert caplog.messages == []


def test_a_run_without_a_bar_names_itself_on_its_evaluation_lines(tmp_path, caplog):
    smoke = make_config("smoke", method="baseline")
    chunk = smoke.batch_instances * smoke.group_size
    config = make_config("smoke", method="baseline", steps=1, max_turns=1, eval_episodes=2 * chunk)
    with caplog.at_level(logging.INFO, logger="comprl"):
        loop.run_experiment(config, tmp_path, name="mine", progress=False)
    lines = [m.split(" in ")[0] for m in caplog.messages if "evaluation: " in m]
    assert lines == [f"mine: evaluation: {chunk} of {2 * chunk} episodes"] * 2  # before and after training
