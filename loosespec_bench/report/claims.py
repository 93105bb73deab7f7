"""The papers' testable claims, each decided from the runs: `python -m loosespec_bench.report claims`.

Claims are pre-registered data: a declaration file (claims.yaml; the packaged one is copied
beside the results the first time, and the copy there is what is decided, its sha256 printed in
claims.md) gives each claim its family, figure, estimand, test, direction or size, and planned
looks. A claim compares two configurations on the same problems (report/compare.py) or one
configuration with its own target alone (retention). docs/algorithms.md 7.6 says what each
verdict means; in short, per row (a claim on one set):

- a test gives one-sided p-values for each conclusion the claim allows, on the two-sided scale
  (2 x one-sided, so p < 0.05 is "the 95% interval excludes the line"): tau and speed by the
  paired BCa bootstrap (stats.BootstrapTest), paired 0/1 quality exactly (McNemar on the
  discordant split; the intervals of difference and retention by stats.ExactPairedBinary),
  graded quality by the declared paired test (t by default, or Wilcoxon signed-rank);
- direction claims conclude confirmed or contradicted; size claims ("about 10%", "1.09-1.33x")
  confirmed (the interval inside the stated range), larger / smaller than claimed (outside it,
  on the claimed side of no effect) or contradicted (on the other side of no effect);
- the row's p is its best-supported conclusion's; a claim "on every set" is one
  intersection-union test (its p the largest of its sets'; each set at the unadjusted level);
  within a family the p-values are adjusted (Holm by default; Benjamini-Hochberg or none), and a
  conclusion stands when its adjusted p is below alpha;
- otherwise: undecided at this n, with the n for 80% power at the observed effect, or not
  decidable at this scale when that n is over budget_factor x the run's n;
- planned looks (a group-sequential plan with O'Brien-Fleming or Pocock alpha spending) set the
  level at each look; a top-up that no claim planned leaves the verdict at the first look, and the
  topped-up figure is reported beside it as exploratory.
"""

from __future__ import annotations

import hashlib
import math
import shutil
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np
import pandas as pd

from ..costmodel import SPEEDUP, TARGET_TPS
from ..errors import ConfigError
from ..stats import (
    ADJUSTMENTS, LEVEL, PAIRED_TESTS, SPENDINGS, BootstrapTest, ExactPairedBinary, adjust_pvalues, mcnemar_one_sided,
    n_for_power, paired_bootstrap, proportion_interval, ratio_of_sums, sequential_boundaries, two_sided,
)
from .compare import MIN_N_VERDICT, Run, _diff, compare_pair, load_run
from .labels import method_label

# The 8B -> 70B cluster run that the CPU verdicts are priced for (replicate_fly_70b at paper scale).
CLUSTER_PAIR, CLUSTER_GPUS, CLUSTER_NEW_TOKENS = "llama31-8b-70b", 4, 1024
DECLARATION = Path(__file__).with_name("claims.yaml")  # the packaged declaration
DECLARATION_NAME = "claims.yaml"  # its copy beside a report's results
FIGURES = ("tau", "speedup", "accuracy", "retention")
TESTS = {"tau": ("bootstrap",), "speedup": ("bootstrap",), "accuracy": ("exact",), "retention": ("exact",)}
GRADED_TESTS = tuple(PAIRED_TESTS)  # a retention claim's test where the scores are graded
ESTIMANDS = {"tau": ("difference", "ratio"), "speedup": ("difference", "ratio"), "accuracy": ("difference",), "retention": ("retention",)}

# What each estimand and test is, in the words claims.md prints.
ESTIMAND_TEXT = {
    ("tau", "difference"): "pooled tau, B - A",
    ("tau", "ratio"): "pooled tau, B / A",
    ("speedup", "difference"): "speedup (ratio of summed rates), B - A",
    ("speedup", "ratio"): "speedup (ratio of summed rates), B / A",
    ("accuracy", "difference"): "accuracy, B - A (paired)",
    ("retention", "retention"): "retention: score / target alone's, same problems",
}
ADJUST_TEXT = {"holm": "Holm", "bh": "Benjamini-Hochberg", "none": "no adjustment"}
TEST_TEXT = {
    "bootstrap": "paired BCa bootstrap",
    "exact_accuracy": "exact McNemar (discordant split)",
    "exact_retention": "exact binomial (losses and gains, conditional on the target's answers)",
    "wilcoxon": "Wilcoxon signed-rank on score - margin x target's",
    "t": "paired t on score - margin x target's",
}


