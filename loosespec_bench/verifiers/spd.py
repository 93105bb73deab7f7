"""Vanilla speculative decoding: the lossless reference every loose rule is measured against.

Greedy (T = 0): accept the longest prefix on which the draft equals the target's argmax, then
emit the target's token at the first mismatch (or the bonus token when all K matched).
Sampling (T > 0): speculative sampling of Leviathan et al. (2023) / Chen et al. (2023), whose
output distribution is exactly the target's.
"""

from __future__ import annotations

import torch

from ..sampling import GREEDY, SamplingParams, accept_exact, exact_tail, tempered_probs
from ..step import Draft, TargetScores, Verdict, longest_true_prefix
from .base import Verifier

__all__ = ["SPD", "raw_match_flags", "verify_greedy", "verify_sampling"]


def raw_match_flags(draft_tokens: torch.Tensor, target_logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """a_i = (d_i == t_i) with t_i = argmax p_i.

    draft_tokens: [K]; target_logits: [K+1, vocab]. Returns (a [K] bool, t [K+1] int64).
    """
    t = target_logits.argmax(dim=-1).cpu()  # [K+1]; tokens live on the host, logits may not
    k = draft_tokens.numel()
    return draft_tokens.cpu() == t[:k], t


def verify_greedy(draft_tokens: torch.Tensor, target_logits: torch.Tensor) -> tuple[int, int]:
    """Greedy exact-match rule.

    draft_tokens: [K] int64; target_logits: [K+1, vocab].
    Returns (n, next_token): keep draft_tokens[:n], then emit next_token = t_{n+1}.
    """
    a, t = raw_match_flags(draft_tokens, target_logits)
    n = longest_true_prefix(a)
    return n, int(t[n])


def verify_sampling(
    draft_tokens: torch.Tensor,
    draft_probs: torch.Tensor | None,
    target_logits: torch.Tensor,
    *,
    temperature: float,
    generator: torch.Generator | None = None,
    top_k: int = 0,
    top_p: float = 1.0,
) -> tuple[int, int]:
    """Speculative sampling: accept d_i with probability min(1, p_i(d_i) / q_i(d_i)).

    draft_tokens: [K]; draft_probs: [K, vocab] or None (then q_i = one-hot(d_i), as for prompt
    lookup); target_logits: [K+1, vocab]; temperature > 0. p_i is the processed target
    distribution (temperature, top-k, top-p), so the output is distributed exactly as the
    target's processed distribution, provided q_i was processed the same way by the drafter.
    On the first rejection the token is drawn from norm(max(0, p_i - q_i)); when all K are
    accepted the bonus token is drawn from p_{K+1}.
    """
    if temperature <= 0:
        raise ValueError("verify_sampling needs temperature > 0; use verify_greedy for T = 0")
    # p on the generator's device (the run's seeded CPU generator; the draft's q lives there too).
    p = tempered_probs(target_logits, temperature, generator, top_k=top_k, top_p=top_p)  # [K+1, vocab]
    draft_tokens = draft_tokens.to(p.device)
    accept = accept_exact(p, draft_probs, draft_tokens, generator)  # [K]
    n = longest_true_prefix(accept)
    return n, exact_tail(p, draft_probs, draft_tokens, n, generator)


class SPD(Verifier):
    """Vanilla speculative decoding as a configured verifier."""

    config_names = ("spd",)
    display_name = "SPD"
    lossless = True

    def __call__(
        self,
        draft: Draft,
        scores: TargetScores,
        sampling: SamplingParams = GREEDY,
    ) -> Verdict:
        if not sampling.greedy:
            n, nxt = verify_sampling(
                draft.tokens, draft.probs, scores.logits, temperature=sampling.temperature, generator=sampling.generator,
                top_k=sampling.top_k, top_p=sampling.top_p,
            )
        else:
            n, nxt = verify_greedy(draft.tokens, scores.logits)
        return Verdict(num_accepted=n, next_token=nxt)


class TargetAlone(SPD):
    """The target alone (method=ar): SPD's loop with no drafter (K = 0), the speedup baseline.
    Its own class so that every layer asks `target_alone` of it instead of matching the name."""

    config_names = ("ar",)
    display_name = "target alone"
    target_alone = True
