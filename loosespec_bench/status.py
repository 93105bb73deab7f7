"""Where a sweep point stands, read from its result folder, and the record a failed point leaves.

A point's folder is results/<experiment_name>/<run id>/ (app.run). Its state:
  summary.json                               done
  error.txt                                  failed (the traceback; a rerun of the point clears it)
  config.yaml / samples.jsonl, no summary    running, or killed (pre-empted, out of time, lost
                                             node): the age of its last write tells which; rerun
                                             (or let Slurm requeue) and it resumes
  no folder                                  pending
"""

from __future__ import annotations

import datetime
import os
import socket
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

ERROR = "error.txt"
SUMMARY = "summary.json"
SAMPLES = "samples.jsonl"
STATES = ("done", "running", "failed", "pending")


def result_folder(cfg: DictConfig) -> Path:
    """The folder app.run writes for this config."""
    from .config import run_id

    return Path(cfg.paths.results_dir) / cfg.experiment_name / run_id(cfg)


def run_recording_errors(cfg: DictConfig) -> dict[str, Any]:
    """app.run(cfg), leaving the traceback in the point's folder (error.txt) when it fails.

    Only errors (Exception) are recorded: SystemExit / KeyboardInterrupt are how submitit
    requeues a pre-empted or timed-out job and how a user stops a run; those points resume.
    The exception is re-raised, so Hydra marks the job failed and the other sweep points go on.
    """
    from .app import run

    try:
        folder: Path | None = result_folder(cfg)
    except Exception:  # a config that cannot even name its folder: its error goes to Hydra's job dir
        folder = None
    if folder is not None and (folder / ERROR).exists():
        (folder / ERROR).unlink()  # this attempt replaces the last one's verdict
    try:
        return run(cfg)
    except Exception:
        write_error(folder or _hydra_job_dir() or Path.cwd(), traceback.format_exc())
        raise


def write_error(folder: Path, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    job = os.environ.get("SLURM_ARRAY_JOB_ID") and f"{os.environ['SLURM_ARRAY_JOB_ID']}_{os.environ.get('SLURM_ARRAY_TASK_ID')}"
    job = job or os.environ.get("SLURM_JOB_ID") or os.environ.get("SUBMITIT_LOCAL_JOB_ID")
    header = [
        f"failed: {datetime.datetime.now(datetime.timezone.utc).isoformat(timespec='seconds')}",
        f"host: {socket.gethostname()}",
        f"job: {job or '-'}",
        f"command: {' '.join(sys.argv)}",
        f"overrides: {' '.join(_hydra_overrides())}",
        "",
    ]
    path = folder / ERROR
    tmp = folder / f".{ERROR}.tmp"
    tmp.write_text("\n".join(header) + text, encoding="utf-8")
    os.replace(tmp, path)
    return path


def _hydra_overrides() -> list[str]:
    try:
        from hydra.core.hydra_config import HydraConfig

        return list(HydraConfig.get().overrides.task)
    except Exception:  # not under Hydra (tests, notebooks)
        return []


def _hydra_job_dir() -> Path | None:
    try:
        from hydra.core.hydra_config import HydraConfig

        return Path(HydraConfig.get().runtime.output_dir)
    except Exception:
        return None


@dataclass
class PointStatus:
    state: str              # one of STATES
    folder: Path
    samples: int = 0        # finished samples on disk
    age_s: float | None = None  # seconds since the folder was last written (running / killed)
    error: str | None = None    # the last line of error.txt (failed)


def point_status(folder: Path, now: float | None = None) -> PointStatus:
    if (folder / SUMMARY).exists():
        return PointStatus("done", folder, _count_lines(folder / SAMPLES))
    if (folder / ERROR).exists():
        lines = [ln for ln in (folder / ERROR).read_text(encoding="utf-8", errors="replace").splitlines() if ln.strip()]
        return PointStatus("failed", folder, _count_lines(folder / SAMPLES), error=lines[-1] if lines else "")
    if folder.is_dir():
        stamps = [p.stat().st_mtime for p in folder.iterdir() if p.is_file()] or [folder.stat().st_mtime]
        return PointStatus("running", folder, _count_lines(folder / SAMPLES), age_s=(now or time.time()) - max(stamps))
    return PointStatus("pending", folder)


def _count_lines(path: Path) -> int:
    if not path.exists():
        return 0
    with path.open("rb") as f:
        return sum(1 for line in f if line.endswith(b"\n"))


def format_age(seconds: float | None) -> str:
    if seconds is None:
        return ""
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.1f} {unit}"
    return f"{seconds:.0f} s"
