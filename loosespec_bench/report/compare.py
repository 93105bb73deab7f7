"""`python -m loosespec_bench.report compare A B`: two runs (or two sets of runs) side by side.

A and B are run folders (summary.json + samples.jsonl) or folders holding run folders (any
depth). Sets are matched by data set: each data set present in both gives one comparison (two
runs of one set on the same data set are an error naming them: pass the folders themselves).

Each comparison uses the samples both runs answered (by sample id), so that every figure is
measured on the same problems, and reports, for tau, speedup, the median of per-sample
speedups, the method's quality (the summary's quality figure, e.g. accuracy or pass@1) and
retention: A's value and interval, B's, and the paired difference B - A with its interval.

tau and speed: one paired bootstrap over the common samples (stats.paired_bootstrap): a resample
draws samples, and with a sample both runs' values on it, so a problem that is hard for both
widens neither difference; the verdict is whether B - A's interval excludes 0 (at n >= 10).
Speed figures leave out the samples whose timing either run excluded (timing.py).

Quality (docs/algorithms.md 7.6): 0/1 scores are decided by the exact McNemar test on the
discordant split (lost: A right, B wrong; gained: the reverse; stats.sign_test_p), with the exact
interval of the paired difference given A's answers (stats.ExactPairedBinary) and each side's
Clopper-Pearson interval; counts are printed beside the rates. Graded scores (NIAH recall, a
rating) by the declared paired test (--graded-test: t or wilcoxon, stats.PAIRED_TESTS) on the
per-problem B - A, with the bootstrap interval shown. Retention B - A is (B's quality - A's) /
the target alone's when both runs' target-alone scores agree on every problem, so the same test
decides it (its exact interval scaled by the target's mean); where they differ no paired test
applies and the row says so.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from ..errors import ConfigError
from ..store.run_folder import RunFolder
from ..measure.stats.intervals import (
    CI_METHOD, LEVEL, N_BOOT, mean_stat, median_stat, method_text, paired_bootstrap, ratio_of_sums, speed_baseline, speedup_of_sums,
)
from ..measure.stats.exact import count_sign_test, ExactPairedBinary, proportion_interval, sign_test_p
from ..measure.stats.verdicts import PAIRED_TESTS, two_sided
from ..measure.timing import counts_for_speed


@dataclass
class Run:
    folder: Path
    summary: dict[str, Any]
    records: dict[str, dict[str, Any]]  # first record per sample id

    @property
    def label(self) -> str:
        s = self.summary
        return f"{s.get('method')}/{s.get('drafter') or '-'}/K={s.get('k')}"


def load_run(folder: Path) -> Run:
    """One run of a comparison; a damaged folder (RunFolder.damage) is a DamagedRun naming it."""
    run = RunFolder(folder, create=False)
    run.check()
    summary = run.read_summary() or {}
    records = {r["id"]: r for r in run.records()}
    if not records:
        raise ConfigError(f"{folder} has no finished samples (samples.jsonl); nothing to compare")
    return Run(folder, summary, records)


def find_runs(path: Path) -> list[Path]:
    """`path` itself when it is a run folder, else every run folder below it."""
    if not path.is_dir():
        raise ConfigError(f"{path} is not a folder; pass two run folders or two folders of runs")
    if (path / RunFolder.SAMPLES).is_file():
        return [path]
    found = sorted(p.parent for p in path.rglob(RunFolder.SAMPLES) if not any(part.startswith("_") for part in p.parts))
    if not found:
        raise ConfigError(f"{path} holds no run folder (no samples.jsonl below it)")
    return found


def match(a: list[Run], b: list[Run]) -> list[tuple[Run, Run]]:
    """Pairs of runs by data set: one pair for each data set both sides have."""
    if len(a) == 1 and len(b) == 1:
        return [(a[0], b[0])]

    def by_set(runs: list[Run], side: str) -> dict[str, Run]:
        out: dict[str, Run] = {}
        for r in runs:
            name = str(r.summary.get("dataset"))
            if name in out:
                raise ConfigError(f"{side} has two runs on {name} ({out[name].folder}, {r.folder}); compare those folders one by one")
            out[name] = r
        return out

    sa, sb = by_set(a, "A"), by_set(b, "B")
    pairs = [(sa[k], sb[k]) for k in sa if k in sb]
    if not pairs:
        raise ConfigError(f"A ({', '.join(sorted(sa))}) and B ({', '.join(sorted(sb))}) share no data set")
    return pairs


def _quality_key(run: Run) -> str | None:
    key = (run.summary or {}).get("retention_key")  # the task's own (NIAH: recall), where recorded
    if isinstance(key, str):
        return key
    for rec in run.records.values():
        score = rec.get("score") or {}
        for key in ("correct", "rating"):
            if isinstance(score.get(key), (bool, int, float)):
                return key
    return None


def _value(side: dict[str, Any], key: str) -> float | None:
    v = (side.get("score") or {}).get(key)
    return None if v is None or isinstance(v, str) else float(v)


def difference_stat(stat: Callable[..., np.ndarray], k: int) -> Callable[..., np.ndarray]:
    """B's statistic minus A's, over A's k columns followed by B's k."""
    def f(*cols: np.ndarray, axis: int = -1) -> np.ndarray:
        return stat(*cols[k:], axis=axis) - stat(*cols[:k], axis=axis)

    return f


Interval = tuple[float | None, float | None, float | None]


@dataclass
class Row:
    dataset: str
    figure: str
    n: int
    a: Interval
    b: Interval
    diff: Interval
    # Where the figure rests on some of the set's groups only (MGSM's languages; the run's
    # selection.group_key): "fr only". A speedup timed on French alone is French's speedup.
    groups: str = ""
    # What the intervals were resampled from (claims/decide.py tests other estimands of the same
    # columns): A's columns, B's, and the per-side statistic.
    cols_a: list[list[float]] = field(default_factory=list, repr=False)
    cols_b: list[list[float]] = field(default_factory=list, repr=False)
    stat: Callable[..., np.ndarray] | None = field(default=None, repr=False)
    # The verdict's test: "bootstrap" (B - A's interval excludes 0), "mcnemar" (exact, 0/1
    # scores), "sign" (work counts: exact sign test over problems), or a graded paired test's
    # name (PAIRED_TESTS); p: its two-sided p (None: no test,
    # `why` says why); counts: what a reader counts (A k/n, B k/n, lost / gained).
    test: str = "bootstrap"
    p: float | None = None
    why: str = ""
    counts: str = ""


# Counts compared between two runs: per emitted token, (role, field).
COUNT_FIGURES = {
    "target_forwards_per_token": ("target_verify", "forwards"),
    "target_rows_per_token": ("target_verify", "rows"),
    "draft_forwards_per_token": ("draft", "forwards"),
    "draft_rows_per_token": ("draft", "rows"),
}


def _binary(values: list[float]) -> bool:
    return all(v in (0.0, 1.0) for v in values)


def _quality_test(row: Row, a: list[float], b: list[float], graded_test: str, scale: float = 1.0) -> None:
    """Set a quality row's test from per-problem scores a (A's) and b (B's): 0/1 scores the exact
    McNemar test with the split's exact interval (divided by `scale`: the target alone's mean for
    retention), graded ones the declared paired test on b - a (the bootstrap interval stays)."""
    n = len(a)
    if _binary(a) and _binary(b):
        lost = sum(1 for u, v in zip(a, b) if u > v)
        gained = sum(1 for u, v in zip(a, b) if v > u)
        row.test, row.p = "mcnemar", sign_test_p(lost, gained)
        row.counts = f"lost / gained {lost} / {gained}"
        # The interval of B - A given A's answers (stats.ExactPairedBinary): exact and not
        # conditional on the number of discordant pairs, so that 4 lost / 0 gained does not
        # print a bound equal to the estimate; zero discordant pairs still get one.
        right = int(sum(a))
        iv = ExactPairedBinary(lost, gained, right, n - right).interval("difference")
        row.diff = (iv[0] / scale, iv[1] / scale, iv[2] / scale)
        if lost + gained == 0:
            row.why = "zero discordant pairs at this n"
        return
    up, down = PAIRED_TESTS[graded_test]([v - u for u, v in zip(a, b)])
    row.test, row.p = graded_test, two_sided(min(up, down))
    lower, higher = sum(1 for u, v in zip(a, b) if v < u), sum(1 for u, v in zip(a, b) if v > u)
    row.counts = f"lower / higher / same {lower} / {higher} / {n - lower - higher}"


def compare_pair(ra: Run, rb: Run, *, seed: int = 0, n_boot: int = N_BOOT, graded_test: str = "t") -> list[Row]:
    """Every figure of two runs on their common samples, each side's interval and B - A's, and
    the test behind each verdict (bootstrap for tau and speed; quality: see the module's doc)."""
    if graded_test not in PAIRED_TESTS:
        raise ConfigError(f"graded test {graded_test!r}: use one of {', '.join(PAIRED_TESTS)}")
    common = [sid for sid in ra.records if sid in rb.records]
    if not common:
        raise ConfigError(f"{ra.folder} and {rb.folder} share no sample id; a comparison needs the same samples")
    dataset = str(ra.summary.get("dataset") or rb.summary.get("dataset"))
    kw = dict(seed=seed, n_boot=n_boot)
    rows: list[Row] = []

    group_key = (ra.summary.get("selection") or {}).get("group_key")
    all_groups = {(ra.records[sid].get("meta") or {}).get(group_key) for sid in common} if group_key else set()

    def only(recs: list[dict[str, Any]] | None) -> str:
        if recs is None or len(all_groups) < 2:
            return ""
        present = {(r.get("meta") or {}).get(group_key) for r in recs}
        return f"{', '.join(sorted(map(str, present)))} only" if present < all_groups else ""

    def add(figure: str, stat: Callable[..., np.ndarray], cols_a: list[list[float]], cols_b: list[list[float]],
            recs: list[dict[str, Any]] | None = None) -> None:
        if not cols_a or not cols_a[0]:
            return
        k = len(cols_a)
        rows.append(Row(
            dataset, figure, len(cols_a[0]),
            paired_bootstrap(cols_a, stat, **kw), paired_bootstrap(cols_b, stat, **kw),
            paired_bootstrap([*cols_a, *cols_b], difference_stat(stat, k), **kw),
            only(recs), cols_a, cols_b, stat,
        ))

    A = [ra.records[s] for s in common]
    B = [rb.records[s] for s in common]
    add("tau", ratio_of_sums, [[r["metrics"]["new_tokens"] for r in A], [r["metrics"]["steps"] for r in A]],
        [[r["metrics"]["new_tokens"] for r in B], [r["metrics"]["steps"] for r in B]])

    # Speed against the target alone timed beside each method (speed_baseline); quality below
    # against `baseline`, the store's on every sample under baseline=shared.
    def base(r: dict[str, Any]) -> dict[str, Any]:
        return speed_baseline(r)["metrics"]

    timed = [
        (x, y) for x, y in zip(A, B)
        if x.get("baseline") and y.get("baseline") and counts_for_speed(x) and counts_for_speed(y)
        and min(x["metrics"]["total_s"], base(x)["total_s"], y["metrics"]["total_s"], base(y)["total_s"]) > 0
    ]

    def speed_cols(rs: list[dict[str, Any]]) -> list[list[float]]:
        return [[r["metrics"]["new_tokens"] for r in rs], [r["metrics"]["total_s"] for r in rs],
                [base(r)["new_tokens"] for r in rs], [base(r)["total_s"] for r in rs]]

    if timed:
        ta, tb = [x for x, _ in timed], [y for _, y in timed]
        add("speedup", speedup_of_sums, speed_cols(ta), speed_cols(tb), ta)
        ratios = [(x["metrics"]["tokens_per_s"] / base(x)["tokens_per_s"], y["metrics"]["tokens_per_s"] / base(y)["tokens_per_s"])
                  for x, y in timed if base(x)["tokens_per_s"] > 0 and base(y)["tokens_per_s"] > 0]
        if ratios:
            add("speedup_median_of_samples", median_stat, [[p[0] for p in ratios]], [[p[1] for p in ratios]], ta)

    # Work counts: a ratio of sums per token with its interval, and the exact sign test over
    # samples of the per-sample figure (counts carry no timing noise).
    counted = [(x, y) for x, y in zip(A, B) if (x["metrics"].get("work") and y["metrics"].get("work")
                                                 and x["metrics"]["work"].get("emitted") and y["metrics"]["work"].get("emitted"))]
    for figure, (role, field) in COUNT_FIGURES.items():
        if not counted or not any(x["metrics"]["work"][role][field] or y["metrics"]["work"][role][field] for x, y in counted):
            continue

        def cols(rs: list[dict[str, Any]], role: str = role, field: str = field) -> list[list[float]]:
            return [[r["metrics"]["work"][role][field] for r in rs], [r["metrics"]["work"]["emitted"] for r in rs]]

        ca, cb = cols([x for x, _ in counted]), cols([y for _, y in counted])
        add(figure, ratio_of_sums, ca, cb)
        per_a = [f / n for f, n in zip(*ca)]
        per_b = [f / n for f, n in zip(*cb)]
        t = count_sign_test(per_b, per_a)
        # Counts depend only on the tokens: the verdict is the exact sign test's, not an interval's.
        rows[-1].test, rows[-1].p = "sign", t["p"]
        rows[-1].counts = f"B fewer {t['fewer']}, more {t['more']}, ties {t['ties']}"

    key = _quality_key(ra) or _quality_key(rb)
    if key:
        figure = ra.summary.get("quality_figure") or ("accuracy" if key == "correct" else key)
        q = [(_value(x, key), _value(y, key)) for x, y in zip(A, B)]
        q = [(u, v) for u, v in q if u is not None and v is not None]
        if q:
            qa, qb = [u for u, _ in q], [v for _, v in q]
            add(figure, mean_stat, [qa], [qb])
            row = rows[-1]
            _quality_test(row, qa, qb, graded_test)
            if row.test == "mcnemar":
                row.a, row.b = proportion_interval(int(sum(qa)), len(qa)), proportion_interval(int(sum(qb)), len(qb))
                row.counts = f"A {int(sum(qa))}/{len(qa)}, B {int(sum(qb))}/{len(qb)}; {row.counts}"
        ret = [
            (_value(x, key), _value(x["baseline"], key), _value(y, key), _value(y["baseline"], key))
            for x, y in zip(A, B) if x.get("baseline") and y.get("baseline")
        ]
        ret = [t for t in ret if None not in t]
        if ret:
            ma, ta, mb, tb = ([t[i] for t in ret] for i in range(4))
            add("retention", ratio_of_sums, [ma, ta], [mb, tb])
            row = rows[-1]
            if _binary(ma + ta + mb + tb):
                # Each side's retention: exact, from its own lost / gained against its target alone.
                for side, m, t in (("a", ma, ta), ("b", mb, tb)):
                    right = int(sum(t))
                    if right:
                        lo = sum(1 for u, v in zip(m, t) if v > u)
                        ga = sum(1 for u, v in zip(m, t) if u > v)
                        setattr(row, side, ExactPairedBinary(lo, ga, right, len(t) - right).interval("retention"))
            differ = sum(1 for u, v in zip(ta, tb) if u != v)
            if differ:
                row.test, row.p = "none", None
                if _binary(ma + ta + mb + tb):  # 0/1 scores are never bootstrapped: no exact interval here
                    row.diff = (row.diff[0], None, None)
                row.why = f"the runs' target-alone scores differ on {differ} of {len(ta)} problems: no paired test of retention"
            elif sum(ta) > 0:
                _quality_test(row, ma, mb, graded_test, scale=sum(ta) / len(ta))
            else:
                row.test, row.p, row.why = "none", None, "the target alone scores 0: no retention"
    return rows


def compare(a: Path, b: Path, *, seed: int = 0, n_boot: int = N_BOOT, graded_test: str = "t") -> tuple[list[tuple[Run, Run]], list[Row]]:
    runs_a = [load_run(p) for p in find_runs(a)]
    runs_b = [load_run(p) for p in find_runs(b)]
    pairs = match(runs_a, runs_b)
    rows = [row for ra, rb in pairs for row in compare_pair(ra, rb, seed=seed, n_boot=n_boot, graded_test=graded_test)]
    return pairs, rows


def _cell(iv: Interval, spec: str) -> str:
    point, low, high = iv
    if point is None:
        return "-"
    return f"{point:{spec}}" + (f" [{low:{spec}}, {high:{spec}}]" if low is not None and high is not None else "")


MIN_N_VERDICT = 10  # below this a bootstrap interval is too coarse to decide anything
ALPHA = 1 - LEVEL
TEST_TEXT = {"mcnemar": "exact McNemar", "sign": "exact sign test", "t": "paired t", "wilcoxon": "Wilcoxon signed-rank", "none": "no test"}


def verdict(r: Row) -> str:
    """B higher / B lower / undecided (with why): the bootstrap's interval for tau and speed, the
    row's test at two-sided alpha for quality (an exact test needs no minimum n)."""
    if r.test == "bootstrap":
        return _excludes_zero(r.diff, r.n)
    if r.p is None or r.why:
        return f"undecided ({r.why or 'no test'})"
    if r.p < ALPHA and r.diff[0] is not None and r.diff[0] != 0:
        return "B higher" if r.diff[0] > 0 else "B lower"
    return "undecided"


def _test_cell(r: Row) -> str:
    if r.test == "bootstrap":
        return "bootstrap"
    p = "" if r.p is None else f", p = {r.p:.3g}"
    return f"{TEST_TEXT.get(r.test, r.test)}{p}" + (f"; {r.counts}" if r.counts else "")


def _excludes_zero(iv: Interval, n: int) -> str:
    _, low, high = iv
    if n < MIN_N_VERDICT:
        return f"undecided (n={n} < {MIN_N_VERDICT})"
    if low is None or high is None:
        return "undecided (no interval)"
    if low > 0:
        return "B higher"
    if high < 0:
        return "B lower"
    return "undecided"


def format_comparison(pairs: list[tuple[Run, Run]], rows: list[Row]) -> str:
    lines = []
    for ra, rb in pairs:
        lines.append(f"A = {ra.label} ({ra.folder})")
        lines.append(f"B = {rb.label} ({rb.folder})")
    header = f"| data set | figure | n | A | B | B - A | test | verdict |"
    lines += ["", header, "|---|---|---:|---|---|---|---|---|"]
    for r in rows:
        spec = ".2f" if r.figure.startswith(("tau", "speedup")) else ".3f"
        lines.append(f"| {r.dataset} | {r.figure} | {r.n}{f' ({r.groups})' if r.groups else ''} | {_cell(r.a, spec)} | {_cell(r.b, spec)} | "
                     f"{_cell(r.diff, '+' + spec)} | {_test_cell(r)} | {verdict(r)} |")
    lines.append("")
    lines.append(f"[low, high]: {LEVEL:.0%} intervals over the samples both runs answered (speed: those timed in both). "
                 f"tau, speed: {method_text(CI_METHOD)}; verdict: whether B - A's interval excludes 0 (at n >= {MIN_N_VERDICT}). "
                 "0/1 quality: exact (Clopper-Pearson per side; B - A: exact given A's answers; retention per "
                 "side: stats.ExactPairedBinary), verdict by the exact McNemar test (two-sided p < "
                 f"{ALPHA:g}); lost = A right and B wrong, gained the reverse. Graded quality: bootstrap interval shown, "
                 "verdict by the paired test named (p < 0.05). Work counts per token: the exact sign test over the common "
                 "samples (counts depend only on the tokens).")
    return "\n".join(lines)


def rows_to_csv(rows: list[Row], path: Path) -> Path:
    import csv

    import io

    from ..safe_files import atomic_write_text

    path.parent.mkdir(parents=True, exist_ok=True)
    with io.StringIO(newline="") as f:
        w = csv.writer(f)
        w.writerow(["dataset", "figure", "n", "a", "a_ci_low", "a_ci_high", "b", "b_ci_low", "b_ci_high",
                    "diff", "diff_ci_low", "diff_ci_high", "test", "p", "counts", "verdict"])
        for r in rows:
            w.writerow([r.dataset, r.figure, r.n, *r.a, *r.b, *r.diff, r.test, r.p, r.counts, verdict(r)])
        atomic_write_text(path, f.getvalue())  # never through a link, never half a file (safe_files)
    return path

