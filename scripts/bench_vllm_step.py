#!/usr/bin/env python
"""vLLM's target-alone 1-token decode step on the prompts of the engine benchmark (loosespec_bench.bench), beside
scripts/bench_step.py's figures for our loop (run from .venv-vllm: make install-vllm).

Per prompt and repeat: one request of 1 new token (prefill + first token) and one of N new
tokens with EOS ignored; a decode step = (t_N - t_1) / (N - 1): the engine's whole per-step cost
as a user sees it (scheduler, model runner, sampler, detokenizer). vLLM runs in this process
(VLLM_ENABLE_V1_MULTIPROCESSING=0), so --profile N wraps N decode steps in torch.profiler: its
op groups print beside ours (bench_step.py --profile).

  .venv-vllm/bin/python scripts/bench_vllm_step.py --prompts-per-set 1 --repeats 2 --max-new-tokens 64 --profile 32

Lab script, kept in scripts/ (not installed with the package): it runs in .venv-vllm beside
bench_step.py for docs/vllm.md's decode-step table (results/bench/vllm-2026-12-01/step_vllm.json); a
profiling aid, not a tool a run needs.
"""

from __future__ import annotations

import os

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")  # in-process: the profiler sees the model runner

import argparse  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

from loosespec_bench.bench.prompts import DEFAULT_SETS, TARGET, build_prompts, data_dir, load_avg  # noqa: E402

from loosespec_bench.engines import vllm as ve  # noqa: E402


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--prompts-per-set", type=int, default=1)
    ap.add_argument("--sets", default=DEFAULT_SETS)
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--target", default=TARGET)
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--kvcache-gib", type=int, default=1)
    ap.add_argument("--profile", type=int, default=0)
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--out", default=None)
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    os.environ["VLLM_CPU_KVCACHE_SPACE"] = str(args.kvcache_gib)
    import torch
    from transformers import AutoTokenizer
    from vllm import LLM, SamplingParams

    load_before = load_avg()
    target = ve.model_source(args.target)
    tok = AutoTokenizer.from_pretrained(target)
    data = data_dir(args.data_dir)
    prompts = build_prompts(args.sets.split(","), args.prompts_per_set, data, tok, None)
    llm = LLM(model=target, tokenizer=target, dtype=args.dtype, seed=0, enforce_eager=True, max_model_len=4096,
              max_num_seqs=1, enable_prefix_caching=False)

    def timed(p: Any, n: int) -> float:
        sp = SamplingParams(temperature=0.0, max_tokens=n, ignore_eos=True, seed=0)
        t0 = time.perf_counter()
        out = llm.generate([{"prompt_token_ids": p.ids.tolist()}], sp, use_tqdm=False)
        dt = time.perf_counter() - t0
        assert len(out[0].outputs[0].token_ids) == n
        return dt

    timed(prompts[0], 8)
    rows = []
    for p in prompts:
        for r in range(args.repeats):
            t1, tn = timed(p, 1), timed(p, args.max_new_tokens)
            step = (tn - t1) / (args.max_new_tokens - 1)
            rows.append({"set": p.set, "prompt": p.id, "repeat": r, "first_s": t1, "total_s": tn, "step_ms": 1000 * step})
            print(f"[vllm-step] {p.set}/{p.id} r{r} first token {t1:.3f}s, {args.max_new_tokens} tokens {tn:.2f}s -> "
                  f"{1000 * step:.2f} ms/step  load {load_avg()}", flush=True)
    steps = [x["step_ms"] for x in rows]
    res: dict[str, Any] = {"step_ms_median": statistics.median(steps), "step_ms_min_max": [min(steps), max(steps)],
                           "threads": torch.get_num_threads(), "vllm": ve.installed_version(), "load_before": load_before}
    if args.profile:
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CPU]) as prof:
            t0 = time.perf_counter()
            timed(prompts[0], args.profile + 1)
            wall = time.perf_counter() - t0
        n = args.profile + 1
        rows_p = sorted(((ev.self_cpu_time_total, ev.key, ev.count) for ev in prof.key_averages()), reverse=True)
        res["profile"] = {"wall_ms_per_step (traced)": 1000 * wall / n,
                          "top ops": [(k, round(us / 1000 / n, 3), c // n) for us, k, c in rows_p[:20]]}
    res["load_after"] = load_avg()
    print(f"\n== vLLM {res['vllm']} target alone, ms per 1-token decode step ({args.dtype}, torch threads {res['threads']}; "
          f"{len(prompts)} prompts x {args.repeats}; load {load_before} -> {res['load_after']})")
    print(f"median {res['step_ms_median']:.2f} ms (min-max {min(steps):.2f}-{max(steps):.2f})")
    if args.profile:
        print(f"torch.profiler over {args.profile + 1} tokens: {res['profile']['wall_ms_per_step (traced)']:.2f} ms per token traced")
        for k, ms, calls in res["profile"]["top ops"]:
            print(f"    {k:<60}{ms:8.3f} ms  {calls:>5} calls/step")
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps({**res, "rows": rows, "args": vars(args)}, indent=1, default=str))
    try:
        llm.llm_engine.engine_core.shutdown()
    except Exception:  # in-process engine: nothing to stop
        pass
    return res


if __name__ == "__main__":
    main()
