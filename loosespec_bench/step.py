"""The ground floor of one verification step: what a drafter proposes (`Draft`), what the
target's verification forward yields (`TargetScores`), what a rule decides (`Verdict`), and
the few index helpers every layer uses to roll back by longest common prefix.

Drafters, verifiers and the decoding loop all import from here, so none of them needs to
import another (drafters never see verifiers; verifiers never see models). This module imports
nothing from the package.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

import torch

if TYPE_CHECKING:  # only for the annotation: importing transformers here costs seconds
    from transformers import Cache


@dataclass
class Draft:
    """What a drafter proposes for one verification step."""

    tokens: torch.Tensor  # [K] int64, K >= 0 (prompt lookup may find nothing)
    # [K, vocab] float32 draft distribution q_i, or None for drafters without probabilities
    # (prompt lookup); rules then treat q_i as one-hot(d_i), see docs/algorithms.md section 1.
    probs: torch.Tensor | None = None
    # Free-form drafter statistics for this step (e.g. MLA's inner lookups), recorded as-is.
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def k(self) -> int:
        return int(self.tokens.numel())


@dataclass
class TargetScores:
    """The target's single verification forward over [last_token, d_1..d_K]."""

    logits: torch.Tensor  # [K+1, vocab] float32; row i predicts draft position i+1, row K the bonus
    # [K+1, hidden] final hidden states (before the LM head), only when the rule asks for them
    # (DropMatch re-runs the LM head on them under dropout).
    hidden: torch.Tensor | None = None
    lm_head: Callable[[torch.Tensor], torch.Tensor] | None = None


@dataclass
class Verdict:
    """The decision for one step: keep draft[:num_accepted], then emit next_token."""

    num_accepted: int
    next_token: int
    # Per-step decision record (raw match flags, entropies, loose accepts...); optional.
    record: dict[str, Any] | None = None


def empty_draft() -> Draft:
    """A draft of K = 0 tokens: the step is a plain target step (method=ar, no lookup match)."""
    return Draft(tokens=torch.empty(0, dtype=torch.long), probs=None)


def longest_true_prefix(flags: torch.Tensor) -> int:
    """Number of leading True entries of a [K] bool tensor (0 when flags is empty)."""
    if flags.numel() == 0:
        return 0
    # cumprod stays 1 while flags are True and drops to 0 for good at the first False.
    return int(flags.to(torch.int64).cumprod(dim=0).sum())


def common_prefix_len(a: torch.Tensor, b: torch.Tensor) -> int:
    """Length of the longest common prefix of two [n] int64 tensors."""
    m = min(a.numel(), b.numel())
    if m == 0:
        return 0
    return longest_true_prefix(a[:m] == b[:m])


def crop_to(cache: Cache, length: int) -> None:
    """Keep the first `length` positions of every layer of a transformers cache.

    A negative argument to `Cache.crop` means "remove that many" in transformers 4.x and 5.x
    alike (5.x refuses the old positive "final length" form), so this is the portable call.
    """
    remove = cache.get_seq_length() - length
    if remove < 0:
        raise ValueError(f"cannot crop a cache of {cache.get_seq_length()} positions to {length}")
    if remove:
        cache.crop(-remove)
