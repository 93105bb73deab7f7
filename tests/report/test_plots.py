"""Figures a reviewer accepts: sized for a paper (3.3 or 7 in wide, text >= 7 pt at print size,
the caption in files beside the figure), a panel per data set (and CPU, where speed is compared),
a fixed colour per method, human labels (display names, no hashes, no nan), error bars from the
summaries' intervals, at most 8 legend entries, nothing outside the canvas, tags that do not
overlap, and sweep lines only through runs that share every other setting."""

from __future__ import annotations

import functools
import re

import pytest

pd = pytest.importorskip("pandas")
pytest.importorskip("matplotlib")

from matplotlib.figure import Figure  # noqa: E402
from matplotlib.image import imread  # noqa: E402

from loosespec_bench.report.plots import build_figures  # noqa: E402
from loosespec_bench.report.plots.acceptance import fig_acceptance_by_position  # noqa: E402
from loosespec_bench.report.plots.entropy import fig_fly_entropy  # noqa: E402
from loosespec_bench.report.plots.figure import (  # noqa: E402
    MAX_HEIGHT,
    MAX_LEGEND,
    METHOD_COLORS,
    MIN_TEXT_PT,
    PALETTE,
    WIDTHS,
    caption_of,
    save,
)
from loosespec_bench.report.plots.occasions import fig_speed_occasions  # noqa: E402
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
    """Every text drawn in the figure, and its caption (kept beside it)."""
    out = [t.get_text() for t in fig.texts] + [fig._suptitle.get_text() if fig._suptitle else "", caption_of(fig)]
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
    assert titles == ["GSM8K", "MGSM"]
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
    assert [ax.get_title() for ax in fig.axes if ax.get_visible()] == ["GSM8K"]
    assert any("o panel for MGSM" in t for t in _texts(fig))  # (the caption: "No panel for MGSM: ...")
    # Named case (session 14): a fresh target alone found 2 of MGSM's 30, so its runs had a
    # retention of 0.5 or none, never with an interval: no panel either.
    df = _many_runs()
    df.loc[df["dataset"] == "mgsm", ["retention", "retention_ci_low", "retention_ci_high"]] = [0.5, float("nan"), float("nan")]
    fig = fig_tradeoff(df)
    assert [ax.get_title() for ax in fig.axes if ax.get_visible()] == ["GSM8K"]
    assert any("o panel for MGSM" in " ".join(t.split()) and "with an interval" in " ".join(t.split()) for t in _texts(fig))
    # Every set without retention: the one note panel stays, no caption about panels.
    df["retention"] = float("nan")
    assert not any("o panel for" in t for t in _texts(fig_tradeoff(df)))


def test_retention_vs_speedup_says_whose_cpu_each_panel_timed_on():
    """Two CPUs in one figure: each panel names its CPU and the caption tells them apart."""
    df = _many_runs()
    assert not any("CPU" in ax.get_title() for ax in fig_tradeoff(df).axes)  # one CPU: nothing to say
    df["machine"] = "AMD EPYC (signature not recorded)"
    df.loc[df["dataset"] == "mgsm", "machine"] = "AMD EPYC (AuthenticAMD family 25 model 1 stepping 1, AVX2)"
    fig = fig_tradeoff(df)
    titles = sorted(ax.get_title() for ax in fig.axes if ax.get_visible() and ax.get_title())
    assert titles == ["GSM8K, CPU B", "MGSM, CPU A"]
    captions = [" ".join(t.split()) for t in _texts(fig)]  # the caption wraps
    assert any("CPU A: AMD EPYC (AuthenticAMD family 25" in t and "CPU B: AMD EPYC (signature not recorded)" in t
               for t in captions)


def _mixed_cpu_runs() -> pd.DataFrame:
    """_many_runs on three CPUs: GSM8K's θ = 0.2 on one, its other θ on a second, MGSM on a third."""
    df = _many_runs()
    df["machine"] = "AMD EPYC (signature not recorded)"
    df.loc[df["dataset"] == "mgsm", "machine"] = "AMD EPYC (family 25, AVX2)"
    df.loc[(df["dataset"] == "gsm8k") & (df["theta"] == 0.2), "machine"] = "AMD EPYC (family 26, AVX512)"
    return df


