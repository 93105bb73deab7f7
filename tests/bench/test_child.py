"""bench/child.watch: the one wait loop of the memory and busy benches."""

from __future__ import annotations

import subprocess
import sys

from loosespec_bench.bench.child import watch


def test_watch_calls_back_while_the_child_runs_and_returns_its_status_and_cpu():
    calls = []
    proc = subprocess.Popen([sys.executable, "-c", "import time, sys; t = time.time()\nwhile time.time() - t < 0.5: pass\nsys.exit(3)"])
    ended = watch(proc, 0.05, lambda: calls.append(1))
    assert ended.exit == 3 == proc.returncode and not ended.cut
    assert len(calls) >= 3 and ended.wall_s >= 0.5
    assert ended.usage.ru_utime + ended.usage.ru_stime > 0.2  # its own CPU seconds (it spun)


def test_watch_kills_a_child_past_its_time_limit():
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    ended = watch(proc, 0.05, timeout=0.3)
    assert ended.cut and ended.exit == -9 and ended.wall_s < 10
