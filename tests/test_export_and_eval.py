"""A run exported as a bundle (``comprl export``) reads back as the run, and ``comprl eval`` scores a run and its
bundle alike, on a seed manifest whose per-episode results do not depend on how evaluation is batched."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil

import duckdb
import gymnasium as gym
import numpy as np
import pandas as pd
import pytest
import yaml
from scipy.stats import binomtest

from comprl import loop
from comprl.config import make_config
from comprl.envs import make, mixture
from comprl.envs.base import EVAL_SEED_OFFSET
from comprl.experience.bank import Embedder, ExperienceBank, NewEntry, Write
from comprl.kit import evaluate
from comprl.kit.cli import main
from comprl.kit.export import MANIFEST, BundleError, bank_from_bundle, export_run, opened, read_manifest
from comprl.kit.widgets import BankExplorer


class SucceedOnEvenReplies(gym.Wrapper):
    """An env whose episode succeeds at a reply of even length: a random model's episodes then differ in
    outcome, so success rates and their intervals say something."""

    def step(self, action):
        obs, _, terminated, truncated, info = self.env.step(action)
        won = len(action) % 2 == 0
        return obs, float(won), terminated or won, truncated, {**info, "success": won}


@pytest.fixture(scope="module")
def run_and_bundle(tmp_path_factory):
    """A finished one-step LoRA comp_rl smoke run and its bundle; the envs stay patched for the module."""
    patch = pytest.MonkeyPatch()
    patch.setattr(mixture, "make", lambda env_id, **kwargs: SucceedOnEvenReplies(make(env_id, **kwargs)))
    root = tmp_path_factory.mktemp("export")
    config = make_config("smoke", method="comp_rl", steps=1, eval_episodes=2, **{"actor.lora_rank": 4})
    run = loop.run_experiment(config, output_dir=root / "runs", name="lora", progress=False)
    yield run, export_run(run.path, root / "bundle")
    patch.undo()


def test_the_manifest_lists_every_file_with_its_sha256(run_and_bundle, tmp_path):
    _, bundle = run_and_bundle
    manifest = read_manifest(bundle)
    files = {p.name for p in bundle.iterdir()} - {MANIFEST}
    assert set(manifest["files"]) == files
    assert {"actor_adapters.safetensors", "bank_entries.parquet", "bank_operations.parquet", "metrics.parquet",
            "config.json", "machines.jsonl", "versions.json", "README.md"} <= files
    for name, listed in manifest["files"].items():
        assert hashlib.sha256((bundle / name).read_bytes()).hexdigest() == listed["sha256"]
    assert set(json.loads((bundle / "versions.json").read_text())) == {
        "python", "torch", "transformers", "peft", "duckdb", "comprl"}
    damaged = shutil.copytree(bundle, tmp_path / "damaged")
    (damaged / "config.json").write_text((damaged / "config.json").read_text().replace('"seed": 0', '"seed": 1'))
    with pytest.raises(BundleError, match="config.json differs from the sha256"):
        read_manifest(damaged)


def test_the_parquet_bank_holds_the_rows_of_the_duckdb_bank(run_and_bundle):
    run, bundle = run_and_bundle
    with duckdb.connect(str(run.bank_path), read_only=True) as con:
        entries = con.execute("FROM entries ORDER BY id").df()
        operations = con.execute("FROM operations ORDER BY seq").df()
    exported = pd.read_parquet(bundle / "bank_entries.parquet")
    assert len(entries) > 0 and len(operations) > 0
    for column in ("id", "task", "title", "content", "uses", "deleted"):
        assert exported[column].tolist() == entries[column].tolist(), column
    assert np.array_equal(np.stack(exported["embedding"]), np.stack(entries["embedding"]))
    logged = pd.read_parquet(bundle / "bank_operations.parquet")
    for column in ("seq", "op", "step", "result", "raw"):
        assert logged[column].astype(str).tolist() == operations[column].astype(str).tolist(), column


def test_the_card_has_hugging_face_front_matter_and_the_run_s_results(run_and_bundle):
    run, bundle = run_and_bundle
    card = (bundle / "README.md").read_text()
    head, _, body = card.removeprefix("---\n").partition("\n---\n")
    front = yaml.safe_load(head)
    assert front["library_name"] == "comprl" and front["license"] == "apache-2.0"
    assert "base_model" not in front  # tiny-random is on no hub
    assert {"reinforcement-learning", "comp_rl", "comprl/Room-Ultimate-5x5-v0"} <= set(front["tags"])
    final = run.metrics().query("phase == 'eval'").iloc[-1]
    assert f"| {final.step} | {final.success_rate:.3f} | {final.guided_success_rate:.3f} |" in body
    assert "2603.17621" in body and "hf upload" in body and "comprl eval" in body


def test_bank_explorer_opens_the_bundle_as_the_run(run_and_bundle):
    run, bundle = run_and_bundle
    with BankExplorer(run) as direct, BankExplorer(bundle) as exported:
        assert exported.steps == direct.steps
        for step in range(direct.steps[1] + 1):
            pd.testing.assert_frame_equal(exported.table(step), direct.table(step))
        pd.testing.assert_frame_equal(exported.bank.operations(), direct.bank.operations())


def test_eval_scores_a_run_and_its_bundle_alike_with_wilson_intervals(run_and_bundle, tmp_path, capsys):
    run, bundle = run_and_bundle
    main(["eval", str(run.path), "--episodes", "6", "--csv", str(tmp_path / "run.csv")])
    main(["eval", str(bundle), "--episodes", "6", "--csv", str(tmp_path / "bundle.csv")])
    printed = capsys.readouterr().out
    rows = pd.read_csv(tmp_path / "run.csv")
    pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "bundle.csv"), rows)
    assert sorted(rows["experience"].unique()) == ["with", "without"]
    assert rows["seed"].tolist() == [EVAL_SEED_OFFSET + i for i in range(6)] * 2
    assert 0 < rows["success"].sum() < len(rows)  # outcomes differ: the interval is not a corner case
    assert (rows.query("experience == 'with'")["entry_ids"].notna()).all()  # every guided episode saw an entry
    manifest = json.loads((tmp_path / "run.manifest.json").read_text())
    assert manifest["seeds"] == {"comprl/Room-Ultimate-5x5-v0": [EVAL_SEED_OFFSET + i for i in range(6)]}
    for row in evaluate.summary(rows).itertuples(index=False):
        wins = int(rows.query("experience == @row.experience")["success"].sum())
        interval = binomtest(wins, 6).proportion_ci(confidence_level=0.95, method="wilson")
        assert (row.successes, row.episodes) == (wins, 6)
        assert row.ci_low == pytest.approx(interval.low) and row.ci_high == pytest.approx(interval.high)
        assert f"{wins:>4d}/6    {wins / 6:6.3f}  [{interval.low:.3f}, {interval.high:.3f}]" in printed


def test_eval_results_do_not_depend_on_batch_size_or_episode_count(run_and_bundle, tmp_path):
    run, _ = run_and_bundle
    rows, _ = evaluate.evaluate_source(run.path, episodes=5)
    # the same adapters and bank in a run whose batches (the loop's evaluation chunks) are three times larger
    wider = shutil.copytree(run.path, tmp_path / "wider", ignore=shutil.ignore_patterns("checkpoint", "tensorboard"))
    config = json.loads((wider / "config.json").read_text())
    assert config["batch_instances"] == 1
    config["batch_instances"] = 3
    (wider / "config.json").write_text(json.dumps(config))
    fewer, _ = evaluate.evaluate_source(wider, episodes=3)
    first = rows[rows["seed"] < EVAL_SEED_OFFSET + 3].reset_index(drop=True)
    pd.testing.assert_frame_equal(fewer, first)
    guided, _ = evaluate.evaluate_source(run.path, episodes=5, experience="with")
    pd.testing.assert_frame_equal(guided, rows.query("experience == 'with'").reset_index(drop=True))


def test_eval_refuses_what_it_cannot_evaluate(run_and_bundle, tmp_path):
    run, _ = run_and_bundle
    with pytest.raises(ValueError, match="unknown task.*accepted: comprl/Room-Ultimate-5x5-v0"):
        evaluate.evaluate_source(run.path, tasks=["comprl/Nope-v0"])
    with pytest.raises(FileNotFoundError, match="neither a run folder"):
        evaluate.evaluate_source(tmp_path)
    with pytest.raises(ValueError, match="has no experience bank"):
        evaluate.evaluate_source("tiny-random", episodes=1, experience="with", profile="smoke")


def test_a_task_once_warmed_up_is_answered_after_merging_shrank_its_bank(tmp_path):
    with ExperienceBank(tmp_path / "bank.duckdb", Embedder()) as bank:
        bank.apply([Write("add", entry=NewEntry(f"lesson {i}", f"do {i}")) for i in range(3)], step=1, task="room",
                   source="step1/episode0", raw="")
        bank.apply([Write("update", targets=(1, 2, 3), entry=NewEntry("merged", "do all"))], step=2, task="room",
                   source="step2/merge", raw="", origin="merge")
        assert len(bank) == 1
        assert evaluate._warmed_up(bank, 3) == {"room"} and evaluate._warmed_up(bank, 4) == set()


def rewritten(bundle, tmp_path, name: str, select: str | None = None):
    """A copy of the bundle whose Parquet table ``name`` is rewritten as ``SELECT {select} FROM`` it, its manifest
    then listing the new file's size and sha256, as a forger would."""
    copy = shutil.copytree(bundle, tmp_path / "forged")
    if select is not None:
        with duckdb.connect() as con:
            source = str(bundle / name).replace("'", "''")
            con.execute(f"COPY (SELECT {select} FROM read_parquet('{source}')) TO '{copy / name}' (FORMAT parquet)")
    return copy


