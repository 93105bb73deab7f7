"""What a Slurm cluster can give one job, and a job request checked against it before sbatch.

The Slurm launcher (hydra_plugins/loosespec_slurm_launcher) asks `sinfo` for the partitions'
nodes (GPUs, memory, CPUs) and checks the request of `hydra.launcher` (partition, gpus_per_node,
mem_gb, cpus_per_task) first: a request no node can meet is one line naming the setting to change,
instead of a job that pends forever or submitit's traceback around sbatch's refusal. What the
check cannot foresee (accounts, QOS, site limits), sbatch refuses; `sbatch_refusal` turns that
into the same kind of line.

Pure functions over sinfo's text (parse_sinfo, check_request) plus one call (cluster_nodes), so
the rules are tested without a cluster.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from .safe_files import append_text, check_regular, check_write_target, read_bounded

# sinfo -N: one line per node and partition: name|partition (default marked *)|gres|memory MB|CPUs
SINFO_FORMAT = "%N|%P|%G|%m|%c"
# Where a user sets each launcher key besides the command line (slurm/README.md).
WHERE = {
    "partition": "hydra.launcher.partition=NAME (or LOOSESPEC_SLURM_PARTITION, conf/local/slurm.yaml)",
    "account": "hydra.launcher.account=NAME (or LOOSESPEC_SLURM_ACCOUNT, conf/local/slurm.yaml)",
    "qos": "hydra.launcher.qos=NAME (or LOOSESPEC_SLURM_QOS, conf/local/slurm.yaml)",
}


@dataclass(frozen=True)
class Node:
    name: str
    partition: str
    default: bool      # the partition is the cluster's default
    gpus: int          # GPUs of the node (gres gpu[:type]:N, summed)
    mem_mb: int
    cpus: int


def _gpus(gres: str) -> int:
    """GPUs in a gres string: 'gpu:4', 'gpu:h100:8(S:0-1)', 'gpu:a100:2,shard:8', '(null)'."""
    total = 0
    for item in gres.split(","):
        parts = re.sub(r"\(.*?\)", "", item).split(":")
        if parts[0] == "gpu":
            count = parts[-1] if len(parts) > 1 else "1"
            total += int(count) if count.isdigit() else 1
    return total


def _number(text: str) -> int:
    """sinfo's memory / CPU field: '22899', '22899+' (nodes differ), or 'N/A'."""
    digits = re.match(r"\d+", text.strip())
    return int(digits.group()) if digits else 0


def parse_sinfo(text: str) -> list[Node]:
    nodes = []
    for line in text.splitlines():
        fields = line.strip().split("|")
        if len(fields) != 5:
            continue
        name, part, gres, mem, cpus = fields
        nodes.append(Node(name, part.rstrip("*"), part.endswith("*"), _gpus(gres), _number(mem), _number(cpus)))
    return nodes


def cluster_nodes(timeout_s: float = 30.0) -> list[Node] | None:
    """The cluster's nodes as sinfo lists them; None where sinfo is missing or does not answer
    (no check then: sbatch decides)."""
    if shutil.which("sinfo") is None:
        return None
    try:
        out = subprocess.run(["sinfo", "-h", "-N", "-o", SINFO_FORMAT], capture_output=True, text=True, timeout=timeout_s)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return parse_sinfo(out.stdout) if out.returncode == 0 else None


def _int(value: Any, default: int = 0) -> int:
    try:
        return int(value) if value is not None else default
    except (TypeError, ValueError):
        return default


