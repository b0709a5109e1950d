"""Checkpoints and exact resume: a run killed with SIGKILL and resumed logs what an uninterrupted run logs."""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
import time
from pathlib import Path

import pandas as pd
import pytest
import torch

from conftest import make_rewarding_even_replies

from comprl import checkpoint
from comprl.actor.trainer import ActorTrainer
from comprl.config import make_config
from comprl.experience.bank import ExperienceBank
from comprl.experience.manager import ExperienceManager
from comprl.llm import load_model
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
    """The run's metric rows without wall-time columns, and without ``eval_shared``, which says where a step-0 row
    came from (a run killed before its first checkpoint starts again and reads the step-0 rows it played), not
    what it holds."""
    rows = run.metrics()
    keep = [c for c in rows.columns if not any(t in c for t in TIMING) and c != "eval_shared"]
    return rows[keep].reset_index(drop=True)


def smoke(**overrides):
    return make_config(
        "smoke", **{"method": "comp_rl", "steps": 4, "batch_instances": 2, "eval_episodes": 2, **overrides}
    )


def _killed_at(config_dict: dict, root: str, step: int, when: str) -> None:
    """Child process: run, and SIGKILL itself after ``step``'s row is logged, once the previous step's checkpoint
    is committed (``when="row"``); while its second checkpoint replaces its first (``"checkpoint"``); or while
    ``step``'s checkpoint is written, before its manifest, held until the next step's row is logged (``"write"``)."""
    from comprl.config import ExperimentConfig

    config = ExperimentConfig.from_dict(config_dict)
    if when == "row":
        def callback(at: int, metrics: dict, phase: str) -> None:
            if phase == "train" and at == step:
                while (checkpoint.covered_step(Path(root) / "run") or 0) < step - 1:  # written in the background
                    time.sleep(0.05)
                os.kill(os.getpid(), signal.SIGKILL)
    elif when == "write":
        logged = threading.Event()
        commit = checkpoint._write_manifest

        def held_commit(folder, at: int) -> None:
            if at == step:
                logged.wait()
                os.kill(os.getpid(), signal.SIGKILL)
            commit(folder, at)

        def callback(at: int, metrics: dict, phase: str) -> None:
            if phase == "train" and at == step + 1:
                logged.set()

        checkpoint._write_manifest = held_commit  # only in this child
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
    # each call noted where it computed, from the step after its start; with no checkpoint the run started afresh
    machines = resumed.machines()
    assert [m["after_step"] for m in machines] == ([0] if step == 1 else [0, step - 1])
    assert all(m["dtype"] == "float32" and m["device"].startswith("CPU: ") and m["cores"] >= 1 for m in machines)


def test_a_run_under_the_lesson_grammar_resumes_to_the_same_rows(tmp_path):
    # the merges' grammar reads its actions from the bank's lessons, which the checkpoint holds: no state is lost
    grammar = smoke(**{"extractor.lesson_grammar": True, "rollout.constrained_actions": True})
    whole = run_experiment(grammar, tmp_path / "whole", name="run", progress=False)
    rows = deterministic(whole)
    assert rows.loc[rows["phase"] == "train", "manager_merges"].sum() > 0
    import duckdb

    with duckdb.connect(str(whole.path / "bank.duckdb"), read_only=True) as bank:
        lessons = [content for (content,) in bank.execute("SELECT content FROM entries").fetchall()]
    assert lessons and all(lesson.split(" ", 1)[0] in ("Prefer", "Avoid") and " when" in lesson for lesson in lessons)
    assert run_killed(grammar, tmp_path / "killed", 3) == -signal.SIGKILL
    resumed = run_experiment(grammar, tmp_path / "killed", name="run", progress=False, resume=True)
    pd.testing.assert_frame_equal(deterministic(resumed), rows)


def test_a_run_trained_with_gradient_checkpointing_resumes_without_it_to_the_same_rows(tmp_path, uninterrupted):
    # steps 1-2 trained with both learners' activations recomputed; the resumed steps keep them: same rows, bit
    # for bit, as the uninterrupted run that never recomputed (the smoke profile's default)
    recomputing = smoke(**{"actor.gradient_checkpointing": True, "extractor.gradient_checkpointing": True})
    assert smoke().actor.gradient_checkpointing is False
    assert run_killed(recomputing, tmp_path, 3) == -signal.SIGKILL
    assert checkpoint.latest(tmp_path / "run").step == 2
    resumed = run_experiment(smoke(), tmp_path, name="run", progress=False, resume=True)
    pd.testing.assert_frame_equal(deterministic(resumed), uninterrupted)


def test_a_kill_while_a_checkpoint_replaces_the_last_one_leaves_a_complete_one(tmp_path, uninterrupted):
    assert run_killed(smoke(), tmp_path, 0, when="checkpoint") == -signal.SIGKILL
    run = Run(tmp_path / "run")
    assert (run.path / "checkpoint.old").exists() and not (run.path / "checkpoint").exists()
    assert checkpoint.latest(run.path).step == 1  # the previous one, moved back
    resumed = run_experiment(smoke(), tmp_path, name="run", progress=False, resume=True)
    pd.testing.assert_frame_equal(deterministic(resumed), uninterrupted)


