"""The W&B sink as its users expect: the run summary is the run's figures (the series are kept
out of it with define_metric), a deterministic id with resume whose steps go on from the earlier
process's, one group per sweep (the sweep's own name), WANDB_DIR respected, step rows off by
default, the per-sample table with the prompt and the target-alone output, samples.jsonl as an
artifact.
Driven against a fake `wandb` module that records every call (no service, no network)."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from loosespec_bench.measure.metrics import sample_speedup
from loosespec_bench.sinks.wandb import SAMPLE_COLUMNS, WandbTracker, run_figures, sample_log, wandb_run_id


class FakeRun:
    def __init__(self, **init):
        self.init = init
        self.id = init["id"]
        # Like W&B's offline-run-<time>-<id>: a new folder per process, the same id.
        self.dir = str(Path(init["dir"]) / "wandb" / f"offline-run-{len(list((Path(init['dir']) / 'wandb').glob('*')))}-{self.id}" / "files")
        Path(self.dir).mkdir(parents=True, exist_ok=True)
        self.defined: dict[str, dict] = {}
        self.logged: list[dict] = []
        self.steps: list[int | None] = []
        self.summary: dict = {}
        self.artifacts: list = []
        self.url = None
        self.finished = None

    def define_metric(self, name, **kwargs):
        self.defined[name] = kwargs

    def log(self, data, step=None):
        self.logged.append(data)
        self.steps.append(step)

    def log_artifact(self, artifact):
        self.artifacts.append(artifact)

    def finish(self, exit_code=0):
        self.finished = exit_code


class FakeTable:
    def __init__(self, columns, data):
        self.columns, self.data = columns, data


class FakeArtifact:
    def __init__(self, name, type, metadata=None):  # noqa: A002 (wandb's own argument name)
        self.name, self.type, self.metadata, self.files = name, type, metadata, []

    def add_file(self, path, name=None):
        self.files.append((path, name))


@pytest.fixture
def fake_wandb(monkeypatch):
    runs: list[FakeRun] = []
    mod = types.ModuleType("wandb")
    mod.Settings = lambda **kw: kw
    mod.init = lambda **kw: runs.append(FakeRun(**kw)) or runs[-1]
    mod.Table = FakeTable
    mod.Artifact = FakeArtifact
    mod.Image = lambda path: path
    mod.teardown = lambda: None
    monkeypatch.setitem(sys.modules, "wandb", mod)
    return runs


RECORDS = [
    {"id": f"gsm8k/{i}", "prompt_text": f"Q{i}: what is {i}+{i}?", "output_text": f"{2 * i}", "output_ids": [1, i],
     "reference": str(2 * i), "score": {"correct": True},
     "metrics": {"tau": 2.0, "new_tokens": 4, "steps": 2, "tokens_per_s": 8.0, "accepted": [1, 1], "drafted": [2, 2]},
     "baseline": {"output_text": f"{2 * i} (target)", "output_ids": [1, i], "score": {"correct": True},
                  "metrics": {"tokens_per_s": 4.0}}}
    for i in range(3)
]
SUMMARY = {"speedup": 2.0, "speedup_ci_low": 1.5, "speedup_ci_high": 2.5, "tau": 2.0, "n_samples": 3, "accuracy": 1.0,
           "phase_fraction": {"draft": 0.5}, "method": "spd"}
CFG = OmegaConf.create({"method": {"name": "spd"}, "drafter": {"name": "model"}, "pair": {"name": "tiny"},
                        "dataset": {"name": "gsm8k"}, "experiment_name": "sweep_a"})


def _folder(tmp_path: Path, records: list[dict]) -> Path:
    run_dir = tmp_path / "sweep_a" / "spd_run"
    run_dir.mkdir(parents=True)
    (run_dir / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return run_dir


def test_the_run_summary_is_the_runs_figures_and_the_series_stay_out(fake_wandb, tmp_path):
    run_dir = _folder(tmp_path, [])
    tracker = WandbTracker(plots=False)
    tracker.start(CFG, run_dir, run_dir.name)
    run = fake_wandb[0]
    for name in ("sample/*", "step/*", "sample/index", "step/index"):
        assert run.defined[name]["summary"] == "none"
    assert run.defined["sample/*"]["step_metric"] == "sample/index"
    for rec in RECORDS:
        tracker.log_sample(rec)
    tracker.finish(SUMMARY, RECORDS)
    assert run.summary["speedup"] == 2.0 and run.summary["speedup_ci_low"] == 1.5 and run.summary["phase_fraction/draft"] == 0.5
    assert list(run.summary)[:3] == ["speedup", "speedup_ci_low", "speedup_ci_high"]  # the schema's figures first
    assert run_figures(SUMMARY) == run.summary


def test_the_id_is_deterministic_resumes_and_groups_by_sweep(fake_wandb, tmp_path):
    run_dir = _folder(tmp_path, RECORDS[:2])  # a folder resumed after two finished samples
    tracker = WandbTracker(plots=False, log_steps=True)
    tracker.start(CFG, run_dir, run_dir.name)
    init = fake_wandb[0].init
    assert init["id"] == wandb_run_id("sweep_a", "spd_run") and init["resume"] == "allow" and init["group"] == "sweep_a"
    assert wandb_run_id("sweep_b", "spd_run") != init["id"]  # the same run id under another experiment
    tracker.log_sample(RECORDS[2])
    assert fake_wandb[0].logged[0]["sample/index"] == 2  # the history goes on after the finished samples
    assert fake_wandb[0].logged[1]["step/index"] == 4


def test_the_samples_table_has_the_prompt_and_the_target_alone_output_and_samples_jsonl_is_an_artifact(fake_wandb, tmp_path):
    run_dir = _folder(tmp_path, RECORDS)
    tracker = WandbTracker(plots=False)
    tracker.start(CFG, run_dir, run_dir.name)
    tracker.finish(SUMMARY, RECORDS)
    run = fake_wandb[0]
    table = next(d["samples"] for d in run.logged if "samples" in d)
    row = dict(zip(table.columns, table.data[1]))
    assert table.columns == SAMPLE_COLUMNS
    assert row["prompt"] == "Q1: what is 1+1?" and row["target_alone_output"] == "2 (target)" and row["output_text"] == "2"
    assert row["speedup"] == 2.0 == sample_speedup(RECORDS[1])
    (artifact,) = run.artifacts
    assert artifact.type == "samples" and artifact.files == [(str(run_dir / "samples.jsonl"), "samples.jsonl")]


@pytest.mark.parametrize("baseline, expected", [({"metrics": {"tokens_per_s": 4.0}}, 2.0), ({"metrics": {"tokens_per_s": 0}}, None),
                                                (None, None), ({"metrics": {}}, None)])
def test_per_sample_speedup_is_one_function(baseline, expected):
    rec = {"metrics": {"tokens_per_s": 8.0}, "baseline": baseline}
    assert sample_speedup(rec) == expected
    assert sample_log(rec, 0).get("sample/speedup") == expected


def test_step_rows_are_off_by_default(fake_wandb, tmp_path):
    run_dir = _folder(tmp_path, [])
    tracker = WandbTracker(plots=False)
    tracker.start(CFG, run_dir, run_dir.name)
    for rec in RECORDS:
        tracker.log_sample(rec)
    assert [sorted({k.split("/")[0] for k in row}) for row in fake_wandb[0].logged] == [["sample"]] * 3


def test_an_offline_resume_continues_the_steps_and_prints_one_sync_of_both_folders(fake_wandb, tmp_path, capsys):
    run_dir = _folder(tmp_path, [])
    first = WandbTracker(plots=False)
    first.start(CFG, run_dir, run_dir.name)
    for rec in RECORDS[:2]:
        first.log_sample(rec)
        with (run_dir / "samples.jsonl").open("a") as f:  # what the app appends beside it
            f.write(json.dumps(rec) + "\n")
    first.close()  # the process dies after two samples
    second = WandbTracker(plots=False)
    second.start(CFG, run_dir, run_dir.name)
    second.log_sample(RECORDS[2])
    second.finish(SUMMARY, RECORDS)
    a, b = fake_wandb
    assert a.init["id"] == b.init["id"] and a.dir != b.dir  # one W&B run, two offline folders
    assert a.steps == [0, 1] and b.steps == [2, 3]  # sample 2, then the samples table: no restart at 0
    assert b.logged[0]["sample/index"] == 2
    state = json.loads((run_dir / "wandb.json").read_text())
    folders = [str(Path(a.dir).parent), str(Path(b.dir).parent)]
    assert state == {"id": a.init["id"], "next_step": 4, "folders": folders, "group": "sweep_a"}
    # The upload names the run it goes to (--id) and its project, then the folders in order.
    assert f"wandb sync --id {a.init['id']} -p {a.init['project']} {folders[0]} {folders[1]}" in capsys.readouterr().out


def test_a_sweep_point_resumed_alone_keeps_its_sweeps_group(fake_wandb, tmp_path, monkeypatch):
    # An ad-hoc -m sweep under the default name: the group is the sweep's start (its folder).
    import loosespec_bench.sinks.wandb as wb

    monkeypatch.setattr(wb, "sweep_group", lambda experiment: "default_2026-12-07_02-00-00")
    cfg = OmegaConf.merge(CFG, {"experiment_name": "default"})
    run_dir = _folder(tmp_path, [])
    first = WandbTracker(plots=False)
    first.start(cfg, run_dir, run_dir.name)
    first.log_sample(RECORDS[0])
    with (run_dir / "samples.jsonl").open("a") as f:
        f.write(json.dumps(RECORDS[0]) + "\n")
    first.close()
    # Resumed as a single run: no sweep folder now, so the sweep's group is not known again.
    monkeypatch.setattr(wb, "sweep_group", lambda experiment: None)
    WandbTracker(plots=False).start(cfg, run_dir, run_dir.name)
    assert [r.init["group"] for r in fake_wandb] == ["default_2026-12-07_02-00-00"] * 2
    # A group given on the command line (logger.group) still wins.
    WandbTracker(plots=False, group="mine").start(cfg, run_dir, run_dir.name)
    assert fake_wandb[-1].init["group"] == "mine"


def test_wandb_dir_is_respected(fake_wandb, tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_DIR", str(tmp_path / "wandb_home"))
    run_dir = _folder(tmp_path, [])
    WandbTracker(plots=False).start(CFG, run_dir, run_dir.name)
    assert fake_wandb[0].init["dir"] == str(tmp_path / "wandb_home")
    monkeypatch.delenv("WANDB_DIR")
    WandbTracker(plots=False).start(CFG, run_dir, run_dir.name)
    assert fake_wandb[1].init["dir"] == str(run_dir)


def test_each_sweep_is_its_own_group(monkeypatch):
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    from loosespec_bench.sinks.wandb import sweep_group

    assert sweep_group("fly_main") == "fly_main"  # a named experiment: its name, with or without a sweep
    assert sweep_group("default") is None and sweep_group(None) is None  # a single ad-hoc run: no group
    hydra = OmegaConf.create({"hydra": {"mode": RunMode.MULTIRUN, "sweep": {"dir": "results/_hydra/multirun/2026-12-03/14-20-00"}}})
    monkeypatch.setattr(HydraConfig, "get", staticmethod(lambda: hydra.hydra))
    assert sweep_group("default") == "default_2026-12-03_14-20-00"  # an ad-hoc -m sweep: its start
    assert sweep_group("fly_main") == "fly_main"  # a named experiment's sweep keeps its name
    hydra.hydra.mode = RunMode.RUN
    assert sweep_group("default") is None
