"""Our engine: the one decoding loop (decoding.generate) on transformers models, with the
configured drafter and acceptance rule; the target alone is the same loop with no drafter and
the exact rule (SPD at K = 0), so both contestants run through identical code.

engine.batch_size > 1 (its range: engines/settings.py's HFParams): quality runs decode B
problems together in the batched loop (decoding/batch.py; docs/batching.md), each problem's
tokens, steps and decisions those it gets alone. The app hands the engine a chunk of problems
at a time (prefetch; `prefetch_batches` batches' worth, so finished rows are refilled and the
batch stays full), and generate() returns each problem's output from it. Rows share every
forward, so a problem's time is not its own: batched runs are quality-only (check), speed is
measured at batch 1 or by the throughput bench (python -m loosespec_bench.bench.batch).

engine=hf_serve (HFServeEngine): the same loop serving whole batches, timed as a server is
(engine=vllm's serving figures: the batch's makespan and tokens, each request's TTFT and
end-to-end latency from the batch's start), at every batch size, batch 1 included, so a batch
sweep (experiment=batch_sweep_hf) has our loop's curves beside vLLM's."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import torch
from omegaconf import DictConfig

from ..build import build_drafter, build_verifier
from ..decoding import generate
from ..decoding.batch import BatchRequest, BatchStats, generate_batch
from ..decoding.ragged import batch_refusal
from ..drafters.base import Drafter
from ..errors import ConfigError
from ..generation import GenerationOutput
from ..models import LoadedModel, load_model
from ..models.loading import load_options
from ..params import is_int
from ..tasks.prompting import eos_ids, make_stop_fn
from ..tasks import Task
from ..verifiers.base import Verifier
from ..verifiers.spd import SPD
from ..settings.run_settings import GenerationParams, RunSettings
from .base import Engine
from .settings import HFParams
from .vllm_serving import batch_id, serving_record


class HFEngine(Engine):
    """Loads the pair's target, the drafter (and its draft model) and the rule of one config;
    `from_parts` wraps components already loaded (the engine benchmark's contestants)."""

    name = "hf"
    Params = HFParams  # engine.batch_size's range: what our loop batches
    # Problems per prefetch = batch_size x this: the batched loop refills finished rows from the
    # chunk, so only the chunk's last problems run in a batch that is no longer full.
    prefetch_batches = 4

    def __init__(self, cfg: DictConfig, task: Task) -> None:
        pair = cfg.pair
        settings = RunSettings.read(cfg)  # the run's settings, typed (settings/run_settings.py)
        self.batch_size = settings.engine.batch_size
        self.timed_batches = settings.engine.timed_batches  # the app's repeats of a served batch (hf_serve)
        target = load_model(pair.target.path, dtype=pair.dtype, device=pair.device, **load_options(pair.target))
        gen = settings.generation
        drafter = build_drafter(cfg, target)  # None for method=ar
        self._setup(
            target, verifier=build_verifier(cfg), drafter=drafter,
            temperature=float(gen.temperature), top_k=gen.top_k, top_p=float(gen.top_p),
            stop_strings=task.stop_strings, record_steps=settings.root.record_steps, batch_size=self.batch_size,
        )

    @classmethod
    def check(cls, cfg: DictConfig) -> None:
        """engine.batch_size > 1: a rule and drafter that can batch (their classes'
        batch_refusal); a quality-only protocol (nothing timed: baseline=shared with
        timing.subset=0, or baseline=none), because rows share every forward, unless the engine
        serves whole batches (engine=hf_serve: the batch is the unit of time)."""
        from ..settings.config import class_or_none, uses_drafter

        settings = RunSettings.read(cfg)  # every value in its range (HFParams: 1..HF_MAX_BATCH)
        batch = settings.engine.batch_size
        if batch <= 1:
            return
        where = f"engine.batch_size={batch}"
        rule = class_or_none(str((cfg.get("method") or {}).get("_target_") or ""))
        if rule is not None and getattr(rule, "batch_refusal", None):
            raise ConfigError(f"{where}: method={cfg.method.get('name')} cannot batch: {rule.batch_refusal}; use engine.batch_size=1")
        if uses_drafter(cfg):
            drafter = class_or_none(str(cfg.drafter.get("_target_") or ""))
            why = batch_refusal(drafter) if drafter is not None else None
            if why is not None:
                raise ConfigError(f"{where}: drafter={cfg.drafter.get('name')} cannot batch: {why}; use engine.batch_size=1")
        if cls.serves_batches:
            return  # timed by the batch (HFServeEngine.prefetch)
        subset, baseline = settings.timing.subset, settings.root.baseline
        if not (baseline == "none" or (baseline == "shared" and subset == 0)):
            raise ConfigError(
                f"{where}: our loop batches quality-only runs (baseline=shared timing.subset=0, or baseline=none): "
                "rows share every forward, so no sample has a time of its own; time speed at engine.batch_size=1, "
                "or measure throughput with python -m loosespec_bench.bench.batch, or serve timed batches with engine=hf_serve"
            )

    @classmethod
    def check_resources(cls, cfg: DictConfig) -> None:
        """The devices, model files (paths, vocabularies, context length, device maps) and the
        EAGLE head our loop loads through transformers for the config; a ConfigError naming
        the setting before any model loads."""
        from ..settings.checks import resolved
        from ..settings.config import uses_drafter
        from ..models.loading import check_device, model_config

        data = resolved(cfg)
        pair = data["pair"]
        uses = uses_drafter(cfg)
        drafter = data.get("drafter") or {}
        needs_draft_model = uses and bool(drafter.get("needs_model", False))
        check_device("pair.device", pair["device"])
        if needs_draft_model and pair.get("draft_device"):
            check_device("pair.draft_device", pair["draft_device"])
        roles = ("target", "draft") if needs_draft_model else ("target",)
        configs = {}
        for role in roles:
            node = pair[role]
            path = node["path"]
            opts = load_options(node)
            if path.startswith("tiny:") and opts:
                raise ConfigError(f"pair.{role}: {', '.join(sorted(opts))} apply to from_pretrained models; tiny models use pair.device")
            if opts.get("device_map") is not None:
                import importlib.util

                if importlib.util.find_spec("accelerate") is None:
                    raise ConfigError(f"pair.{role}.device_map needs the accelerate package (pip install 'loosespec_bench[slurm]')")
            try:
                configs[role] = model_config(path)
            except ConfigError as err:
                raise ConfigError(f"pair.{role}.path: {err}") from None
        target = configs.get("target") or {}
        if needs_draft_model and not drafter.get("needs_tokenizers", False):
            draft = configs.get("draft") or {}
            tv, dv = target.get("vocab_size"), draft.get("vocab_size")
            if is_int(tv) and is_int(dv) and (dv > tv or tv - dv > 1024):
                raise ConfigError(
                    f"pair.draft.path={pair['draft']['path']!r} has a vocabulary of {dv} tokens, the target {tv}: "
                    "a draft must share the target's tokenizer (or use drafter=model_xtok for another tokenizer)"
                )
        ctx = target.get("max_position_embeddings")
        max_new = data["generation"].get("max_new_tokens") or data["dataset"].get("max_new_tokens")
        if is_int(ctx) and is_int(max_new) and max_new >= ctx:
            raise ConfigError(
                f"generation.max_new_tokens={max_new} does not fit the target's context of {ctx} tokens "
                "(max_position_embeddings); lower it"
            )
        if uses and drafter.get("needs_target", False):
            _check_head(drafter, target)

    @classmethod
    def from_parts(
        cls,
        target: LoadedModel,
        *,
        verifier: Verifier,
        drafter: Drafter | None,
        temperature: float = GenerationParams.temperature,
        top_k: int = GenerationParams.top_k,
        top_p: float = GenerationParams.top_p,
        stop_strings: Sequence[str] = (),
        record_steps: bool = False,
        batch_size: int = HFParams.batch_size,
    ) -> "HFEngine":
        """An engine over a loaded target and built rule/drafter (drafter None: the method is the
        target alone), without a config: several engines can share one loaded target."""
        engine = cls.__new__(cls)
        engine._setup(target, verifier=verifier, drafter=drafter, temperature=temperature, top_k=top_k, top_p=top_p,
                      stop_strings=stop_strings, record_steps=record_steps, batch_size=batch_size)
        return engine

    def _setup(
        self, target: LoadedModel, *, verifier: Verifier, drafter: Drafter | None, temperature: float, top_k: int,
        top_p: float, stop_strings: Sequence[str], record_steps: bool, batch_size: int,
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
        self.batch_size = int(batch_size)
        # Outputs of the batched loop (prefetch) that generate() hands out: (prompt, method, seed, budget) -> output.
        self._ready: dict[tuple[tuple[int, ...], bool, int, int], GenerationOutput] = {}
        self.last_batch: BatchStats | None = None

    def prefetch(self, requests: list[tuple[list[int], int]], *, method: bool, max_new_tokens: int, repeat: int = 0,
                 on_ready: Callable[[int], None] | None = None) -> list[GenerationOutput] | None:
        """The requests through the batched loop, batch_size rows at once (finished rows refilled
        from the rest); generate() then returns each output, from the moment its row finishes
        (on_ready(i) says so, inside the loop: the app writes finished problems' records while
        the rest decode, so an interruption loses only unfinished rows). Each output's e2e_s is
        its own finish from the batch's start; its decode_s the batch's wall time since the
        previous finish, so the outputs' decode_s add up to the batch's wall time (the rows share
        every forward, so neither is a per-problem latency; batched runs here are quality-only,
        check). repeat > 0 (timed repeats) does nothing."""
        if repeat or not requests:
            return None
        stats = BatchStats()
        last = [0.0]  # the batch's wall time at the previous finish

        def done(i: int, out: GenerationOutput) -> None:
            ids, seed = requests[i]
            out.prefill_s, out.decode_s = 0.0, stats.wall_s - last[0]
            last[0] = stats.wall_s
            out.phase_s = {}  # the batch's phases are the batch's (last_batch), not a problem's
            self._ready[(tuple(ids), method, seed, max_new_tokens)] = out
            if on_ready is not None:
                on_ready(i)

        outs = self.generate_batch(requests, method=method, max_new_tokens=max_new_tokens, stats=stats, on_done=done)
        self.last_batch = stats
        return outs

    def generate_batch(self, requests: list[tuple[list[int], int]], *, method: bool, max_new_tokens: int,
                       stats: BatchStats | None = None,
                       on_done: Callable[[int, GenerationOutput], None] | None = None) -> list[GenerationOutput]:
        """(prompt ids, seed) requests through the batched loop, in their order: what generate()
        gives for each alone (tokens, steps, decisions), batch_size rows at once."""
        reqs = [BatchRequest(torch.tensor(ids, dtype=torch.long), torch.Generator().manual_seed(seed), max_new_tokens)
                for ids, seed in requests]
        return generate_batch(
            self.target.model, reqs, verifier=self.verifier if method else self.ar_verifier,
            drafter=self.drafter if method else None, batch_size=self.batch_size, temperature=self.temperature,
            top_k=self.top_k, top_p=self.top_p, eos_token_ids=self._eos, stop_fn=self.stop_fn,
            record_steps=self.record_steps and method, stats=stats, on_done=on_done,
        )

    def generate(self, prompt_ids: list[int], *, method: bool, seed: int, max_new_tokens: int) -> GenerationOutput:
        ready = self._ready.pop((tuple(prompt_ids), method, seed, max_new_tokens), None)
        if ready is not None:  # decoded in a batch by prefetch
            return ready
        return self.generate_alone(prompt_ids, method=method, seed=seed, max_new_tokens=max_new_tokens)

    def generate_alone(self, prompt_ids: list[int], *, method: bool, seed: int, max_new_tokens: int) -> GenerationOutput:
        """One request through the batch-1 loop (decoding.generate)."""
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


class HFServeEngine(HFEngine):
    """engine=hf_serve: our loop serving batches of engine.batch_size problems, each batch timed
    whole, as engine=vllm's serving loop times its batches (measure/serving.py reads both).

    Each prefetch is one batch: its problems decoded together until the last finishes (drained,
    not refilled: the batch is the unit of time, and a refill would merge two batches), at batch
    1 by today's batch-1 loop (decoding.generate), above it by the batched loop. The batch's
    makespan (from its start, prefills included, to its last token) and tokens, and each
    request's TTFT and end-to-end latency from the batch's start (all arrive at once), go into
    `serving` (vllm_serving.serving_record); each output's time is its share of the makespan
    (prefill_s its TTFT, at most the share, decode_s the rest), so tokens over time summed over
    a run is the batches' throughput. The target alone runs beside it on the same batches
    (the app's prefetch). A batch's repeat (engine.timed_batches) runs it again: its times join
    the first run's outputs, and its tokens are compared (identical_repeats)."""

    name = "hf_serve"
    serves_batches = True  # every batch size, batch 1 included, through prefetch
    prefetch_batches = 1  # one batch per prefetch, drained

    def warmup(self, prompt_ids: list[int]) -> None:
        """Both contestants alone and, above batch 1, in a short batch (the batched kernels'
        first calls), untimed."""
        super().warmup(prompt_ids)
        if self.batch_size > 1:
            for method in (True, False):
                self.generate_batch([(prompt_ids, 0)] * 2, method=method, max_new_tokens=8)

    def prefetch(self, requests: list[tuple[list[int], int]], *, method: bool, max_new_tokens: int, repeat: int = 0,
                 on_ready: Callable[[int], None] | None = None) -> list[GenerationOutput] | None:
        """The batch through our loop, timed whole (the class's docstring); run_sample then reads
        the outputs. repeat > 0: the same batch again, its times joined to the first run's.
        on_ready is never called: nothing may be written (or scored) inside a timed batch."""
        if not requests:
            return None
        outs = self.serve(requests, method=method, max_new_tokens=max_new_tokens)
        kept: list[GenerationOutput] = []
        for (ids, seed), out in zip(requests, outs):
            key = (tuple(ids), method, seed, max_new_tokens)
            first = self._ready.get(key) if repeat > 0 else None
            if first is None:
                self._ready[key] = out
                kept.append(out)
                continue
            kept.append(first)
            a, b = first.serving, out.serving
            if a is not None and b is not None:
                for name in ("makespan_s", "batch_tokens", "ttft_s", "e2e_s", "new_tokens"):
                    a[name] = list(a[name]) + list(b[name])
                a["identical_repeats"] = bool(a["identical_repeats"] and out.new_tokens == first.new_tokens)
        return kept

    def serve(self, requests: list[tuple[list[int], int]], *, method: bool, max_new_tokens: int) -> list[GenerationOutput]:
        """One batch of (prompt ids, seed) requests decoded together, timed whole: outputs in the
        requests' order, each with its `serving` record."""
        if len(requests) > self.batch_size:
            raise ValueError(f"a batch of {len(requests)} requests on engine.batch_size={self.batch_size}")
        if self.batch_size == 1:
            (ids, seed), = requests
            out = self.generate_alone(ids, method=method, seed=seed, max_new_tokens=max_new_tokens)
            makespan = out.prefill_s + out.decode_s  # the batch-1 loop's own clock, synchronised
            out.e2e_s = makespan
            outs = [out]
        else:
            stats = BatchStats()
            outs = self.generate_batch(requests, method=method, max_new_tokens=max_new_tokens, stats=stats)
            makespan = stats.wall_s
            share = makespan / len(outs)
            for out in outs:
                out.prefill_s = min(out.ttft_s if out.ttft_s is not None else 0.0, share)
                out.decode_s = share - out.prefill_s
                out.phase_s = {}  # the batch's phases are the batch's (last_batch), not a request's
            self.last_batch = stats
        tokens = sum(len(o.new_tokens) for o in outs)
        name = batch_id([ids for ids, _ in requests])
        for out in outs:
            out.serving = serving_record(out, batch=name, requests=len(requests), batch_size=self.batch_size,
                                         request_rate=None, makespan_s=makespan, batch_tokens=tokens)
        return outs


def _check_head(drafter: Mapping[str, Any], target: Mapping[str, Any]) -> None:
    """An EAGLE head: named, and a local one is a folder with config.json of the target's vocabulary."""
    import json

    head = drafter.get("head_path")
    name = drafter.get("name")
    if not head:
        raise ConfigError(
            f"drafter={name} needs a head: this pair has no pair.{name}_head and no "
            f"loosespec_bench/conf/pair_drafter/<pair>_{name}.yaml; set drafter.head_path=<folder or hub id>"
        )
    if head == "random":
        return
    folder = Path(os.path.expanduser(head))
    if head.startswith(("/", ".", "~")) or folder.exists():
        if not (folder / "config.json").is_file():
            raise ConfigError(
                f"drafter.head_path={head!r}: no head there (no config.json); train one (python -m loosespec_bench.train.eagle3) "
                "or point drafter.head_path at a head folder or hub id"
            )
        try:
            vocab = json.loads((folder / "config.json").read_text(encoding="utf-8")).get("vocab_size")
        except (OSError, ValueError, AttributeError):
            return  # the loader names the file when it reads it
        tv = target.get("vocab_size")
        if is_int(vocab) and is_int(tv) and vocab != tv:
            raise ConfigError(f"drafter.head_path={head!r} is a head for a vocabulary of {vocab} tokens, the target has {tv}")
