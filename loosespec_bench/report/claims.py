"""The papers' testable claims, each decided from the runs: `python -m loosespec_bench.report claims`.

A claim compares two configurations on the same samples (report/compare.py: one paired
bootstrap over the problems both runs answered) or one configuration with its own target alone
(retention). Its verdict, for the difference B - A (or the retention) against the claimed
direction and margin:

- confirmed: the 95% interval lies entirely on the claimed side;
- contradicted: the interval lies entirely on the other side;
- undecided at this n: the interval straddles it. Then `n to decide` says how many paired
  problems would shrink the interval (half-width ~ 1/sqrt(n)) to the observed effect:
  n x (half-width / |effect|)^2, where the effect is the point's distance from 0 (or from the
  retention margin), and its cost on this CPU (the runs' own seconds per problem, both sides)
  and on the 8B -> 70B cluster run (costmodel's planner assumptions: 1024 new tokens, the
  method's and the target alone's rate, GPUs per job). With no effect at all (point on the
  line) no n decides it: "no effect seen".

Claims are data (CLAIMS): each names the selector of its A and B runs by index columns
(method, drafter, K, theta, W, criterion ...), the figure and the claimed direction.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import pandas as pd

from ..costmodel import SPEEDUP, TARGET_TPS
from ..stats import LEVEL, paired_bootstrap, ratio_of_sums, sign_test_p
from .compare import MIN_N_VERDICT, Row, compare_pair, load_run
from .tables import method_label

FLY = {"method": "fly", "theta": 0.3, "W": 6, "K": 15}
SPD15 = {"method": "spd", "drafter": "model", "K": 15}
SPD10 = {"method": "spd", "drafter": "model", "K": 10}
DM_JS = {"method": "dropmatch", "criterion": "js", "K": 10}
DM_NAIVE = {"method": "dropmatch", "criterion": "naive", "K": 10}
# experiment=dropmatch_autojudge: the judge's rows at their own draft length (K = 5 at
# scale=cpu; the paper's 10 on the cluster, where these selectors would read K=10 runs).
AJ_K = 5
SPD_AJ = {"method": "spd", "drafter": "model", "K": AJ_K}
AJ = {"method": "autojudge", "K": AJ_K}
DM_AJ = {"method": "dropmatch_autojudge", "K": AJ_K}
DM_K5 = {"method": "dropmatch", "criterion": "js", "K": AJ_K}  # DropMatch alone, the judge's rows
# The 8B -> 70B cluster run that the CPU verdicts are priced for (replicate_fly_70b at paper scale).
CLUSTER_PAIR, CLUSTER_GPUS, CLUSTER_NEW_TOKENS = "llama31-8b-70b", 4, 1024


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


CLAIMS: tuple[Claim, ...] = (
    Claim("fly_tau", "FLy", "FLy's tau is above SPD's at the same K, on every set", "tau",
          {**FLY, "drafter": "model"}, SPD15, source="FLy Table 1 (tau columns)"),
    Claim("fly_mla_tau", "FLy", "FLy + MLA's tau is above SPD's at the same K", "tau",
          {**FLY, "drafter": "mla"}, SPD15, source="FLy Table 1 (the released setting: MLA on)"),
    Claim("fly_speed", "FLy", "FLy (+ MLA) is faster than SPD at the same K", "speedup",
          {**FLY, "drafter": "mla"}, SPD15, source="FLy Table 1"),
    Claim("fly_mla", "FLy", "multi-level acceleration (MLA) makes FLy faster", "speedup",
          {**FLY, "drafter": "mla"}, {**FLY, "drafter": "model"}, source="FLy ablation (MLA)"),
    Claim("fly_retention", "FLy", "FLy keeps >= 99% of the target's accuracy", "retention",
          {**FLY, "drafter": "mla"}, None, margin=0.99, source="FLy abstract"),
    Claim("spd_retention", "(noise floor)", "SPD (lossless) keeps >= 99% of the target's accuracy", "retention",
          SPD15, None, margin=0.99, source="exact match is lossless up to bf16 near-ties"),
    Claim("spd10_retention", "(noise floor)", "SPD (lossless, K = 10) keeps >= 99% of the target's accuracy", "retention",
          SPD10, None, margin=0.99, source="exact match is lossless up to bf16 near-ties (DropMatch's draft length)"),
    Claim("theta_tau", "FLy", "a higher theta (stricter entropy gate) lowers tau", "tau",
          {**FLY, "drafter": "mla", "theta": 0.8}, {**FLY, "drafter": "mla", "theta": 0.2}, direction=-1,
          source="docs/algorithms.md 4.2: the gate rejects mismatches with H < theta"),
    Claim("theta_accuracy", "FLy", "a higher theta keeps accuracy closer to the target's", "accuracy",
          {**FLY, "drafter": "mla", "theta": 0.8}, {**FLY, "drafter": "mla", "theta": 0.2},
          source="FLy ablation (theta)"),
    Claim("window_tau", "FLy", "a longer deferral window W lowers tau", "tau",
          {**FLY, "drafter": "mla", "W": 9}, {**FLY, "drafter": "mla", "W": 3}, direction=-1,
          source="docs/algorithms.md 4.2: a deferral needs W-1 matches after the mismatch"),
    Claim("window_accuracy", "FLy", "a longer W keeps accuracy closer to the target's", "accuracy",
          {**FLY, "drafter": "mla", "W": 9}, {**FLY, "drafter": "mla", "W": 3}, source="FLy ablation (W)"),
    Claim("k_tau", "FLy", "a longer draft K raises tau", "tau",
          {**FLY, "drafter": "mla", "K": 20}, {**FLY, "drafter": "mla", "K": 10}, source="FLy ablation (K)"),
    Claim("dropmatch_tau", "DropMatch", "DropMatch's tau is about 10% above SPD's (draft length 10)", "tau",
          DM_JS, SPD10, source="DropMatch abstract / docs/algorithms.md section 8"),
    Claim("dropmatch_naive_tau", "DropMatch", "the naive criterion's tau is above SPD's too", "tau",
          DM_NAIVE, SPD10, source="DropMatch criterion ablation"),
    Claim("dropmatch_speed", "DropMatch", "DropMatch is faster than SPD (1.09-1.33x)", "speedup",
          DM_JS, SPD10, source="DropMatch abstract"),
    Claim("dropmatch_retention", "DropMatch", "DropMatch keeps the target's accuracy (>= 99%)", "retention",
          DM_JS, None, margin=0.99, source="DropMatch abstract"),
    # AutoJudge (trained on GSM8K): in distribution on GSM8K, out of it on IFEval. The DropMatch
    # paper's argument is read per set: the judge's retention holds on GSM8K and falls on IFEval,
    # while DropMatch + AutoJudge keeps both its tau gain and its retention there.
    Claim("autojudge_tau", "AutoJudge", "AutoJudge's tau is above SPD's at the same K", "tau",
          AJ, SPD_AJ, source="AutoJudge (arXiv 2504.20039); DropMatch's AutoJudge rows"),
    Claim("autojudge_speed", "AutoJudge", "AutoJudge is faster than SPD at the same K (the paper: it degrades out of distribution)",
          "speedup", AJ, SPD_AJ, source="DropMatch: AutoJudge trained on math degrades quickly on IFEval"),
    Claim("autojudge_retention", "AutoJudge", "AutoJudge keeps >= 99% of the target's score (the paper: in distribution only)",
          "retention", AJ, None, margin=0.99, source="DropMatch: AutoJudge trained on math degrades on IFEval"),
    Claim("dropmatch_k5_tau", "DropMatch", "DropMatch's tau is above SPD's at the same K (the AutoJudge rows' K)", "tau",
          DM_K5, SPD_AJ, source="DropMatch's AutoJudge rows (DropMatch alone)"),
    Claim("dropmatch_k5_speed", "DropMatch", "DropMatch is faster than SPD at the same K (the AutoJudge rows' K)", "speedup",
          DM_K5, SPD_AJ, source="DropMatch's AutoJudge rows (DropMatch alone)"),
    Claim("dropmatch_k5_retention", "DropMatch", "DropMatch keeps >= 99% of the target's score (the AutoJudge rows' K)", "retention",
          DM_K5, None, margin=0.99, source="DropMatch's AutoJudge rows (DropMatch alone)"),
    Claim("dropmatch_autojudge_tau", "DropMatch", "DropMatch + AutoJudge's tau is above SPD's at the same K", "tau",
          DM_AJ, SPD_AJ, source="DropMatch's AutoJudge rows"),
    Claim("dropmatch_autojudge_speed", "DropMatch", "DropMatch + AutoJudge is faster than SPD (keeps its speed out of distribution)",
          "speedup", DM_AJ, SPD_AJ, source="DropMatch's AutoJudge rows"),
    Claim("dropmatch_autojudge_retention", "DropMatch", "DropMatch + AutoJudge keeps >= 99% of the target's score", "retention",
          DM_AJ, None, margin=0.99, source="DropMatch's AutoJudge rows"),
)


@dataclass
class Decision:
    claim: Claim
    dataset: str
    n: int
    a: tuple[float | None, float | None, float | None] | None
    b: tuple[float | None, float | None, float | None]
    diff: tuple[float | None, float | None, float | None]  # B - A (retention: the retention itself)
    verdict: str
    n_needed: int | None = None
    cpu_hours: float | None = None
    cluster_gpu_hours: float | None = None
    folders: list[str] = field(default_factory=list)
    floor: tuple[float | None, float | None, float | None] | None = None  # retention: SPD's at the same set
    groups: str = ""  # "fr only": the figure rests on some of the set's groups (compare.Row.groups)


def floor_selection(claim: Claim) -> dict[str, Any]:
    """The run a retention claim is shown beside: the lossless rule (SPD, the draft model) at the
    claim's own K, whose retention is the bf16 noise floor of those settings."""
    return {**SPD15, "K": claim.b.get("K", SPD15["K"])}


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


