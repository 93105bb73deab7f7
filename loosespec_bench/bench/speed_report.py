"""The speed benchmark's analysis (bench/speed.py): its report.json from a folder's final
generations, the verdict of counts against the clock, and the printed report.

A configuration is named as measure/speed_configs.py declares it; the target alone is its
TARGET_ALONE. Every figure is the module docstring of bench/speed.py's list, computed here.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..measure.costmodel import Calibration
from ..measure.occasion_files import cell_table
from ..measure.speed_configs import COUNT_TESTS, TARGET_ALONE, declared_order
from ..measure.stats.exact import count_sign_test
from ..measure.stats.intervals import paired_bootstrap, speedup_of_sums
from ..measure.stats.occasions import icc_agreement, occasion_bootstrap, occasion_effects
from ..measure.work import merge_work, per_token


def analyse(rows: list[dict[str, Any]], *, calibration: Calibration | None, n_boot: int = 2000, seed: int = 0) -> dict[str, Any]:
    """The report from the final generations (see bench/speed.py's docstring)."""
    occasions = sorted({r["occasion"] for r in rows})
    problems = sorted({r["problem"] for r in rows})
    configs = declared_order({r["config"] for r in rows})
    cell = {(r["occasion"], r["problem"], r["config"]): r for r in rows}
    O, P = len(occasions), len(problems)

    def table(config: str, key: str, clean_only: bool = False) -> np.ndarray:
        return cell_table(cell, occasions, problems, config, lambda r: r[key], clean=clean_only)

    report: dict[str, Any] = {"occasions": occasions, "problems": problems, "n_problems": P, "n_occasions": O, "configs": {}}
    shares = [r["others_share"] for r in rows if r["others_share"] is not None]
    report["load"] = {
        "others_share_median": float(np.median(shares)) if shares else None,
        "others_share_max": float(np.max(shares)) if shares else None,
        "cpu_share_median": float(np.median([r["cpu_share"] for r in rows if r["cpu_share"]])) if rows else None,
        "contaminated_blocks": len({(r["occasion"], r["problem"]) for r in rows if r["contaminated"]}),
        "per_occasion_others_share_median": {
            o: float(np.median([r["others_share"] for r in rows if r["occasion"] == o and r["others_share"] is not None] or [np.nan]))
            for o in occasions},
    }
    ar_tok, ar_time = table(TARGET_ALONE, "new_tokens", True), table(TARGET_ALONE, "wall_s", True)
    ar_tps = ar_tok / ar_time
    report["target_alone_retest"] = {
        "tokens_per_s_by_occasion": [float(np.nansum(ar_tok[i]) / np.nansum(np.where(np.isfinite(ar_time[i]), ar_time[i], 0)))
                                     for i in range(O)],
        "icc": icc_agreement(np.log(ar_tps.T)) if O >= 2 and np.isfinite(ar_tps).all() else None,
    }
    tps = report["target_alone_retest"]["tokens_per_s_by_occasion"]
    report["target_alone_retest"]["ratio_last_over_first"] = tps[-1] / tps[0] if O >= 2 and tps[0] else None
    per_problem_work: dict[str, dict[str, list[float]]] = {}
    for c in configs:
        works = [r["work"] for r in rows if r["config"] == c and r.get("work")]
        total = merge_work(works)
        entry: dict[str, Any] = {"work_per_token": per_token(total), "work_total": total}
        # Tokens the same on every occasion (greedy; bf16 may tie-break differently per process).
        shas = {p: {cell[(o, p, c)]["tokens_sha"] for o in occasions if (o, p, c) in cell} for p in problems}
        entry["tokens_same_across_occasions"] = sum(len(s) == 1 for s in shas.values())
        entry["tokens_identical_to_target_alone"] = sum(
            1 for o in occasions for p in problems
            if (o, p, c) in cell and (o, p, TARGET_ALONE) in cell
            and cell[(o, p, c)]["tokens_sha"] == cell[(o, p, TARGET_ALONE)]["tokens_sha"])
        per_problem_work[c] = {
            k: [float(np.mean([per_token(cell[(o, p, c)]["work"]).get(k) or 0.0 for o in occasions if (o, p, c) in cell]))
                for p in problems]
            for k in ("target_forwards", "draft_forwards", "target_rows", "draft_rows")
        }
        tok, tim = table(c, "new_tokens", True), table(c, "wall_s", True)
        pt, lo, hi = occasion_bootstrap(tok, tim, ar_tok, ar_time, n_boot=n_boot, seed=seed)
        entry.update(speedup=pt, speedup_ci_low=lo, speedup_ci_high=hi)
        entry["speedup_by_occasion"] = [occasion_bootstrap(tok[i:i + 1], tim[i:i + 1], ar_tok[i:i + 1], ar_time[i:i + 1], n_boot=1)[0]
                                        for i in range(O)]
        y = np.log((tok / tim) / ar_tps)  # [O, P] log per-problem speedup
        if c != TARGET_ALONE and O >= 2 and np.isfinite(y).all():
            eff = occasion_effects(y)
            entry["occasion"] = {"occasion_sd_log": eff["occasion_var"] ** 0.5, "residual_sd_log": eff["residual_var"] ** 0.5,
                                 "problem_sd_log": eff["problem_var"] ** 0.5, "occasion_p": eff["occasion_p"],
                                 "occasion_effects_log": eff["occasion_effects"]}
            entry["retest"] = {"icc": icc_agreement(y.T),
                               "ratio_last_over_first": entry["speedup_by_occasion"][-1] / entry["speedup_by_occasion"][0]
                               if entry["speedup_by_occasion"][0] else None}
        if calibration is not None and c != TARGET_ALONE:
            # Predicted from counts: per (occasion, problem) cell, pooled like the measurement.
            m_cells = [(cell[(o, p, c)], cell[(o, p, TARGET_ALONE)]) for o in occasions for p in problems
                       if (o, p, c) in cell and (o, p, TARGET_ALONE) in cell]
            cols = ([m["new_tokens"] for m, _ in m_cells], [calibration.predict_s(m["work"]) for m, _ in m_cells],
                    [b["new_tokens"] for _, b in m_cells], [calibration.predict_s(b["work"]) for _, b in m_cells])
            ppt, plo, phi = paired_bootstrap(cols, speedup_of_sums, n_boot=n_boot, seed=seed)
            entry.update(predicted_speedup=ppt, predicted_speedup_ci_low=plo, predicted_speedup_ci_high=phi)
            if ppt and pt:
                entry["gap"] = pt / ppt - 1.0
            entry["verdict"] = verdict(entry)
        report["configs"][c] = entry
    report["count_tests"] = []
    for a_, b_, key in COUNT_TESTS:
        if a_ in per_problem_work and b_ in per_problem_work:
            t = count_sign_test(per_problem_work[a_][key], per_problem_work[b_][key])
            report["count_tests"].append({"a": a_, "b": b_, "count": f"{key} per token", **t})
    return report


def _side(low: float | None, high: float | None) -> str:
    if low is None or high is None:
        return "undecided"
    return "faster" if low > 1 else "slower" if high < 1 else "undecided"


def verdict(entry: dict[str, Any]) -> str:
    """Whether the counts (predicted speedup's interval, on this machine's costs) and the
    wall-clock (measured speedup's two-way interval) say the same about "faster than the
    target alone", or which one disagrees."""
    counts = _side(entry.get("predicted_speedup_ci_low"), entry.get("predicted_speedup_ci_high"))
    clock = _side(entry.get("speedup_ci_low"), entry.get("speedup_ci_high"))
    if counts == clock:
        return f"counts and wall-clock agree: {counts}"
    return f"counts say {counts}, wall-clock says {clock}"


def segments_of(starts: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    """Per occasion: how many processes (segments) timed it, the CPUs and hosts they ran on,
    and the hours between its first and last segment's start."""
    out: dict[int, dict[str, Any]] = {}
    for rec in starts:
        o = out.setdefault(rec.get("occasion"), {"segments": 0, "cpus": [], "hosts": [], "at": []})
        o["segments"] += 1
        m = rec.get("machine") or {}
        cpu = " / ".join(str(m.get(k)) for k in ("cpu_model", "cpu_signature", "cpu_isa")) if m else "unrecorded"
        if cpu not in o["cpus"]:
            o["cpus"].append(cpu)
        if m.get("host") and m["host"] not in o["hosts"]:
            o["hosts"].append(m["host"])
        if rec.get("at") is not None:
            o["at"].append(rec["at"])
    for o in out.values():
        o["span_h"] = (max(o["at"]) - min(o["at"])) / 3600 if o["at"] else None
        del o["at"]
    return out


def _f(x: Any, spec: str = ".3f") -> str:
    return "-" if x is None or (isinstance(x, float) and not np.isfinite(x)) else format(x, spec)


def print_report(rep: dict[str, Any]) -> None:
    print(f"\n{rep['n_problems']} problems x {rep['n_occasions']} occasions; load: other processes "
          f"{_f(rep['load']['others_share_median'], '.0%')} median, {_f(rep['load']['others_share_max'], '.0%')} max of the CPU; "
          f"own CPU share {_f(rep['load']['cpu_share_median'], '.2f')} cores; {rep['load']['contaminated_blocks']} contaminated block(s)")
    segs = rep.get("segments") or {}
    cpus = {c for v in segs.values() for c in v["cpus"]}
    for o, v in segs.items():
        if v["segments"] > 1 or len(v["cpus"]) > 1:
            print(f"occasion {o}: {v['segments']} segments over {_f(v['span_h'], '.1f')} h on {'; '.join(v['cpus'])} "
                  "(resumed: its occasion effect includes the break)")
    if len(cpus) > 1:
        print(f"the occasions ran on {len(cpus)} CPUs ({'; '.join(sorted(cpus))}): the occasion effect includes the machine")
    print("\nwork counts per emitted token (decode; identical on every occasion when the tokens are)")
    print(f"{'config':<10} {'tgt fwd':>8} {'tgt rows':>8} {'drf fwd':>8} {'drf rows':>8} {'+LM rows':>8} {'lookups':>8} {'same tok':>8}")
    for c, e in rep["configs"].items():
        w = e["work_per_token"]
        print(f"{c:<10} {_f(w.get('target_forwards')):>8} {_f(w.get('target_rows'), '.2f'):>8} {_f(w.get('draft_forwards')):>8} "
              f"{_f(w.get('draft_rows'), '.2f'):>8} {_f(w.get('lm_head_extra_rows'), '.2f'):>8} {_f(w.get('lookups'), '.2f'):>8} "
              f"{e['tokens_same_across_occasions']:>4}/{rep['n_problems']}")
    print("\nexact sign tests over problems on the counts (a fewer than b)")
    for t in rep["count_tests"]:
        print(f"  {t['a']} vs {t['b']}, {t['count']}: fewer {t['fewer']}, more {t['more']}, ties {t['ties']}, p = {t['p']:.3g}")
    print("\nspeedup over the target alone: measured (two-way bootstrap, problems x occasions) | predicted (counts x calibration)")
    print(f"{'config':<10} {'measured':>24} {'by occasion':>18} {'predicted':>24} {'gap':>7} {'occ. sd':>8} {'resid sd':>8} {'ICC':>6}")
    for c, e in rep["configs"].items():
        if c == TARGET_ALONE:
            continue
        occ = e.get("occasion") or {}
        meas = f"{_f(e['speedup'], '.2f')} [{_f(e['speedup_ci_low'], '.2f')}, {_f(e['speedup_ci_high'], '.2f')}]"
        pred = (f"{_f(e.get('predicted_speedup'), '.2f')} [{_f(e.get('predicted_speedup_ci_low'), '.2f')}, "
                f"{_f(e.get('predicted_speedup_ci_high'), '.2f')}]")
        by = " ".join(_f(x, ".2f") for x in e["speedup_by_occasion"])
        print(f"{c:<10} {meas:>24} {by:>18} {pred:>24} {_f(e.get('gap'), '+.0%'):>7} {_f(occ.get('occasion_sd_log'), '.3f'):>8} "
              f"{_f(occ.get('residual_sd_log'), '.3f'):>8} {_f((e.get('retest') or {}).get('icc'), '.2f'):>6}")
    print("\nverdicts (95% intervals against 1.0x):")
    for c, e in rep["configs"].items():
        if e.get("verdict"):
            print(f"  {c:<10} {e['verdict']}")
    r = rep["target_alone_retest"]
    print(f"\ntest-retest, target alone: tokens/s by occasion {' '.join(_f(x, '.2f') for x in r['tokens_per_s_by_occasion'])}; "
          f"last/first {_f(r['ratio_last_over_first'], '.3f')}; ICC(2,1) of per-problem log tokens/s {_f(r['icc'], '.2f')}")
    print("occ. sd / resid sd: occasion and residual standard deviations of the log per-problem speedup (two-way fit); "
          "ICC: ICC(2,1) of the log per-problem speedup across occasions")
