#!/usr/bin/env python
"""Engine benchmark: our decoding loop against what a user would pick instead, side by side.

Every contestant generates greedily from the same prompts (math, code and instruction sets,
built by the tasks' own loaders and the chat template), with the same draft length K and the
same max_new_tokens, in one process. Contestants are interleaved prompt by prompt (the order
rotates between prompts and repeats, so slow drift of a shared machine cancels out), after an
untimed warm-up of each. Comparisons are the MEDIAN OF PAIRED RATIOS of seconds per new token
(ours / peer; wall time of the whole call, prefill + decode, as a user sees it) over the same
(prompt, repeat) pairs; for lossless pairs in fp32 the outputs are the same tokens, so this is
the time ratio (in bf16 near-ties can part them; "ratio(ident)" keeps the identical pairs).

  target alone      ours (loop, K = 0)             vs transformers generate()
  SPD, draft model  ours (ModelDrafter + SPD)      vs transformers assisted generation
                                                      (assistant_model, K constant / heuristic)
                    ours (MLADrafter + SPD: the same greedy drafts in fewer draft forwards)
  prompt lookup     ours (PromptLookupDrafter)     vs transformers prompt_lookup_num_tokens
  FLy, FLy + MLA, DropMatch                        vs our SPD (and our target alone)
  EAGLE head        ours, dynamic tree (EAGLE-2/3)  vs ours, chain of K (the same head)
  Lookahead         ours (LookaheadDrafter)         vs ours, prompt lookup

Every contestant is an engine (loosespec_bench.engines.base.Engine): ours are HFEngine with a
rule and a drafter on the one loaded target, transformers' are TransformersEngine below, and
`--engine NAME=OVERRIDES` adds any engine the package config builds (build.build_engine), e.g.
a vLLM engine as `--engine 'vllm-spd=engine=vllm method=spd drafter=model'`.

Also printed: per-step overheads from GenerationOutput.phase_s (draft, target forward, rule,
rollback, bookkeeping), the FLy-rule and DropMatch LM-head shares of step time (limit 2%), and
the cost model's predicted speedup (loosespec_bench.costmodel) beside the measured one.

tau = emitted tokens / verification steps, bonus or correction token included. For transformers'
contestants the steps are the target forwards counted by a hook (its first forward both
prefills and verifies; ours prefills separately).

Examples:
  python scripts/bench_engine.py --tiny --max-new-tokens 16 --repeats 1           # smoke
  python scripts/bench_engine.py --prompts-per-set 2 --repeats 3 --out bench.json  # embedded pair
  python scripts/bench_engine.py --fp32 --contestants ar,hf-ar,spd,hf-assist,pld,hf-pld
  python scripts/bench_engine.py --tiny --contestants ar,spd --engine 'cfg-spd=method=spd drafter=model'
"""

from __future__ import annotations

import os
import sys

# OpenMP wait policy, set before torch loads libgomp (importing this file after torch is too
# late: pass --threads 1 there). ACTIVE (spinning workers) is the fast choice on a dedicated
# machine; on one shared with busy processes spinning workers stall every barrier (a 1.5B
# forward measured 10x slower at load average 10): run with OMP_WAIT_POLICY=PASSIVE there.
# Every contestant runs under the same setting, and the report prints it. See loosespec_bench/omp.py.
from loosespec_bench.omp import default_wait_policy  # noqa: E402

default_wait_policy()

import argparse  # noqa: E402
import gc  # noqa: E402
import importlib  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
import types  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any, Callable  # noqa: E402

import torch  # noqa: E402
import transformers  # noqa: E402
from transformers import DynamicCache  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402

from loosespec_bench import costmodel  # noqa: E402
from loosespec_bench.build import instantiate  # noqa: E402
from loosespec_bench.config import CONF_DIR  # noqa: E402
from loosespec_bench.engines.base import Engine  # noqa: E402
from loosespec_bench.engines.hf import HFEngine  # noqa: E402
from loosespec_bench.generation import GenerationOutput  # noqa: E402
from loosespec_bench.metrics import median_or_none as _median, pair_up, paired_ratio_stats  # noqa: E402
from loosespec_bench.prompting import cut_at_stop, encode_prompt, eos_ids  # noqa: E402
from loosespec_bench.step import crop_to  # noqa: E402
from loosespec_bench.drafters.lookup import PromptLookupDrafter  # noqa: E402
from loosespec_bench.drafters.model import ModelDrafter  # noqa: E402
from loosespec_bench.models.loading import LoadedModel, load_model  # noqa: E402
from loosespec_bench.verifiers.spd import SPD  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
TARGET = "embedded:qwen2.5-coder-1.5b-instruct"
DRAFT = "embedded:qwen2.5-coder-0.5b-instruct"
DEFAULT_SETS = "gsm8k,humaneval,ifeval"
MATH_SETS = ("gsm8k", "mgsm")  # scored here (cheap exact match) for FLy's accuracy retention
ALL_CONTESTANTS = (
    "ar", "hf-ar", "spd", "spd-mla", "hf-assist", "hf-assist-dyn", "pld", "hf-pld", "fly", "fly-mla", "fly-mla-hf", "dropmatch",
    "eagle3", "eagle3-tree", "lookahead",
)
# (ours, peer, label): the rows of the comparison table.
COMPARISONS = (
    ("ar", "hf-ar", "target alone: ours vs generate()"),
    ("spd", "hf-assist", "SPD draft model: ours vs HF assisted (K constant)"),
    ("spd", "hf-assist-dyn", "SPD draft model: ours vs HF assisted (heuristic K)"),
    ("spd-mla", "hf-assist", "SPD, MLA drafting: ours vs HF assisted (K constant)"),
    ("spd-mla", "hf-assist-dyn", "SPD, MLA drafting: ours vs HF assisted (heuristic K)"),
    ("pld", "hf-pld", "prompt lookup: ours vs HF prompt_lookup_num_tokens"),
    ("fly", "spd", "FLy (draft model): vs our SPD"),
    ("fly-mla", "spd", "FLy + MLA: vs our SPD"),
    ("dropmatch", "spd", "DropMatch (draft model): vs our SPD"),
    ("eagle3-tree", "eagle3", "EAGLE head: dynamic tree vs chain (same head)"),
    ("eagle3-tree", "ar", "EAGLE dynamic tree: vs our target alone (identical tokens: lossless)"),
    ("lookahead", "pld", "Lookahead decoding vs prompt lookup"),
    ("lookahead", "ar", "Lookahead decoding: vs our target alone (identical tokens: lossless)"),
)
RULE_SHARE_LIMIT = 0.02  # FLy rule / DropMatch LM-head passes: at most 2% of step time


