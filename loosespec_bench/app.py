"""`run(cfg) -> summary`: the whole experiment for one resolved config.

Kept free of Hydra's decorator so tests (and notebooks) call it with a composed config.
"""

from __future__ import annotations

import datetime
import logging
import os
import platform
import subprocess
import zlib
from pathlib import Path
from typing import Any

import torch
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf
from tqdm.auto import tqdm

from . import __version__
from .config import run_id, uses_drafter, validate
from .decoding import GenerationOutput, generate
from .metrics import sample_metrics, summarize
from .models import LoadedModel, load_model
from .sinks import RunFolder
from .tasks import Sample, Task
from .verifiers.spd import SPD

log = logging.getLogger(__name__)
META_KEYS = ("name", "uses_drafter", "needs_model", "k")


def _instantiate(node: DictConfig, **kwargs: Any) -> Any:
    """hydra instantiate without the harness's own bookkeeping keys."""
    cfg = OmegaConf.to_container(node, resolve=True)
    assert isinstance(cfg, dict)
    for key in META_KEYS:
        cfg.pop(key, None)
    return instantiate(cfg, **kwargs)


def build_task(cfg: DictConfig) -> Task:
    return _instantiate(cfg.dataset)


def encode_prompt(tokenizer: Any, sample: Sample, use_chat_template: bool) -> tuple[str, list[int]]:
    """The exact text given to the tokenizer (after the chat template) and its ids."""
    if use_chat_template and getattr(tokenizer, "chat_template", None):
        text = tokenizer.apply_chat_template(sample.messages, add_generation_prompt=True, tokenize=False)
    else:
        text = "\n\n".join(m["content"] for m in sample.messages)
    # The template already holds the special tokens; adding BOS again would change the prompt.
    ids = tokenizer(text, add_special_tokens=not use_chat_template).input_ids
    return text, list(ids)


def eos_ids(loaded: LoadedModel) -> set[int]:
    ids: set[int] = set()
    for src in (loaded.tokenizer.eos_token_id, getattr(loaded.model.generation_config, "eos_token_id", None)):
        if isinstance(src, int):
            ids.add(src)
        elif src:
            ids.update(int(i) for i in src)
    return ids


def make_stop_fn(tokenizer: Any, stop_strings: list[str]):
    if not stop_strings:
        return None

    def stop_fn(new_ids: list[int]) -> bool:
        text = tokenizer.decode(new_ids, skip_special_tokens=True)
        return any(s in text for s in stop_strings)

    return stop_fn


def cut_at_stop(text: str, stop_strings: list[str]) -> str:
    cut = min((text.find(s) for s in stop_strings if s in text), default=-1)
    return text[:cut] if cut >= 0 else text


def _git_commit() -> str | None:
    try:
        return subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=Path(__file__).parent, capture_output=True, text=True, timeout=5
        ).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def _hardware(device: str) -> str:
    if device.startswith("cuda") and torch.cuda.is_available():
        return f"{torch.cuda.get_device_name(0)} x{torch.cuda.device_count()}"
    return f"{platform.machine()} CPU, {torch.get_num_threads()} threads"


class Runner:
    """Holds the loaded models and built rules for one config; runs one sample at a time."""

    def __init__(self, cfg: DictConfig, task: Task) -> None:
        self.cfg = cfg
        self.task = task
        pair = cfg.pair
        self.target = load_model(pair.target.path, dtype=pair.dtype, device=pair.device)
        self.uses_drafter = uses_drafter(cfg)
        self.drafter = None
        if self.uses_drafter:
            extra = {}
            if cfg.drafter.get("needs_model", False):
                draft = load_model(pair.draft.path, dtype=pair.dtype, device=pair.get("draft_device") or pair.device)
                extra["model"] = draft.model
            self.drafter = _instantiate(cfg.drafter, **extra)
        self.verifier = _instantiate(cfg.method)
        self.ar_verifier = SPD()
        self.eos = eos_ids(self.target)
        self.stop_fn = make_stop_fn(self.target.tokenizer, task.stop_strings)
        self.max_new = cfg.generation.max_new_tokens or task.max_new_tokens

    def _generate(self, prompt_ids: torch.Tensor, *, method: bool, seed: int, max_new: int | None = None) -> GenerationOutput:
        gen = torch.Generator().manual_seed(seed)
        return generate(
            self.target.model,
            prompt_ids,
            verifier=self.verifier if method else self.ar_verifier,
            drafter=self.drafter if method else None,
            k=int(self.cfg.drafter.k) if method and self.uses_drafter else 0,
            max_new_tokens=max_new or self.max_new,
            temperature=float(self.cfg.generation.temperature),
            eos_token_ids=self.eos,
            stop_fn=self.stop_fn,
            generator=gen,
            record_steps=bool(self.cfg.record_steps) and method,
            want_draft_probs=bool(getattr(self.verifier, "needs_draft_probs", False)),
        )

    def warmup(self, prompt_ids: torch.Tensor) -> None:
        """Untimed short runs: first-call allocations and lazy inits must not bill sample 1."""
        for method in (True, False):
            self._generate(prompt_ids, method=method, seed=0, max_new=8)

    def _side(self, gen: GenerationOutput, prompt_len: int, sample: Sample) -> dict[str, Any]:
        text = self.target.tokenizer.decode(gen.new_tokens, skip_special_tokens=True)
        text = cut_at_stop(text, self.task.stop_strings)
        return {
            "output_text": text,
            "output_ids": gen.new_tokens,
            "metrics": sample_metrics(gen, prompt_len),
            "score": self.task.score(sample, text),
        }

    def run_sample(self, sample: Sample, index: int) -> dict[str, Any]:
        text, ids = encode_prompt(self.target.tokenizer, sample, bool(self.cfg.chat_template))
        prompt = torch.tensor(ids, dtype=torch.long)
        seed = (int(self.cfg.seed) * 1_000_003 + zlib.crc32(sample.id.encode())) % 2**63
        paired = self.cfg.baseline == "paired" and self.cfg.method.name != "ar"
        # Alternate which contestant runs first so slow drift of the machine cancels out.
        order = (True, False) if index % 2 == 0 else (False, True)
        outs: dict[bool, GenerationOutput] = {}
        for method in order if paired else (True,):
            outs[method] = self._generate(prompt, method=method, seed=seed)
        rec = {
            "id": sample.id,
            "meta": sample.meta,
            "reference": sample.reference,
            "prompt_text": text,
            "prompt_ids": ids,
            **self._side(outs[True], len(ids), sample),
        }
        if paired:
            rec["baseline"] = self._side(outs[False], len(ids), sample)
        if outs[True].step_records:
            rec["steps"] = outs[True].step_records
        return rec


