"""Issue 73: what the dry run checks (launch/dry_run.py), the power table's unreachable n, the
points past the time limit, and the 70B plan through vLLM up to the engine's start (a fake vLLM
0.33 with FLy: config, plan, resources, pre-check). No cluster, no GPU, no vLLM needed."""

from __future__ import annotations

import math
import sys
import types
from typing import Literal

import pytest

from loosespec_bench.launch.dry_run import (ModelNeed, cache_state, check_cluster, collect, download_lines, format_models, is_hub_id,
                                            models_of, parse_time_limit, partition_limits, requeues_needed)
from loosespec_bench.launch.power import Power, format_power, power_verdict
from loosespec_bench.slurm import parse_sinfo


@pytest.mark.parametrize("path, hub", [("meta-llama/Llama-3.1-8B-Instruct", True), ("tiny:0", False), ("embedded:qwen2.5-coder-0.5b-instruct", False),
                                       ("random", False), ("/models/llama", False), ("./head", False), (None, False), ("noslash", False)])
def test_is_hub_id(path, hub):
    assert is_hub_id(path) is hub


def _cfg(drafter: str, needs_model: bool, head=None, method: str = "spd"):
    from omegaconf import OmegaConf

    return OmegaConf.create({"pair": {"target": {"path": "org/target-70b"}, "draft": {"path": "org/draft-1b"}},
                             "method": {"name": method}, "drafter": {"name": drafter, "needs_model": needs_model, "head_path": head}})


def test_models_of_names_target_draft_and_head_with_their_roles():
    assert models_of(_cfg("model", True)) == [("org/target-70b", "target"), ("org/draft-1b", "draft")]
    assert models_of(_cfg("eagle3", False, "org/eagle3-head")) == [("org/target-70b", "target"), ("org/draft-1b", "pair draft"),
                                                                   ("org/eagle3-head", "eagle3 head")]
    assert models_of(_cfg("pld", False)) == [("org/target-70b", "target"), ("org/draft-1b", "pair draft")]


def test_collect_lists_each_model_once_with_its_sweeps_and_download_lines():
    needs = collect([("a", _cfg("model", True)), ("b", _cfg("eagle3", False, "org/eagle3-head")), ("b", _cfg("model", True))])
    assert [n.repo for n in needs] == ["org/draft-1b", "org/eagle3-head", "org/target-70b"]
    draft = needs[0]
    assert draft.roles == ["draft", "pair draft"] and draft.sweeps == ["a", "b"]
    lines = download_lines(needs)
    assert lines[1].startswith("huggingface-cli download org/eagle3-head") and lines[1].endswith("# eagle3 head: b")
    many = download_lines([ModelNeed("o/m", ["target"], ["s1", "s2", "s3", "s4"])])
    assert many == ["huggingface-cli download o/m  # target: s1, s2 +2 more"]


def test_cache_state_reads_the_hf_cache(tmp_path):
    snap = tmp_path / "models--org--cached" / "snapshots" / "abc"
    snap.mkdir(parents=True)
    (snap / "config.json").write_text("{}")
    (snap / "model.safetensors").write_text("")
    (tmp_path / "models--org--cached" / "refs").mkdir()
    (tmp_path / "models--org--cached" / "refs" / "main").write_text("abc")
    half = tmp_path / "models--org--half" / "snapshots" / "def"
    half.mkdir(parents=True)
    (half / "config.json").write_text("{}")
    (tmp_path / "models--org--half" / "refs").mkdir()
    (tmp_path / "models--org--half" / "refs" / "main").write_text("def")
    assert cache_state("org/cached", str(tmp_path)) == "cached"
    assert cache_state("org/half", str(tmp_path)) == "config only"
    assert cache_state("org/absent", str(tmp_path)) == "missing"
    text = format_models([ModelNeed("org/cached", ["target"], ["s"], "cached"), ModelNeed("org/absent", ["draft"], ["s"], "missing")])
    assert text.startswith("models: 2 needed by the plan, 1 in the local Hugging Face cache, 1 not")
    assert "huggingface-cli download org/absent" in text and "HF_HUB_OFFLINE=1" in text
    assert "huggingface-cli download org/cached" not in text


@pytest.mark.parametrize("text, minutes", [("infinite", None), ("1-00:00:00", 1440.0), ("2:00:00", 120.0), ("30:00", 30.0), ("45", 45.0),
                                           ("UNLIMITED", None)])
