"""The certification's pieces without a model: pairing, what a setting buys (correct answers
per CPU hour, the predicted speedup widened by the calibration's error), the looks a margin
needs and the report's words."""

from __future__ import annotations

import json
import os

import pytest

from loosespec_bench.certify.ladder import Request, auto_looks, check_margin, parse_ladder
from loosespec_bench.certify.procedure import counts, format_result, per_cpu_hour, predicted_speedup, write_result
from loosespec_bench.errors import ConfigError
from loosespec_bench.measure.costmodel import Calibration, ForwardCost
from loosespec_bench.measure.stats.sequential import Design, n_for_certify


def test_counts_pair_the_setting_with_the_target_alone():
    assert counts([1, 0, 0, 1, 1], [1, 1, 0, 0, 1]) == (1, 1, 3, 2)


def test_correct_answers_per_cpu_hour_with_intervals():
    recs = [{"metrics": {"total_s": 1800.0}, "baseline": {"metrics": {"total_s": 3600.0}}} for _ in range(10)]
    out = per_cpu_hour(recs, [1] * 5 + [0] * 5, [1] * 10, threads=2)
    # 5 right in 10 x 0.5 h x 2 threads = 10 CPU h; the target alone 10 right in 20 CPU h
    assert out["method"]["per_cpu_h"] == pytest.approx(0.5) and out["method"]["cpu_h"] == pytest.approx(10)
    assert out["target_alone"]["per_cpu_h"] == pytest.approx(0.5)
    assert out["method"]["low"] < 0.5 < out["method"]["high"]
    assert per_cpu_hour([{"metrics": {}, "baseline": {}}], [1], [1], 1) == {"method": None, "target_alone": None}


def _calibration(check: float) -> dict:
    """A calibration as calibrate.py writes it (Calibration.to_dict), with its target-alone check."""
    fwd = ForwardCost(rows=[1, 4], body_s=[0.2, 0.25], ctx0=64, ctx_row_s=1e-6, lm_head_row_s=1e-4)
    return Calibration(target=fwd, draft=fwd, extra_lm_head_row_s=1e-4, lookup_s=1e-5, step_overhead_s=1e-3,
                       signature={"pair": "tiny"}, check={"target_alone_decode_over_predicted": check}).to_dict()


def test_the_predicted_speedup_interval_holds_the_calibrations_error(tmp_path):
    cal = tmp_path / "cal.json"
    cal.write_text(json.dumps(_calibration(0.9)))
    s = {"work_speedup": 1.2, "work_speedup_ci_low": 1.1, "work_speedup_ci_high": 1.3,
         "cost_model": {"calibration": str(cal), "method_time_measured_over_predicted": 1.2}}
    p = predicted_speedup(s)
    assert p["error_factor"] == pytest.approx(0.75)  # the method measured 20% slow, the target alone 10% fast
    assert p["low"] == pytest.approx(1.1 * 0.75) and p["high"] == pytest.approx(1.3)
    s["cost_model"] = {}
    assert predicted_speedup(s)["low"] == 1.1 and "unknown" in predicted_speedup(s)["note"]
    assert predicted_speedup({}) is None


@pytest.mark.parametrize("poison", ["link", "fifo", "nan", "gone"])
def test_a_calibration_that_cannot_be_read_leaves_its_check_unknown_and_says_why(tmp_path, poison):
    """The calibration is read through the gate and its declaration: a link, a FIFO (which would
    block a plain open), a NaN cost or a deleted file is never used; the interval then holds the
    method's measured error only, and the note names the file."""
    real = tmp_path / "real.json"
    real.write_text(json.dumps(_calibration(0.5)))
    cal = tmp_path / "cal.json"
    if poison == "link":
        cal.symlink_to(real)
    elif poison == "fifo":
        os.mkfifo(cal)
    elif poison == "nan":
        bad = _calibration(0.5)
        bad["target"]["body_s"][0] = float("nan")
        cal.write_text(json.dumps(bad))
    s = {"work_speedup": 1.2, "work_speedup_ci_low": 1.1, "work_speedup_ci_high": 1.3,
         "cost_model": {"calibration": str(cal), "method_time_measured_over_predicted": 1.25}}
    p = predicted_speedup(s)
    assert p["target_alone_check"] is None and p["error_factor"] == pytest.approx(0.8)  # not the link's 0.5 / 1.25
    assert "not read" in p["note"] and str(cal) in p["note"]


def test_the_certification_files_are_written_through_the_gate(tmp_path):
    """certification_<tag>.json / .md replace a file atomically and never write through a link."""
    req = Request(experiment=None, key="method.theta", values=["1.0986"], overrides=[],
                  design=Design(looks=(10,), delta=0.05), experiment_name="certify")
    res = {"design": {"margin": 0.05, "looks": [10], "spending": "obrien_fleming", "alpha": 0.05, "estimand": "difference"},
           "ladder_key": "method.theta", "split": "train", "report_split": "test", "score": "task",
           "loosest_certified": None, "settings": [{"setting": "method.theta=1.0986", "outcome": "not tested"}]}
    js, md = write_result(req, res, tmp_path)
    assert json.loads(js.read_text())["ladder_key"] == "method.theta" and "Loosest certified setting: none" in md.read_text()
    elsewhere = tmp_path / "elsewhere.md"
    elsewhere.write_text("keep")
    md.unlink()
    md.symlink_to(elsewhere)
    with pytest.raises(ConfigError, match="symbolic link"):
        write_result(req, res, tmp_path)
    assert elsewhere.read_text() == "keep"


def test_margins_ladders_and_looks():
    assert check_margin(2, None) == (0.02, "difference") and check_margin(None, 5) == (0.05, "retention")
    for bad in ((None, None), (2, 5), (0, None), (100, None)):
        with pytest.raises(ConfigError):
            check_margin(*bad)
    assert parse_ladder("method.theta=1.0986, 0.5,0.3") == ("method.theta", ["1.0986", "0.5", "0.3"])
    with pytest.raises(ConfigError):
        parse_ladder("method.theta")
    assert auto_looks(600, 7473) == (200, 400, 600) and auto_looks(9000, 399) == (133, 266, 399)


def test_a_finer_margin_needs_more_problems():
    n5 = n_for_certify(0.05, 0.5, 0.1, looks=1, families=500)
    n10 = n_for_certify(0.10, 0.5, 0.1, looks=1, families=500)
    assert n10 < n5 and n5 > 200


def test_the_report_names_the_loosest_certified_setting():
    res = {"design": {"margin": 0.05, "looks": [100, 200], "spending": "obrien_fleming", "alpha": 0.05, "estimand": "difference"},
           "ladder_key": "method.theta", "split": "train", "report_split": "test", "score": "task",
           "loosest_certified": "method.theta=0.9",
           "settings": [{"setting": "method.theta=0.9", "outcome": "certified", "look": 2, "n": 200, "lost": 1, "gained": 1,
                         "loss": 0.0, "loss_upper": 0.04, "tau": [5.0, 4.8, 5.2]},
                        {"setting": "method.theta=0.5", "outcome": "not tested (an earlier setting failed)"}]}
    md = format_result(res)
    assert "**Loosest certified setting: method.theta=0.9**" in md and "| 4.00 |" in md and "5.00 [4.80, 5.20]" in md
