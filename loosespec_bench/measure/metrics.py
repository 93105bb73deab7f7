"""Per-sample metrics and their aggregation over a run.

Definitions (stated once, used everywhere):
- tau (mean accepted length) = emitted tokens / verification steps, counting the correction
  or bonus token, so 1 <= tau <= K + 1. Run tau pools all samples' tokens and steps.
- speedup = (method new tokens / method generation time) / (target-alone new tokens /
  target-alone generation time), both over the same samples, both timed the same way
  (prefill + decode) in the same process, paired per sample with alternating order. For a
  lossless method the two outputs are identical, so this equals the time ratio. A paired
  sample whose two sides ran under different machine conditions, re-timed and still
  contaminated (timing.py), is left out of the speed figures (its quality still counts).
- retention = method accuracy / target-alone accuracy on the same samples.
"""

from __future__ import annotations

import statistics
from typing import Any, Hashable, Mapping, Sequence, TypeVar

from ..generation import GenerationOutput
from .latency import latency_stats
from .stats.intervals import speed_baseline
from .timing import counts_for_speed
from .work import merge_work, per_token

SPEEDUP_METHOD = (
    "throughput ratio (new tokens per second, prefill + decode) of the method over the target "
    "alone, on the same samples, same process, paired per sample in alternating order after warm-up"
)


def sample_metrics(gen: GenerationOutput, prompt_tokens: int) -> dict[str, Any]:
    total_s = gen.prefill_s + gen.decode_s
    return {
        "prompt_tokens": prompt_tokens,
        "new_tokens": len(gen.new_tokens),
        "steps": gen.steps,
        "accepted": gen.accepted,  # draft tokens accepted per step
        "drafted": gen.drafted,  # draft tokens offered per step
        "tau": gen.tau,
        "prefill_s": gen.prefill_s,
        "decode_s": gen.decode_s,
        "total_s": total_s,
        "tokens_per_s": len(gen.new_tokens) / total_s if total_s > 0 else 0.0,
        "phase_s": gen.phase_s,
        "stop_reason": gen.stop_reason,
        **latency(gen),
        **({"itl_s": [round(x, 6) for x in gen.itl_s]} if gen.itl_s else {}),  # per step after the first
        **({"serving": gen.serving} if gen.serving else {}),
        **({"work": gen.work, "work_per_token": per_token(gen.work)} if gen.work else {}),
    }


def latency(gen: GenerationOutput) -> dict[str, float | None]:
    """ttft_s: time to the first new token (prefill + first step; a batched engine: from the
    request's arrival); e2e_s: arrival to the last token (prefill + decode where the engine
    gives no e2e_s); tpot_s: time per output token after the first, (e2e - ttft) / (new tokens - 1).
    None where not measured or with fewer than two new tokens."""
    e2e = gen.e2e_s if gen.e2e_s is not None else gen.prefill_s + gen.decode_s
    ttft = gen.ttft_s
    n = len(gen.new_tokens)
    tpot = (e2e - ttft) / (n - 1) if ttft is not None and n > 1 else None
    return {"ttft_s": ttft, "tpot_s": tpot, "e2e_s": e2e}


def latency_summary(ms: Sequence[Mapping[str, Any]], prefix: str = "") -> dict[str, float | None]:
    """Every latency's statistics (latency.STATS: vllm bench serve's set) over one side's samples'
    metrics: TTFT, TPOT and end-to-end one value per request; ITL pooled over every request's
    steps, as vllm bench pools its inter-token latencies."""
    out: dict[str, float | None] = {}
    for name in ("ttft_s", "tpot_s", "e2e_s"):
        out.update(latency_stats([m.get(name) for m in ms], f"{prefix}{name}"))
    gaps = [x for m in ms if isinstance(m.get("itl_s"), list) for x in m["itl_s"] if isinstance(x, (int, float))]
    out.update(latency_stats(gaps, f"{prefix}itl_s"))
    return out


def work_summary(records: list[dict[str, Any]], side: str | None = None) -> dict[str, Any]:
    """Run totals of the work counts (work.py) and per emitted token, for the method
    (side None) or the paired target alone (side "baseline"); {} when no record has counts."""
    ms = [((r.get(side) or {}) if side else r).get("metrics") or {} for r in records]
    works = [m.get("work") for m in ms]
    if not any(works):
        return {}
    total = merge_work(works)
    prefix = f"{side}_" if side else ""
    return {f"{prefix}work": total, f"{prefix}work_per_token": per_token(total),
            f"{prefix}work_complete": all(bool(w) for w in works)}


