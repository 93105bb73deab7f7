"""Speedup and tau along a knob (theta, W, K): a line only through runs that share every other
setting."""

from __future__ import annotations

from typing import Any

import pandas as pd
from matplotlib.figure import Figure

from ...verifiers import FLy
from ..labels import THETA, W, dataset_label, is_rule
from ..render import is_missing
from .figure import (
    MARKERS,
    MAX_COLUMNS,
    PARAMS,
    SPEEDUP_LABEL,
    TAU_LABEL,
    add_legend,
    canvas,
    cpu_letters,
    draw_note,
    error_bars,
    fit_rows,
    frame_of,
    interval_caption,
    machine_of,
    method_color,
    method_name,
    paper_style,
    point_of,
    set_caption,
    sweep_key,
    sweep_labels,
    width_for,
)


LEGEND_ROOM = 0.6  # inches under the panels for the legend (up to MAX_LEGEND entries, four a row)


def adjacent_runs(piece: list[tuple], xs: list[float]) -> list[list[tuple]]:
    """A piece's points (x first, in x order) cut where it skips an x of `xs` (the line's x
    values): [[0.2, 0.3], [0.8]] for a piece at 0.2, 0.3, 0.8 when 0.5 belongs to another."""
    rank = {x: n for n, x in enumerate(xs)}
    runs: list[list[tuple]] = []
    for point in piece:
        if runs and rank[point[0]] == rank[runs[-1][-1][0]] + 1:
            runs[-1].append(point)
        else:
            runs.append([point])
    return runs


