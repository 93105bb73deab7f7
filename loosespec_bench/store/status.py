"""Where a sweep point stands, read from its result folder. A pure reader: it never runs,
locks or writes anything (running a point and recording its failure is app.run_recording_errors).

A point's folder is results/<experiment_name>/<run id>/ (app.run). Its state:
  summary.json                               done
  error.txt                                  failed (the traceback; a rerun of the point clears it)
  config.yaml / samples.jsonl, no summary    running, or killed (pre-empted, out of time, lost
                                             node): the age of its last write tells which; rerun
                                             (or let Slurm requeue) and it resumes
  no folder                                  pending
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from ..errors import ConfigError
from ..store.run_folder import RunFolder, count_finished_lines
from ..safe_files import read_bytes

ERROR = RunFolder.ERROR
SUMMARY = RunFolder.SUMMARY
SAMPLES = RunFolder.SAMPLES
# short: finished, but at fewer samples than the plan now asks (a planned look's larger
# dataset.limit: the problem count is not part of a run id, so the run extends that folder).
STATES = ("done", "short", "running", "failed", "pending")


@dataclass
class PointStatus:
    state: str              # one of STATES
    folder: Path
    samples: int = 0        # finished samples on disk
    age_s: float | None = None  # seconds since the folder was last written (running / killed)
    error: str | None = None    # the last line of error.txt (failed)
    slurm: str | None = None    # the point's Slurm job, state and reason (plan status asks squeue; slurm.status_line)


def point_status(folder: Path, now: float | None = None) -> PointStatus:
    if (folder / SUMMARY).exists():
        return PointStatus("done", folder, count_finished_lines(folder / SAMPLES))
    if (folder / ERROR).exists():
        try:  # never through a link or a FIFO (safe_files)
            text = read_bytes(folder / ERROR).decode("utf-8", errors="replace")
        except (OSError, ConfigError) as err:
            text = f"error.txt unreadable: {err}"
        lines = [ln for ln in text.splitlines() if ln.strip()]
        return PointStatus("failed", folder, count_finished_lines(folder / SAMPLES), error=lines[-1] if lines else "")
    if folder.is_dir():
        stamps = [p.stat().st_mtime for p in folder.iterdir() if p.is_file()] or [folder.stat().st_mtime]
        return PointStatus("running", folder, count_finished_lines(folder / SAMPLES), age_s=(now or time.time()) - max(stamps))
    return PointStatus("pending", folder)


def format_age(seconds: float | None) -> str:
    if seconds is None:
        return ""
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.1f} {unit}"
    return f"{seconds:.0f} s"
