"""Grouping runs into a table's rows: which runs are ours, what one configuration is (config_key),
the lossless twin of a loose run, a configuration's figure on a data set with its combined
interval, the published figures, and the notes that say what a table's markers mean."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Iterable

import pandas as pd

from ..schema import FIGURE
from ..measure.stats.exact import sign_test_p
from .index import REPEAT_KEYS, SUBSET_KEYS, config_signature, differing_keys
from .labels import is_lossless, method_label
from .render import MIXED_CPUS, NA, NOT_RUN, NO_INTERVAL, UNDERPOWERED_MARK, Num, is_missing

PUBLISHED_CSV = Path(__file__).with_name("published.csv")

# FLy's split (docs/algorithms.md section 8): in-distribution for the drafters / EAGLE-3 training data, and not.
# The means over them use these sets only; any other set a run covers gets its own columns.
ID_SETS = ("gsm8k", "humaneval", "mbpp_plus")
OOD_SETS = ("mgsm", "niah", "acp_prog_gen")
# Other names a run may give a paper set (lm-eval task names through dataset=lm_eval).
SET_ALIASES = {
    "mbpp": "mbpp_plus", "mbppplus": "mbpp_plus", "acp": "acp_prog_gen",
    "gsm8k_cot_llama": "gsm8k", "humaneval_instruct": "humaneval",
}


# -- inputs -----------------------------------------------------------------------------------
def load_published(path: str | Path = PUBLISHED_CSV) -> pd.DataFrame:
    df = pd.read_csv(path, dtype={"k": "Int64", "arxiv": str}, keep_default_na=True)
    return df.astype(object).where(df.notna(), None)


def our_runs(df: pd.DataFrame) -> pd.DataFrame:
    """Runs with at least one finished sample (complete, or partial: recomputed figures)."""
    if df.empty:
        return df
    keep = df["status"].isin(["complete", "partial"]) & (pd.to_numeric(df["n_samples"], errors="coerce").fillna(0) > 0)
    return df[keep].copy()


def _config(row: pd.Series | dict) -> dict[str, Any]:
    cfg = row.get("config")
    return cfg if isinstance(cfg, dict) else {}


def config_key(
    row: pd.Series | dict,
    *,
    exclude: tuple[str, ...] = (),
    exclude_prefixes: tuple[str, ...] = ("dataset.",),
) -> tuple:
    """A configuration's identity. With the run's resolved config (every run folder has one):
    all of its keys but the seed, the data set's subsets, `exclude` and `exclude_prefixes`, so
    two runs that differ in any setting (draft model, dtype, max new tokens, few-shot...) are
    never averaged together. Without one (a summary alone, config.yaml lost): the run is its own
    configuration, never merged with another (two such runs may differ in anything)."""
    cfg = _config(row)
    if cfg:
        return ("config", config_signature(cfg, exclude=(*REPEAT_KEYS, *SUBSET_KEYS, *exclude), exclude_prefixes=exclude_prefixes))
    return ("run", str(row.get("run_dir") or row.get("run_id") or id(row)))


def paper_set(dataset: Any) -> Any:
    """The paper's name of a data set a run used (lm-eval task names included)."""
    if not isinstance(dataset, str):
        return dataset
    name = dataset.split(":", 1)[-1]
    return SET_ALIASES.get(name, name)


def config_suffixes(reps: Iterable[pd.Series | dict], keyfn: Any = None, by: tuple[str, ...] = ("pair",)) -> dict[tuple, str]:
    """For configurations that would print the same method label, the settings that tell them
    apart, as ' [key=value, ...]' (the report names the keys rather than merge the rows); a run
    without a config says so ('[run <id>, config unknown]')."""
    keyfn = keyfn or config_key
    by_label: dict[str, list] = {}
    for r in reps:
        by_label.setdefault("|".join([*(str(r.get(b)) for b in by), method_label(r)]), []).append(r)
    out: dict[tuple, str] = {}
    for group in by_label.values():
        if len({keyfn(r) for r in group}) < 2:
            continue
        keys = differing_keys([_config(r) for r in group if _config(r)], ignore=(*REPEAT_KEYS, *SUBSET_KEYS))
        keys = [k for k in keys if not k.startswith("dataset.")]
        for r in group:
            cfg = _config(r)
            if not cfg:
                out[keyfn(r)] = f" [run {r.get('run_id')}, config unknown]"
                continue
            shown = [f"{k}={cfg.get(k)}" for k in keys[:3]] + (["…"] if len(keys) > 3 else [])
            out[keyfn(r)] = f" [{', '.join(shown)}]" if shown else f" [run {r.get('run_id')}]"
    return out


