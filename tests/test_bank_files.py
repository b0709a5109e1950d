"""Bank files: the schema version, refusing files that are not banks, damaged blocks, and snapshots that resume
without the vss extension's persisted HNSW index."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import duckdb
import numpy as np
import pytest

from comprl.experience.bank import BankFileError, Embedder, ExperienceBank, NewEntry, Write
from comprl.experience.bank.store import FORMAT_NAME, SCHEMA_VERSION
from comprl.widgets import BankExplorer

DIM = 384
RESULTS_RUN = Path(__file__).resolve().parents[1] / "results/archive/2026-11-27/cpu/01_single_task/comp_rl_seed0"
"""A committed run (its bank compacted to Parquet by ``comprl compact``)."""


class NoModel(Embedder):
    """An embedder that never loads its model: these tests pass every embedding in."""

    dim = DIM


def unit_vectors(rng: np.random.Generator, n: int) -> np.ndarray:
    x = rng.normal(size=(n, DIM)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def write_bank(path: Path, n: int = 3) -> None:
    """A closed bank file with ``n`` entries, one of them discarded."""
    with ExperienceBank(path, NoModel(), use_vss=False) as bank:
        writes = [Write("add", entry=NewEntry(f"title {i}", f"content {i}")) for i in range(n)]
        ids = bank.apply(writes, step=0, task="t", embeddings=unit_vectors(np.random.default_rng(0), n))
        bank.apply([Write("discard", targets=(ids[0],))], step=1, task="t")


def sql(path: Path, statement: str) -> list[tuple]:
    with duckdb.connect(str(path)) as con:
        return con.execute(statement).fetchall()


def test_a_new_bank_records_its_format_and_schema_version(tmp_path):
    write_bank(tmp_path / "bank.duckdb")
    meta = dict(sql(tmp_path / "bank.duckdb", "SELECT key, value FROM meta"))
    assert meta == {"dim": "384", "embedder": NoModel().model, "format": FORMAT_NAME, "schema_version": "1"}
    assert SCHEMA_VERSION == 1


def test_an_extra_column_is_refused_when_the_file_opens_not_at_the_first_write(tmp_path):
    path = tmp_path / "bank.duckdb"
    write_bank(path)
    sql(path, "ALTER TABLE entries ADD COLUMN note VARCHAR")
    before = path.read_bytes()
    with pytest.raises(BankFileError, match="entries has an unexpected column note VARCHAR") as refused:
        ExperienceBank(path, NoModel())
    assert str(path) in str(refused.value) and "schema version 1" in str(refused.value)
    assert path.read_bytes() == before, "a refused file is not written to"


@pytest.mark.parametrize(
    "tables",
    [
        ["CREATE TABLE results (run VARCHAR, score DOUBLE)"],
        # a table called meta alone does not make a file a bank
        ["CREATE TABLE meta (key VARCHAR, value VARCHAR)", "INSERT INTO meta VALUES ('owner', 'someone else')"],
    ],
    ids=["other_tables", "other_meta_table"],
)
def test_a_foreign_duckdb_file_is_refused_and_left_as_it_was(tmp_path, tables):
    path = tmp_path / "other.duckdb"
    with duckdb.connect(str(path)) as con:
        for statement in tables:
            con.execute(statement)
    before = path.read_bytes()
    with pytest.raises(BankFileError, match="accepted: a new or empty file") as refused:
        ExperienceBank(path, NoModel())
    assert str(path) in str(refused.value)
    assert path.read_bytes() == before
    assert {name for (name,) in sql(path, "SELECT table_name FROM duckdb_tables()")} <= {"results", "meta"}


def test_an_empty_duckdb_file_becomes_a_bank(tmp_path):
    path = tmp_path / "empty.duckdb"
    duckdb.connect(str(path)).close()
    write_bank(path)
    assert sql(path, "SELECT value FROM meta WHERE key = 'schema_version'") == [("1",)]


@pytest.mark.parametrize(
    "change, found",
    [
        ("UPDATE meta SET value = '2' WHERE key = 'schema_version'", f"format '{FORMAT_NAME}', schema_version '2'"),
        ("UPDATE meta SET value = 'another kit' WHERE key = 'format'", "format 'another kit', schema_version '1'"),
        ("DELETE FROM meta WHERE key = 'format'", "format None, schema_version '1'"),
    ],
)
def test_an_unknown_format_or_schema_version_is_refused(tmp_path, change, found):
    path = tmp_path / "bank.duckdb"
    write_bank(path)
    sql(path, change)
    with pytest.raises(BankFileError, match=f"{found} in its meta table; this comprl reads format") as refused:
        ExperienceBank(path, NoModel())
    assert str(path) in str(refused.value)
    with pytest.raises(BankFileError, match=found):  # the explorer's read-only way in checks too
        BankExplorer(path)


def test_a_bank_written_before_the_version_was_stored_opens_as_version_1(tmp_path):
    path = tmp_path / "bank.duckdb"
    write_bank(path)
    sql(path, "DELETE FROM meta WHERE key IN ('format', 'schema_version')")
    before = path.read_bytes()
    with BankExplorer(path) as explorer:
        assert explorer.table(1)["title"].tolist() == ["title 1", "title 2"]
    assert path.read_bytes() == before, "the explorer works on a copy"
    with ExperienceBank(path, NoModel()) as bank:
        assert len(bank) == 2
    assert dict(sql(path, "SELECT key, value FROM meta"))["schema_version"] == "1", "opened for writing: stamped"

    sql(path, "DELETE FROM meta WHERE key IN ('format', 'schema_version')")
    sql(path, "ALTER TABLE operations DROP COLUMN logged_at")  # unversioned is accepted only as version 1 exactly
    with pytest.raises(BankFileError, match="operations lacks the column logged_at TIMESTAMP NOT NULL"):
        ExperienceBank(path, NoModel())


def test_a_committed_results_bank_opens_in_the_explorer():
    before = {path.name: path.read_bytes() for path in RESULTS_RUN.iterdir()}
    with BankExplorer(RESULTS_RUN) as explorer:
        first, last = explorer.steps
        assert last > first and not explorer.table(last).empty
    assert {path.name: path.read_bytes() for path in RESULTS_RUN.iterdir()} == before


def test_a_damaged_block_is_refused_by_the_explorer(tmp_path):
    path = tmp_path / "bank.duckdb"
    write_bank(path, n=400)  # the embeddings fill more than one block of their own
    with duckdb.connect(str(path), read_only=True) as con:
        block_size = con.execute("SELECT block_size FROM pragma_database_size()").fetchone()[0]
        block = con.execute(  # a block of embeddings alone, which opening the explorer did not read
            """SELECT block_id FROM pragma_storage_info('entries') WHERE column_name = 'embedding'
               AND segment_type = 'FLOAT' ORDER BY count DESC LIMIT 1"""
        ).fetchone()[0]
    header = 3 * 4096  # DuckDB's file header and its two database headers
    with open(path, "r+b") as file:
        file.seek(header + block * block_size + 4096)
        file.write(b"\xab" * 64)
    with pytest.raises(BankFileError, match="is damaged: .*checksum") as refused:
        BankExplorer(path)
    assert str(refused.value).startswith(f"{path} is damaged"), "the error names the run's file, not the copy"
    with pytest.raises(BankFileError, match="is damaged"):
        ExperienceBank(path, NoModel())


def test_a_file_that_is_not_a_duckdb_database_is_refused(tmp_path):
    path = tmp_path / "bank.duckdb"
    path.write_text("not a database")
    with pytest.raises(BankFileError, match="cannot be opened as a DuckDB database"):
        ExperienceBank(path, NoModel())
    assert path.read_text() == "not a database"


# ---------------------------------------------------------------------------------------------------------------
# Snapshots and the HNSW index
# ---------------------------------------------------------------------------------------------------------------

_RESUME = textwrap.dedent(
    """
    import shutil
    import sys
    from pathlib import Path

    import duckdb
    import numpy as np

    from comprl.experience.bank import Embedder, ExperienceBank, NewEntry, Write
    from comprl.experience.bank.store import _load_vss

    class NoModel(Embedder):
        dim = 384

    folder = Path(sys.argv[1])
    rng = np.random.default_rng(0)

    def vectors(n):
        x = rng.normal(size=(n, 384)).astype(np.float32)
        return x / np.linalg.norm(x, axis=1, keepdims=True)

    def add(n, step, bank):
        writes = [Write("add", entry=NewEntry(f"s{step}-{i}", "content")) for i in range(n)]
        return bank.apply(writes, step=step, task="t", embeddings=vectors(n))

    def index_of(path):
        con = duckdb.connect()
        assert _load_vss(con) is None
        con.execute(f"ATTACH '{path}' AS b (READ_ONLY)")
        con.execute("USE b")
        found = con.execute("SELECT metric FROM pragma_hnsw_index_info()").fetchall()
        plan = con.execute(
            "EXPLAIN SELECT id FROM entries ORDER BY array_cosine_distance(embedding, ?::FLOAT[384]) LIMIT 3",
            [vectors(1)[0].tolist()],
        ).fetchall()[0][1]
        con.close()
        return [metric for (metric,) in found], "HNSW_INDEX_SCAN" in plan

    path = folder / "bank.duckdb"
    with ExperienceBank(path, NoModel(), capacity=150) as bank:
        for step in range(4):  # capacity evictions, discards and updates: rows deleted under the index
            ids = add(60, step, bank)
            bank.apply([Write("discard", targets=(ids[0],)),
                        Write("update", targets=(ids[1], ids[2]), entry=NewEntry("merged", "both"))],
                       step=step, task="t", embeddings=vectors(1))
        bank.snapshot(folder / "new.duckdb")
        # what snapshots were before: DuckDB's copy of the whole database, which rebuilds the index over all
        # rows, deleted ones included
        bank._db().execute(f"ATTACH '{folder / 'old.duckdb'}' AS old")
        bank._db().execute("COPY FROM DATABASE bank TO old")
        bank._db().execute("DETACH old")
        expected = bank.entries(include_deleted=True)
    print("SNAPSHOT INDEX", index_of(folder / "new.duckdb")[0], flush=True)

    # a bank that an older restore left with the copy's index (L2 metric) gets the bank's index when it opens
    shutil.copyfile(folder / "old.duckdb", folder / "kept.duckdb")
    with ExperienceBank(folder / "kept.duckdb", NoModel(), capacity=150) as bank:
        add(1, 10, bank)
    print("KEPT", *index_of(folder / "kept.duckdb"), flush=True)

    for name in ["old", "new"]:
        ExperienceBank.restore(folder / f"{name}.duckdb", path)
        with ExperienceBank(path, NoModel(), capacity=150, index="hnsw") as bank:
            assert bank.entries(include_deleted=True).equals(expected)
            add(60, 10, bank)
            bank.apply([Write("discard", targets=(int(bank.entries()["id"].iloc[0]),))], step=11, task="t")
            rows = len(bank.entries(include_deleted=True))
        with ExperienceBank(path, NoModel(), capacity=150) as bank:
            assert len(bank.entries(include_deleted=True)) == rows
            live = len(bank)
        print(name.upper(), rows, live, *index_of(path), flush=True)
    """
)


def test_resuming_from_a_snapshot_rebuilds_the_hnsw_index_with_the_banks_options(tmp_path):
    """In a child process (a crash in DuckDB must not take pytest down): a bank with deleted rows, snapshotted
    the current way and the way snapshots used to be made, each restored, written to, committed and reopened."""
    child = subprocess.run(
        [sys.executable, "-c", _RESUME, str(tmp_path)], capture_output=True, text=True, timeout=600
    )
    assert child.returncode == 0, f"the child died with {child.returncode}: {child.stderr[-2000:]}"
    lines = child.stdout.strip().splitlines()
    assert lines[0] == "SNAPSHOT INDEX []", "a snapshot carries no HNSW index"
    # 4 x 61 rows before, 60 added after the restore; 150 live (capacity) of which one discarded
    assert lines[1] == "KEPT ['cosine'] True"
    assert lines[2:] == ["OLD 304 149 ['cosine'] True", "NEW 304 149 ['cosine'] True"]
