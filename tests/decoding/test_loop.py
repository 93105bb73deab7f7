"""The decoding loop: KV rollback, lossless SPD with every drafter, stopping rules."""

from __future__ import annotations

import pytest
import torch
from transformers import DynamicCache

from loosespec_bench.decoding import generate
from loosespec_bench.step import crop_to
from loosespec_bench.drafters import MLADrafter, ModelDrafter, PromptLookupDrafter, prompt_lookup
from loosespec_bench.verifiers.spd import SPD


def _prompt(tok, text: str = "Question: 3 apples and 4 apples make how many? Answer step by step.") -> torch.Tensor:
    return torch.tensor(tok(text, add_special_tokens=False).input_ids)


def _ar(target, prompt, **kw):
    return generate(target, prompt, verifier=SPD(), **kw)


def test_kv_rollback_equals_fresh_prefill_of_kept_tokens(tiny_pair):
    target, _, tok = tiny_pair
    ids = _prompt(tok)[:30]
    with torch.inference_mode():
        cache = DynamicCache(config=target.config)
        target(ids[None], cache=cache, use_cache=True)
        crop_to(cache, 17)
        fresh = DynamicCache(config=target.config)
        target(ids[None, :17], cache=fresh, use_cache=True)
        assert cache.get_seq_length() == fresh.get_seq_length() == 17
        for a, b in zip(cache.layers, fresh.layers):
            torch.testing.assert_close(a.keys, b.keys)
            torch.testing.assert_close(a.values, b.values)
        # And the next step computed on the cropped cache equals the one on the fresh cache.
        la = target(ids[None, 17:20], cache=cache, use_cache=True).logits
        lb = target(ids[None, 17:20], cache=fresh, use_cache=True).logits
        torch.testing.assert_close(la, lb)


def test_crop_to_refuses_growing():
    cache = DynamicCache()
    with pytest.raises(ValueError):
        crop_to(cache, 3)


@pytest.mark.parametrize("k", [1, 3, 6])
def test_spd_with_draft_model_equals_target_alone(tiny_pair, k):
    target, draft, tok = tiny_pair
    prompt = _prompt(tok)
    ref = _ar(target, prompt, max_new_tokens=40)
    out = generate(target, prompt, verifier=SPD(), drafter=ModelDrafter(draft, k=k), max_new_tokens=40)
    assert out.new_tokens == ref.new_tokens
    assert len(out.new_tokens) == 40
    assert sum(out.emitted) == 40
    assert out.steps <= ref.steps


def test_the_loop_times_one_inter_token_gap_per_step_after_the_first(tiny_pair):
    # vllm bench's ITL is per streamed chunk; a verification step emits one chunk.
    target, draft, tok = tiny_pair
    out = generate(target, _prompt(tok), verifier=SPD(), drafter=ModelDrafter(draft, k=3), max_new_tokens=20)
    assert len(out.itl_s) == out.steps - 1 and all(x > 0 for x in out.itl_s)
    assert out.ttft_s + sum(out.itl_s) <= out.prefill_s + out.decode_s + 1e-3  # gaps lie inside the decode


def test_spd_with_perfect_draft_accepts_everything(tiny_pair):
    target, _, tok = tiny_pair
    prompt = _prompt(tok)
    ref = _ar(target, prompt, max_new_tokens=36)
    out = generate(target, prompt, verifier=SPD(), drafter=ModelDrafter(target, k=5), max_new_tokens=36)
    assert out.new_tokens == ref.new_tokens
    assert out.tau == pytest.approx(6.0)  # K accepted + the bonus token, every step
    assert all(a == d for a, d in zip(out.accepted, out.drafted))


def test_spd_with_prompt_lookup_equals_target_alone(tiny_pair):
    target, _, tok = tiny_pair
    # A repetitive prompt, so that lookups fire and some are accepted.
    prompt = _prompt(tok, "abc abc abc abc abc abc abc abc abc abc abc abc")
    ref = _ar(target, prompt, max_new_tokens=48)
    out = generate(target, prompt, verifier=SPD(), drafter=PromptLookupDrafter(max_ngram=3, k=8), max_new_tokens=48)
    assert out.new_tokens == ref.new_tokens
    assert sum(out.drafted) > 0


