"""`python -m loosespec_bench key=value ...`: the Hydra app (configs in loosespec_bench/conf/; --help lists them)."""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from typing import Any

from .errors import ConfigError
from .omp import default_wait_policy

# Before torch loads (see omp.py): spinning OpenMP workers for CPU runs on a quiet machine,
# sleeping ones on a busy machine (load average above the core count; said at the run's start).
default_wait_policy()

# Flags that make Hydra print something about itself, not about a config: no pre-check.
INFO_FLAGS = ("help", "hydra_help", "version", "shell_completion", "info")


def one_line(err: BaseException) -> str:
    from .errors import one_line as _one_line

    return _one_line(err)


def parse_cli(argv: list[str]) -> Any:
    """Hydra's own command line parser; a malformed command line is a ConfigError (one line)."""
    import argparse

    from hydra._internal.utils import get_args_parser

    parser = get_args_parser()

    def error(message: str) -> None:
        raise ConfigError(f"{message} (python -m loosespec_bench --help lists the options)")

    parser.error = error  # type: ignore[method-assign]
    try:
        # Flags may come after overrides (`pair=tiny -m drafter.k=3,5`): main() hands Hydra,
        # whose own parser refuses that, the flags first (hydra_argv).
        return parser.parse_intermixed_args(argv)
    except argparse.ArgumentError as err:
        raise ConfigError(str(err)) from None


def hydra_argv(argv: list[str], args: Any) -> list[str]:
    """argv with Hydra's flags (and their values) first, then the overrides, in their order."""
    rest = list(argv)
    for o in args.overrides:
        rest.remove(o)
    return [*rest, *args.overrides]


def precheck(argv: list[str], *, resources: bool | None = None, scale_checked: bool = False) -> list[tuple[list[str], Any]]:
    """Compose the config for the command line (every point of a -m sweep, the experiment's own
    sweep included) and check every setting, and what this machine must provide where the
    points run here (points.precheck_points), so that a bad override or value is one
    ConfigError before Hydra starts a job, creates a folder or loads a model. Hydra's printing
    flags (--cfg, --resolve, --package) and another config (-cn) are checked the same way."""
    from .settings.checks import check_environment
    from .settings.points import precheck_points

    from .settings.advice import check_added_keys, check_drafter_used, check_override_syntax, check_scale_fits
    from .settings.flags import check_flags

    check_environment()
    check_flags(argv)  # lm-eval's --tasks/--limit..., `--key value`: the equivalent overrides
    args = parse_cli(argv)
    if any(getattr(args, flag, None) for flag in INFO_FLAGS):
        return []
    check_override_syntax(list(args.overrides))  # bare words, `key=`, brackets, ~group
    if args.experimental_rerun is not None:
        from pathlib import Path

        path = Path(args.experimental_rerun)
        if not path.is_file():
            raise ConfigError(f"--experimental-rerun {args.experimental_rerun}: no such file (a run's .hydra/config.pickle)")
        return []  # Hydra reruns that job's pickled config as it was
    if not scale_checked:  # the 405B pair at scale=cpu: before any point composes
        check_scale_fits(list(args.overrides), args.config_name or "config")
    if args.config_path is not None or args.config_dir is not None:
        raise ConfigError("--config-path / --config-dir: the configs ship in the package; add folders with "
                          "hydra.searchpath=[file:///path] (docs/extending.md)")
    printing = args.cfg is not None or args.resolve or args.package is not None

    def data_check(cfg: Any) -> None:
        from .build import check_data  # torch: only for a sweep, once its settings passed

        check_data(cfg)

    def advice(points: list) -> None:  # the whole command line's mistakes, before the machine is asked
        check_drafter_used(list(args.overrides), points)
        check_added_keys(list(args.overrides), args.config_name or "config")

    try:
        return precheck_points(list(args.overrides), multirun=bool(args.multirun), config_name=args.config_name or "config",
                               resources=False if printing else resources, data_check=None if printing else data_check,
                               settings_check=advice)
    except ConfigError as err:
        from .settings.advice import explain_composition_error  # Hydra's "+key" advice -> did-you-mean over the tree

        message = explain_composition_error(err, list(args.overrides), args.config_name or "config")
        raise ConfigError(_scale_advice(message, list(args.overrides))) from None


