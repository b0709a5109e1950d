"""Run folders: config, metrics database, figures; and helpers that turn runs into the paper's tables and plots.

A run is a folder under ``results/`` holding ``config.json`` and ``run.duckdb`` (table ``metrics``: one row per
step and phase). Anything that can read DuckDB or pandas can read it; :func:`load_metrics` gathers many runs.
"""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable, Iterator

import duckdb
import pandas as pd

from comprl import checkpoint
from comprl.config import ExperimentConfig

_COLUMN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
FINISHED = "finished"
"""The file a run writes into its folder when it is done."""


@dataclass(frozen=True)
class Run:
    """A run folder."""

    path: Path

    def __post_init__(self) -> None:
        object.__setattr__(self, "path", Path(self.path))  # a str works too

    @classmethod
    def create(cls, root: str | Path, config: ExperimentConfig, name: str | None = None, resume: bool = False) -> "Run":
        """Make ``root/name`` (default name: method, env, seed and a timestamp) and write ``config.json``.

        An existing folder of that name is started afresh (its metrics, bank and checkpoints are deleted), or with
        ``resume`` kept as it is, after checking that it holds a run of the same config.
        """
        if name is None:
            env = config.task.split("/")[-1]
            stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
            name = f"{config.method}_{env}_seed{config.seed}_{stamp}"
        run = cls(Path(root) / name)
        if resume and (run.path / "config.json").exists():
            differ = _differences(run.config().to_dict(), config.to_dict())
            if differ:
                raise ValueError(
                    f"cannot resume {run.path}: it holds a run of another config ({'; '.join(differ[:5])}); "
                    "resume with the same config, or start afresh with resume=False or under another name"
                )
            return run
        run.path.mkdir(parents=True, exist_ok=True)
        run.clear()
        (run.path / "config.json").write_text(config.to_json())
        return run

    def clear(self) -> None:
        """Delete what a run wrote into this folder (metrics, bank, checkpoints, the finished mark); keep the rest."""
        checkpoint.discard(self.path)
        for path in [self.db_path, self.bank_path, self.path / FINISHED]:
            for file in [path, *path.parent.glob(f"{path.name}.*")]:  # with the .wal, .holder, .queue.jsonl beside it
                file.unlink(missing_ok=True)

    @property
    def db_path(self) -> Path:
        return self.path / "run.duckdb"

    @property
    def bank_path(self) -> Path:
        """The experience bank's DuckDB file (methods with experience)."""
        return self.path / "bank.duckdb"

    @property
    def finished(self) -> bool:
        """Whether the run got to its end (its last evaluation is logged)."""
        return (self.path / FINISHED).exists()

    def mark_finished(self) -> None:
        (self.path / FINISHED).write_text(datetime.now(timezone.utc).isoformat() + "\n")

    def rollback(self, step: int) -> None:
        """Delete the metric rows a checkpoint after training step ``step`` does not cover: those of later steps,
        and an evaluation at ``step`` itself (logged after that checkpoint) unless ``step`` is 0."""
        if not self.db_path.exists():
            return
        with duckdb.connect(str(self.db_path)) as con:
            if con.execute("SELECT count(*) FROM information_schema.tables WHERE table_name = 'metrics'").fetchone()[0]:
                con.execute("DELETE FROM metrics WHERE step > ? OR (phase = 'eval' AND step = ? AND step > 0)", [step, step])

    def config(self) -> ExperimentConfig:
        return ExperimentConfig.from_dict(json.loads((self.path / "config.json").read_text()))

    def holds(self, config: ExperimentConfig) -> bool:
        """Whether this folder holds a run of exactly ``config`` (finished or not)."""
        return (self.path / "config.json").exists() and not _differences(self.config().to_dict(), config.to_dict())

    def log(self, step: int, phase: str, metrics: dict[str, Any]) -> None:
        """Append one metrics row; new metric names become new columns."""
        row = {"step": int(step), "phase": phase, **metrics}
        bad = [k for k in row if not _COLUMN.match(k)]
        if bad:
            raise ValueError(f"metric names must be identifiers, got {bad}")
        with duckdb.connect(str(self.db_path)) as con:
            con.execute("CREATE TABLE IF NOT EXISTS metrics (step INTEGER, phase VARCHAR)")
            have = {r[0] for r in con.execute("SELECT column_name FROM information_schema.columns WHERE table_name = 'metrics'").fetchall()}
            for key, value in row.items():
                if key not in have:
                    sql_type = "VARCHAR" if isinstance(value, str) else "DOUBLE"
                    con.execute(f'ALTER TABLE metrics ADD COLUMN "{key}" {sql_type}')
            columns = ", ".join(f'"{k}"' for k in row)
            con.execute(f"INSERT INTO metrics ({columns}) VALUES ({', '.join('?' * len(row))})", list(row.values()))

    def metrics(self) -> pd.DataFrame:
        """All metric rows of this run, ordered by step."""
        if not self.db_path.exists():
            return pd.DataFrame(columns=["step", "phase"])
        with duckdb.connect(str(self.db_path), read_only=True) as con:
            return con.execute("SELECT * FROM metrics ORDER BY step, phase").df()

    def save_figure(self, fig: Any, name: str) -> list[Path]:
        """Save a matplotlib figure as ``name.png`` and ``name.pdf`` in the run folder."""
        paths = [self.path / f"{name}.png", self.path / f"{name}.pdf"]
        for p in paths:
            fig.savefig(p, bbox_inches="tight", dpi=150)
        return paths

    def save_table(self, table: pd.DataFrame, name: str) -> Path:
        """Save a table as ``name.csv`` in the run folder."""
        path = self.path / f"{name}.csv"
        table.to_csv(path, index=False)
        return path


