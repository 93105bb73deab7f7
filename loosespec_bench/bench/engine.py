#!/usr/bin/env python
"""Engine benchmark: our decoding loop against what a user would pick instead, side by side.

Every contestant generates greedily from the same prompts (math, code and instruction sets,
built by the tasks' own loaders and the chat template), with the same draft length K and the
same max_new_tokens, in one process. Contestants are interleaved prompt by prompt (the order
rotates between prompts and repeats, so slow drift of a shared machine cancels out), after an
untimed warm-up of each. Comparisons are the MEDIAN OF PAIRED RATIOS of seconds per new token
(ours / peer; wall time of the whole call, prefill + decode, as a user sees it) over the same
(prompt, repeat) pairs; for lossless pairs in fp32 the outputs are the same tokens, so this is
the time ratio (in bf16 near-ties can part them; "ratio(ident)" keeps the identical pairs).

  target alone      ours (loop, K = 0)             vs transformers generate()
  SPD, draft model  ours (ModelDrafter + SPD)      vs transformers assisted generation
                                                      (assistant_model, K constant / heuristic)
                    ours (MLADrafter + SPD: the same greedy drafts in fewer draft forwards)
  prompt lookup     ours (PromptLookupDrafter)     vs transformers prompt_lookup_num_tokens
  FLy, FLy + MLA, DropMatch                        vs our SPD (and our target alone)
  EAGLE head        ours, dynamic tree (EAGLE-2/3)  vs ours, chain of K (the same head)
  Lookahead         ours (LookaheadDrafter)         vs ours, prompt lookup

Every contestant is an engine (loosespec_bench.engines.base.Engine): ours are HFEngine with a
rule and a drafter on the one loaded target, transformers' are TransformersEngine below, and
`--engine NAME=OVERRIDES` adds any engine the package config builds (build.build_engine), e.g.
a vLLM engine as `--engine 'vllm-spd=engine=vllm method=spd drafter=model'`.

Also printed: per-step overheads from GenerationOutput.phase_s (draft, target forward, rule,
rollback, bookkeeping), the FLy-rule and DropMatch LM-head shares of step time (limit 2%), and
the cost model's predicted speedup (loosespec_bench.measure.costmodel) beside the measured one.

tau = emitted tokens / verification steps, bonus or correction token included. For transformers'
contestants the steps are the target forwards counted by a hook (its first forward both
prefills and verifies; ours prefills separately).

Examples:
  python -m loosespec_bench.bench --tiny --max-new-tokens 16 --repeats 1           # smoke
  python -m loosespec_bench.bench --prompts-per-set 2 --repeats 3 --out bench.json  # embedded pair
  python -m loosespec_bench.bench --fp32 --contestants ar,hf-ar,spd,hf-assist,pld,hf-pld
  python -m loosespec_bench.bench --tiny --contestants ar,spd --engine 'cfg-spd=method=spd drafter=model'
"""

from __future__ import annotations

# OpenMP wait policy, set before torch loads libgomp (importing this module after torch is too
# late: pass --threads 1 there). ACTIVE (spinning workers) is the fast choice on a dedicated
# machine; on one shared with busy processes spinning workers stall every barrier (a 1.5B
# forward measured 10x slower at load average 10): run with OMP_WAIT_POLICY=PASSIVE there.
# Every contestant runs under the same setting, and the report prints it. See loosespec_bench/omp.py.
from loosespec_bench.omp import default_wait_policy, keep_stock_weights

default_wait_policy()

import argparse  # noqa: E402
import gc  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import platform  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import torch  # noqa: E402
import transformers  # noqa: E402

from loosespec_bench.settings.config import check_group_overrides  # noqa: E402
from loosespec_bench.errors import ConfigError  # noqa: E402
from loosespec_bench.measure.speed_configs import ALIASES, TARGET_ALONE, pick  # noqa: E402

