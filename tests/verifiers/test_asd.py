"""ASD (verifiers/asd.py) against its published definition (Kissmetothemoon/ASD at commit
c9d6b68: README "How ASD Works" and src/asd/budget.py `choose_prefix`, read, not copied): the
README's worked example, each of the three constraints, the per-request ledger, and budget 0 =
SPD token for token (on random logits and through the loop on the tiny pair)."""

from __future__ import annotations

import pytest
import torch

from loosespec_bench.decoding import generate
from loosespec_bench.errors import ConfigError
from loosespec_bench.sampling import SamplingParams
from loosespec_bench.step import Draft, TargetScores
from loosespec_bench.verifiers import rule_class
from loosespec_bench.verifiers.asd import ASD, ASDParams, asd_decide
from loosespec_bench.verifiers.spd import SPD, verify_greedy

from ..helpers import code_prompt, make_drafter

V = 16


def _logits(rows: list[dict[int, float]]) -> torch.Tensor:
    """[n, V] logits: the given entries, -10 elsewhere."""
    z = torch.full((len(rows), V), -10.0)
    for i, r in enumerate(rows):
        for tok, val in r.items():
            z[i, tok] = val
    return z


def _oracle(draft: list[int], z: torch.Tensor, B: float, g: float, m: int, remaining: float) -> int:
    """The published definition, stated independently: regret r_i = max z_i - z_i(d_i), suffix
    value K - i, a mismatch kept while the cumulative regret <= remaining, r_i / (K - i) <= g and
    <= m mismatches; B, g or m = 0: strict. Returns the accepted prefix length."""
    K, risk, relaxed = len(draft), 0.0, 0
    for i, d in enumerate(draft):
        top = int(z[i].argmax())
        if d == top:
            continue
        if B == 0 or g == 0 or m == 0:
            return i
        r = float(z[i].max() - z[i, d])
        risk, relaxed = risk + r, relaxed + 1
        if r / (K - i) > g or risk > remaining + 1e-9 or relaxed > m:
            return i
    return K


def test_the_readmes_worked_example():
    # draft [9, 11, 13]; top logits (5, 4, 3) at ids (10, 11, 12); the draft's logits (4.8, 4.0, 2.0).
    z = _logits([{10: 5.0, 9: 4.8}, {11: 4.0}, {12: 3.0, 13: 2.0}, {7: 1.0}])
    dec, spent = asd_decide(torch.tensor([9, 11, 13]), z, ASDParams(risk_budget=8.0, gate=0.25, cap=2), remaining=8.0)
    # position 0: regret 0.2, 0.2 / 3 <= 0.25, kept; 1 matches; 2: regret 1.0 / 1 > 0.25, stops.
    assert dec.n == 2 and dec.next_token == 12 and dec.loose == [0]
    assert spent == pytest.approx(0.2, abs=1e-6)


def test_the_budget_stops_a_mismatch_that_would_overspend_it():
    z = _logits([{1: 3.0, 2: 2.0}, {3: 1.0}, {4: 1.0}])
    p = ASDParams(risk_budget=8.0, gate=1.0, cap=2)
    assert asd_decide(torch.tensor([2, 3]), z, p, remaining=1.0)[0].n == 2   # regret 1.0 <= 1.0
    assert asd_decide(torch.tensor([2, 3]), z, p, remaining=0.99)[0].n == 0  # 1.0 > 0.99


def test_the_cap_limits_mismatches_per_block():
    z = _logits([{1: 1.0, 2: 0.9}, {1: 1.0, 2: 0.9}, {1: 1.0, 2: 0.9}, {0: 1.0}])
    d = torch.tensor([2, 2, 2])
    assert asd_decide(d, z, ASDParams(risk_budget=8.0, gate=1.0, cap=2), 8.0)[0].n == 2
    assert asd_decide(d, z, ASDParams(risk_budget=8.0, gate=1.0, cap=3), 8.0)[0].n == 3


def test_the_gate_reads_the_suffix_value_k_minus_i():
    # the same regret 0.5 passes early (0.5 / 3) and fails late (0.5 / 1) at g = 0.25
    z = _logits([{1: 1.0, 2: 0.5}, {3: 1.0}, {1: 1.0, 2: 0.5}, {0: 1.0}])
    dec, _ = asd_decide(torch.tensor([2, 3, 2]), z, ASDParams(risk_budget=8.0, gate=0.25, cap=2), 8.0)
    assert dec.n == 2 and dec.next_token == 1


