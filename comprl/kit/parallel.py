"""Several experiments at once: each run in a process of its own, pinned to one CPU core with one torch thread.

On a CPU, small models gain little from a second torch thread, so two runs on one core each make more steps per
hour than one run on both (the cpu profile on a 2-core laptop: ~52 s per step on one core, ~43 s on two). With
``jobs=N``, :func:`run_experiments` keeps N runs going, one per core, and starts the next run of the plan on a
core as soon as the run there ends. Every run resumes what it finds in its folder, so a killed batch is continued
by the same call.

This module imports neither torch nor the training loop at the top, and a worker gets its config as plain data:
a worker process pins itself to its core before torch loads, so that every thread torch starts stays on that core
(unless the calling script loads torch at its top: a spawned process imports the main script first).
"""

from __future__ import annotations

import heapq
import logging
import math
import multiprocessing
import os
import pickle
import traceback
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

if TYPE_CHECKING:
    from comprl.config import ExperimentConfig
    from comprl.runs import Run
    from comprl.loop import MetricsCallback

log = logging.getLogger(__name__)

EXIT_GRACE_S = 60.0
"""How long a worker that sent its result may take to exit before it is terminated (its run is complete by then)."""


class WorkerTraceback(Exception):
    """The traceback of an exception raised in a worker process, as text (the ``__cause__`` of the re-raised one)."""

    def __str__(self) -> str:
        return f"\n\n{self.args[0]}"


def usable_cores() -> list[int]:
    """The CPU cores this process may run on (``os.sched_getaffinity``; a ``taskset`` or a cgroup narrows them)."""
    return sorted(os.sched_getaffinity(0))


def run_experiments(
    plan: Mapping[str, ExperimentConfig],
    output_dir: str | Path = "results",
    jobs: int = 1,
    resume: bool = True,
    callback: MetricsCallback | None = None,
    reuse: Sequence[str | Path] = (),
    compact: bool = False,
) -> dict[str, Run]:
    """Run every experiment of ``plan`` (run name -> config) into ``output_dir/<name>``; return the runs in plan order.

    ``jobs=1``: the runs one after another in this process, each with :func:`~comprl.loop.run_experiment`
    (progress bar, and ``callback`` sees every logged row: a live plot in a notebook).

    ``jobs > 1``: up to ``jobs`` runs at once, each in a fresh process (spawned) pinned to its own core of
    :func:`usable_cores` with one torch thread; when a run ends, the next one of the plan starts on its core.
    The workers' log lines (comprl's, one per step and evaluation, prefixed with the run's name) are logged in this
    process as they come, under the loggers that wrote them, so they show where :func:`comprl.show_logs` sends this
    process's own (a notebook's cell; stdout under ``comprl run``), with a line here as each run starts and ends.
    Workers show no progress bar, and ``callback`` is not called (a live plot needs ``jobs=1``); after each of their
    training steps this process logs the plan's ETA instead (:class:`_Pace`: last evaluations included). ``jobs``
    may not exceed the usable cores. A run that starts processes of its own (Ray rollout workers) starts them on its
    core, unless its config pins them elsewhere (``manager_cores``).

    ``resume`` (default on, as the notebooks run): a finished run folder of the same name is returned as it is and
    a killed one continues from its checkpoint, so calling again with the same plan runs only what is missing.
    ``reuse`` (with ``resume``): folders of earlier results (other notebooks' output folders, say); a run of the
    plan with no folder yet, whose exact config finished in a run folder directly under one of them, is linked
    to that run (:func:`comprl.runs.link_finished`: a relative symbolic link) instead of trained again.
    ``compact``: each finished run folder of the plan is compacted (:func:`comprl.kit.compact.compact`: its DuckDB
    files become checked Parquet) as soon as its run ends, not after the whole plan: ``comprl reproduce`` sets it,
    so that a run that finishes while the others go on is already stored as the files git tracks (the DuckDB files
    and checkpoints are ignored there), in case the machine stops before the plan does. Linked runs are left as
    they are (compacted where they live).

    A run that fails raises its exception here (with the worker's traceback as its cause) as soon as it fails;
    the other runs going on are then stopped, as they are on a KeyboardInterrupt, and continue from their last
    checkpoint at the next call. A worker that dies without an exception (killed for memory, say) raises
    ``RuntimeError`` naming the run and its exit code.
    """
    plan = dict(plan)
    cores = check_jobs(jobs)
    from comprl.runs import Run, link_finished, restore_link
    from comprl.loop import run_experiment

    for name in plan if resume else ():  # a link that a checkout without symlinks made a plain file
        if restore_link(Path(output_dir) / name):
            log.info("%s: a link stored as a plain file; made a link again", name)
    for name, config in plan.items() if resume and reuse else ():
        target = Path(output_dir) / name
        if not target.exists() and (source := link_finished(config, reuse, target)) is not None:
            log.info("%s: the same config finished in %s; linked, not trained again", name, source.path)

    pace = _Pace(plan, output_dir, jobs, resume)
    if jobs == 1:
        runs = {}
        for name, config in plan.items():
            runs[name] = run_experiment(
                config, output_dir, name=name, callback=pace.wrap(name, callback), resume=resume
            )
            pace.run_done(name)
            if compact:
                _compact(runs[name].path)
        return runs

    # finished runs are checked (the same config?) and returned here, with no process to start
    runs = {
        name: run_experiment(config, output_dir, name=name, progress=False, resume=True)
        for name, config in plan.items() if resume and Run(Path(output_dir) / name).finished
    }
    for run in runs.values() if compact else ():
        _compact(run.path)
    left = {name: config for name, config in plan.items() if name not in runs}
    paths = _run_pinned(left, str(output_dir), cores[:jobs], resume, pace, compact) if left else {}
    return {name: runs[name] if name in runs else Run(Path(paths[name])) for name in plan}


