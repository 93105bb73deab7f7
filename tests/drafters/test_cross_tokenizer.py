"""drafter=model_xtok: a draft with another tokenizer; SPD must still equal the target alone."""

from __future__ import annotations

import copy
import os

import pytest
import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast

from loosespec_bench.decoding import generate
from loosespec_bench.drafters import CrossTokenizerDrafter
from loosespec_bench.models.tiny import CHAT_TEMPLATE, SPECIAL_TOKENS, tiny_model, tiny_tokenizer
from loosespec_bench.verifiers.spd import SPD

TEXT = "Question: 3 apples and 4 apples make how many? Answer step by step. The answer is 7."
MERGES = [("a", "p"), ("ap", "p"), ("Ġ", "a"), ("e", "s"), ("Ġ", "t"), ("Ġt", "h"), ("n", "s")]


def other_tokenizer(perm: torch.Tensor, merges: list[tuple[str, str]] = ()) -> PreTrainedTokenizerFast:
    """A byte-level tokenizer whose byte b has id perm[b], plus optional BPE merges (new ids
    after the specials): the same text, other ids and (with merges) another segmentation."""
    chars = sorted(pre_tokenizers.ByteLevel.alphabet(), key=ord)
    vocab = {c: int(perm[i]) for i, c in enumerate(chars)}
    vocab.update({t: 256 + i for i, t in enumerate(SPECIAL_TOKENS)})  # the specials keep their ids
    for i, (a, b) in enumerate(merges):
        vocab[a + b] = 256 + len(SPECIAL_TOKENS) + i
    tok = Tokenizer(models.BPE(vocab=vocab, merges=list(merges)))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens(SPECIAL_TOKENS)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>", bos_token=None)
    fast.chat_template = CHAT_TEMPLATE
    return fast


def permuted_model(target, perm: torch.Tensor):
    """The target with its byte rows renumbered by perm: the same model in another vocabulary,
    so it drafts perfectly through the cross-tokenizer path."""
    full = torch.arange(target.config.vocab_size)
    full[:256] = perm  # new id of old id
    inv = torch.empty_like(full)
    inv[full] = torch.arange(full.numel())
    draft = copy.deepcopy(target)
    with torch.no_grad():
        draft.get_input_embeddings().weight.copy_(target.get_input_embeddings().weight[inv])
        draft.get_output_embeddings().weight.copy_(target.get_output_embeddings().weight[inv])
    return draft


def ascii_only(target, tok):
    """The target restricted to single-byte (ASCII) tokens: random tiny models otherwise emit
    byte sequences that are not UTF-8, which no text round trip (the drafter's currency) keeps."""
    keep = torch.tensor([i < 256 and len(tok.decode([i])) == 1 and tok.decode([i]) != "\ufffd" for i in range(target.config.vocab_size)])
    model = copy.deepcopy(target)
    with torch.no_grad():
        model.get_output_embeddings().weight[~keep] = 0.0  # logit 0 < the max of 128 random logits
    return model


@pytest.fixture(scope="module")
def perm() -> torch.Tensor:
    return torch.randperm(256, generator=torch.Generator().manual_seed(7))


def _prompt(tok, text: str = TEXT) -> torch.Tensor:
    return torch.tensor(tok(text, add_special_tokens=False).input_ids)


def test_other_tokenizer_has_other_ids_same_text(perm):
    a, b = tiny_tokenizer(), other_tokenizer(perm, MERGES)
    ia, ib = a(TEXT).input_ids, b(TEXT).input_ids
    assert ia != ib and len(ib) < len(ia)  # merges: fewer tokens
    assert a.decode(ia) == b.decode(ib) == TEXT
    assert b.convert_tokens_to_ids("<|im_end|>") == a.convert_tokens_to_ids("<|im_end|>")


def test_perfect_draft_in_another_vocabulary_is_fully_accepted(tiny_pair, perm):
    target, _, ttok = tiny_pair
    target = ascii_only(target, ttok)
    dtok = other_tokenizer(perm)
    drafter = CrossTokenizerDrafter(permuted_model(target, perm), dtok, ttok, k=4)
    prompt = _prompt(ttok)
    ref = generate(target, prompt, verifier=SPD(), max_new_tokens=30)
    out = generate(target, prompt, verifier=SPD(), drafter=drafter, max_new_tokens=30)
    assert out.new_tokens == ref.new_tokens
    # Byte-level on both sides: the mapping is exact, so the draft loses only at the drop of the
    # last (possibly partial) target token, never by disagreement.
    assert sum(out.accepted) == sum(out.drafted) > 0
    assert out.tau > 3.0


