"""papermill really executes the notebooks with the smoke profile and they write their results."""

from __future__ import annotations

import asyncio
import json
import os
import re

import duckdb
import pandas as pd
import pytest

from comprl.config import make_config
from comprl.kit.cli import main
from comprl.kit.notebook_runner import kernel_manager_class


LOG_LINE = re.compile(
    r"^(\w+_seed\d+: (\S+ on \S+ in \w+|step \d+/\d+: success .*|eval after step \d+: .*|experience manager closed: .*"
    r"|finished already .*)"
    r"|comprl: results in .*"
    r"|\d+ of \d+ runs done; about \d+ min left at this call's pace(, the last evaluations included|, then the last "
    r"evaluations)?)$"
)
"""The lines a headless notebook run may print on stdout: which model a run loads (device, dtype), one per step
and evaluation, the manager's report, the plan's ETA between runs."""


def test_notebook_kernels_listen_on_unix_sockets_not_tcp_ports():
    # a TCP port chosen free can be taken by another process before the kernel binds it; a private socket cannot
    async def session() -> tuple[dict, list[str], list[str]]:
        manager = kernel_manager_class()(kernel_name="python3")  # async, like nbclient's default
        await manager.start_kernel(extra_arguments=["--IPKernelApp.log_level=CRITICAL"])
        info = manager.get_connection_info()
        sockets = [
            f"{info['ip']}-{info[name]}"
            for name in ("shell_port", "iopub_port", "stdin_port", "control_port", "hb_port")
        ]
        printed: list[str] = []
        try:
            client = manager.client()
            client.start_channels()
            await client.wait_for_ready(timeout=60)
            hook = lambda msg: printed.append(msg["content"]["text"]) if msg["msg_type"] == "stream" else None  # noqa: E731
            reply = await client.execute_interactive("print(6 * 7)", timeout=60, output_hook=hook)
            assert reply["content"]["status"] == "ok" and all(os.path.exists(path) for path in sockets)
            client.stop_channels()
        finally:
            await manager.shutdown_kernel(now=True)
        return info, sockets, printed

    info, sockets, printed = asyncio.run(session())
    assert info["transport"] == "ipc" and os.path.isabs(info["ip"]) and printed == ["42\n"]
    assert not any(os.path.exists(path) for path in sockets)  # cleaned up with the kernel


def _kernel_lines(out: str) -> tuple[list[str], list[str]]:
    """The lines ``comprl run`` printed up to its ``results in`` line (the kernel's), and the closing summary after."""
    lines = out.splitlines()
    end = next(i for i, line in enumerate(lines) if line.startswith("comprl: results in"))
    return lines[: end + 1], lines[end + 1 :]


