"""`run(cfg) -> summary`: the whole experiment for one resolved config.

Kept free of Hydra's decorator so tests (and notebooks) call it with a composed config.
"""

from __future__ import annotations

import datetime
import logging
import platform
import subprocess
import zlib
from pathlib import Path
from typing import Any

import torch
from omegaconf import DictConfig, OmegaConf
from tqdm.auto import tqdm

from . import __version__, omp
from .build import build_drafter, build_task, build_verifier
from .config import run_id, uses_drafter, validate
from .decoding import GenerationOutput, generate
from .metrics import sample_metrics, summarize
from .models import LoadedModel, load_model
from .models.loading import load_options
from .sinks import RunFolder
from .sinks.trackers import build_tracker
from .stats import retention_summary
from .tasks import Sample, Task
from .verifiers.spd import SPD

log = logging.getLogger(__name__)


def encode_prompt(tokenizer: Any, sample: Sample, use_chat_template: bool) -> tuple[str, list[int]]:
    """The exact text given to the tokenizer (after the chat template) and its ids."""
    return encode_messages(tokenizer, sample.messages, use_chat_template)


def encode_messages(tokenizer: Any, messages: list[dict[str, str]], use_chat_template: bool) -> tuple[str, list[int]]:
    """encode_prompt for any message list. A final assistant message is an answer prefix that
    the model continues (lm-eval's gen_prefix: HumanEval instruct, NIAH's answer prefix)."""
    if use_chat_template and getattr(tokenizer, "chat_template", None):
        prefill = messages[-1]["role"] == "assistant"
        text = tokenizer.apply_chat_template(
            messages, add_generation_prompt=not prefill, continue_final_message=prefill, tokenize=False
        )
    else:
        text = "\n\n".join(m["content"] for m in messages)
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
    return f"{platform.machine()} CPU, {torch.get_num_threads()} threads, OMP_WAIT_POLICY={omp.describe()}"


class Runner:
    """Holds the loaded models and built rules for one config; runs one sample at a time."""

    def __init__(self, cfg: DictConfig, task: Task) -> None:
        self.cfg = cfg
        self.task = task
        pair = cfg.pair
        self.target = load_model(pair.target.path, dtype=pair.dtype, device=pair.device, **load_options(pair.target))
        self.drafter = build_drafter(cfg, self.target)  # None for method=ar
        self.verifier = build_verifier(cfg)
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
            max_new_tokens=max_new or self.max_new,
            temperature=float(self.cfg.generation.temperature),
            eos_token_ids=self.eos,
            stop_fn=self.stop_fn,
            generator=gen,
            record_steps=bool(self.cfg.record_steps) and method,
        )

    def warmup(self, prompt_ids: torch.Tensor) -> None:
        """Untimed short runs: first-call allocations and lazy inits must not bill sample 1."""
        for method in (True, False):
            self._generate(prompt_ids, method=method, seed=0, max_new=8)

    def _decode(self, gen: GenerationOutput) -> str:
        text = self.target.tokenizer.decode(gen.new_tokens, skip_special_tokens=True)
        return cut_at_stop(text, self.task.stop_strings)

    def _side(self, turns: list[tuple[GenerationOutput, int, str]], sample: Sample) -> dict[str, Any]:
        """One contestant's record part from its (output, prompt length, text) per turn:
        metrics summed over turns, the score over all turns' answers."""
        gen = turns[0][0] if len(turns) == 1 else merge_turns([g for g, _, _ in turns])
        side = {
            "output_text": turns[-1][2],
            "output_ids": gen.new_tokens,
            "metrics": sample_metrics(gen, sum(n for _, n, _ in turns)),
            "score": self.task.score_turns(sample, [t for _, _, t in turns]),
        }
        if len(turns) > 1:
            side["turns"] = [{"output_text": t, "metrics": sample_metrics(g, n)} for g, n, t in turns]
        return side

    def run_sample(self, sample: Sample, index: int) -> dict[str, Any]:
        chat = bool(self.cfg.chat_template)
        text, ids = encode_prompt(self.target.tokenizer, sample, chat)
        seed = (int(self.cfg.seed) * 1_000_003 + zlib.crc32(sample.id.encode())) % 2**63
        paired = self.cfg.baseline == "paired" and self.cfg.method.name != "ar"
        # Alternate which contestant runs first so slow drift of the machine cancels out.
        order = (True, False) if index % 2 == 0 else (False, True)
        contestants = order if paired else (True,)
        # Multi-turn samples: each contestant's conversation goes on with its own answers.
        convs = {method: list(sample.messages) for method in contestants}
        turns: dict[bool, list[tuple[GenerationOutput, int, str]]] = {method: [] for method in contestants}
        for t, user in enumerate([None, *sample.followups]):
            for method in contestants:
                if user is None:
                    turn_ids = ids
                else:
                    convs[method] += [{"role": "assistant", "content": turns[method][-1][2]}, {"role": "user", "content": user}]
                    turn_ids = encode_messages(self.target.tokenizer, convs[method], chat)[1]
                gen = self._generate(torch.tensor(turn_ids, dtype=torch.long), method=method, seed=seed + t)
                turns[method].append((gen, len(turn_ids), self._decode(gen)))
        rec = {
            "id": sample.id,
            "meta": sample.meta,
            "reference": sample.reference,
            "prompt_text": text,
            "prompt_ids": ids,
            **self._side(turns[True], sample),
        }
        if paired:
            rec["baseline"] = self._side(turns[False], sample)
        steps = [
            {**step, "turn": t} if sample.followups else step
            for t, (gen, _, _) in enumerate(turns[True])
            for step in gen.step_records
        ]
        if steps:
            rec["steps"] = steps
        return rec


