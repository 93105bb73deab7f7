"""(A Hydra plugin: Hydra instantiates sweepers from the hydra_plugins namespace only.)

Hydra's basic sweeper, minus the points another sweep of the plan runs (loosespec_bench.plan).

The plan launches every distinct configuration once: a point (run id: the semantic config,
without experiment_name) that several sweeps need runs in the first sweep that has it, and the
other sweeps leave it out. plan.launch writes the run ids a sweep must leave out to a file, one
per line, names it in $LOOSESPEC_SKIP_RUN_IDS and selects this sweeper for that sweep:

    python -m loosespec_bench -m experiment=NAME ... hydra.sweeper._target_=hydra_plugins.loosespec_skip_sweeper.skip_sweeper.SkipSweeper

Each point's config is composed as the job would compose it; a point whose run id is listed is
not handed to the launcher (no Slurm job). Without the variable it is the basic sweeper.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any, List, Sequence

from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from omegaconf import open_dict

log = logging.getLogger(__name__)

SKIP_ENV = "LOOSESPEC_SKIP_RUN_IDS"


def skip_ids() -> set[str]:
    path = os.environ.get(SKIP_ENV)
    if not path:
        return set()
    return {line.strip() for line in Path(path).read_text().splitlines() if line.strip()}


class SkipSweeper(BasicSweeper):
    """BasicSweeper whose batches leave out the points listed in $LOOSESPEC_SKIP_RUN_IDS."""

    def _run_id(self, overrides: Sequence[str]) -> str:
        from loosespec_bench.settings.config import run_id

        assert self.hydra_context is not None and self.config is not None
        cfg = self.hydra_context.config_loader.load_sweep_config(self.config, list(overrides))
        with open_dict(cfg):
            del cfg["hydra"]
        return run_id(cfg)

    def get_job_batch(self) -> Sequence[Sequence[str]]:
        batch = super().get_job_batch()
        skip = skip_ids()
        if not skip:
            return batch
        kept = []
        for ov in batch:
            rid = self._run_id(ov)
            if rid in skip:
                log.info("skipped (another sweep of the plan runs it): %s %s", rid, " ".join(ov))
            else:
                kept.append(ov)
        return kept

    def sweep(self, arguments: List[str]) -> Any:
        # BasicSweeper.sweep hands every batch to the launcher: an empty one (all points run
        # elsewhere) would still submit an empty job array with some launchers.
        assert self.launcher is not None
        launcher = self.launcher
        real = launcher.launch

        def launch(job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Any:
            return real(job_overrides, initial_job_idx=initial_job_idx) if job_overrides else []

        launcher.launch = launch  # type: ignore[method-assign]
        try:
            return super().sweep(arguments)
        finally:
            del launcher.launch
