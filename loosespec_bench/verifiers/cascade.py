"""Min-p acceptance of speculative cascades (Narasimhan et al., "Faster Cascades via Speculative
Decoding", ICLR 2025), in the reading of issue 44: accept a draft token that lies in the target's
min-p set, p_i(d_i) >= alpha * max_x p_i(x).

  greedy (T = 0): p_i the untempered softmax; a_i = p_i(d_i) >= alpha * max p_i; the correction
      is argmax p_n, the bonus argmax p_{K+1}. alpha = 1 accepts exactly the tokens tied for
      the argmax (SPD accepts only the first of them); alpha -> 0 accepts every token p allows.
  sampling (T > 0): p_i the processed distribution (temperature, top-k, top-p); the speculative
      sampling test u_i < p_i(d_i) / q_i(d_i) accepts first, the min-p set is the fallback for
      the tokens it rejects (so the rule is never stricter than lossless SPD); the correction is
      the residual draw norm(max(0, p_n - q_n)), the bonus a draw from p_{K+1}.
The paper's cascade deferral rules (which compare the two models' confidences) are not this
rule; docs/algorithms.md says where the reading comes from and what it leaves out.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..params import knob, real
from ..sampling import GREEDY, SamplingParams, accept_exact, exact_tail
from ..step import Draft, TargetScores
from .base import VerifierParams
from .positionwise import PositionwiseDecision, PositionwiseRule, finish, step_probs


def cascade_decide(
    draft_tokens: torch.Tensor,
    draft_probs: torch.Tensor | None,
    target_logits: torch.Tensor,
    params: CascadeParams,
    sampling: SamplingParams = GREEDY,
) -> PositionwiseDecision:
    """One min-p cascade step. draft_tokens: [K]; draft_probs: [K, vocab_draft] or None
    (read at T > 0 only, by the exact test); target_logits: [K+1, vocab]; alpha in (0, 1]."""
    alpha = float(params.alpha)
    generator, greedy = sampling.generator, sampling.greedy
    K = draft_tokens.numel()
    p, d, idx, t = step_probs(draft_tokens, target_logits, sampling)  # [K+1, vocab], [K], [K], [K+1]
    ratio = p[idx, d] / p[:K].max(dim=-1).values  # [K] p_i(d_i) / max p_i, in [0, 1]
    in_min_p = p[idx, d] >= alpha * p[:K].max(dim=-1).values  # [K]
    if greedy:
        return finish("cascade", d == t[:K], in_min_p, t[:K], ratio, lambda n: t[n])
    exact = accept_exact(p, draft_probs, d, generator)  # [K]
    return finish("cascade", exact, exact | in_min_p, t[:K], ratio,
                  lambda n: exact_tail(p, draft_probs, d, n, generator), raw_kind="spec")


@dataclass(frozen=True)
class CascadeParams(VerifierParams):
    """method=cascade's knobs (conf/method/cascade.yaml explains each)."""

    alpha: float = knob(0.5, real(0, 1, lo_open=True), "the min-p fraction: accept when p(d) >= alpha * max p")


class Cascade(PositionwiseRule):
    """method=cascade: accept draft tokens in the target's min-p set."""

    Params = CascadeParams
    config_names = ("cascade",)
    display_name = "Cascade"

    def decide(self, draft: Draft, scores: TargetScores, sampling: SamplingParams) -> PositionwiseDecision:
        return cascade_decide(draft.tokens, draft.probs, scores.logits, self.params, sampling)