def test_a_kill_while_a_checkpoint_is_written_in_the_background_resumes_from_the_previous_one(tmp_path, uninterrupted):
    # step 2's checkpoint is held before its manifest until step 3's row is logged, then the process is killed
    assert run_killed(smoke(), tmp_path, 2, when="write") == -signal.SIGKILL
    run = Run(tmp_path / "run")
    assert 3 in set(run.metrics().query("phase == 'train'")["step"])  # trained while step 2's checkpoint was written
    assert checkpoint.latest(run.path).step == 1
    resumed = run_experiment(smoke(), tmp_path, name="run", progress=False, resume=True)
    pd.testing.assert_frame_equal(deterministic(resumed), uninterrupted)


def held(write, release: threading.Event):
    """``write``, made to wait for ``release`` (a save that waited for its write would never see it set)."""
    def wrapper(*args, **kwargs):
        if not release.wait(timeout=120):
            raise AssertionError(f"{write.__name__} was held until the save returned, and the save waited for it")
        return write(*args, **kwargs)

    return wrapper


def test_a_save_returns_before_its_files_are_written_and_keeps_the_state_of_its_step(tmp_path, monkeypatch):
    config = smoke()
    model, tokenizer = load_model("tiny-random", seed=0)
    actor = ActorTrainer(model, tokenizer.pad_token_id, config.actor)
    manager = ExperienceManager(config, tmp_path / "bank.duckdb")
    release = threading.Event()
    monkeypatch.setattr(ExperienceBank, "snapshot", held(ExperienceBank.snapshot, release))
    monkeypatch.setattr(checkpoint, "_write_manifest", held(checkpoint._write_manifest, release))
    weights, rng = actor.state_dict()["weights"], checkpoint.rng_state()
    writer = checkpoint.Writer(tmp_path)
    writer.save(1, actor, manager)  # returns while the bank's copy and the manifest wait
    assert checkpoint.covered_step(tmp_path) is None and (tmp_path / "checkpoint.tmp").is_dir()
    actor.load_weights({name: weight + 1 for name, weight in weights.items()})  # training goes on, in place
    torch.rand(3)
    release.set()
    assert writer.wait().step == 1
    state = checkpoint.latest(tmp_path).state()
    assert state["actor"]["weights"].keys() == weights.keys()
    assert all(torch.equal(state["actor"]["weights"][name], weight) for name, weight in weights.items())
    assert state["rng"]["python"] == rng["python"] and torch.equal(state["rng"]["torch"], rng["torch"])
    assert (tmp_path / "checkpoint" / "experience" / "bank.duckdb").is_file()
    manager.close()


def test_a_copied_state_is_not_changed_by_training_after_it():
    layer = torch.nn.Linear(3, 2)
    optimizer = torch.optim.AdamW(layer.parameters())

    def train() -> None:
        layer(torch.randn(4, 3)).square().sum().backward()
        optimizer.step()

    train()
    live = optimizer.state_dict()
    moments = [moment.clone() for moment in (live["state"][0]["exp_avg"], live["state"][0]["exp_avg_sq"])]
    copy = checkpoint.copied({"optimizer": live, "twice": [moments, moments]})
    train()  # AdamW updates its moments in place: the live state dict sees the change
    assert not torch.equal(live["state"][0]["exp_avg"], moments[0])
    assert torch.equal(copy["optimizer"]["state"][0]["exp_avg"], moments[0])
    assert torch.equal(copy["optimizer"]["state"][0]["exp_avg_sq"], moments[1])
    assert copy["twice"][0] is copy["twice"][1]  # an object held twice stays one


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


def test_a_run_can_start_its_actor_from_a_finished_runs_adapters(tmp_path):
    lora = {"actor.lora_rank": 4}
    source = run_experiment(smoke(steps=1, eval_episodes=0, **lora), tmp_path, name="source", progress=False)
    adapters = checkpoint.load_adapters(source.path)
    frozen = smoke(steps=1, method="exp_only", **lora, **{"actor.init_from": str(source.path)})
    for trainer in (None, "training"):  # a frozen actor gets the adapters as a training one does
        model, tokenizer = load_model(frozen.model, seed=frozen.seed)
        actor = ActorTrainer(model, tokenizer.pad_token_id, frozen.actor) if trainer else None
        started = dict(loop._starting_actor(frozen, model, tokenizer, actor).named_parameters())
        assert all(torch.allclose(started[name].float(), weight) for name, weight in adapters.items())
    assert any(weight.abs().sum() > 0 for name, weight in adapters.items() if "lora_B" in name)  # not a fresh one
    run = run_experiment(frozen, tmp_path, name="frozen", progress=False)
    assert run.finished and not (run.path / checkpoint.ACTOR_ADAPTERS).exists()  # it trained nothing to export
    # its step-0 evaluation is shared with runs that start from the same adapters only
    again = smoke(steps=1, method="comp_rl", **lora, **{"actor.init_from": str(source.path)})
    untrained = smoke(steps=1, method="exp_only", **lora)
    shared = [
        run_experiment(c, tmp_path, name=n, progress=False).metrics().query("phase == 'eval' and step == 0")
        for c, n in ((again, "again"), (untrained, "untrained"))
    ]
    assert [float(rows["eval_shared"].iloc[0]) for rows in shared] == [1.0, 0.0]
    with pytest.raises(ValueError, match=r"trained tiny-random with lora_rank=4; this run's actor is tiny-random "
                                         r"with lora_rank=8: they must be the same"):
        run_experiment(smoke(steps=1, **{"actor.lora_rank": 8, "actor.init_from": str(source.path)}), tmp_path,
                       name="other", progress=False)
    with pytest.raises(ValueError, match="accepted: lora_rank > 0"):
        smoke(**{"actor.init_from": str(source.path)})
