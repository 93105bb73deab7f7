"""The run folder moved to loosespec_bench.run_folder (one module for every read and write of
a run folder); this name stays for old imports."""

from ..run_folder import RunFolder

__all__ = ["RunFolder"]
