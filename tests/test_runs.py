"""Run folders: the summary over seeds, rolling back rows a checkpoint does not cover, starting a folder afresh."""

from __future__ import annotations

import math
import os
import re
import shutil

import pytest

from comprl.config import make_config
from comprl.kit.parallel import run_experiments
from comprl.kit.report import summary_table, task_table
from comprl.runs import Run, link_finished, load_metrics, newest_run, restore_link, run_folders


def make_run(root, method: str, seed: int, before: float, after: float, steps: int = 2) -> Run:
    run = Run.create(root, make_config("smoke", method=method, seed=seed, steps=steps), name=f"{method}_seed{seed}")
    run.log(0, "eval", {"success_rate": before, "mean_episode_length": 3.0, "invalid_action_rate": 1.0})
    for step in range(1, steps + 1):
        run.log(step, "train", {"success_rate": 0.5})
    run.log(steps, "eval", {"success_rate": after, "mean_episode_length": 2.0, "invalid_action_rate": 0.0})
    return run


def test_summary_gives_the_mean_and_the_spread_over_seeds(tmp_path):
    runs = [make_run(tmp_path, "baseline", s, 0.1, a) for s, a in enumerate([0.25, 0.5, 0.75])]
    runs.append(make_run(tmp_path, "comp_rl", 0, 0.0, 1.0))
    table = summary_table(load_metrics(runs)).set_index("method")
    assert table.loc["baseline", "seeds"] == 3 and table.loc["baseline", "success_after"] == 0.5
    assert table.loc["baseline", "success_after_sd"] == pytest.approx(0.25)  # sample standard deviation
    assert (
        table.loc["baseline", "success_before"] == pytest.approx(0.1)
        and table.loc["baseline", "success_before_sd"] == 0
    )
    assert math.isnan(table.loc["comp_rl", "success_after_sd"])  # one seed: no spread


def test_table_1_averages_each_seed_over_the_tasks_and_gives_the_spread_of_those_averages(tmp_path):
    runs = []
    for seed, (room, webshop, alfworld) in enumerate([(0.5, 0.25, 0.0), (1.0, 0.75, 0.5)]):
        run = Run.create(tmp_path, make_config("smoke", tasks="3-task", seed=seed), name=f"3-task_seed{seed}")
        run.log(0, "eval", {"success_rate": 0.0})
        run.log(
            2,
            "eval",
            {
                "success_rate": 0.0,
                "room_success_rate": room,
                "webshop_success_rate": webshop,
                "alfworld_success_rate": alfworld,
            },
        )
        runs.append(run)
    (row,) = task_table(load_metrics(runs)).to_dict("records")
    assert row["row"] == "Baseline GRPO (no experience)" and row["seeds"] == 2
    assert (row["room"], row["webshop"], row["alfworld"]) == (0.75, 0.5, 0.25)
    assert row["avg"] == 0.5 and row["avg_sd"] == pytest.approx(math.sqrt(2) * 0.25)  # seed averages 0.25 and 0.75


def test_one_run_folder_loads_as_well_as_a_list(tmp_path):
    run = make_run(tmp_path, "baseline", 0, 0.25, 0.75)
    for one in (run, run.path, str(run.path)):
        metrics = load_metrics(one)
        evals = metrics[metrics["phase"] == "eval"]
        assert set(metrics["run"]) == {"baseline_seed0"} and list(evals["success_rate"]) == [0.25, 0.75]


def test_rollback_keeps_the_rows_a_checkpoint_covers(tmp_path):
    run = make_run(tmp_path, "baseline", 0, 0.0, 1.0, steps=3)
    run.rollback(3)  # the final evaluation was logged after the checkpoint of step 3
    assert list(zip(run.metrics()["step"], run.metrics()["phase"])) == [
        (0, "eval"),
        (1, "train"),
        (2, "train"),
        (3, "train"),
    ]
    run.rollback(1)
    assert list(zip(run.metrics()["step"], run.metrics()["phase"])) == [(0, "eval"), (1, "train")]


