"""vLLM's serving loop as engine=vllm drives it, and what its outputs say: requests added as
they arrive (arrival_offsets: at once, or a seeded Poisson process at engine.request_rate) and
stepped until done (serve), each request's first-token and finish times, a batch's record under
`serving` (serving_record: engine.batch_size by that one name), and tau and per-position
acceptance from vLLM's per-request counters or its Prometheus counters (steps_from_counters,
counter_snapshot). Nothing here imports vLLM: it drives the engine object it is given.
"""

from __future__ import annotations

import dataclasses
import random
import time
import zlib
from collections.abc import Callable, Sequence
from typing import Any

from ..generation import GenerationOutput

# The Prometheus counters of vLLM's speculative decoding (LLM.get_metrics()).
_COUNTERS = ("vllm:spec_decode_num_drafts", "vllm:spec_decode_num_draft_tokens", "vllm:spec_decode_num_accepted_tokens")
_PER_POS = "vllm:spec_decode_num_accepted_tokens_per_pos"


def steps_from_counters(new_tokens: int, accepted: Sequence[int], drafted: Sequence[int]) -> tuple[list[int], list[int], list[int]]:
    """Per target step (drafted, accepted, emitted) lists for one request from vLLM's per-step
    verify counts.

    vLLM lists only the steps that verified a draft; the prefill step (it emits the first
    token) and decode steps without a draft (n-gram found nothing) emit one token each and are
    added as drafted = accepted = 0, after the listed ones (vLLM does not say where they fell).
    A verify step emits accepted + 1 tokens; the last one may be cut by a stop or the limit.
    So sum(emitted) == new_tokens and tau = new tokens / target steps, as in our loop (whose
    prefill emits nothing, and whose first verify step emits the first token).
    """
    d = [int(x) for x in drafted]
    a = [int(x) for x in accepted]
    e = [x + 1 for x in a]
    over = sum(e) + 1 - new_tokens  # + 1: the prefill's token
    while over > 0 and e:
        cut = min(over, e[-1])
        e[-1] -= cut
        over -= cut
        if e[-1] == 0:  # a step whose every token fell past the stop: not a step of this output
            d.pop(), a.pop(), e.pop()
    plain = max(0, new_tokens - sum(e))
    return d + [0] * plain, a + [0] * plain, e + [1] * plain


def counter_snapshot(llm: Any) -> dict[str, Any]:
    """vLLM's speculative-decoding counters now: totals and accepted tokens per draft position."""
    snap: dict[str, Any] = {name: 0.0 for name in _COUNTERS}
    snap[_PER_POS] = {}
    try:
        metrics = llm.get_metrics()
    except Exception:  # stats disabled: no counters
        return snap
    for m in metrics:
        if m.name in _COUNTERS:
            snap[m.name] += float(getattr(m, "value", 0.0))
        elif m.name == _PER_POS:
            for i, v in enumerate(getattr(m, "values", []) or []):
                snap[_PER_POS][i] = snap[_PER_POS].get(i, 0.0) + float(v)
    return snap


def steps_from_snapshots(before: dict[str, Any], after: dict[str, Any]) -> tuple[list[int], list[int]] | None:
    """Per-step (accepted, drafted) of the one request run between two counter snapshots
    (batch 1), rebuilt from the per-position counts: the steps that accepted >= i + 1 tokens
    are the accepted count at position i. None when the counters did not move."""
    drafts = int(round(after[_COUNTERS[0]] - before[_COUNTERS[0]]))
    if drafts <= 0:
        return None
    tokens = after[_COUNTERS[1]] - before[_COUNTERS[1]]
    k = int(round(tokens / drafts))
    reach = [int(round(after[_PER_POS].get(i, 0.0) - before[_PER_POS].get(i, 0.0))) for i in range(k)]
    accepted: list[int] = []
    for j in range(k, -1, -1):  # steps that accepted exactly j draft tokens
        at_least_j = reach[j - 1] if j > 0 else drafts
        more = reach[j] if j < k else 0
        accepted += [j] * max(0, at_least_j - more)
    return accepted, [k] * len(accepted)


def stop_reason(completion: Any) -> str:
    """Our stop reason from vLLM's finish_reason / stop_reason."""
    if completion.finish_reason == "length":
        return "max_new_tokens"
    return "stop_string" if isinstance(completion.stop_reason, str) else "eos"


def to_output(request: Any, wall_s: float, *, speculative: bool, counters: tuple[list[int], list[int]] | None = None,
              times: "RequestTimes | None" = None) -> GenerationOutput:
    """Our GenerationOutput from one vLLM RequestOutput and its share of the call's wall time.

    times (the serving loop's clock for the request): ttft_s and e2e_s from its arrival.
    Without them, ttft_s is vLLM's first-token latency where it reports one. prefill_s is the
    TTFT (at most the share), decode_s the rest of the share, so total_s is the share: at batch
    1 the request's wall time, in a batch its throughput share (wall / B).
    """
    comp = request.outputs[0]
    tokens = [int(t) for t in comp.token_ids]
    accepted: list[int] = []
    drafted: list[int] = []
    metrics = getattr(comp, "spec_decode_metrics", None)
    if speculative and metrics is not None:
        accepted, drafted = list(metrics.per_step_accepted), list(metrics.per_step_drafted)
    elif speculative and counters is not None:
        accepted, drafted = counters
    d, a, e = steps_from_counters(len(tokens), accepted, drafted)
    if times is not None and times.first is not None:
        first = times.first - times.arrival
    else:
        stats = getattr(request, "metrics", None)
        first = float(getattr(stats, "first_token_latency", 0.0) or 0.0)
    prefill = min(max(first, 0.0), wall_s)
    return GenerationOutput(
        new_tokens=tokens,
        stop_reason=stop_reason(comp),
        drafted=d,
        accepted=a,
        emitted=e,
        prefill_s=prefill,
        decode_s=wall_s - prefill,
        # TTFT from the request's arrival (the serving loop), else vLLM's first-token latency;
        # None where neither is known.
        ttft_s=first if first > 0 else None,
        e2e_s=times.latency if times is not None and times.done is not None else None,
    )


