"""`report compare A B`: two runs on their common samples, each figure's interval and B - A's."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from loosespec_bench.report.__main__ import main
from loosespec_bench.report.compare import compare, compare_pair, load_run


def _run(folder: Path, method: str, dataset: str, rows: list[tuple[int, int, float, float, bool, bool]], excluded=()) -> Path:
    """A run folder: per sample (tokens, steps, method s, baseline s, correct, baseline correct)."""
    folder.mkdir(parents=True)
    with (folder / "samples.jsonl").open("w") as f:
        for i, (tok, steps, ms, bs, ok, bok) in enumerate(rows):
            rec = {
                "id": f"{dataset}/{i}",
                "output_text": "",  # complete records: readers skip incomplete ones
                "metrics": {"new_tokens": tok, "steps": steps, "total_s": ms, "tokens_per_s": tok / ms},
                "score": {"correct": ok},
                "baseline": {"output_text": "", "metrics": {"new_tokens": tok, "steps": tok, "total_s": bs, "tokens_per_s": tok / bs},
                             "score": {"correct": bok}},
                "timing": {"status": "excluded" if i in excluded else "clean"},
            }
            f.write(json.dumps(rec) + "\n")
    (folder / "summary.json").write_text(json.dumps({"method": method, "drafter": "model", "k": 5, "dataset": dataset}))
    return folder


def _rows(n: int, seed: int, speed: float, tau: float, p_ok: float) -> list:
    rng = np.random.default_rng(seed)
    base_ok = rng.random(n) < 0.6
    out = []
    for i in range(n):
        tok = int(rng.integers(50, 150))
        bs = tok / 10.0 * rng.uniform(0.9, 1.1)
        out.append((tok, max(1, int(tok / tau)), bs / speed * rng.uniform(0.9, 1.1), bs,
                    bool(base_ok[i] if rng.random() < p_ok else not base_ok[i]), bool(base_ok[i])))
    return out


def test_compare_two_runs_reports_the_paired_difference(tmp_path):
    a = _run(tmp_path / "a", "spd", "gsm8k", _rows(40, 0, speed=1.2, tau=3.0, p_ok=1.0))
    b = _run(tmp_path / "b", "fly", "gsm8k", _rows(40, 0, speed=1.8, tau=5.0, p_ok=0.9))
    rows = {r.figure: r for r in compare_pair(load_run(a), load_run(b), n_boot=2000)}
    assert set(rows) == {"tau", "speedup", "speedup_median_of_samples", "accuracy", "retention"}
    for r in rows.values():
        for iv in (r.a, r.b, r.diff):
            assert iv[1] <= iv[0] <= iv[2]
    assert rows["tau"].diff[1] > 0 and rows["speedup"].diff[1] > 0  # B clearly faster
    assert rows["tau"].diff[0] == pytest.approx(rows["tau"].b[0] - rows["tau"].a[0])
    assert rows["accuracy"].n == 40


def test_compare_uses_common_samples_and_leaves_out_excluded_timings(tmp_path):
    a = _run(tmp_path / "a", "spd", "gsm8k", _rows(12, 1, 1.2, 3.0, 1.0), excluded={0})
    b = _run(tmp_path / "b", "fly", "gsm8k", _rows(10, 1, 1.5, 4.0, 1.0))  # 2 fewer samples
    rows = {r.figure: r for r in compare_pair(load_run(a), load_run(b), n_boot=500)}
    assert rows["tau"].n == 10 and rows["speedup"].n == 9


def test_compare_sets_match_by_dataset_and_the_cli(tmp_path, capsys):
    for side, method in (("A", "spd"), ("B", "fly")):
        for ds in ("gsm8k", "mgsm"):
            _run(tmp_path / side / f"{method}_{ds}", method, ds, _rows(12, 2, 1.3, 3.0, 1.0))
    _run(tmp_path / "A" / "spd_humaneval", "spd", "humaneval", _rows(12, 3, 1.3, 3.0, 1.0))  # only in A
    pairs, rows = compare(tmp_path / "A", tmp_path / "B", n_boot=300)
    assert sorted({r.dataset for r in rows}) == ["gsm8k", "mgsm"] and len(pairs) == 2
    csv = tmp_path / "cmp.csv"
    assert main(["compare", str(tmp_path / "A"), str(tmp_path / "B"), "--n-boot", "300", "--csv", str(csv)]) == 0
    out = capsys.readouterr().out
    assert "| gsm8k | speedup | 12 |" in out and "B - A" in out
    assert csv.read_text().startswith("dataset,figure,n,a,a_ci_low")


@pytest.mark.parametrize("case", ["missing", "no-common", "two-per-set"])
def test_compare_bad_input_is_one_error_line(tmp_path, capsys, case):
    a = _run(tmp_path / "a", "spd", "gsm8k", _rows(3, 0, 1.0, 2.0, 1.0))
    if case == "missing":
        b = tmp_path / "nope"
    elif case == "no-common":
        b = _run(tmp_path / "b", "fly", "gsm8k", [])
        (b / "samples.jsonl").write_text(json.dumps({"id": "other", "metrics": {}}) + "\n")
    else:
        a = tmp_path
        _run(tmp_path / "a2", "fly", "gsm8k", _rows(3, 0, 1.0, 2.0, 1.0))
        b = tmp_path / "a"
    assert main(["compare", str(a), str(b)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ")


def test_a_speedup_timed_on_some_groups_only_says_which(tmp_path):
    # Named case: MGSM's 10 timed of 30 were all French (a stride of 3 over an fr/de/th
    # interleave); the claims printed "10 timed in both" as if the set's.
    for name, method in (("a", "spd"), ("b", "fly")):
        folder = _run(tmp_path / name, method, "mgsm", _rows(9, 2, 1.2, 3.0, 1.0))
        recs = [json.loads(line) for line in (folder / "samples.jsonl").read_text().splitlines()]
        for i, rec in enumerate(recs):
            rec["meta"] = {"language": ("fr", "de", "th")[i % 3]}
            if i % 3:  # only French timed
                rec["timing"]["status"] = "untimed"
        (folder / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
        summary = json.loads((folder / "summary.json").read_text())
        (folder / "summary.json").write_text(json.dumps({**summary, "selection": {"group_key": "language"}}))
    rows = {r.figure: r for r in compare_pair(load_run(tmp_path / "a"), load_run(tmp_path / "b"), n_boot=200)}
    assert rows["speedup"].n == 3 and rows["speedup"].groups == "fr only"
    assert rows["tau"].n == 9 and rows["tau"].groups == ""  # every language: nothing to say


def test_work_counts_are_compared_with_an_exact_sign_test(tmp_path):
    from loosespec_bench.measure.work import add_forward, new_work

    def with_counts(folder: Path, draft_forwards: list[int]) -> Path:
        lines = (folder / "samples.jsonl").read_text().splitlines()
        out = []
        for line, n in zip(lines, draft_forwards):
            rec = json.loads(line)
            w = new_work()
            for _ in range(n):
                add_forward(w, "draft", 1, 1, 10)
            for _ in range(5):
                add_forward(w, "target_verify", 6, 6, 10)
            w["emitted"] = 20
            rec["metrics"]["work"] = w
            out.append(json.dumps(rec))
        (folder / "samples.jsonl").write_text("\n".join(out) + "\n")
        return folder

    rows = _rows(8, 2, 1.2, 3.0, 1.0)
    a = with_counts(_run(tmp_path / "a", "fly", "gsm8k", rows), [25] * 8)
    b = with_counts(_run(tmp_path / "b", "fly", "gsm8k", rows), [15] * 7 + [25])  # B (MLA) fewer on 7, a tie
    got = {r.figure: r for r in compare_pair(load_run(a), load_run(b), n_boot=200)}
    d = got["draft_forwards_per_token"]
    assert d.a[0] == pytest.approx(25 / 20) and d.b[0] == pytest.approx((7 * 15 + 25) / 160)
    assert d.test == "sign" and d.p == pytest.approx(2 * 0.5 ** 7) and d.counts == "B fewer 7, more 0, ties 1"
    assert got["target_forwards_per_token"].counts == "B fewer 0, more 0, ties 8"
    assert "draft_rows_per_token" in got


# ---- quality: exact McNemar for 0/1 scores, the declared paired test for graded ones -----------
def _scored(folder: Path, dataset: str, scores: list, base: list, key: str = "correct") -> Path:
    """A run folder whose samples carry only what quality reads: the method's and the target
    alone's score under `key` (tau and speed are constant and beside the point here)."""
    folder.mkdir(parents=True)
    with (folder / "samples.jsonl").open("w") as f:
        for i, (s, b) in enumerate(zip(scores, base)):
            metrics = {"new_tokens": 100, "steps": 25, "total_s": 1.0, "tokens_per_s": 100.0}
            f.write(json.dumps({
                "id": f"{dataset}/{i}", "output_text": "", "metrics": metrics, "score": {key: s},
                "baseline": {"output_text": "", "metrics": {**metrics, "steps": 100, "total_s": 2.0, "tokens_per_s": 50.0},
                             "score": {key: b}},
                "timing": {"status": "clean"},
            }) + "\n")
    (folder / "summary.json").write_text(json.dumps({"method": folder.name, "drafter": "model", "k": 5, "dataset": dataset}))
    return folder


