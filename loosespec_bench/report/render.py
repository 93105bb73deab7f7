"""The report's rendering layer: a table's cells (Num: a figure with its interval, sample count
and markers) and the Table itself as Markdown, LaTeX (booktabs) and CSV (pandas). Knows nothing of
runs, methods or papers: the paper tables (report/tables/) fill it, grouping.py shapes the rows."""

from __future__ import annotations

import functools
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

# -- the page a LaTeX table is set for -----------------------------------------------------------
# A two-column paper on US letter: a 7 in text block with a 0.33 in gutter (the IEEE / ACM
# two-column sizes; a one-column venue's 5.5-6.5 in block lies between the two widths). A table is
# a one-column `table` when every printed block fits COLUMN_WIDTH_PT, a two-column `table*` when
# each fits TEXT_WIDTH_PT, and otherwise its figure columns are split into more blocks until each
# fits (Table.latex_blocks): never resized, so every table prints at the document's \scriptsize.
# tests/report/test_latex_compile.py sets exactly this page (latex_document) in a real TeX engine
# and fails on an overfull box.
PT_PER_IN = 72.27  # TeX points
TEXT_WIDTH_IN = 7.0
COLUMN_SEP_IN = 0.33
TEXT_WIDTH_PT = TEXT_WIDTH_IN * PT_PER_IN
COLUMN_WIDTH_PT = (TEXT_WIDTH_IN - COLUMN_SEP_IN) / 2 * PT_PER_IN
TABLE_FONT_PT = 7.0  # \scriptsize of a 10 pt document
TABCOLSEP_PT = 3.0  # \tabcolsep, set by every table (the default 6 pt spends 12 pt a column on air)
# An identity column (pair, method, data set...) wider than this wraps inside a ragged-right
# p-column (never narrower than its longest word): "DropMatch (model, K=10, js, N=5, p=0.3)" would
# otherwise take a quarter of a 7 in block in every block of its table.
WRAP_IDENTITY_PT = 1.15 * PT_PER_IN
TEXT_HEIGHT_IN = 9.0
TEXT_HEIGHT_PT = TEXT_HEIGHT_IN * PT_PER_IN
# Heights a float's parts take: a \scriptsize line (its 8 pt baseline skip), a \footnotesize
# note line, the caption with its skips; a table taller than the page is set as several floats.
LINE_PT = 8.0
NOTE_LINE_PT = 9.5
CAPTION_PT = 30.0
HEADER_MIN_PT = 0.5 * PT_PER_IN  # a header is broken into lines only where it is wider than this and its cells

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
        out = core + (f" ({', '.join(extra)})" if extra else "")
        # A percentage (schema.format_value: "2.04%") is a comment to TeX: it would swallow the rest
        # of the row, its row end included.
        return re.sub(r"(?<!\\)%", r"\\%", out) if latex else out

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
        "−": "$-$", "Δ": r"$\Delta$",
    }
    return "".join(repl.get(ch, ch) for ch in text)


# -- widths from the font's metrics -------------------------------------------------------------
# Computer Modern's advance widths (em) from the cmr10 that matplotlib ships (its BaKoMa TrueType
# copy of Knuth's font), read once with fontTools. \scriptsize sets cmr7, which is drawn wider than
# cmr10 scaled to 7 pt (its digits are 4.0 pt wide, cmr10's 3.5 pt at 7 pt): cmr10's widths are
# scaled by that ratio below 10 pt. The characters a table writes in math mode ("×", "θ", "†",
# "≥") take their cmsy / cmmi widths; anything else unknown counts a full em, so a guess errs wide.
SMALL_SIZE_WIDENING = 4.0 / 3.5
MATH_EM = {"Δ": 0.833, "×": 0.778, "θ": 0.469, "†": 0.444, "≥": 0.778, "≤": 0.778, "−": 0.778, "→": 1.0, "–": 0.5, "÷": 0.5}


@functools.lru_cache(maxsize=1)
def _cmr10_em() -> dict[str, float]:
    """Each printable ASCII character's advance in em of cmr10 (matplotlib's copy), read through
    the safe-file gate."""
    import io
    import logging

    import matplotlib
    from fontTools.ttLib import TTFont

    from ..safe_files import read_bytes

    # fontTools warns (through logging) that the 1997 font's timestamps look low: not ours to hear.
    quiet = logging.getLogger("fontTools")
    level = quiet.level
    quiet.setLevel(logging.ERROR)
    try:
        font = TTFont(io.BytesIO(read_bytes(Path(matplotlib.get_data_path()) / "fonts" / "ttf" / "cmr10.ttf")))
        per_em = font["head"].unitsPerEm
    finally:
        quiet.setLevel(level)
    hmtx = font["hmtx"]
    return {chr(code): hmtx[glyph][0] / per_em for code, glyph in font.getBestCmap().items() if 32 <= code < 127}


