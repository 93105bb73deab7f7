"""What EAGLE-2 and EAGLE-3 heads share: the Llama config of their one layer, the cached
attention step over the head's own KV cache, and the interface the drafter reads.

A head's sequence pairs the target's feature at position j with token j+1 and predicts token
j+2; drafting appends entries for the head's own guesses to the same cache (drafter.py). Both
heads run that step through `CachedAttention`; they differ in what the attention reads (EAGLE-3:
[embedding, feature], 2H wide; EAGLE-2: fc of both, H wide) and in the LM head.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from transformers import LlamaConfig
from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

# A head's KV cache: keys and values [1, kv_heads, S, head_dim].
KVCache = tuple[torch.Tensor, torch.Tensor]


def llama_config(cfg: dict[str, Any]) -> LlamaConfig:
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


class CachedAttention(nn.Module):
    """Grouped-query attention of a head's layer, run segment by segment over its KV cache.

    q/k/v read `in_features` (EAGLE-3: 2H, EAGLE-2: H); the parameter names are the official
    checkpoints' (`self_attn.{q,k,v,o}_proj`).
    """

    def __init__(self, config: LlamaConfig, in_features: int, *, qkv_bias: bool = False) -> None:
        super().__init__()
        h = config.hidden_size
        self.num_heads = config.num_attention_heads
        self.num_kv = config.num_key_value_heads
        self.head_dim = config.head_dim or h // self.num_heads
        self.q_proj = nn.Linear(in_features, self.num_heads * self.head_dim, bias=qkv_bias)
        self.k_proj = nn.Linear(in_features, self.num_kv * self.head_dim, bias=qkv_bias)
        self.v_proj = nn.Linear(in_features, self.num_kv * self.head_dim, bias=qkv_bias)
        self.o_proj = nn.Linear(self.num_heads * self.head_dim, h, bias=False)

    def qkv(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """x: [B, T, in] -> q [B, heads, T, d], k and v [B, kv_heads, T, d], rope applied."""
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

    def step(
        self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, cache: KVCache | None, mask: torch.Tensor | None
    ) -> tuple[torch.Tensor, KVCache]:
        """T new entries after the cache: x [1, T, in] -> ([1, T, H] attention output, new cache).

        Causal within the segment and full attention to the cache, unless `mask` ([T, S] bool,
        True = visible; tree drafting: each entry sees the committed entries and its ancestors).
        """
        q, k, v = self.qkv(x, cos, sin)
        if cache is not None:
            k, v = torch.cat([cache[0], k], dim=2), torch.cat([cache[1], v], dim=2)
        t, s = q.shape[2], k.shape[2]
        if mask is not None:
            mask = mask.to(q.device)
        elif t > 1:
            # Query i (position start+i) sees every cached key and the segment's keys up to i.
            mask = torch.ones(t, s, dtype=torch.bool, device=q.device).tril(diagonal=s - t)
        o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)  # [1, heads, T, d]
        return self.out(o), (k, v)


class EagleHead(nn.Module):
    """The interface drafter.Eagle3Drafter drafts with; Eagle3Head and Eagle2Head implement it.

    Subclasses set `cfg` (config.json), `vocab_size` (the target's), `draft_vocab_size`,
    `fc` (its weight gives the head's device and dtype), `rotary_emb`, and keep the token
    embedding outside the module tree (`self.__dict__["embed_tokens"]`), so that the state
    dict, .to() and the optimizer never see the target's embedding matrix.
    """

    cfg: dict[str, Any]
    vocab_size: int
    draft_vocab_size: int
    fc: nn.Linear
    embed_tokens: nn.Embedding

    def embed(self, ids: torch.Tensor) -> torch.Tensor:
        emb = self.embed_tokens(ids.to(self.embed_tokens.weight.device))
        return emb.to(device=self.fc.weight.device, dtype=self.fc.weight.dtype)

    def rope(self, positions: torch.Tensor, like: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """positions: [T] int64 -> cos, sin [1, T, head_dim]."""
        return self.rotary_emb(like, positions[None].to(like.device))

    def feature_layers(self, num_layers: int) -> tuple[int, ...]:
        """The target layers whose inputs the head reads by default (indices into
        transformers' hidden_states: i = the input of layer i, num_layers = the final state)."""
        raise NotImplementedError

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """[..., H] -> [..., draft_vocab]."""
        raise NotImplementedError

    def to_target(self, draft_ids: torch.Tensor) -> torch.Tensor:
        """Draft-vocabulary ids -> target-vocabulary ids."""
        raise NotImplementedError

    def draft_ids_of_target(self) -> torch.Tensor:
        """[draft_vocab] the target id of every draft id."""
        return self.to_target(torch.arange(self.draft_vocab_size, device=self.d2t.device))

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
        """Run T new entries after the `cache` (start = its length = their first position).

        feat: [T, F] target features (fused=False) or [T, H] the head's own output hidden
        states (fused=True); ids: [T] target-vocabulary tokens. Returns ([T, H] output hidden,
        new cache). Tree drafting passes positions ([T] int64, default start..start+T-1) and
        mask ([T, cache+T] bool, True = visible) for entries that see only their ancestors.
        """
        raise NotImplementedError
