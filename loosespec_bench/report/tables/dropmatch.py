"""DropMatch's tables: SD vs SD + DropMatch, on top of EAGLE-3, DropMatch's own overhead, and
the AutoJudge comparison in and out of the judge's distribution."""

from __future__ import annotations

from typing import Any

import pandas as pd

from ..grouping import (
    config_key,
    config_suffixes,
    figure_cell,
    int_or_blank,
    interleave_rows,
    interval_notes,
    kind_of,
    load_published,
    lossless_key,
    machines_of,
    our_runs,
    partial_notes,
    published_num,
    published_source,
    samples_of,
    samples_text,
    source_key,
    source_notes,
)
from ...measure.metrics import dropmatch_cost_parts
from ...measure.stats.intervals import paired_bootstrap_ratio
from ...verifiers import DropMatch, SPD
from ...verifiers.autojudge import AutoJudge, DropMatchAutoJudge
from ..index import read_records
from ..project import head_share_70b, target_head_share
from ..labels import dataset_label, is_eagle, is_exact, is_rule, method_label, rule_of, rule_setting
from ..render import MIXED_CPUS, NA, NOT_RUN, Num, Table

# -- DropMatch tables ------------------------------------------------------------------------
def _versus_table(
    index: pd.DataFrame, published: pd.DataFrame, *, name: str, title: str, eagle: bool, base_label: str
) -> Table:
    """Base method (SPD with a drafter) vs the same drafter + DropMatch, per pair/data set/K:
    one row per DropMatch configuration, named by its knobs (criterion, N, p), beside the SPD
    run it shares every other setting with."""
    runs = our_runs(index)
    if not runs.empty:
        runs = runs[runs["drafter"].map(is_eagle) == eagle]
        runs = runs[runs["method"].map(lambda m: is_exact(m) or is_rule(m, DropMatch))]
    columns = ["source", "pair", "data set", "drafter", "K", "DropMatch setting",
               f"{base_label} tau", "+DropMatch tau", f"{base_label} speedup", "+DropMatch speedup",
               f"{base_label} score", "+DropMatch score", f"tau ÷ {base_label}", f"speedup ÷ {base_label}", "n"]
    meta = {
        f"{base_label} tau": (base_label, "tau"), "+DropMatch tau": ("+DropMatch", "tau"),
        f"{base_label} speedup": (base_label, "speedup"), "+DropMatch speedup": ("+DropMatch", "speedup"),
        f"{base_label} score": (base_label, "score"), "+DropMatch score": ("+DropMatch", "score"),
        f"tau ÷ {base_label}": ("ratio", "tau"), f"speedup ÷ {base_label}": ("ratio", "speedup"), "n": ("", "n"),
    }

    def figs(members: list) -> tuple[Any, Any, Any]:
        return tuple(figure_cell(members, metric, kind, with_n=metric == "score") for metric, kind in (("tau", "tau"), ("speedup", "speedup"), ("score", "score")))

    base: dict[tuple, list] = {}
    dm: dict[tuple, list] = {}
    for _, r in runs.iterrows():
        # The base configuration: every setting but the rule's own (method.*) and the step
        # records DropMatch's overhead figures need; SPD and DropMatch runs meet on it.
        bkey = (lossless_key(r), r["dataset"])
        if is_exact(r["method"]):
            base.setdefault(bkey, []).append(r)
        else:  # one DropMatch row per (base configuration, DropMatch configuration)
            dm.setdefault((bkey, config_key(r, exclude_prefixes=())), []).append(r)
    our_rows: list[tuple[str, list]] = []
    for (bkey, _), members in dm.items():
        b = figs(base.get(bkey, []))
        d = figs(members)
        gain: Any = "" if NOT_RUN in (b[1], d[1]) else NA
        if isinstance(d[1], Num) and isinstance(b[1], Num) and b[1].value:
            gain = Num(d[1].value / b[1].value, "ratio")
            if len(machines_of([*base.get(bkey, []), *members])) > 1:
                gain = MIXED_CPUS  # two speedups of two CPUs make no ratio
        tau_gain: Any = "" if NOT_RUN in (b[0], d[0]) else NA
        if isinstance(d[0], Num) and isinstance(b[0], Num) and b[0].value:
            tau_gain = Num(d[0].value / b[0].value, "ratio")
        r = members[0]
        cells = ["ours", r["pair"], dataset_label(r["dataset"]), r["drafter"], int_or_blank(r["K"]), rule_setting(r),
                 b[0], d[0], b[1], d[1], b[2], d[2], tau_gain, gain,
                 samples_text([samples_of(base.get(bkey, [])), samples_of(members)])]
        our_rows.append((r["pair"], [("" if c == NOT_RUN else c) for c in cells]))

    pub = [dict(p) for _, p in published[published["table"] == name].iterrows()]
    groups: dict[tuple, list[dict]] = {}
    for p in pub:
        groups.setdefault((p["pair"], p["dataset"], p["k"]), []).append(p)
    pub_rows: list[tuple[str, list]] = []
    not_run: list[str] = []
    refs: list[str] = []
    for (pair, dataset, k), rows in groups.items():
        cells = dict.fromkeys(columns, "")
        drafters = sorted({str(p["drafter"]) for p in rows if p.get("drafter")})
        cells.update({"source": published_source(rows, refs), "pair": pair, "data set": dataset,
                      "drafter": ", ".join(drafters) or "not stated", "K": k if k is not None else "not stated",
                      "DropMatch setting": "paper", "n": "paper"})
        for p in rows:
            if p["metric"] in ("speedup_gain", "tau_gain"):
                cells[f"{p['metric'].split('_')[0]} ÷ {base_label}"] = published_num(p, "ratio")
                continue
            side = f"{base_label} " if is_exact(p["method"]) else "+DropMatch "
            col = side + {"tau": "tau", "speedup": "speedup", "score": "score"}.get(p["metric"], p["metric"])
            if col in cells:
                cells[col] = published_num(p, kind_of(p["metric"]))
        pub_rows.append((pair, [cells[c] for c in columns]))
        if pair != "all" and not [c for pr, c in our_rows if pr == pair or (pair == "not stated" and c[2] == dataset_label(dataset))]:
            not_run.append(f"{pair} ({dataset}, K={k if k is not None else 'not stated'})")
    base_only = sorted({f"{r['pair']} {r['dataset']} {method_label(r)}" for key, ms in base.items()
                        if not any(bk == key for bk, _ in dm) for r in ms[:1]})
    # The notes speak of the runs the rows show, not of base runs left out for want of a partner.
    shown = runs.loc[sorted({r.name for (bkey, _), ms in dm.items() for r in [*ms, *base.get(bkey, [])]})]
    notes = [
        f"{base_label}: exact-match speculative decoding{' with the EAGLE-3 drafter' if eagle else ''}; +DropMatch: the same drafter, K and every other setting with method=dropmatch; DropMatch setting = its knobs (criterion naive/js, N paths, dropout p).",
        "speedup over the target alone (paired per sample); tau includes the bonus/correction token; score = the task's headline quality figure (accuracy, IFEval prompt-level strict, judge rating).",
        *interval_notes(shown),
        "Ratios (÷): of the two points; no interval (the two runs' samples were not paired with each other).",
        "Printed in blocks of at most 12 columns (tau, speedup, score); the CSVs have every column.",
        *source_notes(refs),
        ("Not run here (published rows without a run of ours): " + "; ".join(not_run) + ".") if not_run else "",
        (f"{base_label} runs without a DropMatch run of the same settings (not shown): " + "; ".join(base_only) + ".") if base_only else "",
        "'n/a': run, but the figure is undefined; empty published cells: no published figure in published.csv.",
        *partial_notes(runs),
        *[f"published {p['pair']} {p['method']} {p['metric']} ({p['dataset']}) {source_key(p, refs)}: {p.get('short_note') or p['note']}" for p in pub],
    ]
    return Table(name, title, columns, interleave_rows(pub_rows, our_rows, sort_col=5), [n for n in notes if n], ids=6, meta=meta,
                 block_of={"n": "score"}, scope_labels={"ratio": f"÷ {base_label}"}, n_ours=len(our_rows))



