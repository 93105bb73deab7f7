"""python -m loosespec_bench.calibrate --pair NAME: measure what each unit of work costs here.

The calibrated cost model (costmodel.Calibration, docs/algorithms.md section "Cost model")
turns a run's work counts into a predicted time. This command measures, for one pair on this
machine and thread count, in a few minutes (seconds for the tiny pair):

- target and draft forward latency as a function of rows fed (1..max_rows, then prefill
  sizes) at a short context ctx0, with the LM head on one row; the LM head's cost per row
  (timed directly on hidden states); the context's growth per forward and per row (forwards of 1 and max_rows rows at ctx1);
- the cost of one extra LM-head row with DropMatch's vocabulary-wide criterion on it, and of
  a verification row's own vocabulary-wide work (float logits, softmax, argmax);
- one prompt lookup over a context of typical length;
- the decode loop's per-step overhead (a target-alone generation's decode time minus its
  predicted forwards, per step).

Each latency is the median of `repeats` timings after a warm-up; the forwards of a network are
timed round-robin, every point once per round in a random order (interleaved_medians). The
calibration checks itself against a timed target-alone decode and stores the ratio (`check`). The result is stored as
<results_dir>/_calibration/<pair name>/<signature hash>.json with the machine signature (CPU,
ISA, cores, torch threads and version, OpenMP wait policy, dtype, the pair's model paths), and reused by every
run whose signature matches (find_calibration); rerun it after changing any of those.
The machine should be quiet while it runs (it records the other processes' CPU share).
"""

from __future__ import annotations

from .omp import default_wait_policy, describe as omp_policy

# The OpenMP wait policy a run uses (python -m loosespec_bench sets it the same way), set before
# torch loads libgomp: the draft's forward time, and with it every predicted speedup, depends on
# it (omp.py). It is part of the signature.
default_wait_policy()

import argparse  # noqa: E402
import hashlib  # noqa: E402
import os  # noqa: E402
import json  # noqa: E402
import random  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any, Callable  # noqa: E402

import torch  # noqa: E402

from .measure.costmodel import Calibration, ForwardCost  # noqa: E402
from .errors import ConfigError  # noqa: E402
from .store.summary import machine  # noqa: E402
from .measure.timing import read_proc_stat  # noqa: E402

CONF = Path(__file__).resolve().parent / "conf" / "pair"
ROW_GRID = (1, 2, 3, 4, 5, 6, 8, 11, 12, 16, 17, 24, 32)
PREFILL_GRID = (64, 128, 256, 512)  # prompts: a 2-shot GSM8K prompt with a chat template is ~300-500 tokens
CTX0, CTX1 = 64, 512
# A target-alone decode within this band of the calibration's price passes its check.
CHECK_BAND = (0.9, 1.1)


def pair_node(name: str) -> Any:
    """conf/pair/<name>.yaml; a ConfigError naming the choices for an unknown name."""
    from omegaconf import OmegaConf

    path = CONF / f"{name}.yaml"
    if not path.is_file():
        choices = ", ".join(sorted(p.stem for p in CONF.glob("*.yaml")))
        raise ConfigError(f"--pair {name!r} is not a pair config; choose one of: {choices}")
    return OmegaConf.load(path)


def signature(pair: Any, threads: int) -> dict[str, Any]:
    """What a calibration is valid for: this machine, these threads and libraries, this pair."""
    m = machine()
    draft = pair.get("draft") or {}
    return {
        "pair": str(pair.name),
        "target": str(pair.target.path),
        "draft": str(draft.get("path")) if draft.get("path") else None,
        "draft_quantize": str(draft.get("quantize") or "none"),
        "dtype": str(pair.dtype),
        "device": str(pair.device),
        "cpu_signature": m["cpu_signature"],
        "cpu_isa": m["cpu_isa"],
        "cpu_count": m["cpu_count"],
        "threads": int(threads),
        "omp_wait_policy": omp_policy(),
        "torch": torch.__version__,
    }


def signature_hash(sig: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(sig, sort_keys=True).encode()).hexdigest()[:16]


