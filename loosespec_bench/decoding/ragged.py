"""Forwards over a ragged batch, and the drafters' programs that share them.

A ragged forward runs B rows of a RaggedCache (kv.py) at once: row b feeds its own tokens
(m_b of them, padded to the longest at the end), at its own positions lens[b] .., and sees
only its own past (a [B, 1, q, C] additive mask). The LM head runs only on the positions a
caller wants (the last few of each row's feed), not on the padding.

A row whose cache is empty (its prompt) runs alone, exactly as the batch-1 loop runs it
(a fresh in-place cache, the CausalLM's own forward), and its positions are then copied into
its row: prefill is one long forward that batching would only pad, and running it alone keeps
its arithmetic the batch-1 loop's.

Drafters that keep a cache (ModelDrafter, MLADrafter) draft for a batch through their own
draft programs (Drafter.batch_program, drafters/base.py: propose()'s logic as a generator that
yields each forward it needs as (feed [m] int64, rows wanted n) and receives its logits, [n,
vocab] float32 for the last n positions of the feed); at batch 1 the drafter drives the same
program with its own forwards. BatchDrafting steps every row's program at once over the rows
of one ragged cache (RowSlot), so each round of the rows' forwards is one batched forward; a
row that needs fewer forwards than the others simply stops taking part. Whether a drafter has a
program is declared on its class (Drafter.batch_drafting), never guessed from its name.
"""

from __future__ import annotations

from typing import Any, Callable

import torch

from ..drafters.base import DraftProgram, DraftRequest, DraftSlot, Drafter
from ..kv import RaggedCache, new_cache
from ..measure.work import add_forward
from ..sampling import SamplingParams
from ..step import Draft


def _head(model: torch.nn.Module) -> Callable[[torch.Tensor], torch.Tensor]:
    """The CausalLM's LM head as its forward applies it (soft-capping where the config has it)."""
    head = model.get_output_embeddings()
    cap = getattr(model.config, "final_logit_softcapping", None)
    if not cap:
        return head
    return lambda h: torch.tanh(head(h) / cap) * cap


def ragged_forward(
    model: torch.nn.Module,
    cache: RaggedCache,
    feeds: dict[int, torch.Tensor],
    keep: dict[int, int],
    *,
    hidden: bool = False,
) -> tuple[dict[int, torch.Tensor], dict[int, torch.Tensor]]:
    """One forward of every row of `cache`; rows not in `feeds` feed nothing (their outputs are
    dropped and their lengths stay).

    feeds[b]: [m_b >= 1] int64 row b's new tokens, written at positions lens[b] ..
    keep[b]: how many of the feed's last positions to score (1 <= keep[b] <= m_b).
    Returns ({b: [keep[b], vocab] float32 logits}, {b: [keep[b], hidden] final hidden states}
    where `hidden`, else {}), on the model's device. The cache advances by m_b for row b.
    """
    rows = cache.rows
    device = model.device
    q = max(f.numel() for f in feeds.values())
    ids = torch.zeros(rows, q, dtype=torch.long)  # [B, q] padding: token 0, past every row's length
    counts = [0] * rows
    for b, f in feeds.items():
        ids[b, : f.numel()] = f
        counts[b] = f.numel()
    lens = torch.tensor(cache.lens, dtype=torch.long)  # [B]
    pos = lens[:, None] + torch.arange(q)  # [B, q] each row at its own positions
    width = int(lens.max()) + q  # keys the layers return (RaggedLayer.update)
    seen = torch.arange(width)[None, None, :] <= pos[:, :, None]  # [B, q, C]: row b's own past and itself
    dtype = model.dtype
    mask = torch.zeros(rows, 1, q, width, dtype=dtype).masked_fill_(~seen[:, None], torch.finfo(dtype).min)
    out = model.get_decoder()(
        input_ids=ids.to(device), attention_mask={"full_attention": mask.to(device)}, position_ids=pos.to(device),
        cache=cache, use_cache=True,
    )
    cache.advance(counts)
    h = out.last_hidden_state  # [B, q, hidden]
    order = sorted(feeds)
    bi = torch.tensor([b for b in order for _ in range(keep[b])], dtype=torch.long, device=device)
    pi = torch.tensor([counts[b] - keep[b] + j for b in order for j in range(keep[b])], dtype=torch.long, device=device)
    hs = h[bi, pi]  # [sum keep, hidden] only the wanted positions meet the LM head
    logits = _head(model)(hs).float()  # [sum keep, vocab]
    split_logits, split_hidden, at = {}, {}, 0
    for b in order:
        split_logits[b] = logits[at : at + keep[b]]
        if hidden:
            split_hidden[b] = hs[at : at + keep[b]]
        at += keep[b]
    return split_logits, split_hidden


