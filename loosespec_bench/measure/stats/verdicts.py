"""The tests behind the claims' verdicts (report/claims.py), moved out of stats.py: multiplicity
adjustment (Holm, Benjamini-Hochberg), the bootstrap's own p-values (BootstrapTest), graded paired
tests (Wilcoxon, paired t), power (n for 80% power) and planned looks (alpha spending)."""

from __future__ import annotations

import warnings
from typing import Callable, Literal, Sequence

import numpy as np
from scipy import stats

from .exact import LEVEL
from .intervals import BATCH, N_BOOT, paired_bootstrap


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
