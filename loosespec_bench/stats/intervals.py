"""Uncertainty of every reported figure: a paired bootstrap over samples.

The figures (definitions in metrics.py and docs/algorithms.md section 7): speedup (ratio of
total throughputs, and the median of per-sample ratios), tau (pooled over the run's steps),
each side's quality, the paired quality difference and retention. Each is a function of
per-sample columns; the bootstrap resamples samples (whole rows: a sample's method and
target-alone values stay together) and recomputes the figure, so a ratio of sums is
resampled as a ratio of sums, never as a mean of ratios.

Retention in detail:

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
from typing import Any, Callable, Literal, Mapping, Sequence

import numpy as np
from scipy import stats

from .exact import LEVEL, sign_test_p

N_BOOT = 10_000
CiMethod = Literal["BCa", "percentile"]
CI_METHOD: CiMethod = "BCa"
BATCH = 1000  # resamples evaluated at once: memory stays ~BATCH x samples floats for large sets
# A ratio is undefined on the rare resample that draws no baseline quality at all (e.g. 7 correct
# of 30: (23/30)^30, 4 in 10,000). Up to this fraction of such resamples, the interval is the
# percentile interval of the defined ones (conditional on the figure existing, as its point
# estimate is); beyond it, the run is too small for an interval and gets none.
MAX_UNDEFINED = 0.01


def position_counts(records: list[dict[str, Any]]) -> tuple[list[int], list[int]]:
    """(offered, taken): per draft position i, the steps that drafted it and those that
    accepted it, summed over the records' steps."""
    offered: list[int] = []
    taken: list[int] = []
    for r in records:
        m = r["metrics"]
        for k, n in zip(m.get("drafted", []), m.get("accepted", [])):
            while len(offered) < k:
                offered.append(0)
                taken.append(0)
            for i in range(k):
                offered[i] += 1
                taken[i] += i < n
    return offered, taken


def method_text(ci_method: CiMethod = CI_METHOD) -> str:
    return f"paired bootstrap over samples (scipy.stats.bootstrap, resampled with replacement, pairs kept), {ci_method} interval"


METHOD = method_text()


def paired_bootstrap(
    columns: Sequence[Sequence[float]],
    statistic: Callable[..., np.ndarray],
    *,
    n_boot: int = N_BOOT,
    level: float = LEVEL,
    seed: int = 0,
    ci_method: CiMethod = CI_METHOD,
    info: dict[str, Any] | None = None,
) -> tuple[float | None, float | None, float | None]:
    """(point, low, high) of statistic(*columns) over paired per-sample columns.

    statistic(*cols, axis=-1) must be vectorized (numpy over the last axis). None for the
    point when it is not finite (e.g. a ratio over zero); (point, None, None) when more than
    MAX_UNDEFINED of the resamples are undefined or the interval cannot be computed; (point,
    point, point) when the bootstrap distribution has no spread (one sample, or identical
    values). With a few undefined resamples the interval is the percentile interval of the
    defined ones; `info`, when given, receives "undefined_resamples" (their count) and
    "ci_method_used" ("BCa", "percentile" or "percentile of the defined resamples")."""
    cols = [np.asarray(c, dtype=float) for c in columns]
    if not cols or any(c.ndim != 1 or c.shape != cols[0].shape for c in cols):
        raise ValueError(f"columns must be paired 1-d sequences, got {[c.shape for c in cols]}")
    if ci_method not in ("BCa", "percentile"):
        raise ValueError(f"ci_method={ci_method!r} must be 'BCa' or 'percentile'")
    if len(cols[0]) == 0:
        return None, None, None
    with np.errstate(divide="ignore", invalid="ignore"):
        point = float(statistic(*cols, axis=-1))
    if not np.isfinite(point):
        return None, None, None
    if len(cols[0]) == 1:
        return point, point, point
    with warnings.catch_warnings():
        # Degenerate distributions (no spread) warn and give NaN bounds: handled below.
        warnings.simplefilter("ignore", stats.DegenerateDataWarning)
        warnings.simplefilter("ignore", RuntimeWarning)
        with np.errstate(divide="ignore", invalid="ignore"):
            res = stats.bootstrap(
                tuple(cols), statistic, paired=True, vectorized=True, n_resamples=n_boot, batch=BATCH,
                confidence_level=level, method=ci_method, rng=np.random.default_rng(seed),
            )
    dist = res.bootstrap_distribution
    finite = np.isfinite(dist)
    if info is not None:
        info.update(undefined_resamples=int((~finite).sum()), ci_method_used=ci_method)
    if not finite.all():
        if (~finite).mean() > MAX_UNDEFINED:
            return point, None, None
        defined = dist[finite]
        alpha = (1 - level) / 2
        if info is not None:
            info["ci_method_used"] = "percentile of the defined resamples"
        return point, float(np.quantile(defined, alpha)), float(np.quantile(defined, 1 - alpha))
    if np.ptp(dist) == 0:
        return point, point, point
    low, high = float(res.confidence_interval.low), float(res.confidence_interval.high)
    if not (np.isfinite(low) and np.isfinite(high)):
        return point, None, None
    return point, low, high


