"""Results survive a crash: killing a run and rerunning it resumes without duplicates."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from loosespec_bench.run.app import run
from loosespec_bench.store.run_folder import RunFolder

from ..conftest import REPO, compose_config, shared_data_dir

TINY = ["experiment=smoke_tiny", "warmup=false"]


def _ids(path: Path) -> list[str]:
    return [json.loads(line)["id"] for line in path.read_text().splitlines()]


def test_killed_run_resumes_without_duplicates_or_losses(tmp_path):
    args = [*TINY, "dataset.limit=5", "generation.max_new_tokens=160"]
    env = {**os.environ, "LOOSESPEC_DATA_DIR": str(shared_data_dir()), "LOOSESPEC_RESULTS_DIR": str(tmp_path), "PYTHONUNBUFFERED": "1"}
    cmd = [sys.executable, "-m", "loosespec_bench", *args, "progress=false"]
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.time() + 240
    samples = None
    while time.time() < deadline:  # wait until a sample is on disk, then kill without warning
        found = list((tmp_path / "smoke_tiny").glob("*/samples.jsonl"))
        if found and len(found[0].read_text().splitlines()) >= 1:
            samples = found[0]
            break
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    assert samples is not None and proc.poll() is None, "run finished before it could be killed; make samples longer"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    before = _ids(samples)
    kept = {json.loads(line)["id"]: line for line in samples.read_text().splitlines()}
    assert 1 <= len(before) < 5
    assert not (samples.parent / "summary.json").exists()

    again = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr
    assert f"{len(before)} already done" in again.stdout
    after = _ids(samples)
    assert len(after) == len(set(after)) == 5
    assert after[: len(before)] == before  # finished work is never redone or rewritten
    for line in samples.read_text().splitlines()[: len(before)]:
        assert kept[json.loads(line)["id"]] == line
    summary = json.loads((samples.parent / "summary.json").read_text())
    assert summary["n_samples"] == 5


def test_partial_last_line_is_dropped_and_redone(tmp_path):
    cfg = compose_config([*TINY, "dataset.limit=3"], results_dir=tmp_path)
    first = run(cfg)
    folder = Path(first["run_dir"])
    lines = (folder / RunFolder.SAMPLES).read_text().splitlines(keepends=True)
    # Simulate a kill in the middle of writing the third record.
    (folder / RunFolder.SAMPLES).write_text("".join(lines[:2]) + lines[2][: len(lines[2]) // 2])
    second = run(cfg)
    ids = _ids(folder / RunFolder.SAMPLES)
    assert ids == [json.loads(ln)["id"] for ln in lines]
    assert second["n_samples"] == 3
    assert second["tau"] == first["tau"]


def test_a_re_pass_with_nothing_to_run_keeps_the_runs_provenance(tmp_path):
    cfg = compose_config([*TINY, "dataset.limit=2"], results_dir=tmp_path)
    first = run(cfg)
    path = Path(first["run_dir"]) / RunFolder.SUMMARY
    produced = json.loads(path.read_text())
    # a stored figure that no longer matches its samples (say, a summary written by an older
    # harness) is recomputed ...
    produced.update(date="2026-01-01T00:00:00+00:00", git_commit="0" * 40, cpu_signature="the machine that ran it", tau=-1.0)
    path.write_text(json.dumps(produced))
    again = run(cfg)
    kept = json.loads(path.read_text())
    # ... but when, at which commit and on which CPU the samples were produced stay the run's own ...
    assert (kept["date"], kept["git_commit"], kept["cpu_signature"]) == (produced["date"], "0" * 40, "the machine that ran it")
    # ... and the recomputation is recorded beside them
    assert kept["summary_recomputed"]["date"] != produced["date"] and kept["tau"] == again["tau"] == first["tau"]


def test_a_re_pass_whose_figures_come_out_the_same_leaves_the_summary_untouched(tmp_path):
    cfg = compose_config([*TINY, "dataset.limit=2"], results_dir=tmp_path)
    path = Path(run(cfg)["run_dir"]) / RunFolder.SUMMARY
    text = path.read_text()
    path.write_text(text.replace('"date": "', '"date": "1999', 1))  # another day's run, same figures
    stored = path.read_text()
    again = run(cfg)
    assert path.read_text() == stored and "summary_recomputed" not in json.loads(stored)
    assert again["tau"] == json.loads(stored)["tau"]


def test_record_contents(tmp_path):
    summary = run(compose_config([*TINY, "dataset.limit=2"], results_dir=tmp_path))
    folder = Path(summary["run_dir"])
    assert (folder / "config.yaml").exists() and (folder / "summary.json").exists()
    rec = json.loads((folder / "samples.jsonl").read_text().splitlines()[0])
    for key in ("id", "prompt_text", "prompt_ids", "output_text", "output_ids", "metrics", "score", "baseline", "steps"):
        assert key in rec, key
    assert rec["prompt_text"].startswith("<|im_start|>user\n")  # the chat template was applied
    m = rec["metrics"]
    assert m["new_tokens"] == len(rec["output_ids"]) and m["steps"] == len(rec["steps"])
    assert sum(m["accepted"]) + m["steps"] >= m["new_tokens"]  # +1 per step, less any EOS cut
    assert m["tau"] == m["new_tokens"] / m["steps"]
    assert rec["baseline"]["output_ids"] == rec["output_ids"]  # lossless in fp32
    assert summary["identical_to_target"] == 1.0
    assert summary["speedup"] is not None and "paired per sample" in summary["speedup_method"]
    assert len(summary["acceptance_by_position"]) == 5


def _start(cmd: list[str], env: dict[str, str], ignore_sigint: bool) -> subprocess.Popen:
    # ignore_sigint: as a non-interactive shell's `cmd &` starts a job (SIGINT inherited ignored).
    pre = (lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)) if ignore_sigint else None
    return subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=pre)


@pytest.mark.parametrize("signum, ignore_sigint", [(signal.SIGINT, False), (signal.SIGTERM, False), (signal.SIGINT, True)],
                         ids=["sigint", "sigterm", "sigint-background-job"])
def test_a_signal_during_a_run_ends_with_one_line_keeps_the_finished_records_and_the_command_resumes(tmp_path, signum, ignore_sigint):
    """Issue 74 item 5, through the real command line on the tiny pair: Ctrl-C or a plain `kill`
    after the first finished sample ends the run with one line naming what is kept (exit 128 +
    the signal, no traceback), every finished record stays as it was written, no summary is
    written, and the same command resumes from them to the full set."""
    args = [*TINY, "dataset.limit=5", "generation.max_new_tokens=160", "progress=false"]
    env = {**os.environ, "LOOSESPEC_DATA_DIR": str(shared_data_dir()), "LOOSESPEC_RESULTS_DIR": str(tmp_path), "PYTHONUNBUFFERED": "1"}
    cmd = [sys.executable, "-m", "loosespec_bench", *args]
    proc = _start(cmd, env, ignore_sigint)
    deadline, samples = time.time() + 240, None
    try:
        while time.time() < deadline:  # a finished sample on disk, then the signal
            found = list((tmp_path / "smoke_tiny").glob("*/samples.jsonl"))
            if found and found[0].read_text().count("\n") >= 1:
                samples = found[0]
                break
            if proc.poll() is not None:
                break
            time.sleep(0.05)
        assert samples is not None and proc.poll() is None, "the run finished before the signal; make samples longer"
        proc.send_signal(signum)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 128 + signum, err
    assert "Traceback" not in err, err
    last = err.strip().splitlines()[-1]
    kept = samples.read_text().splitlines(keepends=True)
    finished = [ln for ln in kept if ln.endswith("\n")]
    assert last == (f"stopped ({signal.Signals(signum).name}): the {len(finished)} finished sample record(s) are kept in "
                    f"{samples.parent}; rerun the same command to resume from them"), err
    assert 1 <= len(finished) < 5 and not (samples.parent / "summary.json").exists()

    again = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr
    assert f"{len(finished)} already done" in again.stdout
    lines = samples.read_text().splitlines(keepends=True)
    assert lines[: len(finished)] == finished  # kept records are never rewritten or redone
    assert len({json.loads(ln)["id"] for ln in lines}) == len(lines) == 5
    assert json.loads((samples.parent / "summary.json").read_text())["n_samples"] == 5


def test_a_run_stopped_before_its_first_sample_leaves_no_run_folder(tmp_path, monkeypatch, capsys):
    """A stop while the first sample runs (the folder new, nothing finished): no run folder is
    kept, and the line says so."""
    from loosespec_bench.run import app

    def stopped(self, sample, index):
        raise KeyboardInterrupt(signal.SIGTERM)

    monkeypatch.setattr(app.Runner, "run_sample", stopped)
    handler = signal.getsignal(signal.SIGTERM)
    cfg = compose_config([*TINY, "dataset.limit=2"], results_dir=tmp_path)
    with pytest.raises(SystemExit) as exc:
        app.run_recording_errors(cfg)
    assert exc.value.code == 128 + signal.SIGTERM
    assert capsys.readouterr().err.strip().endswith("stopped (SIGTERM): no sample had finished, no run folder is kept; "
                                                    "rerun the same command to start again")
    assert not (tmp_path / "smoke_tiny").exists()
    assert signal.getsignal(signal.SIGTERM) == handler  # the handler found is put back
