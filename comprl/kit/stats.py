"""The tests behind comprl's verdicts: Welch's t for two arms' per-seed values, a paired t (with the exact sign test)
for the same episodes or seeds measured two ways, and the difference a design detects at 80% power.

Every comparison is two-sided at the 5% level (:data:`LEVEL`) on Student's t with its own degrees of freedom: at 2-8
degrees of freedom the 95% critical value is 2.3-4.3, and a rule of "beyond 2 standard errors" would call 8-18% of
null differences real. ``detectable`` is the true difference the test finds with probability :data:`POWER`:
``(t_{0.975, df} + t_{0.80, df}) x SE`` (the usual approximation of the noncentral t; about 2.8 SE at large df), not
the critical value itself, which a true difference of that size crosses only half the time (the exact noncentral-t
power of that difference is 0.77 at 2 df, 0.79 at 4 and 0.80 from 8 on).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
from scipy import stats

LEVEL = 0.05
"""The two-sided false-positive rate of every test. Source: comprl's (the usual 5%)."""

POWER = 0.80
"""The probability with which ``detectable`` differences are found. Source: comprl's (the usual 80%)."""


DIGITS = 12
"""Values are compared to this many decimals: success rates and counts carry far fewer, and float noise (0.4 - 0.3 is
0.10000000000000003) must not make a spread where every seed moved by the same amount."""


def critical_t(df: float) -> float:
    """The two-sided :data:`LEVEL` critical value of Student's t at ``df`` degrees of freedom (1.96 as df grows)."""
    return float(stats.t.ppf(1 - LEVEL / 2, df))


def detectable(se: float, df: float) -> float:
    """The true difference a two-sided :data:`LEVEL` t test with standard error ``se`` and ``df`` degrees of freedom
    finds with probability :data:`POWER`: ``(t_{1-LEVEL/2, df} + t_{POWER, df}) x se``."""
    return (critical_t(df) + float(stats.t.ppf(POWER, df))) * se


def smallest_sign_p(discordant: int) -> float:
    """The smallest two-sided p-value the exact sign test can give on ``discordant`` pairs (all of them one way):
    ``2 x 0.5^discordant``, 1 for none. Under 6 discordant pairs it is above 0.05: the test cannot reach
    significance whatever they show."""
    return min(1.0, 2 * 0.5**discordant) if discordant > 0 else 1.0


@dataclass(frozen=True)
class TComparison:
    """A difference of means, its standard error and degrees of freedom, and what Student's t makes of them.

    ``se`` is None where a side has under two values (no spread: no t, p, interval or detectable difference); 0 where
    the values show no spread at all (every seed, or pair, differs by the same amount): then no t can be formed, a
    nonzero difference reads as beyond the noise (t infinite, p = 0), the interval is the point itself and
    :attr:`note` says so.
    """

    difference: float
    se: float | None
    df: float | None
    t: float | None
    """The difference in standard errors (its t statistic)."""
    p: float | None
    """The two-sided p-value of the t test (1 where nothing differs at all)."""
    low: float | None
    high: float | None
    """The 95% t interval of the difference."""
    detectable: float | None
    """The true difference this design finds with probability :data:`POWER` (:func:`detectable`)."""

    @property
    def tested(self) -> bool:
        """Whether there is a spread to test against (at least two values a side)."""
        return self.se is not None

    @property
    def significant(self) -> bool:
        """Whether the difference is beyond the two-sided :data:`LEVEL` test."""
        return self.p is not None and self.p < LEVEL

    @property
    def note(self) -> str:
        """What limits the reading, in words ("" where nothing does)."""
        if not self.tested:
            return "under 2 values a side: no spread, no test"
        if self.se == 0:
            return "no spread (SE 0): every value differs by the same amount, no t can be formed"
        return ""

    @property
    def df_text(self) -> str:
        """The degrees of freedom in words ("-" untested)."""
        return "-" if self.df is None else f"df {self.df:.1f}"

    def describe(self) -> str:
        """The difference, its SE and t, the test's p, the 95% interval and the difference detectable at
        :data:`POWER`; or what stands in the way of a test."""
        text = f"difference {self.difference:+.3f}"
        if not self.tested or self.se == 0:
            return f"{text}; {self.note}"
        return (f"{text}, SE {self.se:.3f} ({self.t:+.2f} SE), t test p = {self.p:.3g} ({self.df_text}), 95% "
                f"interval [{self.low:+.3f}, {self.high:+.3f}], detectable at {POWER:.0%} power {self.detectable:.3f}")


@dataclass(frozen=True)
class WelchComparison(TComparison):
    """Mean of ``a`` minus mean of ``b`` over independent values (two arms' per-seed results): Welch's t, whose
    degrees of freedom (Welch-Satterthwaite) fall toward the smaller side's n - 1 where the spreads differ."""

    n_a: int
    n_b: int

    @property
    def df_text(self) -> str:
        return "-" if self.df is None else f"Welch df {self.df:.1f}"

    def describe(self) -> str:
        return f"{self.n_a} against {self.n_b} values, {super().describe()}"