def check_request(params: Mapping[str, Any], nodes: list[Node], env: Mapping[str, str] | None = None) -> str | None:
    """The first thing of the request (the launcher's params) that no node of its partition can
    give, as a message naming the setting to change; None when some node can run the job."""
    env = os.environ if env is None else env
    partitions = sorted({n.partition for n in nodes})
    part = params.get("partition") or env.get("SBATCH_PARTITION")
    if part:
        # sbatch takes a comma-separated list: the job runs in whichever can start it.
        wanted = [p.strip() for p in str(part).split(",") if p.strip()]
        unknown = [p for p in wanted if p not in partitions]
        if unknown:
            return (f"hydra.launcher.partition={part}: the cluster has no partition {unknown[0]} (it has: {', '.join(partitions) or 'none'}); "
                    f"set {WHERE['partition']} to one of them")
        label = ",".join(wanted)
    else:
        wanted = sorted({n.partition for n in nodes if n.default})
        if not wanted:
            return f"hydra.launcher.partition is not set and the cluster has no default partition; set {WHERE['partition']} (partitions: {', '.join(partitions)})"
        label = wanted[0]
    pool = [n for n in nodes if n.partition in wanted]
    if not pool:
        return None
    gpus = _int(params.get("gpus_per_node")) or _int(params.get("gpus_per_task")) * _int(params.get("tasks_per_node"), 1)
    most_gpus = max(n.gpus for n in pool)
    if gpus > most_gpus:
        if most_gpus == 0:
            return (f"hydra.launcher.gpus_per_node={gpus}: partition {label} has no GPUs; ask for none (hydra.launcher.gpus_per_node=0, "
                    f"or scale=cpu: its jobs ask for no GPU) or choose a GPU partition ({WHERE['partition']})")
        return f"hydra.launcher.gpus_per_node={gpus}: the nodes of partition {label} have at most {most_gpus} GPUs; lower hydra.launcher.gpus_per_node"
    mem_gb = params.get("mem_gb")
    most_mb = max(n.mem_mb for n in pool)
    if mem_gb is not None and most_mb and float(mem_gb) * 1024 > most_mb:
        return (f"hydra.launcher.mem_gb={mem_gb}: the nodes of partition {label} have at most {most_mb // 1024} GB ({most_mb} MB); "
                "lower hydra.launcher.mem_gb")
    cpus = _int(params.get("cpus_per_task"), 1) * _int(params.get("tasks_per_node"), 1)
    most_cpus = max(n.cpus for n in pool)
    if most_cpus and cpus > most_cpus:
        return (f"hydra.launcher.cpus_per_task={params.get('cpus_per_task')}: the nodes of partition {label} have at most {most_cpus} CPUs; "
                "lower hydra.launcher.cpus_per_task")
    fits = [n for n in pool if n.gpus >= gpus and (mem_gb is None or not n.mem_mb or float(mem_gb) * 1024 <= n.mem_mb) and n.cpus >= cpus]
    if not fits:
        return (f"no node of partition {label} has {gpus} GPUs, {mem_gb} GB and {cpus} CPUs at once; lower "
                "hydra.launcher.gpus_per_node, mem_gb or cpus_per_task")
    return None


# sbatch's refusals and the launcher setting behind each (what check_request cannot see).
REFUSALS = (
    ("invalid generic resource", "hydra.launcher.gpus_per_node (gres: the partition has no such GPUs)"),
    ("invalid partition", WHERE["partition"]),
    ("invalid account", WHERE["account"]),
    ("invalid qos", WHERE["qos"]),
    ("requested time limit", "hydra.launcher.timeout_min"),
    ("memory specification", "hydra.launcher.mem_gb"),
    ("requested node configuration is not available", "hydra.launcher.gpus_per_node / cpus_per_task / mem_gb / constraint"),
    ("invalid feature specification", "hydra.launcher.constraint (or LOOSESPEC_SLURM_CONSTRAINT)"),
)


def sbatch_refusal(stderr: str) -> str:
    """sbatch's own error lines (submitit wraps them in a FailedJobError) as one message."""
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    said = [ln for ln in lines if ln.lower().startswith(("sbatch: error", "error:"))] or lines[-1:] or ["(no message)"]
    text = "; ".join(re.sub(r"^(sbatch: )?error: ", "", ln) for ln in said)
    low = text.lower()
    setting = next((where for key, where in REFUSALS if key in low), "the hydra.launcher settings (slurm/README.md)")
    return f"sbatch refused the job array: {text}; change {setting}"


