"""drafter=model: a smaller causal LM with the target's tokenizer drafts K tokens, one forward
each, over its own KV cache.

The drafting logic is written once, as a draft program (batch_program; drafters/base.py): at
batch 1 propose() drives it with this drafter's own forwards on its own cache, and the batched
loop (decoding/ragged.py) drives one per row with batched forwards over a ragged cache."""

from __future__ import annotations

from typing import Any

import torch
from transformers import DynamicCache, PreTrainedModel

from ..kv import new_cache
from ..sampling import GREEDY, SamplingParams, sample_or_argmax
from ..step import Draft, crop_to, empty_draft
from .base import DraftProgram, DraftSlot, Drafter


class CacheSlot(DraftSlot):
    """A whole in-place cache as one sequence's place (the drafter's own, at batch 1)."""

    def __init__(self, cache: DynamicCache) -> None:
        super().__init__()
        self.cache = cache

    def crop(self, length: int) -> None:
        crop_to(self.cache, length)  # in place (kv.new_cache): a pointer move


class ModelDrafter(Drafter):
    name = "model"
    config_names = ("model",)
    needs_model = True  # build passes the pair's draft model (model=)
    batch_drafting = "program"  # batch_program: propose()'s own logic, one row of a batch

    def __init__(self, model: PreTrainedModel, k: int | None = None, **knobs: Any) -> None:
        super().__init__(k, **knobs)
        self.model = model
        self.slot: CacheSlot | None = None  # reset() makes it: the cache and the ids it holds

    # The cache and the ids it holds, as attributes (ReferenceDrafter keeps the cache between
    # problems and drops it with forget(); tests read seen).
    @property
    def cache(self) -> DynamicCache | None:
        return None if self.slot is None else self.slot.cache

    @cache.setter
    def cache(self, value: DynamicCache | None) -> None:
        self.slot = None if value is None else CacheSlot(value)

    @property
    def seen(self) -> torch.Tensor:
        """[len(cache)] int64: the token ids the cache holds, in order. Compared with the
        committed tokens at each step to find how much of the cache survives verification."""
        return self.slot.seen if self.slot is not None else torch.empty(0, dtype=torch.long)

    @seen.setter
    def seen(self, value: torch.Tensor) -> None:
        if self.slot is not None:
            self.slot.seen = value

    def modules(self) -> list[torch.nn.Module]:
        return [self.model]

    def vocab_network(self) -> PreTrainedModel:
        return self.model  # drafter.vocab_top restricts the draft model's LM head

    def batch_model(self) -> PreTrainedModel:
        return self.model

    def reset(self, prompt_ids: torch.Tensor) -> None:
        self.cache = new_cache(self.model.config)  # in place: the rollback's crop is a pointer move

    def _rollback(self, tokens: torch.Tensor) -> int:
        """Crop the cache to its longest prefix still equal to the committed tokens."""
        assert self.slot is not None, "reset() must be called before propose()"
        return self.slot.rollback(tokens)

    @torch.inference_mode()
    def propose(
        self,
        tokens: torch.Tensor,
        k: int,
        sampling: SamplingParams = GREEDY,
        *,
        want_probs: bool = False,
    ) -> Draft:
        if k <= 0:
            return empty_draft()  # nothing to draft: no cache needed (as before reset)
        assert self.slot is not None, "reset() must be called before propose()"
        return self._run(self.batch_program(self.slot, tokens, k, sampling, want_probs))

    def _run(self, program: DraftProgram) -> Draft:
        """Drive a draft program alone: each forward it asks for runs on this drafter's cache."""
        assert self.slot is not None
        try:
            feed, n = next(program)
            while True:
                # Tokens live on the host; the draft may sit on an accelerator.
                logits = self.model(
                    feed.unsqueeze(0).to(self.model.device), cache=self.slot.cache, use_cache=True, logits_to_keep=n
                ).logits[0].float()  # [n, vocab]
                feed, n = program.send(logits)
        except StopIteration as stop:
            return stop.value

    def batch_program(
        self, slot: DraftSlot, tokens: torch.Tensor, k: int, sampling: SamplingParams, want_probs: bool
    ) -> DraftProgram:
        """K forwards of one token each; the first feeds what the slot's cache has not seen."""
        if k <= 0:
            return empty_draft()
        keep = slot.rollback(tokens)
        feed = tokens[keep:]  # [m] committed tokens the cache has not seen, m >= 1
        out_tokens: list[int] = []
        out_probs: list[torch.Tensor] = []
        keep_probs = want_probs or not sampling.greedy
        for _ in range(k):
            # The logits come back to the host because the sampling generator and the
            # verifiers' tokens are there.
            logits = (yield feed, 1)[0].cpu()  # [vocab]
            slot.seen = torch.cat([slot.seen, feed])
            d, q = sample_or_argmax(logits, sampling, want_probs=keep_probs)
            out_tokens.append(d)
            if keep_probs:
                out_probs.append(q)
            feed = torch.tensor([d], dtype=torch.long)
        # The last draft token is never fed: the cache is one behind, as for the target.
        return Draft(
            tokens=torch.tensor(out_tokens, dtype=torch.long),
            probs=torch.stack(out_probs) if keep_probs else None,
        )
