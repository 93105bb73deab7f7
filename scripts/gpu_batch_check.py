#!/usr/bin/env python
"""GPU check of the batched loop (issue 69 item 6), one prepared script for a lent GPU.

UNTESTED ON A GPU: written and run on CPU only (no GPU was lent when it was written); the CPU
run (--device cpu) exercises every line but the CUDA placement itself.

  1. Identity: the tiny pair in float32 on the device, every rule named in RULES with the
     model, MLA and prompt-lookup drafters (the target alone with none), batch 4 and 8 against
     batch 1 (the batch-1 loop): tokens, steps and accepted counts per problem. On a GPU,
     float32 matmuls may use TF32; it is switched off here so that float32 means float32.
  2. Throughput: tokens per second against batch size (1, 2, 4, 8, 16) for the target alone,
     SPD and FLy (bench/batch.py, wall time around torch.cuda.synchronize), on the tiny pair,
     and on --target/--draft when given (local model folders carried to the machine).

Writes gpu_batch_check.json (and the bench's JSON) into $OUT when set, else the current
folder (through the package's safe_files gate); exit status 1 when any identity check or bench
run fails, 2 when no GPU is visible (unless --device cpu). --rules narrows the identity part
(a CPU dry run of all ten rules takes over 15 min on a loaded 2-core box).

The package must be installed where it runs (it finds no path by hand), e.g. on the lent machine:
  pip install -q -e . && python scripts/gpu_batch_check.py

  python scripts/gpu_batch_check.py                 # on the GPU machine
  python scripts/gpu_batch_check.py --device cpu    # the same checks on the CPU (dry run)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import torch

from loosespec_bench.safe_files import atomic_write_text

RULES = ("ar", "spd", "fly", "dropmatch", "typical", "fsd", "ensemble", "threshold", "cascade", "lenient")


def identity(device: str, rules: tuple[str, ...]) -> list[dict]:
    from hydra import compose, initialize_config_dir

    from loosespec_bench.build import build_verifier
    from loosespec_bench.decoding import generate
    from loosespec_bench.decoding.batch import BatchRequest, generate_batch
    from loosespec_bench.drafters import MLADrafter, ModelDrafter, PromptLookupDrafter
    from loosespec_bench.models.tiny import tiny_model, tiny_near_copy, tiny_tokenizer
    from loosespec_bench.settings.config import CONF_DIR

    target, draft, tok = tiny_model(0).to(device), tiny_near_copy(0).to(device), tiny_tokenizer()
    texts = ["def add(a, b):\n    return a + b\n\ndef add(a, b):", "Question: 3 + 4 = ?", "x", "The quick brown fox jumps over the",
             "1, 2, 3, 4, 5,", "hello hello hello", "for i in range(10):\n    print(i)\nfor", "abcabcabcab", "Answer step by step."]
    prompts = [torch.tensor(tok(t, add_special_tokens=False).input_ids) for t in texts]
    budgets = [12, 16, 8, 14, 15, 10, 16, 9, 13]
    drafters = {"model": lambda: ModelDrafter(draft, k=4), "mla": lambda: MLADrafter(draft, k=5),
                "pld": lambda: PromptLookupDrafter(k=4, max_ngram=3)}
    rows = []
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        for rule in rules:
            verifier = build_verifier(compose(config_name="config", overrides=["pair=tiny", f"method={rule}"]))
            for name in ([None] if verifier.target_alone else list(drafters)):
                make = (lambda: None) if name is None else drafters[name]
                ref = [generate(target, p, verifier=verifier, drafter=make(), max_new_tokens=n, eos_token_ids={258},
                                generator=torch.Generator().manual_seed(i)) for i, (p, n) in enumerate(zip(prompts, budgets))]
                for batch in (4, 8):
                    reqs = [BatchRequest(p, torch.Generator().manual_seed(i), n) for i, (p, n) in enumerate(zip(prompts, budgets))]
                    outs = generate_batch(target, reqs, verifier=verifier, drafter=make(), batch_size=batch, eos_token_ids={258})
                    same = sum(o.new_tokens == r.new_tokens and o.accepted == r.accepted and o.drafted == r.drafted
                               for o, r in zip(outs, ref))
                    ok = same == len(ref)
                    rows.append({"rule": rule, "drafter": name, "batch": batch, "identical": same, "of": len(ref), "ok": ok})
                    print(f"{'PASS' if ok else 'FAIL'} {rule:<10} {str(name):<6} batch {batch}: {same}/{len(ref)} identical to batch 1",
                          flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cuda")
    p.add_argument("--target", default=None, help="a local target folder for the throughput part (optional)")
    p.add_argument("--draft", default=None, help="its draft folder")
    p.add_argument("--problems", type=int, default=32)
    p.add_argument("--max-new-tokens", type=int, default=64)
    p.add_argument("--rules", default=",".join(RULES), help="comma list of the rules the identity part checks (default: all of RULES)")
    args = p.parse_args(argv)
    rules = tuple(r for r in args.rules.split(",") if r)
    if not rules or set(rules) - set(RULES):
        p.error(f"--rules takes a comma list of {', '.join(RULES)}")
    if args.device.startswith("cuda"):
        if not torch.cuda.is_available():
            print("no GPU visible (torch.cuda.is_available() is False): nothing checked; --device cpu for a dry run")
            return 2
        torch.backends.cuda.matmul.allow_tf32 = False  # float32 identity means float32 arithmetic
        torch.backends.cudnn.allow_tf32 = False
        print(f"device: {torch.cuda.get_device_name(0)}, torch {torch.__version__}", flush=True)
    out_dir = Path(os.environ.get("OUT") or ".")
    out_dir.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    rows = identity(args.device, rules)
    failed = [r for r in rows if not r["ok"]]
    print(f"identity: {len(rows) - len(failed)}/{len(rows)} checks pass ({time.perf_counter() - t0:.0f} s)", flush=True)

    from loosespec_bench.bench import batch as bench

    runs = [["--tiny", "--dtypes", "float32,bfloat16"]]
    if args.target and args.draft:
        runs.append(["--target", args.target, "--draft", args.draft, "--dtypes", "bfloat16,float32"])
    bench_rc = []
    for i, extra in enumerate(runs):
        # The bench's own status: 2 is a refusal (its error: line printed), counted as a failure here.
        bench_rc.append(bench.main([*extra, "--device", args.device, "--problems", str(args.problems), "--max-new-tokens",
                                    str(args.max_new_tokens), "--repeats", "2", "--batch-sizes", "1,2,4,8,16",
                                    "--out", str(out_dir / f"gpu_batch_bench_{i}.json")]))
    atomic_write_text(out_dir / "gpu_batch_check.json",
                      json.dumps({"device": args.device, "identity": rows, "bench_exit_status": bench_rc}, indent=1))
    return 1 if failed or any(bench_rc) else 0


if __name__ == "__main__":
    sys.exit(main())
