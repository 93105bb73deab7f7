"""Paper tables: our runs beside the published figures, as Markdown, LaTeX and CSV.

Tables (the layouts of the two papers):
- fly_main: one row per (pair, method); per data set its speedup and accuracy, each with its
  interval; the in-distribution (ID) and out-of-distribution (OOD) means of speedup and tau, the
  mean over the paper's sets, the lowest accuracy retention, FLy's speedup over EAGLE-3 (OOD);
- noise_floor: every loose rule's quality beside the lossless rule (SPD) at the same pair,
  drafter, K and dtype: the lossless rule's retention interval is what numerics alone (bf16
  near-ties) do, the floor a loose rule is judged against; "identical to target alone" for both;
- fly_ablation_{theta,W,K,MLA}: one row per FLy configuration along one axis, over the data
  sets that every point of the ablation ran (never a 6-set pool beside 1-set points);
- dropmatch_main: SD vs SD + DropMatch (tau, speedup, task score) per pair / data set / drafter,
  the DropMatch rows named by their knobs (criterion, N, p);
- dropmatch_eagle3: EAGLE-3 vs EAGLE-3 + DropMatch; dropmatch_overhead: DropMatch's own cost;
- dropmatch_autojudge: SPD, DropMatch, AutoJudge and both, in and out of the judge's distribution;
- spec_bench_categories: Spec-Bench's speedup and tau per task group, intervals from the samples;
- batch_sweep: throughput, speedup and latency percentiles against batch size (engine=vllm runs served in batches).

Cells: `1.42× [1.21, 1.63]`, the point and its interval from summary.json (the `<figure>_ci_low`
/ `_ci_high` keys, loosespec_bench/schema.py); a summary written before intervals existed shows
the point marked "(no interval)"; a quality cell of a run its summary calls underpowered carries
the mark † (render.UNDERPOWERED_MARK), and one note under the table gives the n and the power
threshold. Rows and columns with nothing run are not printed: a note says what was not run.
Published figures come from published.csv (one number per row, each with its source); a
published row's source cell is `published [1]`, the note [1] naming the paper and where in it; a
published row's cell is empty where published.csv holds no figure: never 0.

Layout (render.Table): a table of at most render.MAX_COLUMNS (12) columns prints whole; a wider
one prints in blocks of its identity columns and one figure (per-set speedup, per-set tau, ...),
in Markdown and LaTeX alike. The LaTeX (booktabs, no resizing) prints the notes under the
tabulars inside the table environment, so they reach the PDF.

Files per table: <name>.md, <name>.tex, <name>.csv (every column, raw numbers) and
<name>_long.csv (tidy: one line per row x data set x figure with value, ci_low, ci_high, n and
flags). A table without a row of ours is not written, and its files from an earlier report in
the same folder are removed (published figures alone are no result of ours).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ..grouping import load_published
from ..render import Table
from .batch import batch_sweep_table
from .dropmatch import dropmatch_autojudge_table, dropmatch_eagle3_table, dropmatch_main_table, dropmatch_overhead_table
from .fly import ABLATIONS, fly_ablation_table, fly_main_table
from .noise_floor import noise_floor_table
from .spec_bench import spec_bench_table


def build_tables(index: pd.DataFrame, published: pd.DataFrame | None = None) -> list[Table]:
    published = load_published() if published is None else published
    return [
        fly_main_table(index, published),
        noise_floor_table(index, published),
        *[fly_ablation_table(index, axis, published) for axis in ABLATIONS],
        dropmatch_main_table(index, published),
        dropmatch_eagle3_table(index, published),
        dropmatch_overhead_table(index, published),
        dropmatch_autojudge_table(index, published),
        spec_bench_table(index),
        batch_sweep_table(index),
    ]


def write_tables(index: pd.DataFrame, out_dir: str | Path, published: pd.DataFrame | None = None) -> list[Path]:
    """Every table with a row of ours as <name>.md/.tex/.csv/_long.csv in out_dir, plus tables.md
    with all of them and a line naming the tables not written; a table without a row of ours
    is not written and its stale files are removed (render.Table.write)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tables = build_tables(index, published)
    paths = [p for t in tables for p in t.write(out)]
    shown = [t for t in tables if t.has_ours()]
    skipped = [t.name for t in tables if not t.has_ours()]
    combined = out / "tables.md"
    head = "# Paper tables\n\n" + (f"Not written (no run of ours): {', '.join(skipped)}.\n\n" if skipped else "")
    from ...safe_files import atomic_write_text

    atomic_write_text(combined, head + "\n".join(t.to_markdown() for t in shown), root=out)  # never through a link
    return [combined, *paths]
