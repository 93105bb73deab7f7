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


# -- ragged batches: one row per problem, each with its own length -----------------------------
# The batched loop (decoding/batch.py) decodes B problems at once. Each row keeps its own
# accepted length, so its cache length differs from the others' ("ragged"): a row's keys and
# values are the first lens[b] positions of its slot in a [B, H, capacity, D] buffer, and its
# LCP rollback is a move of lens[b] alone. A forward over [B, q] writes each row's q new
# positions at its own offset lens[b]; attention reads a view of the first max(lens) + q
# positions, and the caller's mask (decoding/ragged.py) hides from each row what lies beyond
# its own length (another row's longer past, stale positions of a rejected draft). Hidden
# positions get exactly zero weight, so a row computes what it computes alone up to the
# kernels' summation order (float rounding).


class RaggedLayer(DynamicLayer):
    """A DynamicLayer of a RaggedCache: per-row write offsets, one buffer for the batch."""

    def __init__(self, owner: "RaggedCache", **kwargs: Any) -> None:
        self.owner = owner
        self._k: torch.Tensor | None = None  # [B, H, capacity, D], zeros where never written
        self._v: torch.Tensor | None = None
        self._view = 0  # positions the last update returned (max(lens) + q)
        super().__init__(**kwargs)

    @property
    def keys(self) -> torch.Tensor | None:  # type: ignore[override]
        return None if self._k is None else self._k[..., : self._view, :]

    @keys.setter
    def keys(self, value: torch.Tensor | None) -> None:
        # transformers' lazy initialisation assigns an empty tensor: the buffer is made on the
        # first write, when its shape is known (ensure).
        if value is not None and value.numel():
            raise RuntimeError("a RaggedLayer's keys are written through update() or load_row(), not assigned")

    @property
    def values(self) -> torch.Tensor | None:  # type: ignore[override]
        return None if self._v is None else self._v[..., : self._view, :]

    @values.setter
    def values(self, value: torch.Tensor | None) -> None:
        if value is not None and value.numel():
            raise RuntimeError("a RaggedLayer's values are written through update() or load_row(), not assigned")

    def capacity(self) -> int:
        return _length(self._k)

    def ensure(self, like: torch.Tensor, need: int) -> None:
        """Buffers for owner.rows rows with room for `need` positions (like: [*, H, *, D])."""
        buf = self._k
        if buf is not None and need <= buf.shape[-2] and buf.dtype == like.dtype and buf.device == like.device:
            return
        cap = need + max(_MIN_HEADROOM, need // _HEADROOM_FRACTION)
        h, d = like.shape[1], like.shape[-1]
        # Zeros, not empty: a hidden position still meets its zero weight in attention's
        # weighted sum, and 0 * NaN (uninitialised memory) would be NaN.
        k = torch.zeros(self.owner.rows, h, cap, d, dtype=like.dtype, device=like.device)
        v = torch.zeros_like(k)
        if buf is not None and self._v is not None:
            old = min(buf.shape[-2], cap)
            k[..., :old, :].copy_(buf[..., :old, :])
            v[..., :old, :].copy_(self._v[..., :old, :])
        self._k, self._v = k, v

    def update(
        self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any, **kwargs: Any
    ) -> tuple[torch.Tensor, torch.Tensor]:
        # key_states, value_states: [B, H, q, D]; row b's positions go to lens[b] .. lens[b] + q.
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        lens = self.owner.lens
        if key_states.shape[0] != len(lens):
            raise RuntimeError(f"a forward of {key_states.shape[0]} rows on a ragged cache of {len(lens)}")
        q = key_states.shape[-2]
        self._view = max(lens) + q
        self.ensure(key_states, self._view)
        assert self._k is not None and self._v is not None
        for b, n in enumerate(lens):  # B small copies: each row at its own offset
            self._k[b, :, n : n + q, :].copy_(key_states[b])
            self._v[b, :, n : n + q, :].copy_(value_states[b])
        return self._k[..., : self._view, :], self._v[..., : self._view, :]

    def load_row(self, b: int, keys: torch.Tensor, values: torch.Tensor) -> None:
        """Row b's first positions := keys, values ([1, H, n, D], a prefill run alone)."""
        if not self.is_initialized:
            self.lazy_initialization(keys, values)
        n = keys.shape[-2]
        self.ensure(keys, n)
        assert self._k is not None and self._v is not None
        self._k[b, :, :n, :].copy_(keys[0])
        self._v[b, :, :n, :].copy_(values[0])

    def get_seq_length(self) -> int:
        return max(self.owner.lens) if self.owner.lens else 0

    def get_mask_sizes(self, query_length: int) -> tuple[int, int]:
        return self.get_seq_length() + query_length, 0

    def crop(self, tokens_to_remove: int) -> None:
        raise RuntimeError("a ragged cache is cut per row (RaggedCache.crop_row)")

    def reset(self) -> None:
        self._view = 0
        super().reset()


class RaggedCache(DynamicCache):
    """The KV cache of a batch of `rows` problems with a length per row (`lens`, host ints).

    Writes go through a forward (RaggedLayer.update: every row's q new positions at its own
    offset) followed by `advance` (how many of them were real tokens, per row), or through
    `load_row` (a row's prefill, run alone). `crop_row` is the LCP rollback: a pointer move."""

    def __init__(self, config: Any, rows: int) -> None:
        super().__init__(config=config)
        plain = [type(layer) is DynamicLayer for layer in self.layers]
        if not all(plain):
            kinds = sorted({type(layer).__name__ for layer in self.layers})
            raise ValueError(f"a ragged batch needs plain full-attention cache layers, this model has {', '.join(kinds)}")
        self.rows = int(rows)
        self.lens = [0] * self.rows
        self.layers = [RaggedLayer(self) for _ in self.layers]

    def advance(self, counts: list[int]) -> None:
        """After a forward: row b keeps counts[b] of the positions it was written (its real
        tokens; the rest of the q were padding, past its length)."""
        self.lens = [n + c for n, c in zip(self.lens, counts)]

    def crop_row(self, b: int, length: int) -> None:
        if not 0 <= length <= self.lens[b]:
            raise ValueError(f"cannot crop row {b} of {self.lens[b]} positions to {length}")
        self.lens[b] = length

    def load_row(self, b: int, single: DynamicCache) -> None:
        """Row b := the positions of a one-row cache (its prefill, computed alone)."""
        n = single.get_seq_length()
        if n:
            for mine, theirs in zip(self.layers, single.layers):
                assert isinstance(mine, RaggedLayer) and theirs.keys is not None and theirs.values is not None
                mine.load_row(b, theirs.keys[..., :n, :], theirs.values[..., :n, :])
        self.lens[b] = n

    def get_seq_length(self, layer_idx: int = 0) -> int:
        return max(self.lens) if self.lens else 0
