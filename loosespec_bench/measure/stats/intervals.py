"""Uncertainty of every reported figure: a paired bootstrap over samples for tau and speed, exact
intervals for 0/1 quality.

The figures (definitions in metrics.py and docs/algorithms.md section 7): speedup (ratio of
total throughputs, and the median of per-sample ratios), tau (pooled over the run's steps),
each side's quality, the paired quality difference and retention. Each is a function of
per-sample columns; the bootstrap resamples samples (whole rows: a sample's method and
target-alone values stay together) and recomputes the figure, so a ratio of sums is
resampled as a ratio of sums, never as a mean of ratios. scipy.stats.bootstrap does the
resampling: BCa by default (corrects the bias and skew of a ratio's bootstrap distribution),
the plain percentile interval as an option. Seeded: the same records give the same interval.

Quality (quality_interval, the one place a quality figure gets its interval): retention =
mean(method quality) / mean(target-alone quality) on the same samples, the difference the mean
of per-sample method - target alone, each side's quality its mean. 0/1 scores (accuracy,
pass@1) are never bootstrapped: a ratio or mean of 0/1 sums has atoms that a bootstrap bound
lands on (1 lost and 5 gained read retention [1.000, 1.800]). Each side's accuracy gets its
Clopper-Pearson interval, the difference and retention the exact paired interval of
exact.ExactPairedBinary (Clopper-Pearson on the lost and gained splits given the target alone's
answers, mapped through its accuracy), zero discordant pairs included. Graded scores (NIAH
recall, IFEval loose, ratings) keep the paired bootstrap. One paired problem (or none) has no
interval: (point, None, None), printed n/a.
"""

from __future__ import annotations

import warnings
from typing import Any, Callable, Literal, Mapping, Sequence

import numpy as np
from scipy import stats

from .exact import LEVEL, ExactPairedBinary, is_binary, proportion_interval, sign_test_p

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


EXACT_QUALITY_TEXT = ("exact: Clopper-Pearson for each side's 0/1 quality; the paired difference and retention "
                      "from Clopper-Pearson bounds on the lost and gained splits given the target alone's answers "
                      "(stats.exact.ExactPairedBinary)")


def quality_ci_text(exact: bool, ci_method: CiMethod = CI_METHOD) -> str:
    """What a quality interval is: EXACT_QUALITY_TEXT for 0/1 scores, the bootstrap's otherwise."""
    return EXACT_QUALITY_TEXT if exact else method_text(ci_method)


def quality_interval(
    estimand: Literal["mean", "diff", "retention"],
    method: Sequence[float],
    baseline: Sequence[float] | None = None,
    *,
    n_boot: int = N_BOOT,
    level: float = LEVEL,
    seed: int = 0,
    ci_method: CiMethod = CI_METHOD,
    info: dict[str, Any] | None = None,
) -> tuple[float | None, float | None, float | None]:
    """(point, low, high) of a quality figure over per-sample scores: "mean" of `method` (one
    side's quality), or with paired `baseline` scores (the target alone's) "diff" (mean of
    method - baseline) or "retention" (mean(method) / mean(baseline); None when the baseline's
    mean is 0). Every summary's quality interval comes from here (module doc): 0/1 scores get
    the exact interval (Clopper-Pearson; ExactPairedBinary for diff and retention), graded ones
    the paired bootstrap. At n <= 1 no interval exists: (point, None, None). `info`, when
    given, receives "ci_method_used" ("exact", or the bootstrap's as in paired_bootstrap) and,
    for the bootstrap, "undefined_resamples"."""
    m = [float(v) for v in method]
    b = None if baseline is None else [float(v) for v in baseline]
    if estimand not in ("mean", "diff", "retention"):
        raise ValueError(f"estimand {estimand!r}: use 'mean', 'diff' or 'retention'")
    if (estimand == "mean") != (b is None) or (b is not None and len(b) != len(m)):
        raise ValueError(f"{estimand}: give {'one column' if estimand == 'mean' else 'paired method and baseline columns'}")
    if not m or (estimand == "retention" and sum(b) == 0):  # type: ignore[arg-type]
        return None, None, None
    if is_binary(m) and (b is None or is_binary(b)):
        if info is not None:
            info["ci_method_used"] = "exact"
        if b is None:
            point, low, high = proportion_interval(int(sum(m)), len(m), level)
        else:
            ex = ExactPairedBinary.from_scores(m, b)
            _, low, high = ex.interval("retention" if estimand == "retention" else "difference", level)
            # The point as the bootstrap's statistic computes it (the same value as ex.point, to
            # the last bit: summaries rebuilt under either method keep their points).
            stat = ratio_of_sums if estimand == "retention" else mean_diff
            point = float(stat(np.asarray(m), np.asarray(b)))
    elif estimand == "retention":
        point, low, high = paired_bootstrap_ratio(m, b, n_boot=n_boot, level=level, seed=seed, ci_method=ci_method, info=info)  # type: ignore[arg-type]
    else:
        cols, stat = ((m,), mean_stat) if b is None else ((m, b), mean_diff)
        point, low, high = paired_bootstrap(cols, stat, n_boot=n_boot, level=level, seed=seed, ci_method=ci_method, info=info)
    if len(m) <= 1:
        return point, None, None
    return point, low, high


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
    point, low, high = quality_interval(
        "retention", [p[0] for p in pairs], [p[1] for p in pairs], n_boot=n_boot, seed=seed, ci_method=ci_method, info=info
    )
    exact = info.get("ci_method_used") == "exact"
    undefined = info.get("undefined_resamples", 0)
    ci_text = quality_ci_text(exact, ci_method)
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
        "retention_ci_undefined_resamples": None if exact else undefined,
        "retention_ci_n_boot": None if exact else n_boot,
        "retention_ci_seed": None if exact else seed,
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


