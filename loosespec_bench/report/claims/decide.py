"""Deciding the claims: the runs a claim selects, the test of each row (a claim on one set), the
family's adjustment and the verdicts (docs/algorithms.md 7.6)."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np
import pandas as pd

from ...measure.costmodel import TARGET_TPS, assumed_speedup
from ...errors import ConfigError
from ...measure.metrics import dropmatch_cost_parts
from ...measure.stats.exact import ExactPairedBinary, mcnemar_one_sided, proportion_interval
from ...safe_files import confined, is_real_dir
from ...measure.stats.intervals import paired_bootstrap, ratio_of_sums
from ...measure.stats.occasions import percentile_p_above
from ...measure.stats.sizing import MAX_DISCORDANT, discordant_for_power, margin_supported
from ...measure.stats.verdicts import (
    PAIRED_TESTS, BootstrapTest, n_for_power, sequential_boundaries, two_sided,
)
from ...verifiers import FLy, rule_class
from ..compare import MIN_N_VERDICT, Run, compare_pair, difference_stat, load_run
from ..index import read_records
from ..labels import NO_WINDOW, is_rule
from ..project import head_share_70b, target_head_share
from .declaration import Claim, Declaration
from .speed import compare_occasions, sides


# The 8B -> 70B cluster run that the CPU verdicts are priced for (replicate_fly_70b at paper scale).
CLUSTER_PAIR, CLUSTER_GPUS, CLUSTER_NEW_TOKENS = "llama31-8b-70b", 4, 1024

@dataclass
class Decision:
    claim: Claim
    dataset: str
    n: int
    a: tuple[float | None, float | None, float | None] | None
    b: tuple[float | None, float | None, float | None]
    diff: tuple[float | None, float | None, float | None]  # the estimand (B - A, B / A, or retention)
    verdict: str
    n_needed: int | None = None  # n for the declared power at the observed effect
    cpu_hours: float | None = None
    cluster_gpu_hours: float | None = None
    folders: list[str] = field(default_factory=list)
    floor: tuple[float | None, float | None, float | None] | None = None  # retention: SPD's at the same set
    groups: str = ""  # "fr only": the figure rests on some of the set's groups (compare.Row.groups)
    test: str = ""  # key of TEST_TEXT
    counts: str = ""  # what a reader counts (lost / gained 1 / 5)
    p: dict[str, float] = field(default_factory=dict)  # conclusion -> p (two-sided scale)
    p_contra: float | None = None  # size claims: p of "the other side of no effect"
    p_raw: float | None = None  # the row's (its best-supported conclusion's) p
    p_adj: float | None = None  # after the family's adjustment (IUT members: unadjusted)
    conclusion: str = ""
    note: str = ""  # exploratory figures, planned looks, why a row has no p
    level_factor: float = 1.0  # alpha / the planned look's nominal level
    iut: str = ""  # "every set": the claim's intersection-union row; "member": one of its sets
    why_no_interval: str = ""
    paired01: tuple[int, int, int, int] | None = None  # (lost, gained, right, wrong): a 0/1 retention row
    # A wall-clock row (test occasions): what the work counts say of B against A ("faster",
    # "slower", "undecided"; None without a calibration), and the timed seconds per problem.
    counts_side: str | None = None
    per_problem_s: float | None = None
    # Issue 70: the scale the p is on, its Monte Carlo error (resampling tests), the verdict's
    # provenance and what an undecided row leans to.
    scale: str = "two-sided"  # of p_raw: "one-sided" where the claim was declared one-sided
    n_boot: int | None = None  # resamples behind p (None: an exact or analytic test)
    p_mc: float | None = None  # Monte Carlo standard error of p_raw (resampling tests)
    seed_note: str = ""  # re-run with more resamples / seed-dependent
    p_adj_family: float | None = None  # the secondary, per-family view (its adjusted p)
    family_view: str = ""  # the family (or merged families) of that view
    verdict_family: str = ""  # the conclusion the per-family view would draw, or "open"
    lean: str = ""  # an undecided row: which conclusion its estimate points to
    declared_at: str | None = None
    data_at: str | None = None
    registration: str = ""  # pre-registered / declared after the data / ...
    per_problem: dict[str, int] | None = None  # a 0/1 retention row: problem -> gained (+1), lost (-1), same (0)
    redo: Callable[[int, int], tuple[dict[str, float], float | None]] | None = field(default=None, repr=False)


def floor_selection(claim: Claim) -> dict[str, Any]:
    """The run a retention claim is shown beside: the lossless rule (SPD, the draft model) at the
    claim's own K, whose retention is the bf16 noise floor of those settings."""
    return {"method": "spd", "drafter": "model", "K": claim.b.get("K", 15)}


