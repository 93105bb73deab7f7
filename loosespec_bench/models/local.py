"""A local safetensors folder's model, read with pread one tensor at a time (models/loading.py
loads local folders with it; models/gguf.py checks a conversion with it). Apart from loading.py
so that the conversion can use it without an import circle (loading -> embedded -> gguf)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from transformers import PreTrainedModel


def _safetensors_files(folder: Path) -> list[Path] | None:
    """The folder's safetensors checkpoint: one file, or the shards its index names; None when
    it has neither (a .bin checkpoint, say)."""
    from ..safe_files import check_regular, confined, load_json_declaration

    single = folder / "model.safetensors"
    if check_regular(single):  # a link or a FIFO in its place is refused, not followed (safe_files)
        return [single]
    index = folder / "model.safetensors.index.json"
    if not check_regular(index):
        return None
    declared = load_json_declaration(index, "checkpoint index")
    weight_map = declared.get("weight_map") if isinstance(declared, dict) else None
    if not isinstance(weight_map, dict) or not weight_map:
        return None
    files = sorted({confined(folder, name, f"{index} weight_map shard") for name in weight_map.values()})
    return files if all(check_regular(f) for f in files) else None


def read_local(folder: Path, dtype: torch.dtype, loading_info: dict[str, Any] | None = None) -> PreTrainedModel | None:
    """A local safetensors folder's model, its tensors read with pread one at a time (None where
    this does not apply: no safetensors checkpoint, a model with its own code, an older
    safetensors without the pread backend; from_pretrained loads those).

    Why not from_pretrained(folder): it memory-maps the checkpoint, and every page it reads
    stays resident in the process until the load ends. Loading the embedded 1.5B target in bf16
    from its float32 file held the whole 6.6 GiB file mapped beside the 3.6 GiB being built:
    10.3 GiB resident for a model of 2.9 (issue 72). Read with pread, the file passes through the
    page cache (the kernel's, not the process's) and the load peaks at 3.9 GiB. The weights are
    the same bits (transformers casts each tensor as before; checked by tests/models/test_local.py
    on tiny models and, slow, by tests/models/test_embedded.py on the embedded pair); the load takes longer (10 s against 3 s for the 1.5B from a warm cache).
    loading_info: filled with from_pretrained's (missing, unexpected and mismatched keys)."""
    from safetensors import safe_open
    from transformers import AutoConfig, GenerationConfig
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING

    files = _safetensors_files(folder)
    if files is None:
        return None
    config = AutoConfig.from_pretrained(folder)
    if getattr(config, "auto_map", None) or type(config) not in MODEL_FOR_CAUSAL_LM_MAPPING:
        return None  # its own modelling code, or not a causal LM transformers knows: from_pretrained decides
    try:
        handles = [safe_open(str(f), framework="pt", device="cpu", backend="pread") for f in files]
    except TypeError:  # safetensors without the backend argument
        return None
    # Lazy slices: transformers materialises (reads) and casts one tensor at a time.
    state = {name: h.get_slice(name) for h in handles for name in h.keys()}
    cls = MODEL_FOR_CAUSAL_LM_MAPPING[type(config)]
    # Not AutoModelForCausalLM: it deep-copies its keyword arguments, and a slice does not copy.
    model, info = cls.from_pretrained(None, config=config, state_dict=state, dtype=dtype, output_loading_info=True)
    if loading_info is not None:
        loading_info.update(info)  # missing / unexpected / mismatched keys, for a caller that checks them
    del state, handles
    model.config.name_or_path = str(folder)  # what from_pretrained(folder) records
    from ..safe_files import check_regular

    if check_regular(folder / "generation_config.json"):  # a link there is refused, not followed
        model.generation_config = GenerationConfig.from_pretrained(folder)
    return model