# ---------------------------------------------------------------------------------------------
# Prompts
# ---------------------------------------------------------------------------------------------
@dataclass
class Prompt:
    set: str
    id: str
    ids: torch.Tensor  # [P] int64
    task: Any


def build_task(name: str, data_dir: str) -> Any:
    """The task exactly as conf/dataset/<name>.yaml builds it (the harness's own defaults)."""
    path = CONF_DIR / "dataset" / f"{name}.yaml"
    if not path.exists():
        known = sorted(p.stem for p in (CONF_DIR / "dataset").glob("*.yaml"))
        raise SystemExit(f"unknown data set {name!r}; choose from {known}")
    root = OmegaConf.create({"paths": {"data_dir": data_dir, "results_dir": str(REPO / "results")}})
    root.dataset = OmegaConf.load(path)
    root.dataset.limit = None
    return instantiate(root.dataset)


def build_prompts(sets: list[str], per_set: int, data_dir: str, tokenizer: Any, max_prompt_tokens: int | None) -> list[Prompt]:
    prompts = []
    for name in sets:
        task = build_task(name, data_dir)
        for sample in task.samples()[:per_set]:
            _, ids = encode_prompt(tokenizer, sample, use_chat_template=True)
            if max_prompt_tokens:
                ids = ids[-max_prompt_tokens:]
            prompts.append(Prompt(name, sample.id, torch.tensor(ids, dtype=torch.long), task))
    return prompts


# ---------------------------------------------------------------------------------------------
# Contestants
# ---------------------------------------------------------------------------------------------
class ForwardCounter:
    """Counts a model's forward calls (a hook on both contestants' models: same cost for both)."""

    def __init__(self, model: torch.nn.Module) -> None:
        self.n = 0
        model.register_forward_pre_hook(self._hook)

    def _hook(self, module: torch.nn.Module, args: Any) -> None:
        self.n += 1


@dataclass
class Run:
    contestant: str
    set: str
    prompt: str
    repeat: int
    position: int  # place in this prompt's contestant order
    prompt_tokens: int
    wall_s: float
    tokens: list[int]
    target_forwards: int
    draft_forwards: int
    steps: int
    drafted: list[int] = field(default_factory=list)
    accepted: list[int] = field(default_factory=list)
    prefill_s: float | None = None
    decode_s: float | None = None
    phase_s: dict[str, float] | None = None
    dropmatch_s: float | None = None
    loose_accepts: int | None = None
    correct: bool | None = None

    @property
    def s_per_token(self) -> float:
        return self.wall_s / max(1, len(self.tokens))


@dataclass
class Contestant:
    """One engine (engines.base.Engine) with one method: our HF engine with a rule and a drafter,
    transformers' generate(), or any other engine (a vLLM engine is one more of these). `ours`:
    the engine reports per-step counts and phase times (GenerationOutput.emitted, phase_s);
    otherwise steps are the target forwards counted by a hook."""

    name: str
    ours: bool
    lossless: bool
    k: int
    describe: str
    engine: Engine


class TransformersEngine(Engine):
    """transformers' generate(), greedy: plain, assisted (assistant_model) or prompt lookup, as
    an Engine (it reports only the new tokens; its steps are counted by a forward hook)."""

    name = "transformers"

    def __init__(self, target: LoadedModel, generate_kwargs: dict[str, Any], before: Callable[[], None] | None = None) -> None:
        self.model = target.model
        self.tokenizer = target.tokenizer
        self.eos_ids = sorted(eos_ids(target))
        self.context_length = getattr(self.model.config, "max_position_embeddings", None)
        self.pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else min(self.eos_ids)
        self.kwargs = generate_kwargs
        self.before = before  # settings to (re)apply before each call

    def generate(self, prompt_ids: list[int], *, method: bool, seed: int, max_new_tokens: int) -> GenerationOutput:
        if self.before is not None:
            self.before()
        inp = torch.tensor(prompt_ids, dtype=torch.long)[None]
        kw = self.kwargs if method else {}
        out = self.model.generate(
            inp, attention_mask=torch.ones_like(inp), do_sample=False, max_new_tokens=max_new_tokens,
            eos_token_id=self.eos_ids, pad_token_id=self.pad, **kw,
        )
        tokens = out[0, inp.shape[1]:].tolist()
        return GenerationOutput(new_tokens=tokens, stop_reason="eos" if tokens and tokens[-1] in self.eos_ids else "max_new_tokens")


