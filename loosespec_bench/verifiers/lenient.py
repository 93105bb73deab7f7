"""Lenient speculative sampling (Leviathan et al., "Fast Inference from Transformers via
Speculative Decoding", ICML 2023, appendix on lenience l).

  sampling (T > 0): accept d_i with probability min(1, p_i(d_i) / (l * q_i(d_i))), l in (0, 1]
      (l = 1 is lossless speculative sampling); the correction is the residual draw
      norm(max(0, p_n - q_n)) and the bonus a draw from p_{K+1}. With acceptance mass
      min(q, p / l) per token, max(0, p - min(q, p / l)) = max(0, p - q) for l <= 1, so the
      standard residual is the one that completes the lenient acceptance.
  greedy (T = 0), a reading (the paper defines lenience for sampling): accept d_i when the
      sampling test would accept it for every u, p_i(d_i) >= l * q_i(d_i) on the untempered
      softmaxes, OR d_i == argmax p_i; the correction is argmax p_n. Without draft
      probabilities q_i(d_i) = 1, so the rule is p_i(d_i) >= l.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..params import knob, real
from ..sampling import GREEDY, SamplingParams, exact_tail
from ..step import Draft, TargetScores
from .base import VerifierParams
from .positionwise import PositionwiseDecision, PositionwiseRule, draft_q, finish, step_probs


def lenient_decide(
    draft_tokens: torch.Tensor,
    draft_probs: torch.Tensor | None,
    target_logits: torch.Tensor,
    params: LenientParams,
    sampling: SamplingParams = GREEDY,
) -> PositionwiseDecision:
    """One lenient step. draft_tokens: [K]; draft_probs: [K, vocab_draft] or None (one-hot);
    target_logits: [K+1, vocab]; l in (0, 1]."""
    l = float(params.lenience)  # noqa: E741 (the paper's symbol)
    generator, greedy = sampling.generator, sampling.greedy
    K = draft_tokens.numel()
    p, d, idx, t = step_probs(draft_tokens, target_logits, sampling)  # [K+1, vocab], [K], [K], [K+1]
    q = draft_q(d, draft_probs, p.shape[-1], p.device)  # [K, vocab]
    p_d, q_d = p[idx, d], q[idx, d]  # [K]
    ratio = p_d / (l * q_d)  # [K] the acceptance probability before min(1, .)
    if greedy:
        match = d == t[:K]
        return finish("lenient", match, (p_d >= l * q_d) | match, t[:K], ratio, lambda n: t[n])
    u = torch.rand(K, generator=generator, device=p.device)  # [K] one draw for all K
    accept = u * l * q_d < p_d  # u < p / (l q) without dividing by a possibly tiny q
    exact = u * q_d < p_d  # the lossless test on the same uniforms (l = 1)
    return finish("lenient", exact, accept, t[:K], ratio, lambda n: exact_tail(p, draft_probs, d, n, generator),
                  raw_kind="spec")


@dataclass(frozen=True)
class LenientParams(VerifierParams):
    """method=lenient's knobs (conf/method/lenient.yaml explains each)."""

    lenience: float = knob(0.5, real(0, 1, lo_open=True), "the lenience l: accept with probability min(1, p / (l q))")


class Lenient(PositionwiseRule):
    """method=lenient: speculative sampling with lenience l."""

    Params = LenientParams
    config_names = ("lenient",)
    display_name = "Lenient"
    needs_draft_probs = True  # q_i(d_i) enters the test at every temperature

    def decide(self, draft: Draft, scores: TargetScores, sampling: SamplingParams) -> PositionwiseDecision:
        return lenient_decide(draft.tokens, draft.probs, scores.logits, self.params, sampling)
