"""Paper tables: our runs beside the published figures, as Markdown, LaTeX and CSV.

Tables (the layouts of the two papers):
- fly_main: one row per (pair, method); per data set its speedup and accuracy, each with its
  interval; the in-distribution (ID) and out-of-distribution (OOD) means of speedup and tau, the
  mean over the paper's sets, the lowest accuracy retention, FLy's speedup over EAGLE-3 (OOD);
- noise_floor: every loose rule's quality beside the lossless rule (SPD) at the same pair,
  drafter, K and dtype: the lossless rule's retention interval is what numerics alone (bf16
  near-ties) do, the floor a loose rule is judged against; "identical to target alone" for both;
- fly_ablation_{theta,W,K,MLA}: one row per FLy configuration along one axis, over the data
  sets that every point of the ablation ran (never a 6-set pool beside 1-set points);
- dropmatch_main: SD vs SD + DropMatch (tau, speedup, task score) per pair / data set / drafter,
  the DropMatch rows named by their knobs (criterion, N, p);
- dropmatch_eagle3: EAGLE-3 vs EAGLE-3 + DropMatch; dropmatch_overhead: DropMatch's own cost.

Cells: `1.42× [1.21, 1.63]`, the point and its interval from summary.json (the `<figure>_ci_low`
/ `_ci_high` keys, loosespec_bench/schema.py); a summary written before intervals existed shows
the point marked "(no interval)"; a quality cell of a run its summary calls underpowered says
`underpowered (n=3)`. Rows and columns with nothing run are not printed: a note says what was
not run. Published figures come from published.csv (one number per row, each with its source);
a published row's cell is empty where published.csv holds no figure: never 0.

Files per table: <name>.md, <name>.tex (booktabs, one column wide: a row's figures as sub-rows,
no resizing), <name>.csv (the table as shown, raw numbers) and <name>_long.csv (tidy: one line per
row x data set x figure with value, ci_low, ci_high, n and flags).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from fnmatch import fnmatch
from pathlib import Path
from typing import Any, Iterable

import pandas as pd

from ..schema import FIGURE, format_interval, format_value, label_parts
from ..stats.exact import sign_test_p
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
NOT_SOURCED = "not sourced"  # kept for readers of older reports; cells without a published figure are empty
NA = "n/a"  # run, but the figure is undefined (e.g. retention with target-alone accuracy 0)
NO_INTERVAL = "no interval"
MIXED_CPUS = "mixed CPUs"  # a mean of speedups measured on different CPUs: not taken
METHOD_NAMES = {"fly": "FLy", "spd": "SPD", "dropmatch": "DropMatch", "ar": "target alone",
                "autojudge": "AutoJudge", "dropmatch_autojudge": "DropMatch + AutoJudge"}
ENGINE_NAMES = {"vllm": "vLLM"}  # engine=<name> as the tables print it (engine=hf, our loop: no tag)
LOSSLESS = ("spd", "ar")  # rules whose output is the target's own (up to numerics)
# Configuration = every knob that changes what a run computes (runs that differ only in seed or
# data subset are averaged into one row). Used only for summaries without a config (see config_key).
CONFIG_KEYS = ["engine", "pair", "method", "drafter", "K", "theta", "W", "mode", "no_window", "criterion", "n_paths", "dropout_p", "temperature"]


# -- cells ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Num:
    """A figure with its kind (schema.format_value) and, for ours, its interval and sample count."""

    value: float
    kind: str = "score"
    high: float | None = None  # a published range value..high
    bound: str | None = None  # ">=" or "<=" ("up to")
    of: str | None = None  # "n/m": a mean over n of the m sets it should cover
    n: int | None = None  # samples behind one of our figures (shown on quality cells)
    ci: tuple[float, float] | None = None  # our interval
    no_interval: bool = False  # ours, from a summary without interval keys (or not computable)
    why_none: str = NO_INTERVAL  # what the missing interval's marker says
    underpowered: bool = False  # a quality figure of a run its summary calls underpowered

    def text(self, latex: bool = False) -> str:
        core = format_value(self.value, self.kind, latex=latex)
        if self.high is not None:
            core = core.replace("×", "").replace(r"$\times$", "") + ("--" if latex else "–") + format_value(self.high, self.kind, latex=latex)
        if self.bound == ">=":
            core = (r"$\geq$" if latex else "≥") + core
        elif self.bound == "<=":
            core = "up to " + core
        if self.ci is not None:
            ci = format_interval(*self.ci, self.kind)
            core += f" {{\\scriptsize{ci}}}" if latex else f" {ci}"
        extra = [f"{self.of} sets"] if self.of else []
        if self.underpowered and self.n is not None:
            core += f" underpowered (n={self.n})"
        elif self.n is not None:
            extra.append(f"n={self.n}")
        if self.ci is None and self.no_interval:
            extra.append(self.why_none)
        return core + (f" ({', '.join(extra)})" if extra else "")

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
        "−": "$-$",
    }
    return "".join(repl.get(ch, ch) for ch in text)


@dataclass
class Table:
    """A table: `ids` leading identity columns, then figure columns; meta maps a figure column to
    its (scope, figure) for the tidy CSV and the LaTeX layout (scope: a data set, "ID mean", ...)."""

    name: str
    title: str
    columns: list[str]
    rows: list[list[Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    ids: int = 3
    meta: dict[str, tuple[str, str]] = field(default_factory=dict)

    def to_markdown(self) -> str:
        def esc(s: str) -> str:
            return s.replace("|", r"\|")

        lines = [f"### {self.title}", "", "| " + " | ".join(esc(c) for c in self.columns) + " |"]
        lines.append("|" + "|".join("---" for _ in self.columns) + "|")
        lines += ["| " + " | ".join(esc(_cell_text(c)) for c in row) + " |" for row in self.rows]
        if self.notes:
            lines += [""] + [f"- {n}" for n in self.notes]
        return "\n".join(lines) + "\n"

    def _scope_metric(self, col: str) -> tuple[str, str]:
        return self.meta.get(col, ("", col))

    def to_latex(self, max_figures: int = 4) -> str:
        """booktabs, one column wide: each row of the table is a bold heading line (its identity
        columns), its figures sub-rows by scope (data set, mean...) with at most max_figures
        figure columns per tabular (more figures: further tabulars below). No resizing."""
        fig_cols = self.columns[self.ids:]
        metrics = list(dict.fromkeys(self._scope_metric(c)[1] for c in fig_cols))
        chunks = [metrics[i:i + max_figures] for i in range(0, len(metrics), max_figures)] or [[]]
        label = re.sub(r"[^a-z0-9_]", "_", self.name.lower())
        notes = "".join(f"% {n}\n" for n in self.notes)
        out = [f"% {self.title}\n% needs \\usepackage{{booktabs}}\n{notes}",
               "\\begin{table}[t]\n\\centering\n\\footnotesize\n\\setlength{\\tabcolsep}{3pt}\n",
               f"\\caption{{{_latex_escape(self.title)}}}\n\\label{{tab:{label}}}\n"]
        for chunk in chunks:
            spec = "l" + "r" * len(chunk)
            head = " & ".join(["", *(_latex_escape(m) for m in chunk)]) + r" \\"
            body: list[str] = []
            for row in self.rows:
                cells = dict(zip(self.columns, row))
                by_scope: dict[str, dict[str, Any]] = {}
                for col in fig_cols:
                    scope, metric = self._scope_metric(col)
                    if metric in chunk:
                        by_scope.setdefault(scope, {})[metric] = cells[col]
                by_scope = {s: v for s, v in by_scope.items() if any(not _blank(x) for x in v.values())}
                if not by_scope:
                    continue
                ident = ", ".join(_cell_text(cells[c], latex=True) for c in self.columns[: self.ids] if not _blank(cells[c]))
                body.append(f"\\multicolumn{{{len(chunk) + 1}}}{{l}}{{\\textbf{{{ident}}}}} \\\\")
                for scope, figs in by_scope.items():
                    body.append(" & ".join([r"\quad " + _latex_escape(scope or "all")] + [_cell_text(figs.get(m), latex=True) for m in chunk]) + r" \\")
            out.append(f"\\begin{{tabular}}{{{spec}}}\n\\toprule\n{head}\n\\midrule\n" + "\n".join(body) + "\n\\bottomrule\n\\end{tabular}\n")
        out.append("\\end{table}\n")
        return "".join(out)

    def to_frame(self) -> pd.DataFrame:
        """Raw values (numbers unformatted, markers as text), the table as shown."""
        return pd.DataFrame([[c.raw() if isinstance(c, Num) else c for c in row] for row in self.rows], columns=self.columns)

    def to_long(self) -> pd.DataFrame:
        """Tidy: one line per (row, figure column) with the row's identity, the scope (data set,
        ID mean...), the figure, its value, interval, sample count and flags."""
        records = []
        for row in self.rows:
            cells = dict(zip(self.columns, row))
            ident = {c: _cell_text(cells[c]) for c in self.columns[: self.ids]}
            for col in self.columns[self.ids:]:
                cell = cells[col]
                if _blank(cell):
                    continue
                scope, metric = self._scope_metric(col)
                rec: dict[str, Any] = {"table": self.name, **ident, "scope": scope, "figure": metric}
                if isinstance(cell, Num):
                    rec.update(value=cell.value, value_high=cell.high, bound=cell.bound,
                               ci_low=cell.ci[0] if cell.ci else None, ci_high=cell.ci[1] if cell.ci else None,
                               n=cell.n, interval=("yes" if cell.ci else cell.why_none if cell.no_interval else ""),
                               underpowered=cell.underpowered, sets=cell.of, text="")
                else:
                    rec.update(text=str(cell))
                records.append(rec)
        cols = ["table", *self.columns[: self.ids], "scope", "figure", "value", "value_high", "bound", "ci_low", "ci_high",
                "n", "interval", "underpowered", "sets", "text"]
        return pd.DataFrame(records, columns=cols)

    def write(self, out_dir: str | Path) -> list[Path]:
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        paths = [out / f"{self.name}.md", out / f"{self.name}.tex", out / f"{self.name}.csv", out / f"{self.name}_long.csv"]
        paths[0].write_text(self.to_markdown(), encoding="utf-8")
        paths[1].write_text(self.to_latex(), encoding="utf-8")
        self.to_frame().to_csv(paths[2], index=False)
        self.to_long().to_csv(paths[3], index=False)
        return paths


def _blank(cell: Any) -> bool:
    return cell is None or cell == "" or (isinstance(cell, float) and math.isnan(cell))


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


def _mean(values: Iterable[Any]) -> float | None:
    xs = [float(v) for v in values if not _nan(v)]
    return sum(xs) / len(xs) if xs else None


def _samples(members: list) -> int | None:
    """Samples behind a configuration's figure: the sum over its runs (seeds, subsets)."""
    ns = [int(m["n_samples"]) for m in members if not _nan(m.get("n_samples"))]
    return sum(ns) if ns else None


