"""A replication plan's jobs (the points of its -m sweeps) and where each stands.

Job and Sweep are what `python -m loosespec_bench.plan` builds from the sweeps Hydra would run
(plan.build_plan) and what its launch (launch/driver.py) runs; the status here reads each job's
run folder (store/status.py) and, for an unfinished one, the Slurm job the launcher recorded for
it (slurm.py): plan's `status` mode prints format_status.
"""

from __future__ import annotations

import shutil
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Sequence

from ..store.status import STATES, PointStatus, format_age, point_status


@dataclass
class Job:
    """One point of a sweep: its run folder, its estimated size and hours (plan.estimate), and the
    sweep that runs it where several need it (owner)."""

    sweep: str                  # the experiment (one -m sweep = one job array)
    index: int                  # hydra.job.num within the sweep
    overrides: list[str]        # the values that vary across the sweep
    folder: Path                # results/<experiment_name>/<run id>
    gpus: int
    samples: int
    samples_exact: bool
    tokens: float               # estimated new tokens (method side)
    hours: float                # estimated wall-clock hours of the job
    paired: bool
    method: str
    pair: str
    dataset: str
    load_h: float = 0.0         # of `hours`: loading the models (does not grow with samples)
    store_h: float = 0.0        # baseline=shared: the store's target-alone pass outside the timing subset (before sharing)
    store: str = ""             # baseline=shared: the store's key digest (points with the same one share it)
    settings: dict[str, Any] = field(default_factory=dict)
    status: PointStatus | None = None
    run_id: str = ""
    owner: "Job | None" = None  # the job of an earlier sweep that runs this configuration (None: this one runs it)
    needed_by: list[str] = field(default_factory=list)  # every sweep of the plan that needs this configuration (owners)
    models: list[tuple[str, str]] = field(default_factory=list)  # (hub id, role) the point loads (launch/dry_run.models_of)
    set_size: int = 0           # the data set's full size (0: unknown offline), whatever dataset.limit says

    @property
    def launched(self) -> bool:
        return self.owner is None


@dataclass
class Sweep:
    """One `-m` sweep (one Slurm job array): its command, its launcher's request, its jobs."""

    experiment: str
    command: list[str]
    launcher: str
    gpus: int
    timeout_min: float | None
    max_requeue: int
    jobs: list[Job] = field(default_factory=list)
    request: str = ""           # what one job asks a cluster launcher for besides GPUs (CPUs, memory, partition)
    params: dict[str, Any] = field(default_factory=dict)  # the launcher's settings (hydra.launcher), for the dry run's cluster check

    def settings(self) -> dict[str, Any]:
        """The settings the jobs of the sweep share ('swept' where they differ; a key that only
        some jobs have, e.g. a rule's parameter in a sweep over rules, counts among those)."""
        keys = dict.fromkeys(k for j in self.jobs for k in j.settings)
        out = {}
        for k in keys:
            vals = {repr(j.settings[k]): j.settings[k] for j in self.jobs if k in j.settings}
            out[k] = next(iter(vals.values())) if len(vals) == 1 else "swept"
        return out


def slurm_states(sweeps: Sequence[Sweep]) -> None:
    """Each unfinished point's Slurm job, state and reason (one squeue call), where the Slurm
    launcher recorded a job for its folder (slurm.JOBS_INDEX) and squeue answers."""
    from ..slurm import query_queue, recorded_jobs, status_line

    todo = [j for s in sweeps for j in s.jobs if j.status and j.status.state != "done"]
    if not todo:
        return
    jobs = recorded_jobs({j.folder.parent.parent.resolve() for j in todo})
    wanted = [(j, jobs[j.folder.resolve()]) for j in todo if j.folder.resolve() in jobs]
    queue = query_queue(sorted({job_id for _, job_id in wanted})) if wanted and shutil.which("squeue") else None
    if queue is None:
        return
    for j, job_id in wanted:
        assert j.status is not None
        j.status.slurm = status_line(job_id, queue.get(job_id))


def folder_status(job: Job, folder: Path) -> PointStatus:
    """`folder`'s state for this job: a finished folder holding fewer samples than the job asks
    (its size known exactly) is "short", not done: a later planned look raises dataset.limit,
    which the run id leaves out, so the launch extends that folder instead of skipping it."""
    st = point_status(folder)
    if st.state == "done" and job.samples_exact and job.samples and st.samples < job.samples:
        return replace(st, state="short")
    return st


def job_status(job: Job) -> PointStatus:
    """The point's state in the folder that runs it; where that is not done, a finished run of the
    same configuration in another experiment's folder (e.g. from an earlier plan) counts."""
    st = folder_status(job, job.folder)
    if st.state != "done":
        for other in sorted(job.folder.parent.parent.glob(f"*/{job.run_id}")):
            if other != job.folder and (other / "summary.json").exists():
                found = folder_status(job, other)
                if found.state == "done" or st.state == "pending":
                    return found
    return st


def format_status(sweeps: Sequence[Sweep], title: str = "") -> str:
    lines = [f"== status{': ' + title if title else ''} =="]
    total: Counter[str] = Counter()
    for s in sweeps:
        counts = Counter(j.status.state for j in s.jobs if j.status)
        total.update(counts)
        lines.append("")
        lines.append(f"[{s.experiment}] " + ", ".join(f"{counts.get(k, 0)} {k}" for k in STATES))
        for j in s.jobs:
            st = j.status
            assert st is not None
            point = " ".join(j.overrides) or "(single point)"
            extra = "" if j.owner is None else f"(shared: [{j.owner.sweep}] #{j.owner.index}) "
            if st.state == "running":
                extra += f"{st.samples}/{j.samples} samples, last write {format_age(st.age_s)} ago"
            elif st.state == "failed":
                extra += f"{st.samples}/{j.samples} samples; {st.error}"
            elif st.state == "done":
                extra += f"{st.samples} samples"
            elif st.state == "short":
                extra += f"finished at {st.samples}/{j.samples} samples: a launch extends it"
            lines.append(f"  {j.index:>3}  {st.state:<8} {point:<48} {extra}")
            if st.slurm:
                lines.append(f"       {st.slurm}")
            if st.state in ("running", "failed"):
                lines.append(f"       {st.folder}")
    lines.append("")
    lines.append("total: " + ", ".join(f"{total.get(k, 0)} {k}" for k in STATES))
    lines.append("running = a folder without summary.json: still running, or killed (see its last write); rerunning resumes it")
    return "\n".join(lines)