@dataclass(frozen=True)
class Claim:
    id: str
    paper: str
    text: str  # the claim as the paper (or its rule) states it
    figure: str  # tau | speedup | accuracy (compare) | retention (one run vs its target alone)
    b: Mapping[str, Any]  # the configuration the claim is about
    a: Mapping[str, Any] | None = None  # what it is compared with (None: its own target alone)
    direction: int = +1  # the claimed sign of B - A (retention: of retention - margin)
    margin: float = 0.0  # retention claims: the claimed floor (0.99)
    source: str = ""
    datasets: tuple[str, ...] | None = None  # None: every set where both configurations ran
    family: str = "claims"
    estimand: str = "difference"  # difference | ratio | retention
    test: str = "bootstrap"  # bootstrap | exact (0/1 quality) | wilcoxon
    graded_test: str = "t"  # a retention claim's test where the scores are graded (GRADED_TESTS)
    size: tuple[float, float, str] | None = None  # a size claim's range (low, high, as said)
    every_set: bool = False  # one intersection-union verdict over its sets
    looks: tuple[int, ...] | None = None  # planned looks (n per look), group-sequential
    spending: str = "obrien_fleming"

    def __post_init__(self) -> None:
        # Quality is never bootstrapped for a verdict: a claim built in code gets its figure's test.
        if self.figure == "retention" and self.estimand != "retention":
            object.__setattr__(self, "estimand", "retention")
        if self.test not in TESTS[self.figure]:
            object.__setattr__(self, "test", TESTS[self.figure][0])

    @property
    def null(self) -> float:
        """The figure's value at no effect (retention: the claimed margin)."""
        if self.figure == "retention":
            return self.margin
        return 1.0 if self.estimand == "ratio" else 0.0


@dataclass(frozen=True)
class Family:
    id: str
    title: str
    adjust: str


@dataclass(frozen=True)
class Declaration:
    claims: tuple[Claim, ...]
    families: Mapping[str, Family]
    alpha: float = 1 - LEVEL
    power: float = 0.8
    budget_factor: float = 10.0
    digest: str = ""
    path: str = ""
    version: Any = None
    declared: str = ""


def _claim(raw: Mapping[str, Any], families: Mapping[str, Family], where: str) -> Claim:
    def need(key: str) -> Any:
        if key not in raw:
            raise ConfigError(f"{where}: claim {raw.get('id', '?')!r} has no {key!r}; declare it")
        return raw[key]

    cid, figure = str(need("id")), str(need("figure"))
    if figure not in FIGURES:
        raise ConfigError(f"{where}: claim {cid!r}: figure {figure!r} must be one of {', '.join(FIGURES)}")
    estimand = str(raw.get("estimand", "retention" if figure == "retention" else "difference"))
    if estimand not in ESTIMANDS[figure]:
        raise ConfigError(f"{where}: claim {cid!r}: estimand {estimand!r} for {figure}: use {', '.join(ESTIMANDS[figure])}")
    test = str(raw.get("test", TESTS[figure][0]))
    if test not in TESTS[figure]:
        raise ConfigError(f"{where}: claim {cid!r}: test {test!r} for {figure}: use {', '.join(TESTS[figure])}")
    graded = str(raw.get("graded_test", "t"))
    if graded not in GRADED_TESTS:
        raise ConfigError(f"{where}: claim {cid!r}: graded_test {graded!r}: use {', '.join(GRADED_TESTS)}")
    family = str(raw.get("family", "claims"))
    if family not in families:
        raise ConfigError(f"{where}: claim {cid!r}: family {family!r} is not declared under families:")
    size = raw.get("size")
    if size is not None:
        try:
            low, high = float(size["low"]), float(size["high"])
        except (KeyError, TypeError, ValueError):
            raise ConfigError(f"{where}: claim {cid!r}: size needs numbers low and high (e.g. {{low: 1.05, high: 1.15}})") from None
        if not low < high or estimand != "ratio":
            raise ConfigError(f"{where}: claim {cid!r}: a size claim needs estimand: ratio and low < high (got {estimand}, {low}, {high})")
        size = (low, high, str(size.get("said", f"{low:g}-{high:g}x")))
    looks = raw.get("looks")
    spending = "obrien_fleming"
    if looks is not None:
        spending = str(looks.get("spending", spending)) if isinstance(looks, Mapping) else spending
        ns = looks.get("n") if isinstance(looks, Mapping) else looks
        if spending not in SPENDINGS or not isinstance(ns, list) or not ns:
            raise ConfigError(f"{where}: claim {cid!r}: looks: {{n: [10, 20, 30], spending: one of {', '.join(SPENDINGS)}}}")
        looks = tuple(int(v) for v in ns)
        sequential_boundaries(looks, 0.05, spending)  # validates the n (increasing, positive)
    direction = int(raw.get("direction", +1))
    if direction not in (-1, 1):
        raise ConfigError(f"{where}: claim {cid!r}: direction must be +1 or -1")
    sets = raw.get("sets")
    return Claim(
        cid, str(need("paper")), str(need("text")), figure, dict(need("b")), dict(raw["a"]) if raw.get("a") else None,
        direction=direction, margin=float(raw.get("margin", 0.0)), source=str(raw.get("source", "")),
        datasets=tuple(map(str, sets)) if sets else None, family=family, estimand=estimand, test=test,
        graded_test=graded, size=size, every_set=bool(raw.get("every_set", False)),
        looks=looks, spending=spending,
    )