def run(cfg: DictConfig) -> dict[str, Any]:
    """Run (or resume) one experiment point; returns and saves its summary."""
    validate(cfg)
    if cfg.get("threads"):
        torch.set_num_threads(int(cfg.threads))
    task = build_task(cfg)
    samples = task.samples()
    folder = RunFolder(Path(cfg.paths.results_dir) / cfg.experiment_name / run_id(cfg))
    folder.write_config(OmegaConf.to_yaml(cfg, resolve=True))
    done = {r["id"]: r for r in folder.records()}
    todo = [(i, s) for i, s in enumerate(samples) if s.id not in done]
    print(
        f"[loosespec_bench] {cfg.method.name} on {task.name}: {len(samples)} samples "
        f"(dataset.limit={cfg.dataset.get('limit')}), {len(samples) - len(todo)} already done -> {folder.path}",
        flush=True,
    )
    try:
        if todo:
            runner = Runner(cfg, task)
            if cfg.warmup:
                _, first = todo[0]
                runner.warmup(torch.tensor(encode_prompt(runner.target.tokenizer, first, bool(cfg.chat_template))[1]))
            bar = tqdm(todo, desc=f"{cfg.method.name}/{task.name}", unit="sample", disable=not cfg.progress)
            for index, sample in bar:
                rec = runner.run_sample(sample, index)
                folder.append(rec)
                done[rec["id"]] = rec
                bar.set_postfix(tau=f"{rec['metrics']['tau']:.2f}")
    finally:
        folder.close()

    records = [done[s.id] for s in samples if s.id in done]
    quality = task.aggregate(records)
    baseline_quality = task.aggregate([{**r, **r["baseline"]} for r in records if r.get("baseline")])
    summary = summarize(records, quality, baseline_quality)
    summary.update(
        method=cfg.method.name,
        drafter=cfg.drafter.name if uses_drafter(cfg) else None,
        k=int(cfg.drafter.k) if uses_drafter(cfg) else 0,
        pair=cfg.pair.name,
        dataset=task.name,
        temperature=float(cfg.generation.temperature),
        seed=int(cfg.seed),
        experiment=cfg.experiment_name,
        run_dir=str(folder.path),
        harness_version=__version__,
        git_commit=_git_commit(),
        hardware=_hardware(cfg.pair.device),
        torch=torch.__version__,
        date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        tau_definition="emitted tokens / verification steps, bonus or correction token included",
    )
    folder.write_summary(summary)
    print(format_summary(summary), flush=True)
    return summary


def _fmt(v: Any, spec: str = ".3f") -> str:
    if v is None:
        return "-"
    return format(v, spec) if isinstance(v, float) else str(v)


def format_summary(s: dict[str, Any]) -> str:
    rows = [
        ("method / drafter / K", f"{s['method']} / {s.get('drafter') or '-'} / {s.get('k')}"),
        ("pair / dataset", f"{s['pair']} / {s['dataset']}"),
        ("samples", _fmt(s.get("n_samples"))),
        ("tau (tokens per target step)", _fmt(s.get("tau"), ".2f")),
        ("tokens/s (method)", _fmt(s.get("tokens_per_s"), ".2f")),
        ("tokens/s (target alone)", _fmt(s.get("baseline_tokens_per_s"), ".2f")),
        ("speedup", _fmt(s.get("speedup"), ".2f") + ("x" if s.get("speedup") else "")),
        ("speedup, median of samples", _fmt(s.get("speedup_median_of_samples"), ".2f")),
        ("accuracy (method)", _fmt(s.get("accuracy"))),
        ("accuracy (target alone)", _fmt(s.get("baseline_accuracy"))),
        ("accuracy retention", _fmt(s.get("retention"))),
        ("identical to target alone", _fmt(s.get("identical_to_target"))),
    ]
    width = max(len(a) for a, _ in rows)
    lines = ["", "=" * (width + 24)] + [f"{a:<{width}}  {b}" for a, b in rows] + ["=" * (width + 24)]
    if s.get("speedup_method"):
        lines.append(f"speedup = {s['speedup_method']}")
    lines.append(f"tau = {s['tau_definition']}")
    lines.append(f"results: {s['run_dir']}")
    return "\n".join(lines)
