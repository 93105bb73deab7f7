"""A run's per-request acceptance in the field's two schemas, and both acceptance-length
definitions side by side (issue 72 item 5).

    python -m loosespec_bench.report.acceptance RUN_DIR [RUN_DIR ...] [--out DIR]

Writes, per run folder, into --out (default: the run folder itself):
- acceptance_vllm.jsonl: one line per request, {"id", "metrics": {"speculative_decoding": {...}}}
  in the shape vLLM's `--per-request-spec-decode-metrics detailed` puts in a response (vLLM
  0.32 docs, features/speculative_decoding/acceptance_metrics.md): mean_acceptance_length,
  draft_acceptance_rate, the dense acceptance_histogram, acceptance_histogram_by_draft_length,
  num_spec_steps, num_accepted_draft_tokens, num_draft_tokens, num_spec_tokens,
  per_step_accepted, per_step_drafted. `null` for a run that drafted nothing (the target alone).
- acceptance_aiperf.jsonl: one line per request, {"id", "spec_decode_acceptance": {...},
  "loosespec": {...}}: the first is NVIDIA AIPerf's engine-neutral SpecDecodeAcceptanceRecord
  (the sparse histogram with integer keys, its invariants hold: counts sum to num_spec_steps,
  the j-weighted sum is num_accepted_draft_tokens); the second carries what neither schema has.
- acceptance.md: the run's acceptance length under both definitions the field uses, labelled.

What neither schema has (under "loosespec" in the AIPerf file, and in the vLLM file beside
"metrics"): loose_accepted_draft_tokens, the accepted draft tokens the rule took although they
differ from the target's own choice (a loose accept; null where the run kept no step records),
and steps_without_draft, our steps that offered no draft (prompt lookup finding no match):
vLLM and AIPerf leave those steps out of num_spec_steps, while our tau counts them.

The two acceptance-length definitions:
- pooled (vLLM, SGLang, Spec-Bench): 1 + sum(accepted) / sum(spec steps) over every request;
  our `tau` pools too, but as emitted tokens / all steps (so a step without a draft counts
  with length 1, and a step cut short by EOS counts what it emitted);
- mean of per-request means (SpecForge, specdec_bench): each request's 1 + accepted / spec
  steps, averaged over requests (short requests weigh as much as long ones).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..safe_files import is_real_dir
from ..store.run_folder import atomic_write, read_jsonl

VLLM_FILE = "acceptance_vllm.jsonl"
AIPERF_FILE = "acceptance_aiperf.jsonl"
SUMMARY_FILE = "acceptance.md"


def _int_list(value: Any, what: str, rid: str) -> list[int]:
    if not isinstance(value, list) or not all(isinstance(x, int) and not isinstance(x, bool) and 0 <= x < 10**6 for x in value):
        raise ConfigError(f"request {rid}: metrics.{what} is not a list of counts")
    return value


def request_acceptance(rec: dict[str, Any]) -> dict[str, Any] | None:
    """One request's acceptance, engine-neutral: None where it offered no draft at all."""
    rid = rec["id"]
    m = rec["metrics"]
    accepted = _int_list(m.get("accepted", []), "accepted", rid)
    drafted = _int_list(m.get("drafted", []), "drafted", rid)
    if len(accepted) != len(drafted):
        raise ConfigError(f"request {rid}: metrics.accepted and metrics.drafted differ in length")
    if any(a > d for a, d in zip(accepted, drafted)):
        raise ConfigError(f"request {rid}: a step accepted more draft tokens than it drafted")
    if not any(drafted):
        return None
    # vLLM omits steps that scheduled no draft tokens; so does AIPerf's record (it reads vLLM's).
    spec = [(a, d) for a, d in zip(accepted, drafted) if d > 0]
    k = max(d for _, d in spec)
    by_len: dict[int, list[int]] = {}
    for a, d in spec:
        by_len.setdefault(d, [0] * (d + 1))[a] += 1
    dense = [0] * (k + 1)
    for a, _ in spec:
        dense[a] += 1
    steps = rec.get("steps")
    loose = (sum(len(s.get("loose_accepted", [])) for s in steps if isinstance(s, dict))
             if isinstance(steps, list) and steps else None)
    n_acc = sum(a for a, _ in spec)
    n_draft = sum(d for _, d in spec)
    return {
        "num_spec_steps": len(spec),
        "num_accepted_draft_tokens": n_acc,
        "num_draft_tokens": n_draft,
        "num_spec_tokens": k,
        "mean_acceptance_length": 1 + n_acc / len(spec),
        "draft_acceptance_rate": n_acc / n_draft,
        "histogram": dense,
        "by_draft_length": by_len,
        "per_step_accepted": [a for a, _ in spec],
        "per_step_drafted": [d for _, d in spec],
        "completion_tokens": m.get("new_tokens") if isinstance(m.get("new_tokens"), int) else None,
        "loose_accepted_draft_tokens": loose,
        "steps_without_draft": sum(1 for d in drafted if d == 0),
    }


