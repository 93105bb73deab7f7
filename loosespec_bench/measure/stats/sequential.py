"""Certifying loose settings (issue 68): non-inferiority of each setting's paired 0/1 quality
against the target alone, tested at planned looks with alpha spending inside a setting and in a
fixed sequence across the settings, strictest first (docs/certify.md).

The pieces, each exact or exact-conservative, nothing resampled:

  loss bounds   the one-sided bounds of ExactPairedBinary (exact.py), the report's exact paired
                interval, read as a loss: loss = target alone's accuracy - the method's
                (estimand "difference", in accuracy points / 100), or 1 - retention ("retention").
                Vectorised over numpy arrays so that thousands of simulated families cost
                milliseconds; `loss_upper(...)[i] == -ExactPairedBinary.lower("difference", a)`.
  spending      one-sided Lan-DeMets alpha spending over the planned looks n_1 < ... < n_L
                (O'Brien-Fleming-like by default; Pocock-like). Look k tests at the increment
                alpha_k = spent(t_k) - spent(t_{k-1}), t_k = n_k / n_L. Each look's bound is
                exact at its own level, and the looks are joined by Bonferroni (sum alpha_k =
                alpha): P(some look wrongly certifies) <= alpha whatever the correlation between
                looks, so no joint boundary (and no normal approximation) is needed.
  a setting     at look k: certified when the loss's upper bound at level alpha_k is below the
                margin delta (H0: loss >= delta rejected); futile when the loss's lower bound at
                level alpha (one-sided) is at or above delta: the data already show a loss of
                delta or more, so the setting cannot be certified and its looks stop
                (non-binding: stopping for futility never adds a false certification); at the
                last planned look, not certified otherwise.
  the sequence  the settings in their given order, strictest first: a setting is tested only
                after every earlier one is certified, and the first setting not certified ends
                the sequence. Every setting always tests at its look's own alpha_k (a setting
                whose test starts at look k > 1 forgoes alpha_1..alpha_{k-1}), so that when its
                test starts, which depends on the earlier settings' data, cannot raise its error.
                Family-wise error <= alpha with no further correction: a false certification
                needs the first setting whose loss is >= delta to be certified, and that
                setting's test is a level-alpha test (the fixed-sequence procedure, Maurer et
                al. 1995; Learn-then-Test, Angelopoulos et al. 2021, uses it over ordered
                settings).

`fixed_sequence` runs the procedure over arrays of simulated families (tests: its error rate on
>= 1,000 families); `Certification` is the same procedure fed one (setting, look) at a time by
`python -m loosespec_bench.certify`, which runs only what the next decision needs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Sequence

import numpy as np
from scipy import stats

from .verdicts import SPENDINGS, alpha_spent

Estimand = Literal["difference", "retention"]
ESTIMANDS: tuple[str, ...] = ("difference", "retention")

# Outcomes of one setting, as codes in arrays and words in reports.
PENDING, CERTIFIED, FUTILE, NOT_CERTIFIED, NOT_TESTED = 0, 1, 2, 3, 4
OUTCOMES = {PENDING: "pending", CERTIFIED: "certified", FUTILE: "failed (loss shown >= margin)",
            NOT_CERTIFIED: "failed (not certified at the last look)", NOT_TESTED: "not tested (an earlier setting failed)"}


# ---- exact bounds, vectorised -----------------------------------------------------------------
def _cp_upper(k: np.ndarray, n: np.ndarray, a: np.ndarray) -> np.ndarray:
    """One-sided Clopper-Pearson upper bound of k of n at level 1 - a (exact.cp_upper, arrays);
    n = 0 gives 0 (the rate's weight is 0 then)."""
    k, n, a = np.broadcast_arrays(np.asarray(k, float), np.asarray(n, float), np.asarray(a, float))
    out = np.where(k >= n, 1.0, 0.0)
    inner = (k < n) & (n > 0)
    if inner.any():
        out[inner] = stats.beta.ppf(1 - a[inner], k[inner] + 1, n[inner] - k[inner])
    return np.where(n > 0, out, 0.0)


def _cp_lower(k: np.ndarray, n: np.ndarray, a: np.ndarray) -> np.ndarray:
    k, n, a = np.broadcast_arrays(np.asarray(k, float), np.asarray(n, float), np.asarray(a, float))
    out = np.zeros(k.shape)
    inner = (k > 0) & (n > 0)
    if inner.any():
        out[inner] = stats.beta.ppf(a[inner], k[inner], n[inner] - k[inner] + 1)
    return out


def _weights(right: np.ndarray, wrong: np.ndarray, estimand: str) -> tuple[np.ndarray, np.ndarray]:
    """(weight of p_lost, weight of p_gained) in the loss: difference = (p_l right - p_g wrong) / n,
    retention's loss = p_l - p_g wrong / right (ExactPairedBinary._coef, signs turned)."""
    right, wrong = np.asarray(right, float), np.asarray(wrong, float)
    if estimand == "difference":
        n = np.maximum(right + wrong, 1.0)
        return right / n, wrong / n
    if estimand == "retention":
        safe = np.maximum(right, 1.0)
        return np.where(right > 0, 1.0, np.nan), np.where(right > 0, wrong / safe, np.nan)
    raise ValueError(f"estimand {estimand!r}: use one of {', '.join(ESTIMANDS)}")


def loss_upper(lost, gained, right, wrong, alpha, estimand: str = "difference") -> np.ndarray:
    """One-sided upper bound of the loss at level 1 - alpha: each rate's Clopper-Pearson bound at
    alpha / 2 (ExactPairedBinary: exact-conservative whatever the two rates). Retention's loss
    without a right answer of the target alone is undefined (nan: never certified)."""
    wl, wg = _weights(right, wrong, estimand)
    a = np.asarray(alpha, float) / 2
    return wl * _cp_upper(lost, right, a) - wg * _cp_lower(gained, wrong, a)


def loss_lower(lost, gained, right, wrong, alpha, estimand: str = "difference") -> np.ndarray:
    """One-sided lower bound of the loss at level 1 - alpha (the other side of loss_upper)."""
    wl, wg = _weights(right, wrong, estimand)
    a = np.asarray(alpha, float) / 2
    return wl * _cp_lower(lost, right, a) - wg * _cp_upper(gained, wrong, a)


def loss_point(lost, gained, right, wrong, estimand: str = "difference") -> np.ndarray:
    wl, wg = _weights(right, wrong, estimand)
    right, wrong = np.asarray(right, float), np.asarray(wrong, float)
    pl = np.divide(np.asarray(lost, float), right, out=np.zeros(np.broadcast(lost, right).shape), where=right > 0)
    pg = np.divide(np.asarray(gained, float), wrong, out=np.zeros(np.broadcast(gained, wrong).shape), where=wrong > 0)
    return wl * pl - wg * pg


# ---- the design -------------------------------------------------------------------------------
def one_sided_spent(t: float, alpha: float, spending: str) -> float:
    """One-sided alpha spent by information fraction t: half the two-sided Lan-DeMets function
    at 2 alpha (verdicts.alpha_spent), e.g. O'Brien-Fleming-like 1 - Phi(z_{1-alpha} / sqrt(t))."""
    return alpha_spent(t, 2 * alpha, spending) / 2  # type: ignore[arg-type]


@dataclass(frozen=True)
class Design:
    """What is fixed before any data are read: the planned looks (cumulative problems n_1 < ...
    < n_L), the margin delta (accuracy / 100 for "difference", a share for "retention"), the
    family-wise alpha (one-sided), the spending function and the estimand."""

    looks: tuple[int, ...]
    delta: float
    alpha: float = 0.05
    spending: str = "obrien_fleming"
    estimand: str = "difference"
    futility: bool = True
    alphas: tuple[float, ...] = field(init=False)

    def __post_init__(self) -> None:
        looks = tuple(int(n) for n in self.looks)
        if not looks or looks[0] <= 0 or any(b <= a for a, b in zip(looks, looks[1:])):
            raise ValueError(f"looks {self.looks}: give increasing positive numbers of problems")
        if not 0 < self.alpha < 0.5:
            raise ValueError(f"alpha {self.alpha}: give a one-sided level in (0, 0.5)")
        if not 0 < self.delta < 1:
            raise ValueError(f"delta {self.delta}: give a margin in (0, 1) (accuracy points / 100, or a share of retention)")
        if self.spending not in SPENDINGS:
            raise ValueError(f"spending {self.spending!r}: use one of {', '.join(SPENDINGS)}")
        if self.estimand not in ESTIMANDS:
            raise ValueError(f"estimand {self.estimand!r}: use one of {', '.join(ESTIMANDS)}")
        object.__setattr__(self, "looks", looks)
        spent = [one_sided_spent(n / looks[-1], self.alpha, self.spending) for n in looks]
        object.__setattr__(self, "alphas", tuple(b - a for a, b in zip([0.0, *spent], spent)))


def decide(design: Design, look: np.ndarray, lost, gained, right, wrong) -> tuple[np.ndarray, np.ndarray]:
    """One setting's decision at look `look` (0-based, arrays): (outcome code, the loss's upper
    bound at the look's alpha_k). CERTIFIED, FUTILE, NOT_CERTIFIED (the last look) or PENDING."""
    look = np.asarray(look, int)
    a = np.asarray(design.alphas)[look]
    upper = loss_upper(lost, gained, right, wrong, a, design.estimand)
    out = np.full(np.shape(upper), PENDING)
    out = np.where(look == len(design.looks) - 1, NOT_CERTIFIED, out)
    if design.futility:
        lower = loss_lower(lost, gained, right, wrong, design.alpha, design.estimand)
        out = np.where(lower >= design.delta, FUTILE, out)
    out = np.where(upper < design.delta, CERTIFIED, out)  # nan (undefined retention) never certifies
    return out, upper


@dataclass
class SequenceResult:
    certified: np.ndarray  # [F] settings certified (the loosest certified is certified - 1; 0: none)
    outcome: np.ndarray    # [F, S] outcome codes
    look: np.ndarray       # [F, S] the look (0-based) that decided each setting; -1: not tested
    bound: np.ndarray      # [F, S] the loss's upper bound at that look's level (nan: not tested)


def fixed_sequence(design: Design, lost, gained, right, wrong) -> SequenceResult:
    """The procedure over F families at once. lost, gained, right, wrong: [F, S, L] cumulative
    counts per family, setting (in test order) and planned look (right / wrong: the target
    alone's right and wrong problems among the look's n_k)."""
    lost, gained, right, wrong = (np.asarray(x) for x in (lost, gained, right, wrong))
    F, S, L = lost.shape
    if L != len(design.looks):
        raise ValueError(f"{L} looks of counts for a design of {len(design.looks)}")
    outcome = np.full((F, S), NOT_TESTED)
    look_of = np.full((F, S), -1)
    bound = np.full((F, S), np.nan)
    s = np.zeros(F, int)  # the setting under test
    k = np.zeros(F, int)  # the look it is at
    live = np.ones(F, bool)
    rows = np.arange(F)
    while live.any():
        f = rows[live]
        out, up = decide(design, k[f], lost[f, s[f], k[f]], gained[f, s[f], k[f]], right[f, s[f], k[f]], wrong[f, s[f], k[f]])
        decided = out != PENDING
        outcome[f[decided], s[f[decided]]] = out[decided]
        look_of[f[decided], s[f[decided]]] = k[f[decided]]
        bound[f, s[f]] = up
        # certified: the next setting, same look; failed: stop; pending: the next look.
        k[f[~decided]] += 1
        s[f[out == CERTIFIED]] += 1
        live[f[decided & (out != CERTIFIED)]] = False
        live &= s < S
    return SequenceResult(certified=(outcome == CERTIFIED).sum(axis=1), outcome=outcome, look=look_of, bound=bound)


class Certification:
    """The procedure for one family, fed one (setting, look) at a time: `next()` says which
    setting must be measured at which look (None: done), `feed(...)` records its counts and
    decides. The same `decide` as fixed_sequence, the same transitions."""

    def __init__(self, design: Design, n_settings: int) -> None:
        if n_settings < 1:
            raise ValueError("give at least one setting")
        self.design, self.n_settings = design, n_settings
        self.setting, self.look, self.done = 0, 0, False
        self.outcome = [NOT_TESTED] * n_settings
        self.decided_at = [-1] * n_settings
        self.bound: list[float | None] = [None] * n_settings
        self.counts: list[tuple[int, int, int, int] | None] = [None] * n_settings

    def next(self) -> tuple[int, int] | None:
        return None if self.done else (self.setting, self.look)

    def feed(self, lost: int, gained: int, right: int, wrong: int) -> int:
        """Counts of the current setting at the current look (n_k = right + wrong problems)."""
        if self.done:
            raise RuntimeError("the certification has ended")
        if right + wrong != self.design.looks[self.look]:
            raise ValueError(f"look {self.look + 1} plans {self.design.looks[self.look]} problems, got {right + wrong}")
        out, up = decide(self.design, np.array([self.look]), [lost], [gained], [right], [wrong])
        code, s = int(out[0]), self.setting
        self.bound[s] = float(up[0])
        self.counts[s] = (lost, gained, right, wrong)
        if code == PENDING:
            self.outcome[s] = PENDING
            self.look += 1
            return code
        self.outcome[s], self.decided_at[s] = code, self.look
        if code == CERTIFIED and s + 1 < self.n_settings:
            self.setting += 1
        else:
            self.done = True
        return code

    @property
    def certified(self) -> int:
        return sum(1 for o in self.outcome if o == CERTIFIED)


# ---- simulation and sizing --------------------------------------------------------------------
def simulate_counts(rng: np.random.Generator, families: int, looks: Sequence[int], accuracy: float,
                    p_lost: Sequence[float], p_gained: Sequence[float]) -> tuple[np.ndarray, ...]:
    """Paired 0/1 data of `families` replications, S settings (p_lost[s], p_gained[s]: the chance
    that a problem the target alone gets right is lost, a wrong one gained), cumulated at the
    looks: (lost, gained, right, wrong), each [F, S, L]. Settings share one uniform per problem,
    so a looser setting (larger rates) loses a superset of a stricter one's problems, as nested
    rules do."""
    n = int(looks[-1])
    ok = rng.random((families, n)) < accuracy      # [F, n] the target alone right
    u = rng.random((families, n))                  # [F, n] one draw per problem, all settings
    pl = np.asarray(p_lost, float)[None, :, None]  # [1, S, 1]
    pg = np.asarray(p_gained, float)[None, :, None]
    lost_i = ok[:, None, :] & (u[:, None, :] < pl)       # [F, S, n]
    gained_i = ~ok[:, None, :] & (u[:, None, :] < pg)
    idx = np.asarray(looks, int) - 1
    right = np.cumsum(ok, axis=1)[:, idx]                # [F, L]
    S = pl.shape[1]
    right = np.broadcast_to(right[:, None, :], (families, S, len(idx)))
    wrong = np.asarray(looks)[None, None, :] - right
    return np.cumsum(lost_i, axis=2)[:, :, idx], np.cumsum(gained_i, axis=2)[:, :, idx], right, wrong


def certify_power(design: Design, accuracy: float, discordance: float, families: int = 2000, seed: int = 0) -> float:
    """Chance that one setting whose changes balance (a share `discordance` of the problems
    changed, half lost, half gained: true loss 0) is certified by the design (simulated)."""
    right_share, wrong_share = accuracy, 1 - accuracy
    half = discordance / 2
    if right_share <= 0 or wrong_share <= 0 or half > min(right_share, wrong_share):
        return float("nan")
    counts = simulate_counts(np.random.default_rng(seed), families, design.looks, accuracy, [half / right_share], [half / wrong_share])
    return float((fixed_sequence(design, *counts).certified >= 1).mean())


def n_for_certify(delta: float, accuracy: float, discordance: float, *, alpha: float = 0.05, power: float = 0.8,
                  looks: int = 1, spending: str = "obrien_fleming", estimand: str = "difference",
                  limit: int = 20_000, families: int = 2000) -> int | None:
    """The fewest problems n (on a grid: 1.15x steps, then bisection) at which a balanced setting
    (true loss 0, `discordance` changed) is certified with probability `power` under `looks`
    equally spaced looks; None above `limit`."""
    def ok(n: int) -> bool:
        plan = tuple(sorted({max(1, round(n * (i + 1) / looks)) for i in range(looks)}))
        d = Design(looks=plan, delta=delta, alpha=alpha, spending=spending, estimand=estimand)
        return certify_power(d, accuracy, discordance, families) >= power

    lo, hi = 10, 10
    while not ok(hi):
        lo, hi = hi, int(hi * 1.15) + 1
        if hi > limit:
            return None
    while hi - lo > max(2, lo // 50):
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if ok(mid) else (mid, hi)
    return hi
