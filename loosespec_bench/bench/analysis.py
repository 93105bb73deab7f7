"""The engine benchmark's statistics: per contestant (tokens/s, tau, math accuracy), paired
comparisons (median of paired time ratios over the same prompt and repeat), per-step overheads,
the cost model's prediction beside the measured speedup, and the printed report."""

from __future__ import annotations

import argparse
import os
import statistics
from typing import Any

import torch

from loosespec_bench.measure import costmodel
from loosespec_bench.measure.metrics import median_or_none as _median, pair_up, paired_ratio_stats
from loosespec_bench.measure.speed_configs import (
    DROPMATCH, FLY, FLY_MLA, FLY_MLA_HF, HF_AR, HF_ASSIST, HF_PLD, PLD, SPD, SPD_MLA, TARGET_ALONE)
from loosespec_bench.measure.stats.intervals import median_stat, paired_bootstrap

from .contestants import Bench, Run

RULE_SHARE_LIMIT = 0.02  # FLy rule / DropMatch LM-head passes: at most 2% of step time


def fmt(x: float | None, spec: str = ".3f", suffix: str = "") -> str:
    return "-" if x is None else format(x, spec) + suffix


def paired(runs: list[Run], a: str, b: str) -> list[tuple[Run, Run]]:
    """Contestant a's and b's runs on the same (prompt, repeat)."""
    def of(name: str) -> dict[tuple[str, str, int], Run]:
        return {(r.set, r.prompt, r.repeat): r for r in runs if r.contestant == name}

    return pair_up(of(a), of(b))


def per_contestant(runs: list[Run], name: str) -> dict[str, Any]:
    rs = [r for r in runs if r.contestant == name]
    tokens = sum(len(r.tokens) for r in rs)
    wall = sum(r.wall_s for r in rs)
    steps = sum(r.steps for r in rs)
    scored = [r.correct for r in rs if r.correct is not None]
    return {
        "runs": len(rs),
        "tokens": tokens,
        "tokens_per_s": tokens / wall if wall else None,
        "tokens_per_s_median": _median([len(r.tokens) / r.wall_s for r in rs if r.wall_s > 0]),
        "tau": tokens / steps if steps else None,
        "accuracy_math": sum(scored) / len(scored) if scored else None,
    }


def per_prompt_median(pairs: list[tuple[Run, Run]], fn: Any) -> list[float]:
    """fn(a, b) per pair, the median over each prompt's repeats: one value per distinct prompt
    (the repeats of a prompt are not independent problems)."""
    by: dict[tuple[str, str], list[float]] = {}
    for a, b in pairs:
        by.setdefault((a.set, a.prompt), []).append(fn(a, b))
    return [statistics.median(v) for v in by.values()]


def prompt_interval(pairs: list[tuple[Run, Run]], fn: Any) -> tuple[float | None, float | None, float | None]:
    """The median over prompts of each prompt's median fn(a, b), with its 95% paired bootstrap
    interval over prompts (stats.paired_bootstrap; None below its minimum n)."""
    if not pairs:
        return None, None, None
    return paired_bootstrap((per_prompt_median(pairs, fn),), median_stat)


def _time_ratio(a: Run, b: Run) -> float:
    return a.s_per_token / b.s_per_token


def compare(runs: list[Run], a: str, b: str, lossless: bool) -> dict[str, Any]:
    """Ours / peer, seconds per new token, as paired-ratio statistics (metrics.paired_ratio_stats)
    and the median over prompts with its interval over prompts (prompt_interval)."""
    pairs = paired(runs, a, b)
    point, low, high = prompt_interval(pairs, _time_ratio)
    return {
        "pairs": len(pairs),
        **paired_ratio_stats([_time_ratio(ra, rb) for ra, rb in pairs],
                             [ra.tokens == rb.tokens for ra, rb in pairs], name="time_ratio"),
        "time_ratio_prompts": point, "time_ratio_ci_low": low, "time_ratio_ci_high": high,
        "lossless_pair": lossless,
    }


def speedup_vs_ar(runs: list[Run], name: str) -> float | None:
    """Median of paired ratios: target alone's seconds per token / the contestant's."""
    pairs = paired(runs, name, TARGET_ALONE)
    return _median([rb.s_per_token / ra.s_per_token for ra, rb in pairs])


