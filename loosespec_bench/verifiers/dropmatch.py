"""DropMatch: training-free dropout sampling for semantic token acceptance (arXiv 2603.03333).

The target's final hidden state h_i at each draft position comes free with the verification
forward. DropMatch re-runs only the LM head on N dropout-perturbed copies of it,
    P_i^(k) = softmax(LMHead(dropout_p(h_i))),  k = 1..N,
and reads the spread of these N predictions as the set of tokens the target would find
acceptable at position i. (The paper calls the number of paths K; here K is the draft length,
so the paths are N = n_paths.)

Criteria for a draft token d_i that is not the target's own token t_i:
  naive  accept iff d_i is the argmax of at least one path.
  js     c_i = softmax(mean_k logits_i^(k)) (centroid); accept iff
         JS(q_i, c_i) <= max_k JS(P_i^(k), c_i), i.e. the draft distribution q_i lies no
         farther from the centroid than the farthest dropout path; or (majority rule) more than
         `majority` * N paths vote for d_i.
Acceptance stops at the first position that fails; the correction is the target's token there.
The criterion is therefore only evaluated where it can change the outcome: at positions the
exact rule rejects, in order, up to the first that it fails too (lazily, one position's N paths
per LM-head call; the masks of all K positions are drawn up front so seeds reproduce).

No official code exists; the unconfirmed details are options (defaults in brackets):
  include_clean_path [False]  path 1 is the clean (no-dropout) prediction, N-1 are dropped out;
                              False: all N paths are dropped out, as the abstract words it.
  majority [0.5]              majority-rule threshold: votes for d_i > majority * N
                              ("more than half"); null disables the rule.
  q_i for drafters without probabilities (prompt lookup, MLA at T > 0): one-hot(d_i).
Exact matches (d_i == t_i) are always accepted: rejecting one would emit the same token as the
correction and only waste the rest of the draft, so DropMatch accepts a superset of SPD.

Temperature T > 0 (not specified by the paper; this harness's rule): the semantic criteria are
computed as above (the js criterion on softmax(logits / T) of the paths, matching q_i's
temperature), and a token they do not accept still gets the exact speculative-sampling test
min(1, p_i(d_i) / q_i(d_i)); the first position failing both is resampled from
norm(max(0, p_i - q_i)), and the bonus is drawn from p_{K+1}. This stays lossy even at p = 0
(the target's argmax is then accepted outright); at T = 0 and p = 0 it is exactly SPD.

The extra work (masks + batched LM head + criteria) is timed per step into
Verdict.record["dropmatch_s"], so its overhead can be reported as a fraction of decode time.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from ..errors import ConfigError
from ..measure.costmodel import ANY_PAIR
from ..params import DEFAULT, Shown, boolean, check_node, choice, declared_rules, integer, knob, optional, real
from ..sampling import GREEDY, SamplingParams, accept_exact, exact_tail, generator_device, match_vocab, sample_token, tempered_probs
from ..step import Draft, TargetScores, Verdict, sync
from .base import LooseDecision, Verifier, VerifierParams

CRITERIA = ("naive", "js")


def draw_keep_masks(
    n_drop: int, k: int, h: int, p: float, generator: torch.Generator | None, device: torch.device
) -> torch.Tensor:
    """Inverted-dropout keep masks for n_drop paths at k positions: [n_drop, k, H] bool.

    Drawn from the run's seeded generator, so a seed reproduces them. A CPU generator cannot
    draw on an accelerator: draw on its device, then move.
    """
    u = torch.rand((n_drop, k, h), generator=generator, device=generator_device(generator, device))  # [N', K, H]
    return (u >= p).to(device)


def dropout_path_logits(
    hidden: torch.Tensor,
    lm_head: Callable[[torch.Tensor], torch.Tensor],
    *,
    n_paths: int,
    p: float,
    include_clean_path: bool = False,
    clean_logits: torch.Tensor | None = None,
    generator: torch.Generator | None = None,
    keep: torch.Tensor | None = None,
) -> torch.Tensor:
    """The N stochastic predictions' logits, all paths in one LM-head matmul.

    hidden: [K, H] final hidden states at the draft positions (after the final norm, i.e. what
    the LM head reads); clean_logits: [K, vocab], the verification forward's own logits, used
    as path 1 when include_clean_path (it costs nothing). keep: [N', K, H] masks from
    draw_keep_masks (drawn here from `generator` when None). Returns [N, K, vocab] float32.
    Dropout is inverted dropout (keep with probability 1 - p, scale by 1 / (1 - p)), as
    torch.nn.Dropout in training mode, so each path's expected input equals h_i.
    """
    check_node("method", {"p": p}, declared_rules(DropMatchParams))  # the one declared range
    K, H = hidden.shape
    n_drop = n_paths - 1 if include_clean_path else n_paths
    paths: list[torch.Tensor] = []
    if include_clean_path:
        assert clean_logits is not None, "include_clean_path needs the verification logits"
        paths.append(clean_logits.float().unsqueeze(0))  # [1, K, vocab]
    if n_drop > 0:
        if p > 0:
            if keep is None:
                keep = draw_keep_masks(n_drop, K, H, p, generator, hidden.device)
            x = hidden.unsqueeze(0) * keep.to(hidden.dtype) / (1.0 - p)  # [N', K, H]
        else:
            x = hidden.unsqueeze(0).expand(n_drop, K, H)  # p = 0: every path is the clean one
        logits = lm_head(x.reshape(n_drop * K, H)).float()  # [N'*K, vocab]: one matmul
        paths.append(logits.view(n_drop, K, -1))
    return torch.cat(paths, dim=0)  # [N, K, vocab]


def js_divergence(P: torch.Tensor, Q: torch.Tensor) -> torch.Tensor:
    """Jensen-Shannon divergence (natural log) over the last dim; broadcasts. Returns [...]."""
    M = 0.5 * (P + Q)
    # xlogy(x, x / m) is 0 where x = 0 (one-hot q, underflowed p), never nan.
    kl_pm = torch.xlogy(P, P).sum(-1) - torch.xlogy(P, M).sum(-1)
    kl_qm = torch.xlogy(Q, Q).sum(-1) - torch.xlogy(Q, M).sum(-1)
    return 0.5 * (kl_pm + kl_qm)


def draft_distribution(draft_tokens: torch.Tensor, draft_probs: torch.Tensor | None, vocab: int) -> torch.Tensor:
    """q_i over the target's vocabulary: the drafter's probabilities, or one-hot(d_i) without.

    draft_tokens: [K]; draft_probs: [K, vocab_draft] or None. Returns [K, vocab] float32. A draft
    vocabulary of another size (padded embeddings) is cut or zero-padded to the target's.
    """
    K = draft_tokens.numel()
    if draft_probs is None:
        q = torch.zeros(K, vocab, device=draft_tokens.device)
        q[torch.arange(K, device=draft_tokens.device), draft_tokens] = 1.0
        return q
    return match_vocab(draft_probs, vocab)


def naive_accept(draft_tokens: torch.Tensor, path_logits: torch.Tensor) -> torch.Tensor:
    """d_i equals the argmax of at least one path. draft_tokens: [K]; path_logits: [N, K, vocab] -> [K] bool."""
    return (path_logits.argmax(dim=-1) == draft_tokens.unsqueeze(0)).any(dim=0)


def _js_paths_to_centroid(z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """JS(softmax(z_k), c) for every path k, with c = softmax(mean_k z_k).

    z: [N, K, vocab] tempered logits. Returns ([N, K], c [K, vocab]). The same quantity as
    js_divergence(softmax(z), c), computed from log-softmax outputs (no log of a probability
    except M's) and in place: over a 152k vocabulary each fresh [N, vocab] buffer costs more in
    page faults than its arithmetic, and xlogy is slow, so this is ~3x faster than the plain form.
    """
    # Logits of -inf (masked tokens) give log-probabilities of -inf; clamped to the lowest float
    # they still exp to 0 and make 0 * (log p - log m) a 0, not 0 * inf = nan.
    lowest = torch.finfo(z.dtype).min
    log_c = torch.log_softmax(z.mean(dim=0), dim=-1).clamp_min_(lowest)  # [K, vocab]
    c = log_c.exp()
    log_p = torch.log_softmax(z, dim=-1).clamp_min_(lowest)  # [N, K, vocab]
    p = log_p.exp()
    # log M = log((P + c) / 2); where both underflow, M = 0 and the clamp keeps 0 * log M at 0.
    log_m = torch.add(p, c).mul_(0.5).clamp_min_(torch.finfo(p.dtype).tiny).log_()  # [N, K, vocab]
    kl_pm = log_p.sub_(log_m).mul_(p).sum(dim=-1)  # [N, K] KL(P || M)
    kl_cm = log_m.neg_().add_(log_c).mul_(c).sum(dim=-1)  # [N, K] KL(c || M)
    return 0.5 * (kl_pm + kl_cm), c


def js_accept(
    draft_tokens: torch.Tensor,
    q: torch.Tensor,
    path_logits: torch.Tensor,
    *,
    temperature: float = 0.0,
    majority: float | None = 0.5,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """JS criterion plus majority rule.

    draft_tokens: [K]; q: [K, vocab] draft distribution; path_logits: [N, K, vocab].
    Returns (js_ok [K] bool, majority_ok [K] bool, js_q [K], js_max [K]) where
    js_q = JS(q_i, c_i) and js_max = max_k JS(P_i^(k), c_i).
    """
    scale = temperature if temperature > 0 else 1.0
    z = path_logits if scale == 1.0 else path_logits / scale  # [N, K, vocab]
    js_paths, c = _js_paths_to_centroid(z)  # [N, K], [K, vocab] centroid c_i
    js_max = js_paths.max(dim=0).values  # [K]: the spread of the target's own predictions
    js_q = js_divergence(q.to(c.device), c)  # [K]
    js_ok = js_q <= js_max
    if majority is None:
        majority_ok = torch.zeros_like(js_ok)
    else:
        votes = (path_logits.argmax(dim=-1) == draft_tokens.unsqueeze(0)).sum(dim=0)  # [K] paths voting for d_i
        majority_ok = votes > majority * path_logits.shape[0]
    return js_ok, majority_ok, js_q, js_max


@dataclass(frozen=True)
class DropMatchParams(VerifierParams):
    """method=dropmatch's knobs (conf/method/dropmatch.yaml explains each), each with how reports show it."""

    criterion: str = knob("js", choice(*CRITERIA), shown=Shown("criterion", "", "DropMatch criterion"))
    n_paths: int = knob(5, integer(1), "stochastic LM-head predictions per position", shown=Shown("n_paths", "N", "DropMatch paths N"))
    p: float = knob(0.3, real(0, 1, hi_open=True), "the dropout probability", shown=Shown("dropout_p", "p", "LM-head dropout p"))
    include_clean_path: bool = knob(False, boolean, shown=Shown("include_clean_path", "clean path", flag="clean path", neutral=DEFAULT))
    majority: float | None = knob(0.5, optional(real(0, 1, hi_open=True)), "null = no majority rule",
                                  shown=Shown("majority", "majority", neutral=DEFAULT))
    lm_head_batch: int | None = knob(None, optional(integer(1)), "null = all candidates at once")

    def cross(self) -> None:
        if self.include_clean_path and self.n_paths < 2:
            raise ConfigError(f"method.n_paths={self.n_paths} must be >= 2 with method.include_clean_path=true")


@dataclass
class DropMatchDecision(LooseDecision):
    """Everything DropMatch decided for one step (0-based positions).

    The criterion is evaluated lazily: only at positions the exact rule rejects, in order, up to
    the first one it also fails (see dropmatch_decide); `evaluated` lists them, and the
    per-position criterion fields hold -1 / False / nan elsewhere.
    """

    a: torch.Tensor  # [K] bool exact acceptance (T = 0: d_i == t_i; T > 0: the speculative-sampling test)
    semantic: torch.Tensor  # [K] bool the DropMatch criterion (naive, or js OR majority) where evaluated
    votes: torch.Tensor  # [K] int64 paths whose argmax is d_i where evaluated, else -1
    n: int  # accepted prefix length
    next_token: int  # correction at position n, or the bonus token
    t: torch.Tensor  # [K] int64 target argmax at the draft positions
    evaluated: list[int] = field(default_factory=list)  # positions the criterion was computed at
    js_q: torch.Tensor | None = None  # [K] JS(q_i, c_i), js criterion only (nan where not evaluated)
    js_max: torch.Tensor | None = None  # [K] max_k JS(P_i^(k), c_i), js criterion only

    def record(self, seconds: float) -> dict[str, Any]:
        """JSON-ready per-step record (see metrics.summarize for the keys it reads)."""
        ev = self.evaluated
        rec: dict[str, Any] = {
            "rule": "dropmatch",
            "raw_match": self.a.tolist(),
            "target_tokens": self.t.tolist(),
            "mismatch_positions": self.mismatches,
            "evaluated_positions": ev,
            "evaluated_votes": [int(self.votes[i]) for i in ev],  # the criterion's margin there
            "loose_accepted": self.loose,
            "dropmatch_s": seconds,
        }
        if self.js_q is not None and self.js_max is not None:
            rec["evaluated_js"] = [[round(float(self.js_q[i]), 6), round(float(self.js_max[i]), 6)] for i in ev]
        return rec


def dropmatch_decide(
    draft_tokens: torch.Tensor,
    draft_probs: torch.Tensor | None,
    target_logits: torch.Tensor,
    hidden: torch.Tensor,
    lm_head: Callable[[torch.Tensor], torch.Tensor],
    params: DropMatchParams,
    sampling: SamplingParams = GREEDY,
    *,
    pre_accept: torch.Tensor | None = None,
    veto: torch.Tensor | None = None,
) -> DropMatchDecision:
    """One DropMatch step.

    draft_tokens: [K]; draft_probs: [K, vocab] or None (one-hot); target_logits: [K+1, vocab];
    hidden: [K+1, H] final hidden states of the verification forward; lm_head: the target's.
    params: the knobs (criterion, n_paths, p, include_clean_path, majority, lm_head_batch:
    candidate positions per LM-head call, None = all of a step's in one call, 1 = one position's
    N paths per call, the earlier lazy form). sampling: temperature, the generator, and
    generation.top_k / top_p, which truncate the exact part at T > 0 (accept test, residual,
    bonus: p is the processed target distribution, as SPD's); the semantic criterion reads the
    paths untruncated.
    pre_accept / veto: [K] bool or None, another rule's say at the positions the exact rule
    rejects (DropMatch + AutoJudge, verifiers/autojudge.py): pre_accept positions are accepted
    without the criterion; veto positions fail without it.
    """
    criterion, n_paths, p, include_clean_path = params.criterion, params.n_paths, float(params.p), params.include_clean_path
    majority = None if params.majority is None else float(params.majority)
    temperature, generator, top_k, top_p = sampling.temperature, sampling.generator, sampling.top_k, sampling.top_p
    lm_head_batch = params.lm_head_batch
    K = draft_tokens.numel()
    V = target_logits.shape[-1]
    logits = target_logits.float()  # [K+1, vocab]
    draft_tokens = draft_tokens.to(logits.device)  # the loop keeps tokens on the host
    t = logits.argmax(dim=-1)  # [K+1]
    if K == 0:
        if temperature <= 0:
            nxt = int(t[0])
        else:  # nothing to verify: sample p_1 where the generator lives
            nxt = sample_token(tempered_probs(logits[0], temperature, generator, top_k=top_k, top_p=top_p), generator)
        empty = torch.zeros(0, dtype=torch.bool)
        return DropMatchDecision(empty, empty, torch.zeros(0, dtype=torch.long), 0, nxt, t[:0])

    # Masks for every position are drawn first, in one call, so the generator's stream (and so
    # a seeded run) does not depend on how many positions end up evaluated.
    n_drop = n_paths - 1 if include_clean_path else n_paths
    keep = None
    if n_drop > 0 and p > 0:
        keep = draw_keep_masks(n_drop, K, hidden.shape[-1], p, generator, hidden.device)  # [N', K, H]

    if temperature <= 0:
        a = draft_tokens == t[:K]  # [K] exact match, always accepted
    else:
        # T > 0: the exact speculative-sampling test decides first; the semantic criterion is
        # the fallback for tokens it rejects. Sampling runs where the generator lives (the
        # run's CPU generator), as SPD's does.
        p_T = tempered_probs(logits, temperature, generator, top_k=top_k, top_p=top_p)  # [K+1, vocab]
        d_dev = draft_tokens.to(p_T.device)
        probs = None if draft_probs is None else draft_probs.float().to(p_T.device)  # [K, vocab_draft]
        a = accept_exact(p_T, probs, d_dev, generator).cpu()  # [K] accept with probability min(1, p/q)

    # The criterion only matters where the exact rule rejects, and only up to the first position
    # that fails both (acceptance stops there): a step with no mismatch costs nothing. The N
    # dropout paths of the candidate positions (every exact-rule rejection) go through the LM head
    # `lm_head_batch` positions per call (None: all in one call, so the head's weights, 15% of the
    # embedded 1.5B target's bytes, are read once per step however many positions end up
    # evaluated); the criterion itself is still evaluated lazily, position by position. The masks
    # and each row's matmul are the same either way, so the decisions do not depend on the batch.
    semantic = torch.zeros(K, dtype=torch.bool)
    votes = torch.full((K,), -1, dtype=torch.long)
    js_q = js_max = None
    if criterion == "js":
        js_q = torch.full((K,), float("nan"))
        js_max = torch.full((K,), float("nan"))
    a_list = a.tolist()
    pre = [False] * K if pre_accept is None else [bool(x) for x in pre_accept.tolist()]
    vetoed = [False] * K if veto is None else [bool(x) for x in veto.tolist()]
    candidates = [i for i in range(K) if not (a_list[i] or pre[i] or vetoed[i])]
    per_call = len(candidates) if lm_head_batch is None else max(1, int(lm_head_batch))
    computed: dict[int, torch.Tensor] = {}  # position -> [N, vocab] path logits
    evaluated: list[int] = []
    n = 0
    while n < K:
        if a_list[n] or pre[n]:
            n += 1
            continue
        if vetoed[n]:
            break
        evaluated.append(n)
        if n not in computed:
            j = candidates.index(n)
            batch = candidates[j : j + per_call]
            idx = torch.tensor(batch, device=hidden.device)
            paths = dropout_path_logits(
                hidden[idx], lm_head, n_paths=n_paths, p=p, include_clean_path=include_clean_path,
                clean_logits=logits[idx.to(logits.device)], keep=None if keep is None else keep[:, idx],
            ).to(logits.device)  # [N, len(batch), vocab]
            computed.update((pos, paths[:, b]) for b, pos in enumerate(batch))
        sl = slice(n, n + 1)
        path_logits = computed.pop(n).unsqueeze(1)  # [N, 1, vocab]
        d_n = draft_tokens[sl]  # [1]
        votes[n] = int((path_logits[:, 0].argmax(dim=-1) == d_n).sum())
        if criterion == "naive":
            ok = bool(votes[n] > 0)  # d_n is some path's argmax
        else:
            q = draft_distribution(d_n, None if draft_probs is None else draft_probs[sl], V).to(logits.device)  # [1, vocab]
            js_ok, majority_ok, jq, jm = js_accept(d_n, q, path_logits, temperature=temperature, majority=majority)
            js_q[n], js_max[n] = float(jq[0]), float(jm[0])
            ok = bool(js_ok[0] or majority_ok[0])
        semantic[n] = ok
        if not ok:
            break
        n += 1

    # At T > 0 the exact tail: the bonus, or norm(max(0, p_n - q_n)) (q_n one-hot(d_n) without
    # draft probabilities).
    nxt = int(t[n]) if temperature <= 0 else exact_tail(p_T, probs, d_dev, n, generator)
    return DropMatchDecision(a.cpu(), semantic, votes, n, nxt, t[:K].cpu(), evaluated, js_q, js_max)


class DropMatch(Verifier):
    """method=dropmatch as a configured verifier (reported settings: 5 paths, p = 0.3)."""

    needs_hidden = True

    Params = DropMatchParams
    config_names = ("dropmatch",)
    display_name = "DropMatch"
    # DropMatch's reported 1.22x over the target alone at 8B -> 70B (docs/algorithms.md section 8),
    # rounded down: the planner's assumption (costmodel.assumed_speedup); a subclass states its own.
    assumed_speedup = {ANY_PAIR: 1.2}

    def __init__(self, **knobs: Any) -> None:
        self.params = self.Params.build(knobs)  # every range checked once, there (a subclass's own Params)

    @property
    def needs_draft_probs(self) -> bool:
        """The loop asks the drafter for q_i only when the js criterion reads it."""
        return self.params.criterion == "js"

    def __call__(
        self,
        draft: Draft,
        scores: TargetScores,
        sampling: SamplingParams = GREEDY,
    ) -> Verdict:
        if scores.hidden is None or scores.lm_head is None:
            raise RuntimeError("DropMatch needs TargetScores.hidden and lm_head (needs_hidden=True)")
        sync(scores.hidden.device)
        t0 = time.perf_counter()
        d = dropmatch_decide(draft.tokens, draft.probs, scores.logits, scores.hidden, scores.lm_head, self.params, sampling)
        sync(scores.hidden.device)
        # Everything above is DropMatch's extra cost over SPD's argmax compare (which is ~free).
        seconds = time.perf_counter() - t0
        return Verdict(num_accepted=d.n, next_token=d.next_token, record=d.record(seconds))