def verdict(point: float | None, low: float | None, high: float | None, direction: int, n: int, line: float = 0.0) -> str:
    if n < MIN_N_VERDICT:
        return f"undecided (n={n} < {MIN_N_VERDICT})"
    if point is None or low is None or high is None:
        return "undecided (no interval)"
    lo, hi = (low - line, high - line) if direction > 0 else (line - high, line - low)
    if lo > 0:
        return "confirmed"
    if hi < 0:
        return "contradicted"
    return "undecided at this n"


def n_to_decide(point: float | None, low: float | None, high: float | None, n: int, line: float = 0.0) -> int | None:
    """Paired problems that would make an interval of this spread exclude `line` at this effect:
    the bound facing the line moves in as 1/sqrt(n). That bound's own distance from the point
    is used, not the half-width: a ratio's interval is skewed (retention 0.571 [0.167, 1.000]
    against 0.99 is decided by its upper side alone). An undecided claim needs more than n."""
    if point is None or low is None or high is None or n < 2:
        return None
    effect = abs(point - line)
    side = (high - point) if point < line else (point - low)
    if effect <= 1e-12:
        return None
    # Below MIN_N_VERDICT no verdict is given whatever the interval (a bootstrap over a handful
    # of problems understates its own spread).
    return max(n + 1, MIN_N_VERDICT, math.ceil(n * (side / effect) ** 2))


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