def dropmatch_main_table(index: pd.DataFrame, published: pd.DataFrame | None = None) -> Table:
    published = load_published() if published is None else published
    return _versus_table(index, published, name="dropmatch_main", title="DropMatch main results: SD vs SD + DropMatch",
                         eagle=False, base_label="SD")


def dropmatch_eagle3_table(index: pd.DataFrame, published: pd.DataFrame | None = None) -> Table:
    published = load_published() if published is None else published
    return _versus_table(index, published, name="dropmatch_eagle3", title="DropMatch on top of EAGLE-3",
                         eagle=True, base_label="EAGLE-3")


def _overhead_cells(members: list) -> list[Any]:
    """DropMatch's cost in one configuration's runs, each with its paired bootstrap interval over
    problems: share of decode time, share of the target's verification forwards, that share in
    units of the target's LM-head time (÷ the head's share of its weight work), and projected to
    a 70B target's head share (report/profiles/llama31-8b-70b-h100.yaml's target)."""
    records: list[dict[str, Any]] = []
    for m in members:
        if isinstance(m.get("run_dir"), str) and m["run_dir"]:
            records += read_records(m["run_dir"])
    parts = dropmatch_cost_parts(records)
    if len(parts["dropmatch_s"]) < 2:  # no step timings (record_steps off), or one problem: no interval
        return [figure_cell(members, "dropmatch_overhead", "percent"), NA, NA, NA, NA]

    def cell(baseline: list[float], scale: float = 1.0, kind: str = "percent") -> Num | str:
        point, low, high = paired_bootstrap_ratio(parts["dropmatch_s"], baseline)
        if point is None:
            return NA
        ci = (low * scale, high * scale) if low is not None and high is not None else None
        return Num(point * scale, kind, ci=ci, no_interval=ci is None)

    head = target_head_share(members[0])
    target = cell(parts["target_s"])
    return [cell(parts["decode_s"]), target, Num(head, "percent") if head else NA,
            cell(parts["target_s"], 1 / head, "ratio") if head else NA,
            cell(parts["target_s"], head_share_70b() / head) if head else NA]