def overheads(runs: list[Run], name: str) -> dict[str, Any] | None:
    rs = [r for r in runs if r.contestant == name and r.phase_s is not None]
    if not rs:
        return None
    steps = sum(r.steps for r in rs)
    decode = sum(r.decode_s or 0.0 for r in rs)
    phase: dict[str, float] = {}
    for r in rs:
        for k, v in (r.phase_s or {}).items():
            phase[k] = phase.get(k, 0.0) + v
    out: dict[str, Any] = {"steps": steps, "step_ms": 1000 * decode / steps if steps else None}
    for k, v in phase.items():
        out[f"{k}_share"] = v / decode if decode else None
    out["other_share"] = (decode - sum(phase.values())) / decode if decode else None
    dm = [r.dropmatch_s for r in rs if r.dropmatch_s is not None]
    if dm:
        out["dropmatch_lm_head_share"] = sum(dm) / decode
    return out


def cost_model(runs: list[Run], name: str, k: int, calib: dict[str, Any] | None) -> dict[str, Any] | None:
    """The cost model's prediction next to the measured decode-only speedup over target alone.

    Predicted: E from the run's per-position acceptance rates, c and v(K) from the isolated
    forward timings of `calibrate` (not from this run), F = the run's draft forwards per step
    (K for a draft model, fewer with MLA, 0 for prompt lookup). In-situ c and v (phase times
    of the runs) are printed beside it to show where a gap comes from: they include the draft
    model's prompt prefill (step 1 of every run), lookups and Python overhead.
    """
    ar = [r for r in runs if r.contestant == TARGET_ALONE and r.phase_s]
    rs = [r for r in runs if r.contestant == name and r.phase_s]
    if not ar or not rs:
        return None
    ar_steps = sum(r.steps for r in ar)
    t1_run = sum(r.phase_s["target"] for r in ar) / ar_steps  # one target 1-token forward, in the runs
    steps = sum(r.steps for r in rs)
    d_fwd = sum(r.draft_forwards for r in rs)
    draft_s = sum(r.phase_s.get("draft", 0.0) for r in rs)
    target_s = sum(r.phase_s["target"] for r in rs)
    decode = sum(r.decode_s for r in rs)
    drafted = [x for r in rs for x in r.drafted]
    accepted = [x for r in rs for x in r.accepted]
    # Short drafts (lookup misses, the budget's end) count as rejections: E = the real yield.
    rates = costmodel.acceptance_rates(drafted, accepted, k, short_as_reject=True)
    f = d_fwd / steps
    out: dict[str, Any] = {
        "rates": rates,
        "expected_tokens": costmodel.expected_tokens(rates),
        "measured_tau": sum(len(r.tokens) for r in rs) / steps,
        "draft_forwards_per_step": f,
        "c_run": draft_s / d_fwd / t1_run if d_fwd else 0.0,
        "v_run": target_s / steps / t1_run,
        "other_run": (decode - target_s - (draft_s if d_fwd else 0.0)) / steps / t1_run,
    }
    if calib is not None and f"target_{k + 1}" in calib:
        c = calib["c"] if d_fwd else 0.0  # prompt lookup: no draft model
        v = calib[f"target_{k + 1}"] / calib["target_1"]
        out.update(c=c, verify_factor=v, predicted_speedup=costmodel.predicted_speedup(
            rates, c, k, verify_factor=v, draft_forwards=f))
    # Measured the same way as predicted: decode only, pooled tokens over the same prompts.
    ar_spt = sum(r.decode_s for r in ar) / sum(len(r.tokens) for r in ar)
    spt = decode / sum(len(r.tokens) for r in rs)
    out["measured_decode_speedup"] = ar_spt / spt
    return out


