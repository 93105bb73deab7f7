"""engines/vllm_serving.py: what vLLM's counters and outputs say (steps, acceptance, stop
reasons), arrivals, batch names and the serving record; the serving loop itself is tested over
the fake engine in test_vllm.py."""

from __future__ import annotations

import types
from dataclasses import dataclass, field

from loosespec_bench.engines import vllm_serving as ve
from loosespec_bench.generation import GenerationOutput
from loosespec_bench.measure.serving import batch_size_of


# ---------------------------------------------------------------------------------------------
# Steps from vLLM's counters
# ---------------------------------------------------------------------------------------------
def test_steps_add_the_prefill_and_the_steps_without_a_draft():
    d, a, e = ve.steps_from_counters(10, accepted=[3, 1], drafted=[4, 4])
    assert sum(e) == 10 and e == [4, 2, 1, 1, 1, 1]  # 4 + 2 verified, prefill + 3 plain steps
    assert d == [4, 4, 0, 0, 0, 0] and a == [3, 1, 0, 0, 0, 0]


def test_the_last_step_is_cut_at_the_stop():
    d, a, e = ve.steps_from_counters(5, accepted=[4], drafted=[4])  # prefill 1 + verify 5 > 5 tokens
    assert (d, a, e) == ([4, 0], [4, 0], [4, 1])


def test_a_step_wholly_past_the_stop_is_dropped():
    d, a, e = ve.steps_from_counters(2, accepted=[3, 2], drafted=[3, 3])
    assert (d, e) == ([3, 0], [1, 1]) and sum(e) == 2


def test_a_target_alone_run_is_one_token_per_step():
    d, a, e = ve.steps_from_counters(6, accepted=[], drafted=[])
    assert (d, a, e) == ([0] * 6, [0] * 6, [1] * 6)


def test_no_tokens_no_steps():
    assert ve.steps_from_counters(0, accepted=[], drafted=[]) == ([], [], [])


@dataclass
class _Metric:
    name: str
    value: float = 0.0
    values: list[float] = field(default_factory=list)


class _CountingLLM:
    def __init__(self):
        self.drafts, self.tokens, self.acc, self.pos = 0, 0, 0, [0, 0, 0]

    def step(self, accepted: int, k: int = 3):
        self.drafts += 1
        self.tokens += k
        self.acc += accepted
        for i in range(accepted):
            self.pos[i] += 1

    def get_metrics(self):
        return [_Metric("vllm:spec_decode_num_drafts", self.drafts), _Metric("vllm:spec_decode_num_draft_tokens", self.tokens),
                _Metric("vllm:spec_decode_num_accepted_tokens", self.acc),
                _Metric("vllm:spec_decode_num_accepted_tokens_per_pos", values=list(self.pos))]


def test_counters_around_a_request_give_its_acceptance_histogram():
    llm = _CountingLLM()
    llm.step(3)  # an earlier request
    before = ve.counter_snapshot(llm)
    for acc in (0, 2, 3, 3, 1):
        llm.step(acc)
    accepted, drafted = ve.steps_from_snapshots(before, ve.counter_snapshot(llm))
    assert sorted(accepted) == [0, 1, 2, 3, 3] and drafted == [3] * 5
    assert ve.steps_from_snapshots(before, before) is None


def test_stop_reasons():
    ns = types.SimpleNamespace
    assert ve.stop_reason(ns(finish_reason="length", stop_reason=None)) == "max_new_tokens"
    assert ve.stop_reason(ns(finish_reason="stop", stop_reason="Q:")) == "stop_string"
    assert ve.stop_reason(ns(finish_reason="stop", stop_reason=151645)) == "eos"
    assert ve.stop_reason(ns(finish_reason="stop", stop_reason=None)) == "eos"


def test_arrival_offsets():
    assert ve.arrival_offsets(3, None, seed=1) == [0.0, 0.0, 0.0]
    xs = ve.arrival_offsets(4000, 2.0, seed=1)
    assert xs[0] == 0.0 and xs == sorted(xs) and xs == ve.arrival_offsets(4000, 2.0, seed=1)
    gaps = [b - a for a, b in zip(xs, xs[1:])]
    assert abs(sum(gaps) / len(gaps) - 0.5) < 0.03  # exponential gaps of mean 1 / rate
    assert ve.arrival_offsets(50, 2.0, seed=2) != ve.arrival_offsets(50, 2.0, seed=1)


def test_batch_id_names_the_batch_by_its_prompts():
    assert ve.batch_id([[1, 2], [3]]) == ve.batch_id([[1, 2], [3]]) != ve.batch_id([[1, 2], [4]])
    assert ve.batch_id([[1, 2], [3]]).startswith("2x")


def test_the_serving_record_names_engine_batch_size_once():
    out = GenerationOutput(new_tokens=[1, 2, 3], stop_reason="eos", ttft_s=0.1, e2e_s=0.5)
    rec = ve.serving_record(out, batch="2xabc", requests=2, batch_size=4, request_rate=None, makespan_s=1.0, batch_tokens=6)
    assert "max_num_seqs" not in rec and (rec["batch_size"], rec["requests"]) == (4, 2)
    assert (rec["ttft_s"], rec["e2e_s"], rec["new_tokens"]) == ([0.1], [0.5], [3])
    assert batch_size_of(rec) == 4
    # A record from before issue 71: the configured size was max_num_seqs, batch_size the batch's requests.
    assert batch_size_of({"batch_size": 2, "max_num_seqs": 4}) == 4
