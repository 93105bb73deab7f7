"""Batch-sweep points (experiment=batch_sweep, issue 47; batch_sweep_hf, issue 69): one per
(configuration, batch size, request rate) served in batches (engine=vllm, or our loop as
engine=hf_serve; samples' metrics.serving), with throughput, the speedup over the target alone
paired beside it, tau and latency percentiles, each with its interval recomputed from the run's
samples (loosespec_bench.measure.serving), and the target alone's own points: its paired runs at
one batch size pooled per engine (every method's point ran it beside itself), labelled as the
methods are ("target alone" for our loop, "target alone on vLLM").

The table (tables/batch.py) and the figure (plots/batch.py) read these; so does the projection
onto the papers' hardware (project.batch_projection), from each point's tau.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import pandas as pd

from ..measure.latency import LABELS as LATENCY_LABELS, STAT_NAMES
from ..measure.serving import LATENCIES, serving_summary, side_summary, timed_served
from ..measure.stats.intervals import speed_baseline, tau_interval
from ..settings.config import DEFAULT_ENGINE, engine_display_name
from .grouping import machines_of, our_runs
from .index import read_records
from .labels import is_target_alone, method_label

TARGET_ALONE = "target alone"
# Each latency in the unit it is read in (TPOT per token in ms; TTFT and end-to-end in s).
LATENCY_UNITS = {"ttft_s": ("s", 1.0), "tpot_s": ("ms", 1e3), "e2e_s": ("s", 1.0)}
# (figure key in serving's fields, label, kind, scale): the figures a point carries: speed, then
# every latency with vllm bench serve's statistics (measure/latency.py: the one declared set).
FIGURES = (
    ("throughput_tok_s", "throughput (tok/s)", "tok_s", 1.0),
    ("throughput_speedup", "speedup over target alone", "speedup", 1.0),
    *((f"{lat}_{s}", f"{LATENCY_LABELS[lat]} {s} ({LATENCY_UNITS[lat][0]})", LATENCY_UNITS[lat][0], LATENCY_UNITS[lat][1])
      for lat in LATENCIES for s in STAT_NAMES),
)
Interval = tuple[float | None, float | None, float | None]


@dataclass
class BatchPoint:
    label: str  # the configuration's name (labels.method_label); TARGET_ALONE (on <engine>) for the pooled baselines
    method: str | None
    drafter: str | None
    k: int | None
    batch: int
    rate: float | None  # requests/s arriving (None: a batch at once)
    figures: dict[str, Interval] = field(default_factory=dict)  # key -> (point, low, high), unscaled
    tau: Interval | None = None
    identical: float | None = None  # fraction of outputs token-identical to the target alone's
    n_requests: int = 0
    n_timed_batches: int = 0
    # Distinct batches behind the timed ones (timed = distinct x repeats): an interval over the
    # repeats of fewer than MIN_UNITS distinct batches measures timing repeatability only, not
    # the spread over prompts (issue 70), and the table flags it.
    n_distinct_batches: int | None = None
    others_share_max: float | None = None
    machines: tuple[str, ...] = ()
    runs: list[str] = field(default_factory=list)
    engine: str = ""  # the engine=<name> that served it

    @property
    def target_alone(self) -> bool:
        """A pooled target-alone point (no draft: no tau, no speedup, no projection)."""
        return self.method == "ar"


def _fig(summary: dict[str, Any], key: str, prefix: str = "") -> Interval:
    k = prefix + key
    return summary.get(k), summary.get(f"{k}_ci_low"), summary.get(f"{k}_ci_high")


def batch_points(index: pd.DataFrame, records_of: Callable[[Any], list[dict[str, Any]]] | None = None, *, seed: int = 0) -> list[BatchPoint]:
    """Every served configuration's point, then the target alone's per (batch, rate), sorted by
    label and batch size. records_of(run_dir) reads a run's samples (default: its samples.jsonl)."""
    records_of = records_of or (lambda run_dir: read_records(Path(run_dir)))
    runs = our_runs(index)
    if runs.empty or "engine" not in runs:
        return []
    # Our batch-1 loop (engine=hf) never serves batches; every other engine's runs are read, and
    # those whose samples were served (metrics.serving: vLLM, engine=hf_serve) become points.
    runs = runs[runs["engine"].astype(str) != DEFAULT_ENGINE]
    runs = runs[~runs["method"].map(is_target_alone)]
    points: list[BatchPoint] = []
    baselines: dict[tuple[str, int, float | None], list[tuple[list[dict[str, Any]], dict[str, Any]]]] = {}
    for _, row in runs.iterrows():
        records = records_of(row["run_dir"])
        timed = timed_served(records)
        summary = serving_summary(records, seed=seed)
        if not timed or summary is None:
            continue
        batch, rate = int(summary["batch_size"]), summary.get("request_rate")
        point = BatchPoint(
            label=method_label(row), method=row.get("method"), drafter=row.get("drafter"),
            k=None if pd.isna(row.get("K")) else int(row["K"]), batch=batch, rate=rate,
            figures={key: _fig(summary, key) for key, *_ in FIGURES},
            tau=tau_interval(records, seed=seed),
            identical=None if pd.isna(row.get("identical_to_target")) else float(row["identical_to_target"]),  # the run summary's
            n_requests=len(timed), n_timed_batches=int(summary["n_timed_batches"]),
            n_distinct_batches=_distinct(summary),
            others_share_max=summary.get("others_share_max"), machines=tuple(machines_of([row])), runs=[str(row["run_dir"])],
            engine=str(row["engine"]),
        )
        points.append(point)
        sides = [speed_baseline(r) for r in timed]
        base = [s["metrics"] for s in sides if s and s.get("metrics", {}).get("serving")]
        if base:
            baselines.setdefault((str(row["engine"]), batch, rate), []).append((base, {"row": row, "summary": summary}))
    for (engine, batch, rate), members in baselines.items():
        pooled = side_summary([m for m, _ in members], seed=seed)
        if pooled is None:
            continue
        tag = engine_display_name(engine)  # as method_label tags a method: our loop's untagged
        points.append(BatchPoint(
            label=f"{TARGET_ALONE} on {tag}" if tag else TARGET_ALONE, method="ar", drafter=None, k=None, batch=batch, rate=rate,
            figures={key: _fig(pooled, key) for key, *_ in FIGURES if key != "throughput_speedup"},
            tau=None, identical=None,  # no draft: tau is 1 by definition, the outputs are the reference
            n_requests=sum(len(m) for m, _ in members), n_timed_batches=int(pooled["n_timed_batches"]),
            others_share_max=max((x["summary"].get("others_share_max") or 0.0) for _, x in members),
            machines=tuple(sorted({m for _, x in members for m in machines_of([x["row"]])})),
            runs=[str(x["row"]["run_dir"]) for _, x in members], engine=engine,
        ))
    points.sort(key=lambda p: (not p.target_alone, p.label, p.rate or 0.0, p.batch))
    return points