def _changed(members: list) -> str:
    """'4 / 0 (p = 0.125)': the samples whose quality the method lost / gained against the target
    alone, summed over the configuration's runs, and the exact two-sided sign test on them. ''
    for runs from before the fields (re-score them) or without a paired quality."""
    have = [m for m in members if not _nan(m.get("quality_lost")) and not _nan(m.get("quality_gained"))]
    if not have or len(have) < len(members):
        return ""
    lost, gained = sum(int(m["quality_lost"]) for m in have), sum(int(m["quality_gained"]) for m in have)
    return f"{lost} / {gained}" + (f" (p = {sign_test_p(lost, gained):.3f})" if lost + gained else "")


def _samples_text(counts: Iterable[int | None]) -> str:
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


def _figure(members: list, metric: str, kind: str, with_n: bool = False) -> Any:
    """One figure of a configuration on one data set: the mean over its runs (seeds, subsets)
    with the interval from their summaries (combine); 'not run' without runs, 'n/a' when the
    runs exist but the figure is undefined in all of them. with_n: the cell names its sample
    count (quality figures, whose uncertainty the count sets)."""
    if not members:
        return NOT_RUN
    have = [m for m in members if not _nan(m.get(metric))]
    if not have:
        return NA
    lo_col, hi_col = f"{metric}_ci_low", f"{metric}_ci_high"
    points = [float(m[metric]) for m in have]
    intervals = [(None if _nan(m.get(lo_col)) else float(m[lo_col]), None if _nan(m.get(hi_col)) else float(m[hi_col])) for m in have]
    value, ci = combine(points, intervals)
    declared = FIGURE.get(metric)
    if declared is not None and not declared.interval:  # a figure without an interval in the contract
        return Num(value, kind, n=_samples(members) if with_n else None)
    new = [bool(m.get("intervals")) and not _nan(m.get("intervals")) for m in have]
    why = "interval not computable" if all(new) else NO_INTERVAL
    if all(not _nan(m.get("n_samples")) and int(m["n_samples"]) <= 1 for m in have):
        ci, why = None, "interval n/a at n = 1"  # one problem: no interval exists, never a zero-width one
    under = metric in QUALITY and any(m.get("underpowered") is True for m in have)
    return Num(value, kind, n=_samples(members) if with_n else None, ci=ci, no_interval=ci is None, why_none=why, underpowered=under)


