"""The loose rules at matched quality (issues 44, 68): the frontier of tau and speedup against
the answers each setting changes, and the matched table at stated non-inferiority margins.

    python -m loosespec_bench.report.frontier [--results DIR] [--experiment loose_rules] [--out DIR]
                                              [--margins 5,10,20] [--alpha 0.05] [--certified DIR]

Reads the index (report/index.py) of the experiment's runs. A point is one run: a rule at one
knob setting on one set. Its quality change is paired against the target alone on the same
problems: `lost` = problems the target alone got right and the rule wrong, `gained` the
reverse, with the exact interval of the accuracy difference (ExactPairedBinary, two-sided 95%)
and the loss's one-sided upper bound at alpha (`loss_upper`, in points: the smallest margin the
point is non-inferior at), beside the exact two-sided sign test p.

The matched table, per set, rule and margin delta (accuracy points, --margins): non-inferiority
(H0: loss >= delta) of each of the rule's m points by the exact paired bound at alpha / m
(Bonferroni over the rule's points: all m verdicts hold together with probability >= 1 - alpha),
so that naming the highest-tau point among the non-inferior ones is a selection the test
accounts for. It prints how many points are non-inferior and that point with its tau,
predicted speedup, lost / gained and the exact interval of the difference (every figure with its
interval); "none" where no point is. No point is called lossless, and none is chosen without
its selection accounted for. (A ladder tested strictest first, with planned looks, certifies at
full alpha instead: `python -m loosespec_bench.certify`, docs/certify.md; --certified DIR adds
the certifications found there to `certified.md`.)
Speed: `speedup` is the measured one (paired wall clock, on the run's timed samples, where it
timed any); `work_speedup` is the calibrated cost model's prediction from every sample's work
counts (summary.work_speedup_fields), the only speed figure of a point run with no timed sample
(timing.subset=0, the CPU grids). --calibration FILE recomputes it for every point from the run
folders' records with one calibration (results/_calibration/<pair>/<hash>.json), so that all
points are predicted for one machine, whichever machine ran them.
Outputs in --out: frontier.csv, frontier.md, matched.md, frontier_<set>.png / .pdf with its caption
beside it (frontier_<set>.caption.md / .tex), certified.md (with --certified).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from pathlib import Path
from typing import Any, Sequence

import pandas as pd

from ..measure.stats.exact import ExactPairedBinary
from ..schema import label_parts

DEFAULT_MARGINS = (5.0, 10.0, 20.0)  # accuracy points
DEFAULT_ALPHA = 0.05
COLUMNS = ["dataset", "rule", "setting", "tau", "tau_ci_low", "tau_ci_high", "speedup", "speedup_ci_low",
           "speedup_ci_high", "work_speedup", "work_speedup_ci_low", "work_speedup_ci_high", "lost", "gained", "net_lost", "n",
           "right", "sign_p", "score_diff", "score_diff_ci_low", "score_diff_ci_high", "loss_upper", "run_id"]


def _num(x: Any) -> float:
    try:
        v = float(x)
    except (TypeError, ValueError):
        return math.nan
    return v


def rule_name(row: pd.Series) -> str:
    """The rule a point belongs to: the method, with its drafter unless the draft model."""
    method, drafter = str(row.get("method")), row.get("drafter")
    return method if drafter in (None, "model") or (isinstance(drafter, float) and math.isnan(drafter)) else f"{method} + {drafter}"


def recomputed_work_speedup(run_dir: str | Path, calibration: Any, seed: int) -> dict[str, Any]:
    """work_speedup and its interval from a run folder's records under `calibration`
    (summary.work_speedup_fields); {} where the records carry no counts on both sides."""
    from ..store.run_folder import RunFolder, first_per_id
    from ..store.summary import work_speedup_fields

    records = first_per_id(RunFolder(run_dir, create=False).records())
    return work_speedup_fields(records, calibration, seed=seed)


def frontier(index: pd.DataFrame, calibration: Any = None) -> pd.DataFrame:
    """One row per run with the frontier's figures (COLUMNS), sorted by set, rule and tau;
    with a calibration (costmodel.Calibration), work_speedup recomputed under it."""
    rows = []
    for _, r in index.iterrows():
        if r.get("status") not in ("complete", "done"):  # partial runs are not points of the frontier
            continue
        lost, gained = _num(r.get("quality_lost")), _num(r.get("quality_gained"))
        n = _num(r.get("n_problems"))
        if math.isnan(n):
            n = _num(r.get("n_samples"))
        parts = [p for p in label_parts(r.to_dict(), skip=("K",)) if not p.startswith("K=")]
        work = {k: r.get(k) for k in ("work_speedup", "work_speedup_ci_low", "work_speedup_ci_high")}
        if calibration is not None:
            seed = _num(r.get("seed"))
            work = recomputed_work_speedup(r["run_dir"], calibration, 0 if math.isnan(seed) else int(seed)) or dict.fromkeys(work)
        right = round(_num(r.get("baseline_accuracy")) * n) if not math.isnan(_num(r.get("baseline_accuracy"))) else math.nan
        diff = (_num(r.get("score_diff")), _num(r.get("score_diff_ci_low")), _num(r.get("score_diff_ci_high")))
        loss_upper = math.nan
        if not any(math.isnan(v) for v in (lost, gained, n, right)) and lost <= right and gained <= n - right:
            # The exact paired interval of the difference from the counts (0/1 scores), and the
            # loss's one-sided upper bound at alpha = 0.05 (ExactPairedBinary, as the runs' own).
            e = ExactPairedBinary(int(lost), int(gained), int(right), int(n - right))
            diff = e.interval("difference")
            loss_upper = -e.lower("difference", DEFAULT_ALPHA)
        rows.append({
            "dataset": r.get("dataset"), "rule": rule_name(r), "setting": ", ".join(parts) or "-",
            "tau": _num(r.get("tau")), "tau_ci_low": _num(r.get("tau_ci_low")), "tau_ci_high": _num(r.get("tau_ci_high")),
            "speedup": _num(r.get("speedup")), "speedup_ci_low": _num(r.get("speedup_ci_low")),
            "speedup_ci_high": _num(r.get("speedup_ci_high")), **{k: _num(v) for k, v in work.items()}, "lost": lost, "gained": gained,
            "net_lost": lost - gained, "n": n, "right": right, "sign_p": _num(r.get("quality_sign_p")),
            "score_diff": diff[0], "score_diff_ci_low": diff[1], "score_diff_ci_high": diff[2], "loss_upper": loss_upper,
            "run_id": r.get("run_id"),
        })
    out = pd.DataFrame(rows, columns=COLUMNS)
    return out.sort_values(["dataset", "rule", "tau"], kind="stable").reset_index(drop=True)


def loss_bound(row: pd.Series, alpha: float) -> float:
    """The loss's one-sided exact upper bound at level alpha (accuracy share; nan without counts)."""
    vals = [row.get(c) for c in ("lost", "gained", "right", "n")]
    if any(v is None or (isinstance(v, float) and math.isnan(v)) for v in vals):
        return math.nan
    lost, gained, right, n = (int(v) for v in vals)
    if lost > right or gained > n - right:
        return math.nan
    return -ExactPairedBinary(lost, gained, right, n - right).lower("difference", alpha)


