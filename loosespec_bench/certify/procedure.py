"""The certification run: each (setting, look) the fixed-sequence procedure asks for, run as an
ordinary run folder (resumable: the command run again picks up every finished sample, and the
decisions, a pure function of the records, come out the same), then what the certified setting
buys, its loss on held-out problems, and the files certification_<tag>.json / .md."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Callable

import numpy as np
from omegaconf import DictConfig

from ..errors import ConfigError
from ..measure.stats.exact import LEVEL, ExactPairedBinary
from ..measure.stats.sequential import CERTIFIED, OUTCOMES, Certification, loss_point
from ..settings.run_settings import RunSettings
from .ladder import Request, compose, sample_order

Log = Callable[[str], None]


def _run(cfg: DictConfig) -> dict[str, Any]:
    """One point's run as `python -m loosespec_bench` runs it: a crash leaves its traceback in the
    folder (error.txt; the rerun clears it), and a stop (SIGINT, SIGTERM) ends the command with
    the run's one line naming the records kept (exit 128 + the signal)."""
    from ..run.app import run_recording_errors

    return run_recording_errors(cfg)


def _sample_ids(cfg: DictConfig) -> list[str]:
    """The run's selection: the first dataset.limit ids of the split's order."""
    order = sample_order(cfg)
    limit = cfg.dataset.get("limit")
    return order if limit is None else order[: int(limit)]


def paired_scores(req: Request, cfg: DictConfig, folder: Path) -> tuple[list[int], list[int], list[dict[str, Any]]]:
    """(method's 0/1, target alone's 0/1, records) over the configured selection, in its order.
    score=task: the task's own 0/1 score; score=identical: 1 when the output's tokens are the
    target alone's (the target alone scores 1), so a loss is a changed answer."""
    from ..build import build_task
    from ..store.run_folder import RunFolder

    task = build_task(cfg)
    key = task.quality_key or "correct"
    recs = {r["id"]: r for r in RunFolder(folder, create=False).records()}
    method, base, kept = [], [], []
    for sid in _sample_ids(cfg):
        rec = recs.get(sid)
        if rec is None or not isinstance(rec.get("baseline"), dict):
            raise ConfigError(f"{folder}: no paired record for {sid}; rerun the command to finish the run")
        if req.score == "identical":
            m, b = int(rec.get("output_ids") == rec["baseline"].get("output_ids")), 1
        else:
            m, b = (rec.get("score") or {}).get(key), (rec["baseline"].get("score") or {}).get(key)
            if not isinstance(m, bool) or not isinstance(b, bool):
                raise ConfigError(f"{folder}: {sid}'s score {key!r} is not 0/1; certify reads 0/1 scores (or --score identical)")
        method.append(int(m))
        base.append(int(b))
        kept.append(rec)
    return method, base, kept


def counts(method: list[int], base: list[int]) -> tuple[int, int, int, int]:
    right = sum(base)
    lost = sum(1 for m, b in zip(method, base) if b and not m)
    gained = sum(1 for m, b in zip(method, base) if m and not b)
    return lost, gained, right, len(base) - right


def measure(req: Request, i: int, split: str, n: int, log: Log, suffix: str = "") -> dict[str, Any]:
    """Setting i on the first n problems of `split` (a run folder, resumed if it exists)."""
    cfg = compose(req.point_overrides(i, split, n, suffix))
    log(f"[certify] running {req.setting_label(i)} on {n} {split} problems ...")
    summary = _run(cfg)
    folder = Path(summary["run_dir"])
    method, base, recs = paired_scores(req, cfg, folder)
    return {"cfg": cfg, "summary": summary, "folder": str(folder), "method": method, "base": base, "records": recs,
            "counts": counts(method, base)}


# ---- what a setting buys ----------------------------------------------------------------------
def _threads(summary: dict[str, Any]) -> int:
    m = re.search(r"(\d+) threads?", str(summary.get("hardware") or ""))
    return int(m.group(1)) if m else 1