def test_a_fresh_start_clears_what_the_last_run_wrote(tmp_path):
    run = make_run(tmp_path, "comp_rl", 0, 0.0, 1.0)
    (run.path / "checkpoint").mkdir()
    run.bank_path.write_text("a bank")
    (run.path / "notes.txt").write_text("mine")
    run.record_machine({"device": "CPU: somewhere", "cores": 1, "dtype": "float32", "torch": "x"}, after_step=0)
    assert [m["device"] for m in run.machines()] == ["CPU: somewhere"]
    # the code that trained it: this checkout's commit (with "+changes" while comprl/ differs from it)
    assert re.fullmatch(r"[0-9a-f]{40}(\+changes)?", run.machines()[0]["code"])
    run.mark_finished()
    again = Run.create(tmp_path, make_config("smoke", method="comp_rl"), name="comp_rl_seed0")
    assert not again.finished and again.metrics().empty and not again.bank_path.exists()
    assert again.machines() == []
    assert not (run.path / "checkpoint").exists() and (run.path / "notes.txt").read_text() == "mine"


def test_a_finished_run_of_the_same_config_is_linked_from_earlier_results_not_trained_again(tmp_path):
    earlier = make_run(tmp_path / "01", "comp_rl", 0, 0.25, 0.75)
    earlier.mark_finished()
    make_run(tmp_path / "01", "baseline", 0, 0.0, 0.5)  # not finished: never a source
    config = earlier.config()
    runs = run_experiments({"room_comp_rl": config}, tmp_path / "02", reuse=[tmp_path / "empty", tmp_path / "01"])
    linked = runs["room_comp_rl"]
    assert linked.path == tmp_path / "02" / "room_comp_rl" and linked.finished and linked.config() == config
    assert linked.metrics().equals(earlier.metrics())
    # stored once: a relative link (it survives moving or cloning the results tree), followed to the original
    assert linked.path.is_symlink() and not os.readlink(linked.path).startswith("/")
    assert linked.path.resolve() == earlier.path.resolve()
    again = run_experiments({"room": config}, tmp_path / "03", reuse=[tmp_path / "02"])["room"]
    assert os.readlink(again.path) == os.path.join("..", "01", earlier.path.name)  # a link to a link: the original
    # another config is left to train
    other = make_config("smoke", method="comp_rl", seed=1, steps=2)
    assert link_finished(other, [tmp_path / "01"], tmp_path / "02" / "x") is None
    assert not (tmp_path / "02" / "x").exists()
    unfinished = make_config("smoke", method="baseline", steps=2)
    assert link_finished(unfinished, [tmp_path / "01"], tmp_path / "02" / "y") is None


def test_a_link_checked_out_as_a_plain_file_is_a_link_again_when_the_plan_resumes(tmp_path):
    """Where git has symlinks off it checks a committed link out as a file holding its target; a resumed plan
    (``comprl reproduce`` on such a checkout) once raised FileExistsError making that run's folder."""
    earlier = make_run(tmp_path / "01", "comp_rl", 0, 0.25, 0.75)
    earlier.mark_finished()
    (tmp_path / "02").mkdir()
    stand_in = tmp_path / "02" / "room_comp_rl"
    stand_in.write_text("../01/comp_rl_seed0")  # as git writes it, no newline
    runs = run_experiments({"room_comp_rl": earlier.config()}, tmp_path / "02", reuse=[tmp_path / "01"])
    assert stand_in.is_symlink() and os.readlink(stand_in) == "../01/comp_rl_seed0"
    assert runs["room_comp_rl"].finished and runs["room_comp_rl"].metrics().equals(earlier.metrics())
    # anything else in a run's way is left as it is, and named
    for text in ["notes\n", "/etc", "../01/missing", "../01/comp_rl_seed0\n../01"]:
        other = tmp_path / "02" / "other"
        other.write_text(text)
        assert not restore_link(other) and other.read_text() == text
        with pytest.raises(FileExistsError, match="a file of that name is in the way"):
            Run.create(tmp_path / "02", earlier.config(), name="other", resume=True)


