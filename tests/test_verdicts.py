"""The report's verdicts (:mod:`comprl.kit.verdicts`): per-seed claims on Welch's or the paired t with their power
at 80%, one tested comparison per claim, unguided evaluations named as such, collapse per seed, and the held-out
figure (:func:`comprl.kit.report.plot_heldout`)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pandas as pd
import pytest

from comprl.config import make_config
from comprl.kit import paper, report, reproduce, verdicts
from comprl.kit.stats import paired_comparison, welch_comparison

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


def test_detectable_difference_is_found_at_80_percent_power_by_welchs_t_on_two_arms_plus_the_episodes_noise():
    # 4 seeds an arm: df 6, t_0.975 = 2.4469 and t_0.80 = 0.9057 (tables), SE of the difference sqrt(2 x 0.01 / 4)
    assert verdicts.detectable_difference(0.1, 4) == pytest.approx((2.4469 + 0.9057) * (2 * 0.01 / 4) ** 0.5, 1e-4)
    with_episodes = verdicts.detectable_difference(0.1, 4, episodes=64)
    assert with_episodes == pytest.approx((2.4469 + 0.9057) * (2 * (0.01 + 0.25 / 64) / 4) ** 0.5, 1e-4)
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
    assert (f"01 5 seeds x 64 held-out episodes per task detect at 80% power a difference of {five}, 3 seeds x 64 "
            f"held-out episodes per task detect at 80% power a difference of {three}; 06 1 seed x 16 held-out "
            "episodes per task: no spread over seeds, so no verdict") in line
    assert (five, three) == ("0.291", "0.438")  # at SEED_SD 0.13; under the old 2 SE: 0.182 and 0.236
    assert "05" not in line and float(five) < float(three)  # timing runs do not evaluate; fewer seeds, coarser
    assert verdicts.planned_power({"05": timing}) == []


def test_a_change_is_reproduced_or_opposite_only_beyond_welchs_critical_value_and_says_its_t_and_df():
    base = [0.5, 0.6, 0.7]  # sd 0.1 a side, 3 seeds: SE sqrt(2 x 0.01 / 3) = 0.0816, Welch df 4, critical 2.776
    far = welch_comparison([v + 0.3 for v in base], base)  # t = 3.67, p = 0.021
    assert verdicts.verdict(+0.3, far) == "reproduced (t = +3.67, Welch df 4.0, p = 0.021)"
    assert verdicts.verdict(-0.3, far).startswith("opposite (t = +3.67")
    assert verdicts.verdict(-0.3, welch_comparison(base, [v + 0.3 for v in base])).startswith("reproduced (t = -3.67")
    # 2.45 SE: beyond the old "2 SE" rule, within Welch's 2.776 at 4 df (p = 0.070)
    near = welch_comparison([v + 0.2 for v in base], base)
    assert verdicts.verdict(+0.3, near) == "inconclusive (t = +2.45, Welch df 4.0, p = 0.070)"
    assert verdicts.verdict(+0.3, welch_comparison(base, base)).startswith("inconclusive (t = +0.00")
    # the same gain at every seed: no spread, no t; a nonzero change is beyond the noise, and the verdict says why
    steady = paired_comparison([0.4, 0.5, 0.6], [0.3, 0.4, 0.5])
    assert verdicts.verdict(+0.3, steady) == "reproduced (SE 0: every seed moved by the same amount, no t)"
    assert verdicts.verdict(+0.3, welch_comparison([0.5], base)) == "no verdict (under 2 seeds)"
    assert verdicts.verdict(+0.3, None) == "no verdict (under 2 seeds)"


def test_single_task_claims_test_only_the_pre_declared_reading_with_experience_and_show_the_other_as_context(
    tmp_path,
):
    write(tmp_path, "01_single_task", evals("baseline", [0.5, 0.6, 0.7], before=0.2, length=5.0)
          + evals("comp_rl", [0.5, 0.6, 0.7], before=0.1, guided=[0.8, 0.9, 1.0], length=4.0))
    claims = verdicts.claims(tmp_path)
    assert claims[:2] == list(verdicts.HEADER) and "detectable at 80% power" in claims[0]
    # with its bank (96 episodes shown an entry) comp_rl 0.9 against 0.6: +0.3, SE sqrt(2 x 0.01 / 3) = 0.0816,
    # t = 3.67 on Welch's 4 df; detectable at 80% power (2.776 + 0.941) x 0.0816 = 0.304
    assert claim(claims, "single task Room: comp_rl with experience / baseline success") == [
        "single task Room: comp_rl with experience / baseline success", "1.30x", "0.50x", "1.50x", "+0.20x",
        "0.304 success", "96/96", "reproduced (t = +3.67, Welch df 4.0, p = 0.021)",
    ]
    # without its bank it scored the baseline's 0.6: the same runs read another way, shown but never tested
    assert claim(claims, "single task Room: comp_rl without experience / baseline success") == [
        "single task Room: comp_rl without experience / baseline success", "1.30x", "0.50x", "1.00x", "-0.30x",
        "0.304 success", "-", "not a test (context: the claim's one test is the row with its bank)",
    ]
    # 4 actions against 5 at every seed and evaluation: the paper's direction, with no spread at all
    cells = claim(claims, "single task Room: baseline / comp_rl with experience actions per episode")
    assert cells[2:5] == ["1.25x", "1.25x", "-0.25x"] and cells[-1].startswith("reproduced (SE 0")
    cells = claim(claims, "single task Room: baseline / comp_rl without experience actions per episode")
    assert cells[-1].startswith("not a test (context")
    assert sum("| reproduced" in line or "| opposite" in line or "| inconclusive" in line for line in claims) == 2


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
    assert static[6] == "30/96" and static[3] == "+0.100" and static[-1].startswith("reproduced (SE 0")
    scaling = claim(claims, "task scaling, 3 tasks (room+webshop+alfworld): comp_rl unguided (no entry shown)")
    # sd 0.1 per side, 3 seeds: t = 0.1 / 0.0816 = 1.22 on Welch's 4 df
    assert scaling[3] == "+0.100" and scaling[-1] == "inconclusive (t = +1.22, Welch df 4.0, p = 0.288)"
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
    # the paper: above the baseline at every task count; ours 0.4 below it, t = -4.90 on 4 df (detectable 0.304)
    assert cells[1] == "higher" and cells[3] == "-0.400" and cells[4] == "-" and cells[5] == "0.304"
    assert cells[-1] == "opposite (t = -4.90, Welch df 4.0, p = 0.008)"


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
    # one collapse in 3 seeds against none in 3: Fisher's exact p = 1; 3 against 3 seeds can reach 0.1 at best
    assert claim(claims, "ablation no_split_advantages: seeds collapsed")[3:] == [
        "1/3 (comp_rl 0/3)", "-", "-", "-",
        "inconclusive (Fisher's exact p = 1.000; at 3 and 3 seeds its smallest is 0.100: cannot reach significance)",
    ]
    # the collapse count is that ablation's claim: its held-out success row is context, not a second test
    assert claim(claims, "ablation no_split_advantages: held-out success")[-1] == (
        "not a test (context: this ablation's claim is its collapse row)")
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
    hatched = [bar for bar in ax.patches if bar.get_hatch() == "//"]
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
    # half-width 0.25 = t_0.975,2 (4.303) x SE, so SE 0.058 and detectable (4.303 + 1.061) x 0.058 = 0.31
    assert repeated.endswith("| 0.31x | - | inconclusive (an interval spans 1.02x) |")
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
    # the issue-68 case: 4 discordant episodes can give p = 2 / 2^4 = 0.125 at best, whatever they show
    (3, 1, "exact sign test p = 0.625, inconclusive: with 4 discordant episodes the smallest p the test can reach is "
           "0.125, so it cannot reach significance"),
])
def test_the_reference_bank_diagnostic_tests_the_episodes_one_pass_won_alone(
    tmp_path, won_only_guided, won_only_free, reading
):
    reference_bank(tmp_path, won_only_guided, won_only_free)
    (line,) = verdicts.diagnostics(tmp_path)
    assert line.startswith("- **Can the actor use good experience?** `comprl/Room-Random-5x5-v0`") and reading in line
    if won_only_guided + won_only_free:  # the paired difference over the 64 episodes and its SE
        assert f"guided - free {(won_only_guided - won_only_free) / 64:+.3f}, SE " in line


def test_the_extractor_diagnostic_judges_the_guided_halfs_gain_over_seeds(tmp_path):
    # per seed, the mean over its steps of guided minus free: comp_rl +0.10, +0.12, +0.14 (SE 0.0115, t = 10.39 on
    # 2 df; detectable at 80% power (4.303 + 1.061) x 0.0115 = 0.062); static +0.2, -0.2, 0.0 (SE 0.115, t = 0)
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
        "3", "0.990", "0.040", "0.000", "0.500 of 4", "28.4", "+0.120", "0.062",
        "guided above free (t = +10.39, paired df 2, p = 0.009)"]
    assert claim(table, "01_single_task | static")[7] == "-"
    assert claim(table, "01_single_task | static")[-3:] == [
        "+0.000", "0.619", "inconclusive (t = +0.00, paired df 2, p = 1.000)"]
    assert not any("Can the actor" in line for line in table)  # no reference bank written: no such line


def train_rows(method: str, seeds: int, steps: int, wins: list[int], episodes: int = 8) -> list[dict]:
    """Training rows of ``seeds`` runs: at step s each seed won ``wins[s]`` of its ``episodes``, its guided half all
    of its episodes and its free half none."""
    return [{"run": f"{method}_seed{seed}", "method": method, "env_id": ROOM, "seed": seed, "step": step + 1,
             "phase": "train", "episodes": float(episodes), "success_rate": wins[step] / episodes,
             "guided_success_rate": 1.0, "free_success_rate": 0.0, "bank_size": float(step)}
            for seed in range(seeds) for step in range(steps)]


def test_training_curves_pool_seeds_with_a_wilson_band_say_n_and_keep_one_colour_per_arm_across_panels():
    import matplotlib.pyplot as plt
    from matplotlib.colors import to_hex

    from comprl.kit.evaluate import wilson_interval

    metrics = pd.DataFrame(train_rows("baseline", 2, 3, [2, 4, 6]) + train_rows("comp_rl", 2, 3, [1, 1, 8]))
    fig, (left, right) = plt.subplots(1, 2)
    report.plot_learning_curves(metrics, "success_rate", ax=left)
    with_bank = metrics[metrics.method == "comp_rl"]
    report.plot_learning_curves(with_bank, "guided_success_rate", ax=right)
    report.plot_learning_curves(with_bank, "free_success_rate", ax=right)
    labels = {line.get_label(): line for line in [*left.lines, *right.lines]}
    # 2 seeds x 8 episodes pooled per step; a half holds 4 of each seed's 8
    assert set(labels) == {"baseline (2 seeds, n=16)",
                           "comp_rl (2 seeds, n=16)",
                           "comp_rl guided (2 seeds, n=8)",
                           "comp_rl free (2 seeds, n=8)"}
    comp_rl = {to_hex(line.get_color()) for name, line in labels.items() if name.startswith("comp_rl")}
    assert comp_rl == {report.ARM_COLOURS["comp_rl"]}  # the same arm, the same colour, in both panels
    assert to_hex(labels["baseline (2 seeds, n=16)"].get_color()) != comp_rl.pop()
    assert labels["comp_rl free (2 seeds, n=8)"].get_linestyle() == "--"
    # the band of comp_rl's step 1 (2 of 16 won) is that count's Wilson interval
    vertices = left.collections[1].get_paths()[0].vertices
    band = vertices[vertices[:, 0] == 1, 1]
    low, high = wilson_interval(2, 16)
    assert min(band) == pytest.approx(low) and max(band) == pytest.approx(high)
    assert all(float(tick).is_integer() for tick in left.get_xticks())  # actor steps are whole numbers
    assert "95% Wilson" in left.get_title()
    plt.close(fig)


def test_arm_colours_give_methods_their_own_colour_and_other_arms_distinct_ones_in_the_order_given():
    colours = report.arm_colours(["comp_rl", "no_merge", "no_search_and_ask", "no_merge"])
    assert colours["comp_rl"] == report.ARM_COLOURS["comp_rl"] and len(colours) == 3
    assert len(set(colours.values())) == 3
    assert report.arm_colours(["no_merge"]) == {"no_merge": report.OTHER_COLOURS[0]}


def test_heldout_figure_says_when_an_arm_has_one_seed_and_so_no_interval():
    import matplotlib.pyplot as plt
    from matplotlib.colors import to_hex

    metrics = pd.DataFrame(evals("baseline", [0.5]) + evals("comp_rl", [0.3, 0.4, 0.5]))
    ax = report.plot_heldout(metrics).axes[0]
    assert [tick.get_text() for tick in ax.get_xticklabels()] == ["baseline\n1 seed: no interval",
                                                                   "comp_rl\n3 seeds"]
    from matplotlib.container import ErrorbarContainer

    intervals = [c for c in ax.containers if isinstance(c, ErrorbarContainer)]
    assert len(intervals) == 2  # comp_rl's two bars (step 0, trained); the one-seed baseline has none
    colours = {to_hex(bar.get_facecolor()[:3]) for bar in ax.patches}
    assert colours == {report.ARM_COLOURS["baseline"], report.ARM_COLOURS["comp_rl"]}  # colour means arm
    plt.close(ax.figure)


def test_a_collapse_count_is_judged_by_fishers_exact_test_which_five_seeds_a_side_can_pass():
    falls = pd.DataFrame({"variant": ["shared_weights"] * 5 + ["comp_rl"] * 5,
                          "collapsed": [True] * 5 + [False] * 5}).set_index("variant")
    # 5 of 5 against 0 of 5: p = 2 / C(10, 5) = 0.008
    assert verdicts._collapse_line("shared_weights", falls).endswith(
        "| 5/5 (comp_rl 0/5) | - | - | - | reproduced (Fisher's exact p = 0.008) |")
