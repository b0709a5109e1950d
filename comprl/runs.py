"""Run storage: a run folder with its config, metrics database, figures and tables, and reading runs back.

A run is a folder under ``results/`` holding ``config.json`` and ``run.duckdb`` (table ``metrics``: one row per
step and phase, the store of record; the same rows also stream to the config's tracker, :mod:`comprl.tracking`).
Anything that can read DuckDB or pandas can read it; :func:`load_metrics` gathers many runs.
A finished run may be *compacted* (``comprl compact``, :mod:`comprl.kit.compact`): its DuckDB files replaced by the
same rows as Parquet (``metrics.parquet``, ``bank_<table>.parquet``, the layout of an exported bundle). Every reader
of a run reads a compacted one alike; nothing writes into it.
The paper's tables and plots made from those rows live in :mod:`comprl.kit.report`.
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable, Iterator

import duckdb
import pandas as pd

from comprl import checkpoint, duckdb_files
from comprl.config import ExperimentConfig

_COLUMN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
FINISHED = "finished"
"""The file a run writes into its folder when it is done."""
AFTER_TRAINING = "after_training"
"""The phase of the row of the experience side's counters read when it closed, after the final evaluation: the
extractor's work finished after the last training row (:func:`comprl.loop.run_experiment`)."""
METRICS_FILE = "metrics.parquet"
"""A compacted run's metric rows (``run.duckdb``'s ``metrics`` table as Parquet), named as in a bundle."""
METRIC_KEYS = {"step": "INTEGER", "phase": "VARCHAR"}
"""The columns every metric row has, with their DuckDB types (``run.duckdb``'s ``metrics`` table and
``metrics.parquet``); each other column is one metric, of a type of :data:`METRIC_TYPES`."""
METRIC_TYPES = ("DOUBLE", "VARCHAR")
"""The DuckDB types of a metric's column (:meth:`Run.log`: VARCHAR for text, DOUBLE for numbers)."""
BANK_TABLES = ("entries", "operations", "meta")
"""The experience bank's tables, stored as ``bank_<table>.parquet`` by a compacted run and a bundle."""
BANK_FILES = {table: f"bank_{table}.parquet" for table in BANK_TABLES}
"""Each bank table's Parquet file name."""
MACHINES = "machines.jsonl"
"""Where each call that trained the run computed (:func:`comprl.llm.loading.machine`), a JSON line per call with
the step it started after: the runs of a reproduction spread over sessions may run on different machines (a CPU
that computes in bfloat16, another in float32), and a run resumed elsewhere lists both."""
NOT_COMPARED = {
    "tracker", "actor.gradient_checkpointing", "extractor.gradient_checkpointing", "actor.shared_prefix_tokens",
    "extractor.shared_prefix_tokens",
}
"""Config fields (nested ones dotted) that change no row of a run, or its rounding only, so a run that differs only
in them is the same run (resumed, linked, found): the tracker; gradient checkpointing, whose recomputed activations
give the gradients bit for bit (``tests/test_resume.py``), so that a run may resume with more or less memory; and
the shared prefixes of an update, which give its loss and gradients up to float rounding
(``tests/test_shared_prefix.py``), as one config computes in bfloat16 on one CPU and float32 on another."""


