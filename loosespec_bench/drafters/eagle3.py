"""drafter=eagle3: an EAGLE-3 draft head (Li et al. 2025) reading the target's hidden states.

The head (SafeAILab/EAGLE, `eagle/model/cnets.py`; same layout as `speculators`' Eagle3):
  - features: the target's hidden states entering layers (2, L//2, L-3) -- "low, mid, high" --
    concatenated, [3*Ht], and fused by `fc` (3*Ht -> H, no bias);
  - one decoder layer (`midlayer`) whose input is concat(input_layernorm(embed(token)),
    hidden_norm(feature)) -> 2H; q/k/v project from 2H; the residual is the (fused) feature;
  - `norm` + `lm_head` over a reduced draft vocabulary; a draft id i is the target id
    i + d2t[i]; t2d[v] marks the target ids that the draft vocabulary holds;
  - the token embedding is the target's own (frozen in training, usually not in the checkpoint).
Entry j of the head's sequence pairs the target's feature at position j with token j+1 and
predicts token j+2. Chain drafting: after the last committed position, each next entry pairs
the head's OWN previous output hidden state (H wide, no fc) with the token it just drafted,
as EAGLE does at every depth of its tree; we keep one chain of K tokens.

Checkpoint format (what `load_head` reads and `save_head` writes), as the official heads
(yuhuili/EAGLE3-LLaMA3.1-Instruct-8B, ...): a folder with `config.json` (Llama-style:
hidden_size, intermediate_size, num_attention_heads, num_key_value_heads, rms_norm_eps,
rope_theta / rope_scaling, vocab_size = the target's, draft_vocab_size, optional
target_hidden_size) and `pytorch_model.bin` or `model.safetensors` with the keys fc.weight,
midlayer.{hidden_norm,input_layernorm,post_attention_layernorm}.weight,
midlayer.self_attn.{q,k,v,o}_proj.weight, midlayer.mlp.{gate,up,down}_proj.weight,
norm.weight, lm_head.weight, d2t, t2d and optionally embed_tokens.weight. `layers.0.*` (the
speculators name of the same layer) is read as `midlayer.*`. An optional
`eagle_aux_hidden_state_layer_ids` in config.json overrides the three layers.

Why a compact definition here and not the `speculators` package: speculators 0.9.0 pins
`torch<=2.14.1` with its CUDA build, `torchaudio`, `torchvision`, `transformers<=5.19.0` and
`datasets`, so `pip install speculators` here would replace the CPU torch 2.13 and downgrade
transformers 5.23 (checked with `pip install --dry-run`). The head is ~120 lines of
PyTorch; it reuses transformers' Llama RMSNorm, MLP and rotary embedding, so rope scaling
variants (llama3, linear, dynamic) behave as in transformers.

The target's features reach the drafter without a second target pass: the loop sees
`needs_target_hidden` (indices into transformers' `hidden_states` tuple, where index i is the
input of layer i, as in the official capture) and calls `observe(features)` after the prefill
and after each verification with the kept positions only.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from transformers import LlamaConfig, PreTrainedModel
from transformers.models.llama.modeling_llama import LlamaMLP, LlamaRMSNorm, LlamaRotaryEmbedding, apply_rotary_pos_emb

from dataclasses import dataclass

from ..errors import ConfigError
from ..params import boolean, integer, knob, list_of, optional, string
from ..sampling import sample_or_argmax
from ..step import Draft, common_prefix_len, empty_draft
from .base import Drafter, DrafterParams
from .eagle2 import Eagle2Head, build_eagle2_head, is_eagle2_state

WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")


def default_layers(num_layers: int) -> tuple[int, int, int]:
    """The official capture: the inputs of layers 2, L//2 and L-3 (EAGLE's modeling_*_kv.py),
    clamped into [0, L] for the few-layer test models."""
    return (min(2, num_layers), num_layers // 2, max(num_layers - 3, 0))


def _llama_config(cfg: dict[str, Any]) -> LlamaConfig:
    """A LlamaConfig for the head's layer (rotary embedding, MLP, norms)."""
    keys = (
        "hidden_size", "intermediate_size", "num_attention_heads", "num_key_value_heads", "head_dim",
        "rms_norm_eps", "rope_theta", "rope_scaling", "max_position_embeddings", "hidden_act",
    )
    kw = {k: cfg[k] for k in keys if cfg.get(k) is not None}
    kw.setdefault("rope_theta", 10000.0)  # the official LlamaRotaryEmbedding default
    # Llama-3 rope scaling checks original_max_position_embeddings <= max_position_embeddings;
    # the head's cache is as long as the target's, so take the larger.
    scaling = kw.get("rope_scaling") or {}
    kw["max_position_embeddings"] = max(kw.get("max_position_embeddings", 2048), scaling.get("original_max_position_embeddings", 0))
    return LlamaConfig(vocab_size=int(cfg["vocab_size"]), mlp_bias=False, attention_bias=False, **kw)


