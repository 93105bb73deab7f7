"""The index never merges unlike runs and names bad folders (issues 24, 50): a run without
config.yaml is its own row, a run id found in two experiment folders counts once, a malformed
summary.json stops the report naming the folder and the field (or, with skip_damaged /
--skip-damaged, is skipped with a warning and listed); intervals and power fields are read per
the SUMMARY INTERVALS contract."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import pytest
import yaml

pd = pytest.importorskip("pandas")
pytest.importorskip("matplotlib")

from loosespec_bench.report.__main__ import main as report_main  # noqa: E402
from loosespec_bench.report.index import load_index  # noqa: E402
from loosespec_bench.store.run_folder import DamagedRun  # noqa: E402
from loosespec_bench.report.plots import build_figures  # noqa: E402
from loosespec_bench.report.grouping import load_published  # noqa: E402
from loosespec_bench.report.tables.fly import fly_main_table  # noqa: E402

CONFIG = {
    "method": {"name": "spd", "_target_": "loosespec_bench.verifiers.spd.SPD"},
    "drafter": {"name": "model", "k": 4},
    "pair": {"name": "tiny", "dtype": "float32", "draft": {"path": "tiny:1"}, "target": {"path": "tiny:0"}},
    "dataset": {"name": "gsm8k", "limit": 3},
    "generation": {"temperature": 0.0},
    "seed": 0,
    "experiment_name": "exp",
}


def _summary(**extra) -> dict:
    return {"method": "spd", "drafter": "model", "k": 4, "pair": "tiny", "dataset": "gsm8k", "n_samples": 3,
            "tau": 4.8, "speedup": 1.3, "accuracy": 0.5, "baseline_accuracy": 0.5, "retention": 1.0,
            "acceptance_by_position": [0.9, 0.8], "date": "2026-12-01T00:00:00+00:00", **extra}


def _folder(root: Path, experiment: str, run_id: str, summary: dict, config: dict | None = CONFIG) -> Path:
    d = root / experiment / run_id
    d.mkdir(parents=True)
    (d / "summary.json").write_text(json.dumps(summary))
    if config is not None:
        (d / "config.yaml").write_text(yaml.safe_dump(config))
    return d


def test_runs_without_config_are_their_own_rows_never_merged(tmp_path):
    # Two SPD K=4 runs with different drafts, config.yaml lost: tau 4.80 and 1.00 (issue 24's repro).
    _folder(tmp_path, "exp", "a", _summary(tau=4.8), config=None)
    _folder(tmp_path, "exp", "b", _summary(tau=1.0, speedup=0.5), config=None)
    index = load_index(tmp_path)
    assert len(index) == 2
    table = fly_main_table(index, load_published())
    ours = [r for r in table.rows if r[0] == "ours"]
    assert len(ours) == 2  # never one averaged row (tau 2.90)
    assert all("config unknown" in r[2] for r in ours)
    col = table.columns.index("gsm8k speedup")
    assert sorted(r[col].value for r in ours) == [0.5, 1.3]


def test_the_same_run_id_in_two_experiment_folders_counts_once(tmp_path, caplog):
    first = _folder(tmp_path, "exp", "spd_same_id", _summary(n_samples=9))
    copy = tmp_path / "other_exp" / "spd_same_id"
    shutil.copytree(first, copy)
    (copy / "summary.json").write_text(json.dumps(_summary(n_samples=6)))
    with caplog.at_level(logging.WARNING):
        index = load_index(tmp_path)
    assert len(index) == 1 and index["n_samples"].iloc[0] == 9  # the copy with the most samples
    assert str(copy) in index["also_in"].iloc[0]
    assert any("counted once" in r.message for r in caplog.records)


def test_a_configuration_id_is_the_whole_hash_and_two_configurations_never_share_one(tmp_path, monkeypatch):
    """Issue 74: the report averages the runs that share a configuration id, so the id is the
    whole sha256 of the configuration (a 12-digit one is forged in about 2^24 tries by a folder
    from someone else); and should two different configurations ever share one, the index
    refuses, naming both folders, instead of averaging them as one row."""
    import hashlib

    from loosespec_bench.errors import ConfigError
    from loosespec_bench.report import index as index_module

    _folder(tmp_path, "exp", "a", _summary(tau=4.8))
    _folder(tmp_path, "exp", "b", _summary(tau=1.0), config={**CONFIG, "drafter": {"name": "model", "k": 8}})
    rows = load_index(tmp_path).set_index("run_id")
    config = rows.loc["a", "config"]
    kept = {k: v for k, v in config.items() if not k.startswith("dataset.") and k != "seed"}
    assert rows.loc["a", "config_id"] == hashlib.sha256(json.dumps(kept, sort_keys=True, default=str).encode()).hexdigest()
    assert rows.loc["a", "config_id"] != rows.loc["b", "config_id"]
    monkeypatch.setattr(index_module, "config_signature", lambda config, **_: "forged")  # ids that collide
    with pytest.raises(ConfigError, match=r"exp/a and .*exp/b share config_id forged but their configurations differ"):
        load_index(tmp_path)


@pytest.mark.parametrize("field, value", [("acceptance_by_position", ["a", "b"]), ("tau", "fast"), ("speedup", [1.2]),
                                          ("speedup_ci_low", {"x": 1}), ("timing", "busy"), ("temperature", "hot"),
                                          ("k", "five"), ("n_samples", "many"), ("method", 5), ("experiment", 7)])
def test_a_malformed_summary_stops_the_report_or_is_skipped_when_asked(tmp_path, caplog, capsys, field, value):
    _folder(tmp_path, "exp", "good", _summary())
    _folder(tmp_path, "exp", "bad", _summary(**{field: value}))
    # Strict (the default): one error line naming the folder and the field, nothing written.
    with pytest.raises(DamagedRun, match=f"bad.*summary.json: {field}="):
        load_index(tmp_path)
    assert report_main(["index", "--results", str(tmp_path), "--csv", str(tmp_path / "i.csv")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and "bad" in err[0] and field in err[0] and "--skip-damaged" in err[0]
    assert not (tmp_path / "i.csv").exists()
    # --skip-damaged: left out, with a warning, and listed as skipped.
    with caplog.at_level(logging.WARNING):
        index = load_index(tmp_path, skip_damaged=True)
    assert list(index["run_id"]) == ["good"]
    assert [folder for folder, _ in index.attrs["skipped"]] == [str(tmp_path / "exp" / "bad")]
    assert any("bad" in r.message and field in r.message for r in caplog.records)
    figures = build_figures(index)  # the plots still draw
    assert len(figures) == 6
    assert report_main(["index", "--results", str(tmp_path), "--csv", str(tmp_path / "i.csv"), "--skip-damaged"]) == 0
    assert "skipped (damaged)" in capsys.readouterr().err


def test_a_healthy_folder_is_not_damaged_and_a_killed_runs_cut_off_line_is_not_damage(tmp_path):
    from loosespec_bench.store.run_folder import RunFolder

    good = _folder(tmp_path, "exp", "good", _summary(retention=None, timing={"clean": 1}))
    record = {"id": "gsm8k/0", "output_text": "x", "metrics": {"tau": 1.0}}
    (good / "samples.jsonl").write_text(json.dumps(record) + "\n" + json.dumps(record)[:10])  # killed mid-line
    assert RunFolder(good, create=False).damage() == []
    assert len(load_index(tmp_path)) == 1


def test_intervals_power_and_timing_are_read_per_the_contract(tmp_path):
    _folder(tmp_path, "exp", "new", _summary(
        speedup_ci_low=1.1, speedup_ci_high=1.5, accuracy_diff=-0.1, accuracy_diff_ci_low=-0.4, accuracy_diff_ci_high=0.2,
        ci_level=0.95, ci_method="paired bootstrap", n_problems=3, underpowered=True, power_threshold=0.05,
        timing={"clean": 2, "retimed": 1, "excluded": 0, "contaminated": False}))
    _folder(tmp_path, "exp", "old", _summary())
    index = load_index(tmp_path).set_index("run_id")
    new, old = index.loc["new"], index.loc["old"]
    assert (new["speedup_ci_low"], new["speedup_ci_high"]) == (1.1, 1.5) and new["accuracy_diff_ci_low"] == -0.4
    assert new["underpowered"] is True and new["n_problems"] == 3 and new["intervals"]
    assert new["timing_clean"] == 2 and new["timing_retimed"] == 1 and new["timing_contaminated"] is False
    assert not old["intervals"] and pd.isna(old["speedup_ci_low"])
    assert old["accuracy_diff"] == pytest.approx(0.0)  # the point, from the two accuracies


def test_the_score_columns_are_the_tasks_headline_figure_niahs_recall_before_all_found(tmp_path):
    niah = {**CONFIG, "dataset": {"name": "niah", "limit": 3}}
    _folder(tmp_path, "exp", "niah", _summary(
        dataset="niah", accuracy=0.1, baseline_accuracy=0.3, recall=0.82, recall_ci_low=0.75, recall_ci_high=0.88,
        baseline_recall=0.87, baseline_recall_ci_low=0.8, baseline_recall_ci_high=0.92,
        recall_diff=-0.05, recall_diff_ci_low=-0.1, recall_diff_ci_high=-0.01, quality_figure="recall"), niah)
    _folder(tmp_path, "exp", "gsm8k", _summary(accuracy_ci_low=0.2, accuracy_ci_high=0.8, baseline_accuracy_ci_low=0.1,
                                               baseline_accuracy_ci_high=0.9))
    index = load_index(tmp_path).set_index("run_id")
    row = index.loc["niah"]
    assert row["score_name"] == "recall" and (row["score"], row["score_ci_low"]) == (0.82, 0.75)
    assert (row["baseline_score"], row["baseline_score_ci_high"]) == (0.87, 0.92) and row["score_diff"] == -0.05
    assert row["accuracy"] == 0.1  # all values found: still its own column
    row = index.loc["gsm8k"]
    assert row["score_name"] == "accuracy" and (row["baseline_score"], row["baseline_score_ci_low"]) == (0.5, 0.1)


@pytest.mark.parametrize("args, message", [
    (["plots", "--out", "{file}"], "is a file"),
    (["plots", "--out", "{dir}", "--formats", "bogus"], "--formats"),
    (["index", "--csv", "{dir}"], "is a folder"),
])
def test_bad_report_outputs_give_one_error_line(tmp_path, capsys, args, message):
    _folder(tmp_path / "results", "exp", "good", _summary())
    (tmp_path / "afile").write_text("x")
    args = [a.format(file=tmp_path / "afile", dir=tmp_path) for a in args]
    assert report_main([args[0], "--results", str(tmp_path / "results"), *args[1:]]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and message in err[0]


def test_a_set_under_another_prompt_than_the_papers_is_its_own_set(tmp_path):
    # MGSM under the FLy authors' 0813 prompt (the paper's) and under the native CoT cue (ours,
    # for a usable accuracy on CPU): never one cell, never paired, and out of the OOD mean.
    for run_id, prompt, speedup in (("paper", "native_cot_0813", 1.5), ("variant", "native_cot", 0.5)):
        cfg = {**CONFIG, "dataset": {"name": "mgsm", "prompt": prompt, "languages": ["fr", "de", "th"]}}
        _folder(tmp_path, "exp", run_id, _summary(dataset="mgsm", speedup=speedup), config=cfg)
    index = load_index(tmp_path)
    assert sorted(index["dataset"]) == ["mgsm", "mgsm (native_cot prompt)"]
    table = fly_main_table(index, load_published())
    ours = [r for r in table.rows if r[0] == "ours"]
    assert len(ours) == 1
    row = dict(zip(table.columns, ours[0]))
    assert row["mgsm speedup"].value == 1.5 and row["mgsm (native_cot prompt) speedup"].value == 0.5
    assert row["OOD mean speedup"].value == 1.5  # the paper's prompt only


def test_a_vllm_run_is_a_row_beside_our_loops_and_says_its_engine(tmp_path):
    _folder(tmp_path, "exp", "ours", _summary(speedup=1.3))
    vllm_cfg = {**CONFIG, "engine": {"name": "vllm", "cpu_kvcache_gib": 1}}
    _folder(tmp_path, "exp", "theirs", _summary(speedup=1.1, engine="vllm"), config=vllm_cfg)
    index = load_index(tmp_path)
    assert sorted(index["engine"]) == ["hf", "vllm"]
    table = fly_main_table(index, load_published())
    labels = sorted(r[2] for r in table.rows if r[0] == "ours")
    assert labels == ["SPD (model, K=4)", "SPD on vLLM (model, K=4)"]  # no '[engine.name=...]' brackets
    col = table.columns.index("gsm8k speedup")
    by_label = {r[2]: r[col].value for r in table.rows if r[0] == "ours"}
    assert by_label == {"SPD (model, K=4)": 1.3, "SPD on vLLM (model, K=4)": 1.1}
