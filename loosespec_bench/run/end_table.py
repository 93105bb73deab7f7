"""The end-of-run table: a run's summary as the command line prints it when the run ends (app.run),
its figures under the report's labels and formats (schema.figure, format_value, format_interval),
so that the table reads as the index and the paper tables do."""

from __future__ import annotations

import textwrap
from typing import Any

from ..schema import figure, format_interval, format_value
from ..measure.latency import LABELS, LATENCIES, STAT_NAMES
from ..measure.timing import contamination_warning, timing_line

WIDTH = 100  # the table's rows and its own notes wrap at this many characters


def _fmt(v: Any, spec: str = ".3f") -> str:
    if v is None:
        return "-"
    return format(v, spec) if isinstance(v, float) else str(v)


def _with_ci(s: dict[str, Any], key: str, kind: str) -> str:
    """`1.42× [1.21, 1.63]`: the figure and its interval (when the bootstrap gave one) in its kind's
    format (schema: as the tables print it). At n <= 1 no interval exists: `[n/a]`, never a
    zero-width bracket; a wider run whose resamples do not spread says so ("no spread")."""
    v = s.get(key)
    if v is None:
        return "-"
    text = format_value(v, kind)
    low, high = s.get(f"{key}_ci_low"), s.get(f"{key}_ci_high")
    n = s.get("n_samples")
    if isinstance(n, int) and n <= 1:
        return text + " [n/a]"
    if low is not None and high is not None:
        text += " (no spread)" if low == high else " " + format_interval(low, high, kind)
    return text


def _shown(s: dict[str, Any], column: str, key: str | None = None) -> tuple[str, str]:
    """A figure's row under the report's label (schema.figure); a quality row names the task's own
    figure ('recall retention (method ÷ target alone)' where NIAH's headline is recall)."""
    f = figure(column)
    return f.label.replace("accuracy", s.get("quality_figure") or "accuracy"), _with_ci(s, key or f.source, f.kind)


def count_rate(k: Any, n: Any, value: Any) -> str | None:
    """`13/30 = 0.433`: a rate that is a count over n, with its count (the share alone hides how
    few); None where the count does not give the value (a graded mean, a stale count)."""
    if not (isinstance(k, int) and isinstance(n, int) and n > 0 and isinstance(value, (int, float))):
        return None
    if isinstance(k, bool) or abs(k / n - value) > 1e-9:
        return None
    return f"{k}/{n} = {value:.3f}"


def _identical(s: dict[str, Any]) -> str:
    """`2/5 = 0.400`: a reader counts identical outputs, the share alone hides how few."""
    share, n = s.get("identical_to_target"), s.get("n_paired")
    if share is None:
        return "-"
    if isinstance(n, int) and n > 0:
        return f"{round(share * n)}/{n} = {share:.3f}"
    return _fmt(share)


def _quality(s: dict[str, Any], column: str, key: str, side: str) -> tuple[str, str]:
    """A quality row with its count where the figure is one (`13/30 = 0.433 [0.255, 0.626]`:
    summary.json's quality_counts, 0/1 scores only); a graded figure (a rating) as it is."""
    label, text = _shown(s, column, key)
    counts = s.get("quality_counts") or {}
    counted = count_rate(counts.get(f"{side}correct"), counts.get(f"{side}n"), s.get(key))
    if counted is not None:
        text = counted + text[len(format_value(s[key], figure(column).kind)):]
    return label, text


def _interval(value: Any, low: Any, high: Any, n: Any) -> str:
    if value is None:
        return "-"
    if isinstance(n, int) and n <= 1:
        return " [n/a]"
    if low is None or high is None:
        return ""
    return " (no spread)" if low == high else " " + format_interval(low, high, "accuracy")


