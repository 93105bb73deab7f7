"""Paper tables: our runs beside the published figures, as Markdown, LaTeX and CSV.

Tables (the layouts of the two papers):
- fly_main: methods as rows, data sets as columns (speedup and tau each), the in-distribution
  (ID) and out-of-distribution (OOD) means, the mean over all sets run, the lowest accuracy
  retention, and FLy's speedup over EAGLE-3 on the OOD sets;
- fly_ablation_{theta,W,K,MLA}: one row per FLy configuration along one axis;
- dropmatch_main: SD vs SD + DropMatch (tau, speedup, task score) per pair / data set / drafter;
- dropmatch_eagle3: EAGLE-3 vs EAGLE-3 + DropMatch.

Published figures come from published.csv (one number per row, each with its source). Cells say
"not run" where we have no run and "not sourced" where published.csv holds no figure: never 0.
Our figures: the mean over the runs of one configuration (seeds, language subsets) on one data
set; speedup = method tokens/s over target-alone tokens/s, paired per sample (app.run); tau =
emitted tokens / verification steps, bonus or correction token included.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from fnmatch import fnmatch
from pathlib import Path
from typing import Any, Iterable

import pandas as pd

from .index import REPEAT_KEYS, SUBSET_KEYS, config_signature, differing_keys

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
NOT_RUN = "not run"
NOT_SOURCED = "not sourced"
NA = "n/a"  # run, but the figure is undefined (e.g. retention with target-alone accuracy 0)
METHOD_NAMES = {"fly": "FLy", "spd": "SPD", "dropmatch": "DropMatch", "ar": "target alone"}
# Configuration = every knob that changes what a run computes (runs that differ only in seed or
# data subset are averaged into one row).
CONFIG_KEYS = ["pair", "method", "drafter", "K", "theta", "W", "mode", "no_window", "criterion", "n_paths", "dropout_p", "temperature"]


# -- cells ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Num:
    """A figure with its kind: speedup (x), tau, ratio (x), score (fraction)."""

    value: float
    kind: str = "score"
    high: float | None = None  # a published range value..high
    bound: str | None = None  # ">=" or "<=" ("up to")
    of: str | None = None  # "n/m": a mean over n of the m sets it should cover
    n: int | None = None  # samples behind one of our figures (shown: small samples say so)

    def text(self, latex: bool = False) -> str:
        digits = 3 if self.kind == "score" else 2
        times = r"$\times$" if latex else "×"
        unit = times if self.kind in ("speedup", "ratio") else ""
        core = f"{self.value:.{digits}f}"
        if self.high is not None:
            core += ("--" if latex else "–") + f"{self.high:.{digits}f}"
        core += unit
        if self.bound == ">=":
            core = (r"$\geq$" if latex else "≥") + core
        elif self.bound == "<=":
            core = "up to " + core
        if self.of:
            core += f" ({self.of} sets)"
        if self.n is not None:
            core += f" (n={self.n})"
        return core

    def raw(self) -> str:
        out = f"{self.value:.4g}"
        if self.high is not None:
            out += f"-{self.high:.4g}"
        if self.bound:
            out = self.bound + out
        return out


def _cell_text(cell: Any, latex: bool = False) -> str:
    if isinstance(cell, Num):
        return cell.text(latex)
    if cell is None or (isinstance(cell, float) and math.isnan(cell)):
        return ""
    if isinstance(cell, float):
        return f"{cell:g}"
    return _latex_escape(str(cell)) if latex else str(cell)


def _latex_escape(text: str) -> str:
    repl = {
        "\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
        "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\^{}",
        "×": r"$\times$", "÷": r"$/$", "θ": r"$\theta$", "≥": r"$\geq$", "≤": r"$\leq$", "–": "--", "→": r"$\to$",
    }
    return "".join(repl.get(ch, ch) for ch in text)


@dataclass
class Table:
    name: str
    title: str
    columns: list[str]
    rows: list[list[Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def to_markdown(self) -> str:
        def esc(s: str) -> str:
            return s.replace("|", r"\|")

        lines = [f"### {self.title}", "", "| " + " | ".join(esc(c) for c in self.columns) + " |"]
        lines.append("|" + "|".join("---" for _ in self.columns) + "|")
        lines += ["| " + " | ".join(esc(_cell_text(c)) for c in row) + " |" for row in self.rows]
        if self.notes:
            lines += [""] + [f"- {n}" for n in self.notes]
        return "\n".join(lines) + "\n"

    def to_latex(self) -> str:
        spec = "l" * min(3, len(self.columns)) + "r" * max(0, len(self.columns) - 3)
        head = " & ".join(_latex_escape(c) for c in self.columns) + r" \\"
        body = [" & ".join(_cell_text(c, latex=True) for c in row) + r" \\" for row in self.rows]
        label = re.sub(r"[^a-z0-9_]", "_", self.name.lower())
        notes = "".join(f"% {n}\n" for n in self.notes)
        return (
            f"% {self.title}\n% needs \\usepackage{{booktabs,graphicx}}\n{notes}"
            "\\begin{table}[t]\n\\centering\n\\small\n"
            f"\\caption{{{_latex_escape(self.title)}}}\n\\label{{tab:{label}}}\n"
            "\\resizebox{\\linewidth}{!}{%\n"
            f"\\begin{{tabular}}{{{spec}}}\n\\toprule\n{head}\n\\midrule\n" + "\n".join(body) + "\n"
            "\\bottomrule\n\\end{tabular}}\n\\end{table}\n"
        )

    def to_frame(self) -> pd.DataFrame:
        """Raw values (numbers unformatted, markers as text) for CSV."""
        return pd.DataFrame([[c.raw() if isinstance(c, Num) else c for c in row] for row in self.rows], columns=self.columns)

    def write(self, out_dir: str | Path) -> list[Path]:
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        paths = [out / f"{self.name}.md", out / f"{self.name}.tex", out / f"{self.name}.csv"]
        paths[0].write_text(self.to_markdown(), encoding="utf-8")
        paths[1].write_text(self.to_latex(), encoding="utf-8")
        self.to_frame().to_csv(paths[2], index=False)
        return paths


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


def _nan(v: Any) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


def _config(row: pd.Series | dict) -> dict[str, Any]:
    cfg = row.get("config")
    return cfg if isinstance(cfg, dict) else {}


def config_key(
    row: pd.Series | dict,
    keys: Iterable[str] = CONFIG_KEYS,
    *,
    exclude: tuple[str, ...] = (),
    exclude_prefixes: tuple[str, ...] = ("dataset.",),
) -> tuple:
    """A configuration's identity. With the run's resolved config (every run folder has one):
    all of its keys but the seed, the data set's subsets, `exclude` and `exclude_prefixes`, so
    two runs that differ in any setting (draft model, dtype, max new tokens, few-shot...) are
    never averaged together. Without one (a summary alone): the listed index columns."""
    cfg = _config(row)
    if cfg:
        return ("config", config_signature(cfg, exclude=(*REPEAT_KEYS, *SUBSET_KEYS, *exclude), exclude_prefixes=exclude_prefixes))
    return tuple(None if _nan(row.get(k)) else row.get(k) for k in keys)


def paper_set(dataset: Any) -> Any:
    """The paper's name of a data set a run used (lm-eval task names included)."""
    if not isinstance(dataset, str):
        return dataset
    name = dataset.split(":", 1)[-1]
    return SET_ALIASES.get(name, name)


