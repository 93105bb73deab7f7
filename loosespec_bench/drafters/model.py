"""drafter=model: a smaller causal LM with the target's tokenizer drafts K tokens, one forward
each, over its own KV cache."""

from __future__ import annotations

from typing import Any

import torch
from transformers import DynamicCache, PreTrainedModel

from ..kv import new_cache
from ..sampling import GREEDY, SamplingParams, sample_or_argmax
from ..step import Draft, common_prefix_len, crop_to, empty_draft
from .base import Drafter


class ModelDrafter(Drafter):
    name = "model"
    config_names = ("model",)
    needs_model = True  # build passes the pair's draft model (model=)
    batch_drafting = "model"  # decoding/ragged.py: model_program, this propose() per row

    def __init__(self, model: PreTrainedModel, k: int | None = None, **knobs: Any) -> None:
        super().__init__(k, **knobs)
        self.model = model
        self.cache: DynamicCache | None = None
        # Token ids the cache holds, in order: [len(cache)] int64. Compared with the committed
        # tokens at each step to find how much of the cache survives verification.
        self.seen = torch.empty(0, dtype=torch.long)

    def modules(self) -> list[torch.nn.Module]:
        return [self.model]

    def vocab_network(self) -> PreTrainedModel:
        return self.model  # drafter.vocab_top restricts the draft model's LM head

    def reset(self, prompt_ids: torch.Tensor) -> None:
        self.cache = new_cache(self.model.config)  # in place: _rollback's crop is a pointer move
        self.seen = torch.empty(0, dtype=torch.long)

    def _rollback(self, tokens: torch.Tensor) -> int:
        """Crop the cache to its longest prefix still equal to the committed tokens."""
        assert self.cache is not None, "reset() must be called before propose()"
        # Keep at least one committed token to feed, so the forward yields the next logits.
        keep = min(common_prefix_len(self.seen, tokens), tokens.numel() - 1)
        if self.seen.numel() > keep:
            crop_to(self.cache, keep)
            self.seen = self.seen[:keep]
        return keep

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
            return empty_draft()
        keep = self._rollback(tokens)
        feed = tokens[keep:]  # [m] committed tokens the cache has not seen, m >= 1
        out_tokens: list[int] = []
        out_probs: list[torch.Tensor] = []
        keep_probs = want_probs or not sampling.greedy
        for _ in range(k):
            # Tokens live on the host; the draft may sit on an accelerator. The logits come back
            # to the host because the sampling generator and the verifiers' tokens are there.
            logits = self.model(
                feed.unsqueeze(0).to(self.model.device), cache=self.cache, use_cache=True, logits_to_keep=1
            ).logits[0, -1].float().cpu()  # [vocab]
            self.seen = torch.cat([self.seen, feed])
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