class Bench:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        dtype = "float32" if args.fp32 else "bfloat16"
        t0 = time.perf_counter()
        self.target: LoadedModel = load_model(args.target, dtype=dtype)
        self.draft: LoadedModel = load_model(args.draft, dtype=dtype)
        if args.vocab_top:  # drafter.vocab_top: every contestant's draft (HF's too), before quantising
            from loosespec_bench.models.subvocab import restrict_draft_vocab

            data = args.data_dir or os.environ.get("LOOSESPEC_DATA_DIR") or str(REPO.parent / "shared" / "datasets")
            restrict_draft_vocab(ModelDrafter(self.draft.model), args.vocab_top, self.target.tokenizer, data)
        if args.draft_quantize != "none":  # pair.draft.quantize: every contestant's draft (HF's too)
            from loosespec_bench.models.quantize import quantize_linears

            quantize_linears(self.draft.model, args.draft_quantize)
        self.load_s = time.perf_counter() - t0
        self.eos = eos_ids(self.target)
        tok = self.target.tokenizer
        self.pad = tok.pad_token_id if tok.pad_token_id is not None else min(self.eos)
        self.target_calls = ForwardCounter(self.target.model)
        self.draft_calls = ForwardCounter(self.draft.model)
        self.unavailable: dict[str, str] = {}
        self.contestants = self._build(args.contestants)
        self.comparisons = list(COMPARISONS)
        for spec in args.engine:
            self._add_config_engine(spec)

    # -- ours ----------------------------------------------------------------------------------
    def _ours(self, verifier: Any, drafter: Any, record: bool = False) -> HFEngine:
        """Our engine with this rule and drafter (the drafter carries its K; None: target alone),
        on the loaded target, greedy, no stop strings."""
        return HFEngine.from_parts(self.target, verifier=verifier, drafter=drafter, record_steps=record)

    # -- transformers --------------------------------------------------------------------------
    def _hf(self, assistant: str | None = None, prompt_lookup: int | None = None) -> TransformersEngine:
        """transformers generate(): plain, assisted (constant / heuristic K) or prompt lookup."""
        a = self.args
        kw: dict[str, Any] = {}
        if prompt_lookup is not None:
            # Same n-gram sizes as ours (PromptLookupDrafter: max_ngram 3 down to 1).
            kw.update(prompt_lookup_num_tokens=prompt_lookup, max_matching_ngram_size=a.pld_max_ngram)
        before = None
        if assistant is not None:
            kw["assistant_model"] = self.draft.model

            def before() -> None:
                # transformers 5 reads the draft length and its schedule from the ASSISTANT's
                # generation_config (AssistedCandidateGenerator.__init__); "heuristic" writes
                # its adapted K back there after each call, so every call starts again at K.
                gc_a = self.draft.model.generation_config
                gc_a.num_assistant_tokens = a.k
                gc_a.num_assistant_tokens_schedule = assistant
                # Early stop of the draft on low confidence (default 0.4, adapted by a ROC fit
                # only when scikit-learn is installed): 0 disables it, so "constant" drafts
                # exactly K like ours. "heuristic" keeps transformers' default: it is its
                # dynamic mode as shipped.
                gc_a.assistant_confidence_threshold = 0.0 if assistant == "constant" else a.hf_confidence

        return TransformersEngine(self.target, kw, before)

    # -- any engine, from the package's config -------------------------------------------------
    def _add_config_engine(self, spec: str) -> None:
        """--engine NAME=OVERRIDES: the engine that `python -m loosespec_bench OVERRIDES` would
        run (build.build_engine; e.g. engine=vllm method=spd drafter=model), on the bench's
        target and draft paths and dtype, greedy, compared with our target alone."""
        from hydra import compose, initialize_config_dir
        from hydra.core.global_hydra import GlobalHydra

        from loosespec_bench.build import build_engine, check_engine
        from loosespec_bench.checks import validate

        name, _, overrides = spec.partition("=")
        if name in self.contestants:
            raise SystemExit(f"--engine {spec!r}: {name!r} is already a contestant; pick another name")
        a = self.args
        fixed = [f"pair.target.path={a.target}", f"pair.draft.path={a.draft}", f"pair.dtype={'float32' if a.fp32 else 'bfloat16'}",
                 "generation.temperature=0", "record_steps=false"]
        GlobalHydra.instance().clear()
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
            cfg = compose(config_name="config", overrides=[*overrides.split(), *fixed])
        GlobalHydra.instance().clear()
        validate(cfg)
        check_engine(cfg)
        # No stop strings: the bench's contestants all stop at EOS or max_new_tokens.
        engine = build_engine(cfg, types.SimpleNamespace(stop_strings=[]))
        k = int(cfg.drafter.k) if cfg.method.get("uses_drafter", True) else 0
        lossless = cfg.method.name in ("ar", "spd")
        self.contestants[name] = Contestant(name, True, lossless, k, f"engine={cfg.engine.name}: {overrides}", engine)
        self.comparisons.append((name, "ar", f"{name} (engine={cfg.engine.name}): vs our target alone"))

    def _optional(self, module: str, attr: str) -> Any | None:
        try:
            return getattr(importlib.import_module(module), attr)
        except (ImportError, AttributeError) as err:
            self.unavailable[f"{module}.{attr}"] = str(err).splitlines()[0] if str(err) else type(err).__name__
            return None

    def _build(self, names: list[str]) -> dict[str, Contestant]:
        a = self.args
        d = self.draft.model
        out: dict[str, Contestant] = {}

        def add(name: str, ours: bool, lossless: bool, k: int, describe: str, engine: Engine) -> None:
            if name in names:
                out[name] = Contestant(name, ours, lossless, k, describe, engine)

        add("ar", True, True, 0, "our loop, target alone", self._ours(SPD(), None))
        add("hf-ar", False, True, 0, "transformers generate(), greedy", self._hf())
        add("spd", True, True, a.k, f"our SPD, draft model, K={a.k}", self._ours(SPD(), ModelDrafter(d, k=a.k)))
        add("hf-assist", False, True, a.k, f"HF assisted, K={a.k} constant, no confidence stop", self._hf(assistant="constant"))
        add("hf-assist-dyn", False, True, a.k, f"HF assisted, K={a.k} heuristic, confidence {a.hf_confidence}", self._hf(assistant="heuristic"))
        pld = PromptLookupDrafter(k=a.pld_k, max_ngram=a.pld_max_ngram)
        add("pld", True, True, a.pld_k, f"our prompt lookup, K={a.pld_k}, n-gram<={a.pld_max_ngram}", self._ours(SPD(), pld))
        add("hf-pld", False, True, a.pld_k, f"HF prompt lookup, K={a.pld_k}, n-gram<={a.pld_max_ngram}", self._hf(prompt_lookup=a.pld_k))
        FLy = self._optional("loosespec_bench.verifiers.fly", "FLy") if {"fly", "fly-mla", "fly-mla-hf"} & set(names) else None
        MLA = self._optional("loosespec_bench.drafters.mla", "MLADrafter") if {"fly-mla", "fly-mla-hf", "spd-mla"} & set(names) else None
        DropMatch = self._optional("loosespec_bench.verifiers.dropmatch", "DropMatch") if "dropmatch" in names else None
        if MLA is not None:
            # The same greedy draft as ModelDrafter (the draft model checks prompt-lookup guesses
            # and keeps only its own argmax tokens), in fewer draft forwards: lossless SPD, same
            # acceptance, less drafting time. Only bf16 near-ties of batched vs 1-token draft
            # forwards can change a draft token, and the exact rule still decides every output.
            add("spd-mla", True, True, a.k, f"our SPD, draft model sped up by lookup (MLA), K={a.k}",
                self._ours(SPD(), MLA(d, k=a.k)))
        if FLy is not None:
            fly_rule = FLy(theta=a.fly_theta, window=a.fly_window)
            add("fly", True, False, a.fly_k, f"FLy (theta {a.fly_theta}, W {a.fly_window}), draft model, K={a.fly_k}",
                self._ours(fly_rule, ModelDrafter(d, k=a.fly_k), record=True))
            if MLA is not None:
                add("fly-mla", True, False, a.fly_k, f"FLy + MLA, K={a.fly_k}",
                    self._ours(FLy(theta=a.fly_theta, window=a.fly_window), MLA(d, k=a.fly_k), record=True))
                # transformers-style lookup: no dummy guess, guesses cut to what can be kept, a
                # plain 1-token step while nothing matches (cheap with a quantized draft).
                add("fly-mla-hf", True, False, a.fly_k, f"FLy + MLA (lookup=hf), K={a.fly_k}",
                    self._ours(FLy(theta=a.fly_theta, window=a.fly_window), MLA(d, k=a.fly_k, lookup="hf"), record=True))
        if DropMatch is not None:
            add("dropmatch", True, False, a.k, f"DropMatch (js, 5 paths, p 0.3), draft model, K={a.k}",
                self._ours(DropMatch(lm_head_batch=a.dm_lm_head_batch), ModelDrafter(d, k=a.k), record=True))
        if {"eagle3", "eagle3-tree"} & set(names):
            # The same head (the embedded pair's CPU-trained one; random on --tiny) drafts a chain
            # of K and EAGLE's dynamic tree (official total_token / depth / top_k by default).
            from loosespec_bench.drafters import Eagle3Drafter

            head = a.eagle3_head or ("random" if a.tiny else os.path.expanduser(
                os.environ.get("LOOSESPEC_EAGLE3_DIR", "~/.cache/loosespec_bench/eagle3") + "/qwen2.5-coder-1.5b-instruct"))
            if head != "random" and not os.path.isdir(head):
                for name in ("eagle3", "eagle3-tree"):
                    self.unavailable[name] = f"no EAGLE head at {head} (scripts/train_eagle3.py, or --eagle3-head)"
            else:
                tm = self.target.model
                add("eagle3", True, True, a.k, f"our SPD, EAGLE head chain, K={a.k}",
                    self._ours(SPD(), Eagle3Drafter(tm, head, k=a.k)))
                tree = Eagle3Drafter(tm, head, tree=True, total_token=a.tree_total, depth=a.tree_depth, top_k=a.tree_top_k)
                add("eagle3-tree", True, True, tree.k,
                    f"our SPD, EAGLE dynamic tree ({a.tree_total} tokens, depth {a.tree_depth}, top-{a.tree_top_k}), same head",
                    self._ours(SPD(), tree, record=True))
        if "lookahead" in names:
            from loosespec_bench.drafters.lookahead import LookaheadDrafter

            la = LookaheadDrafter(k=a.la_level - 1, window=a.la_window, guess_set=a.la_guess)
            add("lookahead", True, True, la.k, f"our Lookahead (N {a.la_level}, W {a.la_window}, G {a.la_guess})",
                self._ours(SPD(), la))
        for name in names:
            if name not in out:
                self.unavailable.setdefault(name, "module not available")
        return out

    # -- isolated forwards for the cost model ---------------------------------------------------
    def calibrate(self, context: torch.Tensor, lengths: list[int], reps: int) -> dict[str, Any]:
        """Median times of one target forward of each length in `lengths` and of one 1-token
        draft forward, over `context` cached tokens, interleaved, under the loop's attention."""
        from loosespec_bench.decoding.cpu import cpu_fast_paths

        T, D = self.target.model, self.draft.model
        times: dict[str, list[float]] = {}
        with torch.inference_mode(), cpu_fast_paths(T, D):
            caches = {}
            for name, m in (("target", T), ("draft", D)):
                caches[name] = DynamicCache(config=m.config)
                m(context[None, :-1], cache=caches[name], use_cache=True, logits_to_keep=1)
            jobs = [("target", T, n) for n in lengths] + [("draft", D, 1)]
            for rep in range(reps + 1):  # the first round warms up each shape
                for name, m, n in jobs[rep % len(jobs):] + jobs[: rep % len(jobs)]:
                    x = context[-n:][None]
                    t0 = time.perf_counter()
                    # Same call as the loop: the target returns every row's logits, the draft one.
                    m(x, cache=caches[name], use_cache=True, **({} if name == "target" else {"logits_to_keep": 1}))
                    dt = time.perf_counter() - t0
                    crop_to(caches[name], context.numel() - 1)
                    if rep:
                        times.setdefault(f"{name}_{n}", []).append(dt)
        out: dict[str, Any] = {key: statistics.median(v) for key, v in times.items()}
        out.update(context=int(context.numel()), reps=reps, c=out["draft_1"] / out["target_1"])
        return out

    # -- one run -------------------------------------------------------------------------------
    def run_one(self, c: Contestant, p: Prompt, max_new: int, repeat: int, position: int) -> Run:
        gc.collect()  # not inside the timing: a collection during a run would bill whoever ran it
        t_fwd, d_fwd = self.target_calls.n, self.draft_calls.n
        t0 = time.perf_counter()
        gen = c.engine.generate(p.ids.tolist(), method=True, seed=0, max_new_tokens=max_new)
        wall = time.perf_counter() - t0
        tokens = gen.new_tokens
        n_target, n_draft = self.target_calls.n - t_fwd, self.draft_calls.n - d_fwd
        run = Run(
            contestant=c.name, set=p.set, prompt=p.id, repeat=repeat, position=position,
            prompt_tokens=int(p.ids.numel()), wall_s=wall, tokens=tokens,
            target_forwards=n_target, draft_forwards=n_draft,
            # transformers: every target forward verifies (the first one also prefills).
            steps=gen.steps if c.ours else n_target,
        )
        if c.ours:
            run.drafted, run.accepted = list(gen.drafted), list(gen.accepted)
            run.prefill_s, run.decode_s, run.phase_s = gen.prefill_s, gen.decode_s, dict(gen.phase_s)
            recs = gen.step_records
            if any("dropmatch_s" in r for r in recs):
                run.dropmatch_s = sum(r.get("dropmatch_s", 0.0) for r in recs)
            if any("loose_accepted" in r for r in recs):
                run.loose_accepts = sum(len(r.get("loose_accepted", [])) for r in recs)
        if p.set in MATH_SETS:
            text = cut_at_stop(self.target.tokenizer.decode(tokens, skip_special_tokens=True), p.task.stop_strings)
            run.correct = bool(p.task.score(_sample_of(p), text).get("correct"))
        return run


