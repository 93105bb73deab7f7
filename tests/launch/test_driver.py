"""launch/driver.py: a plan's launch writes its logs and skip lists only through the safe-file gate.
(Its budget line, its skip lists and its Ctrl-C are tested with real plans in tests/test_plan_dedup.py
and tests/test_interrupts.py.)"""

from __future__ import annotations

import sys

import pytest

from loosespec_bench.errors import ConfigError
from loosespec_bench.launch import driver
from loosespec_bench.launch.jobs import Job, Sweep


def _sweep(tmp_path, owner: Job | None = None) -> Sweep:
    job = Job(sweep="exp", index=0, overrides=[], folder=tmp_path / "results" / "exp" / "rid", gpus=0, samples=2,
              samples_exact=True, tokens=10.0, hours=0.5, paired=False, method="spd", pair="tiny", dataset="gsm8k",
              run_id="rid", owner=owner)
    later = Job(sweep="exp", index=1, overrides=[], folder=tmp_path / "results" / "exp" / "rid2", gpus=0, samples=2,
                samples_exact=True, tokens=10.0, hours=0.5, paired=False, method="spd", pair="tiny", dataset="gsm8k",
                run_id="rid2")
    return Sweep(experiment="exp", command=[sys.executable, "-c", "pass"], launcher="BasicLauncher", gpus=0,
                 timeout_min=None, max_requeue=0, jobs=[job, later])


@pytest.mark.parametrize("name", ["exp.log", "exp.skip"])
def test_a_log_or_skip_list_that_is_a_link_is_refused_and_its_target_untouched(tmp_path, monkeypatch, name):
    started = []
    monkeypatch.setattr(driver.subprocess, "Popen", lambda *a, **k: started.append(a))
    outside = tmp_path / "outside.txt"
    outside.write_text("keep me\n")
    logs = tmp_path / "launch"
    logs.mkdir()
    (logs / name).symlink_to(outside)
    # The skip list is written only where a point is left out: the first point run by another sweep.
    other = _sweep(tmp_path).jobs[0]
    sweep = _sweep(tmp_path, owner=other if name.endswith(".skip") else None)
    with pytest.raises(ConfigError, match="symbolic link"):
        driver.launch([sweep], sequential=True, log_dir=logs)
    assert outside.read_text() == "keep me\n" and started == []


def test_a_plain_launch_appends_its_driver_log(tmp_path, monkeypatch, capsys):
    class Done:
        def __init__(self, command, stdout=None, **kw):
            stdout.write(b"driver output\n")

        def wait(self):
            return 0

    monkeypatch.setattr(driver.subprocess, "Popen", Done)
    logs = tmp_path / "launch"
    for _ in range(2):  # a relaunch into the same folder appends
        assert driver.launch([_sweep(tmp_path)], sequential=True, log_dir=logs) == 0
    assert (logs / "exp.log").read_text() == "driver output\n" * 2
    assert "budget: 2 points, 0 done, 2 to run" in capsys.readouterr().out
