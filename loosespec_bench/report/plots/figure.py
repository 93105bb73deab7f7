"""What every report figure shares: the paper style (PAPER_RC: 7-point text at print size, one
column 3.3 in or two columns 7 in wide), its labels, one colour per method, the canvas, the saved
files (PNG at 300 dpi, PDF, and the caption beside them as <name>.caption.md / .caption.tex), the
points with their intervals, the legend and the captions."""

from __future__ import annotations

import functools
import math
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence, TypeVar

import matplotlib
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from ...schema import FIGURE, KNOB_BY_COLUMN
from ..grouping import combine, config_key, config_suffixes, is_true
from ...verifiers import FLy
from ..labels import THETA, W, is_rule, method_label
from ..render import is_missing, latex_escape


SPEEDUP_LABEL = FIGURE["speedup"].label
TAU_LABEL = FIGURE["tau"].label
# The x axes of the sweep plots: a knob of schema.KNOBS (column, axis label, config key).
PARAMS = {c: (c, KNOB_BY_COLUMN[c].axis) for c in (THETA, W, "K")}
PARAM_CONFIG_KEY = {c: KNOB_BY_COLUMN[c].key for c in PARAMS}
ENTROPY_LABEL = {
    "code": "top-3 entropy H of the target (nats)",
    "paper": "normalised entropy h of the target (0 to 1)",
}
MAX_LEGEND = 8  # legend entries inside a figure; more series are named in a note
# The palette, declared once and used by every figure: Okabe and Ito's colours, as matplotlib ships
# them (matplotlib.color_sequences["okabe_ito"]). Chosen because they were drawn to stay
# unambiguous under the common colour-vision deficiencies (Okabe and Ito 2008; Wong, Nature Methods
# 2011), and matplotlib already carries them (seaborn's "colorblind" would add seaborn as a
# dependency for a list of colours; tab10, the default we drew with, puts a red beside a green).
# Named in the order of matplotlib's sequence.
OKABE_ITO = dict(zip(("black", "orange", "sky blue", "bluish green", "yellow", "blue", "vermillion", "reddish purple"),
                     (matplotlib.colors.to_hex(c) for c in matplotlib.color_sequences["okabe_ito"])))
# The seven that read as a thin line on white, those that read best first; Okabe-Ito's yellow
# (#f0e442) is left out: a 1 pt yellow line or 3 pt marker on white is hard to see at all.
PALETTE = tuple(OKABE_ITO[c] for c in ("blue", "vermillion", "bluish green", "orange", "reddish purple", "sky blue", "black"))
NEUTRAL = "#999999"  # reference lines, context drawn behind a panel's own series: no method's colour
# One fixed colour per method (the label's name part: "FLy", "SPD", "EAGLE-3 + DropMatch"...), the
# same in every figure; a method not listed takes a palette colour that no listed method of the
# same figure holds, so that no two series of one figure share a colour while the palette lasts.
METHOD_COLORS = {
    "FLy": OKABE_ITO["blue"], "FLy + MLA": OKABE_ITO["sky blue"], "SPD": OKABE_ITO["black"],
    "DropMatch": OKABE_ITO["bluish green"], "PLD": OKABE_ITO["orange"], "EAGLE-3": OKABE_ITO["reddish purple"],
    "AutoJudge": OKABE_ITO["vermillion"], "target alone": NEUTRAL,
}
MARKERS = "osD^vP*X<>"


def method_name(row: Mapping[str, Any]) -> str:
    """The name part of a method label ('FLy' of 'FLy (model, K=15, θ=0.3, W=6)'); FLy with
    Multi-Level Acceleration is its own series, 'FLy + MLA', as in FLy's main table."""
    name = method_label({k: row.get(k) for k in ("method", "drafter", "engine")}).split(" (", 1)[0]
    return f"{name} + MLA" if is_rule(row.get("method"), FLy) and row.get("drafter") == "mla" else name


def method_color(name: str, known: Iterable[str] = ()) -> str:
    """The method's fixed colour; for one not in METHOD_COLORS, the palette's colours that the
    figure's listed methods (`known`) leave free, in order of the unlisted names."""
    if name in METHOD_COLORS:
        return METHOD_COLORS[name]
    known = set(known) | {name}
    taken = {METHOD_COLORS[n] for n in known if n in METHOD_COLORS}
    free = [c for c in PALETTE if c not in taken] or list(PALETTE)
    others = sorted(n for n in known if n not in METHOD_COLORS)
    return free[others.index(name) % len(free)]