def _set_mean(cells: list[Any], kind: str, of: str | None) -> Any:
    """The mean of per-set cells (Num), with their intervals combined as independent."""
    nums = [c for c in cells if isinstance(c, Num)]
    if not nums:
        return NA
    value, ci = combine([c.value for c in nums], [c.ci if c.ci else (None, None) for c in nums])
    # A figure outside the intervals contract (no cell is marked) stays unmarked in the mean.
    marked = ci is None and any(c.no_interval or c.ci is not None for c in nums)
    return Num(value, kind, of=of, ci=ci, no_interval=marked, why_none=next((c.why_none for c in nums if c.no_interval), NO_INTERVAL))


def is_eagle(drafter: Any) -> bool:
    return isinstance(drafter, str) and drafter.lower().startswith("eagle")


def method_label(row: dict | pd.Series, skip: Iterable[str] = ()) -> str:
    """e.g. 'FLy (mla, K=15, θ=0.3, W=6)', 'SPD (pld, K=10)', 'EAGLE-3 + DropMatch (K=10, js)'.
    The knob parts come from loosespec_bench/schema.py (label_parts): a new rule's knobs appear
    without a change here. skip: index columns left out (the x axis of a plot)."""
    skip = set(skip)
    row = {k: (None if k in skip else v) for k, v in dict(row).items()}
    method, drafter = row.get("method"), row.get("drafter")
    if is_eagle(drafter):
        version = "EAGLE-2" if str(drafter).lower().startswith("eagle2") else "EAGLE-3"
        name = version + ("" if method == "spd" else f" + {METHOD_NAMES.get(method, str(method))}")
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
    parts += label_parts(row, skip=skip)
    # Another engine's row sits beside our loop's under the same method: the label says which.
    engine = row.get("engine")
    if isinstance(engine, str) and engine not in ("", "hf"):
        name += f" on {ENGINE_NAMES.get(engine, engine)}"
    return f"{name} ({', '.join(parts)})" if parts else name


def rule_setting(row: dict | pd.Series) -> str:
    """A rule's own knobs as text ('js, N=5, p=0.3'), from the row's knob columns (schema)."""
    return ", ".join(label_parts(row, skip=("temperature",))) or "defaults"


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


def is_true(column: pd.Series) -> pd.Series:
    """A flag column as booleans: True only where the value is true (None and NaN are not)."""
    return column.map(lambda v: bool(v) if isinstance(v, bool) or type(v).__name__ == "bool_" else False).astype(bool)


def _interval_notes(runs: pd.DataFrame) -> list[str]:
    """What the cells' interval markers mean, for the runs this table shows."""
    if runs.empty:
        return []
    old = int((~is_true(runs["intervals"])).sum())
    notes = ["[low, high]: the 95% interval from the run's summary.json (loosespec_bench/stats/intervals.py): tau and "
             "speed a paired bootstrap over samples; 0/1 quality (accuracy, pass@1, their difference from the target "
             "alone, retention) exact: Clopper-Pearson, and for the paired figures Clopper-Pearson on the lost and gained "
             "splits given the target alone's answers; graded quality (recall, IFEval loose, ratings) the paired "
             "bootstrap. A mean over runs or sets combines the intervals as independent errors."]
    if old:
        notes.append(f"'(no interval)': {old} of these {len(runs)} runs' summaries predate the interval fields "
                     "(re-score them: python -m loosespec_bench.score <run dir>); the point value is shown alone.")
    notes += _machine_notes(runs)
    under = runs[is_true(runs["underpowered"])] if "underpowered" in runs else runs.iloc[:0]
    if not under.empty:
        thr = under["power_threshold"].dropna()
        notes.append("'underpowered (n=…)': the run's summary says its quality interval is wider than the power threshold"
                     + (f" ({thr.iloc[0]:g})" if not thr.empty else "") + "; more problems are needed to tell a loss from noise.")
    return notes


