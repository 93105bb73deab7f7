"""Serving measures of a batched run (engine.batch_size, engine.request_rate): throughput, and
TTFT, TPOT and end-to-end latency percentiles, each with an interval over the run's timed batches.

A batched engine (engines/vllm.py) records on each sample `metrics.serving`: the batch it ran in
and, per repeat of that batch, the batch's makespan and new tokens and the request's own TTFT
and end-to-end latency (from its arrival). The unit of timing is a (batch, repeat): the requests
of one batch share its makespan, so they are not independent draws. Every interval here resamples
whole units (a cluster bootstrap, percentile interval, seeded): throughput is a ratio of sums over
the resampled units, a latency percentile is taken over all requests of the resampled units, and
the speedup over the target alone resamples a unit's two sides together (the paired baseline ran
the same batch beside it). Fewer than MIN_UNITS units: no interval.
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import numpy as np

from .latency import STAT_NAMES, stat
from .stats.exact import LEVEL
from .stats.intervals import speed_baseline
from .timing import counts_for_speed

N_BOOT = 2000
MIN_UNITS = 3
# Per request; each printed with latency.STATS (vllm bench serve's set). A served request has no
# per-step times here, so no ITL (the batch-1 loop measures it: metrics.latency_summary).
LATENCIES = ("ttft_s", "tpot_s", "e2e_s")
CI_TEXT = (
    "cluster bootstrap over timed batches (batch x repeat; a batch's requests share its wall time), "
    f"percentile interval, {N_BOOT} resamples, level {LEVEL}"
)


def batch_repeats(n_requests: int, batch_size: int, timed_batches: int) -> int:
    """How often each batch runs so that a run of n_requests in batches of batch_size has at least
    timed_batches timed batches (distinct batches x repeats); 1 when it has enough already."""
    if n_requests <= 0:
        return 1
    distinct = math.ceil(n_requests / max(1, batch_size))
    return max(1, math.ceil(timed_batches / distinct))


def batch_size_of(serving: Mapping[str, Any]) -> int:
    """A record's engine.batch_size. Records served before issue 71 named it max_num_seqs (vLLM's
    keyword) and kept the batch's own request count under batch_size; theirs is read as it was."""
    legacy = serving.get("max_num_seqs")
    return int(legacy if legacy else serving["batch_size"])


def _units(metrics: Sequence[Mapping[str, Any]], tag: str = "") -> dict[tuple[str, str, int], dict[str, Any]]:
    """(tag, batch, repeat) -> {makespan, tokens, requests: [(ttft, tpot, e2e)]} from samples'
    metrics; tag keeps apart batches of different runs pooled together (side_summary)."""
    units: dict[tuple[str, str, int], dict[str, Any]] = {}
    for m in metrics:
        sv = m.get("serving")
        if not sv:
            continue
        for r, (span, tokens) in enumerate(zip(sv["makespan_s"], sv["batch_tokens"])):
            u = units.setdefault((tag, str(sv["batch"]), r), {"makespan": float(span), "tokens": int(tokens), "requests": []})
            ttft, e2e, n = sv["ttft_s"][r], sv["e2e_s"][r], sv["new_tokens"][r]
            tpot = (e2e - ttft) / (n - 1) if ttft is not None and e2e is not None and n > 1 else None
            u["requests"].append((ttft, tpot, e2e))
    return units


def _throughput(units: list[dict[str, Any]]) -> float | None:
    span = sum(u["makespan"] for u in units)
    return sum(u["tokens"] for u in units) / span if span > 0 else None


def _latency_stat(units: list[dict[str, Any]], which: int, name: str) -> float | None:
    return stat([req[which] for u in units for req in u["requests"] if req[which] is not None], name)


def _interval(draws: list[float | None]) -> tuple[float | None, float | None]:
    xs = [d for d in draws if d is not None and math.isfinite(d)]
    if not xs:
        return None, None
    a = (1.0 - LEVEL) / 2.0
    return float(np.quantile(xs, a)), float(np.quantile(xs, 1.0 - a))