def _matches(row: pd.Series, sel: Mapping[str, Any]) -> bool:
    for key, want in sel.items():
        got = row.get(key)
        if isinstance(want, float) or isinstance(got, float):
            try:
                if not math.isclose(float(got), float(want), abs_tol=1e-6):
                    return False
            except (TypeError, ValueError):
                return False
        elif str(got) != str(want):
            return False
    return True


def select(index: pd.DataFrame, sel: Mapping[str, Any], dataset: str) -> pd.Series | None:
    """The finished run of configuration `sel` on `dataset` with the most samples (None: none)."""
    rows = index[(index["dataset"] == dataset) & (index["status"] == "complete")]
    hits = [r for _, r in rows.iterrows() if _matches(r, sel) and not _has_extra(r, sel)]
    return max(hits, key=lambda r: (r.get("n_samples") or 0)) if hits else None


def _has_extra(row: pd.Series, sel: Mapping[str, Any]) -> bool:
    """A FLy selector means the plain rule: not the no-window / paper-mode ablation points."""
    if is_rule(sel.get("method"), FLy):
        return bool(row.get(NO_WINDOW) is True or str(row.get("mode") or "code") != "code")
    return False


def seconds_per_problem(folders: list[str]) -> float | None:
    """Measured CPU seconds per problem of these runs (method + target alone, as a paired run costs)."""
    total, count = 0.0, 0
    for folder in folders:
        for rec in load_run(Path(folder)).records.values():
            base = rec.get("baseline") or {}
            total += rec["metrics"]["total_s"] + ((base.get("metrics") or {}).get("total_s") or 0.0)
            count += 1
    return total / count if count else None


def cluster_gpu_hours(n: int, methods: list[str]) -> float:
    """GPU-hours of n problems per configuration on the 8B -> 70B cluster run (planner's rates)."""
    tps = TARGET_TPS[CLUSTER_PAIR]
    hours = 0.0
    for m in methods:
        gain = assumed_speedup(rule_class(m), CLUSTER_PAIR)  # its rule's declared figure (Verifier.assumed_speedup)
        hours += n * CLUSTER_NEW_TOKENS / (tps * gain) / 3600
    hours += n * CLUSTER_NEW_TOKENS / tps / 3600  # the target alone, once (a shared store)
    return hours * CLUSTER_GPUS


def _pairs(run: Any) -> list[tuple[float, float]]:
    """(method, target alone) quality per sample scored on both sides, on the key the run's
    retention is taken on (summary retention_key: `correct`, NIAH's `recall`, a rating)."""
    key = (getattr(run, "summary", None) or {}).get("retention_key") or "correct"
    return [(float(r["score"][key]), float(r["baseline"]["score"][key]))
            for r in run.records.values()
            if r.get("baseline") and isinstance((r.get("score") or {}).get(key), (bool, int, float))
            and isinstance((r["baseline"].get("score") or {}).get(key), (bool, int, float))]


def _discordant(run_a: Any, run_b: Any) -> tuple[int, int, int, int]:
    """(A right and B wrong, A wrong and B right, problems both scored, A right) over the
    common problems."""
    a_only = b_only = n = right = 0
    for sid, ra in run_a.records.items():
        rb = run_b.records.get(sid)
        ca, cb = (ra.get("score") or {}).get("correct"), ((rb or {}).get("score") or {}).get("correct")
        if isinstance(ca, (bool, int, float)) and isinstance(cb, (bool, int, float)):
            a_only += bool(ca) and not bool(cb)
            b_only += bool(cb) and not bool(ca)
            right += bool(ca)
            n += 1
    return a_only, b_only, n, right


def _per_problem(run: Any) -> dict[str, int]:
    """A 0/1 run against its target alone, per problem: +1 gained, -1 lost, 0 the same."""
    key = (getattr(run, "summary", None) or {}).get("retention_key") or "correct"
    out: dict[str, int] = {}
    for sid, r in run.records.items():
        m, t = (r.get("score") or {}).get(key), ((r.get("baseline") or {}).get("score") or {}).get(key)
        if isinstance(m, (bool, int, float)) and isinstance(t, (bool, int, float)):
            out[str(sid)] = int(bool(m)) - int(bool(t))
    return out


# Targets whose config.json the report knows without the model installed (the embedded pair's
# target, Qwen2.5-Coder-1.5B-Instruct's published config): its LM-head share, 15.1%, is what a
# projected overhead claim scales by, so the report re-decides it on a machine without the weights.
KNOWN_TARGET_CONFIGS = {
    "embedded:qwen2.5-coder-1.5b-instruct": {"hidden_size": 1536, "intermediate_size": 8960, "num_hidden_layers": 28,
                                             "num_attention_heads": 12, "num_key_value_heads": 2, "vocab_size": 151936},
}


