"""(A Hydra plugin: Hydra instantiates launchers from the hydra_plugins namespace only.)

submitit's Slurm launcher (hydra-submitit-launcher), made to answer like the rest of the harness:

  * the request (hydra.launcher partition, gpus_per_node, mem_gb, cpus_per_task) is checked
    against what sinfo says the partition's nodes have, before anything is submitted; a request
    no node can meet, or one sbatch refuses, is ONE `error: ...` line naming the setting to
    change (exit 2), not submitit's traceback, and the sweep folder it made is removed;
  * every job of the array is awaited; a point that ends without a result (scancel, a node
    lost for good, out of requeues) is named with its Slurm state at the end (exit 1): its run
    folder keeps the finished samples, `make status` lists it, launching again resumes it;
  * submitit polls sacct; without accounting storage each poll logs "Bypassing sacct error":
    logged once, with what it means.

Selected by loosespec_bench/conf/hydra/launcher/slurm.yaml (`hydra/launcher=slurm`).
"""

from __future__ import annotations

import logging
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, List, Sequence

from hydra.core.singleton import Singleton
from hydra.core.utils import JobReturn, filter_overrides
from hydra_plugins.hydra_submitit_launcher.config import BaseQueueConf
from hydra_plugins.hydra_submitit_launcher.submitit_launcher import SlurmLauncher
from omegaconf import OmegaConf

log = logging.getLogger(__name__)


class _SacctOnce(logging.Filter):
    """Lets submitit's first "Bypassing sacct error" through, reworded; drops the repeats."""

    def __init__(self) -> None:
        super().__init__()
        self.seen = False

    def filter(self, record: logging.LogRecord) -> bool:
        if "Bypassing sacct error" not in record.getMessage():
            return True
        if self.seen:
            return False
        self.seen = True
        record.msg = ("sacct does not answer (no Slurm accounting storage?): job states come from the jobs' result files; "
                      "a job cancelled outside this launcher is then not noticed (make status still is). Further sacct errors are not shown.")
        record.args = ()
        return True


def quiet_sacct() -> None:
    logger = logging.getLogger("submitit")
    if not any(isinstance(f, _SacctOnce) for f in logger.filters):
        logger.addFilter(_SacctOnce())


