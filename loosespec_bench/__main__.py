"""`python -m loosespec_bench key=value ...`: the Hydra app (configs in loosespec_bench/conf/; --help lists them)."""

from __future__ import annotations

import logging
import os
import sys
from typing import Any

from .errors import ConfigError
from .omp import default_wait_policy

# Before torch loads (see omp.py): spinning OpenMP workers for CPU runs on a dedicated machine.
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


def precheck(argv: list[str], *, resources: bool | None = None) -> None:
    """Compose the config for the command line (every point of a -m sweep, the experiment's own
    sweep included) and check every setting, and what this machine must provide where the
    points run here (points.precheck_points), so that a bad override or value is one
    ConfigError before Hydra starts a job, creates a folder or loads a model. Hydra's printing
    flags (--cfg, --resolve, --package) and another config (-cn) are checked the same way."""
    from .settings.checks import check_environment
    from .settings.points import precheck_points

    from .settings.advice import check_added_keys, check_drafter_used, check_flags, check_override_syntax

    check_environment()
    check_flags(argv)  # lm-eval's --tasks/--limit..., `--key value`: the equivalent overrides
    args = parse_cli(argv)
    if any(getattr(args, flag, None) for flag in INFO_FLAGS):
        return
    check_override_syntax(list(args.overrides))  # bare words, `key=`, brackets, ~group
    if args.experimental_rerun is not None:
        from pathlib import Path

        path = Path(args.experimental_rerun)
        if not path.is_file():
            raise ConfigError(f"--experimental-rerun {args.experimental_rerun}: no such file (a run's .hydra/config.pickle)")
        return  # Hydra reruns that job's pickled config as it was
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
        precheck_points(list(args.overrides), multirun=bool(args.multirun), config_name=args.config_name or "config",
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
    from pathlib import Path

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
    try:
        from .settings.advice import check_declared_sweep, check_flags

        check_flags(argv)
        args = parse_cli(argv)
        # First: a declared sweep run without -m is refused before the machine's checks (seconds).
        if not (args.multirun or args.cfg or any(getattr(args, flag, None) for flag in INFO_FLAGS)):
            check_declared_sweep(list(args.overrides), args.config_name or "config")
        precheck(argv)
        sys.argv[1:] = hydra_argv(argv, args)
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)
    # After the pre-check: torch and transformers (~4.5 s to import) load only for a command
    # that passed it, so a mistyped override answers in under a second.
    from .run.app import run_recording_errors

    @hydra.main(config_path=str(CONF_DIR), config_name="config", version_base="1.3")
    def _app(cfg: DictConfig) -> float | None:
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
