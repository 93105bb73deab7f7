"""loosespec_bench.slurm (a request checked against the cluster) and, marked `slurm`, the cluster
path end to end on the local cluster (slurm/local_cluster.sh: partition cpu, nodes n1 and n2 on
this host; `make slurm-local` as root on Debian, `.ci/run` starts it where it can):

  * a 3-point tiny-pair sweep through `make replicate-cpu LAUNCHER=slurm`: one job array, every run
    folder complete, exactly the folders the dry-run plan lists, `make status-cpu` says done;
  * faults on one tiny-pair run (fp32, greedy), each resumed from its run folder with no sample
    lost or duplicated and tokens identical to an uninterrupted run: `scontrol requeue` mid-run,
    the time limit hit (timeout_min=3, signal_delay_s=45, the limit brought forward), node n1 lost mid-job (requeued to n2);
  * `scancel` of one array task: the driver and status name the point, a relaunch runs only it;
  * requests the cluster cannot meet: one `error:` line naming the setting, no folder left;
  * issue 49's faults (docs/cluster.md): the job's node marked DOWN while its slurmd lives; a real
    step that outlives the requeue (its node cut off: slurmd stopped) while the requeued job runs
    on the other node (the lock makes it wait); `scontrol requeuehold` (the release line within a
    minute, Unfinished after held_grace_min, finished when released); preemption by a
    higher-priority partition (PreemptMode=REQUEUE); slurmctld restarted mid-run; the node drained
    mid-run; the requeue limit reached (max_num_timeout=0); a full results disk (a tmpfs); an
    out-of-memory kill (task/cgroup; skipped, saying why, where the cluster cannot enforce --mem).
    The last three end in one `error:` line naming what to do, and the same command again resumes.

Unmarked: the launcher's reading of squeue (held, pending reasons, reasons that never clear) with
faked squeue answers, jobs and clock, the status line, and the one line for a job that ended
without a result (out of memory from its steps, out of requeues, a point that raised).

Without a cluster the marked tests skip, saying how to start one.

Two processes at once (scripts/run_tests.sh): the tests that fault a node (or preempt on it) run on
partition cpu (n1, n2) one after another; those marked `slurm_side` run on partition side (n3, n4),
which no fault reaches, in a second process beside them. The slurmctld restart, which every job
and command sees, waits until it has the cluster alone (a lock each test holds a share of).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import logging
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from loosespec_bench.safe_files import atomic_write_text, open_fd, read_text
from loosespec_bench.slurm import (Node, QueueEntry, QueueWatch, check_request, failed_why, is_held, job_steps, never_clears, parse_sinfo,
                                   parse_squeue, query_queue, sbatch_refusal)

from .conftest import REPO, shared_data_dir

# ---------------------------------------------------------------------------- request checks

SINFO = "n1|cpu*|(null)|22899|2\nn2|cpu*|(null)|22899|2\ng1|gpu|gpu:h100:4(S:0-1)|515000|256\ng2|gpu|gpu:h100:8,shard:16|1030000|128\n"


def test_parse_sinfo_reads_partitions_gpus_memory_and_cpus():
    nodes = parse_sinfo(SINFO + "garbage line\n")
    assert nodes[0] == Node("n1", "cpu", True, 0, 22899, 2)
    assert [(n.name, n.gpus) for n in nodes[2:]] == [("g1", 4), ("g2", 8)]
    assert not nodes[2].default


@pytest.mark.parametrize(
    "params, expect",
    [
        ({"partition": None, "gpus_per_node": 0, "mem_gb": 8, "cpus_per_task": 2}, None),
        ({"partition": "gpu", "gpus_per_node": 8, "mem_gb": 256, "cpus_per_task": 32}, None),
        ({"partition": "cpu,gpu", "gpus_per_node": 4}, None),  # a list: any of them may run it
        ({"partition": None, "gpus_per_node": 1}, "hydra.launcher.gpus_per_node=1: partition cpu has no GPUs"),
        ({"partition": "gpu", "gpus_per_node": 16}, "at most 8 GPUs"),
        ({"partition": "nope", "gpus_per_node": 0}, "hydra.launcher.partition=nope: the cluster has no partition nope (it has: cpu, gpu)"),
        ({"partition": "cpu", "gpus_per_node": 0, "mem_gb": 64}, "hydra.launcher.mem_gb=64: the nodes of partition cpu have at most 22 GB"),
        ({"partition": "cpu", "gpus_per_node": 0, "cpus_per_task": 8}, "hydra.launcher.cpus_per_task=8: the nodes of partition cpu have at most 2 CPUs"),
        # each fits some node, no node fits all: 8 GPUs only on g2 (128 CPUs), 200 CPUs only on g1
        ({"partition": "gpu", "gpus_per_node": 8, "mem_gb": 100, "cpus_per_task": 200}, "no node of partition gpu has"),
    ],
    ids=["cpu-job-fits", "gpu-job-fits", "partition-list", "gpu-on-cpu-partition", "too-many-gpus", "unknown-partition",
         "too-much-memory", "too-many-cpus", "no-single-node"],
)
def test_check_request_names_the_setting_no_node_can_meet(params, expect):
    problem = check_request(params, parse_sinfo(SINFO), env={})
    assert problem == expect if expect is None else expect in problem


def test_check_request_takes_sbatch_partition_from_the_environment():
    assert "no partition gpux" in check_request({"gpus_per_node": 0}, parse_sinfo(SINFO), env={"SBATCH_PARTITION": "gpux"})
    assert check_request({"gpus_per_node": 0}, parse_sinfo(SINFO.replace("cpu*", "cpu")), env={}).startswith(
        "hydra.launcher.partition is not set and the cluster has no default partition")


@pytest.mark.parametrize(
    "stderr, setting",
    [
        ("sbatch: error: Invalid generic resource (gres) specification\n", "hydra.launcher.gpus_per_node"),
        ("sbatch: error: invalid partition specified: gpu\nsbatch: error: Batch job submission failed: Invalid partition name specified",
         "hydra.launcher.partition"),
        ("sbatch: error: Batch job submission failed: Invalid account or account/partition combination specified", "hydra.launcher.account"),
        ("sbatch: error: Something new\n", "the hydra.launcher settings"),
    ],
)
def test_sbatch_refusal_is_one_line_naming_the_setting(stderr, setting):
    line = sbatch_refusal(stderr)
    assert "\n" not in line and line.startswith("sbatch refused the job array: ") and setting in line


# ---------------------------------------------------------------------------- why a job waits


def test_parse_squeue_reads_state_reason_priority_per_array_task():
    text = "12_0|RUNNING|None|4294901759\n12_1|PENDING|launch failed requeued held|0\n13|PENDING|Resources|100\nbad\n"
    q = parse_squeue(text)
    assert q["12_0"] == QueueEntry("12_0", "RUNNING", "None", 4294901759)
    assert q["12_1"].reason == "launch failed requeued held" and q["12_1"].priority == 0
    assert set(q) == {"12_0", "12_1", "13"}


@pytest.mark.parametrize(
    "state, reason, prio, held",
    [
        ("PENDING", "launch failed requeued held", 0, True),   # the duplicate-launch requeue of issue 49
        ("PENDING", "JobHeldAdmin", 0, True),                   # scontrol hold
        ("PENDING", "JobHeldUser", 0, True),                    # scontrol hold by the user / sbatch -H
        ("PENDING", "Resources", 0, True),                      # priority 0 alone: nothing starts it
        ("REQUEUE_HOLD", "None", 5, True),
        ("PENDING", "Resources", 17, False),
        ("PENDING", "BeginTime", 17, False),
        ("RUNNING", "JobHeldAdmin", 0, False),                  # a hold on a running job stops nothing
    ],
)
def test_is_held(state, reason, prio, held):
    assert is_held(QueueEntry("5", state, reason, prio)) is held


@pytest.mark.parametrize(
    "reason, expect",
    [
        ("BadConstraints", "hydra.launcher.constraint"),
        ("PartitionConfig", "hydra.launcher.partition"),
        ("InvalidAccount", "hydra.launcher.account"),
        ("ReqNodeNotAvail, UnavailableNodes:n[3-4]", "node n3, n4, which the cluster does not have"),
        ("ReqNodeNotAvail, UnavailableNodes:n1", None),  # n1 exists (down or drained): it may come back
        ("Resources", None),
        ("PartitionTimeLimit", None),  # logged with its hint; an admin may raise the limit
    ],
)
def test_never_clears_names_what_to_change(reason, expect):
    why = never_clears(QueueEntry("5", "PENDING", reason, 10), known_nodes={"n1", "n2"})
    assert why is None if expect is None else expect in why


def test_queue_watch_tells_each_reason_once_and_a_held_job_at_once_with_its_release_command():
    w = QueueWatch("12_1", held_grace_s=300, known_nodes={"n1", "n2"})
    said: list[str] = []

    def step(state: str, reason: str, prio: int, now: float):
        lines, verdict = w.update(QueueEntry("12_1", state, reason, prio), now)
        said.extend(text for _, text in lines)
        return verdict

    assert step("PENDING", "Priority", 10, 0) is None
    assert step("PENDING", "Priority", 10, 2) is None  # the same reason: not told again
    assert step("PENDING", "Resources", 10, 4) is None
    assert step("RUNNING", "None", 10, 6) is None
    assert step("PENDING", "launch failed requeued held", 0, 8) is None
    assert said[:3] == ["job 12_1: PENDING (Priority: other jobs come first)", "job 12_1: PENDING (Resources: waiting for free resources)",
                        "job 12_1: RUNNING"]
    assert said[3] == ("job 12_1 is held by Slurm (launch failed requeued held, priority 0): nothing starts it until "
                       "`scontrol release 12_1`")
    assert step("PENDING", "launch failed requeued held", 0, 8 + 299) is None and len(said) == 4
    verdict = step("PENDING", "launch failed requeued held", 0, 8 + 300)
    assert verdict is not None and verdict.kind == "held"
    assert "scontrol release 12_1" in verdict.message and "held_grace_min=5" in verdict.message


def test_queue_watch_a_release_restarts_the_grace_and_is_told():
    w = QueueWatch("7", held_grace_s=60)
    w.update(QueueEntry("7", "PENDING", "JobHeldAdmin", 0), 0)
    lines, _ = w.update(QueueEntry("7", "PENDING", "Priority", 3), 50)
    assert lines == [(20, "job 7 released: PENDING (Priority: other jobs come first)")]
    w.update(QueueEntry("7", "PENDING", "JobHeldAdmin", 0), 55)
    assert w.update(QueueEntry("7", "PENDING", "JobHeldAdmin", 0), 100)[1] is None  # 45 s of this hold
    assert w.update(QueueEntry("7", "PENDING", "JobHeldAdmin", 0), 115)[1].kind == "held"


class _FakeJob:
    """A submitit job as await_jobs sees it: done() / results() from a script of sacct's answers."""

    def __init__(self, job_id: str, done_at: float | None = None, result: object = "ok") -> None:
        self.job_id, self.done_at, self.result, self.now = job_id, done_at, result, 0.0
        self.watcher = type("W", (), {"clear": lambda _self: None})()

    def done(self) -> bool:
        return self.done_at is not None and self.now >= self.done_at

    def results(self) -> list:
        if isinstance(self.result, Exception):
            raise self.result
        return [self.result]