# ---------------------------------------------------------------------------- why a job waits

# squeue, one line per job (-r: one per array task): id|state|reason|priority (integer; 0 = held)
QUEUE_FORMAT = "%i|%T|%r|%Q"
# squeue states of a job that Slurm still runs or will run again (a requeue after a lost node).
ALIVE = frozenset({"PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "REQUEUED", "REQUEUE_FED", "REQUEUE_HOLD",
                   "RESIZING", "SUSPENDED", "SIGNALING", "SPECIAL_EXIT", "STAGE_OUT"})
# Reasons Slurm gives a held job (scontrol hold, a failed prolog or launch, a requeue held).
HELD_REASONS = ("JobHeldAdmin", "JobHeldUser")
# Pending reasons that clear by themselves, sooner or later, and what each means to a user (logged
# once per change of reason, so a long wait is never a silent one).
PENDING_REASONS = {
    "Resources": "waiting for free resources",
    "Priority": "other jobs come first",
    "BeginTime": "not before its begin time (a requeued job waits a moment before it may start again)",
    "ReqNodeNotAvail": "the nodes it may run on are down, drained or reserved",
    "PartitionTimeLimit": "its time limit is above the partition's: it waits for the partition's limit to change; "
                          "lower hydra.launcher.timeout_min to start now",
    "PartitionInactive": "the partition is inactive (an admin set it INACTIVE or DRAIN): nothing starts there until it is UP again",
    "PartitionDown": "the partition is down (an admin set it DOWN): nothing starts there until it is UP again",
    "QOSMaxJobsPerUserLimit": "your QOS's job limit is reached: it starts when one of your jobs ends",
    "QOSMaxSubmitJobPerUserLimit": "your QOS's limit of queued jobs is reached: it starts when one of your jobs ends",
    "QOSGrpCpuLimit": "the QOS's CPU limit is reached: it starts when some of its jobs end",
    "QOSGrpGRES": "the QOS's GPU limit is reached: it starts when some of its jobs end",
    "QOSGrpNodeLimit": "the QOS's node limit is reached: it starts when some of its jobs end",
    "QOSMaxWallDurationPerJobLimit": "its time limit is above the QOS's: it waits for the QOS to change; lower hydra.launcher.timeout_min "
                                     "(or choose another hydra.launcher.qos) to start now",
    "AssocGrpCpuLimit": "your account's CPU limit is reached: it starts when some of its jobs end",
    "AssocGrpGRES": "your account's GPU limit is reached: it starts when some of its jobs end",
    "AssocGrpJobsLimit": "your account's job limit is reached: it starts when some of its jobs end",
    "AssocMaxJobsLimit": "your account's per-user job limit is reached: it starts when one of your jobs ends",
    "AssocGrpBillingMinutes": "your account's billing minutes are spent: it waits for the allocation to be renewed",
    "AssocGrpCPUMinutesLimit": "your account's CPU minutes are spent: it waits for the allocation to be renewed",
    "AssocMaxWallDurationPerJobLimit": "its time limit is above your account's: lower hydra.launcher.timeout_min to start now",
    "Dependency": "waiting for the jobs it depends on",
    "JobArrayTaskLimit": "the array runs hydra.launcher.array_parallelism tasks at once: it starts when one ends",
    "NodeDown": "a node it needs is down",
    "Reservation": "waiting for its reservation",
}
# Pending reasons that never clear unless someone changes the job or the cluster: the point ends
# with one `error:` line naming what to change.
NEVER_CLEARS = {
    "BadConstraints": "no node has the features asked for: change hydra.launcher.constraint (or LOOSESPEC_SLURM_CONSTRAINT)",
    "PartitionConfig": "the request does not fit the partition's configuration: change hydra.launcher.partition, "
                       "cpus_per_task, mem_gb or gpus_per_node",
    "PartitionNodeLimit": "the partition cannot give this many nodes: lower hydra.launcher.nodes",
    "InvalidAccount": "the account is not valid here: change hydra.launcher.account (or LOOSESPEC_SLURM_ACCOUNT)",
    "InvalidQOS": "the QOS is not valid here: change hydra.launcher.qos (or LOOSESPEC_SLURM_QOS)",
    "DependencyNeverSatisfied": "a job it depends on failed: the dependency can never be met",
    "InvalidPartition": "the partition does not exist (deleted or renamed): change hydra.launcher.partition "
                        "(or LOOSESPEC_SLURM_PARTITION)",
    "QOSNotAllowed": "the QOS may not be used in this partition or account: change hydra.launcher.qos (or LOOSESPEC_SLURM_QOS)",
    "AccountNotAllowed": "the account may not use this partition: change hydra.launcher.account or hydra.launcher.partition",
}
# Pending reasons that clear only when someone changes the cluster (an admin resumes a partition,
# raises a limit): told at once with their meaning; after hydra.launcher.held_grace_min the point
# ends (its job cancelled, so that nothing starts it unwatched) with this line naming the setting.
STUCK = {
    "PartitionInactive": "its partition is inactive: ask the admins, or set hydra.launcher.partition (or LOOSESPEC_SLURM_PARTITION) "
                         "to an UP partition and launch again (it resumes)",
    "PartitionDown": "its partition is down: ask the admins, or set hydra.launcher.partition (or LOOSESPEC_SLURM_PARTITION) "
                     "to an UP partition and launch again (it resumes)",
    "PartitionTimeLimit": "its time limit is above the partition's: lower hydra.launcher.timeout_min (the job requeues and "
                          "resumes past it) and launch again",
    "QOSMaxWallDurationPerJobLimit": "its time limit is above the QOS's: lower hydra.launcher.timeout_min or change "
                                     "hydra.launcher.qos, and launch again",
    "AssocMaxWallDurationPerJobLimit": "its time limit is above your account's: lower hydra.launcher.timeout_min and launch again",
    "AssocGrpBillingMinutes": "your account's billing minutes are spent: change hydra.launcher.account or renew the allocation, "
                              "and launch again",
    "AssocGrpCPUMinutesLimit": "your account's CPU minutes are spent: change hydra.launcher.account or renew the allocation, "
                               "and launch again",
}


