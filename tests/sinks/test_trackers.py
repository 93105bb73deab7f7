"""Trackers never hurt a run: W&B offline leaves a syncable run under the run folder; any
tracker failure (invalid mode, package missing, exception inside the library) warns once,
turns the tracker off, and the run's local results are complete."""

from __future__ import annotations

import builtins
import inspect
import json
import re
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from loosespec_bench.run import app
from loosespec_bench.run.app import run, tracker_extras
from loosespec_bench.errors import ConfigError
from loosespec_bench.sinks.trackers import SafeTracker, TrackerWarning, build_tracker

from ..conftest import compose_config

TINY = [
    "experiment=smoke_tiny", "dataset.limit=2", "generation.max_new_tokens=10", "threads=1",
    # FLy without the window accepts unsure mismatches even between tiny random models, so the
    # run has loose accepts and FLy step records to log.
    "method=fly", "method.no_window=true", "method.theta=0.45", "drafter.k=3",
]
WANDB_FAST = ["logger=wandb", "logger.system_metrics=false"]


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """(results dir, run folder, summary, records) of one finished tiny FLy run."""
    results = tmp_path_factory.mktemp("results")
    summary = run(compose_config(TINY, results_dir=results))
    run_dir = Path(summary["run_dir"])
    records = [json.loads(line) for line in (run_dir / "samples.jsonl").read_text().splitlines()]
    return results, run_dir, summary, records


def _tracker_warnings(caught: list[warnings.WarningMessage]) -> list[warnings.WarningMessage]:
    return [w for w in caught if issubclass(w.category, TrackerWarning)]


def _drive(tracker: SafeTracker, cfg, run_dir: Path, summary: dict, records: list[dict]) -> None:
    """What app.run does with a tracker (see sinks/trackers.py), in order."""
    try:
        tracker.start(cfg, run_dir, run_dir.name)
        for rec in records:
            tracker.log_sample(rec)
        tracker.finish(summary, records)
    finally:
        tracker.close()


def _snapshot(run_dir: Path) -> dict[str, bytes]:
    return {name: (run_dir / name).read_bytes() for name in ("config.yaml", "samples.jsonl", "summary.json")}


def test_logger_none_builds_no_tracker():
    assert build_tracker(compose_config([])) is None
    assert build_tracker(compose_config(["logger=none"])) is None


def test_wandb_offline_leaves_a_syncable_run_in_the_run_folder(tiny_run):
    pytest.importorskip("wandb")
    _, run_dir, summary, records = tiny_run
    before = _snapshot(run_dir)
    cfg = compose_config([*TINY, *WANDB_FAST, "logger.log_steps=true"])
    assert cfg.logger.mode == "offline" and cfg.logger.group is None and not compose_config([*TINY, *WANDB_FAST]).logger.log_steps
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tracker = build_tracker(cfg, **tracker_extras(cfg))  # as app.run builds it: with the plotter
        assert isinstance(tracker, SafeTracker) and tracker.active
        _drive(tracker, cfg, run_dir, summary, records)
    assert not _tracker_warnings(caught), [str(w.message) for w in caught]
    assert tracker.active

    offline = list((run_dir / "wandb").glob("offline-run-*"))
    assert len(offline) == 1, offline
    wandb_file = list(offline[0].glob("run-*.wandb"))
    assert len(wandb_file) == 1 and wandb_file[0].stat().st_size > 0  # what `wandb sync` uploads
    files = offline[0] / "files"
    assert (files / "plots" / "acceptance_by_position.png").stat().st_size > 1000
    assert (files / "plots" / "fly_mismatch_entropy.png").stat().st_size > 1000
    # The transaction log holds the run's name, group, per-sample/per-step series and summary
    # (protobuf strings are stored as they are), and `wandb sync` recognises it as uploadable.
    data = wandb_file[0].read_bytes()
    for needle in (run_dir.name, "smoke_tiny", "sample/tau", "step/accepted", "tau_with_loose", "acceptance_by_position/1"):
        assert needle.encode() in data, needle
    dry = subprocess.run([sys.executable, "-m", "wandb", "sync", "--dry-run", str(offline[0])],
                         capture_output=True, text=True, timeout=120)
    assert dry.returncode == 0 and "Would sync 1 run" in dry.stdout + dry.stderr, dry.stdout + dry.stderr
    assert _snapshot(run_dir) == before  # the local results are untouched


