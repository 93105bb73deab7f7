"""method=ensemble against transformers' own assisted generation with assistant_ensemble_weight
(greedy, float32): token-identical outputs. The tiny pair runs by default; the embedded Qwen pair
on real prompts is marked slow."""

from __future__ import annotations

import copy

import pytest
import torch
from transformers import GenerationConfig

from loosespec_bench.decoding import generate
from loosespec_bench.drafters import ModelDrafter
from loosespec_bench.verifiers.ensemble import Ensemble

from ..helpers import code_prompt


def transformers_ensemble(target, draft, prompt: torch.Tensor, *, w: float, k: int, max_new_tokens: int,
                          eos: list[int] | None = None) -> list[int]:
    """transformers' greedy assisted generation with static ensemble verification, K fixed: the
    assistant drafts `k` tokens every round (constant schedule, no confidence early stop), as the
    harness's ModelDrafter; no logits processors on either side (the checkpoints' own sampling
    defaults, e.g. a repetition penalty, are replaced by a neutral config)."""
    assistant = copy.copy(draft)  # the generation config below is the copy's, not the fixture's
    assistant.generation_config = GenerationConfig(
        num_assistant_tokens=k, num_assistant_tokens_schedule="constant", assistant_confidence_threshold=0.0,
    )
    cfg = GenerationConfig(
        do_sample=False, max_new_tokens=max_new_tokens, assistant_ensemble_weight=w,
        eos_token_id=eos, pad_token_id=(eos or [0])[0],
    )
    with torch.inference_mode():
        out = target.generate(prompt.unsqueeze(0), generation_config=cfg, assistant_model=assistant,
                              attention_mask=torch.ones(1, prompt.numel(), dtype=torch.long))
    return out[0, prompt.numel():].tolist()


def ours(target, draft, prompt, *, w, k, max_new_tokens, eos=None) -> tuple[list[int], int]:
    """(the harness's tokens, how many draft tokens it accepted although they were not argmax p)."""
    out = generate(target, prompt, verifier=Ensemble(weight=w), drafter=ModelDrafter(draft, k=k),
                   max_new_tokens=max_new_tokens, eos_token_ids=frozenset(eos or ()), record_steps=True)
    return out.new_tokens, sum(len(s["loose_accepted"]) for s in out.step_records)


@pytest.mark.parametrize("w", [0.3, 0.6, 0.9])
def test_tiny_pair_token_identical_to_transformers(models, w):
    target, draft, tok = models
    prompt = code_prompt(tok)
    ref = transformers_ensemble(target, draft, prompt, w=w, k=5, max_new_tokens=40)
    mine, loose = ours(target, draft, prompt, w=w, k=5, max_new_tokens=40)
    assert mine == ref and len(ref) == 40
    if w < 0.9:
        assert loose > 0  # not vacuous: the mixture accepted tokens the target alone would not


@pytest.mark.slow
@pytest.mark.timeout(3600)  # two 1.5B / 0.5B float32 models on CPU, each prompt decoded twice
def test_embedded_pair_token_identical_to_transformers_on_real_prompts(data_dir):
    from loosespec_bench.models import load_model
    from loosespec_bench.tasks.prompting import encode_prompt, eos_ids
    from loosespec_bench.tasks.gsm8k import GSM8K
    from loosespec_bench.tasks.humaneval import HumanEval

    target = load_model("embedded:qwen2.5-coder-1.5b-instruct", dtype="float32")
    draft = load_model("embedded:qwen2.5-coder-0.5b-instruct", dtype="float32")
    eos = sorted(eos_ids(target))
    samples = GSM8K(data_dir=str(data_dir), limit=2, num_fewshot=0).samples() + HumanEval(data_dir=str(data_dir), limit=1).samples()
    loose_total = 0
    for sample in samples:
        _, ids = encode_prompt(target.tokenizer, sample, use_chat_template=True)
        prompt = torch.tensor(ids)
        ref = transformers_ensemble(target.model, draft.model, prompt, w=0.5, k=5, max_new_tokens=48, eos=eos)
        mine, loose = ours(target.model, draft.model, prompt, w=0.5, k=5, max_new_tokens=48, eos=eos)
        assert mine == ref, sample.id
        loose_total += loose
    assert loose_total > 0  # not vacuous: the mixture accepted draft tokens that are not argmax p
