"""The batched loop (decoding/batch.py) against the batch-1 loop, on the tiny pair in float32:
every rule with every drafter that batches gives, at batch 4 and 8, the tokens, steps,
decisions and work counts each problem gets alone; rows are ragged (different prompts,
budgets and accepted lengths) and finished rows are refilled from the queue."""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch

from loosespec_bench.build import build_verifier
from loosespec_bench.decoding import generate
from loosespec_bench.decoding.batch import BatchRequest, BatchStats, check_batchable, generate_batch
from loosespec_bench.decoding.ragged import batch_refusal, ragged_forward
from loosespec_bench.drafters import MLADrafter, ModelDrafter, PromptLookupDrafter
from loosespec_bench.drafters.cross_tokenizer import CrossTokenizerDrafter
from loosespec_bench.drafters.eagle.drafter import Eagle3Drafter
from loosespec_bench.drafters.lookahead import LookaheadDrafter
from loosespec_bench.errors import ConfigError
from loosespec_bench.judges.head import JudgeHead
from loosespec_bench.kv import RaggedCache, new_cache
from loosespec_bench.settings.config import group_choices
from loosespec_bench.verifiers.spd import SPD

from ..conftest import compose_config

TEXTS = [
    "def add(a, b):\n    return a + b\n\ndef add(a, b):",
    "Question: 3 + 4 = ?",
    "x",
    "The quick brown fox jumps over the lazy dog. The quick brown",
    "1, 2, 3, 4, 5,",
    "hello hello hello",
    "for i in range(10):\n    print(i)\nfor i in range(",
    "abcabcabcab",
    "Answer step by step.",
    "<|im_start|>user\nhi<|im_end|>\n",
]
BUDGETS = [10, 14, 7, 12, 13, 9, 14, 8, 11, 12]  # ragged budgets: rows finish at different steps
DRAFTERS = {
    "model": lambda draft: ModelDrafter(draft, k=4),
    "pld": lambda draft: PromptLookupDrafter(k=4, max_ngram=3),
    "mla": lambda draft: MLADrafter(draft, k=5),
}
METHODS = [m for m in group_choices("method")]


@pytest.fixture(scope="module")
def setup(models):
    target, draft, tok = models
    prompts = [torch.tensor(tok(t, add_special_tokens=False).input_ids) for t in TEXTS]
    return target, draft, tok, prompts


@pytest.fixture(scope="module")
def judge_dir(tmp_path_factory):
    """A hand-built AutoJudge head for the tiny target (hidden size 64): about half the
    mismatches called unimportant, so the judge's decisions matter."""
    path = tmp_path_factory.mktemp("judge")
    w = [0.0] * 64
    w[0] = 1.0
    JudgeHead(mean=[0.0] * 64, scale=[1.0] * 64, weights=w, bias=0.0, threshold=0.5).save(path)
    return path


def rule(name: str, judge_dir):
    extra = [f"method.judge_path={judge_dir}"] if "autojudge" in name else []
    cfg = compose_config(["pair=tiny", f"method={name}", *extra])
    return build_verifier(cfg)


def close(a: Any, b: Any) -> bool:
    """Equal, floats to float32 rounding of batched kernels (an entropy, a probability)."""
    if isinstance(a, float) or isinstance(b, float):
        return isinstance(a, (int, float)) and isinstance(b, (int, float)) and math.isclose(a, b, rel_tol=1e-4, abs_tol=1e-5)
    if isinstance(a, dict) and isinstance(b, dict):
        # A rule's own timings (autojudge_s, dropmatch's overhead) are clocks, not decisions.
        return a.keys() == b.keys() and all(close(a[k], b[k]) for k in a if not str(k).endswith("_s"))
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(close(x, y) for x, y in zip(a, b))
    return a == b


def run_alone(target, verifier, drafter, prompts, temperature):
    return [
        generate(target, p, verifier=verifier, drafter=drafter, max_new_tokens=n, temperature=temperature,
                 generator=torch.Generator().manual_seed(i), record_steps=True, eos_token_ids={258})
        for i, (p, n) in enumerate(zip(prompts, BUDGETS))
    ]


def run_batched(target, verifier, drafter, prompts, temperature, batch, stats=None):
    reqs = [BatchRequest(p, torch.Generator().manual_seed(i), n) for i, (p, n) in enumerate(zip(prompts, BUDGETS))]
    return generate_batch(target, reqs, verifier=verifier, drafter=drafter, batch_size=batch, temperature=temperature,
                          record_steps=True, eos_token_ids={258}, stats=stats)


def assert_same(outs, refs):
    assert len(outs) == len(refs)
    for i, (o, r) in enumerate(zip(outs, refs)):
        assert o.new_tokens == r.new_tokens, f"problem {i}: tokens"
        assert (o.drafted, o.accepted, o.emitted, o.stop_reason) == (r.drafted, r.accepted, r.emitted, r.stop_reason), f"problem {i}: steps"
        assert close(o.step_records, r.step_records), f"problem {i}: decisions"
        assert o.work == r.work, f"problem {i}: work counts"


