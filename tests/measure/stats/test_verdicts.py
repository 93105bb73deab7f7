"""stats/verdicts.py's tests behind the claims' verdicts, each against a case with a known answer:
Holm and Benjamini-Hochberg (textbook examples, scipy), the Wilcoxon test (scipy), the bootstrap's p-values (its own interval, a z test), alpha
spending (published boundaries, a simulation of the type I error) and the power planner."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from loosespec_bench.measure.stats.intervals import mean_stat
from loosespec_bench.measure.stats.exact import mcnemar_one_sided
from loosespec_bench.measure.stats.verdicts import (
    BootstrapTest, adjust_pvalues, alpha_spent, holm, n_for_power, n_for_power_mcnemar, paired_t_one_sided, sequential_boundaries, two_sided, wilcoxon_one_sided,
)


def test_holm_on_a_textbook_example():
    # Four tests at alpha 0.05: sorted 0.005, 0.01, 0.03, 0.04 are multiplied by 4, 3, 2, 1 and
    # made monotone: 0.02, 0.03, 0.06, 0.06 (0.04 x 1 is lifted to 0.06). Two are rejected.
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert sum(p < 0.05 for p in holm([0.01, 0.04, 0.03, 0.005])) == 2
    assert holm([0.5]) == [0.5] and holm([0.6, 0.7]) == [1.0, 1.0]  # capped at 1


def test_holm_rejects_what_the_step_down_procedure_rejects():
    rng = np.random.default_rng(1)
    for _ in range(200):
        p = rng.uniform(0, 0.1, size=int(rng.integers(1, 9)))
        m, order = len(p), np.argsort(p)
        rejected = set()
        for rank, i in enumerate(order):  # Holm (1979): stop at the first p_(k) > alpha / (m - k)
            if p[i] > 0.05 / (m - rank):
                break
            rejected.add(int(i))
        assert {i for i, q in enumerate(holm(p)) if q <= 0.05} == rejected


def test_benjamini_hochberg_on_the_papers_example_and_scipy():
    # Benjamini & Hochberg (1995), section 4: 15 p-values, q = 0.05: the four smallest are rejected.
    p = [0.0001, 0.0004, 0.0019, 0.0095, 0.0201, 0.0278, 0.0298, 0.0344, 0.0459, 0.3240, 0.4262, 0.5719, 0.6528, 0.7590, 1.0]
    adj = adjust_pvalues(p, "bh")
    assert [q <= 0.05 for q in adj] == [True] * 4 + [False] * 11
    assert adj == pytest.approx(stats.false_discovery_control(p, method="bh"))
    assert adjust_pvalues(p, "none") == p
    with pytest.raises(ValueError, match="holm, bh, none"):
        adjust_pvalues(p, "bonferonni")  # type: ignore[arg-type]


def test_wilcoxon_matches_scipy_and_says_nothing_without_a_difference():
    d = [0.5, -0.1, 0.3, 0.0, 0.2, 0.4, -0.2, 0.6, 0.1, 0.3]
    up, down = wilcoxon_one_sided(d)
    assert up == pytest.approx(stats.wilcoxon(d, zero_method="pratt", alternative="greater").pvalue)
    assert down == pytest.approx(stats.wilcoxon(d, zero_method="pratt", alternative="less").pvalue)
    assert wilcoxon_one_sided([0.0] * 10) == (1.0, 1.0)


def test_paired_t_matches_scipy_and_is_the_retention_margin_test():
    d = [0.5, -0.1, 0.3, 0.0, 0.2, 0.4, -0.2, 0.6, 0.1, 0.3]
    up, down = paired_t_one_sided(d)
    assert up == pytest.approx(stats.ttest_1samp(d, 0.0, alternative="greater").pvalue)
    assert up + down == pytest.approx(1.0)
    assert paired_t_one_sided([0.01] * 5) == (1.0, 1.0)  # no spread: no t
    # Retention above 0.99 <=> mean(score - 0.99 x target's) > 0: the t test's mean is the estimand.
    m, t = np.array([0.9, 1.0, 0.8, 1.0]), np.array([1.0, 1.0, 0.9, 1.0])
    assert (m.mean() / t.mean() > 0.99) == ((m - 0.99 * t).mean() > 0)


def test_bootstrap_p_values_agree_with_the_interval_and_a_z_test():
    rng = np.random.default_rng(3)
    x = rng.normal(0.25, 1.0, size=200)
    bt = BootstrapTest([x], mean_stat, n_boot=4000, seed=0)
    point, low, high = bt.interval
    assert two_sided(bt.p_above(low - 0.01)) < 0.05 < two_sided(bt.p_above(low + 0.01))
    assert two_sided(bt.p_below(high + 0.01)) < 0.05 < two_sided(bt.p_below(high - 0.01))
    z = point / (x.std(ddof=1) / np.sqrt(len(x)))
    assert bt.p_above(0.0) == pytest.approx(stats.norm.sf(z), abs=0.01)
    assert BootstrapTest([[1.0]], mean_stat).p_above(0.0) is None  # one sample: no test


def test_alpha_spending_matches_published_boundaries():
    # Lan-DeMets spending, two-sided alpha 0.05, two equally spaced looks: Pocock-type z 2.157,
    # 2.201 (Lan & DeMets 1983; Jennison & Turnbull ch. 7).
    z = [float(stats.norm.isf(p / 2)) for p in sequential_boundaries([15, 30], 0.05, "pocock")]
    assert z == pytest.approx([2.157, 2.201], abs=2e-3)
    # O'Brien-Fleming-type: the first look spends 2 - 2 Phi(z_0.025 / sqrt(1/2)), so its z is
    # 1.96 x sqrt 2 = 2.772; the second makes the total exactly 0.05 (bivariate normal, corr sqrt(1/2)).
    z1, z2 = [float(stats.norm.isf(p / 2)) for p in sequential_boundaries([15, 30], 0.05, "obrien_fleming")]
    assert z1 == pytest.approx(1.959964 * np.sqrt(2), abs=1e-6)
    mvn = stats.multivariate_normal([0, 0], [[1, np.sqrt(0.5)], [np.sqrt(0.5), 1]])
    assert 1 - mvn.cdf([z1, z2], lower_limit=[-z1, -z2]) == pytest.approx(0.05, abs=2e-4)
    assert sequential_boundaries([30], 0.05, "pocock") == pytest.approx([0.05])  # one look: alpha
    assert alpha_spent(1.0, 0.05, "obrien_fleming") == pytest.approx(0.05)
    with pytest.raises(ValueError):
        sequential_boundaries([20, 10], 0.05, "pocock")


def test_planned_looks_keep_the_type_one_error():
    """Under the null, three looks at 10, 20, 30 at the spending boundaries reject ~5% of the time
    (two looks each at 5% would reject ~8%)."""
    rng = np.random.default_rng(0)
    looks = [10, 20, 30]
    nominal = sequential_boundaries(looks, 0.05, "obrien_fleming")
    x = rng.normal(size=(20_000, 30))
    sums = np.cumsum(x, axis=1)
    reject = np.zeros(len(x), dtype=bool)
    naive = np.zeros(len(x), dtype=bool)
    for n, level in zip(looks, nominal):
        p = 2 * stats.norm.sf(np.abs(sums[:, n - 1]) / np.sqrt(n))
        reject |= p < level
        naive |= p < 0.05
    assert reject.mean() == pytest.approx(0.05, abs=0.006)
    assert naive.mean() > 0.075


def test_power_planner_is_the_80_percent_n():
    # point 0.25, lower bound -0.25 at n = 30: se 0.5 / 1.96; 80% power needs
    # |effect| = (1.96 + 0.84) se, i.e. 30 x (2.80 x 0.255 / 0.25)^2 = 245 (the 50% n was 120).
    assert n_for_power(0.25, -0.25, 0.75, 30) == pytest.approx(120 * ((1.959964 + 0.841621) / 1.959964) ** 2)
    assert n_for_power(0.25, -0.25, 0.75, 30, power=0.5) == pytest.approx(120)
    assert n_for_power(0.0, -0.5, 0.5, 30) == float("inf")  # no effect: no n
    assert n_for_power(None, None, None, 30) is None and n_for_power(1.0, 0.5, 1.5, 1) is None


def test_power_planner_by_simulation():
    """At the n it names, a z test of a normal mean with the observed effect and spread decides
    in about 80% of runs."""
    rng = np.random.default_rng(5)
    effect, sd, n0 = 0.3, 1.0, 20
    se0 = sd / np.sqrt(n0)
    n = int(np.ceil(n_for_power(effect, effect - 1.959964 * se0, effect + 1.959964 * se0, n0)))
    means = rng.normal(effect, sd / np.sqrt(n), size=20_000)
    assert np.mean(means / (sd / np.sqrt(n)) > 1.959964) == pytest.approx(0.80, abs=0.01)


def _exact_mcnemar_power(n: int, p_lost: float, p_gained: float, alpha: float = 0.05) -> float:
    """The exact power of the two-sided exact McNemar test at n pairs: the discordant count
    m ~ Binomial(n, p_lost + p_gained), the gained share of them ~ Binomial(m, p_gained / d),
    rejection where min(1, 2 min(P(G <= g), P(G >= g))) < alpha under G ~ Binomial(m, 1/2)
    (what mcnemar_one_sided computes, summed over every outcome)."""
    d = p_lost + p_gained
    total = 0.0
    for m in range(1, n + 1):
        g = np.arange(m + 1)
        p_two = np.minimum(1.0, 2 * np.minimum(stats.binom.cdf(g, m, 0.5), stats.binom.sf(g - 1, m, 0.5)))
        total += stats.binom.pmf(m, n, d) * stats.binom.pmf(g, m, p_gained / d)[p_two < alpha].sum()
    return float(total)


def test_mcnemar_sample_size_is_connors_formula():
    # Connor (1987): d = 0.25 discordant, effect 0.10 (p01 0.175, p10 0.075):
    # (1.959964 x 0.5 + 0.841621 x sqrt(0.25 - 0.01))^2 / 0.01 = (0.979982 + 0.412310)^2 / 0.01 = 193.85.
    assert n_for_power_mcnemar(0.25, 0.10) == pytest.approx(193.85, abs=0.01)
    assert n_for_power_mcnemar(0.25, -0.10) == n_for_power_mcnemar(0.25, 0.10)  # two-sided: the sign does not matter
    # power 0.5: z_b = 0, the n at which the expected statistic sits on the boundary.
    assert n_for_power_mcnemar(0.25, 0.10, power=0.5) == pytest.approx((1.959964 * 0.5 / 0.1) ** 2, rel=1e-6)
    assert n_for_power_mcnemar(0.25, 0.0) == float("inf")  # no effect: no n decides
    assert n_for_power_mcnemar(0.0, 0.0) is None and n_for_power_mcnemar(0.1, 0.2) is None  # |e| > d is impossible


@pytest.mark.parametrize("p_lost, p_gained", [(0.075, 0.175), (0.02, 0.08)])
def test_mcnemar_sample_size_gives_its_power_exactly(p_lost, p_gained):
    """The exact test's power at Connor's n, summed over every outcome: about 80% (the exact
    test is a little conservative and the formula a normal approximation), and clearly less at
    two thirds of that n."""
    n = int(np.ceil(n_for_power_mcnemar(p_lost + p_gained, p_gained - p_lost)))
    assert _exact_mcnemar_power(n, p_lost, p_gained) == pytest.approx(0.80, abs=0.04)
    assert _exact_mcnemar_power(int(n * 2 / 3), p_lost, p_gained) < 0.72
    # The enumeration's rejection rule is mcnemar_one_sided's two-sided p.
    for lost, gained in ((3, 12), (5, 6), (0, 7)):
        p_two = min(1.0, 2 * min(stats.binom.cdf(gained, lost + gained, 0.5), stats.binom.sf(gained - 1, lost + gained, 0.5)))
        assert p_two == pytest.approx(two_sided(min(mcnemar_one_sided(lost, gained))))
