"""Figures a reviewer accepts: a panel per data set, a fixed colour per method, human labels (no
hashes, no nan), error bars from the summaries' intervals, at most 8 legend entries, nothing
clipped, and sweep lines only through runs that share every other setting."""

from __future__ import annotations

import re

import pytest

pd = pytest.importorskip("pandas")
pytest.importorskip("matplotlib")

from matplotlib.figure import Figure  # noqa: E402
from matplotlib.image import imread  # noqa: E402

from loosespec_bench.report.plots import build_figures  # noqa: E402
from loosespec_bench.report.plots.acceptance import fig_acceptance_by_position  # noqa: E402
from loosespec_bench.report.plots.entropy import fig_fly_entropy  # noqa: E402
from loosespec_bench.report.plots.figure import MAX_LEGEND, METHOD_COLORS, save  # noqa: E402
from loosespec_bench.report.plots.sweeps import fig_vs_param  # noqa: E402
from loosespec_bench.report.plots.tradeoff import fig_tradeoff  # noqa: E402

from .test_tables import BASE_CFG, _index, _run, _variant  # noqa: E402

HASHY = re.compile(r"[0-9a-f]{8,}|\bnan\b|\[config ")


def _many_runs() -> pd.DataFrame:
    rows = []
    for ds in ("gsm8k", "mgsm"):
        for theta in (0.2, 0.3, 0.5):
            for k in range(6, 16):  # 10 configurations per theta sweep: more series than a legend holds
                cfg = _variant(method__theta=theta, method__window=k, dataset__name=ds)
                rows.append(_run(cfg, tau=5.0 + theta, speedup=1.0 + theta, run_id=f"{ds}-{theta}-{k}",
                                 speedup_ci_low=0.9 + theta, speedup_ci_high=1.1 + theta, ci_level=0.95,
                                 retention_ci_low=0.9, retention_ci_high=1.0, acceptance_by_position=[0.9, 0.5]))
    spd = _variant(dataset__name="gsm8k")
    spd["method"] = {"name": "spd", "_target_": "loosespec_bench.verifiers.spd.SPD"}
    rows.append(_run(spd, tau=4.0, speedup=1.1, run_id="spd", acceptance_by_position=[0.8, 0.4]))
    return _index(rows)


def _texts(fig) -> list[str]:
    out = [t.get_text() for t in fig.texts] + [fig._suptitle.get_text() if fig._suptitle else ""]
    for legend in fig.legends:
        out += [t.get_text() for t in legend.get_texts()] + [legend.get_title().get_text()]
    for ax in fig.axes:
        out += [ax.get_title(), ax.get_xlabel(), ax.get_ylabel()] + [t.get_text() for t in ax.texts]
    return out


def test_every_figure_has_human_labels_and_at_most_eight_legend_entries():
    for name, fig in build_figures(_many_runs()).items():
        texts = _texts(fig)
        assert not [t for t in texts if HASHY.search(t)], (name, [t for t in texts if HASHY.search(t)])
        for legend in fig.legends + [ax.get_legend() for ax in fig.axes if ax.get_legend()]:
            assert len(legend.get_texts()) <= MAX_LEGEND, name


def test_one_panel_per_data_set_and_lines_only_through_one_sweep():
    fig = fig_vs_param(_many_runs(), "theta")
    titles = sorted(ax.get_title() for ax in fig.axes if ax.get_title())
    assert titles == ["gsm8k", "mgsm"]
    # Each theta sweep is one configuration of every other setting (here: W): its line has the
    # three theta points; the single SPD run is no sweep of theta and is not drawn.
    series = [c.lines[0] for ax in fig.axes for c in ax.containers]
    assert len(series) == 2 * 2 * 10  # (speedup, tau) x data sets x W values
    assert all(list(line.get_xdata()) == [0.2, 0.3, 0.5] for line in series)


def test_error_bars_come_from_the_intervals():
    fig = fig_vs_param(_many_runs(), "theta")
    bars = [c for ax in fig.axes for c in ax.containers if getattr(c, "has_yerr", False)]
    assert bars  # errorbar containers with y error
    seg = bars[0].lines[2][0].get_segments()[0]  # the first point's bar: [low, high]
    assert seg[1][1] - seg[0][1] == pytest.approx(0.2)
    trade = fig_tradeoff(_many_runs())
    assert any(getattr(c, "has_xerr", False) and c.has_yerr for ax in trade.axes for c in ax.containers)


