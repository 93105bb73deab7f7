"""The ground floor of a verification step: prefix helpers, the empty draft, cache rollback."""

from __future__ import annotations

import pytest
import torch
from transformers import DynamicCache

from loosespec_bench.step import Draft, Verdict, common_prefix_len, crop_to, empty_draft, longest_true_prefix


def _flags(*xs: int) -> torch.Tensor:
    return torch.tensor(xs, dtype=torch.bool)


@pytest.mark.parametrize(
    ("flags", "n"),
    [
        ((), 0),  # empty draft
        ((1, 1, 1), 3),  # perfect match
        ((0, 1, 1), 0),  # early mismatch: later matches never count
        ((1, 0, 1, 1), 1),  # mismatch in the middle
        ((1, 1, 0), 2),  # mismatch at the last position
        ((0,), 0),
        ((1,), 1),
    ],
)
def test_longest_true_prefix(flags, n):
    assert longest_true_prefix(_flags(*flags)) == n


def test_common_prefix_len_named_cases():
    a = torch.tensor([5, 6, 7, 8])
    assert common_prefix_len(a, a) == 4  # identical
    assert common_prefix_len(a, torch.tensor([5, 6])) == 2  # one a prefix of the other
    assert common_prefix_len(torch.tensor([5, 6]), a) == 2  # symmetric
    assert common_prefix_len(a, torch.tensor([5, 9, 7, 8])) == 1  # divergence, later equal tokens ignored
    assert common_prefix_len(a, torch.tensor([4, 6, 7, 8])) == 0  # first token differs
    empty = torch.empty(0, dtype=torch.long)
    assert common_prefix_len(a, empty) == common_prefix_len(empty, empty) == 0


def test_empty_draft():
    d = empty_draft()
    assert d.k == 0 and d.tokens.dtype == torch.long and d.tokens.shape == (0,)
    assert d.probs is None and d.info == {}
    # Each call is a fresh object: a drafter that writes into info never leaks into the next step.
    d.info["x"] = 1
    assert empty_draft().info == {}


def test_draft_k_and_verdict_defaults():
    assert Draft(tokens=torch.tensor([1, 2, 3])).k == 3
    assert Verdict(num_accepted=0, next_token=7).record is None


def _cache(length: int) -> DynamicCache:
    """A 2-layer cache holding `length` positions of distinct values."""
    cache = DynamicCache()
    for layer in range(2):
        kv = torch.arange(length, dtype=torch.float32).view(1, 1, length, 1) + 100 * layer  # [B, H, T, D]
        cache.update(kv, kv.clone(), layer)
    return cache


def test_crop_to_keeps_the_first_positions_of_every_layer():
    cache = _cache(6)
    crop_to(cache, 4)
    assert cache.get_seq_length() == 4
    for layer, lay in enumerate(cache.layers):
        assert lay.keys.flatten().tolist() == [100 * layer + i for i in range(4)]


def test_crop_to_same_length_is_a_no_op_and_zero_empties():
    cache = _cache(3)
    crop_to(cache, 3)
    assert cache.get_seq_length() == 3
    crop_to(cache, 0)
    assert cache.get_seq_length() == 0


def test_crop_to_refuses_growing():
    with pytest.raises(ValueError):
        crop_to(_cache(2), 3)
