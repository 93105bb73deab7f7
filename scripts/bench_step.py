#!/usr/bin/env python
"""Where the target alone's 1-token decode step goes: our loop as the app runs it, as the engine
benchmark runs it, and bare forward loops, side by side in one process on the same prompts.

Contestants (all the target alone, greedy, the prompts of the engine benchmark, loosespec_bench.bench, interleaved in
rotating order after a warm-up):

  app      our loop with the app's settings: the task's stop strings, record_steps=true, the
           process's objects left to Python's cyclic collector (the app never freezes them)
  bench    our loop as the engine benchmark's `ar`: no stop strings, no records, objects frozen
  bare     a minimal greedy loop: one target forward per token and an argmax, our CPU fast paths
           (decoding/cpu.py: packed GQA attention, prepacked linears), no loop bookkeeping
  stock    the same minimal loop on transformers' stock kernels (sdpa, aten linear)
  stock-last  stock, the forward asked for the last row's logits only (logits_to_keep=1)

Printed per contestant: ms per decode step (decode time / steps; prefill excluded), the share of
it spent in Python's garbage collector (gc.callbacks), the ratio to `bench`. --profile N adds a
torch.profiler table over N decode steps of `bare`: time per op group (linear layers, attention,
the LM head, element-wise ops) and what no op accounts for (Python and dispatch).

  python scripts/bench_step.py --prompts-per-set 1 --repeats 2 --max-new-tokens 64 --profile 32
  .venv-vllm/bin/python scripts/bench_vllm_step.py ...   # vLLM's step on the same prompts

Lab script, kept in scripts/ (not installed with the package): it is the evidence for docs/vllm.md's
decode-step table (results/bench/vllm-2026-12-01/step_ours.json); a profiling aid for the loop, not
a tool a run needs.
"""

from __future__ import annotations

import os

from loosespec_bench.omp import default_wait_policy, keep_stock_weights  # before torch loads libgomp (see loosespec_bench/bench/engine.py)

default_wait_policy()

import argparse  # noqa: E402
import gc  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any, Callable  # noqa: E402

import torch  # noqa: E402
from transformers import DynamicCache  # noqa: E402

from loosespec_bench.bench.analysis import fmt  # noqa: E402
from loosespec_bench.bench.prompts import DEFAULT_SETS, TARGET, Prompt, build_prompts, data_dir, load_avg  # noqa: E402
from loosespec_bench.tasks.prompting import eos_ids  # noqa: E402

from loosespec_bench.decoding.cpu import cpu_fast_paths  # noqa: E402
from loosespec_bench.engines.hf import HFEngine  # noqa: E402
from loosespec_bench.models.loading import load_model  # noqa: E402
from loosespec_bench.omp import describe as omp_describe  # noqa: E402
from loosespec_bench.verifiers.spd import SPD  # noqa: E402

CONTESTANTS = ("app", "bench", "bare", "stock", "stock-last")