from .analysis import print_report, summarize  # noqa: E402
from .contestants import ALL_CONTESTANTS, Bench, Run  # noqa: E402
from .prompts import DEFAULT_SETS, DRAFT, TARGET, build_prompts, data_dir, load_avg  # noqa: E402


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m loosespec_bench.bench", description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--prompts-per-set", type=int, default=2)
    ap.add_argument("--sets", default=DEFAULT_SETS, help=f"comma list of conf/dataset names (default {DEFAULT_SETS})")
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--k", type=int, default=5, help="draft length for SPD, HF assisted and DropMatch")
    ap.add_argument("--fly-k", type=int, default=10, help="draft length for FLy (needs K > W)")
    ap.add_argument("--fly-window", type=int, default=6)
    ap.add_argument("--fly-theta", type=float, default=0.3)
    ap.add_argument("--pld-k", type=int, default=10, help="prompt-lookup tokens (ours and HF's)")
    ap.add_argument("--pld-max-ngram", type=int, default=3)
    ap.add_argument("--hf-confidence", type=float, default=0.4, help="HF assistant_confidence_threshold for hf-assist-dyn")
    ap.add_argument("--eagle3-head", default=None, help="EAGLE-2/3 head folder (default: the embedded pair's trained head)")
    # EAGLE's dynamic tree: SafeAILab/EAGLE ea_model.py defaults (total_token 60, depth 7, top_k 10).
    ap.add_argument("--tree-total", type=int, default=60)
    ap.add_argument("--tree-depth", type=int, default=7)
    ap.add_argument("--tree-top-k", type=int, default=10)
    # Lookahead: hao-ai-lab/LookaheadDecoding README defaults (LEVEL 5, WINDOW_SIZE 7, GUESS_SET_SIZE 7).
    ap.add_argument("--la-level", type=int, default=5)
    ap.add_argument("--la-window", type=int, default=7)
    ap.add_argument("--la-guess", type=int, default=7)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--warmup-tokens", type=int, default=8)
    ap.add_argument("--contestants", default=",".join(ALL_CONTESTANTS),
                    help=f"comma list of {', '.join(ALL_CONTESTANTS)} (old spellings taken: "
                         f"{', '.join(f'{old} = {new}' for old, new in ALIASES.items() if new in ALL_CONTESTANTS)})")
    ap.add_argument("--engine", action="append", default=[], metavar="NAME=OVERRIDES",
                    help="one more contestant: the engine the package config builds with these overrides "
                         "(e.g. 'vllm-spd=engine=vllm method=spd drafter=model'); repeat for several")
    ap.add_argument("--fp32", action="store_true", help="float32: the identical-tokens check is exact (bf16 may flip ties)")
    ap.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    ap.add_argument("--data-dir", default=None, help="data sets folder (default $LOOSESPEC_DATA_DIR, else ~/.cache/loosespec_bench/datasets)")
    ap.add_argument("--target", default=TARGET)
    ap.add_argument("--draft", default=DRAFT)
    ap.add_argument("--draft-quantize", default="none", choices=("none", "int8", "int4"),
                    help="weight-only int linears for the draft (pair.draft.quantize); the target is untouched")
    ap.add_argument("--vocab-top", type=int, default=None,
                    help="draft LM head over the N most frequent ids only (drafter.vocab_top, FR-Spec style)")
    ap.add_argument("--dm-lm-head-batch", type=int, default=None,
                    help="DropMatch candidate positions per LM-head call (default: all in one call per step)")
    ap.add_argument("--tiny", action="store_true", help="tiny random models tiny:0 <- tiny:1 (smoke test)")
    ap.add_argument("--calibration-reps", type=int, default=5, help="isolated forwards per shape for the cost model (0: skip)")
    ap.add_argument("--max-prompt-tokens", type=int, default=None, help="keep only the last N prompt tokens")
    ap.add_argument("--project-c", type=lambda s: [float(x) for x in s.split(",")], default=[0.10, 0.15],
                    help="cost ratios to project to (e.g. an 8B draft for a 70B target on a GPU: 0.1..0.15)")
    ap.add_argument("--project-v", type=float, default=1.0, help="verification-cost factor to project with")
    ap.add_argument("--project-k-max", type=int, default=16)
    ap.add_argument("--out", default=None, help="JSON file with every raw timing")
    args = ap.parse_args(argv)
    if args.tiny:
        args.target, args.draft = "tiny:0", "tiny:1"
        if args.max_prompt_tokens is None:
            args.max_prompt_tokens = 256  # byte-level tokens: keep the tiny models' prompts short
    try:  # a data set no conf/dataset file names: refused here, before any model loads
        check_group_overrides([f"dataset={name}" for name in args.sets.split(",")])
    except ConfigError as err:
        ap.error(f"--sets: {err}")
    # Declared names (measure/speed_configs.py), an old spelling read as its declared name.
    args.contestants, bad = pick([c.strip() for c in args.contestants.split(",") if c.strip()], ALL_CONTESTANTS)
    if bad:
        ap.error(f"unknown contestants {bad}; choose from {', '.join(ALL_CONTESTANTS)}")
    return args


