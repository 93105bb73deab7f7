"""`python -m loosespec_bench key=value ...`: the Hydra app (configs in loosespec_bench/conf/; --help lists them)."""

from __future__ import annotations

import logging
import os
import sys

from .errors import ConfigError
from .omp import default_wait_policy

# Before torch loads (see omp.py): spinning OpenMP workers for CPU runs on a dedicated machine.
default_wait_policy()

# Sweep points composed and checked before a multirun starts; a larger sweep checks this many.
MAX_CHECKED_POINTS = 256
# Flags that make Hydra print something instead of running, or that change which config it
# composes (another config file or folder, a rerun): no pre-check, Hydra handles them.
SKIP_FLAGS = ("--help", "-h", "--hydra-help", "--cfg", "-c", "--info", "-i", "--version", "--shell-completion", "-sc",
              "--resolve", "--package", "-p", "--config-path", "-cp", "--config-name", "-cn", "--config-dir", "-cd",
              "--experimental-rerun")


def one_line(err: BaseException) -> str:
    """A Hydra / OmegaConf error as one line: its text without the grammar link and the
    full_key / object_type detail lines."""
    lines = []
    for line in str(err).splitlines():
        line = line.strip()
        if not line or line.startswith(("See https://hydra.cc", "full_key:", "object_type", "reference_type", "Available options")):
            continue
        lines.append(line.rstrip("."))
    text = "; ".join(lines) or type(err).__name__
    if text[:1].isupper() and not text[1:2].isupper():  # "Could not ..." -> "could not ...", not "ABC"
        text = text[:1].lower() + text[1:]
    return text


def precheck(argv: list[str]) -> None:
    """Compose the config for the command line (each point of a -m sweep) and validate every
    setting, so that a bad override or value is one ConfigError before Hydra starts a job,
    creates a folder or loads a model."""
    from hydra import compose, initialize_config_dir
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.override_parser.overrides_parser import OverridesParser

    from .build import check_engine
    from .config import CONF_DIR, check_group_overrides, validate

    check_group_overrides(argv)
    multirun = any(a in ("-m", "--multirun") for a in argv)
    overrides = [a for a in argv if not a.startswith("-")]
    try:
        parsed = OverridesParser.create().parse_overrides(overrides)
    except Exception as err:
        raise ConfigError(f"bad override syntax: {one_line(err)}") from None
    swept = {o.key_or_group for o in parsed if o.is_sweep_override()}
    if multirun:
        points = [p for batch in BasicSweeper.split_arguments(parsed, None) for p in batch][:MAX_CHECKED_POINTS]
    else:
        sweeps = [o.input_line for o in parsed if o.is_sweep_override()]
        if sweeps:
            raise ConfigError(f"{sweeps[0]} is a sweep; add -m (--multirun) to run every point, or give one value")
        points = [overrides]
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3", job_name="loosespec_bench"):
            for point in points:
                try:
                    cfg = compose(config_name="config", overrides=point)
                except ConfigError:
                    raise
                except Exception as err:  # composition: unknown key, missing option, type, interpolation
                    raise ConfigError(one_line(err)) from None
                try:
                    validate(cfg)
                    check_engine(cfg)  # what the chosen engine cannot honour
                except ConfigError as err:
                    if len(points) > 1:
                        where = " ".join(p for p in point if p.lstrip("+~").split("=", 1)[0] in swept)
                        raise ConfigError(f"sweep point {where}: {err}") from None
                    raise
    finally:
        GlobalHydra.instance().clear()


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

    from .app import run_recording_errors
    from .config import CONF_DIR

    argv = sys.argv[1:]
    if not any(a.split("=", 1)[0] in SKIP_FLAGS for a in argv):
        try:
            precheck(argv)
        except ConfigError as err:
            print(f"error: {err}", file=sys.stderr)
            sys.exit(2)

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


if __name__ == "__main__":
    logging.basicConfig(level=os.environ.get("LOOSESPEC_LOG", "WARNING"))
    main()
