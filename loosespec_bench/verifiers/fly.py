"""FLy: Training-Free Loosely Speculative Decoding (arXiv 2511.22972, code AMD-AGI/FLy).

FLy accepts a draft token d_i that differs from the target's token t_i when
  - the target was unsure there (its entropy is at least theta), and
  - the target went on to agree with the draft right after it (a "deferral window"): since the
    target's later distributions were computed on d_i, W-1 (code) or W (paper, vLLM) exact
    matches after the mismatch show that d_i did not derail it.
A deferred position keeps the DRAFT token. A second mismatch inside the window breaks the
pattern, so the first mismatch fails after all ("retroactive rejection").

Three readings, all offered (docs/algorithms.md section 4):
  mode="code"  (default) what the released code computes (fly/models/FLy.py, generate_chunks):
      H_i   = -sum_{top-3 of p_i} p log p        (full-vocab softmax, 3 largest, not renormalised)
      deferred_i  iff  a_i..a_{i+W-1} == [False, True * (W-1)], K >= W, i not in the last W
      a'_i  = a_i OR deferred_i
      a''_i = a'_i AND NOT (H_i < theta AND NOT a_i)           (entropy gate)
      theta <= 0.01 switches the gate off (the code keeps entropy_thre only when > 1e-2);
      theta_switch_off=False keeps the gate at every theta.
  mode="paper" Eq. 5 as the paper states it:
      h_j   = -sum_v p log p / log|V|              (normalised full-vocab entropy)
      accept the mismatch at j iff h_j >= theta, a_{j+1..j+W} all true, j + W <= K.
  mode="vllm"  vLLM's FLy (vllm/v1/spec_decode/fly.py): the code's top-3 entropy, computed on
      the processed distribution (temperature, top-k, top-p) at T > 0, with the paper's window
      (defer j iff H_j >= theta, a_{j+1..j+W} all true, j + W < K, 0-based); no theta switch-off.
      At T > 0 the raw flags are the speculative-sampling test u < p/q (not two samples), a
      deferral also needs p(d_j) > 0 and q(d_j) > 0, and the correction is the residual draw.
Then emit the longest prefix with a'' true and t at the first rejected position (or the bonus
token when all K pass). Ablation no_window: every mismatch that passes the entropy gate is
accepted (code: a'' = gate; paper and vllm: a'' = a OR h >= theta).

Sampling (T > 0) in modes code and paper, as the released code: two samples from p_i (the
processed distribution, with generation.top_k / top_p when set); a_i = either equals d_i; the
correction is the first sample; the bonus is drawn from p_{K+1}. The entropies of these two
modes are computed on the untempered logits at every temperature, as the released code does.

What the rule asks of the loop (verifiers.base.Verifier), official defaults first:
  near_limit="full_k"     near max_new_tokens every step still drafts K and the loop cuts the
                          committed chunk at the limit (the released decoder drafts K and stops
                          only after the chunk), so the last-W zone sits where it does far from
                          the limit; "shrink" drafts at most the remaining budget minus one.
  draft_sampling=False    the draft is greedy at every temperature (the released drafter
                          always calls sample_with_temperature(..., 0)); True samples it at T.

Indices in code are 0-based (position i here is d_{i+1} in the paper's notation).
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import Any, ClassVar, Mapping

import torch

from ..errors import ConfigError
from ..measure.costmodel import ANY_PAIR
from ..params import DEFAULT, Shown, boolean, choice, integer, knob, real
from ..sampling import GREEDY, SamplingParams, accept_exact, exact_tail, sample_token, tempered_probs
from ..step import Draft, TargetScores, Verdict, longest_true_prefix
from .base import LooseDecision, Verifier, VerifierParams

log = logging.getLogger(__name__)

MODES = ("code", "paper", "vllm")
NEAR_LIMIT = ("full_k", "shrink")
# The released code keeps the threshold only when it exceeds 1e-2 (FLy.py, SPDGenerate.__init__:
# `entropy_thre if entropy_thre > 1e-2 else None`) and skips the gate when it is None.
GATE_OFF_THETA = 0.01


def topk_entropy(logits: torch.Tensor, top_k: int) -> torch.Tensor:
    """H_i = -sum over the top_k largest p_i(v) of p log p, p = softmax over the whole vocabulary.

    logits: [K, vocab]. Returns [K] float32. Not renormalised over the top_k and not divided by
    log|V| (as the released code): the maximum is log(top_k), reached when the top_k are equal
    and hold all the mass.
    """
    log_p = torch.log_softmax(logits.float(), dim=-1)  # [K, vocab]
    top_log_p = log_p.topk(min(top_k, log_p.shape[-1]), dim=-1).values  # [K, top_k]
    return -(top_log_p.exp() * top_log_p).sum(dim=-1)  # [K]


def normalized_entropy(logits: torch.Tensor) -> torch.Tensor:
    """h_j = -sum_v p log p / log|V| over the whole vocabulary, in [0, 1]. logits: [K, vocab] -> [K]."""
    log_p = torch.log_softmax(logits.float(), dim=-1)  # [K, vocab]
    # xlogy-style product: p = 0 entries (underflow) contribute 0, not 0 * -inf = nan.
    plogp = torch.where(log_p.isfinite(), log_p.exp() * log_p, torch.zeros_like(log_p))  # [K, vocab]
    return -plogp.sum(dim=-1) / math.log(logits.shape[-1])


def deferral_code(a: torch.Tensor, window: int) -> torch.Tensor:
    """Released-code deferral: position i is deferred-accepted when a_i..a_{i+W-1} equal
    [False, True, ..., True], only when K >= W, and never in the last W positions.

    a: [K] bool raw flags. Returns deferred [K] bool (True only where a is False).
    """
    K = a.numel()
    deferred = torch.zeros_like(a)  # [K]
    if K < window:  # the code skips the window step entirely when the draft is shorter than W
        return deferred
    pattern = torch.ones(window, dtype=torch.bool, device=a.device)  # [W] = [False, True * (W-1)]
    pattern[0] = False
    windows = a.unfold(0, window, 1)  # [K-W+1, W], window j covers a_j..a_{j+W-1}
    deferred[: K - window + 1] = (windows == pattern).all(dim=-1)
    # The code then restores a' = a on the last W positions: the window "cannot fill" there.
    # This also undoes the match at j = K-W, whose window reaches exactly the last draft token.
    deferred[K - window :] = False
    return deferred


def deferral_paper(a: torch.Tensor, window: int) -> torch.Tensor:
    """Paper (Eq. 5) deferral window, without the entropy part: the mismatch at j is followed
    by W raw matches a_{j+1..j+W}, all inside the draft (j + W <= K, 1-based).

    a: [K] bool. Returns [K] bool (True only where a is False).
    """
    K = a.numel()
    deferred = torch.zeros_like(a)  # [K]
    # 0-based j needs flags j+1..j+W to exist: j + W <= K - 1.
    last = K - window  # number of positions j = 0..K-W-1 that have W flags after them
    if last <= 0:
        return deferred
    following = a[1:].unfold(0, window, 1)[:last]  # [K-W, W], row j = a_{j+1..j+W}
    deferred[:last] = ~a[:last] & following.all(dim=-1)
    return deferred


@dataclass(frozen=True)
class FLyParams(VerifierParams):
    """method=fly's knobs (conf/method/fly.yaml explains each), each with how reports show it."""

    theta: float = knob(0.3, real(0), "the entropy threshold", shown=Shown("theta", "θ", "entropy threshold θ"))
    window: int = knob(6, integer(1), "the deferral window W", shown=Shown("W", "W", "deferral window W (tokens)"))
    top_k: int = knob(3, integer(1), "probabilities in the entropy",
                      shown=Shown("entropy_top_k", "top", "probabilities in FLy's entropy", neutral=DEFAULT))
    mode: str = knob("code", choice(*MODES), shown=Shown("mode", "mode", "FLy entropy mode", neutral=DEFAULT))
    no_window: bool = knob(False, boolean, shown=Shown("no_window", "no window", flag="no window", neutral=DEFAULT))
    theta_switch_off: bool = knob(True, boolean, shown=Shown("theta_switch_off", "θ switch-off", flag="θ switch-off", neutral=DEFAULT))
    near_limit: str = knob("full_k", choice(*NEAR_LIMIT), shown=Shown("near_limit", "near limit", neutral=DEFAULT))
    draft_sampling: bool = knob(False, boolean, shown=Shown("draft_sampling", "sampled draft", flag="sampled draft", neutral=DEFAULT))


