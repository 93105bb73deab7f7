"""Ensemble verification (transformers' assistant_ensemble_weight) on hand-built distributions."""

from __future__ import annotations

import pytest
import torch

from loosespec_bench.errors import ConfigError
from loosespec_bench.sampling import SamplingParams
from loosespec_bench.step import Draft, TargetScores
from loosespec_bench.verifiers.ensemble import EnsembleParams, Ensemble, ensemble_decide

from .loose_cases import V, logits_from, probs_of, row, tokens


def test_accepts_a_mismatch_the_mixture_prefers_and_emits_argmax_v_not_argmax_p():
    # Position 0: p puts 0.5 on token 1, 0.4 on token 2; q puts 0.9 on token 2.
    p0 = [0.0] * V
    p0[1], p0[2], p0[3] = 0.5, 0.4, 0.1
    target = logits_from([p0, row(5), row(6)])  # [K+1 = 3, V]
    q = probs_of([row(2), row(4)])
    d = ensemble_decide(tokens(2, 4), q, target, EnsembleParams(weight=0.5))
    # v_0 = 0.5 p + 0.5 q: v(2) = 0.2 + 0.45 > v(1) = 0.25 + ~0.007: d_0 = 2 accepted loosely.
    assert d.accept.tolist()[0] is True and d.a.tolist()[0] is False
    # Position 1: p = row(5) (0.9), q = row(4) (0.9): v(5) = v(4) up to the spread -> tie:
    # 0.45 + 0.5 * 0.1/7 each; the argmax of a tie is the lower id, 4 = d_1: accepted.
    assert d.n == 2 and d.next_token == 6  # the bonus is argmax p_{K+1}
    # With w = 0.9 the mixture follows p: d_0 = 2 rejected, the emitted token is argmax v = 1.
    d = ensemble_decide(tokens(2, 4), q, target, EnsembleParams(weight=0.9))
    assert d.n == 0 and d.next_token == 1


def test_correction_is_argmax_of_v_where_it_differs_from_argmax_p():
    p0 = [0.0] * V
    p0[1], p0[2], p0[3] = 0.40, 0.35, 0.25
    q0 = [0.0] * V
    q0[3], q0[2] = 0.6, 0.4  # draft proposes 3; v = 0.5 p + 0.5 q: v(3)=0.425, v(2)=0.375, v(1)=0.2
    d = ensemble_decide(tokens(4), probs_of([q0]), logits_from([p0, row(0)]), EnsembleParams(weight=0.5))
    # d_0 = 4 has v = 0: rejected; argmax v = 3 (not argmax p = 1) is emitted, as transformers does.
    assert d.n == 0 and d.next_token == 3


def test_tie_in_v_goes_to_the_lower_token_id_as_torch_argmax():
    p0 = [0.0] * V
    p0[2], p0[5] = 0.5, 0.5
    q0 = [0.0] * V
    q0[2], q0[5] = 0.5, 0.5
    target = logits_from([p0, row(0)])
    assert ensemble_decide(tokens(2), probs_of([q0]), target, EnsembleParams(weight=0.5)).n == 1
    assert ensemble_decide(tokens(5), probs_of([q0]), target, EnsembleParams(weight=0.5)).n == 0


def test_zero_probability_draft_token_under_p_is_still_accepted_when_q_outweighs():
    p0 = [0.0] * V
    p0[1] = 1.0  # the target cannot emit token 3 at all
    q0 = [0.0] * V
    q0[3] = 1.0
    target = logits_from([p0, row(0)])
    assert ensemble_decide(tokens(3), probs_of([q0]), target, EnsembleParams(weight=0.4)).n == 1  # v(3) = 0.6 > v(1) = 0.4
    assert ensemble_decide(tokens(3), probs_of([q0]), target, EnsembleParams(weight=0.6)).n == 0


def test_without_draft_probs_q_is_one_hot_and_end_of_draft_emits_the_bonus():
    target = logits_from([row(1, 0.6), row(2, 0.6), row(7)])
    d = ensemble_decide(tokens(3, 2), None, target, EnsembleParams(weight=0.5))  # v(3) = 0.5 * 0.057 + 0.5 > v(1) = 0.3
    assert d.n == 2 and d.next_token == 7 and d.loose == [0]
    assert ensemble_decide(tokens(), None, logits_from([row(4)]), EnsembleParams(weight=0.5)).next_token == 4  # K = 0


def test_sampling_uses_transformers_ratio_and_is_spd_at_w_one():
    torch.manual_seed(0)
    target = torch.randn(6, V)
    q = torch.softmax(torch.randn(5, V), -1)
    d_tok = q.argmax(-1)
    for seed in range(20):
        g = torch.Generator().manual_seed(seed)
        dec = ensemble_decide(d_tok, q, target, EnsembleParams(weight=0.3), SamplingParams(temperature=1.0, generator=g))
        g = torch.Generator().manual_seed(seed)
        u = torch.rand(5, generator=g)
        p = torch.softmax(target, -1)
        ratio = 1 - 0.3 + 0.3 * p[torch.arange(5), d_tok] / q[torch.arange(5), d_tok]
        assert dec.accept.tolist() == (u <= ratio).tolist()
        assert dec.a.tolist() == (u <= p[torch.arange(5), d_tok] / q[torch.arange(5), d_tok]).tolist()


def test_verifier_reads_its_declared_knob_and_refuses_a_bad_one():
    v = Ensemble(weight=0.25)
    assert v.needs_draft_probs
    target = logits_from([row(1, 0.6), row(2)])
    out = v(Draft(tokens=tokens(3), probs=None), TargetScores(logits=target), SamplingParams())
    assert out.num_accepted == 1 and out.record["rule"] == "ensemble"
    with pytest.raises(ConfigError, match="method.weight=0"):
        Ensemble(weight=0)
    with pytest.raises(ConfigError, match="method.weight=1.5"):
        Ensemble(weight=1.5)
