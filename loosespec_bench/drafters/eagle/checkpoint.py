"""EAGLE head checkpoints in the official format: read, build (EAGLE-3 or EAGLE-2 layout), save.

Format (what `read_head` reads and `save_head` writes), as the official heads
(yuhuili/EAGLE3-LLaMA3.1-Instruct-8B, ...): a folder with `config.json` (Llama-style:
hidden_size, intermediate_size, num_attention_heads, num_key_value_heads, rms_norm_eps,
rope_theta / rope_scaling, vocab_size = the target's, draft_vocab_size, optional
target_hidden_size) and `pytorch_model.bin` or `model.safetensors` with the keys fc.weight,
midlayer.{hidden_norm,input_layernorm,post_attention_layernorm}.weight,
midlayer.self_attn.{q,k,v,o}_proj.weight, midlayer.mlp.{gate,up,down}_proj.weight,
norm.weight, lm_head.weight, d2t, t2d and optionally embed_tokens.weight. `layers.0.*` (the
speculators name of the same layer) is read as `midlayer.*`. An optional
`eagle_aux_hidden_state_layer_ids` in config.json overrides the three layers.
An EAGLE-1/2 checkpoint (SafeAILab/EAGLE cnets1: fc over 2H, no hidden_norm) is recognised by
its weights and built as an Eagle2Head (eagle2.py). Also used by train/eagle3.py.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import torch
from torch import nn
from transformers import PreTrainedModel

from ...errors import ConfigError
from .eagle2 import Eagle2Head
from .eagle3 import Eagle3Head
from .head import EagleHead

WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")


def is_eagle2_state(state: dict[str, torch.Tensor]) -> bool:
    """An EAGLE-1/2 head: fc reads [embedding, feature] (2H) and the layer has no hidden_norm."""
    fc = state.get("fc.weight")
    return (
        fc is not None and fc.dim() == 2 and fc.shape[1] == 2 * fc.shape[0]
        and not any(k.endswith("hidden_norm.weight") for k in state)
    )


def _resolve_dir(path: str) -> Path:
    """A local folder, or a hub id downloaded (config + weights only) to the HF cache."""
    local = Path(os.path.expanduser(path))
    if local.is_dir():
        return local
    if "/" in path and not path.startswith((".", "/", "~")):
        try:
            from huggingface_hub import snapshot_download

            return Path(snapshot_download(path, allow_patterns=["config.json", *WEIGHT_FILES]))
        except Exception as err:  # offline, unknown id, no permission: one actionable line
            raise ConfigError(
                f"EAGLE-3 head {path!r}: not a local folder and the hub download failed "
                f"({type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}); "
                "point drafter.head_path at a folder with config.json and the weights"
            ) from None
    raise ConfigError(f"EAGLE-3 head {path!r} is neither a local folder nor a hub id (org/name)")


def read_head(path: str | Path) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
    """config.json and the state dict of an official-format head folder (or hub id)."""
    folder = _resolve_dir(str(path))
    cfg_file = folder / "config.json"
    if not cfg_file.is_file():
        raise ConfigError(f"EAGLE-3 head {path!r}: no config.json in {folder}")
    cfg = json.loads(cfg_file.read_text())
    if "transformer_layer_config" in cfg:
        raise ConfigError(
            f"EAGLE-3 head {path!r} is in the speculators format; convert it to the official "
            "SafeAILab/EAGLE format (config.json with hidden_size, draft_vocab_size, ...)"
        )
    if (folder / "model.safetensors").is_file():
        from safetensors.torch import load_file

        state = load_file(str(folder / "model.safetensors"))
    elif (folder / "pytorch_model.bin").is_file():
        state = torch.load(folder / "pytorch_model.bin", map_location="cpu", weights_only=True)
    else:
        raise ConfigError(f"EAGLE-3 head {path!r}: none of {WEIGHT_FILES} in {folder}")
    state = {("midlayer." + k[len("layers.0."):] if k.startswith("layers.0.") else k): v for k, v in state.items()}
    if is_eagle2_state(state):
        cfg = {**cfg, "eagle_version": 2}  # EAGLE-1/2 layout: build_eagle2_head builds it
        return cfg, state
    if "fc.weight" not in state or not any(k.startswith("midlayer.") for k in state):
        raise ConfigError(f"EAGLE-3 head {path!r}: the weights have no fc.weight / midlayer.* (not an EAGLE-3 head?)")
    return cfg, state


def build_head(cfg: dict[str, Any], state: dict[str, torch.Tensor] | None, embed_tokens: nn.Embedding | None) -> Eagle3Head:
    """An Eagle3Head from a config and (optionally) its weights; strict about every key."""
    own_embedding = state is not None and "embed_tokens.weight" in state
    if own_embedding:
        # The official loader prefers a checkpoint's own embedding over the target's, as here.
        embed_tokens = nn.Embedding.from_pretrained(state["embed_tokens.weight"], freeze=True)
    if embed_tokens is None:
        raise ConfigError("the EAGLE-3 head has no embed_tokens.weight and no target embedding was given")
    head = Eagle3Head(cfg, embed_tokens)
    if state is not None:
        # Old checkpoints may carry the rotary inv_freq buffer; it is recomputed from the config.
        state = {k: v for k, v in state.items() if k != "embed_tokens.weight" and not k.endswith("rotary_emb.inv_freq")}
        if head.draft_vocab_size == head.vocab_size:
            # Official heads without a reduced vocabulary may omit the maps (identity).
            state.setdefault("d2t", head.d2t)
            state.setdefault("t2d", head.t2d)
        missing, unexpected = head.load_state_dict(state, strict=False)
        if missing or unexpected:
            raise ConfigError(f"EAGLE-3 head weights do not match its config: missing {missing}, unexpected {unexpected}")
    return head


def save_head(head: Eagle3Head, folder: str | Path, *, safetensors: bool = True) -> Path:
    """Write config.json + weights in the official format (no embedding: the target's is used)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    state = {k: v.detach().cpu().contiguous() for k, v in head.state_dict().items()}
    cfg = {"architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama", "num_hidden_layers": 1,
           "hidden_act": "silu", "tie_word_embeddings": False, **head.cfg}
    tmp = folder / "config.json.partial"
    tmp.write_text(json.dumps(cfg, indent=2) + "\n")
    if safetensors:
        from safetensors.torch import save_file

        save_file(state, str(folder / "model.safetensors.partial"), metadata={"format": "pt"})
        os.replace(folder / "model.safetensors.partial", folder / "model.safetensors")
    else:
        torch.save(state, folder / "pytorch_model.bin.partial")
        os.replace(folder / "pytorch_model.bin.partial", folder / "pytorch_model.bin")
    os.replace(tmp, folder / "config.json")
    mask = os.umask(0)
    os.umask(mask)
    for f in folder.iterdir():  # the safetensors writer makes 0600 files; the cache is shared
        if f.is_file():
            os.chmod(f, 0o666 & ~mask)
    return folder


def build_eagle2_head(
    cfg: dict[str, Any], state: dict[str, torch.Tensor] | None, embed_tokens: nn.Embedding, lm_head: nn.Module
) -> Eagle2Head:
    """An Eagle2Head from config.json and (optionally) its official weights; strict about keys."""
    if state is not None and "embed_tokens.weight" in state:
        embed_tokens = nn.Embedding.from_pretrained(state["embed_tokens.weight"], freeze=True)
    cfg = dict(cfg)
    if state is not None:
        cfg.setdefault("bias", "fc.bias" in state)
        cfg.setdefault("qkv_bias", any(k.endswith("q_proj.bias") for k in state))
    head = Eagle2Head(cfg, embed_tokens, lm_head)
    if state is not None:
        renamed = {}
        for k, v in state.items():
            if k == "embed_tokens.weight" or k.endswith("rotary_emb.inv_freq"):
                continue
            for prefix in ("layers.0.", "midlayer."):  # the official layer's name, or read_head's
                if k.startswith(prefix):
                    k = k[len(prefix):]
                    break
            renamed[k] = v
        renamed.setdefault("d2t", head.d2t)
        missing, unexpected = head.load_state_dict(renamed, strict=False)
        if missing or unexpected:
            raise ConfigError(f"EAGLE-2 head weights do not match its config: missing {missing}, unexpected {unexpected}")
    return head


def load_head(path: str | Path, target: PreTrainedModel) -> EagleHead:
    """The head of a checkpoint folder (or hub id) for `target`, in the layout its weights have:
    EAGLE-3 (the target's embedding unless the checkpoint has its own) or EAGLE-2 (also the
    target's LM head)."""
    cfg, state = read_head(path)
    if cfg.get("eagle_version") == 2:
        return build_eagle2_head(cfg, state, target.get_input_embeddings(), target.get_output_embeddings())
    return build_head(cfg, state, target.get_input_embeddings())
