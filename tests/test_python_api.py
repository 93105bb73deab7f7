"""docs/python-api.md: the documented way to use the harness from Python (compose overrides,
run, read the summary) runs as written, in a fresh interpreter, on the tiny pair."""

from __future__ import annotations

import os
import subprocess
import sys

from .conftest import REPO, shared_data_dir


def _block() -> str:
    text = (REPO / "docs" / "python-api.md").read_text()
    (block,) = [b.split("\n", 1)[1] for b in text.split("```")[1::2] if b.startswith("python\n")]
    return block


def test_the_documented_python_api_runs(tmp_path):
    env = {**os.environ, "LOOSESPEC_DATA_DIR": str(shared_data_dir()), "LOOSESPEC_RESULTS_DIR": str(tmp_path),
           "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-c", _block()], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "tau (tokens per target step)" in done.stdout  # the end table
    (summary,) = (tmp_path / "smoke_tiny").glob("*/summary.json")
    assert '"n_samples": 2' in summary.read_text()
