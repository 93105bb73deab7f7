"""Issue 74, hostile inputs round four: every file the harness reads or writes passes one gate
(loosespec_bench/safe_files.py), every declaration file is parsed against its declaration
(loosespec_bench/store/declarations.py), sweep points are read only from the sweep's own job
folders for run folders inside results/, records are checked by kind.

Each case runs through the real entry point: in-process through main(argv) where the command
has one (report, calibrate, data, score), and the cases that would hang (a FIFO where a file
belongs) in one subprocess with a timeout, so that a regression fails instead of blocking the
suite. Every case ends in one `error:` line naming the file and the field (exit 2), a line that
says what was skipped, or a refusal to use a poisoned input; nothing is written through a link.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from .conftest import REPO
from .test_hostile_inputs import report_run

OUTSIDE_TEXT = "not yours\n"


def _make(root: Path, files: dict[str, str | bytes]) -> None:
    for name, data in files.items():
        p = root / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data if isinstance(data, bytes) else data.encode())


def _report(argv: list[str], capsys) -> tuple[int, str]:
    from loosespec_bench.report.__main__ import main

    try:
        code = main(argv)
    except SystemExit as exc:  # argparse
        code = exc.code
    return code, capsys.readouterr().err


def _one_error_line(err: str, *fragments: str) -> str:
    lines = [ln for ln in err.strip().splitlines() if ln.strip()]
    assert "Traceback" not in err, err
    assert lines and lines[-1].startswith("error: ") and sum(ln.startswith("error: ") for ln in lines) == 1, err
    for fragment in fragments:
        assert fragment in lines[-1], (fragment, lines[-1])
    return lines[-1]


@pytest.fixture
def results(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for key in [k for k in os.environ if k.startswith("LOOSESPEC_")]:
        monkeypatch.delenv(key)
    _make(tmp_path / "res", report_run())
    (tmp_path / "outside.txt").write_text(OUTSIDE_TEXT)
    return tmp_path


# --- 1. writes outside results/ through links ---------------------------------------------------

@pytest.mark.parametrize("target", ["claims.md", "claims.csv", "tables.md"])
def test_a_report_output_that_is_a_link_is_refused_and_its_target_unchanged(results, capsys, target):
    out = results / "out"
    out.mkdir()
    os.symlink(results / "outside.txt", out / target)
    command = "tables" if target == "tables.md" else "claims"
    code, err = _report([command, "--results", "res", "--out", "out"], capsys)
    assert code == 2
    _one_error_line(err, target, "symbolic link")
    assert (results / "outside.txt").read_text() == OUTSIDE_TEXT and (out / target).is_symlink()


def test_the_index_csv_that_is_a_link_is_refused(results, capsys):
    os.symlink(results / "outside.txt", results / "index.csv")
    code, err = _report(["index", "--results", "res", "--csv", "index.csv"], capsys)
    assert code == 2
    _one_error_line(err, "index.csv", "symbolic link")
    assert (results / "outside.txt").read_text() == OUTSIDE_TEXT


def test_a_dangling_claims_yaml_link_plants_no_file(results, capsys):
    (results / "out").mkdir()
    os.symlink(results / "planted.yaml", results / "out" / "claims.yaml")
    code, err = _report(["claims", "--results", "res", "--out", "out"], capsys)
    assert code == 2
    _one_error_line(err, "claims.yaml", "symbolic link")
    assert not (results / "planted.yaml").exists()


def test_a_table_folder_linked_outside_its_out_folder_is_refused(tmp_path):
    from loosespec_bench.errors import ConfigError
    from loosespec_bench.safe_files import atomic_write_text

    (tmp_path / "out").mkdir()
    (tmp_path / "elsewhere").mkdir()
    os.symlink(tmp_path / "elsewhere", tmp_path / "out" / "tables")
    with pytest.raises(ConfigError, match="outside"):
        atomic_write_text(tmp_path / "out" / "tables" / "t.md", "x", root=tmp_path / "out")
    assert list((tmp_path / "elsewhere").iterdir()) == []


def test_atomic_writes_never_write_through_a_link_and_leave_nothing_on_failure(tmp_path):
    from loosespec_bench.errors import ConfigError
    from loosespec_bench.safe_files import atomic_output, atomic_write_text

    (tmp_path / "outside.txt").write_text(OUTSIDE_TEXT)
    for name in ("args.json", "report.json", "calibration.json", "point.json", "occasion-1.jsonl"):
        os.symlink(tmp_path / "outside.txt", tmp_path / name)
        with pytest.raises(ConfigError, match="symbolic link"):
            atomic_write_text(tmp_path / name, "{}")
    assert (tmp_path / "outside.txt").read_text() == OUTSIDE_TEXT
    with pytest.raises(RuntimeError):  # a writer that fails half-way (a full disk): no half file, no temp file
        with atomic_output(tmp_path / "t.csv") as tmp:
            tmp.write_text("half")
            raise RuntimeError("disk full")
    assert sorted(p.name for p in tmp_path.iterdir() if not p.is_symlink()) == ["outside.txt"]


def test_a_linked_wandb_folder_turns_the_tracker_away(tmp_path, monkeypatch):
    pytest.importorskip("wandb")
    monkeypatch.delenv("WANDB_DIR", raising=False)
    from omegaconf import OmegaConf

    from loosespec_bench.errors import ConfigError
    from loosespec_bench.sinks.wandb import WandbTracker

    run = tmp_path / "exp" / "run1"
    run.mkdir(parents=True)
    (tmp_path / "elsewhere").mkdir()
    os.symlink(tmp_path / "elsewhere", run / "wandb")
    sink = WandbTracker(mode="offline")
    with pytest.raises(ConfigError, match="wandb"):
        sink.start(OmegaConf.create({"experiment_name": "exp", "method": {"name": "spd"}}), run, "run1")
    assert list((tmp_path / "elsewhere").iterdir()) == []


# --- 1/4. sweep points: a forged row, a link, a FIFO -------------------------------------------

def _sweep_job(sweep: Path, num: int, point: dict | None) -> Path:
    job = sweep / str(num)
    (job / ".hydra").mkdir(parents=True)
    (job / ".hydra" / "overrides.yaml").write_text(f"- drafter.k={num}\n")
    if point is not None:
        (job / "point.json").write_text(json.dumps({"job": str(num), "overrides": [f"drafter.k={num}"], **point}))
    return job


def test_a_stale_point_naming_a_folder_outside_results_is_skipped_with_a_line(tmp_path, capsys):
    from loosespec_bench.launch.sweep_table import CSV, report

    results = tmp_path / "results"
    sweep = results / "_hydra" / "multirun" / "d" / "t"
    forged = tmp_path / "elsewhere" / "run"
    forged.mkdir(parents=True)
    (forged / "summary.json").write_text(json.dumps({"tau": 9.87, "speedup": 5.0, "n_samples": 999}))
    _sweep_job(sweep, 0, {"status": "COMPLETED", "run_folder": str(forged), "error": None})
    _sweep_job(sweep, 1, {"status": "COMPLETED", "run_folder": str(results / "exp" / ".." / ".." / "elsewhere" / "run")})
    text = report(sweep)
    assert "9.87" not in text and "999" not in text
    assert "0 drafter.k=0: skipped: its run folder" in text and "1 drafter.k=1: skipped" in text
    assert "9.87" not in (sweep / CSV).read_text()


def test_sweep_points_are_read_only_from_real_job_folders(tmp_path):
    from loosespec_bench.launch.sweep_table import read_points

    sweep = tmp_path / "results" / "_hydra" / "multirun" / "d" / "t"
    sweep.mkdir(parents=True)
    elsewhere = _sweep_job(tmp_path / "other_sweep", 0, {"status": "COMPLETED", "run_folder": None})
    os.symlink(elsewhere, sweep / "0")  # a job folder that is a link: never walked
    job = _sweep_job(sweep, 1, None)
    os.symlink(tmp_path / "outside.json", job / "point.json")  # a point.json that is a link: skipped
    (tmp_path / "outside.json").write_text(json.dumps({"status": "COMPLETED", "run_folder": str(tmp_path)}))
    points = read_points(sweep)
    assert [p["job"] for p in points] == ["1"]
    assert points[0]["status"] == "skipped" and "symbolic link" in points[0]["error"]


def test_a_point_json_link_is_not_written_through(tmp_path):
    from omegaconf import OmegaConf

    from loosespec_bench.launch.sweep_table import SweepTable

    (tmp_path / "outside.txt").write_text(OUTSIDE_TEXT)
    out = tmp_path / "sweep" / "0"
    out.mkdir(parents=True)
    os.symlink(tmp_path / "outside.txt", out / "point.json")
    config = OmegaConf.create({"hydra": {"mode": "MULTIRUN", "runtime": {"output_dir": str(out)}}})

    class Ret:
        cfg = OmegaConf.create({})
        overrides = ["a=1"]
        status = type("S", (), {"name": "COMPLETED"})()

    from hydra.types import RunMode

    config.hydra.mode = RunMode.MULTIRUN
    SweepTable().on_job_end(config, Ret())
    assert (tmp_path / "outside.txt").read_text() == OUTSIDE_TEXT


# --- 2. hangs: a FIFO where a file belongs (one subprocess, with a timeout) ------------------

FIFO_SCRIPT = textwrap.dedent("""
    import json, os, sys
    from pathlib import Path
    tmp = Path(sys.argv[1])
    out = {}
    # report speed: report.json a FIFO
    (tmp / "speed").mkdir()
    os.mkfifo(tmp / "speed" / "report.json")
    from loosespec_bench.report.__main__ import main as report
    out["speed"] = report(["speed", str(tmp / "speed"), "--out", str(tmp / "speed_out")])
    # data --from: a data file that is a FIFO
    from loosespec_bench.data import main as data
    src = tmp / "src" / "gsm8k"
    src.mkdir(parents=True)
    os.mkfifo(src / "test.jsonl")
    out["data"] = data(["--from", str(tmp / "src"), "--to", str(tmp / "dst"), "--sets", "gsm8k"])
    # a stale sweep point that is a FIFO
    from loosespec_bench.launch.sweep_table import read_points
    job = tmp / "results" / "_hydra" / "multirun" / "d" / "t" / "0"
    (job / ".hydra").mkdir(parents=True)
    (job / ".hydra" / "overrides.yaml").write_text("- a=1\\n")
    os.mkfifo(job / "point.json")
    out["point"] = read_points(job.parent)[0]["status"]
    print(json.dumps(out))