@functools.lru_cache(maxsize=1)
def _all_figures() -> dict:
    """Every figure kind, built once for the module's tests (they only read and draw them)."""
    figs = build_figures(_many_runs())
    figs.update({f"{k} (three CPUs)": v for k, v in build_figures(_mixed_cpu_runs()).items()})
    figs["empty"] = fig_vs_param(_index([_run(BASE_CFG, tau=5.0, speedup=1.0)]), "W")
    figs["speed_occasions"] = fig_speed_occasions({"GSM8K": _speed_report(), "a cross-family pair": _speed_report(("xtok_spd", "xtok_fly"))})
    # The three panels `make report-cpu-evidence` draws (SPEED_PANELS in report.mk), every configuration.
    every = ("spd_k5", "spd_k10", "spd_k15", "fly", "fly_mla", "dropmatch", "pld")
    figs["speed_occasions (three sets)"] = fig_speed_occasions({
        "GSM8K": _speed_report(every), "HumanEval": _speed_report(every),
        "GSM8K/SmolLM2-135M-draft": _speed_report(("xtok_spd", "xtok_fly"))})
    return figs


def _speed_report(configs: tuple[str, ...] = ("spd_k5", "fly", "fly_mla")) -> dict:
    """A speed-evidence report.json as scripts/bench_speed_evidence.py writes it (two occasions)."""
    entry = lambda x: {"speedup": x, "speedup_ci_low": x - 0.1, "speedup_ci_high": x + 0.2, "speedup_by_occasion": [x - 0.05, x + 0.05],
                       "predicted_speedup": x + 0.1, "predicted_speedup_ci_low": x + 0.05, "predicted_speedup_ci_high": x + 0.15}
    return {"n_problems": 40, "n_occasions": 2, "configs": {"ar": {}, **{c: entry(1.0 + 0.1 * i) for i, c in enumerate(configs)}},
            "load": {"others_share_median": 0.012, "others_share_max": 0.04, "contaminated_blocks": 1}}


def test_every_figure_is_one_or_two_columns_wide_with_text_of_at_least_7_points(tmp_path):
    # Named case: speedup_tau_vs_K was 18.7 in wide: its 7-point text printed at 2.6 points on a
    # 7 in page. A figure is drawn at its print size, so a text's size is its size on paper.
    for name, fig in _all_figures().items():
        assert fig.get_figwidth() in WIDTHS, (name, fig.get_figwidth())
        fig.draw_without_rendering()
        texts = [t for t in fig.findobj(lambda a: hasattr(a, "get_fontsize") and hasattr(a, "get_text"))
                 if t.get_visible() and t.get_text().strip()]
        assert texts, name
        small = [(t.get_text(), t.get_fontsize()) for t in texts if t.get_fontsize() < MIN_TEXT_PT]
        assert not small, (name, small)
    # The saved PNG is the print size at 300 dpi: no crop or growth changes the width.
    fig = fig_vs_param(_many_runs(), "theta")
    png = save(fig, tmp_path, "theta", formats=("png",))[0]
    assert imread(png).shape[1] == round(fig.get_figwidth() * 300)


def test_nothing_is_drawn_outside_the_canvas():
    # The file is the figure's print size, not its content's bounding box: every text and
    # legend must lie inside it (the constrained layout makes room below for the legend).
    # Named case: the speed figure's third panel (three sets in one row of 7 in) ran its
    # left-aligned title and its axis label past the right edge.
    for name, fig in _all_figures().items():
        fig.draw_without_rendering()
        renderer = fig.canvas.get_renderer()
        canvas = fig.bbox
        for artist in [*fig.legends, *(t for ax in fig.axes if ax.get_visible() for t in
                                        [ax.title, ax._left_title, ax._right_title, ax.xaxis.label, ax.yaxis.label,
                                         *ax.texts])]:
            if not artist.get_visible() or (hasattr(artist, "get_text") and not artist.get_text()):
                continue
            box = artist.get_window_extent(renderer)
            assert box.x0 >= canvas.x0 - 1 and box.x1 <= canvas.x1 + 1 and box.y0 >= canvas.y0 - 1 and box.y1 <= canvas.y1 + 1, \
                (name, getattr(artist, "get_text", lambda: artist)())


