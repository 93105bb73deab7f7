"""Min-p cascade acceptance on hand-built distributions (named edge cases)."""

from __future__ import annotations

import pytest
import torch

from loosespec_bench.sampling import SamplingParams
from loosespec_bench.errors import ConfigError
from loosespec_bench.verifiers.cascade import CascadeParams, Cascade, cascade_decide

from .loose_cases import V, logits_from, probs_of, row, tokens


def p_row(**mass: float) -> list[float]:
    r = [0.0] * V
    for k, m in mass.items():
        r[int(k[1:])] = m
    return r


def test_min_p_set_accepts_a_runner_up_and_stops_at_a_token_outside_it():
    target = logits_from([p_row(t1=0.5, t2=0.3, t3=0.2), p_row(t4=0.8, t5=0.2), row(6)])
    d = cascade_decide(tokens(2, 5), None, target, CascadeParams(alpha=0.5))  # 0.3 >= 0.25 yes; 0.2 >= 0.4 no
    assert d.n == 1 and d.next_token == 4 and d.loose == [0]


def test_threshold_exactly_met_accepts_tie_at_alpha_one():
    # An exact tie (equal logits): alpha = 1 accepts both tied tokens; SPD only the lower id.
    target = logits_from([p_row(t2=0.5, t5=0.5), row(0)])
    assert cascade_decide(tokens(5), None, target, CascadeParams(alpha=1.0)).n == 1
    assert cascade_decide(tokens(5), None, target, CascadeParams(alpha=1.0)).a.tolist() == [False]
    # p(d) / max p exactly alpha: 0.25 / 0.5 in binary is exact.
    target = logits_from([p_row(t1=0.5, t2=0.25, t3=0.25), row(0)])
    assert cascade_decide(tokens(2), None, target, CascadeParams(alpha=0.5)).n == 1
    assert cascade_decide(tokens(2), None, target, CascadeParams(alpha=0.5000001)).n == 0


def test_zero_probability_draft_token_is_rejected_at_any_alpha():
    target = logits_from([p_row(t1=1.0), row(0)])
    d = cascade_decide(tokens(3), None, target, CascadeParams(alpha=1e-9))
    assert d.n == 0 and d.next_token == 1


def test_end_of_draft_emits_the_bonus():
    target = logits_from([row(1), row(2), row(7)])
    d = cascade_decide(tokens(1, 2), None, target, CascadeParams(alpha=0.9))
    assert d.n == 2 and d.next_token == 7
    assert cascade_decide(tokens(), None, logits_from([row(3)]), CascadeParams(alpha=0.5)).next_token == 3


def test_sampling_is_never_stricter_than_the_exact_test_and_falls_back_to_min_p():
    torch.manual_seed(1)
    target = torch.randn(6, V) * 2
    q = torch.softmax(torch.randn(5, V), -1)
    d_tok = q.argmax(-1)
    p = torch.softmax(target, -1)
    in_min_p = p[torch.arange(5), d_tok] >= 0.3 * p[:5].max(-1).values
    for seed in range(20):
        dec = cascade_decide(d_tok, q, target, CascadeParams(alpha=0.3), SamplingParams(temperature=1.0, generator=torch.Generator().manual_seed(seed)))
        assert (dec.accept >= dec.a).all()
        assert dec.accept.tolist() == (dec.a | in_min_p).tolist()


def test_params_refuse_alpha_outside_zero_one():
    with pytest.raises(ConfigError, match="method.alpha=0"):
        Cascade(alpha=0)
    with pytest.raises(ConfigError, match="method.alpha=1.5"):
        Cascade(alpha=1.5)
    assert not Cascade().needs_draft_probs