def config_suffixes(reps: Iterable[pd.Series | dict], keyfn: Any = None) -> dict[tuple, str]:
    """For configurations that would print the same method label, the settings that tell them
    apart, as ' [key=value, ...]' (the report names the keys rather than merge the rows)."""
    keyfn = keyfn or config_key
    by_label: dict[str, list] = {}
    for r in reps:
        by_label.setdefault(f"{r.get('pair')}|{method_label(r)}", []).append(r)
    out: dict[tuple, str] = {}
    for group in by_label.values():
        if len({keyfn(r) for r in group}) < 2:
            continue
        keys = differing_keys([_config(r) for r in group], ignore=(*REPEAT_KEYS, *SUBSET_KEYS))
        keys = [k for k in keys if not k.startswith("dataset.")]
        for r in group:
            cfg = _config(r)
            shown = [f"{k}={cfg.get(k)}" for k in keys[:4]] + (["…"] if len(keys) > 4 else [])
            out[keyfn(r)] = f" [{', '.join(shown)}]" if shown else f" [config {r.get('config_id')}]"
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


def _mean(values: Iterable[Any]) -> float | None:
    xs = [float(v) for v in values if not _nan(v)]
    return sum(xs) / len(xs) if xs else None


def _samples(members: list) -> int | None:
    """Samples behind a configuration's figure: the sum over its runs (seeds, subsets)."""
    ns = [int(m["n_samples"]) for m in members if not _nan(m.get("n_samples"))]
    return sum(ns) if ns else None


def _samples_text(counts: Iterable[int | None]) -> str:
    """'3' when every set has 3 samples, '3-6' otherwise; '' without counts."""
    ns = sorted({n for n in counts if n is not None})
    return "" if not ns else str(ns[0]) if len(ns) == 1 else f"{ns[0]}-{ns[-1]}"


