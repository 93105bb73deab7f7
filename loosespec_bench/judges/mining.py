"""AutoJudge's search for important tokens (Garipov et al. 2025, Algorithm 1; released code
garipovroma/autojudge, src/find_important_tokens.py, `find_important_tokens`).

Along the target's greedy answer y to a prompt x:
  1. the draft, teacher-forced on x + y, proposes its argmax at every answer position;
  2. the first position m (at or after the left border) where the draft's token differs from
     y_m is a mismatch;
  3. substitute the draft's token at m and let the target continue greedily from
     x + y_<m + d_m (the continuation's budget: max_new_tokens minus the m + 1 tokens before it);
  4. if the task's scorer finds the same final answer as the target's own (the reference is the
     TARGET's answer, not the gold one), the mismatch is unimportant and the continuation becomes
     the new y (later mismatches are searched along it); otherwise it is important and y stays;
  5. the left border moves to m + 1; stop when no mismatch is left, or when the substituted
     token (or the continuation up to it) ends the answer (EOS).
Each mismatch is recorded as (position, important, target token, draft token), the released
`changed_token_indices` tuple. Positions before a decided mismatch never change afterwards, so
the final y holds, at every unimportant mismatch, the draft token with the prefix the decision
saw; the classifier's features are read from it (see `feature_rows`).

This module holds the algorithm over callables (so a test can drive it with hand-built
"models") and the mined set's files; train/mine_autojudge.py binds it to real models.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

import numpy as np

Tokens = list[int]


@dataclass
class Mismatch:
    """One decided mismatch (the released (position, important, target_token, draft_token))."""

    position: int  # index into the answer (0 = the first generated token)
    important: bool
    target_token: int  # y_m at the time of the decision
    draft_token: int  # the draft's argmax at m
    answer_after: Any = None  # the task's answer of the continuation with the draft token


@dataclass
class MinedProblem:
    """Everything one prompt's search found."""

    target_response: Tokens  # the target's own greedy answer
    target_answer: Any  # the task's answer of it (the reference of every decision)
    final_response: Tokens  # y after every unimportant substitution
    mismatches: list[Mismatch] = field(default_factory=list)
    continuations: int = 0  # target continuations generated (one per mismatch)
    stop: str = "no_mismatch_left"  # or "eos_substituted", "deadline"


def first_mismatch(response: Tokens, draft_argmax: Tokens, left: int) -> int | None:
    """The first answer position >= left where the draft's argmax differs from the answer.
    draft_argmax[j] is the draft's prediction for response[j] given prompt + response[:j]."""
    for j in range(left, min(len(response), len(draft_argmax))):
        if response[j] != draft_argmax[j]:
            return j
    return None


def mine_problem(
    target_response: Tokens,
    *,
    draft_argmax: Callable[[Tokens], Tokens],
    continue_greedy: Callable[[Tokens, int, Tokens], Tokens],
    answer_of: Callable[[Tokens], Any],
    same_answer: Callable[[Tokens, Any], bool],
    max_new_tokens: int,
    eos_ids: Iterable[int] = (),
    out_of_time: Callable[[], bool] = lambda: False,
    max_mismatches: int | None = None,
) -> MinedProblem:
    """Algorithm 1 on one prompt. Every callable takes ANSWER tokens (the prompt is bound in):
    draft_argmax(y) -> the draft's argmax for y[0..len-1]; continue_greedy(prefix, budget, base) ->
    the target's greedy tokens after prefix (at most budget, ending at EOS or a stop string; base
    is the answer the prefix was cut from, which a lossless continuation may draft from);
    answer_of(y) -> the task's final answer; same_answer(y, reference) -> the task's scorer says
    y's final answer equals the reference. out_of_time: checked before each continuation; the
    problem is then returned unfinished (stop="deadline") and the caller discards it.
    max_mismatches: decide at most this many mismatches of the prompt (stop="mismatch_cap"); the
    search is left to right, so they carry exactly the labels the uncapped search gives them
    (None = every mismatch, as released). A budget knob: more prompts per CPU hour.
    """
    eos = set(eos_ids)
    current = list(target_response)
    reference = answer_of(current)
    out = MinedProblem(target_response=list(target_response), target_answer=reference, final_response=current)
    left = 0
    draft = draft_argmax(current)
    while True:
        m = first_mismatch(current, draft, left)
        if m is None:
            out.stop = "no_mismatch_left"
            break
        if max_mismatches is not None and len(out.mismatches) >= max_mismatches:
            out.stop = "mismatch_cap"
            break
        if out_of_time():
            out.stop = "deadline"
            break
        d = int(draft[m])
        prefix = current[:m] + [d]
        # The continuation gets what is left of the answer budget (never more: the alternative is
        # judged at the length the evaluation allows); nothing follows an EOS.
        tail = [] if d in eos else continue_greedy(prefix, max(0, max_new_tokens - len(prefix)), current)
        alternative = prefix + list(tail)
        out.continuations += 1
        same = bool(same_answer(alternative, reference))
        out.mismatches.append(Mismatch(m, not same, int(current[m]), d, answer_of(alternative)))
        left = m + 1
        if same:
            current = alternative
            draft = draft_argmax(current)  # the answer changed after m: the draft's view of it too
        if d in eos:
            out.stop = "eos_substituted"
            break
    out.final_response = current
    return out


