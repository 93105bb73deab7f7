"""The loose rules at matched quality (issue 44): the frontier of tau and speedup against the
answers each setting changes, and the "matched" table.

    python -m loosespec_bench.report.frontier [--results DIR] [--experiment loose_rules] [--out DIR]
                                              [--budget 0.02] [--alpha 0.05]

Reads the index (report/index.py) of the experiment's runs. A point is one run: a rule at one
knob setting on one set. Its quality change is paired against the target alone on the same
problems: `lost` = problems the target alone got right and the rule wrong, `gained` the
reverse, `p` = the exact two-sided sign test on (lost, gained) (stats.sign_test_p, the exact
McNemar test), beside the paired score difference with its interval.

The matched table, per set and rule (a rule = method, with its drafter when not the draft model):
  best tau, no detectable loss  the largest tau among the rule's points whose loss is not
      distinguishable from zero at the run's n: NOT (lost > gained and p < alpha). With n ~ 30
      this is a weak filter (a loss of a few answers is not detectable): the table prints n
      and lost/gained beside every entry so that the reader sees how weak;
  tau at the loss budget  the largest tau among the points whose net loss (lost - gained) / n is
      at most --budget (a point estimate: choosing the best of several points at a budget
      favours rules with more points; the frontier figure shows all of them).
Speed: `speedup` is the measured one (paired wall clock, on the run's timed samples, where it
timed any); `work_speedup` is the calibrated cost model's prediction from every sample's work
counts (summary.work_speedup_fields), the only speed figure of a point run with no timed sample
(timing.subset=0, the CPU grids). --calibration FILE recomputes it for every point from the run
folders' records with one calibration (results/_calibration/<pair>/<hash>.json), so that all
points are predicted for one machine, whichever machine ran them.
Outputs in --out: frontier.csv, frontier.md, matched.md, frontier_<set>.png / .pdf with its caption
beside it (frontier_<set>.caption.md / .tex).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from pathlib import Path
from typing import Any, Sequence

import pandas as pd

from ..schema import label_parts

# Colours for rules outside plots.figure.METHOD_COLORS, told apart from those and each other.
OTHER_RULE_COLORS = ("tab:purple", "tab:red", "tab:pink", "tab:olive", "tab:cyan", "black", "#8c564b", "#e6ab02",
                     "#1b9e77", "#7570b3", "#66a61e", "#666666")
DEFAULT_BUDGET = 0.02  # net answers lost per problem
DEFAULT_ALPHA = 0.05
COLUMNS = ["dataset", "rule", "setting", "tau", "tau_ci_low", "tau_ci_high", "speedup", "speedup_ci_low",
           "speedup_ci_high", "work_speedup", "work_speedup_ci_low", "work_speedup_ci_high", "lost", "gained", "net_lost", "n", "sign_p", "score_diff", "score_diff_ci_low",
           "score_diff_ci_high", "run_id"]


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
        rows.append({
            "dataset": r.get("dataset"), "rule": rule_name(r), "setting": ", ".join(parts) or "-",
            "tau": _num(r.get("tau")), "tau_ci_low": _num(r.get("tau_ci_low")), "tau_ci_high": _num(r.get("tau_ci_high")),
            "speedup": _num(r.get("speedup")), "speedup_ci_low": _num(r.get("speedup_ci_low")),
            "speedup_ci_high": _num(r.get("speedup_ci_high")), **{k: _num(v) for k, v in work.items()}, "lost": lost, "gained": gained,
            "net_lost": lost - gained, "n": n, "sign_p": _num(r.get("quality_sign_p")),
            "score_diff": _num(r.get("score_diff")), "score_diff_ci_low": _num(r.get("score_diff_ci_low")),
            "score_diff_ci_high": _num(r.get("score_diff_ci_high")), "run_id": r.get("run_id"),
        })
    out = pd.DataFrame(rows, columns=COLUMNS)
    return out.sort_values(["dataset", "rule", "tau"], kind="stable").reset_index(drop=True)


def detectable_loss(row: pd.Series, alpha: float = DEFAULT_ALPHA) -> bool:
    """A loss the exact sign test tells from zero at level alpha (two-sided)."""
    return bool(row["lost"] > row["gained"] and row["sign_p"] < alpha)


def matched(front: pd.DataFrame, budget: float = DEFAULT_BUDGET, alpha: float = DEFAULT_ALPHA) -> pd.DataFrame:
    """Per set and rule: the best tau with no detectable loss, and the best tau within the budget."""
    out = []
    for (dataset, rule), g in front.groupby(["dataset", "rule"], sort=True):
        g = g.dropna(subset=["tau", "lost", "gained", "n"])
        ok = g[[not detectable_loss(r, alpha) for _, r in g.iterrows()]]
        within = g[(g["net_lost"] / g["n"]) <= budget + 1e-12]
        entry: dict[str, Any] = {"dataset": dataset, "rule": rule, "points": len(g)}
        for prefix, sel in (("undetected", ok), ("budget", within)):
            # The chosen point's figures with their intervals (every figure carries one).
            figures = ["tau", "tau_ci_low", "tau_ci_high", "work_speedup", "work_speedup_ci_low", "work_speedup_ci_high"]
            if sel.empty:
                entry.update({f"{prefix}_setting": "none", f"{prefix}_lost": math.nan, f"{prefix}_gained": math.nan,
                              f"{prefix}_n": math.nan, f"{prefix}_p": math.nan, **{f"{prefix}_{c}": math.nan for c in figures}})
                continue
            best = sel.loc[sel["tau"].idxmax()]
            entry.update({f"{prefix}_setting": best["setting"], f"{prefix}_lost": best["lost"],
                          f"{prefix}_gained": best["gained"], f"{prefix}_n": best["n"], f"{prefix}_p": best["sign_p"],
                          **{f"{prefix}_{c}": best.get(c, math.nan) for c in figures}})
        out.append(entry)
    return pd.DataFrame(out)


def _f(x: float, fmt: str = "{:.2f}") -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else fmt.format(x)


def _ci(row: pd.Series, col: str) -> str:
    lo, hi = row.get(f"{col}_ci_low"), row.get(f"{col}_ci_high")
    if not isinstance(row[col], str) and _f(row[col]) == "-":
        return "-"
    return f"{_f(row[col])} [{_f(lo)}, {_f(hi)}]"


def frontier_markdown(front: pd.DataFrame) -> str:
    lines = ["| set | rule | setting | tau [95% CI] | predicted speedup [95% CI] | measured speedup [95% CI] "
             "| lost / gained (n) | sign-test p | score diff [95% CI] |",
             "|---|---|---|---|---|---|---|---|---|"]
    for _, r in front.iterrows():
        lines.append(f"| {r['dataset']} | {r['rule']} | {r['setting']} | {_ci(r, 'tau')} | {_ci(r, 'work_speedup')} | {_ci(r, 'speedup')} "
                     f"| {_f(r['lost'], '{:.0f}')} / {_f(r['gained'], '{:.0f}')} ({_f(r['n'], '{:.0f}')}) "
                     f"| {_f(r['sign_p'], '{:.3g}')} | {_ci(r, 'score_diff')} |")
    return "\n".join(lines) + "\n"


def matched_markdown(table: pd.DataFrame, budget: float, alpha: float) -> str:
    lines = [f"| set | rule | points | best tau, no detectable loss (sign test, alpha = {alpha:g}) [95% CI] | predicted speedup [95% CI] | setting "
             f"| lost / gained (n), p | tau at net loss <= {budget:.0%} [95% CI] | predicted speedup [95% CI] | setting | lost / gained (n) |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for _, r in table.iterrows():
        lines.append(
            f"| {r['dataset']} | {r['rule']} | {r['points']} | {_ci(r, 'undetected_tau')} | {_ci(r, 'undetected_work_speedup')} "
            f"| {r['undetected_setting']} "
            f"| {_f(r['undetected_lost'], '{:.0f}')} / {_f(r['undetected_gained'], '{:.0f}')} ({_f(r['undetected_n'], '{:.0f}')}), "
            f"{_f(r['undetected_p'], '{:.3g}')} | {_ci(r, 'budget_tau')} | {_ci(r, 'budget_work_speedup')} | {r['budget_setting']} "
            f"| {_f(r['budget_lost'], '{:.0f}')} / {_f(r['budget_gained'], '{:.0f}')} ({_f(r['budget_n'], '{:.0f}')}) |")
    return "\n".join(lines) + "\n"


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
                  speed_note: str = "", formats: Sequence[str] = ("png", "pdf")) -> list[Path]:
    """Per set, one figure two columns wide (_set_figure), saved with its caption beside it.
    Returns the files written, each set's PNG first."""
    from .plots.figure import MARKERS, METHOD_COLORS, save

    labels = labels or {}
    # One colour and marker per rule for every set's figure: a rule looks the same in every file.
    # The papers' methods keep their colour of every figure; the other rules (a dozen on the
    # loose-rule grid) take distinct colours from a list that leaves those out.
    rules = sorted(front["rule"].dropna().unique())
    used = {METHOD_COLORS[labels.get(r, r)] for r in rules if labels.get(r, r) in METHOD_COLORS}
    spare = iter([c for c in OTHER_RULE_COLORS if c not in used])
    colours = {r: METHOD_COLORS.get(labels.get(r, r)) or next(spare, "black") for r in rules}
    style = {r: (colours[r], MARKERS[i % len(MARKERS)]) for i, r in enumerate(rules)}
    paths: list[Path] = []
    for dataset, g in front.groupby("dataset", sort=True):
        paths += save(_set_figure(str(dataset), g, style, labels, speed_note), out_dir, f"frontier_{dataset}", formats)
    return paths