def test_wandb_offline_resume_writes_one_runs_folders_with_steps_that_go_on(tiny_run, tmp_path, capsys):
    """A killed run resumed offline: a second offline folder under the same W&B id, its steps
    after the first's, and the end of the run prints one `wandb sync` naming both, in order."""
    pytest.importorskip("wandb")
    _, src, summary, records = tiny_run
    run_dir = tmp_path / src.name
    run_dir.mkdir()
    (run_dir / "config.yaml").write_bytes((src / "config.yaml").read_bytes())
    cfg = compose_config([*TINY, *WANDB_FAST, "logger.plots=false"])
    lines = (src / "samples.jsonl").read_text().splitlines(keepends=True)
    (run_dir / "samples.jsonl").write_text("")
    first = build_tracker(cfg)
    first.start(cfg, run_dir, run_dir.name)
    first.log_sample(records[0])
    (run_dir / "samples.jsonl").write_text(lines[0])
    first.close()  # the process ends before its summary
    second = build_tracker(cfg)
    _drive(second, cfg, run_dir, summary, records[1:])
    offline = sorted((run_dir / "wandb").glob("offline-run-*"))
    # offline-run-<date>_<time>-<id>, plus "-1" when both folders were made in the same second.
    ids = {re.fullmatch(r"offline-run-\d{8}_\d{6}-([^-]+)(?:-\d+)?", p.name).group(1) for p in offline}
    assert len(offline) == 2 and len(ids) == 1, offline  # one W&B id
    state = json.loads((run_dir / "wandb.json").read_text())
    assert state["folders"] == [str(p) for p in offline] and state["next_step"] == 3  # sample 0 | sample 1, table
    # The printed upload names the run's id, then both folders in order; W&B's own CLI takes it.
    printed = re.search(r"upload with `(wandb sync [^`]+)`", capsys.readouterr().out).group(1).split()
    assert printed[2:4] == ["--id", state["id"]] and printed[-2:] == [str(p) for p in offline]
    dry = subprocess.run([sys.executable, "-m", "wandb", "sync", "--dry-run", *printed[2:]],
                         capture_output=True, text=True, timeout=120)
    assert dry.returncode == 0, dry.stdout + dry.stderr


def test_wandb_offline_with_wandb_dir_writes_wandbs_files_there_not_into_the_run_folder(tiny_run, tmp_path, monkeypatch, capsys):
    """WANDB_DIR set: the offline run goes under $WANDB_DIR/wandb/ (W&B's own layout); the run
    folder keeps only its own files and wandb.json (the W&B id, next step, folders); the sync
    line printed at the end names the folder under WANDB_DIR."""
    pytest.importorskip("wandb")
    _, src, summary, records = tiny_run
    run_dir = tmp_path / src.name
    run_dir.mkdir()
    for name in ("config.yaml", "samples.jsonl", "summary.json"):
        (run_dir / name).write_bytes((src / name).read_bytes())
    home = tmp_path / "wandb_home"
    home.mkdir()
    monkeypatch.setenv("WANDB_DIR", str(home))
    monkeypatch.setenv("WANDB_MODE", "offline")
    cfg = compose_config([*TINY, *WANDB_FAST, "logger.plots=false"])
    _drive(build_tracker(cfg), cfg, run_dir, summary, [])
    offline = list((home / "wandb").glob("offline-run-*"))
    assert len(offline) == 1 and list(offline[0].glob("run-*.wandb")), list(home.rglob("*"))
    assert not (run_dir / "wandb").exists() and sorted(p.name for p in run_dir.iterdir()) == [
        "config.yaml", "samples.jsonl", "summary.json", "wandb.json"]
    assert re.search(rf"wandb sync --id \S+ .*{re.escape(str(offline[0]))}`", capsys.readouterr().out)


def test_invalid_mode_warns_once_and_turns_the_tracker_off(tiny_run):
    _, run_dir, summary, records = tiny_run
    cfg = compose_config([*TINY, *WANDB_FAST, "logger.mode=bogus"])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tracker = build_tracker(cfg)
        _drive(tracker, cfg, run_dir, summary, records)
    msgs = [str(w.message) for w in _tracker_warnings(caught)]
    assert len(msgs) == 1 and "bogus" in msgs[0] and "local results" in msgs[0], msgs
    assert tracker is not None and not tracker.active


def test_missing_wandb_package_warns_once(tiny_run, monkeypatch):
    _, run_dir, summary, records = tiny_run
    real_import = builtins.__import__

    def no_wandb(name, *args, **kwargs):
        if name == "wandb" or name.startswith("wandb."):
            raise ModuleNotFoundError("No module named 'wandb'", name="wandb")
        return real_import(name, *args, **kwargs)

    for mod in [m for m in sys.modules if m == "wandb" or m.startswith("wandb.")]:
        monkeypatch.delitem(sys.modules, mod)
    monkeypatch.setattr(builtins, "__import__", no_wandb)
    cfg = compose_config([*TINY, *WANDB_FAST])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tracker = build_tracker(cfg)
        _drive(tracker, cfg, run_dir, summary, records)
    msgs = [str(w.message) for w in _tracker_warnings(caught)]
    assert len(msgs) == 1 and "No module named 'wandb'" in msgs[0] and "start" in msgs[0], msgs
    assert not tracker.active


