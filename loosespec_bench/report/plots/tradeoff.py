"""Accuracy retention vs speedup: a panel per data set and CPU, one point per configuration, the
Pareto frontier drawn, points of one method tagged by adjustText."""

from __future__ import annotations

import math
from typing import Any, Iterable

import pandas as pd
from matplotlib.figure import Figure

from ..grouping import config_key
from ..labels import dataset_label, is_target_alone, method_label
from .figure import (
    MARKERS,
    MIN_TEXT_PT,
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
    paper_style,
    point_of,
    set_caption,
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


def place_tags(ax: Any, tags: list[tuple[float, float, str, str]], markers: Iterable[tuple[float, float]] = ()) -> list[Any]:
    """Each point's tag (x, y, text, colour) placed by adjustText away from the other tags and
    from every marker of `markers` (every point of the panel, tagged or not), tied to its point
    by a thin line where it moved off it. Deterministic: adjustText's shifts are seeded and its
    iterations fixed (iter_lim, never a time limit). Call it once the figure's layout is final
    (fig.draw_without_rendering()): adjustText works in display coordinates."""
    if not tags:
        return []
    from adjustText import adjust_text

    # A white backing, so that a tag stays legible where it lies across another point's error bar.
    backing = {"boxstyle": "square,pad=0.1", "facecolor": "white", "edgecolor": "none", "alpha": 0.75}
    texts = [ax.text(x, y, text, color=color, fontsize=MIN_TEXT_PT, ha="center", va="center", bbox=backing, zorder=4)
             for x, y, text, color in tags]
    pts = list(markers) or [(x, y) for x, y, _, _ in tags]
    adjust_text(texts, x=[p[0] for p in pts], y=[p[1] for p in pts], ax=ax, iter_lim=TAG_ITERATIONS, time_lim=None,
                expand=(1.3, 1.6), force_text=(0.5, 1.0), force_static=(0.4, 0.8), max_move=(20, 20),
                arrowprops={"arrowstyle": "-", "color": "dimgray", "lw": 0.4, "shrinkA": 1, "shrinkB": 2})
    return texts


TAG_ITERATIONS = 1000
MAX_TAGS = 20  # a panel with more tagged points is drawn untagged: the caption says so
# A panel with more tags than this numbers its points instead ("1", "2"...), the caption keying each
# number to its settings: eleven tags of "K=15, θ=0.3, W=6" length had no room but the error bars.
NUMBER_TAGS_FROM = 6


def _panels(df: pd.DataFrame, datasets: list[str], cpu_letter: dict[str, str]) -> tuple[dict[tuple, dict[tuple, list]], int]:
    """{(data set, CPU): {configuration: its runs}}: one panel per data set and CPU, so that no
    panel sets a speedup timed on one CPU beside another's. A configuration whose runs were timed
    on several CPUs (or an unnamed one among named) is left out, counted."""
    panels: dict[tuple, dict[tuple, list]] = {}
    mixed = 0
    for ds in datasets:
        sub = df[df["dataset"].astype(str) == ds]
        groups: dict[tuple, list] = {}
        for _, r in sub.iterrows():
            groups.setdefault(config_key(r, exclude_prefixes=()), []).append(r)
        for key, members in groups.items():
            machine = machine_of(members) if cpu_letter else None
            if cpu_letter and machine not in cpu_letter:
                mixed += 1
                continue
            panels.setdefault((ds, machine), {})[key] = members
    return dict(sorted(panels.items(), key=lambda kv: (kv[0][0], cpu_letter.get(kv[0][1], "")))), mixed


def panel_title(ds: str, machine: str | None, cpu_letter: dict[str, str]) -> str:
    return dataset_label(ds) + (f", CPU {cpu_letter[machine]}" if machine in cpu_letter else "")


def _absent(ds: str, panels: dict[tuple, Any]) -> str:
    """An absent set's name in the caption, told apart from drawn sets whose names begin with it
    (no panel for "MGSM" beside two "MGSM (native CoT prompt)" panels read as a caption that
    contradicts its figure)."""
    name = dataset_label(ds)
    drawn = sorted({dataset_label(d) for d, _ in panels if dataset_label(d).startswith(name + " (")})
    return f"{name} with its default prompt (the {', '.join(drawn)} panels are another prompt's)" if drawn else name


@paper_style
def fig_tradeoff(index: pd.DataFrame) -> Figure:
    """Quality retention vs speedup, one panel per data set and CPU (speed is a property of the
    CPU: a panel never sets one CPU's speedup beside another's), one point per configuration
    (the mean over its runs) with both intervals as error bars; one colour per method; the
    Pareto frontier per panel; points of one method told apart by a tag (placed by adjustText),
    a panel with more than MAX_TAGS tags drawn untagged."""
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
    cpu_letter = cpu_letters(df)
    panels, mixed = _panels(df, datasets, cpu_letter)
    fig, axes = panel_grid(len(panels), 2.1, 0.5)
    title = "Quality retention vs speedup, one point per configuration" + (", one panel per data set and CPU" if cpu_letter else "")
    names = {method_name(r) for _, r in df.iterrows()} if not df.empty else set()
    entries: dict[str, Any] = {}
    missing = 0
    any_point = False
    to_tag: list[tuple[Any, list, list]] = []
    untagged: list[str] = []
    keys: list[str] = []  # a numbered panel's key: number = settings
    for ax, ((ds, machine), groups) in zip(axes, panels.items()):
        pts = []
        tagged: list[tuple[float, float, str, str]] = []
        named: dict[int, str] = {}  # a tag's method name, for a numbered panel's key
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
            name = method_name(members[0])
            h = ax.errorbar([s], [q], xerr=error_bars([s], [s_ci]), yerr=error_bars([q], [q_ci]), color=method_color(name, names),
                            marker=MARKERS[sorted(names).index(name) % len(MARKERS)], ms=3.5, lw=0, elinewidth=0.6, capsize=1.5,
                            alpha=0.9)
            if tags.get(key):
                tagged.append((s, q, tags[key], method_color(name, names)))
                named[len(tagged) - 1] = name
            entries.setdefault(name, h)
        ax.axhline(1.0, color="grey", lw=0.8, ls="--")
        ax.axvline(1.0, color="grey", lw=0.8, ls="-.")
        if pts:
            any_point = True
            front = pareto_front(pts)
            # A wide grey band under a thin black line: visible under the error bars it crosses.
            xs, ys = [p[0] for p in front], [p[1] for p in front]
            ax.plot(xs, ys, color="grey", lw=4, alpha=0.3, drawstyle="steps-post", zorder=0, solid_capstyle="butt")
            ax.plot(xs, ys, color="black", lw=0.9, drawstyle="steps-post", zorder=1)
        else:
            draw_note(ax, "no configuration with both\na speedup and a retention")
        panel = panel_title(ds, machine, cpu_letter)
        if len(tagged) > MAX_TAGS:
            untagged.append(f"{panel} ({len(tagged)} points)")
        elif tagged:
            if len(tagged) >= NUMBER_TAGS_FROM:
                # Numbered in order of speedup; the caption keys each number to its settings.
                order = sorted(range(len(tagged)), key=lambda i: (tagged[i][0], tagged[i][1]))
                keys.append(f"{panel}: " + "; ".join(f"{n} = {named[i]} {tagged[i][2]}" for n, i in enumerate(order, 1)))
                tagged = [(tagged[i][0], tagged[i][1], str(n), tagged[i][3]) for n, i in enumerate(order, 1)]
            to_tag.append((ax, tagged, pts))
        ax.set_title(panel)
        ax.grid(alpha=0.3)
        ax.set_xlabel(SPEEDUP_LABEL)
        sub = pd.DataFrame([m for members in groups.values() for m in members])
        kinds = sorted({str(k) for k in sub["score_name"].dropna()}) if "score_name" in sub else []
        ax.set_ylabel(f"retention of {' / '.join(kinds) or 'quality'}")
    for ax in axes[len(panels):]:
        ax.set_visible(False)
    if not any_point:
        why = "no configuration has both a speedup and an accuracy retention"
        if not panels:
            if missing:
                why += f"\n({missing} without retention: no paired baseline, or target-alone accuracy 0)"
            draw_note(axes[0], why)
        set_caption(fig, title, why)
        return fig
    caption = interval_caption(df) + ("\nretention: the configuration's score ÷ the target alone's on the same problems; black on grey: "
                                      "Pareto frontier; dashed: retention 1 (the target alone's score); dash-dot: 1×")
    if untagged:
        caption += (f"\nuntagged (more than {MAX_TAGS} points of one method to tell apart): " + "; ".join(untagged)
                    + "; the FLy ablation tables give each configuration's figures")
    if missing:
        caption += f"\n{missing} configuration(s) without retention (target-alone accuracy 0) not drawn"
    if mixed:
        caption += f"\n{mixed} configuration(s) whose runs were timed on several CPUs (or an unnamed one) not drawn"
    if keys:
        caption += "\nnumbered points (a panel with more than " + f"{NUMBER_TAGS_FROM - 1} to tell apart, by speedup): " + "; ".join(keys)
    if no_panel:
        caption += (f"\nno panel for {', '.join(_absent(ds, panels) for ds in no_panel)}: no configuration there has a retention "
                    "with an interval (the target alone's accuracy 0, or too few right answers to resample)")
    if cpu_letter:
        caption += "\nspeeds compare only within one CPU, never across panels of different CPUs: " + "; ".join(
            f"CPU {c}: {m}" for m, c in cpu_letter.items())
    add_legend(fig, entries, len(entries), title, caption)
    if to_tag:
        fig.draw_without_rendering()  # the constrained layout first: adjustText places in display coordinates
        for ax, tagged, pts in to_tag:
            place_tags(ax, tagged, markers=pts)
    return fig
