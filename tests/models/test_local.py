"""models/local.read_local: a local safetensors folder read with pread (issue 72, memory) gives
the model from_pretrained gives, bit for bit; other checkpoints are left to from_pretrained; a
shard outside the folder or a linked checkpoint is refused; missing weights are reported."""

from __future__ import annotations

import pytest


# ---- read_local: a local safetensors folder read with pread (issue 72, memory) ----------------

def _saved_tiny(tmp_path, **save):
    import torch

    from loosespec_bench.models.tiny import tiny_model

    model = tiny_model(3)
    model.generation_config.eos_token_id = [7, 9]  # something from_pretrained reads from the folder
    folder = tmp_path / "m"
    model.save_pretrained(folder, **save)
    return folder, torch


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("sharded", [False, True])
def test_read_local_gives_the_model_from_pretrained_gives(tmp_path, dtype, sharded):
    """Same tensors bit for bit, same logits, same config and generation config, one file or shards."""
    from transformers import AutoModelForCausalLM

    from loosespec_bench.models.local import read_local

    folder, torch = _saved_tiny(tmp_path, **({"max_shard_size": "50KB"} if sharded else {}))
    assert (folder / "model.safetensors.index.json").is_file() == sharded
    dt = getattr(torch, dtype)
    a = AutoModelForCausalLM.from_pretrained(folder, dtype=dt).eval()
    b = read_local(folder, dt).eval()
    sa, sb = a.state_dict(), b.state_dict()
    assert sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) and sa[k].dtype == sb[k].dtype for k in sa)
    ids = torch.tensor([[1, 5, 9, 200, 3]])
    with torch.inference_mode():
        assert torch.equal(a(ids).logits, b(ids).logits)
    assert a.config.to_dict() == b.config.to_dict()
    assert a.generation_config.to_dict() == b.generation_config.to_dict()


def test_read_local_leaves_other_checkpoints_to_from_pretrained(tmp_path):
    from loosespec_bench.models.local import read_local

    folder, torch = _saved_tiny(tmp_path)
    (folder / "model.safetensors").unlink()  # e.g. a .bin checkpoint: nothing for pread to read
    assert read_local(folder, torch.float32) is None


def test_read_local_refuses_a_shard_outside_its_folder(tmp_path):
    import json

    from loosespec_bench.errors import ConfigError
    from loosespec_bench.models.local import read_local

    folder, torch = _saved_tiny(tmp_path, max_shard_size="50KB")
    index = folder / "model.safetensors.index.json"
    declared = json.loads(index.read_text())
    name = next(iter(declared["weight_map"]))
    declared["weight_map"][name] = "../elsewhere.safetensors"
    index.write_text(json.dumps(declared))
    with pytest.raises(ConfigError, match="is not a plain name"):
        read_local(folder, torch.float32)


def test_read_local_does_not_follow_a_linked_checkpoint(tmp_path):
    from loosespec_bench.errors import ConfigError
    from loosespec_bench.models.local import read_local

    folder, torch = _saved_tiny(tmp_path)
    real = tmp_path / "real.safetensors"
    (folder / "model.safetensors").rename(real)
    (folder / "model.safetensors").symlink_to(real)
    with pytest.raises(ConfigError):
        read_local(folder, torch.float32)


def test_read_local_says_which_weights_the_folder_lacks(tmp_path):
    """The conversion's check (models/gguf.convert_gguf) reads missing keys from it."""
    from safetensors.torch import load_file, save_file

    from loosespec_bench.models.local import read_local

    folder, torch = _saved_tiny(tmp_path)
    tensors = load_file(folder / "model.safetensors")
    dropped = sorted(tensors)[-1]
    del tensors[dropped]
    save_file(tensors, folder / "model.safetensors", metadata={"format": "pt"})
    info: dict = {}
    assert read_local(folder, torch.float32, loading_info=info) is not None
    assert dropped in info["missing_keys"]