def _machines(members: Iterable[Any]) -> set[str]:
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


def _subset_notes(runs: pd.DataFrame) -> list[str]:
    notes = []
    for ds, group in runs.groupby("dataset"):
        subsets = sorted({s for s in group["subset"] if isinstance(s, str)})
        if subsets:
            notes.append(f"{ds}: subsets run: {' | '.join(subsets)} (averaged per configuration)")
    return notes


def _group_by_config(runs: pd.DataFrame, keyfn: Any = None) -> tuple[dict[tuple, dict[str, Any]], dict[tuple, str], list[str]]:
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


# -- FLy main table ----------------------------------------------------------------------------
# Sweeps whose runs have tables of their own (ablations, DropMatch, grids): FLy's main table shows
# the main-table experiments' rows only (a point such a sweep shares with the main table runs in,
# and is read from, the main table's folder: plan.assign_owners).
# fly_ablation_mla stays: its drafter=model points are the main table's "FLy" row beside FLy + MLA.
NOT_MAIN_TABLE = ("ablation_theta", "ablation_window", "ablation_k", "ablation_mode", "ablation_no_window",
                  "dropmatch", "grid", "criterion", "autojudge")


def fly_main_table(index: pd.DataFrame, published: pd.DataFrame | None = None) -> Table:
    published = load_published() if published is None else published
    runs = our_runs(index)
    runs = runs[runs["method"] != "ar"] if not runs.empty else runs
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
    for ds in datasets:
        for metric in ("speedup", "accuracy"):
            columns.append(f"{ds} {metric}")
            meta[f"{ds} {metric}"] = (ds, metric)
    tail = [("ID mean speedup", "ID mean", "speedup"), ("ID mean tau", "ID mean", "tau"),
            ("OOD mean speedup", "OOD mean", "speedup"), ("OOD mean tau", "OOD mean", "tau"),
            ("mean speedup (paper sets)", "paper sets", "speedup"), ("min retention", "all sets", "min retention"),
            ("speedup ÷ EAGLE-3 (OOD)", "OOD mean", "÷ EAGLE-3"), ("n per set", "all sets", "n")]
    for col, scope, metric in tail:
        columns.append(col)
        meta[col] = (scope, metric)

    ours, suffix, variant_notes = _group_by_config(runs)

    def set_means(by_ds: dict[str, list], sets: tuple[str, ...], metric: str, kind: str) -> Any:
        if not any(d in by_ds for d in sets):
            return NOT_RUN
        if kind == "speedup" and len(_machines(m for d in sets for m in by_ds.get(d, []))) > 1:
            return MIXED_CPUS  # speedups of two CPUs do not average into one figure
        cells = [_figure(by_ds[d], metric, kind) for d in sets if d in by_ds]
        n = sum(isinstance(c, Num) for c in cells)
        return _set_mean(cells, kind, None if n == len(sets) else f"{n}/{len(sets)}")

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
            cells.append(_figure(by_ds.get(ds, []), "speedup", "speedup") if ds in by_ds else "")
            # The set's headline quality (index `score`): accuracy, pass@1, NIAH's recall.
            cells.append(_figure(by_ds.get(ds, []), "score", "score", with_n=True) if ds in by_ds else "")
        ood = set_means(by_ds, OOD_SETS, "speedup", "speedup")
        retentions = [_mean(x["retention"] for x in rows) for rows in by_ds.values()]
        retentions = [v for v in retentions if v is not None]
        ratio: Any = "" if r["method"] != "fly" else NA  # a FLy figure only
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
    for (pair, method, drafter), rows in groups.items():
        cells = {c: "" for c in columns}
        cells["n per set"] = "paper"
        name = method_label({"method": method, "drafter": drafter})
        cells.update(source=_pub_source(rows), pair=pair, method=f"{name} (paper)")
        for p in rows:
            col = scope_col.get((p["dataset"], p["metric"])) or f"{paper_set(p['dataset'])} {p['metric']}"
            if col in cells:
                cells[col] = _pub_num(p, _kind(p["metric"]))
            else:
                extra_pub.append(p)  # a figure with no column of its own (e.g. over EAGLE-2): in the notes
        pub_rows.append((pair, [cells[c] for c in columns]))
        if pair not in ("all", "not stated") and not any(
            e["row"]["pair"] == pair and e["row"]["method"] == method for e in ours.values()
        ):
            not_run_rows.append(f"{name} on {pair}")
    rows = _interleave(pub_rows, our_rows)
    notes = [
        "speedup = method tokens/s ÷ target-alone tokens/s (paired per sample); tau = emitted tokens ÷ verification steps, bonus/correction token included; accuracy = the set's headline quality figure, the paper's column: accuracy, pass@1 (HumanEval; MBPP+ on base + plus tests), IFEval prompt-level strict, NIAH RULER's recall (the mean share of the needle values found; all found on a sample is the index's accuracy column) (per-set tau: fly_main_long.csv and the ablation tables).",
        *_interval_notes(runs),
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
        *_subset_notes(runs),
        *_partial_note(runs),
        *[f"published {p['pair']} {p['method']} {p['metric']} ({p['dataset']}){_kind_note(p)}: {p['note']}" for p in pub],
        *[f"published, no column: {p['pair']} {p['method']} {p['metric']} = {_pub_num(p, _kind(p['metric'])).text()} ({p['dataset']})" for p in extra_pub],
    ]
    return Table("fly_main", "FLy main results: speedup and accuracy per data set, ours beside published", columns, rows, notes, meta=meta)


