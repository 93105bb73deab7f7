"""`report compare A B`: two runs on their common samples, each figure's interval and B - A's."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

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
    from loosespec_bench.work import add_forward, new_work

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
    assert d.exact == f"B fewer 7, more 0, ties 1, sign test p = {2 * 0.5 ** 7:.3g}"
    assert got["target_forwards_per_token"].exact.startswith("B fewer 0, more 0, ties 8")
    assert "draft_rows_per_token" in got