def _known_head_share(row: Any) -> float | None:
    from ...measure.costmodel import lm_head_share

    config = row.get("config") if isinstance(row.get("config"), dict) else {}
    cfg = KNOWN_TARGET_CONFIGS.get(str(config.get("pair.target.path")))
    return lm_head_share(cfg) if cfg else None


_proportion = proportion_interval  # k of n with its exact (Clopper-Pearson) 95% interval


def _is_binary(pairs: list[tuple[float, float]]) -> bool:
    return all(v in (0.0, 1.0) for pair in pairs for v in pair)


# ---- the tests of one row ------------------------------------------------------------------------
def _conclusions_from(p_above: Callable[[float], float | None], p_below: Callable[[float], float | None],
                      claim: Claim, floor: float = 0.0) -> tuple[dict[str, float], float | None]:
    """Each conclusion the claim allows with its p, and for a size claim the p of "on the other
    side of no effect" (contradicted). Scale: a claim declared one-sided tests its declared
    direction one-sided at alpha (its "confirmed" p is the one-sided p); every other conclusion
    is on the two-sided scale (2 x one-sided). `floor`: the smallest one-sided p the test can
    resolve (a resampling test: 1 / (B + 1))."""
    def ts(p: float | None) -> float:
        return 1.0 if p is None else two_sided(max(p, floor))

    up, down = (p_above, p_below) if claim.direction > 0 else (p_below, p_above)
    if claim.size is None:
        if claim.one_sided:
            got = up(claim.null)
            return {"confirmed": 1.0 if got is None else min(1.0, max(got, floor)), "contradicted": ts(down(claim.null))}, None
        return {"confirmed": ts(up(claim.null)), "contradicted": ts(down(claim.null))}, None
    low, high, _ = claim.size
    if claim.direction < 0:
        raise ConfigError(f"claim {claim.id!r}: a size claim is stated as a range above no effect (direction +1)")
    inside = max(ts(p_above(low)), ts(p_below(high)))
    return ({"confirmed": inside, "larger than claimed": ts(p_above(high)), "smaller than claimed": ts(p_below(low))},
            ts(p_below(claim.null)))


def _quotient(stat: Callable[..., np.ndarray], k: int) -> Callable[..., np.ndarray]:
    """B's statistic over A's, over A's k columns followed by B's k."""
    def f(*cols: np.ndarray, axis: int = -1) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            return stat(*cols[k:], axis=axis) / stat(*cols[:k], axis=axis)

    return f


def _without_topups(run: Run) -> Run:
    """The run as its first look saw it: samples timed by a later top-up of the timing subset
    (timing.topped_up_from) left out."""
    keep = {sid: r for sid, r in run.records.items() if "topped_up_from" not in (r.get("timing") or {})}
    return replace(run, records=keep)


def _groups_left(full: Run, first_a: Run, first_b: Run) -> str:
    """"fr only" where the first look's samples (timed in both) hold fewer of the set's groups
    (MGSM's languages) than the run: its figure is those groups', as compare.Row.groups says."""
    key = (full.summary.get("selection") or {}).get("group_key")
    if not key:
        return ""
    every = {(r.get("meta") or {}).get(key) for r in full.records.values()}
    present = {(r.get("meta") or {}).get(key) for sid, r in first_a.records.items() if sid in first_b.records}
    return f"{', '.join(sorted(map(str, present)))} only" if len(every) > 1 and present < every else ""


def _topped_up(run: Run) -> int:
    return sum(1 for r in run.records.values() if "topped_up_from" in (r.get("timing") or {}))


def _paired_row(claim: Claim, ra: Run, rb: Run, *, seed: int, n_boot: int) -> Decision | None:
    """A tau or speed row: the estimand's BCa interval and the p-values it implies."""
    rows = [r for r in compare_pair(ra, rb, seed=seed, n_boot=n_boot) if r.figure == claim.figure]
    if not rows:
        return None
    row = rows[0]
    k = len(row.cols_a)
    fn = (_quotient if claim.estimand == "ratio" else difference_stat)(row.stat, k)
    cols = [*row.cols_a, *row.cols_b]
    bt = BootstrapTest(cols, fn, seed=seed, n_boot=n_boot)
    p, contra = _conclusions_from(bt.p_above, bt.p_below, claim, floor=1 / (n_boot + 1))
    d = Decision(claim, row.dataset, row.n, row.a, row.b, bt.interval, "", groups=row.groups, test="bootstrap", p=p, p_contra=contra,
                 n_boot=n_boot)

    def redo(nb: int, s: int) -> tuple[dict[str, float], float | None]:
        again = BootstrapTest(cols, fn, seed=s, n_boot=nb)
        return _conclusions_from(again.p_above, again.p_below, claim, floor=1 / (nb + 1))

    d.redo = redo
    if bt.p_above(claim.null) is None:  # no test: not counted in the family
        d.p, d.p_contra = {}, None
        d.why_no_interval = ("no figure" if bt.point is None else "no interval: too many undefined resamples"
                             if bt.interval[1] is None else "no spread in the resamples" if bt.n > 1 else "n/a at n = 1")
    return d


