"""The cost of one forward against its input rows and cached context, beside the machine's bound.

A decode or verification forward on CPU streams every weight once, so its floor is the model's
bytes over the bandwidth the matmul kernel reaches. This prints, for the target and the draft:

  bound     the attainable read bandwidth, measured here: a 1-row oneDNN matmul over a 1 GB
            prepacked weight (the kernel the loop's linears use) and a plain sum over 1 GB;
            each model's bytes per forward over it is its floor (ms), and the 1-row forward's
            time over the floor says how close the loop runs to it;
  curve     ms per forward at rows 1..32 (1 = decode; K + 1 = a chain verification; 16 = FLy at
            K = 15) and cached context 128..2048, for the loop as it runs now (fused q/k/v and
            gate/up, in-place KV cache: `now`) and as it ran before (one matmul per linear,
            concatenating cache: `before`), interleaved and repeated, medians; v = t(rows) / t(1).

calibrate.py times the same kinds of forwards for the cost model, at the loop's one setting;
this compares two settings of the loop and puts both beside the machine's floor.

The load (load average, other processes' CPU share over the run) is printed with it: a figure
measured beside something else is not evidence. Nothing here changes a token (the loop's
token-identity tests cover both paths).

  python -m loosespec_bench.bench.forward_cost                                # embedded pair, bf16
  python -m loosespec_bench.bench.forward_cost --tiny --rows 1,4 --contexts 32 --repeats 1
"""

from __future__ import annotations

from loosespec_bench.omp import default_wait_policy, keep_stock_weights

default_wait_policy()  # the loop's own policy, before torch loads libgomp

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
from contextlib import contextmanager  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any, Iterator  # noqa: E402

import torch  # noqa: E402
from transformers import DynamicCache  # noqa: E402

from loosespec_bench.decoding.cpu import cpu_fast_paths, prepack_available  # noqa: E402
from loosespec_bench.kv import new_cache  # noqa: E402
from loosespec_bench.models.loading import load_model  # noqa: E402
from loosespec_bench.omp import describe as omp_policy  # noqa: E402
from loosespec_bench.measure.timing import Clocks, Probe  # noqa: E402

from .prompts import DRAFT, TARGET, load_avg  # noqa: E402

VARIANTS = ("now", "before")  # fused + in-place cache; unfused + concatenating cache


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m loosespec_bench.bench.forward_cost", description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tiny", action="store_true", help="tiny random models (a smoke run)")
    ap.add_argument("--models", default="target,draft", help="comma list of target, draft")
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--rows", default="1,2,4,6,11,16,24,32")
    ap.add_argument("--contexts", default="128,512,2048")
    ap.add_argument("--repeats", type=int, default=3, help="timed rounds per cell (each a median of --forwards)")
    ap.add_argument("--forwards", type=int, default=5, help="forwards timed per round")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--out", default=None, help="JSON file for the figures")
    args = ap.parse_args(argv)
    try:
        args.rows = [int(r) for r in args.rows.split(",") if r.strip()]
        args.contexts = [int(c) for c in args.contexts.split(",") if c.strip()]
    except ValueError:
        ap.error("--rows and --contexts take comma lists of whole numbers, e.g. --rows 1,4,16")
    if not args.rows or min(args.rows) < 1 or not args.contexts or min(args.contexts) < 1:
        ap.error("--rows and --contexts need at least one number, each at least 1")
    args.models = [m.strip() for m in args.models.split(",") if m.strip()]
    if not args.models or set(args.models) - {"target", "draft"}:
        ap.error("--models takes target, draft or both")
    if args.repeats < 1 or args.forwards < 1:
        ap.error("--repeats and --forwards must be at least 1")
    return args


@contextmanager
def variant(name: str) -> Iterator[None]:
    """`before`: the loop without fusion (LOOSESPEC_CPU_FUSE=0); the cache is chosen by the caller."""
    old = os.environ.get("LOOSESPEC_CPU_FUSE")
    os.environ["LOOSESPEC_CPU_FUSE"] = "1" if name == "now" else "0"
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("LOOSESPEC_CPU_FUSE", None)
        else:
            os.environ["LOOSESPEC_CPU_FUSE"] = old