def load_declaration(path: Path = DECLARATION) -> Declaration:
    """The claims declared in `path` (a claims.yaml), with the file's sha256 (first 12 hex)."""
    import yaml

    try:
        text = Path(path).read_bytes()
        data = yaml.safe_load(text.decode("utf-8")) or {}
    except OSError as err:
        raise ConfigError(f"cannot read the claims declaration {path}: {err.strerror or err}; pass --claims FILE") from None
    except yaml.YAMLError as err:
        raise ConfigError(f"the claims declaration {path} is not valid YAML ({err}); fix the file") from None
    where = str(path)
    default = str(data.get("adjust", "holm"))
    fams: dict[str, Family] = {}
    for fid, spec in (data.get("families") or {}).items():
        spec = spec or {}
        how = str(spec.get("adjust", default))
        if how not in ADJUSTMENTS:
            raise ConfigError(f"{where}: family {fid!r}: adjust {how!r} must be one of {', '.join(ADJUSTMENTS)}")
        fams[str(fid)] = Family(str(fid), str(spec.get("title", fid)), how)
    if default not in ADJUSTMENTS:
        raise ConfigError(f"{where}: adjust {default!r} must be one of {', '.join(ADJUSTMENTS)}")
    fams.setdefault("claims", Family("claims", "claims", default))
    claims = tuple(_claim(c, fams, where) for c in (data.get("claims") or []))
    ids = [c.id for c in claims]
    if len(set(ids)) != len(ids):
        raise ConfigError(f"{where}: claim ids repeat ({sorted({i for i in ids if ids.count(i) > 1})}); give each its own id")
    alpha = float(data.get("alpha", 1 - LEVEL))
    power = float(data.get("power", 0.8))
    if not (0 < alpha < 1 and 0 < power < 1):
        raise ConfigError(f"{where}: alpha ({alpha}) and power ({power}) must lie in (0, 1)")
    return Declaration(claims, fams, alpha=alpha, power=power, budget_factor=float(data.get("budget_factor", 10)),
                       digest=hashlib.sha256(text).hexdigest()[:12], path=where, version=data.get("version"),
                       declared=str(data.get("declared", "")))


CLAIMS: tuple[Claim, ...] = load_declaration().claims


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
    if sel.get("method") == "fly":
        return bool(row.get("no_window") is True or str(row.get("mode") or "code") != "code")
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
        gain = SPEEDUP.get(f"{m}@{CLUSTER_PAIR}", SPEEDUP.get(m, 1.0))
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


_proportion = proportion_interval  # k of n with its exact (Clopper-Pearson) 95% interval


def _is_binary(pairs: list[tuple[float, float]]) -> bool:
    return all(v in (0.0, 1.0) for pair in pairs for v in pair)