def _kind_note(p: dict) -> str:
    """Marks a published figure whose source is not the paper's own results table."""
    kind = p.get("source_kind")
    return "" if kind in (None, "paper_table") else f" [source: {kind}, not the paper's table]"


def _interleave(pub_rows: list[tuple[str, list]], our_rows: list[tuple[str, list]], sort_col: int = 2) -> list[list[Any]]:
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


def _is_loose(row: pd.Series | dict) -> bool:
    return row.get("method") not in LOSSLESS


def noise_floor_table(index: pd.DataFrame, published: pd.DataFrame | None = None) -> Table:
    """Each loose rule's quality on each data set, and right under it the lossless rule (SPD) at
    the same pair, drafter, K and dtype on the same data set: its retention interval is what
    numerics alone (bf16 near-ties) move quality by, the floor a loose rule is judged against."""
    del published
    runs = our_runs(index)
    runs = runs[runs["method"] != "ar"] if not runs.empty else runs
    columns = ["pair", "data set", "method", "role", "score", "target-alone score", "score − target alone",
               "lost / gained (sign test)", "retention", "identical to target alone", "n"]
    meta = {c: ("", c) for c in columns[4:]}
    lossless: dict[tuple, list] = {}
    # The fallback: SPD with the same everything but the drafter (K kept). In exact arithmetic
    # SPD's output is the target's whatever drafts it; in bf16 the verified blocks' contents
    # differ, so the floor is close, not the same experiment, and its row says which drafter.
    lossless_other: dict[tuple, list] = {}
    for _, r in runs.iterrows():
        if not _is_loose(r):
            lossless.setdefault((lossless_key(r), r["dataset"]), []).append(r)
            lossless_other.setdefault((lossless_key_any_drafter(r), r["dataset"]), []).append(r)
    ours, suffix, variant_notes = _group_by_config(runs[[_is_loose(r) for _, r in runs.iterrows()]] if not runs.empty else runs)

    def quality(members: list) -> list[Any]:
        # The set's headline quality (index `score`: accuracy, pass@1, NIAH's recall), on which
        # retention is taken.
        return [_figure(members, "score", "score"), _figure(members, "baseline_score", "score"),
                _figure(members, "score_diff", "diff"), _changed(members), _figure(members, "retention", "score", with_n=True),
                _figure(members, "identical_to_target", "score"), _samples(members) or ""]

    blocks: list[list[list[Any]]] = []  # a loose row and, right under it, its twin
    missing: list[str] = []
    other_drafter: list[str] = []
    for key, entry in ours.items():
        r0 = entry["row"]
        label = method_label(r0) + suffix.get(key, "")
        for ds, members in entry["by_ds"].items():
            block = [[r0["pair"], ds, label, "loose", *quality(members)]]
            twin = lossless.get((lossless_key(members[0]), ds), [])
            near = [] if twin else lossless_other.get((lossless_key_any_drafter(members[0]), ds), [])
            if twin:
                block.append([r0["pair"], ds, method_label(twin[0]), "lossless twin (noise floor)", *quality(twin)])
            elif near:
                # Several SPD drafters at this K would be several floors: the first by label, named.
                near = sorted(near, key=lambda r: str(method_label(r)))
                near = [r for r in near if method_label(r) == method_label(near[0])]
                block.append([r0["pair"], ds, method_label(near[0]), "lossless, other drafter (noise floor)", *quality(near)])
                other_drafter.append(f"{label} on {ds}")
            else:
                missing.append(f"{label} on {ds}")
            blocks.append(block)
    blocks.sort(key=lambda b: (str(b[0][0]), str(b[0][2]), str(b[0][1])))
    rows = [row for block in blocks for row in block]
    notes = [
        "Lossless twin: the SPD run with every setting of the loose run but the rule's own (same pair, drafter, K, dtype, data set, generation); its output differs from the target alone only by numerics (bf16 near-ties), so its retention interval is the noise floor.",
        "identical to target alone: the share of samples whose output equals the target alone's, token for token.",
        "lost / gained: samples whose score the method lowered / raised against the target alone's, and the exact two-sided sign test on them (McNemar's exact test for 0/1 scores). The difference's interval is exact for 0/1 scores (stats.exact.ExactPairedBinary); the bootstrap's, printed before, excluded 0 too easily (4 lost, 0 gained: [-0.30, -0.03], yet p = 0.125).",
        *_interval_notes(runs),
        *([f"Lossless, other drafter: no SPD run with this drafter, so SPD at the same K with another drafter (named in the row) stands as the floor: in exact arithmetic SPD's output is the target's whatever drafts it, in bf16 the verified blocks differ, so it is the nearest floor, not the twin. For: {'; '.join(other_drafter)}."]
          if other_drafter else []),
        ("No lossless run at all for: " + "; ".join(missing) + ".") if missing else
        ("Every loose row has its lossless twin." if not other_drafter else "Every other loose row has its lossless twin."),
        *variant_notes,
        *_partial_note(runs),
    ]
    return Table("noise_floor", "Loose rules' quality beside the lossless rule (the bf16 noise floor)", columns, rows, notes, ids=4, meta=meta)