@functools.cache
def code_revision() -> str:
    """The comprl code this process runs: the git commit of the checkout it is imported from, with ``+changes``
    where the package's files differ from that commit, or ``comprl <version>`` outside a checkout. A run resumed
    by later code (a reproduction spread over sessions) lists every revision that trained it; fields of
    :data:`NOT_COMPARED` may differ between them."""
    root = Path(__file__).resolve().parents[1]

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", "-C", str(root), *args], capture_output=True, text=True, timeout=30, check=True
        ).stdout.strip()

    try:
        if Path(git("rev-parse", "--show-toplevel")).resolve() != root:
            raise FileNotFoundError(root)
        commit, changed = git("rev-parse", "HEAD"), git("status", "--porcelain", "--", "comprl")
    except (OSError, subprocess.SubprocessError):
        from importlib.metadata import PackageNotFoundError, version

        try:
            return f"comprl {version('comprl')}"
        except PackageNotFoundError:
            return "comprl (version unknown)"
    return commit + ("+changes" if changed else "")


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
        ``resume`` kept as it is, after checking that it holds a run of the same config. A link there (a run
        stored once, :func:`link_finished`) is resumed only where it names a finished run inside its results set
        (:func:`results_set`); started afresh, the link itself is replaced by a new folder: nothing is deleted or
        written through a link.
        """
        if name is None:
            env = config.task.split("/")[-1]
            stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
            name = f"{config.method}_{env}_seed{config.seed}_{stamp}"
        run = cls(Path(root) / name)
        restore_link(run.path)
        if run.path.is_symlink() and not (resume and (run.path / "config.json").exists()):
            run.path.unlink()  # started afresh in a folder of its own: the linked run's files are never touched
        if run.path.is_symlink():
            _check_linked_run(run.path)
        if run.path.exists() and not run.path.is_dir():
            raise FileExistsError(
                f"cannot make run folder {run.path}: a file of that name is in the way (not a run folder, nor a link "
                f"stored as a file that names one inside its results set {results_set(run.path)}); move it away or "
                "choose another name"
            )
        if resume and (run.path / "config.json").exists():
            _refuse_links_within(run.path)
            differ = _differences(run.config().to_dict(), config.to_dict())
            if differ:
                raise ValueError(
                    f"cannot resume {run.path}: it holds a run of another config ({'; '.join(differ[:5])}); "
                    "resume with the same config, or start afresh with resume=False or under another name"
                )
            return run
        run.path.mkdir(parents=True, exist_ok=True)
        run.clear()
        remove_file(run.path / "config.json")  # a link planted there is removed, not written through
        (run.path / "config.json").write_text(config.to_json())
        return run

    def clear(self) -> None:
        """Delete what a run wrote into this folder (metrics and their TensorBoard events, bank, checkpoints, the
        finished mark, the Parquet files of a compacted run); keep the rest."""
        checkpoint.discard(self.path)
        checkpoint.remove(self.tensorboard_path)
        for path in [
            self.db_path, self.bank_path, self.path / FINISHED, self.path / MACHINES, self.metrics_file,
            *self.bank_files,
        ]:
            remove_file(path)

    @property
    def metrics_file(self) -> Path:
        """The metric rows of a compacted run (:data:`METRICS_FILE`)."""
        return self.path / METRICS_FILE

    @property
    def bank_files(self) -> list[Path]:
        """The bank tables of a compacted run, one Parquet file per table of :data:`BANK_TABLES`."""
        return [self.path / BANK_FILES[table] for table in BANK_TABLES]

    @property
    def compacted(self) -> bool:
        """Whether the run's rows are stored as Parquet (``metrics.parquet``, no ``run.duckdb``): ``comprl compact``
        deletes ``run.duckdb`` last, once the Parquet files are checked, so a compaction cut short does not count."""
        return self.metrics_file.is_file() and not self.db_path.exists()

    def _refuse_if_compacted(self, doing: str) -> None:
        if self.compacted:
            raise ValueError(
                f"cannot {doing} {self.path}: the run is finished and compacted (its rows are in {METRICS_FILE}, "
                "which nothing writes); start it afresh with Run.create (which clears the folder) or under another name"
            )

    @property
    def db_path(self) -> Path:
        return self.path / "run.duckdb"

    @property
    def tensorboard_path(self) -> Path:
        """The TensorBoard event files of the run's rows (``tracker="tensorboard"``, :mod:`comprl.tracking`)."""
        return self.path / "tensorboard"

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
        and an evaluation or an :data:`AFTER_TRAINING` row at ``step`` itself (logged after that checkpoint) unless
        ``step`` is 0."""
        self._refuse_if_compacted("roll back")
        if not self.db_path.exists():
            return
        with duckdb_files.connect(str(self.db_path)) as con:
            if con.execute("SELECT count(*) FROM information_schema.tables WHERE table_name = 'metrics'").fetchone()[0]:
                con.execute(
                    "DELETE FROM metrics WHERE step > ? OR (phase IN ('eval', ?) AND step = ? AND step > 0)",
                    [step, AFTER_TRAINING, step],
                )

    def config(self) -> ExperimentConfig:
        return ExperimentConfig.from_dict(json.loads((self.path / "config.json").read_text()))

    def holds(self, config: ExperimentConfig) -> bool:
        """Whether this folder holds a run of exactly ``config`` (finished or not)."""
        return (self.path / "config.json").exists() and not _differences(self.config().to_dict(), config.to_dict())

    def record_machine(self, machine: dict[str, Any], after_step: int) -> None:
        """Note that a call trains this run on ``machine`` from the step after ``after_step``, with the code of
        :func:`code_revision` (:data:`MACHINES`)."""
        self._refuse_if_compacted("record a machine for")
        stamp = datetime.now(timezone.utc).isoformat(timespec="seconds")
        line = {"after_step": after_step, **machine, "code": code_revision(), "at": stamp}
        with (self.path / MACHINES).open("a") as file:
            file.write(json.dumps(line) + "\n")

    def machines(self) -> list[dict[str, Any]]:
        """The machines the run's calls computed on, in order (:data:`MACHINES`); empty for a run that predates
        the record."""
        path = self.path / MACHINES
        lines = path.read_text().splitlines() if path.is_file() else []
        return [json.loads(line) for line in lines if line.strip()]

    def log(self, step: int, phase: str, metrics: dict[str, Any]) -> None:
        """Append one metrics row; new metric names become new columns."""
        row = {"step": int(step), "phase": phase, **metrics}
        bad = [k for k in row if not _COLUMN.match(k)]
        if bad:
            raise ValueError(f"metric names must be identifiers, got {bad}")
        self._refuse_if_compacted("log a row into")
        with duckdb_files.connect(str(self.db_path)) as con:
            con.execute(f"CREATE TABLE IF NOT EXISTS metrics ({', '.join(map(' '.join, METRIC_KEYS.items()))})")
            have = {
                r[0]
                for r in con.execute(
                    "SELECT column_name FROM information_schema.columns WHERE table_name = 'metrics'"
                ).fetchall()
            }
            _check_case(row, have)
            for key, value in row.items():
                if key not in have:
                    sql_type = "VARCHAR" if isinstance(value, str) else "DOUBLE"
                    con.execute(f'ALTER TABLE metrics ADD COLUMN "{key}" {sql_type}')
            columns = ", ".join(f'"{k}"' for k in row)
            con.execute(f"INSERT INTO metrics ({columns}) VALUES ({', '.join('?' * len(row))})", list(row.values()))

    def metrics(self) -> pd.DataFrame:
        """All metric rows of this run, ordered by step (from ``run.duckdb``, or ``metrics.parquet`` once
        compacted)."""
        if self.db_path.exists():
            try:
                with duckdb_files.connect(str(self.db_path), read_only=True) as con:
                    return con.execute("SELECT * FROM metrics ORDER BY step, phase").df()
            except duckdb.IOException:
                if not self.compacted:  # else compacted since the check: read the Parquet file that replaced it
                    raise
        if not self.metrics_file.is_file():
            return pd.DataFrame(columns=["step", "phase"])
        with duckdb_files.connect() as con:
            return con.execute("SELECT * FROM read_parquet(?) ORDER BY step, phase", [str(self.metrics_file)]).df()

    def bank_operations(self) -> pd.DataFrame:
        """The experience bank's log of every change, in order (``seq``): from ``bank.duckdb`` (a copy of it, which
        a running loop may hold open), or ``bank_operations.parquet`` once compacted; empty for a run without a
        bank."""
        if self.bank_path.exists():
            with tempfile.TemporaryDirectory(prefix="comprl-bank-") as folder:
                with duckdb_files.connect(str(copy_bank_file(self.bank_path, Path(folder)))) as con:
                    return con.execute("SELECT * FROM operations ORDER BY seq").df()
        parquet = self.path / BANK_FILES["operations"]
        if not parquet.is_file():
            return pd.DataFrame(columns=["seq", "op", "content"])
        with duckdb_files.connect() as con:
            return con.execute("SELECT * FROM read_parquet(?) ORDER BY seq", [str(parquet)]).df()

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


def copy_bank_file(source: Path, folder: Path) -> Path:
    """Copy a bank file and its write-ahead log (which holds commits not yet checkpointed) into ``folder``: a copy
    can be opened while a running loop holds the file (DuckDB lets one process open a file)."""
    target = folder / source.name
    shutil.copyfile(source, target)
    wal = source.with_name(source.name + ".wal")
    if wal.exists():
        shutil.copyfile(wal, target.with_name(target.name + ".wal"))
    return target


def _check_case(row: dict[str, Any], have: set[str]) -> None:
    """Refuse a row with a metric whose name differs from another one's, in the row or stored, by case alone:
    DuckDB's column names ignore case, so ``Loss`` after ``loss`` would be the same column."""
    seen = {name.lower(): name for name in have}
    for key in row:
        other = seen.setdefault(key.lower(), key)
        if other != key:
            raise ValueError(
                f"metric {key!r} differs from the metric {other!r} only by case; run.duckdb's column names ignore "
                "case: give the two metrics names that differ by more than case"
            )


