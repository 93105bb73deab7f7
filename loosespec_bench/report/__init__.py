"""Reports over result folders: the results index, the papers' tables, plots.

    from loosespec_bench.report import load_index, write_tables, write_plots
    df = load_index("results")                  # one row per run folder
    write_tables(df, "reports/")                # Markdown, LaTeX, CSV beside published figures
    write_plots(df, "reports/plots")            # PNG + PDF

CLI: python -m loosespec_bench.report {index,tables,plots} --results results ...
Needs the `report` extra (pandas, matplotlib).
"""

from .index import find_run_dirs, index_run, load_index, read_records
from .plots import build_figures, write_plots
from .grouping import load_published
from .tables import build_tables, write_tables

__all__ = [
    "build_figures",
    "build_tables",
    "find_run_dirs",
    "index_run",
    "load_index",
    "load_published",
    "read_records",
    "write_plots",
    "write_tables",
]