def acceptance_by_position(records: list[dict[str, Any]]) -> list[float]:
    """rate[i] = P(draft position i+1 accepted | it was drafted), pooled over steps."""
    from .stats.intervals import position_counts  # here, not at the top: stats brings scipy, metrics stays light

    offered, taken = position_counts(records)
    return [t / o for t, o in zip(taken, offered)]


def loose_summary(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Loose-decision figures from per-step records (rec["steps"]); {} when no rule left any.

    Reads the keys that lossy rules (FLy, DropMatch) put into Verdict.record:
    - raw_match: [K] exact-rule flags (T = 0: d_i == t_i; T > 0: the rule's own exact test);
    - loose_accepted: positions accepted although raw_match is False;
    - dropmatch_s: DropMatch's extra LM-head + criterion time.
    Figures:
    - mismatches: raw mismatches over all drafted positions; loose_accepts: those accepted
      anyway; loose_accept_rate = loose_accepts / mismatches;
    - tau_with_loose = sum(accepted + 1) / steps and tau_without_loose = sum(longest raw-match
      prefix + 1) / steps over the same steps: what exact match would have accepted on the
      very drafts the loose rule saw (the trajectories differ after a loose accept, so this is
      the per-step gain, not a rerun of SPD);
    - dropmatch_overhead = sum(dropmatch_s) / method decode time.
    """
    steps = [s for r in records for s in r.get("steps", []) if "raw_match" in s]
    if not steps:
        return {}
    mismatches = sum(sum(not f for f in s["raw_match"]) for s in steps)
    loose = sum(len(s.get("loose_accepted", [])) for s in steps)
    with_loose = sum(s["accepted"] + 1 for s in steps)
    # Longest raw-match prefix + 1: exact match's accepted tokens plus its correction/bonus.
    without_loose = sum(next((i for i, f in enumerate(s["raw_match"]) if not f), len(s["raw_match"])) + 1 for s in steps)
    out: dict[str, Any] = {
        "loose_steps": len(steps),
        "mismatches": mismatches,
        "loose_accepts": loose,
        "loose_accept_rate": _ratio(loose, mismatches),
        "tau_with_loose": with_loose / len(steps),
        "tau_without_loose": without_loose / len(steps),
    }
    timed = [s["dropmatch_s"] for s in steps if "dropmatch_s" in s]
    if timed:
        decode = sum(r["metrics"]["decode_s"] for r in records if r.get("steps"))
        out["dropmatch_s"] = sum(timed)
        out["dropmatch_overhead"] = _ratio(sum(timed), decode)
    return out


def dropmatch_cost_parts(records: list[dict[str, Any]]) -> dict[str, list[float]]:
    """Per sample whose steps carry DropMatch's timings, paired lists: `dropmatch_s` (its N-path
    LM-head passes and criterion, summed over the steps), `target_s` (the target's verification
    forwards, metrics.phase_s.target) and `decode_s`. Samples without them are left out; the lists
    are empty when no sample has them (the rule did not run, or record_steps was off)."""
    out: dict[str, list[float]] = {"dropmatch_s": [], "target_s": [], "decode_s": []}
    for r in records:
        timed = [s["dropmatch_s"] for s in r.get("steps") or [] if "dropmatch_s" in s]
        target = ((r.get("metrics") or {}).get("phase_s") or {}).get("target")
        if not timed or target is None:
            continue
        out["dropmatch_s"].append(float(sum(timed)))
        out["target_s"].append(float(target))
        out["decode_s"].append(float(r["metrics"]["decode_s"]))
    return out


def _ratio(a: float, b: float) -> float | None:
    return a / b if b else None


def paired_speedup(records: list[dict[str, Any]]) -> dict[str, float | None]:
    """Pooled speedup over the records that carry a paired target-alone run (see the module
    docstring): method tokens/s over target-alone tokens/s, both summed over the same samples.
    Returns {} when no record is paired."""
    paired = [r for r in records if r.get("baseline")]
    if not paired:
        return {}
    b_tokens = sum(speed_baseline(r)["metrics"]["new_tokens"] for r in paired)
    b_time = sum(speed_baseline(r)["metrics"]["total_s"] for r in paired)
    p_tokens = sum(r["metrics"]["new_tokens"] for r in paired)
    p_time = sum(r["metrics"]["total_s"] for r in paired)
    baseline = _ratio(b_tokens, b_time)
    method = _ratio(p_tokens, p_time)
    # timed_tokens_per_s: the method's rate on the same samples as the target alone's, so the two
    # printed rates divide to the speedup (the run's tokens_per_s also counts untimed samples).
    return {"baseline_tokens_per_s": baseline, "timed_tokens_per_s": method, "speedup": _ratio(method or 0.0, baseline or 0.0)}


def sample_speedup(record: Mapping[str, Any]) -> float | None:
    """One paired sample's speedup: its tokens/s over its target-alone run's tokens/s (None
    without a paired baseline or with a zero or missing rate). The one per-sample definition:
    summarize's median of samples and the W&B sink's per-sample figure read it."""
    base = speed_baseline(record) or {}
    mine = (record.get("metrics") or {}).get("tokens_per_s")
    theirs = (base.get("metrics") or {}).get("tokens_per_s")
    if isinstance(mine, bool) or isinstance(theirs, bool) or not isinstance(mine, (int, float)) or not isinstance(theirs, (int, float)):
        return None
    return mine / theirs if theirs > 0 else None


T = TypeVar("T")


def median_or_none(xs: Sequence[float]) -> float | None:
    return statistics.median(xs) if xs else None


def pair_up(a: Mapping[Hashable, T], b: Mapping[Hashable, T]) -> list[tuple[T, T]]:
    """(a[key], b[key]) for every key in both, in a's order: two contestants' runs on the same
    (prompt, repeat), the unit that paired comparisons are made of."""
    return [(x, b[key]) for key, x in a.items() if key in b]


def paired_ratio_stats(ratios: Sequence[float], identical: Sequence[bool], name: str = "ratio") -> dict[str, Any]:
    """Median of paired ratios (robust to a shared machine's slow drift and to outlier pairs),
    its range, and the median over the pairs whose outputs were identical (bf16 near-ties can
    send two lossless contestants down different, often different-length, outputs).
    Keys: <name>_median, <name>_median_identical, <name>_min, <name>_max, identical (count)."""
    return {
        f"{name}_median": median_or_none(ratios),
        f"{name}_median_identical": median_or_none([x for x, same in zip(ratios, identical) if same]),
        f"{name}_min": min(ratios) if ratios else None,
        f"{name}_max": max(ratios) if ratios else None,
        "identical": sum(bool(x) for x in identical),
    }


def summarize(records: list[dict[str, Any]], quality: dict[str, Any], baseline_quality: dict[str, Any]) -> dict[str, Any]:
    """Run-level figures from per-sample records (each with `metrics`, maybe `baseline`)."""
    if not records:
        return {"n_samples": 0}
    ms = [r["metrics"] for r in records]
    tokens = sum(m["new_tokens"] for m in ms)
    steps = sum(m["steps"] for m in ms)
    time_s = sum(m["total_s"] for m in ms)
    out: dict[str, Any] = {
        "n_samples": len(records),
        "new_tokens": tokens,
        "steps": steps,
        "tau": tokens / steps if steps else None,
        "tau_mean_of_samples": statistics.fmean(m["tau"] for m in ms),
        "tokens_per_s": _ratio(tokens, time_s),
        "time_s": time_s,
        "prefill_s": sum(m["prefill_s"] for m in ms),
        "decode_s": sum(m["decode_s"] for m in ms),
        "acceptance_by_position": acceptance_by_position(records),
        **quality,
    }
    phase_tot: dict[str, float] = {}
    for m in ms:
        for name, sec in m.get("phase_s", {}).items():
            phase_tot[name] = phase_tot.get(name, 0.0) + sec
    decode = out["decode_s"]
    out["phase_fraction"] = {k: v / decode for k, v in phase_tot.items()} if decode else {}
    out.update(loose_summary(records))
    out.update(work_summary(records))
    out.update(latency_summary(ms))

    paired = [r for r in records if r.get("baseline")]
    if paired:
        timed = [r for r in paired if counts_for_speed(r)]  # contaminated timings left out
        per_sample = [x for x in map(sample_speedup, timed) if x is not None]
        out.update(
            **(paired_speedup(timed) or {"baseline_tokens_per_s": None, "timed_tokens_per_s": None, "speedup": None}),
            speedup_median_of_samples=median_or_none(per_sample),
            speedup_method=SPEEDUP_METHOD,
            identical_to_target=sum(r["baseline"]["output_ids"] == r["output_ids"] for r in paired) / len(paired),
            n_paired=len(paired),
            n_timed=len(timed),
        )
        out.update(work_summary(paired, "baseline"))
        bms = [speed_baseline(r)["metrics"] for r in timed]
        out.update(latency_summary(bms, "baseline_"))
        for key, value in baseline_quality.items():
            out[f"baseline_{key}"] = value
        if "accuracy" in quality and baseline_quality.get("accuracy") is not None:
            out["retention"] = _ratio(quality["accuracy"], baseline_quality["accuracy"])
    return out
