"""A data set config's size, read from its task class's declarations (Task.size_of,
Task.turns_per_sample) without building the task or loading anything: the planner's estimates,
the launcher's "is this finished folder short of what the point asks" and the dry run read it.
Here, below the launcher's floor, so that Hydra's launcher plugin may ask it too."""

from __future__ import annotations

from typing import Any, Mapping

from hydra.utils import get_class


def task_class(d: Mapping[str, Any]) -> Any:
    """The task class a data set node names (not built: nothing loads), or None."""
    try:
        return get_class(str(d.get("_target_")))
    except Exception:  # noqa: BLE001 (a node naming no importable class: the size is unknown)
        return None


def set_size(d: Mapping[str, Any]) -> tuple[int, bool]:
    """Samples of a data set config (its `limit` applied) and whether the count is exact; the
    full set's size is the task's own declaration (Task.size_of)."""
    cls = task_class(d)
    full, exact = cls.size_of(d) if cls is not None else (None, False)
    full = full or 0
    limit = d.get("limit")
    if limit is not None:
        return (min(int(limit), full), exact) if full else (int(limit), False)
    return full, exact


def full_size(d: Mapping[str, Any]) -> int:
    """The data set's own size (Task.size_of, its limit not applied) where known exactly, else 0."""
    cls = task_class(d)
    full, exact = cls.size_of(d) if cls is not None else (None, False)
    return int(full) if full and exact else 0


def turns_per_sample(d: Mapping[str, Any]) -> float:
    """Turns per sample of a data set config (Task.turns_per_sample), for the token estimate."""
    cls = task_class(d)
    return float(cls.turns_per_sample) if cls is not None else 1.0