def alone_forward(model: torch.nn.Module, cache: RaggedCache, b: int, feed: torch.Tensor, keep: int,
                  *, hidden: bool = False) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Row b's forward run alone on a fresh cache (a prompt: the row's cache is empty), as the
    batch-1 loop runs it; its positions then become row b's. Returns ([keep, vocab] float32
    logits, [keep, hidden] final hidden states or None)."""
    if cache.lens[b]:
        raise ValueError(f"row {b} holds {cache.lens[b]} positions: only an empty row runs alone")
    single = new_cache(model.config)
    fwd = model(feed[None].to(model.device), cache=single, use_cache=True, logits_to_keep=keep, output_hidden_states=hidden)
    cache.load_row(b, single)
    return fwd.logits[0].float(), (fwd.hidden_states[-1][0, -keep:] if hidden else None)


# -- drafters' programs, stepped together -------------------------------------------------------
class RowSlot(DraftSlot):
    """Row b of a ragged draft cache as one sequence's place (a draft program's slot)."""

    def __init__(self, cache: RaggedCache, b: int) -> None:
        super().__init__()
        self.cache, self.b = cache, b

    def crop(self, length: int) -> None:
        self.cache.crop_row(self.b, length)  # this row's pointer only

    def reset(self) -> None:
        self.seen = torch.empty(0, dtype=torch.long)
        self.crop(0)


BATCH_MODES = ("stateless", "program")  # Drafter.batch_drafting values the batched loop drives


def batch_refusal(drafter: Drafter | type[Drafter] | None) -> str | None:
    """Why a drafter cannot draft for a batch (its class's declaration), or None when it can."""
    if drafter is None:
        return None
    cls = drafter if isinstance(drafter, type) else type(drafter)
    mode = getattr(cls, "batch_drafting", None)
    if mode in BATCH_MODES:
        return None
    return str(getattr(cls, "batch_refusal", "") or f"drafter {cls.__name__} does not declare how it drafts for a batch")


class BatchDrafting:
    """A drafter's proposals for the rows of a batch: per row for a stateless drafter (prompt
    lookup), through its program and batched forwards for one with a draft model."""

    def __init__(self, drafter: Drafter, rows: int) -> None:
        why = batch_refusal(drafter)
        if why is not None:
            raise ValueError(f"drafter {drafter.name} cannot batch: {why}")
        self.drafter = drafter
        self.mode = type(drafter).batch_drafting
        self.model = drafter.batch_model() if self.mode == "program" else None
        self.cache = RaggedCache(self.model.config, rows) if self.model is not None else None
        self.rows = [RowSlot(self.cache, b) for b in range(rows)] if self.cache is not None else []

    def reset_row(self, b: int, prompt: torch.Tensor) -> None:
        if self.rows:
            self.rows[b].reset()
        elif self.mode == "stateless":
            self.drafter.reset(prompt)

    @torch.inference_mode()
    def propose(
        self, jobs: dict[int, tuple[torch.Tensor, int, SamplingParams]], *, want_probs: bool, works: dict[int, dict[str, Any]],
    ) -> dict[int, Draft]:
        """Drafts for the rows in jobs ({b: (committed tokens [n], k, sampling)}); each row's
        draft forwards are counted into works[b] as the batch-1 loop's hooks count them."""
        if self.mode == "stateless":
            return {b: self.drafter.propose(t, k, sampling=s, want_probs=want_probs) for b, (t, k, s) in jobs.items()}
        assert self.cache is not None and self.model is not None
        running: dict[int, DraftProgram] = {}
        asked: dict[int, DraftRequest] = {}
        done: dict[int, Draft] = {}
        for b, (tokens, k, sampling) in jobs.items():
            gen = self.drafter.batch_program(self.rows[b], tokens, k, sampling, want_probs)
            try:
                asked[b] = next(gen)
                running[b] = gen
            except StopIteration as stop:
                done[b] = stop.value
        while running:
            logits: dict[int, torch.Tensor] = {}
            batched = {b: r for b, r in asked.items() if self.cache.lens[b] > 0}
            for b, (feed, keep) in asked.items():
                ctx = self.cache.lens[b]
                add_forward(works[b], "draft_prefill" if ctx == 0 else "draft", feed.numel(), min(keep, feed.numel()), ctx)
                if b not in batched:  # the row's prompt: alone, as at batch 1
                    logits[b] = alone_forward(self.model, self.cache, b, feed, keep)[0]
            if batched:
                logits.update(ragged_forward(self.model, self.cache, {b: f for b, (f, _) in batched.items()},
                                             {b: n for b, (_, n) in batched.items()})[0])
            for b in list(running):
                try:
                    asked[b] = running[b].send(logits[b])
                except StopIteration as stop:
                    done[b] = stop.value
                    del running[b], asked[b]
        return done


__all__ = ["BATCH_MODES", "BatchDrafting", "RowSlot", "alone_forward", "batch_refusal", "ragged_forward"]