""")


def test_a_fifo_where_a_file_belongs_never_blocks(tmp_path):
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("LOOSESPEC_")}, "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-c", FIFO_SCRIPT, str(tmp_path)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out == {"speed": 2, "data": 1, "point": "skipped"}
    assert "FIFO" in proc.stderr  # the speed report's line and the data command's failed file both name it


# --- 3. poisoned declarations: never used in silence ----------------------------------------

def _calibration(**changes) -> dict:
    fwd = {"rows": [1, 2, 4], "body_s": [0.01, 0.012, 0.015], "ctx0": 64, "ctx_row_s": 1e-6, "lm_head_row_s": 1e-4}
    cal = {"target": dict(fwd), "draft": dict(fwd), "extra_lm_head_row_s": 1e-4, "lookup_s": 1e-5, "step_overhead_s": 1e-3,
           "verify_row_s": 1e-5, "check": {"target_alone_decode_over_predicted": 1.0}, "signature": {}}
    for key, value in changes.items():
        node = cal
        *parts, last = key.split(".")
        for part in parts:
            node = node[part]
        node[last] = value
    return cal


@pytest.mark.parametrize("changes, field", [
    ({"target.body_s": [float("nan"), 0.01, 0.02]}, "target.body_s[0]"),
    ({"step_overhead_s": -0.5}, "step_overhead_s"),
    ({"draft.ctx_row_s": 1e999}, "draft.ctx_row_s"),
    ({"target.rows": [1, 1, 2]}, "target.rows"),
    ({"target.rows": []}, "target.rows"),
    ({"target.rows": [[1], 2, 3]}, "target.rows[0]"),
    ({"check": [1.0]}, "check"),
    ({"lookup_s": "fast"}, "lookup_s"),
])
def test_a_malformed_calibration_names_its_field(tmp_path, changes, field):
    from loosespec_bench.errors import ConfigError
    from loosespec_bench.store.declarations import read_calibration

    path = tmp_path / "cal.json"
    path.write_text(json.dumps(_calibration(**changes), allow_nan=True).replace("Infinity", "1e999"))
    with pytest.raises(ConfigError) as err:
        read_calibration(path)
    assert str(path) in str(err.value) and field.split("[")[0] in str(err.value)


def test_a_calibration_is_used_only_under_its_own_signature_and_with_finite_costs(tmp_path):
    import torch

    from loosespec_bench.calibrate import calibration_path, find_calibration, pair_node, signature

    pair = pair_node("tiny")
    sig = signature(pair, torch.get_num_threads())
    path = calibration_path(tmp_path, sig)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(_calibration(signature=sig)))
    cal, source = find_calibration(tmp_path, pair)
    assert cal is not None and source == str(path)
    for other in ({**sig, "pair": "other"}, {**sig, "dtype": "bfloat16"}, {**sig, "threads": sig["threads"] + 1},
                  {**sig, "cpu_signature": "another cpu"}):
        path.write_text(json.dumps(_calibration(signature=other)))
        cal, source = find_calibration(tmp_path, pair)
        assert cal is None and "not this run's calibration" in source
    path.write_text(json.dumps(_calibration(signature=sig)).replace("0.01,", "NaN,", 1))
    cal, source = find_calibration(tmp_path, pair)
    assert cal is None and "target.body_s[0]=nan is not a finite number" in source
    os.unlink(path)
    os.mkfifo(path)
    cal, source = find_calibration(tmp_path, pair)  # a FIFO: refused, never opened for reading
    assert cal is None and "FIFO" in source


def test_a_pair_name_never_leads_the_calibration_out_of_its_folder(tmp_path):
    from loosespec_bench.calibrate import find_calibration, pair_node

    pair = pair_node("tiny")
    pair.name = "../../elsewhere"
    cal, source = find_calibration(tmp_path, pair)
    assert cal is None and "pair.name" in source


@pytest.mark.parametrize("argv, fragment", [
    (["--pair", "tiny", "--max-rows", "1000000000"], "--max-rows"),
    (["--pair", "tiny", "--repeats", "0"], "--repeats"),
    (["--pair", "tiny", "--results", "a_file"], "a_file"),
    (["--pair", "tiny", "--results", "x" * 300], "255"),
])
def test_calibrate_refuses_bad_arguments_with_one_line(tmp_path, monkeypatch, capsys, argv, fragment):
    from loosespec_bench.calibrate import main

    monkeypatch.chdir(tmp_path)
    (tmp_path / "a_file").write_text("")
    assert main(argv) == 2
    _one_error_line(capsys.readouterr().err, fragment)


PROFILE = Path(REPO) / "loosespec_bench" / "report" / "profiles" / "llama31-8b-70b-h100.yaml"


@pytest.mark.parametrize("old, new, field", [
    ("mem_eff: {value: 0.7, rel_uncertainty: 0.2", "mem_eff: {value: 0.7, rel_uncertainty: -0.2", "gpu.mem_eff.rel_uncertainty"),
    ("peak_tflops: {value: 989,", "peak_tflops: {value: 1e999,", "gpu.peak_tflops.value"),
    ("peak_tflops: {value: 989,", "peak_tflops: {value: .nan,", "gpu.peak_tflops.value"),
    ("peak_tflops: {value: 989,", "peak_tflops: {value: fast,", "gpu.peak_tflops.value"),
    ("gpu:\n", "gpu: 3\nxgpu:\n", "gpu"),
])
def test_a_malformed_gpu_profile_names_its_field(tmp_path, capsys, old, new, field):
    text = PROFILE.read_text()
    assert old in text
    (tmp_path / "p.yaml").write_text(text.replace(old, new, 1))
    _make(tmp_path / "res", report_run())
    code, err = _report(["project", str(tmp_path / "res" / "exp" / "run1"), "--profile", str(tmp_path / "p.yaml")], capsys)
    assert code == 2
    _one_error_line(err, "p.yaml", field)


@pytest.mark.parametrize("text, field", [
    ("- 1\n- 2\n", "not a mapping"),
    ("families: 3\n", "families"),
    ("claims: 3\n", "claims"),
    ("claims:\n  - {id: x, paper: P, text: t, figure: tau, b: {method: spd}, margin: .nan}\n", "margin"),
    ("claims:\n  - {id: x, paper: P, text: t, figure: tau, b: {method: spd}, direction: up}\n", "direction"),
    ("claims:\n  - {id: x, paper: P, text: t, figure: tau, b: {method: spd}, sets: 3}\n", "sets"),
    ("claims:\n  - {id: x, paper: P, text: t, figure: tau, b: {method: spd}, looks: many}\n", "looks"),
    ("claims:\n  - {id: x, paper: P, text: t, figure: tau, b: {method: spd}, family: [a]}\n", "family"),
    ("claims:\n  - {id: x, paper: P, text: t, figure: tau, b: 3}\n", "b"),
    ("alpha: .inf\n", "alpha"),
    ("a: &a [x,x,x,x,x,x,x,x,x,x]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b,*b]\n"
     "d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c,*c]\ne: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d,*d]\nf: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e,*e]\n"
     "g: [*f,*f,*f,*f,*f,*f,*f,*f,*f,*f]\n", "expands"),
    (b"claims: \xff\xfe\n", "UTF-8"),
])
def test_a_malformed_claims_yaml_names_the_file_and_the_field(results, capsys, text, field):
    (results / "out").mkdir()
    (results / "out" / "claims.yaml").write_bytes(text if isinstance(text, bytes) else text.encode())
    code, err = _report(["claims", "--results", "res", "--out", "out"], capsys)
    assert code == 2
    _one_error_line(err, "claims.yaml", field)
    assert not (results / "out" / "claims.md").exists()


def test_the_packaged_claims_and_profiles_pass_their_declarations():
    from loosespec_bench.store.declarations import read_claims_declaration, read_profile

    _, data = read_claims_declaration(Path(REPO) / "loosespec_bench" / "report" / "claims.yaml")
    assert data["claims"]
    for path in (Path(REPO) / "loosespec_bench" / "report" / "profiles").glob("*.yaml"):
        assert read_profile(path)["name"]


@pytest.mark.parametrize("change, fragment", [
    ({"wall_s": 0.0}, "wall time"),
    ({"wall_s": -1.0}, "wall time"),
    ({"new_tokens": 10 ** 30}, "count"),
    ({"others_share": "x"}, "others_share"),
])
def test_a_speed_evidence_record_out_of_range_names_its_line(tmp_path, change, fragment):
    from loosespec_bench.errors import ConfigError
    from loosespec_bench.measure.occasion_files import load_rows

    gen = {"kind": "gen", "final": True, "occasion": 1, "problem": "p", "config": "ar", "new_tokens": 5, "wall_s": 1.0, **change}
    (tmp_path / "occasion-1.jsonl").write_text("".join(json.dumps(r) + "\n" for r in (
        {"kind": "start", "occasion": 1}, gen, {"kind": "done", "occasion": 1})))
    with pytest.raises(ConfigError) as err:
        load_rows(tmp_path)
    assert "occasion-1.jsonl:2" in str(err.value) and fragment in str(err.value)


# --- 4. tracebacks: data, re-score ---------------------------------------------------------

def test_data_refuses_a_long_name_a_sparse_file_and_a_link(tmp_path, capsys):
    from loosespec_bench.data import main

    assert main(["--to", str(tmp_path / ("x" * 300)), "--sets", "gsm8k"]) == 2
    _one_error_line(capsys.readouterr().err, "255")
    src = tmp_path / "src" / "gsm8k"
    src.mkdir(parents=True)
    with open(src / "test.jsonl", "wb") as f:  # a sparse 8 GB file: refused unread (over the manifest's size)
        f.truncate(8 << 30)
    os.symlink(tmp_path / "outside", src / "train.jsonl")
    assert main(["--from", str(tmp_path / "src"), "--to", str(tmp_path / "dst"), "--sets", "gsm8k"]) == 1
    out = capsys.readouterr()
    assert "Traceback" not in out.err and "more than" in out.out + out.err


def test_records_are_checked_by_kind_and_named_by_line(tmp_path, caplog):
    from loosespec_bench.store.run_folder import read_jsonl, record_problem

    good = {"id": "a", "output_text": "x", "output_ids": [1, 2], "metrics": {"new_tokens": 2, "steps": 2, "tau": 1.0}}
    bad = [
        {**good, "metrics": {**good["metrics"], "tau": "fast"}},
        {**good, "metrics": {**good["metrics"], "new_tokens": "2"}},
        {**good, "meta": "text"},
        {**good, "meta": [1]},
        {**good, "steps": 3},
        {**good, "output_ids": ["a"]},
        {**good, "baseline": {**good, "metrics": {"new_tokens": -1}}},
    ]
    lines = [json.dumps(good), *(json.dumps(b) for b in bad), '{"id": "b", "output_text": "x", "metrics": {"new_tokens": ' + "9" * 5000 + "}}"]
    path = tmp_path / "samples.jsonl"
    path.write_text("\n".join(lines) + "\n")
    damaged: list[str] = []
    kept = list(read_jsonl(path, damaged=damaged))
    assert [n for n, _ in kept] == [1]
    assert len(damaged) == len(bad) + 1 and all(d.startswith("line ") for d in damaged)
    assert record_problem({k: v for k, v in good.items() if k != "output_ids"}, need_ids=True) == "output_ids is missing"
    assert record_problem({**good, "metrics": {}}, need_ids=True) == "metrics is empty"  # resume regenerates it


def test_a_rescore_never_reads_a_calibration_its_folder_names(tmp_path):
    from omegaconf import OmegaConf

    from loosespec_bench.score import _calibration

    folder = tmp_path / "results" / "exp" / "run1"
    folder.mkdir(parents=True)
    cfg = OmegaConf.create({"pair": {"name": "../../../elsewhere", "target": {"path": "tiny:0"}, "draft": {"path": "tiny:1"},
                                     "dtype": "float32", "device": "cpu"},
                            "paths": {"results_dir": str(tmp_path / "elsewhere")}, "threads": "four"})
    out = _calibration(cfg, {}, folder)
    assert out["calibration"] is None and "threads" in out["calibration_source"]
    cfg.threads = None
    out = _calibration(cfg, {}, folder)
    assert out["calibration"] is None and "pair.name" in out["calibration_source"]


def test_json_declarations_refuse_nan_and_deep_nesting(tmp_path):
    from loosespec_bench.errors import ConfigError
    from loosespec_bench.safe_files import load_json_declaration

    (tmp_path / "a.json").write_text('{"x": NaN}')
    (tmp_path / "b.json").write_text("[" * 100000 + "]" * 100000)
    (tmp_path / "c.json").write_text("9" * 5000)
    with pytest.raises(ConfigError, match="not valid JSON"):
        load_json_declaration(tmp_path / "a.json", allow_nan=False)
    for name in ("b.json", "c.json"):
        with pytest.raises(ConfigError, match="not valid JSON"):
            load_json_declaration(tmp_path / name)


# --- 5. signals: one line, finished work kept ---------------------------------------------------

@pytest.mark.parametrize("module", ["loosespec_bench.report.__main__", "loosespec_bench.calibrate"])
@pytest.mark.parametrize("signum", ["SIGINT", "SIGTERM"])
def test_a_signal_during_a_report_or_a_calibration_ends_with_one_line(module, signum, monkeypatch, capsys):
    import importlib
    import signal

    mod = importlib.import_module(module)
    previous = signal.getsignal(signal.SIGTERM)
    monkeypatch.setattr(mod, "main", lambda argv=None: os.kill(os.getpid(), getattr(signal, signum)) or 0)
    try:
        code = mod.main_ending_on_signals([])
    finally:
        signal.signal(signal.SIGTERM, previous)
    err = capsys.readouterr().err
    assert code == 128 + getattr(signal, signum) and "Traceback" not in err
    assert err.strip().count("\n") == 0 and err.startswith(f"stopped ({signum})")


def test_a_rescore_on_a_full_disk_leaves_no_backup(tmp_path, monkeypatch):
    from loosespec_bench.store.run_folder import RunFolder

    folder = tmp_path / "exp" / "run1"
    folder.mkdir(parents=True)
    (folder / "samples.jsonl").write_text('{"id": "a", "output_text": "x", "metrics": {"new_tokens": 1}}\n')
    with RunFolder(folder, create=False) as rf:
        rf.lock("test")

        def full(*a, **k):
            raise OSError(28, "No space left on device")

        monkeypatch.setattr("loosespec_bench.store.run_folder.atomic_write", full)
        with pytest.raises(OSError):
            rf.rewrite_samples([], "20261207T000000Z")
    assert sorted(p.name for p in folder.iterdir() if p.name != ".lock") == ["samples.jsonl"]


# --- 1. the claims report's own readers and the Slurm jobs index, through the gate --------------

def test_the_losses_breakdown_reads_and_writes_through_the_gate(tmp_path, capsys):
    """report/claims/losses.py: a samples.jsonl that is a link, or an --out that is one, is one
    error line (the link's target unchanged, nothing planted); a record holding a field of the
    wrong kind is skipped with a warning, never a traceback."""
    from loosespec_bench.report.claims.losses import main

    lost = {"id": "gsm8k/1", "output_text": "The answer is 3.", "reference": "2", "metrics": {"new_tokens": 4},
            "score": {"correct": False, "pred": "3"},
            "baseline": {"output_text": "1+1 = 2. The answer is 2.", "metrics": {"new_tokens": 8}, "score": {"correct": True}}}
    run = tmp_path / "run"
    run.mkdir()
    (run / "samples.jsonl").write_text(json.dumps(lost) + "\n" + json.dumps({**lost, "id": "gsm8k/2", "score": "wrong"}) + "\n")
    (tmp_path / "outside.txt").write_text(OUTSIDE_TEXT)
    assert main([str(run), "--out", str(tmp_path / "losses.md")]) == 0
    text = (tmp_path / "losses.md").read_text()
    assert "| gsm8k/1 | answer-first shortcut |" in text and "gsm8k/2" not in text

    os.symlink(tmp_path / "outside.txt", tmp_path / "linked.md")
    assert main([str(run), "--out", str(tmp_path / "linked.md")]) == 2
    _one_error_line(capsys.readouterr().err, "linked.md", "symbolic link")
    linked = tmp_path / "linked_run"
    linked.mkdir()
    os.symlink(run / "samples.jsonl", linked / "samples.jsonl")
    assert main([str(linked), "--out", str(tmp_path / "l2.md")]) == 2
    _one_error_line(capsys.readouterr().err, "samples.jsonl", "symbolic link")
    assert (tmp_path / "outside.txt").read_text() == OUTSIDE_TEXT and not (tmp_path / "l2.md").exists()


def test_provenance_reads_through_the_gate_and_drops_what_is_not_a_date(tmp_path):
    """report/claims/provenance.py: a run folder's summary.json or a speed folder's calibration
    that is a link is one ConfigError naming it (never followed); a provenance.json of the wrong
    shape, or a time of 1e999, gives no date instead of a traceback."""
    from loosespec_bench.errors import ConfigError
    from loosespec_bench.report.claims.provenance import calibration_time, data_first, load, parse_time

    (tmp_path / "outside.json").write_text(json.dumps({"date": "2020-01-01T00:00:00Z", "signature": {"created": "2020-01-01"}}))
    run = tmp_path / "run"
    run.mkdir()
    (run / "summary.json").write_text(json.dumps({"date": "2026-12-01T00:00:00Z", "time_s": 1e999}))
    assert data_first(run, None) == ("2026-12-01T00:00:00Z", "first summary.json's date less its timed seconds")
    (run / "summary.json").unlink()
    os.symlink(tmp_path / "outside.json", run / "summary.json")
    with pytest.raises(ConfigError, match="summary.json is a symbolic link"):
        data_first(run, None)
    os.symlink(tmp_path / "outside.json", run / "calibration.json")
    with pytest.raises(ConfigError, match="calibration.json is a symbolic link"):
        calibration_time(run)
    assert parse_time(1e999) is None and parse_time(float("nan")) is None

    decl = tmp_path / "claims.yaml"
    (tmp_path / "provenance.json").write_text(json.dumps(
        {"declared": {"ok": {"at": "2026-01-01T00:00:00Z"}, "bad": 3, "list": [1]}, "data": [1, 2], "calibration": {"f": 5, "g": "2026"}}))
    rec = load(decl)
    assert rec is not None and rec.declared == {"ok": {"at": "2026-01-01T00:00:00Z"}} and rec.data == {} and rec.calibration == {"g": "2026"}
    (tmp_path / "provenance.json").write_text("[1, 2]")
    assert load(decl) is None


def test_a_speed_configs_identity_never_reads_an_occasion_file_through_a_link(tmp_path):
    from types import SimpleNamespace

    from loosespec_bench.errors import ConfigError
    from loosespec_bench.report.claims.verdicts import _config_identity

    first = {"kind": "start", "settings": {"fly": {"method": {"name": "fly"}, "drafter": {"name": "model", "k": 8}}}}
    speed = tmp_path / "speed"
    speed.mkdir()
    (speed / "occasion-1.jsonl").write_text(json.dumps(first) + "\n")
    d = SimpleNamespace(folders=[str(speed)])
    assert _config_identity(d, "fly") == ("fly", "model", "8")
    (speed / "occasion-1.jsonl").write_text('{"settings": 3}\n')  # the wrong shape: no identity, no traceback
    assert _config_identity(d, "fly") == "fly"
    (speed / "occasion-1.jsonl").unlink()
    (tmp_path / "outside.jsonl").write_text(json.dumps(first) + "\n")
    os.symlink(tmp_path / "outside.jsonl", speed / "occasion-1.jsonl")
    with pytest.raises(ConfigError, match="occasion-1.jsonl is a symbolic link"):
        _config_identity(d, "fly")


def test_the_slurm_jobs_index_is_never_written_or_read_through_a_link(tmp_path):
    """slurm.record_jobs / recorded_entries: the index (results/_launch/slurm_jobs.jsonl) that is
    a link, or a `_launch` folder linked out of the results folder, is one ConfigError naming
    it; the link's target is never appended to."""
    from loosespec_bench.errors import ConfigError
    from loosespec_bench.slurm import JOBS_INDEX, record_jobs, recorded_jobs

    results = tmp_path / "results"
    run = results / "exp" / "run_a"
    record_jobs([(run, "12")])
    assert recorded_jobs({results}) == {run.resolve(): "12"}
    index = results / JOBS_INDEX
    index.unlink()
    (tmp_path / "outside.txt").write_text(OUTSIDE_TEXT)
    os.symlink(tmp_path / "outside.txt", index)
    with pytest.raises(ConfigError, match="slurm_jobs.jsonl is a symbolic link"):
        record_jobs([(run, "13")])
    with pytest.raises(ConfigError, match="slurm_jobs.jsonl is a symbolic link"):
        recorded_jobs({results})
    assert (tmp_path / "outside.txt").read_text() == OUTSIDE_TEXT
    index.unlink()
    index.parent.rmdir()
    (tmp_path / "elsewhere").mkdir()
    os.symlink(tmp_path / "elsewhere", index.parent)
    with pytest.raises(ConfigError, match="outside"):
        record_jobs([(run, "14")])
    assert list((tmp_path / "elsewhere").iterdir()) == []


def test_every_round4_case_has_a_surface_in_the_probe():
    """python -m tests.probe_hostile_inputs counts round four by surface: a new case here needs
    its surface there (else it is counted as 'unassigned')."""
    from .probe_hostile_inputs import ROUND4_SURFACES, round4_functions

    assert [f for f in round4_functions() if f not in ROUND4_SURFACES] == []
