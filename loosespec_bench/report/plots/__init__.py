"""Report plots (matplotlib, Agg canvas: no display, no pyplot global state), PNG and PDF.

- speedup and tau vs theta, vs W (FLy runs) and vs K (every method with a drafter), a panel per
  data set, a line only through runs that share every other setting;
- accuracy retention vs speedup: a panel per data set and CPU, one point per configuration, the
  Pareto frontier drawn;
- acceptance rate by draft position (summary.json's acceptance_by_position), a panel per data set;
- under load (engine=vllm batch sweeps): throughput, TPOT and speedup against batch size;
- FLy: entropy of loosely accepted vs rejected mismatches, from the per-step records that the
  FLy verifier writes (verifiers/fly.py FLyDecision.record: mismatch_positions,
  mismatch_entropy, loose_accepted) and the step's accepted count. A mismatch inside the
  accepted prefix was accepted loosely; the mismatch at the first rejected position (index =
  accepted) was rejected; mismatches after it were never decided and are left out.

Every figure function returns a Figure (shown inline by Jupyter) and draws a visible note instead
of an empty plot when there is nothing to draw. Reviewers' rules, kept by every figure: sized for
a paper (figure.PAPER_RC: one column, 3.3 in, or two, 7 in, wide, at most figure.MAX_HEIGHT tall,
7-point text at print size), the caption beside the figure (<name>.caption.md / .tex), never inside
it; colours from one colour-blind-safe palette (figure.PALETTE, Okabe-Ito), one fixed colour per
method (METHOD_COLORS), human labels from the schema and data sets' display names (never a hash,
a raw key or `nan`), error bars from the summaries' intervals, at most MAX_LEGEND legend entries.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import pandas as pd
from matplotlib.figure import Figure

from ...settings.config import DEFAULT_ENGINE
from ...verifiers import FLy
from ..labels import THETA, W, is_rule
from .acceptance import fig_acceptance_by_position
from .batch import fig_batch_sweep
from .entropy import fig_fly_entropy, fly_runs_from_index
from .figure import save
from .sweeps import fig_vs_param
from .tradeoff import fig_tradeoff


def build_figures(index: pd.DataFrame) -> dict[str, Figure]:
    return {
        f"speedup_tau_vs_{THETA}": fig_vs_param(index, THETA),
        f"speedup_tau_vs_{W}": fig_vs_param(index, W),
        "speedup_tau_vs_K": fig_vs_param(index, "K"),
        "retention_vs_speedup": fig_tradeoff(index),
        "acceptance_by_position": fig_acceptance_by_position(index),
        "fly_mismatch_entropy": fig_fly_entropy(fly_runs_from_index(index)),
        **({"batch_sweep": fig_batch_sweep(index)} if has_served_runs(index) else {}),
    }


def has_served_runs(index: pd.DataFrame) -> bool:
    """Whether the index holds runs of a second engine that may have been served in batches (a
    report without any draws no empty batch-sweep figure)."""
    # Our batch-1 loop (the default engine) never serves batches; vLLM and engine=hf_serve do
    # (batches.batch_points reads the same split).
    return not index.empty and "engine" in index and bool((~index["engine"].fillna("").astype(str).isin(("", DEFAULT_ENGINE))).any())


def write_plots(index: pd.DataFrame, out_dir: str | Path, formats: Sequence[str] = ("png", "pdf")) -> list[Path]:
    """Every report plot as <name>.png (300 dpi) and <name>.pdf in out_dir, at its print size (3.3
    or 7 in wide), with its caption beside it: <name>.caption.md and <name>.caption.tex."""
    return [p for name, fig in build_figures(index).items() for p in save(fig, out_dir, name, formats)]


def tracker_plots(
    summary: dict[str, Any], records: list[dict[str, Any]], config: dict[str, Any], method: dict[str, Any], out_dir: Path
) -> dict[str, Path]:
    """One run's plots for a tracker (sinks/wandb.py's `plotter`): acceptance by draft position,
    and FLy's mismatch entropies for a FLy run; {name: png path}."""
    from ..index import summary_row

    made = {"acceptance_by_position": fig_acceptance_by_position([summary_row(summary, config)])}
    if is_rule(summary.get("method"), FLy):
        made["fly_mismatch_entropy"] = fig_fly_entropy([{"records": records, "mode": method.get("mode"), THETA: method.get(FLy.THRESHOLD)}])
    return {name: save(fig, out_dir, name, formats=("png",))[0] for name, fig in made.items()}
