"""The loose-rules frontier and matched table on a hand-made index with known answers."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from loosespec_bench.report.frontier import detectable_loss, frontier, main, matched
from loosespec_bench.measure.stats.exact import sign_test_p


def point(method, drafter, tau, lost, gained, n=30, **knobs):
    return dict(status="complete", method=method, drafter=drafter, dataset="gsm8k", tau=tau, tau_ci_low=tau - 0.1,
                tau_ci_high=tau + 0.1, speedup=tau / 2, work_speedup=tau / 3, work_speedup_ci_low=tau / 3 - 0.1,
                work_speedup_ci_high=tau / 3 + 0.1, quality_lost=lost, quality_gained=gained,
                quality_sign_p=sign_test_p(lost, gained), n_problems=n, score_diff=(gained - lost) / n,
                score_diff_ci_low=(gained - lost) / n - 0.1, score_diff_ci_high=(gained - lost) / n + 0.05, run_id=f"{method}-{tau}", **knobs)


@pytest.fixture
def index():
    return pd.DataFrame([
        point("spd", "model", 3.0, 0, 0),
        point("cascade", "model", 3.5, 1, 1, alpha=0.9),
        point("cascade", "model", 4.0, 2, 0, alpha=0.5),   # net loss 2/30 = 6.7%: over a 2% budget
        point("cascade", "model", 5.0, 9, 0, alpha=0.05),  # 9 vs 0: p = 2^-8 < 0.05, a detectable loss
        point("fly", "mla", 4.2, 0, 0, theta=0.3),
    ])


def test_frontier_names_rules_with_their_drafter_and_sorts_by_tau(index):
    front = frontier(index)
    assert set(front["rule"]) == {"spd", "cascade", "fly + mla"}
    cas = front[front["rule"] == "cascade"]
    assert cas["tau"].tolist() == [3.5, 4.0, 5.0]
    assert cas["net_lost"].tolist() == [0, 2, 9]


def test_matched_table_known_answers(index):
    front = frontier(index)
    row = matched(front, budget=0.02, alpha=0.05).set_index("rule").loc["cascade"]
    # 9 lost vs 0 gained is detectable (p = 0.0039); 2 vs 0 is not (p = 0.5): best undetected tau = 4.0.
    assert sign_test_p(9, 0) < 0.05 < sign_test_p(2, 0)
    assert row["undetected_tau"] == 4.0 and row["undetected_lost"] == 2
    # Within a net loss of 2% of 30 problems (0.6 answers): only the point with 1 lost, 1 gained.
    assert row["budget_tau"] == 3.5
    assert matched(front, budget=0.1, alpha=0.05).set_index("rule").loc["cascade", "budget_tau"] == 4.0
    # Each chosen point carries its predicted speedup (here tau / 3).
    assert row["undetected_work_speedup"] == pytest.approx(4.0 / 3) and row["budget_work_speedup"] == pytest.approx(3.5 / 3)
    # ... and the chosen point's intervals, which the markdown prints beside each figure.
    assert (row["undetected_tau_ci_low"], row["undetected_tau_ci_high"]) == pytest.approx((3.9, 4.1))
    assert row["budget_work_speedup_ci_low"] == pytest.approx(3.5 / 3 - 0.1)
    from loosespec_bench.report.frontier import matched_markdown

    md = matched_markdown(matched(front, budget=0.02, alpha=0.05), 0.02, 0.05)
    assert "| cascade | 3 | 4.00 [3.90, 4.10] | 1.33 [1.23, 1.43] |" in md


def test_a_calibration_recomputes_every_points_work_speedup(index, monkeypatch):
    import loosespec_bench.report.frontier as fr

    index["run_dir"] = index["run_id"]
    monkeypatch.setattr(fr, "recomputed_work_speedup", lambda run_dir, cal, seed: {
        "work_speedup": 9.0, "work_speedup_ci_low": 8.0, "work_speedup_ci_high": 10.0} if run_dir != "spd-3.0" else {})
    front = frontier(index, calibration=object())
    assert front.set_index("run_id").loc["cascade-4.0", "work_speedup"] == 9.0
    assert math.isnan(front.set_index("run_id").loc["spd-3.0", "work_speedup"])  # no counts: no figure, not the index's


def test_cli_refuses_an_unreadable_calibration(tmp_path, capsys):
    bad = tmp_path / "cal.json"
    bad.write_text("{}")
    assert main(["--results", str(tmp_path), "--calibration", str(bad)]) == 2
    assert "error: --calibration" in capsys.readouterr().err


def test_detectable_loss_needs_more_lost_than_gained():
    assert not detectable_loss(pd.Series(dict(lost=0, gained=9, sign_p=sign_test_p(0, 9))))  # a gain is no loss
    assert detectable_loss(pd.Series(dict(lost=9, gained=0, sign_p=sign_test_p(9, 0))))


def test_cli_refuses_a_bad_budget_and_an_empty_results_folder(tmp_path, capsys):
    assert main(["--results", str(tmp_path), "--budget", "2"]) == 2
    assert "error: --budget=2.0" in capsys.readouterr().err
    assert main(["--results", str(tmp_path)]) == 2
    assert "no finished runs" in capsys.readouterr().err
    assert not math.isnan(sign_test_p(1, 1))


def test_the_figure_draws_tau_and_predicted_speedup_with_both_intervals(index, tmp_path, monkeypatch):
    import matplotlib.axes

    from loosespec_bench.report.frontier import plot_frontier

    calls = []
    real = matplotlib.axes.Axes.errorbar
    monkeypatch.setattr(matplotlib.axes.Axes, "errorbar", lambda self, *a, **k: calls.append((a, k)) or real(self, *a, **k))
    paths = plot_frontier(frontier(index), tmp_path)
    assert [p.name for p in paths] == ["frontier_gsm8k.png", "frontier_gsm8k.pdf", "frontier_gsm8k.caption.md", "frontier_gsm8k.caption.tex"]
    assert all(p.stat().st_size > 0 for p in paths)
    # the paper's width and a caption beside the figure that says what the intervals are
    from matplotlib.image import imread

    assert imread(paths[0]).shape[1] == 7 * 300
    caption = paths[2].read_text()
    assert "GSM8K" in caption and "95% paired bootstrap interval" in caption and "exact for 0/1 scores" in caption
    # three rules, on the tau panel and the predicted-speedup panel, each drawn twice: the faint
    # x intervals, then the points with their y intervals
    assert len(calls) == 2 * 3 * 2
    # cascade's points: net lost per 100 = 0, 6.7, 30; the score difference's interval [d - 0.1, d + 0.05]
    # becomes [x - 5, x + 10] on the net-lost axis.
    (x, y), kw = next((a, k) for a, k in calls if list(a[1]) == [3.5, 4.0, 5.0] and "xerr" in k)
    lo, hi = kw["xerr"]
    assert list(lo) == pytest.approx([5.0] * 3) and list(hi) == pytest.approx([10.0] * 3)
    (_, _), kw = next((a, k) for a, k in calls if list(a[1]) == [3.5, 4.0, 5.0] and "yerr" in k)
    assert kw["label"] == "cascade" and kw["color"] != next(k["color"] for a, k in calls if k.get("label") == "spd")
