"""drafter=mla: FLy's Multi-Level Acceleration, prompt lookup speeding up the draft model.

The draft model's greedy draft is produced in fewer forwards: until K draft tokens exist,
prompt lookup guesses up to `num_pred_tokens` continuation tokens (n-gram sizes max_ngram
down to min_ngram, first match in the context, the drafts so far included); with no match the
previous guess is reused. The draft model checks the guess in ONE forward by exact match
against its own argmax and adds its own next token after the matched prefix (the correction,
or the bonus when the whole guess matched), exactly as the target verifies the drafter one
level up. Because every kept token is the draft model's argmax given the tokens before it, the
draft equals ModelDrafter's greedy draft token for token; only the number of forwards changes.

The draft is greedy at every temperature, as in the released code (which calls it with
temperature 0). A deterministic draft's distribution is one-hot(d_i), so it returns
probs=None at T > 0 and speculative sampling stays exact; at T = 0 it returns the draft model's
softmax rows when asked (want_probs, DropMatch's js criterion), like ModelDrafter.
"""

from __future__ import annotations

import torch
from transformers import PreTrainedModel

from ..sampling import tempered_probs
from ..step import Draft, crop_to, empty_draft, longest_true_prefix
from .lookup import prompt_lookup
from .model import ModelDrafter


class MLADrafter(ModelDrafter):
    """ModelDrafter's cache and rollback, with a lookup-then-verify inner loop."""

    name = "mla"

    def __init__(
        self, model: PreTrainedModel, k: int = 5, max_ngram: int = 4, min_ngram: int = 1, num_pred_tokens: int = 6
    ) -> None:
        super().__init__(model, k)
        self.max_ngram = max_ngram
        self.min_ngram = min_ngram
        self.num_pred_tokens = num_pred_tokens

    @torch.inference_mode()
    def propose(
        self,
        tokens: torch.Tensor,
        k: int,
        *,
        temperature: float = 0.0,
        generator: torch.Generator | None = None,
        want_probs: bool = False,
    ) -> Draft:
        if k <= 0:
            return empty_draft()
        self._rollback(tokens)  # the cache now holds tokens[:len(self.seen)], at least one behind
        keep_probs = want_probs and temperature <= 0
        ctx = tokens  # [n + drafted] committed tokens, then the draft so far
        drafted: list[torch.Tensor] = []  # pieces of the draft, [<= k] in all
        probs: list[torch.Tensor] = []  # matching [*, vocab] rows of q
        n_drafted = 0
        guess_prev = tokens.new_empty(0)  # no guess yet: the first forward without a hit is a plain step
        info = {"lookups": 0, "lookup_hits": 0, "lookup_proposed": 0, "lookup_accepted": 0, "draft_forwards": 0}
        while n_drafted < k:
            guess = prompt_lookup(ctx, self.num_pred_tokens, max_ngram=self.max_ngram, min_ngram=self.min_ngram)
            info["lookups"] += 1
            if guess.numel() > 0:
                info["lookup_hits"] += 1
                guess_prev = guess
            else:
                guess = guess_prev
            # The draft model adds one token of its own, so more than k - n_drafted - 1 guessed
            # tokens could never be kept (the released code feeds all 6 and cuts at K; the kept
            # draft is the same, this only skips work that is thrown away).
            guess = guess[: k - n_drafted - 1]  # [L]
            L = guess.numel()
            feed = ctx[self.seen.numel() :]  # [m >= 1] context tokens the cache has not seen
            inp = torch.cat([feed, guess])  # [m + L]
            logits = self.model(
                inp.unsqueeze(0).to(self.model.device),
                cache=self.cache,
                use_cache=True,
                logits_to_keep=L + 1,
            ).logits[0].float()  # [L+1, vocab]: row j predicts the token after guess[:j]
            info["draft_forwards"] += 1
            y = logits.argmax(dim=-1).cpu()  # [L+1] the draft model's greedy tokens, on the host
            j = longest_true_prefix(guess == y[:L])  # guessed tokens the draft model agrees with
            new = torch.cat([guess[:j], y[j : j + 1]])  # [j+1]: matched guess, then its own token
            info["lookup_proposed"] += L
            info["lookup_accepted"] += j
            # The cache took feed + guess; only feed + guess[:j] are now context. The new last
            # token (y_j) is not fed yet: the cache stays one behind, as ModelDrafter's does.
            self.seen = torch.cat([self.seen, feed, guess[:j]])
            crop_to(self.cache, self.seen.numel())
            ctx = torch.cat([ctx, new])
            drafted.append(new)
            if keep_probs:
                # Untempered (the draft is greedy), on the generator's device as ModelDrafter's q.
                probs.append(tempered_probs(logits[: j + 1], 0.0, generator))  # [j+1, vocab]
            n_drafted += j + 1
        return Draft(
            tokens=torch.cat(drafted),  # [k]: the guess cap keeps n_drafted from passing k
            probs=torch.cat(probs) if keep_probs else None,
            info=info,
        )