def choose_variant(members: list, where: str) -> tuple[list, list[str]]:
    """One data-set setting per cell. Runs of one configuration on one data set whose data-set
    keys differ (few-shot, prompt variant, max new tokens...) are not averaged: the variant with
    the most samples (then the newest) is shown and a note names the keys that differ."""
    groups: dict[Any, list] = {}
    for m in members:
        groups.setdefault(m.get("dataset_config_id"), []).append(m)
    if len(groups) < 2:
        return members, []

    def weight(rows: list) -> tuple:
        n = sum(float(r.get("n_samples") or 0) for r in rows)
        return (n, max(str(r.get("date") or "") for r in rows))

    chosen = max(groups.values(), key=weight)
    keys = differing_keys([_config(g[0]) for g in groups.values()], ignore=SUBSET_KEYS)
    cfg = _config(chosen[0])
    shown = ", ".join(f"{k}={cfg.get(k)}" for k in keys)
    return chosen, [f"{where}: {len(groups)} settings of the data set were run (they differ in {', '.join(keys)}); "
                    f"shown: {shown} (most samples), the others are left out, not averaged"]


def mean_of(values: Iterable[Any]) -> float | None:
    xs = [float(v) for v in values if not is_missing(v)]
    return sum(xs) / len(xs) if xs else None


def samples_of(members: list) -> int | None:
    """Samples behind a configuration's figure: the sum over its runs (seeds, subsets)."""
    ns = [int(m["n_samples"]) for m in members if not is_missing(m.get("n_samples"))]
    return sum(ns) if ns else None


def changed_text(members: list) -> str:
    """'4 / 0 (p = 0.125)': the samples whose quality the method lost / gained against the target
    alone, summed over the configuration's runs, and the exact two-sided sign test on them. ''
    for runs from before the fields (re-score them) or without a paired quality."""
    have = [m for m in members if not is_missing(m.get("quality_lost")) and not is_missing(m.get("quality_gained"))]
    if not have or len(have) < len(members):
        return ""
    lost, gained = sum(int(m["quality_lost"]) for m in have), sum(int(m["quality_gained"]) for m in have)
    return f"{lost} / {gained}" + (f" (p = {sign_test_p(lost, gained):.3f})" if lost + gained else "")


def samples_text(counts: Iterable[int | None]) -> str:
    """'3' when every set has 3 samples, '3-6' otherwise; '' without counts."""
    ns = sorted({n for n in counts if n is not None})
    return "" if not ns else str(ns[0]) if len(ns) == 1 else f"{ns[0]}-{ns[-1]}"


QUALITY = ("accuracy", "baseline_accuracy", "accuracy_diff", "retention", "score", "baseline_score", "score_diff")


def combine(points: list[float], intervals: list[tuple[float | None, float | None]]) -> tuple[float, tuple[float, float] | None]:
    """The mean of independent estimates and its interval: each side's half-widths combined as
    independent errors (sqrt of the sum of squares, over the count). One estimate: its own
    interval. None when any estimate has no interval."""
    m = len(points)
    mean = sum(points) / m
    if any(lo is None or hi is None for lo, hi in intervals):
        return mean, None
    if m == 1:
        return mean, (float(intervals[0][0]), float(intervals[0][1]))  # type: ignore[arg-type]
    below = math.sqrt(sum((p - lo) ** 2 for p, (lo, _) in zip(points, intervals))) / m  # type: ignore[operator]
    above = math.sqrt(sum((hi - p) ** 2 for p, (_, hi) in zip(points, intervals))) / m  # type: ignore[operator]
    return mean, (mean - below, mean + above)


def figure_cell(members: list, metric: str, kind: str, with_n: bool = False) -> Any:
    """One figure of a configuration on one data set: the mean over its runs (seeds, subsets)
    with the interval from their summaries (combine); 'not run' without runs, 'n/a' when the
    runs exist but the figure is undefined in all of them. with_n: the cell names its sample
    count (quality figures, whose uncertainty the count sets)."""
    if not members:
        return NOT_RUN
    have = [m for m in members if not is_missing(m.get(metric))]
    if not have:
        return NA
    lo_col, hi_col = f"{metric}_ci_low", f"{metric}_ci_high"
    points = [float(m[metric]) for m in have]
    intervals = [(None if is_missing(m.get(lo_col)) else float(m[lo_col]), None if is_missing(m.get(hi_col)) else float(m[hi_col])) for m in have]
    value, ci = combine(points, intervals)
    declared = FIGURE.get(metric)
    if declared is not None and not declared.interval:  # a figure without an interval in the contract
        return Num(value, kind, n=samples_of(members) if with_n else None)
    new = [bool(m.get("intervals")) and not is_missing(m.get("intervals")) for m in have]
    why = "interval not computable" if all(new) else NO_INTERVAL
    if all(not is_missing(m.get("n_samples")) and int(m["n_samples"]) <= 1 for m in have):
        ci, why = None, "interval n/a at n = 1"  # one problem: no interval exists, never a zero-width one
    under = metric in QUALITY and any(m.get("underpowered") is True for m in have)
    return Num(value, kind, n=samples_of(members) if with_n else None, ci=ci, no_interval=ci is None, why_none=why, underpowered=under)