def tau_interval(records: list[dict[str, Any]], **kw: Any) -> tuple[float | None, float | None, float | None]:
    """(point, low, high) of tau over `records`: summed emitted tokens over summed verification
    steps (metrics.summarize's point), with its paired bootstrap interval."""
    ms = [r["metrics"] for r in records]
    return paired_bootstrap(([m["new_tokens"] for m in ms], [m["steps"] for m in ms]), ratio_of_sums, **kw)


def _speed_sides(timed: list[dict[str, Any]]) -> list[tuple[Mapping[str, Any], Mapping[str, Any]]]:
    """(method metrics, the fresh target alone's metrics timed beside it) of each paired record
    with a clock on both sides."""
    sides = [(r["metrics"], speed_baseline(r)["metrics"]) for r in timed if r.get("baseline")]
    return [(m, b) for m, b in sides if m["total_s"] > 0 and b["total_s"] > 0]


def speedup_interval(timed: list[dict[str, Any]], **kw: Any) -> tuple[float | None, float | None, float | None] | None:
    """(point, low, high) of the speedup over the target alone on `timed` (the paired records
    whose timing counts): the method's summed throughput over the target alone's, with its
    paired bootstrap interval; None without a timed pair."""
    sides = _speed_sides(timed)
    if not sides:
        return None
    cols = (
        [m["new_tokens"] for m, _ in sides], [m["total_s"] for m, _ in sides],
        [b["new_tokens"] for _, b in sides], [b["total_s"] for _, b in sides],
    )
    return paired_bootstrap(cols, speedup_of_sums, **kw)


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
    if records:
        out.update(_fields("tau", tau_interval(records, **kw)))
    timed = records if timed is None else timed
    speedup = speedup_interval(timed, **kw)
    if speedup is not None:
        out.update(_fields("speedup", speedup))
        ratios = [m["tokens_per_s"] / b["tokens_per_s"] for m, b in _speed_sides(timed) if b["tokens_per_s"] > 0]
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
    minus target alone, per sample, then the mean), all from quality_interval (exact for 0/1
    scores, the bootstrap for graded ones; quality_ci_method says which), and the power flag:
    `underpowered` when the difference's interval is wider than +-power_threshold (or has no
    bounds), i.e. the run cannot tell a loss of that size from none. {} without a quality key."""
    if key is None:
        return {}
    kw = dict(n_boot=n_boot, seed=seed, ci_method=ci_method)
    method = [v for v in (_value(r.get("score", {}), key) for r in records) if v is not None]
    out: dict[str, Any] = _fields(figure, quality_interval("mean", method, **kw)) if method else {}
    pairs = [
        (mv, bv)
        for r in records if r.get("baseline")
        for mv, bv in [(_value(r.get("score", {}), key), _value(r["baseline"].get("score", {}), key))]
        if mv is not None and bv is not None
    ]
    if not pairs:
        if method:
            out["quality_ci_method"] = quality_ci_text(is_binary(method), ci_method)
        return out
    m, b = [p[0] for p in pairs], [p[1] for p in pairs]
    exact = is_binary(method) and is_binary(b)
    out.update(_fields(f"baseline_{figure}", quality_interval("mean", b, **kw)))
    diff = quality_interval("diff", m, b, **kw)
    out[f"{figure}_diff"] = diff[0]
    out.update(_fields(f"{figure}_diff", diff))
    half = None if diff[1] is None else (diff[2] - diff[1]) / 2
    # Discordant pairs (one side right, the other wrong): what the planner sizes n from.
    discordant = sum(1 for x, y in pairs if x != y)
    # Graded scores with no changed score give a bootstrap interval of width 0 whatever n; the
    # power check then uses the rule of three (discordance below 3/n at 95%): half-width
    # z * sqrt(3) / n. 0/1 scores need no such floor: the exact interval bounds the unseen
    # changes itself.
    z = float(stats.norm.ppf(0.5 + LEVEL / 2))
    floor = 0.0 if exact else z * np.sqrt(3.0) / len(pairs)
    # Which way the discordant pairs go, and the exact two-sided sign test on them (McNemar's
    # exact test for 0/1 scores). Tables print both beside the interval.
    lost = sum(1 for x, y in pairs if x < y)
    gained = sum(1 for x, y in pairs if x > y)
    out.update(
        quality_n=len(pairs),
        quality_ci_method=quality_ci_text(exact, ci_method),
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