def dropmatch_overhead_table(index: pd.DataFrame, published: pd.DataFrame | None = None) -> Table:
    """DropMatch's own cost (the N-path LM-head passes and the criterion, from the per-step
    timings), per configuration: as a share of decode time and of the target's forwards, in
    units of the target's LM-head time, and projected to a 70B target, beside the paper's 1.64%."""
    published = load_published() if published is None else published
    runs = our_runs(index)
    runs = runs[runs["method"].map(lambda m: is_rule(m, DropMatch))] if not runs.empty else runs
    head_70b = head_share_70b()
    columns = ["source", "pair", "data set", "drafter", "K", "DropMatch setting", "overhead (share of decode time)",
               "share of the target's forwards", "LM head's share of the target's weight work",
               "DropMatch time ÷ the target's LM-head time", f"projected: share of a 70B target's forwards (head {100 * head_70b:.1f}%)",
               "tau", "speedup", "n"]
    meta = {c: ("", c) for c in columns[6:]}
    groups: dict[tuple, list] = {}
    for _, r in runs.iterrows():
        groups.setdefault(config_key(r, exclude_prefixes=()), []).append(r)
    suffix = config_suffixes([g[0] for g in groups.values()], keyfn=lambda r: config_key(r, exclude_prefixes=()), by=("pair", "dataset"))
    our_rows: list[tuple[str, list]] = []
    for key, members in groups.items():
        r = members[0]
        our_rows.append((r["pair"], ["ours", r["pair"], dataset_label(r["dataset"]), r["drafter"], int_or_blank(r["K"]), rule_setting(r) + suffix.get(key, ""),
                                     *_overhead_cells(members), figure_cell(members, "tau", "tau"),
                                     figure_cell(members, "speedup", "speedup"), samples_of(members) or ""]))
    pub_rows: list[tuple[str, list]] = []
    refs: list[str] = []
    pub = [dict(p) for _, p in published[published["table"] == "dropmatch_overhead"].iterrows()]
    for p in pub:
        pub_rows.append((p["pair"], [published_source([p], refs), p["pair"], p["dataset"], p.get("drafter") or "not stated",
                                     p["k"] if p.get("k") is not None else "not stated", "paper (5 paths)",
                                     published_num(p, "percent"),
                                     "", "", "", "", "", "", "paper"]))
    notes = [
        "overhead = time in DropMatch's N-path LM-head passes and criterion ÷ decode time (needs record_steps=true; 'n/a' without step timings); "
        "share of the target's forwards = the same time ÷ the target's verification forwards (phase 'target'; DropMatch runs after them).",
        "LM head's share = hidden x vocab ÷ the weight multiply-accumulates of a token (costmodel.weight_macs_per_token, from the target's "
        "config.json); DropMatch time ÷ the target's LM-head time = the share of the forwards ÷ that share: DropMatch's time in units of "
        "the head's part of the target's verification forwards (below 1 with N = 5 paths: the paths run only where the draft and the "
        "target disagree).",
        f"projected = that unit count x a 70B target's head share ({100 * head_70b:.2f}%, Llama-3.1-70B, from the H100 hardware profile): DropMatch's share of the "
        "70B's forwards if its cost scales with the LM head and the forward with the whole weight work (both memory-bound, as on a GPU at "
        "batch 1); of decode time it is smaller still, by the draft's share. A projection, not a measurement.",
        "[low, high] on the overhead columns: a paired bootstrap over problems of the ratio of sums.",
        *interval_notes(runs),
        "" if our_rows else "Not run here: no DropMatch run.",
        *source_notes(refs),
        *[f"published {p['pair']} {p['metric']} {source_key(p, refs)}: {p.get('short_note') or p['note']}" for p in pub],
        *partial_notes(runs),
    ]
    return Table("dropmatch_overhead", "DropMatch overhead: LM-head passes and criterion", columns,
                 interleave_rows(pub_rows, our_rows, sort_col=5), [n for n in notes if n], ids=6, meta=meta, n_ours=len(our_rows))