def reason_line(reason: str) -> str:
    """A Slurm reason with its meaning and its end: 'PartitionDown: the partition is down ...;
    ends after hydra.launcher.held_grace_min'. Unknown reasons are told as Slurm gives them."""
    key = reason.split(",")[0].strip()
    if key in NEVER_CLEARS:
        return f"{key}: {NEVER_CLEARS[key]} (never clears: the point ends at once, its job cancelled)"
    meaning = PENDING_REASONS.get(key)
    if key in STUCK:
        return f"{key}: {meaning}; clears only when the cluster changes: the point ends after hydra.launcher.held_grace_min ({STUCK[key]})"
    return f"{key}: {meaning} (clears by itself)" if meaning else key


@dataclass(frozen=True)
class QueueEntry:
    job_id: str
    state: str            # squeue %T: PENDING, RUNNING, ...
    reason: str           # squeue %r: None, Resources, JobHeldAdmin, launch failed requeued held, ...
    priority: int | None  # squeue %Q; 0 for a held job


def parse_squeue(text: str) -> dict[str, QueueEntry]:
    """squeue's lines in QUEUE_FORMAT, by job id ('12' or an array task '12_3'). A requeued job
    may be listed twice while its old record is kept: the live one wins."""
    out: dict[str, QueueEntry] = {}
    for line in text.splitlines():
        fields = line.strip().split("|")
        if len(fields) != 4 or not fields[0]:
            continue
        job_id, state, reason, prio = (f.strip() for f in fields)
        entry = QueueEntry(job_id, state, reason, int(prio) if prio.isdigit() else None)
        if job_id not in out or (entry.state in ALIVE and out[job_id].state not in ALIVE):
            out[job_id] = entry
    return out