def _set_figure(dataset: str, g: pd.DataFrame, style: dict[str, tuple[str, str]], labels: dict[str, str],
                speed_note: str) -> Any:
    """tau (95% CI) against net answers lost per 100 problems, and beside it the speedup
    predicted from the work counts when the points have it; one line per rule through its
    settings in order of the y value, single-point rules as markers. The caption says what the
    axes and intervals are, n, and (`speed_note`) whose calibration predicts the speedup."""
    import matplotlib

    from .plots.figure import PAPER_RC, TWO_COLUMNS, canvas, set_caption
    from ..settings.config import dataset_display_name

    panels = [("tau", "tau (tokens per target step)")]
    if g["work_speedup"].notna().any():
        panels.append(("work_speedup", "speedup predicted from work counts"))
    n = g["n"].dropna()
    n_text = f"n = {int(n.min())}" if len(n) and n.min() == n.max() else (f"n = {int(n.min())}-{int(n.max())}" if len(n) else "n unknown")
    name = dataset_display_name(dataset)
    fig, axes = canvas(TWO_COLUMNS, 2.9, ncols=len(panels))
    entries: dict[str, Any] = {}
    # Text sizes are fixed when an artist is made: every artist under the paper's sizes.
    with matplotlib.rc_context(PAPER_RC):
        for ax, (col, ylabel) in zip(axes, panels):
            for rule, h in g.groupby("rule", sort=True):
                h = h.dropna(subset=[col, "net_lost", "n"]).sort_values(col)
                if h.empty:
                    continue
                x = 100 * h["net_lost"] / h["n"]
                # The x interval is the paired score difference's (net lost = -difference), exact
                # for 0/1 scores (summary.json's score_diff_ci_*).
                xerr = [(x + 100 * h["score_diff_ci_high"]).clip(lower=0).fillna(0), (-100 * h["score_diff_ci_low"] - x).clip(lower=0).fillna(0)]
                yerr = [(h[col] - h[f"{col}_ci_low"]).clip(lower=0).fillna(0), (h[f"{col}_ci_high"] - h[col]).clip(lower=0).fillna(0)]
                colour, marker = style[rule]
                # The x intervals are wide at n ~ 30-100 and overlap: drawn faint, the points stay legible.
                ax.errorbar(x, h[col], xerr=xerr, fmt="none", ecolor=colour, alpha=0.35, elinewidth=0.8, capsize=2)
                label = labels.get(rule, rule)
                entries.setdefault(label, ax.errorbar(x, h[col], yerr=yerr, marker=marker, color=colour, capsize=2,
                                                      elinewidth=0.8, linestyle="-" if len(h) > 1 else "none", label=label))
            ax.axvline(0, color="grey", linewidth=0.6)
            ax.set_xlabel("net answers lost per 100 problems")
            ax.set_ylabel(ylabel)
            ax.set_title(f"{name}: {ylabel.split(' (')[0]}")
            ax.grid(True, alpha=0.3)
        speed = ("; the predicted speedup is the calibrated cost model's from every problem's work counts (forwards "
                 "and rows, which depend only on the tokens), with its bootstrap interval" if len(panels) > 1 else "")
        # Every rule in the legend (not add_legend's first eight): a frontier point without its
        # rule's name says nothing.
        fig.legend(list(entries.values()), list(entries), loc="outside lower center", ncols=min(len(entries), 6), frameon=False)
        set_caption(fig, f"{name} ({n_text} problems): each rule's gain against the answers it changes",
                    "Horizontal: answers lost minus answers gained against the target alone on the same problems, per "
                    "100 problems, with the paired score difference's 95% interval (faint; exact for 0/1 scores, and "
                    "conservative: it can reach 0 where the exact McNemar test on the lost / gained split rejects no change). "
                    f"Vertical: tau with its 95% paired bootstrap interval over problems{speed}. "
                    "A line joins one rule's settings in order of the vertical value. " + speed_note)
    return fig


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m loosespec_bench.report.frontier", description=__doc__.split("\n")[0])
    ap.add_argument("--results", default=os.environ.get("LOOSESPEC_RESULTS_DIR", "results"))
    ap.add_argument("--experiment", default="loose_rules")
    ap.add_argument("--out", default="reports/loose_rules")
    ap.add_argument("--budget", type=float, default=DEFAULT_BUDGET, help="net answers lost per problem (default %(default)s)")
    ap.add_argument("--alpha", type=float, default=DEFAULT_ALPHA, help="sign-test level (default %(default)s)")
    ap.add_argument("--calibration", default=None,
                    help="a calibration file (results/_calibration/<pair>/<hash>.json): every point's predicted speedup under it")
    args = ap.parse_args(argv)
    if not (0 <= args.budget < 1) or not (0 < args.alpha < 1):
        print(f"error: --budget={args.budget} must be in [0, 1) and --alpha={args.alpha} in (0, 1)", file=sys.stderr)
        return 2
    calibration = None
    if args.calibration:
        import json

        from ..measure.costmodel import Calibration

        try:
            calibration = Calibration.from_dict(json.loads(Path(args.calibration).read_text()))
        except (OSError, ValueError, KeyError, TypeError) as err:
            print(f"error: --calibration {args.calibration}: not a readable calibration ({err}); "
                  "write one with python -m loosespec_bench.calibrate", file=sys.stderr)
            return 2
    from .index import load_index

    index = load_index(args.results, args.experiment)
    if index.empty:
        print(f"error: no finished runs of experiment {args.experiment!r} under {args.results!r}", file=sys.stderr)
        return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    front = frontier(index, calibration)
    table = matched(front, args.budget, args.alpha)
    front.to_csv(out / "frontier.csv", index=False)
    (out / "frontier.md").write_text(frontier_markdown(front))
    (out / "matched.md").write_text(matched_markdown(table, args.budget, args.alpha))
    note = ""
    if calibration is not None:
        sig = getattr(calibration, "signature", None) or {}
        note = (f"Predicted for the machine of calibration {Path(args.calibration).name} ({sig.get('cpu_signature', 'CPU not recorded')}, "
                f"{sig.get('dtype', '?')}, {sig.get('threads', '?')} threads, made {str(sig.get('created', '?'))[:10]}), "
                "whichever machine ran the points.")
    elif front["work_speedup"].notna().any():
        note = "Predicted with the calibration each run recorded (the machine that ran it)."
    for p in plot_frontier(front, out, rule_labels(front, index), note):
        print(p)
    print(out / "frontier.md")
    print(out / "matched.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