_SAMPLES: dict[tuple[str, str], Any] = {}


def _sample_of(p: Prompt) -> Any:
    key = (p.set, p.id)
    if key not in _SAMPLES:
        _SAMPLES.update({(p.set, s.id): s for s in p.task.samples()})
    return _SAMPLES[key]


# ---------------------------------------------------------------------------------------------
# Summaries
# ---------------------------------------------------------------------------------------------
def _fmt(x: float | None, spec: str = ".3f", suffix: str = "") -> str:
    return "-" if x is None else format(x, spec) + suffix


def paired(runs: list[Run], a: str, b: str) -> list[tuple[Run, Run]]:
    """Contestant a's and b's runs on the same (prompt, repeat)."""
    def of(name: str) -> dict[tuple[str, str, int], Run]:
        return {(r.set, r.prompt, r.repeat): r for r in runs if r.contestant == name}

    return pair_up(of(a), of(b))


def per_contestant(runs: list[Run], name: str) -> dict[str, Any]:
    rs = [r for r in runs if r.contestant == name]
    tokens = sum(len(r.tokens) for r in rs)
    wall = sum(r.wall_s for r in rs)
    steps = sum(r.steps for r in rs)
    scored = [r.correct for r in rs if r.correct is not None]
    return {
        "runs": len(rs),
        "tokens": tokens,
        "tokens_per_s": tokens / wall if wall else None,
        "tokens_per_s_median": _median([len(r.tokens) / r.wall_s for r in rs if r.wall_s > 0]),
        "tau": tokens / steps if steps else None,
        "accuracy_math": sum(scored) / len(scored) if scored else None,
    }


