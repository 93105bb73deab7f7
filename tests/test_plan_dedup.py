"""The replication plan runs each configuration once: shared points, their status, the launch
that leaves them out of later sweeps, the official settings of `make replicate-70b`, and
Qwen3's thinking mode off."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from loosespec_bench.launch import driver
from loosespec_bench.plan import build_plan, duplicates, format_plan, format_status, shared_points
from loosespec_bench.tasks.sizing import set_size

from .conftest import compose_config

REPO = Path(__file__).resolve().parents[1]
ABLATIONS = ["fly_ablation_theta", "fly_ablation_window", "fly_ablation_mla"]


def _done(folder: Path, samples: int = 1) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.yaml").write_text("{}\n")
    (folder / "samples.jsonl").write_text("".join(json.dumps({"id": f"s{i}"}) + "\n" for i in range(samples)))
    (folder / "summary.json").write_text(json.dumps({"n_samples": samples}))


def test_a_point_several_sweeps_share_is_planned_once_and_done_for_each(tmp_path):
    sweeps = build_plan(ABLATIONS, [f"paths.results_dir={tmp_path}"])
    shared = shared_points(sweeps)
    # theta=0.3, W=6, MLA on, K=25: the released setting, on HumanEval and ACP, in all three.
    assert len(shared) == 2 and all(j.sweep == "fly_ablation_theta" for j in shared)
    assert all(j.needed_by == ABLATIONS for j in shared)
    later = [j for s in sweeps[1:] for j in s.jobs if not j.launched]
    assert len(later) == 4 and all(j.folder.parent.name == "fly_ablation_theta" for j in later)
    assert not duplicates(sweeps)
    text = format_plan(sweeps)
    points = sum(len(s.jobs) for s in sweeps)
    assert f"points: {points} points, {points - 4} distinct, 2 shared by several sweeps" in text
    assert "= [fly_ablation_theta] #" in text and "shared: fly_mla-k25_llama31-8b-70b_humaneval_" in text
    assert f"total: 3 sweeps, {points - 4} jobs" in text

    # The owner finishes the shared point: every sweep that needs it reports it done.
    _done(shared[0].folder, shared[0].samples)
    sweeps = build_plan(ABLATIONS, [f"paths.results_dir={tmp_path}"], with_status=True)
    rid = shared[0].run_id
    states = [j.status.state for s in sweeps for j in s.jobs if j.run_id == rid]
    assert states == ["done", "done", "done"]
    assert "(shared: [fly_ablation_theta] #" in format_status(sweeps)


def test_a_point_done_in_another_experiments_folder_counts_as_done(tmp_path):
    (sweep,) = build_plan(["fly_ablation_window"], [f"paths.results_dir={tmp_path}"])
    job = sweep.jobs[0]
    _done(tmp_path / "some_earlier_plan" / job.run_id, job.samples)
    (sweep,) = build_plan(["fly_ablation_window"], [f"paths.results_dir={tmp_path}"], with_status=True)
    assert sweep.jobs[0].status.state == "done" and sweep.jobs[1].status.state == "pending"


def test_launch_leaves_shared_points_out_of_later_sweeps(tmp_path, monkeypatch, capsys):
    sweeps = build_plan(["fly_ablation_theta", "fly_ablation_window", "fly_ablation_theta"], [f"paths.results_dir={tmp_path}"])
    started = []

    class FakePopen:
        def __init__(self, command, stdout=None, stderr=None, env=None, **kw):
            started.append((command, env))

        def wait(self):
            return 0

    monkeypatch.setattr(driver.subprocess, "Popen", FakePopen)
    assert driver.launch(sweeps, sequential=True, log_dir=tmp_path / "launch") == 0
    assert len(started) == 2  # the repeated sweep: every point runs in the first: not launched
    theta_cmd, theta_env = started[0]
    assert not any("hydra.sweeper._target_" in c for c in theta_cmd) and "LOOSESPEC_SKIP_RUN_IDS" not in {
        k for k in theta_env if theta_env.get(k) != os.environ.get(k)
    }
    window_cmd, window_env = started[1]
    assert "hydra.sweeper._target_=hydra_plugins.loosespec_skip_sweeper.skip_sweeper.SkipSweeper" in window_cmd
    skipped = Path(window_env["LOOSESPEC_SKIP_RUN_IDS"]).read_text().split()
    assert sorted(skipped) == sorted(j.run_id for j in shared_points(sweeps))
    assert "all 14 points run in earlier sweeps: not launched" in capsys.readouterr().out


def test_skip_sweeper_drops_the_listed_points(tmp_path, monkeypatch):
    from hydra_plugins.loosespec_skip_sweeper.skip_sweeper import SkipSweeper

    (tmp_path / "skip").write_text("id-b\n")
    monkeypatch.setenv("LOOSESPEC_SKIP_RUN_IDS", str(tmp_path / "skip"))
    sw = object.__new__(SkipSweeper)
    sw.overrides = [[["k=a"], ["k=b"], ["k=c"]]]
    sw.batch_index = 0
    monkeypatch.setattr(SkipSweeper, "_run_id", lambda self, ov: "id-" + ov[0][-1])
    assert sw.get_job_batch() == [["k=a"], ["k=c"]]


def test_dry_run_of_replicate_70b_lists_the_papers_runs_and_the_shared_points():
    proc = subprocess.run(
        [sys.executable, "-m", "loosespec_bench.plan", "plan", "--title", "70b",
         *[a for e in "replicate_fly_70b spd_k15_70b pld_70b spd_temp1_70b fly_llama33_70b eagle3_llama33_70b "
           "fly_ablation_theta fly_ablation_window fly_ablation_mla".split() for a in ("-e", e)],
         "--", "hydra/launcher=basic"],
        cwd=REPO, capture_output=True, text=True, timeout=600, env={**os.environ, "LOOSESPEC_RESULTS_DIR": "results"},
    )
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    for fragment in (
        "paper_dataset=mbpp_plus", "paper_dataset=acp_prog_gen", "paper_dataset=mmlu", "paper_dataset=livecodebench",
        "[spd_k15_70b]", "method=spd", "drafter=model", "drafter.k=15", "[pld_70b]", "drafter=pld",
        "[spd_temp1_70b]", "generation.temperature=1.0", "[fly_llama33_70b]", "[eagle3_llama33_70b]",
        "meta-llama/Llama-3.3-70B-Instruct", "drafter=eagle3", "shared by several sweeps",
    ):
        assert fragment in out, fragment
    assert "2 shared by several sweeps" in out and "WARNING" not in out


def test_official_ablation_and_niah_settings():
    theta = compose_config(["experiment=fly_ablation_theta"])
    assert (theta.drafter.k, theta.method.window, theta.method.theta, theta.pair.name) == (25, 6, 0.3, "llama31-8b-70b")
    k = compose_config(["experiment=fly_ablation_k"])
    assert (k.pair.name, k.method.window, k.dataset.name) == ("llama31-8b-405b", 8, "humaneval")
    niah = compose_config(["experiment=replicate_fly_70b", "paper_dataset=niah"])
    assert list(niah.dataset.context_lengths) == [4096] and niah.dataset.num_values == 20
    assert set_size(niah.dataset) == (500, True)
    # At scale=cpu the paper's NIAH keeps its task (20 values per key, five depths) with a 1k haystack.
    cpu = compose_config(["experiment=replicate_fly_70b", "paper_dataset=niah", "scale=cpu"])
    assert list(cpu.dataset.context_lengths) == [1024] and cpu.dataset.num_values == 20 and len(cpu.dataset.depths) == 5


def test_qwen3_pair_turns_thinking_off_in_the_chat_template():
    from transformers import PreTrainedTokenizerFast
    from tokenizers import Tokenizer, models, pre_tokenizers

    from loosespec_bench.tasks.prompting import chat_template_kwargs, encode_messages

    cfg = compose_config(["pair=qwen3_4b_32b"])
    assert chat_template_kwargs(cfg) == {"enable_thinking": False}
    assert chat_template_kwargs(compose_config(["pair=llama31_8b_70b"])) == {}
    raw = Tokenizer(models.WordLevel({"[UNK]": 0, "a": 1}, unk_token="[UNK]"))
    raw.pre_tokenizer = pre_tokenizers.Whitespace()
    tok = PreTrainedTokenizerFast(tokenizer_object=raw, unk_token="[UNK]")
    # Qwen3's template: thinking off pre-fills an empty think block.
    tok.chat_template = (
        "{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}"
        "{% if add_generation_prompt %}<assistant>"
        "{% if enable_thinking is defined and enable_thinking is false %}<think></think>{% endif %}{% endif %}"
    )
    msgs = [{"role": "user", "content": "a"}]
    on, _ = encode_messages(tok, msgs, True)
    off, _ = encode_messages(tok, msgs, True, chat_template_kwargs(cfg))
    assert "<think></think>" not in on and off.endswith("<assistant><think></think>")


def _run(experiment: str, theta: float, window: int, dataset: str, speedup: float) -> dict:
    cfg = {"method.name": "fly", "method.theta": theta, "method.window": window, "drafter.name": "mla", "drafter.k": 25,
           "pair.name": "llama31-8b-70b", "dataset.name": dataset, "seed": 0}
    return {"experiment": experiment, "run_id": f"r{theta}{window}{dataset}", "status": "complete", "method": "fly",
            "drafter": "mla", "pair": "llama31-8b-70b", "dataset": dataset, "theta": theta, "W": window, "K": 25,
            "mode": "code", "no_window": False, "temperature": 0.0, "seed": 0, "tau": 5.0, "speedup": speedup,
            "retention": 1.0, "n_samples": 3, "config": cfg}


def test_ablation_tables_find_a_shared_point_in_another_experiments_folder():
    import pandas as pd

    from loosespec_bench.report.tables.fly import fly_ablation_table

    from loosespec_bench.report.index import COLUMNS

    index = pd.DataFrame([
        # The released setting ran once, in the theta sweep's folder; the window ablation needs it too.
        _run("fly_ablation_theta", 0.3, 6, "humaneval", 2.0),
        _run("fly_ablation_theta", 0.5, 6, "humaneval", 2.5),
        _run("fly_ablation_window", 0.3, 4, "humaneval", 1.5),
        _run("replicate_fly_70b", 0.3, 8, "humaneval", 1.8),  # same fixed settings: a W point found by configuration
        {**_run("other", 0.3, 5, "humaneval", 9.9), "config": {**_run("other", 0.3, 5, "humaneval", 9.9)["config"], "drafter.k": 15}},
    ]).reindex(columns=COLUMNS)
    w = fly_ablation_table(index, "W").to_frame()
    values = sorted(str(v) for v in w.iloc[:, 0])
    assert values == ["4", "6", "8"]  # W=6 from the theta folder; K=15 (other fixed settings) left out
    theta = fly_ablation_table(index, "theta").to_frame()
    assert sorted(str(v) for v in theta.iloc[:, 0]) == ["0.3", "0.5"]


def test_launch_prints_its_budget_before_it_starts(tmp_path, monkeypatch, capsys):
    """A launch says what it will cost before any point runs: done points are free, a started
    point costs its missing samples (and its model load)."""
    (sweep,) = build_plan(["fly_ablation_theta"], [f"paths.results_dir={tmp_path}"])
    first, second = sweep.jobs[0], sweep.jobs[1]
    _done(first.folder, first.samples)
    half = second.folder
    half.mkdir(parents=True)
    (half / "samples.jsonl").write_text("".join(json.dumps({"id": f"s{i}"}) + "\n" for i in range(second.samples // 2)))
    line = driver.budget_line([sweep])
    rest = sum(j.hours for j in sweep.jobs[2:])
    left = rest + second.load_h + (second.hours - second.load_h) * (1 - (second.samples // 2) / second.samples)
    n = len(sweep.jobs)
    assert line.startswith(f"budget: {n} points, 1 done, {n - 1} to run (1 of them resume")
    assert f"est. {driver.format_hours(left)} CPU node-hours left of {driver.format_hours(sum(j.hours for j in sweep.jobs))}" in line

    class FakePopen:
        def __init__(self, command, stdout=None, stderr=None, env=None, **kw):
            print("started")

        def wait(self):
            return 0

    monkeypatch.setattr(driver.subprocess, "Popen", FakePopen)
    driver.launch([sweep], sequential=True, log_dir=tmp_path / "launch")
    out = capsys.readouterr().out
    assert out.index("budget: ") < out.index("started")


def test_a_later_look_extends_a_point_finished_at_fewer_samples(tmp_path, monkeypatch):
    """A planned look raises dataset.limit, which the run id leaves out: the point finished at
    the earlier look is "short", not done, so the launch runs it again (the run extends its
    folder) instead of skipping it; at the look's size it is done."""
    (sweep,) = build_plan(["fly_ablation_window"], [f"paths.results_dir={tmp_path}", "dataset.limit=20"])
    job = sweep.jobs[0]
    assert job.samples_exact and job.samples == 20
    (small,) = build_plan(["fly_ablation_window"], [f"paths.results_dir={tmp_path}", "dataset.limit=10"])
    assert small.jobs[0].run_id == job.run_id  # the limit is not part of the run id
    _done(job.folder, 10)
    (sweep,) = build_plan(["fly_ablation_window"], [f"paths.results_dir={tmp_path}", "dataset.limit=20"], with_status=True)
    st = sweep.jobs[0].status
    assert st.state == "short" and st.samples == 10
    assert "finished at 10/20 samples: a launch extends it" in format_status([sweep])
    line = driver.budget_line([sweep])
    n = len(sweep.jobs)
    assert line.startswith(f"budget: {n} points, 0 done, {n} to run (1 of them resume")
    started = []

    class FakePopen:
        def __init__(self, command, stdout=None, stderr=None, env=None, **kw):
            started.append(command)

        def wait(self):
            return 0

    monkeypatch.setattr(driver.subprocess, "Popen", FakePopen)
    driver.launch([sweep], sequential=True, log_dir=tmp_path / "launch")
    # launched, and not left out of the array (the skip file lists the points left out)
    skip = tmp_path / "launch" / "fly_ablation_window.skip"
    assert len(started) == 1 and (not skip.exists() or job.run_id not in skip.read_text())
    # At the earlier look's size the same folder is done.
    (small,) = build_plan(["fly_ablation_window"], [f"paths.results_dir={tmp_path}", "dataset.limit=10"], with_status=True)
    assert small.jobs[0].status.state == "done"
