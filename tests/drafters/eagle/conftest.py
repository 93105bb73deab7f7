"""Shared by the EAGLE tests (and decoding/test_tree.py): random heads, a saved checkpoint."""

from __future__ import annotations

import pytest
import torch

from loosespec_bench.drafters.eagle.checkpoint import build_head, save_head
from loosespec_bench.drafters.eagle.eagle3 import head_config_for, vocab_maps

PROMPT = "Question: 3 apples and 4 apples make how many? Answer step by step."
# The key names of SafeAILab/EAGLE's EAGLE-3 checkpoints (cnets.Model.state_dict(), no embedding).
OFFICIAL_KEYS = {
    "fc.weight", "norm.weight", "lm_head.weight", "d2t", "t2d",
    "midlayer.hidden_norm.weight", "midlayer.input_layernorm.weight", "midlayer.post_attention_layernorm.weight",
    "midlayer.self_attn.q_proj.weight", "midlayer.self_attn.k_proj.weight", "midlayer.self_attn.v_proj.weight",
    "midlayer.self_attn.o_proj.weight", "midlayer.mlp.gate_proj.weight", "midlayer.mlp.up_proj.weight",
    "midlayer.mlp.down_proj.weight",
}


def random_head(target, draft_ids: torch.Tensor, seed: int = 0):
    """A random head over the draft vocabulary `draft_ids` (sorted target ids)."""
    cfg = head_config_for(target, draft_vocab_size=draft_ids.numel(), intermediate_size=96)
    torch.manual_seed(seed)
    head = build_head(cfg, None, target.get_input_embeddings())
    head.d2t, head.t2d = vocab_maps(draft_ids, cfg["vocab_size"])
    with torch.no_grad():
        for p in head.parameters():
            if p.dim() == 2:
                p.normal_(0.0, 0.3)
    return head


@pytest.fixture(scope="module")
def draft_ids() -> torch.Tensor:
    return torch.randperm(259, generator=torch.Generator().manual_seed(0))[:120].sort().values


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory, tiny_pair, draft_ids):
    target = tiny_pair[0]
    folder = tmp_path_factory.mktemp("eagle3_head")
    save_head(random_head(target, draft_ids), folder)
    return folder


def prompt_ids(tok, text: str = PROMPT) -> torch.Tensor:
    return torch.tensor(tok(text, add_special_tokens=False).input_ids)