def compare(runs: list[Run], a: str, b: str, lossless: bool) -> dict[str, Any]:
    """Ours / peer, seconds per new token, as paired-ratio statistics (metrics.paired_ratio_stats)."""
    pairs = paired(runs, a, b)
    return {
        "pairs": len(pairs),
        **paired_ratio_stats([ra.s_per_token / rb.s_per_token for ra, rb in pairs],
                             [ra.tokens == rb.tokens for ra, rb in pairs], name="time_ratio"),
        "lossless_pair": lossless,
    }


def speedup_vs_ar(runs: list[Run], name: str) -> float | None:
    """Median of paired ratios: target alone's seconds per token / the contestant's."""
    pairs = paired(runs, name, "ar")
    return _median([rb.s_per_token / ra.s_per_token for ra, rb in pairs])


def overheads(runs: list[Run], name: str) -> dict[str, Any] | None:
    rs = [r for r in runs if r.contestant == name and r.phase_s is not None]
    if not rs:
        return None
    steps = sum(r.steps for r in rs)
    decode = sum(r.decode_s or 0.0 for r in rs)
    phase: dict[str, float] = {}
    for r in rs:
        for k, v in (r.phase_s or {}).items():
            phase[k] = phase.get(k, 0.0) + v
    out: dict[str, Any] = {"steps": steps, "step_ms": 1000 * decode / steps if steps else None}
    for k, v in phase.items():
        out[f"{k}_share"] = v / decode if decode else None
    out["other_share"] = (decode - sum(phase.values())) / decode if decode else None
    dm = [r.dropmatch_s for r in rs if r.dropmatch_s is not None]
    if dm:
        out["dropmatch_lm_head_share"] = sum(dm) / decode
    return out


def cost_model(runs: list[Run], name: str, k: int, calib: dict[str, Any] | None) -> dict[str, Any] | None:
    """The cost model's prediction next to the measured decode-only speedup over target alone.

    Predicted: E from the run's per-position acceptance rates, c and v(K) from the isolated
    forward timings of `calibrate` (not from this run), F = the run's draft forwards per step
    (K for a draft model, fewer with MLA, 0 for prompt lookup). In-situ c and v (phase times
    of the runs) are printed beside it to show where a gap comes from: they include the draft
    model's prompt prefill (step 1 of every run), lookups and Python overhead.
    """
    ar = [r for r in runs if r.contestant == "ar" and r.phase_s]
    rs = [r for r in runs if r.contestant == name and r.phase_s]
    if not ar or not rs:
        return None
    ar_steps = sum(r.steps for r in ar)
    t1_run = sum(r.phase_s["target"] for r in ar) / ar_steps  # one target 1-token forward, in the runs
    steps = sum(r.steps for r in rs)
    d_fwd = sum(r.draft_forwards for r in rs)
    draft_s = sum(r.phase_s.get("draft", 0.0) for r in rs)
    target_s = sum(r.phase_s["target"] for r in rs)
    decode = sum(r.decode_s for r in rs)
    drafted = [x for r in rs for x in r.drafted]
    accepted = [x for r in rs for x in r.accepted]
    # Short drafts (lookup misses, the budget's end) count as rejections: E = the real yield.
    rates = costmodel.acceptance_rates(drafted, accepted, k, short_as_reject=True)
    f = d_fwd / steps
    out: dict[str, Any] = {
        "rates": rates,
        "expected_tokens": costmodel.expected_tokens(rates),
        "measured_tau": sum(len(r.tokens) for r in rs) / steps,
        "draft_forwards_per_step": f,
        "c_run": draft_s / d_fwd / t1_run if d_fwd else 0.0,
        "v_run": target_s / steps / t1_run,
        "other_run": (decode - target_s - (draft_s if d_fwd else 0.0)) / steps / t1_run,
    }
    if calib is not None and f"target_{k + 1}" in calib:
        c = calib["c"] if d_fwd else 0.0  # prompt lookup: no draft model
        v = calib[f"target_{k + 1}"] / calib["target_1"]
        out.update(c=c, verify_factor=v, predicted_speedup=costmodel.predicted_speedup(
            rates, c, k, verify_factor=v, draft_forwards=f))
    # Measured the same way as predicted: decode only, pooled tokens over the same prompts.
    ar_spt = sum(r.decode_s for r in ar) / sum(len(r.tokens) for r in ar)
    spt = decode / sum(len(r.tokens) for r in rs)
    out["measured_decode_speedup"] = ar_spt / spt
    return out


