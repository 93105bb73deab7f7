"""(A Hydra plugin: Hydra instantiates launchers from the hydra_plugins namespace only.)

submitit's Slurm launcher (hydra-submitit-launcher), made to answer like the rest of the harness:

  * the request (hydra.launcher partition, gpus_per_node, mem_gb, cpus_per_task) is checked
    against what sinfo says the partition's nodes have, before anything is submitted; a request
    no node can meet, or one sbatch refuses, is ONE `error: ...` line naming the setting to
    change (exit 2), not submitit's traceback, and the sweep folder it made is removed;
  * every job of the array is awaited; a point that ends without a result (scancel, a node
    lost for good, out of requeues) is named with its Slurm state at the end (exit 1), and so is
    a point whose job ran and raised (out of requeues, a full results disk: one line each, not
    Hydra's traceback); its run folder keeps the finished samples, `make status` lists it,
    launching again resumes it;
  * submitit polls sacct; without accounting storage each poll logs "Bypassing sacct error":
    logged once, with what it means.

Selected by loosespec_bench/conf/hydra/launcher/slurm.yaml (`hydra/launcher=slurm`).
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, List, Sequence

from hydra.core.singleton import Singleton
from hydra.core.utils import JobReturn, JobStatus, filter_overrides
from hydra_plugins.hydra_submitit_launcher.config import BaseQueueConf
from hydra_plugins.loosespec_slurm_launcher.config import HELD_GRACE_MIN
from hydra_plugins.hydra_submitit_launcher.submitit_launcher import SlurmLauncher
from omegaconf import OmegaConf, open_dict

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


class Unfinished(Exception):
    """A job that Slurm ended without a result, or one that waits for something that will not come
    by itself (held past the grace, a reason that never clears): the message says which."""


# How often the launcher asks squeue (one call for every job still awaited).
POLL_S = 2.0


def await_jobs(jobs: Sequence[Any], *, held_grace_s: float, known_nodes: set[str] | None = None, params: dict[str, Any] | None = None,
               poll_s: float = POLL_S,
               query: Callable[[list[str]], dict[str, Any] | None] | None = None,
               steps: Callable[[str], list[tuple[str, str]] | None] | None = None,
               clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep,
               echo: Callable[[str], None] | None = None,
               cancel: Callable[[str], None] | None = None,
               partitions: Callable[[], set[str] | None] | None = None) -> list[Any]:
    """Every job's JobReturn, or an Unfinished saying why it has none, in the jobs' order.

    All jobs are watched at once (one squeue call per poll): a held or stuck point is told as soon
    as it happens, not when the points before it end. submitit decides from sacct, which misses
    three cases: a job whose node was lost shows NODE_FAIL for a moment while Slurm requeues it
    (--requeue); an array task cancelled while pending has no accounting record at all (submitit
    would wait forever); and a held job (priority 0: `scontrol hold`, `launch failed requeued
    held`) is PENDING for ever. So each job's state and reason are also asked from slurmctld
    (squeue %T %r %Q) and told once per change (loosespec_bench.slurm.QueueWatch)."""
    from submitit.core.utils import FailedJobError, UncompletedJobError

    from loosespec_bench.slurm import ALIVE, QueueWatch, ended_without_result, failed_why, job_steps, query_queue

    query = query or query_queue
    steps = steps or job_steps
    cancel = cancel or _scancel

    def final(job_id: str, state: str) -> str:
        # FAILED says too little: an out-of-memory kill of step 0 leaves the job FAILED (srun's exit code).
        if state == "NODE_FAIL" and (params or {}).get("partition"):
            # A partition deleted or renamed under its jobs ends them NODE_FAIL: say so.
            have = (partitions or _partitions)()
            wanted = [p.strip() for p in str((params or {})["partition"]).split(",") if p.strip()]
            gone = [p for p in wanted if have is not None and p not in have]
            if gone:
                return (f"NODE_FAIL: partition {gone[0]} is gone from the cluster (deleted or renamed; it has: "
                        f"{', '.join(sorted(have or ())) or 'none'}): set hydra.launcher.partition (or LOOSESPEC_SLURM_PARTITION) "
                        "to one of them and launch again (it resumes)")
        return failed_why(steps(job_id)) if state == "FAILED" else state

    def ended(job_id: str) -> None:
        # Declared ended here: cancelled too, so that a requeue Slurm may still do (NODE_FAIL with
        # --requeue) never runs the point with no driver watching it.
        cancel(job_id)

    echo = echo or (lambda line: print(line, file=sys.stderr, flush=True))
    out: list[Any] = [None] * len(jobs)
    waiting = dict(enumerate(jobs))
    watches = {i: QueueWatch(job.job_id, held_grace_s, known_nodes) for i, job in waiting.items()}
    gone_since: dict[int, float] = {}  # first poll at which Slurm no longer had the job alive
    requeued: set[int] = set()
    silent_since: float | None = None  # squeue has not answered since (slurmctld down or restarting)
    while waiting:
        queue = query([job.job_id for job in waiting.values()])
        if queue is None and silent_since is None:
            silent_since = clock()
            log.warning("squeue does not answer (slurmctld down or restarting?): the jobs run on; asking again every "
                        f"{poll_s:g} s")
        elif queue is not None and silent_since is not None:
            log.info(f"squeue answers again after {clock() - silent_since:.0f} s")
            silent_since = None
        for i, job in list(waiting.items()):
            entry = None if queue is None else queue.get(job.job_id)
            state = None if queue is None else (entry.state if entry else "")
            if job.done():
                try:
                    out[i] = job.results()[0]
                    del waiting[i]
                    continue
                except (UncompletedJobError, FailedJobError) as err:
                    if state not in ALIVE:
                        last = [ln.strip() for ln in str(err).splitlines() if ln.strip()]
                        # COMPLETED without a result: submitit's own verdict (e.g. out of requeues) says why.
                        why = final(job.job_id, state) if state and state != "COMPLETED" else (last[-1] if last else type(err).__name__)
                        out[i] = Unfinished(ended_without_result(why, params or {}, str(err)))
                        if state and state != "COMPLETED":
                            ended(job.job_id)
                        del waiting[i]
                        continue
                    if i not in requeued:
                        log.info(f"job {job.job_id} was requeued by Slurm ({state}); waiting for it")
                        requeued.add(i)
                    job.watcher.clear()  # forget the cached final state of the first attempt
            elif state is not None and state not in ALIVE:
                # Its result file may be on its way: a second look one poll later decides.
                if i in gone_since and clock() - gone_since[i] >= poll_s:
                    out[i] = Unfinished(ended_without_result(final(job.job_id, state), params or {}) if state
                                        else "no record left in Slurm: cancelled while pending?")
                    if state:
                        ended(job.job_id)
                    del waiting[i]
                    continue
                gone_since.setdefault(i, clock())
            else:
                gone_since.pop(i, None)
            if entry is None or entry.state not in ALIVE:
                continue
            lines, verdict = watches[i].update(entry, clock())
            for level, line in lines:
                log.log(level, line)
            if verdict is not None:
                if verdict.kind in ("never", "stuck"):
                    # It would pend for ever (or until an admin acts): cancelled, so that nothing
                    # starts it behind the user's back.
                    cancel(job.job_id)
                    echo(f"error: {verdict.message} (job cancelled)")
                out[i] = Unfinished(verdict.message)
                del waiting[i]
        if waiting:
            sleep(poll_s)
    return out


def _samples_asked(cfg: Any) -> int:
    """The samples a point's config asks for where the count is exact (launch.jobs.folder_status's rule),
    else 0 (any finished folder counts as done)."""
    try:
        from loosespec_bench.tasks.sizing import set_size

        n, exact = set_size(cfg.dataset)
        return int(n) if exact else 0
    except Exception:  # noqa: BLE001 (a set whose size is unknown here)
        return 0


def _scancel(job_id: str) -> None:
    try:
        subprocess.run(["scancel", job_id], capture_output=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        pass


def _partitions() -> set[str] | None:
    from loosespec_bench.slurm import cluster_nodes

    nodes = cluster_nodes()
    return None if nodes is None else {n.partition for n in nodes}


class _Interrupted(Exception):
    pass


def _raise_interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


class CheckedSlurmLauncher(SlurmLauncher):
    def __call__(self, *args: Any, **kwargs: Any) -> JobReturn:
        """The point, inside its Slurm job (submitit calls the pickled launcher there, after it
        installed its signal handlers): what submitit's USR2 handler raises (out of requeues:
        UncompletedJobError) is kept even when the main thread was inside code that swallows
        it, and the decoding loop raises it at the next sample (loosespec_bench.interrupts)."""
        import signal

        from loosespec_bench import interrupts

        interrupts.keep_what_handlers_raise((signal.SIGUSR1, signal.SIGUSR2, signal.SIGTERM))
        return super().__call__(*args, **kwargs)

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

    def _run_folders(self, points: List[tuple[int, List[str]]]) -> List[Path | None]:
        """Each point's run folder, its config composed as the job will compose it (Hydra's
        load_sweep_config), named as app.run names it; None for a point it cannot name (the job
        itself reports a config it cannot run)."""
        from loosespec_bench.store.run_folder import run_dir

        assert self.config is not None
        out: List[Path | None] = []
        self._expected: dict[Path, int] = {}
        if self.hydra_context is None:  # no config loader (a launcher built by hand): nothing to classify
            return [None] * len(points)
        for _, overrides in points:
            try:
                cfg = self.hydra_context.config_loader.load_sweep_config(self.config, list(overrides))
                with open_dict(cfg):
                    del cfg["hydra"]  # as run_job hands the task its config (hydra.* needs the job's number)
                out.append(run_dir(cfg).resolve())
                self._expected[out[-1]] = _samples_asked(cfg)
            except Exception as err:  # noqa: BLE001
                log.warning(f"{' '.join(overrides)}: its run folder cannot be named here ({type(err).__name__}: {err})")
                out.append(None)
        return out

    def _record_jobs(self, folders: Sequence[Path | None], jobs: Sequence[Any]) -> None:
        """Which job runs which run folder (slurm.JOBS_INDEX), for `make status` and for a
        relaunch to attach to (submitit's folder recorded with it). Never stops a launch."""
        from loosespec_bench.slurm import record_jobs

        rows = []
        for folder, job in zip(folders, jobs):
            if folder is None:
                log.warning(f"job {job.job_id}: its run folder is not recorded for `make status`")
                continue
            rows.append((folder, job.job_id, str(job.paths._folder)))
        try:
            record_jobs(rows)
        except OSError as err:
            log.warning(f"the jobs' index for `make status` could not be written ({err})")

    def _classify(self, folders: Sequence[Path | None]) -> tuple[List[str], List[Any]]:
        """Each point's class (slurm.classify_point: done / running / pending / to run) and, for a
        running or pending one, the submitit job to attach to (None where its record predates
        attaching: it is then only left alone)."""
        from loosespec_bench.store.status import point_status
        from loosespec_bench.slurm import classify_point, query_queue, recorded_entries

        def finished(folder: Path) -> bool:
            # Done, and not short of the samples the point now asks (a later look's larger
            # dataset.limit extends a finished folder: launch.jobs.folder_status's "short").
            st = point_status(folder)
            return st.state == "done" and st.samples >= getattr(self, "_expected", {}).get(folder, 0)

        known = [f for f in folders if f is not None]
        done_of = {f: finished(f) for f in known}
        records = recorded_entries({f.parent.parent for f in known}) if known else {}
        ids = sorted({records[f]["job"] for f in known if f in records and not done_of[f]})
        queue = query_queue(ids) if ids and shutil.which("squeue") else ({} if not ids else None)
        classes, attach = [], []
        for folder in folders:
            rec = records.get(folder) if folder is not None else None
            done = folder is not None and done_of[folder]
            cls = classify_point(done, rec["job"] if rec else None, queue)
            job = None
            if cls in ("running", "pending") and rec is not None and rec.get("submitit"):
                import submitit

                job = submitit.SlurmJob(folder=rec["submitit"], job_id=rec["job"])
            classes.append(cls)
            attach.append(job)
        return classes, attach

    def _interrupted(self, points: List[tuple[int, List[str]]], folders: Sequence[Path | None], jobs: Sequence[Any],
                     sweep: str) -> None:
        """Ctrl-C / SIGTERM / SIGHUP of the driver: one line, no traceback, no sweep table (its
        points are still running), exit 130. The jobs are not cancelled."""
        from loosespec_bench.store.run_folder import RunFolder
        from loosespec_bench.slurm import ALIVE, interrupt_line, query_queue

        signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:
            finished = sum(1 for f in folders if f is not None and (f / RunFolder.SUMMARY).exists())
            ids = [j.job_id for j in jobs if j is not None]
            queue = query_queue(ids) if ids else {}
            alive = [i for i in ids if queue is None or (i in queue and queue[i].state in ALIVE)]
            arrays = {i.split("_")[0]: sweep for i in alive}
            line = interrupt_line(arrays, finished, len(points), len(alive))
        except BaseException as err:  # noqa: BLE001 (a second Ctrl-C: still one line)
            line = f"interrupted ({type(err).__name__}); the submitted jobs keep running: `squeue --me` lists them"
        print(line, file=sys.stderr, flush=True)
        sys.stdout.flush()
        logging.shutdown()
        os._exit(130)  # not Hydra's traceback nor the at-exit sweep table of points still running

    def _executor(self) -> Any:
        """submitit's AutoExecutor for the launcher's params (as hydra-submitit-launcher builds it)."""
        import submitit

        params = dict(self.params)
        params.pop("held_grace_min", None)  # the launcher's own, not an sbatch option
        init = {"folder": params.pop("submitit_folder")}
        if "max_num_timeout" in params:
            init[f"{self._EXECUTOR}_max_num_timeout"] = params.pop("max_num_timeout")
        executor = submitit.AutoExecutor(cluster=self._EXECUTOR, **init)
        shared = set(OmegaConf.structured(BaseQueueConf).keys())
        executor.update_parameters(**{k if k in shared else f"{self._EXECUTOR}_{k}": v for k, v in params.items()})
        return executor

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        from submitit.core.utils import FailedJobError

        from loosespec_bench.slurm import check_request, cluster_nodes, failed_point, held_grace_s, sbatch_refusal

        assert self.config is not None
        grace = held_grace_s(self.params.get("held_grace_min"), HELD_GRACE_MIN)
        if isinstance(grace, str):
            self._refuse(grace)
        nodes = cluster_nodes()
        if nodes:
            problem = check_request(self.params, nodes)
            if problem:
                self._refuse(problem)
        quiet_sacct()
        sweep_dir = Path(str(self.config.hydra.sweep.dir))
        points: List[tuple[int, List[str]]] = [(idx, list(ov)) for idx, ov in enumerate(job_overrides, start=initial_job_idx)]
        folders = self._run_folders(points)
        classes, attached = self._classify(folders)
        label = lambda idx, ov: f"#{idx} {' '.join(filter_overrides(ov))}"  # noqa: E731
        todo: List[int] = []
        watch: List[tuple[int, Any]] = []  # (point's position, job) of the jobs this driver awaits
        for k, ((idx, ov), cls, job) in enumerate(zip(points, classes, attached)):
            if cls == "done":
                log.info(f"\t{label(idx, ov)}: done (summary.json in {folders[k]}): not submitted")
            elif cls in ("running", "pending"):
                if job is not None:
                    log.info(f"\t{label(idx, ov)}: {cls} in Slurm as job {job.job_id}: attached, not submitted again")
                    watch.append((k, job))
                else:
                    log.info(f"\t{label(idx, ov)}: {cls} in Slurm (its job's record predates attaching): not submitted; "
                             "`make status` follows it")
            else:
                todo.append(k)
                log.info(f"\t{label(idx, ov)}")
        counts = {c: classes.count(c) for c in ("done", "running", "pending", "to run")}
        log.info(f"{len(points)} points: {counts['done']} done, {counts['running']} running, {counts['pending']} pending in Slurm, "
                 f"{counts['to run']} to run")
        old_handlers = {sig: signal.signal(sig, _raise_interrupt) for sig in (signal.SIGTERM, signal.SIGHUP)}
        new_jobs: List[Any] = []
        try:
            if todo:
                executor = self._executor()
                sweep_dir.mkdir(parents=True, exist_ok=True)
                log.info(f"Submitit 'slurm' sweep output dir : {sweep_dir}")
                job_params = [(points[k][1], "hydra.sweep.dir", points[k][0], f"job_id_for_{points[k][0]}", Singleton.get_state())
                              for k in todo]
                try:
                    new_jobs = executor.map_array(self, *zip(*job_params))
                except FailedJobError as err:
                    self._refuse(sbatch_refusal(str(err)))
                log.info(f"job array {new_jobs[0].job_id.split('_')[0]}: {len(new_jobs)} jobs")
                self._record_jobs([folders[k] for k in todo], new_jobs)
                watch += list(zip(todo, new_jobs))
            watch.sort(key=lambda kj: kj[0])
            results = await_jobs([j for _, j in watch], held_grace_s=float(grace),
                                 known_nodes={n.name for n in nodes} if nodes else None, params=dict(self.params))
        except KeyboardInterrupt:
            self._interrupted(points, folders, [j for _, j in watch] + [j for j in new_jobs if all(j is not w for _, w in watch)],
                              str(OmegaConf.select(self.config, "experiment_name", default=None) or sweep_dir.name))
            raise  # not reached: _interrupted exits
        finally:
            for sig, handler in old_handlers.items():
                signal.signal(sig, handler)
        returns: List[JobReturn] = []
        missing: List[str] = []
        for (k, job), result in zip(watch, results):
            idx, overrides = points[k]
            if isinstance(result, Unfinished):
                missing.append(f"{label(idx, overrides)} (job {job.job_id}: {result})")
            elif result.status == JobStatus.FAILED and isinstance(result._return_value, BaseException):
                # The job ran and its point raised (out of requeues, a full disk, a bug): one line
                # here, instead of Hydra's traceback of the first failed point in the driver.
                why = failed_point(result._return_value, dict(self.params))
                missing.append(f"{label(idx, overrides)} (job {job.job_id}: {why})")
            else:
                returns.append(result)
        if missing:
            print(f"error: {len(missing)} of {len(points)} points ended without a result: " + "; ".join(missing)
                  + ". Their run folders keep the finished samples; `make status` lists them; launching again resumes them",
                  file=sys.stderr, flush=True)
            raise SystemExit(1)
        return returns
