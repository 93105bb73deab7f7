"""The loose-rules frontier and its matched table at non-inferiority margins (issue 68) on a
hand-made index with known answers."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest

from loosespec_bench.report.frontier import frontier, loss_bound, main, matched, non_inferior
from loosespec_bench.measure.stats.exact import ExactPairedBinary
from loosespec_bench.measure.stats.exact import sign_test_p


def point(method, drafter, tau, lost, gained, n=30, right=None, **knobs):
    right = n // 2 if right is None else right
    return dict(status="complete", method=method, drafter=drafter, dataset="gsm8k", tau=tau, tau_ci_low=tau - 0.1,
                baseline_accuracy=right / n,
                tau_ci_high=tau + 0.1, speedup=tau / 2, work_speedup=tau / 3, work_speedup_ci_low=tau / 3 - 0.1,
                work_speedup_ci_high=tau / 3 + 0.1, quality_lost=lost, quality_gained=gained,
                quality_sign_p=sign_test_p(lost, gained), n_problems=n, score_diff=(gained - lost) / n,
                score_diff_ci_low=(gained - lost) / n - 0.1, score_diff_ci_high=(gained - lost) / n + 0.05, run_id=f"{method}-{tau}", **knobs)


@pytest.fixture
def index():
    return pd.DataFrame([
        point("spd", "model", 3.0, 0, 0),
        point("cascade", "model", 3.5, 1, 1, alpha=0.9),
        point("cascade", "model", 4.0, 2, 0, alpha=0.5),
        point("cascade", "model", 5.0, 9, 0, alpha=0.05),  # 9 of 15 right answers lost
        point("fly", "mla", 4.2, 0, 0, theta=0.3),
    ])


def test_frontier_names_rules_with_their_drafter_and_sorts_by_tau(index):
    front = frontier(index)
    assert set(front["rule"]) == {"spd", "cascade", "fly + mla"}
    cas = front[front["rule"] == "cascade"]
    assert cas["tau"].tolist() == [3.5, 4.0, 5.0]
    assert cas["net_lost"].tolist() == [0, 2, 9]


def test_every_point_carries_the_exact_interval_of_the_difference(index):
    front = frontier(index).set_index("run_id")
    e = ExactPairedBinary(9, 0, 15, 15)
    row = front.loc["cascade-5.0"]
    assert (row["score_diff"], row["score_diff_ci_low"], row["score_diff_ci_high"]) == pytest.approx(e.interval("difference"))
    assert row["loss_upper"] == pytest.approx(-e.lower("difference", 0.05))
    from loosespec_bench.report.frontier import frontier_markdown

    md = frontier_markdown(frontier(index))
    assert "| 9 / 0 (30) | -30.0 [" in md and "no detectable" not in md and "best" not in md


def test_matched_table_known_answers():
    """n = 400, the target alone right on 200: a rule with three points, each tested at 0.05 / 3."""
    ix = pd.DataFrame([
        point("cascade", "model", 3.5, 0, 0, n=400, right=200, alpha=0.9),   # bound 0.9 points at 0.05 / 3
        point("cascade", "model", 4.0, 4, 0, n=400, right=200, alpha=0.5),   # bound 2.5 points
        point("cascade", "model", 5.0, 40, 0, n=400, right=200, alpha=0.1),  # a 10-point loss: never
        point("spd", "model", 3.0, 0, 0, n=400, right=200),
    ])
    front = frontier(ix)
    table = matched(front, margins=(2, 5, 20), alpha=0.05).set_index(["rule", "margin"])
    cas = table.loc[("cascade", 5.0)]
    assert cas["points"] == 3 and cas["alpha_each"] == pytest.approx(0.05 / 3)
    assert cas["non_inferior"] == 2 and cas["tau"] == 4.0 and cas["lost"] == 4  # the highest-tau non-inferior point
    assert table.loc[("cascade", 2.0), "non_inferior"] == 1 and table.loc[("cascade", 2.0), "tau"] == 3.5
    assert matched(front, margins=(0.5,), alpha=0.05).set_index("rule").loc["cascade", "setting"] == "none"
    assert table.loc[("cascade", 20.0), "non_inferior"] == 3 and table.loc[("cascade", 20.0), "tau"] == 5.0
    # the per-point verdict is the exact bound at alpha / m against the margin
    row = front.set_index("run_id").loc["cascade-4.0"]
    bound = loss_bound(row, 0.05 / 3)
    assert bound == pytest.approx(-ExactPairedBinary(4, 0, 200, 200).lower("difference", 0.05 / 3))
    assert non_inferior(row, 0.05, 0.05 / 3) == (bound < 0.05) is True
    # SPD alone (m = 1) is tested at the full alpha.
    assert table.loc[("spd", 2.0), "non_inferior"] == 1
    from loosespec_bench.report.frontier import matched_markdown

    md = matched_markdown(matched(front, margins=(5,), alpha=0.05), 0.05)
    assert "| gsm8k | cascade | 5 | 2 / 3 |" in md and "| 4.00 [3.90, 4.10] | 1.33 [1.23, 1.43] | 4 / 0 (400) | -1.0 [" in md
    assert "no detectable" not in md.lower() and "best tau" not in md


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


def test_cli_refuses_bad_margins_and_an_empty_results_folder(tmp_path, capsys):
    assert main(["--results", str(tmp_path), "--margins", "2,x"]) == 2
    assert "error: --margins=2,x" in capsys.readouterr().err
    assert main(["--results", str(tmp_path), "--margins", "150"]) == 2
    capsys.readouterr()
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
    # cascade's points: net lost per 100 = 0, 6.7, 30; x intervals: the exact interval of the difference
    # (net lost = -difference), from the counts.
    (x, y), kw = next((a, k) for a, k in calls if list(a[1]) == [3.5, 4.0, 5.0] and "xerr" in k)
    lo, hi = kw["xerr"]
    f = frontier(index).set_index("run_id")
    for i, rid in enumerate(["cascade-3.5", "cascade-4.0", "cascade-5.0"]):
        r = f.loc[rid]
        assert x.iloc[i] - lo.iloc[i] == pytest.approx(-100 * r["score_diff_ci_high"])
        assert x.iloc[i] + hi.iloc[i] == pytest.approx(-100 * r["score_diff_ci_low"])
    (_, _), kw = next((a, k) for a, k in calls if list(a[1]) == [3.5, 4.0, 5.0] and "yerr" in k)
    assert kw["label"] == "cascade" and kw["color"] != next(k["color"] for a, k in calls if k.get("label") == "spd")


def test_certifications_join_the_report(tmp_path):
    from loosespec_bench.report.frontier import certified_markdown

    assert "No certification" in certified_markdown(tmp_path)
    (tmp_path / "certify_gsm8k").mkdir()
    (tmp_path / "certify_gsm8k" / "certification_method_theta_delta5pts_train.md").write_text("## Certification: method.theta\n")
    assert "## Certification: method.theta" in certified_markdown(tmp_path)


def test_a_dozen_rules_become_small_multiples_in_the_palette_with_a_short_legend(tmp_path):
    """Issue 72: the loose-rule grid's twelve rules drew twelve tab10 colours and a twelve-entry
    legend; each rule now has its own panel (titled by it, the others grey behind it), the legend
    stays within MAX_LEGEND, every colour is the palette's or a grey, and the figure fits a page."""
    from matplotlib.colors import to_hex, to_rgb

    from loosespec_bench.report.frontier import frontier_figure, plot_frontier
    from loosespec_bench.report.plots.figure import MAX_HEIGHT, MAX_LEGEND, PALETTE

    rules = [f"rule{i:02d}" for i in range(12)]
    index = pd.DataFrame([point(r, "model", 3.0 + i / 10 + j, j, 0, alpha=j) for i, r in enumerate(rules) for j in range(2)])
    front = frontier(index)
    paths = plot_frontier(front, tmp_path)
    from matplotlib.image import imread

    assert imread(paths[0]).shape[0] <= MAX_HEIGHT * 300
    fig = frontier_figure("gsm8k", front, {r: ("#0072b2", "o") for r in rules}, {}, "")
    titled = [ax for ax in fig.axes if ax.get_visible() and ax.get_title()]
    # tau and predicted speedup: a panel per rule for each
    assert sorted(ax.get_title() for ax in titled) == sorted(rules * 2)
    assert len(fig.legends) == 1 and len(fig.legends[0].get_texts()) <= MAX_LEGEND
    assert fig.get_figheight() <= MAX_HEIGHT
    # The palette's colours or greys only (no tab10).
    colours = set()
    for ax in fig.axes:
        for line in ax.get_lines():  # what is drawn: a line where it has a style, a marker's edge where it has one
            if line.get_linestyle() not in ("None", "none", ""):
                colours.add(to_hex(line.get_color()))
            if line.get_marker() not in ("None", "none", "", None):
                colours.add(to_hex(line.get_markeredgecolor()))
    for c in colours:
        r, g, b = to_rgb(c)
        assert c in PALETTE or (r == g == b), c
    # Each panel's own rule in colour, the eleven others grey: 11 context points of 2 settings each.
    ax = next(a for a in titled if a.get_title() == "rule00")
    grey = [line for line in ax.get_lines() if len(set(to_rgb(line.get_color()))) == 1 and line.get_marker() == "o"]
    assert sum(len(line.get_xdata()) for line in grey) == 2 * 11


