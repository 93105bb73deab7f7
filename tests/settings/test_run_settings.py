"""The run's own settings, declared once (settings/run_settings.py, measure/timing.py's
TimingParams, engines/settings.py): the config files restate exactly those keys and defaults, the
pre-check builds one typed object from them, and a stored config reads its defaults from them."""

from __future__ import annotations

import dataclasses

from omegaconf import OmegaConf

from loosespec_bench.engines.settings import EngineParams, HFParams, VLLMParams
from loosespec_bench.settings.checks import validate
from loosespec_bench.settings.config import CONF_DIR
from loosespec_bench.settings.run_settings import SECTIONS, RootParams, RunSettings

from ..conftest import compose_config

# config.yaml's values that are interpolations (the environment decides them), not defaults.
INTERPOLATED = {("paths", "results_dir"), ("paths", "data_dir")}


def test_config_yaml_restates_the_declared_keys_and_defaults():
    base = OmegaConf.load(CONF_DIR / "config.yaml")
    for section, params in SECTIONS.items():
        node = OmegaConf.to_container(base[section], resolve=False)
        assert set(node) == {f.name for f in dataclasses.fields(params)}, section
        for key, default in params.defaults().items():
            if (section, key) not in INTERPOLATED:
                assert node[key] == default, f"config.yaml {section}.{key}={node[key]!r}, declared {default!r}"
    for key, default in RootParams.defaults().items():
        assert key in base, key
        if key != "experiment_name" or base[key] == default:
            assert base[key] == default, key


def test_the_precheck_returns_the_typed_settings():
    s = validate(compose_config(["pair=tiny", "timing.tolerance=0.1", "generation.top_k=5", "seed=3"]))
    assert isinstance(s, RunSettings)
    assert (s.timing.tolerance, s.generation.top_k, s.root.seed, s.root.baseline) == (0.1, 5, 3, "paired")
    assert type(s.engine) is HFParams and s.engine.batch_size == 1


def test_a_stored_config_reads_its_missing_settings_from_the_declaration():
    old = OmegaConf.create({"seed": 2, "generation": {"temperature": 0.5}, "paths": {"results_dir": "r"},
                            "engine": {"_target_": "loosespec_bench.engines.vllm.VLLMEngine", "name": "vllm", "max_num_seqs": 8}})
    s = RunSettings.read(old)
    assert s.timing == s.timing.__class__()  # no timing node: every default
    assert (s.root.seed, s.root.power_threshold, s.generation.temperature, s.generation.top_p) == (2, 0.05, 0.5, 1.0)
    assert type(s.engine) is VLLMParams and s.engine.batch_size == 1  # unknown keys left aside
    assert type(RunSettings.read(OmegaConf.create({})).engine) is HFParams  # no engine node: our loop