def _figure(members: list, metric: str, kind: str, with_n: bool = False) -> Any:
    """The mean of one figure over a configuration's runs: 'not run' without runs, 'n/a' when
    the runs exist but the figure is undefined in all of them. with_n: the cell names its
    sample count (quality figures, whose uncertainty the count sets)."""
    if not members:
        return NOT_RUN
    v = _mean(m[metric] for m in members)
    return Num(v, kind, n=_samples(members) if with_n else None) if v is not None else NA


def is_eagle(drafter: Any) -> bool:
    return isinstance(drafter, str) and drafter.lower().startswith("eagle")


def method_label(row: dict | pd.Series, skip: Iterable[str] = ()) -> str:
    """e.g. 'FLy (mla, K=15, θ=0.3, W=6)', 'SPD (pld, K=10)', 'EAGLE-3 + DropMatch (K=10, js)'.
    skip: index columns left out (the x axis of a plot)."""
    skip = set(skip)
    row = {k: (None if k in skip else v) for k, v in dict(row).items()}
    method, drafter = row.get("method"), row.get("drafter")
    if is_eagle(drafter):
        version = "EAGLE-2" if str(drafter).lower().startswith("eagle2") else "EAGLE-3"
        name = version + (" + DropMatch" if method == "dropmatch" else " + FLy" if method == "fly" else "")
        # Ours says which drafting it was: the papers' EAGLE figures are dynamic trees.
        parts = [] if _nan(row.get("tree")) or row.get("tree") is None else ["tree" if row.get("tree") else "chain"]
    elif method == "spd" and drafter == "pld":
        name, parts = "PLD", []
    elif drafter == "lookahead":
        name = "Lookahead" + ("" if method == "spd" else f" + {METHOD_NAMES.get(method, str(method))}")
        parts = []
    else:
        name = METHOD_NAMES.get(method, str(method))
        parts = [str(drafter)] if drafter else []
    if not _nan(row.get("K")) and row.get("K"):
        parts.append(f"K={int(row['K'])}")
    if method == "fly":
        if not _nan(row.get("theta")):
            parts.append(f"θ={row['theta']:g}")
        if not _nan(row.get("W")):
            parts.append(f"W={int(row['W'])}")
        if row.get("mode") not in (None, "code"):
            parts.append(f"mode={row['mode']}")
        if row.get("no_window") is True:
            parts.append("no window")
    if method == "dropmatch":
        for key, fmt in (("criterion", "{}"), ("n_paths", "N={:g}"), ("dropout_p", "p={:g}")):
            if not _nan(row.get(key)):
                parts.append(fmt.format(row[key]))
    if not _nan(row.get("temperature")) and row.get("temperature"):
        parts.append(f"T={row['temperature']:g}")
    return f"{name} ({', '.join(parts)})" if parts else name


def _pub_source(rows: Iterable[dict]) -> str:
    locs = sorted({f"{r['paper']}, {r['location']}, arXiv:{r['arxiv']}{_kind_note(r)}" for r in rows})
    return "published: " + "; ".join(locs)


def _pub_num(r: dict, kind: str) -> Num:
    return Num(float(r["value"]), kind, high=None if _nan(r.get("value_high")) else float(r["value_high"]), bound=r.get("bound"))


def _kind(metric: str) -> str:
    return {"speedup": "speedup", "tau": "tau", "retention": "score", "score": "score"}.get(metric, "ratio")


def _partial_note(runs: pd.DataFrame) -> list[str]:
    n = int((runs["status"] == "partial").sum()) if not runs.empty else 0
    return [f"includes {n} unfinished run(s) (killed; figures recomputed from their finished samples)"] if n else []


def _subset_notes(runs: pd.DataFrame) -> list[str]:
    notes = []
    for ds, group in runs.groupby("dataset"):
        subsets = sorted({s for s in group["subset"] if isinstance(s, str)})
        if subsets:
            notes.append(f"{ds}: subsets run: {' | '.join(subsets)} (averaged per configuration)")
    return notes


