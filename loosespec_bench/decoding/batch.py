"""The decoding loop for a batch of problems: B rows decoded together, each on its own.

The same step as loop.generate (propose -> score -> verify -> commit) for B rows at once,
with ragged acceptance: every row keeps its own draft, its own accepted length and its own
target and draft cache lengths (kv.RaggedCache; a rollback is a per-row pointer move). What is
batched is the forwards: the target's verification forward over every row's [pending, d_1..]
and the draft model's forwards (ragged.BatchDrafting). What stays per row is everything a rule
decides: the verifier is called on each row's draft and scores alone (a shallow copy of it per
problem, so that state a rule keeps for one request stays that request's), with the row's own
seeded generator, exactly as at batch 1, so a row's tokens, steps and decisions are the ones
it gets alone (in float32; up to float rounding of the batched kernels, see docs/batching.md).

A row that finishes (EOS, stop string, max_new_tokens) gives its slot to the next waiting
problem, whose prompt is prefilled alone and copied into the slot, so the batch stays full
until the queue is empty. Outputs come back in the problems' order.

Not batched (refused by the pre-check, engines/hf.py): tree drafts (EAGLE-2/3, Lookahead) and
drafters that declare no batch program (Drafter.batch_drafting, batch_program); a rule that
reads the target's hidden states per layer for its drafter (EAGLE's taps) comes with those
drafters.
"""

from __future__ import annotations

import copy
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Callable, Sequence

import torch
from transformers import PreTrainedModel

from ..drafters.base import Drafter
from ..generation import GenerationOutput
from ..kv import RaggedCache
from ..measure.work import add_forward, new_work
from ..sampling import SamplingParams
from ..step import Draft, TargetScores, empty_draft, sync
from ..verifiers.base import Verifier
from ..verifiers.tree import verify
from .cpu import cpu_fast_paths
from .loop import StopFn, _CountedHead, _first_stop
from .ragged import BatchDrafting, alone_forward, batch_refusal, ragged_forward


@dataclass
class BatchRequest:
    """One problem of a batch: its prompt ([P] int64, P >= 1), its seeded generator (the one
    the batch-1 loop would get) and its token budget."""

    prompt_ids: torch.Tensor
    generator: torch.Generator | None = None
    max_new_tokens: int = 256


@dataclass
class BatchStats:
    """What the batch as a whole did: its wall time, its forwards and how full it ran."""

    wall_s: float = 0.0
    target_forwards: int = 0  # batched verification forwards (prefills run alone, not counted)
    row_steps: int = 0  # verification steps summed over rows
    phase_s: dict[str, float] = field(default_factory=lambda: {"draft": 0.0, "target": 0.0, "verify": 0.0, "prefill": 0.0, "commit": 0.0})

    @property
    def mean_rows(self) -> float:
        """Rows per verification forward: how full the batch ran (B while the queue lasts)."""
        return self.row_steps / self.target_forwards if self.target_forwards else 0.0


@dataclass
class _Row:
    index: int  # the request's position
    verifier: Verifier  # the row's own shallow copy: a rule's per-request state (ASD's ledger) stays the row's
    tokens: torch.Tensor  # [n] committed tokens (host)
    out: GenerationOutput
    sampling: SamplingParams
    draft_sampling: SamplingParams
    max_new: int
    t_start: float


def check_batchable(verifier: Verifier, drafter: Drafter | None) -> None:
    """ValueError saying why this rule / drafter pair cannot run in a batch."""
    if verifier.batch_refusal:
        raise ValueError(f"rule {type(verifier).__name__} cannot run in a batch: {verifier.batch_refusal}")
    why = batch_refusal(drafter)
    if why is not None:
        raise ValueError(f"drafter {getattr(drafter, 'name', '?')} cannot run in a batch: {why}")
    if drafter is not None and drafter.needs_target_hidden:
        raise ValueError(f"drafter {drafter.name} reads the target's hidden states per layer: not batched")