def test_captions_are_files_beside_the_figure_not_text_inside_it(tmp_path):
    # Named case: captions of up to nine lines were drawn inside the figures (fig.text, legend
    # titles): a paper sets its own \caption beside the figure.
    from loosespec_bench.report.plots import write_plots

    for name, fig in _all_figures().items():
        assert len(caption_of(fig)) > 20, name
        # (a boxed note in an empty panel, "no sweep of ... over K", is the panel's content, not a caption)
        inside = [t.get_text() for t in fig.findobj(lambda a: hasattr(a, "get_text"))
                  if t.get_visible() and not (getattr(t, "get_bbox_patch", lambda: None)() and "\n" in t.get_text())]
        assert not [t for t in inside if t.count("\n") >= 2 or len(t) > 90], (name, [t for t in inside if len(t) > 90])
        assert not fig.texts and not (fig._suptitle and fig._suptitle.get_text()), name
        assert all(not (lg.get_title().get_text()) for lg in fig.legends), name
    paths = write_plots(_mixed_cpu_runs(), tmp_path)
    for stem in {p.name.split(".")[0] for p in paths}:
        md, tex = tmp_path / f"{stem}.caption.md", tmp_path / f"{stem}.caption.tex"
        assert md in paths and tex in paths and (tmp_path / f"{stem}.png") in paths and (tmp_path / f"{stem}.pdf") in paths
        text = md.read_text(encoding="utf-8").strip()
        latex = tex.read_text(encoding="utf-8").strip()
        assert text and "\n" not in text
        assert latex.startswith("\\caption{") and latex.endswith("}") and "θ" not in latex and "×" not in latex
    assert "$\\theta$" in (tmp_path / "fly_mismatch_entropy.caption.tex").read_text() or \
        "$\\theta$" in (tmp_path / "speedup_tau_vs_theta.caption.tex").read_text()


def test_retention_vs_speedup_never_puts_two_cpus_in_one_panel():
    # Named case: GSM8K's panel set FLy + MLA's speedups on one CPU beside SPD's on another.
    df = _mixed_cpu_runs()
    fig = fig_tradeoff(df)
    panels = [ax for ax in fig.axes if ax.get_visible()]
    titles = [ax.get_title() for ax in panels]
    letter = {"AMD EPYC (family 25, AVX2)": "A", "AMD EPYC (family 26, AVX512)": "B", "AMD EPYC (signature not recorded)": "C"}
    assert titles == ["GSM8K, CPU B", "GSM8K, CPU C", "MGSM, CPU A"]
    for ax in panels:
        ds = "gsm8k" if ax.get_title().startswith("GSM8K") else "mgsm"
        cpu = ax.get_title().rsplit("CPU ", 1)[1]
        expected = df[(df["dataset"] == ds) & (df["machine"].map(letter) == cpu)]
        # each panel's points are the speedups of its own CPU's runs, and only those
        xs = sorted(float(c.lines[0].get_xdata()[0]) for c in ax.containers)
        groups = expected.groupby(["method", "theta", "W"], dropna=False)["speedup"].mean()
        assert xs == pytest.approx(sorted(groups.tolist()))


