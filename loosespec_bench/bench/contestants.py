"""The engine benchmark's contestants: each an engine (engines.base.Engine) with one method, on
the one loaded target and draft: our HF engine with a rule and a drafter, transformers'
generate() (plain, assisted, prompt lookup), or any engine the package config builds."""

from __future__ import annotations

import argparse
import gc
import importlib
import os
import statistics
import time
import types
from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from loosespec_bench.engines.base import Engine
from loosespec_bench.engines.hf import HFEngine
from loosespec_bench.generation import GenerationOutput
from loosespec_bench.measure import speed_configs as configs
from loosespec_bench.tasks.prompting import cut_at_stop, eos_ids
from loosespec_bench.step import crop_to
from loosespec_bench.drafters.lookup import PromptLookupDrafter
from loosespec_bench.drafters.model import ModelDrafter
from loosespec_bench.models.loading import LoadedModel, load_model
from loosespec_bench.verifiers.spd import SPD, TargetAlone

from .prompts import MATH_SETS, Prompt, data_dir

# The contestants, by the names measure/speed_configs.py declares (--contestants takes their
# aliases too: configs.pick).
ALL_CONTESTANTS = (
    configs.TARGET_ALONE, configs.HF_AR, configs.SPD, configs.SPD_MLA, configs.HF_ASSIST, configs.HF_ASSIST_DYN,
    configs.PLD, configs.HF_PLD, configs.FLY, configs.FLY_MLA, configs.FLY_MLA_HF, configs.DROPMATCH,
    configs.EAGLE3, configs.EAGLE3_TREE, configs.LOOKAHEAD,
)
# (ours, peer, label): the rows of the comparison table.
COMPARISONS = (
    (configs.TARGET_ALONE, configs.HF_AR, "target alone: ours vs generate()"),
    (configs.SPD, configs.HF_ASSIST, "SPD draft model: ours vs HF assisted (K constant)"),
    (configs.SPD, configs.HF_ASSIST_DYN, "SPD draft model: ours vs HF assisted (heuristic K)"),
    (configs.SPD_MLA, configs.HF_ASSIST, "SPD, MLA drafting: ours vs HF assisted (K constant)"),
    (configs.SPD_MLA, configs.HF_ASSIST_DYN, "SPD, MLA drafting: ours vs HF assisted (heuristic K)"),
    (configs.PLD, configs.HF_PLD, "prompt lookup: ours vs HF prompt_lookup_num_tokens"),
    (configs.FLY, configs.SPD, "FLy (draft model): vs our SPD"),
    (configs.FLY_MLA, configs.SPD, "FLy + MLA: vs our SPD"),
    (configs.DROPMATCH, configs.SPD, "DropMatch (draft model): vs our SPD"),
    (configs.EAGLE3_TREE, configs.EAGLE3, "EAGLE head: dynamic tree vs chain (same head)"),
    (configs.EAGLE3_TREE, configs.TARGET_ALONE, "EAGLE dynamic tree: vs our target alone (identical tokens: lossless)"),
    (configs.LOOKAHEAD, configs.PLD, "Lookahead decoding vs prompt lookup"),
    (configs.LOOKAHEAD, configs.TARGET_ALONE, "Lookahead decoding: vs our target alone (identical tokens: lossless)"),
)