@dataclass(frozen=True)
class PairedComparison(TComparison):
    """Mean of ``a - b`` over pairs (the same episodes or seeds measured two ways): the paired t on the differences
    (df = n - 1), and the exact two-sided sign test on the pairs that differ (for 0/1 outcomes, McNemar's exact
    test)."""

    n: int
    a_only: int
    """Pairs with a above b (0/1 outcomes: won by a alone)."""
    b_only: int
    """Pairs with a below b."""
    sign_p: float
    """The exact two-sided sign test's p-value on the ``a_only + b_only`` discordant pairs (1 with none)."""
    smallest_sign_p: float
    """The smallest p the sign test could give with that many discordant pairs (:func:`smallest_sign_p`)."""

    @property
    def df_text(self) -> str:
        return "-" if self.df is None else f"paired df {self.df:g}"

    @property
    def discordant(self) -> int:
        return self.a_only + self.b_only

    def describe(self) -> str:
        """:meth:`TComparison.describe` on the pairs, then the sign test and the smallest p it could reach."""
        sign = f"{self.a_only} pairs above, {self.b_only} below: exact sign test p = {self.sign_p:.3g}"
        if self.smallest_sign_p >= LEVEL:
            sign += (f" (with {self.discordant} discordant pairs the smallest p it can reach is "
                     f"{self.smallest_sign_p:.3g}: it cannot reach significance)")
        return f"{self.n} pairs, mean {super().describe()}; {sign}"


def welch_comparison(a: Sequence[float], b: Sequence[float]) -> WelchComparison:
    """Welch's comparison of ``a``'s mean with ``b``'s (NaN left out); untested (SE None) where a side has under
    two values. Where neither side spreads, the df is the pooled ``n_a + n_b - 2`` (Welch's formula is 0/0 there)."""
    x, y = _values(a), _values(b)
    difference = float(x.mean() - y.mean()) if len(x) and len(y) else math.nan
    se: float | None = None
    df: float | None = None
    if len(x) >= 2 and len(y) >= 2:
        va, vb = _variance(x) / len(x), _variance(y) / len(y)
        se = math.sqrt(va + vb)
        df = float(len(x) + len(y) - 2) if se == 0 else (va + vb) ** 2 / (va**2 / (len(x) - 1) + vb**2 / (len(y) - 1))
    return WelchComparison(**_t_test(difference, se, df), n_a=len(x), n_b=len(y))


def paired_comparison(a: Sequence[float], b: Sequence[float]) -> PairedComparison:
    """The paired comparison of ``a`` with ``b`` (same length, pair i measured both ways; a pair with a NaN is left
    out): mean of ``a - b``, its SE (sd of the differences / sqrt(n)), t on n - 1 df, and the sign test."""
    if len(a) != len(b):
        raise ValueError(f"paired values need the same length; got {len(a)} and {len(b)}")
    differences = _values(np.asarray(a, dtype=float) - np.asarray(b, dtype=float))
    n = len(differences)
    mean = float(differences.mean()) if n else math.nan
    above, below = int((differences > 0).sum()), int((differences < 0).sum())
    se = math.sqrt(_variance(differences) / n) if n >= 2 else None
    sign_p = float(stats.binomtest(above, above + below, 0.5).pvalue) if above + below else 1.0
    return PairedComparison(**_t_test(mean, se, n - 1 if n >= 2 else None), n=n, a_only=above, b_only=below,
                            sign_p=sign_p, smallest_sign_p=smallest_sign_p(above + below))


def paired_from_discordant(n: int, a_only: int, b_only: int) -> PairedComparison:
    """:func:`paired_comparison` of ``n`` pairs of 0/1 outcomes of which ``a_only`` were won by a alone and
    ``b_only`` by b alone (the concordant pairs' outcomes do not change the differences)."""
    if min(a_only, b_only) < 0 or a_only + b_only > n:
        raise ValueError(f"a_only={a_only}, b_only={b_only} of n={n}: counts >= 0 that sum to at most n")
    rest = n - a_only - b_only
    return paired_comparison([1.0] * a_only + [0.0] * (b_only + rest), [0.0] * a_only + [1.0] * b_only + [0.0] * rest)


def _t_test(difference: float, se: float | None, df: float | None) -> dict[str, float | None]:
    """The fields of :class:`TComparison` from a difference, its standard error and df (None: untested)."""
    if se is None or df is None:
        return dict(difference=difference, se=None, df=None, t=None, p=None, low=None, high=None, detectable=None)
    if se == 0:
        t = math.copysign(math.inf, difference) if difference else None
    else:
        t = difference / se
    p = 1.0 if t is None else float(2 * stats.t.sf(abs(t), df))
    half = critical_t(df) * se
    return dict(difference=difference, se=se, df=df, t=t, p=p, low=difference - half, high=difference + half,
                detectable=detectable(se, df))


def _variance(values: np.ndarray) -> float:
    """The sample variance, exactly 0 where every value is the same (the mean of equal floats is not always that
    float, and the rest would be rounding noise)."""
    return 0.0 if np.ptp(values) == 0 else float(values.var(ddof=1))


def _values(values: Sequence[float]) -> np.ndarray:
    """``values`` without NaN, rounded to :data:`DIGITS` decimals."""
    data = np.round(np.asarray(values, dtype=float), DIGITS)
    return data[~np.isnan(data)]
