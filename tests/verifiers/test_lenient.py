"""Lenient speculative sampling on hand-built distributions (named edge cases)."""

from __future__ import annotations

import pytest
import torch

from loosespec_bench.sampling import SamplingParams
from loosespec_bench.errors import ConfigError
from loosespec_bench.verifiers.lenient import LenientParams, Lenient, lenient_decide
from loosespec_bench.verifiers.spd import verify_sampling

from .loose_cases import V, logits_from, probs_of, row, tokens


def test_greedy_reading_accepts_when_p_reaches_l_times_q():
    p0 = [0.0] * V
    p0[1], p0[2] = 0.6, 0.4
    target = logits_from([p0, row(5)])
    q = probs_of([row(2, 0.7)])  # q(2) = 0.7: 0.4 >= 0.5 * 0.7 yes; 0.4 >= 0.6 * 0.7 no
    assert lenient_decide(tokens(2), q, target, LenientParams(lenience=0.5)).n == 1
    d = lenient_decide(tokens(2), q, target, LenientParams(lenience=0.6))
    assert d.n == 0 and d.next_token == 1


def test_threshold_exactly_met_without_draft_probs_is_p_at_least_l():
    target = logits_from([[0.5, 0.25, 0.25] + [0.0] * (V - 3), row(0)])
    p_d = float(torch.softmax(target, -1)[0, 2])
    assert lenient_decide(tokens(2), None, target, LenientParams(lenience=p_d)).n == 1
    assert lenient_decide(tokens(2), None, target, LenientParams(lenience=float(torch.nextafter(torch.tensor(p_d), torch.tensor(1.0))))).n == 0


def test_zero_probability_draft_token_is_always_rejected_and_argmax_always_kept():
    zero = [0.0] * V
    zero[1] = 1.0
    target = logits_from([zero, row(0)])
    assert lenient_decide(tokens(3), probs_of([row(3)]), target, LenientParams(lenience=1e-6)).n == 0
    assert lenient_decide(tokens(1), probs_of([row(1)]), target, LenientParams(lenience=1.0)).n == 1


def test_end_of_draft_emits_the_bonus():
    target = logits_from([row(1), row(2), row(7)])
    d = lenient_decide(tokens(1, 2), probs_of([row(1), row(2)]), target, LenientParams(lenience=0.5))
    assert d.n == 2 and d.next_token == 7


def test_sampling_at_l_one_is_speculative_sampling_decision_for_decision():
    torch.manual_seed(2)
    for seed in range(30):
        target = torch.randn(6, V) * 2
        q = torch.softmax(torch.randn(5, V), -1)
        d_tok = torch.multinomial(q, 1).squeeze(-1)
        ours = lenient_decide(d_tok, q, target, LenientParams(lenience=1.0), SamplingParams(temperature=1.0, generator=torch.Generator().manual_seed(seed)))
        n, nxt = verify_sampling(d_tok, q, target, temperature=1.0, generator=torch.Generator().manual_seed(seed))
        assert (ours.n, ours.next_token) == (n, nxt)
        assert ours.accept.tolist() == ours.a.tolist()


def test_sampling_accepts_with_probability_min_one_p_over_l_q():
    p0 = [0.0] * V
    p0[1], p0[2] = 0.8, 0.2
    target = logits_from([p0, row(0)])
    q = probs_of([row(2, 0.8)])  # p/(l q) = 0.2 / (0.5 * 0.8) = 0.5
    hits = sum(lenient_decide(tokens(2), q, target, LenientParams(lenience=0.5), SamplingParams(temperature=1.0, generator=torch.Generator().manual_seed(s))).n for s in range(2000))
    assert 0.45 < hits / 2000 < 0.55  # binomial sd ~ 0.011


def test_params_refuse_lenience_outside_zero_one():
    with pytest.raises(ConfigError, match="method.lenience=0"):
        Lenient(lenience=0)
    with pytest.raises(ConfigError, match="method.lenience=2"):
        Lenient(lenience=2)