def _side(units: list[dict[str, Any]], picks: list[np.ndarray], prefix: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    stats: list[tuple[str, Any]] = [("throughput_tok_s", _throughput)]
    for i, name in enumerate(LATENCIES):
        for label in STAT_NAMES:
            stats.append((f"{name}_{label}", lambda us, i=i, label=label: _latency_stat(us, i, label)))
    for name, fn in stats:
        out[f"{prefix}{name}"] = fn(units)
        lo, hi = _interval([fn([units[j] for j in p]) for p in picks]) if picks else (None, None)
        out[f"{prefix}{name}_ci_low"], out[f"{prefix}{name}_ci_high"] = lo, hi
    return out


def load_fields(servings: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The machine's load over the run's batches (the app's probe around each batch, both
    sides): other processes' median and largest share of the CPU, and the largest 1-min load."""
    seen: dict[tuple[str, int], Mapping[str, Any]] = {}
    for sv in servings:
        for r, load in enumerate(sv.get("load") or []):
            seen.setdefault((str(sv["batch"]), r), load)
    shares = [float(x["others_share"]) for x in seen.values() if x.get("others_share") is not None]
    loads = [float(x["loadavg"]) for x in seen.values() if x.get("loadavg") is not None]
    return {
        "others_share_median": float(np.median(shares)) if shares else None,
        "others_share_max": max(shares) if shares else None,
        "loadavg_1m_max": max(loads) if loads else None,
    }


def _picks(n: int, seed: int) -> list[np.ndarray]:
    if n < MIN_UNITS:
        return []
    rng = np.random.default_rng(seed)
    return [rng.integers(0, n, n) for _ in range(N_BOOT)]


def timed_served(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The records a serving figure counts: served in batches, their timing not excluded."""
    return [r for r in records if r.get("metrics", {}).get("serving") and counts_for_speed(r)]


def side_summary(runs: Sequence[Sequence[Mapping[str, Any]]], *, seed: int = 0) -> dict[str, Any] | None:
    """Throughput and latency percentiles with intervals over the timed batches of one side
    (samples' metrics) pooled over several runs (the target alone beside several methods at one
    batch size); None without a served batch."""
    units: dict[tuple[str, str, int], dict[str, Any]] = {}
    for i, metrics in enumerate(runs):
        units.update(_units(metrics, tag=str(i)))
    if not units:
        return None
    keys = sorted(units)
    return {"n_timed_batches": len(keys), **_side([units[k] for k in keys], _picks(len(keys), seed), "")}


def serving_summary(records: list[dict[str, Any]], *, seed: int = 0) -> dict[str, Any] | None:
    """The run's serving figures (None: no record was served in batches). Method side, the paired
    target alone (baseline_*), and the throughput speedup, over the timed records' units."""
    timed = timed_served(records)
    if not timed:
        return None
    mine = _units([r["metrics"] for r in timed])
    keys = sorted(mine)
    first = timed[0]["metrics"]["serving"]
    out: dict[str, Any] = {
        "batch_size": batch_size_of(first),
        "request_rate": first.get("request_rate"),
        "n_batches": len({k[1] for k in keys}),
        "repeats": 1 + max(k[2] for k in keys),
        "n_timed_batches": len(keys),
        "n_requests": len(timed),
        "identical_repeats": sum(bool(r["metrics"]["serving"].get("identical_repeats", True)) for r in timed) / len(timed),
        "ci_method": CI_TEXT,
        **load_fields([r["metrics"]["serving"] for r in timed]),
    }
    picks = _picks(len(keys), seed)
    units = [mine[k] for k in keys]
    out.update(_side(units, picks, ""))
    sides = [speed_baseline(r) for r in timed]
    base = _units([s["metrics"] for s in sides if s and s.get("metrics", {}).get("serving")])
    if base and all(k in base for k in keys):
        bunits = [base[k] for k in keys]
        out.update(_side(bunits, picks, "baseline_"))

        def speedup(idx: Sequence[int]) -> float | None:
            m, b = _throughput([units[j] for j in idx]), _throughput([bunits[j] for j in idx])
            return m / b if m and b else None

        out["throughput_speedup"] = speedup(range(len(keys)))
        lo, hi = _interval([speedup(p) for p in picks]) if picks else (None, None)
        out["throughput_speedup_ci_low"], out["throughput_speedup_ci_high"] = lo, hi
    return out


__all__ = ["batch_repeats", "batch_size_of", "serving_summary", "side_summary", "timed_served", "load_fields", "CI_TEXT", "MIN_UNITS"]