def _await(jobs, script, grace_s=120.0, known=None, cancelled=None, partitions=None, params=None):
    """await_jobs over a fake clock; script(now) -> squeue's answer {job id: QueueEntry}; the jobs
    it cancels go to `cancelled` (never a real scancel: a local cluster may have jobs of these ids)."""
    from hydra_plugins.loosespec_slurm_launcher.slurm_launcher import await_jobs

    clock = [0.0]
    echoed: list[str] = []

    def sleep(s: float) -> None:
        clock[0] += s
        for j in jobs:
            j.now = clock[0]

    out = await_jobs(jobs, held_grace_s=grace_s, known_nodes=known, query=lambda ids: script(clock[0]), clock=lambda: clock[0],
                     sleep=sleep, echo=echoed.append, cancel=(cancelled if cancelled is not None else []).append,
                     partitions=partitions or (lambda: None), params=params)
    return out, clock[0], echoed


def test_await_jobs_tells_a_held_point_at_once_while_another_runs_and_ends_it_after_the_grace(caplog, monkeypatch):
    """Point 0 runs for 10 min; point 1 is held from the start. The hold is told at the first poll
    (not after point 0 ends), point 1 ends Unfinished after the 2 min grace with the release line,
    point 0's result comes back."""
    from hydra_plugins.loosespec_slurm_launcher.slurm_launcher import Unfinished

    jobs = [_FakeJob("12_0", done_at=600), _FakeJob("12_1")]

    def squeue(now: float) -> dict:
        return {"12_0": QueueEntry("12_0", "RUNNING" if now < 600 else "COMPLETED", "None", 1),
                "12_1": QueueEntry("12_1", "PENDING", "launch failed requeued held", 0)}

    with caplog.at_level(logging.INFO, logger="hydra_plugins.loosespec_slurm_launcher.slurm_launcher"):
        out, end, echoed = _await(jobs, squeue)
    held = [r for r in caplog.records if "is held" in r.getMessage()]
    assert len(held) == 1 and held[0].levelno == logging.WARNING and "`scontrol release 12_1`" in held[0].getMessage()
    assert out[0] == "ok" and isinstance(out[1], Unfinished)
    assert "scontrol release 12_1" in str(out[1]) and "held_grace_min=2" in str(out[1])
    assert 600 <= end < 605 and not echoed


def test_await_jobs_ends_a_point_that_can_never_start_with_one_error_line(monkeypatch):
    from hydra_plugins.loosespec_slurm_launcher import slurm_launcher as sl

    cancelled: list[str] = []
    jobs = [_FakeJob("9")]
    out, end, echoed = _await(jobs, lambda now: {"9": QueueEntry("9", "PENDING", "BadConstraints", 10)}, cancelled=cancelled)
    assert isinstance(out[0], sl.Unfinished) and end == 0
    assert len(echoed) == 1 and echoed[0].startswith("error: job 9 can never start: BadConstraints") and "hydra.launcher.constraint" in echoed[0]
    assert cancelled == ["9"]


def test_await_jobs_waits_through_a_requeue_and_names_a_job_gone_from_slurm():
    from submitit.core.utils import UncompletedJobError

    from hydra_plugins.loosespec_slurm_launcher.slurm_launcher import Unfinished

    # Job 3: sacct says it ended without a result while squeue has it PENDING again (requeued), then it finishes.
    requeued = _FakeJob("3", done_at=0, result=UncompletedJobError("node failure"))
    gone = _FakeJob("4")  # cancelled while pending: no record in squeue, nothing in sacct

    def squeue(now: float) -> dict:
        if now >= 20:
            requeued.result = "second attempt"
        return {"3": QueueEntry("3", "PENDING" if now < 10 else "RUNNING", "BeginTime", 5)}

    out, end, _ = _await([requeued, gone], squeue)
    assert out[0] == "second attempt" and 20 <= end < 23
    assert isinstance(out[1], Unfinished) and "no record left in Slurm" in str(out[1])


def test_await_jobs_says_once_that_squeue_does_not_answer_and_waits_on(caplog):
    job = _FakeJob("6", done_at=30)

    def squeue(now: float):
        return None if 4 <= now < 20 else {"6": QueueEntry("6", "RUNNING", "None", 1)}

    with caplog.at_level(logging.INFO, logger="hydra_plugins.loosespec_slurm_launcher.slurm_launcher"):
        out, end, _ = _await([job], squeue)
    said = [r.getMessage() for r in caplog.records]
    assert out == ["ok"] and sum("squeue does not answer" in m for m in said) == 1
    assert any(m.startswith("squeue answers again after 16 s") for m in said)


def test_await_jobs_names_the_memory_setting_of_a_job_killed_out_of_memory():
    from submitit.core.utils import UncompletedJobError

    from hydra_plugins.loosespec_slurm_launcher.slurm_launcher import await_jobs

    job = _FakeJob("5", done_at=0, result=UncompletedJobError("job 5 has not produced any output (state: OUT_OF_MEMORY)"))
    out = await_jobs([job], held_grace_s=60, cancel=lambda j: None, params={"mem_gb": 2}, query=lambda ids: {"5": QueueEntry("5", "OUT_OF_MEMORY", "OutOfMemory", 1)},
                     sleep=lambda s: None)
    assert str(out[0]).startswith("OUT_OF_MEMORY:") and "raise hydra.launcher.mem_gb (now 2)" in str(out[0])


@pytest.mark.parametrize(
    "steps, expect",
    [
        ([("FAILED", "1:0"), ("OUT_OF_MEMORY", "0:125")], "OUT_OF_MEMORY: the job used more memory than it asked for; raise hydra.launcher.mem_gb (now 2)"),
        ([("FAILED", "1:0"), ("FAILED", "0:9")], "KILLED: its step died of SIGKILL with no out-of-memory event seen by Slurm"),
        ([("FAILED", "1:0"), ("FAILED", "1:0")], "FAILED"),
        (None, "FAILED"),  # no accounting: what squeue said
    ],
    ids=["oom-step", "sigkill-step", "plain-failure", "no-sacct"],
)
def test_await_jobs_reads_a_failed_jobs_steps_for_an_out_of_memory_kill(steps, expect):
    """Slurm 22.05 marks the OOM-killed step OUT_OF_MEMORY and the job FAILED (srun's exit code):
    the steps decide, and both memory cases name hydra.launcher.mem_gb."""
    from submitit.core.utils import UncompletedJobError

    from hydra_plugins.loosespec_slurm_launcher.slurm_launcher import await_jobs

    job = _FakeJob("5", done_at=0, result=UncompletedJobError("job 5 has not produced any output (state: FAILED)"))
    out = await_jobs([job], held_grace_s=60, cancel=lambda j: None, params={"mem_gb": 2}, query=lambda ids: {"5": QueueEntry("5", "FAILED", "NonZeroExitCode", 1)},
                     steps=lambda j: steps, sleep=lambda s: None)
    assert str(out[0]).startswith(expect)
    assert ("hydra.launcher.mem_gb (now 2)" in str(out[0])) is (expect != "FAILED")


def test_await_jobs_names_max_num_timeout_when_submitit_runs_out_of_requeues():
    """submitit's verdict when the time runs out once more than max_num_timeout allows: it raises in
    the job (Slurm: FAILED), and the line names the two settings, not just FAILED."""
    from submitit.core.utils import FailedJobError

    from hydra_plugins.loosespec_slurm_launcher.slurm_launcher import await_jobs

    trace = ("Job (task=0) failed during processing with trace:\n----------------------\nTraceback (most recent call last):\n"
             "submitit.core.utils.UncompletedJobError: Job not requeued because: timed-out too many times.\n")
    job = _FakeJob("8", done_at=0, result=FailedJobError(trace))
    out = await_jobs([job], held_grace_s=60, cancel=lambda j: None, params={"timeout_min": 3, "max_num_timeout": 0},
                     query=lambda ids: {"8": QueueEntry("8", "FAILED", "NonZeroExitCode", 1)}, steps=lambda j: [("FAILED", "1:0")],
                     sleep=lambda s: None)
    assert str(out[0]) == ("TIMEOUT: it hit hydra.launcher.timeout_min=3 more often than hydra.launcher.max_num_timeout=0 requeues allow; "
                           "raise either and launch again (it resumes)")


