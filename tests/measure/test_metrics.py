"""metrics' paired statistics (used by the summary and by the engine benchmark, bench/) and the
prompt hash that resume checks."""

from __future__ import annotations

import pytest

from loosespec_bench.measure.metrics import median_or_none, pair_up, paired_ratio_stats, paired_speedup
from loosespec_bench.tasks.prompting import sample_hash
from loosespec_bench.tasks import Sample


def test_pair_up_keeps_common_keys_in_first_order():
    a = {("gsm8k", "1", 0): "a1", ("gsm8k", "2", 0): "a2", ("ifeval", "9", 0): "a9"}
    b = {("ifeval", "9", 0): "b9", ("gsm8k", "1", 0): "b1", ("mgsm", "3", 0): "b3"}
    assert pair_up(a, b) == [("a1", "b1"), ("a9", "b9")]
    assert pair_up({}, b) == []


def test_paired_ratio_stats():
    out = paired_ratio_stats([0.5, 2.0, 1.0, 0.8], [True, False, True, True], name="time_ratio")
    assert out == {
        "time_ratio_median": pytest.approx(0.9),
        "time_ratio_median_identical": pytest.approx(0.8),
        "time_ratio_min": 0.5,
        "time_ratio_max": 2.0,
        "identical": 3,
    }
    empty = paired_ratio_stats([], [])
    assert empty["ratio_median"] is None and empty["ratio_min"] is None and empty["identical"] == 0
    assert median_or_none([]) is None and median_or_none([3.0, 1.0, 2.0]) == 2.0


def test_paired_speedup_pools_tokens_and_time():
    def rec(tokens, secs, b_tokens, b_secs):
        return {"metrics": {"new_tokens": tokens, "total_s": secs},
                "baseline": {"metrics": {"new_tokens": b_tokens, "total_s": b_secs}}}

    out = paired_speedup([rec(10, 1.0, 10, 2.0), rec(30, 1.0, 30, 2.0), {"metrics": {"new_tokens": 5, "total_s": 9.0}}])
    assert out["baseline_tokens_per_s"] == pytest.approx(10.0) and out["speedup"] == pytest.approx(2.0)
    assert paired_speedup([]) == {}


def test_sample_hash_covers_prompt_reference_and_followups():
    base = Sample(id="x/0", messages=[{"role": "user", "content": "2+2?"}], reference="4")
    same = Sample(id="x/0", messages=[{"role": "user", "content": "2+2?"}], reference="4", meta={"lang": "en"})
    assert sample_hash(base) == sample_hash(same)  # meta is not the prompt
    for other in (
        Sample(id="x/0", messages=[{"role": "user", "content": "2+3?"}], reference="4"),
        Sample(id="x/0", messages=[{"role": "user", "content": "2+2?"}], reference="5"),
        Sample(id="x/0", messages=[{"role": "user", "content": "2+2?"}], reference="4", followups=["and 3+3?"]),
    ):
        assert sample_hash(other) != sample_hash(base)



def test_sample_speedup_is_the_median_of_samples_definition():
    from loosespec_bench.measure.metrics import sample_speedup

    recs = [{"metrics": {"tokens_per_s": a}, "baseline": {"metrics": {"tokens_per_s": b}}} for a, b in ((8.0, 4.0), (3.0, 0.0), (9.0, 3.0))]
    assert [sample_speedup(r) for r in recs] == [2.0, None, 3.0]  # a zero-rate baseline has no ratio
    assert sample_speedup({"metrics": {"tokens_per_s": True}, "baseline": {"metrics": {"tokens_per_s": 1.0}}}) is None


# ---- latency percentiles, work summaries -------------------------------------------------------
import numpy as np  # noqa: E402

from loosespec_bench.generation import GenerationOutput  # noqa: E402
from loosespec_bench.measure.latency import STAT_NAMES, latency_stats  # noqa: E402
from loosespec_bench.measure.metrics import latency, latency_summary, sample_metrics, work_summary  # noqa: E402
from loosespec_bench.measure.work import add_forward, new_work  # noqa: E402


