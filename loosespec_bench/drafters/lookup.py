"""Prompt lookup decoding (Saxena 2023): propose the tokens that followed an earlier occurrence
of the context's last n-gram. No model and no probabilities."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from ..sampling import GREEDY, SamplingParams
from ..step import Draft, empty_draft
from .base import Drafter, NgramParams


def prompt_lookup(
    tokens: torch.Tensor, k: int, *, max_ngram: int, min_ngram: int = 1, overlap: bool = True
) -> torch.Tensor:
    """Up to k tokens that followed the first earlier match of the trailing n-gram.

    tokens: [n] int64. Tries n-gram sizes max_ngram down to min_ngram and returns the
    continuation of the first (earliest) match of the largest size that matches.
    overlap=True (transformers' PromptLookupCandidateGenerator): a match may overlap the
    trailing n-gram itself (any window that starts before it). overlap=False (the released FLy
    code, ngram_find_candidate_pred_tokens): only windows inside tokens[:n - size], i.e. ending
    before the trailing n-gram starts. Returns [<= k] int64 (empty when nothing matches).
    """
    n = tokens.numel()
    for size in range(min(max_ngram, n - 1), min_ngram - 1, -1):
        if size <= 0:
            break
        pattern = tokens[n - size :]  # [size]
        # overlap: windows starting at 0..n-size-1 (the window ending at the last token is the
        # pattern itself and has no continuation). No overlap: windows inside tokens[:n-size].
        searched = tokens[: n - 1] if overlap else tokens[: n - size]
        if searched.numel() < size:
            continue
        windows = searched.unfold(0, size, 1)  # [windows, size]
        hits = (windows == pattern).all(dim=1).nonzero(as_tuple=True)[0]
        if hits.numel() == 0:
            continue
        start = int(hits[0]) + size
        return tokens[start : min(start + k, n)]
    return tokens.new_empty(0)


@dataclass(frozen=True)
class PromptLookupParams(NgramParams):
    k: int = 10  # transformers' prompt_lookup_num_tokens default


class PromptLookupDrafter(Drafter):
    """drafter=pld: n-gram lookup in the prompt and everything generated so far."""

    name = "pld"
    config_names = ("pld",)
    Params = PromptLookupParams
    batch_drafting = "stateless"  # a lookup in the row's own tokens; nothing kept

    def __init__(self, **knobs: Any) -> None:
        super().__init__(**knobs)
        self.max_ngram = self.params.max_ngram
        self.min_ngram = self.params.min_ngram

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
        cand = prompt_lookup(tokens, k, max_ngram=self.max_ngram, min_ngram=self.min_ngram)
        # One lookup per step (work counts: its cost enters the calibrated cost model).
        return Draft(tokens=cand.clone(), probs=None, info={"lookups": 1, "lookup_hits": int(cand.numel() > 0)})
