"""drafters/reference.py: the reference lookup on hand-built token lists, and on tiny models
(float32) the same tokens as the target alone."""

from __future__ import annotations

import torch

from loosespec_bench.decoding import PrefixCache, generate
from loosespec_bench.drafters.reference import ReferenceDrafter, reference_lookup
from loosespec_bench.verifiers.spd import SPD

T = lambda *xs: torch.tensor(xs, dtype=torch.long)  # noqa: E731


def look(context, reference, k=4, near=0, max_ngram=3, min_ngram=2):
    return reference_lookup(T(*context), T(*reference), k, near=near, max_ngram=max_ngram, min_ngram=min_ngram).tolist()


def test_lookup_proposes_what_follows_the_trailing_ngram():
    assert look([9, 1, 2], [1, 2, 3, 4, 5, 6]) == [3, 4, 5, 6]


def test_lookup_prefers_the_largest_ngram():
    # (1, 2) occurs twice; only the second is preceded by 7, so the 3-gram decides.
    assert look([7, 1, 2], [1, 2, 8, 7, 1, 2, 3], near=0) == [3]


def test_lookup_takes_the_occurrence_nearest_the_aligned_position():
    ref = [1, 2, 5, 0, 0, 0, 0, 1, 2, 6]
    assert look([1, 2], ref, k=1, near=2) == [5]
    assert look([1, 2], ref, k=1, near=9) == [6]


def test_lookup_finds_nothing_below_min_ngram_or_without_a_follower():
    assert look([4, 2], [1, 2, 3], min_ngram=2) == []  # only the 1-gram (2) matches
    assert look([4, 2], [1, 2, 3], min_ngram=1) == [3]
    assert look([2, 3], [1, 2, 3]) == []  # the match ends the reference: nothing follows
    assert look([5], [1, 2, 3], min_ngram=1) == []
    assert look([1, 2], []) == []


def _ids(tok, text="Question: 3 apples and 4 apples make how many? Answer step by step."):
    return tok(text, add_special_tokens=False).input_ids


def test_continuations_from_a_reference_equal_the_target_alone(tiny_pair):
    target, draft, tok = tiny_pair
    prompt = _ids(tok)
    P = len(prompt)
    base = generate(target, torch.tensor(prompt), verifier=SPD(), max_new_tokens=30).new_tokens
    drafter = ReferenceDrafter(draft, k=8, model_k=3, min_ngram=1)
    kept = PrefixCache()
    for cut, swap in ((4, 11), (10, 12), (2, 13)):
        ids = torch.tensor(prompt + base[:cut] + [swap])
        alone = generate(target, ids, verifier=SPD(), max_new_tokens=25).new_tokens
        drafter.set_reference(P, base)
        out = generate(target, ids, verifier=SPD(), drafter=drafter, max_new_tokens=25, prefix_cache=kept)
        assert out.new_tokens == alone
    # The reference (the tiny target's own answer) was drafted from, and the model drafted too.
    assert drafter.info()["lookup_steps"] > 0 and drafter.info()["model_steps"] > 0


def test_the_draft_cache_survives_reset_until_forget(tiny_pair):
    _, draft, tok = tiny_pair
    drafter = ReferenceDrafter(draft, k=4, model_k=2)
    prompt = torch.tensor(_ids(tok))
    drafter.reset(prompt)
    drafter.propose(prompt, 2)
    seen = drafter.seen.numel()
    drafter.reset(prompt)  # the next continuation of the same problem
    assert drafter.seen.numel() == seen and drafter.cache is not None
    drafter.forget()  # a new problem
    assert drafter.cache is None and drafter.seen.numel() == 0


