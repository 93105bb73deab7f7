"""Typical acceptance (Cai et al., "Medusa", 2024; code FasterDecoding/Medusa, medusa/model/utils.py,
evaluate_posterior and get_typical_one_token).

Accept d_i when the target finds it typical enough:
    p_i(d_i) > min(epsilon, delta * exp(-H(p_i))),   H(p) = -sum_x p(x) log(p(x) + 1e-5)
(epsilon = Medusa's posterior_threshold, delta = its posterior_alpha; strict >, and the 1e-5
inside the log, as Medusa's code).
  sampling (T > 0), Medusa's rule: p_i = softmax(logits / T) (Medusa applies no top-k / top-p
      here; generation.top_k / top_p do truncate p in this harness); the token after the
      accepted prefix is drawn from p_n with every token below the same threshold removed
      (get_typical_one_token), the bonus likewise from p_{K+1}.
  greedy (T = 0), a reading (Medusa verifies greedily by exact match): the criterion on the
      untempered softmax, OR d_i == argmax p_i, so that the rule is never stricter than
      SPD; the correction is argmax p_n.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..params import DEFAULT, Shown, knob, real
from ..sampling import GREEDY, SamplingParams, sample_token
from ..step import Draft, TargetScores
from .base import VerifierParams
from .positionwise import PositionwiseDecision, PositionwiseRule, finish, step_probs

MEDUSA_LOG_EPS = 1e-5  # Medusa's entropy: -sum p log(p + 1e-5)


def typical_threshold(p: torch.Tensor, epsilon: float, delta: float) -> torch.Tensor:
    """min(epsilon, delta * exp(-H(p))) per row. p: [..., vocab] -> [...]."""
    H = -(p * torch.log(p + MEDUSA_LOG_EPS)).sum(-1)
    return torch.clamp(delta * torch.exp(-H), max=epsilon)


def typical_decide(
    draft_tokens: torch.Tensor,
    target_logits: torch.Tensor,
    params: TypicalParams,
    sampling: SamplingParams = GREEDY,
) -> PositionwiseDecision:
    """One typical-acceptance step. draft_tokens: [K]; target_logits: [K+1, vocab]."""
    epsilon, delta = float(params.epsilon), float(params.delta)
    generator, greedy = sampling.generator, sampling.greedy
    K = draft_tokens.numel()
    p, d, idx, t = step_probs(draft_tokens, target_logits, sampling)  # [K+1, vocab], [K], [K], [K+1]
    thr = typical_threshold(p, epsilon, delta)  # [K+1]
    p_d = p[idx, d]  # [K]
    typical = p_d > thr[:K]
    match = d == t[:K]
    if greedy:
        return finish("typical", match, typical | match, t[:K], p_d, lambda n: t[n])

    def tail(n: int) -> int:
        # get_typical_one_token: drop the tokens below the threshold (the argmax always stays:
        # max p >= exp(-H) >= delta exp(-H) for delta <= 1, and it is kept explicitly otherwise).
        row = torch.where(p[n] < thr[n], torch.zeros_like(p[n]), p[n])
        row[t[n]] = p[n, t[n]]
        return sample_token(row / row.sum(), generator)

    return finish("typical", match, typical, t[:K], p_d, tail)


@dataclass(frozen=True)
class TypicalParams(VerifierParams):
    """method=typical's knobs (conf/method/typical.yaml explains each)."""

    epsilon: float = knob(0.09, real(0, lo_open=True), "the hard threshold epsilon (Medusa's posterior_threshold)")
    delta: float = knob(0.3, real(0, lo_open=True), "the entropy-scaled threshold delta (Medusa's posterior_alpha)",
                        shown=Shown("typical_delta", "δ", "typical acceptance δ", neutral=DEFAULT))


class Typical(PositionwiseRule):
    """method=typical: Medusa's typical acceptance."""

    Params = TypicalParams
    config_names = ("typical",)
    display_name = "Typical acceptance"

    def decide(self, draft: Draft, scores: TargetScores, sampling: SamplingParams) -> PositionwiseDecision:
        return typical_decide(draft.tokens, scores.logits, self.params, sampling)
