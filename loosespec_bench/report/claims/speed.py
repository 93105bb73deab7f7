"""Wall-clock claims decided from a speed-evidence folder (python -m loosespec_bench.bench.speed):
configurations timed interleaved per problem, in one process per occasion, over several
occasions. A claim's selectors name the benchmark's configurations (`b: {config: fly_mla}`;
`a: {config: spd_k15}`, `a: {best_of: [spd_k5, spd_k10, spd_k15]}`, or no `a`: the target
alone). The estimand is B's pooled rate over A's, its distribution the two-way bootstrap over
problems and occasions (stats.occasions.occasion_rate_ratio); the work counts, priced by the
calibration the folder's analysis used, give the same ratio without timing noise, and a verdict
stands only where both layers agree (decide.py; docs/algorithms.md 7.6)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from ...measure.costmodel import Calibration, ForwardCost
from ...errors import ConfigError
from ...measure.occasion_files import cell_table, load_rows, read_args, read_calibration, unfinished_occasions
from ...measure.speed_configs import TARGET_ALONE  # the benchmark's name for the target alone (declared once)
from ...store.declarations import check_calibration
from ...measure.stats.intervals import LEVEL
from ...measure.stats.occasions import occasion_bootstrap, occasion_rate_ratio


def sides(sel: Mapping[str, Any] | None) -> list[str]:
    """The configurations a selector names: one (`config`), several (`best_of`), or the target
    alone (no selector)."""
    if sel is None:
        return [TARGET_ALONE]
    if "best_of" in sel:
        return [str(c) for c in sel["best_of"]]
    return [str(sel["config"])]


def check_selector(sel: Any, where: str, side: str) -> None:
    """A wall-clock claim's selector: {config: NAME} (or, for A, {best_of: [NAME, NAME, ...]})."""
    ok = isinstance(sel, Mapping) and (
        (set(sel) == {"config"} and isinstance(sel["config"], str) and sel["config"])
        or (side == "a" and set(sel) == {"best_of"} and isinstance(sel["best_of"], list) and len(sel["best_of"]) >= 2
            and all(isinstance(c, str) and c for c in sel["best_of"])))
    if not ok:
        extra = " or {best_of: [spd_k5, spd_k10, spd_k15]}" if side == "a" else ""
        raise ConfigError(f"{where}: {side}: a wall-clock claim (test: occasions) names the benchmark's configurations: "
                          f"{{config: fly_mla}}{extra}")


@dataclass
class OccasionComparison:
    dataset: str
    n: int  # distinct problems with a clean cell for every configuration compared
    occasions: int
    ratio: tuple[float | None, float | None, float | None]  # B's pooled rate / A's (best), two-way interval
    dist: np.ndarray  # its bootstrap distribution
    a: tuple[float | None, float | None, float | None]  # A's (best's) speedup over the target alone
    b: tuple[float | None, float | None, float | None]
    a_best: str  # the configuration A's figure is (its best setting where best_of)
    by_occasion: list[float | None] = field(default_factory=list)  # the ratio on each occasion alone
    predicted: tuple[float | None, float | None, float | None] | None = None  # the counts' ratio
    calibration: str = ""  # where the prediction's costs came from, or why there is none
    load: str = ""
    per_problem_s: float = 0.0  # B's and A's timed seconds per problem over all occasions
    segments: str = ""  # occasions that ran in several processes or on several CPUs


def _interval(point: float | None, dist: np.ndarray) -> tuple[float | None, float | None, float | None]:
    if point is None or dist.size == 0:
        return point, None, None
    alpha = (1 - LEVEL) / 2
    return point, float(np.quantile(dist, alpha)), float(np.quantile(dist, 1 - alpha))


