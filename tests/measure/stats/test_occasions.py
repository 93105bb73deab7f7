"""stats/occasions.py: ICC(2,1) against Shrout and Fleiss's worked example, the additive occasion
effects against scipy's ANOVA, and the two-way occasion bootstrap."""

from __future__ import annotations

import numpy as np
import pytest

from loosespec_bench.measure.stats.occasions import (
    icc_agreement, occasion_bootstrap, occasion_effects, occasion_rate_ratio, percentile_p_above,
)


def test_icc_matches_shrout_and_fleiss_worked_example():
    # Shrout & Fleiss (1979), Table 2: 6 targets x 4 judges; ICC(2,1) = 0.29.
    y = np.array([[9, 2, 5, 8], [6, 1, 3, 2], [8, 4, 6, 8], [7, 1, 2, 6], [10, 5, 6, 9], [6, 2, 4, 7]], float)
    assert icc_agreement(y) == pytest.approx(0.29, abs=0.005)
    assert icc_agreement(np.ones((3, 2))) is None  # no variance at all: undefined
    assert icc_agreement(np.array([[1.0, 1.1]])) is None  # one subject


def test_icc_of_perfect_retest_is_one():
    y = np.array([[1.0, 1.0], [2.0, 2.0], [3.0, 3.0]])
    assert icc_agreement(y) == pytest.approx(1.0)


def test_occasion_effects_recover_an_additive_table():
    # y = mu + a_o + b_p exactly: the fit returns a_o, no residual, and the occasion variance
    # component (MS_occ - 0) / P = P * sum(a^2) / (O - 1) / P.
    a = np.array([0.1, -0.1])
    b = np.array([0.0, 0.2, -0.2, 0.4])
    y = 1.0 + a[:, None] + b[None, :]
    eff = occasion_effects(y)
    assert eff["mu"] == pytest.approx(1.0 + b.mean())
    assert eff["occasion_effects"] == pytest.approx(list(a))
    assert eff["residual_var"] == pytest.approx(0.0, abs=1e-15)
    assert eff["occasion_var"] == pytest.approx((a ** 2).sum() / 1)
    assert eff["occasion_f"] is None  # no residual: F undefined
    with pytest.raises(ValueError):
        occasion_effects(np.array([[1.0, np.nan]]))


def test_occasion_effects_f_test_against_scipy_anova():
    rng = np.random.default_rng(3)
    y = rng.normal(size=(3, 5)) + np.array([[0.0], [0.5], [1.0]])
    eff = occasion_effects(y)
    # Two-way ANOVA without replication by hand: the same F and p.
    n_o, n_p = y.shape
    mu = y.mean()
    ss_o = n_p * ((y.mean(axis=1) - mu) ** 2).sum()
    ss_e = ((y - y.mean(axis=1, keepdims=True) - y.mean(axis=0, keepdims=True) + mu) ** 2).sum()
    f = (ss_o / 2) / (ss_e / 8)
    from scipy import stats as st

    assert eff["occasion_f"] == pytest.approx(f)
    assert eff["occasion_p"] == pytest.approx(st.f.sf(f, 2, 8))


def test_occasion_bootstrap_pools_cells_and_skips_excluded_ones():
    tok = np.full((2, 3), 10.0)
    m_time = np.array([[1.0, 1.0, 1.0], [2.0, 2.0, np.nan]])
    b_time = np.array([[2.0, 2.0, 2.0], [4.0, 4.0, 4.0]])
    pt, lo, hi = occasion_bootstrap(tok, m_time, tok, b_time, n_boot=200)
    # Cells left: method 50 tokens in 7 s, target alone 50 tokens in 14 s: 2.0 exactly.
    assert pt == pytest.approx(2.0) and lo == pytest.approx(2.0) and hi == pytest.approx(2.0)
    assert occasion_bootstrap(tok, np.full((2, 3), np.nan), tok, b_time, n_boot=10) == (None, None, None)