# -- DropMatch's AutoJudge rows ----------------------------------------------------------------
AUTOJUDGE_TABLE_RULES = (SPD, DropMatch, AutoJudge, DropMatchAutoJudge)  # row order within a set
# The judge's training task (scripts/mine_autojudge.py mines GSM8K train): in distribution there.
JUDGE_TRAINING_SETS = ("gsm8k",)


def dropmatch_autojudge_table(index: pd.DataFrame, published: pd.DataFrame | None = None) -> Table:
    """DropMatch's AutoJudge comparison: SPD, DropMatch, AutoJudge and DropMatch + AutoJudge side by
    side on each data set (GSM8K in distribution for a judge mined on GSM8K train, every other set
    out of it), each with tau, speedup, its score and the score's paired difference from the
    target alone; rows named by their rule's knobs (criterion, combine, the judge's sha256)."""
    published = load_published() if published is None else published
    runs = our_runs(index)
    if not runs.empty:
        runs = runs[runs["method"].map(lambda m: rule_of(m) in AUTOJUDGE_TABLE_RULES) & ~runs["drafter"].map(is_eagle)]
    groups: dict[tuple, dict[tuple, list]] = {}
    for _, r in runs.iterrows():
        groups.setdefault((lossless_key(r), r["dataset"]), {}).setdefault(config_key(r, exclude_prefixes=()), []).append(r)
    # Only the settings where a judge ran: SPD / DropMatch runs of other experiments stay in their tables.
    groups = {k: g for k, g in groups.items() if any(rule_of(ms[0]["method"]) in (AutoJudge, DropMatchAutoJudge) for ms in g.values())}
    columns = ["source", "pair", "data set", "judge's data", "drafter", "K", "method",
               "tau", "speedup", "score", "score − target alone", "loose accept rate", "n"]
    meta = {"tau": ("", "tau"), "speedup": ("", "speedup"), "score": ("", "score"),
            "score − target alone": ("", "score_diff"), "loose accept rate": ("", "loose_accept_rate"), "n": ("", "n")}
    our_rows: list[tuple[str, list]] = []
    for (_, dataset), configs in groups.items():
        ordered = sorted(configs.values(), key=lambda ms: (AUTOJUDGE_TABLE_RULES.index(rule_of(ms[0]["method"])), method_label(ms[0])))
        for rank, members in enumerate(ordered):
            r = members[0]
            ood = "in distribution" if str(dataset).lower() in JUDGE_TRAINING_SETS else "out of distribution"
            loose = figure_cell(members, "loose_accept_rate", "score") if not is_exact(r["method"]) else ""
            our_rows.append((r["pair"], [
                "ours", r["pair"], dataset_label(dataset), ood, r["drafter"], int_or_blank(r["K"]), method_label(r, skip=("K",)),
                figure_cell(members, "tau", "tau"), figure_cell(members, "speedup", "speedup"),
                figure_cell(members, "score", "score", with_n=True), figure_cell(members, "score_diff", "diff"),
                loose, samples_of(members) or "", f"{dataset}:{rank:02d}"]))
    # Sort within a pair by data set, then the method order (the hidden last cell), then drop it.
    rows = [cells[:-1] for cells in interleave_rows([], our_rows, sort_col=len(columns))]
    # The notes speak of the rows shown, not of every SPD / DropMatch run of other experiments.
    shown = pd.DataFrame([m for g in groups.values() for ms in g.values() for m in ms]) if groups else runs.iloc[:0]
    notes = [
        "SPD: exact-match speculative decoding; DropMatch: method=dropmatch; AutoJudge: method=autojudge (a mismatch the trained judge calls unimportant is accepted); "
        "DropMatch + AutoJudge: method=dropmatch_autojudge (combine=any: either accepts; all: both must). Same pair, drafter, K and generation settings within a data set.",
        f"judge's data: the judge is mined on {', '.join(s.upper() for s in JUDGE_TRAINING_SETS)} train (scripts/mine_autojudge.py), so that task's test set is in distribution and every other set out of it; judge=<first 8 hex digits of the judge file's sha256>.",
        "speedup over the target alone (paired per sample); score = the task's headline quality figure (accuracy, IFEval prompt-level strict, NIAH's recall); score − target alone: paired difference on the same samples; loose accept rate: loose accepts ÷ raw mismatches.",
        *interval_notes(shown),
        "" if our_rows else "Not run here: no AutoJudge run (python -m loosespec_bench -m experiment=dropmatch_autojudge).",
        "'n/a': run, but the figure is undefined.",
        *partial_notes(shown),
    ]
    return Table("dropmatch_autojudge", "DropMatch and AutoJudge, in and out of the judge's distribution", columns, rows,
                 [n for n in notes if n], ids=7, meta=meta, n_ours=len(rows),
                 block_of={"tau": "speed", "speedup": "speed", "loose accept rate": "speed",
                           "score": "quality", "score − target alone": "quality", "n": "quality"},
                 block_titles={"speed": "Speed", "quality": "Quality"})