def _accuracy_row(claim: Claim, ra: Run, rb: Run, ds: str) -> Decision:
    lost, gained, n, right_a = _discordant(ra, rb)
    right_b = right_a - lost + gained
    up, down = mcnemar_one_sided(lost, gained)
    p, _ = _conclusions_from(lambda x: up, lambda x: down, claim)
    # The exact interval of the difference given A's answers (not conditional on the number of
    # discordant pairs: 4 lost / 0 gained must not print a bound equal to the estimate).
    iv = ExactPairedBinary(lost, gained, right_a, n - right_a).interval("difference") if n else (None, None, None)
    return Decision(claim, ds, n, _proportion(right_a, n), _proportion(right_b, n), iv, "", test="exact_accuracy",
                    p=p, counts=f"lost / gained {lost} / {gained}")


def _retention_row(claim: Claim, run: Run, ds: str, seed: int, n_boot: int) -> Decision | None:
    pairs = _pairs(run)
    if not pairs:
        return None
    n = len(pairs)
    target = sum(t for _, t in pairs)
    lost = sum(1 for m, t in pairs if m < t)
    gained = sum(1 for m, t in pairs if m > t)
    if not _is_binary(pairs) and lost == gained == 0:
        # Graded scores, none changed: no test of the scores can see a change that never came
        # (the t test's spread would be the target's own). The bound is the 0/1 one, on a change
        # at all, taken at its worst (a changed problem loses its whole score): the zero-discordant
        # case of the exact machinery.
        graded_mean = target / n
        pairs = [(float(t > 0), float(t > 0)) for _, t in pairs]
        target = sum(t for _, t in pairs)
        right = int(target)
        if right == 0:
            return None
        ex = ExactPairedBinary(0, 0, right, n - right)
        d = Decision(claim, ds, n, (graded_mean, None, None), (graded_mean, None, None), ex.interval("retention"), "",
                     test="exact_retention", counts=f"lower / higher / same 0 / 0 / {n} (no score changed)")
        d.p, d.p_contra = _conclusions_from(lambda x: ex.p_above("retention", x), lambda x: ex.p_below("retention", x), claim)
        return d
    if _is_binary(pairs):
        right = int(target)
        d = Decision(claim, ds, n, _proportion(right, n), _proportion(right - lost + gained, n), (None, None, None), "",
                     test="exact_retention", counts=f"lost / gained {lost} / {gained} (target alone {right}/{n})")
        if right == 0:  # no retention exists (0 / 0): no row, as for a set the claim's runs did not reach
            return None
        ex = ExactPairedBinary(lost, gained, right, n - right)
        d.diff = ex.interval("retention")
        d.paired01 = (lost, gained, right, n - right)
        d.per_problem = _per_problem(run)
        if math.isclose(claim.margin, 1.0) and claim.size is None:
            # "Retention below 1" is "more answers lost than gained": McNemar's exact conditional
            # test on the discordant split is exact for it and far stronger than the bound, which
            # a margin below 1 (non-inferiority) needs. The interval shown stays the bound's.
            better, worse = mcnemar_one_sided(lost, gained)
            d.test = "exact_mcnemar"
            d.p, d.p_contra = _conclusions_from(lambda x: better if x == claim.margin else None,
                                                lambda x: worse if x == claim.margin else None, claim)
            return d
        d.p, d.p_contra = _conclusions_from(lambda x: ex.p_above("retention", x), lambda x: ex.p_below("retention", x), claim)
        return d
    # Graded scores (NIAH's recall, a rating): the declared test on score - margin x target's per
    # problem. Its mean is above 0 exactly when retention (a ratio of means) is above the margin,
    # which the paired t tests; Wilcoxon tests the pseudo-median instead (ties of identical
    # answers, each +(1 - margin) x target's, can carry it). The ratio's bootstrap interval is
    # shown, not tested.
    cols = [[m for m, _ in pairs], [t for _, t in pairs]]
    iv = paired_bootstrap(cols, ratio_of_sums, seed=seed, n_boot=n_boot)
    shifted = [m - claim.margin * t for m, t in pairs]
    up, down = PAIRED_TESTS[claim.graded_test](shifted)
    same = n - lost - gained
    d = Decision(claim, ds, n, (target / n, None, None), (sum(m for m, _ in pairs) / n, None, None), iv, "",
                 test=claim.graded_test, counts=f"lower / higher / same {lost} / {gained} / {same}")
    d.p, d.p_contra = _conclusions_from(lambda x: up if x == claim.margin else None,
                                        lambda x: down if x == claim.margin else None, claim)
    return d