def test_the_newest_finished_run_of_a_method_anywhere_under_a_folder(tmp_path):
    assert newest_run(tmp_path) is None
    older = make_run(tmp_path / "cpu" / "01_single_task", "comp_rl", 0, 0.25, 0.75)
    (older.path / "finished").write_text("2026-11-01T00:00:00+00:00\n")
    newer = make_run(tmp_path / "lab" / "06_bank_explorer", "comp_rl", 1, 0.25, 0.75)
    (newer.path / "finished").write_text("2026-11-20T00:00:00+00:00\n")
    make_run(tmp_path / "demo" / "01_single_task", "comp_rl", 2, 0.25, 0.75)  # not finished
    latest_baseline = make_run(tmp_path / "demo" / "01_single_task", "baseline", 0, 0.0, 0.5)
    (latest_baseline.path / "finished").write_text("2026-11-28T00:00:00+00:00\n")
    assert newest_run(tmp_path).path == newer.path
    assert newest_run(tmp_path, "baseline").path == latest_baseline.path


def test_run_folders_are_found_at_any_depth_and_a_link_is_listed_where_it_is_not_entered(tmp_path):
    deep = make_run(tmp_path / "cpu" / "01_single_task", "comp_rl", 0, 0.25, 0.75)
    shallow = make_run(tmp_path / "lab", "baseline", 0, 0.0, 0.5)
    (tmp_path / "cpu" / "02_multitask").mkdir()
    link = tmp_path / "cpu" / "02_multitask" / "room_comp_rl"
    link.symlink_to(os.path.relpath(deep.path, link.parent), target_is_directory=True)
    (tmp_path / "cpu" / "notes").mkdir()  # a folder without config.json is no run
    assert run_folders(tmp_path) == [deep.path, link, shallow.path]
    assert run_folders(tmp_path / "cpu" / "02_multitask") == [link]
    assert run_folders(deep.path) == [deep.path]  # a run folder itself
    assert run_folders(tmp_path / "missing") == []


def victim_run(folder) -> dict[str, bytes]:
    """A run folder outside the results set, with the files a fresh start deletes; returns its files' contents."""
    run = make_run(folder.parent, "comp_rl", 0, 0.25, 0.75)
    run.path.rename(folder)
    for name in ["finished", "machines.jsonl", "bank.duckdb", "metrics.parquet", "checkpoint/state.pt",
                 "tensorboard/events"]:
        (folder / name).parent.mkdir(exist_ok=True)
        (folder / name).write_text(name)
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def test_a_link_stored_as_a_file_that_leads_out_of_the_results_set_is_not_restored_nor_cleared(tmp_path):
    """A 16-byte plain file ``../../victim_run`` in a results set was made a link, and starting its run afresh
    deleted the files of the run folder beside the set and overwrote its config.json."""
    victim = tmp_path / "victim_run"
    files = victim_run(victim)
    config = Run(victim).config()
    (tmp_path / "set" / "02").mkdir(parents=True)
    stand_in = tmp_path / "set" / "02" / "room"
    stand_in.write_text("../../victim_run")
    assert stand_in.stat().st_size == 16 and not restore_link(stand_in)
    with pytest.raises(FileExistsError, match="a file of that name is in the way"):
        Run.create(tmp_path / "set" / "02", make_config("smoke", method="baseline"), name="room")
    # a real link out of the set: started afresh, a new folder replaces the link; resumed, it is refused
    stand_in.unlink()
    stand_in.symlink_to("../../victim_run", target_is_directory=True)
    with pytest.raises(FileExistsError, match="outside its results set"):
        Run.create(tmp_path / "set" / "02", config, name="room", resume=True)
    fresh = Run.create(tmp_path / "set" / "02", make_config("smoke", method="baseline"), name="room")
    assert not fresh.path.is_symlink() and fresh.config().method == "baseline"
    # a stand-in whose own folder is a link leaving the set, though its target leads back in
    make_run(tmp_path / "set" / "01", "comp_rl", 0, 0.25, 0.75)
    (tmp_path / "elsewhere" / "03").mkdir(parents=True)
    (tmp_path / "set" / "03").symlink_to("../elsewhere/03", target_is_directory=True)
    (tmp_path / "set" / "03" / "room").write_text("../../set/01/comp_rl_seed0")
    assert (tmp_path / "elsewhere" / "03" / "../../set/01/comp_rl_seed0/config.json").is_file()
    assert not restore_link(tmp_path / "set" / "03" / "room")
    assert {p.relative_to(victim).as_posix(): p.read_bytes() for p in victim.rglob("*") if p.is_file()} == files


