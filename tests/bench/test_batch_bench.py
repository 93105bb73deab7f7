"""The batch-size throughput bench (bench/batch.py) on the tiny pair: it measures every cell,
prints the table with ratios to batch 1, the prefill share and decode-only rate, the bandwidth
line with the bytes it counted and the machine's load, and in float32 every batched output is
batch 1's; bad input is one error line before any model loads."""

from __future__ import annotations

import json

import pytest

from loosespec_bench.bench import batch as bench
from loosespec_bench.models.tiny import tiny_model


def test_the_batch_bench_prints_its_table_and_finds_float32_outputs_identical(tmp_path, capsys):
    out = tmp_path / "batch.json"
    assert bench.main(["--tiny", "--problems", "4", "--max-new-tokens", "6", "--repeats", "1", "--batch-sizes", "2",
                       "--dtypes", "float32", "--contestants", "ar,spd", "--threads", "1", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "float32: tokens per CPU second" in text and "x batch 1 (CPU)" in text and "decode tok/CPU s" in text
    assert "the bound at" in text and "other processes used" in text
    data = json.loads(out.read_text())
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
