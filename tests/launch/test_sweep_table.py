"""A `-m` sweep ends with one table of its points (loosespec_bench/launch/sweep_table.py, a Hydra
callback): one row per point with the overrides that tell it apart, tau, speedup, the quality
figure with its count and interval, and n; written into the sweep folder as sweep_summary.md
and sweep_summary.csv; the points that did not finish are listed, also when the sweep failed."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

from omegaconf import OmegaConf

from loosespec_bench.launch.sweep_table import CSV, MARKDOWN, POINT, SweepTable, report

from ..conftest import REPO, shared_data_dir


def test_a_two_point_sweep_ends_with_one_table_and_writes_it_into_the_sweep_folder(tmp_path):
    env = {**os.environ, "LOOSESPEC_DATA_DIR": str(shared_data_dir()), "LOOSESPEC_RESULTS_DIR": str(tmp_path)}
    proc = subprocess.run([sys.executable, "-m", "loosespec_bench", "-m", "experiment=smoke_tiny", "dataset.limit=2",
                           "drafter.k=2,3", "progress=false"], cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (sweep,) = [p.parent for p in (tmp_path / "_hydra" / "multirun").glob(f"*/*/{MARKDOWN}")]
    out = proc.stdout[proc.stdout.index("sweep of 2 point(s), 2 finished, 0 not"):]
    assert str(sweep) in out and "every point: experiment=smoke_tiny dataset.limit=2" in out
    lines = out.splitlines()
    header = next(ln for ln in lines if ln.startswith("#  point"))
    assert header.split() == ["#", "point", "tau", "speedup", "accuracy", "n"]
    for job, k in ((0, 2), (1, 3)):
        row = next(ln for ln in lines if ln.startswith(f"{job}  drafter.k={k} "))
        summary = json.loads((Path(json.loads((sweep / str(job) / POINT).read_text())["run_folder"]) / "summary.json").read_text())
        assert f"{summary['tau']:.2f} [" in row and f"{summary['speedup']:.2f}× [" in row and row.endswith("  2")
        assert f"{summary['quality_counts']['correct']}/2 = {summary['accuracy']:.3f} [" in row
    assert "drafter.k=3 |" in (sweep / MARKDOWN).read_text()
    rows = list(csv.DictReader((sweep / CSV).open()))
    assert [r["status"] for r in rows] == ["COMPLETED"] * 2 and rows[1]["quality_n"] == "2" and rows[1]["n_samples"] == "2"
    assert "drafter.k=3" in rows[1]["overrides"] and rows[1]["run_folder"].startswith(str(tmp_path / "smoke_tiny"))


def _job(sweep: Path, num: int, overrides: list[str], point: dict | None) -> None:
    (sweep / str(num) / ".hydra").mkdir(parents=True)
    (sweep / str(num) / ".hydra" / "overrides.yaml").write_text("".join(f"- {o}\n" for o in overrides))
    if point is not None:
        (sweep / str(num) / POINT).write_text(json.dumps({"job": str(num), "overrides": overrides, **point}))


def _failed_sweep(tmp_path: Path) -> Path:
    sweep = tmp_path / "_hydra" / "multirun" / "2026-12-04" / "10-00-00"
    run = tmp_path / "default" / "spd_k2"
    run.mkdir(parents=True)
    (run / "summary.json").write_text(json.dumps({
        "tau": 2.5, "tau_ci_low": 2.0, "tau_ci_high": 3.0, "speedup": 1.4, "speedup_ci_low": 1.1, "speedup_ci_high": 1.7,
        "accuracy": 13 / 30, "accuracy_ci_low": 0.255, "accuracy_ci_high": 0.626, "quality_figure": "accuracy",
        "quality_counts": {"n": 30, "correct": 13}, "n_samples": 30}))
    _job(sweep, 0, ["method=spd", "drafter.k=2"], {"status": "COMPLETED", "run_folder": str(run), "error": None})
    _job(sweep, 1, ["method=spd", "drafter.k=3"], {"status": "FAILED", "run_folder": str(tmp_path / "default" / "spd_k3"),
                                                   "error": "RuntimeError: out of memory"})
    _job(sweep, 2, ["method=spd", "drafter.k=4"], None)  # killed: no point.json
    return sweep


def test_a_failed_sweep_lists_the_points_that_finished_and_the_ones_that_did_not(tmp_path, capsys):
    sweep = _failed_sweep(tmp_path)
    text = report(sweep)
    assert text in capsys.readouterr().out  # printed as returned
    assert "sweep of 3 point(s), 1 finished, 2 not" in text and "every point: method=spd" in text
    row = next(ln for ln in text.splitlines() if ln.startswith("0  drafter.k=2"))
    assert "2.50 [2.00, 3.00]" in row and "1.40× [1.10, 1.70]" in row and "13/30 = 0.433 [0.255, 0.626]" in row
    assert "1 drafter.k=3: failed: RuntimeError: out of memory (see " + str(tmp_path / "default" / "spd_k3" / "error.txt") in text
    assert "2 drafter.k=4: not finished" in text
    assert max(len(ln) for ln in text.splitlines() if not ln.startswith(("sweep of", "  1 "))) <= 100
    rows = list(csv.DictReader((sweep / CSV).open()))
    assert [r["status"] for r in rows] == ["COMPLETED", "FAILED", "not finished"]
    assert rows[0]["quality_correct"] == "13" and rows[1]["error"] == "RuntimeError: out of memory"
    assert "Did not finish" in (sweep / MARKDOWN).read_text()


def test_the_callback_prints_at_exit_when_hydra_never_reached_the_sweeps_end(tmp_path, capsys):
    sweep = _failed_sweep(tmp_path)
    callback = SweepTable()
    callback.on_multirun_start(OmegaConf.create({"hydra": {"sweep": {"dir": str(sweep)}}}))
    callback._at_exit()  # what atexit runs after Hydra raised the failed point
    assert "1 finished, 2 not" in capsys.readouterr().out
    callback._at_exit()
    assert capsys.readouterr().out == ""  # once
    callback.on_multirun_start(OmegaConf.create({"hydra": {"sweep": {"dir": str(sweep)}}}))
    callback.on_multirun_end(OmegaConf.create({"hydra": {"sweep": {"dir": str(sweep)}}}))
    callback._at_exit()
    assert capsys.readouterr().out.count("sweep of 3 point(s)") == 1  # the sweep's end printed it; exit adds nothing
