"""Helpers shared by the rule tests (FLy, DropMatch, MLA) on tiny models."""

from __future__ import annotations

import torch

from loosespec_bench.drafters import MLADrafter, ModelDrafter, PromptLookupDrafter
from loosespec_bench.models.tiny import tiny_model

# A repetitive code prompt: prompt lookup and MLA find n-gram matches in it.
CODE_PROMPT = "def add(a, b):\n    return a + b\n\ndef add(a, b):\n    return a + b\n\nQuestion: 3 + 4 = ?"


def code_prompt(tok) -> torch.Tensor:
    return torch.tensor(tok(CODE_PROMPT, add_special_tokens=False).input_ids)


def make_drafter(name: str, draft, k: int):
    return {"model": lambda: ModelDrafter(draft, k=k), "pld": lambda: PromptLookupDrafter(k=k, max_ngram=3),
            "mla": lambda: MLADrafter(draft, k=k)}[name]()


def tiny_near_copy(seed: int = 0, scale: float = 0.1, noise_seed: int = 1234) -> torch.nn.Module:
    """tiny_model(seed) with `scale` relative weight noise: a draft that agrees with its target
    often but not always, so drafts hold both matches and mismatches (tiny:1 against tiny:0
    matches almost never, which would make lossless and loose-acceptance tests say nothing)."""
    model = tiny_model(seed)
    g = torch.Generator().manual_seed(noise_seed)
    with torch.no_grad():
        for p in model.parameters():
            if p.numel() > 1:
                p.add_(torch.randn(p.shape, generator=g) * scale * p.std())
    return model
