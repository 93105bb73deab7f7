"""Sizing the exact paired 0/1 tests of planned looks (issue 45): how many discordant problems
the one-sided exact McNemar test needs to find a given loss:gain imbalance with a given power
over a group-sequential plan, and which non-inferiority margin an n supports when the changes
balance. Exact: binomial sums and enumeration, no simulation, no normal approximation."""

from __future__ import annotations

from typing import Sequence

import numpy as np
from scipy import stats

from .exact import cp_lower, cp_upper

MAX_DISCORDANT = 20_000  # discordant_for_power looks no further: beyond any budget this project plans


def _critical(m: int, level: float) -> int:
    """The smallest count c of losses among m discordant pairs whose one-sided exact McNemar p,
    P(Bin(m, 1/2) >= c), is at most `level` (m + 1: none is)."""
    if m <= 0:
        return 1
    # sf(c - 1) = P(X >= c) falls with c: the first c where it is <= level.
    tail = stats.binom.sf(np.arange(-1, m), m, 0.5)  # P(X >= c) for c = 0..m
    hits = np.nonzero(tail <= level)[0]
    return int(hits[0]) if hits.size else m + 1


def mcnemar_power(m: int, imbalance: float, levels: Sequence[float], fractions: Sequence[float] = (1.0,)) -> float:
    """Exact power of the one-sided exact McNemar test toward loss over planned looks, with m
    discordant problems at the last look and `imbalance` losses per gain among them (2: a 2:1
    split, each discordant problem lost with probability 2/3). Look k sees round(m x fractions[k])
    of them (the discordant problems accrue with n) and stops the plan when its one-sided p is at
    most levels[k] (a look's nominal level, halved from the two-sided scale, and divided for a
    family's correction where one applies). The losses form a binomial walk; the probability of
    crossing at some look is summed over it exactly."""
    if len(levels) != len(fractions) or not levels:
        raise ValueError("give one level per look and as many information fractions")
    if imbalance <= 0:
        raise ValueError(f"imbalance {imbalance}: give losses per gain > 0")
    q = imbalance / (1 + imbalance)
    counts = [int(round(m * f)) for f in fractions]
    if any(b < a for a, b in zip(counts, counts[1:])) or counts[-1] != m:
        raise ValueError(f"fractions {tuple(fractions)}: give increasing fractions ending at 1")
    alive = np.zeros(m + 1)
    alive[0] = 1.0  # P(no crossing yet, losses so far = index)
    crossed, seen = 0.0, 0
    for count, level in zip(counts, levels):
        step = count - seen
        if step:
            alive = np.convolve(alive, stats.binom.pmf(np.arange(step + 1), step, q))[: m + 1]
        seen = count
        if count == 0:
            continue
        c = _critical(count, level)
        crossed += float(alive[c:].sum())
        alive[c:] = 0.0
    return crossed


def discordant_for_power(imbalance: float, power: float, levels: Sequence[float], fractions: Sequence[float] = (1.0,),
                         limit: int = MAX_DISCORDANT) -> int | None:
    """The fewest discordant problems m (at the last look) from which mcnemar_power stays at or
    above `power` up to 2 m. The exact test's power saw-tooths with m (a 2:1 split at one-sided
    5%: 0.812 at 58, 0.785 at 59, 0.801 at 64, above from 60 on), so the first m to reach it
    (58) can be followed by smaller ones. None above `limit`."""
    if not 0 < power < 1:
        raise ValueError(f"power {power}: give a probability")
    cache: dict[int, float] = {}

    def reaches(m: int) -> bool:
        if m not in cache:
            cache[m] = mcnemar_power(m, imbalance, levels, fractions)
        return cache[m] >= power

    m = 1
    while m <= limit:
        if not reaches(m):
            m += 1
            continue
        below = next((k for k in range(m + 1, 2 * m + 1) if not reaches(k)), None)
        if below is None:
            return m
        m = below + 1
    return None


def margin_supported(n: int, discordance: float, accuracy: float, level: float, power: float) -> float | None:
    """The non-inferiority margin (in accuracy, the method's minus the target's) that n paired
    problems exclude with probability `power` when the rule changes answers as often in each
    direction: a share `discordance` of the problems changed, half lost and half gained, the
    target right on a share `accuracy`. The bound is ExactPairedBinary's one-sided lower bound of
    the difference at `level` (each rate's Clopper-Pearson bound at level / 2); the margin is the
    quantile of its distribution that it exceeds with that probability, by enumeration of both
    binomials. None where the rates do not exist (no right or no wrong problem, or more changes
    than problems on a side)."""
    right = int(round(accuracy * n))
    wrong = n - right
    if right <= 0 or wrong <= 0 or not 0 <= discordance <= 1:
        return None
    changes = discordance * n / 2
    p_lost, p_gained = changes / right, changes / wrong
    if p_lost > 1 or p_gained > 1:
        return None
    lost = np.arange(right + 1)
    gained = np.arange(wrong + 1)
    # lower(l, g) = wrong / n x CP_lower(g of wrong) - right / n x CP_upper(l of right): separable.
    down = np.array([right / n * cp_upper(int(k), right, level / 2) for k in lost])
    up = np.array([wrong / n * cp_lower(int(k), wrong, level / 2) for k in gained])
    bound = (up[None, :] - down[:, None]).ravel()
    weight = np.outer(stats.binom.pmf(lost, right, p_lost), stats.binom.pmf(gained, wrong, p_gained)).ravel()
    order = np.argsort(bound)
    cum = np.cumsum(weight[order])
    # P(bound > -margin) >= power: -margin at or below the (1 - power) quantile of the bound.
    # The first atom past the (1 - power) quantile: P(bound >= it) >= power.
    quantile = bound[order][min(int(np.searchsorted(cum, 1 - power, side="right")), bound.size - 1)]
    return float(max(-quantile, 0.0))
