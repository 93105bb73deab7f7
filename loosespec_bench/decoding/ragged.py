"""Forwards over a ragged batch, and the drafters' programs that share them.

A ragged forward runs B rows of a RaggedCache (kv.py) at once: row b feeds its own tokens
(m_b of them, padded to the longest at the end), at its own positions lens[b] .., and sees
only its own past (a [B, 1, q, C] additive mask). The LM head runs only on the positions a
caller wants (the last few of each row's feed), not on the padding.

A row whose cache is empty (its prompt) runs alone, exactly as the batch-1 loop runs it
(a fresh in-place cache, the CausalLM's own forward), and its positions are then copied into
its row: prefill is one long forward that batching would only pad, and running it alone keeps
its arithmetic the batch-1 loop's.

Drafters that keep a cache (ModelDrafter, MLADrafter) draft for a batch through *programs*:
generators with the drafter's own per-row logic that yield each forward they need as
(feed [m] int64, rows wanted n) and receive its logits ([n, vocab] float32, the last n
positions of the feed). BatchDrafting steps every row's program at once, so each round of the
rows' forwards is one batched forward; a row that needs fewer forwards than the others simply
stops taking part. The program of a drafter is named by the drafter's class
(Drafter.batch_drafting), never guessed from its name.
"""

from __future__ import annotations

from typing import Any, Callable, Generator

import torch

from ..drafters.base import Drafter
from ..kv import RaggedCache, new_cache
from ..measure.work import add_forward
from ..sampling import SamplingParams, sample_or_argmax, tempered_probs
from ..step import Draft, common_prefix_len, empty_draft, longest_true_prefix

# A forward request of a draft program: (feed [m] int64 on the host, rows wanted n <= m).
Request = tuple[torch.Tensor, int]
Program = Generator[Request, torch.Tensor, Draft]


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


# -- drafters' programs ------------------------------------------------------------------------
class RowDraft:
    """One row's draft-model state: the tokens its cache holds (as ModelDrafter.seen)."""

    def __init__(self, cache: RaggedCache, b: int) -> None:
        self.cache, self.b = cache, b
        self.seen = torch.empty(0, dtype=torch.long)

    def reset(self) -> None:
        self.seen = torch.empty(0, dtype=torch.long)
        self.cache.crop_row(self.b, 0)

    def rollback(self, tokens: torch.Tensor) -> int:
        """ModelDrafter._rollback: keep the longest prefix still equal to the committed tokens,
        at least one committed token short (to feed)."""
        keep = min(common_prefix_len(self.seen, tokens), tokens.numel() - 1)
        if self.seen.numel() > keep:
            self.cache.crop_row(self.b, keep)
            self.seen = self.seen[:keep]
        return keep

    def crop(self, length: int) -> None:
        self.cache.crop_row(self.b, length)


def model_program(drafter: Any, row: RowDraft, tokens: torch.Tensor, k: int, sampling: SamplingParams, want_probs: bool) -> Program:
    """ModelDrafter.propose for one row: K forwards of one token each (the first feeds what the
    row's cache has not seen)."""
    if k <= 0:
        return empty_draft()
    keep = row.rollback(tokens)
    feed = tokens[keep:]  # [m] committed tokens the cache has not seen, m >= 1
    out_tokens: list[int] = []
    out_probs: list[torch.Tensor] = []
    keep_probs = want_probs or not sampling.greedy
    for _ in range(k):
        logits = (yield feed, 1)[0].cpu()  # [vocab]
        row.seen = torch.cat([row.seen, feed])
        d, q = sample_or_argmax(logits, sampling, want_probs=keep_probs)
        out_tokens.append(d)
        if keep_probs:
            out_probs.append(q)
        feed = torch.tensor([d], dtype=torch.long)
    return Draft(tokens=torch.tensor(out_tokens, dtype=torch.long), probs=torch.stack(out_probs) if keep_probs else None)


def mla_program(drafter: Any, row: RowDraft, tokens: torch.Tensor, k: int, sampling: SamplingParams, want_probs: bool) -> Program:
    """MLADrafter.propose for one row (drafters/mla.py: the lookup, guess and check, step for
    step; tests/decoding/test_batch.py holds the batch to the batch-1 draft token for token)."""
    from ..drafters.lookup import prompt_lookup

    if k <= 0:
        return empty_draft()
    row.rollback(tokens)
    keep_probs = want_probs and sampling.greedy
    ctx = tokens
    drafted: list[torch.Tensor] = []
    probs: list[torch.Tensor] = []
    n_drafted = 0
    official = drafter.lookup == "official"
    guess_prev = drafter._dummy_guess() if official else tokens.new_empty(0)
    info = {"lookups": 0, "lookup_hits": 0, "lookup_proposed": 0, "lookup_accepted": 0, "draft_forwards": 0}
    while n_drafted < k:
        guess = prompt_lookup(ctx, drafter.num_pred_tokens, max_ngram=drafter.max_ngram, min_ngram=drafter.min_ngram, overlap=not official)
        info["lookups"] += 1
        if guess.numel() > 0:
            info["lookup_hits"] += 1
            guess_prev = guess
        else:
            guess = guess_prev
        if not official:
            guess = guess[: k - n_drafted - 1]
        L = guess.numel()
        feed = ctx[row.seen.numel() :]  # [m >= 1]
        logits = yield torch.cat([feed, guess]), L + 1  # [L+1, vocab]
        info["draft_forwards"] += 1
        y = logits.argmax(dim=-1).cpu()
        j = longest_true_prefix(guess == y[:L])
        new = torch.cat([guess[:j], y[j : j + 1]])
        info["lookup_proposed"] += L
        info["lookup_accepted"] += j
        row.seen = torch.cat([row.seen, feed, guess[:j]])
        row.crop(row.seen.numel())
        ctx = torch.cat([ctx, new])
        drafted.append(new)
        if keep_probs:
            probs.append(tempered_probs(logits[: j + 1], 0.0, sampling.generator))
        n_drafted += j + 1
    return Draft(tokens=torch.cat(drafted)[:k], probs=torch.cat(probs)[:k] if keep_probs else None, info=info)


PROGRAMS: dict[str, Callable[..., Program]] = {"model": model_program, "mla": mla_program}


def batch_refusal(drafter: Drafter | type[Drafter] | None) -> str | None:
    """Why a drafter cannot draft for a batch (its class's declaration), or None when it can."""
    if drafter is None:
        return None
    cls = drafter if isinstance(drafter, type) else type(drafter)
    mode = getattr(cls, "batch_drafting", None)
    if mode == "stateless" or mode in PROGRAMS:
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
        self.model = getattr(drafter, "model", None) if self.mode in PROGRAMS else None
        self.cache = RaggedCache(self.model.config, rows) if self.model is not None else None
        self.rows = [RowDraft(self.cache, b) for b in range(rows)] if self.cache is not None else []

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
        program = PROGRAMS[self.mode]
        running: dict[int, Program] = {}
        asked: dict[int, Request] = {}
        done: dict[int, Draft] = {}
        for b, (tokens, k, sampling) in jobs.items():
            gen = program(self.drafter, self.rows[b], tokens, k, sampling, want_probs)
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


__all__ = ["BatchDrafting", "PROGRAMS", "RowDraft", "alone_forward", "batch_refusal", "ragged_forward"]