@pytest.mark.parametrize("k", [1, 3, 6])
def test_spd_with_cross_tokenizer_draft_equals_target_alone(tiny_pair, perm, k):
    target, _, ttok = tiny_pair
    dtok = other_tokenizer(perm, MERGES)
    draft = tiny_model(1, vocab_size=256 + len(SPECIAL_TOKENS) + len(MERGES) + 2)
    prompt = _prompt(ttok)
    ref = generate(target, prompt, verifier=SPD(), max_new_tokens=40)
    out = generate(target, prompt, verifier=SPD(), drafter=CrossTokenizerDrafter(draft, dtok, ttok, k=k), max_new_tokens=40)
    assert out.new_tokens == ref.new_tokens
    assert all(d <= k for d in out.drafted)


def test_cross_tokenizer_with_merges_and_a_good_draft_keeps_its_cache(tiny_pair, perm):
    """A draft with merges cannot mirror the target exactly, but rollback must keep its cache
    equal to a fresh prefill of the committed text after every step."""
    target, _, ttok = tiny_pair
    dtok = other_tokenizer(perm, MERGES)
    draft = tiny_model(1, vocab_size=256 + len(SPECIAL_TOKENS) + len(MERGES) + 2)
    drafter = CrossTokenizerDrafter(draft, dtok, ttok)
    tokens = _prompt(ttok)
    drafter.reset(tokens)
    for extra in ([10, 20], [30], [40, 50, 60]):
        drafter.propose(tokens, 3)
        tokens = torch.cat([tokens, torch.tensor(extra)])
        drafter.propose(tokens, 3)
        seen = drafter.inner.seen
        ids = drafter._to_draft(tokens)
        assert torch.equal(seen[: ids.numel() - 1], ids[: seen.numel()][: ids.numel() - 1])
        assert drafter.inner.cache.get_seq_length() == seen.numel()


def test_spd_sampling_with_cross_tokenizer_is_seeded(tiny_pair, perm):
    target, _, ttok = tiny_pair
    dtok = other_tokenizer(perm, MERGES)
    draft = tiny_model(1, vocab_size=256 + len(SPECIAL_TOKENS) + len(MERGES) + 2)
    prompt = _prompt(ttok)

    def run():
        return generate(
            target, prompt, verifier=SPD(), drafter=CrossTokenizerDrafter(draft, dtok, ttok, k=3),
            max_new_tokens=20, temperature=1.0, generator=torch.Generator().manual_seed(3),
        ).new_tokens

    assert run() == run()


@pytest.mark.slow
def test_smollm2_drafting_for_qwen_equals_target_alone():
    """The real pair: SmolLM2-135M-Instruct (vocab 49,152) drafting for Qwen2.5-Coder-1.5B
    (vocab 151,936), fp32, greedy, chat prompt: identical output, and some drafts accepted."""
    from loosespec_bench.models import load_model

    if os.environ.get("LOOSESPEC_SKIP_EMBEDDED"):
        pytest.skip("embedded models disabled")
    target = load_model("embedded:qwen2.5-coder-1.5b-instruct", dtype="float32")
    draft = load_model("embedded:smollm2-135m-instruct", dtype="float32")
    assert draft.tokenizer.vocab_size != target.tokenizer.vocab_size
    msgs = [{"role": "user", "content": "Question: Tom has 3 boxes of 12 pencils and gives away 5. How many are left?\nStep-by-Step Answer:"}]
    ids = target.tokenizer.apply_chat_template(msgs, add_generation_prompt=True, tokenize=False)
    prompt = torch.tensor(target.tokenizer(ids, add_special_tokens=False).input_ids)
    eos = {target.tokenizer.eos_token_id}
    ref = generate(target.model, prompt, verifier=SPD(), max_new_tokens=48, eos_token_ids=eos)
    drafter = CrossTokenizerDrafter(draft.model, draft.tokenizer, target.tokenizer, k=4)
    out = generate(target.model, prompt, verifier=SPD(), drafter=drafter, max_new_tokens=48, eos_token_ids=eos)
    assert out.new_tokens == ref.new_tokens
    assert sum(out.accepted) > 0


def test_app_passes_both_tokenizers(tmp_path, data_dir):
    from loosespec_bench.run.app import run

    from ..conftest import compose_config

    cfg = compose_config(
        ["experiment=smoke_tiny", "drafter=model_xtok", "drafter.k=3", "dataset.limit=1", "generation.max_new_tokens=12"],
        results_dir=tmp_path,
    )
    summary = run(cfg)
    assert summary["drafter"] == "model_xtok" and summary["identical_to_target"] == 1.0
