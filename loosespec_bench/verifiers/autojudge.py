"""AutoJudge: a trained judge of which mismatches matter (Garipov et al. 2025, arXiv 2504.20039;
released code garipovroma/autojudge, eval/generation_utils.py `run_spec_dec`).

A mismatching draft token d_i (the exact rule rejects it) is accepted when the judge, a logistic
regression on the target's final hidden state at d_i (after reading d_i: TargetScores.hidden row
i + 1), scores it below its threshold ("unimportant"); otherwise the rule is SPD's: stop there
and emit the target's token. Matches are always accepted. The released rule, per window:
    accept_i = (d_i == t_i) OR (s_i < threshold);  n = longest accepted prefix;  emit t_{n+1}.
The judge is trained offline (judges/, train/mine_autojudge.py, train/autojudge.py).

Differences from the released decoder, chosen to keep it a rule of this harness's loop:
  - a fully accepted draft also emits the bonus token t_{K+1}, as every rule here (the released
    window loop drafts again instead);
  - T > 0 (the released rule is greedy only): the exact speculative-sampling test decides first,
    the judge is the fallback for the tokens it rejects, the correction is the residual draw
    norm(max(0, p - q)) and the bonus a draw from p_{K+1} (as DropMatch's T > 0 rule here).
Only the "DT" features (the target's hidden state; the setup the released vLLM integration
supports) can be read: the loop gives verifiers the target's hidden states, not the draft's.

DropMatch + AutoJudge (`DropMatchAutoJudge`): DropMatch's paper reports the two combined but its
text could not be read here; `combine` makes the reading an option:
  any (default)  a mismatch is accepted when the judge calls it unimportant OR DropMatch's
                 criterion accepts it (the judge first: DropMatch's LM-head paths are computed
                 only where the judge asks for the target's token). DropMatch then bounds the
                 speed from below where the judge fails (out of distribution).
  all            accepted only when the judge calls it unimportant AND the criterion accepts it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Mapping

import torch

from ..errors import ConfigError
from ..judges.head import JudgeHead, judge_sha256
from ..params import NOT_SHOWN, Shown, choice, knob, optional, real, string
from ..sampling import GREEDY, SamplingParams, accept_exact, exact_tail, tempered_probs
from ..step import Draft, TargetScores, Verdict, longest_true_prefix, sync
from .base import LooseDecision, Verifier, VerifierParams
from .dropmatch import DropMatch, DropMatchParams, dropmatch_decide

COMBINE = ("any", "all")


def judge_scores(judge: JudgeHead, hidden: torch.Tensor, k: int) -> torch.Tensor:
    """P(important) of draft positions 0..k-1: the judge on hidden rows 1..k (the target's state
    after reading d_i; row 0 is the pending token's). hidden: [K+1, H]. Returns [K] float32."""
    if k == 0:
        return torch.zeros(0)
    return judge.score(hidden[1 : k + 1])


@dataclass
class AutoJudgeDecision(LooseDecision):
    """What AutoJudge decided for one step (0-based positions)."""

    a: torch.Tensor  # [K] bool exact acceptance (T = 0: d_i == t_i; T > 0: the speculative-sampling test)
    scores: torch.Tensor  # [K] float32 the judge's P(important)
    important: torch.Tensor  # [K] bool scores >= threshold
    n: int
    next_token: int
    t: torch.Tensor  # [K] int64 target argmax at the draft positions
    threshold: float

    def record(self, seconds: float) -> dict[str, Any]:
        # The judge's say where it mattered: every mismatch up to and including the first one it
        # sent back to the target (later ones were never reached).
        judged = [i for i in self.mismatches if i <= self.n]
        return {
            "rule": "autojudge",
            "raw_match": self.a.tolist(),
            "target_tokens": self.t.tolist(),
            "mismatch_positions": self.mismatches,
            "judged_positions": judged,
            "judge_scores": [round(float(self.scores[i]), 6) for i in judged],
            "judge_important": [bool(self.important[i]) for i in judged],
            "judge_threshold": self.threshold,
            "loose_accepted": self.loose,
            "autojudge_s": seconds,
        }


def autojudge_decide(
    draft_tokens: torch.Tensor,
    draft_probs: torch.Tensor | None,
    target_logits: torch.Tensor,
    hidden: torch.Tensor,
    judge: JudgeHead,
    *,
    threshold: float,
    temperature: float = 0.0,
    generator: torch.Generator | None = None,
    top_k: int = 0,
    top_p: float = 1.0,
) -> AutoJudgeDecision:
    """One AutoJudge step. draft_tokens: [K]; draft_probs: [K, vocab] or None (one-hot q);
    target_logits: [K+1, vocab]; hidden: [K+1, H] the verification forward's final hidden states."""
    K = draft_tokens.numel()
    logits = target_logits.float()
    t = logits.argmax(dim=-1).cpu()  # [K+1]
    d = draft_tokens.cpu()
    scores = judge_scores(judge, hidden, K)  # [K]
    important = scores >= threshold  # [K]
    if temperature <= 0:
        a = d == t[:K]
        n = longest_true_prefix(a | ~important)
        nxt = int(t[n])
    else:
        p = tempered_probs(logits, temperature, generator, top_k=top_k, top_p=top_p)  # [K+1, vocab]
        q = None if draft_probs is None else draft_probs.float().to(p.device)
        a = accept_exact(p, q, draft_tokens.to(p.device), generator).cpu() if K else torch.zeros(0, dtype=torch.bool)
        n = longest_true_prefix(a | ~important)
        nxt = exact_tail(p, q, draft_tokens.to(p.device), n, generator)  # bonus or residual draw
    return AutoJudgeDecision(a, scores, important, n, nxt, t[:K], float(threshold))


# The parameter classes are split so that each knob is declared once and the report lists
# DropMatch + AutoJudge's knobs as it always has (threshold, combine, judge: schema.rule_knobs
# reads fields in dataclass order, which follows the reversed MRO).
@dataclass(frozen=True)
class JudgeParams(VerifierParams):
    """Which judge and its threshold (AutoJudge's and DropMatch + AutoJudge's)."""

    # Where the judge file was read is not a knob a report shows; which judge it was is judge_sha256.
    judge_path: str | None = knob(None, optional(string), "judge.json or its folder (packaged:<pair>)", shown=NOT_SHOWN)
    threshold: float | None = knob(None, optional(real(0, 1)), "null = the judge's own",
                                   shown=Shown("threshold", "threshold", "AutoJudge threshold (null = the judge's own)"))


@dataclass(frozen=True)
class JudgeFileParams(VerifierParams):
    """The judge file's hash the composed config recorded (checked at load)."""

    judge_sha256: str | None = knob(None, optional(string), "sha256 of the judge file (the config fills it in; checked at load)",
                                    shown=Shown("judge", "judge", "the AutoJudge judge file (sha256)", chars=8))


@dataclass(frozen=True)
class AutoJudgeParams(JudgeFileParams, JudgeParams):
    """method=autojudge's knobs (conf/method/autojudge.yaml explains each)."""


@dataclass(frozen=True)
class CombineParams(DropMatchParams, JudgeParams):
    """How DropMatch's criterion and the judge combine."""

    combine: str = knob("any", choice(*COMBINE), "any = judge OR criterion accepts, all = both must",
                        shown=Shown("combine", "combine", "DropMatch + AutoJudge: any | all"))


@dataclass(frozen=True)
class DropMatchAutoJudgeParams(JudgeFileParams, CombineParams):
    """method=dropmatch_autojudge: DropMatch's knobs, AutoJudge's, and how the two combine."""


def _load_judge(judge_path: str | None, threshold: float | None, sha256: str | None = None) -> tuple[JudgeHead, float]:
    """The judge and its threshold (the Params dataclass has checked the given one's range).
    sha256: the judge file's hash the run's config recorded (its run id depends on it); a file
    changed since then is refused rather than run under the old judge's run id."""
    if not judge_path:
        raise ConfigError("method.judge_path is empty: point it at a trained judge (python -m loosespec_bench.train.autojudge)")
    judge = JudgeHead.load(judge_path, "method.judge_path")
    if sha256 is not None and judge_sha256(judge_path) != sha256:
        raise ConfigError(f"method.judge_path: {judge_path} changed since the run's config recorded it "
                          f"(method.judge_sha256={sha256[:12]}...); compose the run again")
    return judge, judge.threshold if threshold is None else float(threshold)


def check_judge_file(knobs: Mapping[str, Any]) -> None:
    """The judge file a method node names loads (AutoJudge's and DropMatch + AutoJudge's
    check_artefacts): an empty path or a missing or malformed file is a ConfigError."""
    judge_path = knobs.get("judge_path")
    if not judge_path:  # null / "": AutoJudge has no judge to read
        raise ConfigError("method.judge_path is empty: point it at a trained judge (python -m loosespec_bench.train.autojudge)")
    JudgeHead.load(judge_path, "method.judge_path")


class AutoJudge(Verifier):
    """method=autojudge: exact match, plus the mismatches a trained judge calls unimportant."""

    # The judge reads the target's final hidden states at the draft positions (TargetScores.hidden).
    needs_hidden = True
    Params = AutoJudgeParams
    config_names = ("autojudge",)
    display_name = "AutoJudge"

    @classmethod
    def check_artefacts(cls, knobs: Mapping[str, Any]) -> None:
        check_judge_file(knobs)

    def __init__(self, **knobs: Any) -> None:
        self.params = AutoJudgeParams.build(knobs)  # every range checked once, there
        self.judge, self.threshold = _load_judge(self.params.judge_path, self.params.threshold, self.params.judge_sha256)
        self.judge_path = self.params.judge_path

    def __call__(
        self,
        draft: Draft,
        scores: TargetScores,
        sampling: SamplingParams = GREEDY,
    ) -> Verdict:
        if scores.hidden is None:
            raise RuntimeError("AutoJudge needs TargetScores.hidden (needs_hidden=True)")
        sync(scores.hidden.device)
        t0 = time.perf_counter()
        d = autojudge_decide(
            draft.tokens, draft.probs, scores.logits, scores.hidden, self.judge, threshold=self.threshold,
            temperature=sampling.temperature, generator=sampling.generator, top_k=sampling.top_k, top_p=sampling.top_p,
        )
        return Verdict(num_accepted=d.n, next_token=d.next_token, record=d.record(time.perf_counter() - t0))


class DropMatchAutoJudge(DropMatch):
    """method=dropmatch_autojudge: DropMatch's criterion and AutoJudge's judge on the mismatches
    (`combine`: any = either accepts, all = both must)."""

    Params = DropMatchAutoJudgeParams
    config_names = ("dropmatch_autojudge",)
    display_name = "DropMatch + AutoJudge"

    @classmethod
    def check_artefacts(cls, knobs: Mapping[str, Any]) -> None:
        check_judge_file(knobs)

    def __init__(self, **knobs: Any) -> None:
        super().__init__(**knobs)  # DropMatch builds self.Params: every range checked once, there
        p = self.params
        self.judge, self.threshold = _load_judge(p.judge_path, p.threshold, p.judge_sha256)
        self.judge_path = p.judge_path

    def __call__(
        self,
        draft: Draft,
        scores: TargetScores,
        sampling: SamplingParams = GREEDY,
    ) -> Verdict:
        if scores.hidden is None or scores.lm_head is None:
            raise RuntimeError("DropMatch + AutoJudge needs TargetScores.hidden and lm_head (needs_hidden=True)")
        sync(scores.hidden.device)
        t0 = time.perf_counter()
        js = judge_scores(self.judge, scores.hidden, draft.k)  # [K]
        important = js >= self.threshold
        t1 = time.perf_counter()
        combine = self.params.combine
        d = dropmatch_decide(
            draft.tokens, draft.probs, scores.logits, scores.hidden, scores.lm_head, self.params, sampling,
            pre_accept=~important if combine == "any" else None, veto=important if combine == "all" else None,
        )
        sync(scores.hidden.device)
        t2 = time.perf_counter()
        rec = d.record(t2 - t1)
        judged = [i for i in d.mismatches if i <= d.n]
        rec.update({
            "rule": "dropmatch_autojudge",
            "combine": combine,
            "judged_positions": judged,
            "judge_scores": [round(float(js[i]), 6) for i in judged],
            "judge_important": [bool(important[i]) for i in judged],
            "judge_threshold": self.threshold,
            # Who accepted each loose token: the judge alone (any) or the criterion.
            "judge_accepted": [i for i in d.loose if not important[i] and i not in d.evaluated],
            "autojudge_s": t1 - t0,
        })
        return Verdict(num_accepted=d.n, next_token=d.next_token, record=rec)
