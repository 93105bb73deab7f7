"""Work counts from the decoding loop on the tiny pair: they describe what ran, and counting
changes no token."""

from __future__ import annotations

import pytest
import torch

from loosespec_bench.decoding import generate
from loosespec_bench.drafters import MLADrafter, ModelDrafter, PromptLookupDrafter
from loosespec_bench.verifiers.dropmatch import DropMatch
from loosespec_bench.verifiers.fly import FLy
from loosespec_bench.verifiers.spd import SPD

PROMPT = torch.tensor([5, 9, 13, 7] * 6 + [3], dtype=torch.long)  # [25], repetitive: lookups hit


def _gen(target, verifier, drafter, n=24):
    return generate(target, PROMPT, verifier=verifier, drafter=drafter, max_new_tokens=n, generator=torch.Generator().manual_seed(0))


def test_target_alone_counts_one_forward_of_one_row_per_token(tiny_pair):
    target, _, _ = tiny_pair
    out = _gen(target, SPD(), None)
    w = out.work
    n = len(out.new_tokens)
    assert w["emitted"] == n == w["steps"] == w["target_verify"]["forwards"]
    assert w["target_verify"]["rows_hist"] == {"1": n}
    assert w["target_prefill"] == {"forwards": 1, "rows": 24, "lm_rows": 1, "ctx": 0, "ctx_rows": 0, "rows_hist": {"24": 1}}
    # The verification forward of step i sees the prompt but its pending token plus i new tokens.
    assert w["target_verify"]["ctx"] == sum(24 + i for i in range(n))
    assert w["draft"]["forwards"] == 0 and w["draft_steps"] == 0
    assert out.ttft_s is not None and 0 < out.ttft_s <= out.prefill_s + out.decode_s


def test_chain_drafter_counts_one_draft_forward_per_drafted_token(tiny_pair):
    target, draft, _ = tiny_pair
    out = _gen(target, SPD(), ModelDrafter(draft, k=4))
    w = out.work
    assert w["draft"]["forwards"] + w["draft_prefill"]["forwards"] == w["draft_tokens"]  # one forward per token
    assert w["draft_prefill"]["forwards"] == 1 and w["draft_prefill"]["rows"] == 25  # the whole prompt, to draft after it
    assert w["target_verify"]["forwards"] == out.steps
    assert w["target_verify"]["rows"] == out.steps + w["draft_tokens"]  # 1 + K rows per step
    assert w["emitted"] == len(out.new_tokens)


def test_mla_saves_draft_forwards_without_changing_tokens(models):
    # A near copy of the target as the draft (its own module: the hooks count the draft's
    # forwards only), so drafts mostly match and lookups hit the repetitive prompt.
    target, draft, _ = models
    fly = FLy(theta=0.3, window=3)
    chain = _gen(target, fly, ModelDrafter(draft, k=6))
    mla = _gen(target, fly, MLADrafter(draft, k=6))
    assert mla.new_tokens == chain.new_tokens
    cw, mw = chain.work, mla.work
    assert mw["draft_tokens"] == cw["draft_tokens"]
    mla_fwd = mw["draft"]["forwards"] + mw["draft_prefill"]["forwards"]
    assert mw["mla_saved_draft_forwards"] == mw["draft_tokens"] - mla_fwd > 0
    assert mw["lookups"] >= mla_fwd and mw["lookup_hits"] > 0


def test_dropmatch_counts_its_extra_lm_head_rows(models):
    target, draft, _ = models
    out = _gen(target, DropMatch(n_paths=5, p=0.3), ModelDrafter(draft, k=4), n=32)
    e = out.work["lm_head_extra"]
    head = target.get_output_embeddings().weight  # [vocab, hidden]
    assert e["passes"] > 0 and e["rows"] % 5 == 0  # one position's 5 paths per call
    assert e["flops"] == 2 * e["rows"] * head.shape[0] * head.shape[1]
    spd = _gen(target, SPD(), ModelDrafter(draft, k=4), n=32)
    assert spd.work["lm_head_extra"]["passes"] == 0


def test_prompt_lookup_counts_one_lookup_per_drafting_step(tiny_pair):
    target, _, _ = tiny_pair
    out = _gen(target, SPD(), PromptLookupDrafter(k=5))
    w = out.work
    assert w["lookups"] == w["draft_steps"] > 0 and w["draft"]["forwards"] == 0
    assert 0 < w["lookup_hits"] <= w["lookups"]


@pytest.mark.parametrize("k", [3, 5])
def test_counts_are_a_function_of_the_tokens(tiny_pair, k):
    """The same generation twice: the same tokens and the same counts, whatever the timing."""
    target, draft, _ = tiny_pair
    a = _gen(target, SPD(), ModelDrafter(draft, k=k))
    b = _gen(target, SPD(), ModelDrafter(draft, k=k))
    assert a.new_tokens == b.new_tokens and a.work == b.work