# -- FLy ablations ---------------------------------------------------------------------------
# The configuration keys an ablation axis varies (excluded when matching runs to an ablation).
AXIS_KEYS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    # axis: (keys, key prefixes)
    "theta": (("method.theta",), ()),
    "W": (("method.window",), ()),
    "K": (("drafter.k",), ()),
    "MLA": ((), ("drafter.",)),  # the drafter's own keys; K is kept apart (_axis_free_key)
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
    fly = runs[runs["method"] == "fly"] if not runs.empty else runs
    if not fly.empty:
        dedicated = fly[fly["experiment"].astype(str).map(lambda e: fnmatch(e, f"*ablation_{exp_part}*"))]
        if not dedicated.empty:
            fixed = {_axis_free_key(r, axis) for _, r in dedicated.iterrows()}
            fly = fly[[_axis_free_key(r, axis) in fixed for _, r in fly.iterrows()]]
    lossless: dict[tuple, list] = {}
    for _, r in runs.iterrows() if not runs.empty else []:
        if r["method"] == "spd":
            lossless.setdefault((lossless_key(r), r["dataset"]), []).append(r)
    others = [("K", "K"), ("W", "W"), ("theta", "θ"), ("drafter", "MLA"), ("mode", "mode"), ("no_window", "no_window")]
    columns = [header, "pair", "other settings", "data sets", "speedup", "tau", "tau without loose accepts",
               "loose accept rate", "retention", "lossless twin retention (noise floor)", "identical to target alone", "n"]
    meta = {c: ("", c) for c in columns[4:]}
    ours, suffix, variant_notes = _group_by_config(fly)
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
                if k == col or _nan(r.get(k)) or (k == "no_window" and r.get(k) is not True):
                    continue
                v = r[k]
                settings.append(f"{name}={_mla(v)}" if k == "drafter" else f"{name}={v:g}" if isinstance(v, float) else f"{name}={v}")

            def over_sets(metric: str, kind: str, source: dict[str, list] | None = None, with_n: bool = False) -> Any:
                by = source if source is not None else entry["by_ds"]
                cells = [_figure(by.get(ds, []), metric, kind) for ds in sets]
                if not any(isinstance(c, Num) for c in cells):
                    return NOT_RUN if all(c == NOT_RUN for c in cells) else NA
                n = sum(isinstance(c, Num) for c in cells)
                cell = _set_mean(cells, kind, None if n == len(sets) else f"{n}/{len(sets)}")
                under = metric in QUALITY and any(m.get("underpowered") is True for ds in sets for m in by.get(ds, []))
                if isinstance(cell, Num) and (with_n or under):
                    cell = Num(cell.value, cell.kind, of=cell.of, ci=cell.ci, no_interval=cell.no_interval, why_none=cell.why_none,
                               n=sum(_samples(by.get(ds, [])) or 0 for ds in sets), underpowered=under)
                return cell

            twins = {ds: lossless.get((lossless_key(entry["by_ds"][ds][0]), ds), []) for ds in sets}
            rows.append([
                _axis_value(r, axis, col),
                r["pair"],
                ", ".join(settings) + suffix.get(key, ""),
                ", ".join(str(s) for s in sets),
                over_sets("speedup", "speedup"),
                over_sets("tau", "tau"),
                over_sets("tau_without_loose", "tau"),
                over_sets("loose_accept_rate", "score"),
                over_sets("retention", "score", with_n=True),
                over_sets("retention", "score", twins, with_n=True) if any(twins.values()) else NOT_RUN,
                over_sets("identical_to_target", "score"),
                _samples(members) or "",
            ])
    rows.sort(key=lambda c: (str(c[1]), c[2], _sort_key(c[0])))
    notes = [
        "Each row: one configuration, the mean over the listed data sets (and seeds); n = their total samples.",
        *_interval_notes(fly),
        "tau without loose accepts: what exact match would have accepted on the same drafts (metrics.loose_summary).",
        "lossless twin retention: SPD with the row's pair, drafter, K, dtype and data sets (the bf16 noise floor; 'not run' without such a run).",
        *set_notes,
        ("No FLy run for this ablation." if not rows else ""),
        "Published ablation figures: none in published.csv (the papers' ablation tables are not sourced).",
        *variant_notes,
        *_partial_note(fly),
    ]
    return Table(f"fly_ablation_{axis}", f"FLy ablation over {header}", columns, rows, [n for n in notes if n], ids=4, meta=meta)


def _axis_value(r: Any, axis: str, col: str) -> Any:
    if axis == "MLA":
        return _mla(r["drafter"])
    v = r.get(col)
    return "" if _nan(v) else (f"{v:g}" if isinstance(v, float) else v)


