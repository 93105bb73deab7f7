"""FLy's tables: the main results (speedup and accuracy per data set, ours beside published)
and the ablations over theta, W, K and MLA."""

from __future__ import annotations

from fnmatch import fnmatch
from typing import Any

import pandas as pd

from ..grouping import (
    ID_SETS,
    OOD_SETS,
    QUALITY,
    config_key,
    figure_cell,
    group_by_config,
    interleave_rows,
    interval_notes,
    kind_of,
    load_published,
    lossless_key,
    machines_of,
    mean_of,
    our_runs,
    paper_set,
    partial_notes,
    published_num,
    published_source,
    samples_of,
    samples_text,
    set_mean,
    source_key,
    source_notes,
    subset_notes,
)
from ...verifiers import FLy
from ..labels import NO_WINDOW, THETA, W, dataset_label, is_eagle, is_exact, is_rule, is_target_alone, method_label
from ..render import MIXED_CPUS, NA, NOT_RUN, Num, Table, is_missing

# -- FLy main table ----------------------------------------------------------------------------
# Sweeps whose runs have tables of their own (ablations, DropMatch, grids): FLy's main table shows
# the main-table experiments' rows only (a point such a sweep shares with the main table runs in,
# and is read from, the main table's folder: plan.assign_owners).
# fly_ablation_mla stays: its drafter=model points are the main table's "FLy" row beside FLy + MLA.
NOT_MAIN_TABLE = ("ablation_theta", "ablation_window", "ablation_k", "ablation_mode", "ablation_no_window",
                  "dropmatch", "grid", "autojudge")  # "dropmatch" covers dropmatch_criterion