def print_report(res: dict[str, Any], bench: Bench, args: argparse.Namespace) -> None:
    names = list(bench.contestants)
    dtype = "fp32" if args.fp32 else "bf16"
    print()
    if args.draft_quantize != "none":
        dtype += f", draft {args.draft_quantize}"
    if args.vocab_top:
        dtype += f", draft vocab top {args.vocab_top}"
    print(f"== engine benchmark: {args.target} <- {args.draft} ({dtype}, CPU, {torch.get_num_threads()} threads, "
          f"OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY')}), greedy, max_new_tokens={args.max_new_tokens}")
    print(f"   prompts: {res['prompt_summary']}; repeats {args.repeats}; "
          f"load average {res['load_before']} -> {res['load_after']}")
    print()
    print(f"{'contestant':<14} {'tok/s':>7} {'tok/s med':>9} {'tau':>5} {'vs ar':>6} {'math acc':>8}  description")
    for n in names:
        s = res["contestants"][n]
        print(f"{n:<14} {_fmt(s['tokens_per_s'], '.2f'):>7} {_fmt(s['tokens_per_s_median'], '.2f'):>9} "
              f"{_fmt(s['tau'], '.2f'):>5} {_fmt(s.get('speedup_vs_ar'), '.2f', 'x'):>6} "
              f"{_fmt(s['accuracy_math'], '.2f'):>8}  {bench.contestants[n].describe}")
    for n, why in bench.unavailable.items():
        print(f"{n:<14} not available ({why})")
    print()
    print("time ratio = median over (prompt, repeat) pairs of (ours s/token) / (peer s/token); < 1: ours faster")
    print(f"{'comparison':<52} {'ratio':>6} {'[min, max]':>15} {'pairs':>5}  {'identical tokens':<24} {'ratio(ident)':>12}  target")
    for a, b, label in bench.comparisons:
        key = f"{a}|{b}"
        if key not in res["comparisons"]:
            continue
        c = res["comparisons"][key]
        if c["lossless_pair"]:
            ident = f"{c['identical']}/{c['pairs']}" + (" (fp32 check)" if args.fp32 else " (bf16: ties may flip)")
        else:
            ident = f"lossy ({c['identical']}/{c['pairs']} same)"
        print(f"{label:<52} {_fmt(c['time_ratio_median']):>6} "
              f"[{_fmt(c['time_ratio_min'], '.2f')}, {_fmt(c['time_ratio_max'], '.2f')}]".rjust(16)
              + f" {c['pairs']:>5}  {ident:<24} {_fmt(c['time_ratio_median_identical']) if c['lossless_pair'] else '':>12}  "
              + c.get("target", ""))
    ret = res.get("retention")
    if ret:
        print()
        for n, v in ret.items():
            print(f"accuracy retention on the math prompts, {n} / ar: {_fmt(v, '.3f')}")
    print()
    print("per verification step (fractions of decode time / steps; from GenerationOutput.phase_s)")
    print(f"{'contestant':<12} {'step ms':>8} {'draft':>7} {'target':>7} {'rule':>7} {'rollback':>8} {'bookkeep':>8} {'other':>6}")
    for n in names:
        o = res["overheads"].get(n)
        if not o:
            continue
        sh = lambda key: _fmt(o.get(key), ".1%")  # noqa: E731
        print(f"{n:<12} {_fmt(o['step_ms'], '.1f'):>8} {sh('draft_share'):>7} {sh('target_share'):>7} "
              f"{sh('verify_share'):>7} {sh('rollback_share'):>8} {sh('commit_share'):>8} {sh('other_share'):>6}")
    for n in ("fly", "fly-mla", "fly-mla-hf"):
        o = res["overheads"].get(n)
        if o and o.get("verify_share") is not None:
            ok = "OK" if o["verify_share"] < RULE_SHARE_LIMIT else "OVER"
            print(f"FLy rule share ({n}): {o['verify_share']:.2%} of step time (limit {RULE_SHARE_LIMIT:.0%}): {ok}")
    o = res["overheads"].get("dropmatch")
    if o and o.get("dropmatch_lm_head_share") is not None:
        ok = "OK" if o["dropmatch_lm_head_share"] < RULE_SHARE_LIMIT else "OVER"
        print(f"DropMatch LM-head passes + criterion: {o['dropmatch_lm_head_share']:.2%} of step time "
              f"(limit {RULE_SHARE_LIMIT:.0%}): {ok}")
    cal = res.get("calibration")
    if cal:
        ks = ", ".join(f"{key.split('_')[1]}-token {1000 * v:.1f} ms" for key, v in cal.items() if key.startswith("target_"))
        print()
        print(f"isolated forwards at {cal['context']} cached tokens (medians of {cal['reps']}; our attention): "
              f"target {ks}; draft 1-token {1000 * cal['draft_1']:.1f} ms -> c = {cal['c']:.3f}")
    if res["costmodel"]:
        print()
        print("cost model (decode only): predicted = E / (v(K) + c F); E from the per-position acceptance rates,")
        print("c and v(K) = (K+1)-token / 1-token target forward from the isolated forwards above, F = draft forwards")
        print("per step; c_run, v_run, o_run: the same from the runs' phase times (o = rule + rollback + bookkeeping)")
        print(f"{'contestant':<12} {'c':>6} {'v':>5} {'F':>5} {'E':>5} {'tau':>5} {'predicted':>9} {'measured':>8}  "
              f"{'c_run':>6} {'v_run':>5} {'o_run':>5}  per-position acceptance")
        for n, m in res["costmodel"].items():
            rates = " ".join("-" if r is None else f"{r:.2f}" for r in m["rates"])
            print(f"{n:<12} {_fmt(m.get('c')):>6} {_fmt(m.get('verify_factor'), '.2f'):>5} {m['draft_forwards_per_step']:>5.2f} "
                  f"{m['expected_tokens']:>5.2f} {m['measured_tau']:>5.2f} {_fmt(m.get('predicted_speedup'), '.2f', 'x'):>9} "
                  f"{m['measured_decode_speedup']:>7.2f}x  {m['c_run']:>6.3f} {m['v_run']:>5.2f} {m['other_run']:>5.3f}  {rates}")
    if res.get("projections"):
        print()
        print("projection to other scales (inputs, not claims: c and v as given on the command line; rates from this run,")
        print("extended geometrically past the measured K)")
        for line in res["projections"]:
            print("  " + line)


