"""summary.json: every figure with its interval, n_problems, timing verdicts, provenance."""

from __future__ import annotations

import json

import pytest

from loosespec_bench.store.summary import build_summary, data_files, git_dirty, machine, problem_of
from loosespec_bench.tasks.base import Task
from loosespec_bench.tasks.gsm8k import GSM8K

CONTRACT = ["speedup", "speedup_median_of_samples", "tau", "accuracy", "baseline_accuracy", "accuracy_diff", "retention"]


def _rec(i: int, ok: bool, bok: bool, status: str | None = None, lang: str | None = None) -> dict:
    tok, ms, bs = 60 + i, 1.0 + i / 10, 2.0 + i / 7
    rec = {
        "id": f"{lang}-{i // 3}" if lang else f"s{i}",
        "meta": {"language": lang} if lang else {},
        "output_ids": [1] * tok,
        "metrics": {"new_tokens": tok, "steps": 20, "tau": tok / 20, "total_s": ms, "prefill_s": 0.1, "decode_s": ms - 0.1,
                    "tokens_per_s": tok / ms, "drafted": [5] * 20, "accepted": [2] * 20, "phase_s": {}},
        "score": {"correct": ok},
        "baseline": {"output_ids": [1] * tok, "score": {"correct": bok},
                     "metrics": {"new_tokens": tok, "steps": tok, "total_s": bs, "tokens_per_s": tok / bs}},
    }
    if status:
        rec["timing"] = {"status": status, "method": {"others_share": 0.05}, "baseline": {"others_share": 0.05}}
    return rec


def test_every_contract_figure_has_its_interval_and_old_records_say_timing_not_recorded():
    recs = [_rec(i, i % 3 != 0, i % 4 != 0) for i in range(12)]  # no timing: a run from before it
    s = build_summary(Task(), recs, seed=0)
    for f in CONTRACT:
        assert f in s and f"{f}_ci_low" in s and f"{f}_ci_high" in s, f
        assert s[f"{f}_ci_low"] <= s[f] <= s[f"{f}_ci_high"], f
    assert s["ci_level"] == 0.95 and "bootstrap" in s["ci_method"]
    assert s["n_problems"] == 12 and s["quality_figure"] == "accuracy"
    assert s["timing"]["not_recorded"] == 12 and not s["timing"]["contaminated"]
    assert s["underpowered"] is True and s["power_threshold"] == 0.05  # 12 samples decide nothing
    assert s["retention_ci_low"] is not None  # the old keys stay


def test_excluded_timings_leave_the_speed_figures_but_not_quality():
    recs = [_rec(i, True, True, "clean") for i in range(5)] + [_rec(5, False, True, "excluded")]
    s = build_summary(Task(), recs, seed=0, timing_tolerance=0.25)
    timed = build_summary(Task(), recs[:5], seed=0)
    assert s["speedup"] == pytest.approx(timed["speedup"]) and s["speedup_ci_low"] == pytest.approx(timed["speedup_ci_low"])
    assert s["accuracy"] == pytest.approx(5 / 6) and s["n_timed"] == 5
    assert (s["timing"]["clean"], s["timing"]["excluded"], s["timing"]["contaminated"]) == (5, 1, True)


def test_the_tau_interval_covers_every_sample_as_its_point_does_not_just_the_timed_subset():
    # Named case: timing.subset=3 of 12. The timed samples happen to have the highest tau; an
    # interval over them alone (the bug before) sat above the run's tau, its point outside it.
    recs = [_rec(i, True, True, "clean" if i >= 9 else "untimed") for i in range(12)]
    for i, r in enumerate(recs):
        r["metrics"]["steps"] = 30 - 2 * i  # tau rises with i
    s = build_summary(Task(), recs, seed=0)
    alone = build_summary(Task(), recs[9:], seed=0)
    assert s["n_timed"] == 3 and s["speedup_ci_low"] == pytest.approx(alone["speedup_ci_low"])
    assert s["tau_ci_low"] <= s["tau"] <= s["tau_ci_high"]
    assert s["tau_ci_high"] < alone["tau_ci_low"]  # the subset's interval describes other samples


def test_n_problems_counts_mgsm_problems_not_languages():
    recs = [_rec(i, True, True, lang=lang) for i, lang in zip(range(6), ["fr", "de", "th"] * 2)]
    # ids fr-0, de-1, th-1, fr-1, de-1 ... as written by runs from before meta["problem"]
    assert problem_of({"id": "fr-0", "meta": {"language": "fr"}}) == problem_of({"id": "th-0", "meta": {"language": "th"}})
    assert build_summary(Task(), recs, seed=0)["n_problems"] == len({problem_of(r) for r in recs}) == 2


