"""Checkpoints and exact resume: a run killed with SIGKILL and resumed logs what an uninterrupted run logs."""

from __future__ import annotations

import multiprocessing
import os
import signal

import pandas as pd
import pytest

from conftest import make_rewarding_even_replies

from comprl import checkpoint
from comprl.config import make_config
from comprl.runs import Run
from comprl.envs import mixture
from comprl import loop

TIMING = ("seconds", "per_second", "_ms_")


def run_experiment(*args, **kwargs) -> Run:
    """A run on Room whose replies of even length earn 1, so that the actor's updates are not all zero."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(mixture, "make", make_rewarding_even_replies)
        return loop.run_experiment(*args, **kwargs)


def deterministic(run: Run) -> pd.DataFrame:
    """The run's metric rows without wall-time columns."""
    rows = run.metrics()
    return rows[[c for c in rows.columns if not any(t in c for t in TIMING)]].reset_index(drop=True)


def smoke(**overrides):
    return make_config(
        "smoke", **{"method": "comp_rl", "steps": 4, "batch_instances": 2, "eval_episodes": 2, **overrides}
    )


def _killed_at(config_dict: dict, root: str, step: int, when: str) -> None:
    """Child process: run, and SIGKILL itself after ``step``'s row is logged (``when="row"``), or while its second
    checkpoint replaces its first (``"checkpoint"``)."""
    from comprl.config import ExperimentConfig

    config = ExperimentConfig.from_dict(config_dict)
    if when == "row":
        def callback(at: int, metrics: dict, phase: str) -> None:
            if phase == "train" and at == step:
                os.kill(os.getpid(), signal.SIGKILL)
    else:  # between the renames that replace the previous checkpoint by this one: at step 2, the first such
        callback = None
        rename = checkpoint.Path.rename

        def dying_rename(self, target):
            if self.name == "checkpoint.tmp" and (self.parent / "checkpoint.old").exists():
                os.kill(os.getpid(), signal.SIGKILL)
            return rename(self, target)

        checkpoint.Path.rename = dying_rename  # only in this child
    run_experiment(config, root, name="run", progress=False, callback=callback)


def run_killed(config, root, step: int, when: str = "row") -> int:
    process = multiprocessing.get_context("spawn").Process(
        target=_killed_at, args=(config.to_dict(), str(root), step, when)
    )
    process.start()
    process.join(timeout=600)
    return process.exitcode


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    rows = deterministic(run_experiment(smoke(), tmp_path_factory.mktemp("whole"), name="run", progress=False))
    train = rows[rows["phase"] == "train"]
    # every part of the state is exercised: the actor and the extractor train, entries are shown and merged
    assert (train["actor_trained_sequences"] > 0).all() and train["extractor_updates"].sum() > 0
    assert train["guided_with_entry"].sum() > 0 and train["manager_merges"].sum() > 0
    return rows


@pytest.mark.parametrize("step", [1, 3])
def test_a_run_killed_after_logging_a_step_resumes_to_the_same_rows(tmp_path, uninterrupted, step):
    # killed after step's row is logged but before its checkpoint: the row is dropped and the step redone
    assert run_killed(smoke(), tmp_path, step) == -signal.SIGKILL
    run = Run(tmp_path / "run")
    last = checkpoint.latest(run.path)
    assert not run.finished and (last.step if last else 0) == step - 1
    resumed = run_experiment(smoke(), tmp_path, name="run", progress=False, resume=True)
    assert resumed.finished
    pd.testing.assert_frame_equal(deterministic(resumed), uninterrupted)


def test_a_kill_while_a_checkpoint_replaces_the_last_one_leaves_a_complete_one(tmp_path, uninterrupted):
    assert run_killed(smoke(), tmp_path, 0, when="checkpoint") == -signal.SIGKILL
    run = Run(tmp_path / "run")
    assert (run.path / "checkpoint.old").exists() and not (run.path / "checkpoint").exists()
    assert checkpoint.latest(run.path).step == 1  # the previous one, moved back
    resumed = run_experiment(smoke(), tmp_path, name="run", progress=False, resume=True)
    pd.testing.assert_frame_equal(deterministic(resumed), uninterrupted)


def test_a_finished_run_is_not_run_again_and_a_changed_config_is_refused(tmp_path):
    config = smoke(steps=1, eval_episodes=0)
    run = run_experiment(config, tmp_path, name="run", progress=False)
    rows = run.metrics()
    assert run.finished and checkpoint.latest(run.path).step == 1
    again = run_experiment(config, tmp_path, name="run", progress=False, resume=True)
    pd.testing.assert_frame_equal(again.metrics(), rows)
    with pytest.raises(ValueError, match=r"another config \(actor.learning_rate: 0.0001 -> 0.001"):
        run_experiment(
            smoke(steps=1, eval_episodes=0, **{"actor.learning_rate": 1e-3}), tmp_path, name="run", resume=True
        )
    fresh = run_experiment(config, tmp_path, name="run", progress=False)  # resume=False starts the folder afresh
    assert len(fresh.metrics()) == len(rows)


def test_a_finished_lora_run_exports_its_adapters_and_they_can_be_evaluated(tmp_path):
    config = smoke(steps=1, eval_episodes=0, **{"actor.lora_rank": 4})
    run = run_experiment(config, tmp_path, name="lora", progress=False)
    adapters = checkpoint.load_adapters(run.path)
    trained = checkpoint.latest(run.path).state()["actor"]["weights"]
    assert sorted(adapters) == sorted(trained) and all("lora_" in name for name in adapters)
    for name, weight in trained.items():  # float16 copies of the final weights
        assert (adapters[name] - weight).abs().max() <= 1e-3 * max(weight.abs().max().item(), 1e-3)
    assert any(w.abs().sum() > 0 for n, w in adapters.items() if "lora_B" in n)  # B starts at 0: it was trained
    result = loop.evaluate_trained(run, episodes=3)
    assert result["episodes"] == 3 and 0 <= result["success_rate"] <= 1
    full = run_experiment(smoke(steps=1, eval_episodes=0), tmp_path, name="full", progress=False)
    assert not (full.path / checkpoint.ACTOR_ADAPTERS).exists()
    with pytest.raises(FileNotFoundError, match="no exported actor adapters"):
        loop.evaluate_trained(full)
