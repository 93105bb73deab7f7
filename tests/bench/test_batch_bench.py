"""The batch-size throughput bench (bench/batch.py) on the tiny pair: it measures every cell,
prints the table with ratios to batch 1, the prefill share and decode-only rate, the bandwidth
line with the bytes it counted and the machine's load, and in float32 every batched output is
batch 1's; bad input is one error line before any model loads."""

from __future__ import annotations

import json

import pytest

from loosespec_bench.bench import batch as bench
from loosespec_bench.measure import speed_configs as configs
from loosespec_bench.models.tiny import tiny_model

from ..conftest import REPO

RESULTS = REPO / "results" / "bench" / "batch-2026-12-07"


def test_the_batch_bench_prints_its_table_and_finds_float32_outputs_identical(tmp_path, capsys):
    out = tmp_path / "batch.json"
    assert bench.main(["--tiny", "--problems", "4", "--max-new-tokens", "6", "--repeats", "1", "--batch-sizes", "2",
                       "--dtypes", "float32", "--contestants", "ar,spd", "--threads", "1", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "float32: tokens per CPU second" in text and "x batch 1 (CPU)" in text and "decode tok/CPU s" in text
    assert "the bound at" in text and "other processes used" in text
    data = json.loads(out.read_text())
    assert data[bench.NAMES_DECLARED] is True  # its names are the declared ones: no old "fly" in it
    res = data["dtypes"]["float32"]
    cells = res["cells"]
    assert set(cells) == {"ar@1", "ar@2", "spd@1", "spd@2"}  # batch 1 always measured beside
    for cell in cells.values():
        assert cell["tokens"][0] == 4 * 6 and cell["cpu_s"][0] > 0
        assert cell["identical"] == [4]
        # Every prompt is prefilled in every cell: a share of the CPU time, never all of it.
        assert 0 < cell["prefill_cpu_s"][0] < cell["cpu_s"][0]
    # The bytes a decode forward reads: every parameter once, less the (untied) input embedding.
    model = tiny_model(0)
    params = sum(p.numel() * p.element_size() for p in model.parameters())
    emb = model.get_input_embeddings().weight
    assert res["weight_bytes"] == params - emb.numel() * emb.element_size()
    assert f"{res['weight_bytes'] / 1e9:.2f} GB" in text
    assert res["gb_s"] == max(v for v in (res.get("matmul_gb_s"), res["sum_gb_s"]) if v) > 0
    assert res["bound_s_per_token"] == pytest.approx(res["weight_bytes"] / (res["gb_s"] * 1e9))


def test_a_missing_data_set_is_one_error_line_before_any_model_loads(tmp_path, capsys, monkeypatch):
    def no_models(*args, **kwargs):
        raise AssertionError("a model loaded before the data set was read")

    monkeypatch.setattr(bench, "load_pair", no_models)
    assert bench.main(["--target", "tiny:0", "--draft", "tiny:1", "--data-dir", str(tmp_path), "--problems", "2",
                       "--dtypes", "float32", "--repeats", "1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: dataset gsm8k:") and "not found" in err[0]


@pytest.mark.parametrize("args, says", [
    (["--batch-sizes", "1,32"], "--batch-sizes: each from 1 to 16"),
    (["--dtypes", "float64"], "--dtypes takes"),
    (["--problems", "0"], "--problems must be at least 1"),
    (["--out", "/nonexistent-folder/x.json"], "--out:"),
])
def test_bad_arguments_are_refused_before_anything_runs(args, says, capsys):
    with pytest.raises(SystemExit) as err:
        bench.main(["--tiny", *args])
    assert err.value.code == 2 and says in capsys.readouterr().err


# ---- names (issue 71 item 4): declared in measure/speed_configs.py; "fly" was FLy + MLA here ------
def test_every_contestant_is_declared_and_fly_mla_is_its_flys_name():
    assert set(bench.CONTESTANTS) <= set(configs.DECLARED)
    assert configs.FLY not in bench.CONTESTANTS and configs.FLY_MLA in bench.CONTESTANTS
    assert [c.name for c in bench.contestants(list(bench.CONTESTANTS), None, 10, 15)] == list(bench.CONTESTANTS)


def test_the_old_fly_on_the_command_line_runs_fly_mla_and_says_so(capsys):
    args = bench.parse(["--tiny", "--contestants", "ar,fly"])
    assert args.contestants == [configs.TARGET_ALONE, configs.FLY_MLA]
    assert "note: --contestants fly is this bench's old name of fly_mla (FLy + MLA)" in capsys.readouterr().err
    assert bench.parse(["--tiny", "--contestants", "fly-mla,fly_mla"]).contestants == [configs.FLY_MLA]


def test_a_committed_file_written_before_the_names_were_declared_reads_fly_as_fly_mla():
    # results/bench/batch-2026-12-07 ran --contestants ar,spd,fly: FLy over MLA drafts, K = 15.
    data = json.loads((RESULTS / "batch_fp32.json").read_text())
    assert bench.NAMES_DECLARED not in data and "fly@8" in data["dtypes"]["float32"]["cells"]
    cells = bench.read_cells(data)["float32"]
    assert {name for name, _ in cells} == {configs.TARGET_ALONE, configs.SPD, configs.FLY_MLA}
    assert cells[(configs.FLY_MLA, 8)] == data["dtypes"]["float32"]["cells"]["fly@8"]
    assert configs.config_label(configs.FLY_MLA) == "FLy + MLA"


def test_a_file_that_declares_its_names_keeps_them():
    cell = {"tokens": [1]}
    old = {"dtypes": {"bfloat16": {"cells": {"fly@1": cell, "spd@1": cell}}}}
    new = {bench.NAMES_DECLARED: True, "dtypes": {"bfloat16": {"cells": {"fly_mla@1": cell, "fly@1": cell}}}}
    assert set(bench.read_cells(old)["bfloat16"]) == {(configs.FLY_MLA, 1), (configs.SPD, 1)}
    assert set(bench.read_cells(new)["bfloat16"]) == {(configs.FLY_MLA, 1), (configs.FLY, 1)}