def test_parse_time_limit(text, minutes):
    assert parse_time_limit(text) == minutes


SINFO = "g1|gpu*|gpu:h100:8(S:0-1)|2000000|128\ng2|gpu*|gpu:h100:8|2000000|128\nc1|cpu|(null)|256000|64\n"


def test_check_cluster_names_the_setting_or_says_ok():
    nodes = parse_sinfo(SINFO)
    limits = partition_limits("gpu*|1-00:00:00\ncpu|infinite\n")
    ok = {"partition": "gpu", "gpus_per_node": 4, "mem_gb": 128, "cpus_per_task": 16, "timeout_min": 1440}
    assert check_cluster(ok, nodes, limits).startswith("ok: partition gpu (8 GPUs per node, time limit 1440 min)")
    too_long = {**ok, "timeout_min": 2880}
    assert "timeout_min=2880 is above partition gpu's time limit (1440 min)" in check_cluster(too_long, nodes, limits)
    assert "has no partition a100" in check_cluster({**ok, "partition": "a100"}, nodes, limits)
    assert "at most 8 GPUs" in check_cluster({**ok, "gpus_per_node": 16}, nodes, limits)
    assert "partition cpu has no GPUs" in check_cluster({**ok, "partition": "cpu"}, nodes, limits)
    assert check_cluster(ok, None, None).startswith("not checked")


def test_requeues_needed():
    assert requeues_needed(42.6, 1440) == 1 and requeues_needed(75.1, 1440) == 3 and requeues_needed(23.9, 1440) == 0
    assert requeues_needed(100, None) == 0 and requeues_needed(24.0, 1440) == 0


def test_power_beyond_the_sets_size_is_not_reachable_on_this_set():
    row = Power(dataset="humaneval", discordance=0.1, effect=0.05, observed_pairs=0, runs=0, n_needed=312.0, n_planned=164, budget=1640.0,
                hours_at_n=0.0, unit="GPU-h", set_size=164)
    assert not row.reachable and not row.decidable
    assert power_verdict(row) == "not reachable on this set (n = 312 > its 164 problems)"
    assert "not reachable on this set" in format_power([row])
    fits = Power(dataset="gsm8k", discordance=0.1, effect=0.05, observed_pairs=0, runs=0, n_needed=312.0, n_planned=1319, budget=13190.0,
                 hours_at_n=10.0, unit="GPU-h", set_size=1319)
    assert fits.reachable and power_verdict(fits) == "312"


# ---------------------------------------------------------------------------- the 70B plan through vLLM


@pytest.fixture
def vllm_033(monkeypatch):
    """A fake vLLM 0.33 that carries FLy (rejection_sample_method="fly" and its settings)."""
    root = types.ModuleType("vllm")
    root.__version__ = "0.33.0"
    config = types.ModuleType("vllm.config")
    config.SpeculativeConfig = types.SimpleNamespace(__dataclass_fields__={"method": None, "rejection_sample_method": None,
                                                                           "fly_entropy_threshold": None, "fly_window_size": None})
    speculative = types.ModuleType("vllm.config.speculative")
    speculative.RejectionSampleMethod = Literal["standard", "fly"]
    platforms = types.ModuleType("vllm.platforms")
    platforms.current_platform = types.SimpleNamespace(device_type="cuda")
    root.config, config.speculative, root.platforms = config, speculative, platforms
    for name, mod in {"vllm": root, "vllm.config": config, "vllm.config.speculative": speculative, "vllm.platforms": platforms}.items():
        monkeypatch.setitem(sys.modules, name, mod)
    return root


LAUNCH_70B = ["hydra/launcher=slurm", "hydra.launcher.gpus_per_node=4", "hydra.launcher.cpus_per_task=16", "hydra.launcher.mem_gb=128",
              "hydra.launcher.timeout_min=1440"]