@dataclass
class FLyDecision(LooseDecision):
    """Everything FLy decided for one step (0-based positions)."""

    a: torch.Tensor  # [K] bool raw exact-match flags (at T > 0: either of two samples equals d_i)
    t: torch.Tensor  # [K+1] int64 target tokens (argmax, or the first sample at T > 0); t[K] = bonus
    H: torch.Tensor  # [K] float32 entropy the gate uses (code: top-k H_i; paper: normalised h_j)
    deferred: torch.Tensor  # [K] bool mismatches the deferral window would accept
    a_final: torch.Tensor  # [K] bool a'' (code) / the paper's acceptance flags
    n: int  # accepted prefix length: keep d_1..d_n
    next_token: int  # t_{n+1}: the correction at the first rejected position, or the bonus

    def record(self) -> dict[str, Any]:
        """JSON-ready per-step record (see metrics.summarize for the keys it reads)."""
        miss = self.mismatches
        return {
            "rule": "fly",
            "raw_match": self.a.tolist(),
            "target_tokens": self.t[:-1].tolist(),
            "mismatch_positions": miss,
            "mismatch_entropy": [round(float(self.H[i]), 6) for i in miss],
            "deferred": self.deferred.nonzero(as_tuple=True)[0].tolist(),
            "loose_accepted": self.loose,
        }