# -- FLy main table ----------------------------------------------------------------------------
def fly_main_table(index: pd.DataFrame, published: pd.DataFrame | None = None) -> Table:
    published = load_published() if published is None else published
    runs = our_runs(index)
    runs = runs[runs["method"] != "ar"] if not runs.empty else runs
    if not runs.empty:
        runs = runs.assign(dataset=runs["dataset"].map(paper_set))
    paper_sets = (*ID_SETS, *OOD_SETS)
    extra = sorted(set(runs["dataset"].dropna()) - set(paper_sets)) if not runs.empty else []
    datasets = [*paper_sets, *extra]
    columns = ["source", "pair", "method"]
    for ds in datasets:
        columns += [f"{ds} speedup", f"{ds} tau", f"{ds} accuracy"]
    columns += ["ID mean speedup", "ID mean tau", "OOD mean speedup", "OOD mean tau", "mean speedup (paper sets)",
                "min retention", "speedup ÷ EAGLE-3 (OOD)", "samples per set"]

    # Our rows: one per configuration (every resolved key but the data set's, the seed and the
    # subsets); per data set one setting of the data set's keys, the mean over its runs.
    ours: dict[tuple, dict[str, Any]] = {}
    for _, r in runs.iterrows():
        entry = ours.setdefault(config_key(r), {"row": r, "by_ds": {}})
        entry["by_ds"].setdefault(r["dataset"], []).append(r)
    suffix = config_suffixes([e["row"] for e in ours.values()])
    variant_notes: list[str] = []
    for key, entry in ours.items():
        label = method_label(entry["row"]) + suffix.get(key, "")
        for ds in list(entry["by_ds"]):
            entry["by_ds"][ds], notes = choose_variant(entry["by_ds"][ds], f"{entry['row']['pair']} {label}, {ds}")
            variant_notes += notes

    def set_means(by_ds: dict[str, list], sets: tuple[str, ...], metric: str, kind: str) -> Any:
        if not any(d in by_ds for d in sets):
            return NOT_RUN
        per = [_mean(x[metric] for x in by_ds[d]) for d in sets if d in by_ds]
        per = [p for p in per if p is not None]
        if not per:
            return NA
        return Num(sum(per) / len(per), kind, of=None if len(per) == len(sets) else f"{len(per)}/{len(sets)}")

    # FLy's "over EAGLE-3" is against EAGLE-3 with its dynamic tree: a tree run is preferred to
    # a chain run of the same pair (a chain understates EAGLE-3 and inflates the ratio).
    eagle_ood: dict[Any, float] = {}
    eagle_tree: dict[Any, bool] = {}
    for entry in ours.values():
        r = entry["row"]
        if is_eagle(r["drafter"]) and not str(r["drafter"]).lower().startswith("eagle2") and r["method"] == "spd":
            m = set_means(entry["by_ds"], OOD_SETS, "speedup", "speedup")
            tree = bool(r.get("tree")) and not _nan(r.get("tree"))
            if isinstance(m, Num) and (tree or not eagle_tree.get(r["pair"], False)):
                eagle_ood[r["pair"]] = m.value
                eagle_tree[r["pair"]] = tree

    our_rows: list[tuple[str, list[Any]]] = []
    for key, entry in ours.items():
        r, by_ds = entry["row"], entry["by_ds"]
        cells: list[Any] = ["ours", r["pair"], method_label(r) + suffix.get(key, "")]
        for ds in datasets:
            for metric, kind in (("speedup", "speedup"), ("tau", "tau"), ("accuracy", "score")):
                cells.append(_figure(by_ds.get(ds, []), metric, kind, with_n=metric == "accuracy"))
        ood = set_means(by_ds, OOD_SETS, "speedup", "speedup")
        retentions = [_mean(x["retention"] for x in rows) for rows in by_ds.values()]
        retentions = [v for v in retentions if v is not None]
        ratio: Any = NOT_RUN if r["method"] == "fly" else NA  # a FLy figure only
        if r["method"] == "fly" and isinstance(ood, Num) and eagle_ood.get(r["pair"]):
            ratio = Num(ood.value / eagle_ood[r["pair"]], "ratio")
        cells += [
            set_means(by_ds, ID_SETS, "speedup", "speedup"),
            set_means(by_ds, ID_SETS, "tau", "tau"),
            ood,
            set_means(by_ds, OOD_SETS, "tau", "tau"),
            set_means(by_ds, paper_sets, "speedup", "speedup"),  # extra sets never enter the paper's mean
            Num(min(retentions), "score") if retentions else NA,
            ratio,
            _samples_text(_samples(rows) for rows in by_ds.values()),
        ]
        our_rows.append((r["pair"], cells))

    # Published rows: one per (pair, method) of published.csv's fly_main figures.
    pub = [dict(p) for _, p in published[published["table"] == "fly_main"].iterrows()]
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
    for (pair, method, drafter), rows in groups.items():
        cells = {c: NOT_SOURCED for c in columns}
        cells["samples per set"] = "paper"
        name = method_label({"method": method, "drafter": drafter})
        cells.update(source=_pub_source(rows), pair=pair, method=f"{name} (paper)")
        for p in rows:
            col = scope_col.get((p["dataset"], p["metric"])) or f"{paper_set(p['dataset'])} {p['metric']}"
            if col in cells:
                cells[col] = _pub_num(p, _kind(p["metric"]))
            else:
                extra_pub.append(p)  # a figure with no column of its own (e.g. over EAGLE-2): in the notes
        pub_rows.append((pair, [cells[c] for c in columns]))
        # Our counterpart, when we have no run for that pair and method: a row of "not run".
        if pair not in ("all", "not stated") and not any(
            e["row"]["pair"] == pair and e["row"]["method"] == method for e in ours.values()
        ):
            our_rows.append((pair, ["ours", pair, name] + [NOT_RUN] * (len(columns) - 3)))
    rows = _interleave(pub_rows, our_rows)
    notes = [
        "speedup = method tokens/s ÷ target-alone tokens/s (paired per sample); tau = emitted tokens ÷ verification steps, bonus/correction token included; accuracy = the method's task accuracy.",
        f"ID sets: {', '.join(ID_SETS)}; OOD sets: {', '.join(OOD_SETS)} (FLy's split). The means cover these sets only; other sets ({', '.join(extra) or 'none'}) have their own columns. A mean over fewer sets than the split says '(n/m sets)'.",
        "One row per configuration: runs that differ in any resolved setting other than the seed and the data set's subsets are separate rows; where rows would share a label, the settings that differ are named in brackets.",
        "n = samples behind our accuracy figure; samples per set = the range over the row's data sets (the published rows: the paper's full sets).",
        "'not run': no finished run of ours; 'n/a': run, but the figure is undefined (retention with target-alone accuracy 0, speedup without a paired baseline); 'not sourced': no published figure in published.csv (see its source and note columns).",
        "speedup ÷ EAGLE-3 (OOD) divides by our EAGLE-3 run of the same pair with the dynamic tree when there is one"
        + (" (this table: " + ", ".join(f"{p}: {'tree' if t else 'CHAIN, which understates EAGLE-3 and inflates the ratio'}" for p, t in eagle_tree.items()) + ")" if eagle_tree else "")
        + "; the papers' EAGLE-2/3 and Lookahead figures are dynamic-tree / official-default runs (experiment=baselines_tree).",
        *variant_notes,
        *_subset_notes(runs),
        *_partial_note(runs),
        *[f"published {p['pair']} {p['method']} {p['metric']} ({p['dataset']}){_kind_note(p)}: {p['note']}" for p in pub],
        *[f"published, no column: {p['pair']} {p['method']} {p['metric']} = {_pub_num(p, _kind(p['metric'])).text()} ({p['dataset']})" for p in extra_pub],
    ]
    return Table("fly_main", "FLy main results: speedup, tau and accuracy per data set, ours beside published", columns, rows, notes)


