"""The verifier interface and what loose rules share.

A verifier is a pure function of the draft and the target's scores: it never touches a model
or a cache. The decoding loop turns its `Verdict` into committed tokens and cache rollbacks.
Draft, TargetScores and Verdict live in loosespec_bench.step.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Mapping

import torch

from ..params import Params
from ..sampling import GREEDY, SamplingParams
from ..step import Draft, TargetScores, Verdict

__all__ = ["Draft", "LooseDecision", "TargetScores", "Verdict", "Verifier", "VerifierParams"]


@dataclass(frozen=True)
class VerifierParams(Params):
    """A rule's knobs (none for SPD); each rule's own dataclass declares its ranges."""

    group = "method"


class LooseDecision:
    """Shared reading of a loose rule's step decision (FLy, DropMatch): subclasses are
    dataclasses with `a` ([K] bool, the exact rule's acceptance) and `n` (accepted prefix)."""

    a: torch.Tensor
    n: int

    @property
    def mismatches(self) -> list[int]:
        """Positions the exact rule rejects."""
        return (~self.a).nonzero(as_tuple=True)[0].tolist()

    @property
    def loose(self) -> list[int]:
        """Mismatched positions inside the accepted prefix: accepted loosely, draft token kept."""
        return [i for i in self.mismatches if i < self.n]


class Verifier:
    """A configured acceptance rule: a callable that subclasses implement.

    The declarations below are what the loop asks of the other layers on the rule's behalf:
    `needs_hidden` asks the target for TargetScores.hidden (and its LM head),
    `needs_draft_probs` asks the drafter for q_i even at T = 0 (DropMatch's js criterion),
    `drafts_full_k_near_limit` says how a step near max_new_tokens drafts, and
    `draft_temperature` says at which temperature the drafter proposes.

    `sampling` (sampling.SamplingParams: temperature, generation.top_k / top_p, the seeded
    generator) is how the step samples; top-k / top-p truncate the distributions at T > 0
    (sampling.process_logits), 0 / 1.0 being off. Every rule and drafter takes the same object.
    """

    # The knobs of its config node with their ranges (checked by the constructor and the pre-check).
    Params: ClassVar[type[Params]] = VerifierParams
    # method.name values this rule may be filed under (run ids, reports); () = any.
    config_names: ClassVar[tuple[str, ...]] = ()
    # What the other layers (report, planner, engines, baselines) ask of a rule by its class, never
    # by its name: how tables print it; whether its output is the target's own (lossless: exact
    # SPD, the target alone), so that accuracy differences are numerics; whether it IS the target
    # alone (no drafter: the speedup baseline). verifiers.rule_class(name) finds the class.
    display_name: ClassVar[str] = ""
    lossless: ClassVar[bool] = False
    target_alone: ClassVar[bool] = False
    # The planner's assumed speedup over the target alone (plan.py's hours, the claims' cost of an n,
    # certify's budget): the rule's paper's reported figure by pair name, costmodel.ANY_PAIR ("*")
    # for the pairs it names none for; empty: no faster than the target alone. Read from the class's
    # own declaration (costmodel.assumed_speedup): a subclass is another rule and states its own.
    assumed_speedup: ClassVar[Mapping[str, float]] = {}

    needs_hidden: bool = False
    needs_draft_probs: bool = False
    # False: the loop shrinks K so that no step drafts past max_new_tokens (lossless rules: the
    # output is the same either way, and shorter drafts are cheaper). True: every step drafts the
    # full K and the loop cuts the committed chunk at the limit, so a rule whose decision depends
    # on K (FLy's "no deferral in the last W positions") decides as it does far from the limit.
    drafts_full_k_near_limit: bool = False
    # Why the rule cannot run in the batched loop (engine.batch_size > 1, decoding/batch.py);
    # None: it can. The loop calls a rule per row, on a shallow copy per problem, so a pure rule
    # and one whose state lasts one request (ASD's ledger) both batch; a rule whose state spans
    # problems would say so here (the pre-check's error line).
    batch_refusal: ClassVar[str | None] = None
    # Whether the rule keeps state over one request's steps (ASD's regret ledger, keyed by the
    # request's generator): a caller that sees steps without their request (vLLM's rejection
    # sampler, engines/vllm_sampler.py) cannot run it.
    keeps_request_state: ClassVar[bool] = False

    @classmethod
    def check_artefacts(cls, knobs: Mapping[str, Any]) -> None:
        """Trained files the rule reads (AutoJudge's judge), checked before any model loads or
        any result folder is made (build.check_artefacts); a ConfigError names what is wrong.
        knobs: the method node as configured. None by default."""

    @classmethod
    def check_draft_length(cls, knobs: Mapping[str, Any], k: int) -> None:
        """What the rule needs of the drafter's K (a tree's longest path), checked by the
        pre-check before any model loads; a ConfigError names the settings. knobs: the method
        node with its Params defaults. Nothing by default."""

    def draft_temperature(self, temperature: float) -> float:
        """The temperature the drafter proposes at, given the run's: the same by default (q_i is
        then the drafter's own sampling distribution, which speculative sampling needs)."""
        return temperature

    def __call__(
        self,
        draft: Draft,
        scores: TargetScores,
        sampling: SamplingParams = GREEDY,
    ) -> Verdict:
        raise NotImplementedError
