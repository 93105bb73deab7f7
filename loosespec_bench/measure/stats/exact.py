"""Exact procedures for paired 0/1 scores and for counts, moved out of stats.py: the sign test
(McNemar's exact test), one-sided Clopper-Pearson bounds, the exact paired binary interval of a
difference and of retention (ExactPairedBinary), a proportion's Clopper-Pearson interval and the
exact sign test over work counts. No bootstrap here: nothing below resamples."""

from __future__ import annotations

from typing import Any, Callable, Sequence

from scipy import stats

LEVEL = 0.95  # every interval's level, the bootstrap's (stats.py) included


def sign_test_p(lost: int, gained: int) -> float:
    """Exact two-sided sign test of `lost` against `gained` discordant pairs (McNemar's exact
    test for 0/1 scores): the probability, with each pair equally likely to go either way, of a
    split at least this uneven. 1.0 without a discordant pair."""
    n = lost + gained
    return float(stats.binomtest(min(lost, gained), n, 0.5).pvalue) if n else 1.0

def is_binary(values: Sequence[float]) -> bool:
    """Whether every score is 0 or 1 (bools count): such scores get exact intervals, never the
    bootstrap (a ratio or mean of 0/1 sums has atoms a bootstrap bound can land on)."""
    return all(v in (0.0, 1.0) for v in values)


def cp_upper(k: int, n: int, alpha: float) -> float:
    """One-sided Clopper-Pearson upper bound of a binomial proportion (k of n), level 1 - alpha."""
    return 1.0 if k >= n else float(stats.beta.ppf(1 - alpha, k + 1, n - k))


def cp_lower(k: int, n: int, alpha: float) -> float:
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

    @classmethod
    def from_scores(cls, method: Sequence[float], reference: Sequence[float]) -> "ExactPairedBinary":
        """The counts of paired 0/1 scores (method's, reference's, one pair per problem)."""
        if len(method) != len(reference) or not (is_binary(method) and is_binary(reference)):
            raise ValueError("ExactPairedBinary.from_scores needs paired 0/1 scores")
        right = sum(1 for r in reference if r == 1)
        lost = sum(1 for m, r in zip(method, reference) if m < r)
        gained = sum(1 for m, r in zip(method, reference) if m > r)
        return cls(lost, gained, right, len(reference) - right)

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
        pg = cp_lower(self.gained, self.wrong, alpha / 2) if self.wrong else 0.0
        pl = cp_upper(self.lost, self.right, alpha / 2) if self.right else 0.0
        return off + wg * pg - wl * pl

    def upper(self, estimand: str, alpha: float) -> float:
        off, wg, wl = self._coef(estimand)
        pg = cp_upper(self.gained, self.wrong, alpha / 2) if self.wrong else 0.0
        pl = cp_lower(self.lost, self.right, alpha / 2) if self.right else 0.0
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


def proportion_interval(k: int, n: int, level: float = LEVEL) -> tuple[float | None, float | None, float | None]:
    """k of n with its exact (Clopper-Pearson) interval; (None, None, None) at n = 0."""
    if n == 0:
        return None, None, None
    ci = stats.binomtest(k, n).proportion_ci(confidence_level=level, method="exact")
    return k / n, float(ci.low), float(ci.high)


def count_sign_test(a: Sequence[float], b: Sequence[float]) -> dict[str, Any]:
    """Exact paired decision on a work count per problem (e.g. draft forwards per token): how
    many problems a has fewer / more / as many as b, and the two-sided sign test's p over the
    untied ones (sign_test_p). Counts carry no timing noise: the test is exact."""
    if len(a) != len(b):
        raise ValueError("a and b must be paired per problem")
    fewer = sum(1 for x, y in zip(a, b) if x < y)
    more = sum(1 for x, y in zip(a, b) if x > y)
    return {"fewer": fewer, "more": more, "ties": len(a) - fewer - more, "p": sign_test_p(fewer, more)}
