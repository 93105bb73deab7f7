"""Is a lossless rule's lost answer bf16 numerics or a defect? Runs a config's method and the
target alone side by side (baseline=paired, no re-timing) on chosen samples, in the pair's
dtype or another, and prints per sample whether their tokens are identical, where they first
differ and which was right.

    python scripts/check_lossless.py --ids th-4 de-116 --dtype float32 -- \\
        experiment=spd_k15_70b paper_dataset=mgsm_native_cot scale=cpu

A lossless rule (SPD, greedy) must give the target alone's tokens exactly in float32; in bf16 a
verification forward over K + 1 positions rounds differently from a one-token step, and a
near-tie can flip the argmax. Identical in float32 and different in bf16 is numerics; different
in float32 is a defect. The rows go to stdout as JSON lines (and to --out, if given).

Lab script, kept in scripts/ (not installed with the package): it is a diagnostic for a lossless
rule's lost answer (results/cpu/README.md's lossless_check rows, docs/data.md): bf16 numerics or a
defect; the replication's record cites it.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from hydra import compose, initialize_config_dir

from loosespec_bench.run.app import Runner
from loosespec_bench.build import build_engine, build_task
from loosespec_bench.settings.config import CONF_DIR
from loosespec_bench.errors import ConfigError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ids", nargs="+", required=True, help="sample ids of the config's selection")
    parser.add_argument("--dtype", help="pair.dtype for this check (default: the config's)")
    parser.add_argument("--out", type=Path, help="also write the rows here (JSON list)")
    parser.add_argument("overrides", nargs="*", help="the run's config overrides, as on the command line")
    args = parser.parse_args(argv)
    extra = ["baseline=paired", "timing.retime=false", "progress=false"] + ([f"pair.dtype={args.dtype}"] if args.dtype else [])
    # Plain Hydra composition, not points.compose_points: the check's settings (extra) must win
    # over the run's own (a shared-baseline run's overrides say baseline=shared), as the last
    # of a key given twice does here.
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose(config_name="config", overrides=[*args.overrides, *extra])
    task = build_task(cfg)
    samples = {s.id: s for s in task.samples()}
    missing = [i for i in args.ids if i not in samples]
    if missing:  # before any model loads
        print(f"error: {', '.join(missing)} not in this config's selection of {len(samples)} samples "
              f"(e.g. {', '.join(list(samples)[:3])}); pass ids from its samples.jsonl", file=sys.stderr)
        return 2
    engine = build_engine(cfg, task)
    try:
        runner = Runner(cfg, task, engine)
        runner.warmup(samples[args.ids[0]])
        rows = []
        for i, sid in enumerate(args.ids):
            rec = runner.run_sample(samples[sid], i)
            a, b = rec["output_ids"], rec["baseline"]["output_ids"]
            key = task.quality_key
            rows.append({
                "id": sid, "method": cfg.method.name, "dtype": str(cfg.pair.dtype), "identical": a == b,
                "first_difference": next((j for j, (x, y) in enumerate(zip(a, b)) if x != y), None if len(a) == len(b) else min(len(a), len(b))),
                "method_tokens": len(a), "target_tokens": len(b),
                "method_score": (rec.get("score") or {}).get(key), "target_score": (rec["baseline"].get("score") or {}).get(key),
                "tau": rec["metrics"]["tau"],
            })
            print(json.dumps(rows[-1]), flush=True)
    finally:
        engine.close()
    if args.out:
        args.out.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)
