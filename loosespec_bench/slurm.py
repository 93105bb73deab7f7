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
from typing import Any, Mapping

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