def _overhead_row(claim: Claim, row: pd.Series, ds: str, seed: int, n_boot: int) -> Decision | None:
    """DropMatch's own cost in one run, from its step timings (metrics.dropmatch_cost_parts): the
    ratio of sums over problems, its BCa interval and the p-values it implies against the
    claim's line. projected_70b scales the share of the target's forwards by a 70B target's
    LM-head share over this target's (report/project.py: a projection, not a measurement)."""
    parts = dropmatch_cost_parts(read_records(str(row["run_dir"])))
    if claim.estimand == "decode_share":
        scale, base = 1.0, parts["decode_s"]
    else:
        head = target_head_share(row) or _known_head_share(row)
        if not head:
            return Decision(claim, ds, 0, (None, None, None), (None, None, None), (None, None, None),
                            "undecided (the target's LM-head share is unknown: its config.json cannot be read offline)")
        scale, base = head_share_70b() / head, parts["target_s"]
    n = len(parts["dropmatch_s"])
    if n < 2:
        return None  # no step timings (record_steps off): no figure to test

    def share(m: np.ndarray, b: np.ndarray, axis: int = -1) -> np.ndarray:
        return scale * ratio_of_sums(m, b, axis=axis)

    bt = BootstrapTest([parts["dropmatch_s"], base], share, seed=seed, n_boot=n_boot)
    measured = paired_bootstrap([parts["dropmatch_s"], parts["decode_s"]], ratio_of_sums, seed=seed, n_boot=n_boot)
    p, contra = _conclusions_from(bt.p_above, bt.p_below, claim, floor=1 / (n_boot + 1))
    d = Decision(claim, ds, n, (None, None, None), measured, bt.interval, "", test="bootstrap", p=p, p_contra=contra,
                 counts=f"DropMatch time {sum(parts['dropmatch_s']):.1f} s of {sum(parts['decode_s']):.0f} s decode", n_boot=n_boot)

    def redo(nb: int, s: int) -> tuple[dict[str, float], float | None]:
        again = BootstrapTest([parts["dropmatch_s"], base], share, seed=s, n_boot=nb)
        return _conclusions_from(again.p_above, again.p_below, claim, floor=1 / (nb + 1))

    d.redo = redo
    if bt.p_above(claim.null) is None:
        d.p, d.p_contra = {}, None
        d.why_no_interval = "no spread in the resamples"
    return d


def _retention_floor(claim: Claim, index: pd.DataFrame, ds: str) -> tuple[float | None, float | None, float | None] | None:
    row = select(index, floor_selection(claim), ds)
    if row is None:
        return None
    pairs = _pairs(load_run(Path(row["run_dir"])))
    if not pairs or not _is_binary(pairs):
        return paired_bootstrap([[m for m, _ in pairs], [t for _, t in pairs]], ratio_of_sums) if pairs else None
    right = int(sum(t for _, t in pairs))
    if right == 0:
        return None
    lost = sum(1 for m, t in pairs if m < t)
    gained = sum(1 for m, t in pairs if m > t)
    return ExactPairedBinary(lost, gained, right, len(pairs) - right).interval("retention")


def _look(claim: Claim, n: int, alpha: float) -> tuple[float, str] | None:
    """The level factor alpha / nominal level of the planned look this n is, and its note; None
    when the claim planned no looks. A row before the first look has factor inf."""
    if not claim.looks:
        return None
    done = [i for i, v in enumerate(claim.looks) if v <= n]
    if not done:
        return math.inf, f"before the first planned look (n = {claim.looks[0]})"
    k = done[-1]
    nominal = sequential_boundaries(claim.looks, alpha, claim.spending)[k]  # type: ignore[arg-type]
    name = "O'Brien-Fleming" if claim.spending == "obrien_fleming" else "Pocock"
    return alpha / nominal, (f"planned look {k + 1} of {len(claim.looks)} (n = {claim.looks[k]}; {name} spending: "
                             f"nominal level {nominal:.4f})")


