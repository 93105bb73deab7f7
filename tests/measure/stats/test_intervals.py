"""stats/intervals.py: the paired bootstrap (BCa or percentile) behind tau, speed and graded quality, and
quality_interval: exact intervals for 0/1 quality (scipy's Clopper-Pearson, hand cases, n = 1, zero discordant pairs)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from loosespec_bench.measure.stats.intervals import paired_bootstrap_ratio, retention_summary


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
    # Graded scores (0 or 0.5: the same ratio of sums on every resample) take the bootstrap; 0/1
    # scores never do (test_zero_one_quality_is_exact).
    records = [{"score": {"correct": x / 2}, "baseline": {"score": {"correct": y / 2}}} for x, y in zip(m, b)]
    out = retention_summary(records, "correct", seed=1, ci_method="percentile")
    assert out["retention_ci_low"] == pytest.approx(pct[1]) and "percentile interval" in out["retention_ci_method"]
    assert "BCa interval" in retention_summary(records, "correct")["retention_ci_method"]


def test_a_few_resamples_without_baseline_quality_leave_the_percentile_interval_of_the_others():
    # Named case: 7 of 30 right alone, 4 (all among those 7) right with the method: 3 lost, none
    # gained. About (23/30)^30 = 3.5e-4 of the resamples draw none of the 7: no ratio there.
    b = [1.0] * 7 + [0.0] * 23
    m = [1.0] * 4 + [0.0] * 26
    info: dict = {}
    point, low, high = paired_bootstrap_ratio(m, b, seed=0, info=info)
    assert point == pytest.approx(4 / 7)
    assert 1 <= info["undefined_resamples"] <= 100 and info["ci_method_used"] == "percentile of the defined resamples"
    assert 0 < low < point and high == pytest.approx(1.0)  # resamples without a discordant pair give exactly 1
    # The summary takes this path for graded scores only (halved: the same ratios); 0/1 scores get
    # the exact interval, whose upper bound allows unseen gains.
    records = [{"score": {"correct": x / 2}, "baseline": {"score": {"correct": y / 2}}} for x, y in zip(m, b)]
    out = retention_summary(records, "correct", seed=0)
    assert (out["retention_ci_low"], out["retention_ci_high"]) == pytest.approx((low, high))
    assert out["retention_ci_undefined_resamples"] == info["undefined_resamples"]
    assert "percentile interval of the others" in out["retention_ci_method"]
    assert out["retention_ci_excludes_1"] is False
    exact = retention_summary([{"score": {"correct": x}, "baseline": {"score": {"correct": y}}} for x, y in zip(m, b)], "correct")
    assert exact["retention_ci_method"].startswith("exact") and exact["retention_ci_high"] > 1.0
    assert exact["retention_ci_undefined_resamples"] is None and exact["retention_ci_n_boot"] is None
    # Two samples, one right alone: half the resamples have no ratio, far beyond 1%: no interval.
    assert paired_bootstrap_ratio([1.0, 0.0], [1.0, 0.0]) == (1.0, None, None)


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


# -- every figure's interval ---------------------------------------------------------------------
from loosespec_bench.measure.stats.intervals import n_for_half_width, paired_bootstrap, quality_intervals, speed_intervals  # noqa: E402


def _rec(tokens, steps, m_s, b_tokens, b_s, correct=None, b_correct=None):
    rec = {"metrics": {"new_tokens": tokens, "steps": steps, "total_s": m_s, "tokens_per_s": tokens / m_s}}
    rec["baseline"] = {"metrics": {"new_tokens": b_tokens, "steps": b_tokens, "total_s": b_s, "tokens_per_s": b_tokens / b_s}}
    if correct is not None:
        rec["score"], rec["baseline"]["score"] = {"correct": correct}, {"correct": b_correct}
    return rec


def test_speed_intervals_resample_ratios_of_sums_and_cover_the_point():
    rng = np.random.default_rng(0)
    recs = [_rec(int(t), int(t) // 3, float(s), int(t), float(s) * 1.5) for t, s in zip(rng.integers(40, 200, 30), rng.uniform(1, 5, 30))]
    out = speed_intervals(recs, n_boot=2000)
    # every pair's ratio is 1.5 exactly: no spread, the point is both bounds
    assert out["speedup_ci_low"] == pytest.approx(1.5) and out["speedup_ci_high"] == pytest.approx(1.5)
    assert out["speedup_median_of_samples_ci_low"] == pytest.approx(1.5)
    tau = sum(r["metrics"]["new_tokens"] for r in recs) / sum(r["metrics"]["steps"] for r in recs)
    assert out["tau_ci_low"] < tau < out["tau_ci_high"]
    noisy = [_rec(100, 30, float(s), 100, float(b)) for s, b in zip(rng.uniform(1, 3, 30), rng.uniform(2, 4, 30))]
    out = speed_intervals(noisy, n_boot=2000)
    point = (3000 / sum(r["metrics"]["total_s"] for r in noisy)) / (3000 / sum(r["baseline"]["metrics"]["total_s"] for r in noisy))
    assert out["speedup_ci_low"] < point < out["speedup_ci_high"]


def test_speed_intervals_edge_cases():
    assert speed_intervals([]) == {}
    one = speed_intervals([_rec(10, 5, 1.0, 10, 2.0)])
    assert one["speedup_ci_low"] == one["speedup_ci_high"] == pytest.approx(2.0)  # n = 1: the point
    unpaired = [{"metrics": {"new_tokens": 10, "steps": 5, "total_s": 1.0}}] * 3
    assert set(speed_intervals(unpaired)) == {"tau_ci_low", "tau_ci_high"}


def test_speed_reads_the_target_alone_timed_beside_not_the_stores():
    # baseline=shared: `baseline` is the store's target alone (quality; its metrics are another
    # run's timing, here 10x slower), `baseline_timed` the fresh one timed beside the method.
    from loosespec_bench.measure.metrics import paired_speedup, sample_speedup

    recs = []
    for i in range(6):
        rec = _rec(100, 20, 1.0, 100, 50.0)  # the store's: a "50x" speedup if it were read
        rec["baseline_timed"] = {"metrics": {"new_tokens": 100, "steps": 100, "total_s": 2.0, "tokens_per_s": 50.0}}
        recs.append(rec)
    out = speed_intervals(recs, n_boot=500)
    assert out["speedup_ci_low"] == pytest.approx(2.0) and out["speedup_ci_high"] == pytest.approx(2.0)
    assert paired_speedup(recs)["speedup"] == pytest.approx(2.0) and sample_speedup(recs[0]) == pytest.approx(2.0)


def test_quality_intervals_difference_and_power_flag():
    rng = np.random.default_rng(1)
    base = rng.random(400) < 0.6
    method = np.where(rng.random(400) < 0.1, ~base, base)  # 10% discordant
    recs = [_rec(10, 5, 1.0, 10, 1.0, bool(m), bool(b)) for m, b in zip(method, base)]
    out = quality_intervals(recs, "correct", "accuracy", n_boot=2000)
    diff = method.mean() - base.mean()
    assert out["accuracy_diff"] == pytest.approx(diff)
    assert out["accuracy_diff_ci_low"] < diff < out["accuracy_diff_ci_high"]
    assert out["accuracy_ci_low"] < method.mean() < out["accuracy_ci_high"]
    assert out["baseline_accuracy_ci_low"] < base.mean() < out["baseline_accuracy_ci_high"]
    assert out["discordance"] == pytest.approx(np.mean(method != base))
    assert out["underpowered"] is False and out["quality_diff_half_width"] < 0.05  # n = 400, d = 0.1
    few = quality_intervals(recs[:3], "correct", "accuracy", power_threshold=0.05)
    assert few["underpowered"] is True
    # three identical answers: the bootstrap's width is 0, yet n = 3 decides nothing
    same = [_rec(10, 5, 1.0, 10, 1.0, True, True)] * 3
    assert quality_intervals(same, "correct", "accuracy")["underpowered"] is True
    assert quality_intervals(recs, None, "accuracy") == {}


def test_n_for_half_width():
    assert n_for_half_width(0.25, 0.05) == 385  # (1.96 * 0.5 / 0.05)^2 = 384.1
    assert n_for_half_width(0.0, 0.05) is None
    assert n_for_half_width(0.1, 0.0) is None


def test_paired_bootstrap_checks_its_columns():
    with pytest.raises(ValueError):
        paired_bootstrap(([1.0, 2.0], [1.0]), lambda a, b, axis=-1: a.sum(axis) / b.sum(axis))
    assert paired_bootstrap(([1.0, 2.0], [0.0, 0.0]), lambda a, b, axis=-1: a.sum(axis) / b.sum(axis)) == (None, None, None)


def test_sign_test_counts_and_p_beside_the_bootstrap():
    # Named case: θ = 0.8 on GSM8K, 4 answers lost and none gained: the bootstrap interval of the
    # difference excludes 0, the exact sign test does not (p = 0.125).
    from loosespec_bench.measure.stats.exact import sign_test_p

    recs = [_rec(10, 5, 1.0, 10, 1.0, i >= 4, True) for i in range(30)]  # 4 lost
    out = quality_intervals(recs, "correct", "accuracy", n_boot=2000)
    assert (out["quality_lost"], out["quality_gained"]) == (4, 0)
    assert out["quality_sign_p"] == pytest.approx(0.125)
    assert out["accuracy_diff_ci_high"] < 0  # the bootstrap's interval: too narrow here
    assert sign_test_p(0, 0) == 1.0 and sign_test_p(3, 3) == pytest.approx(1.0)
    assert sign_test_p(6, 0) == pytest.approx(2 / 64)


# ---- quality intervals: exact for 0/1 scores (quality_interval) ---------------------------------
def _pairs(lost: int, gained: int, right: int, wrong: int) -> tuple[list[float], list[float]]:
    """Paired 0/1 scores (method, target alone) with the given split."""
    m = [0.0] * lost + [1.0] * (right - lost) + [1.0] * gained + [0.0] * (wrong - gained)
    b = [1.0] * right + [0.0] * wrong
    return m, b


def test_zero_one_accuracy_is_clopper_pearson():
    from scipy import stats as st

    from loosespec_bench.measure.stats.intervals import quality_interval

    for k, n in ((9, 30), (0, 30), (30, 30), (1, 2)):
        ci = st.binomtest(k, n).proportion_ci(confidence_level=0.95, method="exact")
        point, low, high = quality_interval("mean", [1.0] * k + [0.0] * (n - k))
        assert point == pytest.approx(k / n) and (low, high) == pytest.approx((ci.low, ci.high))
    recs = [_rec(10, 5, 1.0, 10, 1.0, i < 9, i < 13) for i in range(30)]
    out = quality_intervals(recs, "correct", "accuracy")
    ci = st.binomtest(9, 30).proportion_ci(method="exact")
    assert (out["accuracy_ci_low"], out["accuracy_ci_high"]) == pytest.approx((ci.low, ci.high))
    ci = st.binomtest(13, 30).proportion_ci(method="exact")
    assert (out["baseline_accuracy_ci_low"], out["baseline_accuracy_ci_high"]) == pytest.approx((ci.low, ci.high))
    assert out["quality_ci_method"].startswith("exact")


def test_zero_one_difference_and_retention_are_the_exact_paired_interval():
    """Hand case (HumanEval FLy: the target alone right on 15 of 30, the method loses 1 of those
    and gains 5 of the other 15). Each bound takes each rate's one-sided Clopper-Pearson bound at
    1.25% (Bonferroni over the two rates at 2.5% a side), mapped through the target's accuracy:
      retention  = 1 - p_lost + p_gained x 15/15,  difference = (15 p_gained - 15 p_lost) / 30.
    The bootstrap read retention [1.000, 1.800] here (its lower bound on the atom 1.000)."""
    from scipy import stats as st

    from loosespec_bench.measure.stats.intervals import quality_interval

    m, b = _pairs(lost=1, gained=5, right=15, wrong=15)
    a = 0.0125
    gain_lo, gain_hi = st.beta.ppf(a, 5, 11), st.beta.ppf(1 - a, 6, 10)
    loss_lo, loss_hi = st.beta.ppf(a, 1, 15), st.beta.ppf(1 - a, 2, 14)
    point, low, high = quality_interval("retention", m, b)
    assert point == pytest.approx(19 / 15)
    assert low == pytest.approx(1 - loss_hi + gain_lo) and high == pytest.approx(1 - loss_lo + gain_hi)
    assert low < 0.99  # 1 lost, 5 gained does not show ">= 99% kept"
    point, low, high = quality_interval("diff", m, b)
    assert point == pytest.approx(4 / 30)
    assert low == pytest.approx((15 * gain_lo - 15 * loss_hi) / 30) and high == pytest.approx((15 * gain_hi - 15 * loss_lo) / 30)
    records = [{"score": {"correct": x}, "baseline": {"score": {"correct": y}}} for x, y in zip(m, b)]
    out = retention_summary(records, "correct")
    assert (out["retention_ci_low"], out["retention_ci_high"]) == pytest.approx(quality_interval("retention", m, b)[1:])
    recs = [_rec(10, 5, 1.0, 10, 1.0, bool(x), bool(y)) for x, y in zip(m, b)]
    q = quality_intervals(recs, "correct", "accuracy")
    assert (q["accuracy_diff_ci_low"], q["accuracy_diff_ci_high"]) == pytest.approx((low, high))


def test_zero_discordant_pairs_take_the_exact_bound_not_a_special_case():
    """No answer changed (13 right of 30): each unseen rate's bound is 1 - 0.0125^(1/k), the
    exact form of the rule of three, on both sides of the difference."""
    from loosespec_bench.measure.stats.intervals import quality_interval

    m, b = _pairs(lost=0, gained=0, right=13, wrong=17)
    point, low, high = quality_interval("diff", m, b)
    assert point == 0.0
    assert low == pytest.approx(-(13 / 30) * (1 - 0.0125 ** (1 / 13)))
    assert high == pytest.approx((17 / 30) * (1 - 0.0125 ** (1 / 17)))
    point, low, high = quality_interval("retention", m, b)
    assert (point, high) == pytest.approx((1.0, 1 + (17 / 13) * (1 - 0.0125 ** (1 / 17))))
    assert low == pytest.approx(0.0125 ** (1 / 13))
    recs = [_rec(10, 5, 1.0, 10, 1.0, bool(x), bool(y)) for x, y in zip(m, b)]
    q = quality_intervals(recs, "correct", "accuracy")
    _, d_low, d_high = quality_interval("diff", m, b)
    assert q["quality_diff_half_width"] == pytest.approx((d_high - d_low) / 2) and q["underpowered"] is True


def test_one_sample_has_no_quality_interval():
    """n <= 1: (point, None, None), which every table prints n/a; 0/1 and graded alike."""
    from loosespec_bench.measure.stats.intervals import quality_interval

    for scores in (([1.0], [1.0]), ([0.5], [0.7])):
        m, b = scores
        assert quality_interval("mean", m)[1:] == (None, None)
        assert quality_interval("diff", m, b)[1:] == (None, None)
        assert quality_interval("retention", m, b)[1:] == (None, None)
    assert quality_interval("mean", []) == (None, None, None)
    assert quality_interval("retention", [1.0, 0.0], [0.0, 0.0]) == (None, None, None)  # target alone 0: no ratio
    out = quality_intervals([_rec(10, 5, 1.0, 10, 1.0, True, False)], "correct", "accuracy")
    assert out["accuracy_ci_low"] is None and out["accuracy_diff_ci_high"] is None and out["underpowered"] is True
    with pytest.raises(ValueError):
        quality_interval("diff", [1.0, 0.0])


def test_graded_quality_keeps_the_bootstrap():
    from loosespec_bench.measure.stats.intervals import quality_interval

    rng = np.random.default_rng(3)
    b = rng.uniform(0.5, 1.0, 40)
    m = np.clip(b - rng.uniform(0, 0.1, 40), 0, 1)
    info: dict = {}
    got = quality_interval("retention", m, b, seed=2, n_boot=2000, info=info)
    assert got == paired_bootstrap_ratio(m, b, seed=2, n_boot=2000) and info["ci_method_used"] == "BCa"
    assert quality_interval("mean", m, seed=2, n_boot=2000) == paired_bootstrap((m,), lambda x, axis=-1: x.mean(axis), seed=2, n_boot=2000)