class GcClock:
    """Seconds Python's cyclic collector ran (all generations), via gc.callbacks."""

    def __init__(self) -> None:
        self.s = 0.0
        self.n = 0
        self._t = 0.0
        gc.callbacks.append(self._cb)

    def _cb(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._t = time.perf_counter()
        else:
            self.s += time.perf_counter() - self._t
            self.n += 1


@torch.inference_mode()
def bare_loop(model: torch.nn.Module, ids: list[int], max_new: int, eos: set[int], fast: bool, last_only: bool) -> tuple[int, float]:
    """Greedy target-alone decoding with nothing but the forwards: (decode steps, decode seconds)."""
    from contextlib import nullcontext

    with cpu_fast_paths(model) if fast else nullcontext():
        cache = DynamicCache(config=model.config)
        x = torch.tensor(ids, dtype=torch.long)[None]
        out = model(x, cache=cache, use_cache=True, logits_to_keep=1)
        tok = int(out.logits[0, -1].argmax())
        t0 = time.perf_counter()
        steps = 0
        while steps < max_new - 1 and tok not in eos:
            kw = {"logits_to_keep": 1} if last_only else {}
            out = model(torch.tensor([[tok]]), cache=cache, use_cache=True, **kw)
            tok = int(out.logits[0, -1].float().argmax())
            steps += 1
        return steps, time.perf_counter() - t0


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--prompts-per-set", type=int, default=1)
    ap.add_argument("--sets", default=DEFAULT_SETS)
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--contestants", default=",".join(CONTESTANTS))
    ap.add_argument("--target", default=TARGET)
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--profile", type=int, default=0, help="torch.profiler over this many decode steps of `bare` (0: none)")
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    args.contestants = [c.strip() for c in args.contestants.split(",") if c.strip()]
    bad = [c for c in args.contestants if c not in CONTESTANTS]
    if bad:
        ap.error(f"unknown contestants {bad}; choose from {', '.join(CONTESTANTS)}")
    return args


def op_groups(model: torch.nn.Module, ids: list[int], steps: int) -> dict[str, float]:
    """ms per decode step by op group, from torch.profiler's self CPU times over `steps` steps
    of the bare loop with our fast paths; `unaccounted` = wall time no op covers."""
    from torch.profiler import ProfilerActivity, profile

    bare_loop(model, ids, 4, set(), True, False)  # warm
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        t0 = time.perf_counter()
        n, _ = bare_loop(model, ids, steps + 1, set(), True, False)
        wall = time.perf_counter() - t0
    groups: dict[str, float] = {}
    rules: list[tuple[str, Callable[[str], bool]]] = [
        ("linear (oneDNN prepacked / aten mm)", lambda k: "linear" in k or "mm" in k or "matmul" in k),
        ("attention (sdpa)", lambda k: "attention" in k or "sdpa" in k or "flash" in k),
        ("element-wise / norm / rotary / copies", lambda k: True),
    ]
    total = 0.0
    rows = []
    for ev in prof.key_averages():
        self_us = ev.self_cpu_time_total
        total += self_us
        rows.append((self_us, ev.key, ev.count))
        for name, match in rules:
            if match(ev.key.lower()):
                groups[name] = groups.get(name, 0.0) + self_us
                break
    per_step = {k: v / 1000 / (n + 1) for k, v in groups.items()}  # + 1: the prefill is in the trace too
    per_step["wall (traced)"] = 1000 * wall / (n + 1)
    per_step["top ops"] = [(k, round(us / 1000 / (n + 1), 3), c // (n + 1)) for us, k, c in sorted(rows, reverse=True)[:15]]
    return per_step


def main(argv: list[str] | None = None) -> dict[str, Any]:
    keep_stock_weights()  # one model runs with and without the fast paths: its stock weights stay
    args = parse_args(argv)
    data = data_dir(args.data_dir)
    load_before = load_avg()
    target = load_model(args.target, dtype=args.dtype)
    model = target.model
    eos = set(eos_ids(target))
    prompts = build_prompts(args.sets.split(","), args.prompts_per_set, data, target.tokenizer, None)
    engines = {
        "app": lambda p: HFEngine.from_parts(target, verifier=SPD(), drafter=None, stop_strings=p.task.stop_strings, record_steps=True),
        "bench": lambda p: HFEngine.from_parts(target, verifier=SPD(), drafter=None),
    }
    clock = GcClock()

    def run(name: str, p: Prompt, max_new: int) -> tuple[int, float, float]:
        """(decode steps, decode seconds, GC seconds inside) of one generation."""
        if name == "app":
            gc.unfreeze()  # the app leaves every object to the collector
        else:
            gc.collect()
            gc.freeze()  # the engine benchmark freezes what is alive before its runs
        g0 = clock.s
        if name in engines:
            # method=True with record_steps: the app's method=ar; the loop's steps include the first.
            out = engines[name](p).generate(p.ids.tolist(), method=True, seed=0, max_new_tokens=max_new)
            steps, decode = len(out.emitted), out.decode_s or 0.0
        else:
            steps, decode = bare_loop(model, p.ids.tolist(), max_new, eos, name == "bare", name == "stock-last")
        return steps, decode, clock.s - g0

    names = args.contestants
    for n in names:
        run(n, prompts[0], 8)
    rows: list[dict[str, Any]] = []
    for i, p in enumerate(prompts):
        for r in range(args.repeats):
            shift = (i * args.repeats + r) % len(names)
            for n in names[shift:] + names[:shift]:
                steps, decode, gc_s = run(n, p, args.max_new_tokens)
                rows.append({"contestant": n, "set": p.set, "prompt": p.id, "repeat": r, "steps": steps, "decode_s": decode, "gc_s": gc_s,
                             "prompt_tokens": int(p.ids.numel())})
                print(f"[step] {p.set}/{p.id} r{r} {n:<10} {steps:>4} steps {1000 * decode / max(1, steps):7.2f} ms/step "
                      f"gc {1000 * gc_s:6.1f} ms  load {load_avg()}", flush=True)
    gc.unfreeze()
    res: dict[str, Any] = {"contestants": {}, "load_before": load_before, "omp": omp_describe(), "threads": torch.get_num_threads()}
    for n in names:
        rs = [x for x in rows if x["contestant"] == n]
        steps, decode = sum(x["steps"] for x in rs), sum(x["decode_s"] for x in rs)
        res["contestants"][n] = {
            "step_ms": 1000 * decode / steps, "step_ms_min_max": [min(1000 * x["decode_s"] / x["steps"] for x in rs), max(1000 * x["decode_s"] / x["steps"] for x in rs)],
            "gc_share": sum(x["gc_s"] for x in rs) / decode, "steps": steps,
        }
    ref = "bench" if "bench" in names else names[0]
    by = {(x["contestant"], x["set"], x["prompt"], x["repeat"]): x for x in rows}
    for n in names:
        # Paired: the same (prompt, repeat), ms per step of n / of ref.
        ratios = [(by[(n, *k[1:])]["decode_s"] / by[(n, *k[1:])]["steps"]) / (x["decode_s"] / x["steps"])
                  for k, x in by.items() if k[0] == ref and (n, *k[1:]) in by]
        res["contestants"][n]["ratio_to_" + ref] = statistics.median(ratios) if ratios else None
    if args.profile:
        res["profile"] = op_groups(model, prompts[0].ids.tolist(), args.profile)
    res["load_after"] = load_avg()
    print(f"\n== ms per 1-token decode step, target alone ({args.target}, {args.dtype}, {res['threads']} threads, {res['omp']}; "
          f"{len(prompts)} prompts x {args.repeats} repeats x <= {args.max_new_tokens} tokens; load {load_before} -> {res['load_after']})")
    print(f"{'contestant':<12}{'ms/step':>9}{'min-max':>16}{'GC share':>10}{f'vs {ref} (paired median)':>26}")
    for n, c in res["contestants"].items():
        lo, hi = c["step_ms_min_max"]
        print(f"{n:<12}{c['step_ms']:>9.2f}{f'{lo:.1f}-{hi:.1f}':>16}{c['gc_share']:>10.2%}{fmt(c['ratio_to_' + ref], '.3f'):>26}")
    if args.profile:
        print(f"\n== torch.profiler, bare loop with our fast paths, {args.profile} steps (ms per step, self CPU time)")
        for k, v in res["profile"].items():
            if k != "top ops":
                print(f"  {k:<42}{v:8.2f}")
        for k, ms, calls in res["profile"]["top ops"]:
            print(f"    {k:<50}{ms:8.3f} ms  {calls:>5} calls/step")
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps({**res, "rows": rows, "args": vars(args)}, indent=1, default=str))
    return res


if __name__ == "__main__":
    main()