def _scale_advice(message: str, overrides: list[str]) -> str:
    """An experiment at paper scale on a machine without CUDA: the fix is the experiment's CPU
    scale (scale=cpu, its experiment_scale/cpu/<name>.yaml), not pair.device=cpu (a 70B target
    on this CPU). Other messages pass unchanged."""
    from .settings.config import CONF_DIR, group_choices

    given = dict(o.lstrip("+").split("=", 1) for o in overrides if "=" in o)
    experiment, scale = given.get("experiment"), given.get("scale", "paper")
    if "no usable CUDA device" not in message or not experiment or scale == "cpu" or "cpu" not in group_choices("scale"):
        return message
    if not (CONF_DIR / "experiment_scale" / "cpu" / f"{experiment}.yaml").is_file():
        return message.replace("; use cpu", f"; experiment={experiment} has no CPU scale: run it on a CUDA machine")
    return message.replace("; use cpu", f"; add scale=cpu (experiment={experiment} sized for this machine)")


def _remove_job_dir() -> None:
    """A rejected run leaves no folder: Hydra's job folder of this run goes when it holds
    nothing but Hydra's own files, and so do the empty folders above it."""
    import shutil

    from hydra.core.hydra_config import HydraConfig

    try:
        out = Path(HydraConfig.get().runtime.output_dir)
    except Exception:
        return
    if not out.is_dir() or any(p.name not in (".hydra",) and not p.name.endswith(".log") for p in out.iterdir()):
        return
    # Hydra's job logging writes into that folder: detach its file handlers first, or the next
    # log record of this process (a notebook, the tests) would reopen a file in a deleted folder.
    import logging

    for logger in [logging.getLogger(), *(logging.getLogger(n) for n in list(logging.root.manager.loggerDict))]:
        for handler in list(getattr(logger, "handlers", [])):
            if isinstance(handler, logging.FileHandler) and Path(handler.baseFilename).is_relative_to(out):
                logger.removeHandler(handler)
                handler.close()
    shutil.rmtree(out, ignore_errors=True)
    for parent in out.parents:
        if parent.name != "_hydra" and parent.parent.name not in ("_hydra", "multirun"):
            break
        try:
            parent.rmdir()
        except OSError:
            break
    # The results folder and the folders above it that this command created (Hydra made them for
    # its job folder), when they are empty again: a refused command leaves the disk as it was.
    for folder in _CREATED_RESULTS:
        try:
            folder.rmdir()
        except OSError:
            break


# The results folder and its missing ancestors, deepest first, as they were before Hydra ran
# (main records them after the pre-check): _remove_job_dir removes them again when empty.
_CREATED_RESULTS: list[Path] = []


def _record_missing_results(points: list[tuple[list[str], Any]]) -> None:
    _CREATED_RESULTS.clear()
    if not points:
        return
    try:
        folder = Path(str(points[0][1].paths.results_dir)).expanduser().absolute()
    except Exception:  # a config whose folder does not resolve: Hydra will say so
        return
    while not folder.exists() and not folder.is_symlink() and folder != folder.parent:
        _CREATED_RESULTS.append(folder)
        folder = folder.parent


def checked(argv: list[str]) -> tuple[Any, list[tuple[list[str], Any]]]:
    """The command line parsed and pre-checked as a run would be: (Hydra's parsed arguments,
    every point with its config). A declared sweep without -m is refused first (seconds, before
    the machine's checks). ConfigError: the one line to print."""
    from .settings.advice import check_declared_sweep, check_override_syntax, check_scale_fits
    from .settings.flags import check_flags

    check_flags(argv)
    args = parse_cli(argv)
    if any(getattr(args, flag, None) for flag in INFO_FLAGS):
        return args, []
    check_override_syntax(list(args.overrides))
    # The 405B pair at scale=cpu is refused whether or not -m was given: "add -m" would only
    # lead to this refusal.
    check_scale_fits(list(args.overrides), args.config_name or "config")
    if not (args.multirun or args.cfg):
        check_declared_sweep(list(args.overrides), args.config_name or "config")
    return args, precheck(argv, scale_checked=True)


# --- subcommands, as lm-eval has them (`lm-eval ls tasks`, `lm-eval validate`) -----------------
# A first word of the command line that is one of these is a subcommand, never an override
# (overrides are key=value, so no option file can be mistaken for one).
SUBCOMMANDS = {
    "ls": ("ls GROUP", "the options of a config group, one line each with its description: methods, drafters, datasets, "
                       "paper_datasets, pairs, experiments, scales, loggers, engines (GROUP alone or its plural)"),
    "validate": ("validate [-m] OVERRIDE ...", "compose every point of the command line and run the pre-check a run "
                 "runs (settings, data, this machine where the points run here); nothing runs. Prints each point with "
                 "its run folder and its state. `--dry-run` on a run's command line does the same"),
    "status": ("status [-m] OVERRIDE ...", "where each point of the command line stands, read from its run folder: "
               "done, running (or killed: the age of its last write tells), failed, pending. Nothing is checked or run; "
               "a whole replication's status, with Slurm's view of each job: make status (python -m loosespec_bench.plan "
               "status -e NAME)"),
}
# At most this many points are listed one per line by validate and status; the rest are counted.
LISTED_POINTS = 40