def test_spd_sampling_is_seeded(tiny_pair):
    target, draft, tok = tiny_pair
    prompt = _prompt(tok)
    runs = [
        generate(
            target, prompt, verifier=SPD(), drafter=ModelDrafter(draft, k=4), max_new_tokens=20,
            temperature=0.8, generator=torch.Generator().manual_seed(5),
        ).new_tokens
        for _ in range(2)
    ]
    assert runs[0] == runs[1]


def test_eos_inside_accepted_draft_stops_exactly_there(tiny_pair):
    target, _, tok = tiny_pair
    prompt = _prompt(tok)
    ref = _ar(target, prompt, max_new_tokens=30)
    eos = ref.new_tokens[11]  # pretend the 12th generated token is EOS
    ref_eos = _ar(target, prompt, max_new_tokens=30, eos_token_ids={eos})
    out = generate(target, prompt, verifier=SPD(), drafter=ModelDrafter(target, k=5), max_new_tokens=30, eos_token_ids={eos})
    assert out.new_tokens == ref_eos.new_tokens
    assert out.new_tokens[-1] == eos and out.stop_reason == "eos"
    assert eos not in out.new_tokens[:-1]


def test_stop_string_cuts_at_the_same_token_as_target_alone(tiny_pair):
    target, _, tok = tiny_pair
    prompt = _prompt(tok)
    ref = _ar(target, prompt, max_new_tokens=30)
    text = tok.decode(ref.new_tokens[8:10])
    stop = lambda ids: text in tok.decode(ids)  # noqa: E731
    a = _ar(target, prompt, max_new_tokens=30, stop_fn=stop)
    b = generate(target, prompt, verifier=SPD(), drafter=ModelDrafter(target, k=6), max_new_tokens=30, stop_fn=stop)
    assert a.new_tokens == b.new_tokens
    assert a.stop_reason == b.stop_reason == "stop_string"
    assert len(a.new_tokens) <= 10


def test_one_token_prompt_and_one_token_budget(tiny_pair):
    target, draft, _ = tiny_pair
    prompt = torch.tensor([65])
    out = generate(target, prompt, verifier=SPD(), drafter=ModelDrafter(draft, k=4), max_new_tokens=1)
    assert out.new_tokens == _ar(target, prompt, max_new_tokens=1).new_tokens
    assert out.steps == 1 and out.drafted == [0]  # no drafting past the budget


@pytest.mark.filterwarnings("error::FutureWarning")
@pytest.mark.parametrize("make", [lambda d: ModelDrafter(d, k=3), lambda d: MLADrafter(d, k=3)], ids=["model", "mla"])
def test_model_forwards_use_the_current_cache_keyword(tiny_pair, make):
    # transformers 5.2x deprecates `past_key_values=` (FutureWarning) for `cache=`: the loop's
    # prefill and verification forwards and the drafters' forwards must all use the new name.
    target, draft, tok = tiny_pair
    out = generate(target, _prompt(tok), verifier=SPD(), drafter=make(draft), max_new_tokens=6)
    assert len(out.new_tokens) == 6


def test_generate_rejects_empty_prompt(tiny_pair):
    with pytest.raises(ValueError):
        _ar(tiny_pair[0], torch.empty(0, dtype=torch.long))


# -- prompt lookup -----------------------------------------------------------------------------


def test_prompt_lookup_prefers_longest_ngram_and_first_match():
    #                    0  1  2  3  4  5  6  7  8  9
    tokens = torch.tensor([1, 2, 3, 9, 2, 3, 8, 5, 2, 3])
    # Trailing 2-gram (2, 3) first occurs at 1..2, followed by 9, 2, 3...
    assert prompt_lookup(tokens, 3, max_ngram=2).tolist() == [9, 2, 3]
    # A 3-gram (5, 2, 3) has no earlier match, so it falls back to the 2-gram.
    assert prompt_lookup(tokens, 2, max_ngram=3).tolist() == [9, 2]


