"""The one decoding loop: propose -> score -> verify -> commit, for every method.

Target alone (method=ar) is this same loop with no drafter (K = 0), so baseline and method are
timed through identical code. The loop owns the target's KV cache; the convention is that the
cache holds every committed token but the last one ("pending"), so each verification forward
runs over [pending, d_1..d_K] and yields K+1 distributions p_1..p_{K+1} (docs/algorithms.md section 1).
"""

from __future__ import annotations

import contextlib
import functools
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import torch
from transformers import DynamicCache, PreTrainedModel

from ..drafters.base import Drafter
from ..generation import GenerationOutput
from ..kv import new_cache
from ..sampling import SamplingParams
from ..step import (
    Draft, TargetScores, ancestor_matrix, chain_parents, common_prefix_len, compact_to, crop_to, empty_draft, node_depths, sync,
)
from ..verifiers.base import Verifier
from ..verifiers.tree import verify
from ..measure.work import add_forward, add_lm_head, new_work
from .cpu import cpu_fast_paths

# stop_fn(new_token_ids) -> True when a stop string has appeared in the decoded text.
StopFn = Callable[[list[int]], bool]


@dataclass
class PrefixCache:
    """The target's KV cache, kept from one generate() call to the next whose prompt shares a
    prefix with it (AutoJudge's mining: every continuation of a problem starts with the same
    prompt and answer prefix). `tokens` are the ids the cache holds ([n] int64); generate()
    crops the cache to the part its prompt shares, prefills the rest, and leaves the cache of
    its prompt + output (but the last token) here. The result is what a fresh cache computes,
    up to the rounding of a prefill split in two chunks. Never used by the benchmark's runs
    (a cache carried from one sample to the next would time prefix caching, not the method)."""

    cache: DynamicCache | None = None
    tokens: torch.Tensor = field(default_factory=lambda: torch.empty(0, dtype=torch.long))
    reused: int = 0  # prompt positions the last call took from the cache


def _first_stop(
    chunk: list[int], new_tokens: list[int], eos_ids: set[int], stop_fn: StopFn | None
) -> tuple[int, str | None]:
    """How many tokens of `chunk` to keep, and why generation stops (None: it goes on).

    Cutting at the exact token where EOS or a stop string appears keeps a speculative run's
    output identical to the target-alone run, which stops token by token.
    """
    eos_keep = next((j + 1 for j, tok in enumerate(chunk) if tok in eos_ids), None)
    # A stop string completed before the EOS ends generation there, as the target alone (token by
    # token) would have: one step can accept both, e.g. "```" then EOS. On the EOS's own token the
    # EOS wins, as before.
    limit = len(chunk) if eos_keep is None else eos_keep - 1
    if stop_fn is not None and limit and stop_fn(new_tokens + chunk[:limit]):
        for j in range(1, limit + 1):
            if stop_fn(new_tokens + chunk[:j]):
                return j, "stop_string"
    return (eos_keep, "eos") if eos_keep is not None else (len(chunk), None)


