"""Report plots (matplotlib, Agg canvas: no display, no pyplot global state), PNG and PDF.

- speedup and tau vs theta, vs W (FLy runs) and vs K (every method with a drafter), a panel per
  data set, a line only through runs that share every other setting;
- accuracy retention vs speedup: a panel per data set, one point per configuration, the Pareto
  frontier drawn;
- acceptance rate by draft position (summary.json's acceptance_by_position), a panel per data set;
- FLy: entropy of loosely accepted vs rejected mismatches, from the per-step records that the
  FLy verifier writes (verifiers/fly.py FLyDecision.record: mismatch_positions,
  mismatch_entropy, loose_accepted) and the step's accepted count. A mismatch inside the
  accepted prefix was accepted loosely; the mismatch at the first rejected position (index =
  accepted) was rejected; mismatches after it were never decided and are left out.

Every figure function returns a Figure (shown inline by Jupyter) and draws a visible note instead
of an empty plot when there is nothing to draw. Reviewers' rules, kept by every figure: one fixed
colour per method (METHOD_COLORS), human labels from the schema (never a hash or `nan`), error
bars from the summaries' intervals, at most MAX_LEGEND legend entries inside the figure, and a
tight bounding box (save) so that nothing is clipped.
"""

from __future__ import annotations

import math
import textwrap
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping, Sequence

import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from ..schema import FIGURE, KNOB_BY_COLUMN
from .index import read_records
from .grouping import combine, config_key, config_suffixes, is_true
from .labels import method_label

SPEEDUP_LABEL = FIGURE["speedup"].label
TAU_LABEL = FIGURE["tau"].label
RETENTION_LABEL = FIGURE["retention"].label
# The x axes of the sweep plots: a knob of schema.KNOBS (column, axis label, config key).
PARAMS = {c: (c, KNOB_BY_COLUMN[c].axis) for c in ("theta", "W", "K")}
PARAM_CONFIG_KEY = {c: KNOB_BY_COLUMN[c].key for c in PARAMS}
ENTROPY_LABEL = {
    "code": "top-3 entropy H of the target (nats)",
    "paper": "normalised entropy h of the target (0 to 1)",
}
MAX_LEGEND = 8  # legend entries inside a figure; more series are named in a note
# One fixed colour per method (the label's name part: "FLy", "SPD", "EAGLE-3 + DropMatch"...), the
# same in every figure; a method not listed takes the next free colour in order of its name.
METHOD_COLORS = {
    "FLy": "tab:blue", "FLy + MLA": "navy", "SPD": "tab:orange", "DropMatch": "tab:green", "PLD": "tab:brown", "EAGLE-3": "tab:red",
    "EAGLE-2": "tab:pink", "Lookahead": "tab:olive", "EAGLE-3 + DropMatch": "tab:purple", "EAGLE-3 + FLy": "tab:cyan",
    "target alone": "tab:gray",
}
SPARE_COLORS = ("#1b9e77", "#d95f02", "#7570b3", "#e7298a", "#66a61e", "#e6ab02", "#a6761d", "#666666")
MARKERS = "osD^vP*X<>"


def method_name(row: Mapping[str, Any]) -> str:
    """The name part of a method label ('FLy' of 'FLy (model, K=15, θ=0.3, W=6)'); FLy with
    Multi-Level Acceleration is its own series, 'FLy + MLA', as in FLy's main table."""
    name = method_label({k: row.get(k) for k in ("method", "drafter", "engine")}).split(" (", 1)[0]
    return f"{name} + MLA" if row.get("method") == "fly" and row.get("drafter") == "mla" else name


def method_color(name: str, known: Iterable[str] = ()) -> str:
    if name in METHOD_COLORS:
        return METHOD_COLORS[name]
    others = sorted({n for n in known if n not in METHOD_COLORS} | {name})
    return SPARE_COLORS[others.index(name) % len(SPARE_COLORS)]


def _figure(width: float = 6.4, height: float = 4.0, ncols: int = 1, nrows: int = 1) -> tuple[Figure, list]:
    fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(nrows, ncols, squeeze=False)
    return fig, [list(r) for r in axes] if nrows > 1 else list(axes[0])