def _target_tokens(
    draft_tokens: torch.Tensor, target_logits: torch.Tensor, sampling: SamplingParams
) -> tuple[torch.Tensor, torch.Tensor]:
    """(a [K] bool, t [K+1] int64): greedy argmax, or the released code's two-sample test."""
    K = draft_tokens.numel()
    if sampling.greedy:
        t = target_logits.argmax(dim=-1)  # [K+1]
        return draft_tokens == t[:K], t
    generator = sampling.generator
    # [K+1, vocab] processed p (T, top-k, top-p) on the generator's device
    p = tempered_probs(target_logits, sampling.temperature, generator, top_k=sampling.top_k, top_p=sampling.top_p)
    draft_tokens = draft_tokens.to(p.device)
    # Two independent samples per draft position; a_i holds when either one equals d_i, which
    # raises the match rate over one sample (the released code's choice for T > 0).
    samples = torch.multinomial(p[:K], 2, replacement=True, generator=generator)  # [K, 2]
    a = (samples == draft_tokens.unsqueeze(-1)).any(dim=-1)  # [K]
    bonus = sample_token(p[K], generator)  # t_{K+1} ~ p_{K+1}
    t = torch.cat([samples[:, 0], samples.new_tensor([bonus])])  # [K+1]: the correction is the first sample
    return a, t


def _decide_vllm(
    draft_tokens: torch.Tensor,
    draft_probs: torch.Tensor | None,
    target_logits: torch.Tensor,
    params: FLyParams,
    sampling: SamplingParams,
) -> FLyDecision:
    """mode="vllm": vLLM's FLy (greedy and random pre-passes of vllm/v1/spec_decode/fly.py)."""
    K = draft_tokens.numel()
    theta, window, top_k, no_window = float(params.theta), params.window, params.top_k, params.no_window
    temperature, generator = sampling.temperature, sampling.generator
    if temperature <= 0:
        t = target_logits.argmax(dim=-1)  # [K+1]
        a = draft_tokens == t[:K]  # [K] raw flags
        H = topk_entropy(target_logits[:K], top_k)  # [K] greedy: the unprocessed logits
        possible = torch.ones_like(a)  # every raw logit is finite: d_j is never masked out
    else:
        p = tempered_probs(target_logits, temperature, generator, top_k=sampling.top_k, top_p=sampling.top_p)  # [K+1, vocab]
        d = draft_tokens.to(p.device)
        q = None if draft_probs is None else draft_probs.float().to(p.device)  # [K, vocab_draft]
        a = accept_exact(p, q, d, generator)  # [K] the native test u_j < p_j(d_j) / q_j(d_j)
        # vLLM's entropy reads the processed probabilities (p = 0 terms contribute 0).
        top_p3 = p[:K].topk(min(top_k, p.shape[-1]), dim=-1).values  # [K, top_k]
        H = -torch.where(top_p3 > 0, top_p3 * top_p3.clamp_min(1e-30).log(), torch.zeros_like(top_p3)).sum(-1)
        idx = torch.arange(K, device=p.device)
        q_d = torch.ones(K, device=p.device) if q is None else q[idx, d]  # [K]
        possible = (p[idx, d] > 0) & (q_d > 0)  # a deferred token must be one p and q can emit
        t = p.argmax(dim=-1)  # [K+1] recorded only; the emitted token is drawn below
    unsure = (H >= theta) & possible.to(H.device)  # [K]
    a = a.to(H.device)
    deferred = deferral_paper(a, window)  # [K] W following raw flags, j + W < K (0-based)
    a_final = a | (unsure if no_window else deferred & unsure)
    n = longest_true_prefix(a_final)
    # The native tail at T > 0: the bonus, or the correction norm(max(0, p_n - q_n)).
    nxt = int(t[n]) if temperature <= 0 else exact_tail(p, q, d, n, generator)
    return FLyDecision(a=a, t=t, H=H, deferred=deferred, a_final=a_final, n=n, next_token=nxt)


