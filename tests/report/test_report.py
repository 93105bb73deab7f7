"""Reports from real (tiny) result folders: the index (complete, killed and empty runs), the
paper tables (ours beside published, 'not run' cells, never 0), the plots, the notebook."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

pd = pytest.importorskip("pandas")
pytest.importorskip("matplotlib")

from loosespec_bench.run.app import run  # noqa: E402
from loosespec_bench.report import load_index, load_published, write_plots  # noqa: E402
from loosespec_bench.report.__main__ import main as report_main  # noqa: E402
from loosespec_bench.report.render import NOT_RUN  # noqa: E402
from loosespec_bench.report.tables import build_tables  # noqa: E402
from loosespec_bench.report.tables.fly import ABLATIONS  # noqa: E402

from ..conftest import REPO, compose_config  # noqa: E402

# MGSM under the FLy authors' prompt, as the paper ran it (under any other prompt the report
# names the prompt and keeps the set apart: report/index.py PAPER_PROMPTS).
BASE = ["experiment=smoke_tiny", "dataset.limit=2", "dataset.prompt=native_cot_0813", "generation.max_new_tokens=10", "threads=1"]
RUNS = {
    "ar": ["method=ar"],
    "spd": ["method=spd", "drafter.k=2"],
    # Without the window FLy accepts unsure mismatches even between tiny random models: loose
    # accepts and FLy entropy records to report.
    "fly": ["method=fly", "method.no_window=true", "method.theta=0.45", "drafter.k=3"],
}


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> dict:
    """A results dir with three finished runs, one killed run (no summary, cut-off last line),
    one resumed run killed after appending (stale summary), one run killed before its first
    sample, and Hydra's own folder (not a run)."""
    root = tmp_path_factory.mktemp("results")
    summaries = {name: run(compose_config([*BASE, *extra], results_dir=root)) for name, extra in RUNS.items()}
    killed = root / "killed_exp" / "spd_killed"
    shutil.copytree(summaries["spd"]["run_dir"], killed)
    (killed / "summary.json").unlink()
    lines = (killed / "samples.jsonl").read_text().splitlines(keepends=True)
    (killed / "samples.jsonl").write_text(lines[0] + lines[1][: len(lines[1]) // 2])  # killed mid-write
    # Resumed with a larger limit, killed after one more sample: the old summary is stale.
    resumed = root / "killed_exp" / "spd_resumed_killed"
    shutil.copytree(summaries["spd"]["run_dir"], resumed)  # copies keep the files' times
    more = json.loads(lines[1])
    more["id"] += "-more"
    with (resumed / "samples.jsonl").open("a") as f:
        f.write(json.dumps(more) + "\n")
    empty = root / "killed_exp" / "fly_empty"
    empty.mkdir()
    shutil.copy(Path(summaries["fly"]["run_dir"]) / "config.yaml", empty / "config.yaml")
    hydra = root / "_hydra" / "multirun" / "0" / ".hydra"
    hydra.mkdir(parents=True)
    (hydra / "config.yaml").write_text("method: {name: spd}\n")
    return {"root": root, "summaries": summaries}


def test_index_has_one_row_per_run_folder(results):
    df = load_index(results["root"])
    assert len(df) == 6  # 3 finished + 2 killed + empty; _hydra skipped
    by_id = {r["run_id"]: r for _, r in df.iterrows()}
    for name, s in results["summaries"].items():
        r = by_id[Path(s["run_dir"]).name]
        assert r["status"] == "complete" and r["method"] == s["method"] and r["experiment"] == "smoke_tiny"
        assert r["tau"] == pytest.approx(s["tau"]) and r["n_samples"] == 2
        assert r["pair"] == "tiny" and r["dataset"] == "mgsm" and r["hardware"] and r["date"] and r["run_dir"] == s["run_dir"]
    fly = by_id[Path(results["summaries"]["fly"]["run_dir"]).name]
    assert fly["theta"] == 0.45 and fly["W"] == 6 and fly["K"] == 3 and fly["mode"] == "code"
    assert fly["loose_accepts"] == results["summaries"]["fly"].get("loose_accepts")
    spd = by_id[Path(results["summaries"]["spd"]["run_dir"]).name]
    assert pd.isna(spd["theta"]) and pd.isna(spd["W"]) and spd["K"] == 2
    assert by_id[Path(results["summaries"]["ar"]["run_dir"]).name]["K"] == 0

    killed = by_id["spd_killed"]  # recomputed from the one complete sample line
    assert killed["status"] == "partial" and killed["n_samples"] == 1 and killed["experiment"] == "smoke_tiny"
    assert killed["tau"] >= 1 and killed["speedup"] > 0 and "samples.jsonl" in killed["summary_source"]
    stale = by_id["spd_resumed_killed"]
    assert stale["status"] == "partial" and stale["n_samples"] == 3
    empty = by_id["fly_empty"]
    assert empty["status"] == "empty" and empty["n_samples"] == 0 and empty["method"] == "fly" and empty["theta"] == 0.45

    only = load_index(results["root"], experiment="killed*")
    assert len(only) == 0  # experiment comes from the run's own config/summary, not the folder name
    assert len(load_index(results["root"], experiment="smoke_*")) == 6


def test_index_cli_writes_csv(results, tmp_path, capsys):
    out = tmp_path / "index.csv"
    assert report_main(["index", "--results", str(results["root"]), "--csv", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "spd_killed" in printed and "partial" in printed
    csv = pd.read_csv(out)
    assert len(csv) == 6 and {"theta", "W", "K", "tau", "speedup", "run_dir", "git_commit", "hardware", "date"} <= set(csv.columns)
    assert json.loads(csv.loc[csv["method"] == "spd", "acceptance_by_position"].iloc[0])  # lists as JSON


def test_tables_show_ours_beside_published_and_say_what_was_not_run(results, tmp_path):
    out = tmp_path / "reports"
    assert report_main(["tables", "--results", str(results["root"]), "--out", str(out)]) == 0
    names = ["fly_main", "noise_floor", *[f"fly_ablation_{a}" for a in ABLATIONS]]
    for name in names:
        for ext in ("md", "tex", "csv"):
            assert (out / f"{name}.{ext}").stat().st_size > 0, (name, ext)
        assert (out / f"{name}_long.csv").exists(), name
    # No DropMatch, EAGLE-3, AutoJudge or Spec-Bench run here: those tables are not written.
    for name in ("dropmatch_main", "dropmatch_eagle3", "dropmatch_overhead", "dropmatch_autojudge", "spec_bench_categories"):
        assert not list(out.glob(f"{name}*")), name
    fly_s = results["summaries"]["fly"]
    spd_s = results["summaries"]["spd"]

    fly_main = (out / "fly_main.md").read_text()
    ours = [line for line in fly_main.splitlines() if line.startswith("| ours | tiny | FLy")]
    # The run's summary carries the speedup interval (summary.py); a summary without one (older
    # runs) would show the point marked "(no interval)". One line per block (speedup, tau, accuracy, means).
    speed_cell = (f"{fly_s['speedup']:.2f}× [{fly_s['speedup_ci_low']:.2f}, {fly_s['speedup_ci_high']:.2f}]"
                  if fly_s.get("speedup_ci_low") is not None else f"{fly_s['speedup']:.2f}× (no interval)")
    assert len(ours) == 4 and f"{fly_s['tau']:.2f}" in ours[1] and speed_cell in ours[0]
    assert "| ours | tiny | SPD (model, K=2) |" in fly_main
    # No row or cell of "not run": the notes say what was not run.
    assert NOT_RUN not in "".join(line for line in fly_main.splitlines() if line.startswith("|"))
    assert "Not run here: data sets gsm8k, humaneval, mbpp_plus, niah, acp_prog_gen" in fly_main
    assert "FLy (mla) on llama31-8b-70b" in fly_main  # our missing counterpart of a published row, named
    published = [line for line in fly_main.splitlines() if line.startswith("| published")]
    assert any("2.81×" in line for line in published) and any("5.07×" in line for line in published)
    assert any("1.62×" in line for line in published)
    tex = (out / "fly_main.tex").read_text()
    assert r"2.81$\times$" in tex and r"\begin{tabular}" in tex and r"\toprule" in tex and "resizebox" not in tex

    # The DropMatch tables are built (published figures beside a missing run) but not written.
    by_name = {t.name: t for t in build_tables(load_index(results["root"]))}
    dm = by_name["dropmatch_main"].to_markdown()
    assert "7.62" in dm and "9.20" in dm and "1.22×" in dm and "9.78" in dm and "1.09–1.33×" in dm
    assert not [line for line in dm.splitlines() if line.startswith("| ours")]  # no DropMatch run here
    assert "SD runs without a DropMatch run of the same settings (not shown): tiny mgsm SPD (model, K=2)" in dm
    eagle = by_name["dropmatch_eagle3"].to_markdown()
    assert "1.46" in eagle and "5.24" in eagle and "up to 1.09×" in eagle and "Not run here" in eagle

    theta = (out / "fly_ablation_theta.md").read_text()
    assert "| 0.45 | tiny |" in theta and "Published ablation figures: none" in theta
    floor = (out / "noise_floor.md").read_text()
    assert "| tiny | MGSM | FLy (model, K=3, θ=0.45, W=6, no window) | loose |" in floor
    assert "No lossless run at all for: FLy" in floor  # SPD ran at K=2, FLy at K=3: no twin

    # Missing figures are named, never shown as zero.
    for table in build_tables(load_index(results["root"])):
        frame = table.to_frame()
        for col in frame.columns:
            if "speedup" in col or "tau" in col:
                assert not frame[col].isin([0, 0.0, "0", "0.0"]).any(), (table.name, col)
    csv = pd.read_csv(out / "fly_main.csv")
    assert (csv["mean speedup (paper sets)"] == 2.81).any()
    long = pd.read_csv(out / "fly_main_long.csv")
    mine = long[(long["method"].astype(str).str.startswith("FLy (model")) & (long["scope"] == "mgsm") & (long["figure"] == "speedup")]
    assert len(mine) == 1 and mine["value"].iloc[0] == pytest.approx(fly_s["speedup"]) and mine["interval"].iloc[0] == ("yes" if fly_s.get("speedup_ci_low") is not None else "no interval")
    assert spd_s["tau"] > 0


def test_published_csv_every_figure_has_a_source():
    pub = load_published()
    assert len(pub) >= 10
    for _, row in pub.iterrows():
        assert row["source"] and row["arxiv"] in ("2511.22972", "2603.03333") and row["checked"]
        assert float(row["value"]) > 0
        # where in the paper (abstract, table, figure) and a short note the tables print
        assert row["location"] and row["short_note"] and len(row["short_note"]) <= 80
        assert row["table"] in ("fly_main", "dropmatch_main", "dropmatch_eagle3", "dropmatch_overhead")
        # every figure says what kind of source it is; only a paper table counts as the paper's own
        assert row["source_kind"] in ("paper_table", "abstract") or "not the paper's table" in row["source_kind"] \
            or "unverified" in row["source_kind"]


def test_plots_are_written_as_png_and_pdf(results, tmp_path):
    paths = write_plots(load_index(results["root"]), tmp_path)
    names = {p.name.split(".")[0] for p in paths}
    assert names == {"speedup_tau_vs_theta", "speedup_tau_vs_W", "speedup_tau_vs_K", "retention_vs_speedup",
                     "acceptance_by_position", "fly_mismatch_entropy"}
    for p in paths:
        if p.name.endswith((".caption.md", ".caption.tex")):  # the caption beside each figure
            assert p.read_text(encoding="utf-8").strip(), p
            continue
        head = p.read_bytes()[:8]
        assert head.startswith(b"\x89PNG" if p.suffix == ".png" else b"%PDF") and p.stat().st_size > 5000, p
    assert len(paths) == 4 * len(names)  # PNG, PDF, .caption.md, .caption.tex


def test_fly_entropy_plot_reads_the_fly_step_records(results):
    from loosespec_bench.report.index import read_records
    from loosespec_bench.report.plots.entropy import fig_fly_entropy, fly_mismatch_entropies

    records = read_records(results["summaries"]["fly"]["run_dir"])
    accepted, rejected = fly_mismatch_entropies(records)
    assert len(accepted) == results["summaries"]["fly"]["loose_accepts"] > 0
    assert min(accepted) >= 0.45  # the entropy gate: a loose accept needs H >= theta
    # Without FLy records the figure says so instead of drawing nothing.
    fig = fig_fly_entropy([{"records": read_records(results["summaries"]["spd"]["run_dir"])}])
    assert any("no FLy step records" in t.get_text() for t in fig.axes[0].texts)


def test_notebook_runs_top_to_bottom_on_tiny_results(results, tmp_path):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    nb = nbformat.read(REPO / "notebooks" / "report.ipynb", as_version=4)
    params = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(params) == 1
    params[0].source = f"RESULTS_DIR = {str(results['root'])!r}\nEXPERIMENT = 'smoke_tiny'\nOUT_DIR = {str(tmp_path / 'out')!r}"
    nbclient.NotebookClient(nb, timeout=180, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    assert sum("image/png" in o.get("data", {}) for o in outputs) == 6
    assert any("2.81×" in o.get("data", {}).get("text/markdown", "") for o in outputs)
    assert (tmp_path / "out" / "tables.md").exists() and (tmp_path / "out" / "plots" / "retention_vs_speedup.png").exists()


CPU_RESULTS = REPO / "results" / "cpu"


def test_committed_cpu_replication_holds_tables_plots_and_runs():
    """results/cpu/ (make replicate-cpu + make report-cpu) is committed: its index, tables and
    plots are what the runs under results/cpu/runs give today (regenerated, not edited)."""
    if not (CPU_RESULTS / "index.csv").exists():
        pytest.skip("results/cpu/ not generated in this checkout")
    index = load_index(CPU_RESULTS / "runs")
    assert len(index) >= 2 and (index["status"] == "complete").all()
    # The replication decides claims at n >= 30 distinct problems per run (issue 23), each run on
    # the shared target-alone store.
    assert (index["n_samples"] >= 30).all() and (index["n_problems"] >= 30).all()
    committed = pd.read_csv(CPU_RESULTS / "index.csv")
    assert len(committed) == len(index)
    assert len(list((CPU_RESULTS / "plots").glob("*.png"))) >= 4
    for run_dir in index["run_dir"]:
        assert (Path(run_dir) / "summary.json").exists() and (Path(run_dir) / "config.yaml").exists()
    fly_main = (CPU_RESULTS / "fly_main.md").read_text()
    assert "(paper)" in fly_main and "| ours | qwen2.5-coder-0.5b-1.5b |" in fly_main and "n = 30" in fly_main and "| 30 |" in fly_main and "underpowered (n=" not in fly_main
    claims = (CPU_RESULTS / "claims.md").read_text()
    assert "**confirmed**" in claims or "**undecided at this n**" in claims or "**contradicted**" in claims
    if (CPU_RESULTS / "dropmatch_main.md").exists() and (index["method"] == "dropmatch").any():
        dropmatch = (CPU_RESULTS / "dropmatch_main.md").read_text()
        assert "| js, N=5, p=0.3 |" in dropmatch and "criterion=config" not in dropmatch
    # The committed tables are the report of the committed runs.
    for table in build_tables(index):
        if not table.has_ours():  # not written, and no stale file left from an earlier report
            assert not list(CPU_RESULTS.glob(f"{table.name}.*")) and not (CPU_RESULTS / f"{table.name}_long.csv").exists()
            continue
        assert (CPU_RESULTS / f"{table.name}.md").read_text(encoding="utf-8") == table.to_markdown()
        assert (CPU_RESULTS / f"{table.name}.tex").read_text(encoding="utf-8") == table.to_latex()
        committed_long = pd.read_csv(CPU_RESULTS / f"{table.name}_long.csv")
        assert len(committed_long) == len(table.to_long())


def test_notebook_reads_the_cpu_replication_by_default(tmp_path):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    if not (CPU_RESULTS / "index.csv").exists():
        pytest.skip("results/cpu/ not generated in this checkout")
    nb = nbformat.read(REPO / "notebooks" / "report.ipynb", as_version=4)
    nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                            resources={"metadata": {"path": str(REPO / "notebooks")}}).execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    assert any("run folders under ../results/cpu/runs" in o.get("text", "") for o in outputs)
    assert sum("image/png" in o.get("data", {}) for o in outputs) >= 4


def test_a_new_rule_knob_reaches_the_report_without_report_code(tmp_path, monkeypatch):
    """README's new acceptance rule (one module, one config file with its knob `top`): the
    index gets a `top` column and every table and legend labels the run `top=2`, though no
    report module names the knob (issue 22: the schema finds undeclared rule knobs)."""
    from ..test_extend import _files, _run as extend_run, _write

    _write(tmp_path, _files("ext_top2.py", "conf/method/top2.yaml"))
    monkeypatch.syspath_prepend(str(tmp_path))
    results = tmp_path / "results"
    extend_run(tmp_path / "conf", ["method=top2", "drafter=model", "drafter.k=3"], results)
    extend_run(tmp_path / "conf", ["method=top2", "method.top=3", "drafter=model", "drafter.k=3"], results)
    index = load_index(results)
    assert "top" in index.columns and sorted(index["top"]) == [2, 3]
    report_dir = tmp_path / "report"
    assert report_main(["all", "--results", str(results), "--out", str(report_dir), "--formats", "png"]) == 0
    fly_main = (report_dir / "fly_main.md").read_text()
    assert "| ours | tiny | top2 (model, K=3, top=2) |" in fly_main and "| ours | tiny | top2 (model, K=3, top=3) |" in fly_main
    assert "top2 (model, K=3, top=2) | loose |" in (report_dir / "noise_floor.md").read_text()
    assert "top" in pd.read_csv(report_dir / "index.csv").columns
    report = REPO / "loosespec_bench" / "report"
    for path in [report / "index.py", report / "render.py", report / "labels.py", report / "grouping.py", report / "__main__.py",
                 *sorted((report / "tables").glob("*.py")), *sorted((report / "plots").glob("*.py"))]:
        # matplotlib's alignment keywords (va="top") are not a reference to the knob.
        code = re.sub(r'\b(va|verticalalignment)="top"', "", path.read_text())
        assert '"top"' not in code and "'top'" not in code, path.name


def test_the_speed_command_draws_speed_evidence_folders_and_refuses_others(tmp_path, capsys):
    folder = REPO / "results" / "bench" / "speed-evidence-2026-12-03"  # a committed two-occasion benchmark
    out = tmp_path / "fig"
    assert report_main(["speed", f"GSM8K={folder}", str(folder), "--out", str(out), "--formats", "png"]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["speed_occasions.caption.md", "speed_occasions.caption.tex", "speed_occasions.csv",
                                                     "speed_occasions.md", "speed_occasions.png", "speed_occasions.tex",
                                                     "speed_occasions_long.csv"]
    table = (out / "speed_occasions.md").read_text(encoding="utf-8")
    assert "| GSM8K | FLy + MLA |" in table and "speed-evidence-2026-12-03: " in table  # a row per configuration, notes per folder
    capsys.readouterr()
    # a folder the script never analysed, and a report.json of another kind: one error line each
    for bad, why in ((tmp_path / "empty", "does not exist"), (tmp_path / "other", "not a speed-evidence report")):
        bad.mkdir()
        if why.startswith("not"):
            (bad / "report.json").write_text('{"tau": 3}')
        assert report_main(["speed", str(bad), "--out", str(out)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("error: ") and why in err[0]