@paper_style
def fig_vs_param(index: pd.DataFrame, param: str) -> Figure:
    """Speedup (top row), tau and, where the runs have it, the quality change (bottom row) vs
    theta, W or K, one panel column per data set (one column wide for one set, two for more, up
    to MAX_COLUMNS sets a row: more wrap into a second block of rows). A line joins only runs that share every other
    resolved setting (one sweep); each point is the mean over that configuration's runs, with its
    interval as an error bar; one colour per method.

    The quality row is the paired difference of the set's quality figure (score_diff: the
    method's accuracy / pass@1 / recall minus the target alone's on the same problems), because
    the papers' ablation claims are two-sided: a knob moves tau *and keeps accuracy*. A figure
    of tau alone cannot show the second half."""
    col, xlabel = PARAMS[param]
    df = frame_of(index)
    if not df.empty:
        df = df[df[col].notna()]
        df = df[df["method"].map(lambda m: is_rule(m, FLy))] if param in (THETA, W) else df[df["K"].fillna(0) > 0]

    sweeps_by_ds: dict[str, dict[tuple, list]] = {}
    singles = 0
    for _, r in df.iterrows():
        sweeps_by_ds.setdefault(str(r["dataset"]), {}).setdefault(sweep_key(r, param), []).append(r)
    for ds in list(sweeps_by_ds):
        kept = {k: v for k, v in sweeps_by_ds[ds].items() if len({float(m[col]) for m in v}) > 1}
        singles += len(sweeps_by_ds[ds]) - len(kept)
        sweeps_by_ds[ds] = kept
    datasets = sorted(ds for ds, v in sweeps_by_ds.items() if v)
    drawn = [m for v in sweeps_by_ds.values() for members in v.values() for m in members]
    metrics = ["speedup", "tau"]
    if any(not is_missing(m.get("score_diff")) for m in drawn):
        metrics.append("score_diff")
    n = max(1, len(datasets))
    ncols = min(n, MAX_COLUMNS)
    blocks = -(-n // ncols)
    # The y labels ("speedup over target alone (×)") need the height of their row (1.6 in); six
    # rows (two blocks of three sets) take less, so that the figure stays within a text block.
    row_height = fit_rows(len(metrics) * blocks, 1.6, LEGEND_ROOM)
    fig, rows = canvas(width_for(ncols), row_height * len(metrics) * blocks + LEGEND_ROOM, ncols=ncols, nrows=len(metrics) * blocks)
    rows = rows if len(metrics) * blocks > 1 else [rows]
    # grid[metric][data set]: data set j sits in block j // ncols, column j % ncols.
    grid = [[rows[(j // ncols) * len(metrics) + i][j % ncols] for j in range(n)] for i in range(len(metrics))]
    for j in range(n, ncols * blocks):
        for i in range(len(metrics)):
            rows[(j // ncols) * len(metrics) + i][j % ncols].set_visible(False)
    title = f"Speedup, tau and quality change vs {xlabel}" if "score_diff" in metrics else f"Speedup and tau vs {xlabel}"
    if not datasets:
        what = "FLy runs" if param in (THETA, W) else "runs with a drafter"
        extra = f"\n({singles} configuration(s) ran at one {param} only)" if singles else ""
        for row in grid:
            draw_note(row[0], f"no sweep of {what}\nover {param}{extra}")
        set_caption(fig, title, f"no sweep of {what} over {param}")
        return fig

    names = {method_name(r) for _, r in df.iterrows()}
    cpu_letter = cpu_letters(df)
    entries: dict[str, Any] = {}
    series_total: set[str] = set()
    unjoined = 0
    used: set[str] = set()
    for j, ds in enumerate(datasets):
        sweeps = sweeps_by_ds[ds]
        labels = sweep_labels([v[0] for v in sweeps.values()], skip=(col,))
        styles: dict[str, int] = {}
        for (members, label) in zip(sweeps.values(), labels):
            name = method_name(members[0])
            color = method_color(name, names)
            style = styles.setdefault(name, 0)
            styles[name] += 1
            by_x: dict[float, list] = {}
            for m in members:
                by_x.setdefault(float(m[col]), []).append(m)
            xs = sorted(by_x)
            for i, metric in enumerate(metrics):
                pts = [point_of(by_x[x], metric) for x in xs]
                keep = [(x, v, ci) for x, (v, ci) in zip(xs, pts) if v is not None]
                if not keep:
                    continue
                # Speedups measured on different CPUs are not one curve: a line joins only the
                # points of one machine (tau is a property of the rule, joined whatever ran it).
                if metric == "speedup" and cpu_letter:
                    pieces: dict[Any, list] = {}
                    for k in keep:
                        pieces.setdefault(machine_of(by_x[k[0]]) or ("?", k[0]), []).append(k)
                    unjoined += len(pieces) - 1
                else:
                    pieces = {None: keep}
                # The largest piece is the sweep's line; a speedup from another CPU is drawn hollow.
                # A line joins only neighbouring x values of its piece: one passing another CPU's
                # point by (θ = 0.3 -> 0.8 over θ = 0.5's) would read as a value at that point.
                for n_piece, piece in enumerate(sorted(pieces.values(), key=len, reverse=True)):
                    for n_run, run in enumerate(adjacent_runs(piece, [k[0] for k in keep])):
                        handle = grid[i][j].errorbar([k[0] for k in run], [k[1] for k in run], yerr=error_bars([k[1] for k in run], [k[2] for k in run]),
                                                     color=color, marker=MARKERS[style % len(MARKERS)], ms=3.5, lw=1.0,
                                                     elinewidth=0.8, ls=("-", "--", ":", "-.")[style % 4], capsize=2,
                                                     **({"mfc": "white"} if n_piece else {}))
                        if not n_piece and not n_run:
                            entries.setdefault(label, handle)
            series_total.add(label)
        on = sorted({cpu_letter[m] for v in sweeps.values() for r in v for m in [r.get("machine")] if m in cpu_letter})
        used.update(on)
        grid[0][j].set_title(dataset_label(ds) + (f" (CPU {' + '.join(on)})" if on else ""))
        xs_all = sorted({float(m[col]) for v in sweeps.values() for m in v})
        kinds = sorted({str(m["score_name"]) for v in sweeps.values() for m in v if not is_missing(m.get("score_name"))})
        quality_label = f"Δ {' / '.join(kinds) or 'quality'} vs target alone"
        for i, ylabel in enumerate((SPEEDUP_LABEL, TAU_LABEL, quality_label)[: len(metrics)]):
            ax = grid[i][j]
            ax.set_xticks(xs_all)
            ax.set_xticklabels([f"{x:g}" for x in xs_all])
            ax.grid(alpha=0.3)
            # Each set's quality figure is its own (accuracy, pass@1, recall): every column says which.
            if j % ncols == 0 or metrics[i] == "score_diff":
                # A shrunk row (fit_rows) has no height for the label on one line: it breaks before its unit.
                ax.set_ylabel(ylabel if row_height >= 1.6 else ylabel.replace(" (", "\n(").replace(" vs ", "\nvs "))
            if i == len(metrics) - 1:
                ax.set_xlabel(xlabel)
        grid[0][j].axhline(1.0, color="grey", lw=0.8, ls="--")
        if "score_diff" in metrics:
            grid[2][j].axhline(0.0, color="grey", lw=0.8, ls="--")
    caption = interval_caption(df) + "; dashed grey: target alone (1×); a line joins runs that share every other setting"
    if "score_diff" in metrics:
        caption += ("\nΔ (quality change): the method's score minus the target alone's on the same problems "
                    "(0/1 scores: the exact paired interval; graded: paired bootstrap; dashed: no change); "
                    "claims.md decides with the exact McNemar test")
    if singles:
        caption += f"\n{singles} configuration(s) run at a single {param} (no sweep) are not drawn"
    if used:
        cpus = "; ".join(f"CPU {c}: {m}" for m, c in cpu_letter.items() if c in used)
        caption += (f"\nspeed measured on {cpus}" if len(used) == 1 else
                    "\nspeedups on different CPUs are not joined" + (f" ({unjoined} break(s); hollow: a speedup on another CPU than its line's)" if unjoined else "") + f": {cpus}")
    add_legend(fig, entries, len(series_total), title, caption)
    return fig
