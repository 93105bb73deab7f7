"""Waiting for a bench's child command while doing something at each interval: the memory bench
samples the child's process tree, the busy bench cuts a run that passes its time limit. One loop
for both; os.wait4, not Popen.wait, so that the child's own CPU seconds come back with it."""

from __future__ import annotations

import os
import subprocess
import time
from dataclasses import dataclass
from typing import Any, Callable


@dataclass
class Ended:
    """How a watched child ended."""

    exit: int  # its exit status, or minus the signal that ended it
    usage: Any  # wait4's resource usage (ru_utime + ru_stime: its CPU seconds)
    cut: bool  # killed here for passing `timeout`
    wall_s: float


def watch(proc: subprocess.Popen, interval: float, each: Callable[[], None] | None = None,
          timeout: float | None = None) -> Ended:
    """Wait for `proc` to end, calling `each` every `interval` seconds while it runs and killing
    it once it has run `timeout` seconds."""
    start = time.monotonic()
    cut = False
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        if timeout is not None and not cut and time.monotonic() - start > timeout:
            proc.kill()
            cut = True
        if each is not None:
            each()
        time.sleep(interval)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return Ended(proc.returncode, usage, cut, time.monotonic() - start)
