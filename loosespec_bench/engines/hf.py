"""Our engine: the one decoding loop (decoding.generate) on transformers models, with the
configured drafter and acceptance rule; the target alone is the same loop with no drafter and
the exact rule (SPD at K = 0), so both contestants run through identical code."""

from __future__ import annotations

from typing import Sequence

import torch
from omegaconf import DictConfig

from ..build import build_drafter, build_verifier
from ..decoding import generate
from ..drafters.base import Drafter
from ..generation import GenerationOutput
from ..models import LoadedModel, load_model
from ..models.loading import load_options
from ..prompting import eos_ids, make_stop_fn
from ..tasks import Task
from ..verifiers.base import Verifier
from ..verifiers.spd import SPD
from .base import Engine


class HFEngine(Engine):
    """Loads the pair's target, the drafter (and its draft model) and the rule of one config;
    `from_parts` wraps components already loaded (the engine benchmark's contestants)."""

    name = "hf"

    def __init__(self, cfg: DictConfig, task: Task) -> None:
        pair = cfg.pair
        target = load_model(pair.target.path, dtype=pair.dtype, device=pair.device, **load_options(pair.target))
        gen = cfg.generation
        drafter = build_drafter(cfg, target)  # None for method=ar
        self._setup(
            target, verifier=build_verifier(cfg), drafter=drafter,
            temperature=float(gen.temperature), top_k=int(gen.get("top_k", 0)), top_p=float(gen.get("top_p", 1.0)),
            stop_strings=task.stop_strings, record_steps=bool(cfg.record_steps),
        )

    @classmethod
    def from_parts(
        cls,
        target: LoadedModel,
        *,
        verifier: Verifier,
        drafter: Drafter | None,
        temperature: float = 0.0,
        top_k: int = 0,
        top_p: float = 1.0,
        stop_strings: Sequence[str] = (),
        record_steps: bool = False,
    ) -> "HFEngine":
        """An engine over a loaded target and built rule/drafter (drafter None: the method is the
        target alone), without a config: several engines can share one loaded target."""
        engine = cls.__new__(cls)
        engine._setup(target, verifier=verifier, drafter=drafter, temperature=temperature, top_k=top_k, top_p=top_p,
                      stop_strings=stop_strings, record_steps=record_steps)
        return engine

    def _setup(
        self, target: LoadedModel, *, verifier: Verifier, drafter: Drafter | None, temperature: float, top_k: int,
        top_p: float, stop_strings: Sequence[str], record_steps: bool,
    ) -> None:
        self.target = target
        self.verifier = verifier
        self.drafter = drafter
        self.ar_verifier = SPD()
        self.temperature, self.top_k, self.top_p = temperature, top_k, top_p
        self.record_steps = record_steps
        self.tokenizer = target.tokenizer
        self.eos_ids = sorted(eos_ids(target))
        self._eos = set(self.eos_ids)
        self.stop_fn = make_stop_fn(self.tokenizer, list(stop_strings))
        n = getattr(getattr(target.model, "config", None), "max_position_embeddings", None)
        self.context_length = n if isinstance(n, int) and n > 0 else None  # max_position_embeddings

    def generate(self, prompt_ids: list[int], *, method: bool, seed: int, max_new_tokens: int) -> GenerationOutput:
        gen = torch.Generator().manual_seed(seed)
        return generate(
            self.target.model,
            torch.tensor(prompt_ids, dtype=torch.long),
            verifier=self.verifier if method else self.ar_verifier,
            drafter=self.drafter if method else None,
            max_new_tokens=max_new_tokens,
            temperature=self.temperature,
            top_k=self.top_k,
            top_p=self.top_p,
            eos_token_ids=self._eos,
            stop_fn=self.stop_fn,
            generator=gen,
            record_steps=self.record_steps and method,
        )