def find_runs(config: ExperimentConfig, folders: Iterable[str | Path]) -> Iterator[Run]:
    """The run folders directly under ``folders`` that hold exactly ``config``, finished or not, in folder order,
    then name order."""
    for folder in folders:
        for found in sorted(Path(folder).glob("*/config.json")):
            run = Run(found.parent)
            if run.holds(config):
                yield run


def copy_finished(config: ExperimentConfig, folders: Iterable[str | Path], to: Path) -> Run | None:
    """Copy a finished run of exactly ``config`` found directly under one of ``folders`` into the new folder ``to``
    (everything but its checkpoint, which a finished run no longer needs); return the run copied, None where none
    is found. The first match in folder order, then name order, is taken."""
    for run in find_runs(config, folders):
        if run.finished and run.path.resolve() != Path(to).resolve():
            shutil.copytree(run.path, to, ignore=shutil.ignore_patterns(checkpoint.FOLDER))
            return run
    return None


def _differences(old: dict[str, Any], new: dict[str, Any], prefix: str = "") -> list[str]:
    """``field: old -> new`` for every config field that differs, nested ones dotted."""
    out = []
    for key in sorted(set(old) | set(new)):
        a, b = old.get(key), new.get(key)
        if isinstance(a, dict) and isinstance(b, dict):
            out += _differences(a, b, f"{prefix}{key}.")
        elif (list(a) if isinstance(a, (list, tuple)) else a) != (list(b) if isinstance(b, (list, tuple)) else b):
            out.append(f"{prefix}{key}: {a!r} -> {b!r}")
    return out


