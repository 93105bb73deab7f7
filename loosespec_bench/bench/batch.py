#!/usr/bin/env python
"""Throughput of our loop against batch size: tokens per CPU second at batch 1, 2, 4, 8, 16.

For each dtype, the target alone (method=ar), SPD (a draft model, K = --spd-k) and FLy (MLA
drafts, K = --fly-k, the released rule) decode the same --problems GSM8K prompts greedily,
at batch 1 through today's loop (decoding.generate, one problem at a time: what a quality run
at engine.batch_size=1 runs) and at each larger batch through the batched loop
(decoding.batch.generate_batch, rows refilled from the queue). Every (contestant, batch size)
cell runs once per repeat; inside a repeat the batch sizes run back to back in an order that
rotates between repeats, so slow drift of a shared machine falls on every size alike, and the
ratio to batch 1 is taken within a repeat (side by side), then summarised over repeats.

Printed per cell: tokens per CPU second (the process's CPU time, all its threads: what a
quality run pays), tokens per wall second, their 95% intervals over repeats (t, n - 1 degrees
of freedom; "-" with one repeat), the ratio to batch 1 with its interval, and how many outputs
are token for token those of batch 1 (float32: all of them; bf16: the measured share).

Also printed: batch-1 decode time per token of the target alone against the memory-bandwidth
bound on this machine (the target's weight bytes, read once per token, over the GB/s a
streaming read measures here): how far batch 1 is from the bound that batching amortises.

The machine's load (loadavg, other processes' share of the CPU over the run) is printed beside
the figures: on a shared machine the numbers are not quiet ones, and the output says so.

Examples:
  python -m loosespec_bench.bench.batch --tiny --problems 6 --max-new-tokens 12 --repeats 1 --batch-sizes 1,2,4
  flock /tmp/loosespec_cpu.lock python -m loosespec_bench.bench.batch --dtypes float32,bfloat16 --repeats 2 --out batch.json
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from loosespec_bench.decoding import generate
from loosespec_bench.decoding.batch import BatchRequest, BatchStats, generate_batch
from loosespec_bench.drafters import MLADrafter, ModelDrafter
from loosespec_bench.drafters.base import Drafter
from loosespec_bench.step import sync
from loosespec_bench.verifiers.base import Verifier
from loosespec_bench.verifiers.fly import FLy
from loosespec_bench.verifiers.spd import SPD, TargetAlone

CONTESTANTS = ("ar", "spd", "fly")


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m loosespec_bench.bench.batch", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tiny", action="store_true", help="tiny random pair (smoke; the figures mean nothing)")
    p.add_argument("--target", default=None, help="target path (default: the embedded 1.5B)")
    p.add_argument("--draft", default=None, help="draft path (default: the embedded 0.5B)")
    p.add_argument("--dtypes", default="float32,bfloat16", help="comma-separated: float32,bfloat16")
    p.add_argument("--batch-sizes", default="1,2,4,8,16")
    p.add_argument("--contestants", default=",".join(CONTESTANTS), help="ar (target alone), spd, fly")
    p.add_argument("--problems", type=int, default=16, help="GSM8K prompts decoded per cell")
    p.add_argument("--max-new-tokens", type=int, default=48)
    p.add_argument("--max-prompt-tokens", type=int, default=256, help="keep each prompt's last N tokens (prefill cost)")
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--spd-k", type=int, default=10)
    p.add_argument("--fly-k", type=int, default=15)
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    p.add_argument("--device", default="cpu", help="cpu or cuda")
    p.add_argument("--data-dir", default=None)
    p.add_argument("--out", default=None, help="write every measurement as JSON here")
    args = p.parse_args(argv)
    args.dtypes = [d for d in args.dtypes.split(",") if d]
    args.batch_sizes = sorted({int(b) for b in args.batch_sizes.split(",") if b.strip()})
    args.contestants = [c for c in args.contestants.split(",") if c]
    bad = [c for c in args.contestants if c not in CONTESTANTS]
    if bad:
        p.error(f"--contestants: unknown {', '.join(bad)}; choose from {', '.join(CONTESTANTS)}")
    if 1 not in args.batch_sizes:
        args.batch_sizes = [1, *args.batch_sizes]  # every ratio is to batch 1, measured beside it
    return args


# -- the machine ---------------------------------------------------------------------------------
def bandwidth_gbs(device: str, mib: int = 512, tries: int = 5) -> float:
    """Memory read bandwidth in GB/s: the best of `tries` full reductions over a `mib` MiB
    float32 tensor (every byte read once, nothing written back but one number)."""
    x = torch.ones(mib * 2**20 // 4, dtype=torch.float32, device=device)
    best = math.inf
    for _ in range(tries):
        sync(x.device)
        t = time.perf_counter()
        x.sum()
        sync(x.device)
        best = min(best, time.perf_counter() - t)
    return x.numel() * 4 / best / 1e9


def weight_bytes(model: torch.nn.Module) -> int:
    """Bytes of the model's parameters (a tied embedding counted once, as parameters() does)."""
    return sum(p.numel() * p.element_size() for p in model.parameters())


