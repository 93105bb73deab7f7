"""What a dry run (`plan` mode, DRY_RUN=1) checks before anything is submitted.

  models     the hub models and heads every point loads (target, draft model, EAGLE head), each
             looked up in the local Hugging Face cache (HF_HOME / HF_HUB_CACHE): cached, config
             only, or missing, with the `huggingface-cli download` line of each missing one. The
             download list of slurm/README.md is this list for the 70B and 405B plans
             (`python -m loosespec_bench.plan models ...`); a test compares the two.
  cluster    where sinfo answers: the sweeps' partition, GPUs per node, memory and CPUs against
             its nodes (slurm.check_request) and timeout_min against the partition's time limit.
  time       points whose estimate exceeds hydra.launcher.timeout_min: they rely on requeues
             (each resumes from the samples on disk), named with how many they need.

Pure functions over composed configs and sinfo's text, so each rule is tested without a cluster.
"""

from __future__ import annotations

import math
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

# A path that names no hub repository: built-in test pairs, GGUF conversions, untrained heads.
_NOT_HUB = re.compile(r"^(tiny:|embedded:|random$|none$|null$)", re.I)


def is_hub_id(path: Any) -> bool:
    """'org/name' that is not a local folder nor one of the harness's own schemes."""
    if not isinstance(path, str) or not path or _NOT_HUB.match(path):
        return False
    if path.startswith(("/", ".", "~")) or Path(path).exists():
        return False
    return bool(re.fullmatch(r"[A-Za-z0-9][\w.-]*/[\w.-]+", path))


def models_of(cfg: Any) -> list[tuple[str, str]]:
    """(hub id, role) of every model a point names: the target; the pair's draft ("draft" where
    the drafter loads it: drafter.needs_model, i.e. model, model_xtok, mla; "pair draft" where it
    does not, listed all the same so that an offline cache never misses a model a pair names);
    the EAGLE head (drafter.head_path) where the drafter is EAGLE."""
    from omegaconf import OmegaConf

    from ..settings.config import uses_drafter

    out = [(OmegaConf.select(cfg, "pair.target.path"), "target")]
    drafts = uses_drafter(cfg)
    name = str(OmegaConf.select(cfg, "drafter.name") or "") if drafts else ""
    loaded = drafts and bool(OmegaConf.select(cfg, "drafter.needs_model", default=False))
    out.append((OmegaConf.select(cfg, "pair.draft.path"), "draft" if loaded else "pair draft"))
    if name.startswith("eagle"):
        out.append((OmegaConf.select(cfg, "drafter.head_path", default=None), f"{name} head"))
    return [(str(p), role) for p, role in out if is_hub_id(p)]


@dataclass
class ModelNeed:
    repo: str
    roles: list[str]      # target / draft / eagle3 head
    sweeps: list[str]     # the sweeps whose points load it
    cache: str = "?"      # cached | config only | missing | ? (not looked up)


def collect(points: Iterable[tuple[str, Any]]) -> list[ModelNeed]:
    """(sweep, composed config) pairs -> each model once, with the roles and sweeps that need it."""
    needs: dict[str, ModelNeed] = {}
    for sweep, cfg in points:
        for repo, role in models_of(cfg):
            need = needs.setdefault(repo, ModelNeed(repo, [], []))
            if role not in need.roles:
                need.roles.append(role)
            if sweep not in need.sweeps:
                need.sweeps.append(sweep)
    return sorted(needs.values(), key=lambda n: n.repo.lower())


def cache_state(repo: str, cache_dir: str | None = None) -> str:
    """'cached' (config and weights in the local HF cache), 'config only' or 'missing'."""
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:  # pragma: no cover (a dependency of transformers)
        return "?"
    found = try_to_load_from_cache(repo, "config.json", cache_dir=cache_dir)
    if not isinstance(found, str):
        return "missing"
    snapshot = Path(found).parent
    weights = any(any(snapshot.glob(pattern)) for pattern in ("*.safetensors", "*.bin", "*.safetensors.index.json", "*.pt"))
    return "cached" if weights else "config only"


def check_cache(needs: Sequence[ModelNeed], cache_dir: str | None = None) -> None:
    for need in needs:
        need.cache = cache_state(need.repo, cache_dir)


def download_lines(needs: Sequence[ModelNeed]) -> list[str]:
    """One `huggingface-cli download` line per model, with its roles and the sweeps that need it
    (the first two named)."""
    width = max((len(n.repo) for n in needs), default=0)

    def who(n: ModelNeed) -> str:
        named = ", ".join(n.sweeps[:2]) + (f" +{len(n.sweeps) - 2} more" if len(n.sweeps) > 2 else "")
        return f"{', '.join(n.roles)}: {named}"

    return [f"huggingface-cli download {n.repo:<{width}}  # {who(n)}" for n in needs]