def fly_main_table(index: pd.DataFrame, published: pd.DataFrame | None = None) -> Table:
    published = load_published() if published is None else published
    runs = our_runs(index)
    runs = runs[~runs["method"].map(is_target_alone)] if not runs.empty else runs
    if not runs.empty:
        runs = runs[~runs["experiment"].astype(str).map(lambda e: any(w in e for w in NOT_MAIN_TABLE))]
    if not runs.empty:
        runs = runs.assign(dataset=runs["dataset"].map(paper_set))
    pub = [dict(p) for _, p in published[published["table"] == "fly_main"].iterrows()]
    paper_sets = (*ID_SETS, *OOD_SETS)
    ran = set(runs["dataset"].dropna()) if not runs.empty else set()
    pub_sets = {paper_set(p["dataset"]) for p in pub}
    extra = sorted(ran - set(paper_sets))
    # A data set gets columns when we ran it or a published figure names it; the others are noted.
    datasets = [d for d in paper_sets if d in ran or d in pub_sets] + extra
    unrun_sets = [d for d in paper_sets if d not in ran]
    columns = ["source", "pair", "method"]
    meta: dict[str, tuple[str, str]] = {}
    # Printed in blocks (render.Table.blocks): per-set speedup, per-set tau, per-set accuracy,
    # then the means; every column stays in fly_main.csv and fly_main_long.csv.
    for metric in ("speedup", "tau", "accuracy"):
        for ds in datasets:
            columns.append(f"{ds} {metric}")
            meta[f"{ds} {metric}"] = (ds, metric)
    tail = [("ID mean speedup", "ID mean", "speedup"), ("ID mean tau", "ID mean", "tau"),
            ("OOD mean speedup", "OOD mean", "speedup"), ("OOD mean tau", "OOD mean", "tau"),
            ("mean speedup (paper sets)", "paper sets", "speedup"), ("min retention", "all sets", "min retention"),
            ("speedup ÷ EAGLE-3 (OOD)", "OOD mean", "÷ EAGLE-3"), ("n per set", "all sets", "n")]
    for col, scope, metric in tail:
        columns.append(col)
        meta[col] = (scope, metric)
    block_of = {col: "means" for col, _, _ in tail}

    ours, suffix, variant_notes = group_by_config(runs)

    def set_means(by_ds: dict[str, list], sets: tuple[str, ...], metric: str, kind: str) -> Any:
        if not any(d in by_ds for d in sets):
            return NOT_RUN
        if kind == "speedup" and len(machines_of(m for d in sets for m in by_ds.get(d, []))) > 1:
            return MIXED_CPUS  # speedups of two CPUs do not average into one figure
        cells = [figure_cell(by_ds[d], metric, kind) for d in sets if d in by_ds]
        n = sum(isinstance(c, Num) for c in cells)
        return set_mean(cells, kind, None if n == len(sets) else f"{n}/{len(sets)}")

    # FLy's "over EAGLE-3" is against EAGLE-3 with its dynamic tree: a tree run is preferred to
    # a chain run of the same pair (a chain understates EAGLE-3 and inflates the ratio).
    eagle_ood: dict[Any, float] = {}
    eagle_tree: dict[Any, bool] = {}
    for entry in ours.values():
        r = entry["row"]
        if is_eagle(r["drafter"]) and not str(r["drafter"]).lower().startswith("eagle2") and is_exact(r["method"]):
            m = set_means(entry["by_ds"], OOD_SETS, "speedup", "speedup")
            tree = bool(r.get("tree")) and not is_missing(r.get("tree"))
            if isinstance(m, Num) and (tree or not eagle_tree.get(r["pair"], False)):
                eagle_ood[r["pair"]] = m.value
                eagle_tree[r["pair"]] = tree

    our_rows: list[tuple[str, list[Any]]] = []
    for key, entry in ours.items():
        r, by_ds = entry["row"], entry["by_ds"]
        cells: list[Any] = ["ours", r["pair"], method_label(r) + suffix.get(key, "")]
        cells += [figure_cell(by_ds[ds], "speedup", "speedup") if ds in by_ds else "" for ds in datasets]
        cells += [figure_cell(by_ds[ds], "tau", "tau") if ds in by_ds else "" for ds in datasets]
        # The set's headline quality (index `score`): accuracy, pass@1, NIAH's recall.
        cells += [figure_cell(by_ds[ds], "score", "score", with_n=True) if ds in by_ds else "" for ds in datasets]
        ood = set_means(by_ds, OOD_SETS, "speedup", "speedup")
        retentions = [mean_of(x["retention"] for x in rows) for rows in by_ds.values()]
        retentions = [v for v in retentions if v is not None]
        ratio: Any = "" if not is_rule(r["method"], FLy) else NA  # a FLy figure only
        if is_rule(r["method"], FLy) and isinstance(ood, Num) and eagle_ood.get(r["pair"]):
            ratio = Num(ood.value / eagle_ood[r["pair"]], "ratio")
        cells += [
            set_means(by_ds, ID_SETS, "speedup", "speedup"),
            set_means(by_ds, ID_SETS, "tau", "tau"),
            ood,
            set_means(by_ds, OOD_SETS, "tau", "tau"),
            set_means(by_ds, paper_sets, "speedup", "speedup"),  # extra sets never enter the paper's mean
            Num(min(retentions), "score") if retentions else NA,
            ratio,
            samples_text(samples_of(rows) for rows in by_ds.values()),
        ]
        our_rows.append((r["pair"], [("" if c == NOT_RUN else c) for c in cells]))

    # Published rows: one per (pair, method) of published.csv's fly_main figures.
    pub_rows: list[tuple[str, list[Any]]] = []
    groups: dict[tuple, list[dict]] = {}
    for p in pub:
        groups.setdefault((p["pair"], p["method"], p.get("drafter")), []).append(p)
    scope_col = {
        ("mean", "speedup"): "mean speedup (paper sets)", ("id_mean", "speedup"): "ID mean speedup",
        ("id_mean", "tau"): "ID mean tau", ("ood_mean", "speedup"): "OOD mean speedup", ("ood_mean", "tau"): "OOD mean tau",
        ("all", "retention"): "min retention", ("ood_mean", "speedup_over_eagle3"): "speedup ÷ EAGLE-3 (OOD)",
    }
    extra_pub: list[dict] = []
    not_run_rows: list[str] = []
    refs: list[str] = []
    for (pair, method, drafter), rows in groups.items():
        cells = {c: "" for c in columns}
        cells["n per set"] = "paper"
        name = method_label({"method": method, "drafter": drafter})
        cells.update(source=published_source(rows, refs), pair=pair, method=f"{name} (paper)")
        for p in rows:
            col = scope_col.get((p["dataset"], p["metric"])) or f"{paper_set(p['dataset'])} {p['metric']}"
            if col in cells:
                cells[col] = published_num(p, kind_of(p["metric"]))
            else:
                extra_pub.append(p)  # a figure with no column of its own (e.g. over EAGLE-2): in the notes
        pub_rows.append((pair, [cells[c] for c in columns]))
        if pair not in ("all", "not stated") and not any(
            e["row"]["pair"] == pair and e["row"]["method"] == method for e in ours.values()
        ):
            not_run_rows.append(f"{name} on {pair}")
    rows = interleave_rows(pub_rows, our_rows)
    notes = [
        "speedup = method tokens/s ÷ target-alone tokens/s (paired per sample); tau = emitted tokens ÷ verification steps, bonus/correction token included; accuracy = the set's headline quality figure, the paper's column: accuracy, pass@1 (HumanEval; MBPP+ on base + plus tests), IFEval prompt-level strict, NIAH RULER's recall (the mean share of the needle values found; all found on a sample is the index's accuracy column).",
        "Printed in blocks of at most 12 columns (per-set speedup, per-set tau, per-set accuracy, the means); fly_main.csv has every column, fly_main_long.csv one line per row, set and figure with its interval and n.",
        *source_notes(refs),
        *interval_notes(runs),
        f"ID sets: {', '.join(ID_SETS)}; OOD sets: {', '.join(OOD_SETS)} (FLy's split). The means cover these sets only; other sets ({', '.join(extra) or 'none'}) have their own columns. A mean over fewer sets than the split says '(n/m sets)'.",
        "Rows: the main-table sweeps' runs (the theta / W / K / mode ablations, DropMatch and the grids have tables of their own).",
        "One row per configuration: runs that differ in any resolved setting other than the seed and the data set's subsets are separate rows; where rows would share a label, the settings that differ are named in brackets.",
        "n = samples behind our accuracy figure; n per set = the range over the row's data sets (the published rows: the paper's full sets). An empty cell: that row has no run on that set.",
        "Not run here: " + "; ".join(filter(None, [
            ("data sets " + ", ".join(unrun_sets) + (" (published figures only)" if set(unrun_sets) & pub_sets else "")) if unrun_sets else "",
            ("our counterparts of the published rows " + ", ".join(not_run_rows)) if not_run_rows else "",
        ])) + "." if unrun_sets or not_run_rows else "Every published row and paper set has a run of ours.",
        "'n/a': run, but the figure is undefined (retention with target-alone accuracy 0, speedup without a paired baseline); 'not sourced'/empty published cells: no published figure in published.csv.",
        "Loose rules' accuracy beside the lossless rule at the same pair, drafter, K and dtype (the bf16 noise floor): table noise_floor.",
        "speedup ÷ EAGLE-3 (OOD) divides by our EAGLE-3 run of the same pair with the dynamic tree when there is one"
        + (" (this table: " + ", ".join(f"{p}: {'tree' if t else 'CHAIN, which understates EAGLE-3 and inflates the ratio'}" for p, t in eagle_tree.items()) + ")" if eagle_tree else "")
        + "; the papers' EAGLE-2/3 and Lookahead figures are dynamic-tree / official-default runs (experiment=baselines_tree).",
        *variant_notes,
        *subset_notes(runs),
        *partial_notes(runs),
        *[f"published {p['pair']} {p['method']} {p['metric']} ({p['dataset']}) {source_key(p, refs)}: {p.get('short_note') or p['note']}" for p in pub],
        *[f"published, no column: {p['pair']} {p['method']} {p['metric']} = {published_num(p, kind_of(p['metric'])).text()} ({p['dataset']})" for p in extra_pub],
    ]
    return Table("fly_main", "FLy main results: speedup, tau and accuracy per data set, ours beside published", columns, rows, notes,
                 meta=meta, block_of=block_of, scope_labels={ds: dataset_label(ds) for ds in datasets}, n_ours=len(our_rows),
                 block_titles={"speedup": "Speedup per data set", "tau": "Tau per data set",
                               "accuracy": "Accuracy per data set", "means": "Means over FLy's split, retention"})


