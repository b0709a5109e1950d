"""``comprl compact``: a finished run's DuckDB files become checked Parquet, and every reader reads the compacted run
as it read the DuckDB one (metrics, bank explorer, eval, export, reuse by later notebooks)."""

from __future__ import annotations

import shutil
import subprocess
import sys

import duckdb
import pandas as pd
import pytest

from comprl import loop
from comprl.config import make_config
from comprl.kit.cli import main
from comprl.kit.compact import CompactError, _same_rows, compact, compact_paths
from comprl.kit.export import export_run, opened
from comprl.kit.parallel import run_experiments
from comprl.kit.widgets import BankExplorer
from comprl.runs import Run, link_finished, load_metrics, newest_run

PARQUET = {"metrics.parquet", "bank_entries.parquet", "bank_operations.parquet", "bank_meta.parquet"}


@pytest.fixture(scope="module")
def finished(tmp_path_factory, seeded_bank):
    """A finished one-step LoRA comp_rl smoke run whose bank starts from three lessons (never compacted itself:
    each test compacts a copy)."""
    settings = {"actor.lora_rank": 4, "bank.init_from": str(seeded_bank)}
    config = make_config("smoke", method="comp_rl", steps=1, eval_episodes=2, **settings)
    return loop.run_experiment(config, output_dir=tmp_path_factory.mktemp("runs"), name="comp_rl_seed0", progress=False)


@pytest.fixture()
def copy(finished, tmp_path):
    """The finished run copied under ``tmp_path/results/`` with its name, checkpoint and TensorBoard events left
    out (so that the compacted folder's files are those of the run)."""
    target = tmp_path / "results" / finished.path.name
    shutil.copytree(finished.path, target, ignore=shutil.ignore_patterns("checkpoint", "tensorboard"))
    return Run(target)


def names(run: Run) -> set[str]:
    return {p.name for p in run.path.iterdir()}


def test_a_compacted_run_holds_parquet_only_and_reads_back_the_same_metrics(finished, copy):
    outcome = compact(copy)
    assert copy.compacted and PARQUET <= names(copy)
    assert not any(name.startswith(("run.duckdb", "bank.duckdb")) for name in names(copy))
    assert outcome.after < outcome.before and outcome.done.startswith("compacted bank.duckdb, run.duckdb ->")
    metrics = copy.metrics()
    assert len(metrics) == len(finished.metrics()) >= 3  # evaluation before, the training step, evaluation after
    pd.testing.assert_frame_equal(metrics, finished.metrics())
    pd.testing.assert_frame_equal(load_metrics(copy), load_metrics(finished))


def test_a_run_reads_its_bank_log_the_same_from_duckdb_and_once_compacted(finished, copy):
    log = copy.bank_operations()
    assert log["seq"].is_monotonic_increasing and {"add", "use"} <= set(log["op"])  # the seeded lessons, then used
    compact(copy)
    pd.testing.assert_frame_equal(copy.bank_operations(), log)
    assert Run(copy.path.parent).bank_operations().empty  # a folder without a bank has an empty log


def test_a_run_reads_the_bank_log_that_another_process_holds_open(finished, copy):
    log = copy.bank_operations()
    holder = subprocess.Popen(  # as a running loop holds it: DuckDB lets no other process open the file
        [sys.executable, "-c", f"import duckdb, sys; con = duckdb.connect({str(copy.bank_path)!r}); "
         "print('open', flush=True); sys.stdin.read()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "open"
        with pytest.raises(duckdb.IOException, match="lock"):
            duckdb.connect(str(copy.bank_path), read_only=True)
        pd.testing.assert_frame_equal(copy.bank_operations(), log)  # read from a copy
    finally:
        holder.communicate("")


def test_the_explorer_shows_a_compacted_bank_as_it_showed_the_duckdb_one(finished, copy):
    compact(copy)
    with BankExplorer(finished) as direct, BankExplorer(copy) as compacted:
        assert compacted.steps == direct.steps
        for step in range(direct.steps[1] + 1):
            pd.testing.assert_frame_equal(compacted.table(step), direct.table(step))
        entries = direct.bank.entries(include_deleted=True)
        assert len(entries) >= 3
        pd.testing.assert_frame_equal(compacted.bank.entries(include_deleted=True), entries)
        pd.testing.assert_frame_equal(compacted.bank.operations(), direct.bank.operations())


def test_eval_and_export_read_a_compacted_run_as_the_duckdb_one(finished, copy, tmp_path, capsys):
    compact(copy)
    main(["eval", str(finished.path), "--episodes", "2", "--csv", str(tmp_path / "run.csv")])
    main(["eval", str(copy.path), "--episodes", "2", "--csv", str(tmp_path / "compacted.csv")])
    rows = pd.read_csv(tmp_path / "run.csv")
    assert sorted(rows["experience"].unique()) == ["with", "without"]  # the final bank was found
    pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "compacted.csv"), rows)
    bundle = export_run(copy.path, tmp_path / "bundle")
    for name in PARQUET - {"metrics.parquet"}:  # the compacted bank goes into the bundle as it is
        assert (bundle / name).read_bytes() == (copy.path / name).read_bytes()
    with opened(bundle) as from_bundle, opened(copy) as from_compacted:
        assert from_compacted.bank_path.is_file() and from_compacted.path != copy.path  # rebuilt elsewhere
        pd.testing.assert_frame_equal(from_bundle.metrics(), finished.metrics())
        pd.testing.assert_frame_equal(from_compacted.metrics(), finished.metrics())
        assert from_bundle.machines() == from_compacted.machines() == finished.machines() != []  # kept throughout
    capsys.readouterr()