class Eagle3Attention(nn.Module):
    """Grouped-query attention whose q/k/v read the 2H-wide [embedding, feature] input."""

    def __init__(self, config: LlamaConfig) -> None:
        super().__init__()
        h = config.hidden_size
        self.num_heads = config.num_attention_heads
        self.num_kv = config.num_key_value_heads
        self.head_dim = config.head_dim or h // self.num_heads
        self.q_proj = nn.Linear(2 * h, self.num_heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(2 * h, self.num_kv * self.head_dim, bias=False)
        self.v_proj = nn.Linear(2 * h, self.num_kv * self.head_dim, bias=False)
        self.o_proj = nn.Linear(self.num_heads * self.head_dim, h, bias=False)

    def qkv(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """x: [B, T, 2H] -> q [B, heads, T, d], k and v [B, kv_heads, T, d], rope applied."""
        b, t, _ = x.shape
        q = self.q_proj(x).view(b, t, self.num_heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(b, t, self.num_kv, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(b, t, self.num_kv, self.head_dim).transpose(1, 2)
        q, k = apply_rotary_pos_emb(q, k, cos, sin)
        return q, k, v

    def out(self, o: torch.Tensor) -> torch.Tensor:
        """o: [B, heads, T, d] -> [B, T, H]."""
        b, _, t, _ = o.shape
        return self.o_proj(o.transpose(1, 2).reshape(b, t, self.num_heads * self.head_dim))


class Eagle3Layer(nn.Module):
    """The `midlayer`: one Llama decoder layer over concat(embedding, feature)."""

    def __init__(self, config: LlamaConfig) -> None:
        super().__init__()
        h, eps = config.hidden_size, config.rms_norm_eps
        self.self_attn = Eagle3Attention(config)
        self.mlp = LlamaMLP(config)
        self.hidden_norm = LlamaRMSNorm(h, eps=eps)
        self.input_layernorm = LlamaRMSNorm(h, eps=eps)
        self.post_attention_layernorm = LlamaRMSNorm(h, eps=eps)

    def attn_input(self, emb: torch.Tensor, feat: torch.Tensor) -> torch.Tensor:
        """[B, T, H] each -> [B, T, 2H], the embedding half first (as the official layer)."""
        return torch.cat([self.input_layernorm(emb), self.hidden_norm(feat)], dim=-1)

    def finish(self, feat: torch.Tensor, attn: torch.Tensor) -> torch.Tensor:
        """Residual over the feature, then the MLP block. [B, T, H] -> [B, T, H]."""
        h = feat + attn
        return h + self.mlp(self.post_attention_layernorm(h))


class Eagle3Head(nn.Module):
    """The draft head. Its token embedding is borrowed from the target unless given."""

    def __init__(self, cfg: dict[str, Any], embed_tokens: nn.Embedding | None = None) -> None:
        super().__init__()
        self.cfg = dict(cfg)
        self.config = _llama_config(cfg)
        h = self.config.hidden_size
        target_h = int(cfg.get("target_hidden_size") or h)
        self.vocab_size = int(cfg["vocab_size"])
        self.draft_vocab_size = int(cfg.get("draft_vocab_size") or self.vocab_size)
        self.fc = nn.Linear(3 * target_h, h, bias=False)
        self.midlayer = Eagle3Layer(self.config)
        self.norm = LlamaRMSNorm(h, eps=self.config.rms_norm_eps)
        self.lm_head = nn.Linear(h, self.draft_vocab_size, bias=False)
        self.rotary_emb = LlamaRotaryEmbedding(config=self.config)
        # d2t[i]: offset from draft id i to its target id; t2d[v]: target id v is in the draft vocab.
        self.register_buffer("d2t", torch.zeros(self.draft_vocab_size, dtype=torch.long))
        self.register_buffer("t2d", torch.ones(self.vocab_size, dtype=torch.bool))
        # Held outside the module tree (a plain attribute) so that the state dict, .to() and
        # the optimizer never see the target's embedding matrix.
        self.__dict__["embed_tokens"] = embed_tokens

    # ---- building blocks -------------------------------------------------------------------
    def embed(self, ids: torch.Tensor) -> torch.Tensor:
        emb = self.embed_tokens(ids.to(self.embed_tokens.weight.device))
        return emb.to(device=self.fc.weight.device, dtype=self.fc.weight.dtype)

    def rope(self, positions: torch.Tensor, like: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """positions: [T] int64 -> cos, sin [1, T, head_dim]."""
        return self.rotary_emb(like, positions[None].to(like.device))

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """[..., H] -> [..., draft_vocab]."""
        return self.lm_head(self.norm(hidden))

    def to_target(self, draft_ids: torch.Tensor) -> torch.Tensor:
        """Draft-vocabulary ids -> target-vocabulary ids."""
        return draft_ids + self.d2t[draft_ids]

    def draft_ids_of_target(self) -> torch.Tensor:
        """[draft_vocab] the target id of every draft id."""
        return self.to_target(torch.arange(self.draft_vocab_size, device=self.d2t.device))

    # ---- inference: one segment of entries over a cache ---------------------------------------
    def step(
        self,
        feat: torch.Tensor,
        ids: torch.Tensor,
        start: int,
        cache: tuple[torch.Tensor, torch.Tensor] | None,
        *,
        fused: bool,
        positions: torch.Tensor | None = None,
        mask: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        """Run T new entries after the `cache` (start = its length = their first position).

        feat: [T, 3*Ht] target features (fused=False: fc applied) or [T, H] the head's own
        hidden states (fused=True); ids: [T] target-vocabulary tokens. Causal within the
        segment, full attention to the cache. Returns ([T, H] output hidden, new cache).
        Tree drafting passes positions ([T] int64, default start..start+T-1) and mask ([T,
        cache+T] bool, True = visible) for entries that see only their own ancestors.
        """
        x = feat[None].to(self.fc.weight.dtype)
        if not fused:
            x = self.fc(x)
        emb = self.embed(ids[None])
        layer = self.midlayer
        if positions is None:
            positions = torch.arange(start, start + ids.numel())
        cos, sin = self.rope(positions, x)
        q, k, v = layer.self_attn.qkv(layer.attn_input(emb, x), cos, sin)
        if cache is not None:
            k, v = torch.cat([cache[0], k], dim=2), torch.cat([cache[1], v], dim=2)
        t, s = q.shape[2], k.shape[2]
        if mask is not None:
            mask = mask.to(q.device)
        elif t > 1:
            # Query i (position start+i) sees every cached key and the segment's keys up to i.
            mask = torch.ones(t, s, dtype=torch.bool, device=q.device).tril(diagonal=s - t)
        o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)
        return layer.finish(x, layer.self_attn.out(o))[0], (k, v)

    # ---- training: EAGLE-3's "training-time test" unrolled over a whole sequence ---------------
    def unroll(self, feats: torch.Tensor, ids: torch.Tensor, steps: int) -> list[torch.Tensor]:
        """Teacher-forced tokens, own hidden states, `steps` chain depths in parallel.

        feats: [B, T, 3*Ht] target features of positions 0..T-1; ids: [B, T + steps] tokens
        (ids[:, j] is token j+1 of the text, so entry j at depth 0 pairs feats[:, j] with
        ids[:, j]). Depth s >= 1 at base j pairs the depth s-1 output at j with ids[:, j + s],
        sits at position j + s and attends to the depth-0 keys of positions <= j plus its own
        keys of depths 1..s at base j: exactly what chain drafting after committed position j
        sees at inference (`step`). Returns per depth [B, T, draft_vocab] logits; depth s at j
        predicts text token j + s + 2.
        """
        b, t, _ = feats.shape
        layer, attn = self.midlayer, self.midlayer.self_attn
        base = torch.arange(t, device=feats.device)
        x = self.fc(feats.to(self.fc.weight.dtype))  # [B, T, H]
        keys: list[torch.Tensor] = []
        values: list[torch.Tensor] = []
        causal = torch.ones(t, t, dtype=torch.bool, device=feats.device).tril()
        scale = 1.0 / math.sqrt(attn.head_dim)
        out: list[torch.Tensor] = []
        for s in range(steps):
            emb = self.embed(ids[:, s : s + t])
            cos, sin = self.rope(base + s, x)
            q, k, v = attn.qkv(layer.attn_input(emb, x), cos, sin)  # [B, heads|kv, T, d]
            rep = attn.num_heads // attn.num_kv
            keys.append(k.repeat_interleave(rep, dim=1))
            values.append(v.repeat_interleave(rep, dim=1))
            # Depth-0 keys: causal over positions; deeper keys: only the same base (diagonal).
            s0 = (q @ keys[0].transpose(-1, -2)) * scale  # [B, heads, T, T]
            s0 = s0.masked_fill(~causal, float("-inf"))
            diag = [(q * kk).sum(-1, keepdim=True) * scale for kk in keys[1:]]  # [B, heads, T, 1] each
            w = torch.softmax(torch.cat([s0, *diag], dim=-1).float(), dim=-1).to(q.dtype)
            o = w[..., :t] @ values[0]
            for i, vv in enumerate(values[1:]):
                o = o + w[..., t + i : t + i + 1] * vv
            x = layer.finish(x, attn.out(o))
            out.append(self.logits(x))
        return out


# ---- checkpoint I/O ----------------------------------------------------------------------
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
        cfg = {**cfg, "eagle_version": 2}  # EAGLE-1/2 layout: drafters/eagle2.py builds it
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


def head_config_for(target: PreTrainedModel, *, draft_vocab_size: int, intermediate_size: int | None = None) -> dict[str, Any]:
    """A head config matching `target` (hidden size, heads, rope), as the official training sets it."""
    tc = target.config
    rope = dict(getattr(tc, "rope_parameters", None) or {})
    cfg = {
        "hidden_size": tc.hidden_size,
        "intermediate_size": intermediate_size or tc.intermediate_size,
        "num_attention_heads": tc.num_attention_heads,
        "num_key_value_heads": tc.num_key_value_heads,
        "head_dim": getattr(tc, "head_dim", None) or tc.hidden_size // tc.num_attention_heads,
        "rms_norm_eps": tc.rms_norm_eps,
        "rope_theta": rope.get("rope_theta", getattr(tc, "rope_theta", 10000.0)),
        "max_position_embeddings": tc.max_position_embeddings,
        "vocab_size": target.get_input_embeddings().num_embeddings,
        "draft_vocab_size": draft_vocab_size,
        "target_hidden_size": tc.hidden_size,
        "eagle_aux_hidden_state_layer_ids": list(default_layers(tc.num_hidden_layers)),
    }
    if rope.get("rope_type", "default") != "default":
        cfg["rope_scaling"] = {k: v for k, v in rope.items() if k != "rope_theta"}
    return cfg


def vocab_maps(draft_to_target: torch.Tensor, vocab_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """d2t / t2d buffers from the sorted target ids of the draft vocabulary ([draft_vocab] int64)."""
    ids = torch.as_tensor(draft_to_target, dtype=torch.long)
    d2t = ids - torch.arange(ids.numel())
    t2d = torch.zeros(vocab_size, dtype=torch.bool)
    t2d[ids] = True
    return d2t, t2d


# ---- the drafter -------------------------------------------------------------------------------
@dataclass(frozen=True)
class Eagle3Params(DrafterParams):
    """drafter=eagle3 / eagle2 (conf/drafter/eagle3.yaml explains each)."""

    head_path: str | None = knob(None, optional(string), "a head folder, a hub id or random")
    layers: list[int] | None = knob(None, optional(list_of(integer(0))), "null = the head's own")
    dtype: str | None = knob(None, optional(string), "null = the target's dtype")
    tree: bool = knob(False, boolean)
    total_token: int = knob(60, integer(2, 4096), "tokens per verification forward")
    # >= 1: the tree's first level and at least one expansion (docs/algorithms.md, EAGLE-2).
    depth: int = knob(7, integer(1, 256), "expansions after the first top_k")
    top_k: int = knob(10, integer(1), "children per expanded node")


class Eagle3Drafter(Drafter):
    """drafter=eagle3: chain drafting of K tokens with an EAGLE-3 head over its own KV cache."""

    name = "eagle3"
    config_names = ("eagle3", "eagle2")  # drafter=eagle2: the same class, the checkpoint decides the head
    Params = Eagle3Params

    def __init__(
        self,
        target: PreTrainedModel,
        head_path: str | None = None,
        head: Eagle3Head | Eagle2Head | None = None,
        **knobs: Any,
    ) -> None:
        super().__init__(head_path=head_path or None, **knobs)
        p = self.params
        tree, layers, dtype = p.tree, p.layers, p.dtype
        if tree:
            # A tree's longest path: top_k roots, then `depth` expansions (EAGLE's topK_genrate).
            self.k = p.depth + 1
        self.tree = bool(tree)
        self.total_token = p.total_token
        self.depth = p.depth
        self.top_k = p.top_k
        if head is None and not head_path:
            raise ConfigError(
                "drafter=eagle3 needs a head: this pair has no pair.eagle3_head and no "
                "loosespec_bench/conf/pair_drafter/<pair>_eagle3.yaml; set drafter.head_path=<folder or hub id>"
            )
        if head is None:
            if head_path == "random":
                # A randomly initialised head: shapes and timings only (acceptance ~ 0).
                cfg = head_config_for(target, draft_vocab_size=target.get_input_embeddings().num_embeddings)
                head = build_head(cfg, None, target.get_input_embeddings())
            else:
                cfg, state = read_head(head_path)
                if cfg.get("eagle_version") == 2:
                    head = build_eagle2_head(cfg, state, target.get_input_embeddings(), target.get_output_embeddings())
                else:
                    head = build_head(cfg, state, target.get_input_embeddings())
        emb = target.get_input_embeddings()
        if head.vocab_size != emb.num_embeddings:
            raise ConfigError(
                f"EAGLE-3 head {head_path!r} is for a target vocabulary of {head.vocab_size} tokens, "
                f"the target has {emb.num_embeddings}"
            )
        n_layers = target.config.num_hidden_layers
        if isinstance(head, Eagle2Head):
            # EAGLE-2 reads the target's final (normed) hidden state: hidden_states[L].
            layers = layers or (n_layers,)
            want = 1
        else:
            layers = layers or head.cfg.get("eagle_aux_hidden_state_layer_ids") or default_layers(n_layers)
            want = 3
        # Indices into transformers' hidden_states tuple: i = the input of layer i (0 = embeddings).
        self.needs_target_hidden: tuple[int, ...] = tuple(int(i) for i in layers)
        if len(self.needs_target_hidden) != want or not all(0 <= i <= n_layers for i in self.needs_target_hidden):
            raise ConfigError(f"drafter.layers={list(self.needs_target_hidden)}: need {want} layer indices in [0, {n_layers}]")
        torch_dtype = getattr(torch, dtype) if dtype else target.dtype
        # .to() casts floating tensors only: d2t / t2d keep their integer / bool types.
        self.head = head.to(device=target.device, dtype=torch_dtype).eval()
        if head.embed_tokens is not emb:  # the checkpoint's own embedding (outside the module tree)
            head.embed_tokens.to(device=target.device, dtype=torch_dtype)
        self._target_ids = self.head.draft_ids_of_target()  # [draft_vocab] target id of each draft id
        self.reset(torch.empty(0, dtype=torch.long))

    def modules(self) -> list[torch.nn.Module]:
        return [self.head]

    def reset(self, prompt_ids: torch.Tensor) -> None:
        self.cache: tuple[torch.Tensor, torch.Tensor] | None = None
        self.n_real = 0  # cache entries built from target features (the rest are draft entries)
        self.seen = torch.empty(0, dtype=torch.long)  # tokens 1..n_real paired with those entries
        self.pending: list[torch.Tensor] = []  # [m, 3*Ht] features observed, not yet in the cache

    def observe(self, hidden: tuple[torch.Tensor, ...]) -> None:
        """Target hidden states of newly committed positions: one [m, Ht] per needed layer."""
        # A target split over devices (device_map) gives each layer's states on its own device.
        self.pending.append(torch.cat([h.to(self.head.fc.weight.device) for h in hidden], dim=-1))

    def _crop(self, n: int) -> None:
        if self.cache is not None:
            self.cache = (self.cache[0][:, :, :n], self.cache[1][:, :, :n])

    @torch.inference_mode()
    def propose(
        self,
        tokens: torch.Tensor,
        k: int,
        *,
        temperature: float = 0.0,
        generator: torch.Generator | None = None,
        want_probs: bool = False,
        top_k: int = 0,
        top_p: float = 1.0,
    ) -> Draft:
        # Draft entries of the last step are dropped even where accepted: their features were the
        # head's own guesses; the target's real features for those positions arrive via observe().
        self._crop(self.n_real)
        if common_prefix_len(self.seen, tokens[1:]) < self.seen.numel():
            raise RuntimeError("eagle3: committed tokens changed under the head's cache; call reset() per sequence")
        feats = torch.cat(self.pending) if self.pending else None  # [m, 3*Ht]
        self.pending = []
        m = 0 if feats is None else feats.shape[0]
        n_feat = self.n_real + m  # target features known for positions 0..n_feat-1
        if n_feat != tokens.numel() - 1 and not (n_feat == 0 and tokens.numel() == 1):
            raise RuntimeError(
                f"eagle3: target features for {n_feat} positions but {tokens.numel()} committed tokens; "
                "the decoding loop must pass needs_target_hidden features through observe()"
            )
        if k <= 0 or n_feat == 0:  # a 1-token prompt: no feature yet, the target goes alone once
            return empty_draft()
        dev = self.head.fc.weight.device
        new_ids = tokens[self.n_real + 1 : n_feat + 1]  # [m] token j+1 for entry j
        h, self.cache = self.head.step(feats.to(dev), new_ids.to(dev), self.n_real, self.cache, fused=False)
        self.seen = torch.cat([self.seen, new_ids.cpu()])
        self.n_real = n_feat
        last = h[-1:]  # [1, H] output at the last committed position
        if self.tree:
            return self._propose_tree(last, n_feat, k, want_probs=want_probs)
        out_tokens: list[int] = []
        out_probs: list[torch.Tensor] = []
        keep_probs = want_probs or temperature > 0
        for s in range(k):
            logits = self.head.logits(last)[0].float()  # [draft_vocab]
            # A draw (or the argmax) in the draft vocabulary; q on the generator's device.
            i, q = sample_or_argmax(logits, temperature, generator, want_probs=keep_probs, top_k=top_k, top_p=top_p)
            d = int(self._target_ids[i])
            out_tokens.append(d)
            if keep_probs:
                # q over the target vocabulary: zero outside the draft vocabulary.
                full = torch.zeros(self.head.vocab_size, dtype=torch.float32, device=q.device)
                full[self._target_ids.to(q.device)] = q
                out_probs.append(full.cpu())
            if s + 1 < k:
                pos = n_feat + s  # entry of drafted token d at position n_feat + s
                last, self.cache = self.head.step(last, torch.tensor([d], device=dev), pos, self.cache, fused=True)
        return Draft(
            tokens=torch.tensor(out_tokens, dtype=torch.long),
            probs=torch.stack(out_probs) if keep_probs else None,
        )

    def _propose_tree(self, last: torch.Tensor, n_feat: int, k: int, *, want_probs: bool) -> Draft:
        """EAGLE-2's dynamic draft tree (Li et al. 2024; SafeAILab/EAGLE `topK_genrate`).

        Expansion: the top_k tokens after the last committed position are the first level;
        then, `depth` times, the current top_k frontier nodes are run through the head (one
        call, each entry seeing the committed entries and its own ancestors), each proposes its
        top_k children, every child gets the cumulative draft log-probability of its path, and
        the top_k children overall become the next frontier. Reranking: of all nodes drafted
        (frontier or not), the total_token - 1 with the highest cumulative log-probability form
        the tree (plus any ancestor a tie left out), in drafting order. Paths are at most
        min(depth + 1, k) nodes long (k: the loop's cap near max_new_tokens). Greedy (T = 0).
        """
        dev = self.head.fc.weight.device
        top_k, max_len = self.top_k, min(self.depth + 1, k)
        toks: list[int] = []
        pars: list[int] = []
        scores: list[torch.Tensor] = []  # per level: [m] cumulative log-probabilities
        qrows: list[torch.Tensor] = []  # per node: index into `dists` (the parent's distribution)
        dists: list[torch.Tensor] = []  # [draft_vocab] log-probabilities, when probs are wanted
        logp = torch.log_softmax(self.head.logits(last)[0].float(), dim=-1)  # [draft_vocab]
        top = logp.topk(min(top_k, logp.numel()))
        toks += self._target_ids[top.indices].tolist()
        pars += [-1] * top.indices.numel()
        scores.append(top.values)
        if want_probs:
            dists.append(logp)
            qrows += [0] * top.indices.numel()
        frontier = list(range(len(toks)))  # node indices to expand next
        front_hidden = last.expand(len(frontier), -1)  # [F, H] each entry's parent output
        front_score = top.values  # [F]
        fed: list[int] = []  # node index of every tree entry appended to the head's cache
        for lvl in range(1, max_len):
            # Entry of node j pairs its parent's output hidden with token j, at position
            # n_feat + depth(j) - 1, and sees the committed entries plus its fed ancestors.
            f = len(frontier)
            anc = [self._ancestors(j, pars) for j in frontier]
            seen_fed = torch.tensor([[e in a for e in fed] for a in anc], dtype=torch.bool).reshape(f, len(fed))
            mask = torch.cat([torch.ones(f, n_feat, dtype=torch.bool), seen_fed, torch.eye(f, dtype=torch.bool)], dim=1)
            pos = torch.full((f,), n_feat + lvl - 1, dtype=torch.long)
            ids = torch.tensor([toks[j] for j in frontier], device=dev)
            out, self.cache = self.head.step(front_hidden, ids, 0, self.cache, fused=True, positions=pos, mask=mask)
            fed += frontier
            lp = torch.log_softmax(self.head.logits(out).float(), dim=-1)  # [F, draft_vocab]
            top = lp.topk(min(top_k, lp.shape[-1]), dim=-1)  # [F, top_k]
            cu = (front_score[:, None] + top.values).reshape(-1)  # [F * top_k] path log-probs
            first = len(toks)
            toks += self._target_ids[top.indices.reshape(-1)].tolist()
            pars += [frontier[r] for r in range(f) for _ in range(top.indices.shape[1])]
            scores.append(cu)
            if want_probs:
                dists += list(lp)
                base = len(dists) - f
                qrows += [base + r for r in range(f) for _ in range(top.indices.shape[1])]
            if lvl + 1 < max_len:
                sel = cu.topk(min(top_k, cu.numel())).indices  # [top_k] next frontier
                frontier = [first + int(i) for i in sel]
                front_hidden = out[sel // top.indices.shape[1]]
                front_score = cu[sel]
        all_scores = torch.cat(scores)  # [nodes]
        keep = set(all_scores.topk(min(self.total_token - 1, all_scores.numel())).indices.tolist())
        for j in list(keep):  # ties may leave an ancestor out: a tree needs every ancestor
            keep |= set(self._ancestors(j, pars))
        order = sorted(keep)  # drafting order: every parent before its children
        new_index = {j: i for i, j in enumerate(order)}
        probs = None
        if want_probs:
            probs = torch.zeros(len(order), self.head.vocab_size, dtype=torch.float32)
            rows = torch.stack([dists[qrows[j]] for j in order]).exp().cpu()  # [K, draft_vocab]
            probs[:, self._target_ids.cpu()] = rows
        return Draft(
            tokens=torch.tensor([toks[j] for j in order], dtype=torch.long),
            parents=torch.tensor([new_index[pars[j]] if pars[j] >= 0 else -1 for j in order], dtype=torch.long),
            probs=probs,
            info={"tree_nodes": len(order)},
        )

    @staticmethod
    def _ancestors(j: int, pars: list[int]) -> list[int]:
        """Node j and its ancestors (node indices)."""
        out = []
        while j >= 0:
            out.append(j)
            j = pars[j]
        return out
