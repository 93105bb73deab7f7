"""Spec-Bench per category (Xia et al. 2024, the layout of its Table 1): speedup and tau per task
group (multi-turn conversation, translation, summarization, QA, math reasoning, RAG) and over all
groups, one row per configuration, each figure with its interval recomputed from the run's samples
(the summary holds the groups' points only: tasks/spec_bench.py aggregate)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import pandas as pd

from ...measure.stats.intervals import speedup_interval, tau_interval
from ...tasks.spec_bench import GROUPS
from ...measure.timing import counts_for_speed
from ..grouping import group_by_config, machines_of, our_runs, paper_set, partial_notes, samples_text
from ..index import read_records
from ..labels import dataset_label, is_target_alone, method_label
from ..render import MIXED_CPUS, NA, Num, Table

SPEC_BENCH = "spec_bench"
OVERALL = "overall"
# Spec-Bench's column names for its task groups (its Table 1); the data set itself is named by its task class.
GROUP_LABELS = {"multi_turn_conversation": "MT-bench", "translation": "Translation", "summarization": "Summarization",
                "qa": "QA", "math_reasoning": "Math", "rag": "RAG", OVERALL: "Overall"}


def _group(rec: dict[str, Any]) -> str | None:
    meta = rec.get("meta") if isinstance(rec.get("meta"), dict) else {}
    return meta.get("task_group")


def group_figures(records: list[dict[str, Any]], *, seed: int = 0, n_boot: int | None = None) -> dict[str, dict[str, Any]]:
    """{task group (and 'overall'): {"tau": (point, low, high), "speedup": (point, low, high) or
    None, "n": samples}}: tau the ratio of summed tokens to summed steps over the group's samples,
    speedup the ratio of the method's to the target alone's summed throughput over its timed
    paired samples (timing.counts_for_speed), each with the paired bootstrap interval of
    stats.intervals (the run summary's definitions, on the group's samples only)."""
    kw: dict[str, Any] = {"seed": seed} if n_boot is None else {"seed": seed, "n_boot": n_boot}
    by: dict[str, list[dict[str, Any]]] = {}
    for r in records:
        g = _group(r)
        if g is not None:
            by.setdefault(g, []).append(r)
    if by:
        by[OVERALL] = [r for rs in by.values() for r in rs]
    out: dict[str, dict[str, Any]] = {}
    for g, rs in by.items():
        timed = [r for r in rs if r.get("baseline") and counts_for_speed(r)]
        # The run summary's own estimators (stats.intervals), on the group's samples only.
        out[g] = {"tau": tau_interval(rs, **kw), "speedup": speedup_interval(timed, **kw), "n": len(rs), "n_timed": len(timed)}
    return out


def _cell(fig: tuple[float | None, float | None, float | None] | None, kind: str) -> Any:
    if fig is None or fig[0] is None:
        return NA
    point, low, high = fig
    ci = (low, high) if low is not None and high is not None else None
    return Num(point, kind, ci=ci, no_interval=ci is None, why_none="interval not computable")


def spec_bench_table(index: pd.DataFrame, records_of: Callable[[Any], list[dict[str, Any]]] | None = None) -> Table:
    """One row per configuration run on Spec-Bench: speedup and tau per task group and overall,
    with intervals from its samples. records_of(run_dir) reads a run's samples (default: the run
    folder's samples.jsonl)."""
    records_of = records_of or (lambda run_dir: read_records(Path(run_dir)))
    runs = our_runs(index)
    if not runs.empty:
        runs = runs[runs["dataset"].map(paper_set) == SPEC_BENCH]
        runs = runs[~runs["method"].map(is_target_alone)]
    groups = [*GROUPS, OVERALL]
    columns = ["source", "pair", "method"]
    meta: dict[str, tuple[str, str]] = {}
    for metric in ("speedup", "tau"):
        for g in groups:
            columns.append(f"{g} {metric}")
            meta[f"{g} {metric}"] = (g, metric)
    columns.append("n")
    meta["n"] = ("all groups", "n")
    ours, suffix, variant_notes = group_by_config(runs)
    rows: list[list[Any]] = []
    mixed: list[str] = []
    for key, entry in ours.items():
        r = entry["row"]
        members = [m for ms in entry["by_ds"].values() for m in ms]
        records = [rec for m in members for rec in records_of(m["run_dir"])]
        figs = group_figures(records)
        label = method_label(r) + suffix.get(key, "")
        several_cpus = len(machines_of(members)) > 1
        if several_cpus:
            mixed.append(label)
        speed = [MIXED_CPUS if several_cpus and g in figs else _cell(figs[g]["speedup"], "speedup") if g in figs else "" for g in groups]
        tau = [_cell(figs[g]["tau"], "tau") if g in figs else "" for g in groups]
        rows.append(["ours", r["pair"], label, *speed, *tau, samples_text(figs[g]["n"] for g in GROUPS if g in figs)])
    rows.sort(key=lambda c: (str(c[1]), str(c[2])))
    notes = [
        f"{dataset_label(SPEC_BENCH)} (Xia et al. 2024): speedup = the method's summed tokens ÷ summed seconds over the target alone's, on the group's timed paired samples; "
        "tau = emitted tokens ÷ verification steps (bonus token included) over the group's samples; Overall: every sample of the row.",
        "[low, high]: 95% paired bootstrap interval (stats.intervals.paired_bootstrap, BCa, seed 0) recomputed from the run's samples.jsonl per task group; "
        "the summary holds the groups' points only. Spec-Bench is not scored: speed only.",
        "n = samples per task group (the range over the groups). MT-bench = Spec-Bench's multi-turn conversation group (MT-bench's 80 questions, two turns).",
        *([f"'{MIXED_CPUS}': the row's runs were timed on more than one CPU; their speedups are not pooled: " + "; ".join(mixed) + "."] if mixed else []),
        *variant_notes,
        *partial_notes(runs),
    ]
    return Table("spec_bench_categories", f"{dataset_label(SPEC_BENCH)} per task group: speedup and tau with intervals", columns, rows, notes,
                 meta=meta, scope_labels=GROUP_LABELS, block_titles={"speedup": "Speedup per task group", "tau": "Tau per task group"})
