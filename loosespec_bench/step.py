"""The ground floor of one verification step: what a drafter proposes (`Draft`), what the
target's verification forward yields (`TargetScores`), what a rule decides (`Verdict`), and
the few index helpers every layer uses to roll back by longest common prefix.

Drafters, verifiers and the decoding loop all import from here, so none of them needs to
import another (drafters never see verifiers; verifiers never see models). This module imports
nothing from the package.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

import torch

if TYPE_CHECKING:  # only for the annotation: importing transformers here costs seconds
    from transformers import Cache


@dataclass
class Draft:
    """What a drafter proposes for one verification step."""

    tokens: torch.Tensor  # [K] int64, K >= 0 (prompt lookup may find nothing)
    # [K, vocab] float32 draft distribution q_i, or None for drafters without probabilities
    # (prompt lookup); rules then treat q_i as one-hot(d_i), see docs/algorithms.md section 1.
    probs: torch.Tensor | None = None
    # Free-form drafter statistics for this step (e.g. MLA's inner lookups), recorded as-is.
    info: dict[str, Any] = field(default_factory=dict)
    # Tree drafts (EAGLE-2/3 dynamic trees, Lookahead's guess set): [K] int64, the parent of
    # node i, -1 = a child of the pending token. Parents come before their children (parents[i]
    # < i). None = a chain (node i's parent is i-1), verified without a tree mask.
    parents: torch.Tensor | None = None
    # Extra nodes the target scores in the same forward but that are never candidates (never
    # accepted, committed or kept in the cache): Lookahead's Jacobi window. [E] int64 tokens and
    # [E] int64 parents indexing the combined node list (-1 = pending, 0..K-1 candidates,
    # K.. extras). Their logits go back to the drafter through observe_scores().
    extra_tokens: torch.Tensor | None = None
    extra_parents: torch.Tensor | None = None

    @property
    def k(self) -> int:
        """Number of candidate nodes (a chain's length; a tree's node count)."""
        return int(self.tokens.numel())

    @property
    def is_tree(self) -> bool:
        return self.parents is not None or self.extra_tokens is not None


def chain_parents(k: int) -> torch.Tensor:
    """Parents of a chain of k nodes as a tree: [-1, 0, 1, .., k-2]."""
    return torch.arange(-1, k - 1, dtype=torch.long)


def node_depths(parents: torch.Tensor) -> torch.Tensor:
    """Depth of each node ([K] int64 parents, parents before children): 1 for a root child."""
    depth = torch.zeros(parents.numel(), dtype=torch.long)
    for i, p in enumerate(parents.tolist()):
        depth[i] = 1 if p < 0 else depth[p] + 1
    return depth


def ancestor_matrix(parents: torch.Tensor) -> torch.Tensor:
    """[K, K] bool: entry (i, j) is True when node j is node i or one of its ancestors.

    parents: [K] int64, -1 for a root child; a parent must precede its child (ValueError else).
    """
    k = parents.numel()
    anc = torch.eye(k, dtype=torch.bool)
    for i, p in enumerate(parents.tolist()):
        if not -1 <= p < i:
            raise ValueError(f"tree node {i} has parent {p}: parents must precede their children")
        if p >= 0:
            anc[i] |= anc[p]
    return anc


def root_to_leaf_paths(parents: torch.Tensor) -> list[list[int]]:
    """Every root-to-leaf path of a tree as node indices, leaves in node order."""
    par = parents.tolist()
    has_child = [False] * len(par)
    for p in par:
        if p >= 0:
            has_child[p] = True
    paths = []
    for leaf in range(len(par)):
        if has_child[leaf]:
            continue
        path, i = [], leaf
        while i >= 0:
            path.append(i)
            i = par[i]
        paths.append(path[::-1])
    return paths


@dataclass
class TargetScores:
    """The target's single verification forward over [last_token, d_1..d_K]."""

    logits: torch.Tensor  # [K+1, vocab] float32; row i predicts draft position i+1, row K the bonus
    # [K+1, hidden] final hidden states (before the LM head), only when the rule asks for them
    # (DropMatch re-runs the LM head on them under dropout).
    hidden: torch.Tensor | None = None
    lm_head: Callable[[torch.Tensor], torch.Tensor] | None = None