# -- FLy ablations ---------------------------------------------------------------------------
# The configuration keys an ablation axis varies (excluded when matching runs to an ablation).
AXIS_KEYS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    # axis: (keys, key prefixes)
    THETA: ((f"method.{FLy.THRESHOLD}",), ()),
    W: ((f"method.{FLy.WINDOW}",), ()),
    "K": (("drafter.k",), ()),
    "MLA": ((), ("drafter.",)),  # the drafter's own keys; K is kept apart (_axis_free_key)
}
ABLATIONS = {
    # axis: (index column, header, experiment name part)
    THETA: (THETA, "θ (entropy threshold)", FLy.THRESHOLD),  # experiment fly_ablation_<knob>
    W: (W, "W (window, tokens)", FLy.WINDOW),
    "K": ("K", "K (draft tokens)", "k"),
    "MLA": ("drafter", "MLA", "mla"),
}


def _mla(drafter: Any) -> str:
    return {"mla": "on", "model": "off"}.get(drafter, f"off ({drafter})" if drafter else "off")


def _axis_free_key(row: pd.Series | dict, axis: str) -> tuple:
    """A run's configuration without the ablation axis' keys (and, as config_key, the data set).
    MLA swaps the drafter: its keys go, but K stays (an MLA point is compared at its own K)."""
    keys, prefixes = AXIS_KEYS[axis]
    key = config_key(row, exclude=keys, exclude_prefixes=("dataset.", *prefixes))
    return (*key, row.get("K")) if axis == "MLA" else key