def remove_file(path: Path) -> None:
    """Delete ``path`` and the files beside it that extend its name (``.wal``, ``.holder``, ``.queue.jsonl``,
    ``.tmp``), if there; a link among them is deleted, not what it names."""
    for file in [path, *path.parent.glob(f"{path.name}.*")]:
        file.unlink(missing_ok=True)


def find_runs(config: ExperimentConfig, folders: Iterable[str | Path]) -> Iterator[Run]:
    """The run folders directly under ``folders`` that hold exactly ``config``, finished or not, in folder order,
    then name order."""
    for folder in folders:
        for found in sorted(Path(folder).glob("*/config.json")):
            run = Run(found.parent)
            if run.holds(config):
                yield run


def restore_link(path: str | Path) -> bool:
    """Make ``path`` the relative symbolic link it stands for where it is a plain file holding only a relative path
    to a run folder inside its results set (:func:`results_set`): what git checks a committed link out as where
    symlinks are off (``core.symlinks=false``, the default on Windows), and what some copy tools leave; return
    whether it did. Anything else is left as it is, a path leading out of the set included (``../../elsewhere``,
    every link on the way followed, the folder holding ``path`` too): a link made of it would name a folder that is
    no run of the set's."""
    path = Path(path)
    if path.is_symlink() or not path.is_file() or path.stat().st_size > 1024:
        return False
    try:
        target = path.read_text().strip()
    except (OSError, UnicodeDecodeError):
        return False
    if not target or "\n" in target or os.path.isabs(target) or not (path.parent / target / "config.json").is_file():
        return False
    if _leaves(path.parent / target, results_set(path)) or _leaves(path.parent, results_set(path)):
        return False
    path.unlink()
    path.symlink_to(target, target_is_directory=True)
    return True