def per_cpu_hour(records: list[dict[str, Any]], method: list[int], base: list[int], threads: int,
                 n_boot: int = 2000, seed: int = 0) -> dict[str, Any]:
    """Correct answers per CPU hour (wall hours of generation x the run's threads; in a batched run
    a problem's hours are its share of its batch's wall time), the method's and the target
    alone's on the same problems, each with a 95% percentile bootstrap over
    problems (the ratio of sums resampled). None where a side has no times."""
    def times(side: str) -> np.ndarray:
        out = []
        for r in records:
            src = r if side == "method" else (r.get("baseline") or {})
            out.append(float((src.get("metrics") or {}).get("total_s") or np.nan))
        return np.asarray(out) * threads / 3600

    rng = np.random.default_rng(seed)
    out: dict[str, Any] = {}
    for side, scores in (("method", method), ("target_alone", base)):
        t, c = times(side), np.asarray(scores, float)
        ok = np.isfinite(t) & (t > 0)
        if not ok.any():
            out[side] = None
            continue
        t, c = t[ok], c[ok]
        idx = rng.integers(0, t.size, (n_boot, t.size))
        boot = c[idx].sum(1) / t[idx].sum(1)
        lo, hi = np.quantile(boot, [(1 - LEVEL) / 2, (1 + LEVEL) / 2])
        out[side] = {"per_cpu_h": float(c.sum() / t.sum()), "low": float(lo), "high": float(hi), "n": int(t.size),
                     "cpu_h": float(t.sum())}
    return out


def predicted_speedup(summary: dict[str, Any]) -> dict[str, Any] | None:
    """The work-count speedup (the calibrated cost model's, summary.work_speedup) with its
    interval widened to hold the calibration's measured error: the method's measured over
    predicted time (summary.cost_model) against the target alone's check (the calibration's
    target_alone_decode_over_predicted); a speedup is off by their ratio."""
    point, lo, hi = (summary.get(k) for k in ("work_speedup", "work_speedup_ci_low", "work_speedup_ci_high"))
    if point is None:
        return None
    cm = summary.get("cost_model") or {}
    r_m = cm.get("method_time_measured_over_predicted")
    r_b, unread = None, None
    cal = cm.get("calibration")
    if cal:
        from ..store.declarations import read_calibration

        # Through the gate and the calibration's declaration (a link, a FIFO or a damaged file is
        # refused); the run checked its signature when it priced itself with it. A calibration
        # gone or damaged since leaves its own check unknown, said in the note, rather than
        # ending a certification whose decisions never read it.
        try:
            r_b = (read_calibration(cal).get("check") or {}).get("target_alone_decode_over_predicted")
        except ConfigError as err:
            unread = str(err)
    factor = (r_b or 1.0) / r_m if r_m else None
    lo2, hi2 = lo, hi
    if factor is not None and lo is not None and hi is not None:
        lo2, hi2 = min(lo, lo * factor), max(hi, hi * factor)
    return {"point": point, "low": lo2, "high": hi2, "counts_low": lo, "counts_high": hi, "error_factor": factor,
            "method_measured_over_predicted": r_m, "target_alone_check": r_b,
            "note": "calibration error unknown (no measured method time): the counts' interval only" if factor is None else
            "interval widened by the calibration's measured error"
            + (f" (the method's side only: the calibration's own check was not read: {unread})" if unread else "")}


def two_occasion_speed(req: Request, i: int, log: Log) -> dict[str, Any]:
    """The certified setting timed paired with the target alone on `req.speed` held-out problems,
    one occasion per invocation (occasions are separate processes started apart): the first
    occasion not yet on disk runs now; the pooled speedup over the occasions on disk, with the
    two-way (occasions x problems) bootstrap."""
    from ..measure.stats.occasions import occasion_bootstrap
    from ..store.run_folder import RunFolder, run_dir

    folders = []
    for occ in (1, 2):
        cfg = compose(req.speed_overrides(i, occ))
        folder = run_dir(cfg)
        if not (folder / RunFolder.SUMMARY).is_file():
            log(f"[certify] speed occasion {occ}: timing {req.setting_label(i)} and the target alone on {req.speed} "
                f"{req.report_split} problems ...")
            _run(cfg)
            folders.append((cfg, folder))
            break
        folders.append((cfg, folder))
    done = [(c, f) for c, f in folders if (f / RunFolder.SUMMARY).is_file()]
    ids = _sample_ids(done[0][0]) if done else []
    tabs = {k: np.full((len(done), len(ids)), np.nan) for k in ("mt", "ms", "bt", "bs")}
    for o, (_, f) in enumerate(done):
        recs = {r["id"]: r for r in RunFolder(f, create=False).records()}
        for p, sid in enumerate(ids):
            r = recs.get(sid) or {}
            m, b = r.get("metrics") or {}, (r.get("baseline") or {}).get("metrics") or {}
            tabs["mt"][o, p], tabs["ms"][o, p] = m.get("new_tokens", np.nan), m.get("decode_s", np.nan)
            tabs["bt"][o, p], tabs["bs"][o, p] = b.get("new_tokens", np.nan), b.get("decode_s", np.nan)
    point, lo, hi = occasion_bootstrap(tabs["mt"], tabs["ms"], tabs["bt"], tabs["bs"]) if done else (None, None, None)
    return {"occasions": len(done), "problems": len(ids), "point": point, "low": lo, "high": hi,
            "note": "" if len(done) >= 2 else "one occasion so far: run the command again, apart, for the second"}


