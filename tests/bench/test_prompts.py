"""loosespec_bench.bench.prompts: the bench's tasks are the harness's own (composed and built as
a run builds them), with every sample; a set no dataset file names is refused before any model
loads."""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from loosespec_bench.bench import engine
from loosespec_bench.bench.prompts import build_task
from loosespec_bench.build import build_task as run_build_task
from loosespec_bench.score import compose_dataset

from ..conftest import shared_data_dir


def test_the_bench_task_is_the_runs_task_without_its_limit():
    data = str(shared_data_dir())
    ours = build_task("gsm8k", data)
    run = run_build_task(OmegaConf.create({"dataset": compose_dataset("gsm8k", data)}))
    assert run.limit and len(run.samples()) == run.limit  # conf/dataset/gsm8k.yaml: a CPU-sized sample
    samples = ours.samples()
    assert len(samples) > run.limit  # the bench takes its own count (--prompts-per-set) of every sample
    assert [s.id for s in samples[: run.limit]] == [s.id for s in run.samples()]  # in the run's order
    assert ours.stop_strings == run.stop_strings


def test_an_unknown_set_is_one_error_before_any_model_loads(capsys):
    with pytest.raises(SystemExit) as exc:
        engine.parse_args(["--sets", "gsm8k,nope"])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "error: --sets:" in err and "'nope'" in err and "gsm8k" in err
