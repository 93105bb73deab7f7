"""bench/busy.py: a run's CPU seconds come from wait4, its busy line and named policy are read
back, a run past the timeout is cut and said so; bad arguments are one usage error."""

from __future__ import annotations

import sys

import pytest

from loosespec_bench.bench import busy

SAYS_BUSY = ("import sys, time\n"
             "t = time.process_time()\n"
             "while time.process_time() - t < 0.3: pass\n"
             "print('[loosespec_bench] this machine is busy: load average 7.2 over the last minute on 2 cores; OpenMP threads "
             "wait with OMP_WAIT_POLICY=PASSIVE, and timings will be slower', file=sys.stderr)\n")


def test_a_run_gives_its_own_cpu_seconds_and_the_policy_it_said(tmp_path):
    row = busy.one_run([sys.executable, "-c", SAYS_BUSY], "auto", True, 60.0, tmp_path, "t")
    assert row["exit"] == 0 and not row["cut"]
    assert row["cpu_s"] >= 0.3  # its own spin, from wait4's rusage
    assert row["said_busy"] and row["policy_said"] == "PASSIVE"
    assert 0.0 <= row["others_share"] <= 1.0


def test_a_run_past_the_timeout_is_cut(tmp_path):
    row = busy.one_run([sys.executable, "-c", "import time; time.sleep(30)"], "ACTIVE", False, 0.5, tmp_path, "t")
    assert row["cut"] and row["wall_s"] < 10 and not row["said_busy"]


@pytest.mark.parametrize("argv, says", [(["--policies", "SPIN"], "--policies"), (["--hogs", "0"], "--hogs"), (["--timeout", "nan"], "--timeout")])
def test_bad_arguments_are_one_usage_error(argv, says, capsys):
    with pytest.raises(SystemExit) as stop:
        busy.main(argv)
    assert stop.value.code == 2 and says in capsys.readouterr().err