def test_the_vllm_70b_plan_up_to_the_engines_start(vllm_033):
    """Config, plan, resources and pre-check of replicate_fly_70b_vllm (as `make replicate-70b-vllm`
    composes it), priced beside the HF pipeline's replicate_fly_70b with the Makefile's rates."""
    from loosespec_bench.plan import build_plan, format_checks, format_plan, model_needs
    from loosespec_bench.engines.vllm import fly_options, speculative_config

    args = [*LAUNCH_70B, "engine.tensor_parallel_size=4"]
    vllm = build_plan(["replicate_fly_70b_vllm"], args, tps={"llama31-8b-70b": 40.0}, load_min={"llama31-8b-70b": 15.0})
    sweep = vllm[0]
    assert len(sweep.jobs) == 24 and sweep.gpus == 4 and "Slurm" in sweep.launcher
    job = sweep.jobs[0]
    assert job.settings["engine.name"] == "vllm" and job.settings["engine.tensor_parallel_size"] == 4
    assert job.settings["method"] == "fly" and job.settings["drafter"] == "model"
    assert "replicate_fly_70b_vllm" in str(job.folder)
    assert {r for r, _ in job.models} == {"meta-llama/Llama-3.1-70B-Instruct", "meta-llama/Llama-3.1-8B-Instruct"}
    assert [n.repo for n in model_needs(vllm)] == ["meta-llama/Llama-3.1-70B-Instruct", "meta-llama/Llama-3.1-8B-Instruct"]

    # What the engine would hand vLLM (no GPU: the mapping only).
    from loosespec_bench.plan import expand

    _, points = expand(["experiment=replicate_fly_70b_vllm", *args])
    cfg = points[0][1]
    spec = speculative_config(cfg, draft_source="meta-llama/Llama-3.1-8B-Instruct")
    assert spec["method"] == "draft_model" and spec["num_speculative_tokens"] == 15
    assert fly_options(cfg) == {"rejection_sample_method": "fly", "fly_entropy_threshold": 0.3, "fly_window_size": 6}

    hf = build_plan(["replicate_fly_70b"], [*LAUNCH_70B, "++pair.target.device_map=balanced_low_0"])
    gpuh = lambda plan: sum(j.hours * max(s.gpus, 1) for s in plan for j in s.jobs if j.launched)  # noqa: E731
    print(f"\nGPU-hours: replicate_fly_70b_vllm {gpuh(vllm):,.0f}, replicate_fly_70b (HF pipeline) {gpuh(hf):,.0f}")
    assert gpuh(vllm) < gpuh(hf)  # the vLLM rate is an assumption (VLLM_TPS_70B); the plan prints both
    text = format_plan(vllm)
    assert "[replicate_fly_70b_vllm] 24 jobs (one Slurm job array), 4 GPU(s)/job, 16 CPUs, 128 GB" in text
    checks = format_checks(vllm, cluster=(parse_sinfo(SINFO), partition_limits("gpu*|1-00:00:00\n")))
    assert "cluster: ok: partition gpu (8 GPUs per node, time limit 1440 min) can run 4-GPU jobs" in checks


def test_the_vllm_70b_plan_without_vllm_names_the_install(monkeypatch):
    from loosespec_bench.errors import ConfigError
    from loosespec_bench.plan import build_plan

    monkeypatch.setitem(sys.modules, "vllm", None)
    with pytest.raises(ConfigError, match="make install-vllm"):
        build_plan(["replicate_fly_70b_vllm"], [*LAUNCH_70B, "dataset.limit=2"])


def _make_list(name: str) -> list[str]:
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "replicate.mk").read_text().replace("\\\n", " ")
    m = re.search(rf"^{name} \?= (.*)$", text, flags=re.M)
    assert m, name
    return m.group(1).split()


def test_slurm_readmes_download_list_is_the_plans():
    """slurm/README.md's `huggingface-cli download` lines are `make models-list`'s: every model and
    head the 70B and 405B plans name (composed by Hydra as a launch composes them)."""
    from pathlib import Path

    from loosespec_bench.launch.dry_run import download_lines
    from loosespec_bench.plan import build_plan, model_needs

    sweeps = build_plan([*_make_list("REPLICATE_70B_SWEEPS"), *_make_list("REPLICATE_405B_SWEEPS")])
    want = download_lines(model_needs(sweeps))
    readme = (Path(__file__).resolve().parents[1] / "slurm" / "README.md").read_text().splitlines()
    have = [ln for ln in readme if ln.startswith("huggingface-cli download ")]
    assert have == want, "regenerate slurm/README.md's list with `make models-list`:\n" + "\n".join(want)
    repos = {ln.split()[2] for ln in want}
    assert {"meta-llama/Llama-3.3-70B-Instruct", "yuhuili/EAGLE3-LLaMA3.3-Instruct-70B", "meta-llama/Llama-3.2-1B-Instruct",
            "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"} <= repos