def _split(n: int, right: int, lost: int, gained: int) -> tuple[list[bool], list[bool]]:
    """A's and B's 0/1 answers on n problems: A right on the first `right`; B loses the first
    `lost` of those and gains the first `gained` of A's wrong ones."""
    a = [i < right for i in range(n)]
    b = [(i >= lost) if i < right else (i < right + gained) for i in range(n)]
    return a, b


def _quality_rows(tmp_path, a, b, base_a=None, base_b=None, key="correct", **kw) -> dict:
    target = [True] * len(a) if base_a is None else base_a
    ra = load_run(_scored(tmp_path / "a", "humaneval", a, target, key))
    rb = load_run(_scored(tmp_path / "b", "humaneval", b, target if base_b is None else base_b, key))
    return {r.figure: r for r in compare_pair(ra, rb, n_boot=2000, **kw)}


def test_binary_quality_is_decided_by_exact_mcnemar_not_the_bootstrap(tmp_path):
    """Named case: 30 problems, A right on 20, B loses 1 and gains 6. The paired bootstrap's
    interval of B - A excludes 0 (it would print "B higher"); the exact McNemar p is
    2 x P(Binomial(7, 1/2) <= 1) = 2 x 8 / 128 = 0.125: undecided. The interval is the
    exact interval of B - A given A's answers (stats.ExactPairedBinary), which straddles 0."""
    from loosespec_bench.report.compare import _excludes_zero, verdict
    from loosespec_bench.measure.stats.intervals import paired_bootstrap, mean_stat

    a, b = _split(30, 20, lost=1, gained=6)
    row = _quality_rows(tmp_path, a, b)["accuracy"]
    assert row.test == "mcnemar" and row.p == pytest.approx(0.125)
    assert verdict(row) == "undecided"
    boot = paired_bootstrap([[float(x) for x in a], [float(x) for x in b]], lambda u, v, axis=-1: mean_stat(v, axis) - mean_stat(u, axis), n_boot=2000)
    assert _excludes_zero(boot, 30) == "B higher"  # what the old verdict said
    from loosespec_bench.measure.stats.exact import ExactPairedBinary

    assert row.diff == pytest.approx(ExactPairedBinary(1, 6, 20, 10).interval("difference"))
    assert row.diff[1] < 0 < row.diff[2]
    ca = stats.binomtest(20, 30).proportion_ci(method="exact")
    assert row.a == pytest.approx((20 / 30, ca.low, ca.high)) and row.b[0] == pytest.approx(25 / 30)
    assert row.counts == "A 20/30, B 25/30; lost / gained 1 / 6"


