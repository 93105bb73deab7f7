"""The cached attention step both EAGLE heads run: segments over a cache equal one pass."""

from __future__ import annotations

import torch

from loosespec_bench.drafters.eagle.eagle2 import Eagle2Head
from loosespec_bench.drafters.eagle.eagle3 import Eagle3Head
from loosespec_bench.drafters.eagle.head import CachedAttention, llama_config

CFG = {"hidden_size": 32, "intermediate_size": 48, "num_attention_heads": 4, "num_key_value_heads": 2,
       "rms_norm_eps": 1e-6, "vocab_size": 50}


def _attention(in_features: int = 64) -> tuple[CachedAttention, torch.Tensor, torch.Tensor]:
    torch.manual_seed(0)
    config = llama_config(CFG)
    attn = CachedAttention(config, in_features)
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    x = torch.randn(1, 7, in_features)
    cos, sin = LlamaRotaryEmbedding(config=config)(x, torch.arange(7)[None])
    return attn, x, (cos, sin)


def test_segments_over_the_cache_equal_one_causal_pass():
    attn, x, (cos, sin) = _attention()
    whole, (k, v) = attn.step(x, cos, sin, None, None)
    first, cache = attn.step(x[:, :4], cos[:, :4], sin[:, :4], None, None)
    rest, cache = attn.step(x[:, 4:], cos[:, 4:], sin[:, 4:], cache, None)
    torch.testing.assert_close(torch.cat([first, rest], dim=1), whole)
    torch.testing.assert_close(cache[0], k)
    assert k.shape == (1, 2, 7, 8)  # [1, kv_heads, S, head_dim]


def test_an_explicit_mask_is_used_as_given():
    # A tree mask that hides every cached key from the last entry: it sees only itself.
    attn, x, (cos, sin) = _attention()
    _, cache = attn.step(x[:, :6], cos[:, :6], sin[:, :6], None, None)
    alone, _ = attn.step(x[:, 6:], cos[:, 6:], sin[:, 6:], None, None)
    mask = torch.zeros(1, 7, dtype=torch.bool)
    mask[0, 6] = True
    masked, _ = attn.step(x[:, 6:], cos[:, 6:], sin[:, 6:], cache, mask)
    torch.testing.assert_close(masked, alone)


def test_both_heads_run_the_shared_attention_and_declare_their_feature_layers():
    emb = torch.nn.Embedding(50, 32)
    e3 = Eagle3Head({**CFG, "draft_vocab_size": 50}, emb)
    e2 = Eagle2Head(CFG, emb, torch.nn.Linear(32, 50, bias=False))
    assert isinstance(e3.midlayer.self_attn, CachedAttention) and e3.midlayer.self_attn.q_proj.in_features == 64
    assert isinstance(e2.self_attn, CachedAttention) and e2.self_attn.q_proj.in_features == 32
    assert e3.feature_layers(12) == (2, 6, 9)  # low, mid, high: the official capture
    assert Eagle3Head({**CFG, "eagle_aux_hidden_state_layer_ids": [1, 2, 3]}, emb).feature_layers(12) == (1, 2, 3)
    assert e2.feature_layers(12) == (12,)  # the final hidden state