def _compact(folder: Path) -> None:
    """Compact the finished run folder ``folder`` with :func:`comprl.kit.compact.compact_paths`, which logs what it
    compacted and skips a link to a run stored elsewhere."""
    from comprl.kit.compact import compact_paths

    for _ in compact_paths([folder]):
        pass


def _steps_left(config: ExperimentConfig, path: Path, resume: bool) -> int:
    """The training steps a run of ``config`` in folder ``path`` has left: none once finished, and with ``resume``
    those after its checkpoint's step (a run resumed from there); all of them where it starts afresh."""
    from comprl import checkpoint
    from comprl.runs import Run

    if not resume:
        return config.steps
    if Run(path).finished:
        return 0
    return config.steps - (checkpoint.covered_step(path) or 0)


class _Pace:
    """The plan's ETA, logged after every training step of runs in worker processes (which show no progress bar)
    and as each run of a one-at-a-time plan ends (each run has its progress bar).

    A run's time left is its training steps left at the mean ``step_seconds`` of the steps trained so far in this
    call, plus its last evaluation: one pass without experience, and one with it for methods with a bank
    (``config.last_eval_passes``), each at the mean ``eval_pass_seconds`` per episode of the
    evaluations played so far in this call. Until one was played (a resumed plan, step-0 rows read from an earlier
    run) the last evaluations are left out, and the line says so. Runs at once share the wall time
    (:func:`wall_seconds`)."""

    def __init__(
        self, plan: Mapping[str, ExperimentConfig], output_dir: str | Path, jobs: int, resume: bool = True
    ) -> None:
        self.plan = dict(plan)
        self.jobs = jobs
        self.left = {name: _steps_left(config, Path(output_dir) / name, resume) for name, config in plan.items()}
        self.last_eval = {name: bool(steps and plan[name].eval_episodes) for name, steps in self.left.items()}
        self.step_seconds: list[float] = []
        self.episode_seconds: list[float] = []

    def wrap(self, name: str, callback: MetricsCallback | None) -> MetricsCallback:
        def counting(step: int, metrics: dict[str, float], phase: str) -> None:
            self.row(name, step, phase, metrics)
            if callback is not None:
                callback(step, metrics, phase)

        return counting

    def row(self, name: str, step: int, phase: str, metrics: Mapping[str, float]) -> None:
        """Run ``name`` logged a row: a training step, or an evaluation (its time per episode is kept)."""
        config = self.plan[name]
        if phase == "train":
            self.left[name] = max(self.left[name] - 1, 0)
            if "step_seconds" in metrics:
                self.step_seconds.append(metrics["step_seconds"])
        elif phase == "eval":
            if step == config.steps:
                self.last_eval[name] = False
            if metrics.get("eval_pass_seconds", math.nan) >= 0:  # NaN: no pass was played
                self.episode_seconds.append(metrics["eval_pass_seconds"] / _episodes_per_pass(config))

    def minutes_left(self) -> float:
        """Minutes of wall time the plan's steps (and last evaluations, once one was timed) still take."""
        step = sum(self.step_seconds) / len(self.step_seconds) if self.step_seconds else 0.0
        episode = sum(self.episode_seconds) / len(self.episode_seconds) if self.episode_seconds else 0.0
        runs = [
            self.left[name] * step
            + self.last_eval[name] * sum(config.last_eval_passes) * _episodes_per_pass(config) * episode
            for name, config in self.plan.items()
        ]
        return wall_seconds([seconds for seconds in runs if seconds > 0], self.jobs) / 60

    def _said(self) -> str:
        """What the ETA leaves out or includes of the evaluations still to come."""
        if not any(self.last_eval.values()):
            return ""
        return ", the last evaluations included" if self.episode_seconds else ", then the last evaluations"

    def logged(self, name: str, step: int, phase: str, metrics: Mapping[str, float]) -> None:
        """A worker's run ``name`` logged a row: after a training step, log the plan's ETA (while steps are left)."""
        self.row(name, step, phase, metrics)
        if phase == "train" and (steps := sum(self.left.values())):
            log.info(
                "%d training steps left in the plan; about %.1f min at this call's pace%s", steps,
                self.minutes_left(), self._said(),
            )

    def run_done(self, name: str) -> None:
        self.left[name] = 0
        self.last_eval[name] = False
        remaining, done = sum(self.left.values()), sum(not steps for steps in self.left.values())
        if self.step_seconds and remaining:
            log.info(
                "%d of %d runs done; about %.0f min left at this call's pace%s", done, len(self.left),
                self.minutes_left(), self._said(),
            )