def set_mean(cells: list[Any], kind: str, of: str | None) -> Any:
    """The mean of per-set cells (Num), with their intervals combined as independent."""
    nums = [c for c in cells if isinstance(c, Num)]
    if not nums:
        return NA
    value, ci = combine([c.value for c in nums], [c.ci if c.ci else (None, None) for c in nums])
    # A figure outside the intervals contract (no cell is marked) stays unmarked in the mean.
    marked = ci is None and any(c.no_interval or c.ci is not None for c in nums)
    return Num(value, kind, of=of, ci=ci, no_interval=marked, why_none=next((c.why_none for c in nums if c.no_interval), NO_INTERVAL))


def published_source(rows: Iterable[dict], refs: list[str]) -> str:
    """A published row's source cell: 'published [1, 2]', the numbers of its sources in `refs`
    (appended to as new sources appear); source_notes(refs) spells them out under the table."""
    keys = []
    for ref in sorted({_reference(r) for r in rows}):
        if ref not in refs:
            refs.append(ref)
        keys.append(refs.index(ref) + 1)
    return "published [" + ", ".join(str(k) for k in sorted(keys)) + "]"


def _reference(r: dict) -> str:
    """A published figure's source as a note names it: the citation, where in the paper (table,
    figure, abstract) unless the citation says it, and what kind of source it is."""
    loc = str(r.get("location") or "")
    where = "" if not loc or loc in str(r["source"]) else f"; {loc}"
    return f"{r['source']}{where}{kind_note(r)}"


def source_key(r: dict, refs: list[str]) -> str:
    """'[2]': the number of a published figure's source among a table's cited sources."""
    ref = _reference(r)
    return f"[{refs.index(ref) + 1}]" if ref in refs else ""


def source_notes(refs: list[str]) -> list[str]:
    """One note per published source a table cites: '[1] FLy (Li et al., ICLR 2026), ..., abstract'."""
    return [f"[{i}] {ref}" for i, ref in enumerate(refs, 1)]


def published_num(r: dict, kind: str) -> Num:
    return Num(float(r["value"]), kind, high=None if is_missing(r.get("value_high")) else float(r["value_high"]), bound=r.get("bound"))


def kind_of(metric: str) -> str:
    return {"speedup": "speedup", "tau": "tau", "retention": "score", "score": "score"}.get(metric, "ratio")


def partial_notes(runs: pd.DataFrame) -> list[str]:
    n = int((runs["status"] == "partial").sum()) if not runs.empty else 0
    return [f"includes {n} unfinished run(s) (killed; figures recomputed from their finished samples)"] if n else []


def is_true(column: pd.Series) -> pd.Series:
    """A flag column as booleans: True only where the value is true (None and NaN are not)."""
    return column.map(lambda v: bool(v) if isinstance(v, bool) or type(v).__name__ == "bool_" else False).astype(bool)


def interval_notes(runs: pd.DataFrame) -> list[str]:
    """What the cells' interval markers mean, for the runs this table shows."""
    if runs.empty:
        return []
    old = int((~is_true(runs["intervals"])).sum())
    notes = ["[low, high]: the 95% interval from the run's summary.json (loosespec_bench/measure/stats/intervals.py): tau and "
             "speed a paired bootstrap over samples; 0/1 quality (accuracy, pass@1, their difference from the target "
             "alone, retention) exact: Clopper-Pearson, and for the paired figures Clopper-Pearson on the lost and gained "
             "splits given the target alone's answers; graded quality (recall, IFEval loose, ratings) the paired "
             "bootstrap. A mean over runs or sets combines the intervals as independent errors."]
    if old:
        notes.append(f"'(no interval)': {old} of these {len(runs)} runs' summaries predate the interval fields "
                     "(re-score them: python -m loosespec_bench.score <run dir>); the point value is shown alone.")
    notes += _machine_notes(runs)
    notes += underpowered_notes(runs)
    return notes


def underpowered_notes(runs: pd.DataFrame) -> list[str]:
    """The one note that says what the underpowered mark on a quality cell means: the runs' n and
    the power threshold their summaries judged against."""
    under = runs[is_true(runs["underpowered"])] if "underpowered" in runs else runs.iloc[:0]
    if under.empty:
        return []
    thr = sorted({float(t) for t in under["power_threshold"].dropna()})
    ns = samples_text(int(n) for n in pd.to_numeric(under["n_samples"], errors="coerce").dropna())
    return [f"{UNDERPOWERED_MARK} underpowered: the run's summary says its quality interval is wider than the power threshold"
            + (f" ({', '.join(f'{t:g}' for t in thr)})" if thr else "")
            + (f" at n = {ns} problems" if ns else "")
            + f" ({len(under)} of {len(runs)} runs); more problems are needed to tell a loss from noise."]


