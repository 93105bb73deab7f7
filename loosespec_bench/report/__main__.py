"""python -m loosespec_bench.report {index,tables,plots,all,compare} [--results DIR] [--experiment GLOB] ...

  index   one row per run folder (printed; --csv FILE writes it)
  tables  the papers' tables, ours beside published: --out DIR gets <table>.md/.tex/.csv + tables.md
  plots   speedup/tau vs theta, W, K; retention vs speedup; acceptance by position; FLy entropies
  claims  the papers' testable claims, one verdict per claim and set (claims.md/.csv, loose_examples.md)
  all     tables, plots (in DIR/plots), claims and the index (DIR/index.csv)
  batch   a batch sweep's table and figure only (engine=vllm runs served in batches): batch_sweep.*
  project --profile NAME RUN_DIR   a run's work counts projected onto a hardware profile
          (report/profiles/*.yaml), with an interval and the published figures beside it
  compare A B   two runs (or two folders of runs, matched by data set) on their common samples:
          each figure with its interval and the paired difference B - A (report/compare.py)
  speed [TITLE=]DIR ... --out DIR   the speed-over-occasions figure of speed-evidence folders
          (scripts/bench_speed_evidence.py's report.json), one panel each, and their table: speed_occasions.*
  verdicts CSV ...   one table of verdicts per family over several claims.csv files (each
          with the claims.yaml beside it): what a results README's verdict table prints

A damaged run folder (config.yaml or summary.json unreadable or holding the wrong kind of value,
a samples.jsonl line that is not a complete record: run_folder.RunFolder.damage) stops the
command before anything is written, with one error line naming the folder and the field;
--skip-damaged leaves such folders out and lists them as skipped. compare always refuses one.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

# Columns printed by `index` (the CSV has them all); FLy's theta and W columns join after K
# (labels.THETA, W: imported when the index is printed, not for --help).
SHOWN = ["experiment", "status", "method", "drafter", "pair", "dataset", "K", "tau", "speedup",
         "speedup_ci_low", "speedup_ci_high", "accuracy", "retention", "n_samples", "run_id"]
FORMATS = ("png", "pdf", "svg")


def _error(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2


def _writable_dir(path: Path) -> str | None:
    """Why `path` cannot be an output folder, or None when it can."""
    raw = str(path)
    if len(raw.encode("utf-8", "surrogatepass")) >= 4096 or any(len(p.encode("utf-8", "surrogatepass")) > 255 for p in path.parts):
        return f"--out {raw[:60]!r}...: a name over 255 bytes or a path over 4096: name a shorter folder"
    walk = Path(path.anchor) if path.is_absolute() else Path(".")
    for part in path.parts[1 if path.is_absolute() else 0:]:
        walk = walk / part
        if os.path.lexists(walk) and not os.path.isdir(walk):
            return f"--out {raw!r}: {str(walk)!r} is a file, not a folder: name a folder"
    if path.exists() and not path.is_dir():
        return f"--out {str(path)!r} is a file, not a folder: name a folder"
    probe = path
    while not probe.exists():
        probe = probe.parent
    if not os.access(probe, os.W_OK):
        return f"--out {str(path)!r}: {str(probe)!r} is not writable: name a folder you can write"
    return None


def _speed(args: argparse.Namespace) -> int:
    """The speed-over-occasions figure (plots/occasions.py) from speed-evidence folders."""
    from ..errors import ConfigError
    from ..safe_files import load_json_declaration

    formats = tuple(f.strip() for f in args.formats.split(",") if f.strip())
    if not formats or any(f not in FORMATS for f in formats):
        return _error(f"--formats {args.formats!r}: use a comma-separated list of {', '.join(FORMATS)}")
    if why := _writable_dir(Path(args.out)):
        return _error(why)
    reports = {}
    for panel in args.panels:
        title, _, folder = panel.rpartition("=") if "=" in panel else ("", "", panel)
        path = Path(folder) / "report.json"
        if not os.path.lexists(path):
            return _error(f"{path} does not exist: name a folder scripts/bench_speed_evidence.py has analysed")
        try:  # through the gate: never a link or a FIFO, bounded, one line for bad JSON
            rep = load_json_declaration(path, "speed-evidence report")
        except ConfigError as err:
            return _error(f"{err}; rerun the script with --analyse-only")
        except (OSError, ValueError) as err:
            return _error(f"{path}: unreadable ({err}); rerun the script with --analyse-only")
        if not isinstance(rep, dict) or not isinstance(rep.get("configs"), dict):
            return _error(f"{path}: not a speed-evidence report (no 'configs'); rerun the script with --analyse-only")
        reports[title or Path(folder).name] = rep
    from .plots.figure import save
    from .plots.occasions import fig_speed_occasions

    from .tables.speed import speed_occasions_table

    paths = save(fig_speed_occasions(reports), Path(args.out), args.name, formats)
    # Its table beside it: the counts, each occasion's speedup, SPD at its best K beside the papers' K.
    paths += speed_occasions_table(reports).write(Path(args.out))
    print(f"speed: {len(paths)} files in {args.out} ({', '.join(p.name for p in paths)})")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m loosespec_bench.report", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    default_results = os.environ.get("LOOSESPEC_RESULTS_DIR", "results")
    for name, help_text in (("index", "list the runs"), ("tables", "write the paper tables"),
                            ("plots", "write the plots"), ("claims", "decide the papers' claims"),
                            ("all", "tables + plots + claims + index.csv"),
                            ("batch", "the batch sweep's table and figure (batch_sweep.*)")):
        p = sub.add_parser(name, help=help_text)
        p.add_argument("--results", default=default_results, help="results directory (default: %(default)s)")
        p.add_argument("--experiment", default=None, help="only these experiments (name or glob, e.g. 'fly_*')")
        if name == "index":
            p.add_argument("--csv", default=None, help="write the full index to this CSV file")
        else:
            p.add_argument("--out", default="reports", help="output directory (default: %(default)s)")
        if name in ("claims", "all"):
            p.add_argument("--claims", type=Path, default=None,
                           help="the claims declaration (default: OUT/claims.yaml, copied there from the packaged one if absent)")
        if name in ("plots", "all", "batch"):
            p.add_argument("--formats", default="png,pdf", help="comma-separated (default: %(default)s)")
        p.add_argument("--skip-damaged", action="store_true",
                       help="leave out run folders whose config.yaml, summary.json or samples.jsonl is damaged, listing "
                            "them as skipped (default: a damaged folder stops the report, naming it and the field)")
    p = sub.add_parser("compare", help="two runs (or sets of runs) side by side, with the paired difference")
    p.add_argument("a", type=Path, help="run folder, or a folder of run folders")
    p.add_argument("b", type=Path, help="run folder, or a folder of run folders")
    p.add_argument("--csv", default=None, help="also write the rows to this CSV file")
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed (default: %(default)s)")
    p.add_argument("--n-boot", type=int, default=10_000, help="bootstrap resamples (default: %(default)s)")
    p.add_argument("--graded-test", default="t",
                   help="the paired test of graded (non-0/1) quality scores, a name of stats.PAIRED_TESTS "
                        "(default: %(default)s, the paired t; 0/1 scores: always the exact McNemar test)")
    p = sub.add_parser("project", help="a run's work counts on the papers' hardware (report/profiles/*.yaml)")
    p.add_argument("run_dir", type=Path, help="run folder (samples.jsonl) or speed-evidence folder (occasion-*.jsonl)")
    p.add_argument("--profile", action="append", required=True, help="hardware profile name or YAML path (repeatable)")
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed (default: %(default)s)")
    p.add_argument("--n-boot", type=int, default=2000, help="resamples (default: %(default)s)")
    p = sub.add_parser("speed", help="speedup over occasions, measured and predicted (speed-evidence folders)")
    p.add_argument("panels", nargs="+", help="speed-evidence folder (with report.json), optionally as TITLE=FOLDER")
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument("--name", default="speed_occasions", help="file name stem (default: %(default)s)")
    p.add_argument("--formats", default="png,pdf", help="comma-separated (default: %(default)s)")
    p = sub.add_parser("verdicts", help="verdicts per family over several claims.csv files (one markdown table)")
    p.add_argument("csvs", nargs="+", type=Path, help="claims.csv files written by `claims` (each beside its claims.yaml)")
    args = parser.parse_args(argv)

    if args.command == "verdicts":
        missing = [str(c) for c in args.csvs if not c.is_file()]
        if missing:
            return _error(f"{', '.join(missing)}: no such file; name claims.csv files written by `python -m loosespec_bench.report claims`")
        from ..errors import ConfigError
        from ..safe_files import check_regular
        from .claims.markdown import verdict_table

        try:
            for c in args.csvs:
                check_regular(c)  # a link or a FIFO (pandas would block on it): one line
            print(verdict_table(args.csvs), end="")
        except ConfigError as err:
            return _error(str(err))
        except (KeyError, ValueError, TypeError, AttributeError) as err:  # a column of the wrong kind
            return _error(f"not a claims.csv written by `claims` ({str(err)[:120]}); regenerate it")
        return 0
    if args.command == "compare":
        return _compare(args)
    if args.command == "speed":
        return _speed(args)
    if args.command == "project":
        from ..errors import ConfigError
        from .project import project_report

        try:
            texts = [project_report(name, args.run_dir, n_boot=args.n_boot, seed=args.seed) for name in args.profile]
        except ConfigError as err:
            return _error(str(err))
        print("\n\n".join(texts))
        return 0

    from .index import load_index

    if not Path(args.results).is_dir():
        return _error(f"results directory {args.results!r} does not exist (--results DIR)")
    if args.command != "index" and (why := _writable_dir(Path(args.out))):
        return _error(why)
    if args.command == "index" and args.csv:
        csv = Path(args.csv)
        if csv.is_dir():
            return _error(f"--csv {args.csv!r} is a folder: name a file, e.g. {str(csv / 'index.csv')!r}")
        if why := _writable_dir(csv.parent):
            return _error(why.replace("--out", "--csv's folder"))
    formats: tuple[str, ...] = ()
    if args.command in ("plots", "all", "batch"):
        formats = tuple(f.strip() for f in args.formats.split(",") if f.strip())
        bad = [f for f in formats if f not in FORMATS]
        if bad or not formats:
            return _error(f"--formats {args.formats!r}: use a comma-separated list of {', '.join(FORMATS)}")
    from ..errors import ConfigError

    try:
        df = load_index(args.results, experiment=args.experiment, skip_damaged=args.skip_damaged)
    except ConfigError as err:  # a damaged run folder (run_folder.DamagedRun)
        return _error(f"{err}; fix or remove that folder, or pass --skip-damaged to report without it")
    skipped = df.attrs.get("skipped") or []
    for folder, why in skipped:
        print(f"skipped (damaged): {why}", file=sys.stderr)
    if df.empty:
        where = f"under {args.results}" + (f" for experiment {args.experiment!r}" if args.experiment else "")
        if skipped:
            return _error(f"every run folder {where} is damaged ({len(skipped)} skipped); nothing to report")
        if args.experiment:
            return _error(_no_experiment(args.results, args.experiment))
        return _error(f"no run folder {where} (a folder with config.yaml, samples.jsonl or summary.json): "
                      "point --results at a results folder")
    try:
        return _write(args, df, formats)
    except ConfigError as err:  # an output that is a link or a special file, or outside --out (safe_files)
        return _error(str(err))
    except OSError as err:  # an output path that cannot be written (read-only, /proc, disk full)
        return _error(f"cannot write the report: {err.strerror or err} ({err.filename or args.command}): choose another --out/--csv")


def _no_experiment(results: str, pattern: str) -> str:
    """--experiment matched no run: did-you-mean over the experiments the folder holds."""
    import difflib

    from .index import load_index

    names = sorted({str(e) for e in load_index(results, skip_damaged=True).get("experiment", [])})
    if not names:
        return f"no run folder under {results} (a folder with config.yaml, samples.jsonl or summary.json): point --results at a results folder"
    near = difflib.get_close_matches(pattern, names, n=1, cutoff=0.75)
    hint = f"did you mean --experiment {near[0]}? " if near else ""
    shown = ", ".join(names[:15]) + (f", ... ({len(names)} in all)" if len(names) > 15 else "")
    return f"--experiment {pattern!r} matches no run under {results}; {hint}(experiments there: {shown}; a glob such as 'fly_*' works)"


def _write(args: argparse.Namespace, df: "pd.DataFrame", formats: tuple[str, ...]) -> int:
    from ..errors import ConfigError
    from .index import index_to_csv

    if args.command == "index":
        import pandas as pd

        from .labels import THETA, W

        shown = [*SHOWN[:SHOWN.index("K") + 1], THETA, W, *SHOWN[SHOWN.index("K") + 1:]]
        with pd.option_context("display.max_rows", None, "display.width", 200, "display.max_columns", None):
            print(df[shown].to_string(index=False, float_format=lambda v: f"{v:.3g}"))
        if args.csv:
            print(f"index: {index_to_csv(df, args.csv)} ({len(df)} runs)")
        return 0

    out = Path(args.out)
    if args.command == "batch":
        from .plots.batch import fig_batch_sweep
        from .plots.figure import save
        from .tables.batch import batch_sweep_table

        table = batch_sweep_table(df)
        if not table.has_ours():
            return _error(f"no run under {args.results} was served in batches (engine=vllm): nothing to draw")
        paths = [*table.write(out), *save(fig_batch_sweep(df), out, "batch_sweep", formats)]
        print(f"batch: {len(paths)} files in {out} ({', '.join(p.name for p in paths)})")
        return 0
    if args.command in ("tables", "all"):
        from .tables import write_tables

        paths = write_tables(df, out)
        print(f"tables: {len(paths)} files in {out} (start with {paths[0]})")
    if args.command in ("plots", "all"):
        from .plots import write_plots

        plot_dir = out / "plots" if args.command == "all" else out
        paths = write_plots(df, plot_dir, formats=formats)
        print(f"plots: {len(paths)} files in {plot_dir}")
    if args.command in ("claims", "all"):
        from .claims import write_claims

        if args.claims is not None and not args.claims.is_file():
            return _error(f"--claims {str(args.claims)!r} is not a file: name a claims.yaml (the packaged one: loosespec_bench/report/claims.yaml)")
        try:
            paths = write_claims(df, out, claims=args.claims)
        except ConfigError as err:
            return _error(str(err))
        print(f"claims: {', '.join(str(p) for p in paths)}")
    if args.command == "all":
        print(f"index: {index_to_csv(df, out / 'index.csv')} ({len(df)} runs)")
    if getattr(args, "skip_damaged", False) and df.attrs.get("skipped"):
        print(f"skipped {len(df.attrs['skipped'])} damaged run folder(s) (listed above)")
    return 0


def _compare(args: argparse.Namespace) -> int:
    from ..errors import ConfigError
    from .compare import compare, format_comparison, rows_to_csv

    if args.n_boot < 100:
        return _error(f"--n-boot={args.n_boot} is too few resamples for an interval; use 100 or more")
    try:
        pairs, rows = compare(args.a, args.b, seed=args.seed, n_boot=args.n_boot, graded_test=args.graded_test)
    except ConfigError as err:
        return _error(str(err))
    print(format_comparison(pairs, rows))
    if args.csv:
        try:
            print(f"csv: {rows_to_csv(rows, Path(args.csv))} ({len(rows)} rows)")
        except ConfigError as err:  # --csv a link or a special file (safe_files)
            return _error(str(err))
        except OSError as err:
            return _error(f"cannot write --csv {args.csv}: {err.strerror or err}")
    return 0


def main_ending_on_signals(argv: list[str] | None = None) -> int:
    """main(), where SIGINT (Ctrl-C) and SIGTERM end with one line (exit 130 / 143), never a traceback."""
    from ..interrupts import ending_on_signals

    return ending_on_signals(main, argv, "the report: the files written so far are whole (each written atomically); the same command writes them again")


if __name__ == "__main__":
    sys.exit(main_ending_on_signals())