def main(argv: list[str] | None = None) -> dict[str, Any]:
    keep_stock_weights()  # one model runs with and without the fast paths: its stock weights stay
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    data = data_dir(args.data_dir)
    load_before = load_avg()
    if os.environ.get("OMP_WAIT_POLICY") == "ACTIVE" and torch.get_num_threads() > 1 and os.getloadavg()[0] > 0.5 * (os.cpu_count() or 1):
        print(f"[bench] warning: load average {load_before} with spinning OpenMP workers: other busy processes will "
              "distort the timings; wait for a quiet machine or rerun with OMP_WAIT_POLICY=PASSIVE", flush=True)
    bench = Bench(args)
    prompts = build_prompts(args.sets.split(","), args.prompts_per_set, data, bench.target.tokenizer, args.max_prompt_tokens)
    names = list(bench.contestants)
    print(f"[bench] models loaded in {bench.load_s:.1f}s; {len(prompts)} prompts "
          f"({', '.join(f'{p.set}:{p.ids.numel()}' for p in prompts)} tokens); contestants {names}", flush=True)
    gc.collect()
    gc.freeze()  # see below
    # Warm-up: first calls allocate, build kernels and caches; none of that may bill a contestant.
    for n in names:
        bench.run_one(bench.contestants[n], prompts[0], args.warmup_tokens, -1, 0)
    # Move every object alive now (models, data sets) out of the collector's reach, so the
    # collection before each run (outside its timing) only walks what the last run left.
    gc.collect()
    gc.freeze()
    runs: list[Run] = []
    t_all = time.perf_counter()
    for i, p in enumerate(prompts):
        for r in range(args.repeats):
            shift = (i * args.repeats + r) % len(names)
            order = names[shift:] + names[:shift]  # rotate: each contestant takes every place
            for pos, n in enumerate(order):
                run = bench.run_one(bench.contestants[n], p, args.max_new_tokens, r, pos)
                runs.append(run)
                print(f"[bench] {p.set}/{p.id} r{r} {n:<13} {len(run.tokens):>4} tok {run.wall_s:7.2f}s "
                      f"{len(run.tokens) / run.wall_s:6.2f} tok/s  load {load_avg()}", flush=True)
    calib = None
    if args.calibration_reps > 0 and TARGET_ALONE in names:
        # Context: the mean prompt plus half the new tokens, i.e. the middle of a typical run.
        ctx_len = int(statistics.mean(p.ids.numel() for p in prompts)) + args.max_new_tokens // 2
        context = torch.cat([p.ids for p in prompts])[:ctx_len]
        ks = sorted({c.k + 1 for c in bench.contestants.values()} | {1})
        calib = bench.calibrate(context, ks, args.calibration_reps)
    res = summarize(runs, bench, args, calib)
    res["_runs"] = runs
    res["load_before"], res["load_after"] = load_before, load_avg()
    res["prompt_summary"] = ", ".join(
        f"{s} x{sum(p.set == s for p in prompts)} (~{int(statistics.mean(p.ids.numel() for p in prompts if p.set == s))} tok)"
        for s in dict.fromkeys(p.set for p in prompts)
    )
    print_report(res, bench, args)
    print(f"\n[bench] {len(runs)} timed runs in {time.perf_counter() - t_all:.0f}s")
    if args.out:
        out = {k: v for k, v in res.items() if k != "_runs"}
        out.update(
            args={k: v for k, v in vars(args).items()},
            environment={
                "python": sys.version.split()[0], "torch": torch.__version__, "transformers": transformers.__version__,
                "threads": torch.get_num_threads(), "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY"),
                "machine": platform.machine(), "processor": platform.processor(), "cpus": os.cpu_count(),
                "model_load_s": bench.load_s,
            },
            # The ids themselves: bench_vllm.py --ours asserts it runs on exactly these.
            prompts=[{"set": p.set, "id": p.id, "tokens": int(p.ids.numel()), "ids": p.ids.tolist()} for p in prompts],
            unavailable=bench.unavailable,
            runs=[vars(r) for r in runs],
        )
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(out, indent=1))
        print(f"[bench] raw timings: {args.out}")
    return res


def cli() -> None:
    """The console script (pyproject: loosespec-engine-bench): main, whose summary is for
    callers, not an exit status."""
    main()


if __name__ == "__main__":
    main()