def feature_rows(problem: MinedProblem) -> list[tuple[Tokens, int]]:
    """(answer tokens, position) whose target hidden state at `position` is each mismatch's
    feature, in mismatch order: the answer with the DRAFT token at the mismatch (the released
    "DT" setup: target hidden state on the draft-token sequence, calc_hiddens.py). Unimportant
    mismatches read the final answer (it already holds the draft token there, with the prefix
    the decision saw); important ones the final answer cut after the mismatch, draft token put in."""
    rows = []
    for mm in problem.mismatches:
        if not mm.important:
            rows.append((problem.final_response, mm.position))
        else:
            rows.append((problem.final_response[: mm.position] + [mm.draft_token], mm.position))
    return rows


# -- the mined set on disk ------------------------------------------------------------------
# <out>/mined.jsonl        one line per finished problem, appended once (never rewritten)
# <out>/features.f32       float32 rows, one per mismatch, in the jsonl's order
# <out>/meta.json          what was mined with what (pair, data, prompt settings, hidden size)
# A line is written only after its feature rows are on disk; a resumed run first cuts the
# feature file back to the rows the jsonl accounts for, so a crash between the two writes
# never leaves rows without a line.


# meta keys a resumed run may change: bookkeeping, and how the continuations were computed
# (continue_with: every way gives the target's greedy tokens; each problem's line says which).
NOT_COMPARED = ("started", "resumed", "continue_with")


class MinedStore:
    """Append-only mined set with resume."""

    def __init__(self, folder: Path | str, meta: dict[str, Any]) -> None:
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.lines = self.folder / "mined.jsonl"
        self.features = self.folder / "features.f32"
        meta_file = self.folder / "meta.json"
        if meta_file.exists():
            old = json.loads(meta_file.read_text())
            differ = {k for k in set(old) | set(meta) if k not in NOT_COMPARED and old.get(k) != meta.get(k)}
            if differ:
                raise ValueError(
                    f"{self.folder} holds a mined set made with other settings ({', '.join(sorted(differ))}); "
                    "use another --out or the same settings"
                )
        else:
            meta_file.write_text(json.dumps(meta, indent=1))
        self.hidden = int(meta["hidden_size"])
        self.records = self._read_lines()
        rows = sum(len(r["mismatches"]) for r in self.records)
        size = rows * self.hidden * 4
        if self.features.exists() and self.features.stat().st_size > size:
            with self.features.open("r+b") as f:  # rows of a problem whose line never came
                f.truncate(size)
        elif size and (not self.features.exists() or self.features.stat().st_size < size):
            raise ValueError(f"{self.features} has fewer feature rows than {self.lines} lists; the mined set is damaged")

    def _read_lines(self) -> list[dict[str, Any]]:
        if not self.lines.exists():
            return []
        out = []
        with self.lines.open() as f:
            for line in f:
                try:
                    out.append(json.loads(line))
                except ValueError:  # a line cut by a crash: the last one; its problem is redone
                    break
        # Rewrite only when a cut line must go (never touches finished lines otherwise).
        good = "".join(json.dumps(r) + "\n" for r in out)
        if self.lines.read_text() != good:
            tmp = self.lines.with_suffix(".partial")
            tmp.write_text(good)
            os.replace(tmp, self.lines)
        return out

    @property
    def done_ids(self) -> set[str]:
        return {r["id"] for r in self.records}

    def append(self, record: dict[str, Any], features: np.ndarray) -> None:
        """One finished problem: its feature rows ([n_mismatches, hidden] float32), then its line."""
        assert features.shape == (len(record["mismatches"]), self.hidden), (features.shape, len(record["mismatches"]))
        with self.features.open("ab") as f:
            f.write(np.ascontiguousarray(features, dtype=np.float32).tobytes())
            f.flush()
            os.fsync(f.fileno())
        with self.lines.open("a") as f:
            f.write(json.dumps(record) + "\n")
            f.flush()
            os.fsync(f.fileno())
        self.records.append(record)


def problem_record(sample_id: str, problem: MinedProblem, seconds: float) -> dict[str, Any]:
    """The jsonl line of one problem."""
    return {
        "id": sample_id,
        "target_answer": problem.target_answer,
        "target_response": problem.target_response,
        "final_response": problem.final_response,
        "mismatches": [asdict(m) for m in problem.mismatches],
        "continuations": problem.continuations,
        "stop": problem.stop,
        "seconds": round(seconds, 3),
    }


def load_mined(folder: Path | str) -> tuple[list[dict[str, Any]], np.ndarray, dict[str, Any]]:
    """(records, features [n_mismatches, hidden] float32, meta) of a mined set."""
    folder = Path(folder)
    meta = json.loads((folder / "meta.json").read_text())
    records = [json.loads(line) for line in (folder / "mined.jsonl").read_text().splitlines() if line.strip()]
    n = sum(len(r["mismatches"]) for r in records)
    feats = np.fromfile(folder / "features.f32", dtype=np.float32, count=n * int(meta["hidden_size"]))
    return records, feats.reshape(n, int(meta["hidden_size"])), meta
