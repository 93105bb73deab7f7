"""python -m loosespec_bench.report {index,tables,plots,all,compare} [--results DIR] [--experiment GLOB] ...

  index   one row per run folder (printed; --csv FILE writes it)
  tables  the papers' tables, ours beside published: --out DIR gets <table>.md/.tex/.csv + tables.md
  plots   speedup/tau vs theta, W, K; retention vs speedup; acceptance by position; FLy entropies
  all     tables, plots (in DIR/plots) and the index (DIR/index.csv)
  compare A B   two runs (or two folders of runs, matched by data set) on their common samples:
          each figure with its interval and the paired difference B - A (report/compare.py)
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

# Columns printed by `index` (the CSV has them all).
SHOWN = ["experiment", "status", "method", "drafter", "pair", "dataset", "K", "theta", "W", "tau", "speedup",
         "accuracy", "retention", "n_samples", "run_id"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m loosespec_bench.report", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    default_results = os.environ.get("LOOSESPEC_RESULTS_DIR", "results")
    for name, help_text in (("index", "list the runs"), ("tables", "write the paper tables"),
                            ("plots", "write the plots"), ("all", "tables + plots + index.csv")):
        p = sub.add_parser(name, help=help_text)
        p.add_argument("--results", default=default_results, help="results directory (default: %(default)s)")
        p.add_argument("--experiment", default=None, help="only these experiments (name or glob, e.g. 'fly_*')")
        if name == "index":
            p.add_argument("--csv", default=None, help="write the full index to this CSV file")
        else:
            p.add_argument("--out", default="reports", help="output directory (default: %(default)s)")
        if name in ("plots", "all"):
            p.add_argument("--formats", default="png,pdf", help="comma-separated (default: %(default)s)")
    p = sub.add_parser("compare", help="two runs (or sets of runs) side by side, with the paired difference")
    p.add_argument("a", type=Path, help="run folder, or a folder of run folders")
    p.add_argument("b", type=Path, help="run folder, or a folder of run folders")
    p.add_argument("--csv", default=None, help="also write the rows to this CSV file")
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed (default: %(default)s)")
    p.add_argument("--n-boot", type=int, default=10_000, help="bootstrap resamples (default: %(default)s)")
    args = parser.parse_args(argv)

    if args.command == "compare":
        return _compare(args)

    from .index import index_to_csv, load_index

    if not Path(args.results).is_dir():
        print(f"error: results directory {args.results!r} does not exist (--results DIR)", file=sys.stderr)
        return 2
    df = load_index(args.results, experiment=args.experiment)
    if df.empty:
        print(f"no run folders under {args.results}" + (f" for experiment {args.experiment!r}" if args.experiment else ""), file=sys.stderr)
    if args.command == "index":
        if not df.empty:
            import pandas as pd

            with pd.option_context("display.max_rows", None, "display.width", 200, "display.max_columns", None):
                print(df[SHOWN].to_string(index=False, float_format=lambda v: f"{v:.3g}"))
        if args.csv:
            print(f"index: {index_to_csv(df, args.csv)} ({len(df)} runs)")
        return 0

    out = Path(args.out)
    if args.command in ("tables", "all"):
        from .tables import write_tables

        paths = write_tables(df, out)
        print(f"tables: {len(paths)} files in {out} (start with {paths[0]})")
    if args.command in ("plots", "all"):
        from .plots import write_plots

        plot_dir = out / "plots" if args.command == "all" else out
        paths = write_plots(df, plot_dir, formats=tuple(f for f in args.formats.split(",") if f))
        print(f"plots: {len(paths)} files in {plot_dir}")
    if args.command == "all":
        print(f"index: {index_to_csv(df, out / 'index.csv')} ({len(df)} runs)")
    return 0


def _compare(args: argparse.Namespace) -> int:
    from ..errors import ConfigError
    from .compare import compare, format_comparison, rows_to_csv

    if args.n_boot < 100:
        print(f"error: --n-boot={args.n_boot} is too few resamples for an interval; use 100 or more", file=sys.stderr)
        return 2
    try:
        pairs, rows = compare(args.a, args.b, seed=args.seed, n_boot=args.n_boot)
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(format_comparison(pairs, rows))
    if args.csv:
        print(f"csv: {rows_to_csv(rows, Path(args.csv))} ({len(rows)} rows)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
