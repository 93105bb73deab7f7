"""Each engine's settings (the `engine` node), declared once with their defaults, ranges and
labels: EngineParams (what every engine takes: engine.batch_size, engine.timed_batches) and one
Params per engine class that takes more or narrows a range (HFParams, VLLMParams). An engine
class names its own (`Params = VLLMParams`; engines/base.py's Engine: EngineParams), so the
pre-check asks the class (settings/run_settings.engine_params), never its name;
conf/engine/<name>.yaml restates the defaults for Hydra, and tests/engines/test_settings.py
pins the file to the declaration.

engine.batch_size is one name everywhere: the requests an engine runs at once. vLLM's own
keyword for it (LLM(max_num_seqs=...)) is spelled only where engines/vllm.py hands it to vLLM.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, ClassVar, Mapping

from ..params import Params, boolean, choice, integer, knob, optional, real


@dataclasses.dataclass(frozen=True)
class EngineParams(Params):
    """What every engine takes. An engine whose generate runs one request at a time ignores a
    batch size above 1 unless it batches (Engine.prefetch)."""

    group: ClassVar[str] = "engine"
    batch_size: int = knob(1, integer(1), "requests run at once; 1 = one request at a time")
    timed_batches: int = knob(1, integer(1), "timed batches per run: fewer distinct ones are submitted again")


# The most problems our loop decodes at once (engine=hf, engine=hf_serve): B rows of one ragged
# cache (decoding/batch.py); the batch sweep's sizes are 1 to 16.
HF_MAX_BATCH = 16


@dataclasses.dataclass(frozen=True)
class HFParams(EngineParams):
    """engine=hf and engine=hf_serve (engines/hf.py): our loop, which batches at most HF_MAX_BATCH
    problems."""

    # The range narrows; the default stays EngineParams' (declared there once).
    batch_size: int = knob(EngineParams.batch_size, integer(1, HF_MAX_BATCH), "problems our loop decodes at once; 1 = one at a time")


def _threads_bind(v: Any) -> str | None:
    return None if (isinstance(v, str) and v) or (isinstance(v, int) and not isinstance(v, bool) and v >= 0) else \
        "must be a CPU list such as 0-1, or nobind"


def raw_speculative_config(v: Any) -> dict[str, Any]:
    """engine.speculative_config as a plain dict: a mapping, or its JSON text (as `vllm serve
    --speculative-config '{...}'` takes it). Raises ValueError naming what is wrong."""
    if isinstance(v, str):
        try:
            v = json.loads(v)
        except json.JSONDecodeError as err:
            raise ValueError(f"is not a JSON object ({err.msg})") from None
    if not isinstance(v, Mapping) or not v:
        raise ValueError("must be a non-empty mapping (or its JSON text), as vllm serve's --speculative-config")
    out = dict(v)
    if any(not isinstance(k, str) for k in out):
        raise ValueError("must have text keys")
    if not isinstance(out.get("method"), str) or not out["method"]:
        raise ValueError("needs its 'method' (e.g. draft_model, ngram, eagle3)")
    n = out.get("num_speculative_tokens")
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise ValueError("needs 'num_speculative_tokens', an integer >= 1")
    try:
        json.dumps(out)
    except (TypeError, ValueError):
        raise ValueError("must hold JSON values only (text, numbers, booleans, lists, mappings)") from None
    return out


def _speculative_config(v: Any) -> str | None:
    try:
        raw_speculative_config(v)
    except ValueError as err:
        return str(err)
    return None


FLY_RULES = ("vllm", "ours")  # engine.fly_rule: vLLM's own FLy kernels, or our verifier as its sampler


@dataclasses.dataclass(frozen=True)
class VLLMParams(EngineParams):
    """engine=vllm (engines/vllm.py): the serving loop's arrivals, vLLM's parallelism, memory
    and CPU settings, and which FLy verifies."""

    request_rate: Any = knob(None, optional(real(0, lo_open=True)),
                             "requests per second arriving while others run; null = a batch arrives at once")
    tensor_parallel_size: int = knob(1, integer(1), "GPUs the target is split over")
    draft_tensor_parallel_size: Any = knob(None, optional(integer(1)), "null = vLLM's default")
    max_model_len: Any = knob(4096, optional(integer(1)), "the context vLLM reserves per request; null = the model's")
    enforce_eager: bool = knob(True, boolean, "no torch compilation (CPU); false on GPUs: CUDA graphs")
    enable_prefix_caching: Any = knob(False, optional(boolean), "off: both contestants would time cache hits")
    cpu_kvcache_gib: Any = knob(1, optional(integer(1)), "the KV cache in GiB per vLLM engine on the CPU")
    gpu_memory_utilization: Any = knob(None, optional(real(0, 1, lo_open=True)), "a fraction; null = vLLM's 0.9")
    kv_cache_memory_bytes: Any = knob(None, optional(integer(1)), "the KV cache in bytes on a GPU")
    cpu_threads_bind: Any = knob(None, optional(_threads_bind), "VLLM_CPU_OMP_THREADS_BIND; null = vLLM's auto")
    fly_rule: str = knob("vllm", choice(*FLY_RULES), "method=fly: vLLM's own FLy, or ours as vLLM's rejection sampler")
    speculative_config: Any = knob(None, optional(_speculative_config),
                                   "a raw vLLM speculative_config (vllm serve's --speculative-config), passed as is; "
                                   "null = the one method and drafter map to")


__all__ = ["EngineParams", "FLY_RULES", "HFParams", "HF_MAX_BATCH", "VLLMParams", "raw_speculative_config"]
