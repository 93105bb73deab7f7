"""EAGLE checkpoints: the official layout written and read, speculators key names, refusals."""

from __future__ import annotations

import json

import pytest
import torch

from loosespec_bench.drafters import Eagle3Drafter
from loosespec_bench.drafters.eagle.checkpoint import build_head, read_head, save_head
from loosespec_bench.errors import ConfigError

from .conftest import OFFICIAL_KEYS, random_head


def test_checkpoint_has_the_official_layout(checkpoint, tiny_pair, draft_ids):
    from safetensors.torch import load_file

    cfg = json.loads((checkpoint / "config.json").read_text())
    assert cfg["draft_vocab_size"] == 120 and cfg["vocab_size"] == tiny_pair[0].config.vocab_size
    state = load_file(str(checkpoint / "model.safetensors"))
    assert set(state) == OFFICIAL_KEYS
    assert state["fc.weight"].shape == (64, 3 * 64)  # 3 target layers fused to H
    assert state["midlayer.self_attn.q_proj.weight"].shape[1] == 2 * 64  # [embedding, feature]
    assert state["lm_head.weight"].shape == (120, 64)
    assert state["d2t"].dtype == torch.long and state["t2d"].dtype == torch.bool
    assert torch.equal(torch.arange(120) + state["d2t"], draft_ids)  # target id = draft id + d2t
    assert int(state["t2d"].sum()) == 120


def test_pytorch_bin_and_speculators_key_names_load(tmp_path, tiny_pair, draft_ids):
    target = tiny_pair[0]
    head = random_head(target, draft_ids, seed=1)
    save_head(head, tmp_path, safetensors=False)
    assert (tmp_path / "pytorch_model.bin").is_file()
    cfg, state = read_head(tmp_path)
    torch.save({k.replace("midlayer.", "layers.0."): v for k, v in state.items()}, tmp_path / "pytorch_model.bin")
    _, renamed = read_head(tmp_path)
    assert set(renamed) == OFFICIAL_KEYS
    loaded = build_head(cfg, renamed, target.get_input_embeddings())
    for k, v in head.state_dict().items():
        torch.testing.assert_close(loaded.state_dict()[k], v)


def test_not_a_head_is_a_config_error(tmp_path, tiny_pair):
    (tmp_path / "config.json").write_text("{}")
    torch.save({"model.embed_tokens.weight": torch.zeros(2, 2)}, tmp_path / "pytorch_model.bin")
    with pytest.raises(ConfigError, match="not an EAGLE-3 head"):
        Eagle3Drafter(tiny_pair[0], str(tmp_path))
    with pytest.raises(ConfigError, match="neither a local folder"):
        Eagle3Drafter(tiny_pair[0], "./no/such/head")