def _usage(name: str) -> str:
    usage, text = SUBCOMMANDS[name]
    return f"usage: python -m loosespec_bench {usage}\n\n{text}."


def _group_named(word: str) -> str:
    """`methods` -> method: a group of --help's catalog, singular or plural; ConfigError otherwise."""
    from .settings.advice import _near
    from .settings.config import HELP_GROUPS

    for group in HELP_GROUPS:
        if word in (group, f"{group}s"):
            return group
    near = _near(word, [f"{g}s" for g in HELP_GROUPS])
    hint = f" (did you mean {near[0]}?)" if near else ""
    raise ConfigError(f"ls {word}: not a config group{hint}; ls one of: {', '.join(f'{g}s' for g in HELP_GROUPS)}")


def ls(argv: list[str]) -> int:
    """`ls GROUP`: each option with its `# description:` line (the files' own, as --help lists them);
    experiments say which scales have a file of their own (experiment_scale/<scale>/<name>.yaml)."""
    from .settings.config import HELP_GROUPS, description, group_choices, option_file, search_dirs

    if argv and argv[0] in ("-h", "--help"):
        print(_usage("ls"))
        return 0
    if not argv:
        raise ConfigError(f"ls needs a group: python -m loosespec_bench ls GROUP, GROUP one of {', '.join(f'{g}s' for g in HELP_GROUPS)}")
    if len(argv) > 1:
        raise ConfigError(f"ls takes one group, got {' '.join(argv)}; e.g. python -m loosespec_bench ls methods")
    group = _group_named(argv[0])
    dirs = search_dirs()
    names = group_choices(group, dirs)
    scales = group_choices("scale", dirs) if group == "experiment" else []

    def own(name: str) -> str:
        mine = [sc for sc in scales if option_file("experiment_scale", f"{sc}/{name}", dirs)]
        return f"[{','.join(mine)}]" if mine else ""

    tags = {n: own(n) for n in names}
    width = max(map(len, names), default=0)
    tag_width = max(map(len, tags.values()), default=0)
    print(HELP_GROUPS[group] + ("; [scale]: sized for that scale by a file of its own" if any(tags.values()) else "") + ":")
    for n in names:
        cells = [f"  {n:<{width}}", f"{tags[n]:<{tag_width}}" if tag_width else "", description(option_file(group, n, dirs))]  # type: ignore[arg-type]
        print("  ".join(c for c in cells if c).rstrip())
    return 0


def _point_states(points: list[tuple[list[str], Any]]) -> list[tuple[str, str, Any]]:
    """(state, what varies, run folder) of each point: store/status.point_status on the folder
    app.run writes (store/run_folder.run_dir)."""
    from .settings.points import varying_keys
    from .store.run_folder import run_dir
    from .store.status import point_status

    varying = varying_keys(points)
    out = []
    for overrides, cfg in points:
        label = " ".join(o for o in overrides if o.lstrip("+~").split("=", 1)[0] in varying) or " ".join(overrides) or "(defaults)"
        folder = run_dir(cfg)
        out.append((point_status(folder).state, label, folder))
    return out


def _rows(states: list[tuple[str, str, Any]]) -> str:
    """One line per point, up to LISTED_POINTS; the rest counted."""
    rows = [f"  {state:<8} {label}  {folder}" for state, label, folder in states[:LISTED_POINTS]]
    if len(states) > LISTED_POINTS:
        rows.append(f"  ... and {len(states) - LISTED_POINTS} more points")
    return "\n".join(rows)


def _plan_hint(overrides: list[str]) -> str | None:
    experiment = next((o.partition("=")[2] for o in overrides if o.lstrip("+").startswith("experiment=")), None)
    if not experiment or "," in experiment:
        return None
    rest = [o for o in overrides if not o.lstrip("+").startswith("experiment=")]
    return f"its jobs, hours and power table: python -m loosespec_bench.plan -e {experiment}" + (f" -- {' '.join(rest)}" if rest else "")


