"""The EAGLE-3 head network (Li et al. 2025), reading the target's hidden states.

The head (SafeAILab/EAGLE, `eagle/model/cnets.py`; same layout as `speculators`' Eagle3):
  - features: the target's hidden states entering layers (2, L//2, L-3) -- "low, mid, high" --
    concatenated, [3*Ht], and fused by `fc` (3*Ht -> H, no bias);
  - one decoder layer (`midlayer`) whose input is concat(input_layernorm(embed(token)),
    hidden_norm(feature)) -> 2H; q/k/v project from 2H; the residual is the (fused) feature;
  - `norm` + `lm_head` over a reduced draft vocabulary; a draft id i is the target id
    i + d2t[i]; t2d[v] marks the target ids that the draft vocabulary holds;
  - the token embedding is the target's own (frozen in training, usually not in the checkpoint).
Entry j of the head's sequence pairs the target's feature at position j with token j+1 and
predicts token j+2. Drafting (drafter.py): after the last committed position, each next entry
pairs the head's OWN previous output hidden state (H wide, no fc) with the token it just
drafted, as EAGLE does at every depth of its tree.

Why a compact definition here and not the `speculators` package: speculators 0.9.0 pins
`torch<=2.14.1` with its CUDA build, `torchaudio`, `torchvision`, `transformers<=5.19.0` and
`datasets`, so `pip install speculators` here would replace the CPU torch 2.13 and downgrade
transformers 5.23 (checked with `pip install --dry-run`). The head is ~120 lines of
PyTorch; it reuses transformers' Llama RMSNorm, MLP and rotary embedding, so rope scaling
variants (llama3, linear, dynamic) behave as in transformers.

Checkpoints: checkpoint.py. Training (the unrolled "training-time test"): `Eagle3Head.unroll`,
used by train/eagle3.py.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn
from transformers import PreTrainedModel
from transformers.models.llama.modeling_llama import LlamaMLP, LlamaRMSNorm, LlamaRotaryEmbedding

from .head import CachedAttention, EagleHead, KVCache, llama_config


def default_layers(num_layers: int) -> tuple[int, int, int]:
    """The official capture: the inputs of layers 2, L//2 and L-3 (EAGLE's modeling_*_kv.py),
    clamped into [0, L] for the few-layer test models."""
    return (min(2, num_layers), num_layers // 2, max(num_layers - 3, 0))


class Eagle3Layer(nn.Module):
    """The `midlayer`: one Llama decoder layer over concat(embedding, feature)."""

    def __init__(self, config: LlamaConfig) -> None:
        super().__init__()
        h, eps = config.hidden_size, config.rms_norm_eps
        self.self_attn = CachedAttention(config, 2 * h)  # q/k/v read [embedding, feature]
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


class Eagle3Head(EagleHead):
    """The draft head. Its token embedding is borrowed from the target unless given."""

    def __init__(self, cfg: dict[str, Any], embed_tokens: nn.Embedding | None = None) -> None:
        super().__init__()
        self.cfg = dict(cfg)
        self.config = llama_config(cfg)
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
    def feature_layers(self, num_layers: int) -> tuple[int, ...]:
        """Three layers, "low, mid, high": the checkpoint's own, else the official capture."""
        return tuple(self.cfg.get("eagle_aux_hidden_state_layer_ids") or default_layers(num_layers))

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """[..., H] -> [..., draft_vocab]."""
        return self.lm_head(self.norm(hidden))

    def to_target(self, draft_ids: torch.Tensor) -> torch.Tensor:
        """Draft-vocabulary ids -> target-vocabulary ids."""
        return draft_ids + self.d2t[draft_ids]

    # ---- inference: one segment of entries over a cache ---------------------------------------
    def step(
        self,
        feat: torch.Tensor,
        ids: torch.Tensor,
        start: int,
        cache: KVCache | None,
        *,
        fused: bool,
        positions: torch.Tensor | None = None,
        mask: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, KVCache]:
        """EagleHead.step; feat: [T, 3*Ht] target features (fused=False: fc applied) or [T, H]
        the head's own hidden states (fused=True)."""
        x = feat[None].to(self.fc.weight.dtype)
        if not fused:
            x = self.fc(x)
        emb = self.embed(ids[None])
        layer = self.midlayer
        if positions is None:
            positions = torch.arange(start, start + ids.numel())
        cos, sin = self.rope(positions, x)
        attn, cache = layer.self_attn.step(layer.attn_input(emb, x), cos, sin, cache, mask)
        return layer.finish(x, attn)[0], cache

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
