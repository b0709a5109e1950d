"""Experiment tracking: a run's TensorBoard event files, read back with TensorBoard's own reader, hold the values of
its ``run.duckdb`` rows (every numeric metric at every step, under the actor, experience and eval groups); a resumed
run's events still do; ``tracker="none"`` writes none; a tracker whose package is missing names the extra."""

from __future__ import annotations

import math
import sys

import duckdb
import numpy as np
import pytest
from conftest import make_rewarding_even_replies
from tensorboard.backend.event_processing.event_accumulator import SCALARS, EventAccumulator

from comprl import loop, tracking
from comprl.config import ExperimentConfig, make_config
from comprl.envs import mixture
from comprl.runs import Run


class Stop(Exception):
    """Raised from a row callback: the run stops there, as a killed one would."""


def smoke(**overrides) -> ExperimentConfig:
    return make_config(
        "smoke", **{"method": "comp_rl", "steps": 2, "batch_instances": 2, "eval_episodes": 2, **overrides}
    )


def run_experiment(monkeypatch, config: ExperimentConfig, root, **kwargs) -> Run:
    """A smoke run whose replies of even length earn 1, so that both learners update and the bank fills."""
    monkeypatch.setattr(mixture, "make", make_rewarding_even_replies)
    return loop.run_experiment(config, output_dir=root, name="run", progress=False, **kwargs)


def duckdb_scalars(run: Run) -> dict[tuple[str, int], float]:
    """Every numeric value of the run's rows (NULL: not logged in that row), by tracker tag and step."""
    with duckdb.connect(str(run.db_path), read_only=True) as con:
        cursor = con.execute("SELECT * FROM metrics")
        names = [d[0] for d in cursor.description]
        rows = [dict(zip(names, row)) for row in cursor.fetchall()]
    out = {}
    for row in rows:
        for name, value in row.items():
            if name not in ("step", "phase") and isinstance(value, (int, float)):
                out[(tracking.tag(row["phase"], name), row["step"])] = float(value)
    return out


def event_scalars(run: Run) -> dict[tuple[str, int], float]:
    """Every scalar of the run's TensorBoard event files as TensorBoard reads them (one per tag and step)."""
    events = EventAccumulator(str(run.tensorboard_path), size_guidance={SCALARS: 0})
    events.Reload()
    out = {}
    for name in events.Tags()["scalars"]:
        for event in events.Scalars(name):
            assert (name, event.step) not in out, f"{name} twice at step {event.step}"
            out[(name, event.step)] = event.value
    return out


def assert_same(events: dict[tuple[str, int], float], rows: dict[tuple[str, int], float]) -> None:
    assert sorted(events) == sorted(rows)
    for key, value in rows.items():
        # event files hold float32
        assert (math.isnan(value) and math.isnan(events[key])) or np.isclose(events[key], value, rtol=1e-6), key


def test_a_smoke_runs_event_files_hold_its_duckdb_rows_by_group(tmp_path, monkeypatch):
    run = run_experiment(monkeypatch, smoke(), tmp_path)
    rows, events = duckdb_scalars(run), event_scalars(run)
    assert_same(events, rows)
    groups = {name.split("/")[0] for name, _ in events}
    assert groups == {"actor", "experience", "eval"}
    steps = {name: sorted(s for n, s in events if n == name) for name, _ in events}
    assert steps["actor/actor_loss"] == steps["experience/bank_size"] == [1, 2]
    assert steps["eval/success_rate"] == [0, 2]
    for name in ("extractor_loss", "extractor_clip_fraction", "extractor_rejected", "manager_queue"):
        assert steps[f"experience/{name}"], name  # the extractor's diagnostics from its first update on
    assert rows[("experience/bank_size", 2)] > 0  # the rows compared are not all zero


def test_a_resumed_run_appends_events_that_still_match_its_rows(tmp_path, monkeypatch):
    config = smoke(steps=3, eval_episodes=0, checkpoint_every=1)

    def stop_after_step_2(step: int, metrics: dict, phase: str) -> None:
        if step == 2:  # logged after the step-1 checkpoint: the resumed run drops it and logs step 2 again
            raise Stop

    with pytest.raises(Stop):
        run_experiment(monkeypatch, config, tmp_path, callback=stop_after_step_2)
    first = sorted(p.name for p in Run(tmp_path / "run").tensorboard_path.iterdir())
    run = run_experiment(monkeypatch, config, tmp_path, resume=True)
    files = sorted(p.name for p in run.tensorboard_path.iterdir())
    assert len(files) == 2 and set(first) < set(files)  # the first event file is kept, a second one added
    rows, events = duckdb_scalars(run), event_scalars(run)
    assert_same(events, rows)
    assert sorted(s for n, s in events if n == "actor/success_rate") == [1, 2, 3]


def test_tracker_none_writes_no_event_files(tmp_path, monkeypatch):
    run = run_experiment(monkeypatch, smoke(steps=1, eval_episodes=0, tracker="none"), tmp_path)
    assert len(run.metrics()) == 1
    assert not run.tensorboard_path.exists() and not list(tmp_path.rglob("events.out.tfevents*"))


@pytest.mark.parametrize("kind", ["wandb", "mlflow", "trackio"])
def test_a_tracker_whose_package_is_missing_names_its_extra(tmp_path, monkeypatch, kind):
    monkeypatch.setitem(sys.modules, kind, None)  # import of it fails as if it were not installed
    with pytest.raises(ImportError, match=rf"pip install 'comprl\[{kind}\]'"):
        tracking.open_tracker(kind, tmp_path / "tensorboard", "run", {})
    with pytest.raises(ImportError, match=kind):  # the run stops before it loads a model or writes a row
        run_experiment(monkeypatch, smoke(tracker=kind), tmp_path)
    assert not Run(tmp_path / "run").db_path.exists()


def test_an_unknown_tracker_is_refused_with_the_accepted_ones():
    with pytest.raises(ValueError, match="tracker='neptune'; accepted: none, tensorboard, wandb, mlflow, trackio"):
        smoke(tracker="neptune")


def test_the_grouping_rule_and_non_numeric_values():
    assert tracking.scalars("train", {"bank_size": 3, "actor_loss": 0.5, "success_rate": 1, "note": "text"}) == {
        "experience/bank_size": 3.0, "actor/actor_loss": 0.5, "actor/success_rate": 1.0,
    }
    assert tracking.scalars("eval", {"guided_success_rate": 0.25, "eval_shared": True}) == {
        "eval/guided_success_rate": 0.25, "eval/eval_shared": 1.0,
    }
