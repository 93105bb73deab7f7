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

from dataclasses import dataclass
from typing import Any, ClassVar, Generator, Mapping

import torch

from ..errors import ConfigError
from ..params import MAX_DRAFT_K, Params, integer, knob
from ..sampling import GREEDY, SamplingParams
from ..step import Draft, common_prefix_len, empty_draft

__all__ = ["Draft", "DraftProgram", "DraftRequest", "DraftSlot", "Drafter", "DrafterParams", "NgramParams", "common_prefix_len",
           "empty_draft"]  # Draft & co. re-exported from step

# A draft program (Drafter.batch_program) is the drafter's own propose() for one sequence,
# written as a generator that asks for each draft-model forward instead of running it: it yields
# (feed [m] int64 on the host, n): the tokens the sequence's cache takes next and how many of the
# feed's last positions it wants scored, receives their logits ([n, vocab] float32, on the
# model's device), and returns the Draft. Whoever drives it runs the forward: the drafter itself
# on its own cache at batch 1 (ModelDrafter.propose), or decoding/ragged.py's BatchDrafting,
# which steps every row's program together so that each round of the rows' forwards is one
# batched forward. One copy of each drafter's logic serves both.
DraftRequest = tuple[torch.Tensor, int]
DraftProgram = Generator[DraftRequest, torch.Tensor, Draft]


class DraftSlot:
    """One sequence's place in a draft-model cache: the token ids that place holds (`seen`, in
    order) and how to crop it. The drafter's own cache at batch 1, a row of a ragged cache in a
    batch; a program sees only this, so its rollback is the same pointer move in both."""

    def __init__(self) -> None:
        self.seen = torch.empty(0, dtype=torch.long)  # [n] ids the place holds

    def crop(self, length: int) -> None:
        """Keep the first `length` positions of this place."""
        raise NotImplementedError

    def rollback(self, tokens: torch.Tensor) -> int:
        """Crop to the longest prefix still equal to the committed tokens ([n] int64), keeping
        at least one committed token to feed (so the next forward yields the next logits).
        Returns the positions kept."""
        keep = min(common_prefix_len(self.seen, tokens), tokens.numel() - 1)
        if self.seen.numel() > keep:
            self.crop(keep)
            self.seen = self.seen[:keep]
        return keep


@dataclass(frozen=True)
class DrafterParams(Params):
    """Every drafter's knob: its draft length K, declared here once (a drafter changes only
    its default)."""

    group = "drafter"
    k: int = knob(5, integer(1, MAX_DRAFT_K), "the draft length K")


@dataclass(frozen=True)
class NgramParams(DrafterParams):
    """The n-gram lookup of prompt lookup and MLA: sizes tried, largest first."""

    max_ngram: int = knob(3, integer(1))
    min_ngram: int = knob(1, integer(1))

    def cross(self) -> None:
        if self.min_ngram > self.max_ngram:
            raise ConfigError(f"drafter.min_ngram={self.min_ngram} must be <= drafter.max_ngram={self.max_ngram}")


class Drafter:
    """Base class of every drafter; concrete drafters override `propose` (and `reset` if stateful)."""

    name: str = "drafter"
    # Indices into transformers' hidden_states tuple (i = the input of layer i) that the drafter
    # reads from the target's forwards (EAGLE-3); the loop then calls observe() with them.
    needs_target_hidden: tuple[int, ...] = ()
    # The knobs of its config node with their ranges (checked here and by the pre-check).
    Params: ClassVar[type[DrafterParams]] = DrafterParams
    # drafter.name values this class may be filed under (run ids, reports); () = any.
    config_names: ClassVar[tuple[str, ...]] = ()
    # What build.build_drafter loads and passes to the constructor besides the node's knobs:
    # the pair's draft model (model=), its tokenizer and the target's (draft_tokenizer=,
    # target_tokenizer=: a draft with another vocabulary; only with needs_model), the target
    # model itself (target=: heads on its hidden states).
    needs_model: ClassVar[bool] = False
    needs_tokenizers: ClassVar[bool] = False
    needs_target: ClassVar[bool] = False
    # How the batched loop (engine.batch_size > 1, decoding/batch.py) drafts for B problems at
    # once: "stateless" (propose() per row: nothing is kept between calls), "program" (the
    # drafter's batch_program per row, its draft model's forwards batched over rows). None: it
    # cannot batch, and batch_refusal says why (the pre-check's error line).
    batch_drafting: ClassVar[str | None] = None
    batch_refusal: ClassVar[str] = "it declares no batch program (Drafter.batch_drafting)"
    # drafter.vocab_top (models/subvocab.py): why this drafter's LM head cannot be restricted to
    # the most frequent ids (None: it can, through vocab_network). Declared, never probed.
    vocab_top_refusal: ClassVar[str | None] = None

    def batch_program(
        self, slot: DraftSlot, tokens: torch.Tensor, k: int, sampling: SamplingParams, want_probs: bool
    ) -> DraftProgram:
        """propose() for one sequence as a draft program (DraftProgram above) over `slot`, for a
        drafter whose batch_drafting is "program"; its draft model is `batch_model()`."""
        raise NotImplementedError(f"drafter {self.name} has no batch program ({self.batch_refusal})")

    def batch_model(self) -> Any:
        """The draft model a batch program's forwards run on (batch_drafting "program")."""
        raise NotImplementedError(f"drafter {self.name} has no batch program ({self.batch_refusal})")

    def vocab_network(self) -> Any:
        """The draft network whose LM head drafter.vocab_top restricts (a transformers model);
        None: this drafter has none (prompt lookup), and vocab_top changes nothing."""
        return None

    @classmethod
    def drafts_tree(cls, settings: Mapping[str, Any]) -> bool:
        """Whether a drafter configured with `settings` (its config node) proposes trees, which
        are verified at T = 0 only (checks.validate) and reported as such (summary.json)."""
        return False

    @classmethod
    def draft_length(cls, settings: Mapping[str, Any]) -> int:
        """K of a drafter configured with `settings`: the most draft tokens one step can accept
        (a chain's length; a tree's longest path)."""
        return int(settings["k"])

    def __init__(self, k: int | None = None, **knobs: Any) -> None:
        # k positionally too: drafters written before Params call super().__init__(k).
        if k is not None:
            knobs["k"] = k
        self.params = self.Params.build(knobs)
        self.k = self.params.k

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