def print_report(res: dict[str, Any], bench: Bench, args: argparse.Namespace) -> None:
    names = list(bench.contestants)
    dtype = "fp32" if args.fp32 else "bf16"
    print()
    if args.draft_quantize != "none":
        dtype += f", draft {args.draft_quantize}"
    if args.vocab_top:
        dtype += f", draft vocab top {args.vocab_top}"
    print(f"== engine benchmark: {args.target} <- {args.draft} ({dtype}, CPU, {torch.get_num_threads()} threads, "
          f"OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY')}), greedy, max_new_tokens={args.max_new_tokens}")
    print(f"   prompts: {res['prompt_summary']}; repeats {args.repeats}; "
          f"load average {res['load_before']} -> {res['load_after']}")
    print()
    print(f"{'contestant':<14} {'tok/s':>7} {'tok/s med':>9} {'tau':>5} {'vs ar':>6} {'math acc':>8}  description")
    for n in names:
        s = res["contestants"][n]
        print(f"{n:<14} {fmt(s['tokens_per_s'], '.2f'):>7} {fmt(s['tokens_per_s_median'], '.2f'):>9} "
              f"{fmt(s['tau'], '.2f'):>5} {fmt(s.get('speedup_vs_ar'), '.2f', 'x'):>6} "
              f"{fmt(s['accuracy_math'], '.2f'):>8}  {bench.contestants[n].describe}")
    for n, why in bench.unavailable.items():
        print(f"{n:<14} not available ({why})")
    print()
    print("time ratio = median over (prompt, repeat) pairs of (ours s/token) / (peer s/token); < 1: ours faster;")
    print("per prompt: the median over prompts of each prompt's median ratio [95% paired bootstrap interval over prompts]")
    print(f"{'comparison':<52} {'ratio':>6} {'[min, max]':>15} {'per prompt [95% CI]':>21} {'pairs':>5}  {'identical tokens':<24} {'ratio(ident)':>12}  target")
    for a, b, label in bench.comparisons:
        key = f"{a}|{b}"
        if key not in res["comparisons"]:
            continue
        c = res["comparisons"][key]
        if c["lossless_pair"]:
            ident = f"{c['identical']}/{c['pairs']}" + (" (fp32 check)" if args.fp32 else " (bf16: ties may flip)")
        else:
            ident = f"lossy ({c['identical']}/{c['pairs']} same)"
        ci = f"{fmt(c.get('time_ratio_prompts'), '.2f')} [{fmt(c.get('time_ratio_ci_low'), '.2f')}, {fmt(c.get('time_ratio_ci_high'), '.2f')}]"
        print(f"{label:<52} {fmt(c['time_ratio_median']):>6} "
              f"[{fmt(c['time_ratio_min'], '.2f')}, {fmt(c['time_ratio_max'], '.2f')}]".rjust(16)
              + f" {ci:>21} {c['pairs']:>5}  {ident:<24} {fmt(c['time_ratio_median_identical']) if c['lossless_pair'] else '':>12}  "
              + c.get("target", ""))
    ret = res.get("retention")
    if ret:
        print()
        for n, v in ret.items():
            print(f"accuracy retention on the math prompts, {n} / ar: {fmt(v, '.3f')}")
    print()
    print("per verification step (fractions of decode time / steps; from GenerationOutput.phase_s)")
    print(f"{'contestant':<12} {'step ms':>8} {'draft':>7} {'target':>7} {'rule':>7} {'rollback':>8} {'bookkeep':>8} {'other':>6}")
    for n in names:
        o = res["overheads"].get(n)
        if not o:
            continue
        sh = lambda key: fmt(o.get(key), ".1%")  # noqa: E731
        print(f"{n:<12} {fmt(o['step_ms'], '.1f'):>8} {sh('draft_share'):>7} {sh('target_share'):>7} "
              f"{sh('verify_share'):>7} {sh('rollback_share'):>8} {sh('commit_share'):>8} {sh('other_share'):>6}")
    for n in (FLY, FLY_MLA, FLY_MLA_HF):
        o = res["overheads"].get(n)
        if o and o.get("verify_share") is not None:
            ok = "OK" if o["verify_share"] < RULE_SHARE_LIMIT else "OVER"
            print(f"FLy rule share ({n}): {o['verify_share']:.2%} of step time (limit {RULE_SHARE_LIMIT:.0%}): {ok}")
    o = res["overheads"].get(DROPMATCH)
    if o and o.get("dropmatch_lm_head_share") is not None:
        ok = "OK" if o["dropmatch_lm_head_share"] < RULE_SHARE_LIMIT else "OVER"
        print(f"DropMatch LM-head passes + criterion: {o['dropmatch_lm_head_share']:.2%} of step time "
              f"(limit {RULE_SHARE_LIMIT:.0%}): {ok}")
    cal = res.get("calibration")
    if cal:
        ks = ", ".join(f"{key.split('_')[1]}-token {1000 * v:.1f} ms" for key, v in cal.items() if key.startswith("target_"))
        print()
        print(f"isolated forwards at {cal['context']} cached tokens (medians of {cal['reps']}; our attention): "
              f"target {ks}; draft 1-token {1000 * cal['draft_1']:.1f} ms -> c = {cal['c']:.3f}")
    if res["costmodel"]:
        print()
        print("cost model (decode only): predicted = E / (v(K) + c F); E from the per-position acceptance rates,")
        print("c and v(K) = (K+1)-token / 1-token target forward from the isolated forwards above, F = draft forwards")
        print("per step; c_run, v_run, o_run: the same from the runs' phase times (o = rule + rollback + bookkeeping)")
        print(f"{'contestant':<12} {'c':>6} {'v':>5} {'F':>5} {'E':>5} {'tau':>5} {'predicted':>9} {'measured':>8}  "
              f"{'c_run':>6} {'v_run':>5} {'o_run':>5}  per-position acceptance")
        for n, m in res["costmodel"].items():
            rates = " ".join("-" if r is None else f"{r:.2f}" for r in m["rates"])
            print(f"{n:<12} {fmt(m.get('c')):>6} {fmt(m.get('verify_factor'), '.2f'):>5} {m['draft_forwards_per_step']:>5.2f} "
                  f"{m['expected_tokens']:>5.2f} {m['measured_tau']:>5.2f} {fmt(m.get('predicted_speedup'), '.2f', 'x'):>9} "
                  f"{m['measured_decode_speedup']:>7.2f}x  {m['c_run']:>6.3f} {m['v_run']:>5.2f} {m['other_run']:>5.3f}  {rates}")
    if res.get("projections"):
        print()
        print("projection to other scales (inputs, not claims: c and v as given on the command line; rates from this run,")
        print("extended geometrically past the measured K)")
        for line in res["projections"]:
            print("  " + line)