def _kind_note(p: dict) -> str:
    """Marks a published figure whose source is not the paper's own results table."""
    kind = p.get("source_kind")
    return "" if kind in (None, "paper_table") else f" [source: {kind}, not the paper's table]"


def _interleave(pub_rows: list[tuple[str, list]], our_rows: list[tuple[str, list]]) -> list[list[Any]]:
    """Rows grouped by pair: published first, then ours; pairs in order of first appearance."""
    order: list[str] = []
    for pair, _ in [*pub_rows, *our_rows]:
        if pair not in order:
            order.append(pair)
    out = []
    for pair in order:
        out += [cells for p, cells in pub_rows if p == pair]
        out += sorted((cells for p, cells in our_rows if p == pair), key=lambda c: str(c[2]))
    return out


# -- FLy ablations ---------------------------------------------------------------------------
# The configuration keys an ablation axis varies (excluded when matching runs to an ablation).
AXIS_KEYS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    # axis: (keys, key prefixes)
    "theta": (("method.theta",), ()),
    "W": (("method.window",), ()),
    "K": (("drafter.k",), ()),
    "MLA": ((), ("drafter.",)),
}
ABLATIONS = {
    # axis: (index column, header, experiment name part)
    "theta": ("theta", "θ (entropy threshold)", "theta"),
    "W": ("W", "W (window, tokens)", "window"),
    "K": ("K", "K (draft tokens)", "k"),
    "MLA": ("drafter", "MLA", "mla"),
}


def _mla(drafter: Any) -> str:
    return {"mla": "on", "model": "off"}.get(drafter, f"off ({drafter})" if drafter else "off")


def _axis_free_key(row: pd.Series | dict, axis: str) -> tuple:
    """A run's configuration without the ablation axis' keys (and, as config_key, the data set)."""
    keys, prefixes = AXIS_KEYS[axis]
    col = ABLATIONS[axis][0]
    if _config(row):
        return config_key(row, exclude=keys, exclude_prefixes=("dataset.", *prefixes))
    return config_key(row, keys=[k for k in CONFIG_KEYS if k != col])