# squeue states of a job that Slurm still runs or will run again (a requeue after a lost node).
ALIVE = {"PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "REQUEUED", "REQUEUE_FED", "REQUEUE_HOLD", "RESIZING", "SUSPENDED", "SIGNALING"}


def slurm_state(job_id: str) -> str | None:
    """The job's state as slurmctld has it (squeue -t all: finished jobs too, for MinJobAge);
    '' when slurmctld no longer knows the job; None when squeue does not answer."""
    try:
        out = subprocess.run(["squeue", "-h", "-t", "all", "-j", job_id, "-o", "%T"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0:
        return "" if "invalid job id" in out.stderr.lower() else None
    states = [s.strip() for s in out.stdout.splitlines() if s.strip()]
    return next((s for s in states if s in ALIVE), states[0] if states else "")


class Unfinished(Exception):
    """A job that Slurm ended without a result (its state in the message)."""


class CheckedSlurmLauncher(SlurmLauncher):
    @staticmethod
    def _result(job: Any, poll_s: float = 2.0) -> JobReturn:
        """The job's JobReturn, waiting as long as Slurm runs (or will rerun) the job.

        submitit decides from sacct, which misses two cases: a job whose node was lost shows
        NODE_FAIL for a moment while Slurm requeues it (--requeue), and an array task cancelled
        while pending has no accounting record at all (submitit would wait forever). So the
        job's state is also asked from slurmctld (squeue)."""
        from submitit.core.utils import FailedJobError, UncompletedJobError

        while True:
            if job.done():
                try:
                    return job.results()[0]
                except (UncompletedJobError, FailedJobError) as err:
                    state = slurm_state(job.job_id)
                    if state not in ALIVE:
                        last = [ln.strip() for ln in str(err).splitlines() if ln.strip()]
                        # COMPLETED without a result: submitit's own verdict (e.g. out of requeues) says why.
                        why = state if state and state != "COMPLETED" else (last[-1] if last else type(err).__name__)
                        raise Unfinished(why) from err
                    log.info(f"job {job.job_id} was requeued by Slurm ({state}); waiting for it")
                    job.watcher.clear()  # forget the cached final state of the first attempt
            else:
                state = slurm_state(job.job_id)
                if state is not None and state not in ALIVE:
                    time.sleep(poll_s)  # its result file may be on its way
                    if not job.done() and slurm_state(job.job_id) not in ALIVE:
                        raise Unfinished(state or "no record left in Slurm: cancelled while pending?")
            time.sleep(poll_s)

    def _refuse(self, message: str) -> None:
        """One line, exit 2, and no sweep folder left behind (it holds only Hydra's multirun.yaml
        and submitit's empty folders when nothing was submitted)."""
        print(f"error: {message}", file=sys.stderr, flush=True)
        assert self.config is not None
        sweep_dir = Path(str(self.config.hydra.sweep.dir))
        if sweep_dir.is_dir() and all(p.name in ("multirun.yaml", ".submitit") for p in sweep_dir.iterdir()):
            shutil.rmtree(sweep_dir, ignore_errors=True)
            results = Path(str(self.config.paths.results_dir)).resolve()
            for parent in sweep_dir.resolve().parents:
                if parent == results or not parent.is_relative_to(results):
                    break
                try:
                    parent.rmdir()
                except OSError:
                    break
        raise SystemExit(2)

    def _executor(self) -> Any:
        """submitit's AutoExecutor for the launcher's params (as hydra-submitit-launcher builds it)."""
        import submitit

        params = dict(self.params)
        init = {"folder": params.pop("submitit_folder")}
        if "max_num_timeout" in params:
            init[f"{self._EXECUTOR}_max_num_timeout"] = params.pop("max_num_timeout")
        executor = submitit.AutoExecutor(cluster=self._EXECUTOR, **init)
        shared = set(OmegaConf.structured(BaseQueueConf).keys())
        executor.update_parameters(**{k if k in shared else f"{self._EXECUTOR}_{k}": v for k, v in params.items()})
        return executor

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        from submitit.core.utils import FailedJobError

        from loosespec_bench.slurm import check_request, cluster_nodes, sbatch_refusal

        assert self.config is not None
        nodes = cluster_nodes()
        if nodes:
            problem = check_request(self.params, nodes)
            if problem:
                self._refuse(problem)
        quiet_sacct()
        executor = self._executor()
        sweep_dir = Path(str(self.config.hydra.sweep.dir))
        sweep_dir.mkdir(parents=True, exist_ok=True)
        log.info(f"Submitit 'slurm' sweep output dir : {sweep_dir}")
        points: List[tuple[int, List[str]]] = []
        job_params: List[Any] = []
        for idx, overrides in enumerate(job_overrides, start=initial_job_idx):
            log.info(f"\t#{idx} : {' '.join(filter_overrides(overrides))}")
            points.append((idx, list(overrides)))
            job_params.append((list(overrides), "hydra.sweep.dir", idx, f"job_id_for_{idx}", Singleton.get_state()))
        try:
            jobs = executor.map_array(self, *zip(*job_params))
        except FailedJobError as err:
            self._refuse(sbatch_refusal(str(err)))
        log.info(f"job array {jobs[0].job_id.split('_')[0]}: {len(jobs)} jobs")
        returns: List[JobReturn] = []
        missing: List[str] = []
        for (idx, overrides), job in zip(points, jobs):
            try:
                returns.append(self._result(job))
            except Unfinished as err:
                missing.append(f"#{idx} {' '.join(filter_overrides(overrides))} (job {job.job_id}: {err})")
        if missing:
            print(f"error: {len(missing)} of {len(jobs)} points ended without a result: " + "; ".join(missing)
                  + ". Their run folders keep the finished samples; `make status` lists them; launching again resumes them",
                  file=sys.stderr, flush=True)
            raise SystemExit(1)
        return returns
