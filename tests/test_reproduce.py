"""``comprl reproduce``: notebooks in dependency order, resumed on a second call, and the report."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import math
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from comprl import checkpoint, runs
from comprl.kit import parallel, planner, plans, reproduce, verdicts
from comprl.kit.cli import main
from comprl.config import make_config
from comprl.envs import ENV_IDS
from comprl.envs.mixture import task_name

REPO = Path(__file__).resolve().parents[1]


def test_reproduce_runs_notebooks_in_order_resumes_and_writes_the_report(tmp_path, capsys):
    results = tmp_path / "results"
    args = [
        "reproduce",
        "--profile",
        "smoke",
        "--results",
        str(results),
        "--only",
        "01_single_task",
        "06_bank_explorer",
    ]
    assert main(args) == 0
    root = results / "smoke"
    times = json.loads((root / "reproduce.json").read_text())
    assert list(times) == ["01_single_task", "06_bank_explorer"] and all(t["seconds"] > 0 for t in times.values())
    # 06 explored the bank of 01's comp_rl run instead of training its own, compacted once 01 finished
    assert runs.Run(root / "01_single_task" / "comp_rl_seed0").compacted
    assert (root / "01_single_task" / "comp_rl_seed0" / "bank_entries.parquet").is_file()
    assert not any((root / "06_bank_explorer").glob("*_seed*"))
    report = (results / "REPORT.md").read_text()
    assert "## 01_single_task" in report and "![learning_curve](smoke/01_single_task/learning_curve.png)" in report
    # the paper's number beside ours
    assert "| single task Room: comp_rl without experience / baseline success | 1.30x | " in report
    assert report.count(verdicts.HEADER[0]) == 1 and "### Collapse per seed" in report
    assert "**Does the extractor write usable experience?**" in report  # 01's comp_rl, read by seed
    assert "| lesson cap (extractor tokens) | 16 | 8192 |" in report  # the settings beside the paper's
    assert "- elapsed wall time: " in report and " calls (overlaps counted once)" in report
    assert "Actor instruction, `comprl/Room-Ultimate-5x5-v0`" in report and "transformers " in report
    assert "## 02_multitask\n\nNot run." in report and "Notes from" not in report
    assert ("**Partial: the reproduction is under way.** Not finished: `07_mechanism`, `02_multitask`, "
            "`03_extractor_size`, `04_ablations`, `05_latency_analysis`.") in report
    # where each run computed, every run counted once
    where = re.search(r"^- where the runs computed \(each run's `machines.jsonl`\): (.+)$", report, re.MULTILINE)
    counted = [int(n) for n in re.findall(r": (\d+) runs?(?:;|$)", where[1])]
    run_folders = {path.parent.resolve() for path in root.glob("*/**/config.json")}
    assert where[1].startswith("CPU: ") and sum(counted) == len(run_folders)
    code = re.search(r"^- the comprl code that trained them .*\): (.+)$", report, re.MULTILINE)
    revision = runs.code_revision()  # all trained by this checkout's code
    short = revision.split("+")[0][:12] + "+changes" * revision.endswith("+changes")
    assert code[1] == f"{short}: {len(run_folders)} runs"
    (root / reproduce.NOTES).write_text("Paused twice for CI.\n")
    assert (  # linked, not pasted
        reproduce.write_report("smoke", results)
        .read_text()
        .endswith("## Notes from whoever ran it\n\nThe working notes of this reproduction: "
                  "[smoke/NOTES.md](smoke/NOTES.md).\n")
    )
    before = (root / "01_single_task" / "01_single_task.ipynb").stat().st_mtime
    assert main(args) == 0  # finished notebooks are not executed again
    assert (root / "01_single_task" / "01_single_task.ipynb").stat().st_mtime == before
    (results / "REPORT.md").unlink()
    assert main(["reproduce", "--profile", "smoke", "--results", str(results), "--report"]) == 0  # runs nothing
    assert (root / "01_single_task" / "01_single_task.ipynb").stat().st_mtime == before
    assert "## 01_single_task" in (results / "REPORT.md").read_text()
    capsys.readouterr()


def test_a_report_of_a_finished_reproduction_is_not_called_partial(tmp_path):
    root = tmp_path / "smoke"
    root.mkdir()
    finished = {step.notebook: {"seconds": 60.0, "calls": [], "finished": "2026-12-02T10:00:00+00:00"}
                for step in reproduce.STEPS}
    (root / "reproduce.json").write_text(json.dumps(finished))
    assert "Partial" not in reproduce.write_report("smoke", tmp_path).read_text()
    del finished["04_ablations"]["finished"]
    (root / "reproduce.json").write_text(json.dumps(finished))
    assert "Not finished: `04_ablations`." in reproduce.write_report("smoke", tmp_path).read_text()


def test_jobs_go_to_the_notebooks_that_take_them_and_must_fit_the_cores(tmp_path, monkeypatch, capsys):
    executed = {}
    monkeypatch.setattr(
        "comprl.kit.notebook_runner.run_notebook", lambda name, profile, params, out: executed.setdefault(name, params)
    )
    monkeypatch.setattr(parallel, "usable_cores", lambda: [0, 1])
    assert main(["reproduce", "--profile", "smoke", "--results", str(tmp_path), "--jobs", "2"]) == 0
    assert {name: params.get("jobs") for name, params in executed.items()} == {
        "07_mechanism": 2, "01_single_task": 2, "02_multitask": 2, "03_extractor_size": 2, "04_ablations": 2,
        "05_latency_analysis": None, "06_bank_explorer": None,
    }
    root = tmp_path / "smoke"
    # each training notebook may copy the runs of the ones before it (02's single-task runs are 01's)
    assert executed["01_single_task"]["reuse"] == [] and "reuse" not in executed["05_latency_analysis"]
    assert executed["03_extractor_size"]["reuse"] == [str(root / "01_single_task"), str(root / "02_multitask")]
    times = json.loads((root / "reproduce.json").read_text())
    assert times["01_single_task"]["jobs"] == 2 and "jobs" not in times["06_bank_explorer"]
    with pytest.raises(SystemExit, match=r"comprl: --jobs: jobs=3: this process may use 2 CPU cores \(\[0, 1\]\)"):
        main(["reproduce", "--profile", "smoke", "--results", str(tmp_path), "--jobs", "3", "--force"])
    capsys.readouterr()


def test_a_check_runs_every_notebook_cut_to_one_step_and_seed_in_a_folder_of_its_own(tmp_path, monkeypatch, capsys):
    executed = {}
    monkeypatch.setattr(reproduce, "_missing_models", lambda profile, steps: [])  # Gemma (03) is an opt-in extra
    monkeypatch.setattr(
        "comprl.kit.notebook_runner.run_notebook",
        lambda name, profile, params, out: executed.setdefault(name, (params, out)),
    )
    monkeypatch.setattr("comprl.kit.reproduce.write_report", lambda profile, results: results / "REPORT.md")
    stale = tmp_path / "check" / "cpu" / "01_single_task" / "baseline_seed0"
    stale.mkdir(parents=True)  # an earlier check's run: a check starts from nothing
    assert main(["reproduce", "--profile", "cpu", "--results", str(tmp_path), "--check", "--jobs", "1"]) == 0
    assert "comprl: report in " + str(tmp_path / "check" / "REPORT.md") in capsys.readouterr().out
    assert not stale.exists() and not (tmp_path / "cpu").exists()
    assert {name: out for name, (_, out) in executed.items()} == {
        step.notebook: tmp_path / "check" / "cpu" / step.notebook for step in reproduce.STEPS}
    single, mixture, latency = (executed[name][0] for name in ("01_single_task", "02_multitask", "05_latency_analysis"))
    assert single["seeds"] == [0] and single["method_seeds"] == {"static": [0], "exp_only": [0]}
    assert single["steps"] == 1 and single["reference_bank_episodes"] == reproduce.CHECK_EPISODES
    assert single["overrides"] == {"eval_episodes": reproduce.CHECK_EPISODES}
    # the profile's own choices stay: 02's mixture and methods, 04's variants
    assert mixture["mixtures"] == ["laptop-2"] and mixture["methods"] == ["baseline", "comp_rl"]
    assert executed["04_ablations"][0]["variants"] == reproduce.ABLATIONS["cpu"]
    # 05: one round at its smallest batch, its warm-up steps and one measured step
    assert latency["batch_sizes"] == [8] and latency["rounds"] == 1
    assert latency["steps"] == reproduce.notebook_defaults("05_latency_analysis")["skip"] + 1
    with pytest.raises(SystemExit):
        main(["reproduce", "--profile", "cpu", "--results", str(tmp_path), "--check", "--dry-run"])
    assert "give one" in capsys.readouterr().err


def test_the_cpu_reproduction_plans_the_k8_design_and_copies_the_reference_runs_a_profile_names(
    tmp_path, monkeypatch, capsys
):
    executed = {}
    monkeypatch.setattr(reproduce, "_missing_models", lambda profile, steps: [])  # Gemma (03) is an opt-in extra
    monkeypatch.setattr(
        "comprl.kit.notebook_runner.run_notebook", lambda name, profile, params, out: executed.setdefault(name, params)
    )
    monkeypatch.setattr("comprl.kit.reproduce.write_report", lambda profile, results: results / "REPORT.md")
    monkeypatch.setitem(reproduce.REFERENCE_RUNS, "cpu", ["reference/some_runs"])
    assert main(["reproduce", "--profile", "cpu", "--results", str(tmp_path)]) == 0
    reference = str(tmp_path / "reference" / "some_runs")
    assert executed["01_single_task"]["reuse"] == [reference]
    assert executed["02_multitask"]["reuse"] == [reference, str(tmp_path / "cpu" / "01_single_task")]
    assert not any("overrides" in params for params in executed.values())  # every run on the profile's own path
    assert executed["01_single_task"]["seeds"] == [0, 1, 2, 3, 4]
    assert executed["01_single_task"]["method_seeds"] == {"static": [0, 1, 2], "exp_only": [0, 1, 2]}
    assert executed["01_single_task"]["reference_bank_episodes"] == 64
    assert [name for name, config in executed["04_ablations"]["variants"].items() if not config] == ["comp_rl"]
    assert {key: executed["02_multitask"][key] for key in ("mixtures", "methods", "batch_per_task", "seeds")} == {
        "mixtures": ["laptop-2"], "methods": ["baseline", "comp_rl"], "batch_per_task": 1, "seeds": [0, 1, 2]
    }
    assert executed["05_latency_analysis"] == {"batch_sizes": [8, 16], "steps": 5, "rounds": 3}
    capsys.readouterr()


@pytest.mark.parametrize("profile", ["cpu", "gpu", "paper"])
def test_every_planned_run_is_in_groups_of_eight_split_into_halves_of_four(profile):
    configs = [config for step in reproduce.STEPS for config in step.configs(profile)]
    assert configs and {config.group_size for config in configs} == {8}
    assert all(batch % 8 == 0 for batch in reproduce.LATENCY[profile]["batch_sizes"])


def test_no_planned_cpu_run_is_one_of_the_committed_reference_runs():
    # they were trained before the K = 8 design: linking one would pass an old run off as a new one
    folders = sorted(path for path in (REPO / "results" / "reference").iterdir() if path.is_dir())
    assert any(folder.glob("*/config.json") for folder in folders)
    planned = [config for step in reproduce.STEPS for config in step.configs("cpu")]
    assert len(planned) > 40 and not [run.path for c in planned for run in runs.find_runs(c, folders)]


def test_the_cpu_single_task_runs_diagnostics_on_three_seeds_and_the_ablations_start_from_its_comp_rl():
    single = [(c.method, c.seed) for c in reproduce.step_of("01_single_task").configs("cpu")]
    methods = ("baseline", "static", "exp_only", "comp_rl")
    assert single == [(m, s) for s in range(5) for m in methods if s < 3 or m in ("baseline", "comp_rl")]
    with pytest.raises(ValueError, match=r"method_seeds names \['exp_only'\], not among the methods run"):
        plans.single_task("cpu", compare_with=["baseline"], method_seeds={"exp_only": [0]})
    ablations = reproduce.step_of("04_ablations").configs("cpu")
    assert not any(c.experience.search_and_ask for c in ablations)  # a guided question costs a generation: left out
    copied = [c for c in ablations if c in reproduce.step_of("01_single_task").configs("cpu")]
    assert [(c.method, c.seed) for c in copied] == [("comp_rl", s) for s in range(3)]  # the full method: 01's runs
    assert len(ablations) == 12


def test_the_cpu_mixture_plays_the_single_task_runs_room_and_its_one_task_point_is_copied_from_01():
    mixture, single = (reproduce.step_of("02_multitask").configs("cpu")[i] for i in (0, -1))
    assert mixture.tasks == ("comprl/Room-Random-5x5-v0", "comprl/Room-Ultimate-5x5-v0")
    assert mixture.mixture().size * mixture.group_size == 16  # the rollouts of a single-task step
    assert single in reproduce.step_of("01_single_task").configs("cpu")  # the same config: linked from 01


def test_a_model_that_is_not_installed_stops_the_reproduction_before_any_notebook(tmp_path, monkeypatch, capsys):
    executed = []
    monkeypatch.setattr(
        "comprl.kit.notebook_runner.run_notebook", lambda name, profile, params, out: executed.append(name)
    )
    monkeypatch.setattr("comprl.kit.reproduce.write_report", lambda profile, results: results / "REPORT.md")
    # as if the Gemma extra were not installed: its module is one that does not exist
    monkeypatch.setitem(reproduce.MODEL_PACKAGES, "gemma3-270m", ("comprl_no_such_module", "pip install it"))
    with pytest.raises(
        SystemExit,
        match=r"(?s)leave the notebook out with --only:\n  03_extractor_size loads gemma3-270m: pip install it$",
    ):
        main(
            [
                "reproduce",
                "--profile",
                "cpu",
                "--results",
                str(tmp_path),
                "--only",
                "01_single_task",
                "03_extractor_size",
            ]
        )
    assert executed == []
    assert main(["reproduce", "--profile", "cpu", "--results", str(tmp_path), "--only", "01_single_task"]) == 0
    assert executed == ["01_single_task"]
    # a notebook that finished before needs no model: it is not executed again
    times = json.loads((tmp_path / "cpu" / "reproduce.json").read_text())
    (tmp_path / "cpu" / "reproduce.json").write_text(
        json.dumps({**times, "03_extractor_size": times["01_single_task"]})
    )
    assert main(["reproduce", "--profile", "cpu", "--results", str(tmp_path), "--only", "03_extractor_size"]) == 0
    assert executed == ["01_single_task"]
    capsys.readouterr()


def test_dry_run_checks_every_paper_config_and_prints_the_plan(tmp_path, capsys):
    # an empty results folder: no throughput measurement to be found
    assert main(["reproduce", "--profile", "paper", "--dry-run", "--results", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    assert "every config valid" in printed and "02_multitask: 30 runs, 128 steps each" in printed
    assert "04_ablations: 15 runs" in printed  # the notebook's own five variants, three seeds each
    # memory per model, GPU placement and count
    assert "Qwen/Qwen2.5-7B-Instruct               137.2 GB  >= 2 x 80 GB GPU" in printed
    assert "Qwen/Qwen3-4B-Thinking-2507             72.4 GB" in printed
    assert "actor      GPUs 0-7" in printed and "extractor  GPUs 8-15" in printed and "embedder   GPUs 12-13" in printed
    assert "total: 16 GPUs on 2 nodes for 48 runs" in printed and "total: 8 GPUs on 1 node for 12 runs" in printed
    assert "the reproduction needs 16 GPUs at once" in printed
    # the token budget of the largest run: the 6-task mixture, 128 rollouts per task
    assert "largest run (02_multitask, room+webshop+alfworld+maze+keyroom+sokoban, comp_rl): 768 rollouts" in printed
    assert "actor:     prefill" in printed and "extractor: 768 distillation calls" in printed
    # no measurement: said plainly, no step time, and the command that measures one
    assert "no throughput measurement for a GPU" in printed and "no step time is estimated" in printed
    assert (
        "python benchmarks/rollout_throughput.py --model Qwen/Qwen2.5-7B-Instruct" in printed
        and "--json auto" in printed
    )
    assert "step             =" not in printed


def test_plan_turns_the_checked_in_cpu_measurement_into_a_step_time(capsys, cpu_measurement):
    path = cpu_measurement
    assert main(["reproduce", "--profile", "paper", "--dry-run", "--throughput", str(path)]) == 0
    printed = capsys.readouterr().out
    assert ">= 2 x 80 GB GPU" in printed and "total: 16 GPUs on 2 nodes" in printed  # still memory and GPUs
    assert f"expected step time from {path.relative_to(REPO)}" in printed
    assert "measured on CPU: " in printed and "smollm2-135m" in printed
    assert "a CPU measurement for runs on a GPU" in printed and "devices: 1" in printed  # labelled, not spread
    assert "rate of a model = measured rate x measured parameters / the model's active parameters" in printed
    step = next(line for line in printed.splitlines() if line.startswith("  step             ="))
    assert "rollout + actor update + extraction + extractor update (experience.mode=sync" in step
    assert "whole reproduction" in printed
    # the printed step is the sum of the phases, each tokens over the rate of its model
    throughput = planner.load_throughput(path)
    config = make_config("paper", tasks="6-task", method="comp_rl")
    budget = planner.step_budget(config)
    took = planner.step_time(config, budget, throughput)
    actor_scale = throughput.parameters_b / 7.62
    assert took.rollout == pytest.approx(
        budget.prefill / (throughput.prefill_tokens_per_s * actor_scale)
        + budget.decode / (throughput.decode_tokens_per_s * actor_scale)
    )
    assert took.step == pytest.approx(took.rollout + took.actor_update + took.extraction + took.extractor_update)
    assert step.endswith(planner._duration(took.step))


def test_a_measurement_in_the_results_folder_is_used_only_for_its_kind_of_device(tmp_path, capsys, cpu_measurement):
    (tmp_path / "throughput").mkdir()
    (tmp_path / "throughput" / "cpu.json").write_text(cpu_measurement.read_text())
    assert main(["reproduce", "--profile", "paper", "--dry-run", "--results", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    assert "no throughput measurement for a GPU" in printed and "cpu.json, measured on CPU" in printed
    assert "pass it with --throughput" in printed and "step             =" not in printed
    assert main(["reproduce", "--profile", "cpu", "--dry-run", "--results", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    assert "expected step time from" in printed and "cpu.json" in printed and "step             =" in printed


def test_dry_run_says_how_far_a_reproduction_has_come(tmp_path, capsys):
    folder = tmp_path / "smoke" / "01_single_task"
    runs.Run.create(folder, make_config("smoke", method="comp_rl", seed=0), "comp_rl_seed0").mark_finished()
    under_way = runs.Run.create(folder, make_config("smoke", method="baseline", seed=0), "baseline_seed0")
    checkpoint.save(under_way.path, 1, None, None)
    under_way.record_machine({"device": "CPU: made up for the test", "dtype": "float32", "cores": 1}, 0)
    # a finished run of another config is not one of 01's
    runs.Run.create(folder, make_config("smoke", method="static", seed=7), "static_seed0").mark_finished()
    assert main(["reproduce", "--profile", "smoke", "--dry-run", "--results", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    # where the runs computed, beside the plan that prices another machine's rates
    assert "  where the runs computed (each run's `machines.jsonl`): CPU: made up for the test, float32, 1 core: 1 " \
        "run;" in printed
    assert "01_single_task: 4 runs, 2 steps each; 1 finished, 1 under way (at step 1), 2 to start" in printed
    # 02 would copy 01's finished comp_rl run; the baseline under way in 01's folder is 01's to finish
    assert "02_multitask: 6 runs, 2 steps each; 1 finished, 0 under way, 5 to start" in printed
    assert "05_latency_analysis: 0 runs\n" in printed


def test_the_settings_table_names_the_notebooks_where_their_runs_differ(tmp_path):
    root = tmp_path / "smoke"
    single = runs.Run.create(root / "01_single_task", make_config("smoke", method="comp_rl"), "comp_rl_seed0")
    mixture = make_config("smoke", method="comp_rl", tasks="laptop-2")
    runs.Run.create(root / "02_multitask", mixture, "mix_comp_rl_seed0").mark_finished()
    single.mark_finished()
    (root / "02_multitask" / "single_comp_rl_seed0").symlink_to(Path("..", "01_single_task", "comp_rl_seed0"))
    report = reproduce.write_report("smoke", tmp_path).read_text()
    def turns(config):
        return ", ".join(f"{task_name(env_id)} {n}" for env_id, n in config.mixture().max_turns.items())

    row = next(line for line in report.splitlines() if line.startswith("| turns per episode |"))
    # 02's link to 01's run is counted under 01, which trained it
    assert row.split(" | ")[1] == f"{turns(single.config())} (01); {turns(mixture)} (02)"
    assert "| lesson cap (extractor tokens) | 16 | 8192 |" in report  # one value: no notebooks named


def test_gpu_measurement_spreads_over_the_placement_and_scales_by_parameters(tmp_path):
    path = tmp_path / "h100.json"
    path.write_text(json.dumps({
        "format": planner.THROUGHPUT_FORMAT, "device": "GPU: made up for the test", "device_kind": "cuda",
        "model": "Qwen/Qwen2.5-7B-Instruct", "batch_size": 128, "prefill_tokens_per_s": 20000.0,
        "decode_tokens_per_s": 2000.0, "train_tokens_per_s": 3000.0, "train_model": "smollm2-135m",
    }))
    throughput = planner.load_throughput(path)
    assert throughput.parameters_b == 7.62 and throughput.train_parameters_b == 0.135  # known sizes filled in
    config = make_config("paper", method="comp_rl")
    budget = planner.step_budget(config)
    took = planner.step_time(config, budget, throughput)
    assert planner.learner_devices(config, throughput) == {"actor": 8, "extractor": 8}
    assert took.rollout == pytest.approx(budget.prefill / (20000 * 8) + budget.decode / (2000 * 8))
    assert took.actor_update == pytest.approx(budget.actor_train / (3000 * 0.135 / 7.62 * 8))
    extractor = 4.02 / 7.62  # the extractor's rate: the actor model's times 7.62 / 4.02 parameters
    assert took.extraction == pytest.approx(
        budget.extractor_prefill * extractor / (20000 * 8) + budget.extractor_decode * extractor / (2000 * 8)
    )
    async_config = make_config("paper", method="comp_rl", **{"experience.mode": "async"})
    overlapped = planner.step_time(async_config, budget, throughput)
    assert overlapped.step == pytest.approx(
        max(took.rollout + took.actor_update, took.extraction + took.extractor_update)
    )
    # the mixture-of-experts extractor scales by its active parameters, not all 30.5B
    moe = make_config("paper", method="comp_rl", **{"extractor.model": "Qwen/Qwen3-30B-A3B-Instruct-2507"})
    assert throughput.rate("decode", moe.extractor.model) == pytest.approx(2000 * 7.62 / 3.3)
    plan = reproduce.dry_run("paper", throughput=path)
    assert "devices: the placement's GPUs, actor 8, extractor 8" in plan and "GPU-hours" in plan
    assert "a CUDA measurement for runs" not in plan


@pytest.mark.parametrize(
    ("content", "complaint"),
    [
        ("{not json", "not valid JSON"),
        ("[1, 2]", "expected a JSON object, got list"),
        ('{"format": "something else"}', "format='something else'; accepted: 'comprl-throughput/1'"),
        ({"decode_tokens_per_s": None}, "decode_tokens_per_s=None: expected a positive number (missing)"),
        ({"prefill_tokens_per_s": -5}, "prefill_tokens_per_s=-5: expected a positive number"),
        ({"prefill_tokens_per_s": "fast"}, "prefill_tokens_per_s='fast': expected a positive number"),
        ({"batch_size": 8.5}, "batch_size=8.5: expected a positive integer"),
        ({"device_kind": "tpu"}, "device_kind='tpu'; accepted: cpu, cuda"),
        ({"model": "my/own-model"}, "parameters_b is missing and 'my/own-model' is not a model of known size"),
    ],
)
def test_malformed_throughput_file_is_rejected_naming_what_is_wrong(tmp_path, content, complaint, cpu_measurement):
    path = tmp_path / "bad.json"
    if isinstance(content, dict):
        good = json.loads(cpu_measurement.read_text())
        if "model" in content:  # a model of unknown size, and no parameter count to scale from
            del good["parameters_b"]
        content = json.dumps({k: v for k, v in {**good, **content}.items() if v is not None})
    path.write_text(content)
    with pytest.raises(SystemExit) as raised:
        main(["reproduce", "--profile", "paper", "--dry-run", "--throughput", str(path)])
    message = str(raised.value.code)
    assert message.startswith(f"comprl: throughput file {path}: ") and complaint in message
    assert "benchmarks/rollout_throughput.py --json auto" in message  # and how to write a good one
    with pytest.raises(SystemExit, match="no such file"):
        main(["reproduce", "--profile", "paper", "--dry-run", "--throughput", str(tmp_path / "absent.json")])


def test_throughput_needs_dry_run(capsys):
    with pytest.raises(SystemExit):
        main(["reproduce", "--profile", "paper", "--throughput", "x.json"])
    assert "--throughput only applies with --dry-run" in capsys.readouterr().err


def test_episodes_end_at_the_context_cap_under_the_longest_replies():
    config = make_config("paper", method="comp_rl")  # Room: 246 first-prompt tokens, 137 per turn, 4,096 per reply
    assert (config.rollout.max_new_tokens, config.rollout.max_context_tokens) == (4096, 32768)  # the official config's
    (room,) = planner.step_budget(config).tasks
    # free half: 246 + t * (4096 + 137) + 4096 <= 32768 up to t = 6, so 7 turns; guided (+274 entry tokens): also 7
    assert room.turns == 7 and room.rollouts == 128 and room.decode == 128 * 7 * 4096
    assert room.sequence == pytest.approx(246 + 274 / 2 + 6 * (4096 + 137) + 4096)
    roomy = planner.step_budget(
        dataclasses.replace(config, rollout=dataclasses.replace(config.rollout, max_context_tokens=10**6))
    )
    assert roomy.tasks[0].turns == 30
    baseline = planner.step_budget(make_config("paper", method="baseline"))
    assert baseline.distill_calls == 0 and baseline.tasks[0].first == 246  # no entry, no extractor
    frozen = planner.step_budget(make_config("paper", method="exp_only"))
    assert frozen.actor_train == 0 and frozen.extractor_train > 0


def test_gpu_count_follows_the_official_placement():
    assert planner.gpu_count(make_config("paper", method="comp_rl")) == 16
    assert planner.gpu_count(make_config("paper", method="baseline")) == 8
    assert planner.gpu_count(make_config("paper", method="comp_rl", **{"extractor.share_actor": True})) == 14
    big = make_config("paper", method="comp_rl", **{"extractor.model": "Qwen/Qwen3-30B-A3B-Instruct-2507"})
    assert planner.gpu_count(big) == 16  # 549 GB of training state fits the extractor's 8 x 80 GB


def test_prompt_token_table_matches_a_fresh_measurement():
    assert set(planner.PROMPT_TOKENS) == set(ENV_IDS)
    fresh = planner.measure_prompt_tokens(["comprl/Room-Ultimate-5x5-v0", "comprl/Sokoban-6x6-2box-v0"])
    for env_id, measured in fresh.items():
        table = planner.PROMPT_TOKENS[env_id]
        for name in ("first", "per_turn", "distill"):
            assert math.isclose(getattr(measured, name), getattr(table, name), rel_tol=0.1), (env_id, name)
    shared = planner.measure_shared_tokens()
    assert all(math.isclose(shared[k], v, rel_tol=0.1) for k, v in planner.SHARED_TOKENS.items()), shared
    # every MiniHack task of the cpu profile plays the brief view, and the planner prices that view's prompts
    views = {(env_id, options.get("view")) for env_id, options in make_config("cpu").env_options.items()}
    assert views <= set(planner.VIEW_PROMPT_TOKENS)
    fresh = planner.measure_prompt_tokens(["comprl/KeyRoom-Dark-S5-v0"], options={"view": "brief"})
    assert fresh["comprl/KeyRoom-Dark-S5-v0"] == planner.VIEW_PROMPT_TOKENS["comprl/KeyRoom-Dark-S5-v0", "brief"]


def test_benchmark_writes_a_file_the_planner_reads(tmp_path):
    path = tmp_path / "tiny.json"
    subprocess.run(
        [
            sys.executable,
            str(REPO / "benchmarks" / "rollout_throughput.py"),
            "--model",
            "tiny-random",
            "--device",
            "cpu",
            "--no-compare",
            "--batch",
            "2",
            "--prompt-tokens",
            "32",
            "--decode-tokens",
            "4",
            "--train-batch",
            "2",
            "--train-tokens",
            "32",
            "--json",
            str(path),
            "--note",
            "test",
        ],
        check=True,
        capture_output=True,
        cwd=REPO,
    )
    throughput = planner.load_throughput(path)
    assert (
        throughput.device_kind == "cpu" and throughput.device.startswith("CPU: ") and throughput.model == "tiny-random"
    )
    assert throughput.batch_size == 2 and throughput.train_tokens_per_s > 0 and throughput.note == "test"
    assert "expected step time from" in reproduce.dry_run("smoke", throughput=path)


def _benchmark_module():
    spec = importlib.util.spec_from_file_location("rollout_throughput", REPO / "benchmarks" / "rollout_throughput.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_random_weights_measure_an_architecture_without_its_weights(tmp_path):
    config = {"model_type": "qwen2", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
              "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 4096, "eos_token_id": 7}
    (tmp_path / "arch.json").write_text(json.dumps(config))
    path = tmp_path / "measured.json"
    subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "rollout_throughput.py"), "--model", str(tmp_path / "arch.json"),
         "--random-weights", "--device", "cpu", "--batch", "2", "--prompt-tokens", "32", "--decode-tokens", "4",
         "--train-batch", "2", "--train-tokens", "32", "--json", str(path)],
        check=True, capture_output=True, cwd=REPO,
    )
    record = json.loads(path.read_text())
    built = _benchmark_module().random_model(str(tmp_path / "arch.json"), torch.float32, torch.device("meta"))
    assert record["weights"].startswith("random") and "rollout" not in record  # implies --no-compare
    assert record["parameters_b"] == round(sum(p.numel() for p in built.parameters()) / 1e9, 4) > 0
    assert planner.load_throughput(path).train_tokens_per_s > 0


def test_a_cpu_files_name_holds_its_dtype_so_one_cpu_brand_in_two_dtypes_makes_two_files():
    name = _benchmark_module().device_name
    cpu = torch.device("cpu")
    (described, as_bf16), (_, as_fp32) = name(cpu, torch.bfloat16), name(cpu, torch.float32)
    assert described.startswith("CPU: ") and as_bf16 != as_fp32
    assert as_bf16.startswith("cpu-") and "-bfloat16-" in as_bf16 and re.fullmatch(r"[a-z0-9-]+", as_bf16)


@pytest.mark.parametrize("model, card_b", [("Qwen/Qwen2.5-7B-Instruct", 7.62), ("Qwen/Qwen2.5-1.5B-Instruct", 1.54)])
def test_shipped_model_configs_build_the_model_cards_parameter_counts(model, card_b):
    built = _benchmark_module().random_model(model, torch.bfloat16, torch.device("meta"))  # shapes only, no memory
    assert math.isclose(sum(p.numel() for p in built.parameters()) / 1e9, card_b, rel_tol=0.005)
    assert model not in planner.PARAMETERS_B or planner.PARAMETERS_B[model] == card_b


def test_a_notebooks_wall_time_adds_up_over_a_killed_call_and_the_call_that_finishes_it(tmp_path, monkeypatch, capsys):
    import time

    calls, midway = [], []

    def run_notebook(name, profile, params, out):
        calls.append(name)
        time.sleep(0.3)
        midway.append(json.loads((out.parent / "reproduce.json").read_text())[name])  # written while it runs
        if len(calls) == 1:
            raise KeyboardInterrupt  # the first call dies inside 01

    monkeypatch.setattr("comprl.kit.notebook_runner.run_notebook", run_notebook)
    monkeypatch.setattr(reproduce, "CLOCK_SECONDS", 0.1)
    monkeypatch.setattr("comprl.kit.reproduce.write_report", lambda profile, results: results / "REPORT.md")
    args = ["reproduce", "--profile", "smoke", "--results", str(tmp_path), "--only", "01_single_task"]
    assert main(args) == 130  # Ctrl-C: one line, the status a shell gives an interrupted command
    killed = json.loads((tmp_path / "smoke" / "reproduce.json").read_text())["01_single_task"]
    assert "finished" not in killed and killed["seconds"] >= 0.3
    assert len(killed["calls"]) == 1 and killed["calls"][0]["end"] >= killed["calls"][0]["start"]
    assert main(args) == 0
    finished = json.loads((tmp_path / "smoke" / "reproduce.json").read_text())["01_single_task"]
    assert "finished" in finished and finished["seconds"] >= killed["seconds"] + 0.3
    assert finished["calls"][0] == killed["calls"][0] and len(finished["calls"]) == 2  # each call's start and end
    assert "finished" not in midway[1] and midway[1]["seconds"] > killed["seconds"]  # what a SIGKILL would leave
    assert main(args) == 0 and calls == ["01_single_task"] * 2  # finished: not executed again
    capsys.readouterr()


def test_two_reproductions_side_by_side_keep_each_others_wall_times(tmp_path, monkeypatch, capsys):
    """Two calls on different notebooks (one per core) share ``reproduce.json``: each one's minute-by-minute
    record keeps the other's entry as the other last wrote it, and both finish with their own entry."""
    import threading
    import time

    both_running = threading.Barrier(2)

    def run_notebook(name, profile, params, out):
        both_running.wait(timeout=10)  # the two calls are inside their notebooks at the same time
        time.sleep(0.5)  # each one records several times while the other one runs

    monkeypatch.setattr("comprl.kit.notebook_runner.run_notebook", run_notebook)
    monkeypatch.setattr(reproduce, "CLOCK_SECONDS", 0.05)
    monkeypatch.setattr("comprl.kit.reproduce.write_report", lambda profile, results: results / "REPORT.md")
    calls = [
        threading.Thread(target=main, args=(["reproduce", "--profile", "smoke", "--results", str(tmp_path), "--only",
                                             name],))
        for name in ("02_multitask", "03_extractor_size")
    ]
    for call in calls:
        call.start()
    for call in calls:
        call.join(timeout=30)
    times = json.loads((tmp_path / "smoke" / "reproduce.json").read_text())
    assert set(times) == {"02_multitask", "03_extractor_size"}
    assert all("finished" in times[name] and times[name]["seconds"] >= 0.5 for name in times)
    assert not list((tmp_path / "smoke").glob("*.tmp"))
    capsys.readouterr()


def test_the_report_s_machine_and_code_lines_count_finished_runs_only_the_dry_run_s_all(tmp_path):
    from comprl.kit.reproduce import _machines

    line = {"after_step": 0, "device": "CPU: test", "cores": 1, "dtype": "float32", "code": "a" * 40}
    for name, finished in (("done", True), ("under_way", False)):
        folder = tmp_path / "02_multitask" / name
        folder.mkdir(parents=True)
        (folder / "config.json").write_text("{}")
        (folder / "machines.jsonl").write_text(json.dumps(line) + "\n")
        if finished:
            (folder / "finished").write_text("2026-12-02T00:00:00+00:00\n")
    # a run another notebook reuses through a link counts once, where it lives
    (tmp_path / "04_ablations").mkdir()
    (tmp_path / "04_ablations" / "done").symlink_to("../02_multitask/done", target_is_directory=True)
    where, code = _machines(tmp_path, finished_only=True)
    assert "2 runs" in _machines(tmp_path)[0]  # the dry run counts the run under way too
    assert "CPU: test, float32, 1 core: 1 run" in where and f"{'a' * 12}: 1 run" in code