def decide_on_set(claim: Claim, index: pd.DataFrame, ds: str, *, seed: int, n_boot: int, alpha: float) -> Decision | None:
    rb = select(index, claim.b, ds)
    ra = select(index, claim.a, ds) if claim.a is not None else None
    if rb is None or (claim.a is not None and ra is None):
        return None
    folders = [str(rb["run_dir"])] + ([str(ra["run_dir"])] if ra is not None else [])
    if claim.figure == "overhead":
        d = _overhead_row(claim, rb, ds, seed, n_boot)
        if d is not None:
            d.folders, d.dataset = folders, ds
        return d
    run_b = load_run(Path(rb["run_dir"]))
    if claim.figure == "retention":
        d = _retention_row(claim, run_b, ds, seed, n_boot)
        if d is None:
            return None
        d.floor = _retention_floor(claim, index, ds)
    elif claim.figure == "speedup" and _machine(ra) != _machine(rb):
        # Each speedup is paired in-process on its own machine, but two of them compare only on
        # one CPU: bf16 decodes at very different relative costs with and without native bf16
        # kernels, so a difference across CPUs says nothing about the methods.
        d = Decision(claim, ds, 0, _own(ra, "speedup"), _own(rb, "speedup"), (None, None, None),
                     f"not comparable: speed measured on different CPUs (A: {_machine(ra)}; B: {_machine(rb)})")
    elif claim.figure == "accuracy":
        d = _accuracy_row(claim, load_run(Path(ra["run_dir"])), run_b, ds)
    else:
        run_a = load_run(Path(ra["run_dir"]))
        topped = _topped_up(run_a) + _topped_up(run_b) if claim.figure == "speedup" else 0
        if topped and claim.looks is None:
            # An unplanned top-up: the confirmatory verdict is the first look's (the samples timed
            # when the run first finished); the topped-up figure is exploratory, reported beside it.
            first_a, first_b = _without_topups(run_a), _without_topups(run_b)
            d = _paired_row(claim, first_a, first_b, seed=seed, n_boot=n_boot)
            full = _paired_row(claim, run_a, run_b, seed=seed, n_boot=n_boot)
            if d is not None and not d.groups:
                d.groups = _groups_left(run_a, first_a, first_b)
            if d is not None and full is not None and full.p:
                best = min(full.p, key=full.p.get)
                reads = (f"would read {best} unadjusted" if full.p[best] < alpha else "no conclusion even unadjusted")
                d.note = (f"exploratory: an unplanned top-up of the timing subset took n to {full.n}: "
                          f"{fmt_iv(full.diff, spec_of(claim))}, {_p_is(full.p[best])} ({reads}; "
                          f"a second look without alpha spending, not a verdict)")
        else:
            d = _paired_row(claim, run_a, run_b, seed=seed, n_boot=n_boot)
    if d is None:
        return None
    d.folders, d.dataset = folders, ds
    if claim.looks and not d.verdict:
        factor, note = _look(claim, d.n, alpha)  # type: ignore[misc]
        d.level_factor = factor
        d.note = "; ".join(x for x in (note, d.note) if x)
    return d


def _side(iv: tuple[float | None, float | None, float | None] | None, line: float = 1.0) -> str | None:
    """Where a ratio's interval lies against `line`: faster, slower or undecided (None: no interval)."""
    if iv is None or iv[1] is None or iv[2] is None:
        return None
    return "faster" if iv[1] > line else "slower" if iv[2] < line else "undecided"


