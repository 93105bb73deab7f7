"""The verdicts of a declaration's rows (issue 70 on top of docs/algorithms.md 7.6): each row's
provenance (pre-registered or declared after its data), one adjustment over every test of the
file with the per-family view beside it, resampling rows near their level re-run with more
resamples, the direction an undecided row leans to, and the exploratory pooling of retention
rows. decide() runs a whole declaration: the rows (decide.py), then all of this."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import pandas as pd

from ...errors import ConfigError
from ...measure.stats.verdicts import adjust_pvalues
from ...safe_files import open_regular
from ..compare import MIN_N_VERDICT
from .decide import (
    Decision, best_conclusion, cluster_gpu_hours, decide_on_set, fmt_iv, fmt_p, occasions_row, seconds_per_problem,
    settle_row, spec_of, testable,
)
from .declaration import DECLARATION, Claim, Declaration, Family, load_declaration
from .provenance import collect, now_iso, parse_time, rel_path, status
from .speed import sides


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
    root = Path(decl.path).parent if decl.path else Path(".")  # wall-clock claims' folders sit beside the declaration
    for claim in decl.claims:
        if claim.test == "occasions":
            rows = [d for d in (occasions_row(claim, root, seed=seed, n_boot=n_boot),) if d is not None]
        else:
            sets = claim.datasets or sorted(set(index.loc[index["status"] == "complete", "dataset"].dropna().astype(str)))
            rows = [d for ds in sets if (d := decide_on_set(claim, index, ds, seed=seed, n_boot=n_boot, alpha=decl.alpha)) is not None]
        for d in rows:
            _set_test(d)
        if claim.every_set and rows:
            out.append(_intersection_union(claim, rows))
            for d in rows:
                d.iut = "member"
        out.extend(rows)
    attach_provenance(out, decl)
    settle(out, decl, seed=seed)
    return out


def attach_provenance(out: list[Decision], decl: Declaration) -> None:
    """Each row's declaration date, its data's first record and whether it was pre-registered
    (provenance.py); a wall-clock row whose work-count gate was calibrated after its timings says so."""
    if not decl.path:
        return
    folders = {f for d in out for f in d.folders}
    speed = {f for d in out if d.test == "occasions" for f in d.folders}
    rec = collect(Path(decl.path), folders, speed)
    base = Path(decl.path).resolve().parent
    for d in out:
        declared = rec.declared.get(d.claim.id, {}).get("at") or (now_iso() + " (not committed)")
        times = [rec.data.get(rel_path(f, base), {}).get("at") for f in d.folders]
        times = [t for t in times if t]
        d.declared_at = declared
        d.data_at = min(times) if times else None
        d.registration = status(declared.split(" ")[0], d.data_at)
        if d.test == "occasions":
            cal = [rec.calibration.get(rel_path(f, base)) for f in d.folders]
            cal = [c for c in cal if c]
            if cal and d.data_at and parse_time(max(cal)) > parse_time(d.data_at):  # type: ignore[operator]
                d.note = "; ".join(x for x in (d.note, (
                    f"the work counts' calibration was taken at {max(cal)}, after the first timing ({d.data_at}): "
                    "the gate and the predicted speedups are in-sample")) if x)
    # Kept for write_claims to store beside the declaration, unless that is the packaged one (a
    # report never writes into the package; its copy beside the results is what is decided).
    if Path(decl.path).resolve() != DECLARATION.resolve():
        LAST_PROVENANCE[str(decl.path)] = rec


LAST_PROVENANCE: dict[str, Any] = {}


RESEED_FACTOR = 10  # a row within Monte Carlo error of its level is re-run with this many times the resamples
RESEED_MAX = 100_000 * 4  # ... up to this many
BORDER_SE = 3.0  # "within Monte Carlo error": |adjusted p - alpha| under this many standard errors


def _scale(d: Decision) -> str:
    return "one-sided" if d.claim.one_sided and d.claim.size is None and d.conclusion == "confirmed" else "two-sided"


def _mc(d: Decision) -> float | None:
    """The Monte Carlo standard error of a resampling row's p (on the p's own scale): the
    one-sided p is a share of B resamples, sqrt(p (1 - p) / B)."""
    if not d.n_boot or d.p_raw is None:
        return None
    one = d.p_raw if d.scale == "one-sided" else d.p_raw / 2
    se = math.sqrt(max(one * (1 - one), 1 / d.n_boot) / d.n_boot)
    return se if d.scale == "one-sided" else 2 * se


def _set_test(d: Decision) -> None:
    if testable(d):
        d.conclusion, d.p_raw = best_conclusion(d)
        d.scale = _scale(d)
        d.p_mc = _mc(d)


def _tests(out: list[Decision]) -> list[Decision]:
    return [d for d in out if d.iut != "member" and d.p_raw is not None]


def _eff(d: Decision) -> float:
    return min(1.0, d.p_raw * d.level_factor)  # type: ignore[operator]


def _primary_groups(out: list[Decision], decl: Declaration) -> list[tuple[list[Decision], str, int]]:
    """The sets of tests adjusted together, their rule and the size the sizing plans for: one over
    the whole declaration (multiplicity: report, the default) or one per family."""
    tests = _tests(out)
    if decl.multiplicity == "report":
        declared = sum(1 if c.every_set or not c.datasets else len(c.datasets) for c in decl.claims)
        return [(tests, decl.adjust, max(len(tests), declared))]
    groups = []
    for fam in decl.families.values():
        mine = [d for d in tests if d.claim.family == fam.id]
        declared = sum(1 if c.every_set or not c.datasets else len(c.datasets) for c in decl.claims if c.family == fam.id)
        groups.append((mine, fam.adjust, max(len(mine), declared)))
    return groups


def _adjusted(out: list[Decision], decl: Declaration) -> dict[int, tuple[float, int]]:
    got: dict[int, tuple[float, int]] = {}
    for tests, how, size in _primary_groups(out, decl):
        for d, p in zip(tests, adjust_pvalues([_eff(d) for d in tests], how)):  # type: ignore[arg-type]
            got[id(d)] = (p, size)
    return got


def _borderline(d: Decision, p_adj: float, alpha: float, k: float) -> bool:
    if d.p_mc is None or not d.p_raw:
        return False
    multiplier = p_adj / _eff(d) if _eff(d) > 0 else 1.0
    return abs(p_adj - alpha) < k * d.p_mc * d.level_factor * multiplier


def _reseed(out: list[Decision], decl: Declaration, seed: int) -> None:
    """A resampling row whose adjusted p lies within Monte Carlo error of alpha (its verdict could
    turn on the seed) is re-run with RESEED_FACTOR x the resamples, up to RESEED_MAX; one still
    within 2 standard errors there is marked seed-dependent (and decided as undecided)."""
    for _ in range(3):
        adj = _adjusted(out, decl)
        fam = _family_adjusted(out, decl)
        border = [d for d in _tests(out) if d.redo is not None and d.n_boot and d.n_boot < RESEED_MAX
                  and (_borderline(d, adj[id(d)][0], decl.alpha, BORDER_SE) or _borderline(d, fam[id(d)][0], decl.alpha, BORDER_SE))]
        if not border:
            break
        for d in border:
            before, b0 = d.p_raw, d.n_boot
            nb = min(RESEED_MAX, d.n_boot * RESEED_FACTOR)  # type: ignore[operator]
            d.p, d.p_contra = d.redo(nb, seed)  # type: ignore[misc]
            d.n_boot = nb
            _set_test(d)
            d.seed_note = (f"{d.seed_note}; " if d.seed_note else "") + \
                f"p within Monte Carlo error of the level at B = {b0:,} (p = {fmt_p(before)}): re-run with B = {nb:,}"
    adj = _adjusted(out, decl)
    fam = _family_adjusted(out, decl)
    for d in _tests(out):
        if d.n_boot and _borderline(d, adj[id(d)][0], decl.alpha, 2.0):
            d.seed_note = (f"{d.seed_note}; " if d.seed_note else "") + \
                f"seed-dependent: adjusted p {fmt_p(adj[id(d)][0])} within 2 Monte Carlo SE of alpha at B = {d.n_boot:,}"
        elif d.n_boot and _borderline(d, fam[id(d)][0], decl.alpha, 2.0):
            d.seed_note = (f"{d.seed_note}; " if d.seed_note else "") + \
                f"seed-dependent in the per-family view: adjusted p {fmt_p(fam[id(d)][0])} within 2 Monte Carlo SE of alpha at B = {d.n_boot:,}"


def settle(decisions: list[Decision], decl: Declaration, *, seed: int = 0) -> None:
    """Multiplicity and verdicts (docs/algorithms.md 7.6). Primary: one adjustment (the file's,
    Holm by default) over every confirmatory test of the declaration (an intersection-union
    claim is one test; a planned look's p scaled by alpha / its nominal level); a declaration
    with `multiplicity: family` adjusts within each family instead. Secondary, printed beside:
    the per-family view, families that test one hypothesis merged. A resampling row within Monte
    Carlo error of its level is re-run with more resamples first (_reseed)."""
    out = decisions
    _reseed(out, decl, seed)
    for d, (p, size) in ((d, _adjusted(out, decl)[id(d)]) for d in _tests(out)):
        settle_row(d, p, decl, family_size=size)
        if "seed-dependent" in d.seed_note and verdict_is_conclusion(d.verdict):
            d.verdict = f"undecided (seed-dependent: reads {d.verdict} at this seed)"
    _family_view(out, decl)
    for d in out:
        if d.iut == "member" and d.p_raw is not None:
            settle_row(d, min(1.0, d.p_raw * d.level_factor), decl)
            d.p_adj = None
        elif not d.verdict:
            if d.n < MIN_N_VERDICT and d.n:
                d.verdict = f"undecided (n={d.n} < {MIN_N_VERDICT})"
            elif d.level_factor == math.inf:
                d.verdict = "undecided (before the first planned look)"
            else:
                d.verdict = f"undecided ({d.why_no_interval or 'no test'})"
        if not verdict_is_conclusion(d.verdict) and not d.lean:
            d.lean = _lean(d)
        if d.n_needed is not None and d.test == "occasions":
            # The benchmark's timed seconds per problem (B's and A's, every occasion); no cluster
            # figure: a CPU's wall-clock claim is not rerun on the 70B cluster.
            d.cpu_hours = d.n_needed * d.per_problem_s / 3600 if d.per_problem_s else None
        elif d.n_needed is not None and d.folders:
            per = seconds_per_problem(d.folders)
            d.cpu_hours = d.n_needed * per / 3600 if per else None
            methods = [d.claim.b["method"]] + ([d.claim.a["method"]] if d.claim.a else [])
            d.cluster_gpu_hours = cluster_gpu_hours(d.n_needed, methods)


CONCLUSIONS = ("confirmed", "contradicted", "larger than claimed", "smaller than claimed")


def verdict_is_conclusion(verdict: str) -> bool:
    return any(verdict.startswith(c) for c in CONCLUSIONS)


def _lean(d: Decision) -> str:
    """Which conclusion an undecided row's estimate points to, with the estimate: "not
    decidable" must not hide a direction."""
    point = d.diff[0] if d.diff else None
    if point is None:
        return ""
    c, null = d.claim, d.claim.null
    if c.size is not None:
        low, high, _ = c.size
        side = ("contradicted" if point < null else "smaller than claimed" if point < low
                else "larger than claimed" if point > high else "confirmed")
    elif point == null:
        return f"no lean: estimate at the line ({fmt_iv(d.diff, spec_of(c), d.n)})"
    else:
        side = "confirmed" if (point - null) * c.direction > 0 else "contradicted"
    what = d.counts if d.test in ("exact_mcnemar", "exact_retention", "exact_accuracy") and d.counts else ""
    return f"leans {side}: {fmt_iv(d.diff, spec_of(c), d.n)}" + (f" ({what})" if what else "")


def hypothesis_key(d: Decision) -> tuple[Any, ...]:
    """What a row tests, whatever claim and family declare it: the figure's kind, the set and the
    two sides' identity (method, drafter, K). A loss claim and a retention claim of one run on one
    set test one hypothesis (the run keeps the target's answers); so do a one-occasion and a
    two-occasion speed claim of the same two configurations."""
    c = d.claim
    if c.hypothesis:
        return ("declared", c.hypothesis)
    kind = "quality" if c.figure in ("retention", "accuracy") else c.figure

    def ident(sel: Mapping[str, Any] | None) -> Any:
        if sel is None:
            return "target alone"
        if c.test == "occasions":
            ids = sorted((_config_identity(d, n) for n in sides(sel)), key=str)
            return ids[0] if len(ids) == 1 else ("best of", tuple(ids))
        return (str(sel.get("method")), str(sel.get("drafter", "model")), str(sel.get("K", "")))

    return (kind, str(d.dataset), ident(c.b), ident(c.a))


def _config_identity(d: Decision, name: str) -> Any:
    """A speed benchmark configuration's (method, drafter, K), from its occasion file's settings."""
    import json

    if name == "ar":
        return "target alone"
    for folder in d.folders:
        for occ in sorted(Path(folder).glob("occasion-*.jsonl")):
            try:
                with open_regular(occ, "r", encoding="utf-8") as fh:  # never a link or a FIFO
                    first = json.loads(fh.readline(1 << 20))  # the first record, bounded
                cfg = first["settings"][name]
                return (str(cfg["method"]["name"]), str(cfg["drafter"]["name"]), str(cfg["drafter"].get("k", "")))
            except ConfigError:  # a link or a special file where an occasion belongs: one error line
                raise
            except (OSError, ValueError, RecursionError, KeyError, TypeError, AttributeError):
                continue
    return name


def _family_adjusted(out: list[Decision], decl: Declaration) -> dict[int, tuple[float, str]]:
    """The secondary view's adjusted p of each test and its (merged) family."""
    tests = _tests(out)
    parent = {f: f for f in decl.families}
    parent.update({d.claim.family: d.claim.family for d in tests})

    def find(x: str) -> str:
        while parent[x] != x:
            x = parent[x]
        return x

    first: dict[Any, str] = {}
    for d in tests:
        key = hypothesis_key(d)
        if key in first and find(first[key]) != find(d.claim.family):
            parent[find(d.claim.family)] = find(first[key])
        first.setdefault(key, d.claim.family)
    groups: dict[str, list[Decision]] = {}
    got: dict[int, tuple[float, str]] = {}
    for d in tests:
        groups.setdefault(find(d.claim.family), []).append(d)
    for root, mine in groups.items():
        fams = sorted({d.claim.family for d in mine}, key=list(decl.families).index if all(
            f in decl.families for f in {d.claim.family for d in mine}) else str)
        fam = decl.families.get(root)
        how = fam.adjust if fam else "holm"
        for d, p in zip(mine, adjust_pvalues([_eff(d) for d in mine], how)):
            got[id(d)] = (p, " + ".join(fams))
    return got


def _family_view(out: list[Decision], decl: Declaration) -> None:
    """The secondary view: each family adjusted alone (its own rule), families that test one
    hypothesis merged into one, so that no hypothesis sits in two families."""
    fam = _family_adjusted(out, decl)
    for d in _tests(out):
        p, d.family_view = fam[id(d)]
        d.p_adj_family = p
        ok = bool(d.conclusion) and p < decl.alpha and "seed-dependent" not in d.seed_note
        gate = ""
        if ok and d.test == "occasions" and d.conclusion in ("confirmed", "contradicted"):
            wall = "faster" if (d.diff[0] or 0.0) > d.claim.null else "slower"
            ok = d.counts_side == wall
            gate = "" if ok else f" (wall-clock {wall}, work counts {d.counts_side or 'unpriced'})"
        d.verdict_family = d.conclusion if ok else "open" + gate


def pooled(decisions: list[Decision], *, n_perm: int = 100_000, seed: int = 0) -> list[dict[str, Any]]:
    """Exploratory pooling of undecided 0/1 retention rows of loose rules that share a set and
    lean the same way (issue 70): per problem, the configurations' net change against the one
    target alone (gains - losses) summed; under "no rule changes the answers' odds" each
    problem's net change is as likely negative as positive, so the p is a sign-flip
    randomisation test over problems (which keeps the rows' dependence: they share problems and
    the target's answers). Not a verdict: no claim declared it."""
    from ..labels import is_lossless

    rows = [d for d in decisions if d.per_problem and d.iut != "member" and not verdict_is_conclusion(d.verdict)
            and not is_lossless(str(d.claim.b.get("method"))) and d.paired01 and d.paired01[0] != d.paired01[1]]
    by: dict[tuple[str, str], list[Decision]] = {}
    for d in rows:
        lean = "loss" if d.paired01[0] > d.paired01[1] else "gain"  # type: ignore[index]
        by.setdefault((d.dataset, lean), []).append(d)
    out = []
    rng = np.random.default_rng(seed)
    for (ds, lean), mine in sorted(by.items()):
        # one row per configuration: a run decided by two claims (loss and retention) counts once
        seen: dict[str, Decision] = {}
        for d in mine:
            seen.setdefault(d.folders[0] if d.folders else d.claim.id, d)
        mine = list(seen.values())
        if len(mine) < 2:
            continue
        problems = sorted(set.intersection(*(set(d.per_problem) for d in mine)))  # type: ignore[arg-type]
        net = np.array([sum(d.per_problem[p] for d in mine) for p in problems], dtype=float)  # type: ignore[index]
        stat = float(net.sum())
        signs = rng.choice([-1.0, 1.0], size=(n_perm, len(net)))
        sims = signs @ np.abs(net)
        p = ((np.sum(sims <= stat) if lean == "loss" else np.sum(sims >= stat)) + 1) / (n_perm + 1)
        lost = sum(d.paired01[0] for d in mine)  # type: ignore[index]
        gained = sum(d.paired01[1] for d in mine)  # type: ignore[index]
        out.append({"dataset": ds, "lean": lean, "rows": [f"{d.claim.id} ({d.paired01[0]}/{d.paired01[1]})" for d in mine],  # type: ignore[index]
                    "problems": len(problems), "lost": lost, "gained": gained, "p": float(p), "n_perm": n_perm})
    return out


def _intersection_union(claim: Claim, rows: list[Decision]) -> Decision:
    """A claim on every set: confirmed when every set confirms it (the largest p), contradicted
    when some set contradicts it (the smallest, Bonferroni over the sets)."""
    iut = Decision(claim, f"every set ({len(rows)})", sum(d.n for d in rows), None, (None, None, None), (None, None, None), "",
                   test=rows[0].test, iut="every set", folders=[f for d in rows for f in d.folders])
    if not all(testable(d) for d in rows):
        iut.verdict = "undecided (some set has no test)"
        return iut
    conf = max(d.p.get("confirmed", 1.0) for d in rows)
    contra = min(1.0, len(rows) * min(d.p.get("contradicted", 1.0) for d in rows))
    iut.p = {"confirmed": conf, "contradicted": contra}
    iut.conclusion, iut.p_raw = best_conclusion(iut)
    iut.scale = _scale(iut)
    mcs = [d.p_mc for d in rows if d.p_mc is not None]
    iut.p_mc = max(mcs) if mcs else None
    boots = [d.n_boot for d in rows if d.n_boot]
    iut.n_boot = min(boots) if boots else None  # its p is one member's: that member's resolution
    iut.why_no_interval = "an intersection-union test has no single interval"
    iut.note = "intersection-union test: confirmed only if every set confirms at the unadjusted level (its p: the largest)"
    return iut
