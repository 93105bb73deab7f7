"""Medusa's typical acceptance on hand-built distributions (named edge cases)."""

from __future__ import annotations

import math

import pytest
import torch

from loosespec_bench.sampling import SamplingParams
from loosespec_bench.errors import ConfigError
from loosespec_bench.verifiers.typical import TypicalParams, Typical, typical_decide, typical_threshold

from .loose_cases import V, logits_from, row, tokens


def test_threshold_is_medusas_min_of_epsilon_and_entropy_term():
    p = torch.tensor([[0.5, 0.5] + [0.0] * (V - 2)])
    H = -(0.5 * math.log(0.5 + 1e-5)) * 2
    assert float(typical_threshold(p, 0.09, 0.3)[0]) == pytest.approx(min(0.09, 0.3 * math.exp(-H)))
    assert float(typical_threshold(p, 0.9, 0.3)[0]) == pytest.approx(0.3 * math.exp(-H))


def test_flat_target_accepts_a_runner_up_and_sharp_target_does_not():
    flat = [0.0] * V
    flat[1], flat[2], flat[3] = 0.4, 0.35, 0.25
    target = logits_from([flat, row(4, 0.97), row(6)])
    d = typical_decide(tokens(2, 5), target, TypicalParams(epsilon=0.09, delta=0.3))
    # Position 0: 0.35 > min(0.09, .) -> accepted. Position 1: p(5) = 0.03/7 below 0.09 -> rejected.
    assert d.n == 1 and d.next_token == 4 and d.loose == [0]


def test_threshold_exactly_met_rejects_strict_inequality():
    target = logits_from([[0.5, 0.25, 0.25] + [0.0] * (V - 3), row(0)])
    p = torch.softmax(target, -1)
    eps = float(p[0, 1])  # epsilon equal to p(d): the min picks epsilon; p(d) > eps is false
    assert typical_decide(tokens(1), target, TypicalParams(epsilon=eps, delta=10.0)).n == 0
    assert typical_decide(tokens(1), target, TypicalParams(epsilon=float(torch.nextafter(p[0, 1], torch.tensor(0.0))), delta=10.0)).n == 1


def test_greedy_never_rejects_the_argmax_and_zero_probability_tokens_fail():
    # epsilon, delta large: the threshold exceeds max p, yet the argmax passes at T = 0.
    target = logits_from([row(1, 0.6), row(2)])
    assert typical_decide(tokens(1), target, TypicalParams(epsilon=5.0, delta=5.0)).n == 1
    zero = [0.0] * V
    zero[1] = 1.0
    d = typical_decide(tokens(3), logits_from([zero, row(0)]), TypicalParams(epsilon=1e-9, delta=1e-9))
    assert d.n == 0 and d.next_token == 1


def test_end_of_draft_emits_the_bonus_and_sampling_drops_atypical_tokens_from_the_draw():
    target = logits_from([row(1), row(2), row(7)])
    d = typical_decide(tokens(1, 2), target, TypicalParams(epsilon=0.09, delta=0.3))
    assert d.n == 2 and d.next_token == 7
    # T > 0: the bonus row puts 0.9 on 7 and 0.1/7 on the rest, all below 0.09: only 7 can be drawn.
    for seed in range(10):
        d = typical_decide(tokens(1, 2), target, TypicalParams(epsilon=0.09, delta=0.3), SamplingParams(temperature=1.0, generator=torch.Generator().manual_seed(seed)))
        assert d.n == 2 and d.next_token == 7


def test_params_refuse_non_positive_values():
    with pytest.raises(ConfigError, match="method.epsilon=0"):
        Typical(epsilon=0)
    with pytest.raises(ConfigError, match="method.delta=-1"):
        Typical(delta=-1)