def occasions_row(claim: Claim, root: Path, *, seed: int, n_boot: int) -> Decision | None:
    """A wall-clock claim from its speed-evidence folder (claims/speed.py); None while the folder
    has no finished occasion."""
    folder = confined(root, str(claim.folder), f"claim {claim.id!r}: folder")
    if not os.path.lexists(folder):
        return None  # not run yet
    if not is_real_dir(folder):
        raise ConfigError(f"claim {claim.id!r}: {folder} is a link or not a folder; a speed-evidence folder is read only where it lies")
    cmp = compare_occasions(folder, sides(claim.b), sides(claim.a), seed=seed, n_boot=n_boot)
    if cmp is None:
        return None
    if claim.datasets and cmp.dataset not in claim.datasets:
        raise ConfigError(f"claim {claim.id!r}: its folder {claim.folder} timed {cmp.dataset!r}, not {list(claim.datasets)}; "
                          "declare the folder's data set")

    def from_dist(dist: np.ndarray, nb: int) -> tuple[dict[str, float], float | None]:
        def below(x: float) -> float | None:
            q = percentile_p_above(dist, x)
            return None if q is None else 1.0 - q
        return _conclusions_from(lambda x: percentile_p_above(dist, x), below, claim, floor=1 / (nb + 1))

    p, contra = from_dist(cmp.dist, n_boot)
    by_occ = ", ".join("-" if r is None else f"{r:.3f}" for r in cmp.by_occasion)
    d = Decision(claim, cmp.dataset, cmp.n, cmp.a, cmp.b, cmp.ratio, "", test="occasions", p=p, p_contra=contra,
                 folders=[str(folder)], counts=f"A = {cmp.a_best}; B / A by occasion {by_occ}",
                 counts_side=_side(cmp.predicted, claim.null), per_problem_s=cmp.per_problem_s)
    pred = "no counts' prediction: " + cmp.calibration if cmp.predicted is None else \
        f"the work counts predict {fmt_iv(cmp.predicted, '.3f')} ({cmp.calibration})"
    d.n_boot = n_boot

    def redo(nb: int, s: int) -> tuple[dict[str, float], float | None]:
        again = compare_occasions(folder, sides(claim.b), sides(claim.a), seed=s, n_boot=nb, predict=False)
        return from_dist(again.dist, nb) if again is not None else ({}, None)

    d.redo = redo
    d.note = "; ".join(x for x in (f"{cmp.occasions} occasions x {cmp.n} problems", pred, cmp.load, cmp.segments) if x)
    if cmp.ratio[1] is None or cmp.ratio[1] == cmp.ratio[2]:
        d.p, d.p_contra = {}, None
        d.why_no_interval = "no figure" if cmp.ratio[0] is None else "no spread in the resamples"
    return d


def _agree(d: Decision) -> None:
    """A wall-clock verdict stands only where the work counts, priced by the same machine's
    calibration, put B on the same side of A (docs/speed_evidence.md: two layers)."""
    if d.test != "occasions" or d.verdict not in ("confirmed", "contradicted"):
        return
    wall = "faster" if (d.diff[0] or 0.0) > d.claim.null else "slower"
    if d.counts_side is None:
        d.verdict = f"undecided (wall-clock says {wall}; no work-count check: no calibration)"
    elif d.counts_side != wall:
        d.verdict = f"undecided (wall-clock says {wall}, the work counts say {d.counts_side})"


def best_conclusion(d: Decision) -> tuple[str, float]:
    name = min(d.p, key=lambda k: (d.p[k], k != "confirmed"))
    return name, d.p[name]


def testable(d: Decision) -> bool:
    return not d.verdict and bool(d.p) and d.n >= MIN_N_VERDICT and d.level_factor < math.inf


def settle_row(d: Decision, p_adj: float, decl: Declaration, family_size: int = 1) -> None:
    """The row's verdict from its adjusted p (or why it has none), and the n for power."""
    alpha = decl.alpha
    d.p_adj = p_adj
    if d.conclusion and p_adj < alpha:
        d.verdict = d.conclusion
        # Below the range: contradicted too when the other side of no effect is shown at the
        # same adjustment (the family's multiplier for this row: p_adj / p_raw).
        multiplier = p_adj / d.p_raw if d.p_raw else 1.0
        if d.conclusion == "smaller than claimed" and d.p_contra is not None and d.p_contra * multiplier < alpha:
            d.verdict = "contradicted"
        _agree(d)
        return
    if d.test == "exact_mcnemar" and d.paired01 and sum(d.paired01[:2]):
        # Sized for the declared loss:gain split at the discordance seen (its note says how).
        need = _mcnemar_need(d, decl, family_size)
    else:
        # Not decided: the n that would decide it with the declared power at the observed effect.
        point, low, high = d.diff
        lines = [d.claim.null] if d.claim.size is None else _size_lines(d)
        needs = [n_for_power(point, low, high, d.n, line=x, power=decl.power, level=1 - alpha) for x in lines]
        if any(v is None for v in needs) or not needs:
            why = d.why_no_interval or "no interval"
            d.verdict = f"undecided at this n ({why})"
            return
        need = max(needs)  # type: ignore[type-var]
    budget = decl.budget_factor * d.n
    if not math.isfinite(need):
        d.verdict = "not decidable at this scale (no effect seen)"
        return
    d.n_needed = max(d.n + 1, math.ceil(need))
    if d.n_needed > budget:
        d.verdict = f"not decidable at this scale (n = {d.n_needed:,} for {decl.power:.0%} power > {budget:,.0f})"
    elif d.claim.looks and d.n >= d.claim.looks[-1]:
        # The plan's last look: no later look was budgeted, so a claim still open here cannot be
        # decided by it (the declaration says so), whatever n would decide it.
        d.verdict = (f"not decidable at this scale (open at the last planned look, n = {d.claim.looks[-1]}; "
                     f"n = {d.n_needed:,} for {decl.power:.0%} power)")
    else:
        d.verdict = "undecided at this n"


