"""Types shared by every acceptance rule.

A verifier is a pure function of the draft and the target's scores: it never touches a model
or a cache. The decoding loop turns its `Verdict` into committed tokens and cache rollbacks.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

import torch


class LooseDecision:
    """Shared reading of a loose rule's step decision (FLy, DropMatch): subclasses are
    dataclasses with `a` ([K] bool, the exact rule's acceptance) and `n` (accepted prefix)."""

    a: torch.Tensor
    n: int

    @property
    def mismatches(self) -> list[int]:
        """Positions the exact rule rejects."""
        return (~self.a).nonzero(as_tuple=True)[0].tolist()

    @property
    def loose(self) -> list[int]:
        """Mismatched positions inside the accepted prefix: accepted loosely, draft token kept."""
        return [i for i in self.mismatches if i < self.n]


@dataclass
class Draft:
    """What a drafter proposes for one verification step."""

    tokens: torch.Tensor  # [K] int64, K >= 0 (prompt lookup may find nothing)
    # [K, vocab] float32 draft distribution q_i, or None for drafters without probabilities
    # (prompt lookup); rules then treat q_i as one-hot(d_i), see ALGORITHMS.md.
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


class Verifier(Protocol):
    """A configured acceptance rule. `needs_hidden` asks the loop for TargetScores.hidden."""

    needs_hidden: bool

    def __call__(
        self, draft: Draft, scores: TargetScores, *, temperature: float, generator: torch.Generator | None
    ) -> Verdict: ...
