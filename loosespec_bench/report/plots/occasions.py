"""Speed over occasions: a forest plot of each configuration's speedup over the target alone, one
panel per speed-evidence folder (python -m loosespec_bench.bench.speed's report.json): the measured
speedup pooled over problems and occasions with its two-way (problems x occasions) interval, each
occasion's own speedup beside it, and the speedup the work counts predict (counts x this
machine's calibration) with its interval over problems. A reader sees at once whether the
occasions agree and whether the counts explain the clock."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from ...measure.speed_configs import TARGET_ALONE, config_label
from .figure import OKABE_ITO, add_legend, draw_note, error_bars, panel_grid, paper_style

TITLE = "Speedup over the target alone, measured on two or more occasions and predicted from the work counts"
OCCASION_MARKERS = "^vs<>Dp"


def calibration_error(rep: Mapping[str, Any]) -> float | None:
    """The calibration's error on the log scale (issue 70), as the speed table states it: the larger
    of its own check (the calibration file the report names, where it can be read) and the worst
    measured / predicted gap of the report's configurations. None where neither is recorded."""
    import json
    import math
    from pathlib import Path

    parts = []
    for name, entry in (rep.get("configs") or {}).items():
        gap = entry.get("gap") if isinstance(entry, Mapping) else None
        if name != TARGET_ALONE and isinstance(gap, (int, float)) and not isinstance(gap, bool) and -1 < gap < math.inf:
            parts.append(abs(math.log1p(gap)))
    try:
        from ...safe_files import load_json_declaration  # never a link or a FIFO, bounded

        raw = load_json_declaration(Path(str(rep.get("calibration"))), "calibration")
        check = (raw.get("check") or {}).get("target_alone_decode_over_predicted")
        if isinstance(check, (int, float)) and check > 0:
            parts.append(abs(math.log(check)))
    except (OSError, ValueError, TypeError, AttributeError):
        pass
    return max(parts) if parts else None


def _interval(entry: Mapping[str, Any], key: str) -> tuple[float, float] | None:
    lo, hi = entry.get(f"{key}_ci_low"), entry.get(f"{key}_ci_high")
    return (float(lo), float(hi)) if lo is not None and hi is not None else None


@paper_style
def fig_speed_occasions(reports: Mapping[str, Mapping[str, Any]], order: Sequence[str] | None = None) -> Figure:
    """One panel per report ({panel title: report.json}), one row per configuration but the
    target alone, in `order` (default: the report's). Filled circle and bar: the measured
    speedup and its 95% two-way bootstrap interval; small open markers: each occasion's speedup;
    grey diamond and bar: the predicted speedup and its 95% interval over problems."""
    # At most two panels a row: each row is labelled by a configuration's name (up to ~25
    # characters), which a third of 7 in cannot hold beside its axis.
    fig, axes = panel_grid(len(reports), 2.0, 0.7, max_columns=2)
    if not reports:
        draw_note(axes[0], "no speed-evidence report\n(python -m loosespec_bench.bench.speed)")
        add_legend(fig, {}, 0, TITLE, "no runs")
        return fig
    n_occ = max(int(r.get("n_occasions") or 0) for r in reports.values())
    notes = []
    widened_any = False
    for ax, (title, rep) in zip(axes, reports.items()):
        configs = rep.get("configs") or {}
        err = calibration_error(rep)
        names = [c for c in (order or list(configs)) if c in configs and c != TARGET_ALONE]
        for row, name in enumerate(reversed(names)):
            entry = configs[name]
            measured, ci = entry.get("speedup"), _interval(entry, "speedup")
            if measured is not None:
                ax.errorbar([measured], [row + 0.12], xerr=error_bars([measured], [ci]),
                            fmt="o", color="black", ms=3.2, capsize=1.5, elinewidth=0.8)
            for o, value in enumerate(entry.get("speedup_by_occasion") or []):
                if value is not None:
                    ax.plot([value], [row + 0.12], OCCASION_MARKERS[o % len(OCCASION_MARKERS)], mfc="none", mec=OKABE_ITO["blue"],
                            ms=3.2, mew=0.7)
            predicted, pci = entry.get("predicted_speedup"), _interval(entry, "predicted_speedup")
            if predicted is not None:
                if err and pci is not None:  # the calibration's error, behind the counts' own interval
                    import math

                    wide = (pci[0] * math.exp(-err), pci[1] * math.exp(err))
                    ax.errorbar([predicted], [row - 0.18], xerr=error_bars([predicted], [wide]),
                                fmt="none", color="0.8", capsize=0, elinewidth=2.4)
                    widened_any = True
                ax.errorbar([predicted], [row - 0.18], xerr=error_bars([predicted], [pci]),
                            fmt="D", color="0.55", ms=2.6, capsize=1.5, elinewidth=0.8)
        ax.axvline(1.0, color="0.4", lw=0.7, ls=":")
        ax.set_yticks(range(len(names)), [config_label(n) for n in reversed(names)])
        ax.set_ylim(-0.7, len(names) - 0.3)
        ax.set_xlabel("speedup over the target alone (×)")
        load = rep.get("load") or {}
        ax.set_title(f"{title}\n{rep.get('n_problems')} problems × {rep.get('n_occasions')} occasions", loc="left")
        share = load.get("others_share_median")
        notes.append(f"{title}: others' CPU share median {share:.1%}, max {load.get('others_share_max', 0):.1%}, "
                     f"{load.get('contaminated_blocks', 0)} contaminated problem block(s) left out of the wall-clock figures"
                     if share is not None else f"{title}: no load recorded")
    for ax in axes[len(reports):]:
        ax.set_visible(False)
    entries: dict[str, Any] = {
        "measured, pooled (95% CI, problems x occasions)": Line2D([], [], marker="o", color="black", ls="-", ms=3.2),
        **{f"occasion {o + 1}": Line2D([], [], marker=OCCASION_MARKERS[o % len(OCCASION_MARKERS)], mfc="none", mec=OKABE_ITO["blue"],
                                       ls="none", ms=3.2) for o in range(n_occ)},
        "predicted from work counts (95% CI)": Line2D([], [], marker="D", color="0.55", ls="-", ms=2.6),
        **({"... with the calibration's error": Line2D([], [], color="0.8", lw=2.4)} if widened_any else {}),
    }
    add_legend(fig, entries, len(entries), TITLE,
               "measured: ratio of summed token rates over problems, interval a two-way bootstrap over problems and "
               "occasions; each occasion timed in its own process, configurations interleaved per problem in a random "
               "order\npredicted: each configuration's forwards, rows and context priced by one calibration of this "
               "machine, interval a bootstrap over problems" + (
                   "; pale bar: that interval widened by the calibration's error (the larger of its own check and the "
                   "worst measured / predicted gap; in-sample where the calibration was taken after the timings)"
                   if widened_any else "") + "\n" + "\n".join(notes))
    return fig