def listing(path) -> dict:
    """A file's entry in a manifest, as a forger writes it."""
    return {"bytes": path.stat().st_size, "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}


def rehash(bundle) -> None:
    """Rewrite the manifest to list the bundle's files as they are (what a forger does after changing them)."""
    manifest = json.loads((bundle / MANIFEST).read_text())
    manifest["files"] = {p.name: listing(p) for p in sorted(bundle.iterdir()) if p.name != MANIFEST}
    (bundle / MANIFEST).write_text(json.dumps(manifest))


def test_a_bank_table_with_its_columns_in_another_order_is_read_by_column_name(run_and_bundle, tmp_path):
    """Read by position, a bank_entries.parquet with title and content exchanged in its columns gave every entry
    its content as its title."""
    run, bundle = run_and_bundle
    swapped = "id, task, content, title, * EXCLUDE (id, task, title, content)"  # title's place holds content
    forged = rewritten(bundle, tmp_path, "bank_entries.parquet", swapped)
    rehash(forged)
    with duckdb.connect(str(run.bank_path), read_only=True) as con:
        stored = con.execute("SELECT id, title, content FROM entries ORDER BY id").fetchall()
    with duckdb.connect(str(bank_from_bundle(forged, tmp_path / "bank.duckdb")), read_only=True) as con:
        assert con.execute("SELECT id, title, content FROM entries ORDER BY id").fetchall() == stored
    assert len(stored) >= 3 and all(title != content for _, title, content in stored)


@pytest.mark.parametrize(
    ("name", "select", "problem"),
    [
        ("bank_entries.parquet", "id, task, title AS heading, * EXCLUDE (id, task, title)", "no column title"),
        ("bank_entries.parquet", "* REPLACE (id::VARCHAR AS id)", "column id is VARCHAR, expected INTEGER"),
        ("bank_entries.parquet", "*, 1 AS extra", "has a column extra .INTEGER., not one of id, task"),
        ("bank_operations.parquet", "* REPLACE (seq::DOUBLE AS seq)", "column seq is DOUBLE, expected BIGINT"),
        ("bank_meta.parquet", "key AS name, value", "has no column key"),
        ("metrics.parquet", "* REPLACE (step::VARCHAR AS step)", "column step is VARCHAR, expected INTEGER"),
        ("metrics.parquet", "*, 1::BIGINT AS counted", "column counted is BIGINT, expected DOUBLE"),
    ],
)
def test_a_table_with_a_renamed_retyped_or_extra_column_is_refused_naming_it(run_and_bundle, tmp_path, name, select,
                                                                            problem):
    _, bundle = run_and_bundle
    forged = rewritten(bundle, tmp_path, name, select)
    rehash(forged)
    with pytest.raises(BundleError, match=f"{name}: the table.*{problem}"):
        with opened(forged):
            pass


@pytest.mark.parametrize("attack", ["changed", "unlisted", "unlisted-config", "outside-name", "link", "fifo", "folder"])
def test_a_bundle_whose_manifest_does_not_list_exactly_its_own_files_is_refused(run_and_bundle, tmp_path, attack):
    """A config.json left out of bundle.json and edited was used; a manifest name ../outside.txt was read; a
    config.json that is a link out of the bundle was followed."""
    _, bundle = run_and_bundle
    forged = rewritten(bundle, tmp_path, "config.json")
    outside = tmp_path / "outside.txt"
    outside.write_text((forged / "config.json").read_text().replace('"seed": 0', '"seed": 7'))
    manifest = json.loads((forged / MANIFEST).read_text())
    if attack == "changed":  # opened() took a bundle for a compacted run folder and checked no hash
        (forged / "config.json").write_text(outside.read_text())
        problem = "config.json differs from the sha256 in bundle.json"
    elif attack == "unlisted":
        (forged / "notes.txt").write_text("extra")
        problem = "notes.txt is not listed in bundle.json"
    elif attack == "unlisted-config":
        del manifest["files"]["config.json"]
        (forged / "config.json").write_text(outside.read_text())
        problem = "config.json is not listed in bundle.json"
    elif attack == "outside-name":
        manifest["files"]["../outside.txt"] = listing(outside)
        problem = "bundle.json lists '../outside.txt'; accepted: the plain names"
    elif attack == "link":
        (forged / "config.json").unlink()
        (forged / "config.json").symlink_to(outside)
        manifest["files"]["config.json"] = listing(outside)
        problem = f"config.json is a link to {outside}"
    elif attack == "fifo":
        os.mkfifo(forged / "queue")
        problem = "queue is not a regular file"
    else:
        (forged / "sub").mkdir()
        problem = "sub is not a regular file"
    (forged / MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(BundleError, match=re.escape(problem)):
        with opened(forged) as run:
            assert run.config().seed == 0  # never reached: nothing is read from an unchecked file


def test_eval_of_a_missing_run_folder_says_it_is_missing_and_what_is_accepted_in_one_line(tmp_path, monkeypatch):
    """A mistyped run folder was looked up as a model ('Model path ... does not exist', or the hub) in a traceback."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "results").mkdir()
    for given in (str(tmp_path / "results" / "comp_rl_seed9"), "results/comp_rl_seed9", "./comp_rl_seed9"):
        with pytest.raises(SystemExit, match=rf"^comprl: no run folder or bundle at {re.escape(given)}: it does not "
                                             r"exist \(.*\); accepted: a run folder \(with config.json\), a bundle"):
            main(["eval", given])
    assert evaluate.names_a_path("results/comp_rl_seed9") and not evaluate.names_a_path("HuggingFaceTB/SmolLM2-135M")
    (tmp_path / "empty").mkdir()
    with pytest.raises(SystemExit, match="^comprl: empty is neither a run folder .*; accepted: a run folder"):
        main(["eval", "empty"])
    with pytest.raises(SystemExit, match="^comprl: nope is not a run folder: it has no config.json$"):
        main(["export", "nope", "bundle"])


def test_a_run_folder_whose_files_are_links_out_of_it_is_not_exported(run_and_bundle, tmp_path):
    run, _ = run_and_bundle
    copy = shutil.copytree(run.path, tmp_path / "run", ignore=shutil.ignore_patterns("checkpoint", "tensorboard"))
    (tmp_path / "outside.json").write_text((copy / "config.json").read_text())
    (copy / "config.json").unlink()
    (copy / "config.json").symlink_to(tmp_path / "outside.json")
    with pytest.raises(BundleError, match="config.json is a link to .*outside.json; accepted: the run's files"):
        export_run(copy, tmp_path / "bundle")
    assert not (tmp_path / "bundle").exists()
