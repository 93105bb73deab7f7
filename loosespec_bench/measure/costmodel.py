"""A cost model for speculative decoding: predicted speedup from measured costs and acceptance.

One verification step with a draft of K tokens costs, in units of one target 1-token forward,

    cost = v(K) + c * F            (+ o, loop overhead, optional)

  c     draft/target cost ratio: time of one draft forward / time of one target 1-token forward;
  F     draft forwards per step (K for a draft model, fewer for MLA, 0 for prompt lookup);
  v(K)  verification-cost factor: time of the target's (K+1)-token forward / its 1-token
        forward (1 on a GPU at small K, > 1 on a CPU, where more tokens cost more compute);
  o     per-step overhead (rule, rollback, bookkeeping) in the same unit, default 0.

and yields E tokens, with per-position acceptance rates alpha_i = P(d_i accepted | d_1..d_{i-1}
accepted, d_i drafted):

    E = 1 + sum_{i=1..K} prod_{j<=i} alpha_j          (the 1 is the correction / bonus token)

Target alone makes 1 token per (1 + o_ar). Predicted speedup = E / cost * (1 + o_ar), which for
v = 1 and o = 0 is the classical E / (1 + c K) (Leviathan et al. 2023, with alpha constant:
E = (1 - alpha^{K+1}) / (1 - alpha)).

`project` re-uses measured acceptance rates at another scale: published cost ratios (e.g. an
8B draft for a 70B target, c ~ 0.1..0.15 on a GPU) and verification factors are inputs here,
never constants of this module.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

from ..errors import ConfigError


def acceptance_rates(
    drafted: Sequence[int], accepted: Sequence[int], k: int | None = None, *, short_as_reject: bool = False
) -> list[float | None]:
    """Per-position acceptance rates from per-step (drafted, accepted) counts.

    alpha_i (1-based i) = #steps that accepted >= i / #steps that reached position i, i.e.
    drafted >= i and accepted >= i - 1. A position no step reached has rate None.
    short_as_reject: a step whose draft stopped before position i (prompt lookup without a
    match, MLA...) counts as a rejection there instead of being left out; then
    expected_tokens(rates) = 1 + mean accepted, the drafter's real yield per step.
    k: number of positions to report (default: the longest draft).
    """
    if len(drafted) != len(accepted):
        raise ValueError("drafted and accepted must have one entry per step")
    k = max(drafted, default=0) if k is None else k
    rates: list[float | None] = []
    for i in range(1, k + 1):
        reached = sum(1 for d, a in zip(drafted, accepted) if (short_as_reject or d >= i) and a >= i - 1)
        taken = sum(1 for d, a in zip(drafted, accepted) if d >= i and a >= i)
        rates.append(taken / reached if reached else None)
    return rates


def expected_tokens(rates: Sequence[float | None]) -> float:
    """E = 1 + sum_i prod_{j<=i} alpha_j: expected tokens per step (bonus/correction included).

    A None rate (position never reached) ends the sum there: nothing past it is predicted.
    """
    total, survive = 1.0, 1.0
    for r in rates:
        if r is None:
            break
        if not 0.0 <= r <= 1.0:
            raise ValueError(f"acceptance rate {r!r} is not in [0, 1]")
        survive *= r
        total += survive
    return total


def step_cost(c: float, k: int, *, verify_factor: float = 1.0, draft_forwards: float | None = None, overhead: float = 0.0) -> float:
    """Cost of one step in target 1-token forwards: verify_factor + c * F + overhead (F = K by default)."""
    f = k if draft_forwards is None else draft_forwards
    if c < 0 or f < 0 or verify_factor <= 0 or overhead < 0:
        raise ValueError("costs must be non-negative (verify_factor > 0)")
    return verify_factor + c * f + overhead


def predicted_speedup(
    rates: Sequence[float | None],
    c: float,
    k: int | None = None,
    *,
    verify_factor: float = 1.0,
    draft_forwards: float | None = None,
    overhead: float = 0.0,
    baseline_overhead: float = 0.0,
) -> float:
    """E / (v + c F + o) * (1 + o_ar): speedup over the target alone, both decode-only.

    rates: per-position acceptance rates (only the first k are used; k defaults to len(rates)).
    """
    k = len(rates) if k is None else k
    if k > len(rates):
        raise ValueError(f"k={k} but only {len(rates)} acceptance rates are given")
    e = expected_tokens(list(rates)[:k])
    return e * (1.0 + baseline_overhead) / step_cost(c, k, verify_factor=verify_factor, draft_forwards=draft_forwards, overhead=overhead)


@dataclass
class Measured:
    """What one benchmark run measures (all times in seconds, decode only)."""

    target_forward_s: float  # one target 1-token forward (target alone: target phase / steps)
    draft_forward_s: float  # one draft forward (draft phase / draft forwards), 0 without a model
    verify_forward_s: float  # one target (K+1)-token forward (method's target phase / steps)
    rates: list[float | None]  # per-position acceptance rates
    k: int
    draft_forwards_per_step: float | None = None  # None: K
    overhead_s: float = 0.0  # per-step time outside draft and target forwards (method)
    baseline_overhead_s: float = 0.0  # per-step time outside the forward (target alone)

    @property
    def c(self) -> float:
        return self.draft_forward_s / self.target_forward_s

    @property
    def verify_factor(self) -> float:
        return self.verify_forward_s / self.target_forward_s

    def speedup(self, *, with_overhead: bool = True) -> float:
        return predicted_speedup(
            self.rates,
            self.c,
            self.k,
            verify_factor=self.verify_factor,
            draft_forwards=self.draft_forwards_per_step,
            overhead=self.overhead_s / self.target_forward_s if with_overhead else 0.0,
            baseline_overhead=self.baseline_overhead_s / self.target_forward_s if with_overhead else 0.0,
        )


def extend_rates(rates: Sequence[float | None], k: int) -> list[float]:
    """Acceptance rates for K positions from measured ones: measured where available, then the
    last measured rate repeated (a geometric tail), for projecting to a longer draft."""
    out: list[float] = []
    for r in list(rates)[:k]:
        if r is None:  # no step got this far: everything after is extrapolated
            break
        out.append(float(r))
    if not out:
        raise ValueError("no measured acceptance rate to extend")
    return out + [out[-1]] * (k - len(out))


@dataclass
class Projection:
    k: int
    c: float
    verify_factor: float
    expected_tokens: float
    speedup: float


def project(
    rates: Sequence[float | None],
    *,
    c: float,
    k: int,
    verify_factor: float = 1.0,
    draft_forwards: float | None = None,
) -> Projection:
    """Speedup at another scale from acceptance rates and a published (or assumed) cost ratio.

    Example: the per-position rates measured on the CPU pair, re-costed for an 8B draft and a 70B
    target on a GPU with c = 0.12 and v = 1.0 (all inputs; pass what the source you cite says).
    Rates past the measured K repeat the last measured rate (see extend_rates).
    """
    r = extend_rates(rates, k)
    e = expected_tokens(r)
    s = predicted_speedup(r, c, k, verify_factor=verify_factor, draft_forwards=draft_forwards)
    return Projection(k=k, c=c, verify_factor=verify_factor, expected_tokens=e, speedup=s)


def best_k(
    rates: Sequence[float | None],
    *,
    c: float,
    k_max: int,
    verify_factor: float | Sequence[float] = 1.0,
) -> Projection:
    """The draft length in 1..k_max with the highest projected speedup.

    verify_factor: one value for every K, or a sequence whose entry K-1 is v(K).
    """
    best: Projection | None = None
    for k in range(1, k_max + 1):
        v = verify_factor if isinstance(verify_factor, (int, float)) else verify_factor[k - 1]
        p = project(rates, c=c, k=k, verify_factor=float(v))
        if best is None or p.speedup > best.speedup:
            best = p
    assert best is not None, "k_max must be >= 1"
    return best


# ---- the planner's assumptions (plan.py's cost of a job; report/claims/decide.py's cost of an n) --------
# Assumed decode rate of the target alone (new tokens/s, batch 1, HF transformers, bf16) by
# pair name: memory-bandwidth bound, one GPU busy at a time when a model is split by layers
# (H100-class: 3.3 TB/s; ~50-70% of the roofline reached by eager PyTorch).
QWEN25_CODER_15B_CPU_TPS = 6.0  # the embedded 1.5B target on 2 CPU cores (make run)
TARGET_TPS = {
    "llama31-8b-70b": 12.0,       # 141 GB of weights per token
    "qwen3-4b-32b": 20.0,         # 66 GB
    "llama31-8b-405b": 3.0,       # 811 GB (bf16); ~5 in fp8
    "qwen2.5-coder-0.5b-1.5b": QWEN25_CODER_15B_CPU_TPS,
    "smollm2-135m-to-qwen2.5-coder-1.5b": QWEN25_CODER_15B_CPU_TPS,  # the same target, a cross-family draft
    "tiny": 300.0,
}
DEFAULT_TPS = 10.0
# TARGET_TPS holds bf16 rates. A float32 pair reads twice the weight bytes per token; on the CPU
# (memory-bound) the embedded target's 1-row forward measured 226 ms in float32 against 135 ms in
# bf16 (calibrate.py and bench.forward_cost on the same 2-core machine, 2026-12-04/05): 1.67x.
FLOAT32_CPU_SLOWDOWN = 1.67
# Model loading per job, minutes (weights from a shared file system into GPU memory).
LOAD_MIN = {"llama31-8b-70b": 10.0, "qwen3-4b-32b": 5.0, "llama31-8b-405b": 30.0}
DEFAULT_LOAD_MIN = 1.0
# Assumed speedup over the target alone: each rule declares its paper's reported figure on its class
# (Verifier.assumed_speedup, e.g. FLy's, by pair name); the planner passes the class here.
ANY_PAIR = "*"  # the key of a rule's figure for every pair it names no figure for


def assumed_speedup(rule: Any, pair: str) -> float:
    """The planner's assumed speedup over the target alone of `rule` (a rule class, as
    verifiers.rule_class returns it) on `pair` (a pair name): the figure the class itself declares
    for that pair, else its ANY_PAIR figure, else 1.0 (no faster than the target alone: the target
    alone itself, exact SPD's 1.02x, a rule without a reported figure, or a method no class claims).
    The class's own declaration only: a subclass is another rule (DropMatch + AutoJudge is not
    DropMatch) and states its own figure or none."""
    declared = vars(rule).get("assumed_speedup") if isinstance(rule, type) else None
    if not declared:
        return 1.0
    return float(declared.get(pair, declared.get(ANY_PAIR, 1.0)))


# ---- where a decoder's weight work sits: the LM head's share (DropMatch's cost projected) -------
# DropMatch re-runs the target's LM head N times and compares the N vocabulary-wide predictions:
# its cost scales with the head (hidden x vocab), the target's forward with the whole model. On
# the embedded 1.5B target the head is ~15% of the weight work per token, on a 70B ~1.5%, so an
# overhead measured here overstates the same rule's share on the papers' targets ~10-fold.

def weight_macs_per_token(cfg: dict[str, Any]) -> tuple[int, int] | None:
    """(body, head): multiply-accumulates per token in a dense decoder's weight matmuls, from its
    config.json fields; None when a field is missing (not a llama-style decoder).

    body = layers x (q and o: 2 h^2; k and v: 2 h (kv_heads x head_dim); gate, up and down:
    3 h I); head = h x vocab. Attention over the context (scores and values) is left out: it
    holds no weights, and at the contexts measured here it is a few percent of the body.
    """
    try:
        h, inter, layers = int(cfg["hidden_size"]), int(cfg["intermediate_size"]), int(cfg["num_hidden_layers"])
        heads, vocab = int(cfg["num_attention_heads"]), int(cfg["vocab_size"])
        kv_heads = int(cfg.get("num_key_value_heads") or heads)
        head_dim = int(cfg.get("head_dim") or h // heads)
    except (KeyError, TypeError, ValueError):
        return None
    body = layers * (2 * h * h + 2 * h * kv_heads * head_dim + 3 * h * inter)
    return body, h * vocab


def lm_head_share(cfg: dict[str, Any]) -> float | None:
    """The LM head's share of a decoder's weight work per token (weight_macs_per_token)."""
    macs = weight_macs_per_token(cfg)
    return None if macs is None else macs[1] / (macs[0] + macs[1])


# ---- the calibrated cost model: work counts x measured per-forward costs (issue 46 item 2) -------
# A run's work counts (work.py) depend only on its tokens; a calibration (python -m
# loosespec_bench.calibrate) measures on one machine what each unit of work costs. Their product
# is a predicted time per generation, and the ratio of two predicted throughputs a predicted
# speedup that carries no timing noise of the run itself (only the calibration's).


# The longest forward (rows) the physical check of a calibration covers: longer than any prompt the
# harness runs (its longest contexts are NIAH's, a few tens of thousands of tokens).
MAX_PRICED_ROWS = 1 << 17


@dataclass
class ForwardCost:
    """Latency of one forward of a network, in seconds, as a function of its rows, the rows its
    LM head runs on, and the cached context:

        t(rows, lm_rows, ctx) = body(rows) + lm_head_row_s * lm_rows + (ctx_s + ctx_row_s * rows) * (ctx - ctx0)