def test_point_tags_do_not_overlap_and_a_crowded_panel_is_left_untagged():
    from loosespec_bench.report.plots.tradeoff import MAX_TAGS

    rows = []
    for k, s in ((10, 1.10), (12, 1.11), (15, 1.12), (20, 1.13)):  # four SPD points within 0.03x: tags crowd
        spd = _variant(dataset__name="gsm8k", drafter__name="model", drafter__k=k)
        spd["method"] = {"name": "spd", "_target_": "loosespec_bench.verifiers.spd.SPD"}
        rows.append(_run(spd, tau=7.0, speedup=s, run_id=f"spd{k}", retention=1.0, retention_ci_low=0.9, retention_ci_high=1.1,
                         speedup_ci_low=s - 0.05, speedup_ci_high=s + 0.05, ci_level=0.95))
    fig = fig_tradeoff(_index(rows))
    fig.draw_without_rendering()
    renderer = fig.canvas.get_renderer()
    (ax,) = [a for a in fig.axes if a.get_visible()]
    tags = [t for t in ax.texts if t.get_text().startswith("K=")]
    assert sorted(t.get_text() for t in tags) == ["K=10", "K=12", "K=15", "K=20"]
    boxes = [t.get_window_extent(renderer) for t in tags]
    assert not [(i, j) for i in range(len(boxes)) for j in range(i + 1, len(boxes)) if boxes[i].overlaps(boxes[j])]
    assert all(ax.bbox.x0 <= b.x0 and b.x1 <= ax.bbox.x1 and ax.bbox.y0 <= b.y0 and b.y1 <= ax.bbox.y1 for b in boxes)
    # Deterministic: the same placement each time (the committed report regenerates byte-identical).
    again = fig_tradeoff(_index(rows))
    again.draw_without_rendering()
    assert [t.get_position() for t in next(a for a in again.axes if a.get_visible()).texts if t.get_text().startswith("K=")] == \
        [t.get_position() for t in tags]
    # More tags than MAX_TAGS: no tags, the caption names the panel.
    df = _many_runs()
    fig = fig_tradeoff(df[df["dataset"] == "gsm8k"])
    (ax,) = [a for a in fig.axes if a.get_visible()]
    assert not [t for t in ax.texts if t.get_text()] and "Untagged" in caption_of(fig) and "GSM8K (30 points)" in caption_of(fig)
    assert MAX_TAGS == 20


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
    assert len(visible) == 1 and visible[0].get_title() == "θ = 0.3"
    caption = caption_of(fig)
    assert "θ = 0.3: 2 runs pooled:" in caption and "FLy (mla, K=15, W=6) on GSM8K" in caption
    assert "FLy (model, K=15, W=6) on GSM8K" in caption
    # Two entropy modes in one figure: each title says which, in words (not 'mode=code').
    two = fig_fly_entropy(runs + [{**runs[0], "mode": "paper"}])
    assert sorted(ax.get_title() for ax in two.axes if ax.get_visible()) == [
        "θ = 0.3 (paper's normalised entropy)", "θ = 0.3 (released code's top-3 entropy)"]


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
    assert [ax.get_title() for ax in panels] == ["θ = 0.2", "θ = 0.3", "θ = 0.8"]
    for theta in ("0.2", "0.3", "0.8"):  # one GSM8K run each
        assert f"θ = {theta}: 1 run: FLy (mla, K=15, W=6) on GSM8K." in caption_of(fig)
    assert "3 FLy run(s) outside the θ sweep" in caption_of(fig)
    # Without a sweep (every run at one θ) every run is pooled as before.
    single = fig_fly_entropy([run(0.3, ds, (ds, "mla")) for ds in ("gsm8k", "niah")])
    (ax,) = [a for a in single.axes if a.get_visible()]
    assert "θ = 0.3: 2 runs pooled:" in caption_of(single)


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
    (ax,) = [a for a in fig.axes if a.get_title() == "GSM8K"]
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