def query_queue(job_ids: list[str], timeout_s: float = 60.0) -> dict[str, QueueEntry] | None:
    """What slurmctld says of these jobs (finished ones too, for MinJobAge), one squeue call for
    all of them; a job it no longer knows is absent; None when squeue does not answer."""
    bases = sorted({j.split("_")[0] for j in job_ids})
    if not bases:
        return {}
    try:
        out = subprocess.run(["squeue", "-h", "-r", "-t", "all", "-j", ",".join(bases), "-o", QUEUE_FORMAT],
                             capture_output=True, text=True, timeout=timeout_s)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0:
        # One id slurmctld no longer knows is an error; in a list it is just left out.
        return {} if "invalid job id" in out.stderr.lower() else None
    return parse_squeue(out.stdout)


def is_held(entry: QueueEntry) -> bool:
    """A pending job nothing will start until someone releases it (priority 0, or a held reason:
    scontrol hold, a launch failure `launch failed requeued held`, a failed prolog)."""
    if entry.state in ("REQUEUE_HOLD", "SPECIAL_EXIT"):
        return True
    if entry.state != "PENDING":
        return False
    return entry.priority == 0 or entry.reason in HELD_REASONS or "held" in entry.reason.lower()


def _expand_nodes(text: str) -> list[str]:
    """Node names of a Slurm host list: 'n1,n[3-4,7],gpu02' -> n1 n3 n4 n7 gpu02."""
    names = []
    for m in re.finditer(r"([^,\[\]]+)(?:\[([^\]]*)\])?", text):
        prefix, ranges = m.group(1), m.group(2)
        if ranges is None:
            names.append(prefix)
            continue
        for part in ranges.split(","):
            lo, _, hi = part.partition("-")
            if hi and lo.isdigit() and hi.isdigit():
                names += [f"{prefix}{i:0{len(lo)}d}" for i in range(int(lo), int(hi) + 1)]
            else:
                names.append(prefix + lo)
    return names


def never_clears(entry: QueueEntry, known_nodes: set[str] | None = None) -> str | None:
    """Why a pending job can never start (what to change), or None while it may still start."""
    if entry.state != "PENDING":
        return None
    reason = entry.reason.split(",")[0].strip()
    if reason in NEVER_CLEARS:
        return f"{reason}: {NEVER_CLEARS[reason]}"
    if reason == "ReqNodeNotAvail" and known_nodes:
        m = re.search(r"UnavailableNodes:(\S+)", entry.reason)
        missing = [n for n in _expand_nodes(m.group(1)) if n not in known_nodes] if m else []
        if missing:
            return (f"ReqNodeNotAvail: it asks for node {', '.join(missing)}, which the cluster does not have: "
                    "change hydra.launcher.additional_parameters.nodelist (or hydra.launcher.exclude)")
    return None


def describe(entry: QueueEntry) -> str:
    """One line for a state and reason: 'PENDING (Resources: waiting for free resources)'."""
    if entry.reason in ("", "None"):
        return entry.state
    key = entry.reason.split(",")[0].strip()
    meaning = PENDING_REASONS.get(key)
    if key in STUCK and entry.state == "PENDING":
        meaning = f"{meaning}; the point ends after hydra.launcher.held_grace_min unless it clears"
    return f"{entry.state} ({entry.reason}{': ' + meaning if meaning else ''})"


@dataclass
class Verdict:
    """How a job's wait ended without a result: held past the grace, or a reason that never clears."""
    kind: str      # "held" | "never"
    message: str


