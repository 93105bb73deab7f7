"""The drafter interface: propose K tokens given every committed token.

Drafters are stateful (a draft model keeps a KV cache) but never see the target. The loop
calls `reset` once per sequence and `propose` once per verification step with all committed
tokens; a drafter that caches works out for itself how much of its cache is still valid (the
longest common prefix with the committed tokens), so a rule that keeps draft tokens (FLy's
deferral) or replaces them (a correction) needs no special rollback call.
"""

from __future__ import annotations

from typing import Protocol

import torch

from ..verifiers.base import Draft


class Drafter(Protocol):
    name: str

    def reset(self, prompt_ids: torch.Tensor) -> None:
        """Start a new sequence. prompt_ids: [P] int64."""

    def propose(
        self,
        tokens: torch.Tensor,
        k: int,
        *,
        temperature: float,
        generator: torch.Generator | None,
        want_probs: bool,
    ) -> Draft:
        """Propose up to k tokens continuing `tokens` ([n] int64, all committed tokens).

        want_probs asks for q_i even at T = 0 (DropMatch's JS criterion needs it); drafters
        that have no distribution (prompt lookup) return probs=None regardless.
        """


def empty_draft() -> Draft:
    return Draft(tokens=torch.empty(0, dtype=torch.long), probs=None)


def common_prefix_len(a: torch.Tensor, b: torch.Tensor) -> int:
    """Length of the longest common prefix of two [n] int64 tensors."""
    m = min(a.numel(), b.numel())
    if m == 0:
        return 0
    eq = (a[:m] == b[:m]).to(torch.int64)
    return int(eq.cumprod(dim=0).sum())
