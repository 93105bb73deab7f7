"""drafter=reference (built by train/mine_autojudge.py, no config file): drafts a continuation
from the answer it was cut from, else with the draft model, keeping the draft model's cache from
one continuation to the next.

AutoJudge's mining (judges/mining.py) spends nearly all of its time in target continuations,
one greedy continuation per mismatch from the prompt + the answer so far + the draft's token.
After one substituted token the target usually goes back to the same text (the same sentence,
the same numbers), so an n-gram lookup of the continuation's last tokens in that answer proposes
long runs the target accepts; where the lookup finds nothing the pair's draft model drafts as in
SPD. With exact-match verification (SPD) every kept token is still the target's greedy choice
(up to bf16 near-ties between forwards of different lengths, as SPD). docs/algorithms.md 9.1.
"""

from __future__ import annotations

from typing import Any

import torch
from transformers import PreTrainedModel

from ..sampling import GREEDY, SamplingParams
from ..step import Draft
from .model import ModelDrafter


def reference_lookup(
    context: torch.Tensor, reference: torch.Tensor, k: int, *, near: int, max_ngram: int, min_ngram: int
) -> torch.Tensor:
    """Up to k tokens that follow, in `reference`, the trailing n-gram of `context`.

    context: [n] int64 (the continuation so far, answer tokens); reference: [r] int64 (the answer
    it was cut from). Sizes max_ngram down to min_ngram; of the matches of the largest size that
    matches, the one whose end lies nearest to `near` (the position the continuation has
    reached: an n-gram that recurs is taken at the aligned place, not at its first occurrence).
    Returns [<= k] int64, empty when nothing matches or nothing follows the match.
    """
    n, r = context.numel(), reference.numel()
    for size in range(min(max_ngram, n), min_ngram - 1, -1):
        if size <= 0 or r <= size:
            continue
        pattern = context[n - size :]  # [size]
        windows = reference[: r - 1].unfold(0, size, 1) if r - 1 >= size else reference.new_empty(0, size)  # [w, size]
        hits = (windows == pattern).all(dim=1).nonzero(as_tuple=True)[0]  # window starts with a follower
        if hits.numel() == 0:
            continue
        ends = hits + size  # [h] first follower position of each match
        start = int(ends[torch.argmin((ends - near).abs())])
        return reference[start : start + k]
    return reference.new_empty(0)


class ReferenceDrafter(ModelDrafter):
    """A lookup in a reference answer first, else the draft model (`model_k` tokens, greedy),
    whose cache survives `reset` (the next continuation of the same problem shares the prompt
    and the answer prefix; `_rollback` keeps what matches). Used by AutoJudge's mining for its
    continuations (no config file: the mining script builds it; never a benchmark drafter, since
    the kept cache would carry prefix caching from one sample into the next).

    `k` is the lookup's longest proposal (the loop drafts at most k per step)."""

    name = "reference"
    # Its own propose (a reference lookup first) is not ModelDrafter's: no batch program.
    batch_drafting = None
    batch_refusal = "it drafts from one problem's reference answer (AutoJudge's mining), one problem at a time"

    def __init__(
        self, model: PreTrainedModel, *, k: int = 16, model_k: int = 5, max_ngram: int = 4, min_ngram: int = 2
    ) -> None:
        super().__init__(model, k=k)
        self.model_k = int(model_k)
        self.max_ngram = int(max_ngram)
        self.min_ngram = int(min_ngram)
        self.reference = torch.empty(0, dtype=torch.long)
        self.answer_start = 0  # where the answer begins in the loop's tokens (the prompt length)
        self.stats = {"lookup_steps": 0, "lookup_tokens": 0, "model_steps": 0}

    def set_reference(self, prompt_len: int, reference: list[int]) -> None:
        """The next continuation's reference answer (answer tokens), after a prompt of prompt_len."""
        self.answer_start = int(prompt_len)
        self.reference = torch.tensor(reference, dtype=torch.long)

    def reset(self, prompt_ids: torch.Tensor) -> None:
        if self.cache is None:  # the first continuation; later ones keep the cache (rollback crops it)
            super().reset(prompt_ids)

    def forget(self) -> None:
        """A new problem: nothing of the cache is worth keeping."""
        self.cache = None
        self.seen = torch.empty(0, dtype=torch.long)

    def propose(self, tokens: torch.Tensor, k: int, sampling: SamplingParams = GREEDY, *, want_probs: bool = False) -> Draft:
        if k <= 0:
            return super().propose(tokens, k, sampling, want_probs=want_probs)
        if sampling.greedy and not want_probs and self.reference.numel():
            answer = tokens[self.answer_start :]
            cand = reference_lookup(answer, self.reference, k, near=answer.numel(),
                                    max_ngram=self.max_ngram, min_ngram=self.min_ngram)
            if cand.numel():
                self.stats["lookup_steps"] += 1
                self.stats["lookup_tokens"] += int(cand.numel())
                return Draft(tokens=cand.clone(), probs=None, info={"lookup": int(cand.numel())})
        self.stats["model_steps"] += 1
        return super().propose(tokens, min(k, self.model_k), sampling, want_probs=want_probs)

    def info(self) -> dict[str, Any]:
        return dict(self.stats)
