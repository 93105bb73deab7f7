"""Uncertainty of accuracy retention: a paired bootstrap over samples.

retention = mean(method quality) / mean(target-alone quality), on the same samples (quality is
each sample's score field: 0/1 correctness, or e.g. a judge rating). The interval resamples
*samples* with replacement, keeping each sample's (method, baseline) pair together, so that the
strong correlation between the two (the same problem is easy or hard for both) narrows the
interval as it should. scipy.stats.bootstrap does the resampling: BCa by default (corrects the
bias and skew of a ratio's bootstrap distribution), the plain percentile interval as an option.
Seeded: the same records give the same interval.
"""

from __future__ import annotations

import warnings
from typing import Any, Literal, Sequence

import numpy as np
from scipy import stats

N_BOOT = 10_000
LEVEL = 0.95
CiMethod = Literal["BCa", "percentile"]
CI_METHOD: CiMethod = "BCa"
BATCH = 1000  # resamples evaluated at once: memory stays ~BATCH x samples floats for large sets


def method_text(ci_method: CiMethod = CI_METHOD) -> str:
    return f"paired bootstrap over samples (scipy.stats.bootstrap, resampled with replacement, pairs kept), {ci_method} interval"


METHOD = method_text()


def _ratio_of_sums(m: np.ndarray, b: np.ndarray, axis: int = -1) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.sum(m, axis=axis) / np.sum(b, axis=axis)


def paired_bootstrap_ratio(
    method: Sequence[float],
    baseline: Sequence[float],
    *,
    n_boot: int = N_BOOT,
    level: float = LEVEL,
    seed: int = 0,
    ci_method: CiMethod = CI_METHOD,
) -> tuple[float | None, float | None, float | None]:
    """(point, low, high) of mean(method) / mean(baseline); None where the baseline mean is 0.

    A bootstrap distribution without spread (e.g. the same scores on both sides, or a single
    sample) gives the point as both bounds. When some resample has no baseline quality at all
    (tiny sets), the ratio is undefined there and so is the interval: (point, None, None).
    """
    m = np.asarray(method, dtype=float)
    b = np.asarray(baseline, dtype=float)
    if m.shape != b.shape or m.ndim != 1:
        raise ValueError(f"method and baseline must be paired 1-d sequences, got {m.shape} and {b.shape}")
    if ci_method not in ("BCa", "percentile"):
        raise ValueError(f"ci_method={ci_method!r} must be 'BCa' or 'percentile'")
    if len(m) == 0 or b.sum() == 0:
        return None, None, None
    point = float(m.sum() / b.sum())
    if len(m) == 1:
        return point, point, point
    with warnings.catch_warnings():
        # Degenerate distributions (no spread) warn and give NaN bounds: handled below.
        warnings.simplefilter("ignore", stats.DegenerateDataWarning)
        warnings.simplefilter("ignore", RuntimeWarning)
        res = stats.bootstrap(
            (m, b), _ratio_of_sums, paired=True, vectorized=True, n_resamples=n_boot, batch=BATCH,
            confidence_level=level, method=ci_method, rng=np.random.default_rng(seed),
        )
    dist = res.bootstrap_distribution
    if not np.all(np.isfinite(dist)):
        return point, None, None
    if np.ptp(dist) == 0:
        return point, point, point
    low, high = float(res.confidence_interval.low), float(res.confidence_interval.high)
    if not (np.isfinite(low) and np.isfinite(high)):
        return point, None, None
    return point, low, high


def _value(score: dict[str, Any], key: str) -> float | None:
    v = score.get(key)
    if v is None or isinstance(v, str):
        return None
    return float(v)  # bool -> 0/1


def retention_summary(
    records: list[dict[str, Any]], key: str | None, *, seed: int = 0, n_boot: int = N_BOOT, ci_method: CiMethod = CI_METHOD
) -> dict[str, Any]:
    """Summary fields for retention and its interval, from the run's per-sample records.

    Uses the samples that have a baseline and a quality value on both sides; {} when the task
    has no quality field (speed-only data sets) or the run has no paired baseline.
    """
    if key is None:
        return {}
    pairs = []
    for r in records:
        base = r.get("baseline")
        if not base:
            continue
        mv, bv = _value(r.get("score", {}), key), _value(base.get("score", {}), key)
        if mv is not None and bv is not None:
            pairs.append((mv, bv))
    if not pairs:
        return {}
    point, low, high = paired_bootstrap_ratio(
        [p[0] for p in pairs], [p[1] for p in pairs], n_boot=n_boot, seed=seed, ci_method=ci_method
    )
    return {
        "retention_key": key,
        "retention_n": len(pairs),
        "retention_paired": point,
        "retention_ci_low": low,
        "retention_ci_high": high,
        # The method measurably lost (or gained) quality: 1 lies outside the interval.
        "retention_ci_excludes_1": None if low is None else bool(high < 1.0 or low > 1.0),
        "retention_ci_level": LEVEL,
        "retention_ci_method": method_text(ci_method),
        "retention_ci_n_boot": n_boot,
        "retention_ci_seed": seed,
    }