def summarize(runs: list[Run], bench: Bench, args: argparse.Namespace, calib: dict[str, Any] | None = None) -> dict[str, Any]:
    names = list(bench.contestants)
    res: dict[str, Any] = {"contestants": {}, "comparisons": {}, "overheads": {}, "costmodel": {}, "calibration": calib}
    for n in names:
        s = per_contestant(runs, n)
        if n != "ar" and "ar" in names and bench.contestants[n].ours:
            s["speedup_vs_ar"] = speedup_vs_ar(runs, n)
        res["contestants"][n] = s
    targets = {
        "ar|hf-ar": ("<= 1.02", 1.02), "spd|hf-assist": ("<= 0.90", 0.90), "spd-mla|hf-assist": ("<= 0.90", 0.90),
        "pld|hf-pld": ("<= 1.00", 1.00),
    }
    for a, b, _ in bench.comparisons:
        if a in names and b in names:
            lossless = bench.contestants[a].lossless and bench.contestants[b].lossless
            c = compare(runs, a, b, lossless)
            if f"{a}|{b}" in targets and c["time_ratio_median"] is not None:
                text, lim = targets[f"{a}|{b}"]
                c["target"] = f"{text}: {'met' if c['time_ratio_median'] <= lim else 'MISSED'}"
            res["comparisons"][f"{a}|{b}"] = c
    if "ar" in names and res["contestants"]["ar"]["accuracy_math"]:
        base = res["contestants"]["ar"]["accuracy_math"]
        res["retention"] = {
            n: res["contestants"][n]["accuracy_math"] / base
            for n in names
            if n != "ar" and bench.contestants[n].ours and res["contestants"][n]["accuracy_math"] is not None
        }
    for n in names:
        if bench.contestants[n].ours:
            o = overheads(runs, n)
            if o:
                res["overheads"][n] = o
            if n != "ar":
                m = cost_model(runs, n, bench.contestants[n].k, res.get("calibration"))
                if m:
                    res["costmodel"][n] = m
    lines = []
    for n, m in res["costmodel"].items():
        if not m.get("c"):  # prompt lookup: no draft model to re-cost
            continue
        k = bench.contestants[n].k
        # Draft forwards per draft token as measured (1 for a draft model, < 1 with MLA).
        per_token = m["draft_forwards_per_step"] / k
        for c in args.project_c:
            p = costmodel.project(m["rates"], c=c, k=k, verify_factor=args.project_v, draft_forwards=per_token * k)
            b = costmodel.best_k(m["rates"], c=c * per_token, k_max=args.project_k_max, verify_factor=args.project_v)
            lines.append(f"{n} rates, c={c:.3f}, v={args.project_v:.2f}: K={k} -> {p.speedup:.2f}x "
                         f"(E {p.expected_tokens:.2f}); best K<={args.project_k_max}: K={b.k} -> {b.speedup:.2f}x")
    res["projections"] = lines
    return res


# ---------------------------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------------------------
def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--prompts-per-set", type=int, default=2)
    ap.add_argument("--sets", default=DEFAULT_SETS, help=f"comma list of conf/dataset names (default {DEFAULT_SETS})")
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--k", type=int, default=5, help="draft length for SPD, HF assisted and DropMatch")
    ap.add_argument("--fly-k", type=int, default=10, help="draft length for FLy (needs K > W)")
    ap.add_argument("--fly-window", type=int, default=6)
    ap.add_argument("--fly-theta", type=float, default=0.3)
    ap.add_argument("--pld-k", type=int, default=10, help="prompt-lookup tokens (ours and HF's)")
    ap.add_argument("--pld-max-ngram", type=int, default=3)
    ap.add_argument("--hf-confidence", type=float, default=0.4, help="HF assistant_confidence_threshold for hf-assist-dyn")
    ap.add_argument("--eagle3-head", default=None, help="EAGLE-2/3 head folder (default: the embedded pair's trained head)")
    # EAGLE's dynamic tree: SafeAILab/EAGLE ea_model.py defaults (total_token 60, depth 7, top_k 10).
    ap.add_argument("--tree-total", type=int, default=60)
    ap.add_argument("--tree-depth", type=int, default=7)
    ap.add_argument("--tree-top-k", type=int, default=10)
    # Lookahead: hao-ai-lab/LookaheadDecoding README defaults (LEVEL 5, WINDOW_SIZE 7, GUESS_SET_SIZE 7).
    ap.add_argument("--la-level", type=int, default=5)
    ap.add_argument("--la-window", type=int, default=7)
    ap.add_argument("--la-guess", type=int, default=7)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--warmup-tokens", type=int, default=8)
    ap.add_argument("--contestants", default=",".join(ALL_CONTESTANTS), help=f"comma list of {', '.join(ALL_CONTESTANTS)}")
    ap.add_argument("--engine", action="append", default=[], metavar="NAME=OVERRIDES",
                    help="one more contestant: the engine the package config builds with these overrides "
                         "(e.g. 'vllm-spd=engine=vllm method=spd drafter=model'); repeat for several")
    ap.add_argument("--fp32", action="store_true", help="float32: the identical-tokens check is exact (bf16 may flip ties)")
    ap.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    ap.add_argument("--data-dir", default=None, help="data sets folder (default $LOOSESPEC_DATA_DIR, else ../shared/datasets)")
    ap.add_argument("--target", default=TARGET)
    ap.add_argument("--draft", default=DRAFT)
    ap.add_argument("--draft-quantize", default="none", choices=("none", "int8", "int4"),
                    help="weight-only int linears for the draft (pair.draft.quantize); the target is untouched")
    ap.add_argument("--vocab-top", type=int, default=None,
                    help="draft LM head over the N most frequent ids only (drafter.vocab_top, FR-Spec style)")
    ap.add_argument("--dm-lm-head-batch", type=int, default=None,
                    help="DropMatch candidate positions per LM-head call (default: all in one call per step)")
    ap.add_argument("--tiny", action="store_true", help="tiny random models tiny:0 <- tiny:1 (smoke test)")
    ap.add_argument("--calibration-reps", type=int, default=5, help="isolated forwards per shape for the cost model (0: skip)")
    ap.add_argument("--max-prompt-tokens", type=int, default=None, help="keep only the last N prompt tokens")
    ap.add_argument("--project-c", type=lambda s: [float(x) for x in s.split(",")], default=[0.10, 0.15],
                    help="cost ratios to project to (e.g. an 8B draft for a 70B target on a GPU: 0.1..0.15)")
    ap.add_argument("--project-v", type=float, default=1.0, help="verification-cost factor to project with")
    ap.add_argument("--project-k-max", type=int, default=16)
    ap.add_argument("--out", default=None, help="JSON file with every raw timing")
    args = ap.parse_args(argv)
    if args.tiny:
        args.target, args.draft = "tiny:0", "tiny:1"
        if args.max_prompt_tokens is None:
            args.max_prompt_tokens = 256  # byte-level tokens: keep the tiny models' prompts short
    args.contestants = [c.strip() for c in args.contestants.split(",") if c.strip()]
    bad = [c for c in args.contestants if c not in ALL_CONTESTANTS]
    if bad:
        ap.error(f"unknown contestants {bad}; choose from {', '.join(ALL_CONTESTANTS)}")
    return args


