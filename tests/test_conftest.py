"""The suite's own tools in tests/conftest.py: the per-test CPU record (LOOSESPEC_TEST_CPU)."""

from __future__ import annotations

import subprocess
import sys
import time
from types import SimpleNamespace

from loosespec_bench.safe_files import read_text

from . import conftest


def _busy(seconds: float) -> None:
    """Spend about `seconds` of this process's CPU time."""
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass


def test_cpu_record_counts_this_process_and_the_children_it_waited_for(tmp_path, monkeypatch):
    out = tmp_path / "cpu.tsv"
    monkeypatch.setenv("LOOSESPEC_TEST_CPU", str(out))
    item = SimpleNamespace(nodeid="tests/x.py::test_y[a b]")
    # The hook as pytest drives a hookwrapper: up to its yield, the test, then the rest.
    gen = conftest.pytest_runtest_protocol(item, None)
    next(gen)
    _busy(0.3)
    subprocess.run([sys.executable, "-c", "import time\nend = time.process_time() + 0.4\nwhile time.process_time() < end: pass"],
                   check=True)
    try:
        next(gen)
    except StopIteration:
        pass
    (line,) = read_text(out).splitlines()
    nodeid, own, kids = line.split("\t")
    assert nodeid == item.nodeid
    assert 0.3 <= float(own) < 5 and 0.4 <= float(kids) < 5, line


def test_cpu_record_writes_nothing_unless_asked(tmp_path, monkeypatch):
    monkeypatch.delenv("LOOSESPEC_TEST_CPU", raising=False)
    monkeypatch.chdir(tmp_path)
    gen = conftest.pytest_runtest_protocol(SimpleNamespace(nodeid="t"), None)
    next(gen)
    try:
        next(gen)
    except StopIteration:
        pass
    assert list(tmp_path.iterdir()) == []
