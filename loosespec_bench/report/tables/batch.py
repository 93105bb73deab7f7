"""Speculative decoding under load (experiment=batch_sweep): per configuration and batch size,
throughput, the speedup over the target alone run beside it on the same batches, tau, TPOT,
TTFT and end-to-end latency percentiles, each with its interval over the point's timed batches
(report/batches.py), and the speedup the cost model projects for the papers' hardware
(report/profiles, project.batch_projection) from the point's tau."""

from __future__ import annotations

from typing import Any, Callable

import pandas as pd

from ...errors import ConfigError
from ...measure.latency import LABELS as LATENCY_LABELS
from ...measure.serving import CI_TEXT, LATENCIES
from ..batches import FIGURES, BatchPoint, batch_points, paying_text, repeats_only
from ..project import batch_projection, load_profile
from ..render import NA, Num, Table

PROFILE = "llama31-8b-70b-h100"


def _cell(fig: tuple[float | None, float | None, float | None] | None, kind: str, scale: float = 1.0) -> Any:
    if fig is None or fig[0] is None:
        return NA
    point, low, high = fig
    ci = (low * scale, high * scale) if low is not None and high is not None else None
    return Num(point * scale, kind, ci=ci, no_interval=ci is None, why_none="fewer than 3 timed batches")


def projected(p: BatchPoint, profile: dict[str, Any] | None) -> Any:
    """The point's speedup projected onto the profile's hardware at its batch size, from its tau."""
    if p.target_alone:
        return "-"
    if profile is None or p.tau is None or p.tau[0] is None or not p.k:
        return NA
    point, low, high = batch_projection(profile, k=p.k, tau=float(p.tau[0]), batch=p.batch, draft_model=p.drafter == "model", n_draws=500)
    return Num(point, "speedup", ci=(low, high))


def batch_sweep_table(index: pd.DataFrame, records_of: Callable[[Any], list[dict[str, Any]]] | None = None) -> Table:
    points = batch_points(index, records_of)
    try:
        profile = load_profile(PROFILE)
    except (ConfigError, OSError):  # a profile that cannot be read: the column says n/a, the table stands
        profile = None
    columns = ["configuration", "batch", "arrivals", "tau", *(label for _, label, _, _ in FIGURES)]
    columns += ["projected speedup, 70B on H100", "identical to target alone", "timed batches", "others' CPU (max)"]
    rows: list[list[Any]] = []
    for p in points:
        rows.append([
            p.label, p.batch, "at once" if p.rate is None else f"{p.rate:g}/s (Poisson)",
            "-" if p.target_alone else _cell(p.tau, "tau"),
            *[_cell(p.figures.get(key), kind, scale) if key in p.figures else "-" for key, _, kind, scale in FIGURES],
            projected(p, profile),
            "-" if p.target_alone else NA if p.identical is None else f"{p.identical:.2f}",
            (f"{p.n_timed_batches} ({p.n_distinct_batches} distinct x {p.n_timed_batches // max(1, p.n_distinct_batches or 1)} "
             f"repeats) ‡" if repeats_only(p) else p.n_timed_batches),
            NA if p.others_share_max is None else f"{p.others_share_max:.1%}",
        ])
    said = paying_text(points)
    machines = sorted({m for p in points for m in p.machines})
    notes = [
        "Every point runs through vLLM with the target alone paired beside it on the same batches (alternating order); "
        "'target alone' rows pool those paired runs at each batch size. Throughput = the point's new tokens ÷ its batches' summed makespans "
        "(first arrival to last token); TPOT = (end-to-end − TTFT) ÷ (new tokens − 1) per request; each latency's mean, standard deviation (np.std, as vllm bench serve) "
        "and percentiles over every request and repeat (vllm bench serve's set; no ITL: a served request has no per-step times here).",
        f"[low, high]: {CI_TEXT}; a point with fewer than 3 timed batches has none. tau: paired bootstrap over samples.",
        *(["‡ The point's intervals resample repeats of fewer than 3 distinct batches (" +
           ", ".join(sorted({f"{p.label} at batch {p.batch}" for p in points if repeats_only(p)})) +
           "): they measure how well the same batch re-times, not the spread over prompts; read those points "
           "without an interval."] if any(repeats_only(p) for p in points) else []),
        f"Projected speedup: the cost model's roofline for Llama-3.1 8B → 70B on H100 (report/profiles/{PROFILE}.yaml; "
        "project.batch_projection) at the row's batch size, K and measured tau; interval from the profile's stated uncertainties only.",
        *([f"The speedup's interval, requests arriving at once: {said}."] if said else []),
        *([f"CPU: {', '.join(machines)}."] if machines else []),
    ]
    # Printed in blocks (render.MAX_COLUMNS): speed, each latency's statistics (vllm bench serve's
    # set: mean, std, median, p90, p95, p99), then the run's conditions.
    speed = {"tau", "throughput (tok/s)", "speedup over target alone", "projected speedup, 70B on H100", "identical to target alone"}
    latency_of = {label: lat for key, label, _, _ in FIGURES for lat in LATENCIES if key.startswith(f"{lat}_")}
    block_of = {c: ("speed" if c in speed else latency_of.get(c, "conditions")) for c in columns[3:]}
    return Table("batch_sweep", "Speculative decoding under load: throughput, latency and speedup against batch size", columns, rows, notes,
                 ids=3, block_of=block_of,
                 block_titles={"speed": "Throughput and speedup", **{lat: f"{LATENCY_LABELS[lat]} latency" for lat in LATENCIES},
                               "conditions": "Conditions"})
