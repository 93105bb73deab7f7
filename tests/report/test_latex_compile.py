"""The report's LaTeX set by a real TeX engine (issue 72 item 1): every committed .tex under
results/ (tables and figure captions) compiles on the page the tables are set for
(render.latex_document: 10 pt, two columns, a 7 in text block) with no overfull box wider than
OVERFULL_TOLERANCE_PT and no float taller than the page; and the widths the report measures to
choose each table's layout (render.text_width_pt, Computer Modern's metrics) agree with what TeX
sets, on a table known to overflow a 7 in block when printed as one tabular.

Without an engine these tests fail (they do not skip): CI installs TeX Live's LaTeX packages, and
a machine without them is told the line to install them with (INSTALL)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

pytest.importorskip("pandas")

from loosespec_bench.report.render import (  # noqa: E402
    COLUMN_SEP_IN,
    COLUMN_WIDTH_PT,
    PT_PER_IN,
    TABCOLSEP_PT,
    TEXT_WIDTH_IN,
    TEXT_WIDTH_PT,
    Num,
    Table,
    latex_document,
    text_width_pt,
)

REPO = Path(__file__).resolve().parents[2]
INSTALL = "apt-get install -y texlive-latex-base texlive-latex-recommended"
# An overfull box up to this wide is a rounding of glue, invisible at print size; anything wider
# runs into the margin or the next column.
OVERFULL_TOLERANCE_PT = 1.0
MARK = "==> "  # the log line that names the file set next


def _engine() -> str:
    path = shutil.which("pdflatex")
    if path is None:
        pytest.fail(f"no TeX engine: pdflatex is not installed, and the report's LaTeX must compile with a real one; "
                    f"install TeX Live's LaTeX packages with `{INSTALL}` (Debian; .ci/run does so)", pytrace=False)
    return path


def _committed_tex() -> list[Path]:
    return sorted(p for p in (REPO / "results").rglob("*.tex") if p.is_file() and not p.is_symlink())


def _as_body(path: Path) -> str:
    """A committed file as the document sets it: a table as it is (its own float), a figure's
    caption inside a one-column figure float."""
    text = path.read_text(encoding="utf-8")
    if path.name.endswith(".caption.tex"):
        text = "\\begin{figure}[t]\\centering\\rule{0.9\\linewidth}{1in}\n" + text + "\\end{figure}\n"
    return text


def _compile(tmp_path: Path, parts: dict[str, str]) -> dict[str, list[str]]:
    """Sets each part (name: LaTeX) on its own pages of one document; {name: problems}: TeX's
    errors, overfull boxes wider than the tolerance, floats too large for the page, characters
    missing from the font."""
    body = "\\tracinglostchars=2\n" + "".join(
        f"\\typeout{{{MARK}{name}}}\n{text}\n\\clearpage\n" for name, text in parts.items())
    (tmp_path / "doc.tex").write_text(latex_document(body), encoding="utf-8")
    env = {**os.environ, "max_print_line": "100000"}  # one log line per message
    # nonstopmode without -halt-on-error: an error in one file is recorded and the rest still set.
    done = subprocess.run([_engine(), "-interaction=nonstopmode", "doc.tex"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300, env=env)
    log = (tmp_path / "doc.log").read_text(encoding="utf-8", errors="replace") if (tmp_path / "doc.log").exists() else done.stdout
    problems: dict[str, list[str]] = {name: [] for name in parts}
    current = "(preamble)"
    for line in log.splitlines():
        if line.startswith(MARK):
            current = line[len(MARK):].strip()
            continue
        over = re.match(r"Overfull \\[hv]box \(([\d.]+)pt too (wide|high)\)(.*)", line)
        if (over and float(over.group(1)) > OVERFULL_TOLERANCE_PT) or "Float too large" in line or \
                line.startswith("!") or "Missing character" in line:
            problems.setdefault(current, []).append(line.strip())
    if done.returncode != 0:
        problems.setdefault(current, []).append(f"pdflatex exited {done.returncode}: {done.stdout[-1500:]}")
    return problems


def test_every_committed_tex_compiles_and_fits_its_page(tmp_path):
    files = _committed_tex()
    assert files, "no .tex under results/"
    problems = _compile(tmp_path, {str(p.relative_to(REPO)): _as_body(p) for p in files})
    bad = {name: lines for name, lines in problems.items() if lines}
    assert not bad, "\n".join(f"{name}:\n  " + "\n  ".join(lines[:5]) for name, lines in bad.items())


def _wide_table() -> Table:
    """Three identity columns and nine figure columns with intervals (12 columns: one Markdown block),
    about 11 in as one tabular."""
    columns = ["source", "pair", "method", *(f"set {i} speedup" for i in range(9))]
    row = ["ours", "qwen2.5-coder-0.5b-1.5b", "FLy (mla, K=15, θ=0.3, W=6)",
           *(Num(1.0 + i / 10, "speedup", ci=(0.9 + i / 10, 1.2 + i / 10)) for i in range(9))]
    return Table("wide", "A table known to overflow", columns, [row, list(row)])


def test_a_table_too_wide_for_the_page_splits_into_blocks_that_fit():
    table = _wide_table()
    # As one tabular it is wider than the text block: the width the layout is chosen by says so.
    one = sum(max(text_width_pt(h), *(text_width_pt(c.text() if isinstance(c, Num) else c) for c in col)) + 2 * TABCOLSEP_PT
              for h, col in zip(table.columns, zip(*table.rows)))
    assert one > 1.4 * TEXT_WIDTH_PT
    blocks = table.latex_blocks()
    assert len(blocks) >= 2 and all(b.width_pt <= TEXT_WIDTH_PT for b in blocks)
    assert sorted(c for b in blocks for c in b.columns[3:]) == sorted(table.columns[3:])  # every column printed once
    assert [b.title for b in blocks][:2] == ["Part (1/%d)" % len(blocks), "Part (2/%d)" % len(blocks)]
    tex = table.to_latex()
    assert "\\begin{table*}" in tex and "resizebox" not in tex  # wider than a column: the two-column float


def test_the_compile_check_catches_the_overflow_and_passes_the_split_table(tmp_path):
    table = _wide_table()
    cols = len(table.columns)
    naive = ("\\begin{table*}\\scriptsize\\setlength{\\tabcolsep}{3pt}\\begin{tabular}{" + "l" * 3 + "r" * (cols - 3) + "}\n"
             + " & ".join(table.columns) + " \\\\\n"
             + "\n".join(" & ".join(c.text(latex=True) if isinstance(c, Num) else c.replace("θ", "$\\theta$") for c in row) + " \\\\"
                         for row in table.rows)
             + "\n\\end{tabular}\\end{table*}\n")
    problems = _compile(tmp_path, {"one tabular": naive, "split": table.to_latex()})
    assert any("Overfull \\hbox" in p for p in problems["one tabular"]), problems
    assert problems["split"] == []


def test_measured_widths_agree_with_tex(tmp_path):
    """The font-metric widths the layout uses against TeX's own \\wd of the same text at
    \\scriptsize: within a few per cent (kerning is left out), never narrower by more than 2%."""
    interval = Num(1.11, "speedup", ci=(1.01, 1.22))
    marked = Num(0.433, "score", ci=(0.255, 0.626), underpowered=True)
    samples = [(interval.text(), interval.text(latex=True)), (marked.text(), marked.text(latex=True)),
               *((s, s.replace("θ", "$\\theta$")) for s in ("qwen2.5-coder-0.5b-1.5b", "FLy (mla, K=15, θ=0.3, W=6)",
                                                             "DropMatch (model, K=10, js, N=5, p=0.3)", "mixed CPUs", "published [1, 2]"))]
    body = "\n".join(f"\\setbox0=\\hbox{{\\scriptsize {tex}}}\\typeout{{WIDTH {i} \\the\\wd0}}" for i, (_, tex) in enumerate(samples))
    (tmp_path / "doc.tex").write_text(latex_document(body + "\nx"), encoding="utf-8")
    subprocess.run([_engine(), "-interaction=nonstopmode", "-halt-on-error", "doc.tex"], cwd=tmp_path,
                   capture_output=True, text=True, timeout=120)
    measured = {int(i): float(w) for i, w in re.findall(r"WIDTH (\d+) ([\d.]+)pt", (tmp_path / "doc.log").read_text())}
    assert len(measured) == len(samples)
    for i, (plain, _) in enumerate(samples):
        ours, tex = text_width_pt(plain), measured[i]
        assert 0.98 * tex <= ours <= 1.08 * tex, (plain, ours, tex)


def test_the_page_is_declared_once():
    # The compile check's document is the page the layout measures against.
    doc = latex_document("")
    assert f"textwidth={TEXT_WIDTH_IN}in" in doc and f"columnsep={COLUMN_SEP_IN}in" in doc and "twocolumn" in doc
    assert COLUMN_WIDTH_PT == pytest.approx((TEXT_WIDTH_IN - COLUMN_SEP_IN) / 2 * PT_PER_IN)
    assert TEXT_WIDTH_PT == pytest.approx(TEXT_WIDTH_IN * PT_PER_IN)
