"""loose_examples.md: the loose accepts that changed an answer, decoded where the tokenizer is
at hand offline."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from ..compare import load_run


# ---- the loose accepts that changed an answer ---------------------------------------------------
def _decoder(run_dir: Path) -> Any:
    """The run's target tokenizer's decode (embedded models: their converted folder; a hub id:
    the local cache only), or None where it cannot be loaded offline: token ids are shown then."""
    import yaml

    try:
        from ...safe_files import read_text

        cfg = yaml.safe_load(read_text(run_dir / "config.yaml"))  # never through a link or a FIFO
        path = str(cfg["pair"]["target"]["path"])
        from transformers import AutoTokenizer

        if path.startswith("embedded:"):
            from ...models.embedded import EMBEDDED_MODELS, is_converted
            from ...models.loading import embedded_dir

            name = path.split(":", 1)[1]
            if name in EMBEDDED_MODELS and not is_converted(name):
                return None  # a report never converts a model (minutes of CPU, GBs of disk): ids instead
            path = str(embedded_dir(name))
        tok = AutoTokenizer.from_pretrained(path, local_files_only=True)
    except Exception:  # no config, a tiny model, no offline copy: ids instead of text
        return None
    return lambda ids: tok.decode(ids, skip_special_tokens=True)


def loose_examples(run_dir: Path, limit: int = 3) -> list[dict[str, Any]]:
    """Samples where a loose accept went with a changed answer, up to `limit` each way: lost (the
    loose rule wrong, the target alone right) first, then gained (the reverse: a rule that changes
    answers both ways reads as noise, one that only loses as damage). Each with its first loose
    accept: the text before it, the draft's token kept, the target's token it replaced, and both
    final answers (from the per-step records: rec["steps"])."""
    run = load_run(run_dir)
    decode = _decoder(run_dir)
    show = decode or (lambda ids: " ".join(map(str, ids)))
    out: list[dict[str, Any]] = []
    for change, (method_ok, target_ok) in (("lost", (False, True)), ("gained", (True, False))):
        found = 0
        for rec in run.records.values():
            base = rec.get("baseline") or {}
            if not ((base.get("score") or {}).get("correct") is target_ok and (rec.get("score") or {}).get("correct") is method_ok):
                continue
            emitted = 0
            for step in rec.get("steps", []):
                loose = step.get("loose_accepted") or []
                if loose and "target_tokens" in step:
                    pos = loose[0]
                    at = emitted + pos
                    out.append({
                        "id": rec["id"],
                        "change": change,
                        "context": show(rec["output_ids"][max(0, at - 16):at]),
                        "draft_token": show([step["draft"][pos]]),
                        "target_token": show([step["target_tokens"][pos]]),
                        "loose_accepts_in_sample": sum(len(s.get("loose_accepted") or []) for s in rec.get("steps", [])),
                        "answer": _answer(rec.get("score") or {}, rec.get("reference")),
                        "target_answer": _answer(base.get("score") or {}, rec.get("reference")),
                        "reference": _reference(rec.get("reference")),
                        "decoded": decode is not None,
                    })
                    found += 1
                    break
                emitted += step["accepted"] + 1
            if found >= limit:
                break
    return out


def _answer(score: Mapping[str, Any], reference: Any) -> Any:
    """What a sample answered, in the words its task scores it by: the extracted answer; for an
    instruction-following task (IFEval: no single answer) the instructions it failed, by the strict
    check; for a code task (no extracted answer: the tests decide) passed, or the last line the
    failing tests printed; for graded recall (NIAH) the recall and the values it missed."""
    if score.get("pred") is not None:
        return score["pred"]
    if "inst_strict" in score:
        ids = reference.get("instruction_id_list", []) if isinstance(reference, Mapping) else []
        failed = [ids[i] if i < len(ids) else f"instruction {i}" for i, ok in enumerate(score["inst_strict"]) if not ok]
        return ("failed " + ", ".join(failed)) if failed else "all instructions followed"
    if "status" in score:  # sandboxed tests: the reader needs why they failed, not the traceback
        if score["status"] == "passed":
            return "passed"
        last = [ln.strip() for ln in str(score.get("output") or "").splitlines() if ln.strip()]
        return f"{score['status']}: {last[-1]}" if last else str(score["status"])
    if "recall" in score:
        values = reference.get("values", []) if isinstance(reference, Mapping) else []
        missed = [v for v, hit in zip(values, score.get("found") or []) if not hit]
        return f"recall {score['recall']:.2f}" + (f", missed {', '.join(map(str, missed))}" if missed else "")
    return score.get("pred")


def _reference(reference: Any) -> Any:
    """The reference as a reader needs it: an IFEval record is its instruction ids, a code problem
    its entry point (the prompt and tests are in the sample), a needle its key and value count."""
    if isinstance(reference, Mapping):
        if "instruction_id_list" in reference:
            return ", ".join(reference["instruction_id_list"])
        if "entry_point" in reference:
            return f"tests of {reference['entry_point']}()"
        if "values" in reference and "key" in reference:
            return f"{len(reference['values'])} values of {reference['key']}"
    return reference


def format_examples(examples_by_run: Mapping[str, list[dict[str, Any]]]) -> str:
    lines = ["# Loose accepts that changed an answer", "",
             "Per run, up to three samples each way: lost (the loose rule answered wrongly, the target alone rightly),",
             "then gained (the reverse), each with its first loose accept (the draft's token kept where the target",
             "would have written its own). The first loose accept is not necessarily the one that changed the answer;",
             "`loose accepts` counts them all. A rule that only loses answers damages them; one that changes them both",
             "ways at the rate the lossless rules do (noise_floor.md) is within bf16's noise.", ""]
    for name, examples in examples_by_run.items():
        lines.append(f"## {name}")
        if not examples:
            lines += ["", "No sample where a loose accept went with a changed answer.", ""]
            continue
        lines += ["", "| sample | change | text before | draft kept | target's token | loose accepts | answer | target alone | reference |",
                  "|---|---|---|---|---|---:|---|---|---|"]
        for e in examples:
            cells = [e["id"], e["change"], "…" + e["context"], e["draft_token"], e["target_token"], str(e["loose_accepts_in_sample"]),
                     str(e["answer"]), str(e["target_answer"]), str(e["reference"])[:80]]
            lines.append("| " + " | ".join(c.replace("|", "\\|").replace("\n", "⏎") for c in cells) + " |")
        lines.append("")
    return "\n".join(lines)
