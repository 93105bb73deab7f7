"""Speculative decoding under load: throughput, TPOT and the speedup over the target alone against
batch size, one line per configuration (report/batches.py's points; batch sweeps served by vLLM
and by our loop, engine=hf_serve)."""

from __future__ import annotations

from typing import Any, Callable

import pandas as pd
from matplotlib.figure import Figure

from ...settings.config import engine_display_name
from ..batches import BatchPoint, batch_points, paying_text
from .figure import MARKERS, add_legend, draw_note, error_bars, method_color, panel_grid, paper_style, set_caption

TITLE = "Speculative decoding under load on this CPU"
PANELS = (
    ("throughput_tok_s", "throughput (output tok/s)", 1.0),
    ("tpot_s_median", "TPOT, median (ms)", 1e3),
    ("throughput_speedup", "speedup over target alone (×)", 1.0),
)


def _name(label: str) -> str:
    return label.split(" (", 1)[0]


@paper_style
def fig_batch_sweep(index: pd.DataFrame | None = None, points: list[BatchPoint] | None = None,
                    records_of: Callable[[Any], list[dict[str, Any]]] | None = None) -> Figure:
    """Three panels against batch size (log 2 axis): throughput, median TPOT, and the speedup
    over the target alone paired beside each point; error bars: each point's interval over its
    timed batches. Points with arrivals spread in time (engine.request_rate) are left to the table."""
    if points is None:
        points = batch_points(index if index is not None else pd.DataFrame(), records_of)
    points = [p for p in points if p.rate is None]
    fig, axes = panel_grid(len(PANELS), 2.1, 0.9)
    if not points:
        for ax in axes:
            draw_note(ax, "no batch-sweep runs\n(experiment=batch_sweep or batch_sweep_hf)")
        set_caption(fig, TITLE, "no runs served in batches")
        return fig
    alone = {p.label for p in points if p.target_alone}  # one target alone per engine
    labels = sorted({p.label for p in points}, key=lambda s: (s not in alone, s))
    names = {_name(lab) for lab in labels}
    entries: dict[str, Any] = {}
    batches = sorted({p.batch for p in points})
    for ax, (key, ylabel, scale) in zip(axes, PANELS):
        for i, lab in enumerate(labels):
            ps = sorted((p for p in points if p.label == lab and p.figures.get(key, (None,))[0] is not None), key=lambda p: p.batch)
            if not ps:
                continue
            xs = [p.batch for p in ps]
            ys = [p.figures[key][0] * scale for p in ps]
            cis = [(p.figures[key][1] * scale, p.figures[key][2] * scale) if p.figures[key][1] is not None else None for p in ps]
            color = "black" if lab in alone else method_color(_name(lab), names)
            h = ax.errorbar(xs, ys, yerr=error_bars(ys, cis), color=color, marker=MARKERS[i % len(MARKERS)], ms=3, lw=1.0,
                            capsize=1.5, elinewidth=0.7, ls="--" if lab in alone else "-", label=lab)
            entries.setdefault(lab, h)
        if key == "throughput_speedup":
            ax.axhline(1.0, color="0.4", lw=0.7, ls=":")
        ax.set_xscale("log", base=2)
        ax.set_xticks(batches)
        ax.set_xticklabels([str(b) for b in batches])
        ax.set_xlabel("batch size (requests at once)")
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
    said = paying_text(points)
    machines = sorted({m for p in points for m in p.machines})
    engines = sorted({engine_display_name(p.engine) or "our loop" for p in points})
    add_legend(fig, entries, len(entries), f"{TITLE} ({' and '.join(engines)})",
               "each point: Spec-Bench prompts (single-turn groups) served as one batch at a time, the target alone paired beside it on the same batches; "
               "error bars: 95% cluster-bootstrap intervals over the point's timed batches (batch x repeat)\n"
               f"the speedup's interval: {said}"
               + (f"\nCPU: {', '.join(machines)}" if machines else ""))
    return fig