def _discordant(run_a: Any, run_b: Any) -> tuple[int, int]:
    """(A right and B wrong, A wrong and B right) over the problems both runs scored."""
    a_only = b_only = 0
    for sid, ra in run_a.records.items():
        rb = run_b.records.get(sid)
        ca, cb = (ra.get("score") or {}).get("correct"), ((rb or {}).get("score") or {}).get("correct")
        if isinstance(ca, (bool, int, float)) and isinstance(cb, (bool, int, float)):
            a_only += bool(ca) and not bool(cb)
            b_only += bool(cb) and not bool(ca)
    return a_only, b_only


def mcnemar_check(discordant: tuple[int, int], n: int, alpha: float = 1 - LEVEL) -> tuple[str, int | None] | None:
    """A paired accuracy difference rests on the discordant problems only. With few of them the
    bootstrap interval is too narrow (4 answers lost and none gained excludes 0, though the
    exact test gives p = 0.125), so a verdict also needs the exact McNemar (sign) test at alpha.
    None: the exact test agrees; else the undecided verdict and the n at which the same
    discordance would pass it."""
    a_only, b_only = discordant
    m = a_only + b_only
    if m == 0:
        return None
    p = sign_test_p(a_only, b_only)
    if p < alpha:
        return None
    need = None
    for k in range(2, 200):  # the same proportions at k times the problems
        if sign_test_p(round(k * a_only), round(k * b_only)) < alpha:
            need = k * n
            break
    return (f"undecided (the difference rests on {m} discordant problems, {a_only} against {b_only}: "
            f"exact McNemar p = {p:.3f})", need)