# ---- the tests of one row ------------------------------------------------------------------------
def _conclusions_from(p_above: Callable[[float], float | None], p_below: Callable[[float], float | None],
                      claim: Claim) -> tuple[dict[str, float], float | None]:
    """Each conclusion the claim allows with its p (two-sided scale), and for a size claim the p
    of "on the other side of no effect" (contradicted)."""
    def ts(p: float | None) -> float:
        return 1.0 if p is None else two_sided(p)

    up, down = (p_above, p_below) if claim.direction > 0 else (p_below, p_above)
    if claim.size is None:
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
    fn = (_quotient if claim.estimand == "ratio" else _diff)(row.stat, k)
    bt = BootstrapTest([*row.cols_a, *row.cols_b], fn, seed=seed, n_boot=n_boot)
    p, contra = _conclusions_from(bt.p_above, bt.p_below, claim)
    d = Decision(claim, row.dataset, row.n, row.a, row.b, bt.interval, "", groups=row.groups, test="bootstrap", p=p, p_contra=contra)
    if bt.p_above(claim.null) is None:  # no test: not counted in the family
        d.p, d.p_contra = {}, None
        d.why_no_interval = ("no figure" if bt.point is None else "no interval: too many undefined resamples"
                             if bt.interval[1] is None else "no spread in the resamples" if bt.n > 1 else "n/a at n = 1")
    return d


def _accuracy_row(claim: Claim, ra: Run, rb: Run, ds: str) -> Decision:
    lost, gained, n, right_a = _discordant(ra, rb)
    right_b = right_a - lost + gained
    up, down = mcnemar_one_sided(lost, gained)
    p_up, p_down = two_sided(up), two_sided(down)
    p = ({"confirmed": p_up, "contradicted": p_down} if claim.direction > 0 else {"confirmed": p_down, "contradicted": p_up})
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


def _one(claim: Claim, index: pd.DataFrame, ds: str, *, seed: int, n_boot: int, alpha: float) -> Decision | None:
    rb = select(index, claim.b, ds)
    ra = select(index, claim.a, ds) if claim.a is not None else None
    if rb is None or (claim.a is not None and ra is None):
        return None
    folders = [str(rb["run_dir"])] + ([str(ra["run_dir"])] if ra is not None else [])
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
                          f"{_fmt_iv(full.diff, _spec(claim))}, {_p_is(full.p[best])} ({reads}; "
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


def _best(d: Decision) -> tuple[str, float]:
    name = min(d.p, key=lambda k: (d.p[k], k != "confirmed"))
    return name, d.p[name]


def _testable(d: Decision) -> bool:
    return not d.verdict and bool(d.p) and d.n >= MIN_N_VERDICT and d.level_factor < math.inf


def _settle(d: Decision, p_adj: float, decl: Declaration) -> None:
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
        return
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
    else:
        d.verdict = "undecided at this n"


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


def decide(index: pd.DataFrame, claims: tuple[Claim, ...] | Declaration | None = None, *, seed: int = 0,
           n_boot: int = 10_000) -> list[Decision]:
    """Every declared claim on every set where its runs exist, tested, adjusted within its
    family, and given its verdict (docs/algorithms.md 7.6)."""
    if claims is None:
        decl = load_declaration()
    elif isinstance(claims, Declaration):
        decl = claims
    else:
        fams = {c.family: Family(c.family, c.family, "holm") for c in claims}
        decl = Declaration(tuple(claims), fams)
    out: list[Decision] = []
    for claim in decl.claims:
        sets = claim.datasets or sorted(set(index.loc[index["status"] == "complete", "dataset"].dropna().astype(str)))
        rows = [d for ds in sets if (d := _one(claim, index, ds, seed=seed, n_boot=n_boot, alpha=decl.alpha)) is not None]
        for d in rows:
            if _testable(d):
                d.conclusion, d.p_raw = _best(d)
        if claim.every_set and rows:
            out.append(_intersection_union(claim, rows))
            for d in rows:
                d.iut = "member"
        out.extend(rows)
    settle(out, decl)
    return out


def settle(decisions: list[Decision], decl: Declaration) -> None:
    """Multiplicity and verdicts: within each family the tests' p-values (an intersection-union
    claim is one test; a planned look's p scaled by alpha / its nominal level) are adjusted by
    the family's rule, and each row gets its verdict (docs/algorithms.md 7.6)."""
    out = decisions
    for fam in decl.families.values():
        tests = [d for d in out if d.claim.family == fam.id and d.iut != "member" and d.p_raw is not None]
        adj = adjust_pvalues([min(1.0, d.p_raw * d.level_factor) for d in tests], fam.adjust)  # type: ignore[arg-type]
        for d, p in zip(tests, adj):
            _settle(d, p, decl)
    for d in out:
        if d.iut == "member" and d.p_raw is not None:
            _settle(d, min(1.0, d.p_raw * d.level_factor), decl)
            d.p_adj = None
        elif not d.verdict:
            if d.n < MIN_N_VERDICT and d.n:
                d.verdict = f"undecided (n={d.n} < {MIN_N_VERDICT})"
            elif d.level_factor == math.inf:
                d.verdict = "undecided (before the first planned look)"
            else:
                d.verdict = f"undecided ({d.why_no_interval or 'no test'})"
        if d.n_needed is not None and d.folders:
            per = seconds_per_problem(d.folders)
            d.cpu_hours = d.n_needed * per / 3600 if per else None
            methods = [d.claim.b["method"]] + ([d.claim.a["method"]] if d.claim.a else [])
            d.cluster_gpu_hours = cluster_gpu_hours(d.n_needed, methods)