def load_metrics(runs: Run | str | Path | Iterable[Run | str | Path]) -> pd.DataFrame:
    """Metrics of one run folder or several in one frame, with the run's ``method``, ``env_id``, ``seed`` and
    ``run`` name."""
    frames = []
    for run in [runs] if isinstance(runs, (Run, str, Path)) else runs:
        run = run if isinstance(run, Run) else Run(Path(run))
        config = run.config()
        df = run.metrics()
        df.insert(0, "run", run.path.name)
        df.insert(1, "method", config.method)
        df.insert(2, "env_id", config.task)
        df.insert(3, "seed", config.seed)
        frames.append(df)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def summary_table(metrics: pd.DataFrame) -> pd.DataFrame:
    """Success before and after training per method and env, from the ``eval`` rows: the mean over seeds, and
    their standard deviation over seeds in the ``_sd`` columns (NaN for one seed).

    Methods with a bank also get ``guided_success_after``: the final evaluation with experience retrieved.
    """
    evals = metrics[metrics["phase"] == "eval"]
    if evals.empty:
        return pd.DataFrame(columns=["method", "env_id", "seeds", "success_before", "success_after"])
    first = evals.loc[evals.groupby("run")["step"].idxmin()]
    last = evals.loc[evals.groupby("run")["step"].idxmax()]
    after = ["run", "success_rate", "mean_episode_length", "invalid_action_rate"]
    after += ["guided_success_rate"] if "guided_success_rate" in last else []
    merged = first[["run", "method", "env_id", "success_rate"]].merge(last[after], on="run", suffixes=("_before", "_after"))
    columns = {
        "seeds": ("run", "count"),
        "success_before": ("success_rate_before", "mean"),
        "success_before_sd": ("success_rate_before", "std"),
        "success_after": ("success_rate_after", "mean"),
        "success_after_sd": ("success_rate_after", "std"),
        "episode_length_after": ("mean_episode_length", "mean"),
        "episode_length_after_sd": ("mean_episode_length", "std"),
        "invalid_action_rate_after": ("invalid_action_rate", "mean"),
    }
    if "guided_success_rate" in merged:
        columns["guided_success_after"] = ("guided_success_rate", "mean")
        columns["guided_success_after_sd"] = ("guided_success_rate", "std")
    return merged.groupby(["method", "env_id"]).agg(**columns).reset_index()


def task_table(metrics: pd.DataFrame) -> pd.DataFrame:
    """The paper's Table 1 from evaluation rows: one row per (tasks, row of :data:`comprl.paper.TABLE_ROWS`)
    whose method was run, final held-out success per task and their average (``avg``), means over seeds, and the
    standard deviation over seeds of each seed's average (``avg_sd``; NaN for one seed).

    Rows "with exp." read the final evaluation that retrieves experience (``guided_*`` columns), the others the
    experience-free one. A multi-task run's tasks are its per-task columns (``room_success_rate``...); a
    single-task run's one task is its overall success.
    """
    from comprl.envs.mixture import TASK_NAMES, task_name
    from comprl.paper import TABLE_ROWS

    evals = metrics[metrics["phase"] == "eval"]
    last = evals.loc[evals.groupby("run")["step"].idxmax()]
    rows = []
    for tasks, group in last.groupby("env_id", sort=False):
        present = [n for n in TASK_NAMES.values() if f"{n}_success_rate" in group and group[f"{n}_success_rate"].notna().any()]
        single = [] if present else [task_name(tasks)]
        for label, method, with_experience in TABLE_ROWS:
            runs = group[group["method"] == method]
            if runs.empty:
                continue
            prefix = "guided_" if with_experience else ""
            per_task = pd.DataFrame({name: runs[f"{prefix}{name}_success_rate"] for name in present})
            if single:
                per_task[single[0]] = runs[f"{prefix}success_rate"]
            averages = per_task.mean(axis=1)  # each seed's average over the tasks
            rows.append({"tasks": tasks, "row": label, "seeds": len(runs), **per_task.mean(), "avg": averages.mean(), "avg_sd": averages.std()})
    return pd.DataFrame(rows)


def plot_learning_curves(metrics: pd.DataFrame, metric: str = "success_rate", phase: str = "train", ax: Any = None) -> Any:
    """Mean (+/- min-max band over seeds) of ``metric`` against step, one line per method. Returns the figure."""
    import matplotlib.pyplot as plt

    if ax is None:
        fig, ax = plt.subplots(figsize=(5, 3.2))
    else:
        fig = ax.figure
    rows = metrics[metrics["phase"] == phase]
    for method, group in rows.groupby("method"):
        stats = group.groupby("step")[metric].agg(["mean", "min", "max"])
        ax.plot(stats.index, stats["mean"], marker="o", label=method)
        ax.fill_between(stats.index, stats["min"], stats["max"], alpha=0.2)
    ax.set_xlabel("actor step")
    ax.set_ylabel(metric.replace("_", " "))
    envs = ", ".join(sorted(rows["env_id"].unique())) if "env_id" in rows else ""
    ax.set_title(envs, fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    return fig
