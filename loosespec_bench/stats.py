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

N_BOOT = 10_000
LEVEL = 0.95
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


def sign_test_p(lost: int, gained: int) -> float:
    """Exact two-sided sign test of `lost` against `gained` discordant pairs (McNemar's exact
    test for 0/1 scores): the probability, with each pair equally likely to go either way, of a
    split at least this uneven. 1.0 without a discordant pair."""
    n = lost + gained
    return float(stats.binomtest(min(lost, gained), n, 0.5).pvalue) if n else 1.0


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


# ---- tests behind the claims' verdicts (report/claims.py; docs/algorithms.md 7.6) ----------------
# Every p-value below is on the two-sided scale: p = min(1, 2 x the one-sided p), so that
# "p < 0.05" is "the two-sided 95% interval excludes the line" for the procedures that have an
# interval. A claim's verdict compares such a p (after its family's adjustment) with alpha.
Adjust = Literal["holm", "bh", "none"]
ADJUSTMENTS: tuple[str, ...] = ("holm", "bh", "none")


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values (controls the family-wise error rate): sorted
    ascending, the i-th (0-based) of m is max over j <= i of min(1, (m - j) p_(j))."""
    p = np.asarray(pvalues, dtype=float)
    m = len(p)
    order = np.argsort(p, kind="stable")
    adj = np.empty(m)
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p[i]))
        adj[i] = running
    return adj.tolist()


def adjust_pvalues(pvalues: Sequence[float], how: Adjust = "holm") -> list[float]:
    """A family's adjusted p-values: Holm (family-wise error), Benjamini-Hochberg (false
    discovery rate; scipy.stats.false_discovery_control) or none."""
    if how not in ADJUSTMENTS:
        raise ValueError(f"adjustment {how!r}: use one of {', '.join(ADJUSTMENTS)}")
    if len(pvalues) == 0:
        return []
    if how == "none":
        return [float(p) for p in pvalues]
    if how == "holm":
        return holm(pvalues)
    return [float(p) for p in stats.false_discovery_control(np.asarray(pvalues, dtype=float), method="bh")]


def two_sided(one_sided: float) -> float:
    return float(min(1.0, 2.0 * max(0.0, one_sided)))


class BootstrapTest:
    """A paired bootstrap (the one paired_bootstrap draws: same resamples, same seed) with the
    one-sided p-values its BCa interval implies. p_above(line) is the smallest one-sided level at
    which the BCa lower bound lies above `line` (the interval's own test of "figure <= line"),
    p_below(line) the same for the upper bound, so that the 95% interval excludes a line exactly
    when min(1, 2 p) < 0.05 (up to the resamples' quantile interpolation). Inverting BCa:
    with q = the share of resamples below the line, z0 the bias and a the (jackknife)
    acceleration, w = (z_q - z0) / (1 + a (z_q - z0)) and p_above = Phi(w - z0). Where the
    interval is the percentile one (undefined resamples), p_above = q."""

    def __init__(self, columns: Sequence[Sequence[float]], statistic: Callable[..., np.ndarray], *,
                 n_boot: int = N_BOOT, level: float = LEVEL, seed: int = 0) -> None:
        cols = [np.asarray(c, dtype=float) for c in columns]
        self.n = len(cols[0]) if cols else 0
        self.interval = paired_bootstrap(cols, statistic, n_boot=n_boot, level=level, seed=seed)
        self.point = self.interval[0]
        self.dist: np.ndarray | None = None
        self.z0 = self.accel = 0.0
        self.bca = False
        # No test without an interval, or with one of zero width (no spread in the resamples:
        # identical figures on both sides say nothing about how they could differ).
        if self.point is None or self.n < 2 or self.interval[1] is None or self.interval[1] == self.interval[2]:
            return
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", stats.DegenerateDataWarning)
            warnings.simplefilter("ignore", RuntimeWarning)
            with np.errstate(divide="ignore", invalid="ignore"):
                res = stats.bootstrap(tuple(cols), statistic, paired=True, vectorized=True, n_resamples=n_boot,
                                      batch=BATCH, confidence_level=level, method="percentile",
                                      rng=np.random.default_rng(seed))
                dist = res.bootstrap_distribution
                finite = np.isfinite(dist)
                self.dist = dist[finite]
                if finite.all() and np.ptp(dist) > 0:
                    self.bca = True
                    share = float(np.mean(dist < self.point))
                    self.z0 = float(stats.norm.ppf(min(max(share, 1 / (len(dist) + 1)), 1 - 1 / (len(dist) + 1))))
                    idx = np.arange(self.n)
                    jack = np.array([float(statistic(*[c[idx != i] for c in cols], axis=-1)) for i in range(self.n)])
                    d = jack.mean() - jack
                    den = 6.0 * float(np.sum(d ** 2)) ** 1.5
                    self.accel = float(np.sum(d ** 3)) / den if den > 0 and np.all(np.isfinite(jack)) else 0.0

    def p_above(self, line: float) -> float | None:
        """One-sided p of "the figure is at most `line`" (small: the figure is above it)."""
        if self.dist is None or len(self.dist) == 0:
            return None
        b = len(self.dist)
        # The exceedance share, kept off 0 and 1 by the resample count: B resamples cannot give
        # a p below 1 / (B + 1).
        q = (float(np.sum(self.dist <= line)) + 0.5) / (b + 1)
        if not self.bca:
            return q
        zq = float(stats.norm.ppf(q))
        w = (zq - self.z0) / (1 + self.accel * (zq - self.z0))
        return float(stats.norm.cdf(w - self.z0))

    def p_below(self, line: float) -> float | None:
        """One-sided p of "the figure is at least `line`" (small: the figure is below it)."""
        p = self.p_above(line)
        return None if p is None else 1.0 - p


def _cp_upper(k: int, n: int, alpha: float) -> float:
    """One-sided Clopper-Pearson upper bound of a binomial proportion (k of n), level 1 - alpha."""
    return 1.0 if k >= n else float(stats.beta.ppf(1 - alpha, k + 1, n - k))


def _cp_lower(k: int, n: int, alpha: float) -> float:
    return 0.0 if k <= 0 else float(stats.beta.ppf(alpha, k, n - k + 1))


class ExactPairedBinary:
    """Paired 0/1 scores of a method against a reference (the target alone, or configuration A),
    conditional on the reference's answers: of its `right` problems the method loses `lost`
    (lost ~ Binomial(right, p_lost)), of its `wrong` ones it gains `gained` (~ Binomial(wrong,
    p_gained)), independently. Then

      retention  = 1 - p_lost + p_gained x wrong / right
      difference = (p_gained x wrong - p_lost x right) / n     (method's accuracy - reference's)

    An exact (conservative) interval: at one-sided level alpha each bound takes each proportion's
    one-sided Clopper-Pearson bound at alpha / 2 (Bonferroni over the two: coverage >= 1 - alpha
    whatever the two rates). No discordant pair is no special case: lost = 0 gives p_lost's
    upper bound 1 - (alpha / 2)^(1 / right), of which the rule of three (3 / right) is the 95%
    approximation. p-values invert the bounds (bisection on alpha)."""

    def __init__(self, lost: int, gained: int, right: int, wrong: int) -> None:
        if min(lost, gained, right, wrong) < 0 or lost > right or gained > wrong:
            raise ValueError(f"lost {lost} of {right} right, gained {gained} of {wrong} wrong: impossible counts")
        self.lost, self.gained, self.right, self.wrong = lost, gained, right, wrong
        self.n = right + wrong

    def _coef(self, estimand: str) -> tuple[float, float, float]:
        """(offset, weight of p_gained, weight of p_lost) of the estimand."""
        if estimand == "retention":
            if self.right == 0:
                raise ValueError("retention needs a reference that answers some problem rightly")
            return 1.0, self.wrong / self.right, 1.0
        if estimand == "difference":
            return 0.0, self.wrong / self.n, self.right / self.n
        raise ValueError(f"estimand {estimand!r}: use 'retention' or 'difference'")

    def point(self, estimand: str) -> float:
        off, wg, wl = self._coef(estimand)
        pg = self.gained / self.wrong if self.wrong else 0.0
        pl = self.lost / self.right if self.right else 0.0
        return off + wg * pg - wl * pl

    def lower(self, estimand: str, alpha: float) -> float:
        off, wg, wl = self._coef(estimand)
        pg = _cp_lower(self.gained, self.wrong, alpha / 2) if self.wrong else 0.0
        pl = _cp_upper(self.lost, self.right, alpha / 2) if self.right else 0.0
        return off + wg * pg - wl * pl

    def upper(self, estimand: str, alpha: float) -> float:
        off, wg, wl = self._coef(estimand)
        pg = _cp_upper(self.gained, self.wrong, alpha / 2) if self.wrong else 0.0
        pl = _cp_lower(self.lost, self.right, alpha / 2) if self.right else 0.0
        return off + wg * pg - wl * pl

    def interval(self, estimand: str, level: float = LEVEL) -> tuple[float, float, float]:
        a = (1 - level) / 2
        return self.point(estimand), self.lower(estimand, a), self.upper(estimand, a)

    def p_above(self, estimand: str, line: float) -> float:
        """Smallest one-sided alpha at which the lower bound exceeds `line` (1.0: none does)."""
        return _invert(lambda a: self.lower(estimand, a) > line)

    def p_below(self, estimand: str, line: float) -> float:
        return _invert(lambda a: self.upper(estimand, a) < line)


def _invert(excludes: Callable[[float], bool]) -> float:
    """The smallest alpha in (0, 1) with excludes(alpha) (monotone: a larger alpha narrows)."""
    if not excludes(1 - 1e-12):
        return 1.0
    lo, hi = 0.0, 1 - 1e-12
    if excludes(1e-15):
        return 1e-15
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if excludes(mid) else (mid, hi)
    return hi


def mcnemar_one_sided(lost: int, gained: int) -> tuple[float, float]:
    """Exact McNemar (binomial test on the discordant split, p = 1/2): the one-sided p of "B is
    not better" (small when gained >> lost) and of "B is not worse". (1, 1) without a
    discordant pair."""
    m = lost + gained
    if m == 0:
        return 1.0, 1.0
    return (float(stats.binomtest(gained, m, 0.5, alternative="greater").pvalue),
            float(stats.binomtest(gained, m, 0.5, alternative="less").pvalue))


def wilcoxon_one_sided(d: Sequence[float]) -> tuple[float, float]:
    """Wilcoxon signed-rank test of paired differences d (Pratt's treatment of zeros): one-sided
    p of "the differences are not shifted up" and of "not shifted down". (1, 1) when every
    difference is 0."""
    x = np.asarray(d, dtype=float)
    if len(x) == 0 or not np.any(x != 0):
        return 1.0, 1.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        up = float(stats.wilcoxon(x, zero_method="pratt", alternative="greater").pvalue)
        down = float(stats.wilcoxon(x, zero_method="pratt", alternative="less").pvalue)
    return up, down


def paired_t_one_sided(d: Sequence[float]) -> tuple[float, float]:
    """One-sample t test of paired differences d (mean 0 under the null): one-sided p of "the
    mean is not above 0" and of "not below 0". (1, 1) when every difference is equal to the
    others (no spread: no t) or there are fewer than 2."""
    x = np.asarray(d, dtype=float)
    if len(x) < 2 or np.ptp(x) == 0:
        return 1.0, 1.0
    return (float(stats.ttest_1samp(x, 0.0, alternative="greater").pvalue),
            float(stats.ttest_1samp(x, 0.0, alternative="less").pvalue))


# A graded (non-0/1) quality figure's paired test, declared by name (a claim's graded_test; report
# compare --graded-test): name -> the one-sided p's (up, down) of paired differences.
PAIRED_TESTS: dict[str, Callable[[Sequence[float]], tuple[float, float]]] = {
    "t": paired_t_one_sided, "wilcoxon": wilcoxon_one_sided,
}


def proportion_interval(k: int, n: int, level: float = LEVEL) -> tuple[float | None, float | None, float | None]:
    """k of n with its exact (Clopper-Pearson) interval; (None, None, None) at n = 0."""
    if n == 0:
        return None, None, None
    ci = stats.binomtest(k, n).proportion_ci(confidence_level=level, method="exact")
    return k / n, float(ci.low), float(ci.high)


def n_for_power_mcnemar(discordance: float, effect: float, power: float = 0.8, level: float = LEVEL) -> float | None:
    """Paired problems for McNemar's test (two-sided, 1 - level) of a 0/1 accuracy difference to
    reject with probability `power`, when a share `discordance` = p10 + p01 of the pairs is
    discordant and the difference is `effect` = p01 - p10 (Connor 1987, the textbook formula):
    n = (z_a sqrt(d) + z_b sqrt(d - delta^2))^2 / delta^2, with sqrt(d) the per-pair spread
    under the null and sqrt(d - delta^2) under the effect. inf when the effect is 0; None
    without discordance (nothing to size from) or an effect |delta| > d (impossible)."""
    d, delta = float(discordance), abs(float(effect))
    if not d > 0 or delta > d + 1e-12 or not 0 < power < 1:
        return None
    if delta <= 1e-12:
        return float("inf")
    za = float(stats.norm.ppf(0.5 + level / 2))
    zb = float(stats.norm.ppf(power))
    return float((za * np.sqrt(d) + zb * np.sqrt(max(d - delta ** 2, 0.0))) ** 2 / delta ** 2)


# ---- planned looks: group-sequential boundaries by alpha spending (Lan & DeMets) -----------------
Spending = Literal["obrien_fleming", "pocock"]
SPENDINGS: tuple[str, ...] = ("obrien_fleming", "pocock")


def alpha_spent(t: float, alpha: float, kind: Spending) -> float:
    """Two-sided alpha spent by information fraction t in (0, 1]: O'Brien-Fleming-like
    2 - 2 Phi(z_{alpha/2} / sqrt(t)), or Pocock-like alpha ln(1 + (e - 1) t)."""
    if not 0 < t <= 1:
        raise ValueError(f"information fraction {t} must be in (0, 1]")
    if kind == "obrien_fleming":
        return float(2 - 2 * stats.norm.cdf(stats.norm.ppf(1 - alpha / 2) / np.sqrt(t)))
    if kind == "pocock":
        return float(alpha * np.log(1 + (np.e - 1) * t))
    raise ValueError(f"spending {kind!r}: use one of {', '.join(SPENDINGS)}")


def sequential_boundaries(looks: Sequence[int], alpha: float, kind: Spending) -> list[float]:
    """Two-sided nominal p thresholds of planned looks at n1 < n2 < ... (the last is the full n):
    look k rejects when its p < threshold k. z boundary c_k solves P(|Z_j| < c_j for j < k,
    |Z_k| >= c_k) = spent(t_k) - spent(t_{k-1}) under the null, Z_j standard normal with
    corr(Z_i, Z_j) = sqrt(n_i / n_j) (the statistic of a growing sample)."""
    ns = [int(v) for v in looks]
    if not ns or any(b <= a for a, b in zip(ns, ns[1:])) or ns[0] <= 0:
        raise ValueError(f"looks {looks}: give increasing positive sample sizes")
    t = np.asarray(ns, dtype=float) / ns[-1]
    spent = [alpha_spent(float(x), alpha, kind) for x in t]
    bounds: list[float] = []
    for k in range(len(ns)):
        target = spent[k] - (spent[k - 1] if k else 0.0)
        if k == 0:
            bounds.append(float(stats.norm.ppf(1 - target / 2)))
            continue
        idx = list(range(k + 1))
        cov = np.array([[np.sqrt(min(t[i], t[j]) / max(t[i], t[j])) for j in idx] for i in idx])
        prior = np.array(bounds)
        mvn_prev = stats.multivariate_normal(np.zeros(k), cov[:k, :k])
        mvn = stats.multivariate_normal(np.zeros(k + 1), cov)
        p_continue = float(mvn_prev.cdf(prior, lower_limit=-prior))

        def cross(c: float) -> float:  # P(no earlier crossing, |Z_k| >= c)
            inside = float(mvn.cdf(np.append(prior, c), lower_limit=np.append(-prior, -c)))
            return p_continue - inside - target

        lo, hi = 0.5, 8.0
        for _ in range(50):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if cross(mid) > 0 else (lo, mid)
        bounds.append((lo + hi) / 2)
    return [float(2 * (1 - stats.norm.cdf(c))) for c in bounds]


def n_for_power(point: float | None, low: float | None, high: float | None, n: int, line: float = 0.0,
                power: float = 0.8, level: float = LEVEL) -> float | None:
    """Problems for the claim's test to decide with probability `power` if the true effect is the
    observed one: the standard error implied by the interval's side that faces the line,
    se = side / z_{(1+level)/2}, shrinks as 1/sqrt(n), and the test decides with that power when
    |effect| = (z_{(1+level)/2} + z_power) se, i.e. n' = n ((z_a + z_b) se / |effect|)^2.
    (The expected bound touching the line, the old planner's n, is 50% power.) inf: no effect."""
    if point is None or low is None or high is None or n < 2:
        return None
    effect = abs(point - line)
    side = (high - point) if point < line else (point - low)
    if effect <= 1e-12:
        return float("inf")
    za = float(stats.norm.ppf(0.5 + level / 2))
    zb = float(stats.norm.ppf(power))
    se = max(side, 0.0) / za
    return float(n * ((za + zb) * se / effect) ** 2)

# -- speed over occasions (issue 46 item 3) ---------------------------------------------------------
# A timing is one draw of (problem, occasion): the machine's state on an occasion (its load, its
# clock, what else runs) moves every generation timed then. A bootstrap over problems alone
# treats the occasion as fixed and hides that variance, so a comparison is timed on several
# occasions (separate processes started apart) and its figures resample both.


def occasion_bootstrap(
    m_tokens: np.ndarray, m_time: np.ndarray, b_tokens: np.ndarray, b_time: np.ndarray,
    *, n_boot: int = N_BOOT, level: float = LEVEL, seed: int = 0,
) -> tuple[float | None, float | None, float | None]:
    """(point, low, high) of the pooled speedup (method tokens / method seconds) / (target-alone
    tokens / seconds) over [occasions, problems] tables (NaN = a cell left out, e.g. excluded
    for contamination), with a two-way bootstrap: each resample draws occasions and problems
    independently with replacement and pools the crossed cells (percentile interval). With one
    occasion it is the bootstrap over problems only."""
    arrs = [np.asarray(a, dtype=float) for a in (m_tokens, m_time, b_tokens, b_time)]
    if any(a.ndim != 2 or a.shape != arrs[0].shape for a in arrs):
        raise ValueError("the four tables must be [occasions, problems] of one shape")
    mt, ms, bt, bs = arrs
    ok = np.isfinite(ms) & np.isfinite(bs) & (ms > 0) & (bs > 0)
    if not ok.any():
        return None, None, None

    def pooled(oi: np.ndarray, pi: np.ndarray) -> float:
        w = ok[np.ix_(oi, pi)]
        sel = [np.where(w, a[np.ix_(oi, pi)], 0.0).sum() for a in (mt, ms, bt, bs)]
        return (sel[0] / sel[1]) / (sel[2] / sel[3]) if sel[1] > 0 and sel[3] > 0 and sel[2] > 0 else np.nan

    n_o, n_p = ok.shape
    point = pooled(np.arange(n_o), np.arange(n_p))
    rng = np.random.default_rng(seed)
    dist = np.array([pooled(rng.integers(0, n_o, n_o), rng.integers(0, n_p, n_p)) for _ in range(n_boot)])
    dist = dist[np.isfinite(dist)]
    if not np.isfinite(point):
        return None, None, None
    if dist.size == 0:
        return float(point), None, None
    alpha = (1 - level) / 2
    return float(point), float(np.quantile(dist, alpha)), float(np.quantile(dist, 1 - alpha))


def occasion_effects(y: np.ndarray) -> dict[str, Any]:
    """Additive two-way fit y[o, p] = mu + a_o + b_p + e (occasions x problems, complete table,
    e.g. log per-problem speedups) by least squares, and the variance components of the random
    two-way model without replication (method of moments, negative estimates set to 0):

        occasion_var = (MS_occasion - MS_residual) / P,  residual_var = MS_residual.

    Returns mu, occasion_effects a_o, occasion_var, residual_var, problem_var, and the F test of
    no occasion effect (occasion_f, occasion_p; None with one occasion or no residual df)."""
    y = np.asarray(y, dtype=float)
    if y.ndim != 2 or not np.isfinite(y).all():
        raise ValueError("occasion_effects needs a complete [occasions, problems] table")
    n_o, n_p = y.shape
    mu = float(y.mean())
    a = y.mean(axis=1) - mu
    b = y.mean(axis=0) - mu
    resid = y - mu - a[:, None] - b[None, :]
    df_o, df_p, df_e = n_o - 1, n_p - 1, (n_o - 1) * (n_p - 1)
    ms_o = n_p * float((a ** 2).sum()) / df_o if df_o else None
    ms_p = n_o * float((b ** 2).sum()) / df_p if df_p else None
    ms_e = float((resid ** 2).sum()) / df_e if df_e else None
    out: dict[str, Any] = {"mu": mu, "occasion_effects": [float(x) for x in a], "residual_var": ms_e,
                           "occasion_var": None, "problem_var": None, "occasion_f": None, "occasion_p": None}
    if ms_o is not None and ms_e is not None:
        out["occasion_var"] = max(0.0, (ms_o - ms_e) / n_p)
        if ms_e > 1e-12 * max(1.0, ms_o):  # a residual at rounding level: no F
            out["occasion_f"] = ms_o / ms_e
            out["occasion_p"] = float(stats.f.sf(ms_o / ms_e, df_o, df_e))
    if ms_p is not None and ms_e is not None:
        out["problem_var"] = max(0.0, (ms_p - ms_e) / n_o)
    return out


def icc_agreement(y: np.ndarray) -> float | None:
    """ICC(2,1) (Shrout & Fleiss 1979; McGraw & Wong's ICC(A,1)): two-way random effects,
    absolute agreement, single measurement, for y[subjects, occasions]; the test-retest
    reliability of one configuration timed on several occasions (subjects = problems). None
    when undefined (fewer than 2 subjects or occasions, or no variance at all)."""
    y = np.asarray(y, dtype=float)
    if y.ndim != 2 or y.shape[0] < 2 or y.shape[1] < 2 or not np.isfinite(y).all():
        return None
    n, k = y.shape
    mu = y.mean()
    ms_r = k * ((y.mean(axis=1) - mu) ** 2).sum() / (n - 1)
    ms_c = n * ((y.mean(axis=0) - mu) ** 2).sum() / (k - 1)
    resid = y - y.mean(axis=1, keepdims=True) - y.mean(axis=0, keepdims=True) + mu
    ms_e = (resid ** 2).sum() / ((n - 1) * (k - 1))
    den = ms_r + (k - 1) * ms_e + k * (ms_c - ms_e) / n
    return float((ms_r - ms_e) / den) if den > 0 else None


def count_sign_test(a: Sequence[float], b: Sequence[float]) -> dict[str, Any]:
    """Exact paired decision on a work count per problem (e.g. draft forwards per token): how
    many problems a has fewer / more / as many as b, and the two-sided sign test's p over the
    untied ones (sign_test_p). Counts carry no timing noise: the test is exact."""
    if len(a) != len(b):
        raise ValueError("a and b must be paired per problem")
    fewer = sum(1 for x, y in zip(a, b) if x < y)
    more = sum(1 for x, y in zip(a, b) if x > y)
    return {"fewer": fewer, "more": more, "ties": len(a) - fewer - more, "p": sign_test_p(fewer, more)}