def results_set(path: str | Path) -> Path:
    """The results tree a run folder (or a link standing for one) belongs to, inside which its links may point: the
    nearest enclosing folder named ``results`` (the kit's, where ``results/<profile>/<notebook>/<run>`` links to
    ``../<notebook>/<run>`` or to ``results/reference/``), else the folder holding its output folder."""
    path = Path(path).absolute()
    return next((folder for folder in path.parents if folder.name == "results"), path.parent.parent)


def _leaves(path: str | Path, root: str | Path) -> bool:
    """Whether ``path``, every link on the way followed, lies outside the folder ``root`` (itself resolved)."""
    return not Path(path).resolve().is_relative_to(Path(root).resolve())


def _refuse_links_within(path: Path) -> None:
    """Refuse to resume the run folder ``path`` where a link is found inside it: the kit makes none there, and a
    run resumed writes into its files (``run.duckdb``, ``finished``, ``machines.jsonl``, the bank, checkpoints), so
    a link planted among them (a results set copied or pulled from someone else) would be written through."""
    for folder, names, files in os.walk(path):
        for name in names + files:
            if (link := Path(folder) / name).is_symlink():
                raise FileExistsError(
                    f"cannot resume {path}: {link} is a link (to {os.readlink(link)}); a run folder holds no links, "
                    "and a resumed run would write through it: remove the link, or start afresh with resume=False"
                )


