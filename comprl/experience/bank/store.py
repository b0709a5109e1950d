"""The experience bank: one DuckDB file holding the entries, their embeddings and an append-only operations log.

Tables (plain SQL works on them, e.g. ``duckdb.connect("bank.duckdb").sql("FROM operations")``):

``entries``
    One row per entry ever written. Entries are never edited in place: an *update* writes a new entry whose
    ``parents`` are the replaced ids and marks those deleted; *discard* and capacity *evict* only mark entries
    deleted. ``uses``/``successes`` count the episodes that retrieved the entry and how many of them succeeded;
    ``updated_step`` is the last step the row changed (creation, a recorded use or deletion).
``operations``
    Every change, in order (``seq``): ``add``, ``update``, ``discard``, ``evict``, ``use``; plus ``none`` (a valid
    extractor answer with nothing to do) and ``reject`` (an invalid answer, ``result = 'rejected:<reason>'``).
    Rows written by one call share a ``batch`` number and keep the extractor's raw output (any lone surrogate in
    it escaped as ``\\udXXX``, since DuckDB stores UTF-8 only). The log alone is enough
    to rebuild the bank as of any step (:meth:`ExperienceBank.at_step`).
``meta``
    Key/value rows: ``dim`` and ``embedder`` (embedding size and model, checked when a file is reopened),
    ``format`` (:data:`FORMAT_NAME`) and ``schema_version`` (:data:`SCHEMA_VERSION`).

Every open checks the file before using it (:func:`check_bank_file`): an empty file becomes a new bank; a file with
other tables, other columns, another format or schema version, or a damaged block is refused with
:class:`BankFileError`, and nothing is written to it; so is a bank whose entries are not what replaying its
operations log makes them (an entry edited, planted or removed in the file). Banks written before the version was
stored (no ``format`` or ``schema_version`` row) open as version 1 if their tables match version 1 exactly; a bank
opened for writing then gets the two rows.

Search runs where the bank's ``index`` argument says (:data:`SEARCH_INDEXES`). ``"memory"`` (the default): an
exact in-memory index of the live entries (:class:`comprl.experience.bank.index.MemoryIndex`), loaded from the file
when the bank opens and changed together with it under the bank's write lock; it also keeps the live entries'
rows, so a search reads nothing from DuckDB. ``"hnsw"``: the HNSW index in the file (DuckDB ``vss`` extension,
cosine metric, built when ``use_vss``), approximate. ``"exact"``: brute force in SQL with
``array_cosine_distance``, which is also available on demand (``exact=True``) as the oracle. Ties go to the lower
id. The HNSW index covers deleted entries too, so an HNSW search oversamples and falls back to exact search for
any query whose filtered candidates come up short: the top-k is then the exact top-k whenever the index ranks
the candidates correctly.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import math
import operator
import os
import re
import shlex
import shutil
import socket
import sys
import threading
import warnings
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator, Literal, Sequence

import duckdb
import numpy as np
import pandas as pd

from comprl import duckdb_files
from comprl.experience.bank.embedder import Embedder
from comprl.experience.bank.index import MemoryIndex

ENTRY_COLUMNS: tuple[str, ...] = (
    "id",
    "task",
    "title",
    "content",
    "created_step",
    "updated_step",
    "uses",
    "successes",
    "parents",
    "deleted",
    "deleted_step",
)
"""Columns of :meth:`ExperienceBank.entries` and :meth:`ExperienceBank.at_step` (the embedding stays in SQL)."""

OPERATION_COLUMNS: tuple[str, ...] = (
    "seq",
    "op",
    "step",
    "task",
    "source",
    "origin",
    "targets",
    "entry_id",
    "title",
    "content",
    "raw",
    "result",
    "batch",
    "uses",
    "successes",
    "logged_at",
)
"""Columns of :meth:`ExperienceBank.operations`; ``logged_at`` is wall-clock UTC."""

SEARCH_INDEXES: tuple[str, ...] = ("memory", "hnsw", "exact")
"""Accepted ``index`` arguments of :class:`ExperienceBank` (the same as ``comprl.config.SEARCH_INDEXES``, which
this module does not import: loading the config would load torch and the model stack)."""

SCHEMA_VERSION = 1
"""Layout of the bank file this code reads and writes (the tables and columns of :func:`_schema`), stored in
``meta`` as ``schema_version``; a file of any other version is refused."""

FORMAT_NAME = "comprl experience bank"
"""``meta``'s ``format`` row: marks a DuckDB file as a bank written by comprl."""

HNSW_EF_SEARCH = 256
"""The index's search breadth. The index stores its graph but not its ``ef_search`` option (a reopened file
would search with vss's default, 64), so every connection the bank opens also sets ``hnsw_ef_search`` to this,
unless the bank's ``ef_search`` argument overrides it."""

HNSW_OPTIONS = f"metric = 'cosine', M = 32, ef_search = {HNSW_EF_SEARCH}"
"""Index settings: cosine similarity, and a graph wider and a search broader than vss's defaults (M = 16,
ef_search = 64), whose top-1 answers often differ from exact search's."""

# An index search asks for need * _OVERSAMPLE * (all rows / matching live rows) + _EXTRA_CANDIDATES candidates.
_OVERSAMPLE = 2
_EXTRA_CANDIDATES = 8
_QUERIES_PER_STATEMENT = 64
_INDEX = "entries_embedding_hnsw"
_INT32 = range(-(2**31), 2**31)  # what the INTEGER columns (ids, steps) hold
_ENTRY_SQL = "SELECT " + ", ".join(ENTRY_COLUMNS) + " FROM entries"
_IN_IDS = "id IN (SELECT unnest(?::INTEGER[]))"  # bind a list of ids
_TABLE_DTYPES = {
    "id": "int64",
    "created_step": "int64",
    "updated_step": "int64",
    "uses": "int64",
    "successes": "int64",
    "deleted": "bool",
    "deleted_step": "Int64",
}


@dataclass(frozen=True)
class NewEntry:
    """Title and content of an entry to be written."""

    title: str
    content: str

    @property
    def text(self) -> str:
        """The text that gets embedded and shown to the actor (same as :attr:`Entry.text`)."""
        return f"{self.title}\n{self.content}"


@dataclass(frozen=True)
class Write:
    """One bank write.

    ``add``: insert ``entry``. ``update``: replace the entries ``targets`` (bank ids) by one new entry ``entry``
    (its parents are the targets, which become deleted). ``discard``: delete ``targets``.
    """

    kind: Literal["add", "update", "discard"]
    targets: tuple[int, ...] = ()
    entry: NewEntry | None = None


class BankWriteError(ValueError):
    """A batch of writes was refused as a whole; ``reason`` is a short machine-readable code.

    Reasons: ``malformed_write`` (wrong kind, or targets/entry missing or superfluous for the kind),
    ``empty_text`` (blank title or content), ``bad_text`` (a lone surrogate in a title, content or task: DuckDB
    stores UTF-8 only), ``duplicate_target`` (an id targeted twice in the batch), ``missing_target`` (no such id),
    ``deleted_target`` (the id is already deleted), ``bad_step`` (a step that is not an integer in [-2**31, 2**31)).
    """

    def __init__(self, reason: str, message: str, write_index: int | None = None) -> None:
        super().__init__(message)
        self.reason = reason
        self.write_index = write_index


class BankFileError(ValueError):
    """The file at ``path`` is not an experience bank this code can open: another DuckDB file (never adopted, even
    if it has a table of the same name), another schema version, tables or columns other than version 1's, or a
    damaged block. Nothing is written to it. ``problem`` is the message without the file's name."""

    def __init__(self, path: Path | None, problem: str) -> None:
        super().__init__(f"{path or ':memory:'} {problem}")
        self.path = path
        self.problem = problem