def ratio_of_sums(m: np.ndarray, b: np.ndarray, axis: int = -1) -> np.ndarray:
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
    info: dict[str, Any] | None = None,
) -> tuple[float | None, float | None, float | None]:
    """(point, low, high) of mean(method) / mean(baseline); None where the baseline mean is 0.

    A bootstrap distribution without spread (e.g. the same scores on both sides, or a single
    sample) gives the point as both bounds. A resample with no baseline quality at all has no
    ratio: a few of them (at most MAX_UNDEFINED) leave the percentile interval of the others;
    more (tiny sets) leave no interval, (point, None, None). `info` as in paired_bootstrap.
    """
    m = np.asarray(method, dtype=float)
    b = np.asarray(baseline, dtype=float)
    if m.shape != b.shape or m.ndim != 1:
        raise ValueError(f"method and baseline must be paired 1-d sequences, got {m.shape} and {b.shape}")
    if len(m) == 0 or b.sum() == 0:
        return None, None, None
    return paired_bootstrap((m, b), ratio_of_sums, n_boot=n_boot, level=level, seed=seed, ci_method=ci_method, info=info)


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
    info: dict[str, Any] = {}
    point, low, high = paired_bootstrap_ratio(
        [p[0] for p in pairs], [p[1] for p in pairs], n_boot=n_boot, seed=seed, ci_method=ci_method, info=info
    )
    undefined = info.get("undefined_resamples", 0)
    ci_text = method_text(ci_method)
    if undefined and low is not None:
        ci_text = (
            f"{ci_text}; {undefined} of {n_boot} resamples drew no target-alone quality (no ratio):"
            " percentile interval of the others"
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
        "retention_ci_method": ci_text,
        "retention_ci_undefined_resamples": undefined,
        "retention_ci_n_boot": n_boot,
        "retention_ci_seed": seed,
    }


# -- every figure's interval ------------------------------------------------------------------
def speedup_of_sums(mt: np.ndarray, ms: np.ndarray, bt: np.ndarray, bs: np.ndarray, axis: int = -1) -> np.ndarray:
    # (method tokens / method seconds) / (baseline tokens / baseline seconds), sums over samples
    return (np.sum(mt, axis=axis) / np.sum(ms, axis=axis)) / (np.sum(bt, axis=axis) / np.sum(bs, axis=axis))


