"""measure/occasion_files.py: a speed-evidence folder read as data (the benchmark and the claims
read it through here)."""

from __future__ import annotations

import json

import pytest

from loosespec_bench.errors import ConfigError
from loosespec_bench.measure.occasion_files import load_rows, read_args, read_calibration, unfinished_occasions


def _occasion(path, records, done=True):
    lines = [json.dumps(r) for r in records] + ([json.dumps({"kind": "done"})] if done else [])
    path.write_text("\n".join(lines) + "\n")


GEN = {"kind": "gen", "final": True, "occasion": 1, "problem": "p1", "config": "spd", "new_tokens": 10, "wall_s": 0.5}


def test_only_finished_occasions_count(tmp_path):
    _occasion(tmp_path / "occasion-1.jsonl", [{"kind": "start", "occasion": 1}, GEN])
    _occasion(tmp_path / "occasion-2.jsonl", [{"kind": "start", "occasion": 2}, {**GEN, "occasion": 2}], done=False)
    rows, starts = load_rows(tmp_path)
    assert rows == [GEN] and starts == [{"kind": "start", "occasion": 1}]
    assert unfinished_occasions(tmp_path) == ["occasion-2.jsonl"]


def test_a_malformed_generation_in_a_finished_occasion_is_one_line(tmp_path):
    _occasion(tmp_path / "occasion-1.jsonl", [{**GEN, "wall_s": -1.0}])
    with pytest.raises(ConfigError, match="negative count or time"):
        load_rows(tmp_path)
    _occasion(tmp_path / "occasion-1.jsonl", [{**GEN, "new_tokens": True}])
    with pytest.raises(ConfigError, match="no new_tokens of the right type"):
        load_rows(tmp_path)


def test_arguments_and_calibration(tmp_path):
    with pytest.raises(ConfigError, match="not a speed-evidence folder"):
        read_args(tmp_path)
    (tmp_path / "args.json").write_text(json.dumps({"pair": "tiny"}))
    assert read_args(tmp_path) == {"pair": "tiny"} and read_calibration(tmp_path) is None
    (tmp_path / "calibration.json").write_text("[1]")
    assert read_calibration(tmp_path) is None  # not an object: no calibration
