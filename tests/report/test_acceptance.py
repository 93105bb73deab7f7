"""The acceptance export (report/acceptance.py): vLLM's and AIPerf's per-request schemas, and
the two acceptance-length definitions, on hand-built records and on a committed run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from loosespec_bench.errors import ConfigError
from loosespec_bench.report.acceptance import (AIPERF_FILE, VLLM_FILE, acceptance_lengths, aiperf_record, export_run,
                                               request_acceptance, vllm_record)

REPO = Path(__file__).resolve().parents[2]
# A committed run whose samples keep their step records (FLy + MLA's drafter ablation, GSM8K).
COMMITTED = REPO / "results/cpu/runs/fly_ablation_mla/fly_model-k15_qwen2.5-coder-0.5b-1.5b_gsm8k_513f2de9"


def rec(rid: str, accepted: list[int], drafted: list[int], steps: list[dict] | None = None) -> dict:
    new_tokens = sum(a + 1 for a in accepted if isinstance(a, int))  # one correction or bonus per step
    out = {"id": rid, "output_text": "", "metrics": {"accepted": accepted, "drafted": drafted, "steps": len(accepted),
                                                     "new_tokens": new_tokens}}
    if steps is not None:
        out["steps"] = steps
    return out


def test_a_request_that_drafted_nothing_has_no_spec_decode_record():
    # The target alone (K = 0): vLLM reports null, AIPerf has no record.
    assert request_acceptance(rec("a", [0, 0], [0, 0])) is None
    assert vllm_record(None) is None


def test_steps_without_a_draft_are_left_out_of_the_spec_steps_but_counted_apart():
    # Prompt lookup: step 2 found no match. vLLM omits it; our tau counts it.
    acc = request_acceptance(rec("a", [2, 0, 1], [3, 0, 3]))
    assert acc["num_spec_steps"] == 2 and acc["steps_without_draft"] == 1
    assert acc["num_accepted_draft_tokens"] == 3 and acc["num_draft_tokens"] == 6
    assert acc["mean_acceptance_length"] == pytest.approx(1 + 3 / 2)
    assert acc["draft_acceptance_rate"] == pytest.approx(0.5)


def test_the_vllm_record_has_vllms_dense_histograms_and_string_keys():
    v = vllm_record(request_acceptance(rec("a", [2, 0, 1, 3], [3, 3, 2, 3])))
    assert v["acceptance_histogram"] == [1, 1, 1, 1]  # dense, length num_spec_tokens + 1
    assert v["acceptance_histogram_by_draft_length"] == {"2": [0, 1, 0], "3": [1, 0, 1, 1]}
    assert sum(v["acceptance_histogram"]) == v["num_spec_steps"] == 4
    assert v["num_spec_tokens"] == 3


def test_the_aiperf_record_keeps_aiperfs_invariants():
    a = aiperf_record(request_acceptance(rec("a", [2, 0, 0, 3], [3, 3, 3, 3])), "loosespec_bench-hf")
    assert a["acceptance_histogram"] == {0: 2, 2: 1, 3: 1}  # sparse: zero buckets omitted
    assert sum(a["acceptance_histogram"].values()) == a["num_spec_steps"]
    assert sum(j * c for j, c in a["acceptance_histogram"].items()) == a["num_accepted_draft_tokens"]
    assert a["num_accepted_draft_tokens"] <= a["num_draft_tokens"]


def test_loose_accepts_are_counted_from_the_step_records_and_unknown_without_them():
    steps = [{"accepted": 2, "raw_match": [True, False, False], "loose_accepted": [1]},
             {"accepted": 0, "raw_match": [False], "loose_accepted": []}]
    assert request_acceptance(rec("a", [2, 0], [3, 1], steps))["loose_accepted_draft_tokens"] == 1
    assert request_acceptance(rec("a", [2, 0], [3, 1]))["loose_accepted_draft_tokens"] is None


def test_the_two_definitions_differ_where_requests_differ_in_length():
    # A long request with length 3 and a short one with length 1: pooled weighs by steps.
    records = [rec("long", [2] * 9, [2] * 9), rec("short", [0], [2])]
    lengths = acceptance_lengths([request_acceptance(r) for r in records], records)
    assert lengths["pooled"] == pytest.approx(1 + 18 / 10)
    assert lengths["mean_of_request_means"] == pytest.approx((3 + 1) / 2)
    assert lengths["tau"] == pytest.approx(28 / 10)


def test_a_damaged_record_gets_one_error_naming_the_request():
    with pytest.raises(ConfigError, match="request a: metrics.accepted"):
        request_acceptance(rec("a", ["x"], [1]))  # type: ignore[list-item]
    with pytest.raises(ConfigError, match="accepted more draft tokens"):
        request_acceptance(rec("a", [3], [1]))


def test_the_export_round_trips_on_a_committed_run(tmp_path):
    lengths = export_run(COMMITTED, tmp_path)
    samples = [json.loads(line) for line in (COMMITTED / "samples.jsonl").read_text().splitlines() if line.strip()]
    vllm = [json.loads(line) for line in (tmp_path / VLLM_FILE).read_text().splitlines()]
    aiperf = [json.loads(line) for line in (tmp_path / AIPERF_FILE).read_text().splitlines()]
    assert [s["id"] for s in samples] == [v["id"] for v in vllm] == [a["id"] for a in aiperf]
    for s, v, a in zip(samples, vllm, aiperf):
        m = s["metrics"]
        sd = v["metrics"]["speculative_decoding"]
        # Back to the run's own per-step counts: the steps with a draft, in order.
        spec = [(x, d) for x, d in zip(m["accepted"], m["drafted"]) if d]
        assert sd["per_step_accepted"] == [x for x, _ in spec] and sd["per_step_drafted"] == [d for _, d in spec]
        assert sd["num_spec_steps"] + v["loosespec"]["steps_without_draft"] == m["steps"]
        rec_ = a["spec_decode_acceptance"]
        hist = {int(j): c for j, c in rec_["acceptance_histogram"].items()}  # JSON keys are text
        assert sum(hist.values()) == rec_["num_spec_steps"]
        assert sum(j * c for j, c in hist.items()) == rec_["num_accepted_draft_tokens"]
    # Our tau is the summary's (emitted tokens over every step, pooled).
    summary = json.loads((COMMITTED / "summary.json").read_text())
    assert lengths["tau"] == pytest.approx(summary["tau"])
    assert lengths["loose_accepted_draft_tokens"] > 0  # FLy accepted mismatches on this run
    assert "mean of per-request means" in (tmp_path / "acceptance.md").read_text()


def test_the_command_refuses_a_path_that_is_not_a_run_folder(tmp_path):
    out = subprocess.run([sys.executable, "-m", "loosespec_bench.report.acceptance", str(tmp_path / "nope")],
                         capture_output=True, text=True)
    assert out.returncode == 2
    assert out.stderr.strip().startswith("error:") and len(out.stderr.strip().splitlines()) == 1