def calibration_path(results_dir: str | Path, sig: dict[str, Any]) -> Path:
    """results_dir/_calibration/<pair name>/<hash>.json; a pair name that is not one plain path
    component (`../x`: a folder's config is data) is a ConfigError (safe_files.confined)."""
    from .safe_files import confined

    return confined(Path(results_dir) / "_calibration", sig["pair"], "pair.name") / f"{signature_hash(sig)}.json"


def find_calibration(results_dir: str | Path, pair: Any, threads: int | None = None) -> tuple[Calibration | None, str]:
    """The stored calibration matching this machine, threads and pair, with where it came from;
    (None, why) when there is none."""
    from .safe_files import check_regular
    from .store.declarations import read_calibration

    sig = signature(pair, threads or torch.get_num_threads())
    rerun = f"python -m loosespec_bench.calibrate --pair <pair file> --threads {sig['threads']}"
    try:
        path = calibration_path(results_dir, sig)
        if not check_regular(path):  # a link or a FIFO: ConfigError below (never followed, never read)
            return None, (f"no calibration for pair {sig['pair']} on this machine with {sig['threads']} threads "
                          f"(run: {rerun})")
        # Kinds and ranges checked (finite costs, positive forwards), and measured under this signature.
        return Calibration.from_dict(read_calibration(path, expected=sig)), str(path)
    except (ConfigError, ValueError, KeyError, TypeError) as err:
        return None, f"unreadable calibration: {str(err)[:300]}; no calibration used (rerun: {rerun})"


def _median_time(fn: Callable[[], Any], repeats: int) -> float:
    return interleaved_medians([fn], [repeats])[0]


def interleaved_medians(fns: list[Callable[[], Any]], repeats: list[int], *, seed: int = 0,
                        clock: Callable[[], float] = time.perf_counter) -> list[float]:
    """Median time of each of `fns`, timed round-robin: every round times each function once
    (those with repeats left), in a fresh random order. A slow spell of the machine (a
    neighbour, the frequency settling after the models load) then lands on every point of a
    curve alike instead of on the few timed during it: the first calibration of the evidence
    runs, timed point after point, priced the target's one-row forward at 220 ms against the
    ~148 ms a step of its decode took, and three rows below one."""
    rng = random.Random(seed)
    for fn in fns:
        fn()  # warm-up: allocator, kernel choice
    times: list[list[float]] = [[] for _ in fns]
    for r in range(max(repeats, default=0)):
        order = [i for i in range(len(fns)) if repeats[i] > r]
        rng.shuffle(order)
        for i in order:
            t0 = clock()
            fns[i]()
            times[i].append(clock() - t0)
    return [statistics.median(t) for t in times]


def _head_of(model: Any) -> torch.nn.Module:
    head = model.get_output_embeddings()
    if head is None:
        raise ConfigError("the model has no output embeddings (LM head) to time")
    return head