def _intersection_union(claim: Claim, rows: list[Decision]) -> Decision:
    """A claim on every set: confirmed when every set confirms it (the largest p), contradicted
    when some set contradicts it (the smallest, Bonferroni over the sets)."""
    iut = Decision(claim, f"every set ({len(rows)})", sum(d.n for d in rows), None, (None, None, None), (None, None, None), "",
                   test=rows[0].test, iut="every set", folders=[f for d in rows for f in d.folders])
    if not all(_testable(d) for d in rows):
        iut.verdict = "undecided (some set has no test)"
        return iut
    conf = max(d.p.get("confirmed", 1.0) for d in rows)
    contra = min(1.0, len(rows) * min(d.p.get("contradicted", 1.0) for d in rows))
    iut.p = {"confirmed": conf, "contradicted": contra}
    iut.conclusion, iut.p_raw = _best(iut)
    iut.why_no_interval = "an intersection-union test has no single interval"
    iut.note = "intersection-union test: confirmed only if every set confirms at the unadjusted level (its p: the largest)"
    return iut


def _machine(row: pd.Series) -> Any:
    """The index's machine label of a run (None where the index has none)."""
    value = row.get("machine") if hasattr(row, "get") else None
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else value


def _own(row: pd.Series, figure: str) -> tuple[float | None, float | None, float | None]:
    """A run's own figure and interval, as its summary gave them (index columns)."""
    def num(v: Any) -> float | None:
        return None if v is None or (isinstance(v, float) and math.isnan(v)) else float(v)
    return num(row.get(figure)), num(row.get(f"{figure}_ci_low")), num(row.get(f"{figure}_ci_high"))


# ---- claims.md -----------------------------------------------------------------------------------
def _spec(claim: Claim) -> str:
    return ".3f" if claim.figure in ("accuracy", "retention") or claim.estimand == "ratio" else ".2f"


def _fmt_iv(iv: tuple[float | None, float | None, float | None] | None, spec: str, n: int | None = None) -> str:
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


def _fmt_p(p: float | None) -> str:
    if p is None:
        return "-"
    return "< 0.0001" if p < 1e-4 else f"{p:.4f}" if p < 0.001 else f"{p:.3f}"


def _p_is(p: float) -> str:
    """`p = 0.094`, `p < 0.0001`."""
    text = _fmt_p(p)
    return f"p {text}" if text.startswith("<") else f"p = {text}"


def _estimand(d: Decision) -> str:
    text = ESTIMAND_TEXT[(d.claim.figure, d.claim.estimand)]
    if d.claim.size is not None:
        text += f", claimed {d.claim.size[2]}"
    elif d.claim.figure == "retention":
        text += f", >= {d.claim.margin:g}"
    else:
        text += f", {'> 0' if d.claim.estimand == 'difference' else '> 1'}" if d.claim.direction > 0 else \
            f", {'< 0' if d.claim.estimand == 'difference' else '< 1'}"
    return text


def family_counts(decisions: list[Decision]) -> dict[str, int]:
    """Tests per family (an intersection-union claim counts once)."""
    out: dict[str, int] = {}
    for d in decisions:
        if d.iut != "member" and d.p_raw is not None:
            out[d.claim.family] = out.get(d.claim.family, 0) + 1
    return out


def verdict_category(verdict: str) -> str:
    for name in ("confirmed", "contradicted", "larger than claimed", "smaller than claimed", "not decidable",
                 "not comparable"):
        if verdict.startswith(name):
            return name
    return "undecided"