def compose_config(overrides: list[str]) -> Any:
    """The config `python -m loosespec_bench OVERRIDES` runs (points.compose_points, one point,
    without its `hydra` node); a bad override is a ConfigError."""
    from hydra.core.global_hydra import GlobalHydra

    from loosespec_bench.settings.points import compose_points

    try:
        _, [(_, cfg)] = compose_points(list(overrides), multirun=False)
    finally:
        GlobalHydra.instance().clear()
    return cfg


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

            restrict_draft_vocab(ModelDrafter(self.draft.model), args.vocab_top, self.target.tokenizer, data_dir(args.data_dir))
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
        from loosespec_bench.build import build_engine, check_engine
        from loosespec_bench.settings.checks import validate
        from loosespec_bench.settings.config import uses_drafter
        from loosespec_bench.verifiers import rule_class

        name, _, overrides = spec.partition("=")
        if name in self.contestants:
            raise SystemExit(f"--engine {spec!r}: {name!r} is already a contestant; pick another name")
        a = self.args
        fixed = [f"pair.target.path={a.target}", f"pair.draft.path={a.draft}", f"pair.dtype={'float32' if a.fp32 else 'bfloat16'}",
                 "generation.temperature=0", "record_steps=false"]
        cfg = compose_config([*overrides.split(), *fixed])
        validate(cfg)
        check_engine(cfg)
        # No stop strings: the bench's contestants all stop at EOS or max_new_tokens.
        engine = build_engine(cfg, types.SimpleNamespace(stop_strings=[]))
        k = int(cfg.drafter.k) if uses_drafter(cfg) else 0
        rule = rule_class(cfg.method.name)  # None: a method no rule of the package claims
        lossless = rule is not None and rule.lossless
        self.contestants[name] = Contestant(name, True, lossless, k, f"engine={cfg.engine.name}: {overrides}", engine)
        self.comparisons.append((name, configs.TARGET_ALONE, f"{name} (engine={cfg.engine.name}): vs our target alone"))

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

        def ours(name: str, k: int, describe: str, engine: HFEngine) -> None:
            if name in names:  # the rule says whether its output is the target's own (Verifier.lossless)
                out[name] = Contestant(name, True, type(engine.verifier).lossless, k, describe, engine)

        def theirs(name: str, k: int, describe: str, engine: Engine) -> None:
            if name in names:  # transformers' greedy generate(), with or without drafts: the target's own tokens
                out[name] = Contestant(name, False, True, k, describe, engine)

        ours(configs.TARGET_ALONE, 0, "our loop, target alone", self._ours(TargetAlone(), None))
        theirs(configs.HF_AR, 0, "transformers generate(), greedy", self._hf())
        ours(configs.SPD, a.k, f"our SPD, draft model, K={a.k}", self._ours(SPD(), ModelDrafter(d, k=a.k)))
        theirs(configs.HF_ASSIST, a.k, f"HF assisted, K={a.k} constant, no confidence stop", self._hf(assistant="constant"))
        theirs(configs.HF_ASSIST_DYN, a.k, f"HF assisted, K={a.k} heuristic, confidence {a.hf_confidence}",
               self._hf(assistant="heuristic"))
        pld = PromptLookupDrafter(k=a.pld_k, max_ngram=a.pld_max_ngram)
        ours(configs.PLD, a.pld_k, f"our prompt lookup, K={a.pld_k}, n-gram<={a.pld_max_ngram}", self._ours(SPD(), pld))
        theirs(configs.HF_PLD, a.pld_k, f"HF prompt lookup, K={a.pld_k}, n-gram<={a.pld_max_ngram}",
               self._hf(prompt_lookup=a.pld_k))
        fly_family = {configs.FLY, configs.FLY_MLA, configs.FLY_MLA_HF}
        mla_family = {configs.FLY_MLA, configs.FLY_MLA_HF, configs.SPD_MLA}
        FLy = self._optional("loosespec_bench.verifiers.fly", "FLy") if fly_family & set(names) else None
        MLA = self._optional("loosespec_bench.drafters.mla", "MLADrafter") if mla_family & set(names) else None
        DropMatch = self._optional("loosespec_bench.verifiers.dropmatch", "DropMatch") if configs.DROPMATCH in names else None
        if MLA is not None:
            # The same greedy draft as ModelDrafter (the draft model checks prompt-lookup guesses
            # and keeps only its own argmax tokens), in fewer draft forwards: lossless SPD, same
            # acceptance, less drafting time. Only bf16 near-ties of batched vs 1-token draft
            # forwards can change a draft token, and the exact rule still decides every output.
            ours(configs.SPD_MLA, a.k, f"our SPD, draft model sped up by lookup (MLA), K={a.k}",
                self._ours(SPD(), MLA(d, k=a.k)))
        if FLy is not None:
            fly_rule = FLy(theta=a.fly_theta, window=a.fly_window)
            ours(configs.FLY, a.fly_k, f"FLy (theta {a.fly_theta}, W {a.fly_window}), draft model, K={a.fly_k}",
                self._ours(fly_rule, ModelDrafter(d, k=a.fly_k), record=True))
            if MLA is not None:
                ours(configs.FLY_MLA, a.fly_k, f"FLy + MLA, K={a.fly_k}",
                    self._ours(FLy(theta=a.fly_theta, window=a.fly_window), MLA(d, k=a.fly_k), record=True))
                # transformers-style lookup: no dummy guess, guesses cut to what can be kept, a
                # plain 1-token step while nothing matches (cheap with a quantized draft).
                ours(configs.FLY_MLA_HF, a.fly_k, f"FLy + MLA (lookup=hf), K={a.fly_k}",
                    self._ours(FLy(theta=a.fly_theta, window=a.fly_window), MLA(d, k=a.fly_k, lookup="hf"), record=True))
        if DropMatch is not None:
            ours(configs.DROPMATCH, a.k, f"DropMatch (js, 5 paths, p 0.3), draft model, K={a.k}",
                self._ours(DropMatch(lm_head_batch=a.dm_lm_head_batch), ModelDrafter(d, k=a.k), record=True))
        if {configs.EAGLE3, configs.EAGLE3_TREE} & set(names):
            # The same head (the embedded pair's CPU-trained one; random on --tiny) drafts a chain
            # of K and EAGLE's dynamic tree (official total_token / depth / top_k by default).
            from loosespec_bench.drafters import Eagle3Drafter

            head = a.eagle3_head or ("random" if a.tiny else os.path.expanduser(
                os.environ.get("LOOSESPEC_EAGLE3_DIR", "~/.cache/loosespec_bench/eagle3") + "/qwen2.5-coder-1.5b-instruct"))
            if head != "random" and not os.path.isdir(head):
                for name in (configs.EAGLE3, configs.EAGLE3_TREE):
                    self.unavailable[name] = f"no EAGLE head at {head} (python -m loosespec_bench.train.eagle3, or --eagle3-head)"
            else:
                tm = self.target.model
                ours(configs.EAGLE3, a.k, f"our SPD, EAGLE head chain, K={a.k}",
                    self._ours(SPD(), Eagle3Drafter(tm, head, k=a.k)))
                tree = Eagle3Drafter(tm, head, tree=True, total_token=a.tree_total, depth=a.tree_depth, top_k=a.tree_top_k)
                ours(configs.EAGLE3_TREE, tree.k,
                    f"our SPD, EAGLE dynamic tree ({a.tree_total} tokens, depth {a.tree_depth}, top-{a.tree_top_k}), same head",
                    self._ours(SPD(), tree, record=True))
        if configs.LOOKAHEAD in names:
            from loosespec_bench.drafters.lookahead import LookaheadDrafter

            la = LookaheadDrafter(k=a.la_level - 1, window=a.la_window, guess_set=a.la_guess)
            ours(configs.LOOKAHEAD, la.k, f"our Lookahead (N {a.la_level}, W {a.la_window}, G {a.la_guess})",
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
        from loosespec_bench.kv import new_cache

        T, D = self.target.model, self.draft.model
        times: dict[str, list[float]] = {}
        with torch.inference_mode(), cpu_fast_paths(T, D):
            caches = {}
            for name, m in (("target", T), ("draft", D)):
                caches[name] = new_cache(m.config)  # the loop's in-place cache: the loop's costs
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

