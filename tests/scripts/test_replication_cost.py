"""scripts/replication_cost.py: a shared-baseline point's cost against the paired protocol's."""

from __future__ import annotations

import pytest

from loosespec_bench.run.app import run
from loosespec_bench.store.run_folder import RunFolder

from ..conftest import compose_config
from . import load_script

TINY = ["experiment=smoke_tiny", "warmup=false", "dataset.limit=4", "baseline=shared", "timing.subset=1"]


def _script():
    return load_script("replication_cost")


def test_cost_of_shared_points_against_paired(tmp_path, capsys):
    run(compose_config([*TINY, "experiment_name=a"], results_dir=tmp_path))  # fills the store (all timed)
    run(compose_config([*TINY, "experiment_name=b", "drafter.k=3"], results_dir=tmp_path))  # reads it, times 1 of 4
    assert _script().main([str(tmp_path)]) == 0
    out = capsys.readouterr().out
    rows = {line.split()[0].split("/")[0]: line.split() for line in out.splitlines() if line.startswith(("a/", "b/"))}
    # The first point timed the target alone on every sample: it cost what paired costs.
    assert float(rows["a"][-1]) == 1.0
    # The second timed it on one sample and read the other three from the store: cheaper.
    assert float(rows["b"][-1]) < 1.0
    assert "points:" in out and "paired" in out


def test_a_topped_up_point_counts_its_first_untimed_runs(tmp_path):
    run(compose_config([*TINY, "experiment_name=a"], results_dir=tmp_path))
    run(compose_config([*TINY, "experiment_name=b", "drafter.k=3"], results_dir=tmp_path))
    mod = _script()
    (before,) = [p for p in mod.cost_points(tmp_path) if p["name"].startswith("b/")]
    assert before["topup"] == 0 and len(before["untimed"]) == 3
    (folder,) = [f for f in (tmp_path / "b").iterdir() if f.is_dir()]
    first_runs = {r["id"]: mod._wall(r["timing"]["method"]) for r in RunFolder(folder, create=False).records()
                  if r["id"] in before["untimed"]}
    run(compose_config([*TINY, "experiment_name=b", "drafter.k=3", "timing.subset=null"], results_dir=tmp_path))  # 3 more timed
    (after,) = [p for p in mod.cost_points(tmp_path) if p["name"].startswith("b/")]
    # The three samples' first, untimed, method runs were spent too: counted as the top-up's cost.
    assert after["untimed"] == [] and after["topup"] > 0
    assert after["shared"] == after["method"] + after["timed_base"] + after["topup"]
    # Exactly the three untimed samples' first runs, as they were recorded then (not a second
    # whole point, not the timed sample's): compared by record, not by timing, so load cannot flip it.
    assert after["topup"] == pytest.approx(sum(first_runs.values()))


def test_no_shared_runs_is_one_line(tmp_path, capsys):
    assert _script().main([str(tmp_path)]) == 1
    assert "no baseline=shared runs" in capsys.readouterr().err