def _sort_key(v: Any) -> tuple:
    try:
        return (0, float(v), "")
    except (TypeError, ValueError):
        return (1, 0.0, str(v))


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
        runs = runs[runs["method"].isin(["spd", "dropmatch"])]
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
        return tuple(_figure(members, metric, kind, with_n=metric == "score") for metric, kind in (("tau", "tau"), ("speedup", "speedup"), ("score", "score")))

    base: dict[tuple, list] = {}
    dm: dict[tuple, list] = {}
    for _, r in runs.iterrows():
        # The base configuration: every setting but the rule's own (method.*) and the step
        # records DropMatch's overhead figures need; SPD and DropMatch runs meet on it.
        bkey = (lossless_key(r), r["dataset"])
        if r["method"] == "spd":
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
            if len(_machines([*base.get(bkey, []), *members])) > 1:
                gain = MIXED_CPUS  # two speedups of two CPUs make no ratio
        tau_gain: Any = "" if NOT_RUN in (b[0], d[0]) else NA
        if isinstance(d[0], Num) and isinstance(b[0], Num) and b[0].value:
            tau_gain = Num(d[0].value / b[0].value, "ratio")
        r = members[0]
        cells = ["ours", r["pair"], r["dataset"], r["drafter"], _int(r["K"]), rule_setting(r),
                 b[0], d[0], b[1], d[1], b[2], d[2], tau_gain, gain,
                 _samples_text([_samples(base.get(bkey, [])), _samples(members)])]
        our_rows.append((r["pair"], [("" if c == NOT_RUN else c) for c in cells]))

    pub = [dict(p) for _, p in published[published["table"] == name].iterrows()]
    groups: dict[tuple, list[dict]] = {}
    for p in pub:
        groups.setdefault((p["pair"], p["dataset"], p["k"]), []).append(p)
    pub_rows: list[tuple[str, list]] = []
    not_run: list[str] = []
    for (pair, dataset, k), rows in groups.items():
        cells = dict.fromkeys(columns, "")
        drafters = sorted({str(p["drafter"]) for p in rows if p.get("drafter")})
        cells.update({"source": _pub_source(rows), "pair": pair, "data set": dataset,
                      "drafter": ", ".join(drafters) or "not stated", "K": k if k is not None else "not stated",
                      "DropMatch setting": "paper", "n": "paper"})
        for p in rows:
            if p["metric"] in ("speedup_gain", "tau_gain"):
                cells[f"{p['metric'].split('_')[0]} ÷ {base_label}"] = _pub_num(p, "ratio")
                continue
            side = f"{base_label} " if p["method"] == "spd" else "+DropMatch "
            col = side + {"tau": "tau", "speedup": "speedup", "score": "score"}.get(p["metric"], p["metric"])
            if col in cells:
                cells[col] = _pub_num(p, _kind(p["metric"]))
        pub_rows.append((pair, [cells[c] for c in columns]))
        if pair != "all" and not [c for pr, c in our_rows if pr == pair or (pair == "not stated" and c[2] == dataset)]:
            not_run.append(f"{pair} ({dataset}, K={k if k is not None else 'not stated'})")
    base_only = sorted({f"{r['pair']} {r['dataset']} {method_label(r)}" for key, ms in base.items()
                        if not any(bk == key for bk, _ in dm) for r in ms[:1]})
    # The notes speak of the runs the rows show, not of base runs left out for want of a partner.
    shown = runs.loc[sorted({r.name for (bkey, _), ms in dm.items() for r in [*ms, *base.get(bkey, [])]})]
    notes = [
        f"{base_label}: exact-match speculative decoding{' with the EAGLE-3 drafter' if eagle else ''}; +DropMatch: the same drafter, K and every other setting with method=dropmatch; DropMatch setting = its knobs (criterion naive/js, N paths, dropout p).",
        "speedup over the target alone (paired per sample); tau includes the bonus/correction token; score = the task's headline quality figure (accuracy, IFEval prompt-level strict, judge rating).",
        *_interval_notes(shown),
        "Ratios (÷): of the two points; no interval (the two runs' samples were not paired with each other).",
        ("Not run here (published rows without a run of ours): " + "; ".join(not_run) + ".") if not_run else "",
        (f"{base_label} runs without a DropMatch run of the same settings (not shown): " + "; ".join(base_only) + ".") if base_only else "",
        "'n/a': run, but the figure is undefined; empty published cells: no published figure in published.csv.",
        *_partial_note(runs),
        *[f"published {p['pair']} {p['method']} {p['metric']} ({p['dataset']}){_kind_note(p)}: {p['note']}" for p in pub],
    ]
    return Table(name, title, columns, _interleave(pub_rows, our_rows, sort_col=5), [n for n in notes if n], ids=6, meta=meta)


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
    columns = ["source", "pair", "data set", "drafter", "K", "DropMatch setting", "overhead (share of decode time)", "tau", "speedup", "n"]
    meta = {c: ("", c) for c in columns[6:]}
    groups: dict[tuple, list] = {}
    for _, r in runs.iterrows():
        groups.setdefault(config_key(r, exclude_prefixes=()), []).append(r)
    suffix = config_suffixes([g[0] for g in groups.values()], keyfn=lambda r: config_key(r, exclude_prefixes=()), by=("pair", "dataset"))
    our_rows: list[tuple[str, list]] = []
    for key, members in groups.items():
        r = members[0]
        our_rows.append((r["pair"], ["ours", r["pair"], r["dataset"], r["drafter"], _int(r["K"]), rule_setting(r) + suffix.get(key, ""),
                                     _figure(members, "dropmatch_overhead", "score"), _figure(members, "tau", "tau"),
                                     _figure(members, "speedup", "speedup"), _samples(members) or ""]))
    pub_rows: list[tuple[str, list]] = []
    pub = [dict(p) for _, p in published[published["table"] == "dropmatch_overhead"].iterrows()]
    for p in pub:
        pub_rows.append((p["pair"], [_pub_source([p]), p["pair"], p["dataset"], p.get("drafter") or "not stated",
                                     p["k"] if p.get("k") is not None else "not stated", "paper (5 paths)",
                                     _pub_num(p, "score"), "", "", "paper"]))
    notes = [
        "overhead = time in DropMatch's N-path LM-head passes and criterion ÷ decode time (needs record_steps=true; 'n/a' without step timings).",
        *_interval_notes(runs),
        "" if our_rows else "Not run here: no DropMatch run.",
        *[f"published {p['pair']} {p['metric']}{_kind_note(p)}: {p['note']}" for p in pub],
        *_partial_note(runs),
    ]
    return Table("dropmatch_overhead", "DropMatch overhead: LM-head passes and criterion", columns,
                 _interleave(pub_rows, our_rows, sort_col=5), [n for n in notes if n], ids=6, meta=meta)