def compare_occasions(folder: Path, b: list[str], a: list[str], *, seed: int = 0, n_boot: int = 10_000,
                      predict: bool = True) -> OccasionComparison | None:
    """B against A (their best, where several) in one speed-evidence folder; None while it has
    no finished occasion."""
    rows, starts = load_rows(folder)
    if not rows:
        return None
    args = read_args(folder)
    occasions = sorted({r["occasion"] for r in rows})
    problems = sorted({r["problem"] for r in rows})
    present = {r["config"] for r in rows}
    missing = sorted(set(b + a + [TARGET_ALONE]) - present)
    if missing:
        raise ConfigError(f"{folder}: no timings of {missing} (it timed {sorted(present)}); "
                          "declare the benchmark's configuration names, or rerun it with --configs naming them")
    cell = {(r["occasion"], r["problem"], r["config"]): r for r in rows}

    names = sorted(set(b + a + [TARGET_ALONE]))
    tok = {c: cell_table(cell, occasions, problems, c, lambda r: r["new_tokens"], clean=True) for c in names}
    sec = {c: cell_table(cell, occasions, problems, c, lambda r: r["wall_s"], clean=True) for c in names}
    point, dist = occasion_rate_ratio(tok, sec, b[0], a, n_boot=n_boot, seed=seed)
    ok = np.ones(tok[b[0]].shape, dtype=bool)  # the cells the ratio pools: clean for every side
    for c in {b[0], *a}:
        ok &= np.isfinite(sec[c])
    # A's figure: its best setting over those cells (the one the ratio's point divides by).
    rates = {c: tok[c][ok].sum() / sec[c][ok].sum() if ok.any() else 0.0 for c in a}
    a_best = max(a, key=lambda c: rates[c])
    if not predict:  # the wall-clock ratio's distribution only (a re-run with more resamples)
        return OccasionComparison(dataset=str(args.get("dataset", "")), n=int(ok.any(axis=0).sum()), occasions=len(occasions),
                                  ratio=_interval(point, dist), dist=dist, a=(None, None, None), b=(None, None, None), a_best="")
    speedup = {c: occasion_bootstrap(tok[c], sec[c], tok[TARGET_ALONE], sec[TARGET_ALONE], n_boot=min(n_boot, 2000), seed=seed)
               for c in {b[0], a_best}}
    by_occ = []
    for i in range(len(occasions)):
        pt, _ = occasion_rate_ratio({c: t[i:i + 1] for c, t in tok.items()}, {c: s[i:i + 1] for c, s in sec.items()},
                                    b[0], a, n_boot=1, seed=seed)
        by_occ.append(pt)
    cmp = OccasionComparison(
        dataset=str(args.get("dataset", "")), n=int(ok.any(axis=0).sum()), occasions=len(occasions),
        ratio=_interval(point, dist), dist=dist, a=speedup[a_best], b=speedup[b[0]], a_best=a_best, by_occasion=by_occ,
        per_problem_s=float(sum(np.nansum(sec[c]) for c in {b[0], *a}) / max(1, len(problems))),
    )
    cmp.predicted, cmp.calibration = _predicted(folder, cell, occasions, problems, b[0], a, seed=seed, n_boot=n_boot)
    shares = [r.get("others_share") for r in rows if r.get("others_share") is not None]
    dirty = len({(r["occasion"], r["problem"]) for r in rows if r.get("contaminated")})
    cmp.load = (f"others' CPU share median {np.median(shares):.1%}, max {np.max(shares):.1%}; " if shares else "load unrecorded; ") + \
        f"{dirty} problem block{'s' if dirty != 1 else ''} contaminated (left out of the wall-clock)"
    cmp.segments = _segments(starts)
    if unfinished_occasions(folder):
        cmp.load += f"; unfinished, left out: {', '.join(unfinished_occasions(folder))}"
    return cmp


def _predicted(folder: Path, cell: Mapping[tuple[Any, Any, str], dict[str, Any]], occasions: list[Any], problems: list[Any],
               b: str, a: list[str], *, seed: int, n_boot: int) -> tuple[tuple[float | None, float | None, float | None] | None, str]:
    """The same ratio from the work counts priced by the folder's calibration (every cell, timed
    clean or not: the counts depend only on the tokens)."""
    raw = read_calibration(folder)
    if raw is None:
        return None, "no calibration.json in the folder (the analysis found no calibration for its machine)"
    check_calibration(raw, f"{folder}/calibration.json")  # finite, positive costs: never a prediction from NaN (store/declarations.py)
    try:
        target = ForwardCost.from_dict(raw["target"])
        draft = ForwardCost.from_dict(raw["draft"]) if raw.get("draft") else None
    except (KeyError, TypeError, ValueError) as err:
        raise ConfigError(f"{folder}/calibration.json is not a calibration ({err}); rerun the analysis (--analyse-only)") from None
    # A calibration that prices some forward below nothing (costmodel.ForwardCost.nonphysical) is
    # well-formed but unusable: the claim keeps its measured figures and says why it has no
    # prediction, rather than stopping the whole claims report.
    for role, cost in (("target", target), ("draft", draft)):
        why = cost.nonphysical() if cost is not None else None
        if why:
            return None, (f"{folder}/calibration.json's {role}.{why}; measure it again on a quiet machine "
                          "(python -m loosespec_bench.calibrate --repeats 9), then rerun the analysis (--analyse-only)")
    try:
        cal = Calibration.from_dict(raw, where=f"{folder}/calibration.json")
    except (KeyError, TypeError, ValueError) as err:
        raise ConfigError(f"{folder}/calibration.json is not a calibration ({err}); rerun the analysis (--analyse-only)") from None
    # Every cell with counts, timed clean or not (a record without counts: NaN, left out).
    tok = {c: cell_table(cell, occasions, problems, c, lambda r: r["new_tokens"] if r.get("work") else np.nan) for c in {b, *a}}
    sec = {c: cell_table(cell, occasions, problems, c, lambda r: cal.predict_s(r["work"]) if r.get("work") else np.nan) for c in {b, *a}}
    point, dist = occasion_rate_ratio(tok, sec, b, a, n_boot=n_boot, seed=seed)
    iv = _interval(point, dist)
    err, how = calibration_error(folder, raw, against_target=a == [TARGET_ALONE])
    if err and iv[1] is not None and iv[2] is not None:
        counts = f"{iv[0]:.3f} [{iv[1]:.3f}, {iv[2]:.3f}] from the counts alone"
        iv = (iv[0], iv[1] * float(np.exp(-err)), iv[2] * float(np.exp(err)))
        return iv, f"{raw.get('source') or 'calibration.json'}; widened by the calibration's error, x/÷ {np.exp(err):.3f} ({how}; {counts})"
    return iv, str(raw.get("source") or "calibration.json")


