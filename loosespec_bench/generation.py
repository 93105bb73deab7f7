"""What one generation returns, whichever engine produced it: the ground floor between the
engines (engines/), which generate, and the protocol above them (app, metrics), which counts.

Imports nothing from the package, so metrics and the app read an engine's output without
importing the decoding loop.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class GenerationOutput:
    new_tokens: list[int]
    stop_reason: str  # "eos" | "max_new_tokens" | "stop_string"
    # Per verification step: draft length offered, draft tokens accepted. Emitted tokens per
    # step = accepted + 1 (the correction or bonus), except where EOS/limits cut the step short.
    drafted: list[int] = field(default_factory=list)  # chain length, or tree depth
    accepted: list[int] = field(default_factory=list)
    emitted: list[int] = field(default_factory=list)
    prefill_s: float = 0.0
    decode_s: float = 0.0
    # Time per phase summed over steps (seconds): draft, target forward, rule (verify), target
    # cache rollback, commit (bookkeeping).
    phase_s: dict[str, float] = field(default_factory=dict)
    step_records: list[dict[str, Any]] = field(default_factory=list)
    # Work counts (work.py): forwards and rows per role, extra LM-head passes, lookups, emitted
    # tokens. {} where the engine cannot count them.
    work: dict[str, Any] = field(default_factory=dict)
    # Time to the first new token (prefill + the first step), seconds; None: not measured.
    ttft_s: float | None = None
    # Inter-token latency: seconds between successive emissions, one per verification step after
    # the first (a step emits its tokens at once, as a speculative engine streams one chunk per
    # step). Empty where the engine does not time its steps (batched or served runs).
    itl_s: list[float] = field(default_factory=list)
    # End-to-end latency, the request's arrival to its last token (seconds), where it differs
    # from prefill_s + decode_s: in a batch, those are the request's share of the batch's wall
    # time (throughput), this its own latency. None: prefill_s + decode_s is the latency.
    e2e_s: float | None = None
    # Serving measures of a batched engine (engines/vllm_serving.py: serving_record): the batch the
    # request ran in and its repeats' times. None at batch 1 in our loop.
    serving: dict[str, Any] | None = None

    @property
    def steps(self) -> int:
        return len(self.emitted)

    @property
    def tau(self) -> float:
        """Mean accepted length: emitted tokens / verification steps (bonus token included)."""
        return sum(self.emitted) / self.steps if self.steps else 0.0


def merge_turns(gens: list[GenerationOutput]) -> GenerationOutput:
    """One multi-turn sample's outputs as one: tokens, steps and times summed over turns
    (step records are kept per turn by the caller, so they are not merged here)."""
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
        # work: summed by the caller (work.merge_work; this floor imports nothing)
        ttft_s=gens[0].ttft_s,
        itl_s=[x for g in gens for x in g.itl_s],  # within each turn: no gap spans a user's turn
    )
