"""The report's verdicts (:mod:`comprl.kit.verdicts`): per-seed claims with their power, unguided evaluations
named as such, collapse per seed, and the held-out figure (:func:`comprl.kit.report.plot_heldout`)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pandas as pd
import pytest

from comprl.config import make_config
from comprl.kit import paper, report, reproduce, verdicts

ROOM = "comprl/Room-Random-5x5-v0"
MIXTURE = "room+webshop+alfworld"


def evals(method: str, after: list[float], before: float = 0.1, guided: list[float] | None = None,
          shown: float | None = 32.0, env_id: str = ROOM, length: float = 5.0, key: str = "method",
          shown_before: float | None = None) -> list[dict]:
    """A run per seed: its step-0 and step-48 evaluation rows (32 episodes), as ``comprl.runs.load_metrics``;
    ``shown`` episodes of the last with-experience evaluation saw an entry, ``shown_before`` (default ``shown``) of
    the first."""
    rows = []
    for seed, value in enumerate(after):
        for step, success in ((0, before), (48, value)):
            row = {"run": f"{method}_seed{seed}", key: method, "method": "comp_rl" if key != "method" else method,
                   "env_id": env_id, "seed": seed, "step": step, "phase": "eval", "episodes": 32.0,
                   "success_rate": success, "mean_episode_length": length}
            if guided is not None:
                row.update(guided_success_rate=guided[seed] if step else before, guided_mean_episode_length=length,
                           guided_with_entry=shown if step or shown_before is None else shown_before)
            rows.append(row)
    return rows


def write(tmp_path, notebook: str, rows: list[dict]) -> None:
    (tmp_path / notebook).mkdir(exist_ok=True)
    pd.DataFrame(rows).to_csv(tmp_path / notebook / "metrics.csv", index=False)


def claim(claims: list[str], start: str) -> list[str]:
    """The cells of the one claim row that starts with ``start``."""
    (line,) = [c for c in claims if c.startswith(f"| {start}")]
    return [cell.strip() for cell in line.strip("|").split("|")]


def test_detectable_difference_is_two_standard_errors_of_two_means_plus_the_episodes_binomial_noise():
    assert verdicts.detectable_difference(0.1, 4) == pytest.approx(2 * (2 * 0.01 / 4) ** 0.5)
    with_episodes = verdicts.detectable_difference(0.1, 4, episodes=64)
    assert with_episodes == pytest.approx(2 * (2 * (0.01 + 0.25 / 64) / 4) ** 0.5)
    assert verdicts.detectable_difference(0.1, 4, 64, success=0.1) < with_episodes  # 0.5 is the worst case
    assert verdicts.detectable_difference(0.1, 5) < verdicts.detectable_difference(0.1, 3)  # more seeds, finer
    for bad, named in (({"n_seeds": 1}, "n_seeds=1"), ({"episodes": 0}, "episodes=0"), ({"sd": -0.1}, "sd=-0.1"),
                       ({"success": 1.5}, "success=1.5")):
        with pytest.raises(ValueError, match=named):
            verdicts.detectable_difference(**{"sd": 0.1, "n_seeds": 3, **bad})


def test_planned_power_gives_each_notebook_the_difference_its_arms_seeds_detect():
    arms = {method: [make_config("smoke", method=method, seed=seed, eval_episodes=64) for seed in range(n)]
            for method, n in (("baseline", 5), ("comp_rl", 5), ("static", 3))}
    timing = [make_config("smoke", method="comp_rl", seed=seed, eval_episodes=0) for seed in range(3)]
    one_seed = [make_config("smoke", method="baseline", seed=0, eval_episodes=16)]
    (line,) = verdicts.planned_power({"01": [c for configs in arms.values() for c in configs], "05": timing,
                                      "06": one_seed})
    five, three = (f"{verdicts.detectable_difference(verdicts.SEED_SD, n, 64):.3f}" for n in (5, 3))
    assert (f"01 5 seeds x 64 held-out episodes per task detect a difference of {five}, 3 seeds x 64 held-out "
            f"episodes per task detect a difference of {three}; 06 1 seed x 16 held-out episodes per task: no spread "
            "over seeds, so no verdict") in line
    assert "05" not in line and float(five) < float(three)  # timing runs do not evaluate; fewer seeds, coarser
    assert verdicts.planned_power({"05": timing}) == []


def test_a_change_is_reproduced_or_opposite_only_beyond_two_standard_errors():
    assert verdicts.verdict(+0.3, 0.21, 0.1) == "reproduced"
    assert verdicts.verdict(+0.3, -0.21, 0.1) == "opposite"
    assert verdicts.verdict(-0.3, -0.21, 0.1) == "reproduced"
    assert verdicts.verdict(+0.3, 0.19, 0.1) == "inconclusive (within 2 SE)"
    assert verdicts.verdict(+0.3, 0.0, 0.0) == "inconclusive (within 2 SE)"  # no change is no direction
    assert verdicts.verdict(+0.3, 0.5, None) == "no verdict (under 2 seeds)"


def test_single_task_claims_carry_step_0_the_detectable_difference_and_a_verdict(tmp_path):
    write(tmp_path, "01_single_task", evals("baseline", [0.5, 0.6, 0.7], before=0.2, length=5.0)
          + evals("comp_rl", [0.8, 0.9, 1.0], before=0.1, guided=[0.5, 0.6, 0.7], length=4.0))
    claims = verdicts.claims(tmp_path)
    assert claims[:2] == list(verdicts.HEADER)
    # without experience comp_rl 0.9 against 0.6: +0.3, standard error sqrt(2 x 0.01 / 3) = 0.0816, detectable 0.163
    assert claim(claims, "single task Room: comp_rl without experience / baseline success") == [
        "single task Room: comp_rl without experience / baseline success", "1.30x", "0.50x", "1.50x", "+0.20x",
        "0.163 success", "-", "reproduced",
    ]
    # with its bank (96 episodes shown an entry) it scored the baseline's 0.6: the same runs read another way
    assert claim(claims, "single task Room: comp_rl with experience / baseline success") == [
        "single task Room: comp_rl with experience / baseline success", "1.30x", "0.50x", "1.00x", "-0.30x",
        "0.163 success", "96/96", "inconclusive (within 2 SE)",
    ]
    # 4 actions against 5 at every seed and evaluation: the paper's direction, with no spread at all
    for how in ("without", "with"):
        cells = claim(claims, f"single task Room: baseline / comp_rl {how} experience actions per episode")
        assert cells[2:5] == ["1.25x", "1.25x", "-0.25x"] and cells[-1] == "reproduced"


def test_single_task_claims_name_a_with_experience_evaluation_that_showed_no_entry_unguided(tmp_path):
    write(tmp_path, "01_single_task", evals("baseline", [0.5, 0.6, 0.7])
          + evals("comp_rl", [0.5, 0.6, 0.7], guided=[0.5, 0.6, 0.7], shown=0.0))
    claims = verdicts.claims(tmp_path)
    assert not any("comp_rl with experience" in c for c in claims)
    assert claim(claims, "single task Room: comp_rl unguided (no entry shown) / baseline success")[6] == "0/96"


def test_the_larger_extractor_claim_compares_sizes_and_leaves_the_lesson_grammar_arm_out(tmp_path):
    rows = [
        *evals("SmolLM2-135M", [0.3, 0.4, 0.5], guided=[0.3, 0.4, 0.5], key="extractor"),
        *evals("Gemma3-270M", [0.4, 0.5, 0.6], guided=[0.4, 0.5, 0.6], key="extractor"),
        *evals("SmolLM2-135M grammar", [0.9, 0.9, 0.9], guided=[0.9, 0.9, 0.9], key="extractor"),
    ]
    write(tmp_path, "03_extractor_size", rows)
    pd.DataFrame({"extractor": ["SmolLM2-135M", "Gemma3-270M", "SmolLM2-135M grammar"],
                  "lesson_grammar": [False, False, True]}).to_csv(
        tmp_path / "03_extractor_size" / "summary.csv", index=False)
    cells = claim(verdicts.claims(tmp_path), "larger extractor")
    assert cells[0] == "larger extractor (Gemma3-270M over SmolLM2-135M): success with experience, gain"
    assert cells[3] == "+0.100"  # 0.5 against 0.4 with experience; the grammar arm's 0.9 is no size


def test_an_evaluation_with_experience_that_showed_no_entry_is_called_unguided(tmp_path):
    rows = (evals("baseline", [0.2, 0.3, 0.4], env_id=MIXTURE)
            + evals("comp_rl", [0.3, 0.4, 0.5], guided=[0.3, 0.4, 0.5], shown=0.0, env_id=MIXTURE)
            + evals("static", [0.3, 0.4, 0.5], guided=[0.4, 0.5, 0.6], shown=10.0, env_id=MIXTURE))
    write(tmp_path, "02_multitask", rows)
    claims = verdicts.claims(tmp_path)
    assert not any("Complementary RL, eval with exp." in c for c in claims)
    cells = claim(claims, "3-task Table 1, Complementary RL, eval unguided (no entry shown): avg success")
    assert cells[1] == f"{paper.TABLE_1_3_TASK['Complementary RL, eval with exp.']['avg']:.3f}" and cells[6] == "0/96"
    assert claim(claims, "3-task Table 1, comp_rl: eval with experience minus without")[-1] == (
        "not a test (no entry shown)"
    )
    # static showed 10 of its 96 episodes an entry, and gained 0.1 at every seed: a paired difference with no spread
    static = claim(claims, "3-task Table 1, static: eval with experience minus without")
    assert static[6] == "30/96" and static[3] == "+0.100" and static[-1] == "reproduced"
    scaling = claim(claims, "task scaling, 3 tasks (room+webshop+alfworld): comp_rl unguided (no entry shown)")
    assert scaling[3] == "+0.100" and scaling[-1] == "inconclusive (within 2 SE)"  # sd 0.1 per side, 3 seeds
    assert claim(claims, "3-task Table 1, Baseline GRPO")[-1] == "-"  # the reference of the others


def test_the_papers_mixture_keeps_a_row_where_notebook_02_trained_another(tmp_path):
    laptop = "room_lit+room_dark"
    write(tmp_path, "02_multitask", evals("baseline", [0.2, 0.3], env_id=laptop)
          + evals("comp_rl", [0.3, 0.4], guided=[0.3, 0.4], env_id=laptop))
    cells = claim(verdicts.claims(tmp_path), "3-task Table 1 (the paper's mixture")
    assert cells[1] == "+0.070" and cells[3] == "not run" and cells[-1].startswith("not a test: not run here")
    write(tmp_path, "02_multitask", evals("baseline", [0.2, 0.3], env_id=MIXTURE))
    assert not any("the paper's mixture" in c for c in verdicts.claims(tmp_path))  # it ran: its own rows


def test_a_task_count_the_paper_gives_no_gain_for_is_judged_on_its_direction(tmp_path):
    laptop = "room_lit+room"
    write(tmp_path, "02_multitask", evals("baseline", [0.5, 0.6, 0.7], env_id=laptop)
          + evals("comp_rl", [0.1, 0.2, 0.3], guided=[0.1, 0.2, 0.3], env_id=laptop))
    cells = claim(verdicts.claims(tmp_path), "task scaling, 2 tasks (room_lit+room): comp_rl with experience")
    # the paper: above the baseline at every task count; ours 0.4 below it, beyond 2 SE (0.163)
    assert cells[1] == "higher" and cells[3] == "-0.400" and cells[4] == "-" and cells[5] == "0.163"
    assert cells[-1] == "opposite"


def test_a_seed_that_collapsed_is_counted_though_the_mean_over_seeds_hides_it(tmp_path):
    def train(variant: str, seed: int, curve: list[float]) -> list[dict]:
        return [{"run": f"{variant}_seed{seed}", "variant": variant, "method": "comp_rl", "env_id": ROOM,
                 "seed": seed, "step": step + 1, "phase": "train", "success_rate": rate}
                for step, rate in enumerate(curve)]

    rising, falling = [0.1, 0.3, 0.5, 0.5, 0.6, 0.6, 0.6, 0.6], [0.1, 0.4, 0.6, 0.6, 0.3, 0.1, 0.0, 0.0]
    rows = evals("comp_rl", [0.5, 0.5, 0.5], guided=[0.5, 0.5, 0.5], key="variant")
    rows += evals("no_split_advantages", [0.5, 0.6, 0.4], guided=[0.5, 0.6, 0.4], key="variant")
    rows += [r for seed in range(3) for r in train("comp_rl", seed, rising)]
    rows += [r for seed in range(3) for r in train("no_split_advantages", seed, falling if seed == 1 else rising)]
    write(tmp_path, "04_ablations", rows)
    falls = report.seed_collapse(pd.read_csv(tmp_path / "04_ablations" / "metrics.csv")).set_index("run")
    assert falls.loc["no_split_advantages_seed1", "train_fall"] == pytest.approx(-0.6)  # quarters of 2 steps
    assert falls["collapsed"].sum() == 1
    claims = verdicts.claims(tmp_path)
    assert claim(claims, "ablation no_split_advantages: seeds collapsed")[3:] == [
        "1/3 (comp_rl 0/3)", "-", "-", "-", "reproduced"
    ]
    table = verdicts.collapse_table(tmp_path).set_index("method")
    assert table.loc["no_split_advantages", "collapsed"] == 1 and table.loc["comp_rl", "collapsed"] == 0


def test_elapsed_wall_time_counts_calls_that_ran_side_by_side_once():
    start = datetime(2026, 1, 1, tzinfo=timezone.utc)

    def call(begin: int, end: int) -> dict:
        return {"start": (start + timedelta(minutes=begin)).isoformat(),
                "end": (start + timedelta(minutes=end)).isoformat()}

    times = {"02_multitask": {"seconds": 3600.0, "calls": [call(0, 60)]},
             "03_extractor_size": {"seconds": 1800.0, "calls": [call(30, 60)]},
             "04_ablations": {"seconds": 600.0, "calls": [call(100, 110)]}}
    lines = reproduce._wall_time(times)
    assert "100.0 min summed" in lines[0] and "70.0 min over 3 calls" in lines[1]
    del times["04_ablations"]["calls"]  # a call from before the calls were logged: elapsed time unknown
    assert "not recorded" in reproduce._wall_time(times)[1]


def test_heldout_figure_draws_a_point_per_seed_and_an_interval_per_bar(tmp_path):
    metrics = pd.DataFrame(evals("baseline", [0.5, 0.6, 0.7]) + evals("comp_rl", [0.3, 0.4, 0.5],
                                                                      guided=[0.3, 0.4, 0.5], shown=0.0))
    figure = report.plot_heldout(metrics)
    ax = figure.axes[0]
    # bars: baseline before and after; comp_rl before and after, without and with experience
    assert len(ax.patches) == 6
    assert sum(len(c.get_offsets()) for c in ax.collections if hasattr(c, "get_offsets")) >= 18  # 3 seeds x 6
    assert any(text.get_text() == "unguided" for text in ax.texts)  # comp_rl's evaluation showed no entry
    low, high = report.t_interval([0.5, 0.6, 0.7])
    assert low == pytest.approx(0.6 - 4.303 * 0.1 / 3**0.5, abs=1e-3) and high > 0.6
    figure.savefig(tmp_path / "heldout.png")
    assert (tmp_path / "heldout.png").stat().st_size > 0


def test_heldout_figure_calls_the_empty_banks_step_0_evaluation_unguided_and_keeps_intervals_within_0_and_1():
    # two seeds far apart: the t interval of their mean (t = 12.7) reaches far below 0 and above 1
    metrics = pd.DataFrame(evals("comp_rl", [0.1, 0.9], guided=[0.2, 0.8], shown=32.0, shown_before=0.0))
    ax = report.plot_heldout(metrics).axes[0]
    assert report.t_interval([0.1, 0.9])[0] < -1
    (label,) = [text for text in ax.texts if text.get_text() == "unguided"]  # step 0's with-experience bar only
    hatched = [bar for bar in ax.patches if bar.get_hatch()]
    assert len(hatched) == 1 and label.xy[0] == pytest.approx(hatched[0].get_x() + hatched[0].get_width() / 2)
    assert hatched[0].get_x() < max(bar.get_x() for bar in ax.patches)  # not the trained with-experience bar
    ends = [y for line in ax.lines for y in line.get_ydata()]
    assert ends and min(ends) >= 0.0 and max(ends) <= 1.0


def test_the_latency_claim_gives_intervals_only_where_notebook_05_repeated_its_rounds():
    from comprl.kit.latency import overhead_table

    def rows(mode: str, seconds: float, round_: int) -> list[dict]:
        return [{"step": step, "phase": "train", "mode": mode, "batch_size": 8, "round": round_,
                 "rollout_seconds": seconds, "step_seconds": seconds, "processed_tokens": 10.0} for step in (1, 2)]

    def measured(ratios: list[float]) -> pd.DataFrame:
        return pd.DataFrame(
            [row for r, ratio in enumerate(ratios) for row in rows("none", 2.0, r) + rows("async", 2 * ratio, r)]
        )

    metrics = measured([1.0, 1.1, 0.9])
    [repeated] = verdicts._latency_claims(overhead_table(metrics, skip=0))
    assert "over 3 rounds" in repeated and "b8 1.00x [0.75, 1.25]" in repeated
    assert repeated.endswith("| 0.25x | - | inconclusive (an interval spans 1.02x) |")
    [single] = verdicts._latency_claims(overhead_table(metrics[metrics["round"] == 1], skip=0))
    assert "1.10-1.10x (one round)" in single and "nan" not in single and single.endswith("no verdict (one round) |")
    # an absence is reproduced only where the whole interval lies at or under the target, opposite above it
    [tight] = verdicts._latency_claims(overhead_table(measured([0.97, 0.98, 0.99]), skip=0))
    assert tight.endswith("| reproduced |")
    [slower] = verdicts._latency_claims(overhead_table(measured([1.3, 1.31, 1.29]), skip=0))
    assert slower.endswith("| opposite (an interval above 1.02x) |")


def reference_bank(tmp_path, won_only_guided: int, won_only_free: int) -> None:
    (tmp_path / "01_single_task").mkdir(exist_ok=True)
    row = {"env_id": ROOM, "episodes": 64, "free_success": 0.2, "free_low": 0.12, "free_high": 0.31,
           "guided_success": 0.1, "guided_low": 0.05, "guided_high": 0.19, "guided_minus_free": -0.1,
           "guided_with_entry": 64, "won_only_guided": won_only_guided, "won_only_free": won_only_free}
    pd.DataFrame([row]).to_csv(tmp_path / "01_single_task" / "reference_bank.csv", index=False)


@pytest.mark.parametrize("won_only_guided, won_only_free, reading", [
    (0, 6, "exact sign test p = 0.031, guided worse"),  # 2 / 2^6
    (7, 1, "exact sign test p = 0.070, inconclusive (p >= 0.05)"),  # 2 x 9 / 2^8
    (0, 0, "no episode told the two passes apart"),
])
def test_the_reference_bank_diagnostic_tests_the_episodes_one_pass_won_alone(
    tmp_path, won_only_guided, won_only_free, reading
):
    reference_bank(tmp_path, won_only_guided, won_only_free)
    (line,) = verdicts.diagnostics(tmp_path)
    assert line.startswith("- **Can the actor use good experience?** `comprl/Room-Random-5x5-v0`") and reading in line


def test_the_extractor_diagnostic_judges_the_guided_halfs_gain_over_seeds(tmp_path):
    # per seed, the mean over its steps of guided minus free: comp_rl +0.10, +0.12, +0.14 (above 2 SE of 0.023);
    # static +0.2, -0.2, 0.0 (within 2 SE of 0.231)
    gains = {"comp_rl": [[0.05, 0.15], [0.12, 0.12], [0.14, 0.14]], "static": [[0.2, 0.2], [-0.2, -0.2], [0.0, 0.0]]}
    rows = [{"run": f"{method}_seed{seed}", "method": method, "env_id": ROOM, "seed": seed, "step": step + 1,
             "phase": "train", "guided_minus_free": value}
            for method, seeds in gains.items() for seed, steps in enumerate(seeds) for step, value in enumerate(steps)]
    write(tmp_path, "01_single_task", rows)
    pd.DataFrame({"method": list(gains), "env_id": ROOM, "valid": [0.99, 1.0], "cut": [0.04, 0.0], "empty": 0.0,
                  "lesson_tokens": [28.4, 30.0]}).to_csv(tmp_path / "01_single_task" / "extractor_diagnostics.csv",
                                                         index=False)
    # comp_rl's seed 0 wrote four lessons, two of them a bare label; the other runs left no bank log
    lessons = ["Task:", "Go north when the stairs are north.", "Here is the lesson:", "Avoid walls."]
    (tmp_path / "01_single_task" / "comp_rl_seed0").mkdir()
    pd.DataFrame({"seq": range(5), "op": ["add"] * 4 + ["use"], "content": lessons + [None]}).to_parquet(
        tmp_path / "01_single_task" / "comp_rl_seed0" / "bank_operations.parquet")
    table = verdicts.diagnostics(tmp_path)
    assert claim(table, "01_single_task | comp_rl")[3:] == [
        "3", "0.990", "0.040", "0.000", "0.500 of 4", "28.4", "+0.120", "0.023", "guided above free"]
    assert claim(table, "01_single_task | static")[7] == "-"
    assert claim(table, "01_single_task | static")[-3:] == ["+0.000", "0.231", "inconclusive (within 2 SE)"]
    assert not any("Can the actor" in line for line in table)  # no reference bank written: no such line
