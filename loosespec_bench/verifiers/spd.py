"""Vanilla speculative decoding: the lossless reference every loose rule is measured against.

Greedy (T = 0): accept the longest prefix on which the draft equals the target's argmax, then
emit the target's token at the first mismatch (or the bonus token when all K matched).
Sampling (T > 0): speculative sampling of Leviathan et al. (2023) / Chen et al. (2023), whose
output distribution is exactly the target's.
"""

from __future__ import annotations

import torch

from .base import Draft, TargetScores, Verdict


def raw_match_flags(draft_tokens: torch.Tensor, target_logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """a_i = (d_i == t_i) with t_i = argmax p_i.

    draft_tokens: [K]; target_logits: [K+1, vocab]. Returns (a [K] bool, t [K+1] int64).
    """
    t = target_logits.argmax(dim=-1).cpu()  # [K+1]; tokens live on the host, logits may not
    k = draft_tokens.numel()
    return draft_tokens.cpu() == t[:k], t


def longest_true_prefix(flags: torch.Tensor) -> int:
    """Number of leading True entries of a [K] bool tensor (0 when flags is empty)."""
    if flags.numel() == 0:
        return 0
    # cumprod stays 1 while flags are True and drops to 0 for good at the first False.
    return int(flags.to(torch.int64).cumprod(dim=0).sum())


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
) -> tuple[int, int]:
    """Speculative sampling: accept d_i with probability min(1, p_i(d_i) / q_i(d_i)).

    draft_tokens: [K]; draft_probs: [K, vocab] or None (then q_i = one-hot(d_i), as for prompt
    lookup); target_logits: [K+1, vocab]; temperature > 0.
    On the first rejection the token is drawn from norm(max(0, p_i - q_i)); when all K are
    accepted the bonus token is drawn from p_{K+1}.
    """
    if temperature <= 0:
        raise ValueError("verify_sampling needs temperature > 0; use verify_greedy for T = 0")
    # On the host: the seeded generator and the draft's q live there (one copy per step).
    p = torch.softmax(target_logits.float() / temperature, dim=-1).cpu()  # [K+1, vocab]
    draft_tokens = draft_tokens.cpu()
    k = draft_tokens.numel()
    idx = torch.arange(k)
    p_d = p[idx, draft_tokens]  # [K] p_i(d_i)
    if draft_probs is None:
        q_d = torch.ones_like(p_d)  # one-hot draft: q_i(d_i) = 1
    else:
        q_d = draft_probs[idx, draft_tokens].float()  # [K]
    # Draw all K uniforms at once: one host sync per step instead of K.
    u = torch.rand(k, generator=generator)
    accept = u * q_d < p_d  # u < p/q without dividing by a possibly tiny q
    n = longest_true_prefix(accept)
    if n == k:
        return n, int(torch.multinomial(p[k], 1, generator=generator))
    if draft_probs is None:
        residual = p[n].clone()
        residual[draft_tokens[n]] = 0.0
    else:
        residual = torch.clamp(p[n] - draft_probs[n].float(), min=0.0)
    total = residual.sum()
    # p == q exactly leaves nothing to resample from; the rejection then had probability 0,
    # so this only guards against floating-point edge cases.
    dist = residual / total if total > 0 else p[n]
    return n, int(torch.multinomial(dist, 1, generator=generator))


class SPD:
    """Vanilla speculative decoding as a configured verifier (also used for method=ar, K = 0)."""

    needs_hidden = False

    def __call__(
        self, draft: Draft, scores: TargetScores, *, temperature: float, generator: torch.Generator | None
    ) -> Verdict:
        if temperature > 0:
            n, nxt = verify_sampling(
                draft.tokens, draft.probs, scores.logits, temperature=temperature, generator=generator
            )
        else:
            n, nxt = verify_greedy(draft.tokens, scores.logits)
        return Verdict(num_accepted=n, next_token=nxt)
