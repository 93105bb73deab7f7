"""stats/sizing.py: the exact McNemar test's power over planned looks, the discordant problems it
needs, and the non-inferiority margin an n supports; against brute force and hand cases."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from loosespec_bench.measure.stats.exact import ExactPairedBinary
from loosespec_bench.measure.stats.sizing import discordant_for_power, margin_supported, mcnemar_power


def _brute_power(m: int, q: float, level: float) -> float:
    """Power of one look by enumerating every split: reject where the exact one-sided p <= level."""
    return sum(stats.binom.pmf(k, m, q) for k in range(m + 1)
               if stats.binomtest(k, m, 0.5, alternative="greater").pvalue <= level)


@pytest.mark.parametrize("m, level", [(10, 0.05), (58, 0.05), (59, 0.05), (72, 0.025), (1, 0.5)])
def test_one_look_power_is_the_enumerated_one(m, level):
    assert mcnemar_power(m, 2.0, [level]) == pytest.approx(_brute_power(m, 2 / 3, level), abs=1e-12)


def test_two_looks_by_hand():
    # 4 discordant problems, 2 seen at look 1 (level 1/4: both lost crosses) and 4 at look 2
    # (level 1/16: all four lost). Reaching 4 losses means both first ones were lost, which
    # crossed already: the power is P(the first two lost) = (2/3)^2.
    assert mcnemar_power(4, 2.0, [0.25, 0.0625], [0.5, 1.0]) == pytest.approx(4 / 9)
    # A look that can never cross (level 0) leaves the last look's power as it was alone.
    assert mcnemar_power(60, 2.0, [0.0, 0.05], [0.5, 1.0]) == pytest.approx(mcnemar_power(60, 2.0, [0.05]))
    # No imbalance: the plan's power is its size, at most the levels' sum.
    assert mcnemar_power(80, 1.0, [0.01, 0.04], [0.5, 1.0]) <= 0.05 + 1e-12


def test_the_saw_tooth_is_not_taken_for_enough():
    # A 2:1 split at one-sided 5%: power 0.812 at 58 discordant problems but 0.785 at 59; from 60
    # on it stays above 0.8. At one-sided 2.5%: first 72, above from 77.
    assert mcnemar_power(58, 2.0, [0.05]) > 0.8 > mcnemar_power(59, 2.0, [0.05])
    assert discordant_for_power(2.0, 0.8, [0.05]) == 60
    assert discordant_for_power(2.0, 0.8, [0.025]) == 77
    # Planned looks and a family's correction cost problems, never save them.
    # (The O'Brien-Fleming plan of 100 / 200 / 350 problems, one-sided: its last level 0.023 is
    # near 0.025 and costs nothing here; over a family of 4 tests it costs 31 problems.)
    looks = [0.000123, 0.00471, 0.02315]
    fractions = [100 / 350, 200 / 350, 1.0]
    assert discordant_for_power(2.0, 0.8, looks, fractions) == 77
    assert discordant_for_power(2.0, 0.8, [v / 4 for v in looks], fractions) == 108
    with pytest.raises(ValueError):
        mcnemar_power(10, 2.0, [0.05, 0.05], [1.0])


def test_the_margin_is_the_quantile_of_the_exact_bound():
    # Enumerate the bound of ExactPairedBinary itself: the margin is excluded with at least the
    # power, and a margin just below it is not.
    n, right, level, power = 24, 12, 0.05, 0.8
    d = 0.25  # 3 lost of 12 and 3 gained of 12 on average
    margin = margin_supported(n, d, right / n, level, power)
    p_l = p_g = d * n / 2 / right
    total = lambda m: sum(stats.binom.pmf(lo, right, p_l) * stats.binom.pmf(g, n - right, p_g)  # noqa: E731
                          for lo in range(right + 1) for g in range(n - right + 1)
                          if ExactPairedBinary(lo, g, right, n - right).lower("difference", level) >= -m - 1e-12)
    assert total(margin) >= power and total(margin - 1e-3) < power
    # No change at all: the bound is the zero-discordant one, whatever the power.
    zero = -ExactPairedBinary(0, 0, right, n - right).lower("difference", level)
    assert margin_supported(n, 0.0, right / n, level, 0.99) == pytest.approx(zero)
    # More problems, a smaller margin; more changes, a larger one.
    assert margin_supported(350, 0.1, 0.45, level, power) < margin_supported(100, 0.1, 0.45, level, power)
    assert margin_supported(350, 0.2, 0.45, level, power) > margin_supported(350, 0.1, 0.45, level, power)
    assert margin_supported(30, 0.1, 1.0, level, power) is None  # no wrong problem: no gain rate


def test_the_margin_agrees_with_the_normal_approximation_at_large_n():
    # The exact bound takes each rate's bound at level / 2 (Bonferroni), each side carrying half
    # the changes: bound ~ difference - z_{1 - level / 2} (sqrt(d / 2n) + sqrt(d / 2n)), whose
    # sampling spread is sqrt(d / n). Its margin at this power is then
    # (sqrt(2) z_{1 - level / 2} + z_power) sqrt(d / n), about 1.45x the margin of a one-sided
    # normal test (z_{1 - level} + z_power) sqrt(d / n): the price of an exact bound.
    n, d = 2000, 0.1
    approx = (np.sqrt(2) * stats.norm.ppf(0.975) + stats.norm.ppf(0.8)) * np.sqrt(d / n)
    normal = (stats.norm.ppf(0.95) + stats.norm.ppf(0.8)) * np.sqrt(d / n)
    exact = margin_supported(n, d, 0.5, 0.05, 0.8)
    assert exact == pytest.approx(approx, rel=0.05) and exact > normal
