"""engines/settings.py: each engine's settings declared once (EngineParams, VLLMParams), named
by the engine class, restated by conf/engine/<name>.yaml with the same defaults."""

from __future__ import annotations

import dataclasses

import pytest
from omegaconf import OmegaConf

from loosespec_bench.engines.base import Engine
from loosespec_bench.engines.settings import HF_MAX_BATCH, EngineParams, HFParams, VLLMParams
from loosespec_bench.errors import ConfigError
from loosespec_bench.params import params_of
from loosespec_bench.settings.config import CONF_DIR
from loosespec_bench.settings.run_settings import engine_params, engine_settings

from ..conftest import compose_config


@pytest.mark.parametrize("name, params", [("hf", HFParams), ("hf_serve", HFParams), ("vllm", VLLMParams)])
def test_engine_files_restate_their_class_settings(name, params):
    node = OmegaConf.to_container(OmegaConf.load(CONF_DIR / "engine" / f"{name}.yaml"))
    keys = set(node) - {"_target_", "name"}
    assert keys <= {f.name for f in dataclasses.fields(params)}
    if params is VLLMParams:
        assert keys == {f.name for f in dataclasses.fields(params)}  # every vLLM setting is in its file
    for key in keys:
        assert node[key] == params.defaults()[key], key
    assert engine_params({"engine": node}) is params  # asked of the class its _target_ names


def test_the_batch_size_default_is_declared_once():
    assert Engine.batch_size == EngineParams.batch_size == VLLMParams().batch_size == 1
    assert params_of(Engine) is EngineParams


@pytest.mark.parametrize("override, says", [
    ("engine.batch_size=0", "engine.batch_size=0 must be an integer >= 1"),
    ("engine.request_rate=0", "engine.request_rate=0 must be > 0"),
    ("engine.timed_batches=0", "engine.timed_batches=0 must be an integer >= 1"),
    ("engine.tensor_parallel_size=0", "engine.tensor_parallel_size=0 must be an integer >= 1"),
    ("engine.max_model_len=0", "engine.max_model_len=0 must be an integer >= 1"),
    ("engine.fly_rule=x", "engine.fly_rule='x' must be one of vllm, ours"),
])
def test_engine_settings_out_of_range_are_one_line(override, says):
    cfg = compose_config(["engine=vllm", override])
    with pytest.raises(ConfigError, match=says.replace(".", r"\.")):
        engine_settings(cfg)


def test_each_engine_declares_its_batch_range_where_its_default_is():
    """Our loop batches at most HF_MAX_BATCH problems (HFParams); vLLM takes any batch size."""
    assert HFParams().batch_size == EngineParams().batch_size == 1
    engine_settings(compose_config([f"engine.batch_size={HF_MAX_BATCH}"]))
    for engine in ("hf", "hf_serve"):
        with pytest.raises(ConfigError, match=f"engine.batch_size={HF_MAX_BATCH + 1} must be an integer in 1..{HF_MAX_BATCH}"):
            engine_settings(compose_config([f"engine={engine}", f"engine.batch_size={HF_MAX_BATCH + 1}"]))
    assert engine_settings(compose_config(["engine=vllm", "engine.batch_size=64"])).batch_size == 64