class QueueWatch:
    """What the launcher tells about one job as squeue's answers come in (pure: time is passed in).

    Each change of state or reason is one line. A held job is one warning at once, naming the
    command that releases it; held for longer than the grace, the wait ends (Verdict "held").
    A pending reason that can never clear ends the wait at once (Verdict "never")."""

    def __init__(self, job_id: str, held_grace_s: float, known_nodes: set[str] | None = None) -> None:
        self.job_id = job_id
        self.held_grace_s = held_grace_s
        self.known_nodes = known_nodes
        self.last: tuple[str, str] | None = None
        self.held_since: float | None = None
        self.stuck_since: float | None = None

    def held_line(self, entry: QueueEntry) -> str:
        return (f"job {self.job_id} is held by Slurm ({entry.reason}, priority {entry.priority}): nothing starts it "
                f"until `scontrol release {self.job_id}`")

    def update(self, entry: QueueEntry, now: float) -> tuple[list[tuple[int, str]], Verdict | None]:
        """(log lines as (logging level, text), verdict or None to keep waiting)."""
        lines: list[tuple[int, str]] = []
        key = (entry.state, entry.reason)
        held = is_held(entry)
        if key != self.last:
            if held:
                lines.append((30, self.held_line(entry)))
            elif self.held_since is not None:
                lines.append((20, f"job {self.job_id} released: {describe(entry)}"))
            else:
                lines.append((20, f"job {self.job_id}: {describe(entry)}"))
            self.last = key
        if not held:
            self.held_since = None
            why = never_clears(entry, self.known_nodes)
            if why:
                return lines, Verdict("never", f"job {self.job_id} can never start: {why}")
            key = entry.reason.split(",")[0].strip()
            if entry.state != "PENDING" or key not in STUCK:
                self.stuck_since = None
                return lines, None
            if self.stuck_since is None:
                self.stuck_since = now
            if now - self.stuck_since >= self.held_grace_s:
                return lines, Verdict("stuck", f"job {self.job_id} still pending ({key}) after hydra.launcher.held_grace_min="
                                               f"{self.held_grace_s / 60:g}: {STUCK[key]}")
            return lines, None
        if self.held_since is None:
            self.held_since = now
        if now - self.held_since >= self.held_grace_s:
            return lines, Verdict("held", f"{self.held_line(entry)} (still held after hydra.launcher.held_grace_min="
                                          f"{self.held_grace_s / 60:g}; released, it resumes from its run folder)")
        return lines, None


# ---------------------------------------------------------------------------- which job runs a point

# Beside the launch logs: one JSON line per submitted point, {"folder", "job", "submitted"}; the
# last line of a folder names its current job (a relaunch appends a new one). `make status` reads
# it to show each point's Slurm state and reason beside its samples.
JOBS_INDEX = Path("_launch") / "slurm_jobs.jsonl"
MAX_INDEX_BYTES = 256 << 20  # about a million launches of a point each (a line is ~200 bytes)


def record_jobs(rows: list[tuple[Any, ...]]) -> None:
    """Append (run folder, Slurm job id[, submitit folder]) rows to the index of each folder's
    results directory (the submitit folder, with its %j, lets a relaunch attach to the job)."""
    import datetime
    import json

    stamp = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    by_index: dict[Path, list[str]] = {}
    for folder, job, *rest in rows:
        folder = Path(folder).resolve()
        record = {"folder": str(folder), "job": job, "submitted": stamp}
        if rest and rest[0]:
            record["submitit"] = str(rest[0])
        line = json.dumps(record)
        by_index.setdefault(folder.parent.parent / JOBS_INDEX, []).append(line)
    for index, lines in by_index.items():
        index.parent.mkdir(parents=True, exist_ok=True)
        # Never through a link (the index, or a `_launch` folder linked out of the results
        # folder): a ConfigError naming it. One write per launch: O_APPEND keeps drivers' lines whole.
        check_write_target(index, root=index.parent.parent)
        append_text(index, "".join(f"{ln}\n" for ln in lines))