class BankLockedError(RuntimeError):
    """The bank file is open in another process (while one process writes a DuckDB file, no other may open it).

    ``pid`` is the holder's process id as DuckDB reports it (None if it does not), ``holder`` what the holder wrote
    in its ``<bank>.holder`` file (pid, host, start time, working folder, command), if that file is the holder's.
    """

    def __init__(self, path: Path, pid: int | None, holder: dict[str, Any] | None, message: str) -> None:
        super().__init__(message)
        self.path = path
        self.pid = pid
        self.holder = holder


@dataclass(frozen=True)
class Entry:
    """One bank entry as stored."""

    id: int
    task: str
    title: str
    content: str
    created_step: int
    updated_step: int
    uses: int
    successes: int
    parents: tuple[int, ...]
    deleted: bool

    @property
    def text(self) -> str:
        """What the actor is shown, and what gets embedded: the title, a newline, the content."""
        return f"{self.title}\n{self.content}"


@dataclass(frozen=True)
class Hit:
    """A search result: the entry and its cosine similarity to the query (higher is closer)."""

    entry: Entry
    score: float


@dataclass(frozen=True)
class _Live:
    """What ``index="memory"`` keeps of the live entries: their vectors, searchable by task, and their rows."""

    vectors: MemoryIndex
    entries: dict[int, Entry]


@dataclass(frozen=True)
class _Op:
    """One row for the operations log (``seq``, ``step``, ``batch`` and ``logged_at`` are added when written)."""

    op: str
    task: str | None
    origin: str | None
    source: str | None = None
    targets: list[int] | None = None
    entry_id: int | None = None
    title: str | None = None
    content: str | None = None
    raw: str | None = None
    result: str = "applied"
    uses: int | None = None
    successes: int | None = None


def _quote(text: str | Path) -> str:
    """A SQL string literal (for statements that take no parameters: LOAD, ATTACH)."""
    return "'" + str(text).replace("'", "''") + "'"


def _identifier(name: str) -> str:
    """A quoted SQL identifier (an index's name, as the file has it)."""
    return '"' + name.replace('"', '""') + '"'


