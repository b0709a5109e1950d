"""papermill really executes notebook 05 (the latency analysis) with the smoke profile. A module of its own: its
async mode hosts the manager in Ray, so it is one of the modules that run on one pytest-xdist worker together
(``RAY_MODULES``, tests/conftest.py); the other notebooks' tests are in tests/test_notebooks.py."""

from __future__ import annotations

import json

import pandas as pd

from comprl.kit.cli import main


def test_notebook_05_measures_rollout_overhead_per_mode_and_batch_size(tmp_path, seeded_bank):
    out = tmp_path / "nb05"
    overrides = json.dumps({"bank.init_from": str(seeded_bank)})  # searches find entries from the first step
    # one batch size: rounds, resuming and several sizes are tests/test_latency.py's (each run is a fresh process)
    params = ["-p", "batch_sizes", "[8]", "-p", "steps", "2", "-p", "skip", "1", "-p", "overrides", overrides]
    assert main(["run", "05_latency_analysis", "--profile", "smoke", "--output-dir", str(out), *params]) == 0
    table = pd.read_csv(out / "overhead.csv")
    modes = ("none", "loaded", "sync", "async")
    assert sorted(zip(table["batch_size"], table["mode"])) == sorted((8, m) for m in modes)
    assert (table["rounds"] == 1).all() and table["rollout_ratio_low"].isna().all()  # one round: no interval
    assert (table.groupby("batch_size")["processed"].nunique() == 1).all()  # the same episodes in every mode
    assert (table["steps"] == 1).all()  # 2 steps, the first dropped as warm-up
    assert (table.loc[table["mode"] == "none", ["rollout_ratio", "step_ratio"]] == 1.0).all().all()
    with_manager = table[table["mode"].isin(["sync", "async"])]
    sync = table[table["mode"] == "sync"]
    assert (sync["queries"] == sync["batch_size"] / 2).all()  # one query per guided rollout, in its own step
    # async prefetches a step's searches during the step before, so they are counted in whichever row comes next
    assert (
        table.loc[table["mode"] == "async", "queries"] <= 2 * table.loc[table["mode"] == "async", "batch_size"]
    ).all()
    assert (with_manager["rollout_ratio"] > 0).all() and (table["actor_cpu_s"] > 0).all()
    for name in ("rollout_overhead.png", "rollout_overhead.pdf"):
        assert (out / name).stat().st_size > 0, name
    assert "Ray client threads) on cores" in (out / "05_latency_analysis.ipynb").read_text()  # the core split printed