def load_state() -> dict[str, Any]:
    try:
        load = os.getloadavg()
    except OSError:
        load = (math.nan,) * 3
    return {"loadavg_1m": load[0], "cpus": os.cpu_count()}


class CpuShare:
    """Other processes' share of the machine's CPU over an interval (/proc/stat minus ours)."""

    def __init__(self) -> None:
        self.t0 = self._total()
        self.own0 = time.process_time()
        self.w0 = time.perf_counter()

    @staticmethod
    def _total() -> float | None:
        try:
            with open("/proc/stat", encoding="ascii") as f:
                vals = [float(v) for v in f.readline().split()[1:]]
            busy = sum(vals) - vals[3] - (vals[4] if len(vals) > 4 else 0.0)
            return busy / os.sysconf("SC_CLK_TCK")
        except (OSError, ValueError, IndexError):
            return None

    def others(self) -> float | None:
        t1 = self._total()
        if t1 is None or self.t0 is None:
            return None
        wall = time.perf_counter() - self.w0
        cpus = os.cpu_count() or 1
        busy = (t1 - self.t0) - (time.process_time() - self.own0)
        return max(0.0, min(1.0, busy / (wall * cpus))) if wall > 0 else None


# -- the contestants ----------------------------------------------------------------------------
@dataclass
class Contestant:
    name: str
    verifier: Verifier
    make_drafter: Callable[[], Drafter | None]


def contestants(names: list[str], draft: torch.nn.Module | None, spd_k: int, fly_k: int) -> list[Contestant]:
    table = {
        "ar": Contestant("ar", TargetAlone(), lambda: None),
        "spd": Contestant("spd", SPD(), lambda: ModelDrafter(draft, k=spd_k)),
        "fly": Contestant("fly", FLy(), lambda: MLADrafter(draft, k=fly_k)),
    }
    return [table[n] for n in names]


@dataclass
class Cell:
    """One (dtype, contestant, batch size): one measurement per repeat."""

    tokens: list[int] = field(default_factory=list)
    cpu_s: list[float] = field(default_factory=list)
    wall_s: list[float] = field(default_factory=list)
    identical: list[int] = field(default_factory=list)  # outputs equal to batch 1's, per repeat
    mean_rows: list[float] = field(default_factory=list)

    def tps_cpu(self) -> list[float]:
        return [t / c for t, c in zip(self.tokens, self.cpu_s) if c > 0]

    def tps_wall(self) -> list[float]:
        return [t / w for t, w in zip(self.tokens, self.wall_s) if w > 0]


def run_cell(target: torch.nn.Module, c: Contestant, prompts: list[torch.Tensor], batch: int, max_new: int,
             eos: set[int]) -> tuple[list[list[int]], float, float, float]:
    """Every prompt decoded at this batch size: (outputs, CPU s, wall s, mean rows per forward)."""
    device = target.device
    sync(device)
    c0, w0 = time.process_time(), time.perf_counter()
    rows = 1.0
    if batch == 1:  # today's loop, one problem at a time
        outs = [generate(target, p, verifier=c.verifier, drafter=c.make_drafter(), max_new_tokens=max_new,
                         eos_token_ids=eos).new_tokens for p in prompts]
    else:
        stats = BatchStats()
        reqs = [BatchRequest(p, None, max_new) for p in prompts]
        outs = [o.new_tokens for o in generate_batch(target, reqs, verifier=c.verifier, drafter=c.make_drafter(),
                                                      batch_size=batch, eos_token_ids=eos, stats=stats)]
        rows = stats.mean_rows
    sync(device)
    return outs, time.process_time() - c0, time.perf_counter() - w0, rows


