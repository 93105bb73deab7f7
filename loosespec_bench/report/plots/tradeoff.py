"""Accuracy retention vs speedup: one point per configuration, the Pareto frontier drawn."""

from __future__ import annotations

import math
from typing import Any, Iterable

import pandas as pd
from matplotlib.figure import Figure

from ..grouping import config_key
from ..labels import is_target_alone, method_label
from .figure import (
    MARKERS,
    SPEEDUP_LABEL,
    add_legend,
    cpu_letters,
    datasets_of,
    distinguishing,
    draw_note,
    error_bars,
    frame_of,
    interval_caption,
    machine_of,
    method_color,
    method_name,
    panel_grid,
    point_of,
)


def pareto_front(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """Points not dominated in (higher speedup, higher retention), by increasing speedup."""
    best = -math.inf
    front = []
    for x, y in sorted(points, key=lambda p: (-p[0], -p[1])):
        if y > best:
            front.append((x, y))
            best = y
    return sorted(front)


def _place_tags(ax: Any, tags: list[tuple[float, float, str, str]], fontsize: float = 7,
                markers: Iterable[tuple[float, float]] = (), marker_pt: float = 4.0) -> None:
    """Each point's tag (x, y, text, colour) beside it, in the first of four corners (upper
    right, lower right, upper left, lower left) where it overlaps no tag placed before and no
    marker of `markers` (every point of the panel, tagged or not, as a box of +-marker_pt):
    nearby configurations (FLy at theta = 0.2 and 0.3, SPD at K = 10 beside PLD) otherwise print
    into each other. Where all four are taken (GSM8K's nine FLy + MLA points: "W=9" printed over
    "θ=0.2"), the same corners one and two text lines further out, joined to the point by a thin
    leader line; where even those are taken, the one that overlaps least. Sizes are estimated in
    points from the text's length (no renderer needed); call it once the axes' limits are final."""
    if not tags:
        return
    ax.autoscale_view()
    to_points = 72.0 / ax.figure.dpi
    placed: list[tuple[float, float, float, float]] = []
    for mx, my in markers:
        qx, qy = (v * to_points for v in ax.transData.transform((mx, my)))
        placed.append((qx - marker_pt, qy - marker_pt, qx + marker_pt, qy + marker_pt))
    height = fontsize * 1.2
    def overlap(box: tuple[float, float, float, float]) -> float:
        return sum(max(0.0, min(box[2], b[2]) - max(box[0], b[0])) * max(0.0, min(box[3], b[3]) - max(box[1], b[1]))
                   for b in placed)

    for x, y, text, color in sorted(tags, key=lambda t: (-t[1], t[0])):
        px, py = (v * to_points for v in ax.transData.transform((x, y)))
        width = 0.6 * fontsize * len(text)
        candidates = []
        for ring in range(3):  # ring 0: the four corners beside the point; 1, 2: a line further out each
            lift = ring * (height + 2)
            for dx, dy, ha in ((4, 3 + lift, "left"), (4, -3 - height - lift, "left"),
                               (-4, 3 + lift, "right"), (-4, -3 - height - lift, "right")):
                x0 = px + dx if ha == "left" else px + dx - width
                box = (x0, py + dy, x0 + width, py + dy + height)
                candidates.append((overlap(box), ring, dx, dy, ha, box))
        free = [c for c in candidates if c[0] == 0.0]
        _, ring, dx, dy, ha, box = free[0] if free else min(candidates, key=lambda c: (c[0], c[1]))
        placed.append(box)
        # A tag moved off its point is tied to it, so it is never read as another point's.
        leader = {"arrowprops": {"arrowstyle": "-", "color": color, "lw": 0.5, "shrinkA": 0, "shrinkB": 2}} if ring else {}
        ax.annotate(text, (x, y), xytext=(dx, dy), textcoords="offset points", fontsize=fontsize, color=color, ha=ha,
                    **leader)


def fig_tradeoff(index: pd.DataFrame) -> Figure:
    """Quality retention vs speedup, one panel per data set, one point per configuration (the
    mean over its runs) with both intervals as error bars; one colour per method; the Pareto
    frontier per panel."""
    df = frame_of(index)
    if not df.empty:
        df = df[~df["method"].map(is_target_alone)]
    datasets = datasets_of(df)
    # A set where no configuration has a retention (its target alone scored 0: MGSM under the
    # paper's prompt on the CPU pair) gets no empty panel; the caption names it instead.
    # Nor does a set where no retention has an interval (MGSM under the paper's prompt, where a
    # fresh target-alone run found 2 of 30 answers: every retention was 0.5 or undefined, no
    # interval): a point without its interval is not a figure.
    def _no_retention(ds: str) -> bool:
        sub = df[df["dataset"].astype(str) == ds]
        low = sub["retention_ci_low"] if "retention_ci_low" in sub else pd.Series(float("nan"), index=sub.index)
        return bool((sub["retention"].isna() | low.isna()).all())
    no_panel = [ds for ds in datasets if _no_retention(ds)]
    if len(no_panel) < len(datasets):
        datasets = [ds for ds in datasets if ds not in no_panel]
    else:
        no_panel = []
    fig, axes = panel_grid(len(datasets), 3.4, 0.8)
    # Retention is on each set's headline quality figure (index score_name: accuracy, pass@1,
    # NIAH's recall, ...); each panel's y label names its own.
    fig.suptitle("Quality retention vs speedup (one point per configuration)")
    names = {method_name(r) for _, r in df.iterrows()} if not df.empty else set()
    # Speed is a property of the CPU: where the runs span several, each panel says whose speeds it shows.
    cpu_letter = cpu_letters(df)
    entries: dict[str, Any] = {}
    missing = 0
    any_point = False
    for ax, ds in zip(axes, datasets):
        sub = df[df["dataset"].astype(str) == ds]
        groups: dict[tuple, list] = {}
        for _, r in sub.iterrows():
            groups.setdefault(config_key(r, exclude_prefixes=()), []).append(r)
        pts = []
        # A frontier is drawn among points timed on one CPU: a speedup measured on another CPU
        # neither dominates nor is dominated by it (None: unknown, or several machines in one point).
        pts_by_cpu: dict[str | None, list[tuple[float, float]]] = {}
        tagged: list[tuple[float, float, str, str]] = []
        # Points of one method that differ in a setting (SPD at K = 10 and 15, FLy at three θ)
        # share a colour and marker: each is tagged with what tells it from the others.
        tags = distinguishing({key: method_label(members[0]) for key, members in groups.items()},
                               {key: method_name(members[0]) for key, members in groups.items()})
        for key, members in groups.items():
            s, s_ci = point_of(members, "speedup")
            q, q_ci = point_of(members, "retention")
            if s is None or q is None:
                missing += 1
                continue
            pts.append((s, q))
            pts_by_cpu.setdefault(machine_of(members) if cpu_letter else None, []).append((s, q))
            name = method_name(members[0])
            h = ax.errorbar([s], [q], xerr=error_bars([s], [s_ci]), yerr=error_bars([q], [q_ci]), color=method_color(name, names),
                            marker=MARKERS[sorted(names).index(name) % len(MARKERS)], ms=5, lw=0, elinewidth=1, capsize=2)
            if tags.get(key):
                tagged.append((s, q, tags[key], method_color(name, names)))
            entries.setdefault(name, h)
        # The reference lines first: the one at 1x widens the x range, and tags placed before it
        # were spaced for the narrower one (they printed into each other on NIAH's panel).
        ax.axhline(1.0, color="grey", lw=1, ls="--")
        ax.axvline(1.0, color="grey", lw=1, ls="-.")
        if pts:
            any_point = True
            for i, (machine, cpu_pts) in enumerate(sorted(pts_by_cpu.items(), key=lambda kv: str(kv[0]))):
                front = pareto_front(cpu_pts)
                # A wide grey band under a thin black line: visible under the error bars it crosses.
                xs, ys = [p[0] for p in front], [p[1] for p in front]
                ls = ("-", ":", (0, (6, 2, 1, 2)))[i % 3] if len(pts_by_cpu) > 1 else "-"
                ax.plot(xs, ys, color="grey", lw=5, alpha=0.3, drawstyle="steps-post", zorder=0, solid_capstyle="butt")
                ax.plot(xs, ys, color="black", lw=1.2, ls=ls, drawstyle="steps-post", zorder=1)
                if len(pts_by_cpu) > 1:  # several frontiers: each says whose speeds it joins
                    who = f"CPU {cpu_letter[machine]}" if machine in cpu_letter else "mixed CPUs"
                    # placed with the points' tags: GSM8K's "CPU B" printed over a FLy + MLA marker
                    tagged.append((*front[-1], who, "black"))
        else:
            draw_note(ax, "no configuration with both\na speedup and a retention")
        _place_tags(ax, tagged, markers=pts)
        on = sorted({cpu_letter[m] for m in sub["machine"].dropna().astype(str) if m in cpu_letter}) if cpu_letter else []
        ax.set_title(ds + (f" (speed on CPU {' + '.join(on)})" if on else ""), fontsize=10)
        ax.grid(alpha=0.3)
        ax.set_xlabel(SPEEDUP_LABEL, fontsize=8)
        kinds = sorted({str(k) for k in sub["score_name"].dropna()}) if "score_name" in sub else []
        ax.set_ylabel(f"retention of {' / '.join(kinds) or 'quality'} (÷ target alone)", fontsize=8)
    for ax in axes[len(datasets):]:
        ax.set_visible(False)
    if not any_point:
        if not datasets:
            why = "no configuration has both a speedup and an accuracy retention"
            if missing:
                why += f"\n({missing} without retention: no paired baseline, or target-alone accuracy 0)"
            draw_note(axes[0], why)
        return fig
    caption = interval_caption(df) + "\nblack on grey: Pareto frontier (one per CPU where a panel's speeds come from several); dashed: retention 1 (the target alone's score); dash-dot: 1×"
    if missing:
        caption += f"; {missing} configuration(s) without retention (target-alone accuracy 0) not drawn"
    if no_panel:
        caption += (f"\nno panel for {', '.join(no_panel)}: no configuration there has a retention with an interval "
                    "(the target alone's accuracy 0, or too few right answers to resample)")
    if cpu_letter:
        caption += "\nspeeds compare only within one CPU: " + "; ".join(f"CPU {c}: {m}" for m, c in cpu_letter.items())
    add_legend(fig, entries, len(entries), caption)
    return fig