def _note(ax: Any, text: str) -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, fontsize=10,
            bbox={"boxstyle": "round", "facecolor": "#f4f4f4", "edgecolor": "#999999"}, wrap=True)
    ax.set_xticks([])
    ax.set_yticks([])


def save(fig: Figure, out_dir: str | Path, name: str, formats: Sequence[str] = ("png", "pdf"), dpi: int = 150) -> list[Path]:
    """Write a figure; the bounding box is the drawn content (nothing clipped at the edges)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for fmt in formats:
        path = out / f"{name}.{fmt}"
        fig.savefig(path, dpi=dpi, bbox_inches="tight", pad_inches=0.1)
        paths.append(path)
    return paths


def _nan(v: Any) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


def _frame(rows: pd.DataFrame | Iterable[Mapping[str, Any]]) -> pd.DataFrame:
    df = rows if isinstance(rows, pd.DataFrame) else pd.DataFrame(list(rows))
    if not df.empty and "status" in df:
        df = df[df["status"].isin(["complete", "partial"])]
    return df


def _point(members: list, metric: str) -> tuple[float | None, tuple[float, float] | None]:
    """A figure of one configuration at one point: the mean over its runs (seeds, subsets) and
    the interval combined from theirs (grouping.combine); (None, None) without the figure."""
    have = [m for m in members if not _nan(m.get(metric))]
    if not have:
        return None, None
    lo, hi = f"{metric}_ci_low", f"{metric}_ci_high"
    value, ci = combine([float(m[metric]) for m in have],
                        [(None if _nan(m.get(lo)) else float(m[lo]), None if _nan(m.get(hi)) else float(m[hi])) for m in have])
    return value, ci


def _yerr(values: list[float], cis: list[tuple[float, float] | None]) -> list[list[float]] | None:
    """matplotlib's asymmetric error bars; None when no point has an interval."""
    if not any(cis):
        return None
    return [[v - c[0] if c else 0.0 for v, c in zip(values, cis)], [c[1] - v if c else 0.0 for v, c in zip(values, cis)]]


def _datasets(df: pd.DataFrame) -> list[str]:
    return sorted({str(d) for d in df["dataset"].dropna()}) if not df.empty else []


def _legend(fig: Figure, entries: dict[str, Any], total: int, caption: str = "") -> None:
    """At most MAX_LEGEND entries, below the panels inside the figure, the caption (what the
    error bars are) as the legend's title so the two never overlap; the rest are counted."""
    shown = list(entries.items())[:MAX_LEGEND]
    if total > len(shown):
        caption = (caption + "\n" if caption else "") + f"{total - len(shown)} more series not in the legend (index.csv lists every run)"
    width = max(60, int(fig.get_figwidth() * 17))  # characters of 7-point text across the figure
    caption = "\n".join(textwrap.fill(line, width) for line in caption.split("\n")) if caption else ""
    if not shown:
        if caption:
            fig.text(0.5, 0.0, caption, fontsize=7, ha="center")
        return
    fig.legend([h for _, h in shown], [lab for lab, _ in shown], loc="outside lower center",
               ncols=min(2, len(shown)), fontsize=8, frameon=False, title=caption or None, title_fontsize=7)


def _interval_caption(df: pd.DataFrame) -> str:
    """What the error bars are, and which runs have none."""
    text = "error bars: 95% intervals from summary.json (paired bootstrap over samples)"
    if "intervals" not in df or df.empty:
        return text
    without = ~is_true(df["intervals"])
    # An unfinished run's figures are recomputed from its samples so far, without intervals.
    unfinished = int((without & (df["status"] == "partial")).sum()) if "status" in df else 0
    n_old = int(without.sum()) - unfinished
    why = [f"{n_old} of {len(df)} runs predate the interval fields"] if n_old else []
    if unfinished:
        why.append(f"{unfinished} of {len(df)} runs unfinished: figures so far, from their samples")
    if why:
        text += f"; no bar: no interval ({'; '.join(why)})"
    return text