def load_avg() -> str:
    try:
        return "/".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "?"


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    data_dir = args.data_dir or os.environ.get("LOOSESPEC_DATA_DIR") or str(REPO.parent / "shared" / "datasets")
    load_before = load_avg()
    if os.environ.get("OMP_WAIT_POLICY") == "ACTIVE" and torch.get_num_threads() > 1 and os.getloadavg()[0] > 0.5 * (os.cpu_count() or 1):
        print(f"[bench] warning: load average {load_before} with spinning OpenMP workers: other busy processes will "
              "distort the timings; wait for a quiet machine or rerun with OMP_WAIT_POLICY=PASSIVE", flush=True)
    bench = Bench(args)
    prompts = build_prompts(args.sets.split(","), args.prompts_per_set, data_dir, bench.target.tokenizer, args.max_prompt_tokens)
    names = list(bench.contestants)
    print(f"[bench] models loaded in {bench.load_s:.1f}s; {len(prompts)} prompts "
          f"({', '.join(f'{p.set}:{p.ids.numel()}' for p in prompts)} tokens); contestants {names}", flush=True)
    gc.collect()
    gc.freeze()  # see below
    # Warm-up: first calls allocate, build kernels and caches; none of that may bill a contestant.
    for n in names:
        bench.run_one(bench.contestants[n], prompts[0], args.warmup_tokens, -1, 0)
    # Move every object alive now (models, data sets) out of the collector's reach, so the
    # collection before each run (outside its timing) only walks what the last run left.
    gc.collect()
    gc.freeze()
    runs: list[Run] = []
    t_all = time.perf_counter()
    for i, p in enumerate(prompts):
        for r in range(args.repeats):
            shift = (i * args.repeats + r) % len(names)
            order = names[shift:] + names[:shift]  # rotate: each contestant takes every place
            for pos, n in enumerate(order):
                run = bench.run_one(bench.contestants[n], p, args.max_new_tokens, r, pos)
                runs.append(run)
                print(f"[bench] {p.set}/{p.id} r{r} {n:<13} {len(run.tokens):>4} tok {run.wall_s:7.2f}s "
                      f"{len(run.tokens) / run.wall_s:6.2f} tok/s  load {load_avg()}", flush=True)
    calib = None
    if args.calibration_reps > 0 and "ar" in names:
        # Context: the mean prompt plus half the new tokens, i.e. the middle of a typical run.
        ctx_len = int(statistics.mean(p.ids.numel() for p in prompts)) + args.max_new_tokens // 2
        context = torch.cat([p.ids for p in prompts])[:ctx_len]
        ks = sorted({c.k + 1 for c in bench.contestants.values()} | {1})
        calib = bench.calibrate(context, ks, args.calibration_reps)
    res = summarize(runs, bench, args, calib)
    res["_runs"] = runs
    res["load_before"], res["load_after"] = load_before, load_avg()
    res["prompt_summary"] = ", ".join(
        f"{s} x{sum(p.set == s for p in prompts)} (~{int(statistics.mean(p.ids.numel() for p in prompts if p.set == s))} tok)"
        for s in dict.fromkeys(p.set for p in prompts)
    )
    print_report(res, bench, args)
    print(f"\n[bench] {len(runs)} timed runs in {time.perf_counter() - t_all:.0f}s")
    if args.out:
        out = {k: v for k, v in res.items() if k != "_runs"}
        out.update(
            args={k: v for k, v in vars(args).items()},
            environment={
                "python": sys.version.split()[0], "torch": torch.__version__, "transformers": transformers.__version__,
                "threads": torch.get_num_threads(), "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY"),
                "machine": platform.machine(), "processor": platform.processor(), "cpus": os.cpu_count(),
                "model_load_s": bench.load_s,
            },
            # The ids themselves: scripts/bench_vllm.py --ours asserts it runs on exactly these.
            prompts=[{"set": p.set, "id": p.id, "tokens": int(p.ids.numel()), "ids": p.ids.tolist()} for p in prompts],
            unavailable=bench.unavailable,
            runs=[vars(r) for r in runs],
        )
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(out, indent=1))
        print(f"[bench] raw timings: {args.out}")
    return res


if __name__ == "__main__":
    main()