def non_inferior(row: pd.Series, margin: float, alpha: float) -> bool:
    """H0: loss >= margin (accuracy share) rejected by the exact paired bound at alpha."""
    bound = loss_bound(row, alpha)
    return bool(not math.isnan(bound) and bound < margin)


def matched(front: pd.DataFrame, margins: Sequence[float] = DEFAULT_MARGINS, alpha: float = DEFAULT_ALPHA) -> pd.DataFrame:
    """Per set, rule and margin (accuracy points): the rule's points non-inferior at the margin,
    each tested at alpha / m (m: the rule's points with counts; Bonferroni: the m verdicts hold
    together), and the highest-tau one among them (a selection the simultaneous test covers)."""
    out = []
    figures = ["tau", "tau_ci_low", "tau_ci_high", "work_speedup", "work_speedup_ci_low", "work_speedup_ci_high",
               "lost", "gained", "n", "score_diff", "score_diff_ci_low", "score_diff_ci_high"]
    for (dataset, rule), g in front.groupby(["dataset", "rule"], sort=True):
        g = g.dropna(subset=["tau", "lost", "gained", "n", "right"])
        m = len(g)
        for margin in margins:
            entry: dict[str, Any] = {"dataset": dataset, "rule": rule, "points": m, "margin": float(margin),
                                     "alpha_each": alpha / m if m else math.nan}
            ok = g[[non_inferior(r, margin / 100, alpha / m) for _, r in g.iterrows()]] if m else g
            entry["non_inferior"] = len(ok)
            if ok.empty:
                entry.update({"setting": "none", **dict.fromkeys(figures, math.nan)})
            else:
                pick = ok.loc[ok["tau"].idxmax()]
                entry.update({"setting": pick["setting"], **{c: pick.get(c, math.nan) for c in figures}})
            out.append(entry)
    return pd.DataFrame(out)