def text_width_pt(text: str, size_pt: float = TABLE_FONT_PT) -> float:
    """The printed width of plain text (a cell as the Markdown writes it) at `size_pt` in Computer
    Modern, in TeX points: the sum of the characters' advances (kerning and ligatures are left
    out: they narrow a word by a fraction of a point)."""
    em = _cmr10_em()
    total = sum(MATH_EM.get(ch) or em.get(ch) or 1.0 for ch in text)
    return total * size_pt * (SMALL_SIZE_WIDENING if size_pt < 10 else 1.0)


def latex_document(body: str) -> str:
    """A document on the page a table is set for (TEXT_WIDTH_IN, COLUMN_SEP_IN; 10 pt, two
    columns, Computer Modern), with the packages the tables need: the compile check sets every
    committed table and caption in it."""
    return ("\\documentclass[10pt,twocolumn]{article}\n"
            f"\\usepackage[letterpaper,textwidth={TEXT_WIDTH_IN}in,columnsep={COLUMN_SEP_IN}in,textheight={TEXT_HEIGHT_IN}in]{{geometry}}\n"
            "\\usepackage{booktabs,array}\n\\begin{document}\n" + body + "\n\\end{document}\n")


def header_lines(header: str, width_pt: float) -> list[str]:
    """A header broken at spaces into lines no wider than width_pt where it can be (a word wider
    than that stands alone on its line)."""
    lines: list[str] = []
    for word in header.split():
        if lines and text_width_pt(f"{lines[-1]} {word}") <= width_pt:
            lines[-1] = f"{lines[-1]} {word}"
        else:
            lines.append(word)
    return lines or [header]