def _group_cell(g: dict[str, Any], side: str) -> str:
    """One side of a group's row: `3/5 = 0.600 [0.147, 0.947]` (a graded figure: `7.200 [...] (n=5)`)."""
    value, n = g.get(f"{side}value"), g.get(f"{side}n")
    if value is None:
        return "-"
    counted = count_rate(g.get(f"{side}correct"), n, value)
    head = counted if counted is not None else f"{value:.3f}"
    tail = "" if counted is not None else f" (n={n})"
    return head + _interval(value, g.get(f"{side}ci_low"), g.get(f"{side}ci_high"), n) + tail


def _group_rows(s: dict[str, Any]) -> list[tuple[str, str]]:
    """Rows per group of a set with groups: the quality figure per group (summary.json's
    quality_by_group: MGSM's languages, MT-bench's categories), each side with its count and
    exact interval; Spec-Bench's speed per task group (speed_by_task_group). None for a run of
    one group (its figures are the run's)."""
    rows: list[tuple[str, str]] = []
    by = s.get("quality_by_group") or {}
    groups = by.get("groups") or {}
    if len(groups) > 1:
        fig = s.get("quality_figure") or "accuracy"
        cells = {name: (_group_cell(g, ""), _group_cell(g, "baseline_")) for name, g in groups.items()}
        paired = any(b != "-" for _, b in cells.values())
        left = max(len(a) for a, _ in cells.values())
        rows.append((f"{fig} by {by.get('key') or 'group'}", f"{'method':<{left}}   target alone" if paired else "method"))
        rows += [(f"  {name}", f"{a:<{left}}   {b}" if paired else a) for name, (a, b) in cells.items()]
    speed = s.get("speed_by_task_group") or {}
    if len(speed) > 1:
        rows.append(("speed by task group", "n, tau, tokens/s, speedup"))
        for name, g in speed.items():
            x = g.get("speedup")
            rows.append((f"  {name}", f"n={g.get('n')}, tau {_fmt(g.get('tau'), '.2f')}, {_fmt(g.get('tokens_per_s'), '.2f')} tokens/s, "
                         f"speedup {format_value(x, 'speedup') if x is not None else '-'}"))
    return rows


def _lines(label: str, value: str, width: int) -> list[str]:
    """One row, its value wrapped under itself past WIDTH characters."""
    room = max(20, WIDTH - width - 2)
    parts = textwrap.wrap(value, room, break_long_words=False, break_on_hyphens=False) if len(value) > room else [value]
    return [f"{label:<{width}}  {parts[0] if parts else ''}".rstrip()] + [f"{'':<{width}}  {p}" for p in parts[1:]]


def _note(text: str) -> list[str]:
    """A note under the table, wrapped at WIDTH (paths and long words kept whole)."""
    return textwrap.wrap(text, WIDTH, subsequent_indent="  ", break_long_words=False, break_on_hyphens=False) or [""]


def _underpowered_why(s: dict[str, Any]) -> str:
    """Why a run's quality difference cannot be read: no interval at all, no discordant pair
    (nothing changed, so nothing bounds how often it would), or an interval wider than the
    threshold."""
    n, fig = s.get("quality_n"), s.get("quality_figure") or "accuracy"
    half = s.get("quality_diff_half_width")
    lost, gained = s.get("quality_lost"), s.get("quality_gained")
    if not n or n <= 1:
        return f"n = {n or 0} paired sample{'s' if n != 1 else ''}: no interval exists"
    if half is None:
        return f"{n} paired samples gave no interval for the {fig} difference"
    if lost == 0 and gained == 0:
        return (f"zero discordant pairs at n = {n}: the rule of three still allows changes in up to "
                f"{min(1.0, 3 / n):.0%} of problems")
    return f"the {fig} difference's interval is +-{half:.3f} wide at n = {n}, wider than +-{s['power_threshold']:g}"


