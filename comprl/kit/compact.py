"""Finished runs stored compactly: ``comprl compact [PATH ...]`` replaces a run's DuckDB files by Parquet.

A run folder's ``run.duckdb`` and ``bank.duckdb`` take 1-3 MB each for a few hundred rows (DuckDB allocates its
file in blocks, and the bank keeps an HNSW index); the same rows as Parquet take a few kB to a few hundred kB. A
finished run is never written again, so it needs no database: :func:`compact` writes ``metrics.parquet`` and
``bank_entries.parquet``, ``bank_operations.parquet``, ``bank_meta.parquet`` into the run folder (the files and
writers of an exported bundle, :mod:`comprl.kit.export`, so that one reader serves both), reads them back, checks
that they hold exactly the DuckDB tables' rows (counts, column types, values), and only then deletes the DuckDB
files (with the ``.wal`` and other files beside them), ``run.duckdb`` last: a compaction cut short leaves a run
that still reads from DuckDB, and compacting it again finishes the job.

Every reader takes a compacted run as it takes any other: :meth:`comprl.runs.Run.metrics` and
:func:`comprl.runs.load_metrics` read ``metrics.parquet``, :class:`comprl.kit.widgets.BankExplorer`, ``comprl eval``
and :func:`comprl.kit.export.opened` rebuild the bank from its Parquet files (in a temporary folder), ``comprl
export`` copies them; :meth:`~comprl.runs.Run.log` and :meth:`~comprl.runs.Run.rollback` refuse a compacted run,
and :meth:`~comprl.runs.Run.clear` deletes its Parquet files too.

What is not compacted: an unfinished run (it may still be written; it keeps DuckDB), a run folder that is a
symbolic link (a run stored elsewhere, compacted where it lives), and a finished run's ``checkpoint/`` folder,
which is left as it is: nothing reads it once the run finished, but for a full fine-tune or a trained extractor
it holds the only copy of the trained weights (``results/`` keeps checkpoints out of git).
"""

from __future__ import annotations

import logging
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator

import duckdb

from comprl import duckdb_files
from comprl.checkpoint import FOLDER as CHECKPOINT
from comprl.kit.export import bank_from_parquet, bank_to_parquet, metrics_to_parquet, sql_path
from comprl.runs import BANK_TABLES, Run, remove_file, run_folders

log = logging.getLogger(__name__)


class CompactError(ValueError):
    """A folder that cannot be compacted (not a run folder, or a run that is not finished), or Parquet files that
    do not read back as the DuckDB tables they were written from (the DuckDB files are then kept)."""


@dataclass(frozen=True)
class Outcome:
    """What :func:`compact` did with one run folder, and the bytes of the folder's files before and after."""

    run: Path
    done: str
    before: int
    after: int

    def line(self) -> str:
        """One line for the command's output: the folder, what was done, and the bytes before and after."""
        sizes = f"{self.before:,} -> {self.after:,} bytes" if self.before != self.after else f"{self.after:,} bytes"
        return f"{self.run}: {self.done} ({sizes})"


def compact(run: Run | str | Path) -> Outcome:
    """Store the finished run folder ``run`` as Parquet (module docstring); a compacted run is left as it is.

    Raises :class:`CompactError` for a folder without ``config.json``, a run without the finished mark (it may
    still be written) or Parquet files that differ from the DuckDB tables (the DuckDB files are kept and the
    Parquet files written by this call deleted).
    """
    run = run if isinstance(run, Run) else Run(Path(run))
    if not (run.path / "config.json").is_file():
        raise CompactError(f"{run.path} is not a run folder: it has no config.json")
    if not run.finished:
        raise CompactError(
            f"{run.path} is not finished (no 'finished' mark): it may still be written, so it keeps its DuckDB "
            "files; accepted: a run folder with config.json and the finished mark"
        )
    before = _folder_bytes(run.path)
    kept = f"; {CHECKPOINT}/ kept" if (run.path / CHECKPOINT).is_dir() else ""
    if run.compacted:
        return Outcome(run.path, f"already compacted{kept}", before, before)
    if not run.db_path.is_file():
        raise CompactError(f"{run.path} has neither run.duckdb nor metrics.parquet: no metric rows to store")
    written = []
    try:
        staged = run.metrics_file.with_name(run.metrics_file.name + ".tmp")  # renamed once complete
        written.append(staged)
        if not metrics_to_parquet(run, staged):
            raise CompactError(f"{run.path}: run.duckdb holds no metrics table")
        staged.replace(run.metrics_file)
        written.append(run.metrics_file)
        if run.bank_path.is_file():
            written += run.bank_files
            bank_to_parquet(run.bank_path, run.path)
        _check_metrics(run)
        if run.bank_path.is_file():
            _check_bank(run)
    except BaseException:
        for path in written:
            path.unlink(missing_ok=True)
        raise
    stored = ["run.duckdb"]
    if run.bank_path.is_file():
        remove_file(run.bank_path)
        stored.insert(0, "bank.duckdb")
    remove_file(run.db_path)  # last: from here on the run reads as compacted
    parquet = [path.name for path in [run.metrics_file, *run.bank_files] if path.is_file()]
    return Outcome(run.path, f"compacted {', '.join(stored)} -> {', '.join(parquet)}{kept}", before,
                   _folder_bytes(run.path))