def machines_of(members: Iterable[Any]) -> set[str]:
    """The CPU labels (index column 'machine') of runs; runs that predate the column add none."""
    return {str(m.get("machine")) for m in members if isinstance(m.get("machine"), str) and m.get("machine")}


def _machine_notes(runs: pd.DataFrame) -> list[str]:
    """Which CPU each speed was measured on, where the table's runs span more than one: every
    speedup is paired on its own machine, but two speedups from different CPUs do not compare."""
    if "machine" not in runs or runs["machine"].dropna().nunique() < 2:
        return []
    parts = []
    for machine, group in runs.dropna(subset=["machine"]).groupby("machine", sort=True):
        sets = ", ".join(sorted({str(d) for d in group["dataset"].dropna()}))
        parts.append(f"{machine}: {len(group)} run(s) ({sets})")
    return ["speed measured on different CPUs; compare speedups only between runs of one CPU: " + "; ".join(parts),
            f"'{MIXED_CPUS}': a figure that would combine speedups of more than one CPU (a mean over sets, "
            "a ratio of two runs) is not taken: a speedup is a property of its CPU; each run's own cell stands."]


def subset_notes(runs: pd.DataFrame) -> list[str]:
    notes = []
    for ds, group in runs.groupby("dataset"):
        subsets = sorted({s for s in group["subset"] if isinstance(s, str)})
        if subsets:
            notes.append(f"{ds}: subsets run: {' | '.join(subsets)} (averaged per configuration)")
    return notes


def group_by_config(runs: pd.DataFrame, keyfn: Any = None) -> tuple[dict[tuple, dict[str, Any]], dict[tuple, str], list[str]]:
    """{config key: {"row": first run, "by_ds": {data set: runs}}}, the label suffixes that tell
    alike-labelled configurations apart, and the notes of data-set variants left out."""
    keyfn = keyfn or config_key
    ours: dict[tuple, dict[str, Any]] = {}
    for _, r in runs.iterrows():
        entry = ours.setdefault(keyfn(r), {"row": r, "by_ds": {}})
        entry["by_ds"].setdefault(r["dataset"], []).append(r)
    suffix = config_suffixes([e["row"] for e in ours.values()], keyfn=keyfn)
    notes: list[str] = []
    for key, entry in ours.items():
        label = method_label(entry["row"]) + suffix.get(key, "")
        for ds in list(entry["by_ds"]):
            entry["by_ds"][ds], more = choose_variant(entry["by_ds"][ds], f"{entry['row']['pair']} {label}, {ds}")
            notes += more
    return ours, suffix, notes


def kind_note(p: dict) -> str:
    """Marks a published figure whose source is not the paper's own results table."""
    kind = p.get("source_kind")
    if kind in (None, "paper_table"):
        return ""
    return f" [source: {kind}]" if "not the paper's table" in str(kind) else f" [source: {kind}, not the paper's table]"


def interleave_rows(pub_rows: list[tuple[str, list]], our_rows: list[tuple[str, list]], sort_col: int = 2) -> list[list[Any]]:
    """Rows grouped by pair: published first, then ours; pairs in order of first appearance."""
    order: list[str] = []
    for pair, _ in [*pub_rows, *our_rows]:
        if pair not in order:
            order.append(pair)
    out = []
    for pair in order:
        out += [cells for p, cells in pub_rows if p == pair]
        out += sorted((cells for p, cells in our_rows if p == pair), key=lambda c: str(c[sort_col]))
    return out


# -- the noise floor ---------------------------------------------------------------------------
def lossless_key(row: pd.Series | dict) -> tuple:
    """What a loose run and its lossless twin share: every resolved setting but the rule's own
    (method.*) and the step records (pair, drafter, K, dtype, data set, generation... all kept)."""
    return config_key(row, exclude=("record_steps",), exclude_prefixes=("method.",))


def lossless_key_any_drafter(row: pd.Series | dict) -> tuple:
    """The twin key with the drafter free but K kept: a loose run whose drafter has no SPD run
    (FLy over MLA) is held against SPD with another drafter at the same K (docs/algorithms.md 7.3)."""
    return (config_key(row, exclude=("record_steps",), exclude_prefixes=("method.", "drafter.")), row.get("K"))


def is_loose(row: pd.Series | dict) -> bool:
    return not is_lossless(row.get("method"))




def int_or_blank(v: Any) -> Any:
    return int(v) if not is_missing(v) else ""

