"""The speed benchmark (bench/speed.py, bench/speed_report.py): argument checks, the analysis on
hand-built timings, the resumable occasion files, the budget, and the command lines that run it."""

from __future__ import annotations

import numpy as np
import pytest

from loosespec_bench.bench import speed
from loosespec_bench.bench.speed_report import analyse, segments_of, verdict
from loosespec_bench.measure.costmodel import Calibration, ForwardCost
from loosespec_bench.measure.occasion_files import load_rows, occasion_done
from loosespec_bench.measure.speed_configs import CONFIGS
from loosespec_bench.measure.work import add_forward, new_work


def _work(forwards: int, tokens: int) -> dict:
    w = new_work()
    for _ in range(forwards):
        add_forward(w, "target_verify", 1, 1, 0)
    w["steps"], w["emitted"] = forwards, tokens
    return w


def _rows(speed_by_occasion: dict[int, float], problems: int = 4) -> list[dict]:
    """ar: 20 tokens in t_p seconds; spd: the same tokens in t_p / speed(occasion), 10 forwards."""
    rows = []
    for o, speed in speed_by_occasion.items():
        for p in range(problems):
            t = 1.0 + 0.25 * p
            for config, secs, fwd in (("ar", t, 20), ("spd", t / speed, 10)):
                rows.append({"kind": "gen", "occasion": o, "problem": f"p{p}", "config": config, "attempt": 0, "final": True,
                             "contaminated": False, "new_tokens": 20, "tokens_sha": f"s{p}", "wall_s": secs,
                             "cpu_share": 1.0, "others_share": 0.02, "work": _work(fwd, 20)})
    return rows


def test_analysis_of_a_steady_comparison():
    cal = Calibration(target=ForwardCost(rows=[1, 2], body_s=[0.05, 0.1], ctx0=0, ctx_row_s=0, lm_head_row_s=0),
                      draft=None, extra_lm_head_row_s=0, lookup_s=0, step_overhead_s=0, signature={})
    rep = analyse(_rows({1: 1.5, 2: 1.5}), calibration=cal, n_boot=200)
    spd = rep["configs"]["spd"]
    assert spd["speedup"] == pytest.approx(1.5) and spd["speedup_ci_low"] == pytest.approx(1.5)
    assert spd["speedup_by_occasion"] == pytest.approx([1.5, 1.5])
    assert spd["occasion"]["occasion_sd_log"] == pytest.approx(0.0, abs=1e-9)
    assert spd["retest"]["ratio_last_over_first"] == pytest.approx(1.0)
    assert spd["predicted_speedup"] == pytest.approx(2.0)  # 10 forwards against 20
    assert spd["gap"] == pytest.approx(1.5 / 2.0 - 1)
    assert spd["verdict"] == "counts and wall-clock agree: faster"
    assert verdict({"predicted_speedup_ci_low": 1.1, "predicted_speedup_ci_high": 1.3,
                          "speedup_ci_low": 0.8, "speedup_ci_high": 0.95}) == "counts say faster, wall-clock says slower"
    assert spd["work_per_token"]["target_forwards"] == pytest.approx(0.5)
    assert spd["tokens_same_across_occasions"] == 4 and spd["tokens_identical_to_target_alone"] == 8
    test = next(t for t in rep["count_tests"] if t["a"] == "pld") if any(t["a"] == "pld" for t in rep["count_tests"]) else None
    assert test is None  # pld was not run: no test printed for it
    assert rep["target_alone_retest"]["ratio_last_over_first"] == pytest.approx(1.0)
    assert rep["load"]["contaminated_blocks"] == 0


def test_analysis_sees_the_occasion_effect():
    rep = analyse(_rows({1: 1.2, 2: 1.8}), calibration=None, n_boot=300)
    spd = rep["configs"]["spd"]
    assert spd["speedup_by_occasion"] == pytest.approx([1.2, 1.8])
    assert spd["occasion"]["occasion_sd_log"] == pytest.approx(np.log(1.8 / 1.2) / 2 * np.sqrt(2), rel=1e-6)
    assert spd["retest"]["ratio_last_over_first"] == pytest.approx(1.5)
    assert spd["speedup_ci_high"] - spd["speedup_ci_low"] > 0.3  # the occasion resampled, not hidden
    assert "predicted_speedup" not in spd


