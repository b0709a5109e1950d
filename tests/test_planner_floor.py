"""The dry run's time per notebook: evaluation counted as it is played, the floor, and the actual wall time."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from comprl import evaluation, loop
from comprl.config import make_config
from comprl.kit import cli, planner, reproduce


def test_evaluation_passes_counted_are_the_episodes_the_runs_play(tmp_path, monkeypatch):
    played = []

    def counting(engine, envs, seeds, *args, **kwargs):
        played.append(len(seeds))
        return run_episodes(engine, envs, seeds, *args, **kwargs)

    run_episodes = evaluation.run_episodes
    monkeypatch.setattr(evaluation, "run_episodes", counting)
    # one folder, one after another: the baseline plays the shared step-0 rows, comp_rl of the same seed reads them,
    # comp_rl of another seed has a key of its own
    configs = [
        make_config("smoke", steps=1, eval_episodes=2, method="baseline", seed=0),
        make_config("smoke", steps=1, eval_episodes=2, method="comp_rl", seed=0),
        make_config("smoke", steps=1, eval_episodes=2, method="comp_rl", seed=1),
    ]
    per_run = []
    for config in configs:
        before = sum(played)
        loop.run_experiment(config, tmp_path, progress=False)
        per_run.append(sum(played) - before)
    passes = planner.eval_passes(configs)
    planned = [(free + guided) * 2 * len(c.task_ids) for c, (free, guided) in zip(configs, passes)]
    # comp_rl seed 0 reads the free step-0 rows and, its bank empty, takes them as its guided ones: it plays only
    # the final passes; comp_rl seed 1 plays the free step-0 pass too. A final guided pass is counted as played,
    # though a bank that still answers nothing then reuses the free episodes: the plan is an upper bound there
    assert [sum(p) for p in passes] == [2, 2, 3]
    assert per_run[0] == planned[0] and all(n <= bound for n, bound in zip(per_run, planned))
    assert per_run[1] < per_run[2]


def test_a_bank_filled_from_the_start_gets_a_guided_step_0_pass():
    empty = make_config("smoke", method="comp_rl")
    filled = make_config("smoke", method="comp_rl", **{"bank.init_from": "some/bank.duckdb"})
    (_, guided_empty), (_, guided_filled) = planner.eval_passes([empty]) + planner.eval_passes([filled])
    assert guided_filled == guided_empty + 1
    assert planner.eval_passes([make_config("smoke", method="baseline", eval_episodes=0)]) == [(0, 0)]


def test_a_guided_pass_shows_the_entry_and_no_pass_depends_on_the_temperature():
    config = make_config("cpu", method="comp_rl")
    free, guided = planner.eval_tokens(config, False), planner.eval_tokens(config, True)
    turns = guided[1] / planner.decode_passes(config) / config.eval_episodes  # decode passes per reply
    assert guided[0] == pytest.approx(free[0] + planner.SHARED_TOKENS["entry"] * config.eval_episodes)
    assert turns == config.max_turns  # the cpu profile's episodes stay under the context cap
    assert planner.eval_tokens(make_config("cpu", method="comp_rl", eval_temperature=0.1), True) == guided


def test_the_floor_prices_every_token_at_the_forward_rate_and_updates_at_the_train_rate(cpu_measurement):
    t = planner.load_throughput(cpu_measurement)
    config = make_config("cpu", method="comp_rl")
    budget = planner.step_budget(config)
    passes = (2, 1)
    forward, train = t.prefill_tokens_per_s, t.train_tokens_per_s
    step = (
        (budget.prefill + budget.decode + budget.extractor_prefill + budget.extractor_decode) / forward
        + (budget.actor_train + budget.extractor_train) / train
    )
    evaluated = sum(n * sum(planner.eval_tokens(config, guided)) / forward for n, guided in zip(passes, (False, True)))
    floor = planner.run_seconds(config, passes, planner.floor_throughput(t))
    assert floor == pytest.approx(config.steps * step + evaluated)
    assert floor < planner.run_seconds(config, passes, t)  # decoding at the measured rate costs more


def _row(printed: str, notebook: str) -> list[str]:
    line = next(line for line in printed.splitlines() if line.startswith(f"    {notebook} "))
    return re.split(r"\s{2,}", line.strip())


def test_dry_run_puts_plan_floor_and_actual_side_by_side(tmp_path, cpu_measurement):
    measurement = planner.load_throughput(cpu_measurement)
    (tmp_path / "throughput").mkdir()
    (tmp_path / "throughput" / "cpu.json").write_text(measurement.path.read_text())
    (tmp_path / "smoke").mkdir()
    (tmp_path / "smoke" / "reproduce.json").write_text(json.dumps({
        "02_multitask": {"seconds": 7200.0, "finished": "2026-11-27T21:03:00+00:00", "jobs": 2},
        "04_ablations": {"seconds": 600.0},
        "05_latency_analysis": {"seconds": 60.0, "finished": "2026-11-27T23:14:14+00:00"},
    }))
    printed = reproduce.dry_run("smoke", throughput_dir=tmp_path / "throughput", results=tmp_path)
    t = planner.load_throughput(tmp_path / "throughput" / "cpu.json")
    single, multi = (reproduce.step_of(name).configs("smoke") for name in ("01_single_task", "02_multitask"))
    played = [c for c in multi if c not in single]  # 02 copies the runs 01 trains
    passes = planner.eval_passes(played)
    plan = sum(planner.run_seconds(c, p, t) for c, p in zip(played, passes))
    floor = sum(planner.run_seconds(c, p, planner.floor_throughput(t)) for c, p in zip(played, passes))
    evaluated = sum(planner.eval_seconds(c, p, t) for c, p in zip(played, passes))
    assert 0 < len(played) < len(multi)
    largest = max(multi, key=planner._size)  # the run whose step the row shows
    assert _row(printed, "02_multitask")[1:] == [
        f"{len(multi)}", f"{len(multi) - len(played)}", planner._duration(planner.step_time(
            largest, planner.step_budget(largest), t
        ).step), planner._duration(evaluated), planner._duration(plan), planner._duration(floor),
        "2.0 h (2 runs at once)",
    ]
    assert _row(printed, "04_ablations")[-1] == "10.0 min so far (not finished)"
    assert _row(printed, "01_single_task")[2] == "0" and _row(printed, "01_single_task")[-1] == "-"
    assert _row(printed, "05_latency_analysis")[-1] == "1.0 min"
    assert _row(printed, "whole reproduction")[-1] == planner._duration(7860.0)
    assert "reproduce.json" in printed and "their actual time is in the total" in printed


def test_without_a_recorded_reproduction_the_actual_column_says_so(tmp_path, cpu_measurement):
    (tmp_path / "throughput").mkdir()
    (tmp_path / "throughput" / "cpu.json").write_text(cpu_measurement.read_text())
    printed = reproduce.dry_run("smoke", throughput_dir=tmp_path / "throughput", results=tmp_path)
    assert "actual: no reproduction recorded yet" in printed
    assert _row(printed, "whole reproduction")[-1] == "-"
    assert not Path(tmp_path / "smoke" / "reproduce.json").exists()  # a dry run writes nothing


@pytest.mark.parametrize(
    ("seconds", "jobs", "wall"),
    [([53.0, 61.0], 2, 61.0), ([53.0, 61.0], 1, 114.0), ([10.0, 10.0, 10.0], 2, 20.0),
     ([30.0, 10.0, 10.0, 10.0], 2, 30.0), ([10.0, 30.0, 10.0], 2, 30.0), ([], 2, 0.0), ([5.0], 4, 5.0)],
)
def test_runs_at_once_start_in_order_on_the_first_core_to_free_up(seconds, jobs, wall):
    from comprl.kit.parallel import wall_seconds

    assert wall_seconds(seconds, jobs) == wall


def test_a_dry_run_for_runs_at_once_plans_their_wall_time_and_refuses_fewer_than_one(tmp_path, cpu_measurement):
    from comprl.kit.parallel import wall_seconds

    (tmp_path / "throughput").mkdir()
    (tmp_path / "throughput" / "cpu.json").write_text(cpu_measurement.read_text())
    t = planner.load_throughput(tmp_path / "throughput" / "cpu.json")
    single = reproduce.step_of("01_single_task").configs("smoke")
    passes = planner.eval_passes(single)
    seconds = [planner.run_seconds(c, p, t) for c, p in zip(single, passes)]
    one, two = (reproduce.dry_run("smoke", throughput_dir=tmp_path / "throughput", jobs=jobs) for jobs in (1, 2))
    assert _row(one, "01_single_task")[5] == planner._duration(sum(seconds))  # the plan
    assert _row(two, "01_single_task")[5] == planner._duration(wall_seconds(seconds, 2))
    assert _row(two, "01_single_task")[4] == _row(one, "01_single_task")[4]  # evaluation: summed over the runs
    assert wall_seconds(seconds, 2) < sum(seconds) and "2 runs at once, one core each" in two
    with pytest.raises(ValueError, match=r"jobs=0: accepted: an int >= 1"):
        reproduce.dry_run("smoke", throughput_dir=tmp_path / "throughput", jobs=0)
    with pytest.raises(SystemExit, match=r"^comprl: jobs=0: accepted: an int >= 1"):
        cli.main(["reproduce", "--profile", "smoke", "--dry-run", "--jobs", "0", "--results", str(tmp_path)])
