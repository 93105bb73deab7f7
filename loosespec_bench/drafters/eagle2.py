"""EAGLE-2 heads (Li et al. 2024) in the official checkpoint format, drafting as EAGLE-3's do.

The EAGLE-1/2 head (SafeAILab/EAGLE `eagle/model/cnets1.py`, class Model; used when
EaModel.from_pretrained(use_eagle3=False)):
  - feature: the target's final hidden state (after its final norm: EaModel feeds
    `base_model.model(...)[0]`), i.e. transformers' hidden_states[L];
  - x = fc(concat(embed(token), feature)) (2H -> H, bias per config.json `bias`, default true);
  - one Llama decoder layer (`layers.0.*`) WITHOUT input_layernorm (index 0 has none), q/k/v
    from H (bias from `qkv_bias` when the config has it);
  - the TARGET's LM head on the layer's output, no norm (`head(last_hidden)` in topK_genrate);
    the full target vocabulary (no d2t / t2d).
Entry j pairs the feature at position j with token j+1, as EAGLE-3; deeper entries pair the
head's own output hidden state with the drafted token through the same fc. So the head plugs
into Eagle3Drafter (chain or dynamic tree) behind the same methods as Eagle3Head.

Keys: fc.weight, fc.bias, layers.0.self_attn.{q,k,v,o}_proj.weight (+ q/k/v biases),
layers.0.mlp.{gate,up,down}_proj.weight, layers.0.post_attention_layernorm.weight, optional
embed_tokens.weight. config.json: Llama-style (hidden_size, num_attention_heads, ...).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from transformers.models.llama.modeling_llama import LlamaMLP, LlamaRMSNorm, LlamaRotaryEmbedding, apply_rotary_pos_emb

from ..errors import ConfigError


def is_eagle2_state(state: dict[str, torch.Tensor]) -> bool:
    """An EAGLE-1/2 head: fc reads [embedding, feature] (2H) and the layer has no hidden_norm."""
    fc = state.get("fc.weight")
    return (
        fc is not None and fc.dim() == 2 and fc.shape[1] == 2 * fc.shape[0]
        and not any(k.endswith("hidden_norm.weight") for k in state)
    )


class Eagle2Head(nn.Module):
    """The EAGLE-2 draft head; the target's embedding and LM head are borrowed (not owned)."""

    def __init__(self, cfg: dict[str, Any], embed_tokens: nn.Embedding, lm_head: nn.Module) -> None:
        super().__init__()
        from .eagle3 import _llama_config

        self.cfg = dict(cfg)
        self.config = _llama_config(cfg)
        h = self.config.hidden_size
        self.num_heads = self.config.num_attention_heads
        self.num_kv = self.config.num_key_value_heads
        self.head_dim = self.config.head_dim or h // self.num_heads
        qkv_bias = bool(cfg.get("qkv_bias", False))
        self.vocab_size = int(cfg["vocab_size"])
        self.draft_vocab_size = self.vocab_size
        self.fc = nn.Linear(2 * h, h, bias=bool(cfg.get("bias", True)))
        self.q_proj = nn.Linear(h, self.num_heads * self.head_dim, bias=qkv_bias)
        self.k_proj = nn.Linear(h, self.num_kv * self.head_dim, bias=qkv_bias)
        self.v_proj = nn.Linear(h, self.num_kv * self.head_dim, bias=qkv_bias)
        self.o_proj = nn.Linear(self.num_heads * self.head_dim, h, bias=False)
        self.mlp = LlamaMLP(self.config)
        self.post_attention_layernorm = LlamaRMSNorm(h, eps=self.config.rms_norm_eps)
        self.rotary_emb = LlamaRotaryEmbedding(config=self.config)
        self.register_buffer("d2t", torch.zeros(self.vocab_size, dtype=torch.long))  # identity map
        # Outside the module tree: the target's own tensors, never in the head's state dict.
        self.__dict__["embed_tokens"] = embed_tokens
        self.__dict__["target_lm_head"] = lm_head

    def embed(self, ids: torch.Tensor) -> torch.Tensor:
        emb = self.embed_tokens(ids.to(self.embed_tokens.weight.device))
        return emb.to(device=self.fc.weight.device, dtype=self.fc.weight.dtype)

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """[..., H] -> [..., vocab]: the target's LM head, no norm (EAGLE-2)."""
        w = self.target_lm_head.weight
        return self.target_lm_head(hidden.to(device=w.device, dtype=w.dtype))

    def to_target(self, draft_ids: torch.Tensor) -> torch.Tensor:
        return draft_ids

    def draft_ids_of_target(self) -> torch.Tensor:
        return torch.arange(self.vocab_size, device=self.d2t.device)

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
        """As Eagle3Head.step; `fused` is moot (target features and the head's own outputs go
        through the same fc). feat: [T, H]; ids: [T]. Returns ([T, H], new cache)."""
        x = self.fc(torch.cat([self.embed(ids[None]), feat[None].to(self.fc.weight.dtype)], dim=-1))  # [1, T, H]
        b, t, _ = x.shape
        if positions is None:
            positions = torch.arange(start, start + t)
        cos, sin = self.rotary_emb(x, positions[None].to(x.device))
        q = self.q_proj(x).view(b, t, self.num_heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(b, t, self.num_kv, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(b, t, self.num_kv, self.head_dim).transpose(1, 2)
        q, k = apply_rotary_pos_emb(q, k, cos, sin)
        if cache is not None:
            k, v = torch.cat([cache[0], k], dim=2), torch.cat([cache[1], v], dim=2)
        s = k.shape[2]
        if mask is not None:
            mask = mask.to(q.device)
        elif t > 1:
            mask = torch.ones(t, s, dtype=torch.bool, device=q.device).tril(diagonal=s - t)
        o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)  # [1, heads, T, d]
        h = x + self.o_proj(o.transpose(1, 2).reshape(b, t, self.num_heads * self.head_dim))
        h = h + self.mlp(self.post_attention_layernorm(h))
        return h[0], (k, v)


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
            for prefix in ("layers.0.self_attn.", "midlayer.self_attn.", "layers.0.", "midlayer."):
                if k.startswith(prefix):
                    k = k[len(prefix):]
                    break
            renamed[k] = v
        renamed.setdefault("d2t", head.d2t)
        missing, unexpected = head.load_state_dict(renamed, strict=False)
        if missing or unexpected:
            raise ConfigError(f"EAGLE-2 head weights do not match its config: missing {missing}, unexpected {unexpected}")
    return head