def test_a_method_has_the_same_colour_in_every_figure():
    df = _many_runs()
    df = df[(df["W"] == 6) | (df["method"] == "spd")]
    acc = fig_acceptance_by_position(df)
    colors = {line.get_label().split(" (")[0]: line.get_color() for ax in acc.axes for line in ax.get_lines()
              if not line.get_label().startswith("_")}
    # These FLy runs draft with MLA: FLy + MLA is its own series (FLy's main table has both rows).
    assert colors["FLy"] == METHOD_COLORS["FLy + MLA"] != METHOD_COLORS["FLy"] and colors["SPD"] == METHOD_COLORS["SPD"]
    trade = fig_tradeoff(df)
    legend = {t.get_text() for t in trade.legends[0].get_texts()}
    assert {"FLy + MLA", "SPD"} <= legend


def test_a_set_without_any_retention_gets_no_empty_panel_but_a_caption():
    """MGSM under the paper's prompt on the CPU pair: the target alone scored 0, so no run there
    has a retention; its panel would be empty."""
    df = _many_runs()
    df.loc[df["dataset"] == "mgsm", "retention"] = float("nan")
    fig = fig_tradeoff(df)
    assert [ax.get_title() for ax in fig.axes if ax.get_visible()] == ["gsm8k"]
    assert any("no panel for mgsm" in t for t in _texts(fig))
    # Named case (session 14): a fresh target alone found 2 of MGSM's 30, so its runs had a
    # retention of 0.5 or none, never with an interval: no panel either.
    df = _many_runs()
    df.loc[df["dataset"] == "mgsm", ["retention", "retention_ci_low", "retention_ci_high"]] = [0.5, float("nan"), float("nan")]
    fig = fig_tradeoff(df)
    assert [ax.get_title() for ax in fig.axes if ax.get_visible()] == ["gsm8k"]
    assert any("no panel for mgsm" in " ".join(t.split()) and "with an interval" in " ".join(t.split()) for t in _texts(fig))
    # Every set without retention: the one note panel stays, no caption about panels.
    df["retention"] = float("nan")
    assert not any("no panel for" in t for t in _texts(fig_tradeoff(df)))


def test_retention_vs_speedup_says_whose_cpu_each_panel_timed_on():
    """Two CPUs in one figure: each panel names its CPU and the caption tells them apart."""
    df = _many_runs()
    assert not any("CPU" in ax.get_title() for ax in fig_tradeoff(df).axes)  # one CPU: nothing to say
    df["machine"] = "AMD EPYC (signature not recorded)"
    df.loc[df["dataset"] == "mgsm", "machine"] = "AMD EPYC (AuthenticAMD family 25 model 1 stepping 1, AVX2)"
    fig = fig_tradeoff(df)
    titles = sorted(ax.get_title() for ax in fig.axes if ax.get_visible() and ax.get_title())
    assert titles == ["gsm8k (speed on CPU B)", "mgsm (speed on CPU A)"]
    captions = [" ".join(t.split()) for t in _texts(fig)]  # the caption wraps
    assert any("CPU A: AMD EPYC (AuthenticAMD family 25" in t and "CPU B: AMD EPYC (signature not recorded)" in t
               for t in captions)


def test_saved_figures_are_not_clipped(tmp_path):
    fig = fig_vs_param(_many_runs(), "theta")
    fig.text(1.2, 0.5, "a label past the right edge")  # what a long legend or caption can do
    (png,) = save(fig, tmp_path, "theta", formats=("png",), dpi=50)
    height, width = imread(png).shape[:2]
    assert width > fig.get_figwidth() * 50 * 1.15  # the file grew to hold it: the bounding box is the content


def test_a_figure_without_data_says_so():
    fig = fig_vs_param(_index([_run(BASE_CFG, tau=5.0, speedup=1.0)]), "W")
    assert any("no sweep" in t.get_text() for ax in fig.axes for t in ax.texts)