# ---- the procedure ----------------------------------------------------------------------------
def certify(req: Request, log: Log = print) -> dict[str, Any]:
    d = req.design
    proc = Certification(d, len(req.values))
    last: dict[int, dict[str, Any]] = {}
    while (step := proc.next()) is not None:
        i, k = step
        got = measure(req, i, req.split, d.looks[k], log)
        last[i] = got
        code = proc.feed(*got["counts"])
        lost, gained, right, wrong = got["counts"]
        word = OUTCOMES.get(code, "continue to the next look") if code else "continue to the next look"
        log(f"[certify] look {k + 1}/{len(d.looks)} (n = {d.looks[k]}, alpha_k = {d.alphas[k]:.4g}): {req.setting_label(i)}: "
            f"lost {lost} / gained {gained} (target alone right {right}, wrong {wrong}); loss upper bound "
            f"{100 * proc.bound[i]:.2f} vs delta {100 * d.delta:g}: {word}")
    settings = []
    for i, v in enumerate(req.values):
        row: dict[str, Any] = {"setting": req.setting_label(i), "value": v, "outcome": OUTCOMES[proc.outcome[i]],
                               "certified": proc.outcome[i] == CERTIFIED}
        if proc.counts[i] is not None:
            lost, gained, right, wrong = proc.counts[i]
            row.update(look=proc.decided_at[i] + 1 if proc.decided_at[i] >= 0 else None, n=right + wrong, lost=lost,
                       gained=gained, right=right, wrong=wrong,
                       loss=float(loss_point(lost, gained, right, wrong, d.estimand)), loss_upper=proc.bound[i],
                       folder=last[i]["folder"])
            s = last[i]["summary"]
            row["tau"] = [s.get("tau"), s.get("tau_ci_low"), s.get("tau_ci_high")]
            row["predicted_speedup"] = predicted_speedup(s)
            row["per_cpu_hour"] = per_cpu_hour(last[i]["records"], last[i]["method"], last[i]["base"], _threads(s))
            # 0: the rule rejected every mismatch, so it did SPD's work and wrote SPD's tokens (its
            # correct answers per CPU hour are SPD's, with this drafter and K).
            row["loose_accepts"] = s.get("loose_accepts")
        settings.append(row)
    result: dict[str, Any] = {
        "experiment": req.experiment, "ladder_key": req.key, "ladder": req.values, "overrides": req.overrides,
        "design": {"looks": list(d.looks), "margin": d.delta, "alpha": d.alpha, "spending": d.spending, "estimand": d.estimand,
                   "alphas": list(d.alphas), "futility": d.futility}, "split": req.split, "report_split": req.report_split,
        "score": req.score, "settings": settings, "certified": proc.certified,
        "loosest_certified": settings[proc.certified - 1]["setting"] if proc.certified else None,
    }
    if last:  # what every figure was measured on (the first setting's last look; one pair and data set per ladder)
        first = last[min(last)]
        cfg, s = first["cfg"], first["summary"]
        result["conditions"] = {"pair": s.get("pair"), "dataset": s.get("dataset"), "dtype": str(cfg.pair.get("dtype")),
                                "hardware": s.get("hardware"), "batch_size": req.batch_size,
                                "max_new_tokens": RunSettings.read(cfg).generation.max_new_tokens}
    if proc.certified and req.holdout:
        i = proc.certified - 1
        got = measure(req, i, req.report_split, req.holdout, log)
        e = ExactPairedBinary(*got["counts"])
        lost, gained, right, wrong = got["counts"]
        if d.estimand == "difference" or right:
            point, lo, hi = e.interval(d.estimand)
            loss = (-point, -hi, -lo) if d.estimand == "difference" else (1 - point, 1 - hi, 1 - lo)
        else:
            loss = (None, None, None)
        result["held_out"] = {"setting": req.setting_label(i), "n": req.holdout, "lost": lost, "gained": gained,
                              "right": right, "wrong": wrong, "loss": loss[0], "loss_ci": [loss[1], loss[2]],
                              "certified_bound": settings[i]["loss_upper"], "folder": got["folder"]}
    if proc.certified and req.speed:
        result["speed"] = two_occasion_speed(req, proc.certified - 1, log)
    return result


def tag(req: Request) -> str:
    d = req.design
    unit = "pts" if d.estimand == "difference" else "ret"
    return f"{req.key.replace('.', '_')}_delta{100 * d.delta:g}{unit}_{req.split}"