@dataclass
class Verdict:
    """The decision for one step: keep draft[:num_accepted], then emit next_token."""

    num_accepted: int
    next_token: int
    # Per-step decision record (raw match flags, entropies, loose accepts...); optional.
    record: dict[str, Any] | None = None
    # Tree drafts: the accepted nodes, root to deepest (len num_accepted). None = a chain
    # (draft[:num_accepted]). The loop compacts the target's cache to these nodes.
    path: list[int] | None = None


def empty_draft() -> Draft:
    """A draft of K = 0 tokens: the step is a plain target step (method=ar, no lookup match)."""
    return Draft(tokens=torch.empty(0, dtype=torch.long), probs=None)


def longest_true_prefix(flags: torch.Tensor) -> int:
    """Number of leading True entries of a [K] bool tensor (0 when flags is empty)."""
    if flags.numel() == 0:
        return 0
    # cumprod stays 1 while flags are True and drops to 0 for good at the first False.
    return int(flags.to(torch.int64).cumprod(dim=0).sum())


def common_prefix_len(a: torch.Tensor, b: torch.Tensor) -> int:
    """Length of the longest common prefix of two [n] int64 tensors."""
    m = min(a.numel(), b.numel())
    if m == 0:
        return 0
    return longest_true_prefix(a[:m] == b[:m])


def compact_to(cache: Cache, length: int, keep: list[int]) -> None:
    """Keep the first `length` positions, then the positions length + j for j in `keep`
    (ascending), in every layer of a transformers DynamicCache; drop the rest.

    After a tree verification the cache holds [prefix, pending, node_0..node_{K-1}, extras];
    the accepted path's nodes are scattered, so they are gathered right after the pending token,
    where the next forward's positions expect them. A contiguous keep (a chain) is a crop.
    """
    if keep == list(range(len(keep))):
        crop_to(cache, length + len(keep))
        return
    from transformers.cache_utils import DynamicLayer  # here: importing transformers costs seconds

    for layer in cache.layers:
        # Plain full-attention layers only: transformers' DynamicLayer or kv.InPlaceLayer (a
        # subclass whose keys/values assignment adopts the gathered tensor).
        if not isinstance(layer, DynamicLayer) or layer.is_sliding:
            raise ValueError(f"tree verification needs plain DynamicLayer caches, got {type(layer).__name__}")
        if layer.keys is None or layer.keys.numel() == 0:
            continue
        idx = torch.cat([torch.arange(length), length + torch.tensor(keep, dtype=torch.long)]).to(layer.keys.device)
        layer.keys = layer.keys.index_select(-2, idx)  # [B, heads, length + n, d]
        layer.values = layer.values.index_select(-2, idx)


def crop_to(cache: Cache, length: int) -> None:
    """Keep the first `length` positions of every layer of a transformers cache.

    A negative argument to `Cache.crop` means "remove that many" in transformers 4.x and 5.x
    alike (5.x refuses the old positive "final length" form), so this is the portable call.
    """
    remove = cache.get_seq_length() - length
    if remove < 0:
        raise ValueError(f"cannot crop a cache of {cache.get_seq_length()} positions to {length}")
    if remove:
        cache.crop(-remove)


def sync(device: torch.device) -> None:
    """Wait for the kernels queued on an accelerator, so that a wall-clock reading around a
    phase (the loop's, DropMatch's own overhead) is honest. A target split over several GPUs
    (device_map) has kernels queued on each of them, so every CUDA device is waited for.
    A no-op on the CPU."""
    if device.type == "cuda":
        for i in range(torch.cuda.device_count()):
            torch.cuda.synchronize(i)
