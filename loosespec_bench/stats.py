"""Uncertainty of accuracy retention: a paired bootstrap over samples.

retention = mean(method quality) / mean(target-alone quality), on the same samples (quality is
each sample's score field: 0/1 correctness, or e.g. a judge rating). The interval resamples
*samples* with replacement, keeping each sample's (method, baseline) pair together, so that the
strong correlation between the two (the same problem is easy or hard for both) narrows the
interval as it should. Percentile interval, seeded: the same records give the same interval.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

N_BOOT = 10_000
LEVEL = 0.95
METHOD = "paired bootstrap over samples (resampled with replacement, pairs kept), percentile interval"


def paired_bootstrap_ratio(
    method: Sequence[float],
    baseline: Sequence[float],
    *,
    n_boot: int = N_BOOT,
    level: float = LEVEL,
    seed: int = 0,
) -> tuple[float | None, float | None, float | None]:
    """(point, low, high) of mean(method) / mean(baseline); None where the baseline mean is 0.

    Resamples whose baseline mean is 0 have no ratio and are left out of the percentiles.
    """
    m = np.asarray(method, dtype=float)
    b = np.asarray(baseline, dtype=float)
    if m.shape != b.shape or m.ndim != 1:
        raise ValueError(f"method and baseline must be paired 1-d sequences, got {m.shape} and {b.shape}")
    if len(m) == 0 or b.sum() == 0:
        return None, None, None
    point = float(m.sum() / b.sum())
    rng = np.random.default_rng(seed)
    num, den = np.empty(n_boot), np.empty(n_boot)
    for start in range(0, n_boot, 1000):  # chunks keep memory small for large sets
        stop = min(n_boot, start + 1000)
        idx = rng.integers(0, len(m), size=(stop - start, len(m)))  # [chunk, n_samples]
        num[start:stop] = m[idx].sum(axis=1)
        den[start:stop] = b[idx].sum(axis=1)
    ok = den > 0
    if not ok.any():
        return point, None, None
    ratios = num[ok] / den[ok]
    alpha = (1.0 - level) / 2.0
    low, high = np.quantile(ratios, [alpha, 1.0 - alpha])
    return point, float(low), float(high)


def _value(score: dict[str, Any], key: str) -> float | None:
    v = score.get(key)
    if v is None or isinstance(v, str):
        return None
    return float(v)  # bool -> 0/1


def retention_summary(records: list[dict[str, Any]], key: str | None, *, seed: int = 0, n_boot: int = N_BOOT) -> dict[str, Any]:
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
    point, low, high = paired_bootstrap_ratio([p[0] for p in pairs], [p[1] for p in pairs], n_boot=n_boot, seed=seed)
    return {
        "retention_key": key,
        "retention_n": len(pairs),
        "retention_paired": point,
        "retention_ci_low": low,
        "retention_ci_high": high,
        # The method measurably lost (or gained) quality: 1 lies outside the interval.
        "retention_ci_excludes_1": None if low is None else bool(high < 1.0 or low > 1.0),
        "retention_ci_level": LEVEL,
        "retention_ci_method": METHOD,
        "retention_ci_n_boot": n_boot,
        "retention_ci_seed": seed,
    }
