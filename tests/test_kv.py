"""kv.InPlaceLayer: the same keys, values and logits as transformers' concatenating cache, with
rollback a pointer move and the buffer grown, not copied, per step."""

from __future__ import annotations

import pytest
import torch
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer

from loosespec_bench.kv import InPlaceLayer, new_cache
from loosespec_bench.models.loading import load_model
from loosespec_bench.step import compact_to, crop_to


def _kv(q: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(1, 2, q, 4, generator=g), torch.randn(1, 2, q, 4, generator=g)  # [B, H, q, D]


def test_update_returns_everything_written_and_crop_moves_the_pointer():
    layer = InPlaceLayer()
    k1, v1 = _kv(5, 0)
    k, v = layer.update(k1, v1)
    assert torch.equal(k, k1) and torch.equal(v, v1) and layer.get_seq_length() == 5
    buf = layer._k
    layer.crop(-2)  # a rejected draft's two positions
    assert layer.get_seq_length() == 3 and layer._k is buf  # nothing copied
    k2, v2 = _kv(4, 1)
    k, v = layer.update(k2, v2)
    assert layer._k is buf  # written in place, inside the headroom
    assert torch.equal(k, torch.cat([k1[..., :3, :], k2], dim=-2))
    assert torch.equal(v, torch.cat([v1[..., :3, :], v2], dim=-2))


def test_buffer_grows_with_headroom_keeping_the_live_positions():
    layer = InPlaceLayer()
    k1, v1 = _kv(300, 2)
    layer.update(k1, v1)
    cap = layer.capacity()
    assert cap >= 300 + 256  # room for at least 256 more positions before the next copy
    k2, v2 = _kv(cap - 300 + 1, 3)  # one past the capacity: one reallocation
    k, v = layer.update(k2, v2)
    assert layer.capacity() > cap
    assert torch.equal(k, torch.cat([k1, k2], dim=-2)) and torch.equal(v, torch.cat([v1, v2], dim=-2))


def test_crop_edge_cases():
    layer = InPlaceLayer()
    layer.crop(-3)  # nothing written yet: nothing to do
    assert layer.get_seq_length() == 0
    layer.update(*_kv(4, 4))
    with pytest.raises(ValueError, match="minus"):
        layer.crop(2)  # transformers 4.x's "final length" form is refused, as DynamicLayer does
    layer.crop(-10)
    assert layer.get_seq_length() == 0


def test_assigning_keys_then_values_compacts_like_a_dynamic_layer():
    """step.compact_to gathers the tree's accepted nodes: keys assigned first, values after."""
    caches = []
    for layer in (InPlaceLayer(), DynamicLayer()):
        layer.update(*_kv(9, 5))

        class _C:
            layers = [layer]

            def get_seq_length(self):
                return layer.get_seq_length()

            def crop(self, n):
                layer.crop(n)

        compact_to(_C(), 4, [1, 3])  # keep positions 0-3, then 5 and 7
        caches.append((layer.keys.clone(), layer.values.clone()))
        assert layer.get_seq_length() == 6
    assert torch.equal(caches[0][0], caches[1][0]) and torch.equal(caches[0][1], caches[1][1])


def test_new_cache_gives_the_same_logits_as_the_dynamic_cache_through_rollbacks():
    model = load_model("tiny:0", dtype="float32").model.eval()
    ids = torch.randint(0, 250, (1, 120), generator=torch.Generator().manual_seed(6))
    runs = []
    # The cache's keyword as this transformers names it: `cache` (5.2x, which warns on the old name),
    # `past_key_values` in 5.19 (vLLM's environment), which knows only that one.
    import inspect

    kw = "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"
    for make in (lambda: DynamicCache(config=model.config), lambda: new_cache(model.config)):
        outs = []
        with torch.inference_mode():
            cache = make()
            outs.append(model(ids[:, :60], **{kw: cache}).logits)
            for s in range(60, 110, 7):  # verify 7, keep 3, feed the rest again
                outs.append(model(ids[:, s : s + 7], **{kw: cache}).logits)
                crop_to(cache, s + 3)
                outs.append(model(ids[:, s + 3 : s + 7], **{kw: cache}).logits)
        runs.append(outs)
    assert all(isinstance(layer, InPlaceLayer) for layer in new_cache(model.config).layers)
    assert all(torch.equal(a, b) for a, b in zip(*runs))


def test_a_buffer_made_in_inference_mode_is_replaced_outside_it():
    layer = InPlaceLayer()
    with torch.inference_mode():
        layer.update(*_kv(3, 7))
    with torch.no_grad():
        k2, v2 = _kv(2, 8)
        k, _ = layer.update(k2, v2)  # would raise writing into an inference tensor
    assert k.shape[-2] == 5 and torch.equal(k[..., 3:, :], k2)