def test_points_of_one_method_are_tagged_with_the_setting_that_differs():
    from loosespec_bench.report.plots.figure import distinguishing

    labels = {1: "SPD (model, K=10)", 2: "SPD (model, K=15)", 3: "FLy (mla, K=15, θ=0.3, W=6)"}
    names = {1: "SPD", 2: "SPD", 3: "FLy + MLA"}
    assert distinguishing(labels, names) == {1: "K=10", 2: "K=15"}
    # A one-knob-at-a-time sweep around the defaults (GSM8K's θ, W and K): each tag is the knob
    # it moves; the defaults' own point keeps its full tag.
    sweep = {i: f"FLy (mla, {k}, {t}, {w})" for i, (k, t, w) in enumerate([
        ("K=15", "θ=0.3", "W=6"), ("K=15", "θ=0.8", "W=6"), ("K=15", "θ=0.2", "W=6"),
        ("K=15", "θ=0.3", "W=3"), ("K=10", "θ=0.3", "W=6")])}
    assert distinguishing(sweep, {i: "FLy + MLA" for i in sweep}) == {
        0: "K=15, θ=0.3, W=6", 1: "θ=0.8", 2: "θ=0.2", 3: "W=3", 4: "K=10"}


def test_an_entropy_panel_names_the_runs_it_pools():
    # Two FLy runs at one (mode, θ), one with MLA, one without: one panel, and its caption says
    # both are in it (the histogram alone would read as one configuration's).
    step = {"rule": "fly", "accepted": 1, "mismatch_positions": [0, 1], "mismatch_entropy": [0.9, 0.1], "loose_accepted": [0]}
    runs = [{"records": [{"steps": [step]}], "mode": "code", "theta": 0.3, "pooled_label": label, "dataset": "gsm8k"}
            for label in ("FLy (mla, K=15, W=6)", "FLy (model, K=15, W=6)")]
    fig = fig_fly_entropy(runs)
    visible = [ax for ax in fig.axes if ax.get_visible()]
    assert len(visible) == 1 and visible[0].get_title() == "mode=code, θ=0.3"
    caption = " ".join(t.get_text() for t in visible[0].texts).replace("\n", " ")
    assert caption.startswith("2 runs pooled:") and "FLy (mla, K=15, W=6) on gsm8k" in caption
    assert "FLy (model, K=15, W=6) on gsm8k" in caption


def test_entropy_panels_show_one_theta_sweep_not_every_run_at_each_theta():
    # Named case: the θ = 0.3 panel pooled 17 FLy runs on seven data sets (FLy's default θ), the
    # θ = 0.2 and 0.8 panels one GSM8K run each: panels of different things side by side.
    step = {"rule": "fly", "accepted": 1, "mismatch_positions": [0, 1], "mismatch_entropy": [0.9, 0.1], "loose_accepted": [0]}

    def run(theta, dataset, sweep):
        return {"records": [{"steps": [step]}], "mode": "code", "theta": theta, "pooled_label": "FLy (mla, K=15, W=6)",
                "dataset": dataset, "sweep": sweep}

    runs = [run(t, "gsm8k", ("gsm8k", "mla")) for t in (0.2, 0.3, 0.8)]
    runs += [run(0.3, ds, (ds, "mla")) for ds in ("humaneval", "niah")] + [run(0.3, "gsm8k", ("gsm8k", "model"))]
    fig = fig_fly_entropy(runs)
    panels = [ax for ax in fig.axes if ax.get_visible()]
    assert [ax.get_title() for ax in panels] == ["mode=code, θ=0.2", "mode=code, θ=0.3", "mode=code, θ=0.8"]
    for ax in panels:  # one GSM8K run each
        assert " ".join(t.get_text() for t in ax.texts).replace("\n", " ") == "1 run: FLy (mla, K=15, W=6) on gsm8k"
    assert any("3 FLy run(s) outside the θ sweep" in t.get_text() for t in fig.texts)
    # Without a sweep (every run at one θ) every run is pooled as before.
    single = fig_fly_entropy([run(0.3, ds, (ds, "mla")) for ds in ("gsm8k", "niah")])
    (ax,) = [a for a in single.axes if a.get_visible()]
    assert ax.texts[0].get_text().startswith("2 runs pooled:")