def test_an_unfinished_run_is_not_said_to_predate_the_intervals():
    from loosespec_bench.report.plots.figure import interval_caption

    df = pd.DataFrame({"intervals": [True, False, False], "status": ["complete", "partial", "complete"]})
    text = interval_caption(df)
    assert "1 of 3 runs predate the interval fields" in text and "1 of 3 runs unfinished" in text


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
    panels = {ax.get_title(): ax for ax in fig.axes if ax.get_visible()}
    assert sorted(panels) == ["HumanEval, CPU A", "HumanEval, CPU B"]
    fronts = {t: [sorted(map(float, ln.get_xdata())) for ln in ax.lines if ln.get_color() == "black"] for t, ax in panels.items()}
    # A frontier per CPU's panel: CPU A's (K = 10 alone) and CPU B's (K = 15 dominates K = 20); none crosses CPUs.
    assert fronts == {"HumanEval, CPU A": [[1.3]], "HumanEval, CPU B": [[1.1]]}
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
    assert quality.get_ylabel() == "Δ accuracy vs target alone"
    (bars,) = [c for c in quality.containers if getattr(c, "has_yerr", False)]
    assert list(bars.lines[0].get_ydata()) == pytest.approx([-0.10, 0.0, 0.05])
    seg = bars.lines[2][0].get_segments()[0]  # θ = 0.2's interval, [-0.2, -0.02]
    assert (seg[0][1], seg[1][1]) == pytest.approx((-0.20, -0.02))
    assert any(ln.get_ydata()[0] == 0.0 and ln.get_linestyle() == "--" for ln in quality.lines)  # the no-change line
    assert any("quality change" in t for t in _texts(fig))
    # Runs without a paired quality difference keep the two-row figure.
    assert len([a for a in fig_vs_param(_many_runs(), "theta").axes if a.get_visible()]) == 2 * 2


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


def test_the_speed_figure_draws_each_occasion_and_both_intervals():
    fig = fig_speed_occasions({"GSM8K": _speed_report()})
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["FLy + MLA", "FLy", "SPD, K = 5"]  # the report's order, top down
    # measured (black) and predicted (grey) error bars, each spanning its interval
    spans = sorted(round(seg[1][0] - seg[0][0], 6) for coll in ax.collections for seg in coll.get_segments()
                   if abs(seg[0][1] - seg[1][1]) < 1e-9)
    assert spans == [0.1] * 3 + [0.3] * 3
    occasion_marks = [ln for ln in ax.lines if ln.get_markerfacecolor() == "none"]
    assert len(occasion_marks) == 2 * 3  # two occasions x three configurations
    assert "1 contaminated problem block(s)" in caption_of(fig) and "median 1.2%" in caption_of(fig)


# -- issue 72 item 2: the palette, the page's height, crowded panels, the committed figures -----
def _colours(fig) -> set[str]:
    """Every colour an artist of the figure draws with (lines, markers, error bars, fills)."""
    from matplotlib.collections import Collection
    from matplotlib.colors import to_hex
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    out: set[str] = set()
    for ax in fig.axes:
        if not ax.get_visible():
            continue
        for a in ax.get_children():
            if isinstance(a, Line2D) and a.get_visible():
                # What is drawn: the line where it has a style, the marker where it has one.
                drawn = ([a.get_color()] if a.get_linestyle() not in ("None", "none", "") else []) + \
                    ([a.get_markerfacecolor(), a.get_markeredgecolor()] if a.get_marker() not in ("None", "none", "", None) else [])
                out |= {to_hex(c) for c in drawn if not (isinstance(c, str) and c == "none")}
            elif isinstance(a, Collection) and a.get_visible():
                out |= {to_hex(c) for c in [*a.get_edgecolor(), *a.get_facecolor()] if c[3] > 0}
            elif isinstance(a, Patch) and a.get_visible() and a is not ax.patch and a.get_fill():
                out.add(to_hex(a.get_facecolor()))
    return out


def _achromatic(hex_colour: str) -> bool:
    from matplotlib.colors import to_rgb

    r, g, b = to_rgb(hex_colour)
    return abs(r - g) < 1e-6 and abs(g - b) < 1e-6


def test_every_figure_draws_in_the_one_colour_blind_safe_palette():
    """Okabe-Ito (figure.PALETTE) or greys: no tab10 colour (its red and green), in every kind."""
    assert len(PALETTE) == 7 and len(set(PALETTE)) == 7
    for name, fig in _all_figures().items():
        foreign = {c for c in _colours(fig) if c not in PALETTE and not _achromatic(c)}
        assert not foreign, (name, foreign)
    assert set(METHOD_COLORS.values()) - set(PALETTE) <= {c for c in METHOD_COLORS.values() if _achromatic(c)}