def _mcnemar_need(d: Decision, decl: Declaration, family_size: int) -> float:
    """An undecided no-change row (McNemar): the n at which its plan finds the declared loss:gain
    split (decl.imbalance) with the declared power, sized from the discordance seen so far; its
    note also gets the non-inferiority margin the plan's last look supports if the changes
    balance. Levels: each look's one-sided nominal level over the family's tests (Holm's first
    step, so conservative)."""
    lost, gained, right, _ = d.paired01  # type: ignore[misc]
    n, claim = d.n, d.claim
    looks = claim.looks or (n,)
    nominal = sequential_boundaries(looks, decl.alpha, claim.spending) if claim.looks else [decl.alpha]  # type: ignore[arg-type]
    levels = [v / (1 if claim.one_sided else 2) / family_size for v in nominal]
    discordance = (lost + gained) / n
    pairs = discordant_for_power(decl.imbalance, decl.power, levels, [v / looks[-1] for v in looks])
    split = f"{decl.imbalance:g}:1 loss:gain split"
    if pairs is None:  # a lower bound of the n, past any budget
        d.note = "; ".join(x for x in (d.note, f"sizing: a {split} needs over {MAX_DISCORDANT:,} discordant problems") if x)
        return (MAX_DISCORDANT + 1) / discordance
    need = pairs / discordance
    plan = f"{len(looks)} planned looks" if claim.looks else "one look"
    sizing = (f"sizing: {lost + gained} of {n} discordant ({discordance:.1%}); a {split} needs {pairs} discordant "
              f"problems for {decl.power:.0%} power ({plan}, one-sided at {'alpha' if claim.one_sided else 'alpha / 2'}, "
              f"levels / {family_size} tests), "
              f"n = {max(n + 1, math.ceil(need)):,} at this discordance")
    margin = margin_supported(looks[-1], discordance, right / n, levels[-1], decl.power)
    if margin is not None:
        sizing += (f"; n = {looks[-1]} excludes a loss of {margin:.1%} of the problems (retention "
                   f"{1 - margin / (right / n):.3f}) with {decl.power:.0%} power if the changes balance")
    d.note = "; ".join(x for x in (d.note, sizing) if x)
    return need


def _size_lines(d: Decision) -> list[float]:
    """The range ends a size claim's undecided interval still has to clear."""
    low, high, _ = d.claim.size  # type: ignore[misc]
    point = d.diff[0]
    if point is None:
        return [low, high]
    if point > high:
        return [high]
    if point < low:
        return [low]
    return [low, high]


def _machine(row: pd.Series) -> Any:
    """The index's machine label of a run (None where the index has none)."""
    value = row.get("machine") if hasattr(row, "get") else None
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else value


def _own(row: pd.Series, figure: str) -> tuple[float | None, float | None, float | None]:
    """A run's own figure and interval, as its summary gave them (index columns)."""
    def num(v: Any) -> float | None:
        return None if v is None or (isinstance(v, float) and math.isnan(v)) else float(v)
    return num(row.get(figure)), num(row.get(f"{figure}_ci_low")), num(row.get(f"{figure}_ci_high"))


def spec_of(claim: Claim) -> str:
    if claim.figure == "overhead":
        return ".2%"
    return ".3f" if claim.figure in ("accuracy", "retention") or claim.estimand == "ratio" else ".2f"


def fmt_iv(iv: tuple[float | None, float | None, float | None] | None, spec: str, n: int | None = None) -> str:
    """`1.27 [1.00, 1.80]`; `n/a` at n <= 1 (no interval exists), never a zero-width bracket."""
    if iv is None or iv[0] is None:
        return "-"
    point, low, high = iv
    if n is not None and n <= 1:
        return f"{point:{spec}} [n/a]"
    if low is None or high is None:
        return f"{point:{spec}}"
    if low == high:
        return f"{point:{spec}} (no spread)"
    return f"{point:{spec}} [{low:{spec}}, {high:{spec}}]"


def fmt_p(p: float | None) -> str:
    if p is None:
        return "-"
    return "< 0.0001" if p < 1e-4 else f"{p:.4f}" if p < 0.001 else f"{p:.3f}"


def _p_is(p: float) -> str:
    """`p = 0.094`, `p < 0.0001`."""
    text = fmt_p(p)
    return f"p {text}" if text.startswith("<") else f"p = {text}"
