"""Draft forward time with pair.draft.quantize = none / int8 / int4 on the embedded pair (CPU).

Prints the median 1-token draft forward (ms) over a cached context, the same for the target,
their ratio c for each mode (acceptance: python -m loosespec_bench.bench --draft-quantize). Loads the target once and the draft once per mode (one process, ~5 GB in bf16).

  python scripts/bench_draft_quant.py [--modes none,int8,int4] [--vocab-top 32768] [--reps 20] [--context 300] [--fp32]

Lab script, kept in scripts/ (not installed with the package): it is the measurement behind
docs/cpu-performance.md's draft-quantization figures ("Cheaper drafts"), rerun when the quantizer
changes; no user needs it to run the harness.
"""

from __future__ import annotations

import argparse
import copy
import os
import statistics
import time

import torch
from transformers import DynamicCache

from loosespec_bench.step import crop_to
from loosespec_bench.decoding.cpu import cpu_fast_paths
from loosespec_bench.omp import keep_stock_weights
from loosespec_bench.models.loading import load_model
from loosespec_bench.drafters.model import ModelDrafter
from loosespec_bench.models.quantize import quantize_linears
from loosespec_bench.models.subvocab import restrict_draft_vocab

TARGET = "embedded:qwen2.5-coder-1.5b-instruct"
DRAFT = "embedded:qwen2.5-coder-0.5b-instruct"


def one_token_ms(model: torch.nn.Module, context: torch.Tensor, reps: int) -> float:
    cache = DynamicCache(config=model.config)
    model(context[None, :-1], past_key_values=cache, use_cache=True, logits_to_keep=1)
    times = []
    for rep in range(reps + 2):
        t0 = time.perf_counter()
        model(context[None, -1:], past_key_values=cache, use_cache=True, logits_to_keep=1)
        if rep >= 2:
            times.append(time.perf_counter() - t0)
        crop_to(cache, context.numel() - 1)
    return statistics.median(times) * 1e3


def main() -> None:
    keep_stock_weights()  # one model runs with and without the fast paths: its stock weights stay
    ap = argparse.ArgumentParser()
    ap.add_argument("--modes", default="none,int8,int4")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--context", type=int, default=300)
    ap.add_argument("--fp32", action="store_true")
    ap.add_argument("--vocab-top", type=int, default=None, help="also measure each mode with the draft head over the top-N ids")
    ap.add_argument("--data-dir", default=os.environ.get("LOOSESPEC_DATA_DIR"))
    a = ap.parse_args()
    dtype = "float32" if a.fp32 else "bfloat16"
    target = load_model(TARGET, dtype=dtype).model
    base = load_model(DRAFT, dtype=dtype).model
    context = torch.randint(100, 50000, (a.context,), generator=torch.Generator().manual_seed(0))
    with torch.inference_mode(), cpu_fast_paths(target):
        t_ms = one_token_ms(target, context, a.reps)
    print(f"threads {torch.get_num_threads()}, dtype {dtype}, context {a.context}: target 1-token forward {t_ms:.1f} ms")
    tok = load_model(DRAFT, dtype=dtype).tokenizer if a.vocab_top else None
    for mode in a.modes.split(","):
        for top in [None, a.vocab_top] if a.vocab_top else [None]:
            draft = base if mode == "none" and top is None else copy.deepcopy(base)
            if top:
                restrict_draft_vocab(ModelDrafter(draft), top, tok, a.data_dir)
            quantize_linears(draft, mode)
            with torch.inference_mode(), cpu_fast_paths(draft):
                d_ms = one_token_ms(draft, context, a.reps)
            print(f"draft quantize={mode:5} vocab_top={top}: 1-token forward {d_ms:.1f} ms  c = {d_ms / t_ms:.3f}")
            del draft


if __name__ == "__main__":
    main()