def test_exception_inside_wandb_on_log_warns_once_and_ends_the_wandb_run(tiny_run, monkeypatch):
    pytest.importorskip("wandb")
    _, run_dir, summary, records = tiny_run
    cfg = compose_config([*TINY, *WANDB_FAST])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tracker = build_tracker(cfg)
        tracker.start(cfg, run_dir, run_dir.name)
        wb = tracker.tracker
        finished = []
        real_finish = wb.run.finish
        monkeypatch.setattr(wb.run, "log", lambda *a, **k: (_ for _ in ()).throw(RuntimeError("upload exploded")))
        monkeypatch.setattr(wb.run, "finish", lambda exit_code=None: (finished.append(exit_code), real_finish(exit_code=exit_code)))
        for rec in records:
            tracker.log_sample(rec)
        tracker.finish(summary, records)
        tracker.close()
    msgs = [str(w.message) for w in _tracker_warnings(caught)]
    assert len(msgs) == 1 and "upload exploded" in msgs[0] and "log_sample" in msgs[0], msgs
    assert finished == [1]  # the half-logged W&B run was closed, marked failed


class Exploding:
    """A tracker whose every call raises (SystemExit included: a library may call sys.exit)."""

    def __init__(self, exc: BaseException) -> None:
        self.exc = exc
        self.calls: list[str] = []

    def _boom(self, name: str) -> None:
        self.calls.append(name)
        raise self.exc

    def start(self, cfg, run_dir, run_id):
        self._boom("start")

    def log_sample(self, record):
        self._boom("log_sample")

    def finish(self, summary, records):
        self._boom("finish")

    def close(self):
        self._boom("close")


@pytest.mark.parametrize("exc", [RuntimeError("no network"), PermissionError("bad API key"), SystemExit(3)])
def test_failing_tracker_never_stops_a_run(tmp_path, exc):
    """End to end: a run with a tracker that raises on every call completes with full local
    results and exactly one warning (the lead wires the tracker into app.run; until then this
    drives the SafeTracker the way app.run will)."""
    cfg = compose_config(TINY, results_dir=tmp_path)
    inner = Exploding(exc)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tracker = SafeTracker(inner, name="fake")
        summary = run(cfg)
        run_dir = Path(summary["run_dir"])
        records = [json.loads(line) for line in (run_dir / "samples.jsonl").read_text().splitlines()]
        _drive(tracker, cfg, run_dir, summary, records)
    msgs = [str(w.message) for w in _tracker_warnings(caught)]
    assert len(msgs) == 1 and "fake tracker failed in start" in msgs[0], msgs
    assert inner.calls == ["start", "close"]  # disabled after the first failure, then shut down quietly
    assert summary["n_samples"] == 2 and len(records) == 2
    assert json.loads((run_dir / "summary.json").read_text())["n_samples"] == 2


def test_keyboard_interrupt_is_not_swallowed():
    tracker = SafeTracker(Exploding(KeyboardInterrupt()), name="fake")
    with pytest.raises(KeyboardInterrupt):
        tracker.log_sample({})


@pytest.mark.skipif("build_tracker" not in inspect.getsource(app), reason="app.run does not use trackers yet")
def test_app_run_with_wandb_offline_and_with_a_broken_logger(tmp_path):
    """Once app.run calls the tracker: offline W&B lands in the run folder, and a broken logger
    costs one warning and nothing else."""
    pytest.importorskip("wandb")
    summary = run(compose_config([*TINY, *WANDB_FAST], results_dir=tmp_path / "ok"))
    assert list((Path(summary["run_dir"]) / "wandb").glob("offline-run-*/run-*.wandb"))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        # A tracker that cannot be built (here: its class is gone) is one warning, never a failed run.
        summary = run(compose_config([*TINY, *WANDB_FAST, "logger._target_=loosespec_bench.sinks.wandb.NoSuchTracker"],
                                     results_dir=tmp_path / "bad"))
    assert len(_tracker_warnings(caught)) == 1
    assert summary["n_samples"] == 2 and (Path(summary["run_dir"]) / "summary.json").exists()
    # A mode that is not one (WANDB_MODE=garbage) is a typo: refused before the run (issue 50).
    with pytest.raises(ConfigError, match="logger.mode='bogus'"):
        run(compose_config([*TINY, *WANDB_FAST, "logger.mode=bogus"], results_dir=tmp_path / "typo"))
    assert not (tmp_path / "typo").exists()


def test_a_hanging_tracker_call_is_abandoned_and_the_run_goes_on():
    import time

    class Sleepy:
        def __init__(self):
            self.logged = 0

        def start(self, cfg, run_dir, run_id):
            pass

        def log_sample(self, record):
            time.sleep(30)  # a network call that never answers

        def finish(self, summary, records):
            raise AssertionError("a disabled tracker is not called again")

        def close(self):
            raise AssertionError("a hung tracker is not closed from the harness thread")

    tracker = SafeTracker(Sleepy(), name="sleepy", timeout_s=0.2)
    t0 = time.monotonic()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tracker.start(None, Path("."), "run")
        tracker.log_sample({"id": "a"})
        tracker.log_sample({"id": "b"})
        tracker.finish({}, [])
        tracker.close()
    assert time.monotonic() - t0 < 5
    msgs = [str(w.message) for w in _tracker_warnings(caught)]
    assert len(msgs) == 1 and "log_sample" in msgs[0] and "abandoned" in msgs[0], msgs
    assert not tracker.active