def _f(x: float, fmt: str = "{:.2f}") -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else fmt.format(x)


def _ci(row: pd.Series, col: str) -> str:
    lo, hi = row.get(f"{col}_ci_low"), row.get(f"{col}_ci_high")
    if not isinstance(row[col], str) and _f(row[col]) == "-":
        return "-"
    return f"{_f(row[col])} [{_f(lo)}, {_f(hi)}]"


def frontier_markdown(front: pd.DataFrame, alpha: float = DEFAULT_ALPHA) -> str:
    lines = [f"| set | rule | setting | tau [95% CI] | predicted speedup [95% CI] | measured speedup [95% CI] "
             f"| lost / gained (n) | accuracy difference, points [exact 95% CI] | loss upper bound, points (one-sided {1 - alpha:.0%}) "
             "| sign-test p |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for _, r in front.iterrows():
        bound = loss_bound(r, alpha)
        lines.append(f"| {r['dataset']} | {r['rule']} | {r['setting']} | {_ci(r, 'tau')} | {_ci(r, 'work_speedup')} | {_ci(r, 'speedup')} "
                     f"| {_f(r['lost'], '{:.0f}')} / {_f(r['gained'], '{:.0f}')} ({_f(r['n'], '{:.0f}')}) "
                     f"| {_points(r, 'score_diff')} | {_f(100 * bound, '{:.1f}')} | {_f(r['sign_p'], '{:.3g}')} |")
    return "\n".join(lines) + "\n"


def _points(row: pd.Series, col: str) -> str:
    """A share and its interval in accuracy points: +3.3 [-10.1, +16.2]."""
    v, lo, hi = (row.get(col), row.get(f"{col}_ci_low"), row.get(f"{col}_ci_high"))
    if _f(v) == "-":
        return "-"
    return f"{100 * v:+.1f} [{_f(100 * lo, '{:+.1f}')}, {_f(100 * hi, '{:+.1f}')}]"


def matched_markdown(table: pd.DataFrame, alpha: float) -> str:
    lines = [f"Non-inferiority at each margin (H0: the rule loses >= delta accuracy points against the target alone), "
             f"each of a rule's m points tested by its exact paired bound at alpha / m (alpha = {alpha:g}, one-sided; the m "
             "verdicts hold together), so the highest-tau non-inferior point is a selection the test covers. \"none\": no "
             "point of the rule is shown to lose less than delta at this n; it is no evidence of a loss.",
             "",
             "| set | rule | margin (points) | points non-inferior / m | highest-tau non-inferior point | tau [95% CI] "
             "| predicted speedup [95% CI] | lost / gained (n) | accuracy difference, points [exact 95% CI] |",
             "|---|---|---|---|---|---|---|---|---|"]
    for _, r in table.iterrows():
        lg = f"{_f(r['lost'], '{:.0f}')} / {_f(r['gained'], '{:.0f}')} ({_f(r['n'], '{:.0f}')})" if r["setting"] != "none" else "-"
        lines.append(f"| {r['dataset']} | {r['rule']} | {r['margin']:g} | {r['non_inferior']} / {r['points']} | {r['setting']} "
                     f"| {_ci(r, 'tau')} | {_ci(r, 'work_speedup')} | {lg} | {_points(r, 'score_diff')} |")
    return "\n".join(lines) + "\n"


def certified_markdown(folder: Path) -> str:
    """The certifications (certification_*.md, python -m loosespec_bench.certify) under a folder."""
    found = sorted(folder.rglob("certification_*.md")) if folder.is_dir() else []
    if not found:
        return f"No certification under {folder} yet (python -m loosespec_bench.certify; docs/certify.md).\n"
    from ..safe_files import read_text  # a certification that is a link or a FIFO is refused, not followed

    return "\n\n".join(f"<!-- {p} -->\n" + read_text(p).strip() for p in found) + "\n"


def rule_labels(front: pd.DataFrame, index: pd.DataFrame | None = None) -> dict[str, str]:
    """Each rule's name as the paper figures write it ('FLy + MLA', 'DropMatch': plots.figure's
    method_name of one of its runs); a name two rules would share keeps the rule beside it."""
    from .plots.figure import method_name

    rows = {}
    if index is not None and not index.empty:
        for _, r in index.iterrows():
            rows.setdefault(rule_name(r), r.to_dict())
    names = {rule: method_name(rows[rule]) if rule in rows else rule for rule in front["rule"].dropna().unique()}
    shared = {n for n in names.values() if list(names.values()).count(n) > 1}
    return {rule: f"{n} [{rule}]" if n in shared else n for rule, n in names.items()}


def plot_frontier(front: pd.DataFrame, out_dir: Path, labels: dict[str, str] | None = None,
                  speed_note: str = "", formats: Sequence[str] = ("png", "pdf"), margins: Sequence[float] = ()) -> list[Path]:
    """Per set, one figure two columns wide (frontier_figure: small multiples, a panel per rule),
    saved with its caption beside it. Returns the files written, each set's PNG first."""
    from .plots.figure import MARKERS, method_color, save

    labels = labels or {}
    # One colour (the palette's, plots.figure) and marker per rule for every set's figure: a rule
    # looks the same in every file, and a paper's method keeps its colour of every other figure.
    rules = sorted(front["rule"].dropna().unique())
    names = [labels.get(r, r) for r in rules]
    style = {r: (method_color(labels.get(r, r), names), MARKERS[i % len(MARKERS)]) for i, r in enumerate(rules)}
    paths: list[Path] = []
    for dataset, g in front.groupby("dataset", sort=True):
        paths += save(frontier_figure(str(dataset), g, style, labels, speed_note, margins), out_dir, f"frontier_{dataset}", formats)
    return paths


FACET_COLUMNS = 4  # rule panels a row at two columns' width (1.75 in each)
FACET_HEIGHT = 1.45  # inches a panel row, less where the rows would pass a text block (fit_rows)
LEGEND_ROOM = 0.55  # inches under the panels for the legend


def frontier_figure(dataset: str, g: pd.DataFrame, style: dict[str, tuple[str, str]], labels: dict[str, str],
                speed_note: str, margins: Sequence[float] = ()) -> Any:
    """Small multiples (seaborn relplot's col=rule): one panel per rule, its settings' tau (95%
    CI) against net answers lost per 100 problems, joined in order of tau, with every other rule's
    points in grey behind it; under the tau rows, the same panels for the speedup predicted from
    the work counts where the points have it. A dozen rules in one panel needed a dozen colours
    and a legend past MAX_LEGEND; a panel per rule names its rule in its title and needs neither.
    The caption says what the axes and intervals are, n, and (`speed_note`) whose calibration
    predicts the speedup."""

    import matplotlib
    from matplotlib.lines import Line2D

    from .plots.figure import MAX_LEGEND, NEUTRAL, PAPER_RC, TWO_COLUMNS, canvas, fit_rows, set_caption
    from ..settings.config import dataset_display_name

    metrics = [("tau", "tau (tokens per target step)")]
    if g["work_speedup"].notna().any():
        metrics.append(("work_speedup", "speedup predicted from work counts"))
    rules = sorted(g["rule"].dropna().unique())
    ncols = min(FACET_COLUMNS, max(2, len(rules)))
    rule_rows = math.ceil(len(rules) / ncols)
    nrows = rule_rows * len(metrics)
    n = g["n"].dropna()
    n_text = f"n = {int(n.min())}" if len(n) and n.min() == n.max() else (f"n = {int(n.min())}-{int(n.max())}" if len(n) else "n unknown")
    name = dataset_display_name(dataset)
    fig, grid = canvas(TWO_COLUMNS, fit_rows(nrows, FACET_HEIGHT, LEGEND_ROOM) * nrows + LEGEND_ROOM, ncols=ncols, nrows=nrows)
    grid = grid if nrows > 1 else [grid]
    x_all = 100 * g["net_lost"] / g["n"]
    # Text sizes are fixed when an artist is made: every artist under the paper's sizes.
    with matplotlib.rc_context(PAPER_RC):
        for m, (col, ylabel) in enumerate(metrics):
            panels = [grid[m * rule_rows + i // ncols][i % ncols] for i in range(len(rules))]
            for ax in (grid[m * rule_rows + i // ncols][i % ncols] for i in range(len(rules), rule_rows * ncols)):
                ax.set_visible(False)
            for ax, rule in zip(panels, rules):
                # Context: every other rule's points, small and grey, without intervals.
                others = g[(g["rule"] != rule) & g[col].notna()]
                ax.plot(100 * others["net_lost"] / others["n"], others[col], "o", color=NEUTRAL, ms=2, alpha=0.6, zorder=1)
                h = g[g["rule"] == rule].dropna(subset=[col, "net_lost", "n"]).sort_values(col)
                colour, marker = style[rule]
                if not h.empty:
                    x = 100 * h["net_lost"] / h["n"]
                    # The x interval is the paired score difference's (net lost = -difference),
                    # exact for 0/1 scores (summary.json's score_diff_ci_*); wide at n ~ 30-200, so faint.
                    xerr = [(x + 100 * h["score_diff_ci_high"]).clip(lower=0).fillna(0),
                            (-100 * h["score_diff_ci_low"] - x).clip(lower=0).fillna(0)]
                    yerr = [(h[col] - h[f"{col}_ci_low"]).clip(lower=0).fillna(0), (h[f"{col}_ci_high"] - h[col]).clip(lower=0).fillna(0)]
                    ax.errorbar(x, h[col], xerr=xerr, fmt="none", ecolor=colour, alpha=0.35, elinewidth=0.8, capsize=1.5, zorder=2)
                    ax.errorbar(x, h[col], yerr=yerr, marker=marker, color=colour, capsize=1.5, elinewidth=0.8, ms=3,
                                linestyle="-" if len(h) > 1 else "none", label=labels.get(rule, rule), zorder=3)
                ax.axvline(0, color="grey", linewidth=0.6)
                for mg in margins:  # the non-inferiority margins of matched.md, in the axis's units
                    ax.axvline(mg, color="grey", linewidth=0.6, linestyle=":")
                ax.set_title(labels.get(rule, rule), fontsize=PAPER_RC["font.size"])
                ax.grid(True, alpha=0.3)
            # One scale for every panel of a metric (and one x scale for all): panels are compared
            # by eye, and a rule's own limits would make a small change look large.
            ys = [v for c in (col, f"{col}_ci_low", f"{col}_ci_high") for v in g[c].dropna()]
            if ys:
                pad = 0.05 * ((max(ys) - min(ys)) or 1.0)
                for ax in panels:
                    ax.set_ylim(min(ys) - pad, max(ys) + pad)
            for i, ax in enumerate(panels):
                if i % ncols == 0:
                    ax.set_ylabel(ylabel if len(ylabel) < 22 else ylabel.replace(" (", "\n(").replace(" from ", "\nfrom "))
                else:
                    ax.tick_params(labelleft=False)
                if i // ncols == rule_rows - 1 or i + ncols >= len(rules):
                    ax.set_xlabel("net lost per 100 problems")
        xs = [v for v in (*x_all.dropna(), *(-100 * g["score_diff_ci_low"]).dropna(), *(-100 * g["score_diff_ci_high"]).dropna(), *margins, 0)]
        pad = 0.04 * ((max(xs) - min(xs)) or 1.0)
        for row in grid:
            for ax in row:
                ax.set_xlim(min(xs) - pad, max(xs) + pad)
        entries = {
            "the panel's rule, in its colour (95% CI)": Line2D([], [], color="black", marker="o", ms=3),
            "net lost, 95% CI (faint)": Line2D([], [], color="black", alpha=0.35, lw=0.8),
            "the other rules": Line2D([], [], color=NEUTRAL, marker="o", ms=2, ls="none"),
            "no change": Line2D([], [], color="grey", lw=0.6),
            **({"margins": Line2D([], [], color="grey", lw=0.6, ls=":")} if margins else {}),
        }
        assert len(entries) <= MAX_LEGEND
        fig.legend(list(entries.values()), list(entries), loc="outside lower center", ncols=len(entries), frameon=False)
        speed = ("; the lower rows: the speedup the calibrated cost model predicts from every problem's work counts "
                 "(forwards and rows, which depend only on the tokens), with its bootstrap interval" if len(metrics) > 1 else "")
        set_caption(fig, f"{name} ({n_text} problems): each rule's gain against the answers it changes, one panel per rule",
                    "Each panel: one rule's settings (its name above it; drawn in its colour of every figure), joined in order of the "
                    "vertical value, over the other rules' points in grey; all panels share the horizontal scale, the tau "
                    "panels one vertical scale and the speedup panels another. "
                    "Horizontal: answers lost minus answers gained against the target alone on the same problems, per "
                    "100 problems, with the paired score difference's 95% interval (faint; exact for 0/1 scores, and "
                    "conservative: it can reach 0 where the exact McNemar test on the lost / gained split rejects no change). "
                    f"Vertical: tau with its 95% paired bootstrap interval over problems{speed}. "
                    + (f"Dotted: the non-inferiority margins ({', '.join(f'{m:g}' for m in margins)} points) of the matched "
                       "table, which tests each point's exact upper bound on its loss against them. " if margins else "")
                    + speed_note)
    return fig


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m loosespec_bench.report.frontier", description=__doc__.split("\n")[0])
    ap.add_argument("--results", default=os.environ.get("LOOSESPEC_RESULTS_DIR", "results"))
    ap.add_argument("--experiment", default="loose_rules")
    ap.add_argument("--out", default="reports/loose_rules")
    ap.add_argument("--margins", default=",".join(f"{m:g}" for m in DEFAULT_MARGINS),
                    help="non-inferiority margins in accuracy points, comma-separated (default %(default)s)")
    ap.add_argument("--alpha", type=float, default=DEFAULT_ALPHA, help="one-sided level of each rule's family (default %(default)s)")
    ap.add_argument("--certified", default=None, help="a folder with certifications (certification_*.md): certified.md")
    ap.add_argument("--calibration", default=None,
                    help="a calibration file (results/_calibration/<pair>/<hash>.json): every point's predicted speedup under it")
    args = ap.parse_args(argv)
    try:
        margins = tuple(float(m) for m in args.margins.split(","))
    except ValueError:
        margins = ()
    if not margins or not all(0 < m < 100 for m in margins) or not (0 < args.alpha < 0.5):
        print(f"error: --margins={args.margins} must be accuracy points in (0, 100), comma-separated, and "
              f"--alpha={args.alpha} in (0, 0.5)", file=sys.stderr)
        return 2
    from ..errors import ConfigError

    calibration = None
    if args.calibration:
        from ..measure.costmodel import Calibration
        from ..store.declarations import read_calibration

        try:
            # Through the safe-file gate (no link, no FIFO, a bounded read) and the calibration's
            # declaration (store/declarations.py: every cost finite, the forward bodies positive,
            # rows increasing, a signature), as calibrate and the cost model read one.
            calibration = Calibration.from_dict(read_calibration(args.calibration))
        except (ConfigError, OSError, ValueError, KeyError, TypeError) as err:
            print(f"error: --calibration {args.calibration}: not a readable calibration ({err}); "
                  "write one with python -m loosespec_bench.calibrate", file=sys.stderr)
            return 2
    from .index import load_index

    index = load_index(args.results, args.experiment)
    if index.empty:
        print(f"error: no finished runs of experiment {args.experiment!r} under {args.results!r}", file=sys.stderr)
        return 2
    if calibration is not None:
        # One calibration prices every point for its machine, whichever machine ran them, but
        # only the forwards of the pair it measured.
        pair = calibration.signature.get("pair")
        others = sorted({str(p) for p in index["pair"].dropna()} - {pair}) if "pair" in index else []
        if pair and others:
            print(f"error: --calibration {args.calibration} was measured for pair {pair}, the runs are of {', '.join(others)}: "
                  "a calibration prices only its own pair's forwards; give one of their pair", file=sys.stderr)
            return 2
    from ..safe_files import atomic_output, atomic_write_text  # never through a link, never half a file

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    front = frontier(index, calibration)
    table = matched(front, margins, args.alpha)
    with atomic_output(out / "frontier.csv", root=out) as tmp:
        front.to_csv(tmp, index=False)
    atomic_write_text(out / "frontier.md", frontier_markdown(front, args.alpha), root=out)
    atomic_write_text(out / "matched.md", matched_markdown(table, args.alpha), root=out)
    if args.certified:
        atomic_write_text(out / "certified.md", certified_markdown(Path(args.certified)), root=out)
    note = ""
    if calibration is not None:
        sig = getattr(calibration, "signature", None) or {}
        note = (f"Predicted for the machine of calibration {Path(args.calibration).name} ({sig.get('cpu_signature', 'CPU not recorded')}, "
                f"{sig.get('dtype', '?')}, {sig.get('threads', '?')} threads, made {str(sig.get('created', '?'))[:10]}), "
                "whichever machine ran the points.")
    elif front["work_speedup"].notna().any():
        note = "Predicted with the calibration each run recorded (the machine that ran it)."
    for p in plot_frontier(front, out, rule_labels(front, index), note, margins=margins):
        print(p)
    print(out / "frontier.md")
    print(out / "matched.md")
    if args.certified:
        print(out / "certified.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
