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
MAX_COLUMNS = 12  # a wider table prints in blocks (one per metric), each at most this wide
UNDERPOWERED_MARK = "†"  # on a quality cell of an underpowered run; one note under the table says what it means

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
        if self.underpowered:
            # The mark, not a phrase: the table's note gives n and the power threshold once.
            core += r"$^\dagger$" if latex else UNDERPOWERED_MARK
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
    its (scope, figure) for the tidy CSV and the printed layout (scope: a data set, "ID mean", ...).

    Printed (Markdown, LaTeX): a table of at most MAX_COLUMNS columns as one block; a wider one in
    blocks of the identity columns and one figure each (`block_of` names a column's block, by
    default its figure; a column whose figure is "n" joins the block before it), the block's
    columns headed by their scope (`scope_labels` names a scope: 'gsm8k' -> 'GSM8K'). The CSVs
    keep every column."""

    name: str
    title: str
    columns: list[str]
    rows: list[list[Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    ids: int = 3
    meta: dict[str, tuple[str, str]] = field(default_factory=dict)
    block_of: dict[str, str] = field(default_factory=dict)
    scope_labels: dict[str, str] = field(default_factory=dict)
    block_titles: dict[str, str] = field(default_factory=dict)  # a block's printed title (default: its name)
    n_ours: int | None = None  # rows of ours (the others: published figures); None: every row is ours

    def has_ours(self) -> bool:
        """Whether the table holds a row of ours: one that holds only published figures is not a result."""
        return bool(self.rows) and (self.n_ours is None or self.n_ours > 0)

    def _scope_metric(self, col: str) -> tuple[str, str]:
        return self.meta.get(col, ("", col))

    def blocks(self) -> list[tuple[str | None, list[str], list[str]]]:
        """(block title, columns, headers) per printed block: one untitled block with the column
        names when the table fits MAX_COLUMNS; else the identity columns and one block's figure
        columns each, headed by their scope, split evenly where a block alone is too wide."""
        if len(self.columns) <= MAX_COLUMNS:
            return [(None, list(self.columns), list(self.columns))]
        ident = self.columns[: self.ids]
        groups: dict[str, list[str]] = {}
        last = None
        for col in self.columns[self.ids:]:
            scope, metric = self._scope_metric(col)
            block = self.block_of.get(col) or (last if metric == "n" and last else metric)
            groups.setdefault(block, []).append(col)
            last = block
        width = max(1, MAX_COLUMNS - len(ident))
        out: list[tuple[str | None, list[str], list[str]]] = []
        for block, cols in groups.items():
            parts = -(-len(cols) // width)
            size = -(-len(cols) // parts)
            for i in range(0, len(cols), size):
                chunk = cols[i:i + size]
                name = self.block_titles.get(block, block)
                title = name if parts == 1 else f"{name} ({i // size + 1}/{parts})"
                out.append((title, [*ident, *chunk], [*ident, *(self._header(c, block) for c in chunk)]))
        return out

    def shown_notes(self) -> list[str]:
        """The notes as printed: the underpowered mark's note only where a cell carries the mark."""
        marked = any(isinstance(c, Num) and c.underpowered for row in self.rows for c in row)
        return [n for n in self.notes if marked or not n.startswith(UNDERPOWERED_MARK)]

    def _header(self, col: str, block: str) -> str:
        """A block's column header: its scope where the block is its figure, else its name."""
        scope, metric = self._scope_metric(col)
        return self.scope_labels.get(scope, scope) if scope and metric == block else col

    def _shown_rows(self, cols: list[str], blocked: bool) -> list[list[Any]]:
        """The rows' cells in these columns; in a block of a wider table, only the rows with a
        figure there (a published row with no per-set figure is not printed in the per-set blocks)."""
        at = [self.columns.index(c) for c in cols]
        figs = at[self.ids:]
        return [[row[i] for i in at] for row in self.rows if not blocked or any(not _blank(row[i]) for i in figs)]

    def to_markdown(self) -> str:
        def esc(s: str) -> str:
            return s.replace("|", r"\|")

        lines = [f"### {self.title}", ""]
        for title, cols, headers in self.blocks():
            if title is not None:
                lines += [f"**{title}**", ""]
            lines.append("| " + " | ".join(esc(h) for h in headers) + " |")
            lines.append("|" + "|".join("---" for _ in headers) + "|")
            lines += ["| " + " | ".join(esc(_cell_text(c)) for c in row) + " |" for row in self._shown_rows(cols, title is not None)]
            lines.append("")
        lines += [f"- {n}" for n in self.shown_notes()]
        return "\n".join(lines).rstrip("\n") + "\n"

    def to_latex(self) -> str:
        """booktabs; the same blocks as the Markdown (one tabular each, titled when there are
        several), no resizing; the notes print under the tabulars inside the table environment
        (a footnotesize minipage), so they reach the PDF. Needs booktabs only."""
        label = re.sub(r"[^a-z0-9_]", "_", self.name.lower())
        out = [f"% {latex_escape(self.title)} (needs \\usepackage{{booktabs}})\n",
               "\\begin{table}[t]\n\\centering\n\\scriptsize\n\\setlength{\\tabcolsep}{3pt}\n",
               f"\\caption{{{latex_escape(self.title)}}}\n\\label{{tab:{label}}}\n"]
        for i, (title, cols, headers) in enumerate(self.blocks()):
            spec = "l" * self.ids + "r" * (len(cols) - self.ids)
            head = " & ".join(latex_escape(h) for h in headers) + r" \\"
            body = [" & ".join(_cell_text(c, latex=True) for c in row) + r" \\" for row in self._shown_rows(cols, title is not None)]
            if i:
                out.append("\\par\\medskip\n")
            if title is not None:
                out.append(f"\\textit{{{latex_escape(title)}}}\\par\\smallskip\n")
            out.append(f"\\begin{{tabular}}{{{spec}}}\n\\toprule\n{head}\n\\midrule\n" + "\n".join(body) + "\n\\bottomrule\n\\end{tabular}\n")
        if self.shown_notes():
            out.append("\\par\\smallskip\n\\begin{minipage}{\\linewidth}\\footnotesize\\raggedright\n"
                       + "".join(f"{_latex_note(n)}\\par\n" for n in self.shown_notes()) + "\\end{minipage}\n")
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

    def files(self, out_dir: str | Path) -> list[Path]:
        out = Path(out_dir)
        return [out / f"{self.name}.md", out / f"{self.name}.tex", out / f"{self.name}.csv", out / f"{self.name}_long.csv"]

    def write(self, out_dir: str | Path) -> list[Path]:
        """The four files; a table without a row of ours is not written, and its files from an
        earlier run are removed (an empty table, or published figures alone, is no result).
        Returns the paths written."""
        paths = self.files(out_dir)
        if not self.has_ours():
            for p in paths:
                p.unlink(missing_ok=True)
            return []
        Path(out_dir).mkdir(parents=True, exist_ok=True)
        from ..safe_files import atomic_output, atomic_write_text  # never through a link, never half a file

        atomic_write_text(paths[0], self.to_markdown(), root=out_dir)
        atomic_write_text(paths[1], self.to_latex(), root=out_dir)
        for path, frame in ((paths[2], self.to_frame()), (paths[3], self.to_long())):
            with atomic_output(path, root=out_dir) as tmp:
                frame.to_csv(tmp, index=False)
        return paths


def _latex_note(note: str) -> str:
    """A note as LaTeX text: escaped, the underpowered mark as a dagger."""
    return latex_escape(note).replace(UNDERPOWERED_MARK, r"$^\dagger$")


def _blank(cell: Any) -> bool:
    return cell is None or cell == "" or (isinstance(cell, float) and math.isnan(cell))


def is_missing(v: Any) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))

