"""MLA drafter: prompt lookup accelerating the draft model must not change its greedy draft."""

from __future__ import annotations

import pytest
import torch

from loosespec_bench.decoding import generate
from loosespec_bench.drafters import MLADrafter, ModelDrafter
from loosespec_bench.models.tiny import tiny_model
from loosespec_bench.sampling import SamplingParams
from loosespec_bench.verifiers.spd import SPD


def _ids(tok, text: str) -> torch.Tensor:
    return torch.tensor(tok(text, add_special_tokens=False).input_ids)


# Repetitive text: prompt lookup finds n-gram matches, so the lookup path is exercised.
REPEAT = "for i in range(10):\n    total += i\nfor i in range(10):\n    total += i\nfor i in range(1"


@pytest.mark.parametrize("draft_seed", [0, 1])
@pytest.mark.parametrize("k", [1, 5, 12])
def test_mla_draft_equals_model_drafter_greedy_draft(models, draft_seed, k):
    _, _, tok = models
    # tiny:0 drafts its own repetitive continuation (lookups often accepted); tiny:1 seldom.
    draft = tiny_model(draft_seed)
    prompt = _ids(tok, REPEAT)
    ref, mla = ModelDrafter(draft), MLADrafter(draft)
    ref.reset(prompt)
    mla.reset(prompt)
    committed = prompt
    for step in range(4):
        a = ref.propose(committed, k, want_probs=True)
        b = mla.propose(committed, k, want_probs=True)
        assert b.tokens.tolist() == a.tokens.tolist()
        torch.testing.assert_close(b.probs, a.probs, atol=1e-5, rtol=1e-4)
        assert b.info["draft_forwards"] <= k
        # Commit part of the draft plus a foreign token, as a verifier would: both drafters
        # must roll their caches back to the same committed prefix.
        committed = torch.cat([committed, a.tokens[: step % (k + 1)], torch.tensor([ord("x")])])


def test_mla_saves_draft_forwards_when_lookup_hits(models):
    _, _, tok = models
    draft = tiny_model(0)
    prompt = _ids(tok, REPEAT)
    mla = MLADrafter(draft, lookup="hf")
    mla.reset(prompt)
    d = mla.propose(prompt, 12)
    assert d.info["lookup_hits"] > 0 and d.info["lookup_accepted"] > 0
    # Each accepted lookup token is a draft-model forward saved (hf: nothing past K is drafted;
    # the official lookup may accept guessed tokens past K, cut afterwards).
    assert d.info["draft_forwards"] == 12 - d.info["lookup_accepted"]
    assert d.k == 12 and d.probs is None


def test_mla_is_greedy_at_any_temperature(models):
    _, draft, tok = models
    prompt = _ids(tok, REPEAT)
    ref, mla = ModelDrafter(draft), MLADrafter(draft)
    ref.reset(prompt)
    mla.reset(prompt)
    g = torch.Generator().manual_seed(0)
    d = mla.propose(prompt, 6, SamplingParams(1.0, generator=g), want_probs=True)
    # A deterministic draft has q = one-hot(d): no probabilities, speculative sampling stays exact.
    assert d.probs is None
    assert d.tokens.tolist() == ref.propose(prompt, 6).tokens.tolist()


@pytest.mark.parametrize("k", [3, 8])
def test_spd_with_mla_equals_target_alone_and_model_drafter(models, k):
    target, draft, tok = models
    prompt = _ids(tok, "Question: 3 apples and 4 apples make how many? " + REPEAT)
    ar = generate(target, prompt, verifier=SPD(), max_new_tokens=40)
    out = generate(target, prompt, verifier=SPD(), drafter=MLADrafter(draft, k=k), max_new_tokens=40, record_steps=True)
    ref = generate(target, prompt, verifier=SPD(), drafter=ModelDrafter(draft, k=k), max_new_tokens=40, record_steps=True)
    assert out.new_tokens == ar.new_tokens
    # Same drafts at every step as the one-token-per-forward drafter.
    assert [s["draft"] for s in out.step_records] == [s["draft"] for s in ref.step_records]
    assert sum(out.accepted) > 0
    assert all("draft_forwards" in s["drafter"] for s in out.step_records if s["draft"])


def test_sampling_spd_with_mla_runs_and_is_reproducible(models):
    target, draft, tok = models
    prompt = _ids(tok, REPEAT)
    runs = [
        generate(target, prompt, verifier=SPD(), drafter=MLADrafter(draft, k=5), max_new_tokens=30,
                 temperature=0.8, generator=torch.Generator().manual_seed(3))
        for _ in range(2)
    ]
    assert runs[0].new_tokens == runs[1].new_tokens and len(runs[0].new_tokens) == 30
