"""bench.forward_cost: the forward-cost curve (rows x context, the loop now and before) and the
machine's bandwidth floor, on tiny models; argument errors."""

from __future__ import annotations

import json

import pytest

from loosespec_bench.bench import forward_cost as fc
from loosespec_bench.models.loading import load_model


def test_tiny_run_prints_and_writes_every_cell(tmp_path, capsys):
    out = tmp_path / "fc.json"
    res = fc.main(["--tiny", "--rows", "1,3", "--contexts", "8,16", "--repeats", "1", "--forwards", "1", "--out", str(out)])
    text = capsys.readouterr().out
    assert "bandwidth:" in text and "other processes' CPU share" in text
    assert set(res["models"]) == {"target", "draft"}
    for entry in res["models"].values():
        cells = {(x["rows"], x["context"]) for x in entry["curve"]}
        assert cells == {(1, 8), (3, 8), (1, 16), (3, 16)}
        for x in entry["curve"]:
            assert x["now_ms"] > 0 and x["before_ms"] > 0
            assert x["ratio"] == pytest.approx(x["now_ms"] / x["before_ms"])
            if x["rows"] == 1:
                assert x["v_now"] == pytest.approx(1.0) and x["v_before"] == pytest.approx(1.0)
        assert entry["floor_ms"] is None or entry["floor_ms"] > 0
    assert json.loads(out.read_text())["models"]["target"]["path"] == "tiny:0"


def test_model_bytes_counts_a_tied_head_once():
    model = load_model("tiny:0", dtype="float32").model
    total = sum(p.numel() * p.element_size() for p in model.parameters())  # parameters() lists a tied weight once
    assert fc.model_bytes(model) == total or not model.config.tie_word_embeddings


@pytest.mark.parametrize(
    "argv, msg",
    [
        (["--rows", "1,x"], "comma lists"),
        (["--rows", "0"], "at least 1"),
        (["--models", "judge"], "target, draft"),
        (["--repeats", "0"], "at least 1"),
    ],
)
def test_bad_arguments_are_one_error_line(argv, msg, capsys):
    with pytest.raises(SystemExit) as e:
        fc.parse_args(argv)
    assert e.value.code == 2 and msg in capsys.readouterr().err
