"""Our engine: the one decoding loop (decoding.generate) on transformers models, with the
configured drafter and acceptance rule; the target alone is the same loop with no drafter and
the exact rule (SPD at K = 0), so both contestants run through identical code."""

from __future__ import annotations

import torch
from omegaconf import DictConfig

from ..build import build_drafter, build_verifier
from ..decoding import generate
from ..generation import GenerationOutput
from ..models import load_model
from ..models.loading import load_options
from ..prompting import eos_ids, make_stop_fn
from ..tasks import Task
from ..verifiers.spd import SPD
from .base import Engine


class HFEngine(Engine):
    """Loads the pair's target, the drafter (and its draft model) and the rule of one config."""

    name = "hf"

    def __init__(self, cfg: DictConfig, task: Task) -> None:
        self.cfg = cfg
        pair = cfg.pair
        self.target = load_model(pair.target.path, dtype=pair.dtype, device=pair.device, **load_options(pair.target))
        self.drafter = build_drafter(cfg, self.target)  # None for method=ar
        self.verifier = build_verifier(cfg)
        self.ar_verifier = SPD()
        self.tokenizer = self.target.tokenizer
        self.eos_ids = sorted(eos_ids(self.target))
        self._eos = set(self.eos_ids)
        self.stop_fn = make_stop_fn(self.tokenizer, task.stop_strings)
        n = getattr(getattr(self.target.model, "config", None), "max_position_embeddings", None)
        self.context_length = n if isinstance(n, int) and n > 0 else None  # max_position_embeddings

    def generate(self, prompt_ids: list[int], *, method: bool, seed: int, max_new_tokens: int) -> GenerationOutput:
        gen = torch.Generator().manual_seed(seed)
        return generate(
            self.target.model,
            torch.tensor(prompt_ids, dtype=torch.long),
            verifier=self.verifier if method else self.ar_verifier,
            drafter=self.drafter if method else None,
            max_new_tokens=max_new_tokens,
            temperature=float(self.cfg.generation.temperature),
            top_k=int(self.cfg.generation.get("top_k", 0)),
            top_p=float(self.cfg.generation.get("top_p", 1.0)),
            eos_token_ids=self._eos,
            stop_fn=self.stop_fn,
            generator=gen,
            record_steps=bool(self.cfg.record_steps) and method,
        )