def calibration_error(folder: Path, raw: Mapping[str, Any], *, against_target: bool) -> tuple[float, str]:
    """The calibration's error on the log scale, which a predicted speedup's interval leaves out
    unless it is added: for a speedup over the target alone, the larger of its own check (a timed
    target-alone decode over its price) and the worst measured / predicted gap of the folder's
    configurations (report.json); for a ratio of two configurations, priced by one calibration,
    the error common to both cancels and what is left is the spread of those gaps across the
    configurations. 0 where neither is recorded. The gaps are in-sample where the calibration was
    taken after the timings (provenance.py says so in the row's note)."""
    import json

    check = ((raw.get("check") or {}) if isinstance(raw.get("check"), Mapping) else {}).get("target_alone_decode_over_predicted")
    gaps: list[float] = []
    try:
        from ...safe_files import load_json_declaration  # never a link or a FIFO, bounded

        rep = load_json_declaration(Path(folder) / "report.json", "speed-evidence report")
        for name, entry in (rep.get("configs") or {}).items():
            g = entry.get("gap") if isinstance(entry, Mapping) else None
            if name != TARGET_ALONE and isinstance(g, (int, float)) and g > -1:
                gaps.append(float(np.log1p(g)))
    except (OSError, ValueError, AttributeError):  # ConfigError is a ValueError
        pass
    if against_target:
        parts = [abs(float(np.log(check)))] if isinstance(check, (int, float)) and check > 0 else []
        parts += [max(abs(g) for g in gaps)] if gaps else []
        if not parts:
            return 0.0, ""
        return max(parts), (f"its check {check:.3f}" if isinstance(check, (int, float)) else "no check") + \
            (f", measured / predicted {np.expm1(min(gaps)):+.1%} to {np.expm1(max(gaps)):+.1%} over the configurations" if gaps else "")
    if len(gaps) < 2:
        return 0.0, ""
    return max(gaps) - min(gaps), f"the spread of measured / predicted over the folder's configurations, {np.expm1(min(gaps)):+.1%} to {np.expm1(max(gaps)):+.1%}"


def _segments(starts: list[dict[str, Any]]) -> str:
    """Occasions timed by more than one process, or on more than one CPU: their occasion effect
    includes the break (the benchmark resumes an occasion cut by a session's end)."""
    per: dict[Any, list[str]] = {}
    for rec in starts:
        m = rec.get("machine") or {}
        per.setdefault(rec.get("occasion"), []).append(str(m.get("cpu_signature") or m.get("cpu_model") or "unrecorded"))
    out = [f"occasion {o}: {len(cpus)} segments{' on ' + str(len(set(cpus))) + ' CPUs' if len(set(cpus)) > 1 else ''}"
           for o, cpus in sorted(per.items(), key=lambda kv: str(kv[0])) if len(cpus) > 1]
    cpus_all = {c for cpus in per.values() for c in cpus}
    if len(cpus_all) > 1 and not out:
        out.append(f"the occasions ran on {len(cpus_all)} CPUs")
    return "; ".join(out)
