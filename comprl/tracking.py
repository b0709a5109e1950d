"""Experiment tracking: every metrics row of a run streamed, as it is logged, to TensorBoard (the default), W&B,
MLflow or trackio. ``run.duckdb`` stays the store of record; a tracker shows the same rows in a dashboard.

Each numeric value of a row becomes a scalar tagged ``<group>/<metric name>`` at the row's step; non-numeric ones
(text) are skipped. The group: ``eval`` for evaluation rows; for training rows ``experience`` for the experience
side's metrics (names starting with one of :data:`EXPERIENCE_PREFIXES`: bank size, extractor outputs and
rejections, cut and empty replies, its CISPO loss and clip fraction, the manager's queue, drops and retrievals, the
guided-minus-free gain) and ``actor`` for the rest (episode metrics, the actor's GRPO diagnostics, tokens and
timings); a row of another phase groups under its phase.

The official code logs to TensorBoard (through verl); comprl's default writes its event files offline into the run
folder (``<run>/tensorboard/``): ``tensorboard --logdir results/`` shows every run under it.
"""

from __future__ import annotations

import importlib
import numbers
from pathlib import Path
from types import ModuleType
from typing import Any, Protocol

TRACKERS = ("none", "tensorboard", "wandb", "mlflow", "trackio")
"""Accepted values of ``ExperimentConfig.tracker``."""
EXPERIENCE_PREFIXES = (
    "bank_", "extractor_", "manager_", "retrieval_", "experience_", "guided_minus_free", "rule_recall_"
)
"""Names of training metrics that belong to the experience side's group (``guided_minus_free``, the guided half's
gain over the free half where it was shown an entry, and ``rule_recall_*``, the share of lessons that state their
task's hidden fact, read the bank's usefulness, so they are shown there too)."""
PROJECT = "comprl"
"""The W&B / trackio project and MLflow experiment runs are logged under."""


def tag(phase: str, name: str) -> str:
    """The tracker's name of metric ``name`` of a ``phase`` row (the module's grouping rule)."""
    if phase != "train":
        return f"{phase}/{name}"
    return f"{'experience' if name.startswith(EXPERIENCE_PREFIXES) else 'actor'}/{name}"


def scalars(phase: str, metrics: dict[str, Any]) -> dict[str, float]:
    """The numeric values of a row under their tags (a bool counts as 0 or 1, as in ``run.duckdb``)."""
    return {tag(phase, k): float(v) for k, v in metrics.items() if isinstance(v, numbers.Real)}


class Tracker(Protocol):
    """Where a run's rows stream to, besides ``run.duckdb``."""

    def log(self, step: int, phase: str, metrics: dict[str, Any]) -> None: ...

    def close(self) -> None: ...


class NoTracker:
    """``tracker="none"``: the rows go to ``run.duckdb`` only."""

    def log(self, step: int, phase: str, metrics: dict[str, Any]) -> None:
        pass

    def close(self) -> None:
        pass


class TensorBoardTracker:
    """Event files in ``folder``, written offline by torch's ``SummaryWriter``. A resumed run adds a new event file
    whose first event drops what the earlier files hold from ``purge_step`` on (rows the resumed run logs again).
    One case stays doubled: a run stopped after its final evaluation row but before it was marked finished logs that
    row, at its last training step, again (``run.duckdb`` holds it once)."""

    def __init__(self, folder: Path, purge_step: int | None = None) -> None:
        _require("tensorboard", "tensorboard")
        from torch.utils.tensorboard import SummaryWriter

        self.writer = SummaryWriter(str(folder), purge_step=purge_step)

    def log(self, step: int, phase: str, metrics: dict[str, Any]) -> None:
        for name, value in scalars(phase, metrics).items():
            self.writer.add_scalar(name, value, step)
        self.writer.flush()  # a row is on disk as soon as it is logged, like its run.duckdb row

    def close(self) -> None:
        self.writer.close()


class WandbTracker:
    """A W&B run named after the run folder (resumed under the same id); ``WANDB_MODE=offline`` keeps it local."""

    def __init__(self, folder: Path, name: str, config: dict[str, Any]) -> None:
        wandb = _require("wandb", "'comprl[wandb]'")
        self.run = wandb.init(project=PROJECT, name=name, id=name, resume="allow", dir=str(folder), config=config)

    def log(self, step: int, phase: str, metrics: dict[str, Any]) -> None:
        self.run.log(scalars(phase, metrics), step=step)

    def close(self) -> None:
        self.run.finish()


class MlflowTracker:
    """An MLflow run named after the run folder, in the tracking store ``MLFLOW_TRACKING_URI`` names."""

    def __init__(self, name: str, config: dict[str, Any]) -> None:
        self.mlflow = _require("mlflow", "'comprl[mlflow]'")
        self.mlflow.set_experiment(PROJECT)
        self.mlflow.start_run(run_name=name)
        self.mlflow.log_dict(config, "config.json")

    def log(self, step: int, phase: str, metrics: dict[str, Any]) -> None:
        self.mlflow.log_metrics(scalars(phase, metrics), step=step)

    def close(self) -> None:
        self.mlflow.end_run()


class TrackioTracker:
    """A trackio run named after the run folder (local unless trackio is told of a Space)."""

    def __init__(self, name: str, config: dict[str, Any]) -> None:
        self.trackio = _require("trackio", "'comprl[trackio]'")
        self.trackio.init(project=PROJECT, name=name, config=config, resume="allow")

    def log(self, step: int, phase: str, metrics: dict[str, Any]) -> None:
        self.trackio.log(scalars(phase, metrics), step=step)

    def close(self) -> None:
        self.trackio.finish()


def open_tracker(
    kind: str, folder: Path, name: str, config: dict[str, Any], resumed_after: int | None = None
) -> Tracker:
    """The tracker ``kind`` (one of :data:`TRACKERS`) of a run named ``name`` with ``config``; TensorBoard writes
    into ``folder``. ``resumed_after``: the step a resumed run continues after (its later rows are logged again)."""
    if kind == "none":
        return NoTracker()
    if kind == "tensorboard":
        return TensorBoardTracker(folder, None if resumed_after is None else resumed_after + 1)
    if kind == "wandb":
        return WandbTracker(folder, name, config)
    if kind == "mlflow":
        return MlflowTracker(name, config)
    if kind == "trackio":
        return TrackioTracker(name, config)
    raise ValueError(f"tracker={kind!r}; accepted: {', '.join(TRACKERS)}")


def _require(module: str, install: str) -> ModuleType:
    """Import ``module``, or say what installs it (``install``: the argument of ``pip install``)."""
    try:
        return importlib.import_module(module)
    except ImportError as err:
        raise ImportError(
            f"tracker={module!r} needs the {module} package: pip install {install} "
            f"(or choose another tracker; accepted: {', '.join(TRACKERS)})"
        ) from err