def _retention(run: Any, seed: int) -> tuple[tuple[float | None, float | None, float | None], int]:
    pairs = _pairs(run)
    if not pairs:
        return (None, None, None), 0
    cols = [[m for m, _ in pairs], [b for _, b in pairs]]
    return paired_bootstrap(cols, ratio_of_sums, seed=seed), len(pairs)


def no_loss_bound(pairs: list[tuple[float, float]], margin: float) -> tuple[str, int | None] | None:
    """Retention when no sample lost its answer. The bootstrap cannot bound the loss then: no
    resample holds a loss, so its lower bound sits at 1 (no change at all: the whole interval
    collapses to a point), which says nothing about how often answers are lost. The rule of
    three bounds the share of lost answers by 3/n (95%), so retention can be as low as
    1 + (gains / n - 3 / n) / target accuracy: the verdict waits for the n where that clears
    the margin at the same share of gains. Answers changed only for the better count as gains
    when scores are right/wrong (0/1); for graded scores only the no-change case applies."""
    if not pairs or any(m < b for m, b in pairs):
        return None
    binary = all(v in (0.0, 1.0) for pair in pairs for v in pair)
    if not binary and any(m != b for m, b in pairs):
        return None
    n = len(pairs)
    base = sum(b for _, b in pairs) / n
    if base <= 0:
        return None
    gains = sum(1 for m, b in pairs if m > b)
    low = 1 + (gains - 3) / n / base
    slack = (1 - margin) * base + gains / n
    need = math.ceil(3 / slack) if slack > 0 else None
    if low >= margin:
        return "confirmed", None
    what = f"no answer changed in {n}" if gains == 0 else f"no answer lost in {n}, {gains} gained"
    return f"undecided ({what}: the rule of three allows retention down to {max(low, 0):.2f})", need


