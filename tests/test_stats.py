"""The retention interval: a paired bootstrap through scipy.stats.bootstrap (BCa or percentile)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from loosespec_bench.stats import paired_bootstrap_ratio, retention_summary


def _sample(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Paired 0/1 scores whose true ratio of means is 0.9: the target alone is right with
    probability 0.6, the method keeps 90% of those answers and finds no new ones."""
    rng = np.random.default_rng(seed)
    base = (rng.random(n) < 0.6).astype(float)
    method = base * (rng.random(n) < 0.9)
    return method, base


@pytest.mark.parametrize("ci_method", ["BCa", "percentile"])
def test_interval_covers_the_true_ratio(ci_method):
    hits = 0
    for seed in range(40):
        m, b = _sample(300, seed)
        point, low, high = paired_bootstrap_ratio(m, b, n_boot=2000, seed=seed, ci_method=ci_method)
        assert low < point < high
        hits += low <= 0.9 <= high
    assert hits >= 35  # nominal 95% (measured over 100 seeds: BCa 95, percentile 93); seeded, so exact


def test_bca_and_percentile_are_both_available_and_differ_on_a_skewed_ratio():
    m, b = _sample(60, 3)
    bca = paired_bootstrap_ratio(m, b, seed=1)  # BCa by default
    pct = paired_bootstrap_ratio(m, b, seed=1, ci_method="percentile")
    assert bca[0] == pct[0] and bca[1:] != pct[1:]
    assert paired_bootstrap_ratio(m, b, seed=1) == bca  # seeded
    with pytest.raises(ValueError, match="ci_method"):
        paired_bootstrap_ratio(m, b, ci_method="basic")  # type: ignore[arg-type]
    records = [{"score": {"correct": x}, "baseline": {"score": {"correct": y}}} for x, y in zip(m, b)]
    out = retention_summary(records, "correct", seed=1, ci_method="percentile")
    assert out["retention_ci_low"] == pytest.approx(pct[1]) and "percentile interval" in out["retention_ci_method"]
    assert "BCa interval" in retention_summary(records, "correct")["retention_ci_method"]


@pytest.mark.parametrize("ci_method", ["BCa", "percentile"])
def test_degenerate_inputs_give_sane_results_without_warnings(ci_method):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert paired_bootstrap_ratio([1.0] * 20, [1.0] * 20, ci_method=ci_method) == (1.0, 1.0, 1.0)
        assert paired_bootstrap_ratio([0.0] * 20, [1.0] * 20, ci_method=ci_method) == (0.0, 0.0, 0.0)
        same = [1, 0, 1, 1, 0] * 4
        assert paired_bootstrap_ratio(same, same, ci_method=ci_method) == (1.0, 1.0, 1.0)
        assert paired_bootstrap_ratio([0.5], [1.0], ci_method=ci_method) == (0.5, 0.5, 0.5)  # one sample
        assert paired_bootstrap_ratio([1, 1], [0, 0], ci_method=ci_method) == (None, None, None)
        assert paired_bootstrap_ratio([], [], ci_method=ci_method) == (None, None, None)
        # Three samples, one right answer of the target alone: many resamples have none, so the
        # ratio (and the interval) is undefined there: no bounds rather than a made-up one.
        assert paired_bootstrap_ratio([1, 0, 0], [1, 0, 0], ci_method=ci_method) == (1.0, None, None)
    with pytest.raises(ValueError, match="paired 1-d"):
        paired_bootstrap_ratio([1, 0], [1, 0, 1])