# The paper's sizes: a figure is one column or two columns wide, never wider; its text is set at
# print size (the figure is drawn at the size it is printed), so 7 points stay 7 points on paper.
ONE_COLUMN = 3.3  # inches
TWO_COLUMNS = 7.0
WIDTHS = (ONE_COLUMN, TWO_COLUMNS)
MIN_TEXT_PT = 7.0
DPI = 300
PAPER_RC = {
    "font.size": 7, "axes.titlesize": 8, "axes.labelsize": 7, "xtick.labelsize": 7, "ytick.labelsize": 7,
    "legend.fontsize": 7, "legend.title_fontsize": 7, "figure.titlesize": 8,
    "axes.linewidth": 0.6, "grid.linewidth": 0.4, "lines.linewidth": 1.0, "lines.markersize": 3.5,
    "xtick.major.width": 0.6, "ytick.major.width": 0.6, "xtick.major.size": 2.5, "ytick.major.size": 2.5,
    "errorbar.capsize": 2, "legend.frameon": False, "legend.handlelength": 1.8,
    "figure.constrained_layout.h_pad": 0.03, "figure.constrained_layout.w_pad": 0.03,
    "pdf.fonttype": 42,  # TrueType in the PDF: text a journal's checker can read
    "axes.prop_cycle": matplotlib.cycler(color=PALETTE),  # an artist given no colour still takes the palette's
}
MAX_COLUMNS = 3  # panels a row at two columns' width (about 2.2 in each); more wrap into rows
# No figure is taller than a text block (a letter page's 9 in, less room for its caption): a
# figure of many rows shrinks its rows (fit_rows) instead of running off the page.
MAX_HEIGHT = 8.5  # inches

F = TypeVar("F", bound=Callable[..., Any])


def paper_style(func: F) -> F:
    """Draw a figure function's artists under PAPER_RC (text sizes are fixed when an artist is made)."""
    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with matplotlib.rc_context(PAPER_RC):
            return func(*args, **kwargs)
    return wrapper  # type: ignore[return-value]


class PaperFigure(Figure):
    """A figure with its caption kept beside it (save writes <name>.caption.md and .caption.tex),
    never drawn inside it: the paper's \\caption is set by the document, in the document's type."""

    caption: str = ""


def caption_of(fig: Figure) -> str:
    return str(getattr(fig, "caption", "") or "")


def canvas(width: float = TWO_COLUMNS, height: float = 4.0, ncols: int = 1, nrows: int = 1) -> tuple[Figure, list]:
    """A figure one or two columns wide (WIDTHS), its axes as a list of rows (a flat list for one row)."""
    if width not in WIDTHS:
        raise ValueError(f"a figure is {ONE_COLUMN} in (one column) or {TWO_COLUMNS} in (two columns) wide, not {width}")
    if height > MAX_HEIGHT + 1e-9:
        raise ValueError(f"a figure is at most {MAX_HEIGHT} in tall (a text block with its caption), not {height:.2f}: fit_rows")
    with matplotlib.rc_context(PAPER_RC):
        fig = PaperFigure(figsize=(width, height), layout="constrained", dpi=DPI)
        FigureCanvasAgg(fig)
        axes = fig.subplots(nrows, ncols, squeeze=False)
    return fig, [list(r) for r in axes] if nrows > 1 else list(axes[0])


def fit_rows(nrows: int, row_height: float, extra_height: float) -> float:
    """The height of each of nrows rows: row_height, or less where nrows of it and extra_height
    (titles, the legend) would pass MAX_HEIGHT."""
    return min(row_height, (MAX_HEIGHT - extra_height) / max(1, nrows))


def width_for(ncols: int) -> float:
    """One column for a single panel, two for more."""
    return ONE_COLUMN if ncols <= 1 else TWO_COLUMNS


def panel_grid(n_panels: int, panel_height: float, extra_height: float,
               max_columns: int = MAX_COLUMNS) -> tuple[Figure, list]:
    """Panels up to max_columns a row, one column wide for one panel and two for more, wrapping
    into rows (never wider): the figure and its axes as one flat list. A figure whose panels carry
    long tick labels (a row per configuration) asks for fewer columns: three such panels in 7 in
    left the third too narrow for its own title and axis label."""
    n = max(1, n_panels)
    ncols = 2 if n == 4 else min(n, max_columns)  # four panels: two rows of two, not three and one
    nrows = math.ceil(n / ncols)
    fig, grid = canvas(width_for(ncols), fit_rows(nrows, panel_height, extra_height) * nrows + extra_height, ncols=ncols, nrows=nrows)
    return fig, [ax for row in grid for ax in row] if nrows > 1 else grid