@dataclass(frozen=True)
class LatexBlock:
    """One printed tabular: its title (None: the table's only one), columns, headers, the width of
    each identity column that wraps (None: set on one line) and the block's measured width (pt)."""

    title: str | None
    columns: list[str]
    headers: list[str]
    wraps: list[float | None]
    width_pt: float
    widths: list[float]  # each column's measured width (pt), its header broken to fit (header_lines)


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

    def latex_blocks(self) -> list[LatexBlock]:
        """The printed blocks (blocks()) as the page takes them, measured with the font's metrics
        (text_width_pt): an identity column wider than WRAP_IDENTITY_PT wraps (never narrower than
        its longest word), and a block wider than TEXT_WIDTH_PT splits its figure columns into
        parts, each as many as fit beside the identity columns ('Tau per data set (1/2)')."""
        out: list[LatexBlock] = []
        pad = 2 * TABCOLSEP_PT
        for title, cols, headers in self.blocks():
            rows = self._shown_rows(cols, title is not None)
            texts = [[h, *(_cell_text(r[i]) for r in rows)] for i, h in enumerate(headers)]
            # A header wider than its column's cells breaks into lines at spaces (header_lines):
            # "predicted, with the calibration's error" over a column of "1.36× [1.21, 1.52]".
            natural = [max(max((text_width_pt(t) for t in col[1:]), default=0.0), *(text_width_pt(w) for w in col[0].split() or [""]),
                           min(HEADER_MIN_PT, text_width_pt(col[0]))) for col in texts]
            natural = [max(w, *(text_width_pt(line) for line in header_lines(h, w))) for h, w in zip(headers, natural)]
            wraps: list[float | None] = []
            for i in range(self.ids):
                longest_word = max(text_width_pt(w) for t in texts[i] for w in (t.split() or [""]))
                wraps.append(max(WRAP_IDENTITY_PT, longest_word) if natural[i] > WRAP_IDENTITY_PT else None)
            ident = sum(w if w is not None else natural[i] for i, w in enumerate(wraps)) + pad * self.ids
            parts: list[list[int]] = [[]]
            used = ident
            for i in range(self.ids, len(cols)):
                if parts[-1] and used + natural[i] + pad > TEXT_WIDTH_PT:
                    parts.append([])
                    used = ident
                parts[-1].append(i)
                used += natural[i] + pad
            for n, part in enumerate(parts):
                at = [*range(self.ids), *part]
                name = title if len(parts) == 1 else f"{title or 'Part'} ({n + 1}/{len(parts)})"
                out.append(LatexBlock(name, [cols[i] for i in at], [headers[i] for i in at], wraps,
                                      ident + sum(natural[i] + pad for i in part), [natural[i] for i in at]))
        return out

    def to_latex(self) -> str:
        """booktabs, never resized; the blocks as the page takes them (latex_blocks: one tabular
        each, titled when there are several), in a one-column `table` when every block fits
        COLUMN_WIDTH_PT, else a two-column `table*`; the notes print under the tabulars inside the
        float (a footnotesize minipage), so they reach the PDF. A table taller than a page
        (_height) is set as several floats of whole blocks, each as many as fit, the later ones
        headed "(continued)", the notes in the last (or one of their own). Needs booktabs and array."""
        label = re.sub(r"[^a-z0-9_]", "_", self.name.lower())
        blocks = self.latex_blocks()
        env = "table" if all(b.width_pt <= COLUMN_WIDTH_PT for b in blocks) else "table*"
        width = COLUMN_WIDTH_PT if env == "table" else TEXT_WIDTH_PT
        notes = self.shown_notes()
        tabulars: list[tuple[str, float]] = []
        for block in blocks:
            title, cols, headers = block.title, block.columns, block.headers
            spec = "".join(r">{\raggedright\arraybackslash}p{%.1fpt}" % w if w else "l" for w in block.wraps)
            spec += "r" * (len(cols) - self.ids)
            head = " & ".join(_latex_header(h, w, "r" if j >= self.ids else "l", wrapped=j < self.ids and bool(block.wraps[j]))
                              for j, (h, w) in enumerate(zip(headers, block.widths))) + r" \\"
            rows = self._shown_rows(cols, title is not None)
            # A row's lines: its most wrapped identity cell's (a word more a line for the ragged edge).
            row_lines = [max([1, *(math.ceil(text_width_pt(_cell_text(row[j])) / (0.85 * w)) for j, w in enumerate(block.wraps) if w)])
                         for row in rows]
            head_lines = 2 + max(len(header_lines(h, w)) for h, w in zip(headers, block.widths))
            # A block taller than a page is cut into pieces of whole rows, each under its header.
            pieces: list[list[int]] = [[]]
            for k, n_lines in enumerate(row_lines):
                if pieces[-1] and (sum(row_lines[i] for i in pieces[-1]) + n_lines + head_lines + 2) * LINE_PT + CAPTION_PT > TEXT_HEIGHT_PT:
                    pieces.append([])
                pieces[-1].append(k)
            for p, piece in enumerate(pieces):
                body = [" & ".join(_cell_text(c, latex=True) for c in rows[k]) + r" \\" for k in piece]
                name = title if p == 0 else f"{title or self.title} (continued)"
                text = (f"\\textit{{{latex_escape(name)}}}\\par\\smallskip\n" if name is not None else "") + \
                    f"\\begin{{tabular}}{{{spec}}}\n\\toprule\n{head}\n\\midrule\n" + "\n".join(body) + "\n\\bottomrule\n\\end{tabular}\n"
                tabulars.append((text, (sum(row_lines[k] for k in piece) + head_lines + 2) * LINE_PT))
        note_text = ("\\par\\smallskip\n\\begin{minipage}{\\linewidth}\\footnotesize\\raggedright\n"
                     + "".join(f"{_latex_note(n)}\\par\n" for n in notes) + "\\end{minipage}\n") if notes else ""
        # Each note's lines at 8 pt across the float's width (a word more a line for the ragged edge).
        note_height = sum(math.ceil(text_width_pt(n, 8.0) / (0.9 * width)) for n in notes) * NOTE_LINE_PT
        floats: list[list[str]] = [[]]
        used = CAPTION_PT
        for text, height in tabulars:
            if floats[-1] and used + height > TEXT_HEIGHT_PT:
                floats.append([])
                used = CAPTION_PT
            floats[-1].append(text)
            used += height
        if note_text and used + note_height > TEXT_HEIGHT_PT and floats[-1]:
            floats.append([])  # the notes alone: under the last block they would run off the page
        out = [f"% {latex_escape(self.title)} (needs \\usepackage{{booktabs,array}})\n"]
        for n, parts in enumerate(floats):
            out.append(f"\\begin{{{env}}}[t]\n\\centering\n\\scriptsize\n\\setlength{{\\tabcolsep}}{{{TABCOLSEP_PT:g}pt}}\n")
            out.append(f"\\caption{{{latex_escape(self.title)}}}\n\\label{{tab:{label}}}\n" if n == 0 else
                       f"\\textit{{{latex_escape(self.title)} (continued)}}\\par\\medskip\n")
            out.append("\\par\\medskip\n".join(parts))
            if n == len(floats) - 1:
                out.append(note_text)
            out.append(f"\\end{{{env}}}\n")
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


def _latex_header(header: str, width_pt: float, align: str, wrapped: bool) -> str:
    """A header cell: one line, or its lines (header_lines) stacked in a nested tabular aligned as
    its column; a wrapping p-column breaks its own."""
    lines = [header] if wrapped else header_lines(header, width_pt)
    if len(lines) == 1:
        return latex_escape(lines[0])
    return f"\\begin{{tabular}}[b]{{@{{}}{align}@{{}}}}" + r" \\ ".join(latex_escape(x) for x in lines) + "\\end{tabular}"


def _blank(cell: Any) -> bool:
    return cell is None or cell == "" or (isinstance(cell, float) and math.isnan(cell))


def is_missing(v: Any) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))

