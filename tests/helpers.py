"""Helpers shared by the rule tests (FLy, DropMatch, MLA) on tiny models."""

from __future__ import annotations

import torch

from loosespec_bench.drafters import MLADrafter, ModelDrafter, PromptLookupDrafter
from loosespec_bench.models.tiny import tiny_model, tiny_near_copy  # noqa: F401 (re-exported: conftest; scripts/token_identity.py uses it too)

# A repetitive code prompt: prompt lookup and MLA find n-gram matches in it.
CODE_PROMPT = "def add(a, b):\n    return a + b\n\ndef add(a, b):\n    return a + b\n\nQuestion: 3 + 4 = ?"


def code_prompt(tok) -> torch.Tensor:
    return torch.tensor(tok(CODE_PROMPT, add_special_tokens=False).input_ids)


def make_drafter(name: str, draft, k: int):
    return {"model": lambda: ModelDrafter(draft, k=k), "pld": lambda: PromptLookupDrafter(k=k, max_ngram=3),
            "mla": lambda: MLADrafter(draft, k=k)}[name]()
