#!/usr/bin/env python
"""Throughput of our loop against batch size: tokens per CPU second at batch 1, 2, 4, 8, 16.

For each dtype, the target alone (method=ar), SPD (a draft model, K = --spd-k) and FLy + MLA
(fly_mla: MLA drafts, K = --fly-k, the released rule) decode the same --problems GSM8K prompts
greedily, at batch 1 through today's loop (decoding.generate, one problem at a time: what a
quality run at engine.batch_size=1 runs) and at each larger batch through the batched loop
(decoding.batch.generate_batch, rows refilled from the queue). Every (contestant, batch size)
cell runs once per repeat; inside a repeat the batch sizes run back to back in an order that
rotates between repeats, so slow drift of a shared machine falls on every size alike, and the
ratio to batch 1 is taken within a repeat (side by side), then summarised over repeats.

Printed per cell: tokens per CPU second (the process's CPU time, all its threads: what a
quality run pays), tokens per wall second, their 95% intervals over repeats (t, n - 1 degrees
of freedom; "-" with one repeat), the ratio to batch 1 with its interval, and how many outputs
are token for token those of batch 1 (float32: all of them; bf16: the measured share).

Prompts are prefilled one at a time at every batch size (a batch's empty row runs its prompt
alone, as batch 1 does), so the prefill is the same work in every cell; its share of the CPU
time (every forward over an empty cache, target and draft model, timed by forward hooks) is
printed per cell, with the decode-only tokens per CPU second (the cell's CPU time less its
prefills'): with short generations the prefill dilutes what batching gains.

Also printed: batch-1 decode time per token of the target alone against the memory-bandwidth
bound on this machine: the bytes one decode forward reads (bench.forward_cost.model_bytes:
each parameter tensor once, a tied LM head's table once, the input embedding left out since a
forward gathers only its rows), over the faster of two reads measured here (a 1-row matmul
over a prepacked weight of the model's dtype, the kernel the loop's linears use, and a plain
fp32 sum). Batch 1 faster than that "bound" means the measured bandwidth understates what the
loop reaches (measured under contention, or cache effects), and the output says so.

The machine's load (loadavg, other processes' share of the CPU over the run) is printed beside
the figures: on a shared machine the numbers are not quiet ones, and the output says so.

Examples:
  python -m loosespec_bench.bench.batch --tiny --problems 6 --max-new-tokens 12 --repeats 1 --batch-sizes 1,2,4
  flock /tmp/loosespec_cpu.lock python -m loosespec_bench.bench.batch --dtypes float32,bfloat16 --repeats 2 --out batch.json
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import statistics
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import torch

from loosespec_bench.bench.forward_cost import bandwidth, model_bytes
from loosespec_bench.decoding import generate
from loosespec_bench.decoding.batch import BatchRequest, BatchStats, generate_batch
from loosespec_bench.drafters import MLADrafter, ModelDrafter
from loosespec_bench.drafters.base import Drafter
from loosespec_bench.engines.settings import HF_MAX_BATCH
from loosespec_bench.errors import ConfigError
from loosespec_bench.measure import speed_configs as configs
from loosespec_bench.safe_files import atomic_write_text, check_write_target
from loosespec_bench.step import sync
from loosespec_bench.verifiers.base import Verifier
from loosespec_bench.verifiers.fly import FLy
from loosespec_bench.verifiers.spd import SPD, TargetAlone

# By the names measure/speed_configs.py declares. Before issue 71 this bench called FLy + MLA "fly"
# (configs.BATCH_OLD_NAMES): --contestants still takes it, and read_cells reads its old files so.
CONTESTANTS = (configs.TARGET_ALONE, configs.SPD, configs.FLY_MLA)
# Set in every --out file written since: its names are the declared ones (no old "fly").
NAMES_DECLARED = "names_declared"
DTYPES = ("float32", "bfloat16", "float16")


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m loosespec_bench.bench.batch", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tiny", action="store_true", help="tiny random pair (smoke; the figures mean nothing)")
    p.add_argument("--target", default=None, help="target path (default: the embedded 1.5B)")
    p.add_argument("--draft", default=None, help="draft path (default: the embedded 0.5B)")
    p.add_argument("--dtypes", default="float32,bfloat16", help="comma-separated: float32,bfloat16")
    p.add_argument("--batch-sizes", default="1,2,4,8,16")
    p.add_argument("--contestants", default=",".join(CONTESTANTS),
                   help=", ".join(f"{n} ({configs.config_label(n)})" for n in CONTESTANTS)
                   + "".join(f"; {old}: the old name of {new}" for old, new in configs.BATCH_OLD_NAMES.items()))
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
    if not args.dtypes or set(args.dtypes) - set(DTYPES):
        p.error(f"--dtypes takes a comma list of {', '.join(DTYPES)}, got {','.join(args.dtypes) or 'nothing'}")
    try:
        args.batch_sizes = sorted({int(b) for b in args.batch_sizes.split(",") if b.strip()})
    except ValueError:
        p.error("--batch-sizes takes a comma list of whole numbers, e.g. 1,2,4,8,16")
    if not args.batch_sizes or min(args.batch_sizes) < 1 or max(args.batch_sizes) > HF_MAX_BATCH:
        p.error(f"--batch-sizes: each from 1 to {HF_MAX_BATCH} (what our loop batches: engines/settings.py's HFParams)")
    given = [c for c in args.contestants.split(",") if c]
    args.contestants, bad = configs.pick(given, CONTESTANTS, configs.BATCH_OLD_NAMES)
    if bad or not args.contestants:
        p.error(f"--contestants: unknown {', '.join(bad) or 'nothing'}; choose from {', '.join(CONTESTANTS)}")
    for old in sorted(set(given) & set(configs.BATCH_OLD_NAMES)):
        new = configs.BATCH_OLD_NAMES[old]
        print(f"note: --contestants {old} is this bench's old name of {new} ({configs.config_label(new)}): "
              f"it runs, and is recorded, as {new}", file=sys.stderr, flush=True)
    for name in ("problems", "max_new_tokens", "max_prompt_tokens", "repeats", "spd_k", "fly_k"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be at least 1, got {getattr(args, name)}")
    if args.threads is not None and args.threads < 1:
        p.error(f"--threads must be at least 1, got {args.threads}")
    if args.out:
        try:
            check_write_target(args.out)  # before any model loads: a folder that is not there, a link
        except ConfigError as err:
            p.error(f"--out: {err}")
    if 1 not in args.batch_sizes:
        args.batch_sizes = [1, *args.batch_sizes]  # every ratio is to batch 1, measured beside it
    return args


# -- the machine ---------------------------------------------------------------------------------
def bound(model: torch.nn.Module, device: str, tiny: bool) -> dict[str, Any]:
    """The bandwidth bound of one decode forward of `model`: the bytes it reads (model_bytes) over
    the faster of the two reads measured now (bench.forward_cost.bandwidth; on CPU only: an
    accelerator's own bound is its data sheet's)."""
    dtype = next(model.parameters()).dtype
    counted = model_bytes(model)
    out: dict[str, Any] = {"weight_bytes": counted, "dtype": str(dtype).removeprefix("torch."), "device": device}
    if device != "cpu":
        return out
    bw = bandwidth(dtype, 64 if tiny else 1024, 5)
    best = max(v for v in bw.values() if v and math.isfinite(v))
    out.update(bw, gb_s=best, bound_s_per_token=counted / (best * 1e9))
    return out


class PrefillClock:
    """CPU seconds of every forward that starts on an empty cache (a prompt's prefill; the draft
    model's first forward of a problem, which MLA's first guess rides along), of the models it
    watches, at batch 1 and in a batch alike: both loops run a prompt alone through the
    CausalLM's own forward (the batched loop's ragged forwards call the decoder, never this)."""

    def __init__(self) -> None:
        self.cpu_s = 0.0
        self._t0: float | None = None

    @contextlib.contextmanager
    def watch(self, *models: torch.nn.Module | None) -> Iterator["PrefillClock"]:
        def before(module: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
            cache = kwargs.get("cache", kwargs.get("past_key_values"))
            if cache is None or cache.get_seq_length() == 0:
                self._t0 = time.process_time()

        def after(module: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any], output: Any) -> None:
            if self._t0 is not None:
                self.cpu_s += time.process_time() - self._t0
                self._t0 = None

        handles = []
        for m in {id(m): m for m in models if m is not None}.values():
            handles += [m.register_forward_pre_hook(before, with_kwargs=True), m.register_forward_hook(after, with_kwargs=True)]
        try:
            yield self
        finally:
            for h in handles:
                h.remove()


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
        configs.TARGET_ALONE: Contestant(configs.TARGET_ALONE, TargetAlone(), lambda: None),
        configs.SPD: Contestant(configs.SPD, SPD(), lambda: ModelDrafter(draft, k=spd_k)),
        configs.FLY_MLA: Contestant(configs.FLY_MLA, FLy(), lambda: MLADrafter(draft, k=fly_k)),
    }
    return [table[n] for n in names]


@dataclass
class Cell:
    """One (dtype, contestant, batch size): one measurement per repeat."""

    tokens: list[int] = field(default_factory=list)
    cpu_s: list[float] = field(default_factory=list)
    wall_s: list[float] = field(default_factory=list)
    prefill_cpu_s: list[float] = field(default_factory=list)  # of cpu_s: forwards over an empty cache
    identical: list[int] = field(default_factory=list)  # outputs equal to batch 1's, per repeat
    mean_rows: list[float] = field(default_factory=list)

    def tps_cpu(self) -> list[float]:
        return [t / c for t, c in zip(self.tokens, self.cpu_s) if c > 0]

    def tps_decode_cpu(self) -> list[float]:
        """Tokens per CPU second of decoding: each repeat's CPU time less its prefills'."""
        return [t / (c - p) for t, c, p in zip(self.tokens, self.cpu_s, self.prefill_cpu_s) if c - p > 0]

    def prefill_share(self) -> list[float]:
        return [p / c for c, p in zip(self.cpu_s, self.prefill_cpu_s) if c > 0]

    def tps_wall(self) -> list[float]:
        return [t / w for t, w in zip(self.tokens, self.wall_s) if w > 0]


def run_cell(target: torch.nn.Module, c: Contestant, prompts: list[torch.Tensor], batch: int, max_new: int,
             eos: set[int]) -> tuple[list[list[int]], float, float, float, float]:
    """Every prompt decoded at this batch size: (outputs, CPU s, wall s, mean rows per forward,
    CPU s of the prefills among them)."""
    device = target.device
    drafter = c.make_drafter()
    clock = PrefillClock()
    sync(device)
    c0, w0 = time.process_time(), time.perf_counter()
    rows = 1.0
    with clock.watch(target, *(drafter.modules() if drafter is not None else [])):
        if batch == 1:  # today's loop, one problem at a time
            outs = [generate(target, p, verifier=c.verifier, drafter=drafter, max_new_tokens=max_new,
                             eos_token_ids=eos).new_tokens for p in prompts]
        else:
            stats = BatchStats()
            reqs = [BatchRequest(p, None, max_new) for p in prompts]
            outs = [o.new_tokens for o in generate_batch(target, reqs, verifier=c.verifier, drafter=drafter,
                                                          batch_size=batch, eos_token_ids=eos, stats=stats)]
            rows = stats.mean_rows
        sync(device)
    return outs, time.process_time() - c0, time.perf_counter() - w0, rows, clock.cpu_s


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


def read_cells(data: dict[str, Any]) -> dict[str, dict[tuple[str, int], dict[str, Any]]]:
    """An --out file's cells per dtype, keyed (declared name, batch size). A file written before
    this bench recorded NAMES_DECLARED called FLy + MLA "fly" (configs.BATCH_OLD_NAMES): read so."""
    old_names = None if data.get(NAMES_DECLARED) else configs.BATCH_OLD_NAMES
    out: dict[str, dict[tuple[str, int], dict[str, Any]]] = {}
    for dtype, res in data.get("dtypes", {}).items():
        cells = out.setdefault(dtype, {})
        for key, cell in res.get("cells", {}).items():
            name, _, batch = key.rpartition("@")
            cells[(configs.canonical(name, old_names), int(batch))] = cell
    return out


# -- the run ------------------------------------------------------------------------------------
def load_pair(args: argparse.Namespace, dtype: str) -> tuple[torch.nn.Module, torch.nn.Module | None, Any]:
    if args.tiny:
        from loosespec_bench.models.tiny import tiny_model, tiny_near_copy, tiny_tokenizer

        to = getattr(torch, dtype)
        return tiny_model(0).to(args.device, to), tiny_near_copy(0).to(args.device, to), tiny_tokenizer()
    from loosespec_bench.bench.prompts import DRAFT, TARGET
    from loosespec_bench.models import load_model

    target = load_model(args.target or TARGET, dtype=dtype, device=args.device)
    needs_draft = any(c != configs.TARGET_ALONE for c in args.contestants)
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


def check_data(args: argparse.Namespace) -> None:
    """The GSM8K problems the bench decodes, read before any model loads, so that a missing or
    damaged data set is one error line (a ConfigError naming the file), not a traceback after
    the models have loaded."""
    if args.tiny:
        return
    from loosespec_bench.bench.prompts import build_task, data_dir

    n = len(build_task("gsm8k", data_dir(args.data_dir)).samples())
    if n < args.problems:
        raise ConfigError(f"--problems {args.problems}: the GSM8K data set holds {n} problems; ask for at most {n}")


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    try:
        check_data(args)
        return run(args)
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr, flush=True)
        return 2


def run(args: argparse.Namespace) -> int:
    """Every cell of every dtype, the tables, the bound and the load; 0 when done."""
    if args.threads:
        torch.set_num_threads(args.threads)
    print(f"[batch bench] torch threads {torch.get_num_threads()}, device {args.device}, problems {args.problems}, "
          f"max_new_tokens {args.max_new_tokens}, prompts cut to {args.max_prompt_tokens} tokens, repeats {args.repeats}",
          flush=True)
    state_start = load_state()
    share = CpuShare()
    print(f"[batch bench] loadavg {state_start['loadavg_1m']:.2f} on {state_start['cpus']} CPUs", flush=True)
    results: dict[str, Any] = {"args": {k: v for k, v in vars(args).items()}, NAMES_DECLARED: True, "dtypes": {}}
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
                got: dict[int, list[list[int]]] = {}
                for b in sizes:
                    outs, cpu, wall, rows, prefill = run_cell(target, c, prompts, b, args.max_new_tokens, eos)
                    cell = cells[(c.name, b)]
                    cell.tokens.append(sum(len(o) for o in outs))
                    cell.cpu_s.append(cpu)
                    cell.wall_s.append(wall)
                    cell.mean_rows.append(rows)
                    cell.prefill_cpu_s.append(prefill)
                    got[b] = outs
                    print(f"  {dtype} {c.name} batch {b:>2} repeat {r}: {cell.tokens[-1]} tokens, {cpu:.1f} CPU s "
                          f"({prefill:.1f} of them prefill), {wall:.1f} wall s, {rows:.1f} rows/forward", flush=True)
                for b in sizes:
                    cells[(c.name, b)].identical.append(sum(x == y for x, y in zip(got[b], got[1])))
        # Batch-1 decode time per token of the target alone, against the bandwidth bound.
        bnd = bound(target, args.device, args.tiny)
        probe = [generate(target, p, verifier=TargetAlone(), max_new_tokens=args.max_new_tokens, eos_token_ids=eos)
                 for p in prompts[: min(4, len(prompts))]]
        per_token = sum(o.decode_s for o in probe) / max(1, sum(o.steps for o in probe))
        results["dtypes"][dtype] = {
            **bnd, "batch1_decode_s_per_token": per_token,
            "cells": {f"{n}@{b}": vars(cell) for (n, b), cell in cells.items()},
        }
        print_table(dtype, cs, args.batch_sizes, cells, len(prompts))
        print_bound(dtype, bnd, per_token)
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
        atomic_write_text(args.out, json.dumps(results, indent=1, default=str))
        print(f"written: {args.out}")
    return 0


def print_bound(dtype: str, bnd: dict[str, Any], per_token: float) -> None:
    gb = bnd["weight_bytes"] / 1e9
    said = (f"{dtype}: target alone at batch 1 decodes a token in {per_token * 1e3:.1f} ms (wall); weights read per "
            f"decode forward {gb:.2f} GB ({bnd['weight_bytes']:,} bytes, {bnd['dtype']}; each parameter tensor once, "
            "a tied LM head's table once, the input embedding left out: a forward gathers only its rows)")
    if "bound_s_per_token" not in bnd:
        print(said + f"; no bandwidth bound measured on {bnd.get('device', 'this device')} (the data sheet's bandwidth is its bound)")
        return
    limit = bnd["bound_s_per_token"]
    ratio = per_token / limit
    print(said + f"; read bandwidth measured {bnd.get('matmul_gb_s', float('nan')):.1f} GB/s (1-row matmul over a prepacked "
          f"weight) and {bnd['sum_gb_s']:.1f} GB/s (fp32 sum): the bound at {bnd['gb_s']:.1f} GB/s is {limit * 1e3:.1f} ms, "
          f"batch 1 runs at {ratio:.2f}x it"
          + ("" if ratio >= 1.0 else ": FASTER than the bound, so the bandwidth measured here understates what the loop "
             "reads at (measured under contention?): not a bound; rerun on a quiet machine"), flush=True)


def print_table(dtype: str, cs: list[Contestant], sizes: list[int], cells: dict[tuple[str, int], Cell], n: int) -> None:
    print(f"\n{dtype}: tokens per CPU second (95% interval over repeats), ratio to batch 1 (same repeat), identical to batch 1;"
          "\n  decode tok/CPU s: the same less the prefills' CPU (every prompt is prefilled alone, at every batch size)")
    print(f"{'contestant':<10} {'batch':>5}  {'tok/CPU s':<22} {'decode tok/CPU s':<22} {'prefill':>7} {'tok/wall s':<22} "
          f"{'x batch 1 (CPU)':<22} {'identical':>9} {'rows/fwd':>8}")
    for c in cs:
        base = cells[(c.name, 1)].tps_cpu()
        for b in sizes:
            cell = cells[(c.name, b)]
            tc, tw, td = cell.tps_cpu(), cell.tps_wall(), cell.tps_decode_cpu()
            ratios = [x / y for x, y in zip(tc, base) if y > 0]
            ident = f"{sum(cell.identical)}/{n * len(cell.identical)}"
            pre = cell.prefill_share()
            pre_s = f"{statistics.fmean(pre):.0%}" if pre else "-"
            print(f"{c.name:<10} {b:>5}  {fmt(*interval(tc)):<22} {fmt(*interval(td)):<22} {pre_s:>7} {fmt(*interval(tw)):<22} "
                  f"{fmt(*interval(ratios)):<22} {ident:>9} {statistics.fmean(cell.mean_rows):>8.1f}")
    print(flush=True)


if __name__ == "__main__":
    sys.exit(main())