def fly_ablation_table(index: pd.DataFrame, axis: str, published: pd.DataFrame | None = None) -> Table:
    """FLy along one axis (theta, W, K, MLA); one row per configuration. Runs are selected by
    configuration: the experiments named *ablation_<axis>* name the ablation's fixed settings
    (every key but the axis'), and every FLy run with those settings belongs to it, whichever
    experiment's folder holds it (a point that several sweeps share runs once, in the first
    sweep's folder: loosespec_bench.plan). Without such experiments, every FLy run. The points
    of one ablation (one setting of the fixed keys) are compared over the data sets that every
    one of them ran; what a point ran beyond those is left out and noted."""
    del published  # the papers' ablation figures are not sourced yet: the column says so
    col, header, exp_part = ABLATIONS[axis]
    runs = our_runs(index)
    fly = runs[runs["method"].map(lambda m: is_rule(m, FLy))] if not runs.empty else runs
    if not fly.empty:
        dedicated = fly[fly["experiment"].astype(str).map(lambda e: fnmatch(e, f"*ablation_{exp_part}*"))]
        if not dedicated.empty:
            fixed = {_axis_free_key(r, axis) for _, r in dedicated.iterrows()}
            fly = fly[[_axis_free_key(r, axis) in fixed for _, r in fly.iterrows()]]
    lossless: dict[tuple, list] = {}
    for _, r in runs.iterrows() if not runs.empty else []:
        if is_exact(r["method"]):
            lossless.setdefault((lossless_key(r), r["dataset"]), []).append(r)
    others = [("K", "K"), (W, "W"), (THETA, "θ"), ("drafter", "MLA"), ("mode", "mode"), (NO_WINDOW, NO_WINDOW)]
    # Short scope names in the headers (the title names the axis in full; the notes say what each
    # column is): "lossless twin retention (noise floor)" took a column 1.5 in wide at 7 pt.
    columns = [header.split(" ")[0], "pair", "other settings", "sets", "speedup", "tau", "exact-match tau",
               "loose rate", "retention", "twin retention", "identical", "n"]
    # The tidy CSV keeps each figure's full name.
    figures = ("speedup", "tau", "tau without loose accepts", "loose accept rate", "retention", "lossless twin retention (noise floor)",
               "identical to target alone", "n")
    meta = {c: ("", f) for c, f in zip(columns[4:], figures)}
    ours, suffix, variant_notes = group_by_config(fly)
    # The ablations: points that share every setting but the axis; their common data sets.
    ablations: dict[tuple, list[tuple]] = {}
    for key, entry in ours.items():
        ablations.setdefault(_axis_free_key(entry["row"], axis), []).append(key)
    rows: list[list[Any]] = []
    set_notes: list[str] = []
    for fixed_key, keys in ablations.items():
        common = set.intersection(*(set(ours[k]["by_ds"]) for k in keys))
        if len(keys) > 1:
            dropped = {method_label(ours[k]["row"], skip=(col,)) + f" at {header.split(' ')[0]}={_axis_value(ours[k]['row'], axis, col)}":
                       sorted(set(ours[k]["by_ds"]) - common) for k in keys}
            dropped = {p: ds for p, ds in dropped.items() if ds}
            if not common:
                set_notes.append(f"{len(keys)} points share no data set; each is shown over its own sets and they are not comparable: "
                                 + "; ".join(method_label(ours[k]["row"]) for k in keys))
            elif dropped:
                set_notes.append(f"points compared over {', '.join(sorted(common))} only (the sets every point ran); left out: "
                                 + "; ".join(f"{p}: {', '.join(ds)}" for p, ds in dropped.items()))
        for key in keys:
            entry = ours[key]
            r = entry["row"]
            sets = sorted(common) if common else sorted(entry["by_ds"])
            members = [m for ds in sets for m in entry["by_ds"][ds]]
            settings = []
            for k, name in others:
                if k == col or is_missing(r.get(k)) or (k == NO_WINDOW and r.get(k) is not True):
                    continue
                v = r[k]
                settings.append(f"{name}={_mla(v)}" if k == "drafter" else f"{name}={v:g}" if isinstance(v, float) else f"{name}={v}")

            def over_sets(metric: str, kind: str, source: dict[str, list] | None = None, with_n: bool = False) -> Any:
                by = source if source is not None else entry["by_ds"]
                cells = [figure_cell(by.get(ds, []), metric, kind) for ds in sets]
                if not any(isinstance(c, Num) for c in cells):
                    return NOT_RUN if all(c == NOT_RUN for c in cells) else NA
                n = sum(isinstance(c, Num) for c in cells)
                cell = set_mean(cells, kind, None if n == len(sets) else f"{n}/{len(sets)}")
                under = metric in QUALITY and any(m.get("underpowered") is True for ds in sets for m in by.get(ds, []))
                if isinstance(cell, Num) and (with_n or under):
                    cell = Num(cell.value, cell.kind, of=cell.of, ci=cell.ci, no_interval=cell.no_interval, why_none=cell.why_none,
                               n=sum(samples_of(by.get(ds, [])) or 0 for ds in sets), underpowered=under)
                return cell

            twins = {ds: lossless.get((lossless_key(entry["by_ds"][ds][0]), ds), []) for ds in sets}
            rows.append([
                _axis_value(r, axis, col),
                r["pair"],
                ", ".join(settings) + suffix.get(key, ""),
                ", ".join(dataset_label(s) for s in sets),
                over_sets("speedup", "speedup"),
                over_sets("tau", "tau"),
                over_sets("tau_without_loose", "tau"),
                over_sets("loose_accept_rate", "score"),
                over_sets("retention", "score", with_n=True),
                over_sets("retention", "score", twins, with_n=True) if any(twins.values()) else NOT_RUN,
                over_sets("identical_to_target", "score"),
                samples_of(members) or "",
            ])
    rows.sort(key=lambda c: (str(c[1]), c[2], _sort_key(c[0])))
    notes = [
        "Each row: one configuration, the mean over the listed data sets (and seeds); n = their total samples.",
        *interval_notes(fly),
        "exact-match tau: tau without loose accepts, what exact match would have accepted on the same drafts (metrics.loose_summary); loose rate: loose accepts ÷ raw mismatches; identical: the share of samples identical to the target alone's, token for token.",
        "twin retention: the lossless twin's retention, SPD with the row's pair, drafter, K, dtype and data sets (the bf16 noise floor; 'not run' without such a run).",
        *set_notes,
        ("No FLy run for this ablation." if not rows else ""),
        "Published ablation figures: none in published.csv (the papers' ablation tables are not sourced).",
        *variant_notes,
        *partial_notes(fly),
    ]
    return Table(f"fly_ablation_{axis}", f"FLy ablation over {header}", columns, rows, [n for n in notes if n], ids=4, meta=meta)


def _axis_value(r: Any, axis: str, col: str) -> Any:
    if axis == "MLA":
        return _mla(r["drafter"])
    v = r.get(col)
    return "" if is_missing(v) else (f"{v:g}" if isinstance(v, float) else v)


def _sort_key(v: Any) -> tuple:
    try:
        return (0, float(v), "")
    except (TypeError, ValueError):
        return (1, 0.0, str(v))