def model_bytes(model: torch.nn.Module) -> int:
    """Bytes of the weights one forward reads (tied weights once; the embedding table's lookup
    reads a row, but a tied LM head reads it all, so it is counted)."""
    seen, total = set(), 0
    for mod in model.modules():
        for name, p in mod.named_parameters(recurse=False):
            n, key = p.numel(), p.data_ptr()
            if n == 0 and name == "weight" and isinstance(mod, torch.nn.Linear):
                # Released into its packed copy (decoding/cpu.py, LOOSESPEC_CPU_PREPACK=replace): it
                # still reads its [out, in] weight, from that copy.
                n, key = mod.in_features * mod.out_features, id(p)
            if key not in seen:
                seen.add(key)
                total += n * p.element_size()
    if not getattr(model.config, "tie_word_embeddings", False):
        emb = model.get_input_embeddings().weight
        total -= emb.numel() * emb.element_size()  # only its rows are read
    return total


def bandwidth(dtype: torch.dtype, mbytes: int, forwards: int) -> dict[str, float]:
    """GB/s of a 1-row oneDNN matmul over an `mbytes` MB weight of `dtype` [N, 1536], prepacked
    as the loop runs its linears, and of a plain fp32 sum over as many bytes."""
    out: dict[str, float] = {}
    n_bytes = mbytes * 2**20
    with torch.inference_mode():
        if prepack_available():
            weight = torch.randn(n_bytes // (1536 * torch.finfo(dtype).bits // 8), 1536).to(dtype)  # [N, 1536]
            packed = torch.ops.mkldnn._reorder_linear_weight(weight, None)
            x = torch.randn(1, 1536).to(dtype)
            for _ in range(3):
                torch.ops.mkldnn._linear_pointwise(x, packed, None, "none", [], "")
            ts = []
            for _ in range(max(5, forwards)):
                t = time.perf_counter()
                torch.ops.mkldnn._linear_pointwise(x, packed, None, "none", [], "")
                ts.append(time.perf_counter() - t)
            out["matmul_gb_s"] = weight.numel() * weight.element_size() / statistics.median(ts) / 1e9
            del packed, weight
        big = torch.ones(n_bytes // 4, dtype=torch.float32)
        big.sum()
        ts = []
        for _ in range(max(3, forwards)):
            t = time.perf_counter()
            big.sum()
            ts.append(time.perf_counter() - t)
        out["sum_gb_s"] = big.numel() * 4 / statistics.median(ts) / 1e9
    return out


def time_forward(model: Any, rows: int, ctx: int, name: str, forwards: int) -> float:
    """Median seconds of `forwards` forwards of `rows` new positions after `ctx` cached ones."""
    g = torch.Generator().manual_seed(rows * 7919 + ctx)
    vocab = model.config.vocab_size
    with variant(name), torch.inference_mode(), cpu_fast_paths(model):
        cache = new_cache(model.config) if name == "now" else DynamicCache(config=model.config)
        model(torch.randint(0, vocab, (1, ctx), generator=g), cache=cache, use_cache=True, logits_to_keep=1)
        ts = []
        for i in range(forwards + 1):
            inp = torch.randint(0, vocab, (1, rows), generator=g)
            t = time.perf_counter()
            model(inp, cache=cache, use_cache=True)  # every row's logits, as a verification asks
            if i:  # the first one warms the kernels and the cache's growth
                ts.append(time.perf_counter() - t)
            cache.crop(-rows)  # rejected: back to ctx, as the loop rolls back
    return statistics.median(ts)


def curve(model: Any, args: argparse.Namespace) -> list[dict[str, Any]]:
    cells = [(r, c) for c in args.contexts for r in args.rows]
    times: dict[tuple[int, int, str], list[float]] = {}
    for rep in range(args.repeats):
        for i, (r, c) in enumerate(cells):
            order = VARIANTS if (rep + i) % 2 == 0 else VARIANTS[::-1]  # alternate who goes first
            for name in order:
                times.setdefault((r, c, name), []).append(time_forward(model, r, c, name, args.forwards))
    out = []
    for r, c in cells:
        now, before = (statistics.median(times[(r, c, n)]) for n in VARIANTS)
        out.append({"rows": r, "context": c, "now_ms": now * 1e3, "before_ms": before * 1e3, "ratio": now / before})
    for row in out:  # v: a forward of `rows` over the 1-row forward at the same context
        one = next((x for x in out if x["rows"] == 1 and x["context"] == row["context"]), None)
        row["v_now"] = row["now_ms"] / one["now_ms"] if one else None
        row["v_before"] = row["before_ms"] / one["before_ms"] if one else None
    return out


def print_model(name: str, res: dict[str, Any]) -> None:
    print(f"\n== {name}: {res['path']} ({res['dtype']}), {res['bytes'] / 1e9:.2f} GB of weights per forward ==")
    if res.get("floor_ms") is not None:
        one = min((x for x in res["curve"] if x["rows"] == 1), key=lambda x: x["context"], default=None)
        if one:
            print(f"floor (bytes / matmul bandwidth) {res['floor_ms']:.1f} ms; 1-row forward at {one['context']} cached: "
                  f"{one['now_ms']:.1f} ms = {one['now_ms'] / res['floor_ms']:.2f}x the floor")
    print(f"{'rows':>5} {'context':>8} {'now ms':>9} {'before ms':>10} {'now/before':>11} {'v now':>7} {'v before':>9}")
    for x in res["curve"]:
        print(f"{x['rows']:>5} {x['context']:>8} {x['now_ms']:>9.1f} {x['before_ms']:>10.1f} {x['ratio']:>11.3f} "
              f"{x['v_now']:>7.2f} {x['v_before']:>9.2f}")


def main(argv: list[str] | None = None) -> dict[str, Any]:
    keep_stock_weights()  # one model runs with and without the fast paths: its stock weights stay
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    clocks = Clocks()
    probe = Probe(clocks)
    probe.start()
    paths = {"target": "tiny:0" if args.tiny else TARGET, "draft": "tiny:1" if args.tiny else DRAFT}
    res: dict[str, Any] = {"args": {k: v for k, v in vars(args).items()}, "load_before": load_avg(),
                           "threads": torch.get_num_threads(), "omp_wait_policy": omp_policy(), "models": {}}
    for which in args.models:
        model = load_model(paths[which], dtype=args.dtype).model.eval()
        entry: dict[str, Any] = {"path": paths[which], "dtype": args.dtype, "bytes": model_bytes(model)}
        if which == args.models[0]:  # 1 GB: far past any cache but L3 on big servers (tiny: 64 MB)
            res["bandwidth"] = bandwidth(next(model.parameters()).dtype, 64 if args.tiny else 1024, args.forwards)
        bw = res["bandwidth"].get("matmul_gb_s")
        entry["floor_ms"] = entry["bytes"] / (bw * 1e9) * 1e3 if bw else None
        entry["curve"] = curve(model, args)
        res["models"][which] = entry
        del model
    probe.stop()
    res["load_after"] = load_avg()
    res["timing"] = probe.record()
    bwd = res["bandwidth"]
    print(f"forward cost: {res['threads']} threads, OMP_WAIT_POLICY={res['omp_wait_policy']}, load average {res['load_before']} -> {res['load_after']}, "
          f"other processes' CPU share {_pct(res['timing'].get('others_share'))}")
    print(f"bandwidth: 1-row matmul over a {64 if args.tiny else 1024} MB weight {bwd.get('matmul_gb_s', float('nan')):.1f} GB/s, plain fp32 sum {bwd['sum_gb_s']:.1f} GB/s")
    for which, entry in res["models"].items():
        print_model(which, entry)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(res, indent=1))
        print(f"\nwritten: {args.out}")
    return res


def _pct(x: float | None) -> str:
    return "unknown" if x is None else f"{100 * x:.1f}%"


if __name__ == "__main__":
    main()