def _check_linked_run(path: Path) -> None:
    """Refuse to resume through the link ``path`` unless it names a finished run inside its results set: the only
    links the kit makes (:func:`link_finished`, :func:`restore_link`), through which nothing is written."""
    outside = _leaves(path, results_set(path))
    if outside or not (path / FINISHED).is_file():
        problem = f"outside its results set {results_set(path)}" if outside else "a run that is not finished"
        raise FileExistsError(
            f"cannot resume {path}: it is a link to {path.resolve()}, {problem}; a link is resumed only where it "
            "names a finished run inside the set (nothing is written through it); remove the link, or start "
            "afresh with resume=False (a new folder replaces the link)"
        )


def link_finished(config: ExperimentConfig, folders: Iterable[str | Path], to: Path) -> Run | None:
    """Make the new folder ``to`` a relative symbolic link to a finished run of exactly ``config`` found directly
    under one of ``folders`` (the first in folder order, then name order; a link is followed to the run it names),
    so that the run is stored once; return the run linked, None where none is found. Nothing writes into a finished
    run, so nothing reaches the original through the link."""
    to = Path(to)
    for run in find_runs(config, folders):
        source = run.path.resolve()
        if run.finished and source != to.resolve():
            to.parent.mkdir(parents=True, exist_ok=True)
            to.symlink_to(os.path.relpath(source, to.parent.resolve()), target_is_directory=True)
            return Run(source)
    return None


def run_folders(path: str | Path) -> list[Path]:
    """The run folders (with ``config.json``) at or under ``path``, in path order; a link to a run folder is listed
    where it is and not entered (resolve it to count the run once, where it lives)."""
    path = Path(path)
    if (path / "config.json").is_file():
        return [path]
    found = []
    for folder, subfolders, _ in os.walk(path):
        subfolders.sort()
        found += [Path(folder) / name for name in subfolders if (Path(folder) / name / "config.json").is_file()]
    return sorted(found)


def newest_run(root: str | Path, method: str = "comp_rl") -> Run | None:
    """The finished run of ``method`` under ``root``, at any depth (:func:`run_folders`; a linked run counted once),
    whose finished mark is the latest; None where there is none."""
    found: dict[Path, Run] = {}
    for folder in run_folders(root):
        run = Run(folder)
        if run.finished:
            found.setdefault(run.path.resolve(), run)
    runs = [run for run in found.values() if run.config().method == method]
    return max(runs, key=lambda run: (run.path / FINISHED).read_text().strip(), default=None)


def _differences(old: dict[str, Any], new: dict[str, Any], prefix: str = "") -> list[str]:
    """``field: old -> new`` for every config field that differs, nested ones dotted."""
    out = []
    for key in sorted(set(old) | set(new)):
        if f"{prefix}{key}" in NOT_COMPARED:
            continue
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