def test_failed_point_is_one_line_saying_what_to_do():
    from submitit.core.utils import UncompletedJobError

    from loosespec_bench.run.app import DiskError
    from loosespec_bench.slurm import failed_point

    params = {"timeout_min": 3, "max_num_timeout": 0}
    assert failed_point(UncompletedJobError("Job not requeued because: timed-out too many times."), params).startswith(
        "TIMEOUT: it hit hydra.launcher.timeout_min=3 more often than hydra.launcher.max_num_timeout=0")
    disk = DiskError("cannot write /r/x (No space left on device); the 3 finished sample(s) are kept in /r/x: free space there")
    assert failed_point(disk, params) == str(disk)
    assert failed_point(RuntimeError("boom\nmore"), params) == (
        "RuntimeError: boom (the traceback is in the run folder's error.txt and the job's log)")


@pytest.mark.parametrize("value, expect", [(None, 300.0), (0.5, 30.0), ("2", 120.0), (0, 0.0), (-1, "a number >= 0"), ("soon", "a number >= 0"),
                                            (float("nan"), "a number >= 0"), (float("inf"), "a number >= 0")])
def test_held_grace_min_is_minutes_or_one_message_naming_the_setting(value, expect):
    from loosespec_bench.slurm import held_grace_s

    got = held_grace_s(value, 5.0)
    assert got == expect if isinstance(expect, float) else (isinstance(got, str) and got.startswith(f"hydra.launcher.held_grace_min={value}: ") and expect in got)


