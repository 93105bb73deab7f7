"""drafter=eagle3: chain drafting in the draft vocabulary, losslessness, the app on a head folder."""

from __future__ import annotations

import copy

import pytest
import torch

from loosespec_bench.decoding import generate
from loosespec_bench.drafters import Eagle3Drafter
from loosespec_bench.sampling import SamplingParams
from loosespec_bench.verifiers.fly import FLy
from loosespec_bench.verifiers.spd import SPD

from ...conftest import compose_config
from .conftest import prompt_ids, random_head


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_drafts_k_tokens_in_the_draft_vocabulary(checkpoint, tiny_pair, draft_ids, temperature):
    target, _, tok = tiny_pair
    drafter = Eagle3Drafter(target, str(checkpoint))
    assert drafter.needs_target_hidden == (2, 1, 0)  # (2, L//2, L-3) clamped for L = 2 layers
    ids = prompt_ids(tok)
    with torch.inference_mode():
        hs = target(ids[None, :-1], output_hidden_states=True).hidden_states
    drafter.reset(ids)
    drafter.observe(tuple(hs[i][0] for i in drafter.needs_target_hidden))
    gen = torch.Generator().manual_seed(0)
    draft = drafter.propose(ids, 5, SamplingParams(temperature, generator=gen), want_probs=True)
    assert draft.tokens.shape == (5,) and draft.tokens.dtype == torch.long
    assert all(int(t) in set(draft_ids.tolist()) for t in draft.tokens)
    assert draft.probs.shape == (5, target.config.vocab_size)
    torch.testing.assert_close(draft.probs.sum(-1), torch.ones(5))
    outside = torch.ones(target.config.vocab_size, dtype=torch.bool)
    outside[draft_ids] = False
    assert float(draft.probs[:, outside].abs().sum()) == 0.0
    # The head's cache holds the committed entries and K-1 draft entries (the last is never fed).
    assert drafter.cache[0].shape[2] == ids.numel() - 1 + 4


@pytest.mark.parametrize("k", [1, 3, 5])
def test_spd_with_eagle3_equals_target_alone(checkpoint, tiny_pair, k):
    target, _, tok = tiny_pair
    prompt = prompt_ids(tok)
    ref = generate(target, prompt, verifier=SPD(), max_new_tokens=32)
    out = generate(target, prompt, verifier=SPD(), drafter=Eagle3Drafter(target, str(checkpoint), k=k), max_new_tokens=32)
    assert out.new_tokens == ref.new_tokens
    assert all(d == k or len(out.new_tokens) + 1 >= 32 for d in out.drafted[:-1])


def _constant_target(target):
    """A target that always emits token 0 (final norm zeroed: all logits tie at 0)."""
    model = copy.deepcopy(target)
    with torch.no_grad():
        model.model.norm.weight.zero_()
    return model


def test_perfect_head_is_fully_accepted_and_partial_heads_stay_lossless(tiny_pair):
    target, _, tok = tiny_pair
    const = _constant_target(target)
    prompt = prompt_ids(tok)
    ref = generate(const, prompt, verifier=SPD(), max_new_tokens=30)
    assert set(ref.new_tokens) == {0}
    # A one-token draft vocabulary {0}: the head can only propose the target's token.
    one = Eagle3Drafter(const, "", k=4, head=random_head(const, torch.tensor([0])))
    out = generate(const, prompt, verifier=SPD(), drafter=one, max_new_tokens=30)
    assert out.new_tokens == ref.new_tokens and out.tau == pytest.approx(5.0)
    # Two tokens {0, 7}: some drafts right, some wrong; the output is still the target's.
    two = Eagle3Drafter(const, "", k=4, head=random_head(const, torch.tensor([0, 7]), seed=3))
    out = generate(const, prompt, verifier=SPD(), drafter=two, max_new_tokens=30)
    assert out.new_tokens == ref.new_tokens
    assert 0 < sum(out.accepted) < sum(out.drafted)


