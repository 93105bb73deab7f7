"""Approximate speculative decoding with a regret budget (ASD; Feng et al., arXiv 2608.03447;
reference code Kissmetothemoon/ASD, src/asd/budget.py `choose_prefix`, read at commit c9d6b68).

Greedy verification that may keep a draft token the target would not have chosen, while a
per-request budget of "regret" lasts. For draft token d_i and the target's logits z_i:

    r_i = max_v z_i(v) - z_i(d_i)          (0 for the target's argmax; logits, so the softmax's
                                            normaliser cancels: the same on log-probabilities)
    q_i = K - i                            (the suffix value, 0-based i: the tokens a kept
                                            position lets the step keep after it)

Walking the draft from i = 0, a matching token (d_i == argmax z_i) passes; a mismatch passes
only while all three hold for the prefix so far:
  1. the request's cumulative regret, this block's mismatches included, is <= the budget B;
  2. r_i / q_i <= g (the gate: a costly mismatch must buy a long suffix);
  3. the block keeps at most m mismatches (the cap).
The first position that fails ends the prefix; the target's argmax at that position (or the
bonus after all K) is emitted, as in exact greedy verification; the kept mismatches' regret is
charged to the request. B = 0, g = 0 or m = 0 is strict greedy verification (the reference's
`strict_identity`: the first mismatch stops), token for token SPD's.

Departures and readings:
  - the budget is per request (the reference's RequestRiskState): our loop has no request hook,
    so the rule keeps one ledger per sampling generator (the engine seeds one per request:
    engines/hf.py; a batch's rows each carry their own, so interleaved rows keep separate
    ledgers), held weakly (a finished request's ledger goes with its generator); steps without
    a generator share one ledger, which begin_request() reopens;
  - ASD is defined for greedy decoding only (the reference refuses temperature != 0): at T > 0
    this rule refuses the step with a ValueError; chains only (a tree draft is refused).
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Any

import torch

from ..params import MAX_DRAFT_K, Shown, integer, knob, real
from ..sampling import GREEDY, SamplingParams
from ..step import Draft, TargetScores, Verdict
from .base import Verifier, VerifierParams
from .positionwise import PositionwiseDecision, finish

__all__ = ["ASD", "ASDParams", "asd_decide"]

_EPS = 1e-9  # the reference's tolerance on the budget comparison


def asd_decide(
    draft_tokens: torch.Tensor,
    target_logits: torch.Tensor,
    params: ASDParams,
    remaining: float,
) -> tuple[PositionwiseDecision, float]:
    """One ASD step at T = 0. draft_tokens: [K]; target_logits: [K+1, vocab]; remaining: the
    request's budget left before this step. Returns (the decision, the regret it spends)."""
    B, g, m = float(params.risk_budget), float(params.gate), int(params.cap)
    K = draft_tokens.numel()
    z = target_logits.float()  # [K+1, vocab]
    t = z.argmax(dim=-1).cpu()  # [K+1] the target's greedy tokens
    d = draft_tokens.cpu()
    zk = z[:K].cpu()
    regret = (zk.max(dim=-1).values - zk.gather(1, d[:, None]).squeeze(1)).clamp_min(0.0)  # [K] r_i
    match = d == t[:K]  # [K] a_i: the exact rule's flags
    strict = B == 0.0 or g == 0.0 or m == 0
    accept = torch.zeros(K, dtype=torch.bool)
    risk, relaxed = 0.0, 0
    for i in range(K):
        r, q = float(regret[i]), float(K - i)
        if not bool(match[i]):
            if strict:
                break
            risk += r
            relaxed += 1
            if not (r / q <= g and risk <= remaining + _EPS and relaxed <= m):
                break
        accept[i] = True
    dec = finish("asd", match, accept, t[:K], regret, lambda n: t[n])
    spent = float(regret[: dec.n][~match[: dec.n]].sum())
    return dec, spent


@dataclass(frozen=True)
class ASDParams(VerifierParams):
    """method=asd's knobs (conf/method/asd.yaml explains each); defaults: the reference's frozen
    Qwen/DSpark configuration (configs/dspark_stable.json: B = 8, g = 0.25, m = 2)."""

    risk_budget: float = knob(8.0, real(0), "the request's regret budget B (target-logit units); 0 = exact greedy verification",
                         shown=Shown("asd_budget", "B", "ASD regret budget B"))
    gate: float = knob(0.25, real(0), "keep a mismatch only if its regret / suffix value (K - i) <= g",
                       shown=Shown("asd_gate", "g", "ASD gate g"))
    cap: int = knob(2, integer(0, MAX_DRAFT_K), "at most m mismatches kept per draft block",
                    shown=Shown("asd_cap", "m", "ASD mismatches per block m"))


class ASD(Verifier):
    """method=asd: approximate speculative decoding with a per-request regret budget."""

    Params = ASDParams
    config_names = ("asd",)
    display_name = "ASD"
    keeps_request_state = True  # the regret ledger lasts one request

    def __init__(self, **knobs: Any) -> None:
        self.params = self.Params.build(knobs)
        # Regret spent per request, keyed by the request's generator (weakly: a request's ledger
        # lives as long as its generator); `spent` is the last request's, for records and tests.
        self._ledgers: weakref.WeakKeyDictionary[Any, float] = weakref.WeakKeyDictionary()
        self._key: Any = None
        self.spent = 0.0

    def begin_request(self) -> None:
        """Open a fresh ledger for steps without a generator (direct calls)."""
        if self._key is not None:
            self._ledgers[self._key] = self.spent
        self._key, self.spent = None, 0.0

    @property
    def remaining(self) -> float:
        return max(0.0, float(self.params.risk_budget) - self.spent)

    def _open(self, generator: Any) -> None:
        """Make `spent` the ledger of the step's request."""
        if generator is self._key:
            return
        if self._key is not None:
            self._ledgers[self._key] = self.spent
        self._key = generator
        self.spent = self._ledgers.get(generator, 0.0) if generator is not None else 0.0

    def __call__(self, draft: Draft, scores: TargetScores, sampling: SamplingParams = GREEDY) -> Verdict:
        if not sampling.greedy:
            raise ValueError("method=asd is defined for greedy decoding only (generation.temperature=0), as its reference code")
        if draft.is_tree:
            raise ValueError("method=asd verifies chains only (its suffix values K - i are a chain's)")
        self._open(sampling.generator)  # the engine seeds one generator per request
        dec, spent = asd_decide(draft.tokens, scores.logits, self.params, self.remaining)
        self.spent += spent
        record = dec.record()
        record.update(regret_spent=round(spent, 6), budget_left=round(self.remaining, 6))
        return Verdict(num_accepted=dec.n, next_token=dec.next_token, record=record)