def decide(index: pd.DataFrame, claims: tuple[Claim, ...] = CLAIMS, *, seed: int = 0, n_boot: int = 10_000) -> list[Decision]:
    out: list[Decision] = []
    for claim in claims:
        sets = claim.datasets or sorted(set(index.loc[index["status"] == "complete", "dataset"].dropna().astype(str)))
        for ds in sets:
            rb = select(index, claim.b, ds)
            ra = select(index, claim.a, ds) if claim.a is not None else None
            if rb is None or (claim.a is not None and ra is None):
                continue
            folders = [str(rb["run_dir"])] + ([str(ra["run_dir"])] if ra is not None else [])
            run_b = load_run(Path(rb["run_dir"]))
            if claim.figure == "retention":
                b, n = _retention(run_b, seed)
                if n == 0 or b[0] is None:
                    continue
                floor_row = select(index, floor_selection(claim), ds)
                floor = _retention(load_run(Path(floor_row["run_dir"])), seed)[0] if floor_row is not None else None
                d = Decision(claim, ds, n, None, b, b, verdict(*b, claim.direction, n, line=claim.margin), folders=folders, floor=floor)
                d.n_needed = n_to_decide(*b, n, line=claim.margin) if d.verdict.startswith("undecided") else None
                bound = no_loss_bound(_pairs(run_b), claim.margin) if n >= MIN_N_VERDICT else None
                if bound is not None:
                    d.verdict, d.n_needed = bound
                if d.verdict == "contradicted":
                    # A measured loss rests on the problems whose answer changed: the exact
                    # test on them must agree, as for accuracy claims.
                    pairs = _pairs(run_b)
                    exact = mcnemar_check((sum(m < b for m, b in pairs), sum(m > b for m, b in pairs)), n)
                    if exact is not None:
                        d.verdict, d.n_needed = exact
            elif claim.figure == "speedup" and _machine(ra) != _machine(rb):
                # Each speedup is paired in-process on its own machine, but two of them compare
                # only on one CPU: bf16 decodes at very different relative costs with and without
                # native bf16 kernels, so a difference across CPUs says nothing about the methods.
                d = Decision(claim, ds, 0, _own(ra, "speedup"), _own(rb, "speedup"), (None, None, None),
                             f"not comparable: speed measured on different CPUs (A: {_machine(ra)}; B: {_machine(rb)})",
                             folders=folders)
            else:
                rows = [r for r in compare_pair(load_run(Path(ra["run_dir"])), run_b, seed=seed, n_boot=n_boot) if r.figure == claim.figure]
                if not rows:
                    continue
                row: Row = rows[0]
                d = Decision(claim, ds, row.n, row.a, row.b, row.diff, verdict(*row.diff, claim.direction, row.n), folders=folders,
                             groups=row.groups)
                d.n_needed = n_to_decide(*row.diff, row.n) if d.verdict.startswith("undecided") else None
                if claim.figure == "accuracy" and not d.verdict.startswith("undecided"):
                    exact = mcnemar_check(_discordant(load_run(Path(ra["run_dir"])), run_b), row.n)
                    if exact is not None:
                        d.verdict, d.n_needed = exact
            if d.n_needed is not None:
                per = seconds_per_problem(folders)
                d.cpu_hours = d.n_needed * per / 3600 if per else None
                methods = [claim.b["method"]] + ([claim.a["method"]] if claim.a else [])
                d.cluster_gpu_hours = cluster_gpu_hours(d.n_needed, methods)
            out.append(d)
    return out


def _machine(row: pd.Series) -> Any:
    """The index's machine label of a run (None where the index has none)."""
    value = row.get("machine") if hasattr(row, "get") else None
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else value


def _own(row: pd.Series, figure: str) -> tuple[float | None, float | None, float | None]:
    """A run's own figure and interval, as its summary gave them (index columns)."""
    def num(v: Any) -> float | None:
        return None if v is None or (isinstance(v, float) and math.isnan(v)) else float(v)
    return num(row.get(figure)), num(row.get(f"{figure}_ci_low")), num(row.get(f"{figure}_ci_high"))


def _iv(iv: tuple[float | None, float | None, float | None] | None, spec: str) -> str:
    if iv is None or iv[0] is None:
        return "-"
    point, low, high = iv
    return f"{point:{spec}}" + (f" [{low:{spec}}, {high:{spec}}]" if low is not None and high is not None else "")