def test_acceptance_curves_carry_their_interval_bands_and_a_coincident_curve_stays_visible():
    fly = _variant(dataset__name="gsm8k", drafter__name="model")
    mla = _variant(dataset__name="gsm8k", drafter__name="mla")
    spd = _variant(dataset__name="gsm8k", drafter__name="model")
    spd["method"] = {"name": "spd", "_target_": "loosespec_bench.verifiers.spd.SPD"}
    band = dict(acceptance_by_position_ci_low=[0.85, 0.45, None], acceptance_by_position_ci_high=[0.95, 0.55, None])
    rows = [
        _run(fly, tau=5.0, speedup=1.0, run_id="fly", acceptance_by_position=[0.9, 0.5, 0.3], **band),
        # MLA drafts the same tokens faster: the same curve, which must not vanish under FLy's
        _run(mla, tau=5.0, speedup=1.2, run_id="mla", acceptance_by_position=[0.9, 0.5, 0.3], **band),
        _run(spd, tau=4.0, speedup=1.1, run_id="spd", acceptance_by_position=[0.8, 0.4, 0.2]),  # no interval
    ]
    fig = fig_acceptance_by_position(_index(rows))
    (ax,) = [a for a in fig.axes if a.get_title() == "gsm8k"]
    bands = [c for c in ax.collections if c.get_paths()]
    assert len(bands) == 2  # FLy and FLy + MLA; SPD's summary has no interval
    ys = bands[0].get_paths()[0].vertices[:, 1]
    assert min(ys) == pytest.approx(0.45) and max(ys) == pytest.approx(0.95)  # position 3 undefined: left out
    lines = [line for line in ax.get_lines() if not line.get_label().startswith("_")]
    hollow = [line for line in lines if line.get_markerfacecolor() == "none"]
    assert len(hollow) == 1 and hollow[0].get_markersize() > max(line.get_markersize() for line in lines if line not in hollow)
    caption = " ".join(_texts(fig))
    assert "on 2 of 3 curves" in caption and "hollow markers" in caption
    # The same three configurations on a second set: still counted once each, not per panel.
    more = [_run(_variant(**{"dataset__name": "mbpp", "drafter__name": d}), tau=5.0, speedup=1.0, run_id=f"{d}-mbpp",
                 acceptance_by_position=[0.9, 0.5, 0.3], **band) for d in ("model", "mla")]
    spd_mbpp = _variant(dataset__name="mbpp", drafter__name="model")
    spd_mbpp["method"] = spd["method"]
    more.append(_run(spd_mbpp, tau=4.0, speedup=1.1, run_id="spd-mbpp", acceptance_by_position=[0.8, 0.4, 0.2]))
    caption = " ".join(_texts(fig_acceptance_by_position(_index(rows + more))))
    assert "on 2 of 3 curves" in caption


def test_tags_of_nearby_points_do_not_print_into_each_other():
    from loosespec_bench.report.plots.tradeoff import _place_tags

    fig = Figure(figsize=(4, 3), dpi=100)
    ax = fig.add_subplot()
    ax.plot([1.0, 1.2], [0.4, 1.6])  # fixes the limits
    # Named case: FLy at theta 0.3 and 0.2, 0.09x apart at the same retention (the committed plot).
    _place_tags(ax, [(1.11, 1.0, "θ=0.3, W=6", "k"), (1.12, 1.0, "θ=0.2, W=6", "k")])
    offsets = [a.xyann for a in ax.texts]
    assert len(offsets) == 2 and offsets[0] != offsets[1]


def test_an_unfinished_run_is_not_said_to_predate_the_intervals():
    from loosespec_bench.report.plots.figure import interval_caption

    df = pd.DataFrame({"intervals": [True, False, False], "status": ["complete", "partial", "complete"]})
    text = interval_caption(df)
    assert "1 of 3 runs predate the interval fields" in text and "1 of 3 runs unfinished" in text


def test_a_tag_steps_aside_from_another_points_marker():
    from loosespec_bench.report.plots.tradeoff import _place_tags

    fig = Figure(figsize=(4, 3), dpi=100)
    ax = fig.add_subplot()
    ax.plot([1.0, 1.6], [0.85, 1.1])  # fixes the limits
    # Named case: NIAH's panel, SPD K = 15 at 1.27x with SPD K = 10 and PLD just right of it at
    # 1.32x and 1.33x: the upper-right tag "K=15" printed under their markers.
    _place_tags(ax, [(1.27, 0.998, "K=15", "k")], markers=[(1.27, 0.998), (1.32, 1.0), (1.33, 1.0)])
    (tag,) = ax.texts
    assert tag.xyann != (4, 3)  # not the upper-right corner, where the markers are
    _place_tags(ax, [(1.27, 0.998, "K=15", "k")])  # nothing beside it: the first corner
    assert ax.texts[-1].xyann == (4, 3)


