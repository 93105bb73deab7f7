"""What torch.compile buys a 1-token decode forward of a target on this CPU (issue 43's last lever).

    python scripts/probe_compile.py embedded:qwen2.5-coder-1.5b-instruct [bfloat16|float32] [--freeze]

transformers' own forward with its StaticCache (the cache layout torch.compile needs), eager
against torch.compile (Inductor, static shapes), ~128 cached tokens, 2 threads: the median of 12
one-token steps each, eager / compiled / eager / compiled, and whether the greedy tokens agree.
--freeze sets Inductor's freezing (its oneDNN weight prepacking). This is not our loop (whose
linears are prepacked and fused: bench.forward_cost times those); it says what compiling the
forward is worth against the same forward eager. Run it with nothing else on the machine.
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("path")
    ap.add_argument("dtype", nargs="?", default="bfloat16", choices=("bfloat16", "float32"))
    ap.add_argument("--freeze", action="store_true")
    ap.add_argument("--ctx", type=int, default=128)
    a = ap.parse_args()
    from transformers import StaticCache

    from loosespec_bench.models import load_model

    torch.set_num_threads(2)
    if a.freeze:
        import torch._inductor.config as inductor

        inductor.freezing = True
    model = load_model(a.path, dtype=a.dtype, device="cpu").model.eval()
    ids = torch.randint(3, min(1000, model.config.vocab_size), (1, a.ctx), generator=torch.Generator().manual_seed(0))

    def run(fwd, reps: int = 15) -> tuple[float, list[int]]:
        cache = StaticCache(config=model.config, max_cache_len=a.ctx + reps + 8)
        with torch.inference_mode():
            model(input_ids=ids, past_key_values=cache, cache_position=torch.arange(a.ctx), use_cache=True)
            tok, times, toks = torch.tensor([[5]]), [], []
            for i in range(reps):
                t0 = time.perf_counter()
                out = fwd(input_ids=tok, past_key_values=cache, cache_position=torch.tensor([a.ctx + i]), use_cache=True)
                times.append(time.perf_counter() - t0)
                tok = out.logits[:, -1:].argmax(-1)
                toks.append(int(tok))
        return statistics.median(times[3:]), toks  # the first steps warm the kernels

    e1, tok_e = run(model.forward)
    t0 = time.perf_counter()
    compiled = torch.compile(model.forward, dynamic=False)
    c1, tok_c = run(compiled)
    first = time.perf_counter() - t0
    e2, _ = run(model.forward)
    c2, _ = run(compiled)
    print(f"{a.path} {a.dtype}{' freezing' if a.freeze else ''}: eager {1e3 * e1:.1f} / {1e3 * e2:.1f} ms, compiled "
          f"{1e3 * c1:.1f} / {1e3 * c2:.1f} ms per 1-token forward at {a.ctx} cached tokens (first compiled pass with the "
          f"compile: {first:.0f} s); greedy tokens identical: {tok_e == tok_c}")


if __name__ == "__main__":
    main()