def median_stat(x: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.median(x, axis=axis)


def mean_stat(x: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.mean(x, axis=axis)


def mean_diff(m: np.ndarray, b: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.mean(m - b, axis=axis)


def _fields(name: str, ci: tuple[float | None, float | None, float | None]) -> dict[str, float | None]:
    return {f"{name}_ci_low": ci[1], f"{name}_ci_high": ci[2]}


def speed_baseline(rec: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The target-alone side a record's speed is measured against: the fresh run timed beside
    the method. Under baseline=shared a timed sample whose target alone the store already had
    keeps that fresh run in `baseline_timed` and the store's in `baseline` (quality is judged
    against the store on every sample, docs/algorithms.md 7.5; the store's metrics are another
    run's timing); elsewhere `baseline` is both. Every speed figure reads it (speed_intervals,
    metrics.paired_speedup, report.compare, the W&B sink)."""
    return rec.get("baseline_timed") or rec.get("baseline")


def speed_intervals(
    records: list[dict[str, Any]],
    timed: list[dict[str, Any]] | None = None,
    *,
    seed: int = 0,
    n_boot: int = N_BOOT,
    ci_method: CiMethod = CI_METHOD,
) -> dict[str, Any]:
    """Intervals of tau (over every record, as its point in metrics.summarize) and of speedup
    and its median of per-sample ratios (over `timed`: the paired records whose timing counts,
    see timing.py; all of `records` when not given). Keys F_ci_low / F_ci_high. Tau needs no
    clock: its interval must not shrink to a timing subset, or it would describe other samples
    than its point does."""
    kw = dict(n_boot=n_boot, seed=seed, ci_method=ci_method)
    out: dict[str, Any] = {}
    ms = [r["metrics"] for r in records]
    if ms:
        out.update(_fields("tau", paired_bootstrap(([m["new_tokens"] for m in ms], [m["steps"] for m in ms]), ratio_of_sums, **kw)))
    # The speed sides: (method metrics, the fresh target alone's metrics timed beside it).
    sides = [(r["metrics"], speed_baseline(r)["metrics"]) for r in (records if timed is None else timed) if r.get("baseline")]
    sides = [(m, b) for m, b in sides if m["total_s"] > 0 and b["total_s"] > 0]
    if sides:
        cols = (
            [m["new_tokens"] for m, _ in sides], [m["total_s"] for m, _ in sides],
            [b["new_tokens"] for _, b in sides], [b["total_s"] for _, b in sides],
        )
        out.update(_fields("speedup", paired_bootstrap(cols, speedup_of_sums, **kw)))
        ratios = [m["tokens_per_s"] / b["tokens_per_s"] for m, b in sides if b["tokens_per_s"] > 0]
        if ratios:
            out.update(_fields("speedup_median_of_samples", paired_bootstrap((ratios,), median_stat, **kw)))
    return out


def quality_intervals(
    records: list[dict[str, Any]],
    key: str | None,
    figure: str,
    *,
    seed: int = 0,
    n_boot: int = N_BOOT,
    ci_method: CiMethod = CI_METHOD,
    power_threshold: float = 0.05,
) -> dict[str, Any]:
    """Intervals of each side's quality (the mean of score[key]: `figure` for the method,
    baseline_<figure> for the target alone), of the paired difference <figure>_diff (method
    minus target alone, per sample, then the mean) and the power flag: `underpowered` when
    the difference's interval is wider than +-power_threshold (or has no bounds), i.e. the run
    cannot tell a loss of that size from none (with no discordant pair, the rule-of-three
    half-width z * sqrt(3) / n stands in for the bootstrap's zero width). {} without a
    quality key."""
    if key is None:
        return {}
    kw = dict(n_boot=n_boot, seed=seed, ci_method=ci_method)
    method = [v for v in (_value(r.get("score", {}), key) for r in records) if v is not None]
    out: dict[str, Any] = _fields(figure, paired_bootstrap((method,), mean_stat, **kw)) if method else {}
    pairs = [
        (mv, bv)
        for r in records if r.get("baseline")
        for mv, bv in [(_value(r.get("score", {}), key), _value(r["baseline"].get("score", {}), key))]
        if mv is not None and bv is not None
    ]
    if not pairs:
        return out
    m, b = [p[0] for p in pairs], [p[1] for p in pairs]
    out.update(_fields(f"baseline_{figure}", paired_bootstrap((b,), mean_stat, **kw)))
    diff = paired_bootstrap((m, b), mean_diff, **kw)
    out[f"{figure}_diff"] = diff[0]
    out.update(_fields(f"{figure}_diff", diff))
    half = None if diff[1] is None else (diff[2] - diff[1]) / 2
    # Discordant pairs (one side right, the other wrong): what the planner sizes n from.
    discordant = sum(1 for x, y in pairs if x != y)
    # No discordant pair gives a bootstrap interval of width 0 whatever n; the power check then
    # uses the rule of three (discordance below 3/n at 95%): half-width z * sqrt(3) / n.
    z = float(stats.norm.ppf(0.5 + LEVEL / 2))
    floor = z * np.sqrt(3.0) / len(pairs)
    # Which way the discordant pairs go, and the exact two-sided sign test on them (McNemar's
    # exact test for 0/1 scores): the percentile bootstrap of a difference that rests on a few
    # changed answers all one way (4 lost, 0 gained) almost never resamples none of them, so its
    # interval excludes 0 where this test (p = 0.125) does not. Tables print both.
    lost = sum(1 for x, y in pairs if x < y)
    gained = sum(1 for x, y in pairs if x > y)
    out.update(
        quality_n=len(pairs),
        quality_diff_half_width=half,
        quality_lost=lost,
        quality_gained=gained,
        quality_sign_p=sign_test_p(lost, gained),
        discordance=discordant / len(pairs),
        power_threshold=power_threshold,
        underpowered=bool(half is None or max(half, floor) > power_threshold),
    )
    return out


def acceptance_intervals(
    records: list[dict[str, Any]], *, seed: int = 0, n_boot: int = N_BOOT, ci_method: CiMethod = CI_METHOD
) -> dict[str, Any]:
    """Intervals of acceptance_by_position (metrics.py): for draft position i, the pooled rate
    sum(steps accepting position i) / sum(steps drafting it) is a ratio of sums over samples,
    resampled as one. Lists acceptance_by_position_ci_low / _ci_high, one entry per position
    (None where the interval is undefined: a late position drafted in too few samples); {}
    without drafted steps."""
    per_sample = [position_counts([r]) for r in records]
    offered = [o for o, _ in per_sample]  # [samples][positions]
    taken = [t for _, t in per_sample]
    k_max = max((len(o) for o in offered), default=0)
    if k_max == 0:
        return {}
    low: list[float | None] = []
    high: list[float | None] = []
    for i in range(k_max):
        o_i = [o[i] if i < len(o) else 0 for o in offered]
        t_i = [t[i] if i < len(t) else 0 for t in taken]
        _, lo, hi = paired_bootstrap((t_i, o_i), ratio_of_sums, n_boot=n_boot, seed=seed, ci_method=ci_method)
        low.append(lo)
        high.append(hi)
    return {"acceptance_by_position_ci_low": low, "acceptance_by_position_ci_high": high}


def ci_fields(ci_method: CiMethod = CI_METHOD, n_boot: int = N_BOOT, seed: int = 0) -> dict[str, Any]:
    """The run-level description of every *_ci_low / *_ci_high pair in the summary."""
    return {"ci_level": LEVEL, "ci_method": method_text(ci_method), "ci_n_boot": n_boot, "ci_seed": seed}


def n_for_half_width(discordance: float, half_width: float, level: float = LEVEL) -> int | None:
    """Paired samples needed for a +-half_width interval on a 0/1 accuracy difference, from the
    rate of discordant pairs d (one side right, the other wrong): the per-sample difference is
    -1, 0 or +1, its variance is at most d (exactly d - delta^2), so n = ceil((z * sqrt(d) / h)^2).
    None when d is 0 (no discordant pair observed: no estimate; run more samples)."""
    if not discordance > 0 or not half_width > 0:
        return None
    z = float(stats.norm.ppf(0.5 + level / 2))
    return int(np.ceil((z * np.sqrt(discordance) / half_width) ** 2))
