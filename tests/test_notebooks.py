"""papermill really executes the notebooks with the smoke profile and they write their results."""

from __future__ import annotations

import duckdb
import pandas as pd

from comprl.cli import main


def test_notebook_01_smoke_profile_writes_table_figure_and_run(tmp_path):
    out = tmp_path / "nb01"
    assert main(["run", "01_single_task", "--profile", "smoke", "--output-dir", str(out), "-p", "seeds", "[0, 1]"]) == 0
    assert (out / "01_single_task.ipynb").is_file()  # the executed copy
    for name in ("summary.csv", "metrics.csv", "learning_curve.png", "learning_curve.pdf"):
        assert (out / name).stat().st_size > 0, name
    summary = pd.read_csv(out / "summary.csv")
    assert list(summary["method"]) == ["baseline"] and summary["seeds"].item() == 2
    for seed in (0, 1):
        run = out / f"baseline_seed{seed}"
        assert (run / "config.json").is_file()
        with duckdb.connect(str(run / "run.duckdb"), read_only=True) as con:
            phases = con.execute("SELECT phase, count(*) FROM metrics GROUP BY phase ORDER BY phase").fetchall()
        assert phases == [("eval", 2), ("train", 2)]  # eval before and after, 2 smoke steps
