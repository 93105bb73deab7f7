"""`python -m loosespec_bench key=value ...`: the Hydra app (configs in loosespec_bench/conf/; --help lists them)."""

from __future__ import annotations

import logging
import os
import sys

from .errors import ConfigError
from .omp import default_wait_policy

# Before torch loads (see omp.py): spinning OpenMP workers for CPU runs on a dedicated machine.
default_wait_policy()


def main() -> None:
    import hydra
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode
    from omegaconf import DictConfig

    from .app import run_recording_errors
    from .config import CONF_DIR, check_group_overrides

    try:
        check_group_overrides(sys.argv[1:])
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)

    @hydra.main(config_path=str(CONF_DIR), config_name="config", version_base="1.3")
    def _app(cfg: DictConfig) -> float | None:
        try:
            summary = run_recording_errors(cfg)  # a failure leaves error.txt in the run folder
        except ConfigError as err:
            # One line that says what to change; Hydra would otherwise print a traceback.
            print(f"error: {err}", file=sys.stderr)
            if HydraConfig.get().mode == RunMode.MULTIRUN:
                raise  # a sweep point: Hydra records the failure and the other points go on
            sys.exit(2)
        return summary.get("speedup")

    _app()


if __name__ == "__main__":
    logging.basicConfig(level=os.environ.get("LOOSESPEC_LOG", "WARNING"))
    main()
