"""OpenMP wait policy for CPU runs, chosen before torch loads libgomp (no torch import here).

A decode forward on CPU is hundreds of small parallel regions; with the workers spinning between
them (ACTIVE) the embedded pair's 1-token forwards took 29.5 ms (0.5B draft) and 73 ms (1.5B
target) on 2 cores, against 45 ms and 97 ms with sleeping workers (PASSIVE) and 33 / 82 ms with
libgomp's default: the draft gains most, so the draft/target cost ratio c, and with it every
speculative speedup, depends on it. On a machine shared with other busy processes the opposite
holds: a spinning worker that loses its core stalls every barrier for a scheduler slice (a 1.5B
forward measured 10x slower at load average 10), so there PASSIVE is the right choice.

Both contestants of every paired comparison (method and target alone, ours and a library's) run
in one process under the same policy, so ratios stay fair either way; the policy is recorded with
the results. A value the user set always wins.
"""

from __future__ import annotations

import os
import sys

ENV = "OMP_WAIT_POLICY"


def _gpu_visible() -> bool:
    # On a GPU node the CPU threads mostly idle; spinning would only burn the job's cores.
    cvd = os.environ.get("CUDA_VISIBLE_DEVICES")
    if cvd is not None:
        return cvd.strip() not in ("", "-1")
    return os.path.exists("/dev/nvidia0") or os.path.exists("/dev/kfd")


def default_wait_policy(policy: str = "ACTIVE") -> str | None:
    """Set OMP_WAIT_POLICY to `policy` unless the user set one, torch is already loaded (too late
    to matter) or a GPU is visible. Returns the policy in force (None: libgomp's default)."""
    if ENV not in os.environ and "torch" not in sys.modules and not _gpu_visible():
        os.environ[ENV] = policy
    return os.environ.get(ENV)


def describe() -> str:
    return os.environ.get(ENV, "default")