def compact_paths(paths: Iterable[str | Path]) -> Iterator[Outcome]:
    """:func:`compact` every run folder at or under ``paths``, in name order; an unfinished run and a run folder
    that is a symbolic link are skipped with an :class:`Outcome` saying why. A path that does not exist is a
    :class:`FileNotFoundError`."""
    for path in map(Path, paths):
        if not path.exists():
            raise FileNotFoundError(f"{path} does not exist; accepted: run folders, or folders holding them")
        for folder in run_folders(path):
            size = _folder_bytes(folder)
            if folder.is_symlink():
                yield Outcome(folder, f"skipped: a link to {folder.resolve()}, compacted where it lives", size, size)
            elif not Run(folder).finished:
                yield Outcome(folder, "skipped: not finished (it may still be written; it keeps DuckDB)", size, size)
            else:
                outcome = compact(folder)
                log.info("%s", outcome.line())
                yield outcome


def _folder_bytes(path: Path) -> int:
    """The bytes of the files in ``path`` and its subfolders (0 for a link: its files are counted where they
    live)."""
    if path.is_symlink():
        return 0
    return sum((Path(folder) / name).stat().st_size for folder, _, files in os.walk(path) for name in files)


def _check_metrics(run: Run) -> None:
    """``metrics.parquet`` read back holds ``run.duckdb``'s ``metrics`` table: the same columns, types and rows."""
    with duckdb_files.connect() as con:
        con.execute(f"ATTACH {sql_path(run.db_path)} AS stored (READ_ONLY)")
        _same_rows(con, "stored.metrics", f"read_parquet({sql_path(run.metrics_file)})", run.metrics_file)


def _check_bank(run: Run) -> None:
    """The bank rebuilt from its Parquet files, as every reader rebuilds it, holds ``bank.duckdb``'s entries and
    operations; ``bank_meta.parquet`` holds its meta rows."""
    with tempfile.TemporaryDirectory(prefix="comprl-compact-") as folder:
        rebuilt = bank_from_parquet(run.path, Path(folder) / "bank.duckdb")
        with duckdb_files.connect() as con:
            con.execute(f"ATTACH {sql_path(run.bank_path)} AS stored (READ_ONLY)")
            con.execute(f"ATTACH {sql_path(rebuilt)} AS rebuilt (READ_ONLY)")
            for table, file in zip(BANK_TABLES, run.bank_files):
                written = f"read_parquet({sql_path(file)})" if table == "meta" else f"rebuilt.{table}"
                _same_rows(con, f"stored.{table}", written, file)


def _same_rows(con: duckdb.DuckDBPyConnection, stored: str, written: str, file: Path) -> None:
    """Raise :class:`CompactError` unless the relations ``stored`` and ``written`` have the same column names and
    types and the same rows, each as many times (NULL and NaN equal to themselves)."""
    columns = [con.execute(f"SELECT column_name, column_type FROM (DESCRIBE FROM {name})").fetchall()
               for name in (stored, written)]
    if columns[0] != columns[1]:
        raise CompactError(f"{file} does not read back with the columns of {stored}: {columns[1]} != {columns[0]}")
    counts = [con.execute(f"SELECT count(*) FROM {name}").fetchone()[0] for name in (stored, written)]
    missing = con.execute(f"SELECT count(*) FROM (FROM {stored} EXCEPT ALL FROM {written})").fetchone()[0]
    extra = con.execute(f"SELECT count(*) FROM (FROM {written} EXCEPT ALL FROM {stored})").fetchone()[0]
    if counts[0] != counts[1] or missing or extra:
        raise CompactError(
            f"{file} does not read back as {stored}: {counts[1]} rows for {counts[0]}, {missing} of them missing and "
            f"{extra} not in it; the DuckDB files are kept"
        )