def _distinct(summary: dict[str, Any]) -> int | None:
    """Distinct batches of a point: its timed batches over its repeats of each."""
    timed, repeats = summary.get("n_timed_batches"), summary.get("repeats")
    if not timed or not repeats:
        return None
    return max(1, round(int(timed) / int(repeats)))


def repeats_only(p: BatchPoint) -> bool:
    """The point's intervals resample repeats of fewer than MIN_UNITS distinct batches."""
    from ..measure.serving import MIN_UNITS

    return p.n_distinct_batches is not None and p.n_distinct_batches < MIN_UNITS and p.n_timed_batches >= MIN_UNITS


def stops_paying(points: list[BatchPoint]) -> dict[str, int | None]:
    """Per configuration, the smallest batch size from which its speedup's interval lies wholly at
    or below 1 at that and every larger batch measured (None: it still pays, or cannot be told, at
    the largest). Requests arriving at once only."""
    return {label: v[1] for label, v in paying(points).items()}


def paying(points: list[BatchPoint]) -> dict[str, tuple[list[int], int | None]]:
    """Per configuration: the batch sizes at which its speedup's interval lies wholly above 1 (it
    pays), and stops_paying's batch size."""
    out: dict[str, tuple[list[int], int | None]] = {}
    by: dict[str, list[BatchPoint]] = {}
    for p in points:
        if not p.target_alone and p.rate is None:
            by.setdefault(p.label, []).append(p)
    for label, ps in by.items():
        ps.sort(key=lambda p: p.batch)
        first: int | None = None
        pays: list[int] = []
        for p in ps:
            _, low, high = p.figures.get("throughput_speedup", (None, None, None))
            if low is not None and low > 1.0:
                pays.append(p.batch)
            if high is not None and high <= 1.0:
                first = p.batch if first is None else first
            else:
                first = None
        out[label] = (pays, first)
    return out


def paying_text(points: list[BatchPoint]) -> str:
    """'SPD (...): above 1 at batch 1, 2; at or below 1 from batch 8', one clause per configuration."""
    parts = []
    for label, (pays, stops) in sorted(paying(points).items()):
        above = f"above 1 at batch {', '.join(map(str, pays))}" if pays else "above 1 at no batch"
        below = f"at or below 1 from batch {stops} on" if stops else "not at or below 1 throughout any larger batches"
        parts.append(f"{label}: {above}; {below}")
    return "; ".join(parts)


__all__ = ["BatchPoint", "batch_points", "stops_paying", "paying", "paying_text", "repeats_only", "FIGURES", "TARGET_ALONE"]