@torch.inference_mode()
def generate_batch(
    target: PreTrainedModel,
    requests: Sequence[BatchRequest],
    *,
    verifier: Verifier,
    drafter: Drafter | None = None,
    batch_size: int = 8,
    temperature: float = 0.0,
    top_k: int = 0,
    top_p: float = 1.0,
    eos_token_ids: set[int] | frozenset[int] = frozenset(),
    stop_fn: StopFn | None = None,
    record_steps: bool = False,
    stats: BatchStats | None = None,
    on_done: Callable[[int, GenerationOutput], None] | None = None,
) -> list[GenerationOutput]:
    """Every request generated, up to batch_size at once; outputs in the requests' order.
    on_done(i, output) is called as request i finishes, inside the loop (rows finish out of
    order), with stats.wall_s the batch's time so far: a caller records finished work while
    the rest decode, so an interruption loses only the rows still running.

    Each output holds what loop.generate returns for the request alone (tokens, per-step
    drafted / accepted / emitted, step records, work counts), but no per-request phase times:
    rows share every forward, so only the batch's wall time exists (`stats`; the engine divides
    it). ttft_s and e2e_s are the request's first and last token from the batch's start (a
    server's latencies when the batch's requests arrive at once and none is refilled).
    """
    check_batchable(verifier, drafter)
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    for r in requests:
        if r.prompt_ids.dim() != 1 or r.prompt_ids.numel() == 0:
            raise ValueError(f"prompt_ids must be a non-empty 1-D tensor, got shape {tuple(r.prompt_ids.shape)}")
    stats = stats if stats is not None else BatchStats()
    rows = max(1, min(batch_size, len(requests)))
    outs: list[GenerationOutput | None] = [None] * len(requests)
    if not requests:
        return []
    with cpu_fast_paths(target, *(drafter.modules() if drafter is not None else [])):
        _run(target, requests, outs, rows, verifier=verifier, drafter=drafter,
             base=SamplingParams(temperature=temperature, top_k=top_k, top_p=top_p),
             eos=set(eos_token_ids), stop_fn=stop_fn, record_steps=record_steps, stats=stats, on_done=on_done)
    return [o for o in outs if o is not None]


