"""OpenMP wait policy for CPU runs, chosen before torch loads libgomp (no torch import here).

A decode forward on CPU is hundreds of small parallel regions; with the workers spinning between
them (ACTIVE) the embedded pair's 1-token forwards took 29.5 ms (0.5B draft) and 73 ms (1.5B
target) on 2 cores, against 45 ms and 97 ms with sleeping workers (PASSIVE) and 33 / 82 ms with
libgomp's default: the draft gains most, so the draft/target cost ratio c, and with it every
speculative speedup, depends on it. On a machine shared with other busy processes the opposite
holds: a spinning worker that loses its core stalls every barrier for a scheduler slice (a 1.5B
forward measured 10x slower at load average 10; issue 72: one MGSM sample pair took 1,186 CPU
seconds at load 7 on 2 cores against ~70 when quiet), so there PASSIVE is the right choice.

So the default depends on the machine when the command starts: ACTIVE where the 1-minute load
average is at most the core count (busy() is False), PASSIVE above it, and the run says so in
one line at its start (busy_line). The load is read once, before torch loads: libgomp reads the
variable when it starts, and a run does not change policy midway.

Both contestants of every paired comparison (method and target alone, ours and a library's) run
in one process under the same policy, so ratios stay fair either way; the policy is recorded with
the results. A value the user set always wins.
"""

from __future__ import annotations

import os
import sys

ENV = "OMP_WAIT_POLICY"

# What default_wait_policy saw: (load average, cores) when the machine was busy, else None.
_busy_seen: tuple[float, int] | None = None


def _gpu_visible() -> bool:
    # On a GPU node the CPU threads mostly idle; spinning would only burn the job's cores.
    cvd = os.environ.get("CUDA_VISIBLE_DEVICES")
    if cvd is not None:
        return cvd.strip() not in ("", "-1")
    return os.path.exists("/dev/nvidia0") or os.path.exists("/dev/kfd")


def machine_load() -> tuple[float, int] | None:
    """(1-minute load average, CPU count) of this machine; None where the OS has no load
    average (Windows). os.getloadavg, not psutil: this runs on every command before anything
    else is imported, and psutil's own getloadavg is this call on Unix."""
    try:
        return os.getloadavg()[0], os.cpu_count() or 1
    except (OSError, AttributeError):
        return None


def busy(load: tuple[float, int] | None) -> bool:
    """More runnable work than cores over the last minute: a spinning worker then loses its core
    to another process and every barrier waits for a scheduler slice."""
    return load is not None and load[0] > load[1]


def default_wait_policy(policy: str = "ACTIVE", load: tuple[float, int] | None | str = "read") -> str | None:
    """Set OMP_WAIT_POLICY unless the user set one, torch is already loaded (too late to matter)
    or a GPU is visible: `policy` on a quiet machine, PASSIVE on a busy one (busy()). `load`:
    the machine's (load average, cores), read here by default. Returns the policy in force
    (None: libgomp's default)."""
    global _busy_seen
    seen = machine_load() if load == "read" else load
    assert not isinstance(seen, str)
    _busy_seen = seen if busy(seen) else None
    if ENV not in os.environ and "torch" not in sys.modules and not _gpu_visible():
        os.environ[ENV] = "PASSIVE" if _busy_seen else policy
    return os.environ.get(ENV)


def busy_line() -> str | None:
    """The one line a run prints at its start on a busy machine (None on a quiet one)."""
    if _busy_seen is None:
        return None
    load, cores = _busy_seen
    policy = os.environ.get(ENV, "libgomp's default")
    return (f"this machine is busy: load average {load:.1f} over the last minute on {cores} cores; OpenMP threads "
            f"wait with OMP_WAIT_POLICY={policy}{' (yours)' if policy != 'PASSIVE' else ''}, and timings will be slower "
            "and noisier than on a quiet machine")


def describe() -> str:
    return os.environ.get(ENV, "default")


# -- the CPU fast paths' weight copies (decoding/cpu.py) -------------------------------------
# Declared here, without torch, so that the pre-check (settings/checks.check_environment) can
# refuse a wrong value before any model loads. What each mode does is decoding/cpu.py's.
PREPACK_ENV = "LOOSESPEC_CPU_PREPACK"
PREPACK_MODES = {
    "replace": "the oneDNN-packed copy replaces the stock weight of each decoder-layer linear (one copy in memory)",
    "beside": "the packed copy sits beside the stock weight, so the model computes stock outside the loop (two copies)",
    "off": "no packed copies: aten's kernels on the stock weights (slower)",
}
PREPACK_ALIASES = {"1": "beside", "0": "off"}  # the values the variable took before "replace" existed
PREPACK_DEFAULT = "replace"


def prepack_mode() -> str:
    """The mode LOOSESPEC_CPU_PREPACK asks for (PREPACK_MODES); ValueError for any other value."""
    raw = os.environ.get(PREPACK_ENV, PREPACK_DEFAULT).strip().lower()
    mode = PREPACK_ALIASES.get(raw, raw)
    if mode not in PREPACK_MODES:
        raise ValueError(f"{PREPACK_ENV}={raw!r} is not a prepacking mode; set it to one of "
                         f"{', '.join(PREPACK_MODES)} (or 1 = beside, 0 = off), or unset it ({PREPACK_DEFAULT})")
    return mode


def keep_stock_weights() -> str:
    """For a benchmark that runs one model both with and without the loop's fast paths (ours
    against transformers' generate(), fused against unfused): the stock weights must stay, so
    prepacking defaults to "beside" there. A value the user set wins. Returns the mode."""
    os.environ.setdefault(PREPACK_ENV, "beside")
    return prepack_mode()
