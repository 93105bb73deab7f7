"""The EAGLE-2 head network (Li et al. 2024) in the official layout, drafting as EAGLE-3's do.

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
into the same drafter (drafter.py, chain or dynamic tree) behind head.EagleHead.

Keys (checkpoint.build_eagle2_head): fc.weight, fc.bias, layers.0.self_attn.{q,k,v,o}_proj.weight
(+ q/k/v biases), layers.0.mlp.{gate,up,down}_proj.weight, layers.0.post_attention_layernorm.weight,
optional embed_tokens.weight. config.json: Llama-style (hidden_size, num_attention_heads, ...).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from transformers.models.llama.modeling_llama import LlamaMLP, LlamaRMSNorm, LlamaRotaryEmbedding

from .head import CachedAttention, EagleHead, KVCache, llama_config


class Eagle2Head(EagleHead):
    """The EAGLE-2 draft head; the target's embedding and LM head are borrowed (not owned)."""

    def __init__(self, cfg: dict[str, Any], embed_tokens: nn.Embedding, lm_head: nn.Module) -> None:
        super().__init__()
        self.cfg = dict(cfg)
        self.config = llama_config(cfg)
        h = self.config.hidden_size
        self.vocab_size = int(cfg["vocab_size"])
        self.draft_vocab_size = self.vocab_size
        self.fc = nn.Linear(2 * h, h, bias=bool(cfg.get("bias", True)))
        self.self_attn = CachedAttention(self.config, h, qkv_bias=bool(cfg.get("qkv_bias", False)))
        self.mlp = LlamaMLP(self.config)
        self.post_attention_layernorm = LlamaRMSNorm(h, eps=self.config.rms_norm_eps)
        self.rotary_emb = LlamaRotaryEmbedding(config=self.config)
        self.register_buffer("d2t", torch.zeros(self.vocab_size, dtype=torch.long))  # identity map
        # Outside the module tree: the target's own tensors, never in the head's state dict.
        self.__dict__["embed_tokens"] = embed_tokens
        self.__dict__["target_lm_head"] = lm_head

    def feature_layers(self, num_layers: int) -> tuple[int, ...]:
        """The target's final (normed) hidden state: hidden_states[L]."""
        return (num_layers,)

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """[..., H] -> [..., vocab]: the target's LM head, no norm (EAGLE-2)."""
        w = self.target_lm_head.weight
        return self.target_lm_head(hidden.to(device=w.device, dtype=w.dtype))

    def to_target(self, draft_ids: torch.Tensor) -> torch.Tensor:
        return draft_ids

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
        """EagleHead.step; `fused` is moot (target features and the head's own outputs go
        through the same fc). feat: [T, H]; ids: [T]."""
        x = self.fc(torch.cat([self.embed(ids[None]), feat[None].to(self.fc.weight.dtype)], dim=-1))  # [1, T, H]
        if positions is None:
            positions = torch.arange(start, start + x.shape[1])
        cos, sin = self.rope(positions, x)
        attn, cache = self.self_attn.step(x, cos, sin, cache, mask)
        h = x + attn
        h = h + self.mlp(self.post_attention_layernorm(h))
        return h[0], cache
