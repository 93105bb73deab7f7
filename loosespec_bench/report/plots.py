"""Report plots (matplotlib, Agg canvas: no display, no pyplot global state), PNG and PDF.

- speedup and tau vs theta, vs W (FLy runs) and vs K (every method with a drafter);
- accuracy retention vs speedup: one point per configuration, the Pareto frontier drawn;
- acceptance rate by draft position (summary.json's acceptance_by_position);
- FLy: entropy of loosely accepted vs rejected mismatches, from the per-step records that the
  FLy verifier writes (verifiers/fly.py FLyDecision.record: mismatch_positions,
  mismatch_entropy, loose_accepted) and the step's accepted count. A mismatch inside the
  accepted prefix was accepted loosely; the mismatch at the first rejected position (index =
  accepted) was rejected; mismatches after it were never decided and are left out.

Every figure function returns a Figure (shown inline by Jupyter) and draws a visible note instead
of an empty plot when there is nothing to draw.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from .index import read_records
from .tables import CONFIG_KEYS, config_key, config_suffixes, method_label

SPEEDUP_LABEL = "speedup over target alone (×)"
TAU_LABEL = "tau (tokens per target step)"
PARAMS = {
    "theta": ("theta", "entropy threshold θ"),
    "W": ("W", "deferral window W (tokens)"),
    "K": ("K", "draft length K (tokens)"),
}
# The resolved-config key behind each x axis: a line is one configuration of every other key.
PARAM_CONFIG_KEY = {"theta": "method.theta", "W": "method.window", "K": "drafter.k"}
ENTROPY_LABEL = {
    "code": "top-3 entropy H of the target (nats)",
    "paper": "normalised entropy h of the target (0 to 1)",
}


def _figure(width: float = 6.4, height: float = 4.0, ncols: int = 1) -> tuple[Figure, list]:
    fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, ncols, squeeze=False)[0]
    return fig, list(axes)


def _note(ax: Any, text: str) -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, fontsize=11,
            bbox={"boxstyle": "round", "facecolor": "#f4f4f4", "edgecolor": "#999999"}, wrap=True)
    ax.set_xticks([])
    ax.set_yticks([])


def save(fig: Figure, out_dir: str | Path, name: str, formats: Sequence[str] = ("png", "pdf"), dpi: int = 150) -> list[Path]:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for fmt in formats:
        path = out / f"{name}.{fmt}"
        fig.savefig(path, dpi=dpi)
        paths.append(path)
    return paths


def _nan(v: Any) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


def _mean(values: Iterable[Any]) -> float | None:
    xs = [float(v) for v in values if not _nan(v)]
    return sum(xs) / len(xs) if xs else None


def _frame(rows: pd.DataFrame | Iterable[Mapping[str, Any]]) -> pd.DataFrame:
    df = rows if isinstance(rows, pd.DataFrame) else pd.DataFrame(list(rows))
    if not df.empty and "status" in df:
        df = df[df["status"].isin(["complete", "partial"])]
    return df


def _varying_label(rows: list[Mapping[str, Any]], keys: list[str], skip: Sequence[str] = ()) -> list[str]:
    """Legend labels: the method label without the x-axis knob, plus pair / data set / subset
    only where they differ between series."""
    differ = [k for k in keys if len({str(r.get(k)) for r in rows}) > 1]
    labels = []
    for r in rows:
        extra = [f"{r.get(k)}" for k in differ if k in ("pair", "dataset", "subset")]
        labels.append(" · ".join([method_label(r, skip=skip), *extra]))
    return labels


def fig_vs_param(index: pd.DataFrame, param: str) -> Figure:
    """Speedup (left) and tau (right) vs theta, W or K; one line per configuration of the
    other knobs (and pair / data set), each point the mean over that configuration's runs."""
    col, xlabel = PARAMS[param]
    df = _frame(index)
    if not df.empty:
        df = df[df[col].notna()]
        df = df[df["method"] == "fly"] if param in ("theta", "W") else df[df["K"].fillna(0) > 0]
    fig, (ax_s, ax_t) = _figure(11, 4.2, ncols=2)
    fig.suptitle(f"Speedup and tau vs {xlabel}")
    keys = [k for k in CONFIG_KEYS if k != col] + ["dataset", "subset"]

    def line_of(r: Any) -> tuple:
        # every resolved setting but the x axis (runs differing in anything else never share a line)
        return (*config_key(r, keys, exclude=(PARAM_CONFIG_KEY[param],), exclude_prefixes=()), str(r.get("subset")))

    series: dict[tuple, list] = {}
    for _, r in df.iterrows():
        series.setdefault(line_of(r), []).append(r)
    multi = series
    if not multi:
        what = "FLy runs" if param in ("theta", "W") else "runs with a drafter"
        for ax in (ax_s, ax_t):
            _note(ax, f"no {what} to plot against {param}")
        return fig
    reps = [v[0] for v in multi.values()]
    suffix = config_suffixes(reps, keyfn=line_of)
    labels = [lab + suffix.get(line_of(r), "") for lab, r in zip(_varying_label(reps, keys, skip=(col,)), reps)]
    for (members, label) in zip(multi.values(), labels):
        frame = pd.DataFrame(members).groupby(col)[["speedup", "tau"]].mean(numeric_only=True).sort_index()
        for ax, metric in ((ax_s, "speedup"), (ax_t, "tau")):
            ys = frame[metric]
            ax.plot(frame.index, ys, marker="o", label=label)
    xs = sorted({float(m[col]) for v in multi.values() for m in v})
    for ax, ylabel in ((ax_s, SPEEDUP_LABEL), (ax_t, TAU_LABEL)):
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.set_xticks(xs)
        ax.grid(alpha=0.3)
    ax_s.axhline(1.0, color="grey", lw=1, ls="--", label="target alone (1×)")
    handles, labs = ax_s.get_legend_handles_labels()
    fig.legend(handles, labs, loc="outside lower center", ncols=min(3, len(labs)), fontsize=8)
    return fig