def _run(
    target: PreTrainedModel, requests: Sequence[BatchRequest], outs: list[GenerationOutput | None], rows: int, *,
    verifier: Verifier, drafter: Drafter | None, base: SamplingParams, eos: set[int], stop_fn: StopFn | None,
    record_steps: bool, stats: BatchStats, on_done: Callable[[int, GenerationOutput], None] | None = None,
) -> None:
    device = target.device
    phase = stats.phase_s
    k = drafter.k if drafter is not None else 0
    want_probs = verifier.needs_draft_probs
    head = target.get_output_embeddings() if verifier.needs_hidden else None
    cache = RaggedCache(target.config, rows)
    drafting = BatchDrafting(drafter, rows) if drafter is not None else None
    queue = deque(range(len(requests)))
    slots: list[_Row | None] = [None] * rows

    sync(device)
    t_batch = time.perf_counter()

    def start(b: int, i: int) -> _Row:
        """Request i takes slot b: its prompt prefilled alone (as at batch 1), copied in."""
        req = requests[i]
        t0 = time.perf_counter()
        tokens = req.prompt_ids.to("cpu", torch.long)
        work = new_work()
        cache.crop_row(b, 0)
        if tokens.numel() > 1:
            alone_forward(target, cache, b, tokens[:-1], 1)
            add_forward(work, "target_prefill", tokens.numel() - 1, 1, 0)
        if drafting is not None:
            drafting.reset_row(b, tokens)
        sampling = SamplingParams(temperature=base.temperature, top_k=base.top_k, top_p=base.top_p, generator=req.generator)
        out = GenerationOutput(new_tokens=[], stop_reason="max_new_tokens", phase_s={}, work=work)
        phase["prefill"] += time.perf_counter() - t0
        return _Row(i, copy.copy(verifier), tokens, out, sampling, sampling.at(verifier.draft_temperature(base.temperature)), req.max_new_tokens, t0)

    wall0 = stats.wall_s  # the stats may carry earlier batches' time

    def finish(b: int) -> None:
        row = slots[b]
        assert row is not None
        outs[row.index] = row.out
        slots[b] = None
        if on_done is not None:
            stats.wall_s = wall0 + time.perf_counter() - t_batch  # the batch's time so far
            on_done(row.index, row.out)

    while True:
        for b in range(rows):  # refill: finished rows take the next waiting problems
            while slots[b] is None and queue:
                slots[b] = start(b, queue.popleft())
                if slots[b].max_new <= 0:  # nothing to generate (the batch-1 loop returns at once)
                    finish(b)
        live = [b for b in range(rows) if slots[b] is not None]
        if not live:
            break
        t0 = time.perf_counter()
        # -- propose: each row's K for this step, as loop.generate chooses it ----------------
        jobs: dict[int, tuple[torch.Tensor, int, SamplingParams]] = {}
        for b in live:
            row = slots[b]
            assert row is not None
            k_step = k if verifier.drafts_full_k_near_limit else min(k, row.max_new - len(row.out.new_tokens) - 1)
            if k_step > 0:
                jobs[b] = (row.tokens, k_step, row.draft_sampling)
        drafts: dict[int, Draft] = {}
        if jobs:
            assert drafting is not None
            drafts = drafting.propose(jobs, want_probs=want_probs, works={b: slots[b].out.work for b in jobs})  # type: ignore[union-attr]
        t1 = time.perf_counter()
        # -- score: one target forward over every row's [pending, d_1..d_k] ------------------
        feeds: dict[int, torch.Tensor] = {}
        for b in live:
            row = slots[b]
            assert row is not None
            draft = drafts.get(b) or empty_draft()
            drafts[b] = draft
            if draft.is_tree:
                raise ValueError("tree drafts are not batched")
            w = row.out.work
            if b in jobs:
                w["draft_steps"] += 1
                w["draft_tokens"] += draft.k
                info = draft.info or {}
                w["lookups"] += int(info.get("lookups", 0))
                w["lookup_hits"] += int(info.get("lookup_hits", 0))
                if "draft_forwards" in info:
                    w["mla_saved_draft_forwards"] += draft.k - int(info["draft_forwards"])
            feeds[b] = torch.cat([row.tokens[-1:], draft.tokens])  # [K+1]
            add_forward(w, "target_verify", feeds[b].numel(), feeds[b].numel(), row.tokens.numel() - 1)
        logits, hidden = ragged_forward(target, cache, feeds, {b: f.numel() for b, f in feeds.items()}, hidden=verifier.needs_hidden)
        stats.target_forwards += 1
        stats.row_steps += len(live)
        sync(device)
        t2 = time.perf_counter()
        # -- verify and commit, row by row: the rule's pure function on the row's own scores --
        t_verify = 0.0
        for b in live:
            row = slots[b]
            assert row is not None
            draft = drafts[b]
            kk = draft.k
            out = row.out
            lm_head = _CountedHead(head, out.work) if head is not None else None
            scores = TargetScores(logits=logits[b][: kk + 1], hidden=hidden.get(b), lm_head=lm_head)
            tv = time.perf_counter()
            verdict = verify(row.verifier, draft, scores, row.sampling)
            t_verify += time.perf_counter() - tv
            n = verdict.num_accepted
            chunk = draft.tokens[:n].tolist() + [verdict.next_token]
            keep, reason = _first_stop(chunk, out.new_tokens, eos, stop_fn)
            keep = min(keep, row.max_new - len(out.new_tokens))
            chunk = chunk[:keep]
            # The row's target cache back to [.., pending, d_1..d_n]: a pointer move.
            cache.crop_row(b, row.tokens.numel() + n)
            row.tokens = torch.cat([row.tokens, torch.tensor(chunk, dtype=torch.long)])
            out.new_tokens.extend(chunk)
            if out.ttft_s is None:  # from the batch's start: every request of a batch arrives at once
                out.ttft_s = time.perf_counter() - t_batch
            out.drafted.append(kk)
            out.accepted.append(n)
            out.emitted.append(len(chunk))
            out.work["steps"] += 1
            out.work["emitted"] += len(chunk)
            if record_steps:
                rec = {"draft": draft.tokens.tolist(), "accepted": n, "next": verdict.next_token}
                if verdict.record:
                    rec.update(verdict.record)
                if draft.info:
                    rec["drafter"] = draft.info
                out.step_records.append(rec)
            if reason is not None or len(out.new_tokens) >= row.max_new:
                if reason is not None:
                    out.stop_reason = reason
                out.e2e_s = time.perf_counter() - t_batch  # from the batch's start to its last token
                finish(b)
        t3 = time.perf_counter()
        phase["draft"] += t1 - t0
        phase["target"] += t2 - t1
        phase["verify"] += t_verify
        phase["commit"] += t3 - t2 - t_verify
    sync(device)
    stats.wall_s = wall0 + time.perf_counter() - t_batch