def test_no_figure_is_taller_than_a_text_block():
    # Named case: speedup_tau_vs_K was 10.1 in tall (two blocks of three rows at 1.6 in).
    for name, fig in _all_figures().items():
        assert fig.get_figheight() <= MAX_HEIGHT, (name, fig.get_figheight())
    rows = []
    for ds in ("gsm8k", "humaneval", "mbpp_plus", "mgsm", "niah", "ifeval"):
        for k in (5, 10, 15):
            rows.append(_run(_variant(dataset__name=ds, drafter__k=k), tau=5.0, speedup=1.2, score_diff=0.0, run_id=f"{ds}{k}"))
    fig = fig_vs_param(_index(rows), "K")
    assert sum(ax.get_visible() for ax in fig.axes) >= 2 * 6 and fig.get_figheight() <= MAX_HEIGHT
    from loosespec_bench.report.plots.figure import canvas

    with pytest.raises(ValueError, match="at most"):
        canvas(7.0, MAX_HEIGHT + 1)


def test_a_crowded_panel_numbers_its_points_and_the_caption_keys_them():
    """Named case: GSM8K on CPU C drew eleven tags like "K=15, θ=0.3, W=6" over each other's error
    bars; six or more points of one method to tell apart are numbered by speedup instead."""
    rows = []
    for i, theta in enumerate((0.1, 0.2, 0.3, 0.5, 0.8, 0.9, 0.95)):
        rows.append(_run(_variant(method__theta=theta, dataset__name="gsm8k"), tau=6.0, speedup=1.0 + i / 20, run_id=f"t{i}",
                         retention=1.0 - i / 30, retention_ci_low=0.8, retention_ci_high=1.1, speedup_ci_low=0.95 + i / 20,
                         speedup_ci_high=1.05 + i / 20, ci_level=0.95))
    fig = fig_tradeoff(_index(rows))
    (ax,) = [a for a in fig.axes if a.get_visible()]
    assert sorted(t.get_text() for t in ax.texts) == [str(i) for i in range(1, 8)]
    caption = caption_of(fig)
    assert "Numbered points" in caption and "1 = FLy + MLA θ=0.1" in caption and "7 = FLy + MLA θ=0.95" in caption


def test_an_absent_set_is_told_apart_from_its_prompt_variants_in_the_caption():
    # Named case: "No panel for MGSM" under two "MGSM (native CoT prompt)" panels.
    df = _many_runs()
    variant = df[df["dataset"] == "mgsm"].assign(dataset="mgsm (native_cot prompt)", run_id=lambda d: d["run_id"] + "n")
    df.loc[df["dataset"] == "mgsm", "retention"] = float("nan")
    fig = fig_tradeoff(pd.concat([df, variant], ignore_index=True))
    assert "MGSM (native CoT prompt)" in [ax.get_title() for ax in fig.axes if ax.get_visible()]
    assert "No panel for MGSM with its default prompt (the MGSM (native CoT prompt) panels are another prompt's)" in caption_of(fig)


REPO = __import__("pathlib").Path(__file__).resolve().parents[2]


def _png_size(path) -> tuple[int, int]:
    """(width, height) in pixels from the PNG's header."""
    head = path.read_bytes()[:24]
    return int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")


def test_every_committed_figure_is_printable_and_has_its_caption_beside_it():
    pngs = sorted((REPO / "results").rglob("*.png"))
    assert pngs
    for png in pngs:
        width, height = _png_size(png)
        # 300 dpi at one or two columns' width, no taller than a text block
        assert width in {round(w * 300) for w in WIDTHS} and height <= MAX_HEIGHT * 300, (png, width, height)
        assert png.with_suffix(".caption.md").exists(), png


def test_the_committed_notebook_export_shows_each_figure_with_its_caption():
    import html

    export = REPO / "notebooks" / "report.html"
    assert export.exists(), "notebooks/report.html: make notebook-html"
    text = html.unescape(export.read_text(encoding="utf-8"))
    captions = sorted((REPO / "results" / "cpu" / "plots").glob("*.caption.md"))
    assert captions
    for cap in captions:
        # The notebook shows the figure with the caption the report wrote beside it.
        assert cap.read_text(encoding="utf-8").strip()[:120] in " ".join(text.split()), cap.name
    assert text.count("data:image/png;base64") >= len(captions)
