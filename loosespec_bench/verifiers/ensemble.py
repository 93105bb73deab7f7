"""Static ensemble verification: transformers' `assistant_ensemble_weight` (DIVERSE, arXiv
2604.07622), as transformers 5.x implements it (generation/utils.py, assisted decoding and
_speculative_sampling).

Verify against the mixture v_i = w * p_i + (1 - w) * q_i of the target's p_i and the draft's q_i:
  greedy (T = 0): p_i, q_i the untempered softmaxes; accept while d_i == argmax v_i; at the first
      mismatch emit argmax v_i (not argmax p_i); the bonus is argmax p_{K+1}.
  sampling (T > 0): accept d_i when u_i <= v_i(d_i) / q_i(d_i) = 1 - w + w * p_i(d_i) / q_i(d_i);
      on rejection draw from norm(max(0, p - q)) (= norm(max(0, v - q))), falling back to p when
      that residual is numerically zero; the bonus is drawn from p_{K+1}.
w = 1 is lossless SPD; w -> 0 accepts every draft token. Without draft probabilities (prompt
lookup, MLA) q_i is one-hot(d_i), a case transformers refuses (docs/algorithms.md).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..params import knob, real
from ..sampling import GREEDY, SamplingParams, sample_token, tempered_probs
from ..step import Draft, TargetScores
from .base import VerifierParams
from .positionwise import PositionwiseDecision, PositionwiseRule, draft_q, finish, untempered


def ensemble_decide(
    draft_tokens: torch.Tensor,
    draft_probs: torch.Tensor | None,
    target_logits: torch.Tensor,
    params: EnsembleParams,
    sampling: SamplingParams = GREEDY,
) -> PositionwiseDecision:
    """One ensemble-verification step.

    draft_tokens: [K]; draft_probs: [K, vocab_draft] q_i (the drafter's own distribution: the
    untempered softmax at T = 0, the processed one at T > 0) or None (one-hot); target_logits:
    [K+1, vocab]. w: the ensemble weight in (0, 1]. top_k / top_p truncate p at T > 0.
    """
    w = float(params.weight)
    temperature, generator, top_k, top_p = sampling.temperature, sampling.generator, sampling.top_k, sampling.top_p
    K = draft_tokens.numel()
    V = target_logits.shape[-1]
    if temperature <= 0:
        p = untempered(target_logits)  # [K+1, vocab]
        d = draft_tokens.to(p.device)
        q = draft_q(d, draft_probs, V, p.device)  # [K, vocab]
        v = w * p[:K] + (1.0 - w) * q  # [K, vocab] the ensemble distribution
        t = p.argmax(dim=-1)  # [K+1]
        selected = v.argmax(dim=-1)  # [K] transformers' selected tokens at the draft positions
        idx = torch.arange(K, device=p.device)
        stat = v[idx, d] - v.max(dim=-1).values  # [K] <= 0; 0 where d_i is (tied for) argmax v_i
        return finish("ensemble", d == t[:K], d == selected, t[:K], stat,
                      lambda n: selected[n] if n < K else t[K])
    p = tempered_probs(target_logits, temperature, generator, top_k=top_k, top_p=top_p)  # [K+1, vocab]
    d = draft_tokens.to(p.device)
    q = draft_q(d, draft_probs, V, p.device)  # [K, vocab]
    idx = torch.arange(K, device=p.device)
    p_d, q_d = p[idx, d], q[idx, d]  # [K]
    u = torch.rand(K, generator=generator, device=p.device)  # [K] one draw for all K
    ratio = 1.0 - w + w * p_d / q_d  # [K] v(d)/q(d); q_d > 0 for a token the drafter sampled
    accept = u <= ratio  # transformers' test (<=)
    exact = u <= p_d / q_d  # the lossless test on the same uniforms (w = 1)

    def tail(n: int) -> int:
        if n == K:
            return sample_token(p[K], generator)
        residual = torch.clamp(p[n] - q[n], min=0.0)  # [vocab]
        total = residual.sum()
        # transformers' ensemble fallback: a numerically zero residual (p ~ q) draws from p.
        dist = p[n] if total <= torch.finfo(residual.dtype).tiny else residual / total
        return sample_token(dist, generator)

    return finish("ensemble", exact, accept, p[:K].argmax(dim=-1), ratio, tail, raw_kind="spec")


@dataclass(frozen=True)
class EnsembleParams(VerifierParams):
    """method=ensemble's knobs (conf/method/ensemble.yaml explains each)."""

    weight: float = knob(0.5, real(0, 1, lo_open=True), "the target's weight w in v = w p + (1 - w) q")


class Ensemble(PositionwiseRule):
    """method=ensemble: static ensemble verification (transformers' assistant_ensemble_weight)."""

    Params = EnsembleParams
    config_names = ("ensemble",)
    display_name = "Ensemble"
    needs_draft_probs = True  # q_i enters v_i at every temperature

    def decide(self, draft: Draft, scores: TargetScores, sampling: SamplingParams) -> PositionwiseDecision:
        return ensemble_decide(draft.tokens, draft.probs, scores.logits, self.params, sampling)
