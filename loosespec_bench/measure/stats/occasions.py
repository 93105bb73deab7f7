"""Speed over occasions, moved out of stats.py: the two-way (occasions x problems) bootstrap of a
pooled speedup, the additive occasion effects with their variance components, and ICC(2,1)."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np
from scipy import stats

from .exact import LEVEL
from .intervals import N_BOOT


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




def occasion_rate_ratio(
    tokens: Mapping[str, np.ndarray], seconds: Mapping[str, np.ndarray], b: str, a: Sequence[str],
    *, n_boot: int = N_BOOT, seed: int = 0,
) -> tuple[float | None, np.ndarray]:
    """B's pooled rate (summed tokens / summed seconds) over the best pooled rate among the
    configurations `a`, over [occasions, problems] tables per configuration (NaN: a cell left
    out, e.g. contaminated), and its two-way bootstrap distribution (occasions and problems
    drawn independently with replacement, as occasion_bootstrap). Only the cells every
    configuration of the comparison has enter, so that both sides pool the same (occasion,
    problem) cells.

    With several `a` the denominator is their maximum, taken again in every resample: "faster
    than A at its best setting" pays for choosing that setting from the same timings (the max
    of noisy rates is biased up, so the test leans against B). Returns (None, empty) when no
    cell is left."""
    names = [b, *a]
    tok = {c: np.asarray(tokens[c], dtype=float) for c in names}
    sec = {c: np.asarray(seconds[c], dtype=float) for c in names}
    shape = tok[b].shape
    if any(t.ndim != 2 or t.shape != shape for t in (*tok.values(), *sec.values())):
        raise ValueError("every table must be [occasions, problems] of one shape")
    ok = np.ones(shape, dtype=bool)
    for c in names:
        ok &= np.isfinite(tok[c]) & np.isfinite(sec[c]) & (sec[c] > 0)
    if not ok.any():
        return None, np.empty(0)
    n_o, n_p = shape
    rng = np.random.default_rng(seed)
    # Each resample as multiplicities: w_o[r, o] draws of occasion o, w_p[r, p] of problem p; a
    # cell's weight is their product (the crossed cells of the drawn occasions and problems).
    w_o = np.stack([np.bincount(rng.integers(0, n_o, n_o), minlength=n_o) for _ in range(n_boot)]).astype(float)
    w_p = np.stack([np.bincount(rng.integers(0, n_p, n_p), minlength=n_p) for _ in range(n_boot)]).astype(float)

    def pooled(c: str, wo: np.ndarray, wp: np.ndarray) -> np.ndarray:
        t, s = np.where(ok, tok[c], 0.0), np.where(ok, sec[c], 0.0)
        num = np.einsum("ro,op,rp->r", wo, t, wp)
        den = np.einsum("ro,op,rp->r", wo, s, wp)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(den > 0, num / den, np.nan)

    def ratio(wo: np.ndarray, wp: np.ndarray) -> np.ndarray:
        best = np.max(np.stack([pooled(c, wo, wp) for c in a]), axis=0)
        with np.errstate(divide="ignore", invalid="ignore"):
            return pooled(b, wo, wp) / best

    point = float(ratio(np.ones((1, n_o)), np.ones((1, n_p)))[0])
    dist = ratio(w_o, w_p)
    return (point if np.isfinite(point) else None), dist[np.isfinite(dist)]


def percentile_p_above(dist: np.ndarray, line: float) -> float | None:
    """One-sided p of "the figure is at most `line`" from a bootstrap distribution (percentile:
    the share of resamples at or below the line, kept off 0 by the resample count, as
    verdicts.BootstrapTest without BCa)."""
    if dist.size == 0:
        return None
    return (float(np.sum(dist <= line)) + 0.5) / (dist.size + 1)
