"""The tests behind the verdicts (:mod:`comprl.kit.stats`), pinned against textbook numbers: R's documented
``t.test`` on Student's sleep data (Cushny and Peebles), paired and Welch, and the exact sign test by hand."""

from __future__ import annotations

import dataclasses

import pytest
from scipy import stats as scipy_stats

from comprl.kit import stats

# Student's sleep data: extra hours of sleep of 10 patients under drug 1 and drug 2 (R's `sleep`)
DRUG_1 = [0.7, -1.6, -0.2, -1.2, -0.1, 3.4, 3.7, 0.8, 0.0, 2.0]
DRUG_2 = [1.9, 0.8, 1.1, 0.1, -0.1, 4.4, 5.5, 1.6, 4.6, 3.4]


def test_paired_comparison_gives_rs_paired_t_test_on_the_sleep_data():
    # R: t.test(DRUG_1, DRUG_2, paired = TRUE): t = -4.0621, df = 9, p = 0.002833, 95% CI -2.4598858 -0.7001142
    test = stats.paired_comparison(DRUG_1, DRUG_2)
    assert test.n == 10 and test.df == 9 and test.difference == pytest.approx(-1.58)
    assert test.t == pytest.approx(-4.0621, abs=1e-4) and test.p == pytest.approx(0.002833, abs=1e-6)
    assert (test.low, test.high) == pytest.approx((-2.4598858, -0.7001142), abs=1e-6)
    assert test.se == pytest.approx(1.58 / 4.0621, abs=1e-4)  # the difference in SEs is t
    # drug 2 gave more sleep to 9 patients, less to none (one tie): exact sign test 2 / 2^9
    assert (test.a_only, test.b_only) == (0, 9) and test.sign_p == pytest.approx(2 / 2**9)
    assert test.significant


def test_welch_comparison_gives_rs_welch_t_test_on_the_sleep_data():
    # R: t.test(DRUG_1, DRUG_2): t = -1.8608, df = 17.776, p = 0.07939, 95% CI -3.3654832 0.2054832
    test = stats.welch_comparison(DRUG_1, DRUG_2)
    assert (test.n_a, test.n_b) == (10, 10) and test.difference == pytest.approx(-1.58)
    assert test.t == pytest.approx(-1.8608, abs=1e-4) and test.df == pytest.approx(17.776, abs=1e-3)
    assert test.p == pytest.approx(0.07939, abs=1e-5) and not test.significant
    assert (test.low, test.high) == pytest.approx((-3.3654832, 0.2054832), abs=1e-6)
    assert test.df_text == "Welch df 17.8"


def test_welchs_degrees_of_freedom_fall_toward_the_noisier_sides_when_the_spreads_differ():
    # a spreads by 0.1 over 3 values, b by 0.15 over 4: df (va + vb)^2 / (va^2 / 2 + vb^2 / 3), between 2 and 5
    a, b = [0.8, 0.9, 1.0], [0.5, 0.6, 0.75, 0.4]
    va, vb = 0.01 / 3, scipy_stats.tvar(b) / 4
    test = stats.welch_comparison(a, b)
    assert test.df == pytest.approx((va + vb) ** 2 / (va**2 / 2 + vb**2 / 3))
    assert 2 < test.df < 5
    assert test.p == pytest.approx(scipy_stats.ttest_ind(a, b, equal_var=False).pvalue)


def test_binary_pairs_get_mcnemars_exact_test_and_the_smallest_p_their_discordant_count_can_reach():
    # 64 episodes, 3 won only guided and 1 only free: p = 2 x (1 + 4) / 2^4 = 0.625, and 4 discordant pairs can
    # never give less than 2 / 2^4 = 0.125
    test = stats.paired_from_discordant(64, a_only=3, b_only=1)
    assert test.n == 64 and test.difference == pytest.approx(2 / 64) and test.discordant == 4
    assert test.sign_p == pytest.approx(0.625) and test.smallest_sign_p == pytest.approx(0.125)
    assert "the smallest p it can reach is 0.125: it cannot reach significance" in test.describe()
    # the paired t on the 0/1 differences: SE = sd of (+1 x 3, -1 x 1, 0 x 60) / sqrt(64)
    assert test.se == pytest.approx(scipy_stats.tstd([1] * 3 + [-1] + [0] * 60) / 8) and test.df == 63
    six = stats.paired_from_discordant(20, a_only=0, b_only=6)
    assert six.sign_p == pytest.approx(2 / 2**6) and "cannot reach" not in six.describe()
    assert [stats.smallest_sign_p(k) for k in (0, 1, 4, 5, 6)] == pytest.approx([1, 1, 0.125, 0.0625, 0.03125])
    with pytest.raises(ValueError, match="a_only=5, b_only=4 of n=8"):
        stats.paired_from_discordant(8, 5, 4)


def test_detectable_at_80_percent_power_is_found_four_times_in_five():
    # (t_0.975 + t_0.80) x SE: 3.717 SE at 4 df, 2.80 SE at large df (1.960 + 0.842)
    assert stats.detectable(1.0, 4) == pytest.approx(2.7764 + 0.9410, abs=1e-3)
    assert stats.detectable(1.0, 10_000) == pytest.approx(1.960 + 0.842, abs=1e-2)
    for df in (4, 8, 30):  # the exact power of a two-sided 5% t test at that true difference (noncentral t)
        effect, critical = stats.detectable(1.0, df), stats.critical_t(df)
        power = scipy_stats.nct.sf(critical, df, effect) + scipy_stats.nct.cdf(-critical, df, effect)
        assert 0.78 < power < 0.81
    test = stats.welch_comparison([0.5, 0.6, 0.7], [0.2, 0.3, 0.4])
    assert test.detectable == pytest.approx(stats.detectable(test.se, 4))


def test_values_with_no_spread_give_se_0_and_say_so_without_dividing_by_zero():
    # 0.4 - 0.3 and 0.6 - 0.5 differ in the 17th digit: still the same gain at every pair
    steady = stats.paired_comparison([0.4, 0.5, 0.6], [0.3, 0.4, 0.5])
    assert steady.se == 0 and steady.t == float("inf") and steady.p == 0
    assert steady.low == steady.high == pytest.approx(0.1) and steady.detectable == 0
    assert "no spread (SE 0)" in steady.note and "no spread (SE 0)" in steady.describe()
    same = stats.paired_comparison([1, 0, 1], [1, 0, 1])
    assert same.se == 0 and same.t is None and same.p == 1 and same.discordant == 0 and same.sign_p == 1
    flat = stats.welch_comparison([1, 1], [0, 0])
    assert flat.se == 0 and flat.df == 2 and flat.t == float("inf")


def test_under_two_values_a_side_there_is_no_test_and_no_interval():
    for test in (stats.paired_comparison([1.0], [0.0]), stats.welch_comparison([0.5], [0.2, 0.4])):
        assert not test.tested and test.se is None and test.df is None and test.t is None and test.p is None
        assert test.low is None and test.high is None and test.detectable is None and not test.significant
        assert "no test" in test.describe()
    assert stats.paired_comparison([1.0, float("nan")], [0.0, 1.0]).n == 1  # a pair with a NaN is left out
    with pytest.raises(ValueError, match="same length; got 2 and 3"):
        stats.paired_comparison([1, 0], [1, 0, 1])


def test_a_comparisons_fields_hold_every_number_a_table_needs():
    row = dataclasses.asdict(stats.paired_comparison(DRUG_1, DRUG_2))
    assert {"difference", "se", "t", "df", "p", "low", "high", "detectable", "n", "a_only", "b_only", "sign_p",
            "smallest_sign_p"} <= set(row)
