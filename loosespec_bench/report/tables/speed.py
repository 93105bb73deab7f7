"""The speed benchmark's table (python -m loosespec_bench.bench.speed's report.json, one per data set):
per configuration, the work counts per token, the speedup over the target alone measured over
problems and occasions with its two-way interval, each occasion's speedup, the speedup the
counts predict on this machine, and whether the tokens repeated across occasions. Its notes put
SPD at its best K beside SPD at the papers' K (FLy 15, DropMatch 10), so that a reader can tell a
weak baseline from a strong loose rule, and give the load each folder was timed under."""

from __future__ import annotations

import math
from typing import Any, Mapping

from ...measure.speed_configs import TARGET_ALONE, config_label, spd_draft_length
from ..render import NA, Num, Table

# The papers' draft lengths, which the benchmark's spd_k<K> rows stand beside.
PAPER_K = {"FLy": 15, "DropMatch": 10}


def _float(value: Any) -> float | None:
    """A number read from a report.json (data, perhaps someone else's): None unless finite."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def _num(entry: Mapping[str, Any], key: str) -> Any:
    value = _float(entry.get(key))
    if value is None:
        return NA
    lo, hi = _float(entry.get(f"{key}_ci_low")), _float(entry.get(f"{key}_ci_high"))
    ci = (lo, hi) if lo is not None and hi is not None else None
    return Num(value, "speedup", ci=ci, no_interval=ci is None)


def best_k_text(title: str, configs: Mapping[str, Mapping[str, Any]]) -> str | None:
    """"GSM8K: SPD at its best K here, K = 5: 1.25x [...]; at FLy's K = 15: 0.95x [...]; ..." or
    None where the folder timed fewer than two SPD draft lengths."""
    spd = {k: configs[n] for n in configs
           if (k := spd_draft_length(n)) is not None and _float(configs[n].get("speedup")) is not None}
    if len(spd) < 2:
        return None
    best = max(spd, key=lambda k: float(spd[k]["speedup"]))
    parts = [f"SPD at its best K here, K = {best}: {_num(spd[best], 'speedup').text()}"]
    for paper, k in PAPER_K.items():
        if k in spd:
            parts.append(f"at {paper}'s K = {k}: {_num(spd[k], 'speedup').text()}")
    return f"{title}: " + "; ".join(parts) + " (the measured speedups; the best K is chosen from these timings)"


def _calibration_error(rep: Mapping[str, Any], configs: Mapping[str, Mapping[str, Any]]) -> float | None:
    """The calibration's error on the log scale for a speedup over the target alone: the larger of
    its own check (read from the calibration file the report names, where it can be) and the
    worst measured / predicted gap of the report's configurations."""
    import json
    from pathlib import Path

    parts = [abs(math.log1p(g)) for c, e in configs.items()
             if c != TARGET_ALONE and (g := _float(e.get("gap"))) is not None and g > -1]
    try:
        from ...safe_files import load_json_declaration  # never a link or a FIFO, bounded

        raw = load_json_declaration(Path(str(rep.get("calibration"))), "calibration")
        check = _float((raw.get("check") or {}).get("target_alone_decode_over_predicted"))
        if check and check > 0:
            parts.append(abs(math.log(check)))
    except (OSError, ValueError, TypeError, AttributeError):
        pass
    return max(parts) if parts else None


def _widened(entry: Mapping[str, Any], err: float | None) -> Any:
    value = _float(entry.get("predicted_speedup"))
    lo, hi = _float(entry.get("predicted_speedup_ci_low")), _float(entry.get("predicted_speedup_ci_high"))
    if value is None or err is None or lo is None or hi is None:
        return NA
    return Num(value, "speedup", ci=(lo * math.exp(-err), hi * math.exp(err)))


def speed_occasions_table(reports: Mapping[str, Mapping[str, Any]]) -> Table:
    """One block of rows per report ({title: report.json}), the configurations in the report's
    order, the target alone first (its tokens/s per occasion in the notes)."""
    columns = ["set", "configuration", "tokens per target forward", "draft forwards per token",
               "speedup (problems x occasions)", "speedup by occasion", "predicted from the counts",
               "predicted, with the calibration's error", "gap",
               "tokens same on every occasion"]
    rows: list[list[Any]] = []
    notes = [
        "Speedup: the configuration's summed tokens over summed seconds, over the target alone's, pooled over problems and "
        "occasions (problem blocks contaminated by other work left out); [low, high]: the 95% two-way bootstrap interval "
        "(problems and occasions drawn independently). Predicted: the work counts (forwards and rows) priced by this machine's "
        "calibration, 95% bootstrap over the timed cells; gap: measured / predicted - 1. Tokens per target forward: emitted "
        "tokens over the target's decode forwards (tau, bonus token included).",
        "Predicted, with the calibration's error: the counts' interval widened (x/÷) by the larger of the calibration's own "
        "check (a timed target-alone decode over its price) and the folder's worst measured / predicted gap; where the "
        "calibration was taken after the timings (results/cpu/evidence: re-taken after a 28% miss), that gap is in-sample "
        "and the error it gives is a floor, not a bound.",
    ]
    for title, rep in reports.items():
        configs = {str(k): v for k, v in (rep.get("configs") or {}).items() if isinstance(v, Mapping)}
        err = _calibration_error(rep, configs)
        n_p, n_o = rep.get("n_problems"), rep.get("n_occasions")
        for name, entry in configs.items():
            per = entry.get("work_per_token") if isinstance(entry.get("work_per_token"), Mapping) else {}
            tf, df = _float(per.get("target_forwards")), _float(per.get("draft_forwards"))
            occ = entry.get("speedup_by_occasion")
            by_occ = [_float(v) for v in occ] if isinstance(occ, list) else []
            gap = _float(entry.get("gap"))
            rows.append([
                title, config_label(name),
                NA if not tf else f"{1 / tf:.2f}",
                "-" if name == TARGET_ALONE or df is None else f"{df:.2f}",
                "1" if name == TARGET_ALONE else _num(entry, "speedup"),
                "-" if name == TARGET_ALONE else " / ".join("-" if v is None else f"{v:.2f}×" for v in by_occ) or "-",
                "-" if name == TARGET_ALONE else _num(entry, "predicted_speedup"),
                "-" if name == TARGET_ALONE else _widened(entry, err),
                "-" if name == TARGET_ALONE or gap is None else f"{gap:+.1%}",
                f"{entry.get('tokens_same_across_occasions', '-')} of {n_p}",
            ])
        load = rep.get("load") if isinstance(rep.get("load"), Mapping) else {}
        retest = rep.get("target_alone_retest") if isinstance(rep.get("target_alone_retest"), Mapping) else {}
        tps = " / ".join("-" if (v := _float(x)) is None else f"{v:.2f}" for x in retest.get("tokens_per_s_by_occasion") or [])
        median, top, icc = _float(load.get("others_share_median")), _float(load.get("others_share_max")), _float(retest.get("icc"))
        notes.append(
            f"{title}: {n_p} problems x {n_o} occasions; other processes' CPU share median "
            f"{'-' if median is None else format(median, '.1%')}, max {'-' if top is None else format(top, '.1%')}; "
            f"{load.get('contaminated_blocks', 0)} problem blocks contaminated; target alone {tps} tokens/s by occasion"
            f"{'' if icc is None else f' (ICC {icc:.2f})'}; calibration: {rep.get('calibration') or 'none'}.")
        if (text := best_k_text(title, configs)) is not None:
            notes.append(text)
    return Table("speed_occasions", "Speed over two occasions: work counts, measured and predicted speedup over the target alone",
                 columns, rows, notes, ids=2)