# -- DropMatch's AutoJudge rows ----------------------------------------------------------------
AUTOJUDGE_TABLE_METHODS = ("spd", "dropmatch", "autojudge", "dropmatch_autojudge")  # row order within a set
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
        runs = runs[runs["method"].isin(AUTOJUDGE_TABLE_METHODS) & ~runs["drafter"].map(is_eagle)]
    groups: dict[tuple, dict[tuple, list]] = {}
    for _, r in runs.iterrows():
        groups.setdefault((lossless_key(r), r["dataset"]), {}).setdefault(config_key(r, exclude_prefixes=()), []).append(r)
    # Only the settings where a judge ran: SPD / DropMatch runs of other experiments stay in their tables.
    groups = {k: g for k, g in groups.items() if any(ms[0]["method"] in ("autojudge", "dropmatch_autojudge") for ms in g.values())}
    columns = ["source", "pair", "data set", "judge's data", "drafter", "K", "method",
               "tau", "speedup", "score", "score − target alone", "loose accept rate", "n"]
    meta = {"tau": ("", "tau"), "speedup": ("", "speedup"), "score": ("", "score"),
            "score − target alone": ("", "score_diff"), "loose accept rate": ("", "loose_accept_rate"), "n": ("", "n")}
    our_rows: list[tuple[str, list]] = []
    for (_, dataset), configs in groups.items():
        ordered = sorted(configs.values(), key=lambda ms: (AUTOJUDGE_TABLE_METHODS.index(ms[0]["method"]), method_label(ms[0])))
        for rank, members in enumerate(ordered):
            r = members[0]
            ood = "in distribution" if str(dataset).lower() in JUDGE_TRAINING_SETS else "out of distribution"
            loose = _figure(members, "loose_accept_rate", "score") if r["method"] != "spd" else ""
            our_rows.append((r["pair"], [
                "ours", r["pair"], dataset, ood, r["drafter"], _int(r["K"]), method_label(r, skip=("K",)),
                _figure(members, "tau", "tau"), _figure(members, "speedup", "speedup"),
                _figure(members, "score", "score", with_n=True), _figure(members, "score_diff", "diff"),
                loose, _samples(members) or "", f"{dataset}:{rank:02d}"]))
    # Sort within a pair by data set, then the method order (the hidden last cell), then drop it.
    rows = [cells[:-1] for cells in _interleave([], our_rows, sort_col=len(columns))]
    # The notes speak of the rows shown, not of every SPD / DropMatch run of other experiments.
    shown = pd.DataFrame([m for g in groups.values() for ms in g.values() for m in ms]) if groups else runs.iloc[:0]
    notes = [
        "SPD: exact-match speculative decoding; DropMatch: method=dropmatch; AutoJudge: method=autojudge (a mismatch the trained judge calls unimportant is accepted); "
        "DropMatch + AutoJudge: method=dropmatch_autojudge (combine=any: either accepts; all: both must). Same pair, drafter, K and generation settings within a data set.",
        f"judge's data: the judge is mined on {', '.join(s.upper() for s in JUDGE_TRAINING_SETS)} train (scripts/mine_autojudge.py), so that task's test set is in distribution and every other set out of it; judge=<first 8 hex digits of the judge file's sha256>.",
        "speedup over the target alone (paired per sample); score = the task's headline quality figure (accuracy, IFEval prompt-level strict, NIAH's recall); score − target alone: paired difference on the same samples; loose accept rate: loose accepts ÷ raw mismatches.",
        *_interval_notes(shown),
        "" if our_rows else "Not run here: no AutoJudge run (python -m loosespec_bench -m experiment=dropmatch_autojudge).",
        "'n/a': run, but the figure is undefined.",
        *_partial_note(shown),
    ]
    return Table("dropmatch_autojudge", "DropMatch and AutoJudge, in and out of the judge's distribution", columns, rows,
                 [n for n in notes if n], ids=7, meta=meta)


def build_tables(index: pd.DataFrame, published: pd.DataFrame | None = None) -> list[Table]:
    published = load_published() if published is None else published
    return [
        fly_main_table(index, published),
        noise_floor_table(index, published),
        *[fly_ablation_table(index, axis, published) for axis in ABLATIONS],
        dropmatch_main_table(index, published),
        dropmatch_eagle3_table(index, published),
        dropmatch_overhead_table(index, published),
        dropmatch_autojudge_table(index, published),
    ]


def write_tables(index: pd.DataFrame, out_dir: str | Path, published: pd.DataFrame | None = None) -> list[Path]:
    """Every table as <name>.md/.tex/.csv/_long.csv in out_dir, plus tables.md with all of them."""
    out = Path(out_dir)
    tables = build_tables(index, published)
    paths = [p for t in tables for p in t.write(out)]
    combined = out / "tables.md"
    combined.write_text("# Paper tables\n\n" + "\n".join(t.to_markdown() for t in tables), encoding="utf-8")
    return [combined, *paths]
