"""``comprl.run_experiments``: several runs at once, one process per core, the same rows as one after another."""

from __future__ import annotations

import logging
import os
import re
import signal

import pandas as pd
import pytest
import torch

from comprl import checkpoint, run_experiments
from comprl.kit import parallel
from comprl.config import make_config
from comprl.runs import Run

TIMING = ("seconds", "per_second", "_ms_")  # wall-time columns, as in test_resume.py


def rows(run) -> pd.DataFrame:
    """A run's metric rows without wall-time columns."""
    metrics = run.metrics()
    return metrics[[c for c in metrics.columns if not any(t in c for t in TIMING)]].reset_index(drop=True)


def plan(**overrides) -> dict:
    """Two one-step runs of the tiny models, one with the extractor and one without."""
    settings = {"steps": 1, "eval_episodes": 0, **overrides}
    return {
        "comp_rl_seed0": make_config("smoke", method="comp_rl", seed=0, **settings),
        "baseline_seed1": make_config("smoke", method="baseline", seed=1, **settings),
    }


class Started(logging.Handler):
    """Collects comprl's log lines and the process id of every worker started; calls ``then(name, pid)`` on each."""

    def __init__(self, then=None) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []
        self.pids: dict[str, int] = {}
        self.then = then

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())
        found = re.match(r"(\w+): started in process (\d+) on core", record.getMessage())
        if found:
            self.pids[found[1]] = int(found[2])
            if self.then is not None:
                self.then(found[1], int(found[2]))


@pytest.fixture
def started(monkeypatch):
    """A :class:`Started` on comprl's logger; two workers may share this process's first core (the tests also
    pass under ``taskset -c 1``)."""
    core = parallel.usable_cores()[0]
    monkeypatch.setattr(parallel, "usable_cores", lambda: [core, core])
    logger = logging.getLogger("comprl")
    handler = Started()
    level = logger.level
    logger.setLevel(logging.INFO)
    logger.addHandler(handler)
    yield handler
    logger.removeHandler(handler)
    logger.setLevel(level)


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


@pytest.mark.timeout(600)
def test_two_runs_at_once_log_the_rows_of_the_same_runs_one_after_another(tmp_path, started, monkeypatch):
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as a worker has: the reference rows come from the same arithmetic
    try:
        one_by_one = run_experiments(plan(), tmp_path / "serial", jobs=1)
    finally:
        torch.set_num_threads(threads)
    started.lines.clear()

    def not_here(*args, **kwargs):
        raise AssertionError("with jobs=2 no run is made in the calling process")

    with monkeypatch.context() as patch:
        patch.setattr("comprl.loop.run_experiment", not_here)
        at_once = run_experiments(plan(), tmp_path / "parallel", jobs=2, compact=True)

    assert list(at_once) == list(plan())  # plan order
    assert sorted(started.pids) == sorted(plan()) and len(set(started.pids.values())) == 2  # a process per run
    assert os.getpid() not in started.pids.values() and all(map(gone, started.pids.values()))
    for name, run in at_once.items():
        assert run.finished and run.path == tmp_path / "parallel" / name
        assert run.compacted and not one_by_one[name].compacted  # each as its worker ended (compact=True)
        pd.testing.assert_frame_equal(rows(run), rows(one_by_one[name]))
    # the workers' log lines are logged here, whole
    assert (
        sum(line.startswith(("comp_rl_seed0: step 1/1: ", "baseline_seed1: step 1/1: ")) for line in started.lines) == 2
    )
    assert "comp_rl_seed0: done (1 of 2 runs)" in started.lines or "comp_rl_seed0: done (2 of 2 runs)" in started.lines
    # the plan's ETA after each training step (the workers show no progress bar)
    eta = r"(\d) training steps left in the plan; about \d+\.\d min at this call's pace"  # no evaluation to come
    etas = [re.fullmatch(eta, line) for line in started.lines]
    assert [int(eta[1]) for eta in etas if eta] == [1]  # after the first step; none once no step is left

    # the same call again finds both runs finished, and starts no process for them
    started.lines.clear()
    started.pids.clear()
    again = run_experiments(plan(), tmp_path / "parallel", jobs=2)
    assert [run.path for run in again.values()] == [run.path for run in at_once.values()]
    assert sum("finished already" in line for line in started.lines) == 2 and started.pids == {}


