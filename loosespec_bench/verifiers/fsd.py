"""Fuzzy speculative decoding (FSD; Holsman et al., "Fuzzy Speculative Decoding for a Tunable
Accuracy-Runtime Tradeoff", ACL Findings 2025; code maxholsman/fsd, fsd_utils.py,
_speculative_backoff_sampling).

Accept draft position i while a divergence D(p_i, q_i) between the target's and the draft's
next-token distributions is at most the threshold T (div_threshold):
  kl           KL(q_i || p_i) = sum_x q log(q / p)        (the reference's kl_div: F.kl_div(log p, q))
  kl_reversed  KL(p_i || q_i)                              (the reference's kl_div_reversed)
  js           JS(p_i, q_i) = 1/2 KL(p || m) + 1/2 KL(q || m), m = (p + q) / 2, natural log, in
               [0, log 2]: the textbook Jensen-Shannon divergence the paper names
  js_code      1/2 KL(m || p) + 1/2 KL(m || q): what the reference's js_div (the README's default)
               computes, F.kl_div(log p, m) being KL(m || p); unbounded (infinite where p or q
               is 0 and m is not)
  tv           1/2 sum_x |p - q|, in [0, 1]               (tv_div)
support="top_k" (top_k_*_div): the divergence over the target's support_k most likely tokens plus
one bucket holding the rest of the mass of each distribution (the reference's fixed k = 50);
support="top_p": over the target's nucleus (the smallest set of most likely tokens whose mass
reaches support_p, both distributions renormalised on it; the reference's top_p_* branch does
not run as published, docs/algorithms.md). The divergence is computed on the untempered
softmaxes, as the reference does by default; acceptance does NOT require d_i == argmax p_i (a
draft token the target agrees with can be rejected when the distributions differ), unless
accept_matches=true. The token after the accepted prefix is drawn from p_n (no residual): the
argmax of p_n at T = 0, a draw from the processed p_n at T > 0.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..params import DEFAULT, Shown, boolean, choice, integer, knob, real
from ..sampling import GREEDY, SamplingParams, sample_token, tempered_probs
from ..step import Draft, TargetScores
from .base import VerifierParams
from .positionwise import PositionwiseDecision, PositionwiseRule, draft_q, finish, untempered

DIVERGENCES = ("kl", "kl_reversed", "js", "js_code", "tv")
SUPPORTS = ("full", "top_k", "top_p")


def _kl(P: torch.Tensor, Q: torch.Tensor) -> torch.Tensor:
    """KL(P || Q) over the last dim, natural log; 0 log 0 = 0, P > 0 = Q gives inf. [..., n] -> [...]."""
    return (torch.xlogy(P, P) - torch.xlogy(P, Q)).sum(-1)


def divergence(p: torch.Tensor, q: torch.Tensor, kind: str) -> torch.Tensor:
    """D(p, q) of the named kind over the last dim. p, q: [..., n] distributions -> [...]."""
    if kind == "kl":
        return _kl(q, p)
    if kind == "kl_reversed":
        return _kl(p, q)
    if kind == "js":
        m = 0.5 * (p + q)
        return 0.5 * _kl(p, m) + 0.5 * _kl(q, m)
    if kind == "js_code":
        m = 0.5 * (p + q)
        return 0.5 * _kl(m, p) + 0.5 * _kl(m, q)
    if kind == "tv":
        return 0.5 * (p - q).abs().sum(-1)
    raise ValueError(f"unknown divergence {kind!r}; one of {', '.join(DIVERGENCES)}")


def restrict_support(p: torch.Tensor, q: torch.Tensor, support: str, k: int, top_p: float) -> tuple[torch.Tensor, torch.Tensor]:
    """(p', q') on the support the divergence reads. p, q: [K, vocab].

    full: unchanged. top_k: [K, k+1], the target's k most likely tokens then one bucket with the
    rest of each distribution's mass. top_p: [K, vocab], both zeroed outside the target's nucleus
    and renormalised there (q' = 0 where q has no mass on the nucleus: the divergence is then maximal).
    """
    if support == "full":
        return p, q
    if support == "top_k":
        k = min(k, p.shape[-1])
        p_top, idx = p.topk(k, dim=-1)  # [K, k]
        q_top = q.gather(-1, idx)  # [K, k]
        p_rest = (1.0 - p_top.sum(-1, keepdim=True)).clamp_min(0.0)  # [K, 1]
        q_rest = (1.0 - q_top.sum(-1, keepdim=True)).clamp_min(0.0)
        return torch.cat([p_top, p_rest], -1), torch.cat([q_top, q_rest], -1)
    sorted_p, order = p.sort(dim=-1, descending=True)  # [K, vocab]
    before = sorted_p.cumsum(-1) - sorted_p  # mass of the strictly more likely tokens
    keep_sorted = before < top_p  # the first token always stays; stop once the mass reaches top_p
    keep = keep_sorted.scatter(-1, order, keep_sorted)  # [K, vocab] back to vocabulary order
    p_n = torch.where(keep, p, torch.zeros_like(p))
    q_n = torch.where(keep, q, torch.zeros_like(q))
    p_n = p_n / p_n.sum(-1, keepdim=True)
    q_sum = q_n.sum(-1, keepdim=True)
    q_n = torch.where(q_sum > 0, q_n / q_sum.clamp_min(torch.finfo(q.dtype).tiny), q_n)
    return p_n, q_n


def fsd_decide(
    draft_tokens: torch.Tensor,
    draft_probs: torch.Tensor | None,
    target_logits: torch.Tensor,
    params: FSDParams,
    sampling: SamplingParams = GREEDY,
) -> PositionwiseDecision:
    """One FSD step: a_i = D(p_i, q_i) <= T on the untempered softmaxes (module docstring).

    draft_tokens: [K]; draft_probs: [K, vocab_draft] q_i or None (one-hot); target_logits: [K+1, vocab].
    At T > 0 draft_probs is the drafter's processed distribution (the one it sampled from), so
    the divergence reads q at the run's temperature (docs/algorithms.md, departures).
    """
    div_threshold, div_type, accept_matches = float(params.div_threshold), params.div_type, params.accept_matches
    support, support_k, support_p = params.support, params.support_k, float(params.support_p)
    temperature, generator, top_k, top_p = sampling.temperature, sampling.generator, sampling.top_k, sampling.top_p
    K = draft_tokens.numel()
    V = target_logits.shape[-1]
    p = untempered(target_logits)  # [K+1, vocab]
    d = draft_tokens.to(p.device)
    q = draft_q(d, draft_probs, V, p.device)  # [K, vocab]
    t = p.argmax(dim=-1)  # [K+1]
    p_s, q_s = restrict_support(p[:K], q, support, support_k, support_p)
    div = divergence(p_s, q_s, div_type)  # [K]
    match = d == t[:K]
    accept = div <= div_threshold  # the reference's test (<=)
    if accept_matches:
        accept = accept | match
    if temperature <= 0:
        return finish("fsd", match, accept, t[:K], div, lambda n: t[n])
    p_T = tempered_probs(target_logits, temperature, generator, top_k=top_k, top_p=top_p)  # [K+1, vocab]
    return finish("fsd", match, accept, t[:K], div, lambda n: sample_token(p_T[n], generator))


@dataclass(frozen=True)
class FSDParams(VerifierParams):
    """method=fsd's knobs (conf/method/fsd.yaml explains each)."""

    div_type: str = knob("js_code", choice(*DIVERGENCES), shown=Shown("div_type", "D", "FSD divergence", neutral=DEFAULT))
    div_threshold: float = knob(0.4, real(0), "the divergence threshold T (accept while D <= T)")
    support: str = knob("full", choice(*SUPPORTS), shown=Shown("support", "support", "FSD support", neutral=DEFAULT))
    support_k: int = knob(50, integer(1), "tokens of the target's top-k support", shown=Shown("support_k", "support k", neutral=DEFAULT))
    support_p: float = knob(0.9, real(0, 1, lo_open=True), "mass of the target's top-p support",
                            shown=Shown("support_p", "support p", neutral=DEFAULT))
    accept_matches: bool = knob(False, boolean, shown=Shown("accept_matches", "matches pass", flag="matches pass", neutral=DEFAULT))


class FSD(PositionwiseRule):
    """method=fsd: fuzzy speculative decoding (divergence threshold)."""

    Params = FSDParams
    config_names = ("fsd",)
    display_name = "FSD"
    needs_draft_probs = True  # the divergence reads q_i at every temperature

    def decide(self, draft: Draft, scores: TargetScores, sampling: SamplingParams) -> PositionwiseDecision:
        return fsd_decide(draft.tokens, draft.probs, scores.logits, self.params, sampling)

