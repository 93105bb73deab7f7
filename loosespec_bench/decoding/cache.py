"""KV-cache rollback: re-exported from loosespec_bench.step, where it now lives."""

from __future__ import annotations

from ..step import crop_to

__all__ = ["crop_to"]