def test_latency_statistics_are_vllm_bench_serves_set_and_match_numpy():
    xs = [0.5, 0.1, 0.9, 0.3, 0.7, 0.2, None]
    got = latency_stats(xs, "ttft_s")
    vals = [x for x in xs if x is not None]
    assert STAT_NAMES == ("mean", "std", "median", "p90", "p95", "p99")
    for q, key in ((50, "median"), (90, "p90"), (95, "p95"), (99, "p99")):
        assert got[f"ttft_s_{key}"] == pytest.approx(float(np.percentile(vals, q)))
    assert got["ttft_s_mean"] == pytest.approx(float(np.mean(vals)))
    assert got["ttft_s_std"] == pytest.approx(float(np.std(vals)))  # population std, as vllm bench prints
    assert latency_stats([None], "x") == {f"x_{k}": None for k in STAT_NAMES}
    assert latency_stats([2.0], "x")["x_p99"] == 2.0 and latency_stats([2.0], "x")["x_std"] == 0.0


def test_itl_pools_every_requests_step_gaps_as_vllm_bench_does():
    # Two requests: ITL is per step after the first, pooled over requests (not a mean of means).
    ms = [{"ttft_s": 0.1, "tpot_s": 0.02, "e2e_s": 0.3, "itl_s": [0.1, 0.1]},
          {"ttft_s": 0.2, "tpot_s": 0.05, "e2e_s": 0.6, "itl_s": [0.4]}]
    out = latency_summary(ms)
    assert out["itl_s_mean"] == pytest.approx(0.2) and out["itl_s_median"] == pytest.approx(0.1)
    assert out["e2e_s_mean"] == pytest.approx(0.45)
    assert latency_summary([{"ttft_s": None}], "baseline_")["baseline_itl_s_mean"] is None  # not measured


def test_ttft_and_tpot_of_one_generation():
    gen = GenerationOutput(new_tokens=[1, 2, 3, 4, 5], stop_reason="eos", prefill_s=0.2, decode_s=1.0, ttft_s=0.4)
    assert latency(gen) == {"ttft_s": 0.4, "tpot_s": pytest.approx((1.2 - 0.4) / 4), "e2e_s": 1.2}
    assert latency(GenerationOutput(new_tokens=[1], stop_reason="eos", ttft_s=0.1))["tpot_s"] is None
    assert latency(GenerationOutput(new_tokens=[1, 2], stop_reason="eos"))["ttft_s"] is None


def test_work_summary_totals_both_sides():
    def rec(n):
        w = new_work()
        for _ in range(n):
            add_forward(w, "target_verify", 1, 1, 0)
        w["emitted"] = 2 * n
        return {"metrics": {"work": w}, "baseline": {"metrics": {"work": {**w, "emitted": n}}}}

    recs = [rec(2), rec(3)]
    m = work_summary(recs)
    assert m["work"]["target_verify"]["forwards"] == 5 and m["work_per_token"]["target_forwards"] == 0.5
    b = work_summary(recs, "baseline")
    assert b["baseline_work_per_token"]["target_forwards"] == 1.0 and b["baseline_work_complete"]
    assert work_summary([{"metrics": {}}]) == {}


def test_in_a_batch_the_latency_is_the_requests_own_not_its_throughput_share():
    # A request of a batch of 4: its share of the batch's 8 s is 2 s (throughput); its own
    # latency from arrival to last token is 6 s, its first token at 1 s.
    gen = GenerationOutput(new_tokens=[1, 2, 3, 4, 5, 6], stop_reason="eos", prefill_s=1.0, decode_s=1.0, ttft_s=1.0, e2e_s=6.0)
    assert latency(gen) == {"ttft_s": 1.0, "tpot_s": pytest.approx(1.0), "e2e_s": 6.0}
    assert sample_metrics(gen, 3)["total_s"] == 2.0


def test_dropmatch_cost_parts_pairs_each_timed_sample_with_its_target_forwards():
    from loosespec_bench.measure.metrics import dropmatch_cost_parts

    def rec(dm, target, decode):
        steps = [{"accepted": 1}] + [{"accepted": 0, "dropmatch_s": s} for s in dm]
        return {"steps": steps, "metrics": {"decode_s": decode, "phase_s": {"draft": 1.0, "target": target}}}

    records = [rec([0.01, 0.02], 0.5, 2.0), rec([], 0.4, 1.0),  # no DropMatch step: left out
               {"metrics": {"decode_s": 1.0}}, rec([0.03], 0.6, 3.0)]
    parts = dropmatch_cost_parts(records)
    assert parts["dropmatch_s"] == pytest.approx([0.03, 0.03])
    assert parts["target_s"] == [0.5, 0.6] and parts["decode_s"] == [2.0, 3.0]
    assert dropmatch_cost_parts([{"metrics": {"decode_s": 1.0}}]) == {"dropmatch_s": [], "target_s": [], "decode_s": []}