def _rates(s: dict[str, Any]) -> list[tuple[str, str]]:
    """The two tokens/s rows. Where only a subset was timed, both rates are over those samples
    (they divide to the speedup) and the method's rate over every sample follows in brackets:
    over different samples the two read as a speedup the run did not measure (MGSM: 7.94
    against 5.95 tokens/s printed beside a 0.56x speedup)."""
    timed, n = s.get("n_timed"), s.get("n_samples")
    if s.get("timed_tokens_per_s") is None or timed is None or timed == n:
        return [(figure("tokens_per_s").label, _fmt(s.get("tokens_per_s"), ".2f")),
                (figure("baseline_tokens_per_s").label, _fmt(s.get("baseline_tokens_per_s"), ".2f"))]
    return [(figure("tokens_per_s").label, f"{_fmt(s['timed_tokens_per_s'], '.2f')} on the {timed} timed"
             f" ({_fmt(s.get('tokens_per_s'), '.2f')} on all {n})"),
            (figure("baseline_tokens_per_s").label, f"{_fmt(s.get('baseline_tokens_per_s'), '.2f')} on the {timed} timed")]


def _work_rows(s: dict[str, Any]) -> list[tuple[str, str]]:
    """Work counts per emitted token (work.py), method and target alone."""
    rows = []
    for label, key in (("method", "work_per_token"), ("target alone", "baseline_work_per_token")):
        w = s.get(key)
        if w:
            rows.append((f"per token ({label})", f"target fwd {_fmt(w.get('target_forwards'), '.3f')}, rows "
                         f"{_fmt(w.get('target_rows'), '.2f')}; draft fwd {_fmt(w.get('draft_forwards'), '.3f')}, rows "
                         f"{_fmt(w.get('draft_rows'), '.2f')}; extra LM-head rows {_fmt(w.get('lm_head_extra_rows'), '.2f')}"))
    return rows


def _latency_rows(s: dict[str, Any]) -> list[tuple[str, str]]:
    """TTFT, TPOT, ITL and end-to-end latency in milliseconds, method and target alone, with vllm
    bench serve's statistics (measure/latency.py: mean, std, median, p90, p95, p99)."""
    rows = []
    head = "/".join("med" if n == "median" else n for n in STAT_NAMES)
    for name in LATENCIES:
        for prefix, who in (("", "method"), ("baseline_", "target alone")):
            if s.get(f"{prefix}{name}_median") is None:
                continue
            vals = " / ".join(_fmt(None if s.get(f"{prefix}{name}_{q}") is None else 1e3 * s[f"{prefix}{name}_{q}"], ".1f")
                              for q in STAT_NAMES)
            rows.append((f"{LABELS[name]} ms {head} ({who})", vals))
    return rows


def _serving_rows(s: dict[str, Any]) -> list[tuple[str, str]]:
    """A run served in batches (summary['serving']): throughput of each side and their ratio,
    each with its interval over timed batches, and the batches behind them."""
    sv = s.get("serving")
    if not sv:
        return []

    def fig(key: str, spec: str, unit: str = "") -> str:
        v, lo, hi = sv.get(key), sv.get(f"{key}_ci_low"), sv.get(f"{key}_ci_high")
        if v is None:
            return "-"
        ci = f" [{lo:{spec}}, {hi:{spec}}]" if lo is not None and hi is not None else " (no interval: < 3 timed batches)"
        return f"{v:{spec}}{unit}{ci}"

    rate = sv.get("request_rate")
    arrivals = "at once" if rate is None else f"{rate:g} requests/s (Poisson)"
    return [
        ("served", f"batches of {sv['batch_size']}, arriving {arrivals}; {sv['n_timed_batches']} timed batches "
                   f"({sv['n_batches']} distinct x {sv['repeats']} repeats); others' CPU max {_fmt(sv.get('others_share_max'), '.1%')}"),
        ("throughput tok/s (method)", fig("throughput_tok_s", ".2f")),
        ("throughput tok/s (target alone)", fig("baseline_throughput_tok_s", ".2f")),
        ("throughput speedup (×)", fig("throughput_speedup", ".2f", "×")),
    ]