def measure_network(model: Any, *, max_rows: int, repeats: int, vocab_ids: int) -> dict[str, Any]:
    """ForwardCost fields of one network (see costmodel.ForwardCost)."""
    from .kv import new_cache
    from .step import crop_to

    gen = torch.Generator().manual_seed(0)
    dev = model.device
    hidden = int(model.config.hidden_size)
    head = _head_of(model)

    def ids(n: int) -> torch.Tensor:
        return torch.randint(0, vocab_ids, (1, n), generator=gen).to(dev)

    def forward_at(ctx: int, rows: int) -> Callable[[], None]:
        cache = new_cache(model.config)  # the loop's in-place cache, so its costs are the loop's
        if ctx:
            model(ids(ctx), cache=cache, use_cache=True, logits_to_keep=1)
        inp = ids(rows)

        def once() -> None:
            model(inp, cache=cache, use_cache=True, logits_to_keep=1)
            crop_to(cache, ctx)

        return once

    # The LM head's cost per row: a least-squares slope over a few row counts.
    xs = [1, 8, 32]
    h = torch.randn(max(xs), hidden, generator=gen).to(device=dev, dtype=model.dtype)
    ys = interleaved_medians([lambda n=n: head(h[:n]) for n in xs], [repeats] * len(xs))
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    head_row = max(0.0, sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs))

    grid = sorted({r for r in ROW_GRID if r <= max_rows} | {max_rows} | set(PREFILL_GRID))
    # The context points (attention's growth: per row and cached position, from 1 and max_rows
    # rows at ctx1) are timed in the same rounds as the grid, so their differences share its spells.
    points = [(CTX0, r) for r in grid] + [(CTX1, r) for r in (1, max_rows)]
    # Prefill-sized forwards take seconds on a CPU and vary little: fewer timings.
    times = interleaved_medians([forward_at(c, r) for c, r in points],
                                [repeats if r < 256 else max(1, min(repeats, 3)) for _, r in points])
    body = [max(0.0, t - head_row) for t in times[:len(grid)]]
    # The context's cost per cached position at 1 and max_rows rows, g(r) = ctx_s + ctx_row_s x r:
    # two points, two terms. The part that does not grow with the rows (the mask, the cache's
    # bookkeeping) is per forward; read as a per-row slope it priced a long prefill below nothing.
    g1, gm = (max(0.0, (t - head_row - body[grid.index(r)]) / (CTX1 - CTX0))
              for r, t in zip((1, max_rows), times[len(grid):]))
    ctx_row_s = max(0.0, (gm - g1) / (max_rows - 1)) if max_rows > 1 else 0.0
    ctx_s = max(0.0, g1 - ctx_row_s)
    return {"rows": grid, "body_s": body, "ctx0": CTX0, "ctx_row_s": ctx_row_s, "ctx_s": ctx_s, "lm_head_row_s": head_row}


def measure_extra_head_row(model: Any, *, n_paths: int, repeats: int) -> float:
    """One DropMatch path at one position: dropout mask, LM-head row, the js criterion's share."""
    from .verifiers.dropmatch import dropout_path_logits, js_accept

    gen = torch.Generator().manual_seed(1)
    hidden = torch.randn(1, int(model.config.hidden_size), generator=gen).to(device=model.device, dtype=model.dtype)
    head = _head_of(model)
    vocab = int(head.weight.shape[0])

    def once() -> None:
        paths = dropout_path_logits(hidden, head, n_paths=n_paths, p=0.3, generator=gen)  # [N, 1, vocab]
        q = torch.zeros(1, vocab)
        q[0, 0] = 1.0
        js_accept(torch.zeros(1, dtype=torch.long), q, paths)

    return _median_time(once, repeats) / n_paths


def measure_verify_row(model: Any, *, rows: int, repeats: int) -> float:
    """One verification row's vocabulary-wide work after the forward: logits to float32, a
    softmax and an argmax (per row, from `rows` rows at once)."""
    vocab = int(_head_of(model).weight.shape[0])
    logits = torch.randn(rows, vocab, generator=torch.Generator().manual_seed(4)).to(device=model.device, dtype=model.dtype)

    def once() -> None:
        x = logits.float()
        x.softmax(dim=-1)
        x.argmax(dim=-1)

    return _median_time(once, repeats) / rows


def measure_lookup(repeats: int, context: int = 400) -> float:
    from .drafters.lookup import prompt_lookup

    gen = torch.Generator().manual_seed(2)
    tokens = torch.randint(0, 500, (context,), generator=gen)
    return _median_time(lambda: prompt_lookup(tokens, 6, max_ngram=4, min_ngram=1, overlap=False), repeats * 5)