def draw_note(ax: Any, text: str) -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, fontsize=MIN_TEXT_PT,
            bbox={"boxstyle": "round", "facecolor": "#f4f4f4", "edgecolor": "#999999"}, wrap=True)
    ax.set_xticks([])
    ax.set_yticks([])


def caption_files(caption: str, out_dir: str | Path, name: str) -> list[Path]:
    """<name>.caption.md (the text) and <name>.caption.tex (one \\caption{...} line, escaped)."""
    out = Path(out_dir)
    md, tex = out / f"{name}.caption.md", out / f"{name}.caption.tex"
    from ...safe_files import atomic_write_text

    atomic_write_text(md, caption + "\n", root=out)  # never through a link, never half a file
    atomic_write_text(tex, f"\\caption{{{latex_escape(caption)}}}\n", root=out)
    return [md, tex]


def save(fig: Figure, out_dir: str | Path, name: str, formats: Sequence[str] = ("png", "pdf"), dpi: int = DPI,
         captions: bool = True) -> list[Path]:
    """Write a figure at its print size (no cropping: a 7 in figure is a 7 in file; the
    constrained layout keeps every artist inside it), then its caption files (caption_files)
    when it has a caption. A PDF carries no creation date, so that regenerating a committed
    report rewrites no unchanged figure."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for fmt in formats:
        path = out / f"{name}.{fmt}"
        meta = {"CreationDate": None} if fmt == "pdf" else None
        from ...safe_files import atomic_output

        with atomic_output(path, root=out) as tmp:  # never through a link, never half a file
            fig.savefig(tmp, dpi=dpi, metadata=meta, format=fmt)
        paths.append(path)
    if captions and caption_of(fig):
        paths += caption_files(caption_of(fig), out, name)
    return paths


def frame_of(rows: pd.DataFrame | Iterable[Mapping[str, Any]]) -> pd.DataFrame:
    df = rows if isinstance(rows, pd.DataFrame) else pd.DataFrame(list(rows))
    if not df.empty and "status" in df:
        df = df[df["status"].isin(["complete", "partial"])]
    return df


def point_of(members: list, metric: str) -> tuple[float | None, tuple[float, float] | None]:
    """A figure of one configuration at one point: the mean over its runs (seeds, subsets) and
    the interval combined from theirs (grouping.combine); (None, None) without the figure."""
    have = [m for m in members if not is_missing(m.get(metric))]
    if not have:
        return None, None
    lo, hi = f"{metric}_ci_low", f"{metric}_ci_high"
    value, ci = combine([float(m[metric]) for m in have],
                        [(None if is_missing(m.get(lo)) else float(m[lo]), None if is_missing(m.get(hi)) else float(m[hi])) for m in have])
    return value, ci


def error_bars(values: list[float], cis: list[tuple[float, float] | None]) -> list[list[float]] | None:
    """matplotlib's asymmetric error bars; None when no point has an interval."""
    if not any(cis):
        return None
    return [[v - c[0] if c else 0.0 for v, c in zip(values, cis)], [c[1] - v if c else 0.0 for v, c in zip(values, cis)]]


def datasets_of(df: pd.DataFrame) -> list[str]:
    return sorted({str(d) for d in df["dataset"].dropna()}) if not df.empty else []