def test_notebook_01_runs_comp_rl_and_baseline_side_by_side(tmp_path, seeded_bank, capfd):
    out = tmp_path / "nb01"
    # eval_episodes in the overrides too (the profile's own): the reference-bank check plays its own episode count
    episodes = make_config("smoke").eval_episodes
    overrides = json.dumps({"bank.init_from": str(seeded_bank), "eval_episodes": episodes})
    assert (
        main([
            "run", "01_single_task", "--profile", "smoke", "--output-dir", str(out), "-p", "overrides", overrides,
            "-p", "reference_bank_episodes", "2",
        ])
        == 0
    )
    printed = capfd.readouterr()
    lines, summary = _kernel_lines(printed.out)
    assert [line for line in lines if not LOG_LINE.match(line)] == []  # no config dump, tables, widget reprs
    # the command ends on the summary table (before/after, with experience, random policy) and the figures' paths
    assert summary[0] == "comprl: summary.csv" and "success_after" in summary[1] and "random_policy" in summary[1]
    assert sum(line.split()[0] in ("baseline", "comp_rl") for line in summary[2:]) == 2
    guidance = pd.read_csv(out / "reference_bank.csv")  # the untrained actor, free and guided by expert lessons
    assert list(guidance["episodes"]) == [2] and list(guidance["guided_with_entry"]) == [2]
    assert f"  {out / 'learning_curve.png'}" in summary
    assert sum("step 1/2" in line for line in lines) == 2 and sum("eval after step" in line for line in lines) == 4
    bars = printed.err.replace("\r", "\n").splitlines()
    assert any(line.startswith("comp_rl on comprl/Room") and "2/2" in line for line in bars)  # a text progress bar
    assert any(line.startswith("evaluation:") and "episode" in line for line in bars)  # and one per evaluation
    known = ("evaluation:", " on comprl/")
    assert [line for line in bars if line.strip() and not any(k in line for k in known)] == []  # and nothing else
    assert (out / "01_single_task.ipynb").is_file()  # the executed copy
    for name in ("summary.csv", "metrics.csv", "learning_curve.png", "learning_curve.pdf", "bank.csv"):
        assert (out / name).stat().st_size > 0, name
    summary = pd.read_csv(out / "summary.csv").set_index("method")
    assert sorted(summary.index) == ["baseline", "comp_rl"]
    assert summary.loc["comp_rl", "guided_success_after"] >= 0 and pd.isna(
        summary.loc["baseline", "guided_success_after"]
    )
    for method in ("baseline", "comp_rl"):
        with duckdb.connect(str(out / f"{method}_seed0" / "run.duckdb"), read_only=True) as con:
            phases = con.execute("SELECT phase, count(*) FROM metrics GROUP BY phase ORDER BY phase").fetchall()
        assert phases == [("eval", 2), ("train", 2)]  # eval before and after, 2 smoke steps
    assert not (out / "baseline_seed0" / "bank.duckdb").exists()

    comp = pd.read_csv(out / "metrics.csv").query("method == 'comp_rl' and phase == 'train'")
    assert (comp["guided_with_entry"] == 2).all()  # 1 instance x K/2 = 2 guided rollouts, each shown an entry
    assert (comp["extractor_outputs"] >= 4).all() and (comp["bank_size"] >= 1).all()
    assert (comp["extractor_valid"] + comp["extractor_rejected"] == comp["extractor_outputs"]).all()
    assert len(pd.read_csv(out / "bank.csv")) >= 1  # the final bank
    diagnostics = pd.read_csv(out / "extractor_diagnostics.csv")  # the extractor's side: comp_rl only
    assert list(diagnostics["method"]) == ["comp_rl"] and diagnostics.loc[0, "replies"] >= 8
    assert diagnostics.loc[0, "valid"] == pytest.approx(comp["extractor_valid"].sum() / comp["extractor_outputs"].sum())
    with duckdb.connect(str(out / "comp_rl_seed0" / "bank.duckdb"), read_only=True) as con:
        uses = con.execute("SELECT sum(uses) FROM operations WHERE op = 'use'").fetchone()[0]
        ops = dict(con.execute("SELECT op, count(*) FROM operations GROUP BY op").fetchall())
    assert uses == 4  # 2 guided episodes shown an entry in each of the 2 steps
    assert ops.get("add", 0) + ops.get("reject", 0) >= 8  # every distilled trajectory left a row

    # run again on the same folder: the finished runs are skipped, their rows (wall times included) unchanged
    metrics = pd.read_csv(out / "metrics.csv")
    assert (
        main([
            "run", "01_single_task", "--profile", "smoke", "--output-dir", str(out), "-p", "overrides", overrides,
            "-p", "reference_bank_episodes", "2",
        ])
        == 0
    )
    pd.testing.assert_frame_equal(pd.read_csv(out / "metrics.csv"), metrics)
    assert sum("finished already" in line for line in capfd.readouterr().out.splitlines()) == 2


