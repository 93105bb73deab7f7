"""omp.default_wait_policy: sets ACTIVE only where it can matter and nobody chose otherwise, and
PASSIVE on a busy machine (load average above the core count), which the run then says."""

from __future__ import annotations

import subprocess
import sys

import pytest

from loosespec_bench import omp


@pytest.fixture(autouse=True)
def _restore_what_omp_saw(monkeypatch):
    # default_wait_policy records the load it saw (busy_line reads it): each test's is undone.
    monkeypatch.setattr(omp, "_busy_seen", omp._busy_seen)


def test_user_setting_wins(monkeypatch):
    monkeypatch.setenv("OMP_WAIT_POLICY", "PASSIVE")
    assert omp.default_wait_policy() == "PASSIVE"


def test_too_late_once_torch_is_loaded(monkeypatch):
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    assert "torch" in sys.modules  # the test session has torch loaded
    assert omp.default_wait_policy() is None and omp.describe() == "default"


def test_gpu_machines_keep_libgomp_default(monkeypatch):
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    monkeypatch.setattr(sys, "modules", {k: v for k, v in sys.modules.items() if k != "torch"})
    assert omp.default_wait_policy() is None
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert omp.default_wait_policy(load=(0.0, 2)) == "ACTIVE"  # a quiet machine (a busy one: PASSIVE, below)


@pytest.mark.parametrize("load,expected", [((0.0, 0.0, 0.0), "ACTIVE"), ((64.0, 64.0, 64.0), "PASSIVE")])
def test_cli_process_chooses_before_torch(load, expected):
    # The machine's load is the one thing injected (os.getloadavg, read at import): quiet -> ACTIVE,
    # a load above any core count -> PASSIVE.
    code = ("import os; os.environ.pop('OMP_WAIT_POLICY', None); os.environ['CUDA_VISIBLE_DEVICES'] = ''\n"
            f"os.getloadavg = lambda: {load!r}; os.cpu_count = lambda: 2\n"
            "import loosespec_bench.__main__, sys; assert 'torch' not in sys.modules\n"
            "print(os.environ['OMP_WAIT_POLICY'])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == expected


@pytest.mark.parametrize("load,busy", [((2.0, 2), False), ((2.01, 2), True), ((7.0, 2), True), ((7.0, 16), False), (None, False)])
def test_busy_means_more_load_than_cores(load, busy):
    assert omp.busy(load) is busy


def test_a_busy_machine_gets_passive_and_a_line(monkeypatch):
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setattr(omp, "_gpu_visible", lambda: False)
    monkeypatch.setattr(sys, "modules", {k: v for k, v in sys.modules.items() if k != "torch"})
    assert omp.default_wait_policy(load=(7.3, 2)) == "PASSIVE"
    line = omp.busy_line()
    assert line is not None and "load average 7.3" in line and "on 2 cores" in line and "OMP_WAIT_POLICY=PASSIVE" in line
    monkeypatch.delenv("OMP_WAIT_POLICY")
    assert omp.default_wait_policy(load=(0.4, 2)) == "ACTIVE" and omp.busy_line() is None


def test_the_users_policy_wins_on_a_busy_machine_and_the_line_names_it(monkeypatch):
    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")
    assert omp.default_wait_policy(load=(9.0, 2)) == "ACTIVE"
    assert "OMP_WAIT_POLICY=ACTIVE (yours)" in omp.busy_line()
