"""A run exported as a bundle (``comprl export``) reads back as the run, and ``comprl eval`` scores a run and its
bundle alike, on a seed manifest whose per-episode results do not depend on how evaluation is batched."""

from __future__ import annotations

import hashlib
import json
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
from comprl.kit.export import MANIFEST, BundleError, export_run, read_manifest
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
