"""Real-scale runs: the Slurm / submitit launchers, the replication plan, pre-emption and failures,
multi-GPU loading options. No cluster and no GPU needed (the GPU test is marked and skipped)."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from loosespec_bench.settings.config import CONF_DIR, group_choices
from loosespec_bench.errors import ConfigError
from loosespec_bench.store.status import ERROR, point_status

from .conftest import REPO, compose_config, shared_data_dir

# The launcher plugin (pip install hydra-submitit-launcher; the `slurm` extra) for the tests that launch.
needs_submitit = pytest.mark.skipif(
    importlib.util.find_spec("hydra_plugins.hydra_submitit_launcher") is None, reason="pip install hydra-submitit-launcher"
)

# The engine=vllm variants compose only where vLLM is installed (their pre-check imports it):
# tests/test_plan_dry_run.py plans them with a fake vLLM.
REPLICATE = [e for e in group_choices("experiment") if e.startswith("replicate_") and not e.endswith("_vllm")]
# Small, quick, one thread per job (the machine is shared).
TINY = ["experiment=smoke_tiny", "warmup=false", "progress=false", "threads=1"]
# Paper bundles whose data sets load from the hub only (acp_prog_gen: lm-eval + acpbench extras).
HUB_ONLY_BUNDLES = {"acp_prog_gen", "mmlu", "livecodebench"}
LONG = ["dataset.limit=5", "generation.max_new_tokens=200"]  # ~2-5 s a sample: time to interrupt it


def _compose_hydra(overrides: list[str]):
    """The root config with its hydra node (launcher, sweeper), as `python -m loosespec_bench` sees it."""
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose(config_name="config", overrides=overrides, return_hydra_config=True)


def _env(results: Path) -> dict[str, str]:
    return {
        **os.environ,
        "LOOSESPEC_DATA_DIR": str(shared_data_dir()),
        "LOOSESPEC_RESULTS_DIR": str(results),
        "PYTHONUNBUFFERED": "1",
    }


def _cli(args: list[str], results: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "loosespec_bench", *args], cwd=REPO, env=_env(results), capture_output=True, text=True, timeout=timeout
    )


def _ids(path: Path) -> list[str]:
    return [json.loads(line)["id"] for line in path.read_text().splitlines()]


# --------------------------------------------------------------------------- launcher configs


@needs_submitit
def test_launcher_groups_extend_the_submitit_plugin(monkeypatch, tmp_path):
    monkeypatch.setenv("LOOSESPEC_SLURM_PARTITION", "gpu-env")
    monkeypatch.delenv("LOOSESPEC_SLURM_ACCOUNT", raising=False)
    slurm = _compose_hydra(["hydra/launcher=slurm", "experiment=replicate_fly_70b"]).hydra.launcher
    assert slurm._target_.endswith("SlurmLauncher")
    assert slurm.partition == "gpu-env" and slurm.account is None  # from the environment, else null
    assert slurm.name == "lsb-replicate_fly_70b" and slurm.max_num_timeout > 0
    local = _compose_hydra(["hydra/launcher=local"]).hydra.launcher
    assert local._target_.endswith("LocalLauncher")
    # An optional site file (conf/local/slurm.yaml; here on an extra search path) wins over the env.
    (tmp_path / "local").mkdir()
    (tmp_path / "local" / "slurm.yaml").write_text("partition: from-site-file\nsetup: [module load cuda]\n")
    site = _compose_hydra(["hydra/launcher=slurm", f"hydra.searchpath=[file://{tmp_path}]"]).hydra.launcher
    assert site.partition == "from-site-file" and list(site.setup) == ["module load cuda"]


@needs_submitit
def test_slurm_launcher_submits_one_job_array(monkeypatch, tmp_path):
    """The real launcher code path up to sbatch: one array, the resources, USR2 before the limit."""
    from hydra.utils import instantiate
    from submitit.slurm import slurm as submitit_slurm

    captured: dict[str, str] = {}

    class Submitted(Exception):
        pass

    def fake_submit(self, command):
        captured["sbatch"] = self._make_submission_file_text(command, "test")
        raise Submitted

    monkeypatch.setattr(submitit_slurm.SlurmExecutor, "affinity", classmethod(lambda cls: 2))  # "srun exists"
    monkeypatch.setattr(submitit_slurm.SlurmExecutor, "_submit_command", fake_submit)
    # No cluster to check the request against (a local one may be up: tests/test_slurm.py).
    monkeypatch.setattr("loosespec_bench.slurm.cluster_nodes", lambda *a, **k: None)
    monkeypatch.setenv("LOOSESPEC_SLURM_PARTITION", "gpu-test")
    monkeypatch.setenv("LOOSESPEC_SLURM_ACCOUNT", "proj42")
    cfg = _compose_hydra(
        ["experiment=replicate_fly_70b", "hydra/launcher=slurm", "hydra.launcher.gpus_per_node=4", f"hydra.sweep.dir={tmp_path}"]
    )
    launcher = instantiate(cfg.hydra.launcher)
    launcher.config, launcher.hydra_context, launcher.task_function = cfg, None, print
    with pytest.raises(Submitted):
        launcher.launch([["drafter.k=15"], ["drafter.k=25"]], initial_job_idx=0)
    script = captured["sbatch"]
    for flag in (
        "--array=0-1%2", "--partition=gpu-test", "--account=proj42", "--gpus-per-node=4", "--cpus-per-task=8",
        "--time=1440", "--signal=USR2@120", "--requeue", "--job-name=lsb-replicate_fly_70b",
    ):
        assert flag in script, (flag, script)
    assert "submitit.core._submit" in script


# --------------------------------------------------------------------------- replication plan


@needs_submitit
def test_every_replicate_experiment_point_composes_and_no_two_jobs_share_a_folder(tmp_path):
    from loosespec_bench.plan import build_plan, duplicates

    gpu = ["hydra/launcher=slurm", "hydra.launcher.gpus_per_node=4", f"paths.results_dir={tmp_path}"]
    sweeps = build_plan(REPLICATE, gpu)
    sweeps += build_plan([e for e in REPLICATE if "405b" not in e], [*gpu[:1], "scale=cpu"])
    assert not duplicates(sweeps)
    by_name = {s.experiment: s for s in sweeps[: len(REPLICATE)]}
    assert len(by_name["replicate_fly_70b"].jobs) == 24  # 12 data sets x K in {15, 25}
    assert len(by_name["replicate_dropmatch"].jobs) == 32  # 2 pairs x {dropmatch, spd} x 8 data sets
    assert {j.dataset for j in by_name["replicate_ar_70b"].jobs} == {
        "gsm8k", "mgsm", "humaneval", "niah", "ifeval", "komt_bench", "mt_bench", "spec_bench"
    }
    fly405 = by_name["replicate_fly_405b"].jobs[0]
    assert fly405.settings["pair.target.path"] == "meta-llama/Llama-3.1-405B-Instruct"
    assert fly405.settings["pair.target.device_map"] == "balanced_low_0"
    dm = by_name["replicate_dropmatch"].settings()
    assert (dm["drafter.k"], dm["method.n_paths"], dm["method.p"]) == (10, 5, 0.3)


@pytest.mark.parametrize("bundle", group_choices("paper_dataset"))
def test_paper_dataset_bundles_load_the_sizes_the_plan_assumes(bundle, data_dir):
    """Each paper-scale data set bundle instantiates its task, with the sample count the plan's
    cost model uses (NIAH on a smaller grid: building 32k-token haystacks takes a while)."""
    from loosespec_bench.build import build_task
    from loosespec_bench.tasks.sizing import set_size as _set_size, turns_per_sample

    if bundle in HUB_ONLY_BUNDLES:
        pytest.skip(f"{bundle}: hub only (no local copy under shared/datasets); its size in the plan is marked approximate")
    extra = ["dataset.context_lengths=[1024,2048]", "dataset.repeats=2", "dataset.num_values=4"] if bundle == "niah" else []
    cfg = compose_config(["experiment=replicate_fly_70b", f"paper_dataset={bundle}", "pair=tiny", *extra])
    # A variant bundle (gsm8k_2shot) selects its base data set with other paper settings.
    assert bundle.startswith(cfg.dataset.name) and cfg.dataset.limit is None
    samples = build_task(cfg).samples()
    assert _set_size(cfg.dataset) == (len(samples), True)
    turns = sum(1 + len(x.followups) for x in samples) / len(samples)
    assert turns == pytest.approx(turns_per_sample(cfg.dataset))


def test_humaneval_bundle_runs_code_as_the_user_only_when_asked(monkeypatch):
    monkeypatch.delenv("LOOSESPEC_SANDBOX_ALLOW_SAME_USER", raising=False)
    assert compose_config(["experiment=replicate_fly_70b", "paper_dataset=humaneval"]).dataset.sandbox.allow_same_user is False
    monkeypatch.setenv("LOOSESPEC_SANDBOX_ALLOW_SAME_USER", "true")
    assert compose_config(["experiment=replicate_fly_70b", "paper_dataset=humaneval"]).dataset.sandbox.allow_same_user is True


@needs_submitit
def test_dry_run_prints_the_70b_plan_with_the_official_settings():
    proc = subprocess.run(
        ["make", "-s", "-o", "install", "-o", "install-replicate", "replicate-70b",
         f"PY={sys.executable}", "DRY_RUN=1", "REPLICATE_70B_SWEEPS=replicate_fly_70b replicate_ar_70b"],
        cwd=REPO, capture_output=True, text=True, timeout=300, env={**os.environ, "LOOSESPEC_RESULTS_DIR": "results"},
    )
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    for fragment in (
        "meta-llama/Llama-3.1-70B-Instruct", "meta-llama/Llama-3.1-8B-Instruct", "method=fly",
        "method.theta=0.3", "method.window=6", "drafter=mla", "generation.temperature=0.0",
        "generation.max_new_tokens=1024", "drafter.k=15", "drafter.k=25", "4 GPU(s)/job",
        "pair.target.device_map=balanced_low_0", "hydra/launcher=slurm", "GPU-hours",
    ):
        assert fragment in out, fragment
    assert "[replicate_fly_70b] 24 jobs" in out and "[replicate_ar_70b] 16 jobs" in out
    assert "total: 2 sweeps, 40 jobs" in out
    assert "WARNING" not in out


def test_dry_run_of_replicate_cpu_plans_the_cpu_scale():
    proc = subprocess.run(
        ["make", "-s", "-o", "install", "-o", "install-replicate", "replicate-cpu",
         f"PY={sys.executable}", "DRY_RUN=1", "REPLICATE_CPU_SWEEPS=fly_ablation_theta replicate_ar_70b"],
        cwd=REPO, capture_output=True, text=True, timeout=300, env={**os.environ, "LOOSESPEC_RESULTS_DIR": "results"},
    )
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    for fragment in ("experiment=fly_ablation_theta hydra/launcher=basic scale=cpu", "embedded:qwen2.5-coder-1.5b-instruct",
                     "generation.max_new_tokens=256", "drafter.k=15", "method.theta=0.5"):
        assert fragment in out, fragment
    assert "[fly_ablation_theta] 4 jobs" in out and "[replicate_ar_70b] 8 jobs" in out  # the CPU grid; one pair
    assert "Llama" not in out and "Qwen3" not in out


def test_dry_run_of_the_cpu_evidence_runs_plans_each_look_and_prints_the_budget():
    # Look 2: GSM8K at 200 problems, HumanEval at all 164 (results/cpu/evidence/claims.yaml's looks).
    proc = subprocess.run(
        ["make", "-s", "-o", "install", "-o", "install-replicate", "replicate-cpu-evidence", f"PY={sys.executable}",
         "DRY_RUN=1", "LOOK=2", "EVIDENCE_GSM8K_SWEEPS=cpu_quality_fp32", "EVIDENCE_HUMANEVAL_SWEEPS=cpu_quality_fp32_humaneval",
         "EVIDENCE_OTHER_SWEEPS=cpu_komt_dropmatch"],
        cwd=REPO, capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    for fragment in ("experiment=cpu_quality_fp32 scale=cpu dataset.limit=200", "experiment=cpu_quality_fp32_humaneval scale=cpu dataset.limit=164",
                     "pair.dtype=float32", "generation.max_new_tokens=192",
                     "speed benchmark (gsm8k, pair qwen25_coder_embedded): 40 problems x 8 configurations",
                     "speed benchmark (gsm8k, pair smollm2_to_qwen25_coder): 30 problems x 3 configurations", " CPU h "):
        assert fragment in out, fragment
    # a dry run starts nothing: the speed benchmark is only asked for its budget (no calibration, no occasion)
    assert "calibrating:" not in proc.stderr and "occasion 1" not in proc.stderr


def test_the_evidence_looks_are_the_declared_ones():
    """The looks live in three places that must agree: the claims' declaration (what the verdicts
    spend alpha on), replicate.mk (what each LOOK runs) and the first look of experiment_scale/cpu."""
    import re

    import yaml

    from loosespec_bench.report.claims.declaration import load_declaration

    mk = (REPO / "replicate.mk").read_text()
    looks = {s: tuple(int(v) for v in re.search(rf"^{s}_LOOKS := (.+)$", mk, re.M).group(1).split()) for s in ("GSM8K", "HUMANEVAL")}
    decl = load_declaration(REPO / "results" / "cpu" / "evidence" / "claims.yaml")
    for c in decl.claims:
        if c.looks:
            assert c.looks == looks[c.datasets[0].upper()], c.id
    scale = REPO / "loosespec_bench" / "conf" / "experiment_scale" / "cpu"
    for name, s in (("cpu_quality_fp32", "GSM8K"), ("cpu_quality_fp32_fly", "GSM8K"), ("cpu_quality_fp32_humaneval", "HUMANEVAL"),
                    ("cpu_quality_fp32_humaneval_fly", "HUMANEVAL")):
        assert yaml.safe_load((scale / f"{name}.yaml").read_text())["dataset"]["limit"] == looks[s][0], name


def test_a_float32_cpu_point_is_planned_at_the_float32_rate():
    from omegaconf import OmegaConf

    from loosespec_bench.measure.costmodel import FLOAT32_CPU_SLOWDOWN
    from loosespec_bench.plan import estimate

    def cfg(dtype):
        return OmegaConf.create({"pair": {"name": "tiny", "dtype": dtype, "device": "cpu"}, "method": {"name": "ar"},
                                 "dataset": {"name": "gsm8k", "limit": 10}, "generation": {"max_new_tokens": 100}, "baseline": "none"})
    one = dict(tps={"tiny": 10.0}, speedup={}, load_min={"tiny": 0.0})
    h16, h32 = estimate(cfg("bfloat16"), 1.0, **one)["hours"], estimate(cfg("float32"), 1.0, **one)["hours"]
    assert h32 == pytest.approx(h16 * FLOAT32_CPU_SLOWDOWN)


def test_the_assumed_speedup_is_the_rule_classes_own_and_the_command_line_wins():
    """No method name in the planner: a rule declares its paper's figure on its class
    (Verifier.assumed_speedup, by pair); a subclass, another rule, has none of its own; a
    --speedup METHOD[@PAIR]=X from the command line wins."""
    from omegaconf import OmegaConf

    from loosespec_bench.measure.costmodel import ANY_PAIR
    from loosespec_bench.plan import estimate
    from loosespec_bench.verifiers import DropMatch, FLy

    def hours(method, pair="tiny", speedup=None):
        cfg = OmegaConf.create({"pair": {"name": pair, "dtype": "bfloat16", "device": "cpu"}, "method": {"name": method},
                                "dataset": {"name": "gsm8k", "limit": 10}, "generation": {"max_new_tokens": 100},
                                "baseline": "none"})
        return estimate(cfg, 1.0, tps={pair: 10.0}, speedup=speedup or {}, load_min={pair: 0.0})["hours"]

    alone = hours("ar")
    assert alone / hours("fly") == pytest.approx(FLy.assumed_speedup[ANY_PAIR]) and FLy.assumed_speedup[ANY_PAIR] > 1
    big = "llama31-8b-405b"
    assert hours("ar", big) / hours("fly", big) == pytest.approx(FLy.assumed_speedup[big])
    assert alone / hours("dropmatch") == pytest.approx(DropMatch.assumed_speedup[ANY_PAIR])
    assert hours("dropmatch_autojudge") == pytest.approx(alone)  # a DropMatch subclass: no figure of its own
    assert hours("spd") == pytest.approx(alone) and hours("someone_elses_rule") == pytest.approx(alone)
    assert alone / hours("fly", speedup={"fly": 4.0}) == pytest.approx(4.0)
    assert alone / hours("fly", speedup={"fly@tiny": 3.0, "fly": 4.0}) == pytest.approx(3.0)


# --------------------------------------------------------------------------- launching


@needs_submitit
def test_submitit_local_launcher_runs_a_two_point_sweep(tmp_path):
    sweep = tmp_path / "sweep"
    proc = _cli(["-m", *TINY, "hydra/launcher=local", "drafter.k=2,4", f"hydra.sweep.dir={sweep}"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    done = sorted(p.parent.name for p in (tmp_path / "smoke_tiny").glob("*/summary.json"))
    assert len(done) == 2 and done[0].startswith("spd_model-k2_") and done[1].startswith("spd_model-k4_")
    # Two jobs, two processes: submitit's own folders, logs and results.
    logs = sorted((sweep / ".submitit").glob("*/*_0_log.out"))
    assert len(logs) == 2 and len({p.parent.name for p in logs}) == 2
    assert all("tau (tokens per target step)" in p.read_text() for p in logs)
    assert len(list((sweep / ".submitit").glob("*/*_result.pkl"))) == 2


@pytest.mark.xfail(reason="the sweep pre-check now refuses pair.draft.path=tiny:x before any point runs; "
                   "this test needs a point that fails only at run time (open: issue 24 follow-up)", strict=False, run=False)
def test_failed_point_leaves_its_error_and_the_sweep_goes_on(tmp_path):
    # As `make replicate-cpu` launches: the plan driver runs the `-m` sweep (basic launcher).
    logs = tmp_path / "launch"
    proc = subprocess.run(
        [sys.executable, "-m", "loosespec_bench.plan", "launch", "--sequential", "-e", "smoke_tiny", "--log-dir", str(logs),
         "--", *TINY[1:], "pair.draft.path=tiny:x,tiny:1"],
        cwd=REPO, env=_env(tmp_path), capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode != 0 and "FAILED" in proc.stdout  # the failed point is reported at the end ...
    assert "Error executing job with overrides" in (logs / "smoke_tiny.log").read_text()
    folders = list((tmp_path / "smoke_tiny").iterdir())
    assert len(folders) == 2
    ok = [p for p in folders if (p / "summary.json").exists()]
    bad = [p for p in folders if (p / ERROR).exists()]
    assert len(ok) == 1 and len(bad) == 1  # ... after running the point that comes after it
    text = (bad[0] / ERROR).read_text()
    assert "Traceback" in text and "tiny:x" in text and "pair.draft.path=tiny:x" in text

    # make status reads the folders: done, failed, and a planned point that never ran.
    from loosespec_bench.plan import build_plan, format_status

    (sweep,) = build_plan(["smoke_tiny"], [*TINY[1:], "pair.draft.path=tiny:x,tiny:1,tiny:2", f"paths.results_dir={tmp_path}"], with_status=True)
    assert [j.status.state for j in sweep.jobs] == ["failed", "done", "pending"]
    report = format_status([sweep])
    assert "1 done, 0 short, 0 running, 1 failed, 1 pending" in report and "tiny:x" in report

    # An attempt that succeeds clears the error an earlier attempt left.
    from loosespec_bench.run.app import run_recording_errors

    (ok[0] / ERROR).write_text("failed: earlier\n")
    run_recording_errors(compose_config([*TINY, "pair.draft.path=tiny:1"], results_dir=tmp_path))
    assert not (ok[0] / ERROR).exists() and point_status(ok[0]).state == "done"


def _children(pid: int) -> list[int]:
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            out.append(int(stat.parent.name))
    return out


def _start_long_local_sweep(tmp_path: Path) -> tuple[subprocess.Popen, Path, int]:
    """One-point submitit-local sweep long enough to be interrupted; returns (driver, samples file,
    pid of the job's task process) once 2 samples are on disk."""
    sweep = tmp_path / "sweep"
    args = ["-m", *TINY, "hydra/launcher=local", *LONG, f"hydra.sweep.dir={sweep}"]
    driver = subprocess.Popen(
        [sys.executable, "-m", "loosespec_bench", *args], cwd=REPO, env=_env(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    deadline = time.time() + 240
    while time.time() < deadline:
        found = list((tmp_path / "smoke_tiny").glob("*/samples.jsonl"))
        if found and len(found[0].read_text().splitlines()) >= 2:
            break
        assert driver.poll() is None, driver.stdout.read().decode() if driver.stdout else ""
        time.sleep(0.05)
    else:
        driver.kill()
        pytest.fail("no samples within 240 s")
    (job_dir,) = [p for p in (sweep / ".submitit").iterdir() if p.name.isdigit()]
    tasks = _children(int(job_dir.name))  # submitit's controller (the job id) runs the task
    assert len(tasks) == 1
    return driver, found[0], tasks[0]


@needs_submitit
# Slow (27 s): the requeue-and-resume path runs in CI on a real Slurm cluster instead
# (tests/test_slurm.py, beside the suite); this submitit-local twin runs with -m slow.
@pytest.mark.slow
def test_preempted_local_job_is_requeued_and_resumes_without_duplicates(tmp_path):
    """USR2 is what Slurm sends before pre-emption / the time limit (--signal=USR2@...): the
    launcher checkpoints, submitit requeues the job, and app.run resumes from the result folder."""
    driver, samples, task = _start_long_local_sweep(tmp_path)
    os.kill(task, signal.SIGUSR2)
    out, _ = driver.communicate(timeout=300)
    assert driver.returncode == 0, out.decode()
    ids = _ids(samples)
    assert len(ids) == len(set(ids)) == 5
    log = next((tmp_path / "sweep" / ".submitit").glob("*/*_0_log.out")).read_text()
    err = next((tmp_path / "sweep" / ".submitit").glob("*/*_0_log.err")).read_text()
    assert "this job is preempted" in err, err  # submitit's handler: checkpoint, then requeue (no error recorded)
    assert not (samples.parent / ERROR).exists()
    # One start line per attempt ("... N already done -> folder"); the data-source line beside it is not one.
    starts = [ln for ln in log.splitlines() if ln.startswith("[loosespec_bench]") and " already done" in ln]
    assert len(starts) == 2 and "0 already done" in starts[0]
    resumed = int(starts[1].split(" already done")[0].rsplit(" ", 1)[1])
    assert 2 <= resumed < 5  # the requeued job skipped what was on disk
    assert json.loads((samples.parent / "summary.json").read_text())["n_samples"] == 5


@needs_submitit
# Slow (35 s): a killed job resuming is covered in CI by the Slurm fault tests (node lost, scancel);
# this local twin runs with -m slow.
@pytest.mark.slow
def test_killed_sweep_job_shows_as_running_and_a_rerun_resumes_it(tmp_path):
    driver, samples, task = _start_long_local_sweep(tmp_path)
    os.kill(task, signal.SIGKILL)  # no warning: a lost node, an OOM kill
    driver.communicate(timeout=120)
    assert driver.returncode != 0
    text = samples.read_text()
    before = text[: text.rfind("\n") + 1].splitlines()  # finished samples (a kill may cut the last line)
    assert point_status(samples.parent).state == "running"  # no summary, no error: killed or still running
    # Rerun the same point (here in-process, as the basic launcher would run it): it resumes.
    from loosespec_bench.run.app import run_recording_errors

    summary = run_recording_errors(compose_config([*TINY, *LONG], results_dir=tmp_path))
    assert summary["n_samples"] == 5
    after = samples.read_text().splitlines()
    assert [json.loads(x)["id"] for x in after] == list(dict.fromkeys(json.loads(x)["id"] for x in after))
    assert len(after) == 5 and after[: len(before)] == before  # finished samples never redone or rewritten
    assert point_status(samples.parent).state == "done"


# --------------------------------------------------------------------------- multi-GPU loading


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    from loosespec_bench.models.tiny import tiny_model, tiny_tokenizer

    path = tmp_path_factory.mktemp("tiny_hf")
    tiny_model(0).save_pretrained(path)
    tiny_tokenizer().save_pretrained(path)
    return path


def test_device_map_loading_matches_the_default_on_cpu(tiny_dir):
    import torch

    from loosespec_bench.models.loading import input_device, load_model

    plain = load_model(str(tiny_dir), dtype="float32")
    split = load_model(str(tiny_dir), dtype="float32", device_map="auto", max_memory={"cpu": "2GiB"})
    assert input_device(split.model) == split.model.device == torch.device("cpu")
    ids = torch.tensor([[1, 2, 3, 4]])
    assert torch.equal(plain.model(ids).logits, split.model(ids).logits)


def test_pair_load_options_default_to_the_single_device_path():
    from loosespec_bench.models.loading import load_options, resolve_max_memory

    for pair in ("tiny", "qwen25_coder_embedded"):
        cfg = compose_config([f"pair={pair}"])
        assert load_options(cfg.pair.target) == {} and load_options(cfg.pair.draft) == {}
    cfg = compose_config(["pair=llama31_8b_405b", "pair.target.max_memory={0:20GiB,1:130GiB}"])
    opts = load_options(cfg.pair.target)
    assert opts["device_map"] == "balanced_low_0" and resolve_max_memory(opts["max_memory"]) == {0: "20GiB", 1: "130GiB"}
    assert cfg.pair.draft_device == "cuda:0"


@pytest.mark.parametrize(
    "kwargs, fragment",
    [
        ({"max_memory": {"cpu": "1GiB"}}, "max_memory needs a device_map"),
        ({"device_map": "auto", "max_memory": 3}, "max_memory=3 must be"),
        ({"quantization": "int3"}, "quantization='int3' is not supported"),
    ],
)
def test_bad_placement_options_fail_in_one_line(tiny_dir, kwargs, fragment):
    from loosespec_bench.models.loading import load_model

    with pytest.raises(ConfigError, match=fragment):
        load_model(str(tiny_dir), dtype="float32", **kwargs)
    with pytest.raises(ConfigError, match="tiny models use pair.device"):
        load_model("tiny:0", device_map="auto")


def test_resolve_max_memory_forms(monkeypatch):
    import torch

    from loosespec_bench.models.loading import resolve_max_memory

    assert resolve_max_memory(None) is None
    assert resolve_max_memory({"0": "10GiB", "cpu": "1GiB"}) == {0: "10GiB", "cpu": "1GiB"}
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 3)
    assert resolve_max_memory("70GiB") == {0: "70GiB", 1: "70GiB", 2: "70GiB"}


@pytest.mark.gpu
@pytest.mark.skipif(not __import__("torch").cuda.is_available(), reason="needs CUDA")
def test_split_target_generates_like_one_device(tiny_dir):
    """On a GPU machine: a target placed by device_map gives the same logits as one moved whole."""
    import torch

    from loosespec_bench.models.loading import input_device, load_model

    whole = load_model(str(tiny_dir), dtype="float32", device="cuda")
    split = load_model(str(tiny_dir), dtype="float32", device="cuda", device_map="auto")
    ids = torch.tensor([[1, 2, 3, 4]])
    assert input_device(split.model).type == "cuda"
    torch.testing.assert_close(whole.model(ids.cuda()).logits, split.model(ids.to(input_device(split.model))).logits.to("cuda"))


def test_status_states(tmp_path):
    assert point_status(tmp_path / "absent").state == "pending"
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text("x: 1\n")
    (run / "samples.jsonl").write_text('{"id": "a"}\n{"id": "b"}\n{"id": "c"')  # a kill mid-line
    st = point_status(run)
    assert (st.state, st.samples) == ("running", 2) and st.age_s is not None
    (run / ERROR).write_text("failed: now\nTraceback ...\nRuntimeError: CUDA out of memory\n")
    st = point_status(run)
    assert st.state == "failed" and st.error == "RuntimeError: CUDA out of memory"
    (run / "summary.json").write_text("{}")
    assert point_status(run).state == "done"


def test_pair_file_405b_resolves():
    cfg = compose_config(["pair=llama31_8b_405b", "method=fly", "drafter=mla"])
    OmegaConf.to_container(cfg, resolve=True)
    assert cfg.pair.name == "llama31-8b-405b" and cfg.pair.dtype == "bfloat16"


def _record(sid: str, correct: bool, baseline_correct: bool) -> dict:
    """A complete sample record (the readers skip one without output_text / metrics) whose
    scores are what the power table reads."""
    side = {"output_text": "", "metrics": {}}
    return {"id": sid, **side, "score": {"correct": correct}, "baseline": {**side, "score": {"correct": baseline_correct}}}


def test_power_table_is_the_80_percent_n_at_the_observed_effect(tmp_path):
    """Two points on one set; one finished with 1 gained pair in 4: d = 0.25, effect +0.25, and
    the exact McNemar test has 80% power at Connor's n = (1.96 x 0.5 + 0.8416 x sqrt(0.25 -
    0.0625))^2 / 0.0625 = 28.9 -> 29 pairs. No finished run: the assumed d and effect."""
    from loosespec_bench.plan import build_plan, power_plan
    from loosespec_bench.launch.power import format_power

    (sweep,) = build_plan(["smoke_tiny"], ["pair.draft.path=tiny:x,tiny:1", f"paths.results_dir={tmp_path}"])
    planned = max(j.samples for j in sweep.jobs)
    assumed = power_plan([sweep], assumed=0.1, effect=0.05)
    # (1.959964 sqrt(0.1) + 0.841621 sqrt(0.1 - 0.0025))^2 / 0.0025 = 311.6
    assert len(assumed) == 1 and assumed[0].observed_pairs == 0 and assumed[0].n_needed == 312
    assert assumed[0].budget == 10 * planned and not assumed[0].decidable  # the smoke plan's few samples
    text = format_power(assumed)
    # The smoke set (issue 73): an n above the set's own size is "not reachable on this set" first.
    verdict = (f"not reachable on this set (n = 312 > its {assumed[0].set_size:,} problems)" if 0 < assumed[0].set_size < 312
               else "not decidable at this scale (n = 312)")
    assert "n for 80% power" in text and verdict in text
    folder = sweep.jobs[0].folder
    folder.mkdir(parents=True)
    rows = [(True, True), (True, False), (False, False), (True, True)]
    with (folder / "samples.jsonl").open("w") as f:
        for i, (a, b) in enumerate(rows):
            f.write(json.dumps(_record(f"s{i}", a, b)) + "\n")
    (row,) = power_plan([sweep])
    assert (row.observed_pairs, row.runs, row.discordance, row.effect, row.n_needed) == (4, 1, 0.25, 0.25, 29)
    assert row.hours_at_n > 0 and row.unit == "CPU node-h"
    # A larger budget makes it decidable: the n is printed as the n, not as out of reach.
    (wide,) = power_plan([sweep], budget_factor=29 / planned)
    assert wide.decidable and "  29  " in format_power([wide]) and "4 pairs in 1 run(s)" in format_power([wide])
    (row90,) = power_plan([sweep], power=0.9)  # configurable power: z_0.9 = 1.2816 -> 37.7
    assert row90.n_needed == 38 and "n for 90% power" in format_power([row90], power=0.9)
    # No discordant pair in 4: d is the rule of three's 3/4, and the effect seen is 0: no n decides.
    with (folder / "samples.jsonl").open("w") as f:
        for i in range(4):
            f.write(json.dumps(_record(f"s{i}", True, True)) + "\n")
    (none,) = power_plan([sweep])
    assert none.discordance == 0.75 and none.n_needed == float("inf") and not none.decidable
    assert "not decidable at this scale (no effect seen)" in format_power([none])


@pytest.mark.parametrize("flag", ["--power=1.2", "--effect=0.5", "--budget-factor=0"])
def test_power_options_bad_input_is_one_error_line(flag, capsys):
    from loosespec_bench.plan import main

    assert main(["plan", "--experiment", "smoke_tiny", flag]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and flag.split("=")[0] in err[0]