def test_occasion_bootstrap_widens_with_an_occasion_effect():
    rng = np.random.default_rng(0)
    tok = np.full((2, 8), 10.0)
    b_time = rng.uniform(1, 2, (2, 8))
    steady = b_time / 1.5  # 1.5x on both occasions
    moved = b_time / np.array([[1.2], [1.8]])  # the occasion moves it
    _, lo1, hi1 = occasion_bootstrap(tok, steady, tok, b_time, n_boot=500)
    _, lo2, hi2 = occasion_bootstrap(tok, moved, tok, b_time, n_boot=500)
    assert hi1 - lo1 == pytest.approx(0.0, abs=1e-9) and hi2 - lo2 > 0.2


# ---- occasion_rate_ratio: one configuration's pooled rate over another's (or the best of several)
def _tables(secs: dict[str, np.ndarray], tokens: float = 20.0) -> tuple[dict, dict]:
    return {c: np.full_like(s, tokens) for c, s in secs.items()}, secs


def test_a_constant_ratio_is_the_point_and_every_resample():
    base = np.array([[1.0, 2.0, 3.0], [1.5, 2.5, 3.5]])
    tok, sec = _tables({"b": base / 1.5, "a": base})
    point, dist = occasion_rate_ratio(tok, sec, "b", ["a"], n_boot=300)
    assert point == pytest.approx(1.5) and dist.size == 300 and np.allclose(dist, 1.5)
    assert percentile_p_above(dist, 1.0) == pytest.approx(0.5 / 301)  # every resample above: the floor 1 / (2 (B + 1))
    assert percentile_p_above(dist, 2.0) == pytest.approx(300.5 / 301)


def test_best_of_divides_by_the_fastest_setting():
    base = np.ones((2, 4))
    tok, sec = _tables({"b": base / 1.2, "k5": base / 1.5, "k15": base})
    point, dist = occasion_rate_ratio(tok, sec, "b", ["k5", "k15"], n_boot=100)
    assert point == pytest.approx(1.2 / 1.5) and np.allclose(dist, 1.2 / 1.5)


def test_only_cells_every_side_has_are_pooled():
    # b's cell (0, 0) is left out (contaminated): a's cell there must not enter either, or the
    # pooled rates would be over different problems.
    tok = {"b": np.full((2, 2), 10.0), "a": np.full((2, 2), 10.0)}
    sec = {"b": np.array([[np.nan, 1.0], [1.0, 1.0]]), "a": np.array([[100.0, 2.0], [2.0, 2.0]])}
    point, _ = occasion_rate_ratio(tok, sec, "b", ["a"], n_boot=10)
    assert point == pytest.approx(2.0)
    none, dist = occasion_rate_ratio(tok, {"b": np.full((2, 2), np.nan), "a": sec["a"]}, "b", ["a"], n_boot=10)
    assert none is None and dist.size == 0


def test_an_occasion_effect_spreads_the_distribution_to_both_occasions():
    # B / A is 1.2 on one occasion and 1.8 on the other: resamples drawing one occasion twice
    # (half of them) sit at 1.2 or 1.8, so the interval reaches both, not just the problems' spread.
    base = np.ones((2, 20))
    tok, sec = _tables({"b": base / np.array([[1.2], [1.8]]), "a": base})
    point, dist = occasion_rate_ratio(tok, sec, "b", ["a"], n_boot=2000, seed=1)
    assert point == pytest.approx(40 / (20 / 1.2 + 20 / 1.8) / 1.0)
    assert np.quantile(dist, 0.025) == pytest.approx(1.2) and np.quantile(dist, 0.975) == pytest.approx(1.8)
    assert 0.2 < np.mean(np.isclose(dist, 1.2)) < 0.3 and 0.2 < np.mean(np.isclose(dist, 1.8)) < 0.3


def test_tables_of_other_shapes_are_refused():
    with pytest.raises(ValueError, match="one shape"):
        occasion_rate_ratio({"b": np.ones((2, 3)), "a": np.ones((2, 2))}, {"b": np.ones((2, 3)), "a": np.ones((2, 2))}, "b", ["a"])