def test_provenance_machine_git_and_data_file_hashes(data_dir):
    m = machine()
    assert m["cpu_count"] >= 1 and (m["memory_gb"] is None or m["memory_gb"] > 0)
    assert git_dirty() in (True, False, None)
    task = GSM8K(data_dir=str(data_dir), limit=2)
    task.samples()
    files = data_files(task)
    assert list(files) == ["gsm8k/test.jsonl"] and len(files["gsm8k/test.jsonl"]) == 64
    assert json.dumps(files)  # JSON-ready


def test_niah_retention_is_on_rulers_recall_not_on_all_values_found():
    # Named case: the method recalls 18 of 20 values where the target alone recalled all 20 on
    # every sample. All-found accuracy falls from 1 to 0 (retention 0 on it); RULER's score, the
    # figure FLy's tables print, falls from 1.0 to 0.9: retention 0.9 with its interval.
    from loosespec_bench.tasks.niah import NIAH

    recs = [_rec(i, False, True) for i in range(10)]
    for r in recs:
        r["meta"] = {"context_length": 512, "depth": 50}
        r["score"] = {"correct": False, "recall": 0.9, "found": [True] * 18 + [False] * 2}
        r["baseline"]["score"] = {"correct": True, "recall": 1.0, "found": [True] * 20}
    s = build_summary(NIAH.__new__(NIAH), recs, seed=0)
    assert s["quality_figure"] == "recall" and s["retention_key"] == "recall"
    assert s["recall"] == pytest.approx(0.9) and s["baseline_recall"] == pytest.approx(1.0)
    assert s["recall_diff"] == pytest.approx(-0.1) and s["recall_ci_low"] is not None
    assert s["retention"] == pytest.approx(0.9) and s["retention_ci_low"] == pytest.approx(0.9)
    assert s["accuracy"] == 0.0 and s["baseline_accuracy"] == 1.0  # secondary, still recorded
    # The printed block names the figure its retention is on (it said "accuracy retention").
    from loosespec_bench.run.app import format_summary

    block = format_summary({**s, "method": "fly", "pair": "p", "dataset": "niah", "tau_definition": "-", "run_dir": "r"})
    assert "recall retention" in block and "accuracy retention" not in block


def test_printed_rates_are_over_the_timed_samples_so_they_divide_to_the_speedup():
    # Named case (FLy on MGSM, 10 of 30 timed): "7.94" (method, all 30) beside "5.95" (target
    # alone, the 10 timed) read as 1.33x next to a measured 0.56x.
    from loosespec_bench.run.app import format_summary

    recs = [_rec(i, True, True) for i in range(9)]
    for r in recs[3:]:  # untimed: the target alone read from the store, no paired timing
        r["timing"] = {"status": "untimed"}
        r["metrics"]["total_s"] /= 10  # and fast: the all-sample rate is far from the timed one
    s = build_summary(Task(), recs, seed=0)
    timed = recs[:3]
    rate = sum(r["metrics"]["new_tokens"] for r in timed) / sum(r["metrics"]["total_s"] for r in timed)
    base = sum(r["baseline"]["metrics"]["new_tokens"] for r in timed) / sum(r["baseline"]["metrics"]["total_s"] for r in timed)
    assert s["timed_tokens_per_s"] == pytest.approx(rate) and s["speedup"] == pytest.approx(rate / base)
    block = format_summary({**s, "method": "fly", "pair": "p", "dataset": "d", "tau_definition": "-", "run_dir": "r"})
    assert f"{rate:.2f} on the 3 timed ({s['tokens_per_s']:.2f} on all 9)" in block
    assert f"{base:.2f} on the 3 timed" in block