def fly_decide(
    draft_tokens: torch.Tensor,
    target_logits: torch.Tensor,
    params: FLyParams,
    sampling: SamplingParams = GREEDY,
    draft_probs: torch.Tensor | None = None,
) -> FLyDecision:
    """The FLy decision with its intermediate flags.

    draft_tokens: [K] int64 d_1..d_K; target_logits: [K+1, vocab] (row i predicts d_{i+1}, row K
    the bonus). params: the knobs (theta, window W, top_k entries in H_i, mode, no_window,
    theta_switch_off; FLyParams declares each). sampling: temperature, generation.top_k / top_p
    for the T > 0 distributions and the generator. draft_probs: [K, vocab] q_i or None
    (one-hot), read only by mode="vllm" at T > 0.
    """
    K = draft_tokens.numel()
    draft_tokens = draft_tokens.to(target_logits.device)  # the loop keeps tokens on the host
    if params.mode == "vllm":
        return _decide_vllm(draft_tokens, draft_probs, target_logits, params, sampling)
    theta, window, no_window = float(params.theta), params.window, params.no_window
    a, t = _target_tokens(draft_tokens, target_logits, sampling)  # [K], [K+1]
    a = a.to(target_logits.device)
    if params.mode == "code":
        H = topk_entropy(target_logits[:K], params.top_k)  # [K]
        if params.theta_switch_off and theta <= GATE_OFF_THETA:
            gate = torch.ones_like(a)  # the released code drops the gate for theta <= 0.01
        else:
            # Entropy gate: a mismatch where the target was confident (H_i < theta) is never loose.
            gate = ~((H < theta) & ~a)  # [K]
        deferred = deferral_code(a, window)  # [K]
        # (With the gate off the released code's no-window ablation reads an unset mask and
        # fails; here it accepts every mismatch, which is what theta = 0 would do.)
        a_final = gate if no_window else (a | deferred) & gate
    else:
        H = normalized_entropy(target_logits[:K])  # [K] h_j in [0, 1]
        unsure = H >= theta  # [K]
        deferred = deferral_paper(a, window)  # [K]
        a_final = a | (unsure if no_window else deferred & unsure)
    n = longest_true_prefix(a_final)
    return FLyDecision(a=a, t=t, H=H, deferred=deferred, a_final=a_final, n=n, next_token=int(t[n]))


class FLy(Verifier):
    """method=fly as a configured verifier. Defaults are the released 70B settings and the
    released code's behaviour (module docstring); each difference is an option."""

    Params = FLyParams
    config_names = ("fly",)
    display_name = "FLy"
    # FLy's reported speedups over the target alone, 2.81x at 8B -> 70B and 5.07x at 8B -> 405B
    # (docs/algorithms.md section 8), rounded down: the planner's assumption (costmodel.assumed_speedup).
    assumed_speedup = {ANY_PAIR: 2.8, "llama31-8b-405b": 5.0}
    # The knobs the report's FLy tables and figures read (the papers' theta and W sweeps, the
    # entropy figure's gate, the no-window ablation): named here so that no other module spells
    # them; their index columns, labels and axes come from schema (report.labels.fly_column).
    THRESHOLD: ClassVar[str] = "theta"
    WINDOW: ClassVar[str] = "window"
    NO_WINDOW: ClassVar[str] = "no_window"

    @classmethod
    def check_draft_length(cls, knobs: Mapping[str, Any], k: int) -> None:
        """K <= W: the deferral window never fills, so FLy decides as SPD does (unless the
        no-window ablation asks for exactly that)."""
        w = knobs.get("window")
        if not knobs.get("no_window", False) and isinstance(w, int) and not isinstance(w, bool) and k <= w:
            raise ConfigError(
                f"drafter.k={k} <= method.window={w}: the deferral window never fills and FLy equals SPD; "
                "raise K or set method.no_window=true for the no-window ablation"
            )

    def __init__(self, **knobs: Any) -> None:
        self.params = FLyParams.build(knobs)  # every range checked once, there
        self.drafts_full_k_near_limit = self.params.near_limit == "full_k"
        self._checked_first = False

    def draft_temperature(self, temperature: float) -> float:
        """Greedy drafts by default, as the released drafter; draft_sampling=True samples at T."""
        return temperature if self.params.draft_sampling else 0.0

    def __call__(
        self,
        draft: Draft,
        scores: TargetScores,
        sampling: SamplingParams = GREEDY,
    ) -> Verdict:
        if not self._checked_first:
            # Said once, on the first draft: checks.validate refuses K <= W for method=fly, but
            # the class can be built directly, and a drafter may propose fewer than K tokens.
            self._checked_first = True
            window = self.params.window
            if 0 < draft.k <= window and not self.params.no_window:
                log.warning("FLy: the first draft has K=%d <= W=%d tokens; deferral needs K > W "
                            "(drafter.k > method.window), otherwise FLy rejects like SPD", draft.k, window)
        d = fly_decide(draft.tokens, scores.logits, self.params, sampling, draft_probs=draft.probs)
        return Verdict(num_accepted=d.n, next_token=d.next_token, record=d.record())
