"""The report's rendering layer: a table's cells (Num: a figure with its interval, sample count
and markers) and the Table itself as Markdown, LaTeX (booktabs) and CSV (pandas). Knows nothing of
runs, methods or papers: the paper tables (report/tables/) fill it, grouping.py shapes the rows."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from ..schema import format_interval, format_value

NOT_RUN = "not run"
NA = "n/a"  # run, but the figure is undefined (e.g. retention with target-alone accuracy 0)
NO_INTERVAL = "no interval"
MIXED_CPUS = "mixed CPUs"  # a mean of speedups measured on different CPUs: not taken

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
    return latex_escape(str(cell)) if latex else str(cell)


def latex_escape(text: str) -> str:
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
               f"\\caption{{{latex_escape(self.title)}}}\n\\label{{tab:{label}}}\n"]
        for chunk in chunks:
            spec = "l" + "r" * len(chunk)
            head = " & ".join(["", *(latex_escape(m) for m in chunk)]) + r" \\"
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
                    body.append(" & ".join([r"\quad " + latex_escape(scope or "all")] + [_cell_text(figs.get(m), latex=True) for m in chunk]) + r" \\")
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


def is_missing(v: Any) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))