def _cpu_letters(df: pd.DataFrame) -> dict[str, str]:
    """CPU A, B, ... for the machines the runs' speeds were measured on; {} when one (or none)
    is named: speed is a property of the CPU, and a figure says so only when it spans several."""
    cpus = sorted({str(m) for m in df["machine"].dropna()}) if "machine" in df and not df.empty else []
    return {m: chr(ord("A") + i) for i, m in enumerate(cpus)} if len(cpus) > 1 else {}


def _machine_of(members: list) -> str | None:
    """The one machine a point's runs were timed on; None if unknown or several."""
    ms = {str(m.get("machine")) for m in members if isinstance(m.get("machine"), str)}
    return ms.pop() if len(ms) == 1 and all(isinstance(m.get("machine"), str) for m in members) else None


def _sweep_key(row: Any, param: str) -> tuple:
    """Every resolved setting of a run but the knob `param` (the data set included): runs with one
    key and several values of the knob form one sweep."""
    return (*config_key(row, exclude=(PARAM_CONFIG_KEY[param],), exclude_prefixes=()), str(row.get("subset")))


def fig_vs_param(index: pd.DataFrame, param: str) -> Figure:
    """Speedup (top row), tau and, where the runs have it, the quality change (bottom row) vs
    theta, W or K, one panel column per data set. A line joins only runs that share every other
    resolved setting (one sweep); each point is the mean over that configuration's runs, with its
    interval as an error bar; one colour per method.

    The quality row is the paired difference of the set's quality figure (score_diff: the
    method's accuracy / pass@1 / recall minus the target alone's on the same problems), because
    the papers' ablation claims are two-sided: a knob moves tau *and keeps accuracy*. A figure
    of tau alone cannot show the second half."""
    col, xlabel = PARAMS[param]
    df = _frame(index)
    if not df.empty:
        df = df[df[col].notna()]
        df = df[df["method"] == "fly"] if param in ("theta", "W") else df[df["K"].fillna(0) > 0]

    sweeps_by_ds: dict[str, dict[tuple, list]] = {}
    singles = 0
    for _, r in df.iterrows():
        sweeps_by_ds.setdefault(str(r["dataset"]), {}).setdefault(_sweep_key(r, param), []).append(r)
    for ds in list(sweeps_by_ds):
        kept = {k: v for k, v in sweeps_by_ds[ds].items() if len({float(m[col]) for m in v}) > 1}
        singles += len(sweeps_by_ds[ds]) - len(kept)
        sweeps_by_ds[ds] = kept
    datasets = sorted(ds for ds, v in sweeps_by_ds.items() if v)
    drawn = [m for v in sweeps_by_ds.values() for members in v.values() for m in members]
    metrics = ["speedup", "tau"]
    if any(not _nan(m.get("score_diff")) for m in drawn):
        metrics.append("score_diff")
    n = max(1, len(datasets))
    fig, grid = _figure(min(4.2 * n, 18) + 0.6, 3.0 * len(metrics), ncols=n, nrows=len(metrics))
    fig.suptitle(f"Speedup, tau and quality change vs {xlabel}" if "score_diff" in metrics else f"Speedup and tau vs {xlabel}")
    if not datasets:
        what = "FLy runs" if param in ("theta", "W") else "runs with a drafter"
        extra = f"\n({singles} configuration(s) ran at one {param} only)" if singles else ""
        for row in grid:
            _note(row[0], f"no sweep of {what} over {param}{extra}")
        return fig

    names = {method_name(r) for _, r in df.iterrows()}
    cpu_letter = _cpu_letters(df)
    entries: dict[str, Any] = {}
    series_total: set[str] = set()
    unjoined = 0
    used: set[str] = set()
    for j, ds in enumerate(datasets):
        sweeps = sweeps_by_ds[ds]
        labels = _sweep_labels([v[0] for v in sweeps.values()], skip=(col,))
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
                pts = [_point(by_x[x], metric) for x in xs]
                keep = [(x, v, ci) for x, (v, ci) in zip(xs, pts) if v is not None]
                if not keep:
                    continue
                # Speedups measured on different CPUs are not one curve: a line joins only the
                # points of one machine (tau is a property of the rule, joined whatever ran it).
                if metric == "speedup" and cpu_letter:
                    pieces: dict[Any, list] = {}
                    for k in keep:
                        pieces.setdefault(_machine_of(by_x[k[0]]) or ("?", k[0]), []).append(k)
                    unjoined += len(pieces) - 1
                else:
                    pieces = {None: keep}
                # The largest piece is the sweep's line; a speedup from another CPU is drawn hollow,
                # or a line passing it by (θ = 0.3 -> 0.8 over θ = 0.5's point) reads as its value.
                for n_piece, piece in enumerate(sorted(pieces.values(), key=len, reverse=True)):
                    handle = grid[i][j].errorbar([k[0] for k in piece], [k[1] for k in piece], yerr=_yerr([k[1] for k in piece], [k[2] for k in piece]),
                                                 color=color, marker=MARKERS[style % len(MARKERS)], ms=5, lw=1.5,
                                                 ls=("-", "--", ":", "-.")[style % 4], capsize=3,
                                                 **({"mfc": "white"} if n_piece else {}))
                    if not n_piece:
                        entries.setdefault(label, handle)
            series_total.add(label)
        on = sorted({cpu_letter[m] for v in sweeps.values() for r in v for m in [r.get("machine")] if m in cpu_letter})
        used.update(on)
        grid[0][j].set_title(ds + (f" (speed on CPU {' + '.join(on)})" if on else ""), fontsize=10)
        xs_all = sorted({float(m[col]) for v in sweeps.values() for m in v})
        kinds = sorted({str(m["score_name"]) for v in sweeps.values() for m in v if not _nan(m.get("score_name"))})
        quality_label = f"{' / '.join(kinds) or 'quality'} − target alone's\n(same problems)"
        for i, ylabel in enumerate((SPEEDUP_LABEL, TAU_LABEL, quality_label)[: len(metrics)]):
            ax = grid[i][j]
            ax.set_xticks(xs_all)
            ax.set_xticklabels([f"{x:g}" for x in xs_all], fontsize=8)
            ax.grid(alpha=0.3)
            # Each set's quality figure is its own (accuracy, pass@1, recall): every column says which.
            if j == 0 or metrics[i] == "score_diff":
                ax.set_ylabel(ylabel, fontsize=9)
            if i == len(metrics) - 1:
                ax.set_xlabel(xlabel, fontsize=9)
        grid[0][j].axhline(1.0, color="grey", lw=1, ls="--")
        if "score_diff" in metrics:
            grid[2][j].axhline(0.0, color="grey", lw=1, ls="--")
    caption = _interval_caption(df) + "; dashed grey: target alone (1×); a line joins runs that share every other setting"
    if "score_diff" in metrics:
        # A bootstrap interval over a few changed answers is too narrow (stats.sign_test_p): say so.
        caption += ("\nquality change: the method's score minus the target alone's on the same problems "
                    "(paired bootstrap interval; dashed: no change); an interval resting on a few changed "
                    "answers is too narrow: claims.md decides with the exact McNemar test")
    if singles:
        caption += f"\n{singles} configuration(s) run at a single {param} (no sweep) are not drawn"
    if used:
        cpus = "; ".join(f"CPU {c}: {m}" for m, c in cpu_letter.items() if c in used)
        caption += (f"\nspeed measured on {cpus}" if len(used) == 1 else
                    "\nspeedups on different CPUs are not joined" + (f" ({unjoined} break(s); hollow: a speedup on another CPU than its line's)" if unjoined else "") + f": {cpus}")
    _legend(fig, entries, len(series_total), caption)
    return fig


