"""The drafter interface: propose up to K tokens given every committed token.

Drafters are stateful (a draft model keeps a KV cache) but never see the target's decisions.
The loop calls `reset` once per sequence and `propose` once per verification step with all
committed tokens; a drafter that caches works out for itself how much of its cache is still
valid (the longest common prefix with the committed tokens), so a rule that keeps draft tokens
(FLy's deferral) or replaces them (a correction) needs no special rollback call.

A drafter owns its draft length K (`k`, from conf/drafter/*.yaml); the loop only caps it so no
step drafts past max_new_tokens (unless the rule declares drafts_full_k_near_limit). Everything else the loop may ask of a drafter has a default
here, so the loop reads attributes instead of probing for them.
"""

from __future__ import annotations

from typing import Any, Mapping

import torch

from ..errors import ConfigError
from ..sampling import GREEDY, SamplingParams
from ..step import Draft, common_prefix_len, empty_draft

__all__ = ["Drafter"]


class Drafter:
    """Base class of every drafter; concrete drafters override `propose` (and `reset` if stateful)."""

    name: str = "drafter"
    # Indices into transformers' hidden_states tuple (i = the input of layer i) that the drafter
    # reads from the target's forwards (EAGLE-3); the loop then calls observe() with them.
    needs_target_hidden: tuple[int, ...] = ()

    @classmethod
    def drafts_tree(cls, settings: Mapping[str, Any]) -> bool:
        """Whether a drafter configured with `settings` (its config node) proposes trees, which
        are verified at T = 0 only (config.validate) and reported as such (summary.json)."""
        return False

    @classmethod
    def draft_length(cls, settings: Mapping[str, Any]) -> int:
        """K of a drafter configured with `settings`: the most draft tokens one step can accept
        (a chain's length; a tree's longest path)."""
        return int(settings["k"])

    def __init__(self, k: int) -> None:
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ConfigError(f"drafter.k={k!r} must be an integer >= 1 (the draft length K)")
        self.k = k

    def modules(self) -> list[torch.nn.Module]:
        """The torch networks this drafter runs (the loop puts them under its CPU fast paths)."""
        return []

    def reset(self, prompt_ids: torch.Tensor) -> None:
        """Start a new sequence. prompt_ids: [P] int64. Stateless drafters keep the default."""

    def observe(self, features: tuple[torch.Tensor, ...]) -> None:
        """Target hidden states of newly committed positions, one [m, hidden] per index in
        needs_target_hidden. Only drafters that declare needs_target_hidden receive any."""

    def observe_scores(self, logits: torch.Tensor) -> None:
        """Target logits ([E, vocab] float32) of the Draft's extra_tokens, in their order, from
        the verification forward (Lookahead's Jacobi window). Only drafters that send extras
        receive any; the extras are never committed and are dropped from the target's cache."""

    def propose(
        self,
        tokens: torch.Tensor,
        k: int,
        sampling: SamplingParams = GREEDY,
        *,
        want_probs: bool = False,
    ) -> Draft:
        """Propose up to k tokens continuing `tokens` ([n] int64, all committed tokens).

        k is this step's length: self.k, or fewer near max_new_tokens. want_probs asks for q_i
        even at T = 0 (DropMatch's js criterion needs it); drafters that have no distribution
        (prompt lookup) return probs=None regardless. A drafter that samples at T > 0 draws from
        the processed distribution (sampling: temperature, top_k, top_p, generator;
        sampling.process_logits), the same processing the rule applies to the target's p;
        greedy drafters ignore it.
        """
        raise NotImplementedError