def test_binary_quality_verdicts_and_their_counts_in_the_table(tmp_path, capsys):
    from loosespec_bench.report.compare import format_comparison, verdict

    # 0 lost, 8 gained: p = 2 / 2^8 = 0.0078 < 0.05 at n = 8 (an exact test needs no minimum n).
    a, b = _split(8, 0, lost=0, gained=8)
    rows = _quality_rows(tmp_path / "up", a, b)
    assert rows["accuracy"].p == pytest.approx(2 / 256) and verdict(rows["accuracy"]) == "B higher"
    rows = _quality_rows(tmp_path / "down", b, a)
    assert verdict(rows["accuracy"]) == "B lower"
    # No discordant pair: no split to test, and the row says why.
    a, b = _split(30, 20, lost=0, gained=0)
    rows = _quality_rows(tmp_path / "same", a, b)
    assert rows["accuracy"].p == 1.0 and rows["accuracy"].diff[0] == 0.0
    assert rows["accuracy"].diff[1] < 0 < rows["accuracy"].diff[2]  # an exact interval, even with no discordant pair
    assert verdict(rows["accuracy"]) == "undecided (zero discordant pairs at this n)"
    table = format_comparison([], list(rows.values()))
    assert "exact McNemar, p = 1; A 20/30, B 20/30; lost / gained 0 / 0" in table
    assert "| tau |" in table and "| bootstrap |" in table  # tau keeps the bootstrap