def test_a_run_started_afresh_replaces_a_link_and_never_deletes_or_writes_through_one(tmp_path):
    """A linked finished run started afresh deleted the original's files; a config.json hard-linked to another
    run's was overwritten in place."""
    original = make_run(tmp_path / "01", "comp_rl", 0, 0.25, 0.75)
    original.mark_finished()
    files = {p.name: p.read_bytes() for p in original.path.iterdir()}
    link = tmp_path / "02" / "room"
    link.parent.mkdir()
    link.symlink_to("../01/comp_rl_seed0", target_is_directory=True)
    assert Run.create(tmp_path / "02", original.config(), name="room", resume=True).path.is_symlink()
    fresh = Run.create(tmp_path / "02", original.config(), name="room")
    assert not fresh.path.is_symlink() and not fresh.finished and fresh.metrics().empty
    other = tmp_path / "03" / "room"
    other.mkdir(parents=True)
    os.link(original.path / "config.json", other / "config.json")
    Run.create(tmp_path / "03", make_config("smoke", method="baseline"), name="room")
    assert {p.name: p.read_bytes() for p in original.path.iterdir()} == files
    # a linked run that is not finished is not resumed through the link (resuming writes into it)
    (original.path / "finished").unlink()
    link.parent.joinpath("again").symlink_to("../01/comp_rl_seed0", target_is_directory=True)
    with pytest.raises(FileExistsError, match="a run that is not finished"):
        Run.create(tmp_path / "02", original.config(), name="again", resume=True)


@pytest.mark.parametrize("planted", ["run.duckdb", "finished", "machines.jsonl", "tensorboard"])
def test_a_run_folder_with_a_link_planted_inside_is_not_resumed_through_it(tmp_path, planted):
    """A run resumed writes into its files: one planted as a link out of the results set (a set pulled from
    someone else's git) was written through, into the file it named."""
    run = make_run(tmp_path / "results" / "cpu", "comp_rl", 0, 0.25, 0.75)
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "keep.txt").write_text("mine")
    target = run.path / planted
    if target.is_dir():
        shutil.rmtree(target)
    else:
        target.unlink(missing_ok=True)
    target.symlink_to(victim / ("keep.txt" if planted != "tensorboard" else ""))
    with pytest.raises(FileExistsError, match=f"{planted} is a link .*remove the link"):
        Run.create(run.path.parent, run.config(), name=run.path.name, resume=True)
    assert (victim / "keep.txt").read_text() == "mine"


def test_a_metric_named_like_another_but_for_case_is_refused_naming_both(tmp_path):
    """run.duckdb's column names ignore case: ``Loss`` after ``loss`` raised DuckDB's own CatalogException."""
    run = make_run(tmp_path, "baseline", 0, 0.0, 1.0)
    run.log(3, "train", {"loss": 0.5})
    for row in [{"Loss": 0.25}, {"success": 1.0, "SUCCESS": 0.0}]:
        with pytest.raises(ValueError, match="differs from the metric '(loss|success)' only by case") as refused:
            run.log(4, "train", row)
        assert "give the two metrics names that differ by more than case" in str(refused.value)
    assert run.metrics()["step"].max() == 3  # nothing logged