def test_the_eta_counts_the_steps_left_and_the_last_evaluations_at_this_calls_pace(tmp_path, caplog):
    runs = {
        "comp_rl_seed0": make_config("smoke", method="comp_rl", steps=4, eval_episodes=8),
        "baseline_seed0": make_config("smoke", method="baseline", steps=4, eval_episodes=8),
    }
    assert [parallel._episodes_per_pass(config) for config in runs.values()] == [8, 8]  # one task each
    pace = parallel._Pace(runs, tmp_path, jobs=2)
    pace.row("baseline_seed0", 0, "eval", {"eval_pass_seconds": 8.0})  # 1 s per episode
    pace.row("comp_rl_seed0", 0, "eval", {"eval_pass_seconds": float("nan")})  # rows read: no pass timed
    with caplog.at_level(logging.INFO, logger="comprl.kit.parallel"):
        pace.logged("baseline_seed0", 1, "train", {"step_seconds": 10.0})
        pace.logged("comp_rl_seed0", 1, "train", {"step_seconds": 20.0})
    # 3 steps each at 15 s, then a free pass of 8 s (baseline) or a free and a guided one (comp_rl): 53 s and
    # 61 s, on 2 cores at once: the longer run's 61 s
    assert pace.minutes_left() == pytest.approx(61 / 60)
    assert caplog.messages[-1] == (
        "6 training steps left in the plan; about 1.0 min at this call's pace, the last evaluations included"
    )
    assert parallel._Pace(runs, tmp_path, jobs=1).minutes_left() == 0.0  # nothing timed yet
    one_core = parallel._Pace(runs, tmp_path, jobs=1)
    for name, seconds in (("baseline_seed0", 10.0), ("comp_rl_seed0", 20.0)):
        one_core.row(name, 0, "eval", {"eval_pass_seconds": 8.0})
        one_core.row(name, 1, "train", {"step_seconds": seconds})
    assert one_core.minutes_left() == pytest.approx((53 + 61) / 60)  # one after another
    one_core.row("comp_rl_seed0", 4, "eval", {"eval_pass_seconds": 8.0})  # its last evaluation, done
    one_core.run_done("baseline_seed0")
    assert one_core.minutes_left() == pytest.approx(45 / 60) and one_core._said() == ""


def test_the_eta_starts_a_resumed_run_at_its_checkpoint_and_a_finished_one_at_nothing(tmp_path):
    runs = {name: make_config("smoke", method="baseline", steps=10, seed=seed)
            for seed, name in enumerate(["resumed", "finished", "new"])}
    covered = tmp_path / "resumed" / checkpoint.FOLDER
    covered.mkdir(parents=True)
    (covered / "step").write_text("7")  # what a checkpoint after step 7 says (checkpoint.covered_step)
    (tmp_path / "finished").mkdir()
    Run(tmp_path / "finished").mark_finished()
    assert parallel._Pace(runs, tmp_path, jobs=1).left == {"resumed": 3, "finished": 0, "new": 10}
    # started afresh (resume=False), a run trains all its steps again, whatever its folder holds
    assert parallel._Pace(runs, tmp_path, jobs=1, resume=False).left == {"resumed": 10, "finished": 10, "new": 10}


def worker_of_other_code(core, name, config, output_dir, resume, connection) -> None:
    """A worker as an older comprl wrote them: a word after each training step instead of the step's row."""
    connection.send(("stepped",))
    connection.close()


def test_a_message_this_process_does_not_read_stops_the_call_naming_it(tmp_path, monkeypatch):
    monkeypatch.setattr(parallel, "_worker", worker_of_other_code)
    with pytest.raises(RuntimeError, match=r"its worker sent a message of kind 'stepped', which this process does not"):
        run_experiments(plan(), tmp_path, jobs=2)


def test_more_jobs_than_usable_cores_is_refused_naming_the_cores(tmp_path):
    cores = len(parallel.usable_cores())
    with pytest.raises(ValueError, match=rf"jobs={cores + 1}: this process may use {cores} CPU core"):
        run_experiments(plan(), tmp_path, jobs=cores + 1)
    with pytest.raises(ValueError, match=rf"jobs=0: .* give 1 to {cores}"):
        run_experiments(plan(), tmp_path, jobs=0)
    assert list(tmp_path.iterdir()) == []  # refused before any run folder is made


@pytest.mark.timeout(600)
def test_a_run_failing_in_its_worker_raises_its_error_here_and_stops_the_others(tmp_path, started):
    failing = plan()
    failing["comp_rl_seed0"] = make_config(
        "smoke", method="comp_rl", steps=1, eval_episodes=0, **{"bank.init_from": str(tmp_path / "absent.duckdb")}
    )
    failing["baseline_seed1"] = make_config("smoke", method="baseline", seed=1, steps=50, eval_episodes=0)  # long
    with pytest.raises(FileNotFoundError, match="bank.init_from=.*absent.duckdb.*no such bank file") as raised:
        run_experiments(failing, tmp_path, jobs=2)
    assert any("run 'comp_rl_seed0'" in note for note in raised.value.__notes__)
    assert isinstance(raised.value.__cause__, parallel.WorkerTraceback)
    worker_side = str(raised.value.__cause__)  # the worker's own traceback: its entry point down into the loop
    assert "in _worker" in worker_side and "comprl/loop.py" in worker_side
    assert all(map(gone, started.pids.values()))  # the long run was stopped, not waited for
    assert not (tmp_path / "baseline_seed1" / "finished").exists()


@pytest.mark.timeout(600)
def test_a_worker_killed_from_outside_raises_naming_the_run_and_the_signal(tmp_path, started):
    started.then = lambda name, pid: os.kill(pid, signal.SIGKILL) if name == "comp_rl_seed0" else None
    with pytest.raises(RuntimeError, match=r"run 'comp_rl_seed0': its worker process .* exit code -9"):
        run_experiments(plan(steps=50), tmp_path, jobs=2)
    assert all(map(gone, started.pids.values()))  # the other worker too


@pytest.mark.timeout(600)
def test_an_interrupt_stops_every_worker(tmp_path, started):
    started.then = lambda name, pid: os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C as the first worker starts
    # Python's own Ctrl-C handler, even where pytest was started with SIGINT ignored (`cmd &` in a script does that)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            run_experiments(plan(steps=50), tmp_path, jobs=2)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert started.pids and all(map(gone, started.pids.values()))
