"""omp.default_wait_policy: sets ACTIVE only where it can matter and nobody chose otherwise."""

from __future__ import annotations

import subprocess
import sys

from loosespec_bench import omp


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
    assert omp.default_wait_policy() == "ACTIVE"


def test_cli_process_gets_active_before_torch():
    code = ("import os; os.environ.pop('OMP_WAIT_POLICY', None); os.environ['CUDA_VISIBLE_DEVICES'] = ''\n"
            "import loosespec_bench.__main__, sys; assert 'torch' not in sys.modules\n"
            "print(os.environ['OMP_WAIT_POLICY'])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ACTIVE"