def test_query_queue_reads_a_faked_squeue(tmp_path, monkeypatch):
    fake = tmp_path / "squeue"
    fake.write_text("#!/bin/sh\necho \"$@\" > " + str(tmp_path / "args") + "\nprintf '12_1|PENDING|JobHeldAdmin|0\\n13|RUNNING|None|9\\n'\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    q = query_queue(["12_1", "12_0", "13"])
    assert q is not None and q["12_1"].reason == "JobHeldAdmin" and q["13"].state == "RUNNING"
    assert (tmp_path / "args").read_text().split() == ["-h", "-r", "-t", "all", "-j", "12,13", "-o", "%i|%T|%r|%Q"]


def test_the_jobs_index_maps_each_run_folder_to_its_last_job_and_status_shows_state_and_reason(tmp_path):
    from loosespec_bench.plan import Job, Sweep, format_status
    from loosespec_bench.slurm import record_jobs, recorded_jobs, status_line
    from loosespec_bench.store.status import point_status

    a, b = tmp_path / "exp" / "run_a", tmp_path / "exp" / "run_b"
    record_jobs([(a, "12_0"), (b, "12_1")])
    record_jobs([(b, "15")])  # b relaunched
    (tmp_path / "_launch" / "slurm_jobs.jsonl").open("a").write("not json\n")
    assert recorded_jobs({tmp_path}) == {a.resolve(): "12_0", b.resolve(): "15"}
    held = status_line("15", QueueEntry("15", "PENDING", "launch failed requeued held", 0))
    assert held == "Slurm job 15 HELD (launch failed requeued held, priority 0): `scontrol release 15`"
    assert status_line("12_0", QueueEntry("12_0", "PENDING", "Resources", 9)) == "Slurm job 12_0 PENDING (Resources: waiting for free resources)"
    assert "can never start: BadConstraints" in status_line("3", QueueEntry("3", "PENDING", "BadConstraints", 9))

    b.mkdir(parents=True)
    (b / "samples.jsonl").write_text('{"id": "x"}\n' * 4)
    st = point_status(b)
    st.slurm = held
    job = Job(sweep="exp", index=1, overrides=["drafter.k=15"], folder=b, gpus=0, samples=60, samples_exact=True, tokens=0.0,
              hours=0.0, paired=False, method="spd", pair="tiny", dataset="mgsm", status=st)
    text = format_status([Sweep(experiment="exp", command=[], launcher="CheckedSlurmLauncher", gpus=0, timeout_min=60,
                                max_requeue=0, request="", jobs=[job])])
    row = text.splitlines().index(next(ln for ln in text.splitlines() if "drafter.k=15" in ln))
    assert "4/60 samples" in text.splitlines()[row] and text.splitlines()[row + 1].strip() == held


# ---------------------------------------------------------------------------- the local cluster

def _cluster_up() -> str | None:
    """None when the local cluster answers (nodes n1 and n2 in partition cpu), else why not."""
    if shutil.which("sinfo") is None:
        return "no Slurm here (sinfo not found)"
    try:
        out = subprocess.run(["sinfo", "-h", "-N", "-p", "cpu", "-o", "%N"], capture_output=True, text=True, timeout=20)
    except subprocess.TimeoutExpired:
        return "sinfo does not answer"
    if out.returncode != 0 or {"n1", "n2"} - set(out.stdout.split()):
        return "the local cluster (partition cpu of n1, n2) is not up"
    if os.geteuid() != 0:
        return "the fault tests stop a node's slurmd: they need root"
    return None


def _side_partition() -> str | None:
    """'side' where the local cluster has it (nodes n3 and n4, which no test faults), else None (a
    cluster started before slurm/local_cluster.sh made it: every test then runs on cpu, one at a time)."""
    if _WHY_NOT is not None:
        return None
    try:
        out = subprocess.run(["sinfo", "-h", "-N", "-p", "side", "-o", "%N"], capture_output=True, text=True, timeout=20)
    except subprocess.TimeoutExpired:
        return None
    return "side" if out.returncode == 0 and {"n3", "n4"} <= set(out.stdout.split()) else None


_WHY_NOT = _cluster_up()
_SKIP = pytest.mark.skipif(_WHY_NOT is not None, reason=f"{_WHY_NOT}; `make slurm-local` (root, Debian) starts a local cluster")
SIDE = _side_partition()


def slurm(test):
    """Marked `slurm` (so `make test` can run these beside the rest: they mostly wait on Slurm)
    and skipped, saying why, when no local cluster answers."""
    return pytest.mark.slurm(_SKIP(test))


def side(test):
    """A slurm test that faults no node and whose jobs run on partition side (n3, n4) when the
    cluster has it: `make test` runs these in a second process beside the node faults on cpu (n1,
    n2), which cannot reach their jobs. Tests that share a job name (lsb-fly_ablation_k: the
    sweep, scancel, Ctrl-C and partition tests) must stay on the same side: one process runs them
    one after another."""
    return pytest.mark.slurm_side(slurm(test))


# Two slurm test processes share one cluster (scripts/run_tests.sh). Each test holds a share of it
# for its whole run; the slurmctld restart takes all of it, since no process can sbatch, squeue or
# scontrol while the controller is down. Without partition side every test takes all of it: the
# node faults would strike the other process's jobs. A gate before the shared lock lets a waiting
# exclusive test in ahead of the next shared ones (the other process never leaves a gap to take).
LOCKS = Path(tempfile.gettempdir())
CLUSTER_GATE, CLUSTER_LOCK = "loosespec-slurm-tests.gate", "loosespec-slurm-tests.lock"
# A test holds the cluster at most this long (the fault tests' own limits: 300 + 600 s).
CLUSTER_WAIT_S = 1800.0
_TURN: dict[str, str | None] = {"partition": None}


def _flock(name: str, mode: int, what: str) -> int:
    """The lock file's descriptor, locked in `mode` (fcntl.LOCK_SH / LOCK_EX) within CLUSTER_WAIT_S."""
    fd = open_fd(LOCKS / name, os.O_RDWR | os.O_CREAT)
    end = time.monotonic() + CLUSTER_WAIT_S
    while True:
        try:
            fcntl.flock(fd, mode | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            if time.monotonic() > end:
                os.close(fd)
                raise AssertionError(f"timed out after {CLUSTER_WAIT_S:.0f} s waiting for {what} ({LOCKS / name})") from None
            time.sleep(0.5)


@contextlib.contextmanager
def _cluster_share(exclusive: bool):
    gate = _flock(CLUSTER_GATE, fcntl.LOCK_EX, "the cluster's gate")
    try:
        lock = _flock(CLUSTER_LOCK, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH,
                      "the whole cluster" if exclusive else "a share of the cluster")
    finally:
        if not exclusive:
            os.close(gate)  # closing the descriptor releases its lock
    try:
        yield
    finally:
        os.close(lock)
        if exclusive:
            os.close(gate)


@pytest.fixture
def whole_cluster():
    """The cluster to this test alone (it stops slurmctld): the other process's tests wait."""
    with _cluster_share(exclusive=True):
        yield


@pytest.fixture(autouse=True)
def _cluster_turn(request):
    """A slurm test's share of the cluster, and its partition: side for the tests marked so (where
    the cluster has it), else cpu (the default: the environment's LOOSESPEC_SLURM_PARTITION aside)."""
    if request.node.get_closest_marker("slurm") is None or _WHY_NOT is not None or "whole_cluster" in request.fixturenames:
        yield
        return
    on_side = SIDE is not None and request.node.get_closest_marker("slurm_side") is not None
    with _cluster_share(exclusive=SIDE is None):
        _TURN["partition"] = SIDE if on_side else None
        try:
            yield
        finally:
            _TURN["partition"] = None


SCRIPT = REPO / "slurm" / "local_cluster.sh"
# One CPU and 2 GB per job, so that the jobs of a sweep run side by side on the two nodes.
SMALL = ["hydra.launcher.cpus_per_task=1", "hydra.launcher.mem_gb=2"]
SWEEP = ["pair=tiny", "dataset.limit=1", "generation.max_new_tokens=8", *SMALL]
# The faults' run: tiny pair (fp32), greedy, the method only; long enough to be interrupted.
FAULT_SAMPLES = 40
FAULT = ["pair=tiny", "method=spd", "dataset=mgsm", f"dataset.limit={FAULT_SAMPLES}", "generation.max_new_tokens=32",
         "generation.temperature=0", "pair.dtype=float32", "baseline=none", "warmup=false", "progress=false"]
TERMINAL = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE", "PREEMPTED"}


def _env() -> dict[str, str]:
    env = {**os.environ, "LOOSESPEC_DATA_DIR": str(shared_data_dir()), "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    if _TURN["partition"]:
        env["LOOSESPEC_SLURM_PARTITION"] = _TURN["partition"]  # hydra.launcher.partition (conf/hydra/launcher/slurm.yaml)
    return env


def _said(stderr: str) -> list[str]:
    """A command's stderr lines, less the harness's start-up notes ('[loosespec_bench] ...', e.g.
    that the machine is busy), which are not part of what a refusal or an interrupt says."""
    return [ln for ln in stderr.splitlines() if ln.strip() and not ln.startswith("[loosespec_bench] ")]


def _run(args: list[str], timeout: float = 600, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=REPO, env=env or _env(), capture_output=True, text=True, timeout=timeout)


def _make(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    # -o: the install targets are taken as done (the test runs in the installed venv).
    return _run(["make", "-s", "-o", "install-replicate", "-o", "install", f"PY={sys.executable}", *args], timeout=timeout)


def _wait(pred, timeout: float, what: str, every: float = 0.5):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = pred()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def _records(results: Path) -> list[dict]:
    files = list(results.glob("*/*/samples.jsonl"))
    if not files:
        return []
    recs = []
    for line in files[0].read_text().splitlines():
        try:
            recs.append(json.loads(line))
        except json.JSONDecodeError:
            pass  # a line cut by a kill: resume leaves it out
    return recs


def _squeue(name: str) -> list[tuple[str, str, str]]:
    out = subprocess.run(["squeue", "-h", "-n", name, "-o", "%i|%T|%N"], capture_output=True, text=True, timeout=30).stdout
    return [tuple(line.split("|")) for line in out.split()]  # type: ignore[misc]


def _history(job: str) -> list[tuple[str, str]]:
    """(state, node) of every attempt of a job, oldest first (sacct: slurmdbd on MariaDB).
    slurmctld hands records to slurmdbd asynchronously: a job just ended may still read RUNNING
    for a moment, so this waits (30 s at most) for the last attempt's final state."""
    def read() -> list[tuple[str, str]]:
        out = subprocess.run(["sacct", "-n", "-X", "-D", "-P", "-j", job, "-o", "State,NodeList"], capture_output=True, text=True, timeout=30).stdout
        return [(s.split()[0], n) for s, n in (line.split("|") for line in out.splitlines() if "|" in line)]

    try:
        return _wait(lambda: (h := read()) and h[-1][0] in TERMINAL and h, 30, f"job {job}'s final state in sacct")
    except AssertionError:
        return read()  # the caller's assertion shows what sacct has


def _job_pids(sweep_dir: Path) -> list[int]:
    """The python processes of the job that runs from sweep_dir (submitit's command names its folder)."""
    out = subprocess.run(["pgrep", "-f", f"submitit.core._submit {sweep_dir}"], capture_output=True, text=True).stdout
    pids = []
    for p in out.split():
        try:
            if Path(f"/proc/{p}/comm").read_text().startswith("python"):  # not srun, which names it too
                pids.append(int(p))
        except OSError:
            pass  # gone already
    return pids


# ---------------------------------------------------------------------------- sweeps


def _cpu_make(target: str, results: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return _make(target, "REPLICATE_CPU_SWEEPS=fly_ablation_k", "LAUNCHER=slurm", f"CPU_RESULTS={results}",
                 f"ARGS={' '.join(SWEEP)}", *extra)


def _planned_folders(plan_out: str) -> list[str]:
    return re.findall(r"^\s+\d+\s+drafter\.k=\d+\s.*?(/\S+)$", plan_out, flags=re.M)


@side
def test_sweep_of_three_points_runs_as_one_array(tmp_path):
    results = tmp_path / "runs"
    plan = _cpu_make("replicate-cpu", results, "DRY_RUN=1")
    assert plan.returncode == 0, plan.stderr
    assert "3 jobs (one Slurm job array), 0 GPU(s)/job, 1 CPUs, 2 GB" in plan.stdout
    planned = _planned_folders(plan.stdout)
    assert len(planned) == 3

    launch = _cpu_make("replicate-cpu", results)
    assert launch.returncode == 0, launch.stdout[-2000:] + launch.stderr[-2000:]
    done = sorted(str(p.parent) for p in results.glob("*/*/summary.json"))
    assert done == sorted(planned)
    for folder in done:
        lines = (Path(folder) / "samples.jsonl").read_text().splitlines()
        assert len(lines) == 1 and (Path(folder) / "config.yaml").exists()
    # One array: three tasks <array id>_0..2 in submitit's folders.
    tasks = sorted(p.name for p in results.glob("_launch/*/fly_ablation_k/.submitit/*") if re.fullmatch(r"\d+_\d+", p.name))
    assert len(tasks) == 3 and len({t.split("_")[0] for t in tasks}) == 1, tasks

    status = _cpu_make("status-cpu", results)
    assert "[fly_ablation_k] 3 done, 0 short, 0 running, 0 failed, 0 pending" in status.stdout, status.stdout


@side
def test_scancel_of_one_task_is_named_and_a_relaunch_runs_only_it(tmp_path):
    results = tmp_path / "runs"
    launch = [sys.executable, "-m", "loosespec_bench.plan", "launch", "-e", "fly_ablation_k", "--",
              "hydra/launcher=slurm", "scale=cpu", *SWEEP]
    env = {**_env(), "LOOSESPEC_RESULTS_DIR": str(results)}
    driver = subprocess.Popen(launch, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        jobs = _wait(lambda: [j for j in _squeue("lsb-fly_ablation_k") if j[0].endswith("_1") or "[" in j[0]], 120, "the array")
        array = jobs[0][0].split("_")[0]
        subprocess.run(["scancel", f"{array}_1"], check=True, timeout=30)
        driver.communicate(timeout=600)
    finally:
        if driver.poll() is None:
            driver.kill()
    assert driver.returncode == 1
    log = next(results.glob("_launch/*/fly_ablation_k.log")).read_text()
    # Cancelled while pending, an array task leaves no record in Slurm; started, it says CANCELLED.
    assert re.search(r"^error: 1 of 3 points ended without a result: #1 drafter\.k=15 .*\(job \d+_1: (CANCELLED|no record left)", log, flags=re.M), log[-2000:]
    assert "Traceback" not in log

    status = _run([sys.executable, "-m", "loosespec_bench.plan", "status", "-e", "fly_ablation_k", "--", "hydra/launcher=slurm", "scale=cpu", *SWEEP],
                  env=env)
    rows = {m.group(2): m.group(1) for m in re.finditer(r"^\s+\d+\s+(\w+)\s+drafter\.k=(\d+)", status.stdout, flags=re.M)}
    assert rows["10"] == rows["20"] == "done" and rows["15"] in ("pending", "running"), status.stdout

    again = subprocess.run(launch, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stdout[-2000:]
    assert "-> 1 jobs (2 left out" in again.stdout
    stamps = sorted(results.glob("_launch/*/fly_ablation_k/.submitit"))
    # One point left: submitit submits it as a plain job (folder <id>) rather than an array of one.
    second = [p.name for p in stamps[1].glob("*") if re.fullmatch(r"\d+(_\d+)?", p.name)]
    assert len(stamps) == 2 and len(second) == 1, second
    assert len(list(results.glob("fly_ablation_k/*/summary.json"))) == 3


@slurm
@pytest.mark.parametrize(
    "override, setting",
    [
        ("hydra.launcher.gpus_per_node=1", "hydra.launcher.gpus_per_node=1: partition cpu has no GPUs"),
        ("hydra.launcher.partition=gpu", "hydra.launcher.partition=gpu: the cluster has no partition gpu"),
        ("hydra.launcher.mem_gb=100000", "hydra.launcher.mem_gb=100000: the nodes of partition cpu have at most"),
    ],
    ids=["gpus-on-cpu-partition", "unknown-partition", "more-memory-than-a-node"],
)
def test_a_request_the_cluster_cannot_meet_is_one_error_line(tmp_path, override, setting):
    # A key is given once (the pre-check refuses a repeated one): the override replaces SWEEP's.
    key = override.split("=", 1)[0]
    base = [a for a in SWEEP if a.split("=", 1)[0] != key]
    proc = _run([sys.executable, "-m", "loosespec_bench", "-m", "experiment=fly_ablation_k", "scale=cpu", "hydra/launcher=slurm",
                 *base, override, f"paths.results_dir={tmp_path}"], timeout=300)
    assert proc.returncode == 2
    errors = _said(proc.stderr)
    assert len(errors) == 1 and errors[0].startswith(f"error: {setting}"), proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    assert not any(tmp_path.rglob("*")), list(tmp_path.rglob("*"))  # no sweep folder left behind


# ---------------------------------------------------------------------------- stop, relaunch, attach (issue 73)


def _launch_cmd(*extra: str) -> list[str]:
    return [sys.executable, "-m", "loosespec_bench.plan", "launch", "-e", "fly_ablation_k", "--", "hydra/launcher=slurm", "scale=cpu", *SWEEP,
            *extra]


# The array waits this long before it may start (sbatch --begin): a Ctrl-C and a relaunch then
# find it pending. 45 s was not enough at load 11-15 (the split slurm run of 2026-12-07: the
# relaunch, two Python starts after the submission, found the jobs running); the test runs on
# partition side, whose process has time to spare beside the node faults'.
BEGIN = "+hydra.launcher.additional_parameters.begin=now+90"


def _alive(name: str) -> list[tuple[str, str, str]]:
    return [j for j in _squeue(name) if j[1] in ("PENDING", "RUNNING", "CONFIGURING", "COMPLETING")]


def _check_samples(results: Path, points: int) -> tuple[int, int]:
    """(lost, duplicated) samples over the sweep's run folders: each point runs dataset.limit=1."""
    lost = duplicated = 0
    folders = [p for p in results.glob("fly_ablation_k/*") if p.is_dir()]
    assert len(folders) == points, folders
    for folder in folders:
        ids = [json.loads(line)["id"] for line in (folder / "samples.jsonl").read_text().splitlines() if line.strip()]
        lost += max(0, 1 - len(set(ids)))
        duplicated += len(ids) - len(set(ids))
    return lost, duplicated


@side
def test_ctrl_c_of_a_launch_then_relaunch_while_running_and_after_done(tmp_path):
    """Ctrl-C of `plan launch`: one line naming the array and its scancel, exit 130, no traceback,
    no sweep table; a relaunch while the jobs run attaches to them (no second job, no error.txt);
    once done, a relaunch (plan or the plain -m) submits nothing."""
    results = tmp_path / "runs"
    env = {**_env(), "LOOSESPEC_RESULTS_DIR": str(results)}
    driver = subprocess.Popen(_launch_cmd(BEGIN), cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        jobs = _wait(lambda: _alive("lsb-fly_ablation_k"), 180, "the array in squeue")
        array = jobs[0][0].split("_")[0]
        driver.send_signal(signal.SIGINT)
        out, err = driver.communicate(timeout=120)
    finally:
        if driver.poll() is None:
            driver.kill()
    lines = _said(err)
    assert driver.returncode == 130, out + err
    assert len(lines) == 1 and lines[0].startswith("interrupted: "), err
    assert f"scancel {array}" in lines[0] and "of 3 points finished" in lines[0] and "attaches" in lines[0], lines[0]
    log = next(results.glob("_launch/*/fly_ablation_k.log")).read_text()
    assert "Traceback" not in out + err + log and "KeyboardInterrupt" not in log and "sweep of" not in log, log[-3000:]
    assert "interrupted: " in log  # the driver's own line, in its log

    # Relaunch while the jobs still run: they are attached to, not submitted again.
    assert _alive("lsb-fly_ablation_k"), "the jobs ended before the relaunch: the test machine is too fast for this test"
    again = subprocess.run(_launch_cmd(BEGIN), cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stdout[-2000:] + again.stderr[-2000:]
    assert "budget: 3 points, 0 done, 0 running and 3 pending in Slurm (attached to" in again.stdout, again.stdout
    log2 = sorted(results.glob("_launch/*/fly_ablation_k.log"))[-1].read_text()
    assert log2.count("pending in Slurm as job") == 3 and "job array" not in log2, log2[-3000:]
    submitted = {p.name.split("_")[0] for p in results.glob("_launch/*/fly_ablation_k/.submitit/*") if re.fullmatch(r"\d+(_\d+)?", p.name)}
    assert submitted == {array}, submitted  # one array in all
    assert not list(results.rglob("error.txt")), list(results.rglob("error.txt"))
    assert len(list(results.glob("fly_ablation_k/*/summary.json"))) == 3
    lost, duplicated = _check_samples(results, 3)
    print(f"\nRELAUNCH while running: samples lost {lost}, duplicated {duplicated}")
    assert lost == duplicated == 0

    # After done: plan launch launches nothing; the plain -m relaunch submits no job either.
    done = subprocess.run(_launch_cmd(), cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0 and "all 3 points done" in done.stdout, done.stdout
    plain = _run([sys.executable, "-m", "loosespec_bench", "-m", "experiment=fly_ablation_k", "hydra/launcher=slurm", "scale=cpu", *SWEEP,
                  f"paths.results_dir={results}", f"hydra.sweep.dir={tmp_path / 'plain'}"], timeout=600)
    assert plain.returncode == 0, plain.stdout[-2000:] + plain.stderr[-2000:]
    assert (plain.stdout + plain.stderr).count("not submitted") == 3 and "job array" not in plain.stdout + plain.stderr
    assert not _alive("lsb-fly_ablation_k") and not list((tmp_path / "plain").glob(".submitit/*"))
    assert _check_samples(results, 3) == (0, 0)


@side
def test_a_partition_made_inactive_ends_the_point_with_its_job_cancelled_and_a_deleted_one_is_named(tmp_path):
    part = f"t73p{os.getpid()}"
    subprocess.run(["scontrol", "create", f"PartitionName={part}", "Nodes=n1,n2", "State=DOWN"], check=True, timeout=30)
    try:
        args = [sys.executable, "-m", "loosespec_bench", "-m", "experiment=fly_ablation_k", "hydra/launcher=slurm", "scale=cpu", *SWEEP,
                "drafter.k=10", f"hydra.launcher.partition={part}", "hydra.launcher.held_grace_min=0.2",
                f"paths.results_dir={tmp_path / 'runs'}", f"hydra.sweep.dir={tmp_path / 'sweep'}"]
        log = tmp_path / "driver.log"
        with log.open("w") as fh:
            driver = subprocess.Popen(args, cwd=REPO, env=_env(), stdout=fh, stderr=subprocess.STDOUT, text=True)
        try:
            _wait(lambda: "PartitionDown" in log.read_text() or driver.poll() is not None, 180, "PartitionDown told")
            assert "the partition is down" in log.read_text(), log.read_text()[-2000:]
            subprocess.run(["scontrol", "update", f"PartitionName={part}", "State=INACTIVE"], check=True, timeout=30)
            driver.wait(timeout=180)
        finally:
            if driver.poll() is None:
                driver.kill()
        text = log.read_text()
        assert driver.returncode == 1, text[-2000:]
        errors = [ln for ln in text.splitlines() if ln.startswith("error: job")]
        assert len(errors) == 1 and "hydra.launcher.partition" in errors[0] and "(job cancelled)" in errors[0], text[-2000:]
        assert re.search(r"Partition(Inactive|Down)", errors[0]), errors[0]
        assert "Traceback" not in text
        assert not _alive("lsb-fly_ablation_k"), _squeue("lsb-fly_ablation_k")  # cancelled: nothing starts it unwatched
        assert not list((tmp_path / "runs").rglob("error.txt"))
    finally:
        for j in _squeue("lsb-fly_ablation_k"):
            subprocess.run(["scancel", j[0]], timeout=30)
        time.sleep(1)
        subprocess.run(["scontrol", "delete", f"PartitionName={part}"], timeout=30)
    # Deleted: the launch names the setting before submitting anything.
    gone = _run([*args[:-2], f"paths.results_dir={tmp_path / 'runs2'}", f"hydra.sweep.dir={tmp_path / 'sweep2'}"], timeout=300)
    lines = _said(gone.stderr)
    assert gone.returncode == 2 and len(lines) == 1 and f"the cluster has no partition {part}" in lines[0], gone.stderr


# ---------------------------------------------------------------------------- faults

def _reference_run(results: Path) -> dict[str, list[int]]:
    proc = _run([sys.executable, "-m", "loosespec_bench", *FAULT, f"paths.results_dir={results}", "experiment_name=fault"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    recs = _records(results)
    assert len(recs) == FAULT_SAMPLES
    return {r["id"]: r["output_ids"] for r in recs}


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> dict[str, list[int]]:
    """The uninterrupted run (this process's launcher, no cluster): output tokens by sample id.
    scripts/run_tests.sh's two slurm processes share one (LOOSESPEC_SLURM_SHARED, a folder made
    for that run): the first to need it runs it, the other waits for it and reads it."""
    shared = os.environ.get("LOOSESPEC_SLURM_SHARED")
    if not shared:
        return _reference_run(tmp_path_factory.mktemp("reference"))
    fd = open_fd(Path(shared) / "reference.lock", os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # the run takes minutes at most: the other process waits that long
        saved = Path(shared) / "reference.json"
        if saved.exists():
            return json.loads(read_text(saved))
        ref = _reference_run(tmp_path_factory.mktemp("reference"))
        atomic_write_text(saved, json.dumps(ref))
        return ref
    finally:
        os.close(fd)




FAULT_TABLE: list[dict] = []


def _driver_args(tmp_path: Path, name: str, extra: list[str] = (), sweep: str = "sweep") -> list[str]:
    """The fault run's command: a one-point sweep through the Slurm launcher (a key of SMALL given
    in extra replaces SMALL's: the pre-check refuses a key given twice)."""
    keys = {a.split("=", 1)[0] for a in extra}
    small = [a for a in SMALL if a.split("=", 1)[0] not in keys]
    return [sys.executable, "-m", "loosespec_bench", "-m", "hydra/launcher=slurm", "scale=cpu", *FAULT, *small, *extra,
            f"experiment_name={name}", f"paths.results_dir={tmp_path / 'results'}", f"hydra.sweep.dir={tmp_path / sweep}"]


def _fault_run(tmp_path: Path, name: str, inject, extra: list[str] = (), keep_jobs: bool = False) -> tuple[list[dict], list[tuple[str, str]], int, str]:
    """Launch the fault run as a one-job array, call inject(job id, sweep dir) once it has a few
    samples on disk (it returns the samples on disk at the fault), wait for the driver. The
    driver's output goes to tmp_path/driver.log (read live by the tests that watch what it says)."""
    results, sweep, log = tmp_path / "results", tmp_path / "sweep", tmp_path / "driver.log"
    with log.open("w") as fh:
        driver = subprocess.Popen(_driver_args(tmp_path, name, extra), cwd=REPO, env=_env(), stdout=fh, stderr=subprocess.STDOUT, text=True)
    try:
        _wait(lambda: len(_records(results)) >= 3 or driver.poll() is not None, 300, "3 samples on disk")
        assert driver.poll() is None, "the run ended before the fault: " + log.read_text()[-2000:]
        job = _squeue(f"lsb-{name}")[0][0]
        before = inject(job, sweep)
        driver.wait(timeout=600)
    finally:
        if driver.poll() is None:
            driver.kill()
        for j in [] if keep_jobs else _squeue(f"lsb-{name}"):
            if j[1] == "PENDING":  # a held job the test left behind (not one still completing: its state must stay)
                subprocess.run(["scancel", j[0]], timeout=30)
    return _records(results), _history(job), before, log.read_text()


def _check_resumed(fault: str, recs: list[dict], before: int, reference: dict[str, list[int]]) -> None:
    ids = [r["id"] for r in recs]
    lost = sorted(set(reference) - set(ids))
    duplicated = len(ids) - len(set(ids))
    identical = all(r["output_ids"] == reference[r["id"]] for r in recs)
    FAULT_TABLE.append(dict(fault=fault, before=before, after=len(set(ids)), lost=len(lost), duplicated=duplicated, identical=identical))
    print(f"\nFAULT {fault}: samples before {before}, after {len(set(ids))}, lost {len(lost)}, duplicated {duplicated}, identical {identical}")
    assert 0 < before < FAULT_SAMPLES, f"the fault came at {before} of {FAULT_SAMPLES} samples, not mid-run"
    assert not lost and duplicated == 0 and identical


@side
def test_requeue_mid_run_resumes(tmp_path, reference):
    def inject(job: str, sweep: Path) -> int:
        n = len(_records(tmp_path / "results"))
        subprocess.run(["scontrol", "requeue", job], check=True, timeout=30)
        return n

    recs, history, before, out = _fault_run(tmp_path, "fault_requeue", inject)
    assert [s for s, _ in history] == ["REQUEUED", "COMPLETED"], (history, out[-2000:])
    _check_resumed("scontrol requeue mid-run", recs, before, reference)


def _proc_state(pid: int) -> str:
    """The process's state letter from /proc (T = stopped), '' once it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return ""


def _usr2_pending(pid: int) -> bool:
    """SIGUSR2 queued for the process and not yet handled (it is stopped)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    masks = re.findall(r"^(?:SigPnd|ShdPnd):\s*([0-9a-f]+)$", status, flags=re.M)
    return any(int(m, 16) & (1 << (signal.SIGUSR2 - 1)) for m in masks)


@slurm
def test_time_limit_hit_requeues_and_resumes(tmp_path, reference):
    """The time limit lands mid-run however fast or loaded the machine: at the third sample the
    job's python is stopped (SIGSTOP; no sample can finish) and the limit set 50 to 110 s ahead.
    Slurm sends USR2 (signal_delay_s=45) at its next time-limit pass (every 30 s) and resumes
    the step's processes with it; submitit checkpoints and runs `scontrol requeue`. Nothing is
    timed: the test waits for the signal itself (the python no longer stopped, or USR2 pending:
    then it resumes it), then for submitit's "Requeued job" line, and only then gives the job 10
    minutes, while the requeued job waits for its BeginTime (cred_expire + 1 = 21 s): the second
    attempt must not inherit the short limit, or Slurm's warning would hit it at once, before
    submitit has installed its handler (a death by USR2: the flaky failure this replaces)."""

    def inject(job: str, sweep: Path) -> int:
        n = _time_limit_signal(job, sweep, tmp_path / "results")
        log = sweep / ".submitit" / job / f"{job}_0_log.out"
        _wait(lambda: log.exists() and f"Requeued job {job}" in log.read_text(), 60, "submitit's requeue", every=0.1)
        subprocess.run(["scontrol", "update", f"JobId={job}", "TimeLimit=10"], check=True, timeout=30)
        return n

    recs, history, before, out = _fault_run(
        tmp_path, "fault_timelimit", inject,
        ["hydra.launcher.timeout_min=3", "hydra.launcher.signal_delay_s=45", "hydra.launcher.max_num_timeout=3"],
    )
    assert [s for s, _ in history] == ["REQUEUED", "COMPLETED"], (history, out[-2000:])
    logs = "".join(p.read_text() for p in (tmp_path / "sweep").glob(".submitit/*/*.out"))
    assert "this job is timed-out" in logs and "Requeued job" in logs
    _check_resumed("time limit (signal_delay_s=45, USR2 from Slurm's time-limit pass)", recs, before, reference)


def _time_limit_signal(job: str, sweep: Path, results: Path) -> int:
    """Bring the job's time limit forward so that it lands mid-run (see the time-limit test): the
    job's python stopped, the limit 50 to 110 s ahead, back to running once Slurm's USR2 came.
    Returns the samples on disk at the fault."""
    pids = _wait(lambda: _job_pids(sweep), 30, "the job's python process")
    for p in pids:
        os.kill(p, signal.SIGSTOP)
    _wait(lambda: all(_proc_state(p) in ("T", "") for p in pids), 10, "the job's python stopped")
    n = len(_records(results))
    limit_min = math.ceil((_elapsed_s(job) + 50) / 60)
    subprocess.run(["scontrol", "update", f"JobId={job}", f"TimeLimit={limit_min}"], check=True, timeout=30)

    def signalled() -> bool:
        for p in pids:
            if _proc_state(p) == "T" and _usr2_pending(p):
                os.kill(p, signal.SIGCONT)  # Slurm sent USR2 alone: let the handler run
        return any(_proc_state(p) != "T" for p in pids)

    _wait(signalled, 150, "Slurm's time-limit signal (USR2)", every=0.1)
    return n


def _job_logs(sweep: Path, tail: int = 3000) -> str:
    """The ends of the submitit logs of a sweep's jobs (what the job's python said: whether the
    time limit's USR2 arrived, what the handler raised), for a fault test's failure message."""
    parts = []
    for log in sorted(sweep.glob(".submitit/*/*_log.*")):
        text = log.read_text(errors="replace")
        parts.append(f"\n--- {log.relative_to(sweep)} ---\n{text[-tail:]}")
    return "".join(parts) or f"\n(no submitit logs under {sweep})"


def _elapsed_s(job: str) -> float:
    text = subprocess.run(["squeue", "-h", "-j", job, "-o", "%M"], capture_output=True, text=True).stdout.strip()
    parts = [float(x) for x in re.split("[:-]", text)] if text else [0.0]
    secs = 0.0
    for x in parts:
        secs = secs * 60 + x
    return secs


@slurm
def test_node_lost_mid_job_requeues_onto_the_other_node(tmp_path, reference):
    lost: list[str] = []

    def inject(job: str, sweep: Path) -> int:
        node = _squeue("lsb-fault_node")[0][2]
        lost.append(node)
        n = len(_records(tmp_path / "results"))
        subprocess.run([str(SCRIPT), "fail-node", node], check=True, timeout=60, capture_output=True)
        return n

    try:
        recs, history, before, out = _fault_run(tmp_path, "fault_node", inject)
    finally:
        subprocess.run([str(SCRIPT), "start"], timeout=120, capture_output=True)  # the node comes back
    assert [s for s, _ in history] == ["NODE_FAIL", "COMPLETED"], (history, out[-2000:])
    assert history[0][1] == lost[0] and history[1][1] != lost[0]
    _check_resumed(f"node {lost[0]} lost mid-job (slurmd and job killed)", recs, before, reference)


def _node_state(node: str) -> str:
    return subprocess.run(["sinfo", "-h", "-N", "-n", node, "-o", "%t"], capture_output=True, text=True, timeout=30).stdout.strip()


@pytest.mark.slurm_faults
@slurm
def test_node_marked_down_with_a_live_slurmd_requeues_and_resumes(tmp_path, reference):
    """Issue 49: an admin (or a health check) marks the job's node DOWN while its slurmd lives:
    the job is requeued, the node is back in service at once (ReturnToService=2) and gets the job
    again; its old step dies only at KillWait's SIGKILL, before the requeued job's BeginTime
    (cred_expire + 1 = 21 s), so slurmd never meets a second copy (which drained the node and held
    the job for ever with cred_expire=5)."""
    def inject(job: str, sweep: Path) -> int:
        node = _squeue("lsb-fault_down")[0][2]
        n = len(_records(tmp_path / "results"))
        subprocess.run(["scontrol", "update", f"nodename={node}", "state=down", "reason=lost"], check=True, timeout=30)
        time.sleep(20)
        if _node_state(node).startswith(("down", "drain")):
            subprocess.run(["scontrol", "update", f"nodename={node}", "state=resume"], timeout=30)
        return n

    recs, history, before, out = _fault_run(tmp_path, "fault_down", inject)
    assert [s for s, _ in history] == ["NODE_FAIL", "COMPLETED"], (history, out[-2000:])
    assert "is held" not in out and "error:" not in out, out[-2000:]
    _check_resumed("node marked DOWN, slurmd alive (scontrol update state=down)", recs, before, reference)


@pytest.mark.slurm_faults
@slurm
def test_requeued_job_on_the_other_node_waits_for_a_step_that_outlives_the_cancel(tmp_path, reference):
    """Two nodes, one run folder, a real step that outlives the requeue: the job's node stops
    answering (its slurmd SIGSTOPped: a node cut off from slurmctld), slurmctld marks it DOWN after
    SlurmdTimeout and requeues the job, which starts on the other node after its BeginTime; nothing
    reaches the old step, which runs on and holds the folder's lock. It is let write two more
    samples and then stopped (SIGSTOP), so that it cannot finish the run on its own while the
    new attempt starts. The attempt on the other node must wait for it (RunFolder.lock); once its
    log says so, the node's slurmd is continued: it registers again, slurmctld finds the step on
    the wrong node (`Registered JobId=N StepId=N.0 on wrong node`) and it is killed there; the lock goes, the
    new attempt resumes: every sample once, the old step's late samples kept, none redone."""
    held: dict[str, list[int]] = {"slurmd": [], "python": []}

    def inject(job: str, sweep: Path) -> int:
        node = _squeue("lsb-fault_linger")[0][2]
        pids = _wait(lambda: _job_pids(sweep), 30, "the job's python process")
        slurmd = int(Path(f"/run/slurmd-{node}.pid").read_text())
        n = len(_records(tmp_path / "results"))
        os.kill(slurmd, signal.SIGSTOP)
        held["slurmd"].append(slurmd)
        _wait(lambda: len(_records(tmp_path / "results")) >= n + 2, 60, "two more samples from the cut-off step", every=0.1)
        for p in pids:
            os.kill(p, signal.SIGSTOP)
        held["python"] += pids
        log = sweep / ".submitit" / job / f"{job}_0_log.out"
        _wait(lambda: log.exists() and "still writes this folder" in log.read_text(errors="replace"), 240,
              "the requeued attempt waiting for the old step", every=1)
        os.kill(slurmd, signal.SIGCONT)
        held["slurmd"].clear()
        _wait(lambda: not any(Path(f"/proc/{p}").exists() for p in pids), 60, "slurmctld to kill the step on the wrong node")
        return n

    try:
        recs, history, before, out = _fault_run(tmp_path, "fault_linger", inject)
    finally:
        for p in held["slurmd"]:
            os.kill(p, signal.SIGCONT)
        for p in held["python"]:
            if Path(f"/proc/{p}").exists():
                os.kill(p, signal.SIGKILL)
        subprocess.run(["scontrol", "update", "nodename=n1,n2", "state=resume"], timeout=30, capture_output=True)
    assert [s for s, _ in history] == ["NODE_FAIL", "COMPLETED"] and history[0][1] != history[1][1], (history, out[-2000:])
    logs = "".join(p.read_text() for p in (tmp_path / "sweep").glob(".submitit/*/*_log.*"))
    assert "still writes this folder; waiting" in logs and "previous attempt is gone" in logs, logs[-3000:]
    _check_resumed(f"requeued onto {history[1][1]} while the job's step on {history[0][1]} (slurmd stopped) still held the folder",
                   recs, before, reference)


@pytest.mark.slurm_faults
@slurm
def test_held_job_is_told_at_once_ends_unfinished_after_the_grace_and_resumes_when_released(tmp_path, reference):
    """`scontrol requeuehold` (as Slurm does after a failed launch: `launch failed requeued held`):
    the launcher prints the release command within a minute, ends the point after
    held_grace_min=0.25 (15 s) with that line in its summary; released afterwards, the job resumes
    from its folder on its own."""
    told: list[float] = []
    jobs: list[str] = []

    def inject(job: str, sweep: Path) -> int:
        jobs.append(job)
        n = len(_records(tmp_path / "results"))
        t0 = time.monotonic()
        subprocess.run(["scontrol", "requeuehold", job], check=True, timeout=30)
        _wait(lambda: f"`scontrol release {job}`" in (tmp_path / "driver.log").read_text(), 60, "the held line", every=0.2)
        told.append(time.monotonic() - t0)
        return n

    t0 = time.monotonic()
    try:
        recs, _, before, out = _fault_run(tmp_path, "fault_held", inject, ["hydra.launcher.held_grace_min=0.25"], keep_jobs=True)
        ended = time.monotonic() - t0
        line = next(ln for ln in out.splitlines() if "is held by Slurm" in ln)
        summary = [ln for ln in out.splitlines() if ln.startswith("error:")]
        assert len(summary) == 1 and "ended without a result" in summary[0] and f"scontrol release {jobs[0]}" in summary[0], out[-2000:]
        assert "held_grace_min=0.25" in summary[0] and "Traceback" not in out
        assert told[0] < 60
        print(f"\nHELD: the release line {told[0]:.1f} s after the hold: {line.split('] ', 1)[-1]}\n      the driver ended {ended:.0f} s after its start: {summary[0][:300]}")
        # Released now, with no driver left: the job resumes from its folder and finishes on its own.
        subprocess.run(["scontrol", "release", jobs[0]], check=True, timeout=30)
        _wait(lambda: not any(j[1] not in TERMINAL for j in _squeue("lsb-fault_held")), 300, "the released job to end", every=2)
    finally:
        for j in _squeue("lsb-fault_held"):
            if j[1] == "PENDING":
                subprocess.run(["scancel", j[0]], timeout=30)
    history = _history(jobs[0])
    assert history[-1][0] == "COMPLETED", history
    _check_resumed("scontrol requeuehold: told at once, Unfinished after held_grace_min, then released", _records(tmp_path / "results"),
                   before, reference)


@pytest.mark.slurm_faults
@slurm
def test_preempted_with_requeue_resumes(tmp_path, reference):
    """A job of the higher-priority partition `urgent` (PriorityTier=2 over the same nodes;
    PreemptType=preempt/partition_prio, PreemptMode=REQUEUE) takes every CPU of the fault job's
    node: Slurm preempts the fault job and requeues it; it resumes once the urgent job is done."""
    def inject(job: str, sweep: Path) -> int:
        node = _squeue("lsb-fault_preempt")[0][2]
        cpus = subprocess.run(["sinfo", "-h", "-N", "-n", node, "-o", "%c"], capture_output=True, text=True, timeout=30).stdout.split()[0]
        n = len(_records(tmp_path / "results"))
        subprocess.run(["sbatch", "-p", "urgent", "-w", node, "-c", cpus, "--mem=1G", "-J", "lsb-urgent", "-o", "/dev/null",
                        "--wrap", "sleep 5"], check=True, timeout=30, capture_output=True)
        return n

    recs, history, before, out = _fault_run(tmp_path, "fault_preempt", inject)
    assert [s for s, _ in history][-1] == "COMPLETED" and history[0][0] in ("PREEMPTED", "REQUEUED"), (history, out[-2000:])
    assert "error:" not in out, out[-2000:]
    _check_resumed("preempted by a job of a higher-priority partition (PreemptMode=REQUEUE)", recs, before, reference)


@pytest.mark.slurm_faults
@slurm
def test_node_drained_mid_run_lets_the_job_finish_there(tmp_path, reference):
    """`scontrol update nodename=N state=drain` while the point runs on N (an admin or a health
    check takes the node out of service): Slurm lets the running job finish there (DRAINING) and
    starts nothing new on N; the run finishes on N, never requeued, no line needed."""
    drained: list[str] = []

    def inject(job: str, sweep: Path) -> int:
        node = _squeue("lsb-fault_drain")[0][2]
        drained.append(node)
        n = len(_records(tmp_path / "results"))
        subprocess.run(["scontrol", "update", f"nodename={node}", "state=drain", "reason=lsb-test-drain"], check=True, timeout=30)
        _wait(lambda: _node_state(node).startswith("drng"), 30, f"node {node} draining")
        return n

    try:
        recs, history, before, out = _fault_run(tmp_path, "fault_drain", inject)
    finally:
        subprocess.run(["scontrol", "update", "nodename=n1,n2", "state=resume"], timeout=30, capture_output=True)
    assert history == [("COMPLETED", drained[0])], (history, out[-2000:])
    assert "error:" not in out and "is held" not in out, out[-2000:]
    _check_resumed(f"node {drained[0]} drained mid-run (scontrol update state=drain): the job finished there", recs, before, reference)


# The time limit brought forward (as in the time-limit test) with no requeue left.
OUT_OF_REQUEUES = ["hydra.launcher.timeout_min=3", "hydra.launcher.signal_delay_s=45", "hydra.launcher.max_num_timeout=0"]


@pytest.mark.slurm_faults
@side
def test_requeue_limit_reached_ends_unfinished_naming_max_num_timeout_and_a_relaunch_resumes(tmp_path, reference):
    """max_num_timeout=0 and the time limit hit mid-run: submitit does not requeue (its verdict
    `timed-out too many times`, raised inside the point: Hydra's job catches it, so Slurm records
    COMPLETED); the driver ends with one `error:` line naming hydra.launcher.timeout_min and
    max_num_timeout, no traceback. The same command again resumes from the folder and finishes."""
    recs, history, before, out = _fault_run(tmp_path, "fault_maxtimeout", lambda job, sweep: _time_limit_signal(job, sweep, tmp_path / "results"),
                                            OUT_OF_REQUEUES)
    assert len(history) == 1 and history[0][0] in ("COMPLETED", "FAILED", "TIMEOUT"), (history, out[-2000:])  # never requeued
    summary = [ln for ln in out.splitlines() if ln.startswith("error:")]
    assert len(summary) == 1 and "1 of 1 points ended without a result" in summary[0] and "Traceback" not in out, \
        out[-3000:] + _job_logs(tmp_path / "sweep")
    assert "TIMEOUT: it hit hydra.launcher.timeout_min=3" in summary[0] and "hydra.launcher.max_num_timeout=0" in summary[0], summary[0]
    ids = [r["id"] for r in recs]
    assert len(ids) == len(set(ids)) < FAULT_SAMPLES
    print(f"\nOUT OF REQUEUES: {len(ids)} samples on disk; the driver said: {summary[0][:400]}")
    again = _run(_driver_args(tmp_path, "fault_maxtimeout", ["hydra.launcher.max_num_timeout=3"], sweep="sweep2"), timeout=900)
    assert again.returncode == 0, again.stdout[-2000:] + again.stderr[-2000:]
    assert len(list((tmp_path / "results").glob("*/*/samples.jsonl"))) == 1
    _check_resumed("requeue limit reached (max_num_timeout=0), then the same command again", _records(tmp_path / "results"), len(ids), reference)


def _fill(path: Path) -> None:
    """Write zeros to `path` until its file system refuses even a byte (ENOSPC)."""
    with open(path, "wb", buffering=0) as f:
        for size in (1 << 20, 4096, 1):
            try:
                while True:
                    f.write(b"\0" * size)
            except OSError as err:
                if err.errno != errno.ENOSPC:
                    raise


@pytest.mark.slurm_faults
@side
def test_full_results_disk_keeps_every_finished_sample_and_says_what_to_do(tmp_path, reference):
    """The results folder on its own small file system (a 16 MiB tmpfs mounted there: the shared
    results disk), filled by another writer mid-run: the next append fails with ENOSPC, the point
    ends with one line saying what to do (app.DiskError: free space, rerun the same command), the
    finished samples stay; with the space freed, the same command resumes and finishes."""
    disk = tmp_path / "results"
    disk.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m,mode=755", "lsb-results", str(disk)], capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs for the results here ({mounted.stderr.strip()}): the full-disk fault needs one")
    filler = disk / "filler.bin"
    try:
        def inject(job: str, sweep: Path) -> int:
            n = len(_records(disk))
            _fill(filler)
            return n

        recs, history, before, out = _fault_run(tmp_path, "fault_disk", inject)
        summary = [ln for ln in out.splitlines() if ln.startswith("error:")]
        assert len(summary) == 1 and "Traceback" not in out, out[-3000:]
        assert "No space left on device" in summary[0] and "finished sample(s) are kept" in summary[0], summary[0]
        assert "free space there" in summary[0] and "rerun the same command to resume" in summary[0], summary[0]
        ids = [r["id"] for r in recs]
        assert len(ids) == len(set(ids)) < FAULT_SAMPLES
        print(f"\nFULL DISK: {len(ids)} samples on disk, history {history}; the driver said:\n  " + "\n  ".join(ln[:400] for ln in summary))
        filler.unlink()
        again = _run(_driver_args(tmp_path, "fault_disk", sweep="sweep2"), timeout=900)
        assert again.returncode == 0, again.stdout[-2000:] + again.stderr[-2000:]
        _check_resumed("results disk full mid-run (16 MiB tmpfs filled), space freed, the same command again", _records(disk), len(ids), reference)
    finally:
        subprocess.run(["umount", "-l", str(disk)], capture_output=True)


def _memory_enforced() -> str | None:
    """None when the local cluster enforces --mem (task/cgroup), else why not."""
    out = subprocess.run(["scontrol", "show", "config"], capture_output=True, text=True, timeout=30).stdout
    m = re.search(r"^TaskPlugin\s*=\s*(\S+)", out, flags=re.M)
    plugin = m.group(1) if m else "unknown"
    if "task/cgroup" in plugin:
        return None
    return (f"the local cluster does not enforce --mem here (TaskPlugin={plugin}): slurm/local_cluster.sh enables task/cgroup only "
            "where slurmd can make cgroup v1 memory cgroups")


def _lower_memory_limit(job: str) -> int:
    """Set the memory limit of the job's step 0 (the python; its cgroup, made by task/cgroup from
    --mem) to what it uses now, or the least above it the kernel accepts (EBUSY: it cannot reclaim
    enough); the limit in bytes."""
    step = _wait(lambda: sorted(Path("/sys/fs/cgroup/memory").glob(f"slurm*/uid_*/job_{job}/step_0")), 30, f"job {job}'s memory cgroup")[0]
    limit = int((step / "memory.usage_in_bytes").read_text())
    while True:
        try:
            (step / "memory.limit_in_bytes").write_text(str(limit))
            return limit
        except OSError as err:
            if err.errno != errno.EBUSY:
                raise
            limit += 1 << 20


@pytest.mark.slurm_faults
@side
def test_out_of_memory_kill_mid_run_names_the_memory_setting_and_a_relaunch_resumes(tmp_path, reference):
    """An out-of-memory kill mid-run: the memory limit Slurm gave the job's step (task/cgroup, from
    --mem = hydra.launcher.mem_gb=2) is lowered after a few samples to what the step uses at that
    moment, as if mem_gb were just below the run's need; the kernel's OOM killer ends the step,
    Slurm records OUT_OF_MEMORY, and the driver ends with one `error:` line naming
    hydra.launcher.mem_gb. The finished samples stay; the same command again resumes."""
    why = _memory_enforced()
    if why:
        pytest.skip(why)
    limits: list[int] = []

    jobs: list[str] = []

    def inject(job: str, sweep: Path) -> int:
        jobs.append(job)
        n = len(_records(tmp_path / "results"))
        limits.append(_lower_memory_limit(job))
        return n

    recs, history, before, out = _fault_run(tmp_path, "fault_oom", inject)
    # Slurm 22.05: step 0 OUT_OF_MEMORY, the job FAILED (srun's exit code)
    steps = job_steps(jobs[0])
    assert history and history[-1][0] in ("FAILED", "OUT_OF_MEMORY") and failed_why(steps) == "OUT_OF_MEMORY", (history, steps, out[-2000:])
    summary = [ln for ln in out.splitlines() if ln.startswith("error:")]
    assert len(summary) == 1 and "1 of 1 points ended without a result" in summary[0], out[-3000:]
    assert "OUT_OF_MEMORY" in summary[0] and "raise hydra.launcher.mem_gb (now 2)" in summary[0], summary[0]
    ids = [r["id"] for r in recs]
    assert len(ids) == len(set(ids)) < FAULT_SAMPLES
    print(f"\nOUT OF MEMORY: step limit lowered to {limits[0] / 2**20:.0f} MiB; {len(ids)} samples on disk; the driver said: {summary[0][:400]}")
    again = _run(_driver_args(tmp_path, "fault_oom", sweep="sweep2"), timeout=900)
    assert again.returncode == 0, again.stdout[-2000:] + again.stderr[-2000:]
    _check_resumed("out-of-memory kill mid-run (the step's cgroup limit lowered), then the same command again", _records(tmp_path / "results"),
                   len(ids), reference)


@pytest.mark.slurm_faults
@slurm
def test_slurmctld_restarted_mid_run(tmp_path, reference, whole_cluster):
    """slurmctld stopped for 10 s and started again mid-run: the job runs on (slurmd keeps it), the
    launcher's squeue and sacct calls fail meanwhile and it keeps waiting; the run finishes."""
    def inject(job: str, sweep: Path) -> int:
        n = len(_records(tmp_path / "results"))
        pid = int(Path("/run/slurmctld.pid").read_text())
        os.kill(pid, signal.SIGTERM)
        _wait(lambda: not Path(f"/proc/{pid}").exists(), 30, "slurmctld stopped")
        time.sleep(10)
        subprocess.run([str(SCRIPT), "start"], check=True, timeout=120, capture_output=True)
        return n

    recs, history, before, out = _fault_run(tmp_path, "fault_ctld", inject)
    assert [s for s, _ in history] == ["COMPLETED"], (history, out[-2000:])
    assert "error:" not in out, out[-2000:]
    _check_resumed("slurmctld stopped 10 s mid-run and restarted", recs, before, reference)


def _print_fault_table() -> None:
    if not FAULT_TABLE:
        pytest.skip("no fault ran in this process (no local cluster, or none selected)")
    print("\n| fault | samples before | after | lost | duplicated | identical to the uninterrupted run |")
    print("|---|---|---|---|---|---|")
    for row in FAULT_TABLE:
        print(f"| {row['fault']} | {row['before']} | {row['after']} | {row['lost']} | {row['duplicated']} | {row['identical']} |")
    assert all(r["lost"] == 0 and r["duplicated"] == 0 and r["identical"] for r in FAULT_TABLE)


# Last in the file, so last in each process: the faults this process tried (run with -s to see it).
@pytest.mark.slurm
def test_fault_table():
    """The faults on partition cpu (all of them when one process runs every slurm test)."""
    _print_fault_table()


@pytest.mark.slurm_side
@pytest.mark.slurm
def test_fault_table_side():
    """The faults on partition side, in `make test`'s second slurm process."""
    _print_fault_table()