def test_loose_verifier_and_one_tokenprompt_ids(checkpoint, tiny_pair):
    """FLy keeps draft tokens past a mismatch: the features handed to the head are then those of
    the kept draft tokens. A 1-token prompt has no feature before the first step."""
    target, _, tok = tiny_pair
    drafter = Eagle3Drafter(target, str(checkpoint), k=6)
    out = generate(target, prompt_ids(tok), verifier=FLy(theta=0.0, window=2), drafter=drafter, max_new_tokens=24)
    assert len(out.new_tokens) == 24
    drafter.k = 3  # the same drafter (reset per sequence) on a second sequence, shorter drafts
    out = generate(target, prompt_ids(tok)[:1], verifier=SPD(), drafter=drafter, max_new_tokens=8)
    ref = generate(target, prompt_ids(tok)[:1], verifier=SPD(), max_new_tokens=8)
    assert out.new_tokens == ref.new_tokens and out.drafted[0] == 0


def test_app_runs_eagle3_from_a_head_folder(checkpoint, tmp_path, data_dir):
    from loosespec_bench.run.app import run

    cfg = compose_config(
        ["experiment=smoke_tiny", "drafter=eagle3", f"drafter.head_path={checkpoint}", "drafter.k=3",
         "dataset.limit=1", "generation.max_new_tokens=12"],
        results_dir=tmp_path,
    )
    summary = run(cfg)
    assert summary["drafter"] == "eagle3" and summary["identical_to_target"] == 1.0


@pytest.mark.slow
def test_trained_head_for_the_embedded_target_is_lossless():
    """The head python -m loosespec_bench.train.eagle3 trains for Qwen2.5-Coder-1.5B: loads from its folder,
    and vanilla SPD with it equals the target alone (fp32, greedy)."""
    from loosespec_bench.models import load_model

    cfg = compose_config(["drafter=eagle3"])
    folder = cfg.drafter.head_path
    import os

    if not os.path.isdir(os.path.expanduser(folder)):
        pytest.skip(f"no trained head in {folder}: run python -m loosespec_bench.train.eagle3")
    target = load_model("embedded:qwen2.5-coder-1.5b-instruct", dtype="float32")
    msgs = [{"role": "user", "content": "Question: Tom has 3 boxes of 12 pencils and gives away 5. How many are left?\nStep-by-Step Answer:"}]
    text = target.tokenizer.apply_chat_template(msgs, add_generation_prompt=True, tokenize=False)
    prompt = torch.tensor(target.tokenizer(text, add_special_tokens=False).input_ids)
    eos = {target.tokenizer.eos_token_id}
    ref = generate(target.model, prompt, verifier=SPD(), max_new_tokens=48, eos_token_ids=eos)
    drafter = Eagle3Drafter(target.model, folder, k=4)
    out = generate(target.model, prompt, verifier=SPD(), drafter=drafter, max_new_tokens=48, eos_token_ids=eos)
    assert out.new_tokens == ref.new_tokens
    assert sum(out.accepted) > 0


@pytest.mark.parametrize("mode", ["int8", "int4"])
def test_spd_with_quantized_eagle3_head_equals_target_alone(checkpoint, tiny_pair, mode):
    """pair.draft.quantize on an EAGLE-3 head: its linears are swapped, lossless SPD unchanged."""
    from loosespec_bench.models.quantize import QuantizedLinear, quantize_drafter

    target, _, tok = tiny_pair
    prompt = prompt_ids(tok)
    drafter = Eagle3Drafter(target, str(checkpoint), k=3)
    assert quantize_drafter(drafter, mode) > 0 and isinstance(drafter.head.fc, QuantizedLinear)
    ref = generate(target, prompt, verifier=SPD(), max_new_tokens=32)
    out = generate(target, prompt, verifier=SPD(), drafter=drafter, max_new_tokens=32)
    assert out.new_tokens == ref.new_tokens