def test_random_steps_match_the_stated_definition():
    gen = torch.Generator().manual_seed(0)
    for trial in range(300):
        K = int(torch.randint(1, 8, (1,), generator=gen))
        z = torch.randn(K + 1, V, generator=gen) * 2
        top = z.argmax(-1)
        d = torch.where(torch.rand(K, generator=gen) < 0.5, top[:K], torch.randint(0, V, (K,), generator=gen))
        B = [0.0, 0.5, 2.0, 8.0][trial % 4]
        g = [0.0, 0.25, 1.0][trial % 3]
        m = [0, 1, 2, 5][trial % 4 if trial % 7 else 0]
        rem = float(torch.rand(1, generator=gen)) * B
        dec, _ = asd_decide(d, z, ASDParams(risk_budget=B, gate=g, cap=m), rem)
        assert dec.n == _oracle(d.tolist(), z, B, g, m, rem), (trial, B, g, m)
        assert dec.next_token == int(top[dec.n])


def test_the_ledger_is_per_request():
    z = _logits([{1: 2.0, 2: 1.0}, {0: 1.0}])
    rule = ASD(risk_budget=1.5, gate=1.0, cap=2)
    req = SamplingParams(temperature=0.0, generator=torch.Generator().manual_seed(0))
    step = lambda s: rule(Draft(tokens=torch.tensor([2])), TargetScores(logits=z), s)  # noqa: E731
    assert step(req).num_accepted == 1 and rule.remaining == pytest.approx(0.5)
    assert step(req).num_accepted == 0  # regret 1.0 > the 0.5 left in this request
    other = SamplingParams(temperature=0.0, generator=torch.Generator().manual_seed(0))
    assert step(other).num_accepted == 1  # a new request (a new generator): a fresh budget
    assert step(req).num_accepted == 0  # back to the first request: its ledger is kept (interleaved batch rows)
    rule.begin_request()
    assert rule.remaining == 1.5


@pytest.mark.parametrize("zero", [dict(risk_budget=0.0), dict(gate=0.0), dict(cap=0)])
def test_budget_zero_is_spd_on_random_steps(zero):
    gen = torch.Generator().manual_seed(1)
    rule = ASD(**zero)
    for _ in range(200):
        K = int(torch.randint(1, 8, (1,), generator=gen))
        z = torch.randn(K + 1, V, generator=gen)
        top = z.argmax(-1)
        d = torch.where(torch.rand(K, generator=gen) < 0.6, top[:K], torch.randint(0, V, (K,), generator=gen))
        v = rule(Draft(tokens=d), TargetScores(logits=z))
        assert (v.num_accepted, v.next_token) == verify_greedy(d, z)


@pytest.mark.parametrize("drafter", ["model", "pld"])
def test_budget_zero_is_spd_token_for_token_through_the_loop(models, drafter):
    target, draft, tok = models
    prompt = code_prompt(tok)
    kw = dict(max_new_tokens=48, generator=torch.Generator().manual_seed(0))
    spd = generate(target, prompt, verifier=SPD(), drafter=make_drafter(drafter, draft, 5), **kw)
    kw["generator"] = torch.Generator().manual_seed(0)
    asd = generate(target, prompt, verifier=ASD(risk_budget=0.0), drafter=make_drafter(drafter, draft, 5), **kw)
    assert asd.new_tokens == spd.new_tokens and asd.accepted == spd.accepted


def test_a_loose_budget_keeps_mismatches_and_stays_within_it(models):
    target, draft, tok = models
    rule = ASD(risk_budget=3.0, gate=10.0, cap=5)
    out = generate(target, code_prompt(tok), verifier=rule, drafter=make_drafter("model", draft, 5), max_new_tokens=48,
                   generator=torch.Generator().manual_seed(0), record_steps=True)
    spent = sum(r["regret_spent"] for r in out.step_records)
    assert spent <= 3.0 + 1e-6 and rule.spent == pytest.approx(spent, abs=1e-4)


def test_declarations_and_refusals():
    assert rule_class("asd") is ASD and ASD.display_name == "ASD" and not ASD.lossless
    p = ASDParams()
    assert (p.risk_budget, p.gate, p.cap) == (8.0, 0.25, 2)  # the reference's frozen Qwen/DSpark setting
    with pytest.raises(ConfigError, match="method.risk_budget=-1"):
        ASD(risk_budget=-1)
    with pytest.raises(ConfigError, match="method.cap"):
        ASD(cap=1.5)
    z = _logits([{1: 1.0}, {0: 1.0}])
    with pytest.raises(ValueError, match="greedy"):
        ASD()(Draft(tokens=torch.tensor([1])), TargetScores(logits=z), SamplingParams(temperature=0.7))