def test_binary_retention_shares_the_target_alone_and_the_exact_machinery(tmp_path):
    """Both runs against the same target-alone answers (right on 25 of 30): A keeps all, B loses
    2. Retention B - A = (B's accuracy - A's) / the target's = -2 / 25, decided by the same exact
    McNemar (p = 0.5); each side's retention interval is ExactPairedBinary's."""
    from loosespec_bench.report.compare import verdict
    from loosespec_bench.measure.stats.exact import ExactPairedBinary

    target = [i < 25 for i in range(30)]
    b = [i >= 2 and i < 25 for i in range(30)]
    row = _quality_rows(tmp_path, target, b, base_a=target)["retention"]
    assert row.test == "mcnemar" and row.p == pytest.approx(0.5) and verdict(row) == "undecided"
    d = ExactPairedBinary(2, 0, 25, 5).interval("difference")  # B against A (= the target alone here)
    assert row.diff == pytest.approx(tuple(x / (25 / 30) for x in d))
    assert row.a == pytest.approx(ExactPairedBinary(0, 0, 25, 5).interval("retention"))
    assert row.b == pytest.approx(ExactPairedBinary(2, 0, 25, 5).interval("retention"))
    # The target alone answered differently in the two runs: no paired test of retention applies.
    other = list(target)
    other[29] = True
    row = _quality_rows(tmp_path / "differ", target, b, base_a=target, base_b=other)["retention"]
    assert row.p is None and verdict(row).startswith("undecided (the runs' target-alone scores differ on 1 of 30")
    assert row.diff[1:] == (None, None)  # 0/1 scores are never bootstrapped: no interval without the paired machinery


@pytest.mark.parametrize("graded_test", ["t", "wilcoxon"])
def test_graded_quality_uses_the_declared_paired_test(tmp_path, graded_test):
    """Graded scores (a rating): the declared test on per-problem B - A, two-sided, as scipy
    computes it; the bootstrap interval of the mean difference is still shown."""
    from loosespec_bench.report.compare import verdict

    rng = np.random.default_rng(3)
    a = [round(float(x), 3) for x in rng.uniform(0, 1, 25)]
    b = [round(min(1.0, x + float(d)), 3) for x, d in zip(a, rng.normal(0.08, 0.1, 25))]
    row = _quality_rows(tmp_path, a, b, base_a=[1.0] * 25, key="rating", graded_test=graded_test)["rating"]
    d = np.subtract(b, a)
    expected = (stats.ttest_rel(b, a).pvalue if graded_test == "t"
                else stats.wilcoxon(d, zero_method="pratt").pvalue)
    assert row.test == graded_test and row.p == pytest.approx(expected, rel=1e-6)
    assert row.p < 0.05 and verdict(row) == "B higher"
    assert row.diff[1] is not None and row.diff[1] <= row.diff[0] <= row.diff[2]  # the bootstrap interval
    assert row.counts.startswith("lower / higher / same ")


def test_compare_cli_graded_test_bad_name_is_one_error_line(tmp_path, capsys):
    a, b = _split(10, 5, lost=1, gained=2)
    _scored(tmp_path / "a", "gsm8k", a, [True] * 10)
    _scored(tmp_path / "b", "gsm8k", b, [True] * 10)
    assert main(["compare", str(tmp_path / "a"), str(tmp_path / "b"), "--graded-test", "z"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and "wilcoxon" in err[0]
