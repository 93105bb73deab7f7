"""What the positionwise loose rules share (ensemble, fsd, cascade, typical, lenient, threshold).

A positionwise rule decides each draft position i from that position's distributions alone
(the target's p_i, the drafter's q_i, the draft token d_i), accepts the longest prefix it passes
and emits one more token: its correction at the first rejected position, or the bonus token
t_{K+1} when all K pass. Unlike FLy (whose window reads later positions) such a rule applies
unchanged along every root-to-leaf path of a tree draft (verifiers/tree.py).

Each rule's own module holds its pure decide function (named after its paper's symbols), its
Params (ranges declared once) and a thin Verifier subclass of `PositionwiseRule`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import torch

from ..sampling import GREEDY, SamplingParams, match_vocab, tempered_probs
from ..step import Draft, TargetScores, Verdict, longest_true_prefix
from .base import LooseDecision, Verifier

__all__ = ["PositionwiseDecision", "PositionwiseRule", "draft_q", "finish", "step_probs", "untempered"]


@dataclass
class PositionwiseDecision(LooseDecision):
    """Everything a positionwise rule decided for one step (0-based positions)."""

    rule: str  # method name: ensemble, fsd, ...
    a: torch.Tensor  # [K] bool the exact rule's flags (raw_kind says which exact rule)
    accept: torch.Tensor  # [K] bool the loose rule's flags
    n: int  # accepted prefix length: keep d_1..d_n
    next_token: int  # the correction at position n, or the bonus when n == K
    t: torch.Tensor  # [K] int64 target argmax at the draft positions
    stat: torch.Tensor  # [K] float32 the statistic the rule compares (divergence, p(d), ...)
    raw_kind: str = "argmax"  # "argmax": a_i = d_i == argmax p_i | "spec": the u < p/q test

    def record(self) -> dict[str, Any]:
        """JSON-ready per-step record (metrics.summarize reads raw_match and loose_accepted)."""
        miss = self.mismatches
        return {
            "rule": self.rule,
            "raw_match": self.a.tolist(),
            "raw_kind": self.raw_kind,
            "target_tokens": self.t.tolist(),
            "mismatch_positions": miss,
            "mismatch_stat": [round(float(self.stat[i]), 6) for i in miss],
            "loose_accepted": self.loose,
        }


def untempered(target_logits: torch.Tensor) -> torch.Tensor:
    """p = softmax(logits) in float32, no temperature or truncation: what a greedy (T = 0)
    rule reads. target_logits: [..., vocab] -> [..., vocab]."""
    return torch.softmax(target_logits.float(), dim=-1)


def step_probs(
    draft_tokens: torch.Tensor,
    target_logits: torch.Tensor,
    sampling: SamplingParams,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """What every positionwise rule reads first: (p [K+1, vocab], d [K], idx [K] = 0..K-1,
    t [K+1] = argmax p), p untempered at T <= 0, else processed (sampling.tempered_probs) and on
    the generator's device; d moved to p's device."""
    if sampling.greedy:
        p = untempered(target_logits)
    else:
        p = tempered_probs(target_logits, sampling.temperature, sampling.generator, top_k=sampling.top_k, top_p=sampling.top_p)
    d = draft_tokens.to(p.device)
    return p, d, torch.arange(d.numel(), device=p.device), p.argmax(dim=-1)


def draft_q(draft_tokens: torch.Tensor, draft_probs: torch.Tensor | None, vocab: int, device: torch.device) -> torch.Tensor:
    """q_i over the target's vocabulary on `device`: the drafter's distribution, or one-hot(d_i)
    for drafters without one (prompt lookup, MLA). draft_tokens: [K] -> [K, vocab] float32."""
    K = draft_tokens.numel()
    if draft_probs is None:
        q = torch.zeros(K, vocab, device=device)
        q[torch.arange(K, device=device), draft_tokens.to(device)] = 1.0
        return q
    return match_vocab(draft_probs, vocab).to(device)


def finish(
    rule: str,
    a: torch.Tensor,
    accept: torch.Tensor,
    t: torch.Tensor,
    stat: torch.Tensor,
    next_token: Any,
    raw_kind: str = "argmax",
) -> PositionwiseDecision:
    """The decision from the rule's [K] flags; next_token(n) -> int gives the token after an
    accepted prefix of n (a callable, so a T > 0 rule draws only the one token it emits)."""
    n = longest_true_prefix(accept.cpu())
    return PositionwiseDecision(
        rule=rule, a=a.cpu(), accept=accept.cpu(), n=n, next_token=int(next_token(n)), t=t.cpu(),
        stat=stat.float().cpu(), raw_kind=raw_kind,
    )


class PositionwiseRule(Verifier):
    """A positionwise rule as a configured verifier: builds its Params once, then calls
    `decide(draft, scores, sampling)` (the subclass's adapter to its pure decide function)."""

    rule_name: ClassVar[str] = ""

    def __init__(self, **knobs: Any) -> None:
        self.params = self.Params.build(knobs)  # every range checked once, there

    def decide(self, draft: Draft, scores: TargetScores, sampling: SamplingParams) -> PositionwiseDecision:
        raise NotImplementedError

    def __call__(self, draft: Draft, scores: TargetScores, sampling: SamplingParams = GREEDY) -> Verdict:
        d = self.decide(draft, scores, sampling)
        return Verdict(num_accepted=d.n, next_token=d.next_token, record=d.record())