def fly_ablation_table(index: pd.DataFrame, axis: str, published: pd.DataFrame | None = None) -> Table:
    """FLy along one axis (theta, W, K, MLA); one row per configuration, its figures the mean over
    the data sets it ran (listed). Runs are selected by configuration: the experiments named
    *ablation_<axis>* name the ablation's fixed settings (every key but the axis'), and every FLy
    run with those settings belongs to it, whichever experiment's folder holds it (a point that
    several sweeps share runs once, in the first sweep's folder: loosespec_bench.plan). Without
    such experiments, every FLy run."""
    del published  # the papers' ablation figures are not sourced yet: the column says so
    col, header, exp_part = ABLATIONS[axis]
    runs = our_runs(index)
    fly = runs[runs["method"] == "fly"] if not runs.empty else runs
    if not fly.empty:
        dedicated = fly[fly["experiment"].astype(str).map(lambda e: fnmatch(e, f"*ablation_{exp_part}*"))]
        if not dedicated.empty:
            fixed = {_axis_free_key(r, axis) for _, r in dedicated.iterrows()}
            fly = fly[[_axis_free_key(r, axis) in fixed for _, r in fly.iterrows()]]
    others = [("K", "K"), ("W", "W"), ("theta", "θ"), ("drafter", "MLA"), ("mode", "mode"), ("no_window", "no_window")]
    columns = [header, "source", "pair", "other settings", "data sets", "samples", "speedup", "tau", "tau without loose accepts",
               "loose accept rate", "retention", "published speedup"]
    rows: list[list[Any]] = []
    groups: dict[tuple, list] = {}
    for _, r in fly.iterrows():
        groups.setdefault(config_key(r), []).append(r)
    suffix = config_suffixes([m[0] for m in groups.values()])
    variant_notes: list[str] = []
    for gkey, members in groups.items():
        by_ds: dict[Any, list] = {}
        for m in members:
            by_ds.setdefault(m["dataset"], []).append(m)
        members = []
        for ds, ms in by_ds.items():
            chosen, notes = choose_variant(ms, f"{ms[0]['pair']} {method_label(ms[0])}{suffix.get(gkey, '')}, {ds}")
            members += chosen
            variant_notes += notes
        r = members[0]
        value = _mla(r["drafter"]) if axis == "MLA" else (None if _nan(r[col]) else r[col])
        settings = []
        for key, name in others:
            if key == col or _nan(r.get(key)) or (key == "no_window" and r.get(key) is not True):
                continue
            v = r[key]
            settings.append(f"{name}={_mla(v)}" if key == "drafter" else f"{name}={v:g}" if isinstance(v, float) else f"{name}={v}")

        def avg(metric: str, kind: str) -> Any:
            return _figure(members, metric, kind)

        rows.append([
            value if value is not None else "",
            "ours",
            r["pair"],
            ", ".join(settings) + suffix.get(gkey, ""),
            ", ".join(sorted({str(m["dataset"]) for m in members})),
            _samples(members) or "",
            avg("speedup", "speedup"),
            avg("tau", "tau"),
            avg("tau_without_loose", "tau"),
            avg("loose_accept_rate", "score"),
            avg("retention", "score"),
            NOT_SOURCED,
        ])
    rows.sort(key=lambda c: (str(c[2]), _sort_key(c[0]), c[3]))
    if not rows:
        rows.append([NOT_RUN, "ours", NOT_RUN, "", "", "", NOT_RUN, NOT_RUN, NOT_RUN, NOT_RUN, NOT_RUN, NOT_SOURCED])
    notes = [
        "Each row: the mean over the data sets (and seeds) of one configuration; samples = their total.",
        "tau without loose accepts: what exact match would have accepted on the same drafts (metrics.loose_summary).",
        "published speedup: 'not sourced' (the papers' ablation figures are not in published.csv).",
        *variant_notes,
        *_partial_note(fly),
    ]
    return Table(f"fly_ablation_{axis}", f"FLy ablation over {header}", columns, rows, notes)


def _sort_key(v: Any) -> tuple:
    return (0, float(v), "") if isinstance(v, (int, float)) and not _nan(v) else (1, 0.0, str(v))