def tree_inputs(
    draft: Draft, prefix_len: int, dtype: torch.dtype, device: torch.device
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Input ids, position ids and attention mask of a tree verification forward.

    The forward runs over [pending, nodes (K), extras (E)] after a cache of prefix_len
    positions (every committed token but the pending one). Node i sits at position
    prefix_len + depth(i) and sees the cached prefix, the pending token, its ancestors and
    itself. Returns ids [1, 1+K+E], positions [1, 1+K+E] and an additive float mask
    [1, 1, 1+K+E, prefix_len+1+K+E] (0 = visible, dtype's lowest = hidden), the custom 4-D
    mask transformers passes through unchanged (masking_utils: "already 4D ... returned as-is").
    """
    parents = draft.parents if draft.parents is not None else chain_parents(draft.k)
    tokens = draft.tokens
    if draft.extra_tokens is not None:
        tokens = torch.cat([tokens, draft.extra_tokens])
        parents = torch.cat([parents, draft.extra_parents])
    n = tokens.numel()
    vis = torch.zeros(n + 1, n + 1, dtype=torch.bool)  # [1+n, 1+n] row r sees column c; index 0 = pending
    vis[:, 0] = True  # every node sees the pending token (the root)
    vis[1:, 1:] = ancestor_matrix(parents)  # and itself and its ancestors
    depth = torch.cat([torch.zeros(1, dtype=torch.long), node_depths(parents)])  # [1+n]
    full = torch.cat([torch.ones(n + 1, prefix_len, dtype=torch.bool), vis], dim=1)  # [1+n, P+1+n]
    mask = torch.zeros(full.shape, dtype=dtype).masked_fill_(~full, torch.finfo(dtype).min)
    ids = torch.cat([torch.zeros(1, dtype=torch.long), tokens])  # pending filled in by the caller
    return ids[None].to(device), (prefix_len + depth)[None].to(device), mask[None, None].to(device)


class _CountedHead:
    """The target's LM head as a rule calls it beyond the forwards' own pass (DropMatch's
    dropout paths): counts each call's rows and FLOPs into `work`, computes the same thing."""

    def __init__(self, head: torch.nn.Module, work: dict[str, Any]) -> None:
        self.head, self.work = head, work
        weight = getattr(head, "weight", None)  # [vocab, hidden] for nn.Linear
        self.vocab, self.hidden = (int(weight.shape[0]), int(weight.shape[1])) if weight is not None else (0, 0)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        rows = int(x.numel() // x.shape[-1]) if x.dim() else 0  # x: [..., hidden]
        add_lm_head(self.work, rows, self.hidden or int(x.shape[-1]), self.vocab)
        return self.head(x)


@contextlib.contextmanager
def _count_draft_forwards(drafter: Drafter | None, work: dict[str, Any]) -> Iterator[None]:
    """Count every forward of the drafter's networks (draft model, MLA's checks) into
    work["draft"] through forward pre-hooks, removed on exit. Rows = the positions fed
    (input_ids' length), ctx = the cache's length before the forward, lm_rows = logits_to_keep
    (all rows when 0 / absent). Networks driven through other methods than forward (the
    EAGLE heads' step()) are not seen: their counts stay 0."""

    def hook(module: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        ids = kwargs.get("input_ids", args[0] if args else None)
        if ids is None:
            ids = kwargs.get("inputs_embeds")
        if not isinstance(ids, torch.Tensor):
            return
        rows = int(ids.shape[1]) if ids.dim() >= 2 else int(ids.numel())  # [1, rows(, hidden)]
        cache = kwargs.get("cache", kwargs.get("past_key_values"))
        ctx = int(cache.get_seq_length()) if cache is not None and hasattr(cache, "get_seq_length") else 0
        keep = kwargs.get("logits_to_keep", 0)
        lm_rows = min(rows, int(keep)) if isinstance(keep, int) and keep > 0 else rows
        # A forward on an empty cache is the draft's prompt (its prefill), counted apart so that
        # the per-token draft figures describe decoding.
        add_forward(work, "draft_prefill" if ctx == 0 else "draft", rows, lm_rows, ctx)

    handles = [m.register_forward_pre_hook(hook, with_kwargs=True) for m in (drafter.modules() if drafter is not None else [])]
    try:
        yield
    finally:
        for h in handles:
            h.remove()


def _with_cpu_fast_paths(fn: Callable[..., GenerationOutput]) -> Callable[..., GenerationOutput]:
    """generate() runs the target and the drafter's model (if it has one) under cpu_fast_paths."""

    @functools.wraps(fn)
    def wrapper(target: PreTrainedModel, *args: Any, drafter: Drafter | None = None, **kwargs: Any) -> GenerationOutput:
        work = new_work()
        with cpu_fast_paths(target, *(drafter.modules() if drafter is not None else [])), _count_draft_forwards(drafter, work):
            out = fn(target, *args, drafter=drafter, _work=work, **kwargs)
        out.work = work
        return out

    return wrapper


@_with_cpu_fast_paths
@torch.inference_mode()
def generate(
    target: PreTrainedModel,
    prompt_ids: torch.Tensor,
    *,
    verifier: Verifier,
    drafter: Drafter | None = None,
    max_new_tokens: int = 256,
    temperature: float = 0.0,
    top_k: int = 0,
    top_p: float = 1.0,
    eos_token_ids: set[int] | frozenset[int] = frozenset(),
    stop_fn: StopFn | None = None,
    generator: torch.Generator | None = None,
    record_steps: bool = False,
    prefix_cache: PrefixCache | None = None,
    _work: dict[str, Any] | None = None,
) -> GenerationOutput:
    """Generate up to max_new_tokens after prompt_ids ([P] int64, P >= 1) for batch size 1.

    Without a drafter every step is a plain target step (K = 0, the target-alone baseline);
    with one, each step drafts drafter.k tokens; near max_new_tokens fewer, unless the rule
    declares drafts_full_k_near_limit (then the committed chunk is cut at the limit instead).
    top_k / top_p (0 / 1.0 = off) truncate the sampling distributions at T > 0, the drafter's
    and the rule's alike (sampling.process_logits).
    """
    if prompt_ids.dim() != 1 or prompt_ids.numel() == 0:
        raise ValueError(f"prompt_ids must be a non-empty 1-D tensor, got shape {tuple(prompt_ids.shape)}")
    device = target.device
    # "rollback" = cropping the target's cache; "commit" = the rest of the bookkeeping. (A
    # drafter's own cache rollback happens inside propose and counts as "draft".)
    phase = {"draft": 0.0, "target": 0.0, "verify": 0.0, "rollback": 0.0, "commit": 0.0}
    # Work counts (work.py): filled here for the target, by forward hooks for the drafter.
    work = new_work() if _work is None else _work
    out = GenerationOutput(new_tokens=[], stop_reason="max_new_tokens", phase_s=phase, work=work)
    lm_head = target.get_output_embeddings() if verifier.needs_hidden else None
    if lm_head is not None:
        lm_head = _CountedHead(lm_head, work)
    # Drafters fed by the target's hidden states (EAGLE-3) name the layers they read: indices
    # into transformers' hidden_states tuple. They get the kept positions via observe().
    taps: tuple[int, ...] = tuple(drafter.needs_target_hidden) if drafter is not None else ()
    k = drafter.k if drafter is not None else 0
    # The rule, not the caller, says whether q_i is needed at T = 0 (DropMatch's js criterion).
    want_probs = verifier.needs_draft_probs
    # The rule says at which temperature the drafter proposes (FLy's released drafter is greedy
    # at every T; speculative sampling needs the drafter's own sampling distribution).
    sampling = SamplingParams(temperature=temperature, top_k=top_k, top_p=top_p, generator=generator)
    draft_sampling = sampling.at(verifier.draft_temperature(temperature))

    sync(device)
    t_start = time.perf_counter()
    t_emit = t_start  # the last emission's time (the ITL of the next step is measured from it)
    tokens = prompt_ids.to("cpu", torch.long)  # [n] all committed tokens, kept on the host
    reused = 0
    if prefix_cache is not None and prefix_cache.cache is not None:
        if taps:
            raise ValueError("prefix_cache: a drafter fed by the target's prefill hidden states cannot start from a kept cache")
        cache = prefix_cache.cache
        reused = min(common_prefix_len(prefix_cache.tokens, tokens), tokens.numel() - 1)
        crop_to(cache, reused)
    else:
        cache = new_cache(target.config)  # in place: a rollback is a pointer move (kv.py)
    if tokens.numel() - 1 > reused:
        pre = target(
            tokens[None, reused:-1].to(device), cache=cache, use_cache=True, logits_to_keep=1,
            output_hidden_states=bool(taps),
        )
        add_forward(work, "target_prefill", tokens.numel() - 1 - reused, 1, reused)
    if drafter is not None:
        drafter.reset(tokens)
        if taps and tokens.numel() > 1:
            drafter.observe(tuple(pre.hidden_states[i][0] for i in taps))  # [P-1, hidden] each
    sync(device)
    t_decode = time.perf_counter()
    out.prefill_s = t_decode - t_start

    new_tokens = out.new_tokens
    while len(new_tokens) < max_new_tokens:
        t0 = time.perf_counter()
        if verifier.drafts_full_k_near_limit:
            k_step = k  # the rule's decision depends on K: draft it all, cut the chunk below
        else:
            # Never draft past the budget: the last token of a step is always the target's.
            k_step = min(k, max_new_tokens - len(new_tokens) - 1)
        if k_step > 0:
            draft = drafter.propose(tokens, k_step, sampling=draft_sampling, want_probs=want_probs)
        else:
            draft = empty_draft()
        t1 = time.perf_counter()
        kk = draft.k
        if k_step > 0:
            work["draft_steps"] += 1
            work["draft_tokens"] += kk
            info = draft.info or {}
            work["lookups"] += int(info.get("lookups", 0))
            work["lookup_hits"] += int(info.get("lookup_hits", 0))
            if "draft_forwards" in info:  # MLA: a chain drafter would have run one per token
                work["mla_saved_draft_forwards"] += kk - int(info["draft_forwards"])
        if draft.is_tree:
            # One forward over [pending, nodes, extras] with the tree mask; a chain stays on the
            # plain causal path below (no mask to build, the kernels transformers picks for it).
            ids, pos, mask = tree_inputs(draft, tokens.numel() - 1, target.dtype, device)
            ids[0, 0] = int(tokens[-1])
            add_forward(work, "target_verify", ids.shape[1], ids.shape[1], tokens.numel() - 1)
            fwd = target(
                ids, position_ids=pos, attention_mask=mask, cache=cache, use_cache=True,
                output_hidden_states=verifier.needs_hidden or bool(taps),
            )
        else:
            inp = torch.cat([tokens[-1:], draft.tokens]).to(device)  # [K+1]
            add_forward(work, "target_verify", inp.numel(), inp.numel(), tokens.numel() - 1)
            fwd = target(
                inp.unsqueeze(0),
                cache=cache,
                use_cache=True,
                output_hidden_states=verifier.needs_hidden or bool(taps),
            )
        scores = TargetScores(
            logits=fwd.logits[0, : kk + 1].float(),  # [K+1, vocab] (extras' rows cut off)
            hidden=fwd.hidden_states[-1][0, : kk + 1] if verifier.needs_hidden else None,  # [K+1, hidden]
            lm_head=lm_head,
        )
        if draft.extra_tokens is not None:  # Lookahead's Jacobi window: scored, never committed
            drafter.observe_scores(fwd.logits[0, kk + 1 :].float())  # [E, vocab]
        sync(device)
        t2 = time.perf_counter()
        verdict = verify(verifier, draft, scores, sampling)
        t3 = time.perf_counter()

        n = verdict.num_accepted
        # Accepted nodes: a chain's prefix, or a tree's path (node indices, root first).
        path = verdict.path if verdict.path is not None else list(range(n))
        acc = draft.tokens[:n] if verdict.path is None else draft.tokens[path]
        chunk = acc.tolist() + [verdict.next_token]
        keep, reason = _first_stop(chunk, new_tokens, eos_token_ids, stop_fn)
        keep = min(keep, max_new_tokens - len(new_tokens))
        chunk = chunk[:keep]
        # Roll the target cache back to [.., pending, d_1..d_n]; the new pending token is the
        # correction/bonus, which the next forward feeds.
        t_crop = time.perf_counter()
        if draft.is_tree:
            compact_to(cache, tokens.numel(), path)
        else:
            crop_to(cache, tokens.numel() + n)
        rollback = time.perf_counter() - t_crop
        if taps:  # features of the committed positions: pending + accepted draft tokens
            rows = torch.tensor([0] + [1 + p for p in path], dtype=torch.long, device=device)  # [n+1]
            drafter.observe(tuple(fwd.hidden_states[i][0].index_select(0, rows) for i in taps))  # [n+1, hidden] each
        tokens = torch.cat([tokens, torch.tensor(chunk, dtype=torch.long)])
        new_tokens.extend(chunk)
        # Positions offered: a chain's length, a tree's depth (its node count is in the records).
        out.drafted.append(draft.k if draft.parents is None or draft.k == 0 else int(node_depths(draft.parents).max()))
        out.accepted.append(n)
        out.emitted.append(len(chunk))
        work["steps"] += 1
        work["emitted"] += len(chunk)
        if record_steps:
            rec = {"draft": draft.tokens.tolist(), "accepted": n, "next": verdict.next_token}
            if draft.parents is not None:
                rec["parents"] = draft.parents.tolist()
                rec["path"] = path
            if verdict.record:
                rec.update(verdict.record)
            if draft.info:
                rec["drafter"] = draft.info
            out.step_records.append(rec)
        t4 = time.perf_counter()
        phase["draft"] += t1 - t0
        phase["target"] += t2 - t1
        phase["verify"] += t3 - t2
        phase["rollback"] += rollback
        phase["commit"] += t4 - t3 - rollback
        if out.ttft_s is None:  # the first new token exists once the first step has run
            out.ttft_s = t4 - t_start
        else:  # the gap since the last step's emission (vllm bench's ITL, one per chunk)
            out.itl_s.append(t4 - t_emit)
        t_emit = t4
        if reason is not None:
            out.stop_reason = reason
            break
    sync(device)
    out.decode_s = time.perf_counter() - t_decode
    if prefix_cache is not None:
        # The cache holds every committed token but the pending one (beyond it, at most
        # rejected or cut-off positions): keep exactly the committed part.
        crop_to(cache, tokens.numel() - 1)
        prefix_cache.cache, prefix_cache.tokens, prefix_cache.reused = cache, tokens[:-1].clone(), reused
    return out