def test_contaminated_cells_leave_the_wall_clock_but_not_the_counts():
    rows = _rows({1: 1.5, 2: 1.5})
    for r in rows:
        if r["occasion"] == 2 and r["problem"] == "p0":
            r["contaminated"], r["wall_s"], r["others_share"] = True, 100.0, 0.5
    rep = analyse(rows, calibration=None, n_boot=100)
    assert rep["configs"]["spd"]["speedup"] == pytest.approx(1.5)
    assert rep["load"]["contaminated_blocks"] == 1 and rep["load"]["others_share_max"] == 0.5
    assert rep["configs"]["spd"]["work_total"]["target_verify"]["forwards"] == 80  # every cell's counts


@pytest.mark.parametrize("argv, msg", [
    (["--configs", "spd,nope"], "unknown ['nope']"),
    (["--problems", "1"], "--problems must be >= 2"),
    (["--max-others-share", "0"], "--max-others-share"),
    (["--pair", "nope"], "no conf/pair/nope.yaml"),
    (["--pair", "../pair/tiny"], "no conf/pair/../pair/tiny.yaml"),  # a name, never a path
    (["--problems", "two"], "argument --problems: invalid int value: 'two' (--help lists the options)"),
])
def test_bad_arguments_are_one_error_line(argv, msg, capsys, tmp_path):
    with pytest.raises(SystemExit) as exc:
        speed.parse([*argv, "--out", str(tmp_path)])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and msg in err[0]