def vllm_record(acc: dict[str, Any] | None) -> dict[str, Any] | None:
    """vLLM's metrics.speculative_decoding (the `detailed` level), or None (no spec decode)."""
    if acc is None:
        return None
    return {
        "mean_acceptance_length": acc["mean_acceptance_length"],
        "draft_acceptance_rate": acc["draft_acceptance_rate"],
        "acceptance_histogram": acc["histogram"],
        # JSON object keys are strings in vLLM's response.
        "acceptance_histogram_by_draft_length": {str(k): v for k, v in sorted(acc["by_draft_length"].items())},
        "num_spec_steps": acc["num_spec_steps"],
        "num_accepted_draft_tokens": acc["num_accepted_draft_tokens"],
        "num_draft_tokens": acc["num_draft_tokens"],
        "num_spec_tokens": acc["num_spec_tokens"],
        "per_step_accepted": acc["per_step_accepted"],
        "per_step_drafted": acc["per_step_drafted"],
    }


def aiperf_record(acc: dict[str, Any], engine: str) -> dict[str, Any]:
    """AIPerf's SpecDecodeAcceptanceRecord: a sparse histogram, zero buckets omitted."""
    return {
        "engine": engine,
        "mean_acceptance_length": acc["mean_acceptance_length"],
        "draft_acceptance_rate": acc["draft_acceptance_rate"],
        "acceptance_histogram": {j: c for j, c in enumerate(acc["histogram"]) if c},
        "num_accepted_draft_tokens": acc["num_accepted_draft_tokens"],
        "num_draft_tokens": acc["num_draft_tokens"],
        "num_spec_steps": acc["num_spec_steps"],
        "num_spec_tokens": acc["num_spec_tokens"],
        "completion_tokens": acc["completion_tokens"],
        "per_step_accepted": acc["per_step_accepted"],
        "per_step_drafted": acc["per_step_drafted"],
    }


def acceptance_lengths(accs: list[dict[str, Any] | None], records: list[dict[str, Any]]) -> dict[str, Any]:
    """Both definitions of acceptance length over one run, and our tau, with n."""
    drafted = [a for a in accs if a is not None]
    steps = sum(r["metrics"].get("steps", 0) for r in records)
    tokens = sum(r["metrics"].get("new_tokens", 0) for r in records)
    out: dict[str, Any] = {"n_requests": len(records), "n_requests_with_drafts": len(drafted),
                           "tau": tokens / steps if steps else None}
    if drafted:
        spec = sum(a["num_spec_steps"] for a in drafted)
        out["pooled"] = 1 + sum(a["num_accepted_draft_tokens"] for a in drafted) / spec
        out["mean_of_request_means"] = statistics.fmean(a["mean_acceptance_length"] for a in drafted)
        out["draft_acceptance_rate"] = (sum(a["num_accepted_draft_tokens"] for a in drafted)
                                        / sum(a["num_draft_tokens"] for a in drafted))
        loose = [a["loose_accepted_draft_tokens"] for a in drafted]
        out["loose_accepted_draft_tokens"] = None if any(x is None for x in loose) else sum(loose)
    return out