def recorded_entries(results_dirs: set[Path]) -> dict[Path, dict[str, str]]:
    """Run folder -> the last record of the index for it ({"job", "submitit"?, "submitted"}),
    from these results directories' indexes (data: a line that is not a record is skipped)."""
    import json

    out: dict[Path, dict[str, str]] = {}
    for results in results_dirs:
        index = Path(results) / JOBS_INDEX
        if not check_regular(index):  # absent; a link, a FIFO or a device: a ConfigError naming it
            continue
        text = read_bounded(index, MAX_INDEX_BYTES, "jobs index").decode("utf-8", errors="replace")
        for line in text.splitlines():
            try:
                row = json.loads(line)
                out[Path(row["folder"])] = {k: str(v) for k, v in row.items() if k != "folder"} | {"job": str(row["job"])}
            except (ValueError, RecursionError, KeyError, TypeError, AttributeError):
                continue
    return out


def recorded_jobs(results_dirs: set[Path]) -> dict[Path, str]:
    """Run folder -> the Slurm job last submitted for it, from these results directories' indexes."""
    return {folder: row["job"] for folder, row in recorded_entries(results_dirs).items()}


# ---------------------------------------------------------------------------- what a relaunch does with a point

# A point before a launch: done (summary.json in its folder), running / pending (the job last
# recorded for its folder is alive in Slurm: the launch attaches to it instead of submitting a
# second job that would find the folder locked), or to run (submitted).
POINT_CLASSES = ("done", "running", "pending", "to run")


def classify_point(done: bool, job_id: str | None, queue: Mapping[str, QueueEntry] | None) -> str:
    """One point's class (POINT_CLASSES). Without an answer from squeue (queue None) a recorded
    job cannot be confirmed alive: the point is to run (the run folder's lock still keeps a
    second writer out)."""
    if done:
        return "done"
    if job_id and queue:
        entry = queue.get(job_id)
        if entry is not None and entry.state in ALIVE:
            return "running" if entry.state in ("RUNNING", "COMPLETING", "CONFIGURING", "SUSPENDED", "SIGNALING", "STAGE_OUT") else "pending"
    return "to run"


def interrupt_line(arrays: Mapping[str, str], finished: int, total: int, alive: int) -> str:
    """What a Ctrl-C (or SIGTERM) of a launch says, in one line: the points finished, the arrays
    that keep running and the scancel that stops them, and what a relaunch does meanwhile."""
    head = f"interrupted: {finished} of {total} points finished"
    if not arrays or not alive:
        return head + "; no job of this launch is left in Slurm; launching again submits only the points not done"
    ids = " ".join(sorted(arrays, key=lambda a: (len(a), a)))
    named = ", ".join(f"{a} ({arrays[a]})" if arrays[a] else a for a in sorted(arrays, key=lambda a: (len(a), a)))
    return (f"{head}, {alive} still running or pending in Slurm: the job array(s) {named} keep running without this driver; "
            f"`scancel {ids}` stops them; launching again attaches to the points still running and submits only the rest")


def status_line(job_id: str, entry: QueueEntry | None) -> str:
    """A point's Slurm state for `make status`: 'Slurm job 12_1 PENDING (Priority: ...)', a held
    job with its release command."""
    if entry is None:
        return f"Slurm job {job_id}: no longer known to slurmctld"
    if is_held(entry):
        return f"Slurm job {job_id} HELD ({entry.reason}, priority {entry.priority}): `scontrol release {job_id}`"
    why = never_clears(entry)
    return f"Slurm job {job_id} {describe(entry)}" + (f"; can never start: {why}" if why else "")


def job_steps(job_id: str, timeout_s: float = 30.0) -> list[tuple[str, str]] | None:
    """(state, exit code) of each step of a job as sacct records them (the batch step, step 0:
    submitit's srun of the python), or None without accounting."""
    try:
        out = subprocess.run(["sacct", "-n", "-P", "-j", job_id, "-o", "JobID,State,ExitCode"], capture_output=True, text=True,
                             timeout=timeout_s)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0:
        return None
    rows = [line.split("|") for line in out.stdout.splitlines()]
    return [(r[1].split()[0], r[2]) for r in rows if len(r) == 3 and "." in r[0] and r[1]]