def test_a_compacted_run_is_reused_linked_and_found_as_finished(finished, copy, tmp_path):
    compact(copy)
    runs = run_experiments({"again": finished.config()}, tmp_path / "02", reuse=[copy.path.parent])
    assert runs["again"].path.is_symlink() and runs["again"].path.resolve() == copy.path.resolve()
    pd.testing.assert_frame_equal(runs["again"].metrics(), finished.metrics())
    assert newest_run(tmp_path).path.resolve() == copy.path.resolve()


def test_run_experiments_with_compact_compacts_the_plan_s_finished_runs_and_leaves_links(finished, copy, tmp_path):
    runs = run_experiments({"again": finished.config()}, tmp_path / "02", reuse=[copy.path.parent], compact=True)
    assert runs["again"].path.is_symlink() and not copy.compacted  # a link: compacted where it lives, if at all
    runs = run_experiments({copy.path.name: finished.config()}, copy.path.parent, compact=True)
    assert runs[copy.path.name].compacted and names(copy) >= PARQUET and not copy.db_path.exists()
    pd.testing.assert_frame_equal(runs[copy.path.name].metrics(), finished.metrics())


def test_a_compacted_run_refuses_rows_and_rollback_and_clear_removes_its_parquet(copy):
    compact(copy)
    with pytest.raises(ValueError, match="cannot log a row into .*: the run is finished and compacted"):
        copy.log(2, "train", {"success_rate": 1.0})
    with pytest.raises(ValueError, match="cannot roll back .*compacted"):
        copy.rollback(0)
    again = Run.create(copy.path.parent, copy.config(), name=copy.path.name)  # a fresh start in the same folder
    assert not PARQUET & names(again) and not again.finished
    assert again.metrics().empty and not again.compacted
    again.log(0, "eval", {"success_rate": 0.5})
    assert again.metrics()["success_rate"].tolist() == [0.5]


def test_an_unfinished_run_is_refused_by_compact_and_skipped_over_a_folder(copy):
    (copy.path / "finished").unlink()
    before = {p.name: p.read_bytes() for p in copy.path.iterdir()}
    with pytest.raises(CompactError, match="is not finished .*it may still be written, so it keeps its DuckDB"):
        compact(copy)
    (outcome,) = compact_paths([copy.path.parent])
    assert outcome.done.startswith("skipped: not finished")
    assert {p.name: p.read_bytes() for p in copy.path.iterdir()} == before
    with pytest.raises(CompactError, match="is not a run folder: it has no config.json"):
        compact(copy.path.parent)


def test_compacting_twice_changes_nothing_the_second_time(copy):
    compact(copy)
    files = {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in copy.path.iterdir()}
    outcome = compact(copy)
    assert outcome.done == "already compacted" and outcome.before == outcome.after
    assert {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in copy.path.iterdir()} == files


def test_the_command_skips_linked_runs_and_prints_bytes_before_and_after(finished, copy, tmp_path, capsys):
    later = tmp_path / "results" / "later"
    assert link_finished(finished.config(), [copy.path.parent], later / "linked") is not None
    assert main(["compact", str(later)]) == 0
    out = capsys.readouterr().out
    assert f"{later / 'linked'}: skipped: a link to {copy.path.resolve()}, compacted where it lives" in out
    assert not copy.compacted and copy.bank_path.is_file()  # compacted where it lives, not through the link
    assert main(["compact", str(tmp_path / "results")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert any(line.startswith(f"{copy.path}: compacted ") and " -> " in line and "bytes)" in line for line in lines)
    assert copy.compacted and lines[-1].startswith("comprl: run folders ")
    with pytest.raises(SystemExit, match="does not exist; accepted: run folders, or folders holding them"):
        main(["compact", str(tmp_path / "nowhere")])


def test_a_bank_init_from_a_compacted_run_s_file_says_how_to_rebuild_it(copy, tmp_path):
    compact(copy)
    config = make_config("smoke", method="comp_rl", steps=1, eval_episodes=0, **{"bank.init_from": str(copy.bank_path)})
    with pytest.raises(FileNotFoundError, match=r"its run is compacted .*bank_from_bundle\(RUN_FOLDER, FILE\)"):
        loop.run_experiment(config, output_dir=tmp_path / "new", progress=False)


def test_the_read_back_check_finds_a_changed_value_or_type_and_takes_nan_and_null_as_equal():
    with duckdb.connect() as con:
        con.execute("CREATE TABLE stored AS SELECT * FROM (VALUES (0, 'eval', 'nan'::DOUBLE), (1, 'train', NULL)) "
                    "t(step, phase, x)")
        con.execute("CREATE TABLE same AS FROM stored")
        _same_rows(con, "stored", "same", "same.parquet")
        con.execute("CREATE TABLE changed AS FROM stored")
        con.execute("UPDATE changed SET x = 0.5 WHERE step = 1")
        with pytest.raises(CompactError, match="changed.parquet does not read back as stored: 2 rows for 2, 1 of"):
            _same_rows(con, "stored", "changed", "changed.parquet")
        con.execute("CREATE TABLE retyped AS SELECT step, phase, x::FLOAT AS x FROM stored")
        with pytest.raises(CompactError, match="does not read back with the columns of stored"):
            _same_rows(con, "stored", "retyped", "retyped.parquet")