def format_claims(decisions: list[Decision], decl: Declaration | None = None) -> str:
    decl = decl or load_declaration()
    counts = family_counts(decisions)
    fams = [f"{f.title} ({ADJUST_TEXT[f.adjust]}, "
            f"{counts.get(f.id, 0)} test{'s' if counts.get(f.id, 0) != 1 else ''})"
            for f in decl.families.values() if counts.get(f.id, 0)]
    tally: dict[str, int] = {}
    for d in decisions:
        if d.iut != "member":
            tally[verdict_category(d.verdict)] = tally.get(verdict_category(d.verdict), 0) + 1
    lines = [
        f"Declaration: `{Path(decl.path).name}` sha256 `{decl.digest}` (version {decl.version}; {decl.declared}). "
        f"alpha = {decl.alpha:g} per family; power for the planner {decl.power:.0%}; budget {decl.budget_factor:g} x the run's n.",
        "",
        "Families (error control, number of tests): " + "; ".join(fams) + ".",
        "",
        "Verdicts (intersection-union members not counted): " + ", ".join(f"{k} {v}" for k, v in sorted(tally.items())) + ".",
        "",
        "| claim | family | estimand | test | data set | n | A | B | estimate [95%] | counts | raw p | adj. p | verdict "
        "| n for 80% power | CPU h at that n | 70B GPU-h at that n | note |",
        "|---|---|---|---|---|---:|---|---|---|---|---:|---:|---|---:|---:|---:|---|",
    ]
    for d in decisions:
        spec = _spec(d.claim)
        side = ".3f" if d.claim.figure in ("accuracy", "retention") else ".2f"
        est = _fmt_iv(d.diff, spec if d.claim.figure == "retention" or d.claim.estimand == "ratio" else "+" + spec, d.n)
        if d.claim.figure == "retention" and d.floor is not None:
            est += f" (SPD: {_fmt_iv(d.floor, spec)})"
        need = str(d.n_needed) if d.n_needed is not None else "-"
        fam = decl.families.get(d.claim.family)
        adj = "(IUT: unadjusted)" if d.iut == "member" else _fmt_p(d.p_adj)
        lines.append(
            f"| {d.claim.text} ({d.claim.figure}) | {fam.title if fam else d.claim.family} | {_estimand(d)} | "
            f"{TEST_TEXT.get(d.test, '-')} | {d.dataset} | {d.n or '-'}{f' ({d.groups})' if d.groups else ''} | "
            f"{_fmt_iv(d.a, side, d.n)} | {_fmt_iv(d.b, side, d.n)} | {est} | {d.counts or '-'} | {_fmt_p(d.p_raw)} | {adj} | "
            f"**{d.verdict}** | {need} | {'-' if d.cpu_hours is None else f'{d.cpu_hours:.1f}'} | "
            f"{'-' if d.cluster_gpu_hours is None else f'{d.cluster_gpu_hours:.0f}'} | {d.note or '-'} |"
        )
    lines += [
        "",
        "Every p is on the two-sided scale (2 x the one-sided p of the row's best-supported conclusion), so p < 0.05 is "
        f"\"the {LEVEL:.0%} interval excludes the line\". adj. p: within the row's family ({', '.join(sorted({ADJUST_TEXT[f.adjust] for f in decl.families.values()}))}); "
        "a conclusion stands when its adjusted p is below alpha (a planned look: below that look's nominal level). "
        "Direction claims: confirmed / contradicted. Size claims: confirmed when the interval lies inside the stated range, "
        "larger / smaller than claimed when outside it on the claimed side of no effect, contradicted on the other side. "
        "\"on every set\": one intersection-union test (its row 'every set'; each set at the unadjusted level). "
        "Undecided at this n: the n for 80% power at the observed effect (the bound facing the line shrinks as 1/sqrt(n)); "
        "above budget x n: not decidable at this scale. A and B: each side's figure (quality: exact Clopper-Pearson "
        f"intervals); tau and speed: {LEVEL:.0%} paired BCa bootstrap over the problems both runs answered (speed: timed in both). "
        f"No verdict below n = {MIN_N_VERDICT}. Costs: the runs' own CPU seconds per problem and, for {CLUSTER_PAIR} "
        f"({CLUSTER_GPUS} GPUs a job, {CLUSTER_NEW_TOKENS} new tokens), the planner's rates (loosespec_bench/costmodel.py). "
        "docs/algorithms.md 7.6 defines each verdict.",
    ]
    return "\n".join(lines)


