"""Which finished records kept tokens after a completed stop string? Before commit dd185bf the
decoding loop checked a step's accepted tokens for EOS before any stop string, so a step that
accepted a stop string's last token and then an EOS (HumanEval: "```" then <|im_end|>) kept the
EOS: the text is the same (it is cut at the stop string) but the ids differ from the target
alone's, and the step counts one token more. This reads run folders (data, never code), decodes
each record's output ids with the target's tokenizer and prints, per folder, the records in
which a stop string completes before the last token, with how many tokens follow it.

    python scripts/audit_stop_order.py results/loose_rules/*_gsm8k_*

Lab script, kept in scripts/ (not installed with the package): it decides which runs made
before the fix need a rerun (results/loose_rules/README.md cites it).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from omegaconf import OmegaConf

from loosespec_bench.tasks.prompting import make_stop_fn
from loosespec_bench.store.run_folder import RunFolder
from loosespec_bench.tasks.niah import load_tokenizer


def late_stops(folder: Path, tokenizers: dict[str, object]) -> list[tuple[str, int, str]]:
    """(sample id, tokens kept after the stop string, recorded stop reason) per affected record."""
    cfg = OmegaConf.load(folder / "config.yaml")  # plain YAML: no resolvers run on someone else's file
    path = str(cfg.pair.target.path)
    tok = tokenizers.setdefault(path, load_tokenizer(path))
    stop = make_stop_fn(tok, list(cfg.dataset.get("stop_strings") or []))
    hits = []
    for rec in RunFolder(folder, create=False).records():
        ids = rec["output_ids"]
        if stop is None or not stop(ids):
            continue
        first = next(j for j in range(1, len(ids) + 1) if stop(ids[:j]))
        if first < len(ids):
            hits.append((rec["id"], len(ids) - first, rec["metrics"].get("stop_reason")))
    return hits


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folders", nargs="+", type=Path, help="run folders (with config.yaml and samples.jsonl)")
    args = ap.parse_args()
    tokenizers: dict[str, object] = {}
    total = 0
    for folder in args.folders:
        hits = late_stops(folder, tokenizers)
        total += len(hits)
        print(json.dumps({"run": folder.name, "affected": len(hits), "records": hits}))
    print(f"{total} record(s) in {len(args.folders)} folder(s) kept tokens after a stop string")


if __name__ == "__main__":
    main()
