"""Acceptance rate by draft position (summary.json's acceptance_by_position)."""

from __future__ import annotations

from typing import Any, Iterable, Mapping

import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from ..grouping import config_key
from ..labels import dataset_label
from .figure import (
    MARKERS,
    MAX_LEGEND,
    add_legend,
    draw_note,
    frame_of,
    method_color,
    method_name,
    panel_grid,
    paper_style,
    set_caption,
    sweep_labels,
)

TITLE = "Acceptance rate by draft position"


@paper_style
def fig_acceptance_by_position(rows: pd.DataFrame | Iterable[Mapping[str, Any]], max_lines: int = MAX_LEGEND) -> Figure:
    """P(draft position i accepted | drafted) per configuration (the summaries'
    acceptance_by_position), one panel per data set, one colour per method, each single run's
    95% interval (acceptance_by_position_ci_low/high) as a band; the caption says which curves
    have none (means over runs, old summaries)."""
    df = frame_of(rows)
    lines = []
    if not df.empty and "acceptance_by_position" in df:
        for _, r in df.iterrows():
            rates = r.get("acceptance_by_position")
            if isinstance(rates, (list, tuple)) and len(rates) > 0:
                lines.append((r, list(rates)))
    datasets = sorted({str(r.get("dataset")) for r, _ in lines})
    fig, axes = panel_grid(len(datasets), 1.8, 0.9)
    if not lines:
        draw_note(axes[0], "no acceptance-by-position figures\n(target-alone runs only, or no drafter)")
        set_caption(fig, TITLE, "no acceptance-by-position figures (target-alone runs only, or no drafter)")
        return fig

    def line_of(r: Any) -> tuple:
        return (*config_key(r, exclude_prefixes=()), str(r.get("subset")))

    names = {method_name(r) for r, _ in lines}
    reps: dict[tuple, Any] = {}
    runs: dict[tuple, list[list[float]]] = {}
    bands: dict[tuple, list[tuple[list, list]]] = {}
    for r, rates in lines:
        reps.setdefault(line_of(r), r)
        runs.setdefault(line_of(r), []).append(rates)
        lo, hi = r.get("acceptance_by_position_ci_low"), r.get("acceptance_by_position_ci_high")
        if isinstance(lo, list) and isinstance(hi, list) and len(lo) == len(hi) == len(rates):
            bands.setdefault(line_of(r), []).append((lo, hi))
    labels = dict(zip(reps, sweep_labels(list(reps.values()))))
    # At most max_lines configurations (the legend names each once, whichever panels it is drawn
    # in): those run on the most data sets, i.e. the main comparison before one-set ablation points.
    coverage: dict[str, int] = {}
    for key in reps:
        coverage[labels[key]] = coverage.get(labels[key], 0) + 1
    order = sorted(coverage, key=lambda lab: (-coverage[lab], lab))
    shown = order[:max_lines]
    by_name: dict[str, list[str]] = {}
    for lab in shown:
        by_name.setdefault(lab.split(" (", 1)[0], []).append(lab)
    style_of = {lab: i for labs in by_name.values() for i, lab in enumerate(labs)}
    entries: dict[str, Any] = {}
    coincide = False
    for ax, ds in zip(axes, datasets):
        drawn: list[list[float]] = []
        for key, r in reps.items():
            if str(r.get("dataset")) != ds or labels[key] not in style_of:
                continue
            rr = runs[key]
            k = max(len(x) for x in rr)
            mean = [sum(x[i] for x in rr if i < len(x)) / sum(1 for x in rr if i < len(x)) for i in range(k)]
            name = method_name(r)
            style = style_of[labels[key]]
            color = method_color(name, names)
            # A curve on top of one already drawn (e.g. FLy with and without MLA: MLA drafts the
            # same tokens faster) gets large hollow markers, so that neither hides the other.
            same = any(len(d) == k and max(abs(a - b) for a, b in zip(d, mean)) < 0.01 for d in drawn)
            coincide |= same
            (h,) = ax.plot(range(1, k + 1), mean, marker=MARKERS[style % len(MARKERS)], ms=5 if same else 2.5,
                           mfc="none" if same else color, mew=0.9 if same else 0.8, color=color,
                           ls=("-", "--", ":", "-.")[style % 4], label=labels[key], zorder=3 if same else 2)
            drawn.append(mean)
            if len(rr) == 1 and len(bands.get(key, [])) == 1:
                lo, hi = bands[key][0]
                xs = [i + 1 for i in range(k) if lo[i] is not None and hi[i] is not None]
                ax.fill_between(xs, [lo[i - 1] for i in xs], [hi[i - 1] for i in xs], color=color, alpha=0.12, lw=0, zorder=1)
            entries.setdefault(labels[key], h)
        ax.set_title(dataset_label(ds))
        ax.set_ylim(-0.03, 1.03)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(alpha=0.3)
        ax.set_xlabel("draft position i")
        ax.set_ylabel("P(accepted | drafted)")
    for ax in axes[len(datasets):]:
        ax.set_visible(False)
    entries = {lab: entries[lab] for lab in shown if lab in entries}
    # Counted per legend entry (one configuration may be drawn in several panels): banded when
    # every panel's curve of it has its interval.
    has_band = {key: len(runs[key]) == 1 and len(bands.get(key, [])) == 1 for key in reps}
    banded = sum(1 for lab in entries if all(has_band[key] for key in reps if labels[key] == lab))
    caption = ("bands: 95% paired bootstrap intervals over samples (one run's pooled rate per position)"
               if banded == len(entries) else
               f"bands: 95% paired bootstrap intervals over samples, on {banded} of {len(entries)} curves "
               "(the others are means over several runs, or summaries from before the interval)")
    if coincide:
        caption += "; large hollow markers: a curve within 0.01 of one drawn before it"
    add_legend(fig, entries, len(order), TITLE + " (one panel per data set)", f"{caption}; the {len(entries)} configurations run on the most data sets are drawn")
    return fig
