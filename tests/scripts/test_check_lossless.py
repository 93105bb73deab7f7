"""scripts/check_lossless.py: a lossless rule against the target alone on chosen samples."""

from __future__ import annotations

import json

from ..conftest import shared_data_dir
from . import load_script


def _script():
    return load_script("check_lossless")


BASE = [f"paths.data_dir={shared_data_dir()}", "experiment=smoke_tiny", "warmup=false", "dataset.limit=3", "method=spd"]


def test_spd_in_float32_gives_the_target_alones_tokens(tmp_path, capsys):
    mod = _script()
    from loosespec_bench.build import build_task

    from ..conftest import compose_config

    ids = [s.id for s in build_task(compose_config(BASE[1:])).samples()][:2]
    out = tmp_path / "rows.json"
    assert mod.main(["--ids", *ids, "--dtype", "float32", "--out", str(out), "--", *BASE]) == 0
    rows = json.loads(out.read_text())
    assert [r["id"] for r in rows] == ids
    # The tiny pair in float32: SPD is exact, so every row is identical with no first difference.
    assert all(r["identical"] and r["first_difference"] is None and r["dtype"] == "float32" for r in rows)
    assert all(r["method"] == "spd" and r["method_tokens"] == r["target_tokens"] for r in rows)
    printed = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    assert printed == rows


def test_an_unknown_id_is_one_error_line_before_any_model_loads(capsys, monkeypatch):
    mod = _script()

    def no_models(*_a, **_k):
        raise AssertionError("a model loaded")

    monkeypatch.setattr(mod, "build_engine", no_models)
    assert mod.main(["--ids", "xx-1", "--", *BASE]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: xx-1 not in this config's selection of 3 samples")