def _sweep_labels(reps: list, skip: Sequence[str] = ()) -> list[str]:
    """Legend labels: the method label without the x-axis knob, plus the settings that tell
    alike-labelled configurations apart (config_suffixes; the data set is the panel, not part
    of the label), never a hash."""
    suffix = config_suffixes(reps)
    return [method_label(r, skip=skip) + suffix.get(config_key(r), "") for r in reps]


def _distinguishing(labels: Mapping[Any, str], names: Mapping[Any, str]) -> dict[Any, str]:
    """For configurations sharing a method name, the label parts ('K=10', 'θ=0.2') that not all of
    them share; {} entries for a name with one configuration."""
    by_name: dict[str, list] = {}
    for key, name in names.items():
        by_name.setdefault(name, []).append(key)
    out: dict[Any, str] = {}
    for keys in by_name.values():
        if len(keys) < 2:
            continue
        parts = {k: labels[k].split(" (", 1)[1].rstrip(")").split(", ") if " (" in labels[k] else [] for k in keys}
        common = set.intersection(*(set(p) for p in parts.values()))
        # A one-knob-at-a-time sweep (θ, W and K around FLy's defaults on GSM8K): each point is
        # told apart by the knob it moves; the parts most points share (the defaults) are left
        # out of every tag but the one that has nothing else. Full tags ("K=15, θ=0.3, W=6" on
        # nine points) printed into each other.
        counts: dict[str, int] = {}
        for p in parts.values():
            for x in set(p) - common:
                counts[x] = counts.get(x, 0) + 1
        usual = {x for x, c in counts.items() if c > len(keys) / 2}
        for k in keys:
            own = [p for p in parts[k] if p not in common and p not in usual]
            out[k] = ", ".join(own) if own else ", ".join(p for p in parts[k] if p not in common)
    return out


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
    df = _frame(index)
    if not df.empty:
        df = df[df["method"] != "ar"]
    datasets = _datasets(df)
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
    n = max(1, len(datasets))
    ncols = min(n, 3)
    nrows = math.ceil(n / ncols)
    fig, grid = _figure(4.2 * ncols, 3.4 * nrows + 0.8, ncols=ncols, nrows=nrows)
    axes = [ax for row in grid for ax in row] if nrows > 1 else grid
    # Retention is on each set's headline quality figure (index score_name: accuracy, pass@1,
    # NIAH's recall, ...); each panel's y label names its own.
    fig.suptitle("Quality retention vs speedup (one point per configuration)")
    names = {method_name(r) for _, r in df.iterrows()} if not df.empty else set()
    # Speed is a property of the CPU: where the runs span several, each panel says whose speeds it shows.
    cpu_letter = _cpu_letters(df)
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
        tags = _distinguishing({key: method_label(members[0]) for key, members in groups.items()},
                               {key: method_name(members[0]) for key, members in groups.items()})
        for key, members in groups.items():
            s, s_ci = _point(members, "speedup")
            q, q_ci = _point(members, "retention")
            if s is None or q is None:
                missing += 1
                continue
            pts.append((s, q))
            pts_by_cpu.setdefault(_machine_of(members) if cpu_letter else None, []).append((s, q))
            name = method_name(members[0])
            h = ax.errorbar([s], [q], xerr=_yerr([s], [s_ci]), yerr=_yerr([q], [q_ci]), color=method_color(name, names),
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
            _note(ax, "no configuration with both\na speedup and a retention")
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
            _note(axes[0], why)
        return fig
    caption = _interval_caption(df) + "\nblack on grey: Pareto frontier (one per CPU where a panel's speeds come from several); dashed: retention 1 (the target alone's score); dash-dot: 1×"
    if missing:
        caption += f"; {missing} configuration(s) without retention (target-alone accuracy 0) not drawn"
    if no_panel:
        caption += (f"\nno panel for {', '.join(no_panel)}: no configuration there has a retention with an interval "
                    "(the target alone's accuracy 0, or too few right answers to resample)")
    if cpu_letter:
        caption += "\nspeeds compare only within one CPU: " + "; ".join(f"CPU {c}: {m}" for m, c in cpu_letter.items())
    _legend(fig, entries, len(entries), caption)
    return fig


def fig_acceptance_by_position(rows: pd.DataFrame | Iterable[Mapping[str, Any]], max_lines: int = MAX_LEGEND) -> Figure:
    """P(draft position i accepted | drafted) per configuration (the summaries'
    acceptance_by_position), one panel per data set, one colour per method, each single run's
    95% interval (acceptance_by_position_ci_low/high) as a band; the caption says which curves
    have none (means over runs, old summaries)."""
    df = _frame(rows)
    lines = []
    if not df.empty and "acceptance_by_position" in df:
        for _, r in df.iterrows():
            rates = r.get("acceptance_by_position")
            if isinstance(rates, (list, tuple)) and len(rates) > 0:
                lines.append((r, list(rates)))
    datasets = sorted({str(r.get("dataset")) for r, _ in lines})
    n = max(1, len(datasets))
    ncols = min(n, 3)
    nrows = math.ceil(n / ncols)
    fig, grid = _figure(4.2 * ncols, 3.2 * nrows + 1.0, ncols=ncols, nrows=nrows)
    axes = [ax for row in grid for ax in row] if nrows > 1 else grid
    fig.suptitle("Acceptance rate by draft position")
    if not lines:
        _note(axes[0], "no acceptance-by-position figures\n(target-alone runs only, or no drafter)")
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
    labels = dict(zip(reps, _sweep_labels(list(reps.values()))))
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
            (h,) = ax.plot(range(1, k + 1), mean, marker=MARKERS[style % len(MARKERS)], ms=7 if same else 3,
                           mfc="none" if same else color, mew=1.2 if same else 1.0, color=color,
                           ls=("-", "--", ":", "-.")[style % 4], label=labels[key], zorder=3 if same else 2)
            drawn.append(mean)
            if len(rr) == 1 and len(bands.get(key, [])) == 1:
                lo, hi = bands[key][0]
                xs = [i + 1 for i in range(k) if lo[i] is not None and hi[i] is not None]
                ax.fill_between(xs, [lo[i - 1] for i in xs], [hi[i - 1] for i in xs], color=color, alpha=0.12, lw=0, zorder=1)
            entries.setdefault(labels[key], h)
        ax.set_title(ds, fontsize=10)
        ax.set_ylim(-0.03, 1.03)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(alpha=0.3)
        ax.set_xlabel("draft position i", fontsize=8)
        ax.set_ylabel("P(accepted | drafted)", fontsize=8)
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
    _legend(fig, entries, len(order), f"{caption}; the {len(entries)} configurations run on the most data sets are drawn")
    return fig


def _fly_mismatches(records: Iterable[Mapping[str, Any]]) -> Iterator[tuple[str, float]]:
    """(kind, entropy) of every mismatch in FLy per-step records: 'accepted' (loosely), 'rejected'
    (the position the block was cut at) or 'discarded' (after that cut: thrown away with the
    draft's tail, so the rule never decided it)."""
    for rec in records:
        for step in rec.get("steps", []) or []:
            if step.get("rule") not in (None, "fly") or "mismatch_entropy" not in step:
                continue
            loose = set(step.get("loose_accepted", []))
            n = step.get("accepted")
            for pos, h in zip(step.get("mismatch_positions", []), step.get("mismatch_entropy", [])):
                if pos in loose:
                    yield "accepted", float(h)
                elif n is not None and pos == n:
                    yield "rejected", float(h)
                else:
                    yield "discarded", float(h)


def fly_mismatch_entropies(records: Iterable[Mapping[str, Any]]) -> tuple[list[float], list[float]]:
    """(accepted, rejected) mismatch entropies from FLy per-step records (see module docstring)."""
    accepted: list[float] = []
    rejected: list[float] = []
    for kind, h in _fly_mismatches(records):
        if kind == "accepted":
            accepted.append(h)
        elif kind == "rejected":
            rejected.append(h)
    return accepted, rejected


def fly_discarded_mismatches(records: Iterable[Mapping[str, Any]]) -> int:
    """Mismatches after a block's cut: discarded with the draft's tail, never decided."""
    return sum(kind == "discarded" for kind, _ in _fly_mismatches(records))


def fig_fly_entropy(runs: Sequence[Mapping[str, Any]], max_panels: int = 4) -> Figure:
    """Entropy of loosely accepted vs rejected mismatches.

    runs: each {"records": samples.jsonl records, "mode": "code" | "paper" | None,
    "theta": float | None}. One panel per (entropy mode, θ): the units differ between modes, and
    the gate accepts a mismatch only at entropy >= θ. With more than max_panels such pairs, one
    panel per mode (θ values drawn as lines).

    Runs that carry a "sweep" key (fly_runs_from_index: every setting but θ) and form a θ sweep
    (one sweep key, two or more θ): only the sweep with the most θ values is drawn. Pooling every
    run at its θ made panels of different things: θ = 0.3 (FLy's default) pooled 17 runs on seven
    data sets, θ = 0.2, 0.5 and 0.8 one GSM8K run each, so the panels could not be compared."""
    sweeps: dict[Any, list] = {}
    for run in runs:
        if run.get("sweep") is not None:
            sweeps.setdefault(run["sweep"], []).append(run)

    def thetas_of(group: list) -> set[float]:
        return {float(r["theta"]) for r in group if not _nan(r.get("theta"))}

    best = max(sweeps.values(), key=lambda g: (len(thetas_of(g)), len(g)), default=[])
    left_out = 0
    if len(thetas_of(best)) > 1:
        left_out = len(runs) - len(best)
        runs = best
    pooled: dict[tuple, dict[str, Any]] = {}
    discarded = 0
    for run in runs:
        records = list(run.get("records", []))
        acc, rej = fly_mismatch_entropies(records)
        discarded += fly_discarded_mismatches(records)
        if not acc and not rej:
            continue
        theta = None if _nan(run.get("theta")) else float(run["theta"])
        slot = pooled.setdefault((run.get("mode") or "code", theta), {"accepted": [], "rejected": [], "runs": []})
        slot["accepted"] += acc
        slot["rejected"] += rej
        slot["runs"].append(_pooled_name(run))
    if len(pooled) > max_panels:  # too many panels: one per mode
        merged: dict[tuple, dict[str, Any]] = {}
        for (mode, theta), slot in pooled.items():
            m = merged.setdefault((mode, None), {"accepted": [], "rejected": [], "thetas": set(), "runs": []})
            m["accepted"] += slot["accepted"]
            m["rejected"] += slot["rejected"]
            m["runs"] += slot["runs"]
            if theta is not None:
                m["thetas"].add(theta)
        panels = merged
    else:
        panels = {k: {**v, "thetas": {k[1]} if k[1] is not None else set()} for k, v in pooled.items()}
    n = max(1, len(panels))
    fig, axes = _figure(min(5.2 * n, 16), 4.2, ncols=n)
    if not panels:
        axes[0].set_title("FLy: entropy of accepted vs rejected mismatches")
        _note(axes[0], "no FLy step records\n(no method=fly run with record_steps=true,\nor no mismatch was decided)")
        return fig
    fig.suptitle("FLy mismatches by target entropy: loosely accepted vs rejected")
    for ax, ((mode, theta), slot) in zip(axes, sorted(panels.items(), key=lambda kv: (kv[0][0], kv[0][1] or 0.0))):
        values = slot["accepted"] + slot["rejected"] + sorted(slot["thetas"])
        lo, hi = min(values), max(values)
        if hi - lo < 1e-9:
            lo, hi = lo - 0.05, hi + 0.05
        bins = [lo + (hi - lo) * i / 25 for i in range(26)]
        # Rejected filled, accepted as an outline over it: two translucent fills would mix into a
        # third colour wherever both have counts, and the accepted ones could not be read.
        for key, color, label, style in (("rejected", "tab:red", "rejected", {"histtype": "stepfilled", "alpha": 0.45}),
                                         ("accepted", "tab:green", "accepted loosely", {"histtype": "step", "lw": 1.8})):
            data = slot[key]
            if data:
                ax.hist(data, bins=bins, color=color, label=f"{label} (n={len(data)})", **style)
            else:
                ax.plot([], [], color=color, label=f"{label} (n=0)")
        for t in sorted(slot["thetas"]):
            ax.axvline(t, color="black", ls="--", lw=1, label=f"θ = {t:g}")
        ax.set_xlabel(ENTROPY_LABEL.get(mode, f"entropy ({mode})"))
        ax.set_ylabel("mismatches (count)")
        ax.set_title(f"mode={mode}" + (f", θ={theta:g}" if theta is not None else ""), fontsize=10)
        # A panel pools every FLy run at its (mode, θ): with and without MLA, other K and W.
        ax.text(0.5, -0.2, _pooled_caption(slot["runs"]), transform=ax.transAxes, fontsize=6.5,
                color="dimgray", ha="center", va="top", wrap=True)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    # The summaries' mismatch counts include these: the per-step records say why they differ.
    not_drawn = (f"not drawn: {discarded} mismatch(es) after a block's first rejection, discarded with the "
                 "draft's tail (never decided by the rule)")
    if left_out:
        not_drawn += (f"; {left_out} FLy run(s) outside the θ sweep (other data sets or settings), so that every "
                      "panel shows the same data set and settings")
    fig.text(0.5, -0.11, not_drawn, fontsize=7, color="dimgray", ha="center", va="baseline")
    return fig


def _pooled_name(run: Mapping[str, Any]) -> str:
    """A run's name in a pooled panel's caption: its label without the θ and mode the panel
    title gives, and its data set."""
    label = str(run.get("pooled_label") or run.get("label") or "FLy")
    return label + (f" on {run['dataset']}" if run.get("dataset") else "")


def _pooled_caption(names: Sequence[str], width: int = 70) -> str:
    """'3 runs pooled: A; B (x2)', wrapped to the panel's width."""
    counts: dict[str, int] = {}
    for name in names:
        counts[name] = counts.get(name, 0) + 1
    parts = [f"{name} (x{c})" if c > 1 else name for name, c in counts.items()]
    text = (f"{len(names)} runs pooled: " if len(names) > 1 else "1 run: ") + "; ".join(parts)
    return "\n".join(textwrap.wrap(text, width))


def fly_runs_from_index(index: pd.DataFrame) -> list[dict[str, Any]]:
    """FLy runs of the index with their records loaded (for fig_fly_entropy)."""
    df = _frame(index)
    if df.empty:
        return []
    out = []
    for _, r in df[df["method"] == "fly"].iterrows():
        out.append({"records": read_records(r["run_dir"]), "mode": r.get("mode"), "theta": r.get("theta"), "label": method_label(r),
                    "pooled_label": method_label(r, skip=("theta", "mode")), "dataset": r.get("dataset"),
                    "sweep": _sweep_key(r, "theta")})
    return out


def build_figures(index: pd.DataFrame) -> dict[str, Figure]:
    return {
        "speedup_tau_vs_theta": fig_vs_param(index, "theta"),
        "speedup_tau_vs_W": fig_vs_param(index, "W"),
        "speedup_tau_vs_K": fig_vs_param(index, "K"),
        "retention_vs_speedup": fig_tradeoff(index),
        "acceptance_by_position": fig_acceptance_by_position(index),
        "fly_mismatch_entropy": fig_fly_entropy(fly_runs_from_index(index)),
    }


def write_plots(index: pd.DataFrame, out_dir: str | Path, formats: Sequence[str] = ("png", "pdf")) -> list[Path]:
    """Every report plot as <name>.png and <name>.pdf in out_dir."""
    return [p for name, fig in build_figures(index).items() for p in save(fig, out_dir, name, formats)]


def tracker_plots(
    summary: dict[str, Any], records: list[dict[str, Any]], config: dict[str, Any], method: dict[str, Any], out_dir: Path
) -> dict[str, Path]:
    """One run's plots for a tracker (sinks/wandb.py's `plotter`): acceptance by draft position,
    and FLy's mismatch entropies for a FLy run; {name: png path}."""
    from .index import summary_row

    made = {"acceptance_by_position": fig_acceptance_by_position([summary_row(summary, config)])}
    if summary.get("method") == "fly":
        made["fly_mismatch_entropy"] = fig_fly_entropy([{"records": records, **method}])
    return {name: save(fig, out_dir, name, formats=("png",))[0] for name, fig in made.items()}