def test_notebook_06_explores_a_run_bank(tmp_path, seeded_bank):
    out = tmp_path / "nb06"
    # one step without evaluations: its guided episodes use the seeded entries, which is what the explorer shows
    overrides = json.dumps({"bank.init_from": str(seeded_bank), "steps": 1, "eval_episodes": 0})
    params = ["-p", "train", "true", "-p", "overrides", overrides]  # the run goes into --output-dir (output_dir)
    assert main(["run", "06_bank_explorer", "--profile", "smoke", "--output-dir", str(out), *params]) == 0
    executed = json.loads((out / "06_bank_explorer.ipynb").read_text())
    text = json.dumps(executed["cells"])
    assert "application/vnd.jupyter.widget-view+json" in text  # the explorer widget was displayed
    assert "created_step" in text and "counters at the last step" in text  # the bank table and counters printed
    with duckdb.connect(str(out / "comp_rl_seed0" / "bank.duckdb"), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM operations WHERE op = 'use'").fetchone()[0] > 0


def test_notebook_02_builds_table_1_and_the_task_scaling_figure(tmp_path):
    out = tmp_path / "nb02"
    params = ["-p", "mixtures", '["3-task"]', "-p", "steps", "1"]  # one step: the tables need the evaluations only
    assert main(["run", "02_multitask", "--profile", "smoke", "--output-dir", str(out), *params]) == 0
    table = pd.read_csv(out / "table1.csv")
    three = table[table["tasks"] == "room+webshop+alfworld"]
    assert len(three) == 6 and (three[["room", "webshop", "alfworld", "avg"]].notna()).all().all()  # every Table 1 row
    assert ((three["avg"] - three[["room", "webshop", "alfworld"]].mean(axis=1)).abs() < 1e-9).all()
    versus = pd.read_csv(out / "table1_vs_paper.csv").set_index("row")
    assert versus.loc["Baseline GRPO (no experience)", "paper_avg"] == 0.75
    assert (versus["delta_avg"] == versus["avg"] - versus["paper_avg"]).all()
    scaling = pd.read_csv(out / "task_scaling.csv")
    assert list(scaling["tasks_trained"]) == [1, 3]  # the single-task Room point and the 3-task mixture
    for name in ("task_scaling.png", "task_scaling.pdf", "learning_curves.png", "metrics.csv"):
        assert (out / name).stat().st_size > 0, name


def test_notebook_04_runs_every_ablation_as_a_variant_of_comp_rl(tmp_path, capfd):
    out = tmp_path / "nb04"
    assert main(["run", "04_ablations", "--profile", "smoke", "--output-dir", str(out)]) == 0
    lines, _ = _kernel_lines(capfd.readouterr().out)
    assert [line for line in lines if not LOG_LINE.match(line)] == []  # one line per step and evaluation, no tables
    variants = ["comp_rl", "no_merge", "no_search_and_ask", "no_split_advantages", "shared_weights"]
    assert sorted(line.split(":")[0] for line in lines if "step 2/2" in line) == sorted(f"{v}_seed0" for v in variants)
    summary = pd.read_csv(out / "summary.csv")
    assert list(summary["variant"]) == variants and (summary["seeds"] == 1).all()  # one row per variant
    success = ["success_before", "guided_success_before", "success_after", "guided_success_after"]
    assert summary[success].notna().all().all()
    for name in ("04_ablations.ipynb", "metrics.csv", "ablations.png", "ablations.pdf"):
        assert (out / name).stat().st_size > 0, name
    configs = {v: json.loads((out / f"{v}_seed0" / "config.json").read_text()) for v in variants}
    assert {v: c["method"] for v, c in configs.items()} == dict.fromkeys(variants, "comp_rl")
    assert [v for v, c in configs.items() if not c["experience"]["search_and_ask"]] == ["no_search_and_ask"]
    assert [v for v, c in configs.items() if c["extractor"]["merge_every"] == 0] == ["no_merge"]
    assert [v for v, c in configs.items() if not c["actor"]["split_halves"]] == ["no_split_advantages"]
    assert [v for v, c in configs.items() if c["extractor"]["share_actor"]] == ["shared_weights"]
    merges = pd.read_csv(out / "metrics.csv").groupby("variant")["manager_merges"].sum()
    assert merges["no_merge"] == 0 and (merges.drop("no_merge") >= 1).all()  # smoke merges every 2 steps


def test_notebook_03_runs_comp_rl_once_per_extractor_and_tables_them(tmp_path, capfd):
    out = tmp_path / "nb03"
    assert main(["run", "03_extractor_size", "--profile", "smoke", "--output-dir", str(out)]) == 0
    lines, _ = _kernel_lines(capfd.readouterr().out)
    assert [line for line in lines if not LOG_LINE.match(line)] == []  # one line per step and evaluation, no tables
    labels = ["tiny-random A", "tiny-random B"]  # the smoke profile's pair: the tiny random model twice
    names = ["comp_rl_tiny_random_A_seed0", "comp_rl_tiny_random_B_seed0"]
    assert sorted(line.split(":")[0] for line in lines if "step 2/2" in line) == names
    for name in ("03_extractor_size.ipynb", "summary.csv", "metrics.csv", "extractor_size.png", "extractor_size.pdf",
                 "heldout.png"):
        assert (out / name).stat().st_size > 0, name
    summary = pd.read_csv(out / "summary.csv")
    assert list(summary["extractor"]) == labels and (summary["extractor_model"] == "tiny-random").all()
    assert (summary["seeds"] == 1).all()
    success = ["success_before", "guided_success_before", "success_after", "guided_success_after"]
    assert summary[success].apply(lambda column: column.between(0, 1)).all().all()  # rates, none missing
    assert (summary["final_bank_size"] >= 1).all() and summary["extractor_validity"].between(0, 1).all()
    diagnostics = pd.read_csv(out / "extractor_diagnostics.csv").set_index("extractor")
    assert list(diagnostics.index) == labels and diagnostics["valid"].between(0, 1).all()
    for name in names:
        config = json.loads((out / name / "config.json").read_text())
        assert config["method"] == "comp_rl" and config["extractor"]["model"] == "tiny-random"
        with duckdb.connect(str(out / name / "run.duckdb"), read_only=True) as con:
            phases = con.execute("SELECT phase, count(*) FROM metrics GROUP BY phase ORDER BY phase").fetchall()
        assert phases == [("eval", 2), ("train", 2)]  # eval before and after, 2 smoke steps