def interval(xs: list[float]) -> tuple[float, float, float]:
    """Mean and 95% t-interval over repeats (nan bounds with one repeat)."""
    m = statistics.fmean(xs) if xs else math.nan
    if len(xs) < 2:
        return m, math.nan, math.nan
    from scipy.stats import t as student

    half = student.ppf(0.975, len(xs) - 1) * statistics.stdev(xs) / math.sqrt(len(xs))
    return m, m - half, m + half


def fmt(m: float, lo: float, hi: float, digits: int = 2) -> str:
    if math.isnan(lo):
        return f"{m:.{digits}f} [-]"
    return f"{m:.{digits}f} [{lo:.{digits}f}, {hi:.{digits}f}]"


# -- the run ------------------------------------------------------------------------------------
def load_pair(args: argparse.Namespace, dtype: str) -> tuple[torch.nn.Module, torch.nn.Module | None, Any]:
    if args.tiny:
        from loosespec_bench.models.tiny import tiny_model, tiny_near_copy, tiny_tokenizer

        to = getattr(torch, dtype)
        return tiny_model(0).to(args.device, to), tiny_near_copy(0).to(args.device, to), tiny_tokenizer()
    from loosespec_bench.bench.prompts import DRAFT, TARGET
    from loosespec_bench.models import load_model

    target = load_model(args.target or TARGET, dtype=dtype, device=args.device)
    needs_draft = any(c != "ar" for c in args.contestants)
    draft = load_model(args.draft or DRAFT, dtype=dtype, device=args.device).model if needs_draft else None
    return target.model, draft, target.tokenizer