def test_prompt_lookup_no_match_and_short_inputs():
    assert prompt_lookup(torch.tensor([1, 2, 3, 4]), 5, max_ngram=3).numel() == 0
    assert prompt_lookup(torch.tensor([7]), 5, max_ngram=3).numel() == 0
    # The continuation is cut at the end of the context.
    assert prompt_lookup(torch.tensor([4, 4]), 5, max_ngram=1).tolist() == [4]


def test_prefix_cache_gives_the_fresh_cache_tokens_and_reads_only_the_new_part(tiny_pair):
    # Continuations of one prompt from different cut points (AutoJudge's mining): a kept cache
    # must give the tokens a fresh cache gives, and read again only what follows the shared part.
    from loosespec_bench.decoding import PrefixCache

    target, draft, tok = tiny_pair
    prompt = _prompt(tok)
    base = _ar(target, prompt, max_new_tokens=20).new_tokens
    kept = PrefixCache()
    for cut, swap in ((12, 5), (15, 7), (3, 9)):  # later, later, then earlier than the cache
        ids = torch.cat([prompt, torch.tensor(base[:cut] + [swap])])
        fresh = _ar(target, ids, max_new_tokens=10)
        out = generate(target, ids, verifier=SPD(), drafter=ModelDrafter(draft, k=3), max_new_tokens=10, prefix_cache=kept)
        assert out.new_tokens == fresh.new_tokens
        # What the cache holds afterwards: every committed token but the last, ids and positions.
        assert kept.tokens.tolist() == ids.tolist() + out.new_tokens[:-1]
        assert kept.cache.get_seq_length() == kept.tokens.numel()
    # The third call shares the prompt and 3 answer tokens with the cache the second one left.
    assert kept.reused == prompt.numel() + 3


def test_prefix_cache_refuses_a_drafter_fed_by_prefill_hidden_states(tiny_pair):
    from loosespec_bench.decoding import PrefixCache

    target, draft, tok = tiny_pair
    prompt = _prompt(tok)
    kept = PrefixCache()
    _ar(target, prompt, max_new_tokens=3, prefix_cache=kept)

    class Tapping(ModelDrafter):
        needs_target_hidden = (1,)

        def observe(self, hidden):
            pass

    with pytest.raises(ValueError, match="prefix_cache"):
        generate(target, prompt, verifier=SPD(), drafter=Tapping(draft, k=2), max_new_tokens=3, prefix_cache=kept)


# ---- which stop comes first within one step's accepted tokens (decoding.loop._first_stop) ----------
from loosespec_bench.decoding.loop import _first_stop  # noqa: E402

FENCE, EOS = 7, 2  # a token that completes the stop string "```", and the EOS id


def _fence_stop(ids: list[int]) -> bool:
    return FENCE in ids


def test_a_stop_string_before_an_eos_in_the_same_step_stops_at_the_stop_string():
    # Found on HumanEval/53: one step accepted "```" then EOS; the target alone stops at "```".
    assert _first_stop([5, FENCE, EOS], [1], {EOS}, _fence_stop) == (2, "stop_string")


def test_an_eos_before_a_stop_string_stops_at_the_eos():
    assert _first_stop([5, EOS, FENCE], [1], {EOS}, _fence_stop) == (2, "eos")


def test_eos_alone_no_stop_and_nothing_at_all():
    assert _first_stop([5, EOS], [1], {EOS}, None) == (2, "eos")
    assert _first_stop([EOS], [1], {EOS}, _fence_stop) == (1, "eos")  # nothing before the EOS to check
    assert _first_stop([5, 6], [1], {EOS}, _fence_stop) == (2, None)
    assert _first_stop([5, FENCE, 6], [1], {EOS}, _fence_stop) == (2, "stop_string")
