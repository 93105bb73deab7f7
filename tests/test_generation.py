"""generation.py: the engines' common output and multi-turn merging."""

from __future__ import annotations

from loosespec_bench.generation import GenerationOutput, merge_turns


def _gen(tokens, emitted, prefill=0.1, decode=0.5, phase=None, reason="eos"):
    return GenerationOutput(new_tokens=tokens, stop_reason=reason, drafted=[2] * len(emitted), accepted=[e - 1 for e in emitted],
                            emitted=emitted, prefill_s=prefill, decode_s=decode, phase_s=phase or {})


def test_tau_counts_the_bonus_token_and_is_zero_without_steps():
    assert _gen([1, 2, 3], [2, 1]).tau == 1.5
    assert GenerationOutput(new_tokens=[], stop_reason="max_new_tokens").tau == 0.0


def test_merge_turns_sums_tokens_steps_times_and_phases_and_keeps_the_last_stop_reason():
    a = _gen([1, 2], [2], prefill=0.1, decode=1.0, phase={"draft": 0.5}, reason="eos")
    b = _gen([3, 4, 5], [1, 2], prefill=0.2, decode=2.0, phase={"draft": 0.25, "target": 1.0}, reason="max_new_tokens")
    m = merge_turns([a, b])
    assert m.new_tokens == [1, 2, 3, 4, 5]
    assert m.emitted == [2, 1, 2] and m.accepted == [1, 0, 1] and m.drafted == [2, 2, 2]
    assert m.steps == 3 and m.tau == 5 / 3
    assert abs(m.prefill_s - 0.3) < 1e-12 and abs(m.decode_s - 3.0) < 1e-12
    assert m.phase_s == {"draft": 0.75, "target": 1.0}
    assert m.stop_reason == "max_new_tokens"


def test_merge_turns_of_one_turn_is_that_turn():
    a = _gen([7], [1], phase={"verify": 0.1})
    m = merge_turns([a])
    assert (m.new_tokens, m.emitted, m.phase_s, m.stop_reason) == (a.new_tokens, a.emitted, a.phase_s, a.stop_reason)