def test_a_sweeps_speedups_on_two_cpus_are_not_one_line_but_its_tau_is():
    # Named case: HumanEval's SPD at K = 15 (unrecorded AVX-512 machine) and K = 10 (family 26
    # CPU) were joined into one speedup line falling from 1.17x to 1.02x: a CPU change, not K's.
    rows = []
    for k, s, cpu in ((10, 1.17, "AMD EPYC (family 26)"), (15, 1.02, "AMD EPYC (signature not recorded)")):
        spd = _variant(dataset__name="humaneval", drafter__name="model", drafter__k=k)
        spd["method"] = {"name": "spd", "_target_": "loosespec_bench.verifiers.spd.SPD"}
        row = _run(spd, tau=7.0 + k / 10, speedup=s, run_id=f"spd{k}")
        row["machine"] = cpu
        rows.append(row)
    fig = fig_vs_param(_index(rows), "K")
    speed_ax, tau_ax = [a for a in fig.axes if a.get_visible() and a.lines][:2]

    def joined(ax):  # data lines through both K (not the 1x reference line)
        return [ln for ln in ax.lines if set(map(float, ln.get_xdata())) == {10.0, 15.0}]

    assert joined(speed_ax) == [] and len(joined(tau_ax)) == 1
    # one of the two unjoined speedups is drawn hollow: it is not on the other's line
    faces = [ln.get_markerfacecolor() for ln in speed_ax.lines if len(ln.get_xdata()) == 1 and ln.get_marker() not in ("", "None")]
    assert sorted(f == "white" for f in faces) == [False, True]
    assert "CPU A + B" in speed_ax.get_title()
    assert any("not joined" in t for t in _texts(fig))


def test_a_pareto_frontier_joins_only_points_timed_on_one_cpu():
    # Named case: HumanEval's panel mixed FLy + MLA and SPD K = 15 (unrecorded machine) with the
    # rest (family 26 CPU), and one frontier stepped from one CPU's speedups to the other's.
    rows = []
    for k, s, q, cpu in ((10, 1.30, 1.0, "AMD EPYC (family 26)"), (15, 1.10, 1.2, "AMD EPYC (signature not recorded)"),
                         (20, 1.05, 0.9, "AMD EPYC (signature not recorded)")):
        spd = _variant(dataset__name="humaneval", drafter__name="model", drafter__k=k)
        spd["method"] = {"name": "spd", "_target_": "loosespec_bench.verifiers.spd.SPD"}
        row = _run(spd, tau=7.0, speedup=s, run_id=f"spd{k}")
        row.update(machine=cpu, retention=q)
        rows.append(row)
    fig = fig_tradeoff(_index(rows))
    ax = next(a for a in fig.axes if a.get_visible() and a.lines)
    fronts = [set(map(float, ln.get_xdata())) for ln in ax.lines if ln.get_color() == "black"]
    # Two frontiers: CPU A's (K = 10 alone) and CPU B's (K = 15 dominates K = 20); none crosses CPUs.
    assert sorted(map(sorted, fronts)) == [[1.1], [1.3]]
    assert {"CPU A", "CPU B"} <= {t.get_text() for t in ax.texts}
    assert any("one per CPU" in t for t in _texts(fig))
    # One CPU: one frontier, no CPU tags.
    for r in rows:
        r["machine"] = "AMD EPYC (family 26)"
    ax = next(a for a in fig_tradeoff(_index(rows)).axes if a.get_visible() and a.lines)
    assert [sorted(map(float, ln.get_xdata())) for ln in ax.lines if ln.get_color() == "black"] == [[1.1, 1.3]]
    assert not {"CPU A", "CPU B"} & {t.get_text() for t in ax.texts}