def _engine_name(folder: Path) -> str:
    # The record's provenance: which engine produced the counts (ours, or vLLM through ours).
    try:
        from ..store.run_folder import load_config_file
        cfg, _ = load_config_file(folder / "config.yaml")
        name = str(((cfg or {}).get("engine") or {}).get("name") or "hf")
    except ConfigError:
        name = "hf"
    return f"loosespec_bench-{name}"


def export_run(folder: Path, out: Path | None = None) -> dict[str, Any]:
    """Write the two exports and acceptance.md for one run folder; returns the lengths."""
    if not is_real_dir(folder):
        raise ConfigError(f"{folder} is not a run folder (a real directory): give the folder that holds samples.jsonl")
    records = [rec for _, rec in read_jsonl(folder / "samples.jsonl")]
    if not records:
        raise ConfigError(f"{folder}/samples.jsonl holds no complete sample record: nothing to export")
    out = out or folder
    if not is_real_dir(out):
        raise ConfigError(f"--out {out} is not a directory (or is a link): create it first")
    engine = _engine_name(folder)
    accs = [request_acceptance(r) for r in records]
    vllm_lines, aiperf_lines = [], []
    for rec, acc in zip(records, accs):
        extra = None if acc is None else {"loose_accepted_draft_tokens": acc["loose_accepted_draft_tokens"],
                                          "steps_without_draft": acc["steps_without_draft"]}
        vllm_lines.append(json.dumps({"id": rec["id"], "metrics": {"speculative_decoding": vllm_record(acc)},
                                      "loosespec": extra}))
        if acc is not None:
            aiperf_lines.append(json.dumps({"id": rec["id"], "spec_decode_acceptance": aiperf_record(acc, engine),
                                            "loosespec": extra}))
    atomic_write(out / VLLM_FILE, "".join(line + "\n" for line in vllm_lines))
    atomic_write(out / AIPERF_FILE, "".join(line + "\n" for line in aiperf_lines))
    lengths = acceptance_lengths(accs, records)
    atomic_write(out / SUMMARY_FILE, format_lengths(folder.name, lengths))
    return lengths


def _fmt(x: Any, digits: int = 3) -> str:
    return "n/a" if x is None else (f"{x:.{digits}f}" if isinstance(x, float) else str(x))


def format_lengths(name: str, lengths: dict[str, Any]) -> str:
    rows = [
        ("tau (ours): emitted tokens / all verification steps, pooled", lengths.get("tau")),
        ("acceptance length, pooled (vLLM, SGLang, Spec-Bench): 1 + accepted / steps with a draft", lengths.get("pooled")),
        ("acceptance length, mean of per-request means (SpecForge, specdec_bench)", lengths.get("mean_of_request_means")),
        ("draft acceptance rate, pooled: accepted / drafted tokens", lengths.get("draft_acceptance_rate")),
        ("loose accepts (accepted draft tokens that differ from the target's choice)", lengths.get("loose_accepted_draft_tokens")),
    ]
    lines = [f"# Acceptance: {name}", "",
             f"{lengths['n_requests']} requests, {lengths['n_requests_with_drafts']} with a draft.", "",
             "| figure | value |", "|---|---:|"]
    lines += [f"| {label} | {_fmt(v)} |" for label, v in rows]
    lines += ["", f"Per request: {VLLM_FILE} (vLLM's metrics.speculative_decoding, detailed), "
              f"{AIPERF_FILE} (AIPerf's SpecDecodeAcceptanceRecord).", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m loosespec_bench.report.acceptance",
                                description="Export runs' per-request acceptance in vLLM's and AIPerf's schemas.")
    p.add_argument("runs", nargs="+", type=Path, help="run folders (each holds samples.jsonl)")
    p.add_argument("--out", type=Path, default=None, help="write here instead of into each run folder (one run only)")
    args = p.parse_args(argv)
    try:
        if args.out is not None and len(args.runs) > 1:
            raise ConfigError("--out takes one run folder: give one RUN_DIR, or leave --out out to write into each")
        for folder in args.runs:
            lengths = export_run(folder, args.out)
            print(f"{folder}: tau {_fmt(lengths.get('tau'))}, pooled {_fmt(lengths.get('pooled'))}, "
                  f"mean of request means {_fmt(lengths.get('mean_of_request_means'))}")
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
