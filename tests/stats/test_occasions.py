"""stats/occasions.py: ICC(2,1) against Shrout and Fleiss's worked example, the additive occasion
effects against scipy's ANOVA, and the two-way occasion bootstrap."""

from __future__ import annotations

import numpy as np
import pytest

from loosespec_bench.stats.occasions import icc_agreement, occasion_bootstrap, occasion_effects


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