def decisions_to_csv(decisions: list[Decision], path: Path) -> Path:
    rows = []
    for d in decisions:
        rows.append({
            "claim": d.claim.id, "paper": d.claim.paper, "text": d.claim.text, "figure": d.claim.figure, "dataset": d.dataset,
            "family": d.claim.family, "estimand": _estimand(d), "test": TEST_TEXT.get(d.test, ""), "iut": d.iut or None,
            "n": d.n, "groups": d.groups or None, **{f"a{s}": (d.a or (None, None, None))[i] for i, s in enumerate(("", "_ci_low", "_ci_high"))},
            **{f"b{s}": d.b[i] for i, s in enumerate(("", "_ci_low", "_ci_high"))},
            **{f"estimate{s}": d.diff[i] for i, s in enumerate(("", "_ci_low", "_ci_high"))},
            "counts": d.counts or None, "p_raw": d.p_raw, "p_adjusted": d.p_adj, "conclusion_tested": d.conclusion or None,
            "verdict": d.verdict, "n_for_power": d.n_needed, "cpu_hours_at_n": d.cpu_hours,
            "cluster_gpu_hours_at_n": d.cluster_gpu_hours, "note": d.note or None, "runs": ";".join(d.folders), "source": d.claim.source,
        })
    path.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


# ---- the loose accepts that changed an answer ---------------------------------------------------
def _decoder(run_dir: Path) -> Any:
    """The run's target tokenizer's decode (embedded models: their converted folder; a hub id:
    the local cache only), or None where it cannot be loaded offline: token ids are shown then."""
    import yaml

    try:
        from ..safe_files import read_text

        cfg = yaml.safe_load(read_text(run_dir / "config.yaml"))  # never through a link or a FIFO
        path = str(cfg["pair"]["target"]["path"])
        from transformers import AutoTokenizer

        if path.startswith("embedded:"):
            from ..models.loading import embedded_dir

            path = str(embedded_dir(path.split(":", 1)[1]))
        tok = AutoTokenizer.from_pretrained(path, local_files_only=True)
    except Exception:  # no config, a tiny model, no offline copy: ids instead of text
        return None
    return lambda ids: tok.decode(ids, skip_special_tokens=True)


def loose_examples(run_dir: Path, limit: int = 3) -> list[dict[str, Any]]:
    """Samples where a loose accept went with a changed answer, up to `limit` each way: lost (the
    loose rule wrong, the target alone right) first, then gained (the reverse: a rule that changes
    answers both ways reads as noise, one that only loses as damage). Each with its first loose
    accept: the text before it, the draft's token kept, the target's token it replaced, and both
    final answers (from the per-step records: rec["steps"])."""
    run = load_run(run_dir)
    decode = _decoder(run_dir)
    show = decode or (lambda ids: " ".join(map(str, ids)))
    out: list[dict[str, Any]] = []
    for change, (method_ok, target_ok) in (("lost", (False, True)), ("gained", (True, False))):
        found = 0
        for rec in run.records.values():
            base = rec.get("baseline") or {}
            if not ((base.get("score") or {}).get("correct") is target_ok and (rec.get("score") or {}).get("correct") is method_ok):
                continue
            emitted = 0
            for step in rec.get("steps", []):
                loose = step.get("loose_accepted") or []
                if loose and "target_tokens" in step:
                    pos = loose[0]
                    at = emitted + pos
                    out.append({
                        "id": rec["id"],
                        "change": change,
                        "context": show(rec["output_ids"][max(0, at - 16):at]),
                        "draft_token": show([step["draft"][pos]]),
                        "target_token": show([step["target_tokens"][pos]]),
                        "loose_accepts_in_sample": sum(len(s.get("loose_accepted") or []) for s in rec.get("steps", [])),
                        "answer": _answer(rec.get("score") or {}, rec.get("reference")),
                        "target_answer": _answer(base.get("score") or {}, rec.get("reference")),
                        "reference": _reference(rec.get("reference")),
                    })
                    found += 1
                    break
                emitted += step["accepted"] + 1
            if found >= limit:
                break
    return out


def _answer(score: Mapping[str, Any], reference: Any) -> Any:
    """What a sample answered, in the words its task scores it by: the extracted answer; for an
    instruction-following task (IFEval: no single answer) the instructions it failed, by the strict
    check; for a code task (no extracted answer: the tests decide) passed, or the last line the
    failing tests printed; for graded recall (NIAH) the recall and the values it missed."""
    if score.get("pred") is not None:
        return score["pred"]
    if "inst_strict" in score:
        ids = reference.get("instruction_id_list", []) if isinstance(reference, Mapping) else []
        failed = [ids[i] if i < len(ids) else f"instruction {i}" for i, ok in enumerate(score["inst_strict"]) if not ok]
        return ("failed " + ", ".join(failed)) if failed else "all instructions followed"
    if "status" in score:  # sandboxed tests: the reader needs why they failed, not the traceback
        if score["status"] == "passed":
            return "passed"
        last = [ln.strip() for ln in str(score.get("output") or "").splitlines() if ln.strip()]
        return f"{score['status']}: {last[-1]}" if last else str(score["status"])
    if "recall" in score:
        values = reference.get("values", []) if isinstance(reference, Mapping) else []
        missed = [v for v, hit in zip(values, score.get("found") or []) if not hit]
        return f"recall {score['recall']:.2f}" + (f", missed {', '.join(map(str, missed))}" if missed else "")
    return score.get("pred")