def validate(argv: list[str]) -> int:
    """`validate [-m] OVERRIDES`: the run's own pre-check (checked()), nothing run; each point printed."""
    if any(a in ("-h", "--help") for a in argv):
        print(_usage("validate"))
        return 0
    args, points = checked(argv)
    if any(getattr(args, flag, None) for flag in INFO_FLAGS) or args.cfg is not None:
        raise ConfigError("validate checks a run's command line; --help, --cfg and the other printing flags go to a run: "
                          "python -m loosespec_bench --cfg job OVERRIDES")
    print(f"ok: {len(points)} point{'s' * (len(points) != 1)} composed and pre-checked; nothing ran")
    print(_rows(_point_states(points)))
    if hint := _plan_hint(list(args.overrides)):
        print(hint)
    return 0


def status(argv: list[str]) -> int:
    """`status [-m] OVERRIDES`: each point's state from its run folder (store/status.py); a pure
    reader: composes the points, checks nothing about this machine, runs nothing."""
    from collections import Counter

    from .settings.advice import check_override_syntax, explain_composition_error
    from .settings.flags import check_flags
    from .settings.points import compose_points

    if any(a in ("-h", "--help") for a in argv):
        print(_usage("status"))
        return 0
    check_flags(argv)
    args = parse_cli(argv)
    overrides = list(args.overrides)
    check_override_syntax(overrides)
    try:
        _, points = compose_points(overrides, multirun=bool(args.multirun), config_name=args.config_name or "config", cover=True)
    except ConfigError as err:
        raise ConfigError(explain_composition_error(err, overrides, args.config_name or "config")) from None
    from .store.status import STATES

    states = _point_states(points)
    counts = Counter(state for state, _, _ in states)
    print(", ".join(f"{counts[s]} {s}" for s in STATES if counts[s]) + f" of {len(points)} point{'s' * (len(points) != 1)}")
    print(_rows(states))
    return 0


def main() -> None:
    import hydra
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode
    from omegaconf import DictConfig

    from .settings.config import CONF_DIR

    argv = sys.argv[1:]
    if "--version" in argv:  # the harness's version (Hydra's own flag would print Hydra's)
        from importlib.metadata import version as dist_version

        from . import __version__

        print(f"loosespec_bench {__version__} (hydra-core {dist_version('hydra-core')})")
        return
    # vllm bench sweep's --dry-run on a run's command line: validate (the points, the pre-check, nothing run).
    dry = [a for a in argv if a in ("--dry-run", "--dry_run")]
    if argv and (argv[0] in SUBCOMMANDS or dry):
        name, rest = (argv[0], argv[1:]) if argv[0] in SUBCOMMANDS else ("validate", argv)
        try:
            code = {"ls": ls, "validate": validate, "status": status}[name]([a for a in rest if a not in dry])
        except ConfigError as err:
            print(f"error: {err}", file=sys.stderr)
            sys.exit(2)
        sys.exit(code)
    try:
        args, points = checked(argv)
        sys.argv[1:] = hydra_argv(argv, args)
        _record_missing_results(points)
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)
    @hydra.main(config_path=str(CONF_DIR), config_name="config", version_base="1.3")
    def _app(cfg: DictConfig) -> float | None:
        # Imported where a point runs: torch, transformers and the harness (~6 CPU s) load only in
        # the process that decodes, never in one that is refused, prints --help, or launches a
        # sweep onto Slurm (its jobs import it themselves).
        from .run.app import run_recording_errors

        sweep = HydraConfig.get().mode == RunMode.MULTIRUN
        try:
            # A failure leaves error.txt in the run folder (a ConfigError only for sweep points).
            summary = run_recording_errors(cfg, record_config_errors=sweep)
        except ConfigError as err:
            # One line that says what to change; Hydra would otherwise print a traceback.
            print(f"error: {err}", file=sys.stderr)
            if sweep:
                raise  # a sweep point: Hydra records the failure and the other points go on
            _remove_job_dir()
            sys.exit(2)
        return summary.get("speedup")

    _app()


def setup_logging() -> None:
    """LOOSESPEC_LOG (DEBUG, INFO, WARNING...): a value that is not a level is one error line."""
    level = os.environ.get("LOOSESPEC_LOG", "WARNING")
    if not isinstance(logging.getLevelName(level.upper()), int):
        print(f"error: LOOSESPEC_LOG={level!r} is not a log level; use DEBUG, INFO, WARNING or ERROR", file=sys.stderr)
        sys.exit(2)
    logging.basicConfig(level=level.upper())


def _closed_pipe() -> None:
    """The reader of our output went away (`--help | head`): end quietly, as a Unix tool does.
    stdout is pointed at /dev/null first so that the interpreter's flush at exit does not raise
    a second time (the recipe of Python's signal module documentation)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    sys.exit(141)  # 128 + SIGPIPE: what a shell reports for a writer cut off by its reader


if __name__ == "__main__":
    setup_logging()
    try:
        main()
    except BrokenPipeError:
        _closed_pipe()