# -- DropMatch tables ------------------------------------------------------------------------
def _versus_table(
    index: pd.DataFrame, published: pd.DataFrame, *, name: str, title: str, eagle: bool, base_label: str
) -> Table:
    """Base method (SPD with a drafter) vs the same drafter + DropMatch, per pair/data set/K."""
    runs = our_runs(index)
    if not runs.empty:
        runs = runs[runs["drafter"].map(is_eagle) == eagle]
        runs = runs[runs["method"].isin(["spd", "dropmatch"])]
    base_keys = ["pair", "dataset", "drafter", "K", "temperature"]
    columns = ["source", "pair", "data set", "drafter", "K", "DropMatch setting",
               f"{base_label} tau", "+DropMatch tau", f"{base_label} speedup", "+DropMatch speedup",
               f"{base_label} score", "+DropMatch score", f"tau ÷ {base_label}", f"speedup ÷ {base_label}", "samples"]

    def figs(members: list) -> tuple[Any, Any, Any]:
        return tuple(_figure(members, metric, kind, with_n=metric == "score") for metric, kind in (("tau", "tau"), ("speedup", "speedup"), ("score", "score")))

    base: dict[tuple, list] = {}
    dm: dict[tuple, list] = {}
    for _, r in runs.iterrows():
        # The base configuration: every setting but the rule's own (method.*) and the step
        # records DropMatch's overhead figures need; SPD and DropMatch runs meet on it.
        bkey = config_key(r, base_keys, exclude=("record_steps",), exclude_prefixes=("method.",))
        if r["method"] == "spd":
            base.setdefault(bkey, []).append(r)
        else:  # one DropMatch row per (base configuration, DropMatch knobs)
            dm.setdefault((bkey, config_key(r, ["criterion", "n_paths", "dropout_p"], exclude_prefixes=())), []).append(r)
    our_rows: list[tuple[str, list]] = []
    seen_base = set()
    for (bkey, dkey), members in dm.items():
        seen_base.add(bkey)
        b = figs(base.get(bkey, []))
        d = figs(members)
        gain: Any = NOT_RUN if NOT_RUN in (b[1], d[1]) else NA
        if isinstance(d[1], Num) and isinstance(b[1], Num) and b[1].value:
            gain = Num(d[1].value / b[1].value, "ratio")
        tau_gain: Any = NOT_RUN if NOT_RUN in (b[0], d[0]) else NA
        if isinstance(d[0], Num) and isinstance(b[0], Num) and b[0].value:
            tau_gain = Num(d[0].value / b[0].value, "ratio")
        r = members[0]
        setting = ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in zip(("criterion", "N", "p"), dkey) if v is not None)
        our_rows.append((r["pair"], ["ours", r["pair"], r["dataset"], r["drafter"], _int(r["K"]), setting,
                                     b[0], d[0], b[1], d[1], b[2], d[2], tau_gain, gain,
                                     _samples_text([_samples(base.get(bkey, [])), _samples(members)])]))
    for bkey, members in base.items():
        if bkey in seen_base:
            continue
        r = members[0]
        b = figs(members)
        our_rows.append((r["pair"], ["ours", r["pair"], r["dataset"], r["drafter"], _int(r["K"]), NOT_RUN,
                                     b[0], NOT_RUN, b[1], NOT_RUN, b[2], NOT_RUN, NOT_RUN, NOT_RUN, _samples_text([_samples(members)])]))

    pub = [dict(p) for _, p in published[published["table"] == name].iterrows()]
    groups: dict[tuple, list[dict]] = {}
    for p in pub:
        groups.setdefault((p["pair"], p["dataset"], p["k"]), []).append(p)
    pub_rows: list[tuple[str, list]] = []
    for (pair, dataset, k), rows in groups.items():
        cells = dict.fromkeys(columns, NOT_SOURCED)
        drafters = sorted({str(p["drafter"]) for p in rows if p.get("drafter")})
        cells.update({"source": _pub_source(rows), "pair": pair, "data set": dataset,
                      "drafter": ", ".join(drafters) or "not stated", "K": k if k is not None else "not stated",
                      "DropMatch setting": "paper", "samples": "paper"})
        for p in rows:
            if p["metric"] in ("speedup_gain", "tau_gain"):
                cells[f"{p['metric'].split('_')[0]} ÷ {base_label}"] = _pub_num(p, "ratio")
                continue
            side = f"{base_label} " if p["method"] == "spd" else "+DropMatch "
            col = side + {"tau": "tau", "speedup": "speedup", "score": "score"}.get(p["metric"], p["metric"])
            if col in cells:
                cells[col] = _pub_num(p, _kind(p["metric"]))
        pub_rows.append((pair, [cells[c] for c in columns]))
        ours_for = [c for pr, c in our_rows if pr == pair or (pair == "not stated" and c[2] == dataset)]
        if pair != "all" and not ours_for:
            our_rows.append((pair, ["ours", "any" if pair == "not stated" else pair, "any" if dataset == "not stated" else dataset, "eagle3" if eagle else "any",
                                    k if k is not None else "any", NOT_RUN] + [NOT_RUN] * 8 + [""]))
    notes = [
        f"{base_label}: exact-match speculative decoding{' with the EAGLE-3 drafter' if eagle else ''}; +DropMatch: the same drafter and K with method=dropmatch.",
        "speedup over the target alone (paired per sample); tau includes the bonus/correction token; score = the task's headline quality figure (accuracy, IFEval prompt-level strict, judge rating).",
        "'not run': no finished run of ours; 'n/a': run, but the figure is undefined; 'not sourced': no published figure in published.csv.",
        *_partial_note(runs),
        *[f"published {p['pair']} {p['method']} {p['metric']} ({p['dataset']}){_kind_note(p)}: {p['note']}" for p in pub],
    ]
    return Table(name, title, columns, _interleave(pub_rows, our_rows), notes)