ctx_row_s is attention's share (per row and cached position); ctx_s the per-forward share that
grows with the context but not with the rows (the causal mask over ctx + rows positions, the
cache's bookkeeping). Read as one per-row slope, that per-forward share, measured at 1 row,
priced a 128-row prefill of the tiny pair below nothing; 0 in calibrations written before it.
    body(rows): measured at context ctx0 with the LM head on one row (that row's head cost
    removed), linear between the measured row counts `rows` and extrapolated linearly beyond
    the last two (a forward's cost is not linear in its rows on a CPU: kernels change with the
    shape, so the cost model reads the rows histogram, not the rows' sum)."""

    rows: list[int]
    body_s: list[float]
    ctx0: int
    ctx_row_s: float
    lm_head_row_s: float
    ctx_s: float = 0.0

    def body(self, rows: int) -> float:
        xs, ys = self.rows, self.body_s
        if len(xs) == 1:
            return ys[0] * rows / xs[0]
        if rows <= xs[0]:
            i = 0
        elif rows >= xs[-1]:
            i = len(xs) - 2
        else:
            i = next(j for j in range(len(xs) - 1) if xs[j] <= rows <= xs[j + 1])
        x0, x1, y0, y1 = xs[i], xs[i + 1], ys[i], ys[i + 1]
        return max(0.0, y0 + (y1 - y0) * (rows - x0) / (x1 - x0))

    def forward_s(self, rows: int, lm_rows: int, ctx: int) -> float:
        return self.body(rows) + self.lm_head_row_s * lm_rows + (self.ctx_s + self.ctx_row_s * rows) * (ctx - self.ctx0)

    def role_s(self, role: dict[str, Any]) -> float:
        """Predicted seconds of one role's forwards from its counts (work.new_role's fields)."""
        body = sum(int(n) * self.body(int(r)) for r, n in (role.get("rows_hist") or {}).items())
        attn = (self.ctx_row_s * (role.get("ctx_rows", 0) - self.ctx0 * role.get("rows", 0))
                + self.ctx_s * (role.get("ctx", 0) - self.ctx0 * role.get("forwards", 0)))
        return body + self.lm_head_row_s * role.get("lm_rows", 0) + attn

    def nonphysical(self) -> str | None:
        """Which term prices some forward below nothing (its text, naming the field), or None.

        A forward of `rows` rows over ctx cached positions costs body(rows) + (ctx_s + ctx_row_s x
        rows) x (ctx - ctx0), LM head aside. Below ctx0 (a prefill from an empty cache: ctx = 0) the
        context term is negative: it takes away the context work over the ctx0 positions the body
        was measured with, which is physical only while that work, (ctx_s + ctx_row_s x rows) x
        ctx0, is at most the whole body measured there. A context slope measured too steep breaks that (issue
        74: a calibration of the tool's own priced a prefill below zero, and a run's predicted
        speedup came out at -0.69x). Checked at 1 row, at every measured row count and at
        MAX_PRICED_ROWS: the body is linear between and beyond them, so these bound every forward up
        to that many rows; and past the last measured rows the body must not fall (a longer prefill
        never costs less)."""
        per_row, per_forward = self.ctx_row_s * self.ctx0, self.ctx_s * self.ctx0
        if len(self.rows) > 1 and self.body_s[-1] < self.body_s[-2]:
            return (f"body_s falls from {self.body_s[-2]:.4g} s at {self.rows[-2]} rows to {self.body_s[-1]:.4g} s at "
                    f"{self.rows[-1]}: extrapolated past them, a longer forward would cost less, and at enough rows nothing")
        for rows in sorted({1, *self.rows, MAX_PRICED_ROWS}):
            body = self.body(rows)
            if body < per_forward + per_row * rows:
                with_fwd = f" (with ctx_s={self.ctx_s:.4g} s per forward)" if self.ctx_s else ""
                return (f"ctx_row_s={self.ctx_row_s:.4g} s{with_fwd} prices the attention over its ctx0={self.ctx0} cached positions at "
                        f"{per_forward + per_row * rows:.4g} s for {rows} rows, more than the whole body of a {rows}-row forward "
                        f"({body:.4g} s): a forward over a shorter context (a prefill) would cost less than nothing")
        return None

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "ForwardCost":
        return cls(rows=[int(x) for x in d["rows"]], body_s=[float(x) for x in d["body_s"]], ctx0=int(d["ctx0"]),
                   ctx_row_s=float(d["ctx_row_s"]), lm_head_row_s=float(d["lm_head_row_s"]), ctx_s=float(d.get("ctx_s", 0.0)))


@dataclass
class Calibration:
    """One machine's costs for one pair (python -m loosespec_bench.calibrate writes it).

    extra_lm_head_row_s: one extra LM-head row with the rule's vocabulary-wide work on it
    (DropMatch: one dropout path at one position, head + softmaxes + JS); lookup_s: one prompt
    lookup (PLD's, MLA's inner ones); step_overhead_s: a decode step's time outside the target's
    and the drafter's forwards and the rows' verification work (rule, rollback, bookkeeping),
    from a target-alone generation; verify_row_s: per verification row (target_verify's
    lm_rows), its logits to float32, a softmax and an argmax."""

    target: ForwardCost
    draft: ForwardCost | None
    extra_lm_head_row_s: float
    lookup_s: float
    step_overhead_s: float
    signature: dict[str, Any]
    # A verification row's vocabulary-wide work after the forward (its logits to float32, a
    # softmax and an argmax: what every rule does per row); 0 in calibrations from before it.
    verify_row_s: float = 0.0
    # The calibration's check against the loop it prices: a timed target-alone decode over its
    # prediction ({"target_alone_decode_over_predicted": r}); empty in calibrations from before it.
    check: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        refuse_nonphysical("the calibration", self.target, self.draft)

    def predict_s(self, work: dict[str, Any]) -> float:
        """Predicted seconds (prefill + decode) of a generation with these work counts."""
        t = self.target.role_s(work["target_prefill"]) + self.target.role_s(work["target_verify"])
        for role in ("draft_prefill", "draft"):
            if (work.get(role) or {}).get("forwards"):
                if self.draft is None:
                    raise ValueError("the counts have draft forwards but the calibration has no draft model")
                t += self.draft.role_s(work[role])
        t += self.extra_lm_head_row_s * work["lm_head_extra"]["rows"]
        t += self.lookup_s * work.get("lookups", 0)
        t += self.step_overhead_s * work.get("steps", 0)
        t += self.verify_row_s * work["target_verify"].get("lm_rows", 0)
        return t

    def to_dict(self) -> dict[str, Any]:
        from dataclasses import asdict

        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any], where: str = "the calibration") -> "Calibration":
        """The stored form read back; `where` (its file) names it in the refusal of costs that price
        a forward below nothing (refuse_nonphysical)."""
        target = ForwardCost.from_dict(d["target"])
        draft = ForwardCost.from_dict(d["draft"]) if d.get("draft") else None
        refuse_nonphysical(where, target, draft)
        return cls(
            target=target, draft=draft,
            extra_lm_head_row_s=float(d["extra_lm_head_row_s"]), lookup_s=float(d["lookup_s"]),
            step_overhead_s=float(d["step_overhead_s"]), signature=dict(d.get("signature") or {}),
            verify_row_s=float(d.get("verify_row_s", 0.0)),
            check={str(k): float(v) for k, v in (d.get("check") or {}).items()},
        )


def refuse_nonphysical(where: str, target: ForwardCost, draft: ForwardCost | None) -> None:
    """One ConfigError naming `where` and the term when a network's costs price some forward below
    nothing (ForwardCost.nonphysical): such a calibration is never used (find_calibration gives
    the run no prediction and says why), nor stored (calibrate reads its result back first)."""
    for role, cost in (("target", target), ("draft", draft)):
        why = cost.nonphysical() if cost is not None else None
        if why:
            raise ConfigError(f"{where}: {role}.{why}; this calibration is not used (measure it again on a quiet "
                              "machine: python -m loosespec_bench.calibrate --repeats 9)")
