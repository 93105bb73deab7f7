"""Hand-built run folders the report tests share."""

from __future__ import annotations

import json
from pathlib import Path

# A target's shape for costmodel.lm_head_share (read from its config.json, offline).
TARGET_SHAPE = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
                "num_key_value_heads": 4, "vocab_size": 1000}


def dropmatch_run(tmp_path: Path, repeats: int = 1) -> tuple[Path, Path]:
    """A DropMatch run folder with step timings, and a target folder whose config.json has
    TARGET_SHAPE. Summed over the problems (5 x repeats): DropMatch 1% of decode time and 10%
    of the target's forwards."""
    model = tmp_path / "target"
    model.mkdir()
    (model / "config.json").write_text(json.dumps(TARGET_SHAPE))
    run = tmp_path / "run"
    run.mkdir()
    dm = [0.01, 0.03, 0.02, 0.05, 0.04]
    lines = [{"id": str(i), "output_text": "x", "steps": [{"accepted": 0, "dropmatch_s": dm[i % 5]}],
              "metrics": {"decode_s": 1.0 * (i % 5 + 1), "phase_s": {"target": 0.1 * (i % 5 + 1)}}} for i in range(5 * repeats)]
    (run / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    return run, model
