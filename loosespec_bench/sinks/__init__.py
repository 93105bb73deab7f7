"""Sinks record: a local result folder per run (always), plus optional trackers."""

from .local import RunFolder

__all__ = ["RunFolder"]