@pytest.mark.slow
def test_two_occasions_end_to_end_on_the_tiny_pair(tmp_path):
    """The whole command: two occasions in child processes, resumable, analysed (minutes on a
    loaded machine; every block counts as clean with --max-others-share 1)."""
    import json
    import os
    import subprocess
    import sys

    from ..conftest import REPO, shared_data_dir

    out = tmp_path / "se"
    env = {**os.environ, "LOOSESPEC_DATA_DIR": str(shared_data_dir()), "LOOSESPEC_RESULTS_DIR": str(tmp_path / "results")}
    cmd = [sys.executable, "-m", "loosespec_bench.bench.speed", "--pair", "tiny", "--problems", "2",
           "--max-new-tokens", "8", "--occasions", "2", "--gap-s", "0", "--threads", "1", "--max-others-share", "1",
           "--configs", "spd,pld", "--n-boot", "50", "--out", str(out)]
    done = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr
    rep = json.loads((out / "report.json").read_text())
    assert rep["n_occasions"] == 2 and rep["n_problems"] == 2 and set(rep["configs"]) == {"ar", "spd", "pld"}
    assert rep["configs"]["spd"]["predicted_speedup"] is not None  # calibrated first (--calibrate auto)
    # Occasion 2 cut after its first problem's block, mid-line: the rerun keeps that block, times
    # the other problem in a second segment, and the report says so.
    occ2 = out / "occasion-2.jsonl"
    lines = occ2.read_text().splitlines()
    # The start record, then ar / spd / pld of the first problem (the warm-up is not written).
    assert [json.loads(x)["kind"] for x in lines[:5]] == ["start", "gen", "gen", "gen", "gen"]
    kept_block = lines[1:4]
    occ2.write_text("\n".join(lines[:4]) + "\n" + lines[4][: len(lines[4]) // 2])
    again = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    assert again.returncode == 0 and "occasion 1: already done" in again.stderr, again.stderr
    recs = [json.loads(x) for x in occ2.read_text().splitlines()]
    assert [r["kind"] for r in recs if r["kind"] != "gen"] == ["start", "resume", "done"]
    assert [json.dumps(r) for r in recs[1:4]] == [json.dumps(json.loads(x)) for x in kept_block]
    assert sorted({r["problem"] for r in recs if r["kind"] == "gen" and r["segment"] == 1}) == \
        sorted({r["problem"] for r in recs if r["kind"] == "gen"} - {recs[1]["problem"]})
    rep = json.loads((out / "report.json").read_text())
    assert rep["n_problems"] == 2 and rep["segments"]["2"]["segments"] == 2 and rep["segments"]["1"]["segments"] == 1
    assert "occasion 2: 2 segments" in again.stdout
    # Resumed with other settings (fewer tokens): one error line, the kept blocks untouched.
    occ2.write_text("\n".join(lines[:4]) + "\n")
    other = [*cmd[: cmd.index("--max-new-tokens") + 1], "6", *cmd[cmd.index("--max-new-tokens") + 2:]]
    refused = subprocess.run(other, cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    assert refused.returncode == 2 and "error: " in refused.stderr and "other settings" in refused.stderr
    assert occ2.read_text().splitlines() == lines[:4]


def test_an_interrupted_occasion_is_unfinished(tmp_path):
    path = tmp_path / "occasion-1.jsonl"
    path.write_text('{"kind": "start"}\n{"kind": "gen", "occ')
    assert not occasion_done(path)
    path.write_text('{"kind": "start"}\n{"kind": "done"}\n')
    assert occasion_done(path)
    rows, starts = load_rows(tmp_path)
    assert rows == [] and starts == [{"kind": "start"}]


def _gen(problem: str, config: str, final: bool = True) -> dict:
    return {"kind": "gen", "occasion": 1, "segment": 0, "problem": problem, "config": config, "final": final}


def test_a_resumed_occasion_keeps_its_whole_blocks_only(tmp_path):
    import json

    path = tmp_path / "occasion-1.jsonl"
    start = {"kind": "start", "occasion": 1, "configs": ["ar", "spd"]}
    lines = [start, _gen("p0", "ar"), _gen("p0", "spd"),
             _gen("p1", "ar", final=False), _gen("p1", "spd", final=False),  # contaminated attempt: history
             _gen("p2", "ar")]  # block cut after its first line
    path.write_text("".join(json.dumps(r) + "\n" for r in lines) + '{"kind": "gen", "probl')
    kept, finished, segment = speed.resume_state(path)
    assert finished == {"p0"} and segment == 1
    assert kept == lines[:5]
    # A second interruption: the segment count goes on; a file without a start starts afresh.
    path.write_text("".join(json.dumps(r) + "\n" for r in [*lines[:3], {"kind": "resume", "occasion": 1}]))
    assert speed.resume_state(path)[2] == 2
    path.write_text('{"kind": "gen", "problem": "p0"}\n')
    assert speed.resume_state(path) == ([], set(), 0)
    assert speed.resume_state(tmp_path / "absent.jsonl") == ([], set(), 0)


def test_segments_name_the_breaks_and_the_cpus():
    a = {"cpu_model": "EPYC", "cpu_signature": "AMD family 25 model 1", "cpu_isa": "AVX2", "host": "h1"}
    b = {**a, "cpu_signature": "AMD family 25 model 17", "cpu_isa": "AVX512", "host": "h2"}
    starts = [{"kind": "start", "occasion": 1, "at": 0.0, "machine": a},
              {"kind": "start", "occasion": 2, "at": 3600.0, "machine": a},
              {"kind": "resume", "occasion": 2, "at": 3600.0 * 15, "machine": b}]
    seg = segments_of(starts)
    assert seg[1] == {"segments": 1, "cpus": ["EPYC / AMD family 25 model 1 / AVX2"], "hosts": ["h1"], "span_h": 0.0}
    assert seg[2]["segments"] == 2 and len(seg[2]["cpus"]) == 2 and seg[2]["span_h"] == pytest.approx(14.0)


@pytest.mark.parametrize("name", ["spd_k5", "spd_k10", "spd_k15", "xtok_spd", "xtok_fly"])
def test_each_added_configuration_composes_and_passes_the_checks(name):
    # The SPD draft lengths on the embedded pair and the cross-family drafters on their pair: what
    # an occasion builds its engines from (a bad override would fail hours into a benchmark).
    from loosespec_bench.bench.contestants import compose_config
    from loosespec_bench.settings.checks import validate

    pair = "smollm2_to_qwen25_coder" if name.startswith("xtok") else "qwen25_coder_embedded"
    cfg = compose_config([f"pair={pair}", "dataset=gsm8k", *CONFIGS[name].overrides])
    validate(cfg)
    k = CONFIGS[name].spd_k or 15  # the series declares its K; the cross-family drafts run at 15
    assert cfg.drafter.k == k and (cfg.drafter.get("needs_tokenizers", False) == name.startswith("xtok"))


def test_the_target_alones_work_for_the_budget():
    work = speed.target_alone_work(10, 3)
    # prefill over 9 prompt tokens (the 10th goes with the first decode), then 3 one-row forwards
    assert work["target_prefill"]["rows"] == 9 and work["target_prefill"]["rows_hist"] == {"9": 1}
    assert work["target_verify"]["forwards"] == 3 and work["target_verify"]["ctx_rows"] == 9 + 10 + 11
    assert work["steps"] == 3 and work["draft"]["forwards"] == 0


def test_the_plan_prices_with_this_machines_calibration_or_the_planners_rate(tmp_path, monkeypatch, capsys):
    import json

    from loosespec_bench.calibrate import calibration_path, pair_node, signature

    from ..conftest import shared_data_dir

    monkeypatch.setenv("LOOSESPEC_DATA_DIR", str(shared_data_dir()))
    monkeypatch.setenv("LOOSESPEC_RESULTS_DIR", str(tmp_path))
    a = speed.parse(["--pair", "tiny", "--problems", "2", "--max-new-tokens", "100", "--occasions", "2", "--gap-s", "0",
                     "--threads", "1", "--configs", "spd", "--out", str(tmp_path / "se")])
    speed.plan(a)
    out = capsys.readouterr().out
    # no calibration: 2 problems x 2 configurations x 2 occasions x 100 tokens at the tiny pair's 300 tokens/s
    assert "= 8 timed generations" in out and "est. ~0.0 CPU h at the planner's assumed 300 tokens/s" in out

    # 1 s per forward row, nothing else: each generation costs its prompt's prefill rows + 100 s
    # Stamped with this run's signature: a calibration is used only for what it was measured on.
    sig = signature(pair_node("tiny"), 1)
    cal = Calibration(target=ForwardCost(rows=[1, 2], body_s=[1.0, 2.0], ctx0=0, ctx_row_s=0, lm_head_row_s=0),
                      draft=None, extra_lm_head_row_s=0, lookup_s=0, step_overhead_s=0, signature=sig)
    path = calibration_path(tmp_path, sig)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(cal.to_dict()))
    speed.plan(a)
    out = capsys.readouterr().out
    assert "predicted ~" in out and str(path) in out
    hours = float(out.split("predicted ~")[1].split(" CPU h")[0])
    low, high = (int(x) for x in out.split("prompts ")[1].split(" tokens")[0].split("-"))
    # 4 generations per problem (2 configurations x 2 occasions), 2 problems; printed to 0.1 h
    assert 8 * (100 + low - 1) / 3600 - 0.05 <= hours <= 8 * (100 + high - 1) / 3600 + 0.05


def test_the_recorded_script_runs_the_module(tmp_path):
    """scripts/bench_speed_evidence.py (replicate.mk and the committed folders' READMEs name it)
    is the module's command line: the same options, the same one-line refusal."""
    import subprocess
    import sys

    from ..conftest import REPO

    done = subprocess.run([sys.executable, str(REPO / "scripts" / "bench_speed_evidence.py"), "--configs", "spd,nope",
                           "--out", str(tmp_path / "se")], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [f"error: --configs: unknown ['nope']; choose from {', '.join(CONFIGS)}"]
    assert not (tmp_path / "se").exists()  # refused before anything is written


def test_a_committed_folder_is_analysed_again_under_its_recorded_names(tmp_path, monkeypatch):
    """A folder the script wrote before the move (results/cpu/evidence/speed_xtok, 30 problems x
    2 occasions): --analyse-only reads it under the names it recorded and gives the committed
    report's counts and measured speedups (those do not depend on the resamples)."""
    import json
    import shutil

    from ..conftest import REPO

    folder = REPO / "results" / "cpu" / "evidence" / "speed_xtok"
    committed = json.loads((folder / "report.json").read_text())
    out = tmp_path / "speed_xtok"
    out.mkdir()
    for name in ("args.json", "occasion-1.jsonl", "occasion-2.jsonl"):
        shutil.copy(folder / name, out / name)
    monkeypatch.setenv("LOOSESPEC_RESULTS_DIR", str(tmp_path / "results"))  # no calibration here: counts and clock only
    args = json.loads((folder / "args.json").read_text())
    assert speed.run(["--analyse-only", "--pair", args["pair"], "--dataset", args["dataset"], "--n-boot", "20",
                      "--out", str(out)]) == 0
    rep = json.loads((out / "report.json").read_text())
    assert list(rep["configs"]) == list(committed["configs"]) == ["ar", "xtok_spd", "xtok_fly"]
    assert (rep["n_problems"], rep["n_occasions"]) == (committed["n_problems"], committed["n_occasions"]) == (30, 2)
    for name, entry in committed["configs"].items():
        got = rep["configs"][name]
        assert got["work_per_token"] == pytest.approx(entry["work_per_token"])
        assert got["speedup"] == pytest.approx(entry["speedup"])
        assert got["speedup_by_occasion"] == pytest.approx(entry["speedup_by_occasion"])
        assert got["tokens_same_across_occasions"] == entry["tokens_same_across_occasions"]
    assert rep["calibration"] != committed["calibration"] and "predicted_speedup" not in rep["configs"]["xtok_fly"]
    assert not (out / "calibration.json").exists()  # no calibration used: no copy claimed