def _ci(x: list[Any] | tuple[Any, ...] | None, fmt: str = "{:.2f}") -> str:
    if not x or x[0] is None:
        return "-"
    lo, hi = (x[1], x[2]) if len(x) == 3 else (None, None)
    return fmt.format(x[0]) + (f" [{fmt.format(lo)}, {fmt.format(hi)}]" if lo is not None and hi is not None else "")


def format_result(result: dict[str, Any]) -> str:
    """The certification as Markdown: the decision per setting, what the certified setting buys,
    its held-out loss beside its bound."""
    d = result["design"]
    unit = "points" if d["estimand"] == "difference" else "% of the target alone's accuracy"
    lines = [f"## Certification: {result['ladder_key']} (strictest first), margin {100 * d['margin']:g} {unit}",
             "",
             f"Non-inferiority (H0: loss >= {100 * d['margin']:g}) per setting by the exact paired bound, looks at n = "
             f"{', '.join(map(str, d['looks']))} ({d['spending'].replace('_', '-')} spending, one-sided alpha {d['alpha']:g}), "
             f"fixed-sequence across settings: family-wise error <= {d['alpha']:g}. Calibration split: {result['split']}; "
             f"quality: {'the task score' if result['score'] == 'task' else 'identical output to the target alone'}.",
             "",
             f"**Loosest certified setting: {result['loosest_certified'] or 'none'}**",
             "",
             f"| setting | outcome | look | n | lost / gained | loss ({'points' if d['estimand'] == 'difference' else '% retention'}) "
             "| upper bound | tau [95% CI] | predicted speedup [with calibration error] | correct / CPU h [95% CI] "
             "| target alone correct / CPU h |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in result["settings"]:
        if "n" not in r:
            lines.append(f"| {r['setting']} | {r['outcome']} | - | - | - | - | - | - | - | - | - |")
            continue
        ps = r.get("predicted_speedup")
        sp = f"{ps['point']:.2f}x [{ps['low']:.2f}, {ps['high']:.2f}]" if ps and ps.get("low") is not None else "-"
        pc = r.get("per_cpu_hour") or {}
        m, b = pc.get("method"), pc.get("target_alone")
        mc = f"{m['per_cpu_h']:.1f} [{m['low']:.1f}, {m['high']:.1f}]" if m else "-"
        bc = f"{b['per_cpu_h']:.1f} [{b['low']:.1f}, {b['high']:.1f}]" if b else "-"
        lines.append(f"| {r['setting']} | {r['outcome']} | {r['look']} | {r['n']} | {r['lost']} / {r['gained']} | "
                     f"{100 * r['loss']:+.2f} | {100 * r['loss_upper']:.2f} | {_ci(r.get('tau'))} | {sp} | {mc} | {bc} |")
    if "held_out" in result:
        h = result["held_out"]
        lo, hi = h["loss_ci"]
        lines += ["", f"Held out ({result['report_split']}, n = {h['n']}): {h['setting']} lost {h['lost']} / gained {h['gained']}: "
                      f"loss {100 * h['loss'] + 0.0:+.2f} points, 95% exact interval [{100 * lo + 0.0:+.2f}, {100 * hi + 0.0:+.2f}], beside the "
                      f"certified upper bound {100 * h['certified_bound']:.2f}."]
    if "speed" in result:
        s = result["speed"]
        fig = f"{s['point']:.2f}x [{s['low']:.2f}, {s['high']:.2f}]" if s["point"] is not None else "-"
        lines += ["", f"Measured speedup ({s['occasions']} occasion(s) x {s['problems']} problems, paired): {fig} {s['note']}".rstrip()]
    lines += ["", "A bound is the loss's one-sided upper bound at the alpha spent at the deciding look (a repeated "
                  "confidence bound: all hold together with probability >= 1 - alpha). Correct answers per CPU hour: wall "
                  "hours of generation x threads, on the setting's last look, bootstrap over problems."]
    return "\n".join(lines)


def write_result(req: Request, result: dict[str, Any], root: Path) -> tuple[Path, Path]:
    from ..safe_files import atomic_write_text

    folder = root / req.experiment_name
    folder.mkdir(parents=True, exist_ok=True)
    base = folder / f"certification_{tag(req)}"
    js, md = base.with_suffix(".json"), base.with_suffix(".md")
    # Atomic, never through a link, inside the results folder: a kill mid-write keeps the old file.
    atomic_write_text(js, json.dumps(result, indent=1, default=float) + "\n", root=root)
    atomic_write_text(md, format_result(result) + "\n", root=root)
    return js, md
