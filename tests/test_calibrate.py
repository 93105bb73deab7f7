"""calibrate.py on the tiny pair: a stored calibration found again by its signature."""

from __future__ import annotations

import json

import pytest
import torch

from loosespec_bench.calibrate import calibration_path, find_calibration, main, pair_node, signature
from loosespec_bench.costmodel import Calibration


def test_calibrate_stores_a_calibration_that_runs_find_again(tmp_path, capsys):
    assert main(["--pair", "tiny", "--threads", "1", "--results", str(tmp_path), "--repeats", "1", "--max-rows", "5"]) == 0
    pair = pair_node("tiny")
    cal, source = find_calibration(tmp_path, pair, 1)
    assert isinstance(cal, Calibration) and source.endswith(".json")
    t = cal.target
    assert t.rows[:5] == [1, 2, 3, 4, 5] and 512 in t.rows and len(t.body_s) == len(t.rows)
    assert all(x >= 0 for x in t.body_s) and t.lm_head_row_s >= 0 and cal.draft is not None
    stored = json.loads(calibration_path(tmp_path, signature(pair, 1)).read_text())
    assert stored["signature"]["threads"] == 1 and stored["signature"]["pair"] == "tiny"
    assert "others_share" in stored["signature"]  # the load it was taken under
    # Another thread count is another signature: not reused.
    other, why = find_calibration(tmp_path, pair, 2)
    assert other is None and "2 threads" in why and "python -m loosespec_bench.calibrate" in why
    torch.set_num_threads(1)


def test_a_dtype_calibration_is_found_by_runs_in_that_dtype_only(tmp_path, capsys):
    # The tiny pair's file says float32; --dtype bfloat16 writes a calibration that only bf16 runs find.
    assert main(["--pair", "tiny", "--dtype", "bfloat16", "--threads", "1", "--results", str(tmp_path),
                 "--repeats", "1", "--max-rows", "3"]) == 0
    pair = pair_node("tiny")
    assert find_calibration(tmp_path, pair, 1)[0] is None
    pair.dtype = "bfloat16"
    assert isinstance(find_calibration(tmp_path, pair, 1)[0], Calibration)
    torch.set_num_threads(1)


def test_unknown_pair_is_one_error_line(capsys, tmp_path):
    assert main(["--pair", "nope", "--results", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: --pair 'nope' is not a pair config") and "tiny" in err[0]


def test_unreadable_calibration_says_so(tmp_path):
    pair = pair_node("tiny")
    path = calibration_path(tmp_path, signature(pair, 1))
    path.parent.mkdir(parents=True)
    path.write_text("{}")
    cal, why = find_calibration(tmp_path, pair, 1)
    assert cal is None and "unreadable calibration" in why


@pytest.mark.parametrize("args", [["--repeats", "0"], ["--max-rows", "1"], ["--threads", "0"]])
def test_bad_settings_are_refused_before_loading(args, capsys, tmp_path):
    assert main(["--pair", "tiny", "--results", str(tmp_path), *args]) == 2
    assert capsys.readouterr().err.startswith("error: ")