def format_claims(decisions: list[Decision]) -> str:
    lines = [
        "| claim | paper | data set | n | A | B | B - A (retention: B) | verdict | n to decide | CPU h at that n | 70B GPU-h at that n |",
        "|---|---|---|---:|---|---|---|---|---:|---:|---:|",
    ]
    for d in decisions:
        spec = ".3f" if d.claim.figure in ("accuracy", "retention") else ".2f"
        diff = _iv(d.diff, spec if d.claim.figure == "retention" else "+" + spec)
        if d.claim.figure == "retention" and d.floor is not None:
            diff += f" (SPD: {_iv(d.floor, spec)})"
        if not d.verdict.startswith("undecided"):
            need = "-"
        elif d.n_needed is not None:
            need = str(d.n_needed)
        else:
            need = "no interval" if None in d.diff else "no effect seen"
        lines.append(
            f"| {d.claim.text} ({d.claim.figure}) | {d.claim.paper} | {d.dataset} | {d.n or '-'}{f' ({d.groups})' if d.groups else ''} | {_iv(d.a, spec)} | {_iv(d.b, spec)} | "
            f"{diff} | **{d.verdict}** | {need} | {'-' if d.cpu_hours is None else f'{d.cpu_hours:.1f}'} | "
            f"{'-' if d.cluster_gpu_hours is None else f'{d.cluster_gpu_hours:.0f}'} |"
        )
    lines += [
        "",
        f"[low, high]: {LEVEL:.0%} paired bootstrap intervals over the problems both runs answered (speed: those timed in both). "
        "Verdict: confirmed / contradicted when the interval lies on one side of 0 (retention: of the 0.99 floor), in the "
        f"claim's direction or against it; undecided otherwise (and always below n={MIN_N_VERDICT}). n to decide: problems "
        "for an interval of this spread to exclude the line at the observed effect; priced at the runs' own CPU seconds per "
        f"problem and, for {CLUSTER_PAIR} ({CLUSTER_GPUS} GPUs a job, {CLUSTER_NEW_TOKENS} new tokens), at the planner's rates "
        "(loosespec_bench/costmodel.py) with the target alone run once per problem.",
    ]
    return "\n".join(lines)


def decisions_to_csv(decisions: list[Decision], path: Path) -> Path:
    rows = []
    for d in decisions:
        rows.append({
            "claim": d.claim.id, "paper": d.claim.paper, "text": d.claim.text, "figure": d.claim.figure, "dataset": d.dataset,
            "n": d.n, "groups": d.groups or None, **{f"a{s}": (d.a or (None, None, None))[i] for i, s in enumerate(("", "_ci_low", "_ci_high"))},
            **{f"b{s}": d.b[i] for i, s in enumerate(("", "_ci_low", "_ci_high"))},
            **{f"diff{s}": d.diff[i] for i, s in enumerate(("", "_ci_low", "_ci_high"))},
            "verdict": d.verdict, "n_to_decide": d.n_needed, "cpu_hours_at_n": d.cpu_hours,
            "cluster_gpu_hours_at_n": d.cluster_gpu_hours, "runs": ";".join(d.folders), "source": d.claim.source,
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


def write_claims(index: pd.DataFrame, out: Path, *, seed: int = 0) -> list[Path]:
    """claims.md / claims.csv (one verdict per claim and set) and loose_examples.md (the loose
    rules' runs that lost answers) in `out`."""
    decisions = decide(index, seed=seed)
    out.mkdir(parents=True, exist_ok=True)
    md = out / "claims.md"
    md.write_text("# The papers' claims, decided\n\n" + format_claims(decisions) + "\n", encoding="utf-8")
    paths = [md, decisions_to_csv(decisions, out / "claims.csv")]
    loose = index[(index["status"] == "complete") & index["method"].isin(["fly", "dropmatch", "autojudge", "dropmatch_autojudge"])]
    # The heading names the rule and its knobs: two DropMatch runs on one set differ only by criterion.
    examples = {f"{r['experiment']}/{r['run_id']}: {method_label(r)} on {r['dataset']}": loose_examples(Path(r["run_dir"]))
                for _, r in loose.iterrows()}
    ex = out / "loose_examples.md"
    ex.write_text(format_examples({k: v for k, v in examples.items() if v}) + "\n", encoding="utf-8")
    paths.append(ex)
    return paths