def summarize(runs: list[Run], bench: Bench, args: argparse.Namespace, calib: dict[str, Any] | None = None) -> dict[str, Any]:
    names = list(bench.contestants)
    res: dict[str, Any] = {"contestants": {}, "comparisons": {}, "overheads": {}, "costmodel": {}, "calibration": calib}
    for n in names:
        s = per_contestant(runs, n)
        if n != TARGET_ALONE and TARGET_ALONE in names and bench.contestants[n].ours:
            s["speedup_vs_ar"] = speedup_vs_ar(runs, n)
        res["contestants"][n] = s
    targets = {
        (TARGET_ALONE, HF_AR): ("<= 1.02", 1.02), (SPD, HF_ASSIST): ("<= 0.90", 0.90), (SPD_MLA, HF_ASSIST): ("<= 0.90", 0.90),
        (PLD, HF_PLD): ("<= 1.00", 1.00),
    }
    for a, b, _ in bench.comparisons:
        if a in names and b in names:
            lossless = bench.contestants[a].lossless and bench.contestants[b].lossless
            c = compare(runs, a, b, lossless)
            if (a, b) in targets and c["time_ratio_median"] is not None:
                text, lim = targets[(a, b)]
                c["target"] = f"{text}: {'met' if c['time_ratio_median'] <= lim else 'MISSED'}"
            res["comparisons"][f"{a}|{b}"] = c
    if TARGET_ALONE in names and res["contestants"][TARGET_ALONE]["accuracy_math"]:
        base = res["contestants"][TARGET_ALONE]["accuracy_math"]
        res["retention"] = {
            n: res["contestants"][n]["accuracy_math"] / base
            for n in names
            if n != TARGET_ALONE and bench.contestants[n].ours and res["contestants"][n]["accuracy_math"] is not None
        }
    for n in names:
        if bench.contestants[n].ours:
            o = overheads(runs, n)
            if o:
                res["overheads"][n] = o
            if n != TARGET_ALONE:
                m = cost_model(runs, n, bench.contestants[n].k, res.get("calibration"))
                if m:
                    res["costmodel"][n] = m
    lines = []
    for n, m in res["costmodel"].items():
        if not m.get("c"):  # prompt lookup: no draft model to re-cost
            continue
        k = bench.contestants[n].k
        # Draft forwards per draft token as measured (1 for a draft model, < 1 with MLA).
        per_token = m["draft_forwards_per_step"] / k
        for c in args.project_c:
            p = costmodel.project(m["rates"], c=c, k=k, verify_factor=args.project_v, draft_forwards=per_token * k)
            b = costmodel.best_k(m["rates"], c=c * per_token, k_max=args.project_k_max, verify_factor=args.project_v)
            lines.append(f"{n} rates, c={c:.3f}, v={args.project_v:.2f}: K={k} -> {p.speedup:.2f}x "
                         f"(E {p.expected_tokens:.2f}); best K<={args.project_k_max}: K={b.k} -> {b.speedup:.2f}x")
    res["projections"] = lines
    return res


# ---------------------------------------------------------------------------------------------
