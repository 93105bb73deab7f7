"""Why a loose rule lost the answers it lost (issue 70): each problem the rule got wrong and the
target alone right, read from the committed samples and put in one of four kinds, checked in
this order:

- truncation: the rule's output hit the token budget (stop reason max_new_tokens) where the
  target alone's did not;
- answer-first shortcut: the rule states its final answer before any computation (no `=` and no
  arithmetic before "answer"), where the target alone worked the problem out first;
- format: the reference number is in the rule's output as a result (`= N`, or its last number)
  but the scorer read another (the answer was there, its form was not);
- reasoning: otherwise: the rule's chain of working went wrong (a step skipped, a wrong
  operation or quantity).

A heuristic over 0/1 math answers (GSM8K-style: a final number); the file it writes lists every
problem with its kind so that a reader can check each one.

    python -m loosespec_bench.report.claims.losses RUN_DIR [RUN_DIR ...] --out FILE.md
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Any

from ...errors import ConfigError
from ...safe_files import atomic_write_text, check_regular
from ...store.run_folder import read_jsonl

KINDS = ("reasoning", "answer-first shortcut", "format", "truncation")
_NUM = re.compile(r"-?\d[\d,]*(?:\.\d+)?")


def _num(text: str) -> float | None:
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return None


def kind_of(rec: dict[str, Any]) -> str:
    """The kind of one lost answer (module docstring)."""
    out = str(rec.get("output_text") or "")
    base = rec.get("baseline") or {}
    stop = (rec.get("metrics") or {}).get("stop_reason")
    base_stop = (base.get("metrics") or {}).get("stop_reason")
    if stop == "max_new_tokens" and base_stop != "max_new_tokens":
        return "truncation"
    head = out.lower().split("answer", 1)[0] if "answer" in out.lower() else None
    if head is not None and "=" not in head and not re.search(r"\d\s*[-+*/x×]\s*\d", head):
        return "answer-first shortcut"
    ref = _num(str(rec.get("reference") or ""))
    if ref is not None:
        results = [_num(m) for m in re.findall(r"=\s*\$?(-?\d[\d,]*(?:\.\d+)?)", out)]
        numbers = [_num(m) for m in _NUM.findall(out)]
        last = numbers[-1] if numbers else None
        if ref in results[-2:] or (last is not None and last == ref):
            return "format"
    return "reasoning"


def lost_records(run_dir: Path, key: str = "correct") -> list[dict[str, Any]]:
    out = []
    # Through the gate (never a link or a FIFO); a line that is not a complete record of its
    # kinds (score and baseline objects, texts where texts belong) is skipped with a warning.
    for _, rec in read_jsonl(Path(run_dir) / "samples.jsonl"):
        m = (rec.get("score") or {}).get(key)
        t = ((rec.get("baseline") or {}).get("score") or {}).get(key)
        if t and m is not None and not m:
            out.append(rec)
    return out


def breakdown(run_dir: Path) -> dict[str, Any]:
    recs = lost_records(run_dir)
    kinds = {r["id"]: kind_of(r) for r in recs}
    counts = {k: sum(1 for v in kinds.values() if v == k) for k in KINDS}
    return {"run": str(run_dir), "lost": len(recs), "counts": counts, "kinds": kinds,
            "records": {r["id"]: r for r in recs}}


def format_breakdowns(items: list[tuple[str, dict[str, Any]]]) -> str:
    lines = ["# Why the answers were lost", "",
             "Every problem a loose rule answered wrongly and the target alone rightly, from the committed samples, by the "
             "kinds of `loosespec_bench/report/claims/losses.py` (checked in order: truncation, answer-first shortcut, "
             "format, reasoning; a heuristic, each problem listed below to be checked by eye).", "",
             "| run | lost | " + " | ".join(KINDS) + " |", "|---|---:|" + "---:|" * len(KINDS)]
    for title, b in items:
        lines.append(f"| {title} | {b['lost']} | " + " | ".join(
            f"{b['counts'][k]} ({b['counts'][k] / b['lost']:.0%})" if b["lost"] else "0" for k in KINDS) + " |")
    for title, b in items:
        lines += ["", f"## {title}", "", f"`{b['run']}`", "", "| problem | kind | rule's answer | target alone's | reference | rule's output (start) |",
                  "|---|---|---|---|---|---|"]
        for sid, kind in sorted(b["kinds"].items(), key=lambda kv: (KINDS.index(kv[1]), kv[0])):
            r = b["records"][sid]
            text = str(r.get("output_text") or "").replace("\n", " ⏎ ").replace("|", "\\|")[:140]
            lines.append(f"| {sid} | {kind} | {(r.get('score') or {}).get('pred')} | "
                         f"{((r.get('baseline') or {}).get('score') or {}).get('pred')} | {r.get('reference')} | {text} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m loosespec_bench.report.claims.losses", description=__doc__.split("\n")[0])
    parser.add_argument("runs", nargs="+", help="run folders (samples.jsonl), optionally TITLE=FOLDER")
    parser.add_argument("--out", required=True, type=Path)
    args = parser.parse_args(argv)
    try:
        items = []
        for spec in args.runs:
            title, _, folder = spec.rpartition("=") if "=" in spec else (Path(spec).name, "", spec)
            if not check_regular(Path(folder) / "samples.jsonl"):  # a link or a FIFO there: ConfigError
                raise ConfigError(f"{folder}: no samples.jsonl")
            items.append((title, breakdown(Path(folder))))
        atomic_write_text(args.out, format_breakdowns(items))  # never through a link, never half a file
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(f"losses: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