def prompts_for(args: argparse.Namespace, tokenizer: Any) -> list[torch.Tensor]:
    if args.tiny:
        texts = ["def add(a, b):\n    return a + b\n\ndef add(", "Question: 3 + 4 = ?", "hello hello hello",
                 "1, 2, 3, 4,", "The quick brown fox", "for i in range(3):\n    print(i)\nfor"]
        return [torch.tensor(tokenizer(texts[i % len(texts)] + " " * (i // len(texts)), add_special_tokens=False).input_ids)
                for i in range(args.problems)]
    from loosespec_bench.bench.prompts import build_prompts, data_dir

    return [p.ids for p in build_prompts(["gsm8k"], args.problems, data_dir(args.data_dir), tokenizer, args.max_prompt_tokens)]


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    print(f"[batch bench] torch threads {torch.get_num_threads()}, device {args.device}, problems {args.problems}, "
          f"max_new_tokens {args.max_new_tokens}, prompts cut to {args.max_prompt_tokens} tokens, repeats {args.repeats}",
          flush=True)
    state_start = load_state()
    share = CpuShare()
    gbs = bandwidth_gbs(args.device)
    print(f"[batch bench] memory read bandwidth {gbs:.1f} GB/s (best of 5 sums over 512 MiB); loadavg "
          f"{state_start['loadavg_1m']:.2f} on {state_start['cpus']} CPUs", flush=True)
    results: dict[str, Any] = {"args": {k: v for k, v in vars(args).items()}, "bandwidth_gbs": gbs, "dtypes": {}}
    for dtype in args.dtypes:
        target, draft, tok = load_pair(args, dtype)
        prompts = prompts_for(args, tok)
        eos = {int(i) for i in [getattr(tok, "eos_token_id", None)] if i is not None}
        eos |= {int(i) for i in (getattr(target.generation_config, "eos_token_id", None) or []) if isinstance(i, int)} \
            if isinstance(getattr(target.generation_config, "eos_token_id", None), list) else set()
        cs = contestants(args.contestants, draft, args.spd_k, args.fly_k)
        for c in cs:  # untimed warm-up: first-call allocations at batch 1 and in a batch (two short prompts)
            run_cell(target, c, [p[-16:] for p in prompts[:2]], 1, 3, eos)
            run_cell(target, c, [p[-16:] for p in prompts[:2]], 2, 3, eos)
        cells: dict[tuple[str, int], Cell] = {(c.name, b): Cell() for c in cs for b in args.batch_sizes}
        for r in range(args.repeats):
            for c in cs:
                sizes = args.batch_sizes[r % len(args.batch_sizes):] + args.batch_sizes[: r % len(args.batch_sizes)]
                ref: list[list[int]] | None = None
                got: dict[int, list[list[int]]] = {}
                for b in sizes:
                    outs, cpu, wall, rows = run_cell(target, c, prompts, b, args.max_new_tokens, eos)
                    cell = cells[(c.name, b)]
                    cell.tokens.append(sum(len(o) for o in outs))
                    cell.cpu_s.append(cpu)
                    cell.wall_s.append(wall)
                    cell.mean_rows.append(rows)
                    got[b] = outs
                    print(f"  {dtype} {c.name} batch {b:>2} repeat {r}: {cell.tokens[-1]} tokens, {cpu:.1f} CPU s, "
                          f"{wall:.1f} wall s, {rows:.1f} rows/forward", flush=True)
                ref = got[1]
                for b in sizes:
                    cells[(c.name, b)].identical.append(sum(x == y for x, y in zip(got[b], ref)))
        # Batch-1 decode time per token of the target alone, against the bandwidth bound.
        wb = weight_bytes(target)
        bound = wb / (gbs * 1e9)
        probe = [generate(target, p, verifier=TargetAlone(), max_new_tokens=args.max_new_tokens, eos_token_ids=eos)
                 for p in prompts[: min(4, len(prompts))]]
        per_token = sum(o.decode_s for o in probe) / max(1, sum(o.steps for o in probe))
        results["dtypes"][dtype] = {
            "weight_bytes": wb, "bound_s_per_token": bound, "batch1_decode_s_per_token": per_token,
            "cells": {f"{n}@{b}": vars(cell) for (n, b), cell in cells.items()},
        }
        print_table(dtype, cs, args.batch_sizes, cells, len(prompts))
        print(f"{dtype}: target alone at batch 1 decodes a token in {per_token * 1e3:.1f} ms (wall); the bandwidth bound "
              f"(weights {wb / 1e9:.2f} GB read once per token at {gbs:.1f} GB/s) is {bound * 1e3:.1f} ms: "
              f"{per_token / bound:.2f}x the bound", flush=True)
        del target, draft
    others = share.others()
    state_end = load_state()
    results["load"] = {"start": state_start, "end": state_end, "others_cpu_share": others}
    quiet = others is not None and others < 0.10
    print(f"machine: loadavg {state_start['loadavg_1m']:.2f} -> {state_end['loadavg_1m']:.2f}, other processes used "
          f"{'?' if others is None else f'{others:.0%}'} of the CPU over the run: "
          + ("quiet enough to cite" if quiet else "NOT a quiet machine: these figures are under contention; rerun alone to cite them"),
          flush=True)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            json.dump(results, f, indent=1, default=str)
        print(f"written: {args.out}")
    return 0


def print_table(dtype: str, cs: list[Contestant], sizes: list[int], cells: dict[tuple[str, int], Cell], n: int) -> None:
    print(f"\n{dtype}: tokens per CPU second (95% interval over repeats), ratio to batch 1 (same repeat), identical to batch 1")
    print(f"{'contestant':<10} {'batch':>5}  {'tok/CPU s':<22} {'tok/wall s':<22} {'x batch 1 (CPU)':<22} {'identical':>9} {'rows/fwd':>8}")
    for c in cs:
        base = cells[(c.name, 1)].tps_cpu()
        for b in sizes:
            cell = cells[(c.name, b)]
            tc, tw = cell.tps_cpu(), cell.tps_wall()
            ratios = [x / y for x, y in zip(tc, base) if y > 0]
            ident = f"{sum(cell.identical)}/{n * len(cell.identical)}"
            print(f"{c.name:<10} {b:>5}  {fmt(*interval(tc)):<22} {fmt(*interval(tw)):<22} {fmt(*interval(ratios)):<22} "
                  f"{ident:>9} {statistics.fmean(cell.mean_rows):>8.1f}")
    print(flush=True)


if __name__ == "__main__":
    sys.exit(main())
