"""Every config composes; bad values fail with one line that says what to change."""

from __future__ import annotations

import hashlib

import os
import subprocess
import sys
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from hydra import compose, initialize_config_dir

from loosespec_bench.settings.checks import validate
from loosespec_bench.errors import ConfigError
from loosespec_bench.settings.config import CONF_DIR, check_group_overrides, group_choices, run_id

from ..conftest import REPO, compose_config, shared_data_dir

EXPERIMENTS = group_choices("experiment")


def test_default_config_is_the_embedded_pair_spd_mgsm():
    cfg = compose_config()
    assert cfg.pair.target.path == "embedded:qwen2.5-coder-1.5b-instruct"
    assert cfg.pair.draft.path == "embedded:qwen2.5-coder-0.5b-instruct"
    assert (cfg.method.name, cfg.drafter.name, cfg.dataset.name) == ("spd", "model", "mgsm")
    assert cfg.pair.dtype == "bfloat16" and cfg.generation.temperature == 0.0
    validate(cfg)


@pytest.mark.parametrize("group", ["method", "drafter", "pair", "dataset", "logger"])
def test_every_group_option_composes_and_validates(group):
    for choice in group_choices(group):
        cfg = compose_config([f"{group}={choice}"])
        OmegaConf.to_container(cfg, resolve=True)  # every interpolation resolves
        validate(cfg)


def needs_missing_vllm(cfg) -> bool:
    """An experiment on engine=vllm, checked where vLLM is not installed (its own environment)."""
    import importlib.util

    return str(cfg.engine.name) == "vllm" and importlib.util.find_spec("vllm") is None


@pytest.mark.parametrize("name", EXPERIMENTS)
def test_every_experiment_composes(name):
    cfg = compose_config([f"experiment={name}"])
    OmegaConf.to_container(cfg, resolve=True)
    if needs_missing_vllm(cfg):  # refused with the one line that says how to install it
        with pytest.raises(ConfigError, match="make install-vllm"):
            validate(cfg)
    else:
        validate(cfg)
    assert cfg.experiment_name != "default", f"experiment {name} must set experiment_name"


@pytest.mark.parametrize("name", EXPERIMENTS)
def test_every_experiment_sweeps_known_keys(name):
    """A sweep over a misspelt key or a missing group option would only fail at launch."""
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose(config_name="config", overrides=[f"experiment={name}"], return_hydra_config=True)
    for key, values in (cfg.hydra.sweeper.params or {}).items():
        if "." in key:
            group, field = key.split(".", 1)
            assert field in cfg[group], f"{name}: sweeps unknown key {key}"
        else:
            missing = [v.strip() for v in str(values).split(",") if not (CONF_DIR / key / f"{v.strip()}.yaml").exists()]
            assert not missing, f"{name}: sweeps unknown {key} options {missing}"


def test_run_id_follows_the_judge_files_contents(tmp_path):
    # AutoJudge's judge is a file: the same path with another judge in it is another run
    # (its folder must never be resumed with the first judge's samples); a copy elsewhere with
    # the same contents is the same run.
    from loosespec_bench.judges.head import JudgeHead

    def judge(folder, bias):
        JudgeHead(mean=[0.0], scale=[1.0], weights=[1.0], bias=bias, threshold=0.5).save(folder)
        return [f"method.judge_path={folder}"]

    for method in ("autojudge", "dropmatch_autojudge"):
        base = [f"method={method}", "pair=tiny"]
        # (The config resolves lazily: each id is taken while its judge is in the file.)
        first = compose_config([*base, *judge(tmp_path / "a", 0.0)])
        first_sha, first_id = first.method.judge_sha256, run_id(first)
        assert first_sha == hashlib.sha256((tmp_path / "a" / "judge.json").read_bytes()).hexdigest()
        same = compose_config([*base, *judge(tmp_path / "b", 0.0)])  # same contents, another folder
        assert same.method.judge_sha256 == first_sha
        retrained = compose_config([*base, *judge(tmp_path / "a", 1.0)])
        assert retrained.method.judge_sha256 != first_sha and run_id(retrained) != first_id
        # Back to the first judge's contents: the first run's id (and folder) again.
        judge(tmp_path / "a", 0.0)
        assert run_id(compose_config([*base, f"method.judge_path={tmp_path / 'a'}"])) == first_id
    # No judge file: null (the pre-check then refuses the run with its own message).
    assert compose_config(["method=autojudge", "pair=tiny", f"method.judge_path={tmp_path / 'none'}"]).method.judge_sha256 is None