def add_legend(fig: Figure, entries: dict[str, Any], total: int, title: str = "", caption: str = "") -> None:
    """At most MAX_LEGEND entries, below the panels inside the figure; the caption (`title`, then
    what the error bars are...) goes beside the figure (set_caption), with the count of series
    the legend leaves out."""
    shown = list(entries.items())[:MAX_LEGEND]
    if total > len(shown):
        caption = (caption + "\n" if caption else "") + f"{total - len(shown)} more series not in the legend (index.csv lists every run)"
    set_caption(fig, title, caption)
    if not shown:
        return
    longest = max(len(lab) for lab, _ in shown)
    # Columns as many as fit: about 17 characters of 7-point text an inch' width.
    per_row = max(1, min(len(shown), int(fig.get_figwidth() * 17 // max(longest + 4, 12)), 4))
    fig.legend([h for _, h in shown], [lab for lab, _ in shown], loc="outside lower center", ncols=per_row,
               frameon=False, fontsize=MIN_TEXT_PT)


def set_caption(fig: Figure, title: str, *parts: str) -> None:
    """The figure's caption, kept beside it (save writes it as <name>.caption.md and .tex): the
    title as its first sentence, then each line of `parts` a sentence."""
    sentences = [title] + [line.strip() for part in parts for line in part.split("\n") if line.strip()]
    out = []
    for s in (x for x in sentences if x):
        s = " ".join(s.split())
        s = s[0].upper() + s[1:] if s[0].isascii() and s[0].islower() else s
        out.append(s if s.endswith(".") else s + ".")
    fig.caption = " ".join(out)  # type: ignore[attr-defined]


def interval_caption(df: pd.DataFrame) -> str:
    """What the error bars are, and which runs have none."""
    text = "error bars: 95% intervals from summary.json (tau, speed, graded quality: paired bootstrap over samples; 0/1 quality: exact)"
    if "intervals" not in df or df.empty:
        return text
    without = ~is_true(df["intervals"])
    # An unfinished run's figures are recomputed from its samples so far, without intervals.
    unfinished = int((without & (df["status"] == "partial")).sum()) if "status" in df else 0
    n_old = int(without.sum()) - unfinished
    why = [f"{n_old} of {len(df)} runs predate the interval fields"] if n_old else []
    if unfinished:
        why.append(f"{unfinished} of {len(df)} runs unfinished: figures so far, from their samples")
    if why:
        text += f"; no bar: no interval ({'; '.join(why)})"
    return text


def cpu_letters(df: pd.DataFrame) -> dict[str, str]:
    """CPU A, B, ... for the machines the runs' speeds were measured on; {} when one (or none)
    is named: speed is a property of the CPU, and a figure says so only when it spans several."""
    cpus = sorted({str(m) for m in df["machine"].dropna()}) if "machine" in df and not df.empty else []
    return {m: chr(ord("A") + i) for i, m in enumerate(cpus)} if len(cpus) > 1 else {}


def machine_of(members: list) -> str | None:
    """The one machine a point's runs were timed on; None if unknown or several."""
    ms = {str(m.get("machine")) for m in members if isinstance(m.get("machine"), str)}
    return ms.pop() if len(ms) == 1 and all(isinstance(m.get("machine"), str) for m in members) else None


def sweep_key(row: Any, param: str) -> tuple:
    """Every resolved setting of a run but the knob `param` (the data set included): runs with one
    key and several values of the knob form one sweep."""
    return (*config_key(row, exclude=(PARAM_CONFIG_KEY[param],), exclude_prefixes=()), str(row.get("subset")))


def sweep_labels(reps: list, skip: Sequence[str] = ()) -> list[str]:
    """Legend labels: the method label without the x-axis knob, plus the settings that tell
    alike-labelled configurations apart (config_suffixes; the data set is the panel, not part
    of the label), never a hash."""
    suffix = config_suffixes(reps)
    return [method_label(r, skip=skip) + suffix.get(config_key(r), "") for r in reps]


def distinguishing(labels: Mapping[Any, str], names: Mapping[Any, str]) -> dict[Any, str]:
    """For configurations sharing a method name, the label parts ('K=10', 'θ=0.2') that not all of
    them share; {} entries for a name with one configuration."""
    by_name: dict[str, list] = {}
    for key, name in names.items():
        by_name.setdefault(name, []).append(key)
    out: dict[Any, str] = {}
    for keys in by_name.values():
        if len(keys) < 2:
            continue
        parts = {k: labels[k].split(" (", 1)[1].rstrip(")").split(", ") if " (" in labels[k] else [] for k in keys}
        common = set.intersection(*(set(p) for p in parts.values()))
        # A one-knob-at-a-time sweep (θ, W and K around FLy's defaults on GSM8K): each point is
        # told apart by the knob it moves; the parts most points share (the defaults) are left
        # out of every tag but the one that has nothing else. Full tags ("K=15, θ=0.3, W=6" on
        # nine points) printed into each other.
        counts: dict[str, int] = {}
        for p in parts.values():
            for x in set(p) - common:
                counts[x] = counts.get(x, 0) + 1
        usual = {x for x, c in counts.items() if c > len(keys) / 2}
        for k in keys:
            own = [p for p in parts[k] if p not in common and p not in usual]
            out[k] = ", ".join(own) if own else ", ".join(p for p in parts[k] if p not in common)
    return out
