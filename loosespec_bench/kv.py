"""An in-place KV cache for the decoding loop and the model drafter.

transformers' DynamicLayer appends a step's keys and values with torch.cat, which copies the
whole cache every forward: O(context) bytes per step for every layer of both models, on top of
the weights the step has to read anyway. InPlaceLayer keeps each layer's keys and values in a
preallocated buffer [B, H, capacity, D] and writes a step's positions into it; the cache seen by
attention is a view of the first `length` positions. Rolling back a rejected draft (crop) is a
pointer move; the positions past it are overwritten by the next step. The buffer grows
geometrically when a forward needs more room (a copy every ~25% of growth, not every step).

It is a DynamicLayer to every caller: `keys` / `values` read the live view, assigning them (the
tree verification's compaction, step.compact_to) adopts the tensor as the new buffer, and
transformers' masks and sequence length come from the same `length`. Values are bit-identical
to the concatenating cache: the same tensors, stored elsewhere.
"""

from __future__ import annotations

from typing import Any

import torch
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer

# Room to grow before the next reallocation: at least this many positions, or a quarter of
# the length reached (a 2k-token prompt reallocates after ~500 new tokens, not every 64).
_MIN_HEADROOM = 256
_HEADROOM_FRACTION = 4


def _length(t: torch.Tensor | None) -> int:
    return 0 if t is None or t.dim() < 2 else t.shape[-2]


class InPlaceLayer(DynamicLayer):
    """A DynamicLayer whose update writes into a preallocated buffer instead of concatenating."""

    def __init__(self, **kwargs: Any) -> None:
        self._k: torch.Tensor | None = None  # [B, H, capacity, D]
        self._v: torch.Tensor | None = None
        self._len = 0  # positions held (keys)
        self._vlen = 0  # the same for values, but between a caller's two assignments
        super().__init__(**kwargs)

    # -- the cache as callers see it ---------------------------------------------------------
    # Keys and values keep their own lengths only so that a caller may assign one and then read
    # the other (a compaction gathers keys, assigns them, then gathers values); every write here
    # moves both together.
    @property
    def keys(self) -> torch.Tensor | None:  # type: ignore[override]
        return None if self._k is None else self._k[..., : self._len, :]

    @keys.setter
    def keys(self, value: torch.Tensor | None) -> None:
        # transformers' lazy initialisation and reset assign here, and so does a compaction
        # (index_select): the tensor becomes the buffer, full to its length.
        self._k = value
        self._len = _length(value)

    @property
    def values(self) -> torch.Tensor | None:  # type: ignore[override]
        return None if self._v is None else self._v[..., : self._vlen, :]

    @values.setter
    def values(self, value: torch.Tensor | None) -> None:
        self._v = value
        self._vlen = _length(value)

    def capacity(self) -> int:
        return _length(self._k)

    # -- writes -----------------------------------------------------------------------------
    def _grow(self, like: torch.Tensor, need: int) -> None:
        """New buffers with room for `need` positions plus headroom, holding the live positions."""
        cap = need + max(_MIN_HEADROOM, need // _HEADROOM_FRACTION)
        b, h, _, d = like.shape
        k = torch.empty(b, h, cap, d, dtype=like.dtype, device=like.device)
        v = torch.empty(b, h, cap, d, dtype=like.dtype, device=like.device)
        if self._len:
            k[..., : self._len, :].copy_(self._k[..., : self._len, :])  # type: ignore[index]
            v[..., : self._len, :].copy_(self._v[..., : self._len, :])  # type: ignore[index]
        self._k, self._v, self._vlen = k, v, self._len

    def update(
        self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any, **kwargs: Any
    ) -> tuple[torch.Tensor, torch.Tensor]:
        # key_states, value_states: [B, H, q, D], the step's positions after the cached ones.
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        if self._vlen != self._len:
            raise RuntimeError(f"keys ({self._len}) and values ({self._vlen}) were assigned different lengths")
        n, q = self._len, key_states.shape[-2]
        buf = self._k
        if (
            buf is None or buf.dim() != 4 or n + q > buf.shape[-2]
            or buf.shape[:2] != key_states.shape[:2] or buf.shape[-1] != key_states.shape[-1]
            or buf.dtype != key_states.dtype
            # a buffer made under inference_mode cannot be written outside it
            or (buf.is_inference() and not torch.is_inference_mode_enabled())
        ):
            self._grow(key_states, n + q)
        assert self._k is not None and self._v is not None
        self._k[..., n : n + q, :].copy_(key_states)
        self._v[..., n : n + q, :].copy_(value_states)
        self._len = self._vlen = n + q
        return self._k[..., : self._len, :], self._v[..., : self._len, :]

    def get_seq_length(self) -> int:
        return self._len if self.is_initialized else 0

    def crop(self, tokens_to_remove: int) -> None:
        """Forget the last -tokens_to_remove positions (transformers' 5.x negative form)."""
        if tokens_to_remove > 0:
            raise ValueError(f"crop takes minus the number of positions to remove, got {tokens_to_remove}")
        if tokens_to_remove == 0 or not self.is_initialized:
            return
        self._len = self._vlen = max(0, self._len + tokens_to_remove)

    def reset(self) -> None:
        self._len = self._vlen = 0
        super().reset()

    def batch_repeat_interleave(self, repeats: int) -> None:
        if self._len:
            self.keys, self.values = self.keys.repeat_interleave(repeats, dim=0), self.values.repeat_interleave(repeats, dim=0)  # type: ignore[union-attr]

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        if self._len:
            self.keys, self.values = self.keys[indices, ...], self.values[indices, ...]  # type: ignore[index]


def new_cache(config: Any) -> DynamicCache:
    """A DynamicCache for `config` whose full-attention layers write in place (InPlaceLayer);
    sliding-window and other special layers stay transformers' own."""
    cache = DynamicCache(config=config)
    cache.layers = [InPlaceLayer() if type(layer) is DynamicLayer else layer for layer in cache.layers]
    return cache