def test_run_id_is_stable_and_ignores_reporting_keys():
    a = compose_config(["drafter.k=3"])
    b = compose_config(["drafter.k=3", "dataset.limit=50", "paths.results_dir=/elsewhere", "progress=true"])
    c = compose_config(["drafter.k=4"])
    assert run_id(a) == run_id(b)
    assert run_id(a) != run_id(c)
    assert run_id(a).startswith("spd_model-k3_")
    # A code set's sandbox hides the results folder: where results go is still not a setting.
    he = ["dataset=humaneval", "drafter.k=3"]
    assert run_id(compose_config(he)) == run_id(compose_config([*he, "paths.results_dir=/elsewhere", "dataset.sandbox.workers=2"]))
    assert run_id(compose_config(he)) != run_id(compose_config([*he, "dataset.sandbox.timeout_s=5"]))
    # Target alone does not depend on the drafter.
    assert run_id(compose_config(["method=ar", "drafter.k=3"])) == run_id(compose_config(["method=ar", "drafter=pld"]))


@pytest.mark.parametrize(
    "override, fragment",
    [
        ("drafter.k=0", "drafter.k=0 must be an integer in 1..1024"),
        ("generation.temperature=-0.5", "generation.temperature=-0.5 must be >= 0"),
        ("generation.max_new_tokens=0", "generation.max_new_tokens=0"),
        ("dataset.limit=-1", "dataset.limit=-1"),
        ("baseline=sometimes", "baseline='sometimes'"),
        ("pair.dtype=int8", "pair.dtype='int8' must be one of float32, bfloat16, float16"),
    ],
)
def test_bad_values_raise_config_error(override, fragment):
    with pytest.raises(ConfigError, match=fragment.replace("(", r"\(").replace(")", r"\)")) as err:
        validate(compose_config([override]))
    assert "\n" not in str(err.value)


def test_unknown_group_option_suggests_near_miss():
    with pytest.raises(ConfigError) as err:
        check_group_overrides(["method=spdd"])
    msg = str(err.value)
    assert "method='spdd' is not a known method" in msg and "did you mean 'spd'" in msg and "ar" in msg
    # Sweeps are checked value by value; sweep functions are left to Hydra.
    with pytest.raises(ConfigError):
        check_group_overrides(["method=ar,nope"])
    check_group_overrides(["method=ar,spd", "drafter=glob(*)", "drafter.k=5"])


