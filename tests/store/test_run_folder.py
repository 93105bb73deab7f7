"""One writer per run folder (the lock), atomic writes, resume keyed on the prompt's content,
and readers that skip what they cannot read instead of failing."""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from loosespec_bench.store import run_folder as rf
from loosespec_bench.run.app import run
from loosespec_bench.errors import ConfigError
from loosespec_bench.store.run_folder import FolderLocked, RunFolder

from ..conftest import REPO, compose_config, shared_data_dir

TINY = ["experiment=smoke_tiny", "warmup=false"]


def _ids(path: Path) -> list[str]:
    return [json.loads(line)["id"] for line in path.read_text().splitlines()]


# -- the lock ---------------------------------------------------------------------------------
def test_lock_is_exclusive_and_names_the_holder(tmp_path):
    first = RunFolder(tmp_path / "run")
    first.lock("run")
    second = RunFolder(tmp_path / "run")
    with pytest.raises(FolderLocked) as err:
        second.lock("re-score")
    msg = str(err.value)
    assert str(tmp_path / "run") in msg and f"pid {os.getpid()}" in msg and "(run," in msg
    assert isinstance(err.value, ConfigError)  # printed by the CLIs as one `error:` line
    first.close()
    second.lock("re-score")  # free again once the holder closed the folder
    second.close()


def test_lock_of_a_killed_process_is_released(tmp_path):
    """kill -9 leaves .lock on disk, but the OS drops the flock: a rerun may take the folder."""
    folder = tmp_path / "run"
    code = (
        "import sys, time\n"
        "from loosespec_bench.store.run_folder import RunFolder\n"
        "RunFolder(sys.argv[1]).lock('run')\n"
        "print('locked', flush=True)\n"
        "time.sleep(120)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code, str(folder)], cwd=REPO, stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "locked"
        with pytest.raises(FolderLocked, match=f"pid {proc.pid} on "):
            RunFolder(folder).lock("run")
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    again = RunFolder(folder)
    again.lock("run")
    again.close()


def test_a_requeued_slurm_job_waits_for_its_previous_attempt(tmp_path, monkeypatch, caplog):
    """Slurm may start a requeued job while its old step still writes (a node marked DOWN whose
    slurmd lives on kills it only at KillWait): the new attempt (same SLURM_JOB_ID) waits for the
    old one's lock instead of failing, and resumes after it; the folder keeps one writer."""
    monkeypatch.setenv("SLURM_JOB_ID", "7")
    monkeypatch.setenv("SLURMD_NODENAME", "n1")
    old = RunFolder(tmp_path / "run")
    old.lock("run")
    old.append({"id": "a", "output_text": "x", "metrics": {}})
    assert "Slurm job 7 on node n1" in (RunFolder(tmp_path / "run").holder() or "")

    def old_step_writes_then_dies() -> None:
        time.sleep(1.0)
        old.append({"id": "b", "output_text": "y", "metrics": {}})  # still writing while the new one waits
        old.close()

    threading.Thread(target=old_step_writes_then_dies).start()
    new = RunFolder(tmp_path / "run")
    start = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="loosespec_bench.store.run_folder"):
        new.lock("run")
    assert time.monotonic() - start >= 0.9
    assert [r["id"] for r in new.records()] == ["a", "b"]  # read after the old writer is gone
    assert "previous attempt" in caplog.text and "resuming" in caplog.text
    new.close()


def test_another_slurm_job_is_refused_at_once_and_a_stuck_attempt_after_the_wait(tmp_path, monkeypatch):
    monkeypatch.setenv("SLURM_JOB_ID", "7")
    holder = RunFolder(tmp_path / "run")
    holder.lock("run")
    monkeypatch.setenv("SLURM_JOB_ID", "8")  # another job (a second launch of the same point): no wait
    start = time.monotonic()
    with pytest.raises(FolderLocked, match="wait for it to finish"):
        RunFolder(tmp_path / "run").lock("run")
    assert time.monotonic() - start < 0.5
    monkeypatch.setenv("SLURM_JOB_ID", "7")  # its own previous attempt that never lets go
    with pytest.raises(FolderLocked, match=r"job 7's previous attempt still holds it after 1 s.*squeue -j 7"):
        RunFolder(tmp_path / "run").lock("run", requeue_wait_s=1.0)
    holder.close()


# -- atomic writes ----------------------------------------------------------------------------
def test_atomic_writes_use_unique_temp_names(tmp_path, monkeypatch):
    sources: list[str] = []
    real_replace = os.replace

    def spy(src, dst):
        sources.append(str(src))
        real_replace(src, dst)

    monkeypatch.setattr(rf.os, "replace", spy)
    folder = RunFolder(tmp_path)
    folder.write_summary({"a": 1})
    folder.write_summary({"a": 2})
    assert len(sources) == 2 and sources[0] != sources[1]
    assert all(Path(s).parent == tmp_path and Path(s).name.startswith(".summary.json.") for s in sources)
    assert json.loads((tmp_path / "summary.json").read_text()) == {"a": 2}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["summary.json"]  # no temp file left


