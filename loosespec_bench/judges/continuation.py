"""Cheaper teacher-forced draft passes for AutoJudge's mining, with the same argmaxes.

Step 1 of the search (judges/mining.py) asks the draft for its argmax at every answer position,
again after every unimportant substitution (the answer changed after m). `IncrementalArgmax`
keeps the draft's cache and reads again only the tokens after the part the new answer shares
with the old. Its companions: the loop's PrefixCache (the target's cache kept across a problem's
continuations) and drafters/reference.py (the continuations' drafter). docs/algorithms.md 9.1.
"""

from __future__ import annotations

import torch
from transformers import DynamicCache, PreTrainedModel

from ..step import common_prefix_len, crop_to


class IncrementalArgmax:
    """The draft's teacher-forced argmax over prompt + answer (mining's step 1), reading again
    only the tokens after the part the previous call's answer shares (a kept cache): after an
    unimportant substitution at m the new answer equals the old one up to m.

    __call__(answer) -> [len(answer)] the argmax predicting answer[j] from prompt + answer[:j]."""

    def __init__(self, model: PreTrainedModel, prompt: list[int]) -> None:
        self.model = model
        self.prompt = list(prompt)
        self.cache: DynamicCache | None = None
        self.seen = torch.empty(0, dtype=torch.long)  # [n] ids the cache holds
        self.pred = torch.empty(0, dtype=torch.long)  # [n] pred[i]: argmax after seen[:i+1]
        self.fed = 0  # tokens read, all calls together

    @torch.inference_mode()
    def __call__(self, answer: list[int]) -> list[int]:
        seq = torch.tensor(self.prompt + list(answer), dtype=torch.long)  # [n]
        if self.cache is None:
            self.cache = DynamicCache(config=self.model.config)
        keep = min(common_prefix_len(self.seen, seq), seq.numel() - 1)  # feed at least one token
        crop_to(self.cache, keep)
        logits = self.model(seq[None, keep:].to(self.model.device), cache=self.cache, use_cache=True).logits[0]  # [n-keep, V]
        self.pred = torch.cat([self.pred[:keep], logits.argmax(-1).cpu()])
        self.seen = seq
        self.fed += seq.numel() - keep
        P = len(self.prompt)
        return self.pred[P - 1 : P - 1 + len(answer)].tolist()
