"""drafter=mla: FLy's Multi-Level Acceleration, prompt lookup speeding up the draft model.

The draft model's greedy draft is produced in fewer forwards: until K draft tokens exist,
prompt lookup guesses up to `num_pred_tokens` continuation tokens (n-gram sizes max_ngram
down to min_ngram, first match in the context, the drafts so far included); with no match the
previous guess is reused. The draft model checks the guess in ONE forward by exact match
against its own argmax and adds its own next token after the matched prefix (the correction,
or the bonus when the whole guess matched), exactly as the target verifies the drafter one
level up. Because every kept token is the draft model's argmax given the tokens before it, the
draft equals ModelDrafter's greedy draft token for token; only the number of forwards changes.

Two lookups (`lookup`), same draft tokens, different draft-model work:
  official (default) the released code's draft_with_ngram / ngram_find_candidate_pred_tokens
           (fly/models/FLy.py): a match must lie inside tokens[:-n] (no overlap with the
           trailing n-gram); before the first match of a step the guess is the dummy
           101..100+num_pred_tokens; every guess is fed whole and the draft is cut at K after
           the loop, so draft forwards and fed tokens are the authors'.
  hf       transformers-style prompt lookup: overlapping matches allowed, no guess before the
           first match (a plain draft step), and guesses cut to what can still be kept
           (k - drafted - 1 tokens), so nothing past K is computed.

The draft is greedy at every temperature, as in the released code (which calls it with
temperature 0). A deterministic draft's distribution is one-hot(d_i), so it returns
probs=None at T > 0 and speculative sampling stays exact; at T = 0 it returns the draft model's
softmax rows when asked (want_probs, DropMatch's js criterion), like ModelDrafter.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from transformers import PreTrainedModel

from ..params import choice, integer, knob
from ..sampling import SamplingParams, tempered_probs
from ..step import Draft, empty_draft, longest_true_prefix
from .lookup import prompt_lookup
from .base import DraftProgram, DraftSlot, NgramParams
from .model import ModelDrafter

LOOKUPS = ("official", "hf")
# The released code's guess while nothing has matched yet in a step: ids 101, 102, ...
# (draft_with_ngram: torch.arange(101, num_ngram_pred_tokens + 101)).
DUMMY_FIRST_ID = 101


@dataclass(frozen=True)
class MLAParams(NgramParams):
    max_ngram: int = 4
    num_pred_tokens: int = knob(6, integer(1), "lookup tokens per guess")
    lookup: str = knob("official", choice(*LOOKUPS))


class MLADrafter(ModelDrafter):
    """ModelDrafter's cache, rollback and propose, with a lookup-then-verify program."""

    name = "mla"
    config_names = ("mla",)
    Params = MLAParams
    # propose() is ModelDrafter's: it drives this class's batch_program on the drafter's cache.

    def __init__(self, model: PreTrainedModel, **knobs: Any) -> None:
        super().__init__(model, **knobs)
        p = self.params
        self.max_ngram = p.max_ngram
        self.min_ngram = p.min_ngram
        self.num_pred_tokens = p.num_pred_tokens
        self.lookup = p.lookup

    def _dummy_guess(self) -> torch.Tensor:
        """[num_pred_tokens] the released code's first guess (wrapped into a smaller vocabulary)."""
        ids = torch.arange(DUMMY_FIRST_ID, DUMMY_FIRST_ID + self.num_pred_tokens, dtype=torch.long)
        return ids % int(self.model.config.vocab_size)

    def batch_program(
        self, slot: DraftSlot, tokens: torch.Tensor, k: int, sampling: SamplingParams, want_probs: bool
    ) -> DraftProgram:
        """Lookup, guess and check until K draft tokens exist: one draft-model forward per guess
        (ModelDrafter.propose drives it at batch 1, decoding/ragged.py per row of a batch)."""
        if k <= 0:
            return empty_draft()
        slot.rollback(tokens)  # the cache now holds tokens[:len(slot.seen)], at least one behind
        keep_probs = want_probs and sampling.greedy
        ctx = tokens  # [n + drafted] committed tokens, then the draft so far
        drafted: list[torch.Tensor] = []  # pieces of the draft, [<= k] in all
        probs: list[torch.Tensor] = []  # matching [*, vocab] rows of q
        n_drafted = 0
        official = self.lookup == "official"
        # Before the first hit: the released code's dummy guess, or (hf) none, a plain step.
        guess_prev = self._dummy_guess() if official else tokens.new_empty(0)
        info = {"lookups": 0, "lookup_hits": 0, "lookup_proposed": 0, "lookup_accepted": 0, "draft_forwards": 0}
        while n_drafted < k:
            guess = prompt_lookup(
                ctx, self.num_pred_tokens, max_ngram=self.max_ngram, min_ngram=self.min_ngram, overlap=not official
            )
            info["lookups"] += 1
            if guess.numel() > 0:
                info["lookup_hits"] += 1
                guess_prev = guess
            else:
                guess = guess_prev
            if not official:
                # The draft model adds one token of its own, so more than k - n_drafted - 1
                # guessed tokens could never be kept (the released code feeds the whole guess
                # and cuts at K; the kept draft is the same, this only skips thrown-away work).
                guess = guess[: k - n_drafted - 1]
            L = guess.numel()  # [L] guessed tokens fed
            feed = ctx[slot.seen.numel() :]  # [m >= 1] context tokens the cache has not seen
            # Row j of the logits predicts the token after guess[:j].
            logits = yield torch.cat([feed, guess]), L + 1  # [L+1, vocab], on the model's device
            info["draft_forwards"] += 1
            y = logits.argmax(dim=-1).cpu()  # [L+1] the draft model's greedy tokens, on the host
            j = longest_true_prefix(guess == y[:L])  # guessed tokens the draft model agrees with
            new = torch.cat([guess[:j], y[j : j + 1]])  # [j+1]: matched guess, then its own token
            info["lookup_proposed"] += L
            info["lookup_accepted"] += j
            # The cache took feed + guess; only feed + guess[:j] are now context. The new last
            # token (y_j) is not fed yet: the cache stays one behind, as ModelDrafter's does.
            slot.seen = torch.cat([slot.seen, feed, guess[:j]])
            slot.crop(slot.seen.numel())
            ctx = torch.cat([ctx, new])
            drafted.append(new)
            if keep_probs:
                # Untempered (the draft is greedy), on the generator's device as ModelDrafter's q.
                probs.append(tempered_probs(logits[: j + 1], 0.0, sampling.generator))  # [j+1, vocab]
            n_drafted += j + 1
        # [k]: hf's guess cap keeps n_drafted at k; official may pass it and is cut here (the
        # draft cache keeps the extra tokens until the next step's rollback).
        return Draft(
            tokens=torch.cat(drafted)[:k],
            probs=torch.cat(probs)[:k] if keep_probs else None,
            info=info,
        )