@pytest.mark.parametrize("method", METHODS)
def test_every_rule_with_every_drafter_batches_to_the_batch1_tokens(setup, judge_dir, method):
    target, draft, _, prompts = setup
    verifier = rule(method, judge_dir)
    drafters = [None] if verifier.target_alone else list(DRAFTERS)
    for name in drafters:
        make = (lambda: None) if name is None else (lambda: DRAFTERS[name](draft))
        temps = (0.0, 0.9) if name in (None, "model") else (0.0,)  # sampling: the rows' own generators
        for t in temps:
            try:
                refs = run_alone(target, verifier, make(), prompts, t)
            except (ValueError, ConfigError):
                if t == 0:
                    raise
                continue  # a greedy-only rule (ASD) refuses T > 0 at batch 1 too
            for batch in (4, 8):
                stats = BatchStats()
                outs = run_batched(target, verifier, make(), prompts, t, batch, stats)
                assert_same(outs, refs)
                assert stats.target_forwards > 0 and stats.mean_rows > 1  # it did batch


def test_outputs_keep_the_problems_order_and_the_batch_stays_full(setup):
    """More problems than rows: finished rows take waiting problems (the forwards run near B
    rows while the queue lasts), and outputs come back in the problems' order."""
    target, draft, _, prompts = setup
    stats = BatchStats()
    outs = run_batched(target, SPD(), ModelDrafter(draft, k=4), prompts, 0.0, 4, stats)
    refs = run_alone(target, SPD(), ModelDrafter(draft, k=4), prompts, 0.0)
    assert [o.new_tokens for o in outs] == [r.new_tokens for r in refs]
    steps = sum(r.steps for r in refs)
    assert stats.row_steps == steps
    # Refill keeps the forwards full: well above what draining without refill would give.
    assert stats.mean_rows > 3.0
    assert stats.target_forwards < steps / 3


def test_batch_of_one_and_more_rows_than_problems(setup):
    target, draft, _, prompts = setup
    refs = run_alone(target, SPD(), MLADrafter(draft, k=5), prompts[:3], 0.0)
    for batch in (1, 16):
        reqs = [BatchRequest(p, torch.Generator().manual_seed(i), n) for i, (p, n) in enumerate(zip(prompts[:3], BUDGETS))]
        outs = generate_batch(target, reqs, verifier=SPD(), drafter=MLADrafter(draft, k=5), batch_size=batch,
                              record_steps=True, eos_token_ids={258})
        assert_same(outs, refs)


def test_ragged_cache_rows_keep_their_own_lengths_and_roll_back_by_pointer(setup):
    """A ragged forward scores each row as a forward of that row alone would, and a row's
    rollback moves only its own length."""
    target, _, _, prompts = setup
    a, b = prompts[0], prompts[3]
    with torch.inference_mode():
        cache = RaggedCache(target.config, 2)
        ragged_forward(target, cache, {0: a[:-3], 1: b[:-5]}, {0: 1, 1: 1})
        assert cache.lens == [a.numel() - 3, b.numel() - 5]
        cache.crop_row(0, 7)  # roll row 0 back; row 1 untouched
        assert cache.lens == [7, b.numel() - 5]
        got, _ = ragged_forward(target, cache, {0: a[7:10], 1: b[-5:]}, {0: 3, 1: 5})
        for row, ids, n in ((0, a[:10], 3), (1, b, 5)):
            alone = target(ids[None], cache=new_cache(target.config), use_cache=True).logits[0, -n:].float()
            torch.testing.assert_close(got[row], alone, rtol=1e-4, atol=1e-4)
            assert got[row].argmax(-1).tolist() == alone.argmax(-1).tolist()
        assert cache.lens == [10, b.numel()]
        with pytest.raises(ValueError):
            cache.crop_row(1, b.numel() + 1)


def test_drafters_that_cannot_batch_say_why_on_their_class():
    for cls in (Eagle3Drafter, LookaheadDrafter, CrossTokenizerDrafter):
        why = batch_refusal(cls)
        assert why and len(why) > 20
    for cls in (ModelDrafter, MLADrafter, PromptLookupDrafter):
        assert batch_refusal(cls) is None
    assert batch_refusal(None) is None  # the target alone


def test_a_drafter_without_a_batch_program_is_refused(setup):
    target, draft, tok, prompts = setup
    xtok = CrossTokenizerDrafter(draft, draft_tokenizer=tok, target_tokenizer=tok, k=3)
    with pytest.raises(ValueError, match="re-tokenizes"):
        check_batchable(SPD(), xtok)
    with pytest.raises(ValueError, match="cannot run in a batch"):
        run_batched(target, SPD(), xtok, prompts[:2], 0.0, 2)