def failed_why(steps: list[tuple[str, str]] | None) -> str:
    """What a FAILED job's steps say: OUT_OF_MEMORY when one was (Slurm 22.05 marks the step, and
    the job FAILED by srun's exit code), KILLED when one died of SIGKILL (exit code N:9) with no
    out-of-memory event seen (a cluster that does not enforce --mem: the kernel's OOM killer, or
    a kill -9), else FAILED."""
    states = [st for st, _ in steps or []]
    if any(st.startswith("OUT_OF_ME") for st in states):
        return "OUT_OF_MEMORY"
    if any(code.endswith(":9") for _, code in steps or []):
        return "KILLED"
    return "FAILED"


# submitit's own verdict when a job's time runs out once more than max_num_timeout allows: it
# raises instead of requeueing, so Slurm records FAILED (or TIMEOUT if the limit kills it first).
OUT_OF_REQUEUES = "timed-out too many times"


def ended_without_result(state: str, params: Mapping[str, Any], detail: str = "") -> str:
    """A final Slurm state of a job that left no result, with the setting behind it where one is:
    'OUT_OF_MEMORY: ... raise hydra.launcher.mem_gb (now 2)'. `detail`: submitit's error text
    (its verdict names a requeue limit reached, whatever state Slurm gives the job)."""
    if OUT_OF_REQUEUES in detail:
        state = "TIMEOUT"
    if state == "OUT_OF_MEMORY":
        return (f"OUT_OF_MEMORY: the job used more memory than it asked for; raise hydra.launcher.mem_gb "
                f"(now {params.get('mem_gb')}) and launch again (it resumes)")
    if state == "KILLED":
        return (f"KILLED: its step died of SIGKILL with no out-of-memory event seen by Slurm: the kernel's out-of-memory "
                f"killer (where the cluster does not enforce --mem) or a kill -9; if memory, raise hydra.launcher.mem_gb "
                f"(now {params.get('mem_gb')}) and launch again (it resumes)")
    if state == "TIMEOUT":
        return (f"TIMEOUT: it hit hydra.launcher.timeout_min={params.get('timeout_min')} more often than "
                f"hydra.launcher.max_num_timeout={params.get('max_num_timeout')} requeues allow; raise either and launch again (it resumes)")
    if state == "CANCELLED" or state.startswith("CANCELLED "):
        return f"{state}: cancelled (scancel or an admin); launch again to resume it"
    return state


def failed_point(err: BaseException, params: Mapping[str, Any]) -> str:
    """One line for a point whose job ran and raised (Hydra's job catches the error, so Slurm
    records COMPLETED and the driver gets it back): submitit's out-of-requeues verdict as the
    TIMEOUT line, a ConfigError (bad input, a full results disk: app.DiskError) as its own
    message, which says what to do, anything else as its type and first line."""
    from .errors import ConfigError

    text = str(err)
    if OUT_OF_REQUEUES in text:
        return ended_without_result("TIMEOUT", params, text)
    if isinstance(err, ConfigError):
        return text
    first = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    return f"{type(err).__name__}: {first} (the traceback is in the run folder's error.txt and the job's log)"


def held_grace_s(value: Any, default_min: float) -> float | str:
    """hydra.launcher.held_grace_min in seconds, or why the value cannot be one (a message)."""
    if value is None:
        return 60.0 * default_min
    try:
        minutes = float(value)
    except (TypeError, ValueError):
        minutes = float("nan")
    if not minutes >= 0 or minutes == float("inf"):
        return f"hydra.launcher.held_grace_min={value}: give the minutes a held job may wait before its point ends (a number >= 0, default {default_min:g})"
    return 60.0 * minutes