def _int(v: Any) -> Any:
    return int(v) if not _nan(v) else ""


def dropmatch_main_table(index: pd.DataFrame, published: pd.DataFrame | None = None) -> Table:
    published = load_published() if published is None else published
    return _versus_table(index, published, name="dropmatch_main", title="DropMatch main results: SD vs SD + DropMatch",
                         eagle=False, base_label="SD")


def dropmatch_eagle3_table(index: pd.DataFrame, published: pd.DataFrame | None = None) -> Table:
    published = load_published() if published is None else published
    return _versus_table(index, published, name="dropmatch_eagle3", title="DropMatch on top of EAGLE-3",
                         eagle=True, base_label="EAGLE-3")


def dropmatch_overhead_table(index: pd.DataFrame, published: pd.DataFrame | None = None) -> Table:
    """DropMatch's own cost: the share of decode time spent in the N-path LM-head passes and the
    criterion (summary's dropmatch_overhead, from the per-step timings), per configuration."""
    published = load_published() if published is None else published
    runs = our_runs(index)
    runs = runs[runs["method"] == "dropmatch"] if not runs.empty else runs
    columns = ["source", "pair", "data set", "drafter", "K", "DropMatch setting", "overhead (share of decode time)", "tau", "speedup", "samples"]
    groups: dict[tuple, list] = {}
    for _, r in runs.iterrows():
        groups.setdefault(config_key(r, exclude_prefixes=()), []).append(r)
    suffix = config_suffixes([g[0] for g in groups.values()], keyfn=lambda r: config_key(r, exclude_prefixes=()))
    our_rows: list[tuple[str, list]] = []
    for key, members in groups.items():
        r = members[0]
        setting = ", ".join(f"{k}={r[c]:g}" if isinstance(r[c], float) else f"{k}={r[c]}"
                            for k, c in (("criterion", "criterion"), ("N", "n_paths"), ("p", "dropout_p")) if not _nan(r.get(c)))
        our_rows.append((r["pair"], ["ours", r["pair"], r["dataset"], r["drafter"], _int(r["K"]), setting + suffix.get(key, ""),
                                     _figure(members, "dropmatch_overhead", "score"), _figure(members, "tau", "tau"),
                                     _figure(members, "speedup", "speedup"), _samples(members) or ""]))
    pub_rows: list[tuple[str, list]] = []
    pub = [dict(p) for _, p in published[published["table"] == "dropmatch_overhead"].iterrows()]
    for p in pub:
        pub_rows.append((p["pair"], [_pub_source([p]), p["pair"], p["dataset"], p.get("drafter") or "not stated",
                                     p["k"] if p.get("k") is not None else "not stated", "paper (5 paths)",
                                     _pub_num(p, "score"), NOT_SOURCED, NOT_SOURCED, "paper"]))
    if not our_rows:
        our_rows.append(("any", ["ours", "any", "any", "any", "any", NOT_RUN, NOT_RUN, NOT_RUN, NOT_RUN, ""]))
    notes = [
        "overhead = time in DropMatch's N-path LM-head passes and criterion ÷ decode time (needs record_steps=true; 'n/a' without step timings).",
        *[f"published {p['pair']} {p['metric']}{_kind_note(p)}: {p['note']}" for p in pub],
        *_partial_note(runs),
    ]
    return Table("dropmatch_overhead", "DropMatch overhead: LM-head passes and criterion", columns, _interleave(pub_rows, our_rows), notes)


def build_tables(index: pd.DataFrame, published: pd.DataFrame | None = None) -> list[Table]:
    published = load_published() if published is None else published
    return [
        fly_main_table(index, published),
        *[fly_ablation_table(index, axis, published) for axis in ABLATIONS],
        dropmatch_main_table(index, published),
        dropmatch_eagle3_table(index, published),
        dropmatch_overhead_table(index, published),
    ]


def write_tables(index: pd.DataFrame, out_dir: str | Path, published: pd.DataFrame | None = None) -> list[Path]:
    """Every table as <name>.md/.tex/.csv in out_dir, plus tables.md with all of them."""
    out = Path(out_dir)
    tables = build_tables(index, published)
    paths = [p for t in tables for p in t.write(out)]
    combined = out / "tables.md"
    combined.write_text("# Paper tables\n\n" + "\n".join(t.to_markdown() for t in tables), encoding="utf-8")
    return [combined, *paths]
