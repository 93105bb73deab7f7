"""Threshold acceptance of SGLang (`--speculative-accept-threshold-single` and
`--speculative-accept-threshold-acc`; sgl-kernel speculative_sampling.cuh,
TreeSpeculativeSamplingTargetOnly).

SGLang's kernel walks the draft tree level by level; at a level it tries the children in order,
adding each child's target probability to prob_acc (reset after every acceptance), and accepts
the first child with
    coin <= prob_acc / threshold_acc   or   p(d) >= threshold_single,
coin being one uniform per level. It ignores the draft's probabilities ("target only"). On a
chain (one child per level) prob_acc is p_i(d_i): "accumulated" sums over siblings, not along
the draft. Here, on a chain (trees: each root-to-leaf path is a chain, verifiers/tree.py):
  sampling (T > 0), SGLang's rule: p_i the processed distribution; a_i = u_i <= p_i(d_i) /
      threshold_acc  or  p_i(d_i) >= threshold_single; the correction is drawn from p_n with
      d_n removed (SGLang's relu(p - draft) after the rejected child's mass is copied into the
      draft row), the bonus from p_{K+1}. The draft is greedy (SGLang's EAGLE drafts take
      the top tokens; the target-only test is lossless only for a deterministic draft).
  greedy (T = 0), a reading (SGLang verifies greedy requests by exact match, thresholds unused):
      a_i = d_i == argmax p_i  or  p_i(d_i) >= threshold_single on the untempered softmax;
      threshold_acc has no deterministic part and is unused. threshold_single >= 0.5 is
      lossless at T = 0 (a token with p >= 0.5 is the argmax, up to an exact tie at 0.5).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..params import DEFAULT, Shown, knob, real
from ..sampling import GREEDY, SamplingParams, exact_tail
from ..step import Draft, TargetScores
from .base import VerifierParams
from .positionwise import PositionwiseDecision, PositionwiseRule, finish, step_probs


def threshold_decide(
    draft_tokens: torch.Tensor,
    target_logits: torch.Tensor,
    params: ThresholdParams,
    sampling: SamplingParams = GREEDY,
) -> PositionwiseDecision:
    """One threshold-acceptance step. draft_tokens: [K]; target_logits: [K+1, vocab]."""
    threshold_single, threshold_acc = float(params.threshold_single), float(params.threshold_acc)
    generator, greedy = sampling.generator, sampling.greedy
    K = draft_tokens.numel()
    p, d, idx, t = step_probs(draft_tokens, target_logits, sampling)  # [K+1, vocab], [K], [K], [K+1]
    p_d = p[idx, d]  # [K]
    single = p_d >= threshold_single
    if greedy:
        match = d == t[:K]
        return finish("threshold", match, match | single, t[:K], p_d, lambda n: t[n])
    u = torch.rand(K, generator=generator, device=p.device)  # [K] SGLang's coin per level
    exact = u <= p_d  # target-only speculative sampling (both thresholds 1)
    accept = (u * threshold_acc <= p_d) | single  # coin <= p / threshold_acc, without dividing
    # The correction: p with d_n removed (q = None is one-hot(d_n) in sample_residual).
    return finish("threshold", exact, accept, t[:K], p_d, lambda n: exact_tail(p, None, d, n, generator),
                  raw_kind="spec")


@dataclass(frozen=True)
class ThresholdParams(VerifierParams):
    """method=threshold's knobs (conf/method/threshold.yaml explains each)."""

    threshold_single: float = knob(0.3, real(0, 1), "accept when the target's p(d) >= this")
    threshold_acc: float = knob(1.0, real(0, 1, lo_open=True), "T > 0: accept when u <= p(d) / this",
                                shown=Shown("threshold_acc", "acc", "SGLang threshold_acc", neutral=DEFAULT))


class Threshold(PositionwiseRule):
    """method=threshold: SGLang's threshold acceptance."""

    Params = ThresholdParams
    config_names = ("threshold",)
    display_name = "Threshold"

    def draft_temperature(self, temperature: float) -> float:
        """Greedy drafts at every temperature: SGLang's target-only test ignores q."""
        return 0.0

    def decide(self, draft: Draft, scores: TargetScores, sampling: SamplingParams) -> PositionwiseDecision:
        return threshold_decide(draft.tokens, scores.logits, self.params, sampling)