def test_a_one_sample_run_prints_na_and_says_why_it_is_underpowered():
    """n <= 1: no interval exists, so the end-of-run table prints n/a, never `0.15x [0.15, 0.15]`;
    `underpowered` says why; counts stand beside the shares."""
    from loosespec_bench.run.app import format_summary
    from loosespec_bench.schema import figure

    s = build_summary(Task(), [_rec(0, True, True)], seed=0)
    block = format_summary({**s, "method": "spd", "pair": "p", "dataset": "d", "tau_definition": "-", "run_dir": "r"})
    label = figure("speedup").label  # the end-of-run table prints the report's labels
    speed = next(line for line in block.splitlines() if line.startswith(label))
    assert "[n/a]" in speed and "[" + speed[len(label):].split()[0].rstrip("×") not in speed
    assert "no interval exists" in block and "underpowered" in block
    assert "identical to target alone" in block and "1/1" in block
    many = build_summary(Task(), [_rec(i, True, True) for i in range(30)], seed=0)
    block = format_summary({**many, "method": "spd", "pair": "p", "dataset": "d", "tau_definition": "-", "run_dir": "r"})
    flat = " ".join(block.split())  # the table wraps its rows and notes at 100 characters
    assert "zero discordant pairs at n = 30" in flat and "lost / gained 0 / 0" in flat
    # Identical 0/1 quality on both sides: no zero-width bracket but the exact interval (zero
    # discordant pairs in the same machinery): retention's lower bound is the loss rate's exact
    # one-sided upper bound at 1.25%, 1 - 0.0125^(1/30) (the rule of three's exact form).
    assert many["retention_ci_low"] == pytest.approx(0.0125 ** (1 / 30)) and many["retention_ci_high"] == 1.0
    assert "accuracy retention" in block and "[0.864, 1.000]" in block and "quality: exact" in block

# ---- work counts' sign test and the cost model's prediction -------------------------------------
from loosespec_bench.measure.costmodel import Calibration, ForwardCost  # noqa: E402
from loosespec_bench.store.summary import cost_model_fields, work_sign_tests  # noqa: E402
from loosespec_bench.measure.work import add_forward, new_work, per_token  # noqa: E402


def _side(forwards: int, tokens: int, seconds: float) -> dict:
    w = new_work()
    for _ in range(forwards):
        add_forward(w, "target_verify", 1, 1, 0)
    w["emitted"] = w["steps"] = tokens
    w["steps"] = forwards
    return {"metrics": {"work": w, "work_per_token": per_token(w), "new_tokens": tokens, "total_s": seconds}}


def test_work_sign_test_over_problems():
    recs = [{"id": str(i), "meta": {"problem": f"p{i}"}, **_side(5, 10, 1.0), "baseline": _side(10, 10, 2.0)} for i in range(6)]
    recs.append({"id": "6", "meta": {"problem": "p6"}, **_side(10, 10, 1.0), "baseline": _side(10, 10, 2.0)})  # a tie
    t = work_sign_tests(recs)["target_forwards_per_token_sign"]
    assert (t["fewer"], t["more"], t["ties"]) == (6, 0, 1)
    assert t["p"] == pytest.approx(2 * 0.5 ** 6)
    assert work_sign_tests([{"id": "x", "metrics": {}}]) == {}


def test_cost_model_fields_predict_from_counts():
    # One target forward = 0.1 s (no LM head, context, overhead): the method's 5 forwards for 10
    # tokens against the target alone's 10: predicted speedup 2.0.
    cost = ForwardCost(rows=[1, 2], body_s=[0.1, 0.2], ctx0=0, ctx_row_s=0.0, lm_head_row_s=0.0)
    cal = Calibration(target=cost, draft=None, extra_lm_head_row_s=0, lookup_s=0, step_overhead_s=0, signature={})
    recs = [{"id": str(i), **_side(5, 10, 0.6), "baseline": _side(10, 10, 1.0)} for i in range(4)]
    out = cost_model_fields(recs, recs, cal, "test", seed=0)
    assert out["predicted_speedup"] == pytest.approx(2.0)
    assert out["predicted_speedup_ci_low"] == pytest.approx(2.0) and out["predicted_speedup_ci_high"] == pytest.approx(2.0)
    assert out["predicted_tokens_per_s"] == pytest.approx(10 / 0.5)
    assert out["cost_model"]["method_time_measured_over_predicted"] == pytest.approx(0.6 / 0.5)
    none = cost_model_fields(recs, recs, None, "no calibration for pair tiny", seed=0)
    assert none["predicted_speedup"] is None and "no calibration" in none["cost_model"]["why"]


def test_the_summary_records_lm_evals_n_shot_and_task_version_per_data_set():
    recs = [_rec(i, True, i % 2 == 0) for i in range(4)]
    gsm8k = GSM8K(num_fewshot=2)  # the CPU replication's 2-shot prompt
    s = build_summary(gsm8k, recs, seed=0)
    assert s["n-shot"] == {"gsm8k": 2} and s["versions"] == {"gsm8k": GSM8K.version}
    assert build_summary(Task(), recs, seed=0)["n-shot"] == {"task": 0}  # a zero-shot task