def format_models(needs: Sequence[ModelNeed]) -> str:
    missing = [n for n in needs if n.cache != "cached"]
    lines = [f"models: {len(needs)} needed by the plan, {len(needs) - len(missing)} in the local Hugging Face cache"
             + (f", {len(missing)} not" if missing else "")]
    for n in needs:
        lines.append(f"  {n.cache:<11} {n.repo:<44} {', '.join(n.roles)} ({len(n.sweeps)} sweeps)")
    if missing:
        lines.append("  jobs on nodes without internet fail at their first load: download these on the login node "
                     "(HF_HOME on a shared file system), then export HF_HUB_OFFLINE=1:")
        lines += [f"    {ln}" for ln in download_lines(missing)]
    return "\n".join(lines)


# ---------------------------------------------------------------------------- the cluster

def parse_time_limit(text: str) -> float | None:
    """sinfo's %l ('infinite', '1-00:00:00', '2:00:00', '30:00', '45') in minutes; None = no limit."""
    text = text.strip()
    if not text or text.lower() in ("infinite", "unlimited", "n/a"):
        return None
    days = 0
    if "-" in text:
        d, text = text.split("-", 1)
        days = int(d)
    parts = [int(p) for p in text.split(":")]
    if len(parts) == 1:
        h, m, s = 0, parts[0], 0
    elif len(parts) == 2:
        h, m, s = 0, parts[0], parts[1]
    else:
        h, m, s = parts[-3], parts[-2], parts[-1]
    return days * 1440 + h * 60 + m + s / 60


def partition_limits(text: str) -> dict[str, float | None]:
    """sinfo -h -o '%P|%l' -> partition (default's * stripped) -> time limit in minutes."""
    out: dict[str, float | None] = {}
    for line in text.splitlines():
        if "|" in line:
            part, limit = line.split("|", 1)
            out[part.strip().rstrip("*")] = parse_time_limit(limit)
    return out


def check_cluster(params: Mapping[str, Any], nodes: list[Any] | None, limits: Mapping[str, float | None] | None) -> str:
    """One line for a sweep's request against the cluster: 'ok' or the problem naming the setting;
    'not checked' where no cluster answers."""
    from ..slurm import check_request

    if nodes is None:
        return "not checked (no sinfo answers here): `plan launch` checks partition, GPUs, memory and CPUs before submitting"
    problem = check_request(params, nodes)
    if problem:
        return f"PROBLEM: {problem}"
    part = params.get("partition") or next((n.partition for n in nodes if n.default), None)
    timeout = params.get("timeout_min")
    limit = (limits or {}).get(str(part).split(",")[0]) if part else None
    if timeout and limit is not None and float(timeout) > limit:
        return (f"PROBLEM: hydra.launcher.timeout_min={timeout} is above partition {part}'s time limit ({limit:g} min): its jobs "
                f"would pend for ever (PartitionTimeLimit); set hydra.launcher.timeout_min<={limit:g} (TIMEOUT_70B=...): "
                "longer points requeue and resume")
    gpus = int(params.get("gpus_per_node") or 0)
    most = max((n.gpus for n in nodes if n.partition == part), default=0)
    return f"ok: partition {part} ({most} GPUs per node{'' if limit is None else f', time limit {limit:g} min'}) can run {gpus}-GPU jobs"


def query_cluster(timeout_s: float = 30.0) -> tuple[list[Any] | None, dict[str, float | None] | None]:
    from ..slurm import cluster_nodes

    nodes = cluster_nodes(timeout_s)
    if nodes is None or shutil.which("sinfo") is None:
        return None, None
    try:
        out = subprocess.run(["sinfo", "-h", "-o", "%P|%l"], capture_output=True, text=True, timeout=timeout_s)
    except (OSError, subprocess.TimeoutExpired):
        return nodes, None
    return nodes, partition_limits(out.stdout) if out.returncode == 0 else None


# ---------------------------------------------------------------------------- time limit

def requeues_needed(hours: float, timeout_min: float | None) -> int:
    """Requeues a point of `hours` needs past a `timeout_min` limit (0 within it, or no limit)."""
    if not timeout_min or hours * 60 <= timeout_min:
        return 0
    return math.ceil(hours * 60 / timeout_min) - 1
