"""`python -m loosespec_bench.certify`: its help, its refusals (one `error:` line before any model
loads), and a tiny-pair certification with a known answer: a lossless setting (threshold 0.5 at
T = 0, token for token the target alone's) certifies, a setting made lossy by construction
(threshold 0: every draft token kept, the draft a different random model) fails at the first look
and ends the sequence."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib

import pytest

from loosespec_bench.certify.__main__ import main

from ..conftest import REPO, shared_data_dir

TINY = ["--", "method=threshold", "pair=tiny", "drafter.k=4", "generation.max_new_tokens=8", "dataset=gsm8k", "warmup=false"]


def test_help_and_the_console_script():
    out = subprocess.run([sys.executable, "-m", "loosespec_bench.certify", "--help"], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "--delta" in out.stdout and "--ladder" in out.stdout
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["loosespec-certify"] == "loosespec_bench.certify.__main__:main"


@pytest.mark.parametrize("argv, says", [
    ([], "give the settings"),
    (["--ladder", "method.threshold_single=0.5", "--delta", "150"], "--delta 150"),
    (["--ladder", "method.threshold_single=0.5", "--delta", "2", "--retention-margin", "5"], "give one margin"),
    (["--ladder", "method.threshold_single=0.5", "--delta", "2", "--looks", "20,10"], "--looks"),
    (["--ladder", "method.threshold_single=0.5,0.5", "--delta", "2"], "appears twice"),
    (["--ladder", "method.threshold_single=0.5", "--delta", "2", "--alpha", "0.9"], "--alpha"),
    (["--ladder", "method.threshold_single=0.5", "--delta", "2", "--looks", "9000"], "split has 7473"),
    (["--ladder", "method.threshold_single=7", "--delta", "2"], "method.threshold_single=7"),
    (["--ladder", "method.threshold_single=0.5", "--delta", "2", "--split", "test"], "certify on one split and report on another"),
    (["-e", "loose_rules_typical", "--delta", "2"], "sweeps 2 keys"),
])
def test_bad_input_is_one_error_line_before_any_model_loads(argv, says, capsys, monkeypatch):
    monkeypatch.setenv("LOOSESPEC_DATA_DIR", str(shared_data_dir()))
    import loosespec_bench.certify.procedure as procedure

    monkeypatch.setattr(procedure, "_run", lambda cfg: pytest.fail("a run started on bad input"))
    tail = TINY if argv and argv[0] != "-e" else []
    try:
        rc = main([*argv, "--dry-run", *tail])
    except SystemExit as stop:
        rc = stop.code
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and err[0].startswith("error: ") and says in err[0], err


def test_tiny_pair_known_answer(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("LOOSESPEC_DATA_DIR", str(shared_data_dir()))
    rc = main(["--ladder", "method.threshold_single=0.5,0.0,0.2", "--delta", "35", "--looks", "10", "--holdout", "2",
               "--score", "identical", "--speed", "2", "--results", str(tmp_path), *TINY])
    out = capsys.readouterr().out
    assert rc == 0
    assert out.index("planner's cost") < out.index("[certify] running")  # the cost comes first
    (js,) = (tmp_path / "certify").glob("certification_*.json")
    res = json.loads(js.read_text())
    first, lossy, after = res["settings"]
    assert res["certified"] == 1 and res["loosest_certified"] == "method.threshold_single=0.5"
    assert first["certified"] and first["lost"] == 0 and first["loss_upper"] < 0.35
    assert lossy["outcome"].startswith("failed (loss shown") and lossy["look"] == 1 and lossy["lost"] == 10
    assert after["outcome"].startswith("not tested")
    assert res["held_out"]["lost"] == 0 and res["held_out"]["n"] == 2
    assert res["speed"]["occasions"] == 1 and res["speed"]["problems"] == 2 and res["speed"]["point"] > 0
    assert "second" in res["speed"]["note"]  # one occasion per invocation
    pc = first["per_cpu_hour"]
    assert pc["method"]["low"] <= pc["method"]["per_cpu_h"] <= pc["method"]["high"] and pc["target_alone"]["n"] == 10
    md = (tmp_path / "certify" / js.name.replace(".json", ".md")).read_text()
    assert "Loosest certified setting: method.threshold_single=0.5" in md

    # Run again: every run folder resumes (nothing regenerated), the decisions come out the same,
    # and the second speed occasion runs now, so the speedup pools two occasions.
    assert main(["--ladder", "method.threshold_single=0.5,0.0,0.2", "--delta", "35", "--looks", "10", "--holdout", "2",
                 "--score", "identical", "--speed", "2", "--results", str(tmp_path), *TINY]) == 0
    out = capsys.readouterr().out
    assert "10 already done" in out
    again = json.loads(js.read_text())
    assert [s["outcome"] for s in again["settings"]] == [s["outcome"] for s in res["settings"]]
    assert again["settings"][0]["loss_upper"] == first["loss_upper"]
    assert again["speed"]["occasions"] == 2 and again["speed"]["note"] == ""


def _request(*argv: str, extra: tuple[str, ...] = ()):
    from loosespec_bench.certify.__main__ import build_request, parser
    from loosespec_bench.certify.ladder import check_request

    req = build_request(parser().parse_args(list(argv)), [*TINY[1:], *extra])
    return req, check_request(req)


def test_quality_runs_are_batched_and_priced_so_the_speed_occasions_run_at_batch_1(monkeypatch):
    """--batch-size (default 8) reaches every look's run as engine.batch_size; the planner divides
    their generation (not the model load) by the assumed batch gain; the speed occasions, timed,
    compose at batch 1 (a batched row has no time of its own, and the run's check refuses timing it)."""
    monkeypatch.setenv("LOOSESPEC_DATA_DIR", str(shared_data_dir()))
    from loosespec_bench.certify.ladder import batch_gain, compose, plan_cost
    from loosespec_bench.settings.run_settings import RunSettings

    base = ["--ladder", "method.threshold_single=0.5,0.2", "--delta", "5", "--looks", "20,40", "--holdout", "0"]
    req8, cfgs8 = _request(*base)  # the default
    # the same protocol at batch 1 (batched runs are quality-only: the target alone from the store)
    req1, cfgs1 = _request(*base, "--batch-size", "1", extra=("baseline=shared", "timing.subset=0"))
    assert [RunSettings.read(c).engine.batch_size for c in cfgs8] == [8, 8]
    assert {(RunSettings.read(c).root.baseline, RunSettings.read(c).timing.subset) for c in cfgs8} == {("shared", 0)}
    assert [RunSettings.read(c).engine.batch_size for c in cfgs1] == [1, 1]
    c8, c1 = plan_cost(req8, cfgs8), plan_cost(req1, cfgs1)
    for r8, r1 in zip(c8["rows"], c1["rows"]):
        gen1, gen8 = (r["hours"] - r["load_h"] - r["store_h"] for r in (r1, r8))
        assert gen1 / gen8 == pytest.approx(batch_gain(8))
        if r1["store_h"]:  # the ladder's first point pays the target alone's pass at its own gain
            assert r1["store_h"] / r8["store_h"] == pytest.approx(batch_gain(8, "target_alone"))
    assert c8["rows"][0]["store_h"] > 0 and c8["rows"][1]["store_h"] == 0
    assert batch_gain(8) > 1 and batch_gain(12) == batch_gain(8) and batch_gain(1) == 1 and batch_gain(2) == 1
    assert batch_gain(8, "target_alone") > batch_gain(8)  # the target alone batches better than a rule's verification
    req8.speed = 3
    assert RunSettings.read(compose(req8.speed_overrides(0, 1))).engine.batch_size == 1


@pytest.mark.parametrize("argv, tail, says", [
    (["--batch-size", "0"], [], "--batch-size 0"),
    ([], ["engine.batch_size=4"], "certify sets it"),
    ([], ["drafter=lookahead"], "certify sets engine.batch_size from --batch-size"),
])
def test_the_batch_size_is_certifys_to_set(argv, tail, says, capsys, monkeypatch):
    monkeypatch.setenv("LOOSESPEC_DATA_DIR", str(shared_data_dir()))
    rc = main(["--ladder", "method.threshold_single=0.5", "--delta", "5", "--looks", "20", *argv, "--dry-run", *TINY, *tail])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and err[0].startswith("error: ") and says in err[0], err