def test_a_sweep_figure_shows_the_quality_change_beside_speed_and_tau():
    # Named case: the θ and W ablations claim "tau falls and accuracy is kept"; the sweep figures
    # drew speedup and tau only, so the half of the claim about accuracy had no figure.
    rows = []
    for theta, diff in ((0.2, -0.10), (0.5, 0.0), (0.8, 0.05)):
        cfg = _variant(method__theta=theta, dataset__name="gsm8k")
        rows.append(_run(cfg, tau=9.0 - theta, speedup=1.1, run_id=f"t{theta}", accuracy_diff=diff,
                         accuracy_diff_ci_low=diff - 0.1, accuracy_diff_ci_high=diff + 0.08, ci_level=0.95))
    fig = fig_vs_param(_index(rows), "theta")
    axes = [a for a in fig.axes if a.get_visible()]
    assert len(axes) == 3  # speedup, tau, quality change
    quality = axes[2]
    assert "accuracy − target alone's" in quality.get_ylabel()
    (bars,) = [c for c in quality.containers if getattr(c, "has_yerr", False)]
    assert list(bars.lines[0].get_ydata()) == pytest.approx([-0.10, 0.0, 0.05])
    seg = bars.lines[2][0].get_segments()[0]  # θ = 0.2's interval, [-0.2, -0.02]
    assert (seg[0][1], seg[1][1]) == pytest.approx((-0.20, -0.02))
    assert any(ln.get_ydata()[0] == 0.0 and ln.get_linestyle() == "--" for ln in quality.lines)  # the no-change line
    assert any("quality change" in t for t in _texts(fig))
    # Runs without a paired quality difference keep the two-row figure.
    assert len([a for a in fig_vs_param(_many_runs(), "theta").axes if a.get_visible()]) == 2 * 2


def test_a_crowded_tag_moves_further_out_on_a_leader_line_instead_of_onto_another_tag():
    from loosespec_bench.report.plots.tradeoff import _place_tags

    fig = Figure(figsize=(4, 3), dpi=100)
    ax = fig.add_subplot()
    ax.plot([1.0, 1.4], [0.4, 1.6])  # fixes the limits
    # Named case: GSM8K's panel, nine FLy + MLA points within 0.1x; "W=9" and "θ=0.2" sat on
    # (1.19, 1.0) and (1.20, 1.0), every corner of the second was taken and it was printed on
    # the first's tag. Here six tags of six points on one spot.
    tags = [(1.19, 1.0, f"tag{i}", "k") for i in range(6)]
    _place_tags(ax, tags)
    boxes = []
    for a in ax.texts:
        x0 = a.xyann[0] if a.get_horizontalalignment() == "left" else a.xyann[0] - 0.6 * 7 * 4
        boxes.append((x0, a.xyann[1], x0 + 0.6 * 7 * 4, a.xyann[1] + 7 * 1.2))
    # in offset points from the one spot: no two boxes intersect
    for i, b in enumerate(boxes):
        for c in boxes[i + 1:]:
            assert not (b[0] < c[2] and c[0] < b[2] and b[1] < c[3] and c[1] < b[3]), (b, c)
    moved = [a for a in ax.texts if a.arrow_patch is not None]
    assert moved and all(abs(a.xyann[1]) > 3 + 7 * 1.2 for a in moved)  # only the tags off their corner have a leader


def test_a_saved_figure_is_the_same_bytes_each_time(tmp_path):
    # The committed report regenerates identically: a PDF without its creation date.
    import matplotlib.pyplot as plt

    from loosespec_bench.report.plots.figure import save

    fig, ax = plt.subplots()
    ax.plot([0, 1], [1, 2])
    first = {p.suffix: p.read_bytes() for p in save(fig, tmp_path / "a", "f")}
    second = {p.suffix: p.read_bytes() for p in save(fig, tmp_path / "b", "f")}
    plt.close(fig)
    assert first == second and set(first) == {".png", ".pdf"}
    assert b"CreationDate" not in first[".pdf"]


def test_a_sweep_line_is_cut_where_another_cpus_point_stands_between():
    # θ = 0.5 timed on another CPU: the line is 0.2-0.3 and a lone 0.8, never 0.3 -> 0.8 across 0.5.
    from loosespec_bench.report.plots.sweeps import adjacent_runs

    xs = [0.2, 0.3, 0.5, 0.8]
    piece = [(0.2, 1.0, None), (0.3, 1.1, None), (0.8, 1.2, None)]
    assert [[p[0] for p in run] for run in adjacent_runs(piece, xs)] == [[0.2, 0.3], [0.8]]
    assert [[p[0] for p in run] for run in adjacent_runs(piece, [0.2, 0.3, 0.8])] == [[0.2, 0.3, 0.8]]
    assert adjacent_runs([(0.5, 1.0, None)], xs) == [[(0.5, 1.0, None)]]
