"""SGLang's threshold acceptance on hand-built distributions (named edge cases)."""

from __future__ import annotations

import pytest
import torch

from loosespec_bench.sampling import SamplingParams
from loosespec_bench.errors import ConfigError
from loosespec_bench.verifiers.threshold import ThresholdParams, Threshold, threshold_decide

from .loose_cases import V, logits_from, row, tokens


def test_greedy_accepts_a_mismatch_whose_target_probability_reaches_threshold_single():
    p0 = [0.0] * V
    p0[1], p0[2], p0[3] = 0.5, 0.3, 0.2
    target = logits_from([p0, row(4), row(6)])
    d = threshold_decide(tokens(2, 5), target, ThresholdParams(threshold_single=0.3))
    assert d.n == 1 and d.next_token == 4 and d.loose == [0]


def test_threshold_exactly_met_accepts():
    target = logits_from([[0.5, 0.25, 0.25] + [0.0] * (V - 3), row(0)])
    p_d = float(torch.softmax(target, -1)[0, 2])
    assert threshold_decide(tokens(2), target, ThresholdParams(threshold_single=p_d)).n == 1
    above = float(torch.nextafter(torch.tensor(p_d), torch.tensor(1.0)))
    assert threshold_decide(tokens(2), target, ThresholdParams(threshold_single=above)).n == 0


def test_tie_for_the_argmax_at_one_half_is_accepted_by_threshold_one_half():
    target = logits_from([[0.0, 0.5, 0.5] + [0.0] * (V - 3), row(0)])
    assert threshold_decide(tokens(2), target, ThresholdParams(threshold_single=0.5)).n == 1  # SPD would take token 1
    assert threshold_decide(tokens(2), target, ThresholdParams(threshold_single=0.51)).n == 0


def test_zero_probability_draft_token_fails_even_at_threshold_zero_at_t_positive():
    zero = [0.0] * V
    zero[1] = 1.0
    target = logits_from([zero, row(0)])
    # threshold_single = 0 accepts every token at T = 0 (p >= 0 always): the rule's own limit.
    assert threshold_decide(tokens(3), target, ThresholdParams(threshold_single=0.0)).n == 1
    for seed in range(10):  # at T > 0 the coin test needs p > 0 unless threshold_single = 0
        d = threshold_decide(tokens(3), target, ThresholdParams(threshold_single=0.5), SamplingParams(temperature=1.0, generator=torch.Generator().manual_seed(seed)))
        assert d.n == 0 and d.next_token == 1  # the draw excludes the rejected token


def test_end_of_draft_emits_the_bonus():
    target = logits_from([row(1), row(2), row(7)])
    d = threshold_decide(tokens(1, 2), target, ThresholdParams(threshold_single=1.0))
    assert d.n == 2 and d.next_token == 7


def test_sampling_is_sglangs_coin_test():
    torch.manual_seed(3)
    target = torch.randn(6, V) * 2
    d_tok = torch.randint(0, V, (5,))
    p = torch.softmax(target, -1)
    p_d = p[torch.arange(5), d_tok]
    for seed in range(20):
        dec = threshold_decide(d_tok, target, ThresholdParams(threshold_single=0.3, threshold_acc=0.6), SamplingParams(temperature=1.0, generator=torch.Generator().manual_seed(seed)))
        u = torch.rand(5, generator=torch.Generator().manual_seed(seed))
        assert dec.accept.tolist() == ((u <= p_d / 0.6) | (p_d >= 0.3)).tolist()


def test_drafts_greedily_and_refuses_bad_thresholds():
    assert Threshold().draft_temperature(0.7) == 0.0
    with pytest.raises(ConfigError, match="method.threshold_single=1.5"):
        Threshold(threshold_single=1.5)
    with pytest.raises(ConfigError, match="method.threshold_acc=0"):
        Threshold(threshold_acc=0)