def _cli(*args: str, tmp_path: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "LOOSESPEC_DATA_DIR": str(shared_data_dir()), "LOOSESPEC_RESULTS_DIR": str(tmp_path)}
    return subprocess.run(
        [sys.executable, "-m", "loosespec_bench", *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=300
    )


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["method=nope"], "method='nope' is not a known method"),
        (["drafter.k=0", "pair=tiny"], "drafter.k=0 must be an integer in 1..1024"),
        (["generation.temperature=-1", "pair=tiny"], "generation.temperature=-1 must be >= 0"),
        (["pair=tiny", "pair.target.path=no_such_dir_or_id"], "model path 'no_such_dir_or_id' is neither"),
    ],
)
def test_cli_prints_one_line_error_not_a_traceback(args, fragment, tmp_path):
    proc = _cli(*args, "dataset.limit=1", tmp_path=tmp_path)
    assert proc.returncode == 2, proc.stderr
    lines = [ln for ln in proc.stderr.strip().splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and fragment in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr


def test_cli_smoke_run_and_sweep(tmp_path):
    proc = _cli("experiment=smoke_tiny", tmp_path=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "tau (tokens per target step)" in proc.stdout and "speedup" in proc.stdout
    sweep = _cli("-m", "experiment=smoke_tiny", "method=spd", "drafter=model,pld", "drafter.k=2,4", tmp_path=tmp_path)
    assert sweep.returncode == 0, sweep.stderr
    runs = sorted(p.parent.name for p in (tmp_path / "smoke_tiny").glob("*/summary.json"))
    # 1 run from the first call (model, k=5... no: smoke run uses k=5) + 4 sweep points.
    assert len(runs) == 5, runs


# ---- facts read from the classes; the config keys that stay only for the run id (issue 39) -------
def test_every_committed_run_keeps_its_id():
    """run_id of each committed run folder's config.yaml is the folder's name: reading a rule's
    or a drafter's needs from its class (not from config keys) changed no committed run's id."""
    # Committed ones only: a checkout also holds launchers' own .hydra/config.yaml and runs in flight.
    listed = subprocess.run(["git", "-C", str(REPO), "ls-files", "results/*config.yaml"], capture_output=True, text=True)
    configs = ([REPO / line for line in listed.stdout.split()] if listed.returncode == 0
               else [p for p in (REPO / "results").rglob("config.yaml") if ".hydra" not in p.parts])
    configs = sorted(p for p in configs if p.is_file())
    assert configs, "no committed run folders found"
    for path in configs:
        assert run_id(OmegaConf.load(path)) == path.parent.name, path


@pytest.mark.parametrize("name", group_choices("drafter"))
def test_a_drafter_configs_needs_keys_agree_with_its_class(name):
    """build reads needs_model / needs_tokenizers / needs_target from the drafter class; the
    config files keep the keys because the run id hashes the composed node (dropping them would
    change every committed run's id), so they must say what the class says."""
    from loosespec_bench.settings.config import drafter_class

    cfg = compose_config([f"drafter={name}"])
    cls = drafter_class(cfg)
    for key in ("needs_model", "needs_tokenizers", "needs_target"):
        assert bool(cfg.drafter.get(key, False)) == getattr(cls, key), (name, key)


@pytest.mark.parametrize("name", group_choices("method"))
def test_a_method_configs_uses_drafter_key_agrees_with_its_class(name, monkeypatch):
    """uses_drafter is the class's (not Verifier.target_alone); conf/method/ar.yaml keeps
    `uses_drafter: false` only for the run id, and it must agree."""
    from loosespec_bench.settings.config import method_class, uses_drafter

    monkeypatch.setenv("LOOSESPEC_AUTOJUDGE_DIR", "/nonexistent")  # no judge file is read composing
    cfg = compose_config([f"method={name}"])
    assert bool(cfg.method.get("uses_drafter", True)) == (not method_class(cfg).target_alone) == uses_drafter(cfg)


# Run ids (and baseline-store digests) of composed configs, computed with the code from before
# issue 71's run-level settings (commit 62491a7): declaring the settings once (settings/run_settings.py,
# engines/settings.py) must leave every folder where it was.
RUN_IDS_BEFORE_ISSUE_71 = [
    ([], 'spd_model-k5_qwen2.5-coder-0.5b-1.5b_mgsm_bd5eed2b', '9112a191065f'),
    (['method=ar'], 'ar_none_qwen2.5-coder-0.5b-1.5b_mgsm_568e1aa7', '9112a191065f'),
    (['method=fly', 'pair=tiny', 'dataset=humaneval'], 'fly_model-k15_tiny_humaneval_b65c4bd6', '035db10c7046'),
    (['drafter=pld', 'generation.temperature=0.7', 'generation.top_k=20'], 'spd_pld-k10_qwen2.5-coder-0.5b-1.5b_mgsm_2ad73558', 'c5e5d630fff6'),
    (['engine=vllm', 'engine.batch_size=4', 'engine.request_rate=2.0'], 'spd_model-k5_qwen2.5-coder-0.5b-1.5b_mgsm_c7096fd2', '22ad29cba07f'),
    (['engine=vllm', 'method=fly', 'method.mode=vllm', 'drafter=pld'], 'fly_pld-k15_qwen2.5-coder-0.5b-1.5b_mgsm_c404e4e9', 'b224c7387d13'),
    (['timing.subset=5', 'baseline=shared', 'timing.tolerance=0.1'], 'spd_model-k5_qwen2.5-coder-0.5b-1.5b_mgsm_f54f6051', '9112a191065f'),
    (['method=dropmatch', 'pair=tiny', 'seed=3', 'threads=2'], 'dropmatch_model-k5_tiny_mgsm_77ddba87', '343f26d7f58a'),
]


@pytest.mark.parametrize("overrides, rid, store_digest", RUN_IDS_BEFORE_ISSUE_71)
def test_run_ids_are_those_from_before_the_settings_were_declared(overrides, rid, store_digest):
    import json

    from loosespec_bench.settings.config import baseline_config

    cfg = compose_config(overrides)
    assert run_id(cfg) == rid
    assert hashlib.sha256(json.dumps(baseline_config(cfg), sort_keys=True, default=str).encode()).hexdigest()[:12] == store_digest