def _reference(reference: Any) -> Any:
    """The reference as a reader needs it: an IFEval record is its instruction ids, a code problem
    its entry point (the prompt and tests are in the sample), a needle its key and value count."""
    if isinstance(reference, Mapping):
        if "instruction_id_list" in reference:
            return ", ".join(reference["instruction_id_list"])
        if "entry_point" in reference:
            return f"tests of {reference['entry_point']}()"
        if "values" in reference and "key" in reference:
            return f"{len(reference['values'])} values of {reference['key']}"
    return reference


def format_examples(examples_by_run: Mapping[str, list[dict[str, Any]]]) -> str:
    lines = ["# Loose accepts that changed an answer", "",
             "Per run, up to three samples each way: lost (the loose rule answered wrongly, the target alone rightly),",
             "then gained (the reverse), each with its first loose accept (the draft's token kept where the target",
             "would have written its own). The first loose accept is not necessarily the one that changed the answer;",
             "`loose accepts` counts them all. A rule that only loses answers damages them; one that changes them both",
             "ways at the rate the lossless rules do (noise_floor.md) is within bf16's noise.", ""]
    for name, examples in examples_by_run.items():
        lines.append(f"## {name}")
        if not examples:
            lines += ["", "No sample where a loose accept went with a changed answer.", ""]
            continue
        lines += ["", "| sample | change | text before | draft kept | target's token | loose accepts | answer | target alone | reference |",
                  "|---|---|---|---|---|---:|---|---|---|"]
        for e in examples:
            cells = [e["id"], e["change"], "…" + e["context"], e["draft_token"], e["target_token"], str(e["loose_accepts_in_sample"]),
                     str(e["answer"]), str(e["target_answer"]), str(e["reference"])[:80]]
            lines.append("| " + " | ".join(c.replace("|", "\\|").replace("\n", "⏎") for c in cells) + " |")
        lines.append("")
    return "\n".join(lines)


def declaration_for(out: Path, claims: Path | None = None) -> Declaration:
    """The declaration a report in `out` decides: `claims` when given, else out/claims.yaml,
    else the packaged one, which is then copied to out/claims.yaml (the copy beside the results
    is the pre-registration: edit it there, and its hash in claims.md changes)."""
    if claims is not None:
        return load_declaration(claims)
    beside = out / DECLARATION_NAME
    if not beside.is_file():
        out.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(DECLARATION, beside)
    return load_declaration(beside)


def write_claims(index: pd.DataFrame, out: Path, *, seed: int = 0, claims: Path | None = None) -> list[Path]:
    """claims.md / claims.csv (one verdict per claim and set, under the declaration in
    out/claims.yaml or `claims`) and loose_examples.md (the loose rules' runs that lost answers)
    in `out`."""
    decl = declaration_for(out, claims)
    decisions = decide(index, decl, seed=seed)
    out.mkdir(parents=True, exist_ok=True)
    md = out / "claims.md"
    md.write_text("# The papers' claims, decided\n\n" + format_claims(decisions, decl) + "\n", encoding="utf-8")
    paths = [md, decisions_to_csv(decisions, out / "claims.csv")]
    loose = index[(index["status"] == "complete") & index["method"].isin(["fly", "dropmatch", "autojudge", "dropmatch_autojudge"])]
    # The heading names the rule and its knobs: two DropMatch runs on one set differ only by criterion.
    examples = {f"{r['experiment']}/{r['run_id']}: {method_label(r)} on {r['dataset']}": loose_examples(Path(r["run_dir"]))
                for _, r in loose.iterrows()}
    ex = out / "loose_examples.md"
    ex.write_text(format_examples({k: v for k, v in examples.items() if v}) + "\n", encoding="utf-8")
    paths.append(ex)
    return paths