def wall_seconds(seconds: Sequence[float], jobs: int) -> float:
    """Wall time of runs that take ``seconds`` each when ``jobs`` of them go at once, started in this order, each on
    the first core to free up (as :func:`run_experiments` starts them)."""
    cores = [0.0] * max(min(jobs, len(seconds)), 1)  # a heap of the times the cores free up
    for run in seconds:
        heapq.heapreplace(cores, cores[0] + run)
    return max(cores)


def _episodes_per_pass(config: ExperimentConfig) -> int:
    """Episodes one evaluation pass of ``config`` plays: ``eval_episodes`` of every task of its mixture."""
    return config.eval_episodes * len(config.mixture().batch)


def check_jobs(jobs: int) -> list[int]:
    """The usable cores, after checking that ``jobs`` runs at once, one per core, fit on them."""
    cores = usable_cores()
    if not isinstance(jobs, int) or not 1 <= jobs <= len(cores):
        raise ValueError(
            f"jobs={jobs!r}: this process may use {len(cores)} CPU core{'s' * (len(cores) > 1)} ({cores}) and a run "
            f"takes one; give 1 to {len(cores)}"
        )
    return cores


def _run_pinned(
    plan: dict[str, ExperimentConfig], output_dir: str, cores: list[int], resume: bool, pace: _Pace,
    compact: bool = False,
) -> dict[str, str]:
    """Every run of ``plan`` in a spawned process on one of ``cores``, at most one per core at a time, in plan
    order; the run folders by name, the ETA logged by ``pace`` after each training step, each compacted as its
    process ends with ``compact``. Raises the first failure after stopping the processes still running."""
    context = multiprocessing.get_context("spawn")  # a fresh interpreter: no threads or torch state of this one
    waiting = list(plan.items())
    free = list(cores)
    running: dict[Connection, tuple[str, int, Any]] = {}  # result pipe -> run name, core, process
    paths: dict[str, str] = {}
    try:
        while waiting or running:
            while waiting and free:
                name, config = waiting.pop(0)
                core = free.pop(0)
                reader, writer = context.Pipe(duplex=False)
                process = context.Process(
                    target=_worker,
                    args=(core, name, config.to_dict(), output_dir, resume, writer),
                    name=f"comprl {name}",
                )
                running[reader] = (name, core, process)  # before it starts: an interrupt from here on stops it
                process.start()
                writer.close()  # the worker holds the only writing end now: its exit ends the pipe
                log.info("%s: started in process %d on core %d", name, process.pid, core)
            for reader in wait(list(running)):
                name, core, process = running[reader]
                try:
                    message = reader.recv()
                except EOFError:  # the process ended without sending its result
                    message = ("died",)
                if message[0] == "log":  # a log line of the run, shown as this process shows its own
                    _, logger, level, text = message
                    logging.getLogger(logger).log(level, text)
                    continue
                if message[0] == "row":  # a metrics row of the run: for the ETA
                    pace.logged(name, *message[1:])
                    continue
                if message[0] not in ("done", "died", "failed"):
                    raise RuntimeError(
                        f"run {name!r}: its worker sent a message of kind {message[0]!r}, which this process does "
                        "not read: the worker runs other comprl code than this process (installed anew while the "
                        "call ran?); call again, and every run continues from its checkpoint"
                    )
                del running[reader]
                reader.close()
                process.join(EXIT_GRACE_S)
                if process.is_alive():
                    process.terminate()
                    process.join()
                free.append(core)
                if message[0] == "died":
                    raise RuntimeError(
                        f"run {name!r}: its worker process (core {core}) died with exit code {process.exitcode} "
                        "before it finished (a negative code is the signal that ended it, -9 e.g. when the kernel "
                        "killed it for memory); with resume=True the next call continues it from its checkpoint"
                    )
                if message[0] == "failed":
                    _, error, remote = message
                    error.add_note(f"raised by run {name!r} in its worker process on core {core}")
                    raise error from WorkerTraceback(remote)
                paths[name] = message[1]
                log.info("%s: done (%d of %d runs)", name, len(paths), len(plan))
                if compact:  # its process has ended: nothing writes the folder any more
                    _compact(Path(paths[name]))
    finally:
        _stop([process for _, _, process in running.values()])
    return paths