def _unencodable(text: str) -> bool:
    """True if ``text`` holds a lone surrogate (``"\\ud800"``), which has no UTF-8 form.

    DuckDB stores UTF-8 only; such a string reaching it through a registered DataFrame raises an internal error
    that invalidates the whole database for the rest of the process, so none may get that far.
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _escaped(value: Any) -> Any:
    """A string with its lone surrogates written as ``\\udXXX`` escapes; anything else unchanged."""
    if isinstance(value, str) and _unencodable(value):
        return value.encode("utf-8", "backslashreplace").decode("utf-8")
    return value


def _checked_step(step: Any) -> int:
    """``step`` as an int, refused with ``BankWriteError("bad_step")`` unless it is integral and fits the log."""
    try:
        value = int(step)
    except (TypeError, ValueError, OverflowError):  # None, NaN, infinities, non-numbers
        value = None
    if value is None or value != step or value not in _INT32:
        raise BankWriteError("bad_step", f"step must be an integer in [-2**31, 2**31), got {step!r}")
    return value


def _holder_file(path: Path) -> Path:
    """Where the process that has a bank file open notes who it is: ``bank.duckdb`` -> ``bank.duckdb.holder``."""
    return path.with_name(path.name + ".holder")


def _holder_note() -> dict[str, Any]:
    """Who this process is, for a second process that finds the bank locked: pid, host, start, folder, command."""
    return {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "since": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "folder": os.getcwd(),
        "command": shlex.join(sys.argv),
    }


def _locked_error(path: Path, duckdb_message: str) -> BankLockedError:
    """The error for a bank file another process holds: who holds it (DuckDB's PID, the holder file's details if
    that file is the holder's and not one left behind by a process that died) and how to look at it meanwhile."""
    found = re.search(r"PID (\d+)", duckdb_message)
    pid = int(found.group(1)) if found else None
    try:
        holder = json.loads(_holder_file(path).read_text())
    except (OSError, ValueError):
        holder = None
    if not isinstance(holder, dict) or pid is None or holder.get("pid") != pid:
        holder = None
    if holder is not None:
        who = f"PID {pid} on {holder.get('host')}, since {holder.get('since')}"
        who += f", running `{holder.get('command')}` in {holder.get('folder')}"
    elif pid is not None:
        who = f"PID {pid}"
    else:
        who = f"DuckDB says: {duckdb_message}"
    return BankLockedError(
        path,
        pid,
        holder,
        f"experience bank {path} is open in another process ({who}); DuckDB lets one process open a file at a "
        f"time, even to read. To look at it while that process runs, open a private copy: "
        f"comprl.widgets.BankExplorer({str(path)!r}) (its .bank is an ExperienceBank of the copy, .reload() copies "
        f"again). To write to it, stop that process or wait until it closes the bank.",
    )


def _load_vss(con: duckdb.DuckDBPyConnection) -> str | None:
    """Load the vss extension from the installed ``duckdb-extension-vss`` wheel; return why not, or None if loaded.

    ``duckdb_extensions.import_extension`` would first INSTALL the file into ``~/.duckdb``; loading the wheel's
    file directly needs no network and writes nothing outside the bank.
    """
    spec = importlib.util.find_spec("duckdb_extension_vss")
    if spec is None or not spec.submodule_search_locations:
        return "the package duckdb-extension-vss is not installed"
    version = con.execute("PRAGMA version").fetchone()[0]
    file = Path(next(iter(spec.submodule_search_locations))) / "extensions" / version / "vss.duckdb_extension"
    if not file.exists():
        return f"{file} does not exist (duckdb {version} needs duckdb-extension-vss=={version.lstrip('v')})"
    try:
        con.execute(f"LOAD {_quote(file)}")
    except duckdb.Error as error:
        return f"loading {file} failed: {error}"
    return None


def _schema(dim: int, database: str) -> list[str]:
    """The CREATE statements of a bank's tables (schema version 1) in the attached database ``database``."""
    return [
        f"CREATE TABLE {database}.meta (key VARCHAR, value VARCHAR)",
        f"""CREATE TABLE {database}.entries (
            id INTEGER NOT NULL, task VARCHAR NOT NULL, title VARCHAR NOT NULL, content VARCHAR NOT NULL,
            embedding FLOAT[{dim}] NOT NULL, created_step INTEGER NOT NULL, updated_step INTEGER NOT NULL,
            uses INTEGER NOT NULL, successes INTEGER NOT NULL, parents INTEGER[] NOT NULL,
            deleted BOOLEAN NOT NULL, deleted_step INTEGER)""",
        f"""CREATE TABLE {database}.operations (
            seq BIGINT NOT NULL, op VARCHAR NOT NULL, step INTEGER NOT NULL, task VARCHAR, source VARCHAR,
            origin VARCHAR, targets INTEGER[], entry_id INTEGER, title VARCHAR, content VARCHAR, raw VARCHAR,
            result VARCHAR NOT NULL, batch BIGINT NOT NULL, uses INTEGER, successes INTEGER,
            logged_at TIMESTAMP NOT NULL)""",
    ]


_TABLES = ("meta", "entries", "operations")  # the tables of _schema, in order
_ACCEPTED_FILES = (
    f"accepted: a new or empty file (made into a bank), or a bank of schema version {SCHEMA_VERSION} (also one "
    f"written before the version was stored, if its tables match version {SCHEMA_VERSION} exactly)"
)


def _current_database(con: duckdb.DuckDBPyConnection) -> str:
    """The name of the connection's current database (what ``USE`` last chose), to name its tables with."""
    return con.execute("SELECT current_database()").fetchone()[0]


def _columns(con: duckdb.DuckDBPyConnection, database: str) -> dict[str, list[str]]:
    """Every table and view of ``database`` with its columns as ``name TYPE [NOT NULL]``, in order (names outside
    the main schema are prefixed with their schema)."""
    rows = con.execute(
        """SELECT schema_name, table_name, column_name, data_type, is_nullable FROM duckdb_columns()
           WHERE database_name = ? AND NOT internal ORDER BY schema_name, table_name, column_index""",
        [database],
    ).fetchall()
    tables: dict[str, list[str]] = {}
    for schema, table, column, kind, nullable in rows:
        name = table if schema == "main" else f"{schema}.{table}"
        tables.setdefault(name, []).append(f"{column} {kind}" + ("" if nullable else " NOT NULL"))
    return tables


@functools.lru_cache(maxsize=8)
def _expected_columns(dim: int) -> dict[str, list[str]]:
    """The columns of a version-1 bank with ``dim``-dimensional embeddings, as :func:`_columns` lists them."""
    with duckdb_files.connect() as scratch:
        for statement in _schema(dim, "memory"):
            scratch.execute(statement)
        return _columns(scratch, "memory")


def parquet_columns(dim: int) -> dict[str, dict[str, str]]:
    """Each table of a version-1 bank with ``dim``-dimensional embeddings as a Parquet file holds it (``comprl
    export``, ``comprl compact``): its columns' DuckDB types by name, the fixed-size embedding array read back as a
    list and NOT NULL not kept."""
    return {
        table: dict(re.sub(r"\[\d+\]", "[]", column.removesuffix(" NOT NULL")).split(" ", 1) for column in columns)
        for table, columns in _expected_columns(dim).items()
    }


def _differences(found: dict[str, list[str]], expected: dict[str, list[str]]) -> list[str]:
    """How the tables ``found`` differ from those ``expected``, one phrase per difference."""
    out = [f"an unexpected table {table}" for table in found if table not in expected]
    for table, columns in expected.items():
        have = found.get(table)
        if have is None:
            out.append(f"no table {table}")
        elif set(have) != set(columns):
            out += [f"{table} has an unexpected column {column}" for column in have if column not in columns]
            out += [f"{table} lacks the column {column}" for column in columns if column not in have]
        elif have != columns:
            out.append(f"{table} has its columns in the order {', '.join(have)}")
    return out


def check_bank_file(con: duckdb.DuckDBPyConnection, database: str, path: Path | None) -> dict[str, str] | None:
    """Check that the attached database ``database`` (the file ``path``) is empty or a bank of
    :data:`SCHEMA_VERSION`, reading only; return its ``meta`` rows, or None if it holds no tables or views.

    Anything else is a :class:`BankFileError` saying what was found and what is accepted: a file without comprl's
    ``meta`` table (another DuckDB file), another ``format`` or ``schema_version``, or tables and columns other
    than version 1's (an extra, missing or retyped column, an extra table). A file without ``format`` and
    ``schema_version`` rows (written before they were stored) passes only if its tables match version 1 exactly.
    """
    found = _columns(con, database)
    if not found:
        return None
    if found.get("meta") != _expected_columns(1)["meta"]:  # meta's columns do not depend on dim
        raise BankFileError(
            path,
            f"is not an experience bank: it holds the tables {', '.join(found)} but no comprl meta table; "
            f"{_ACCEPTED_FILES}",
        )
    meta = dict(con.execute(f"SELECT key, value FROM {database}.meta").fetchall())
    form, version = meta.get("format"), meta.get("schema_version")
    if (form, version) not in ((None, None), (FORMAT_NAME, str(SCHEMA_VERSION))):
        raise BankFileError(
            path,
            f"holds format {form!r}, schema_version {version!r} in its meta table; this comprl reads format "
            f"{FORMAT_NAME!r}, schema_version {SCHEMA_VERSION!r}; {_ACCEPTED_FILES}",
        )
    dim = meta.get("dim", "")
    if not dim.isdigit() or int(dim) < 1 or "embedder" not in meta:
        raise BankFileError(
            path, f"has no valid dim and embedder rows in its meta table (found {sorted(meta)}); {_ACCEPTED_FILES}"
        )
    differences = _differences(found, _expected_columns(int(dim)))
    if differences:
        raise BankFileError(
            path,
            f"does not have the tables of a schema version {SCHEMA_VERSION} bank: {'; '.join(differences)}; "
            f"{_ACCEPTED_FILES}",
        )
    return meta


def _check_blocks(con: duckdb.DuckDBPyConnection, database: str, path: Path | None, index: bool) -> str | None:
    """Read every column of every table once (DuckDB verifies each block's checksum as it reads it) and, if
    ``index``, load the HNSW index; a damaged block is a :class:`BankFileError`. Returns the index's metric
    (None if the file has no index or ``index`` is false)."""
    metric = None
    try:
        for table in _TABLES:
            con.execute(f"SELECT count(*), max(hash(COLUMNS(*))) FROM {database}.{table}").fetchall()
        if index:
            found = con.execute(
                "SELECT metric FROM pragma_hnsw_index_info() WHERE catalog_name = ? AND index_name = ?",
                [database, _INDEX],
            ).fetchall()
            metric = found[0][0] if found else None
    except duckdb.Error as error:
        raise BankFileError(
            path, f"is damaged: {error}; accepted: an undamaged bank (restore it from a checkpoint or a copy)"
        ) from error
    return metric


def _replay(con: duckdb.DuckDBPyConnection, step: int) -> list[list[Any]]:
    """Every entry as the operations log alone makes it at the end of ``step`` (rows in ``ENTRY_COLUMNS`` order, by
    id, deleted ones included): log rows are replayed in order up to those of ``step``; if steps were logged out of
    order, a write never touches an entry that the replay has not created."""
    ops = con.execute(
        """SELECT op, step, task, targets, entry_id, title, content, uses, successes FROM operations
           WHERE step <= ? AND op IN ('add', 'update', 'discard', 'evict', 'use') ORDER BY seq""",
        [step],
    ).fetchall()
    state: dict[int, dict[str, Any]] = {}
    for op, at, task, targets, entry_id, title, content, uses, successes in ops:
        if op in ("add", "update"):
            state[entry_id] = dict(
                id=entry_id, task=task, title=title, content=content, created_step=at, updated_step=at,
                uses=0, successes=0, parents=list(targets), deleted=False, deleted_step=None,
            )  # fmt: skip
        if op in ("update", "discard", "evict"):
            for target in targets:
                if target in state:
                    state[target].update(deleted=True, deleted_step=at, updated_step=at)
        if op == "use" and entry_id in state:
            row = state[entry_id]
            row.update(uses=row["uses"] + uses, successes=row["successes"] + successes, updated_step=at)
    return [[row[column] for column in ENTRY_COLUMNS] for _, row in sorted(state.items())]


def _check_log(con: duckdb.DuckDBPyConnection, database: str, path: Path | None) -> None:
    """Refuse (:class:`BankFileError`) a bank whose entries differ from what its operations log makes of them: an
    entry edited, added or removed in the file without its log row (the log is the record; see :meth:`at_step`)."""
    replayed = {row[0]: row for row in _replay(con, _INT32.stop - 1)}
    problem = None
    for row in con.execute(f"SELECT {', '.join(ENTRY_COLUMNS)} FROM {database}.entries ORDER BY id").fetchall():
        found, expected = list(row), replayed.pop(row[0], None)
        if expected is None:
            problem = f"entry {row[0]} has no add or update in the log"
        elif found != expected:
            column, value, logged = next(c for c in zip(ENTRY_COLUMNS, found, expected) if c[1] != c[2])
            problem = f"entry {row[0]}'s {column} is {_snippet(value)}, the log makes it {_snippet(logged)}"
        if problem is not None:
            break
    if problem is None and replayed:
        problem = f"the log's entries {sorted(replayed)[:5]} are missing"
    if problem is not None:
        raise BankFileError(
            path,
            f"has entries that disagree with its operations log: {problem}; the entries table was changed outside "
            "comprl. Accepted: a bank whose entries are what its log makes them (restore it from a checkpoint or a "
            "copy)",
        )


def _snippet(value: Any) -> str:
    """A value for an error message, cut to 60 characters."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def bank_fingerprint(path: str | os.PathLike) -> dict[str, Any]:
    """What tells a closed bank file's state apart from any other state of it or of another bank, read only: its
    entries and operations counted, and its last operation's ``seq`` and ``logged_at`` (banks are append-only)."""
    try:
        with duckdb_files.connect(str(path), read_only=True) as con:
            entries = con.execute("SELECT count(*) FROM entries").fetchone()[0]
            operations, seq, at = con.execute("SELECT count(*), max(seq), max(logged_at) FROM operations").fetchone()
    except duckdb.Error as error:
        raise BankFileError(Path(path), f"cannot be read as a bank: {error}; {_ACCEPTED_FILES}") from error
    return {"entries": entries, "operations": operations, "last_seq": seq, "last_logged_at": str(at)}


def _check_writes(writes: Sequence[Write]) -> list[tuple[int, ...]]:
    """Structural checks of a batch (no database needed); returns each write's targets as ints."""
    all_targets: list[tuple[int, ...]] = []
    seen: set[int] = set()
    for i, write in enumerate(writes):
        if not isinstance(write, Write) or write.kind not in ("add", "update", "discard"):
            raise BankWriteError("malformed_write", f"write {i} is not an add/update/discard Write: {write!r}", i)
        try:
            targets = tuple(operator.index(t) for t in write.targets)
        except TypeError:
            raise BankWriteError("malformed_write", f"write {i} has non-integer targets {write.targets!r}", i) from None
        if (write.kind == "add") != (not targets):
            raise BankWriteError("malformed_write", f"write {i} ({write.kind}) has targets {targets}", i)
        if (write.kind == "discard") != (write.entry is None):
            raise BankWriteError("malformed_write", f"write {i} ({write.kind}) has entry {write.entry!r}", i)
        if write.entry is not None:
            title, content = write.entry.title, write.entry.content
            if not isinstance(title, str) or not isinstance(content, str) or not title.strip() or not content.strip():
                raise BankWriteError("empty_text", f"write {i} ({write.kind}) has a blank title or content", i)
            if _unencodable(title) or _unencodable(content):
                raise BankWriteError(
                    "bad_text", f"write {i} ({write.kind}) has a lone surrogate in its title or content", i
                )
        for target in targets:
            if target in seen:
                raise BankWriteError("duplicate_target", f"write {i} ({write.kind}) targets id {target} again", i)
            seen.add(target)
        all_targets.append(targets)
    return all_targets


class _ReadWriteLock:
    """A read/write lock that favours writers, re-entrant per thread.

    Any number of threads may hold it for reading at once; a writer holds it alone. Once a writer waits, threads
    that do not already hold it wait behind that writer, so a stream of searches cannot starve writes, and a search
    never sees a write half done. A thread that holds it for writing may take it again either way; one that holds
    it only for reading may read again (without waiting, even behind a waiting writer: that writer waits for it)
    but not write, which would wait for itself (``RuntimeError``).
    """

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._readers = 0  # threads holding a read
        self._writer: int | None = None  # the thread holding the write, if any
        self._waiting_writers = 0
        self._waiting_readers = 0
        self._held = threading.local()  # .reads: how deep this thread is in reads

    def reading(self) -> bool:
        """True if the calling thread holds a read and not the write."""
        return getattr(self._held, "reads", 0) > 0 and self._writer != threading.get_ident()

    def writing(self) -> bool:
        """True if the calling thread holds the write."""
        return self._writer == threading.get_ident()  # only this thread can set it to its own id

    @contextmanager
    def read(self) -> Iterator[None]:
        if self.writing():
            yield
            return
        depth = getattr(self._held, "reads", 0)
        if depth == 0:
            with self._cond:
                if self._writer is not None or self._waiting_writers:
                    self._waiting_readers += 1
                    self._cond.notify_all()  # lets a test observe the queue; nobody else waits on this
                    try:
                        self._cond.wait_for(lambda: self._writer is None and not self._waiting_writers)
                    finally:
                        self._waiting_readers -= 1
                self._readers += 1
        self._held.reads = depth + 1
        try:
            yield
        finally:
            self._held.reads = depth
            if depth == 0:
                with self._cond:
                    self._readers -= 1
                    if not self._readers:
                        self._cond.notify_all()

    @contextmanager
    def write(self) -> Iterator[None]:
        if self.writing():
            yield
            return
        if getattr(self._held, "reads", 0):
            raise RuntimeError("a thread reading the experience bank cannot write to it before its read ends")
        with self._cond:
            self._waiting_writers += 1
            self._cond.notify_all()
            try:
                self._cond.wait_for(lambda: self._writer is None and not self._readers)
            finally:
                self._waiting_writers -= 1
                if self._writer is None and not self._waiting_writers:
                    self._cond.notify_all()  # a writer giving up (interrupted) lets queued readers in
            self._writer = threading.get_ident()
        try:
            yield
        finally:
            with self._cond:
                self._writer = None
                self._cond.notify_all()


def _table(rows: Sequence[Sequence[Any]]) -> pd.DataFrame:
    """Entry rows (in ``ENTRY_COLUMNS`` order) as a frame with fixed dtypes and ``parents`` as int tuples."""
    rows = [(*row[:8], tuple(int(p) for p in row[8]), bool(row[9]), row[10]) for row in rows]
    return pd.DataFrame.from_records(rows, columns=list(ENTRY_COLUMNS)).astype(_TABLE_DTYPES)


def _entry(row: Sequence[Any]) -> Entry:
    return Entry(
        id=int(row[0]),
        task=row[1],
        title=row[2],
        content=row[3],
        created_step=int(row[4]),
        updated_step=int(row[5]),
        uses=int(row[6]),
        successes=int(row[7]),
        parents=tuple(int(p) for p in row[8]),
        deleted=bool(row[9]),
    )


class ExperienceBank:
    """Experience entries with embeddings, vector search and a replayable log, in one DuckDB database.

    ``path=None`` keeps the database in memory. Reopening a file restores everything, including the HNSW index;
    a :meth:`snapshot` holds the tables only, and the index is rebuilt when a restored one opens. Opening checks
    the file first and refuses (:class:`BankFileError`) anything but an empty file or a bank (module docstring).
    ``index`` picks where :meth:`search` runs (module docstring): ``"memory"`` holds the live entries' vectors
    (4 bytes x ``dim`` each) and rows in memory, loaded when the bank opens; ``"hnsw"`` needs ``use_vss``, which
    only decides whether the file keeps an HNSW index (kept up to date on every insert, which makes inserts much
    slower, and built when a file without one opens).
    The bank can be shared by threads of one process: reads (search, :meth:`get`, :meth:`entries`,
    :meth:`operations`, :meth:`at_step`, ``len``) run side by side, each thread on its own DuckDB cursor, while a
    write (:meth:`apply`, :meth:`log_rejection`, :meth:`record_uses`, :meth:`close`) runs alone on the main
    connection; a waiting write goes before reads that arrive after it. Embedding runs outside the lock.
    ``capacity`` caps the number of live entries: the oldest live ones are evicted (FIFO).
    ``ef_search`` overrides the index's search breadth (:data:`HNSW_EF_SEARCH`) for this session: a broader
    search agrees with exact search more often on a large bank, at the cost of time.

    A file can be open in one process at a time: another process gets :class:`BankLockedError`, naming the holder
    (which notes its pid, host, start time, folder and command in ``<path>.holder`` until :meth:`close`) and the
    read-only way in, :class:`comprl.widgets.BankExplorer` on a copy of the file.
    """

    def __init__(
        self,
        path: str | os.PathLike | None,
        embedder: Embedder,
        capacity: int = 20_000,
        use_vss: bool = True,
        ef_search: int | None = None,
        index: str = "memory",
    ) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be >= 1, got {capacity}")
        if index not in SEARCH_INDEXES:
            raise ValueError(f"index={index!r}; accepted: {', '.join(SEARCH_INDEXES)}")
        if index == "hnsw" and not use_vss:
            raise ValueError("index='hnsw' needs use_vss=True (the HNSW index lives in DuckDB's vss extension)")
        if ef_search is not None and ef_search < 1:
            raise ValueError(f"ef_search must be >= 1, got {ef_search}")
        self.path = None if path is None else Path(path)
        self.embedder = embedder
        self.capacity = capacity
        self.dim = embedder.dim
        self.index = index
        self._lock = _ReadWriteLock()
        self._live: _Live | None = None  # index="memory": the live entries (None before loading, after a failed update)
        self._live_guard = threading.Lock()  # one reader at a time reloads it
        self._session: list[str] = []  # what every connection runs first: DuckDB keeps these per connection
        self._cursors: dict[threading.Thread, duckdb.DuckDBPyConnection] = {}  # each reading thread's connection
        self._cursors_guard = threading.Lock()
        # One HNSW index statement at a time: concurrent index scans from several connections can abort the
        # process (usearch keeps one search context per hardware thread).
        self._index_guard = threading.Lock()
        self._con: duckdb.DuckDBPyConnection | None = duckdb_files.connect()
        try:
            # vss is loaded before the file is attached so that WAL replay can rebuild a persisted HNSW index.
            why_not = _load_vss(self._con)
            if why_not is None:
                self._con.execute("SET hnsw_enable_experimental_persistence = true")
                # always: the index's own ef_search option is not stored, so a reopened file would fall back to 64
                breadth = HNSW_EF_SEARCH if ef_search is None else int(ef_search)
                self._session.append(f"SET hnsw_ef_search = {breadth}")
                self._con.execute(self._session[-1])
            elif use_vss:
                fallback = ", searching exactly" if index == "hnsw" else ""
                warnings.warn(
                    f"vss extension unavailable, no HNSW index{fallback}: {why_not}", RuntimeWarning, stacklevel=2
                )
            self.vss_enabled = use_vss and why_not is None
            if self.path is not None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._attach(self.path)
            self._open_tables(vss_loaded=why_not is None)
            if index == "memory":
                self._live = self._load_live()
            if self.path is not None:
                _holder_file(self.path).write_text(json.dumps(_holder_note()))
        except BaseException:
            self._con.close()
            raise

    def _attach(self, path: Path) -> None:
        """Open the file as the default database; a file another process holds is a :class:`BankLockedError`."""
        try:
            self._db().execute(f"ATTACH {_quote(path)} AS bank")
        except duckdb.Error as error:
            if isinstance(error, duckdb.IOException) and "Could not set lock" in str(error):
                raise _locked_error(path, str(error)) from error
            raise BankFileError(path, f"cannot be opened as a DuckDB database: {error}; {_ACCEPTED_FILES}") from error
        self._session.append("USE bank")
        self._db().execute(self._session[-1])

    def _open_tables(self, vss_loaded: bool) -> None:
        """Check the file (:func:`check_bank_file`, every block read once), make an empty one a new bank, stamp
        one written before the version was stored with it, and give the bank its HNSW index (when ``use_vss``)."""
        con = self._db()
        database = _current_database(con)
        meta = check_bank_file(con, database, self.path)
        if meta is None:
            meta = dict(dim=str(self.dim), embedder=self.embedder.model, format=FORMAT_NAME)
            meta["schema_version"] = str(SCHEMA_VERSION)
            with self._transaction():
                for statement in _schema(self.dim, database):
                    con.execute(statement)
                con.executemany("INSERT INTO meta VALUES (?, ?)", list(meta.items()))
        if int(meta["dim"]) != self.dim:
            raise ValueError(
                f"bank {self.path} holds {meta['dim']}-dim embeddings but embedder {self.embedder.model!r} makes "
                f"{self.dim}"
            )
        if meta["embedder"] != self.embedder.model:
            warnings.warn(
                f"bank {self.path} was embedded with {meta['embedder']!r}, now searched with {self.embedder.model!r}",
                RuntimeWarning,
                stacklevel=3,
            )
        metric = _check_blocks(con, database, self.path, index=vss_loaded)
        _check_log(con, database, self.path)
        if "schema_version" not in meta:
            stamp = [("format", FORMAT_NAME), ("schema_version", str(SCHEMA_VERSION))]
            con.executemany("INSERT INTO meta VALUES (?, ?)", stamp)
        if self.vss_enabled:
            if metric not in (None, "cosine"):  # built by a copy that dropped the index's options
                con.execute(f"DROP INDEX {_INDEX}")
            con.execute(f"CREATE INDEX IF NOT EXISTS {_INDEX} ON entries USING HNSW (embedding) WITH ({HNSW_OPTIONS})")

    def _load_live(self) -> _Live:
        """The live entries' vectors and rows, read from the file (callers hold the lock or own the bank alone)."""
        vectors = MemoryIndex(self.dim)
        found = self._db().execute("SELECT id, task, embedding FROM entries WHERE NOT deleted ORDER BY id").fetchnumpy()
        if len(found["id"]):
            embeddings = np.stack(found["embedding"])
            for task in dict.fromkeys(found["task"].tolist()):
                rows = found["task"] == task
                vectors.add(task, found["id"][rows], embeddings[rows])
        rows = self._db().execute(f"{_ENTRY_SQL} WHERE NOT deleted").fetchall()
        return _Live(vectors, {int(row[0]): _entry(row) for row in rows})

    def _live_copy(self) -> _Live:
        """The in-memory live entries, reloaded from the file if an update failed half way (callers hold the lock:
        no write runs meanwhile, so readers may load it; one does, the others wait for it)."""
        live = self._live
        if live is None:
            with self._live_guard:
                if self._live is None:
                    self._live = self._load_live()
                live = self._live
        return live

    def _update_live(self, task: str, added: list[Entry], vectors: np.ndarray, removed: list[int]) -> None:
        """Bring the in-memory live entries in step with a committed write (callers hold the write lock).

        Entries are added before the removals, since capacity eviction may remove entries of the same write. If
        this fails part way, the copy is dropped (the file is the record) and the next search reloads it.
        """
        live = self._live
        if live is None:
            return
        try:
            live.vectors.add(task, [entry.id for entry in added], vectors)
            live.vectors.remove(removed)
            live.entries.update((entry.id, entry) for entry in added)
            for entry_id in removed:
                del live.entries[entry_id]
        except BaseException:
            self._live = None
            raise

    def _db(self) -> duckdb.DuckDBPyConnection:
        """The connection for this thread: its own cursor inside a read, otherwise the main connection.

        One DuckDB connection must not be used by two threads at once; a cursor is a second connection to the
        same database, and DuckDB lets connections read side by side.
        """
        if self._con is None:
            raise RuntimeError(f"experience bank {self.path or ':memory:'} is closed")
        if not self._lock.reading():
            return self._con
        me = threading.current_thread()
        cursor = self._cursors.get(me)
        if cursor is None:
            with self._cursors_guard:  # no write runs (we hold a read), but other readers may make cursors
                for thread in [t for t in self._cursors if not t.is_alive()]:
                    self._cursors.pop(thread).close()
                cursor = self._con.cursor()
                for statement in self._session:
                    cursor.execute(statement)
                self._cursors[me] = cursor
        return cursor

    @contextmanager
    def _transaction(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """Run the block in one DuckDB transaction: all of it commits, or none of it on an exception."""
        con = self._db()
        con.begin()
        try:
            yield con
        except BaseException:
            con.rollback()
            raise
        con.commit()

    # ---------------------------------------------------------------------------------------------------------
    # Writing
    # ---------------------------------------------------------------------------------------------------------

    def apply(
        self,
        writes: Sequence[Write],
        *,
        step: int,
        task: str,
        source: str | None = None,
        raw: str | None = None,
        origin: str = "distill",
        embeddings: np.ndarray | None = None,
    ) -> list[int]:
        """Apply a batch of writes atomically and return the ids of the new entries (one per add/update, in order).

        The whole batch is checked first (well-formed writes, non-blank texts, no id targeted twice, every target
        live); any failure raises :class:`BankWriteError` and changes nothing, the log included. Otherwise the
        writes, their log rows and any capacity evictions commit in one transaction. New entries are embedded
        (title and content) in one batch, unless ``embeddings`` (one row per new entry, in order) is given. An
        empty batch logs one ``none`` row, so that every extractor answer appears in the log. A lone surrogate in
        ``raw``, ``source`` or ``origin`` is logged as an escape (the text is kept, only not verbatim).
        """
        if not isinstance(task, str) or not task:
            raise ValueError(f"task must be a non-empty string, got {task!r}")
        if _unencodable(task):
            raise BankWriteError("bad_text", f"task {task!r} has a lone surrogate; tasks are stored as UTF-8")
        step = _checked_step(step)
        writes = list(writes)
        targets = _check_writes(writes)
        texts = [w.entry.text for w in writes if w.entry is not None]
        vectors = self._vectors(texts, embeddings)
        with self._lock.write():
            con = self._db()
            self._check_targets(writes, targets)
            next_id = con.execute("SELECT COALESCE(MAX(id), 0) + 1 FROM entries").fetchone()[0]
            new_rows, ops, dropped = [], [], []
            for write, ids in zip(writes, targets):
                entry_id = None
                if write.entry is not None:
                    entry_id = next_id + len(new_rows)
                    new_rows.append((entry_id, task, write.entry.title, write.entry.content, list(ids)))
                dropped.extend(ids)
                title = write.entry.title if write.entry is not None else None
                content = write.entry.content if write.entry is not None else None
                ops.append(_Op(write.kind, task, origin, source, list(ids), entry_id, title, content, raw))
            if not writes:
                ops.append(_Op("none", task, origin, source, raw=raw))
            with self._transaction():
                if new_rows:
                    frame = pd.DataFrame(new_rows, columns=["id", "task", "title", "content", "parents"])
                    frame["embedding"] = list(vectors)
                    with self._registered("_bank_new_entries", frame):
                        con.execute(
                            f"""INSERT INTO entries SELECT id, task, title, content, embedding::FLOAT[{self.dim}],
                                ?, ?, 0, 0, parents::INTEGER[], false, NULL FROM _bank_new_entries ORDER BY id""",
                            [step, step],
                        )
                self._mark_deleted(dropped, step)
                evicted = self._evict(step)
                self._log(ops + evicted, step)
            added = [
                Entry(i, task, title, content, step, step, 0, 0, tuple(parents), False)
                for i, _, title, content, parents in new_rows
            ]
            self._update_live(task, added, vectors, dropped + [op.entry_id for op in evicted])
        return [row[0] for row in new_rows]

    def log_rejection(
        self,
        *,
        step: int,
        task: str,
        reason: str,
        source: str | None = None,
        raw: str | None = None,
        origin: str = "distill",
    ) -> None:
        """Record an invalid extractor answer (op ``reject``, result ``rejected:<reason>``); the entries are untouched.

        Lone surrogates in the texts (``raw`` above all: the answer may have been rejected for holding one) are
        logged as escapes.
        """
        if not isinstance(reason, str) or not reason:
            raise ValueError(f"reason must be a non-empty string, got {reason!r}")
        step = _checked_step(step)
        with self._lock.write():
            self._log([_Op("reject", task, origin, source, raw=raw, result=f"rejected:{reason}")], step)

    def record_uses(self, entry_ids: Sequence[int], successes: Sequence[bool], step: int) -> None:
        """Count one use per listed id (repeats count again) and a success where ``successes`` is true.

        Deleted entries still count: an episode may finish after its entry was replaced. Logged as ``use`` rows
        (one per distinct id, with the increments) so that :meth:`at_step` can rebuild the counters.
        """
        entry_ids = [operator.index(i) for i in entry_ids]
        successes = [bool(s) for s in successes]
        if len(entry_ids) != len(successes):
            raise ValueError(f"entry_ids and successes differ in length: {len(entry_ids)} vs {len(successes)}")
        counts: dict[int, list[int]] = {}
        for entry_id, success in zip(entry_ids, successes):
            count = counts.setdefault(entry_id, [0, 0])
            count[0] += 1
            count[1] += success
        if not counts:
            return
        step = _checked_step(step)
        frame = pd.DataFrame([(i, u, s) for i, (u, s) in counts.items()], columns=["id", "uses", "successes"])
        with self._lock.write():
            con = self._db()
            storable = [i for i in counts if i in _INT32]  # no other id can exist
            tasks = dict(con.execute(f"SELECT id, task FROM entries WHERE {_IN_IDS}", [storable]).fetchall())
            missing = sorted(set(counts) - set(tasks))
            if missing:
                raise KeyError(f"no bank entries with ids {missing}")
            with self._transaction(), self._registered("_bank_uses", frame):
                con.execute(
                    """UPDATE entries SET uses = entries.uses + u.uses, successes = entries.successes + u.successes,
                       updated_step = ? FROM _bank_uses u WHERE entries.id = u.id""",
                    [step],
                )
                ops = [_Op("use", tasks[i], None, entry_id=i, uses=u, successes=s) for i, (u, s) in counts.items()]
                self._log(ops, step)
            live = self._live
            if live is not None:  # deleted entries are counted in the file only
                for i in counts.keys() & live.entries.keys():
                    entry = live.entries[i]
                    uses, wins = counts[i]
                    live.entries[i] = replace(
                        entry, uses=entry.uses + uses, successes=entry.successes + wins, updated_step=step
                    )

    def _vectors(self, texts: list[str], embeddings: np.ndarray | None) -> np.ndarray:
        if embeddings is None:
            return self.embedder.encode(texts)
        vectors = np.asarray(embeddings, dtype=np.float32)
        if vectors.shape != (len(texts), self.dim):
            raise ValueError(
                f"embeddings must have shape {(len(texts), self.dim)} (one row per new entry), got {vectors.shape}"
            )
        return vectors

    def _check_targets(self, writes: list[Write], targets: list[tuple[int, ...]]) -> None:
        wanted = sorted({t for ids in targets for t in ids if t in _INT32})  # no other id can exist
        deleted: dict[int, bool] = {}
        if wanted:
            deleted = dict(self._db().execute(f"SELECT id, deleted FROM entries WHERE {_IN_IDS}", [wanted]).fetchall())
        for i, (write, ids) in enumerate(zip(writes, targets)):
            for target in ids:
                if target not in deleted:
                    raise BankWriteError(
                        "missing_target", f"write {i} ({write.kind}) targets id {target}, which does not exist", i
                    )
                if deleted[target]:
                    raise BankWriteError(
                        "deleted_target", f"write {i} ({write.kind}) targets id {target}, which is deleted", i
                    )

    def _mark_deleted(self, ids: list[int], step: int) -> None:
        if ids:
            self._db().execute(
                f"UPDATE entries SET deleted = true, deleted_step = ?, updated_step = ? WHERE {_IN_IDS}",
                [step, step, ids],
            )

    def _evict(self, step: int) -> list[_Op]:
        """Delete the oldest live entries above capacity; return their log rows."""
        con = self._db()
        excess = con.execute("SELECT COUNT(*) FROM entries WHERE NOT deleted").fetchone()[0] - self.capacity
        if excess <= 0:
            return []
        victims = con.execute("SELECT id, task FROM entries WHERE NOT deleted ORDER BY id LIMIT ?", [excess]).fetchall()
        self._mark_deleted([entry_id for entry_id, _ in victims], step)
        return [_Op("evict", task, "capacity", targets=[entry_id], entry_id=entry_id) for entry_id, task in victims]

    def _log(self, ops: list[_Op], step: int) -> None:
        """Append rows to the operations log, numbered as one batch (callers hold the lock)."""
        con = self._db()
        seq, batch = con.execute(
            "SELECT COALESCE(MAX(seq), 0) + 1, COALESCE(MAX(batch), 0) + 1 FROM operations"
        ).fetchone()
        frame = pd.DataFrame([{key: _escaped(value) for key, value in vars(op).items()} for op in ops])
        frame["seq"] = np.arange(seq, seq + len(ops), dtype=np.int64)
        with self._registered("_bank_new_ops", frame):
            con.execute(
                """INSERT INTO operations SELECT seq, op, ?, task::VARCHAR, source::VARCHAR, origin::VARCHAR,
                   targets::INTEGER[], entry_id::INTEGER, title::VARCHAR, content::VARCHAR, raw::VARCHAR,
                   result::VARCHAR, ?, uses::INTEGER, successes::INTEGER, ? FROM _bank_new_ops ORDER BY seq""",
                [step, batch, datetime.now(timezone.utc).replace(tzinfo=None)],
            )

    @contextmanager
    def _registered(self, name: str, frame: pd.DataFrame) -> Iterator[None]:
        """Expose a DataFrame to SQL as ``name`` for the duration of the block."""
        self._db().register(name, frame)
        try:
            yield
        finally:
            self._db().unregister(name)

    # ---------------------------------------------------------------------------------------------------------
    # Search
    # ---------------------------------------------------------------------------------------------------------

    def search(
        self, queries: Sequence[str], k: int = 1, task: str | None = None, exact: bool = False
    ) -> list[list[Hit]]:
        """The ``k`` live entries closest to each query (best first), optionally only those of ``task``.

        ``exact=True`` forces brute force in SQL over all live entries; otherwise the bank's ``index`` decides (the
        HNSW index only when it loaded). Equal scores come in increasing id order.
        """
        if isinstance(queries, str):
            raise TypeError("search takes a sequence of query texts, got a single str")
        queries = list(queries)
        if not queries:
            return []
        return self.search_vectors(self.embedder.encode(queries), k=k, task=task, exact=exact)

    def search_vectors(
        self, vectors: np.ndarray, k: int = 1, task: str | None = None, exact: bool = False
    ) -> list[list[Hit]]:
        """:meth:`search` for precomputed query vectors (shape ``[n, dim]``; they need not be normalised)."""
        vectors = np.asarray(vectors, dtype=np.float32)
        if vectors.ndim != 2 or vectors.shape[1] != self.dim:
            raise ValueError(f"query vectors must have shape [n, {self.dim}], got {vectors.shape}")
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        if task is not None and _unencodable(task):
            raise ValueError(f"task {task!r} has a lone surrogate; no bank entry can have such a task")
        with self._lock.read():
            if self.index == "memory" and not exact:
                ids, scores = self._live_copy().vectors.search(vectors, k, task)
                entries = self._entries_by_id(set(ids.ravel().tolist()))
                return [[Hit(entries[i], s) for i, s in zip(*row)] for row in zip(ids.tolist(), scores.tolist())]
            found: list[list[tuple[int, float]]] = [[] for _ in range(len(vectors))]
            live, total = self._db().execute(
                "SELECT COUNT(*) FILTER (WHERE NOT deleted AND (?::VARCHAR IS NULL OR task = ?)), COUNT(*) "
                "FROM entries",
                [task, task],
            ).fetchone()
            if live and len(vectors):
                need = min(k, live)
                # Deleted and other-task rows sit in the index too: ask it for enough candidates that `need`
                # matching ones are expected among them, and search exactly where they still fall short.
                pool = need * _OVERSAMPLE * math.ceil(total / live) + _EXTRA_CANDIDATES
                short = list(range(len(vectors)))
                if self.index == "hnsw" and self.vss_enabled and not exact and pool < total:
                    found = self._index_search(vectors, k, task, pool)
                    short = [i for i, hits in enumerate(found) if len(hits) < need]
                if short:
                    for i, hits in zip(short, self._exact_search(vectors[short], k, task)):
                        found[i] = hits
            entries = self._entries_by_id({entry_id for hits in found for entry_id, _ in hits})
        return [[Hit(entries[entry_id], 1.0 - distance) for entry_id, distance in hits] for hits in found]

    def _index_search(self, vectors: np.ndarray, k: int, task: str | None, pool: int) -> list[list[tuple[int, float]]]:
        """HNSW: for each query, the index's ``pool`` nearest rows, filtered to live (and task) rows, best ``k``.

        The index only serves ``ORDER BY distance-to-a-constant LIMIT``, so each query is its own subquery; up to
        ``_QUERIES_PER_STATEMENT`` of them share one statement to save the per-statement overhead.
        """
        one = f"""SELECT id, distance FROM (
                      SELECT id, task, deleted, array_cosine_distance(embedding, ?::FLOAT[{self.dim}]) AS distance
                      FROM entries ORDER BY distance LIMIT ?)
                  WHERE NOT deleted AND (?::VARCHAR IS NULL OR task = ?) ORDER BY distance, id LIMIT ?"""
        found: list[list[tuple[int, float]]] = [[] for _ in range(len(vectors))]
        for start in range(0, len(vectors), _QUERIES_PER_STATEMENT):
            chunk = vectors[start : start + _QUERIES_PER_STATEMENT]
            sql = " UNION ALL ".join(f"SELECT {start + j} AS qi, * FROM ({one})" for j in range(len(chunk)))
            params = [p for vector in chunk for p in (vector.tolist(), pool, task, task, k)]
            with self._index_guard:  # a single-query search waits for at most one chunk of another search
                rows = self._db().execute(sql, params).fetchall()
            for qi, entry_id, distance in rows:
                found[qi].append((int(entry_id), float(distance)))
        return [sorted(hits, key=lambda hit: (hit[1], hit[0])) for hits in found]

    def _exact_search(self, vectors: np.ndarray, k: int, task: str | None) -> list[list[tuple[int, float]]]:
        """Brute force with ``array_cosine_distance`` over all live (and task) rows, all queries in one statement;
        ranked by distance, then id (so a tie at the k-th place keeps the lower id)."""
        queries = pd.DataFrame({"qi": np.arange(len(vectors)), "v": list(vectors)})
        with self._registered("_bank_queries", queries):
            rows = self._db().execute(
                f"""SELECT qi, min_by(struct_pack(id := id, distance := distance),
                                      struct_pack(distance := distance, id := id), ?) FROM (
                        SELECT q.qi, e.id, array_cosine_distance(e.embedding, q.v) AS distance
                        FROM (SELECT qi, v::FLOAT[{self.dim}] AS v FROM _bank_queries) q,
                             (SELECT id, embedding FROM entries
                              WHERE NOT deleted AND (?::VARCHAR IS NULL OR task = ?)) e)
                    GROUP BY qi""",
                [k, task, task],
            ).fetchall()
        found: list[list[tuple[int, float]]] = [[] for _ in range(len(vectors))]
        for qi, best in rows:
            found[qi] = sorted(((int(b["id"]), float(b["distance"])) for b in best), key=lambda hit: (hit[1], hit[0]))
        return found

    def _entries_by_id(self, ids: set[int]) -> dict[int, Entry]:
        """Rows of live entries (every search hit is one): from memory with ``index="memory"``, else from SQL."""
        if self._live is not None:
            return {i: self._live.entries[i] for i in ids}
        if not ids:
            return {}
        rows = self._db().execute(f"{_ENTRY_SQL} WHERE {_IN_IDS}", [sorted(ids)]).fetchall()
        return {int(row[0]): _entry(row) for row in rows}

    # ---------------------------------------------------------------------------------------------------------
    # Inspection
    # ---------------------------------------------------------------------------------------------------------

    def get(self, entry_id: int) -> Entry:
        """The entry with this id, deleted or not."""
        with self._lock.read():
            row = self._db().execute(f"{_ENTRY_SQL} WHERE id = ?", [operator.index(entry_id)]).fetchone()
        if row is None:
            raise KeyError(f"no bank entry with id {entry_id}")
        return _entry(row)

    def entries(self, include_deleted: bool = False) -> pd.DataFrame:
        """The current entries ordered by id (live ones only unless ``include_deleted``), without embeddings."""
        where = "" if include_deleted else " WHERE NOT deleted"
        with self._lock.read():
            rows = self._db().execute(f"{_ENTRY_SQL}{where} ORDER BY id").fetchall()
        return _table(rows)

    def at_step(self, step: int) -> pd.DataFrame:
        """The live bank as it stood at the end of ``step``, rebuilt by replaying the operations log alone.

        Same columns as :meth:`entries`. Log rows are replayed in order up to those of ``step``; if steps were
        logged out of order, a write never touches an entry that the replay has not created.
        """
        with self._lock.read():
            rows = _replay(self._db(), int(step))
        return _table([row for row in rows if not row[ENTRY_COLUMNS.index("deleted")]])

    def operations(self) -> pd.DataFrame:
        """The whole operations log ordered by ``seq``; ``targets`` as int tuples (None where not applicable)."""
        with self._lock.read():
            frame = self._db().execute("SELECT " + ", ".join(OPERATION_COLUMNS) + " FROM operations ORDER BY seq").df()
        frame["targets"] = [
            tuple(int(x) for x in t) if isinstance(t, (list, np.ndarray)) else None for t in frame["targets"]
        ]
        return frame

    def diff(self, step_a: int, step_b: int) -> dict[str, pd.DataFrame]:
        """What changed in the live bank from the end of ``step_a`` to the end of ``step_b``.

        ``added``: live at b, not at a. ``removed``: live at a, not at b (rows as they were at a). ``changed``:
        live at both with different use counts (rows as at b, plus ``uses_before`` and ``successes_before``);
        contents never change in place, since an update makes a new entry.
        """
        with self._lock.read():  # both from the same log
            before, after = self.at_step(step_a), self.at_step(step_b)
        added = after[~after["id"].isin(before["id"])].reset_index(drop=True)
        removed = before[~before["id"].isin(after["id"])].reset_index(drop=True)
        both = after.merge(before[["id", "uses", "successes"]], on="id", suffixes=("", "_before"))
        changed = both[(both["uses"] != both["uses_before"]) | (both["successes"] != both["successes_before"])]
        return {"added": added, "removed": removed, "changed": changed.reset_index(drop=True)}

    def __len__(self) -> int:
        with self._lock.read():
            return int(self._db().execute("SELECT COUNT(*) FROM entries WHERE NOT deleted").fetchone()[0])

    def __repr__(self) -> str:
        return (
            f"ExperienceBank(path={self.path}, capacity={self.capacity}, index={self.index!r}, "
            f"vss_enabled={self.vss_enabled})"
        )

    # ---------------------------------------------------------------------------------------------------------
    # Lifetime
    # ---------------------------------------------------------------------------------------------------------

    def snapshot(self, dest: str | os.PathLike) -> Path:
        """Copy the bank's tables as they are now into the new file ``dest`` (a run's checkpoint) in one
        transaction: searches in flight finish first, later ones and writes wait for the copy.

        The HNSW index is left out: the vss extension's persisted index is experimental, and DuckDB's own
        ``COPY FROM DATABASE`` rebuilt it without its options (L2 instead of cosine). The bank rebuilds it from the
        rows when a restored snapshot opens.
        """
        dest = Path(dest)
        if dest.exists():
            raise FileExistsError(f"bank snapshot {dest} exists already")
        with self._lock.write():
            con = self._db()
            source = _current_database(con)
            con.execute(f"ATTACH {_quote(dest)} AS snapshot")
            try:
                with self._transaction():
                    for statement in _schema(self.dim, "snapshot"):
                        con.execute(statement)
                    for table in _TABLES:
                        con.execute(f"INSERT INTO snapshot.{table} SELECT * FROM {source}.{table}")
            except BaseException:
                con.execute("DETACH snapshot")
                dest.unlink(missing_ok=True)
                raise
            con.execute("DETACH snapshot")
        return dest

    @staticmethod
    def restore(snapshot: str | os.PathLike, path: str | os.PathLike, recorded: dict[str, Any] | None = None) -> None:
        """Put a :meth:`snapshot` back at ``path`` (closed), dropping the write-ahead log a killed process left
        there (replayed onto the snapshot it would redo writes made after the snapshot) and every index in the
        copy, whatever its name (snapshots written before they left the HNSW index out carry one): the bank
        rebuilds its own when it opens, so no index state is ever carried over from a snapshot. The
        snapshot itself is not changed; one that is not a bank (:func:`check_bank_file`) is a
        :class:`BankFileError`, and so is one whose :func:`bank_fingerprint` is not ``recorded`` (what was noted
        when it was taken, e.g. by a checkpoint), before anything is written."""
        if recorded is not None:
            found = bank_fingerprint(snapshot)
            if found != recorded:
                raise BankFileError(
                    Path(snapshot),
                    f"is not the bank snapshot that was recorded with it: it holds {found}, the record says "
                    f"{recorded} (an older or other bank put in its place); accepted: the snapshot taken with the "
                    "record (restore the whole checkpoint, or delete it to start the run over)",
                )
        path = Path(path)
        Path(f"{path}.wal").unlink(missing_ok=True)
        shutil.copyfile(snapshot, path)
        try:
            with duckdb_files.connect(str(path)) as con:
                if check_bank_file(con, _current_database(con), Path(snapshot)):
                    for schema, name in con.execute("SELECT schema_name, index_name FROM duckdb_indexes()").fetchall():
                        con.execute(f"DROP INDEX {_identifier(schema)}.{_identifier(name)}")
        except duckdb.Error as error:
            raise BankFileError(Path(snapshot), f"cannot be restored: {error}; {_ACCEPTED_FILES}") from error

    def close(self) -> None:
        """Write everything to the file (a checkpoint, which also stores the HNSW index), close it, delete the note
        in ``<path>.holder``."""
        with self._lock.write():
            if self._con is not None:
                with self._cursors_guard:
                    for cursor in self._cursors.values():
                        cursor.close()
                    self._cursors.clear()
                self._con.close()
                self._con = None
                self._live = None
                if self.path is not None:
                    _holder_file(self.path).unlink(missing_ok=True)

    def __enter__(self) -> "ExperienceBank":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
