"""Certify the loosest setting of a loose rule that keeps quality on a pair, with a guarantee.

    python -m loosespec_bench.certify -e EXPERIMENT --delta POINTS [options] [-- OVERRIDE ...]
    python -m loosespec_bench.certify --ladder KEY=V1,V2,... --delta POINTS [options] -- method=RULE ...

The settings (the experiment's one swept key, or --ladder), strictest first, are tested in that
order for non-inferiority of their paired 0/1 quality against the target alone (H0: loss >=
delta) by the exact paired bound at planned looks (alpha spending), on the calibration split
(--split, GSM8K's train by default); the first setting not certified ends the sequence, and the
loosest certified setting is then measured on held-out problems of --report-split. Family-wise
error <= alpha. It prints the planner's cost first (--dry-run: only that, and whether the split's
n allows the margin), then one line per decision, then the result (certification_<tag>.md /
.json beside the run folders). Every run is an ordinary resumable run folder: run the command
again to resume. docs/certify.md explains the procedure and its guarantee.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Sequence

from ..errors import ConfigError



def _looks(text: str) -> tuple[int, ...]:
    try:
        vals = tuple(int(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: give increasing numbers of problems, e.g. 200,400,600") from None
    if not vals or vals[0] <= 0 or any(b <= a for a, b in zip(vals, vals[1:])):
        raise argparse.ArgumentTypeError(f"{text!r}: give increasing positive numbers of problems, e.g. 200,400,600")
    return vals


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m loosespec_bench.certify", description=__doc__.split("\n\n")[0],
                                 epilog="Overrides after -- go to every run (pair=, drafter=, dataset=, pair.dtype=, ...).")
    ap.add_argument("--experiment", "-e", help="an experiment whose sweep is the ladder (conf/experiment/certify_*.yaml)")
    ap.add_argument("--ladder", help="KEY=V1,V2,...: the settings, strictest (lossless) first, instead of the experiment's sweep")
    ap.add_argument("--delta", type=float, help="the margin: accuracy points the target alone may lose at most (e.g. 2)")
    ap.add_argument("--retention-margin", type=float, help="the margin as retention: percent of the target alone's accuracy (e.g. 5)")
    ap.add_argument("--alpha", type=float, default=0.05, help="family-wise one-sided error (default %(default)s)")
    ap.add_argument("--looks", type=_looks, default=None,
                    help="planned looks: cumulative problems, e.g. 1500,3000,4500 (default: three equal looks ending at "
                         "the n that certifies a balanced setting with 80%% power, capped at the split's size)")
    ap.add_argument("--spending", default="obrien_fleming", choices=["obrien_fleming", "pocock"],
                    help="Lan-DeMets alpha spending over the looks (default %(default)s)")
    ap.add_argument("--split", default="train", help="the calibration split the settings are certified on (default %(default)s)")
    ap.add_argument("--report-split", default="test", help="held-out split the certified setting is reported on (default %(default)s)")
    ap.add_argument("--holdout", type=int, default=200, help="held-out problems for the report (0: none; default %(default)s)")
    ap.add_argument("--score", default="task", choices=["task", "identical"],
                    help="0/1 quality: the task's score, or 'same tokens as the target alone' (a loss = a changed answer)")
    ap.add_argument("--speed", type=int, default=0,
                    help="N: time the certified setting paired on N held-out problems, one occasion per invocation (two in all)")
    ap.add_argument("--batch-size", type=int, default=8,
                    help="problems decoded at once in the quality runs (engine.batch_size; each token for token what it gets "
                         "alone: docs/batching.md); the speed occasions time at 1 (default %(default)s)")
    ap.add_argument("--discordance", type=float, default=0.1,
                    help="for the sizing line: share of problems a balanced setting changes (default %(default)s)")
    ap.add_argument("--accuracy", type=float, default=None,
                    help="for the sizing line: the target alone's accuracy (default: the committed runs', else 0.5)")
    ap.add_argument("--results", default=None, help="results folder (default: LOOSESPEC_RESULTS_DIR, else results)")
    ap.add_argument("--dry-run", action="store_true", help="check the request, print the cost and the sizing, run nothing")
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    overrides: list[str] = []
    if "--" in argv:
        cut = argv.index("--")
        argv, overrides = argv[:cut], argv[cut + 1 :]
    ap = parser()

    def error(message: str) -> None:  # one line, exit 2, as every other bad input
        print(f"error: {message} (--help lists the options)", file=sys.stderr)
        sys.exit(2)

    ap.error = error  # type: ignore[method-assign]
    args = ap.parse_args(argv)
    try:
        req = build_request(args, overrides)
        from .ladder import format_cost, plan_cost, plan_request, sizing_line

        acc = args.accuracy if args.accuracy is not None else 0.5
        # every point composed and checked (nothing loads before this passes), the looks set
        cfgs, n = plan_request(req, auto=args.looks is None, accuracy=acc, discordance=args.discordance)
        if args.looks is None:
            print(f"looks (auto): n = {', '.join(map(str, req.design.looks))}")
        dataset = str(cfgs[0].dataset.name) + (f" ({req.split})" if req.has_split else "")
        print(format_cost(req, plan_cost(req, cfgs)))
        print(sizing_line(req, dataset, req.sizes[req.split], acc, args.discordance, n))
        sys.stdout.flush()
        if args.dry_run:
            return 0
        from .procedure import certify, format_result, write_result

        result = certify(req)
    except ConfigError as err:
        # The run's own check speaks of engine.batch_size; certify sets it from --batch-size.
        said = str(err)
        hint = " (certify sets engine.batch_size from --batch-size)" if "engine.batch_size=" in said and "--batch-size" not in said else ""
        print(f"error: {err}{hint}", file=sys.stderr)
        return 2
    root = Path(req.results_dir or os.environ.get("LOOSESPEC_RESULTS_DIR") or "results")
    js, md = write_result(req, result, root)
    print()
    print(format_result(result))
    print(f"\n[certify] written: {md} and {js}")
    return 0


def build_request(args: argparse.Namespace, overrides: list[str]):
    """The Request from the command line: the margin, the design, the ladder (checked here;
    the points are composed and checked by ladder.check_request)."""
    from ..measure.stats.sequential import Design
    from .ladder import Request, check_margin, experiment_ladder, parse_ladder

    if not args.experiment and not args.ladder:
        raise ConfigError("give the settings: -e EXPERIMENT (its sweep is the ladder) or --ladder KEY=V1,V2,...")
    delta, estimand = check_margin(args.delta, args.retention_margin)
    if not 0 < args.alpha < 0.5:
        raise ConfigError(f"--alpha {args.alpha:g}: give a one-sided level in (0, 0.5)")
    if args.batch_size < 1:
        raise ConfigError(f"--batch-size {args.batch_size}: give a number of problems >= 1 (1: one at a time)")
    if args.holdout < 0 or args.speed < 0:
        raise ConfigError("--holdout and --speed take a number of problems >= 0")
    if not 0 < args.discordance <= 1:
        raise ConfigError(f"--discordance {args.discordance:g}: give a share in (0, 1]")
    if args.accuracy is not None and not 0 < args.accuracy < 1:
        raise ConfigError(f"--accuracy {args.accuracy:g}: give a share in (0, 1)")
    for o in overrides:
        if o.split("=", 1)[0].lstrip("+~") in ("dataset.split", "dataset.limit", "experiment_name", "experiment",
                                                   "engine.batch_size"):
            raise ConfigError(f"override {o}: certify sets it (use --split / --looks / -e / --batch-size)")
    design = Design(looks=args.looks or (1,), delta=delta, alpha=args.alpha, spending=args.spending, estimand=estimand)
    if args.ladder:
        key, values = parse_ladder(args.ladder)
    else:
        key, values = experiment_ladder(args.experiment, overrides)
    name = f"certify_{args.experiment}" if args.experiment and not args.experiment.startswith("certify") else (args.experiment or "certify")
    return Request(experiment=args.experiment, key=key, values=values, overrides=overrides, design=design, split=args.split,
                   report_split=args.report_split, holdout=args.holdout, score=args.score, speed=args.speed,
                   results_dir=args.results, experiment_name=name, batch_size=args.batch_size)


def main_ending_on_signals(argv: Sequence[str] | None = None) -> int:
    """main, where SIGINT (Ctrl-C, or `kill -INT` of a background job, which starts with SIGINT
    ignored) and SIGTERM end with one line: inside a run, the run's own (the records it kept);
    between runs, this one."""
    from ..interrupts import ending_on_signals

    return ending_on_signals(main, argv, "the certification: every finished sample record is kept in its run folder; "
                                         "the same command resumes from them and decides the same")


if __name__ == "__main__":
    sys.exit(main_ending_on_signals())
