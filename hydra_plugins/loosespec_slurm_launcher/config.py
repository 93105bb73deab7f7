"""The launcher's structured config: submitit's Slurm keys plus the launcher's own.

(No `from __future__ import annotations` here: Hydra's plugin scan executes this module without
registering it in sys.modules, and dataclasses then cannot resolve string annotations.)
"""

from dataclasses import dataclass

from hydra.core.config_store import ConfigStore
from hydra_plugins.hydra_submitit_launcher.config import SlurmQueueConf

# A held job's grace (hydra.launcher.held_grace_min), minutes: long enough for an admin's
# hold-and-release or a launch retry, short enough that a sweep never hangs on a held point.
HELD_GRACE_MIN = 5.0


@dataclass
class LoosespecSlurmConf(SlurmQueueConf):
    _target_: str = "hydra_plugins.loosespec_slurm_launcher.slurm_launcher.CheckedSlurmLauncher"
    held_grace_min: float = HELD_GRACE_MIN  # not an sbatch option: the launcher's own (slurm_launcher.await_jobs)


# `hydra/launcher: loosespec_slurm`, the base of loosespec_bench/conf/hydra/launcher/slurm.yaml.
ConfigStore.instance().store(group="hydra/launcher", name="loosespec_slurm", node=LoosespecSlurmConf, provider="loosespec_bench")