@dataclasses.dataclass
class RequestTimes:
    """One request's clock in the serving loop, seconds after its batch started."""

    arrival: float
    first: float | None = None  # the step that returned its first new token
    done: float | None = None  # the step that finished it

    @property
    def latency(self) -> float | None:
        return None if self.done is None else self.done - self.arrival


def arrival_offsets(n: int, rate: float | None, seed: int) -> list[float]:
    """When a batch's n requests arrive, in seconds after its start: all at once (rate None: an
    offline batch), or a Poisson process of `rate` requests per second (exponential gaps from
    `seed`, the first request at 0) - requests arriving while earlier ones run."""
    if not rate:
        return [0.0] * n
    rng = random.Random(seed)
    out, t = [], 0.0
    for _ in range(n):
        out.append(t)
        t += rng.expovariate(float(rate))
    return out


def serve(engine: Any, inputs: Sequence[Any], params: Sequence[Any], offsets: Sequence[float], *, tag: str,
          clock: Callable[[], float] = time.perf_counter, sleep: Callable[[float], None] = time.sleep) -> tuple[list[Any], list[RequestTimes], float]:
    """Drive vLLM's engine (LLM.llm_engine: add_request / step / has_unfinished_requests) step
    by step, adding request i once offsets[i] seconds have passed; the requests' final outputs,
    their times, and the makespan (the first arrival to the last token).

    LLM.generate runs the same step loop with every request added up front; stepping here is
    what lets requests arrive while others run, and gives each request its first-token and
    finish times as a streaming client sees them (to a step's resolution). Params must ask for
    cumulative outputs (RequestOutputKind.CUMULATIVE), so that a step reports every request that
    gained a token.
    """
    n = len(inputs)
    order = sorted(range(n), key=lambda i: offsets[i])
    times = [RequestTimes(arrival=float(offsets[i])) for i in range(n)]
    final: list[Any] = [None] * n
    index: dict[str, int] = {}
    t0 = clock()
    nxt = 0
    while True:
        now = clock() - t0
        while nxt < n and offsets[order[nxt]] <= now:
            i = order[nxt]
            rid = f"{tag}-{i}"
            got = engine.add_request(rid, inputs[i], params[i])
            index[rid] = i
            if isinstance(got, str):  # the engine's own id for it, where it renames requests
                index[got] = i
            nxt += 1
        if engine.has_unfinished_requests():
            for out in engine.step():
                i = index.get(str(out.request_id))
                if i is None:
                    continue
                t = clock() - t0
                if times[i].first is None and out.outputs and len(out.outputs[0].token_ids) > 0:
                    times[i].first = t
                if out.finished:
                    times[i].done = t
                    final[i] = out
        elif nxt < n:
            sleep(max(0.0, offsets[order[nxt]] - (clock() - t0)))
        else:
            break
    missing = [i for i in range(n) if final[i] is None]
    if missing:
        raise RuntimeError(f"vLLM finished without outputs for requests {missing} of batch {tag}")
    start = min(offsets) if n else 0.0
    makespan = max(t.done for t in times if t.done is not None) - start if n else 0.0
    return final, times, makespan


def batch_id(prompts: Sequence[Sequence[int]]) -> str:
    """A batch's name in the records: its prompts' ids hashed (the same batch on a resume)."""
    h = 0
    for ids in prompts:
        h = zlib.crc32(b",".join(str(int(t)).encode() for t in ids) + b";", h)
    return f"{len(prompts)}x{h:08x}"


def serving_record(out: GenerationOutput, *, batch: str, requests: int, batch_size: int, request_rate: float | None,
                   makespan_s: float, batch_tokens: int) -> dict[str, Any]:
    """A request's `serving` record (measure/serving.py reads it): its batch, how many requests
    the batch held, engine.batch_size, the arrival rate, and per repeat of the batch (prefetch
    appends the repeats') the batch's makespan and tokens and the request's own TTFT, end-to-end
    latency and new tokens. Records before issue 71 held the configured size as max_num_seqs and
    the batch's request count as batch_size (serving.batch_size_of reads both)."""
    return {
        "batch": batch,
        "requests": requests,
        "batch_size": batch_size,
        "request_rate": request_rate,
        "makespan_s": [makespan_s],
        "batch_tokens": [batch_tokens],
        "ttft_s": [out.ttft_s],
        "e2e_s": [out.e2e_s],
        "new_tokens": [len(out.new_tokens)],
        "identical_repeats": True,
    }


__all__ = ["RequestTimes", "arrival_offsets", "batch_id", "counter_snapshot", "serve", "serving_record", "steps_from_counters",
           "steps_from_snapshots", "stop_reason", "to_output"]