def pareto_front(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """Points not dominated in (higher speedup, higher retention), by increasing speedup."""
    best = -math.inf
    front = []
    for x, y in sorted(points, key=lambda p: (-p[0], -p[1])):
        if y > best:
            front.append((x, y))
            best = y
    return sorted(front)


def fig_tradeoff(index: pd.DataFrame) -> Figure:
    """Accuracy retention vs speedup, one point per configuration (mean over its runs)."""
    df = _frame(index)
    fig, (ax,) = _figure(7, 4.8)
    ax.set_title("Accuracy retention vs speedup (one point per configuration)")
    ax.set_xlabel(SPEEDUP_LABEL)
    ax.set_ylabel("accuracy retention (method ÷ target alone)")
    if not df.empty:
        df = df[df["method"] != "ar"]
    keys = [*CONFIG_KEYS, "dataset"]
    points = []
    missing = 0
    groups: dict[tuple, list] = {}
    for _, r in df.iterrows():
        groups.setdefault(config_key(r, keys, exclude_prefixes=()), []).append(r)
    for members in groups.values():
        s = _mean(m["speedup"] for m in members)
        r = _mean(m["retention"] for m in members)
        if s is None or r is None:
            missing += 1
            continue
        points.append((s, r, members[0]))
    if not points:
        why = "no configuration has both a speedup and an accuracy retention"
        if missing:
            why += f"\n({missing} without retention: no paired baseline, or target-alone accuracy 0)"
        _note(ax, why)
        return fig
    methods = sorted({p[2]["method"] for p in points})
    markers = dict(zip(methods, "osD^vP*X"))
    for m in methods:
        mine = [p for p in points if p[2]["method"] == m]
        ax.scatter([p[0] for p in mine], [p[1] for p in mine], marker=markers[m], s=45, label=m, zorder=3)
    if len(points) <= 15:
        for x, y, row in points:
            ax.annotate(f"{method_label(row)}\n{row['dataset']}", (x, y), textcoords="offset points", xytext=(5, 4), fontsize=7)
    front = pareto_front([(p[0], p[1]) for p in points])
    ax.plot([p[0] for p in front], [p[1] for p in front], color="black", lw=1, ls="-", drawstyle="steps-post",
            label="Pareto frontier", zorder=2)
    ax.axhline(1.0, color="grey", lw=1, ls="--", label="target-alone accuracy")
    ax.axhline(0.99, color="tab:red", lw=1, ls=":", label="99% retention (FLy's claim)")
    ax.axvline(1.0, color="grey", lw=1, ls="-.", label="no speedup (1×)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    if missing:
        ax.text(0.01, 0.01, f"{missing} configuration(s) without retention not shown", transform=ax.transAxes, fontsize=7)
    return fig


def fig_acceptance_by_position(rows: pd.DataFrame | Iterable[Mapping[str, Any]], max_lines: int = 12) -> Figure:
    """P(draft position i accepted | drafted) per configuration (the summaries' acceptance_by_position)."""
    df = _frame(rows)
    fig, (ax,) = _figure(7, 4.2)
    ax.set_title("Acceptance rate by draft position")
    ax.set_xlabel("draft position i (1 = first draft token)")
    ax.set_ylabel("P(accepted | drafted)")
    lines = []
    if not df.empty and "acceptance_by_position" in df:
        for _, r in df.iterrows():
            rates = r.get("acceptance_by_position")
            if isinstance(rates, (list, tuple)) and len(rates) > 0:
                lines.append((r, list(rates)))
    if not lines:
        _note(ax, "no acceptance-by-position figures (target-alone runs only, or no drafter)")
        return fig
    def line_of(r: Any) -> tuple:
        return (*config_key(r, [*CONFIG_KEYS, "dataset"], exclude_prefixes=()), str(r.get("subset")))

    reps = [r for r, _ in lines]
    suffix = config_suffixes(reps, keyfn=line_of)
    labels = [lab + suffix.get(line_of(r), "") for lab, r in zip(_varying_label(reps, ["pair", "dataset", "subset"]), reps)]
    # one line per configuration (seeds averaged), never per label: two configurations that
    # print alike carry their differing settings in the label instead
    merged: dict[tuple, tuple[str, list[list[float]]]] = {}
    for label, (r, rates) in zip(labels, lines):
        merged.setdefault(line_of(r), (label, []))[1].append(rates)
    merged = {label: runs for label, runs in merged.values()}
    for label, runs in list(merged.items())[:max_lines]:
        n = max(len(r) for r in runs)
        mean = [sum(r[i] for r in runs if i < len(r)) / sum(1 for r in runs if i < len(r)) for i in range(n)]
        ax.plot(range(1, n + 1), mean, marker="o", ms=3, label=label)
    ax.set_ylim(-0.03, 1.03)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="best")
    if len(merged) > max_lines:
        ax.text(0.01, 0.01, f"first {max_lines} of {len(merged)} configurations shown", transform=ax.transAxes, fontsize=7)
    return fig


def fly_mismatch_entropies(records: Iterable[Mapping[str, Any]]) -> tuple[list[float], list[float]]:
    """(accepted, rejected) mismatch entropies from FLy per-step records (see module docstring)."""
    accepted: list[float] = []
    rejected: list[float] = []
    for rec in records:
        for step in rec.get("steps", []) or []:
            if step.get("rule") not in (None, "fly") or "mismatch_entropy" not in step:
                continue
            positions = step.get("mismatch_positions", [])
            entropies = step.get("mismatch_entropy", [])
            loose = set(step.get("loose_accepted", []))
            n = step.get("accepted")
            for pos, h in zip(positions, entropies):
                if pos in loose:
                    accepted.append(float(h))
                elif n is not None and pos == n:
                    rejected.append(float(h))
    return accepted, rejected


def fig_fly_entropy(runs: Sequence[Mapping[str, Any]], max_panels: int = 4) -> Figure:
    """Entropy of loosely accepted vs rejected mismatches.

    runs: each {"records": samples.jsonl records, "mode": "code" | "paper" | None,
    "theta": float | None}. One panel per (entropy mode, θ): the units differ between modes, and
    the gate accepts a mismatch only at entropy >= θ. With more than max_panels such pairs, one
    panel per mode (θ values drawn as lines)."""
    pooled: dict[tuple, dict[str, Any]] = {}
    for run in runs:
        acc, rej = fly_mismatch_entropies(run.get("records", []))
        if not acc and not rej:
            continue
        theta = None if _nan(run.get("theta")) else float(run["theta"])
        slot = pooled.setdefault((run.get("mode") or "code", theta), {"accepted": [], "rejected": []})
        slot["accepted"] += acc
        slot["rejected"] += rej
    if len(pooled) > max_panels:  # too many panels: one per mode
        merged: dict[tuple, dict[str, Any]] = {}
        for (mode, theta), slot in pooled.items():
            m = merged.setdefault((mode, None), {"accepted": [], "rejected": [], "thetas": set()})
            m["accepted"] += slot["accepted"]
            m["rejected"] += slot["rejected"]
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
        for key, color, label in (("accepted", "tab:green", "accepted loosely"), ("rejected", "tab:red", "rejected")):
            data = slot[key]
            if data:
                ax.hist(data, bins=bins, alpha=0.55, color=color, label=f"{label} (n={len(data)})")
            else:
                ax.plot([], [], color=color, label=f"{label} (n=0)")
        for t in sorted(slot["thetas"]):
            ax.axvline(t, color="black", ls="--", lw=1, label=f"θ = {t:g}")
        ax.set_xlabel(ENTROPY_LABEL.get(mode, f"entropy ({mode})"))
        ax.set_ylabel("mismatches (count)")
        ax.set_title(f"mode={mode}" + (f", θ={theta:g}" if theta is not None else ""), fontsize=10)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    return fig


def fly_runs_from_index(index: pd.DataFrame) -> list[dict[str, Any]]:
    """FLy runs of the index with their records loaded (for fig_fly_entropy)."""
    df = _frame(index)
    if df.empty:
        return []
    out = []
    for _, r in df[df["method"] == "fly"].iterrows():
        out.append({"records": read_records(r["run_dir"]), "mode": r.get("mode"), "theta": r.get("theta"), "label": method_label(r)})
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