def test_concurrent_atomic_writes_never_tear(tmp_path):
    folder = RunFolder(tmp_path)
    texts = {i: {"writer": i, "pad": "x" * 20_000} for i in range(8)}
    errors: list[BaseException] = []

    def write(i: int) -> None:
        try:
            for _ in range(5):
                folder.write_summary(texts[i])
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=write, args=(i,)) for i in texts]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert json.loads((tmp_path / "summary.json").read_text()) in texts.values()


# -- two writers on one folder ----------------------------------------------------------------
def test_second_run_and_rescore_of_a_running_folder_are_refused(tmp_path, capsys):
    """While a run is writing, a second identical run and a re-score fail at once with one
    `error:` line naming the holder; the first run then finishes with nothing lost."""
    from loosespec_bench import score

    args = [*TINY, "dataset.limit=5", "generation.max_new_tokens=160"]
    env = {**os.environ, "LOOSESPEC_DATA_DIR": str(shared_data_dir()), "LOOSESPEC_RESULTS_DIR": str(tmp_path),
           "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-m", "loosespec_bench", *args, "progress=false"], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 240
        samples = None
        while time.time() < deadline:
            found = list((tmp_path / "smoke_tiny").glob("*/samples.jsonl"))
            if found and found[0].read_text().count("\n") >= 1:
                samples = found[0]
                break
            if proc.poll() is not None:
                break
            time.sleep(0.05)
        assert samples is not None and proc.poll() is None, "run finished before the test could overlap it"

        with pytest.raises(FolderLocked, match=f"in use by pid {proc.pid} on .*run,"):
            run(compose_config(args, results_dir=tmp_path))
        assert score.main([str(samples.parent)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("error: ") and str(samples.parent) in err[0]
        assert f"pid {proc.pid}" in err[0] and "re-score" not in err[0]
        assert proc.poll() is None or proc.returncode == 0
        out, errtext = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, errtext
    ids = _ids(samples)
    assert len(ids) == len(set(ids)) == 5
    assert json.loads((samples.parent / "summary.json").read_text())["n_samples"] == 5
    assert not (samples.parent / "error.txt").exists()  # the refused start left no verdict
    assert not list(samples.parent.glob("*.bak-*"))  # and the refused re-score rewrote nothing


# -- resume keyed on the prompt ---------------------------------------------------------------
def test_resume_does_not_reuse_a_record_from_a_changed_prompt(tmp_path, caplog):
    data = tmp_path / "data"
    shutil.copytree(shared_data_dir() / "mgsm", data / "mgsm")
    results = tmp_path / "results"
    cfg = [*TINY, "dataset=mgsm", "dataset.limit=2", f"paths.data_dir={data}"]
    first = run(compose_config(cfg, results_dir=results))
    folder = Path(first["run_dir"])
    old = [json.loads(line) for line in (folder / RunFolder.SAMPLES).read_text().splitlines()]
    assert all(len(r["prompt_sha256"]) == 64 for r in old)

    tsv = data / "mgsm" / "mgsm_en.tsv"
    lines = tsv.read_text(encoding="utf-8").splitlines(keepends=True)
    row = int(old[0]["id"].rsplit("-", 1)[1])  # the first sample's problem (the seeded selection's)
    question, answer = lines[row].rstrip("\n").split("\t")
    lines[row] = f"A hen lays 3 eggs a day. How many eggs in 4 days?\t{answer}\n"
    tsv.write_text("".join(lines), encoding="utf-8")

    with caplog.at_level(logging.WARNING):
        second = run(compose_config(cfg, results_dir=results))
    assert second["run_dir"] == first["run_dir"]  # the run id leaves the data out: same folder
    stale_id = old[0]["id"]
    assert any(repr(stale_id) in m and "different prompt" in m for m in caplog.messages)
    new = {json.loads(line)["id"]: json.loads(line) for line in (folder / RunFolder.SAMPLES).read_text().splitlines()}
    assert len(new) == 2
    assert "A hen lays 3 eggs" in new[stale_id]["prompt_text"] and question not in new[stale_id]["prompt_text"]
    assert new[stale_id]["prompt_sha256"] != old[0]["prompt_sha256"]
    assert new[old[1]["id"]] == old[1]  # the unchanged sample is reused as it was
    (backup,) = folder.glob("samples.jsonl.bak-*")  # the stale answer is kept, out of the way
    assert stale_id in backup.read_text()


# -- tolerant readers -------------------------------------------------------------------------
def _damage(samples: Path) -> list[str]:
    """Line 2 made unreadable, the last record cut off mid-line; returns the original lines."""
    lines = samples.read_text().splitlines(keepends=True)
    assert len(lines) == 3
    samples.write_text(lines[0] + "{not json\n" + lines[2] + lines[1][: len(lines[1]) // 2])
    return lines


def test_resume_skips_unreadable_lines_with_a_warning(tmp_path, caplog):
    cfg = compose_config([*TINY, "dataset.limit=3"], results_dir=tmp_path)
    first = run(cfg)
    samples = Path(first["run_dir"]) / RunFolder.SAMPLES
    lines = _damage(samples)
    with caplog.at_level(logging.WARNING):
        second = run(cfg)
    assert any(f"{samples} line 2: unreadable" in m for m in caplog.messages)
    assert any(f"{samples} line 4: cut off" in m for m in caplog.messages)
    assert second["n_samples"] == 3 and second["tau"] == first["tau"]
    assert sorted(r["id"] for r in RunFolder(samples.parent).records()) == sorted(json.loads(ln)["id"] for ln in lines)


def test_rescore_and_index_skip_unreadable_lines_and_broken_folders(tmp_path, caplog, capsys):
    from loosespec_bench import score
    from loosespec_bench.report.__main__ import main as report_main
    from loosespec_bench.report.index import load_index

    first = run(compose_config([*TINY, "dataset.limit=3"], results_dir=tmp_path))
    folder = Path(first["run_dir"])
    _damage(folder / RunFolder.SAMPLES)
    capsys.readouterr()
    with caplog.at_level(logging.WARNING):
        assert score.main([str(folder)]) == 0
    assert any("samples.jsonl line 2: unreadable" in m for m in caplog.messages)
    assert any("samples.jsonl line 4: cut off" in m for m in caplog.messages)
    assert len(_ids(folder / RunFolder.SAMPLES)) == 2  # the readable records; the rest is in the backup
    assert json.loads((folder / "summary.json").read_text())["n_samples"] == 2

    broken = tmp_path / "smoke_tiny" / "broken"
    broken.mkdir()
    (broken / "config.yaml").write_text("method: {name: fly}\n")
    (broken / "summary.json").write_text('{"method": "fly", "acceptance_by_position": 5}')  # hand-edited, wrong type
    # The report is strict by default: the damaged folder is one error line naming it and the
    # field (issue 50); --skip-damaged leaves it out and lists it as skipped.
    assert report_main(["index", "--results", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(broken) in err[0] and "acceptance_by_position" in err[0]
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        df = load_index(tmp_path, skip_damaged=True)
    assert list(df["run_id"]) == [folder.name]
    assert any(str(broken) in m and "skipped" in m for m in caplog.messages)
    assert report_main(["index", "--results", str(tmp_path), "--skip-damaged"]) == 0
    out = capsys.readouterr()
    assert folder.name in out.out and f"skipped (damaged): run folder {broken}" in out.err


def test_whole_file_writes_are_readable_by_the_group(tmp_path):
    """mkstemp creates 0600; result files (summary.json, config.yaml, rewritten samples) are 0644."""
    import stat

    from loosespec_bench.store.run_folder import atomic_write

    path = tmp_path / "summary.json"
    atomic_write(path, "{}\n")
    assert stat.S_IMODE(path.stat().st_mode) == 0o644


def test_replace_record_swaps_the_first_record_of_its_id_in_place(tmp_path):
    folder = RunFolder(tmp_path / "run")
    with pytest.raises(RuntimeError, match="lock"):
        folder.replace_record({"id": "b", "output_text": "x", "metrics": {}})
    folder.lock("test")
    make = lambda sid, text: {"id": sid, "output_text": text, "metrics": {}}  # noqa: E731
    recs = [make(i, t) for i, t in (("a", "1"), ("b", "1"), ("b", "2"), ("c", "1"))]
    for rec in recs:
        folder.append(rec)
    with (folder.path / folder.SAMPLES).open("a") as f:
        f.write("not json\n")  # a line the readers skip: kept as it is
    folder.replace_record(make("b", "9"))
    # Readers take the first record per id: the replacement, at the old one's place.
    assert folder.lines() == [recs[0], make("b", "9"), recs[2], recs[3]]
    assert (folder.path / folder.SAMPLES).read_text().endswith("not json\n")
    folder.append(make("d", "1"))  # appending goes on after a replacement
    assert [r["id"] for r in folder.records()] == ["a", "b", "c", "d"]
    folder.close()


def test_close_after_a_full_disk_refused_an_append_does_not_raise_again(tmp_path):
    # The disk-full fault: the append's flush failed with ENOSPC, so the record stays in the
    # file's buffer and close() flushes it again; that second ENOSPC must not replace the one
    # line the run gives (app.DiskError). /dev/full answers every write with ENOSPC.
    import errno

    folder = RunFolder(tmp_path / "run")
    folder.lock("run")
    folder._fh = open("/dev/full", "a", encoding="utf-8")
    folder._fh.write('{"id": "s1"}\n')
    with pytest.raises(OSError) as first:
        folder._fh.flush()
    assert first.value.errno == errno.ENOSPC
    folder.close()  # no second ENOSPC
    assert folder._fh is None and folder._lock_fd is None


def test_close_still_raises_an_error_that_is_not_the_disks(tmp_path):
    import errno

    class Broken:
        def close(self):
            raise OSError(errno.EIO, "input/output error")

    folder = RunFolder(tmp_path / "run")
    folder._fh = Broken()
    with pytest.raises(OSError) as err:
        folder.close()
    assert err.value.errno == errno.EIO