def merge_turns(gens: list[GenerationOutput]) -> GenerationOutput:
    """One multi-turn sample's outputs as one: tokens, steps and times summed over turns."""
    phase: dict[str, float] = {}
    for g in gens:
        for name, sec in g.phase_s.items():
            phase[name] = phase.get(name, 0.0) + sec
    return GenerationOutput(
        new_tokens=[tok for g in gens for tok in g.new_tokens],
        stop_reason=gens[-1].stop_reason,
        drafted=[x for g in gens for x in g.drafted],
        accepted=[x for g in gens for x in g.accepted],
        emitted=[x for g in gens for x in g.emitted],
        prefill_s=sum(g.prefill_s for g in gens),
        decode_s=sum(g.decode_s for g in gens),
        phase_s=phase,
    )


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
    tracker = build_tracker(cfg)  # None for logger=none; a SafeTracker never raises
    if tracker:
        tracker.start(cfg, folder.path, folder.path.name)
    try:
        if todo:
            runner = Runner(cfg, task)
            if cfg.warmup:
                _, first = todo[0]
                runner.warmup(torch.tensor(encode_prompt(runner.target.tokenizer, first, bool(cfg.chat_template))[1]))
            bar = tqdm(todo, desc=f"{cfg.method.name}/{task.name}", unit="sample", disable=not cfg.progress)
            for index, sample in bar:
                rec = runner.run_sample(sample, index)
                folder.append(rec)  # on disk first: a tracker failure can never lose it
                if tracker:
                    tracker.log_sample(rec)
                done[rec["id"]] = rec
                bar.set_postfix(tau=f"{rec['metrics']['tau']:.2f}")
    except BaseException:
        if tracker:
            tracker.close()  # the tracker's run is marked failed; finished samples are on disk
        raise
    finally:
        folder.close()

    records = [done[s.id] for s in samples if s.id in done]
    quality = task.aggregate(records)
    baseline_quality = task.aggregate([{**r, **r["baseline"]} for r in records if r.get("baseline")])
    summary = summarize(records, quality, baseline_quality)
    # Retention with its paired-bootstrap interval (stats.py); "retention" itself comes from
    # summarize when the task reports accuracy, else (e.g. judge ratings) from the pairs here.
    ci = retention_summary(records, task.quality_key, seed=int(cfg.seed))
    if ci and summary.get("retention") is None:
        summary["retention"] = ci["retention_paired"]
    summary.update(ci)
    summary.update(
        method=cfg.method.name,
        drafter=cfg.drafter.name if uses_drafter(cfg) else None,
        # A tree's K is its longest path (depth + 1), the most tokens one step can accept.
        k=(int(cfg.drafter.depth) + 1 if cfg.drafter.get("tree") else int(cfg.drafter.k)) if uses_drafter(cfg) else 0,
        tree=bool(uses_drafter(cfg) and (cfg.drafter.get("tree") or cfg.drafter.name == "lookahead")),
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
    if tracker:
        tracker.finish(summary, records)
        tracker.close()
    print(format_summary(summary), flush=True)
    return summary


def _fmt(v: Any, spec: str = ".3f") -> str:
    if v is None:
        return "-"
    return format(v, spec) if isinstance(v, float) else str(v)


def _ci(s: dict[str, Any]) -> str:
    """The retention's interval as ' [low, high] 95% CI', when the paired bootstrap gave one."""
    if s.get("retention_ci_low") is None:
        return ""
    return f" [{s['retention_ci_low']:.3f}, {s['retention_ci_high']:.3f}] {s['retention_ci_level']:.0%} CI"


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
        ("accuracy retention", _fmt(s.get("retention")) + _ci(s)),
        ("identical to target alone", _fmt(s.get("identical_to_target"))),
        ("loose accepts / mismatches", f"{s['loose_accepts']} / {s['mismatches']}" if s.get("mismatches") is not None else "-"),
        ("tau without loose accepts", _fmt(s.get("tau_without_loose"), ".2f")),
    ]
    width = max(len(a) for a, _ in rows)
    lines = ["", "=" * (width + 24)] + [f"{a:<{width}}  {b}" for a, b in rows] + ["=" * (width + 24)]
    if s.get("speedup_method"):
        lines.append(f"speedup = {s['speedup_method']}")
    lines.append(f"tau = {s['tau_definition']}")
    lines.append(f"results: {s['run_dir']}")
    return "\n".join(lines)
