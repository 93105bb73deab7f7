"""Hand-built target / draft distributions for the positionwise loose rules' tests."""

from __future__ import annotations

import torch

V = 8  # vocabulary of the hand-built cases


def logits_from(rows: list[list[float]]) -> torch.Tensor:
    """[n, V] logits whose softmax is each row (given as unnormalised weights; 0 -> -inf, a
    token the distribution cannot emit)."""
    w = torch.tensor(rows, dtype=torch.float32)
    return torch.where(w > 0, w.clamp_min(1e-30).log(), torch.full_like(w, float("-inf")))


def row(top: int, mass: float = 0.9) -> list[float]:
    """A confident row: `mass` on `top`, the rest spread evenly over the other tokens."""
    r = [(1.0 - mass) / (V - 1)] * V
    r[top] = mass
    return r


def probs_of(rows: list[list[float]]) -> torch.Tensor:
    """[n, V] normalised distributions (a drafter's q)."""
    w = torch.tensor(rows, dtype=torch.float32)
    return w / w.sum(-1, keepdim=True)


def tokens(*ids: int) -> torch.Tensor:
    return torch.tensor(ids, dtype=torch.long)
