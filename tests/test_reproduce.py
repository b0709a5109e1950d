"""``comprl reproduce``: notebooks in dependency order, resumed on a second call, and the report."""

from __future__ import annotations

import json

from comprl.cli import main


def test_reproduce_runs_notebooks_in_order_resumes_and_writes_the_report(tmp_path, capsys):
    results = tmp_path / "results"
    args = ["reproduce", "--profile", "smoke", "--results", str(results), "--only", "01_single_task", "06_bank_explorer"]
    assert main(args) == 0
    root = results / "smoke"
    times = json.loads((root / "reproduce.json").read_text())
    assert list(times) == ["01_single_task", "06_bank_explorer"] and all(t["seconds"] > 0 for t in times.values())
    # 06 explored the bank of 01's comp_rl run instead of training its own
    assert (root / "01_single_task" / "comp_rl_seed0" / "bank.duckdb").is_file()
    assert not any((root / "06_bank_explorer").glob("*_seed*"))
    report = (results / "REPORT.md").read_text()
    assert "## 01_single_task" in report and "![learning_curve](smoke/01_single_task/learning_curve.png)" in report
    assert "| single task Room: comp_rl / baseline success | 1.3x |" in report  # the paper's number beside ours
    assert "Actor instruction, `comprl/Room-Ultimate-5x5-v0`" in report and "transformers " in report
    assert "## 02_multitask\n\nNot run." in report
    before = (root / "01_single_task" / "01_single_task.ipynb").stat().st_mtime
    assert main(args) == 0  # finished notebooks are not executed again
    assert (root / "01_single_task" / "01_single_task.ipynb").stat().st_mtime == before
    capsys.readouterr()


def test_dry_run_checks_every_paper_config_and_prints_the_plan(capsys):
    assert main(["reproduce", "--profile", "paper", "--dry-run"]) == 0
    printed = capsys.readouterr().out
    assert "every config valid" in printed and "02_multitask: 24 runs, 128 steps each" in printed
    assert "04_ablations: 15 runs" in printed  # the notebook's own five variants, three seeds each
    assert "Qwen/Qwen2.5-7B-Instruct" in printed and ">= 2 x 80 GB GPU" in printed
    assert "768 rollouts" in printed  # the 6-task mixture: 128 rollouts per task