def format_summary(s: dict[str, Any]) -> str:
    fig = s.get("quality_figure") or "accuracy"
    n = s.get("n_samples")
    problems = s.get("n_problems")
    diff_label, diff = _shown(s, "accuracy_diff", f"{fig}_diff")
    rows = [
        ("method / drafter / K", f"{s['method']} / {s.get('drafter') or '-'} / {s.get('k')}"),
        ("pair / dataset", f"{s['pair']} / {s['dataset']}"),
        ("samples (distinct problems)", f"{_fmt(n)} ({_fmt(problems)})" if problems is not None and problems != n else _fmt(n)),
        _shown(s, "tau"),
        *_rates(s),
        _shown(s, "speedup"),
        _shown(s, "speedup_median"),
        _quality(s, "accuracy", fig, ""),
        _quality(s, "baseline_accuracy", f"baseline_{fig}", "baseline_"),
        (diff_label, diff
         + (f"  lost / gained {s['quality_lost']} / {s['quality_gained']}" if s.get("quality_lost") is not None else "")
         + (f"  underpowered (n={s.get('quality_n')})" if s.get("underpowered") else "")),
        _shown(s, "retention"),
        (figure("identical_to_target").label, _identical(s)),
        (f"{figure('loose_accepts').label} / {figure('mismatches').label}",
         f"{s['loose_accepts']} / {s['mismatches']}" if s.get("mismatches") is not None else "-"),
        (figure("tau_without_loose").label, _fmt(s.get("tau_without_loose"), ".2f")),
        *_work_rows(s),
        ("speedup predicted (counts x costs)", _with_ci(s, "predicted_speedup", "speedup")
         + (f"  measured/predicted {s['predicted_gap']:+.1%}" if s.get("predicted_gap") is not None else "")),
        *_latency_rows(s),
        *_serving_rows(s),
    ]
    width = max(len(a) for a, _ in rows)
    lines = ["", "=" * (width + 30)] + [ln for a, b in rows for ln in _lines(a, b, width)]
    groups = _group_rows(s)  # a block of its own, under its own (narrower) label column
    if groups:
        lines += ["-" * (width + 30)] + [ln for a, b in groups for ln in _lines(a, b, max(len(a) for a, _ in groups))]
    lines.append("=" * (width + 30))
    if s.get("ci_level") is not None:
        lines += _note(f"[low, high]: {s['ci_level']:.0%} intervals, {s.get('ci_method')}"
                       + (f"; quality: {s['quality_ci_method']}" if s.get("quality_ci_method") else ""))
    if s.get("underpowered"):
        lines += _note(
            f"underpowered: {s.get('quality_n')} paired samples cannot tell a difference in {fig} of "
            f"{s['power_threshold']:g} from none: {_underpowered_why(s)} (docs/algorithms.md 7.1; "
            "`python -m loosespec_bench.plan` sizes n)"
        )
    if s.get("speedup_method"):
        lines += _note(f"speedup = {s['speedup_method']}")
    lines += _note(f"tau = {s['tau_definition']}")
    why = (s.get("cost_model") or {}).get("why")
    if why:
        lines += _note(f"predicted speedup: none, {why}")
    lines.append(f"results: {s['run_dir']}")
    if s.get("n_paired"):
        lines.append(timing_line(s.get("timing")))
    store = s.get("baseline_store")
    if store:
        lines.append(
            f"target alone (baseline=shared, store {store['store']}): {len(store['reused'])} reused, "
            f"{len(store['computed_here'])} computed here, {len(store['timed'])} timed beside the method"
            + (f"; {len(store['store_mismatches'])} fresh run(s) differ from the store's tokens" if store["store_mismatches"] else "")
        )
    warning = contamination_warning(s.get("timing"))
    if warning:
        lines.append(warning)  # the last line: the speed figure is not a quiet-machine one
    return "\n".join(lines)
