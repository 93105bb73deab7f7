"""stats/exact.py's procedures, each against a case with a known answer: the exact McNemar test
(scipy.stats.binomtest), Clopper-Pearson bounds and the rule of three, the exact paired binary
interval of a difference and of retention (hand cases, a coverage simulation at n = 30) and the
exact sign test over counts."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from loosespec_bench.measure.stats.exact import ExactPairedBinary, cp_lower, cp_upper, count_sign_test, mcnemar_one_sided, sign_test_p
from loosespec_bench.measure.stats.verdicts import two_sided


def test_exact_mcnemar_is_the_binomial_test_on_the_discordant_split():
    up, down = mcnemar_one_sided(lost=4, gained=0)
    assert down == pytest.approx(0.0625) and up == 1.0  # 4 against 0: 1/16 one-sided
    assert two_sided(down) == pytest.approx(sign_test_p(4, 0)) == pytest.approx(0.125)
    up, down = mcnemar_one_sided(lost=1, gained=5)  # HumanEval FLy: 1 lost, 5 gained
    assert up == pytest.approx(stats.binomtest(5, 6, 0.5, alternative="greater").pvalue)
    assert two_sided(up) == pytest.approx(stats.binomtest(5, 6, 0.5).pvalue) == pytest.approx(0.21875)
    assert mcnemar_one_sided(0, 0) == (1.0, 1.0)  # zero discordant pairs: no evidence either way


def test_the_difference_interval_is_not_conditional_on_the_discordant_count():
    """Named case (GSM8K, theta 0.2 -> 0.8): A right on 13 of 30, B loses 4 and gains none. The
    difference is -4/30; its exact lower bound takes p_lost's one-sided Clopper-Pearson upper
    bound at 1.25% (4 of 13), so it lies well below the estimate (an interval conditional on the
    4 discordant pairs would stop at -4/30 itself), and the upper bound allows a few gains."""
    ex = ExactPairedBinary(lost=4, gained=0, right=13, wrong=17)
    point, low, high = ex.interval("difference")
    assert point == pytest.approx(-4 / 30)
    assert low == pytest.approx(-(13 / 30) * stats.beta.ppf(1 - 0.0125, 5, 9))
    assert high == pytest.approx((17 / 30) * stats.beta.ppf(1 - 0.0125, 1, 17) - (13 / 30) * stats.beta.ppf(0.0125, 4, 10))
    assert low < point - 0.1 and high > 0
    # Zero discordant pairs still have an interval (the rule of three's exact form on each side).
    _, low0, high0 = ExactPairedBinary(0, 0, 13, 17).interval("difference")
    assert low0 < 0 < high0


def test_clopper_pearson_bounds_and_the_rule_of_three():
    ci = stats.binomtest(3, 20).proportion_ci(confidence_level=0.95, method="exact")
    assert cp_lower(3, 20, 0.025) == pytest.approx(ci.low) and cp_upper(3, 20, 0.025) == pytest.approx(ci.high)
    # No event in n: the exact one-sided 95% bound 1 - 0.05^(1/n), of which 3/n is the approximation.
    for n in (30, 300):
        assert cp_upper(0, n, 0.05) == pytest.approx(1 - 0.05 ** (1 / n))
        assert cp_upper(0, n, 0.05) == pytest.approx(3 / n, rel=0.06)


def test_exact_retention_point_and_the_zero_discordant_case():
    ex = ExactPairedBinary(lost=1, gained=5, right=15, wrong=15)  # HumanEval FLy
    assert ex.point("retention") == pytest.approx(19 / 15)
    assert ex.point("difference") == pytest.approx(4 / 30)
    point, low, high = ex.interval("retention")
    assert low < 0.99 < point < high  # 1 lost, 5 gained does not show >= 99%
    # No answer changed in 30 (13 right): not a point, an exact interval; its lower bound is the
    # loss rate's exact upper bound at alpha / 4 (the two rates share the one-sided 2.5%).
    z = ExactPairedBinary(lost=0, gained=0, right=13, wrong=17)
    _, low, high = z.interval("retention")
    assert low == pytest.approx(1 - (1 - 0.0125 ** (1 / 13)))
    assert high == pytest.approx(1 + (1 - 0.0125 ** (1 / 17)) * 17 / 13)
    with pytest.raises(ValueError):
        ExactPairedBinary(lost=3, gained=0, right=2, wrong=5)


def test_exact_retention_p_inverts_its_bound():
    ex = ExactPairedBinary(lost=0, gained=2, right=60, wrong=40)
    low = ex.lower("retention", 0.025)
    assert two_sided(ex.p_above("retention", low - 1e-9)) == pytest.approx(0.05, abs=1e-6)
    assert two_sided(ex.p_above("retention", low + 1e-3)) > 0.05 > two_sided(ex.p_above("retention", low - 1e-3))
    assert ex.p_above("retention", 5.0) == 1.0


@pytest.mark.parametrize("p_lost, p_gained, right", [(0.10, 0.20, 15), (0.02, 0.0, 13), (0.0, 0.05, 20), (0.3, 0.1, 10)])
def test_exact_retention_interval_covers_at_n_30(p_lost, p_gained, right):
    """Coverage at n = 30: the target's answers fixed (right of 30), losses and gains drawn with
    known rates; the 95% interval must hold the true retention at least 95% of the time (up to
    the simulation's error: 2,000 draws, sd 0.5%)."""
    n = 30
    truth = 1 - p_lost + p_gained * (n - right) / right
    rng = np.random.default_rng(7)
    lost = rng.binomial(right, p_lost, size=2000)
    gained = rng.binomial(n - right, p_gained, size=2000)
    hits = 0
    for b, c in zip(lost, gained):
        _, low, high = ExactPairedBinary(int(b), int(c), right, n - right).interval("retention")
        hits += low <= truth <= high
    assert hits / 2000 >= 0.94


def test_count_sign_test_is_exact():
    t = count_sign_test([1, 1, 1, 1, 1, 2], [2, 2, 2, 2, 2, 2])
    assert (t["fewer"], t["more"], t["ties"]) == (5, 0, 1)
    assert t["p"] == pytest.approx(2 * 0.5 ** 5)
    with pytest.raises(ValueError):
        count_sign_test([1], [1, 2])