def _stop(processes: list[Any]) -> None:
    """Terminate the workers still running (SIGTERM, then SIGKILL for those that do not go)."""
    processes = [process for process in processes if process.pid is not None]  # those started
    for process in processes:
        process.terminate()
    for process in processes:
        process.join(10)
        if process.is_alive():
            process.kill()
            process.join()


class _Channel(logging.Handler):
    """A worker's end of its pipe to the parent: comprl's log records (INFO and up) and the timings of each training
    step and evaluation as they come, then the result."""

    def __init__(self, connection: Connection) -> None:
        super().__init__(logging.INFO)
        self.connection = connection

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.connection.send(("log", record.name, record.levelno, self.format(record)))
        except Exception:
            self.handleError(record)

    def row(self, step: int, metrics: dict[str, float], phase: str) -> None:
        """The run's metrics callback: sends the parent the timings of a training step or an evaluation (its ETA)."""
        if phase in ("train", "eval"):
            timings = {key: metrics[key] for key in ("step_seconds", "eval_pass_seconds") if key in metrics}
            self.send(("row", step, phase, timings))

    def send(self, message: tuple) -> None:
        """Send a message that is not a log record (a row's timings, the result)."""
        with self.lock:  # a record logged by another thread meanwhile is not cut into
            self.connection.send(message)


def _worker(core: int, name: str, config: dict, output_dir: str, resume: bool, connection: Connection) -> None:
    """One run in a worker process: pin to ``core``, then load torch with one thread; send comprl's log lines and
    the end of each training step to the parent as they come, and last the run folder, or the exception with its
    traceback."""
    os.sched_setaffinity(0, [core])  # before torch starts any thread: threads inherit this
    channel = _Channel(connection)
    logger = logging.getLogger("comprl")
    logger.setLevel(logging.INFO)
    logger.propagate = False
    logger.addHandler(channel)
    try:
        import torch

        from comprl import console
        from comprl.config import ExperimentConfig
        from comprl.loop import run_experiment

        torch.set_num_threads(1)
        if console.headless():
            console.quiet_libraries()  # as comprl.show_logs does: no weight-loading bars
        run = run_experiment(
            ExperimentConfig.from_dict(config), output_dir, name=name, progress=False, callback=channel.row,
            resume=resume,
        )
        channel.send(("done", str(run.path)))
    except BaseException as error:  # KeyboardInterrupt too: the parent learns why its worker stopped
        channel.send(("failed", _picklable(error), "".join(traceback.format_exception(error))))
    finally:
        connection.close()


def _picklable(error: BaseException) -> BaseException:
    """``error`` itself when it can be sent to the parent process, else a RuntimeError with its type and message."""
    try:
        pickle.loads(pickle.dumps(error))
        return error
    except Exception:
        return RuntimeError(f"{type(error).__name__}: {error}")
