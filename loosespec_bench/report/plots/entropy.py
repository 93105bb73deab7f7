"""FLy: the entropy of loosely accepted vs rejected mismatches, from its per-step records."""

from __future__ import annotations

from typing import Any, Iterable, Iterator, Mapping, Sequence

import pandas as pd
from matplotlib.figure import Figure

from ..index import read_records
from ...verifiers import FLy
from ..labels import THETA, dataset_label, is_rule, method_label
from ..render import is_missing
from .figure import ENTROPY_LABEL, OKABE_ITO, draw_note, frame_of, panel_grid, paper_style, set_caption, sweep_key

# FLy's entropy modes (verifiers/fly.py MODES) in words, for panel titles: whose formula the gate is.
MODE_NAMES = {"code": "released code's top-3 entropy", "paper": "paper's normalised entropy",
              "vllm": "vLLM's top-3 entropy"}
TITLE = "FLy mismatches by the target's entropy: loosely accepted vs rejected"


def panel_title(mode: str, theta: float | None, modes: int) -> str:
    """'θ = 0.3', with the entropy mode in words where the figure has several modes."""
    what = MODE_NAMES.get(mode, f"{mode} entropy")
    if theta is None:
        return what[0].upper() + what[1:]
    return f"θ = {theta:g}" + (f" ({what})" if modes > 1 else "")


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


@paper_style
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
        return {float(r[THETA]) for r in group if not is_missing(r.get(THETA))}

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
        theta = None if is_missing(run.get(THETA)) else float(run[THETA])
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
    fig, axes = panel_grid(len(panels), 1.9, 0.3)
    if not panels:
        axes[0].set_title("FLy: entropy of mismatches")
        draw_note(axes[0], "no FLy step records\n(no method=fly run with\nrecord_steps=true, or no\nmismatch was decided)")
        set_caption(fig, TITLE, "no FLy step records (no method=fly run with record_steps=true, or no mismatch was decided)")
        return fig
    modes = len({mode for mode, _ in panels})
    pooled_notes = []
    ordered = sorted(panels.items(), key=lambda kv: (kv[0][0], kv[0][1] or 0.0))
    for ax in axes[len(ordered):]:
        ax.set_visible(False)
    for ax, ((mode, theta), slot) in zip(axes, ordered):
        values = slot["accepted"] + slot["rejected"] + sorted(slot["thetas"])
        lo, hi = min(values), max(values)
        if hi - lo < 1e-9:
            lo, hi = lo - 0.05, hi + 0.05
        bins = [lo + (hi - lo) * i / 25 for i in range(26)]
        # Rejected filled, accepted as an outline over it: two translucent fills would mix into a
        # third colour wherever both have counts, and the accepted ones could not be read.
        # Vermillion and blue (the palette's, figure.OKABE_ITO): red against green is the pair a
        # deuteranope cannot tell apart.
        for key, color, label, style in (("rejected", OKABE_ITO["vermillion"], "rejected", {"histtype": "stepfilled", "alpha": 0.45}),
                                         ("accepted", OKABE_ITO["blue"], "accepted loosely", {"histtype": "step", "lw": 1.2})):
            data = slot[key]
            if data:
                ax.hist(data, bins=bins, color=color, label=f"{label} (n={len(data)})", **style)
            else:
                ax.plot([], [], color=color, label=f"{label} (n=0)")
        for t in sorted(slot["thetas"]):
            ax.axvline(t, color="black", ls="--", lw=0.8, label=f"θ = {t:g}")
        ax.set_xlabel(ENTROPY_LABEL.get(mode, f"entropy ({mode})"))
        ax.set_ylabel("mismatches (count)")
        title = panel_title(mode, theta, modes)
        ax.set_title(title)
        # A panel pools every FLy run at its (mode, θ): with and without MLA, other K and W; the
        # caption names them (panel by panel), the figure does not.
        pooled_notes.append(f"{title}: {_pooled_caption(slot['runs'])}")
        ax.grid(alpha=0.3)
        ax.legend(handlelength=1.2, borderaxespad=0.3)
    # The summaries' mismatch counts include these: the per-step records say why they differ.
    not_drawn = (f"not drawn: {discarded} mismatch(es) after a block's first rejection, discarded with the "
                 "draft's tail (never decided by the rule)")
    if left_out:
        not_drawn += (f"; {left_out} FLy run(s) outside the θ sweep (other data sets or settings), so that every "
                      "panel shows the same data set and settings")
    set_caption(fig, TITLE + " (one panel per θ; dashed: θ, the gate's threshold)", *pooled_notes, not_drawn)
    return fig


def _pooled_name(run: Mapping[str, Any]) -> str:
    """A run's name in a pooled panel's caption: its label without the θ and mode the panel
    title gives, and its data set."""
    label = str(run.get("pooled_label") or run.get("label") or "FLy")
    return label + (f" on {dataset_label(run['dataset'])}" if run.get("dataset") else "")


def _pooled_caption(names: Sequence[str]) -> str:
    """'3 runs pooled: A; B (x2)'."""
    counts: dict[str, int] = {}
    for name in names:
        counts[name] = counts.get(name, 0) + 1
    parts = [f"{name} (x{c})" if c > 1 else name for name, c in counts.items()]
    text = (f"{len(names)} runs pooled: " if len(names) > 1 else "1 run: ") + "; ".join(parts)
    return text


def fly_runs_from_index(index: pd.DataFrame) -> list[dict[str, Any]]:
    """FLy runs of the index with their records loaded (for fig_fly_entropy)."""
    df = frame_of(index)
    if df.empty:
        return []
    out = []
    for _, r in df[df["method"].map(lambda m: is_rule(m, FLy))].iterrows():
        out.append({"records": read_records(r["run_dir"]), "mode": r.get("mode"), THETA: r.get(THETA), "label": method_label(r),
                    "pooled_label": method_label(r, skip=(THETA, "mode")), "dataset": r.get("dataset"),
                    "sweep": sweep_key(r, THETA)})
    return out
