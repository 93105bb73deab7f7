"""The verifier interface and what loose rules share.

A verifier is a pure function of the draft and the target's scores: it never touches a model
or a cache. The decoding loop turns its `Verdict` into committed tokens and cache rollbacks.
Draft, TargetScores and Verdict live in loosespec_bench.step (re-exported here).
"""

from __future__ import annotations

import torch

from ..step import Draft, TargetScores, Verdict

__all__ = ["Draft", "LooseDecision", "TargetScores", "Verdict", "Verifier"]


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


class Verifier:
    """A configured acceptance rule: a callable that subclasses implement.

    The two flags are what the loop asks of the other layers on the rule's behalf:
    `needs_hidden` asks the target for TargetScores.hidden (and its LM head), and
    `needs_draft_probs` asks the drafter for q_i even at T = 0 (DropMatch's js criterion).
    """

    needs_hidden: bool = False
    needs_draft_probs: bool = False

    def __call__(
        self, draft: Draft, scores: TargetScores, *, temperature: float, generator: torch.Generator | None
    ) -> Verdict:
        raise NotImplementedError
