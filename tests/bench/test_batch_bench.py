"""The batch-size throughput bench (bench/batch.py) on the tiny pair: it measures every cell,
prints the table with ratios to batch 1, the bandwidth line and the machine's load, and in
float32 every batched output is batch 1's."""

from __future__ import annotations

import json

from loosespec_bench.bench import batch as bench


def test_the_batch_bench_prints_its_table_and_finds_float32_outputs_identical(tmp_path, capsys):
    out = tmp_path / "batch.json"
    assert bench.main(["--tiny", "--problems", "4", "--max-new-tokens", "6", "--repeats", "1", "--batch-sizes", "2",
                       "--dtypes", "float32", "--contestants", "ar,spd", "--threads", "1", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "float32: tokens per CPU second" in text and "x batch 1 (CPU)" in text
    assert "the bandwidth bound" in text and "other processes used" in text
    data = json.loads(out.read_text())
    cells = data["dtypes"]["float32"]["cells"]
    assert set(cells) == {"ar@1", "ar@2", "spd@1", "spd@2"}  # batch 1 always measured beside
    for cell in cells.values():
        assert cell["tokens"][0] == 4 * 6 and cell["cpu_s"][0] > 0
        assert cell["identical"] == [4]
    assert data["bandwidth_gbs"] > 0