def test_the_calibration_is_read_through_the_gate_and_checked(index, tmp_path, capsys, monkeypatch):
    """Issue 74: --calibration goes through the safe-file gate and the calibration's declaration:
    a link, NaN costs or another pair's calibration are one error line each."""
    import json

    good = json.loads((Path(__file__).resolve().parents[2] / "results" / "loose_rules" / "calibration_fp32.json").read_text())
    nan = dict(good, target=dict(good["target"], lm_head_row_s=float("nan")))
    (tmp_path / "nan.json").write_text(json.dumps(nan))
    assert main(["--results", str(tmp_path), "--calibration", str(tmp_path / "nan.json")]) == 2
    assert "error: --calibration" in capsys.readouterr().err
    (tmp_path / "good.json").write_text(json.dumps(good))
    (tmp_path / "link.json").symlink_to(tmp_path / "good.json")
    assert main(["--results", str(tmp_path), "--calibration", str(tmp_path / "link.json")]) == 2
    assert "symbolic link" in capsys.readouterr().err
    # Read and checked, then refused for runs of another pair: it prices only its own pair's forwards.
    monkeypatch.setattr("loosespec_bench.report.index.load_index", lambda results, experiment: index.assign(pair="tiny"))
    assert main(["--results", str(tmp_path), "--calibration", str(tmp_path / "good.json"), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.count("error:") == 1 and "measured for pair qwen2.5-coder-0.5b-1.5b" in err and "tiny" in err
    assert not (tmp_path / "out").exists()