def measure_step_overhead(model: Any, target_cost: ForwardCost, verify_row_s: float, *, vocab_ids: int,
                          new_tokens: int = 32) -> tuple[float, float | None]:
    """(decode time - predicted target forwards and rows' verification work) / steps of a
    target-alone generation, and that decode time over its prediction: the calibration's own
    check against the loop it prices (below 1: the forwards were priced too high, and the
    overhead, which cannot be negative, hides it)."""
    from .decoding import generate
    from .verifiers.spd import SPD

    prompt = torch.randint(0, vocab_ids, (CTX0,), generator=torch.Generator().manual_seed(3))
    generate(model, prompt, verifier=SPD(), max_new_tokens=4)  # warm-up
    vals, ratios = [], []
    for _ in range(2):
        out = generate(model, prompt, verifier=SPD(), max_new_tokens=new_tokens)
        role = out.work["target_verify"]
        predicted = target_cost.role_s(role) + verify_row_s * role["lm_rows"]
        vals.append(max(0.0, (out.decode_s - predicted) / max(out.steps, 1)))
        if predicted > 0:
            ratios.append(out.decode_s / predicted)
    return min(vals), (min(ratios) if ratios else None)


def calibrate(pair: Any, *, threads: int, max_rows: int = 17, repeats: int = 5, n_paths: int = 5,
              log: Callable[[str], None] = print) -> dict[str, Any]:
    """Measure the pair's costs (models loaded here); returns the calibration as a dict."""
    from .decoding.cpu import cpu_fast_paths
    from .models import load_model
    from .models.loading import load_options

    torch.set_num_threads(threads)
    busy0, wall0, cpu0 = read_proc_stat(), time.perf_counter(), time.process_time()
    target = load_model(pair.target.path, dtype=pair.dtype, device=pair.device, **load_options(pair.target)).model
    draft = None
    if (pair.get("draft") or {}).get("path"):
        draft = load_model(pair.draft.path, dtype=pair.dtype, device=pair.get("draft_device") or pair.device,
                           **load_options(pair.draft)).model
        from .models.quantize import quantize_linears

        if str(pair.draft.get("quantize") or "none") != "none":
            quantize_linears(draft, str(pair.draft.quantize))
    vocab_ids = min(int(target.config.vocab_size), 30000)
    out: dict[str, Any] = {}
    with torch.inference_mode(), cpu_fast_paths(target, *([draft] if draft is not None else [])):
        log("target forwards ...")
        out["target"] = measure_network(target, max_rows=max_rows, repeats=repeats, vocab_ids=vocab_ids)
        if draft is not None:
            log("draft forwards ...")
            out["draft"] = measure_network(draft, max_rows=max_rows, repeats=repeats, vocab_ids=vocab_ids)
        else:
            out["draft"] = None
        log("extra LM-head rows, lookups ...")
        out["extra_lm_head_row_s"] = measure_extra_head_row(target, n_paths=n_paths, repeats=repeats)
        out["lookup_s"] = measure_lookup(repeats)
        out["verify_row_s"] = measure_verify_row(target, rows=max_rows, repeats=repeats)
    log("loop overhead ...")
    out["step_overhead_s"], ratio = measure_step_overhead(target, ForwardCost.from_dict(out["target"]), out["verify_row_s"],
                                                          vocab_ids=vocab_ids)
    out["check"] = {} if ratio is None else {"target_alone_decode_over_predicted": ratio}
    if ratio is not None and not CHECK_BAND[0] <= ratio <= CHECK_BAND[1]:
        log(f"warning: a timed target-alone decode took {ratio:.2f}x what this calibration predicts "
            f"(outside {CHECK_BAND[0]}-{CHECK_BAND[1]}): its predicted speedups are biased; "
            "rerun it on a quiet machine")
    busy1, wall = read_proc_stat(), time.perf_counter() - wall0
    own = time.process_time() - cpu0
    sig = signature(pair, threads)
    others = None
    if busy0 is not None and busy1 is not None and wall > 0:
        others = min(1.0, max(0.0, (busy1 - busy0 - own) / (wall * (sig["cpu_count"] or 1))))
    sig["created"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    sig["duration_s"] = round(wall, 1)
    sig["others_share"] = others  # the load it was taken under
    out["signature"] = sig
    Calibration.from_dict(out)  # the stored form reads back
    return out


def _check_results_folder(results: Path) -> None:
    """--results must be a folder (or not exist yet) whose every name fits the file system."""
    for part in results.parts:
        if len(part.encode("utf-8", "surrogatepass")) > 255:
            raise ConfigError(f"--results {str(results)[:80]!r}...: a name in it is over 255 bytes")
    walk = Path(results.anchor) if results.is_absolute() else Path(".")
    for part in results.parts[1 if results.is_absolute() else 0:]:
        walk = walk / part
        if os.path.lexists(walk) and not os.path.isdir(walk):
            raise ConfigError(f"--results {results}: {walk} is a file, not a folder; name a results folder")


def main(argv: list[str] | None = None) -> int:
    import os

    parser = argparse.ArgumentParser(prog="python -m loosespec_bench.calibrate", description=__doc__.split("\n")[0])
    parser.add_argument("--pair", required=True, help="a pair config name (conf/pair/<name>.yaml), e.g. tiny, qwen25_coder_embedded")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's default, as runs with threads=null)")
    parser.add_argument("--results", default=os.environ.get("LOOSESPEC_RESULTS_DIR", "results"), help="results directory (default: %(default)s)")
    parser.add_argument("--dtype", choices=("float32", "bfloat16", "float16"), default=None,
                        help="the pair's dtype for runs with pair.dtype=<this> (default: the pair file's)")
    parser.add_argument("--repeats", type=int, default=5, help="timings per point, median kept (default: %(default)s)")
    parser.add_argument("--max-rows", type=int, default=17, help="largest verification forward to measure: K + 1 (default: %(default)s)")
    args = parser.parse_args(argv)
    try:
        if not 1 <= args.repeats <= 1000 or not 2 <= args.max_rows <= 256:
            raise ConfigError("--repeats must be 1 to 1000 and --max-rows 2 to 256 (a verification forward of K + 1 rows)")
        if args.threads is not None and not 1 <= args.threads <= 4096:
            raise ConfigError("--threads must be 1 to 4096")
        _check_results_folder(Path(args.results))
        pair = pair_node(args.pair)
        if args.dtype:
            pair.dtype = args.dtype  # part of the signature: a float32 run finds only a float32 calibration
        threads = args.threads or torch.get_num_threads()
        cal = calibrate(pair, threads=threads, max_rows=args.max_rows, repeats=args.repeats,
                        log=lambda m: print(m, file=sys.stderr))
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    from .safe_files import atomic_write_text
    from .store.declarations import check_calibration

    path = calibration_path(args.results, {k: cal["signature"][k] for k in signature(pair, threads)})
    try:
        check_calibration(json.loads(json.dumps(cal)), str(path))  # never store what find_calibration would refuse
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, json.dumps(cal, indent=1), root=args.results)  # never through a link, never half a file
    except (ConfigError, OSError) as err:
        print(f"error: the calibration was not written: {str(err)[:300]} (a quiet machine and --repeats 9 steady it)", file=sys.stderr)
        return 2
    t = cal["target"]
    print(f"calibration written: {path}")
    print(f"  target 1-row forward {1e3 * t['body_s'][0]:.2f} ms, LM head {1e6 * t['lm_head_row_s']:.1f} us/row; "
          f"step overhead {1e3 * cal['step_overhead_s']:.2f} ms; lookup {1e6 * cal['lookup_s']:.1f} us; "
          f"took {cal['signature']['duration_s']} s, other processes {cal['signature']['others_share']}")
    ratio = cal["check"].get("target_alone_decode_over_predicted")
    if ratio is not None:
        print(f"  check: a timed target-alone decode took {ratio:.2f}x its predicted time (band {CHECK_BAND[0]}-{CHECK_BAND[1]})")
    return 0


def main_ending_on_signals(argv: list[str] | None = None) -> int:
    """main(), where SIGINT (Ctrl-C) and SIGTERM end with one line (exit 130 / 143), never a traceback."""
    from .interrupts import ending_on_signals

    return ending_on_signals(main, argv, "the calibration: nothing was stored (it is written whole at its end); the same command measures again")


if __name__ == "__main__":
    sys.exit(main_ending_on_signals())
