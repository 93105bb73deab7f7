"""MT-bench (Zheng et al. 2023) and KoMT-Bench (LG AI Research 2024): 80 two-turn questions in
8 categories, English and Korean.

Generated turn by turn: the second question follows the model's own first answer (the app's
multi-turn loop; Sample.followups). Quality is FastChat's single-answer grading: a judge LLM
rates each turn 1-10 with the judge prompts shipped with the data (single-v1 for turn 1,
single-v1-multi-turn for turn 2, their -math- variants with GPT-4 reference answers for math,
reasoning and coding), the rating read from "[[r]]" (a rating that cannot be read is -1 and
left out, as FastChat does). The MT-bench score is the mean rating over all judged turns.

KoMT-Bench adds LG's language rule (detector.py in their FastChat fork): a turn answered in a
language other than Korean gets the square root of its rating, except questions 138 and 140
(JSON answers). LG detect with a MediaPipe model; this harness uses langdetect (seeded).

With no judge configured (dataset.judge.kind: null) nothing is judged: the run reports speed
only, and the summary says that quality was not judged.
"""

from __future__ import annotations

import logging
import math
import re
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..params import list_of, nested, optional, string
from .base import Sample, Task, hub_file, read_jsonl, round_robin
from .judge import JUDGE_SETTINGS, JudgeError, make_judge

log = logging.getLogger(__name__)
JUDGE_ERROR = "$ERROR$"  # FastChat's API_ERROR_OUTPUT

# FastChat llm_judge/common.py: categories judged against a reference answer.
NEED_REF_CATS = ("math", "reasoning", "coding", "arena-hard-200")
ONE_SCORE = re.compile(r"\[\[(\d+\.?\d*)\]\]")
ONE_SCORE_BACKUP = re.compile(r"\[(\d+\.?\d*)\]")
NOT_JUDGED = "not judged: no judge configured (dataset.judge.kind is null); speed only"


def parse_rating(judgment: str) -> float:
    """FastChat's rating parse: "[[r]]", else "[r]", else -1 (unreadable)."""
    match = ONE_SCORE.search(judgment) or ONE_SCORE_BACKUP.search(judgment)
    return float(match.group(1)) if match else -1.0


# A question's fields (FastChat's question.jsonl): an integer id, the user turns as a list of text.
QUESTION_TYPES = {"question_id": int, "category": str, "turns": list}


class MTBench(Task):
    name = "mt_bench"
    display_name = "MT-Bench"
    SETTINGS = {"judge": nested(JUDGE_SETTINGS), "categories": optional(list_of(string))}
    quality_figure = "mt_bench_score"
    group_key = "category"  # a small limit covers every group
    full_size = 80
    turns_per_sample = 2.0
    quality_key = "rating"
    folder = "mt_bench"
    question_file = "question.jsonl"
    judge_prompt_file = "judge_prompts.jsonl"
    reference_file = "reference_answer/gpt-4.jsonl"
    # The hub copy of the questions (same JSONL as FastChat's) in a data set repository.
    hub_repo, hub_question_file = "HuggingFaceH4/mt_bench_prompts", "raw/question.jsonl"

    def __init__(self, *, judge: dict[str, Any] | None = None, categories: list[str] | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.judge = make_judge(judge)
        self.categories = list(categories) if categories else None
        self._prompts: dict[str, dict[str, Any]] | None = None
        self._refs: dict[int, list[str]] | None = None

    # -- data --------------------------------------------------------------------------------
    def _questions(self) -> list[dict[str, Any]]:
        if self.data_dir is not None:
            return read_jsonl(self.local_path(self.folder, self.question_file), types=QUESTION_TYPES)
        return read_jsonl(hub_file(self.hub_repo, self.hub_question_file))

    def _judge_file(self, name: str) -> Path:
        if self.data_dir is None:
            raise ConfigError(
                f"dataset {self.name}: judging reads the judge prompts and reference answers from "
                f"<data_dir>/{self.folder}/; set paths.data_dir (or LOOSESPEC_DATA_DIR)"
            )
        return self.local_path(self.folder, *name.split("/"))

    @property
    def judge_prompts(self) -> dict[str, dict[str, Any]]:
        if self._prompts is None:
            self._prompts = {p["name"]: p for p in read_jsonl(self._judge_file(self.judge_prompt_file))}
        return self._prompts

    @property
    def reference_answers(self) -> dict[int, list[str]]:
        if self._refs is None:
            rows = read_jsonl(self._judge_file(self.reference_file))
            self._refs = {int(r["question_id"]): r["choices"][0]["turns"] for r in rows}
        return self._refs

    def load_all(self) -> list[Sample]:
        out = []
        for row in self._questions():
            if self.categories and row["category"] not in self.categories:
                continue
            turns = list(row.get("turns") or row["prompt"])  # the hub copy names them "prompt"
            out.append(
                Sample(
                    id=str(row["question_id"]),
                    messages=self.with_system([{"role": "user", "content": turns[0]}]),
                    followups=turns[1:],
                    # The questions travel with the record, so it can be judged again later.
                    reference={"question_id": int(row["question_id"]), "category": row["category"], "turns": turns},
                    meta={"category": row["category"]},
                )
            )
        # Round-robin over categories: any `limit` covers them all.
        return round_robin(out, "category")  # (order() interleaves again after a seeded shuffle)

    # -- judging -----------------------------------------------------------------------------
    def judge_turn(self, sample: Sample, answers: list[str], turn: int) -> tuple[float, str, str]:
        """FastChat run_judge_single for turn 1 (turn=0) or 2 (turn=1): (rating, name, judgment)."""
        assert self.judge is not None
        ref = sample.reference
        needs_ref = ref["category"] in NEED_REF_CATS
        name = ("single-math-v1" if needs_ref else "single-v1") + ("-multi-turn" if turn else "")
        prompt = self.judge_prompts[name]
        kwargs: dict[str, str] = {}
        if needs_ref:
            ref_turns = self.reference_answers.get(ref["question_id"])
            if ref_turns is None:
                raise ConfigError(f"dataset {self.name}: no reference answer for question {ref['question_id']}")
            kwargs["ref_answer_1"] = ref_turns[0]
            if turn:
                kwargs["ref_answer_2"] = ref_turns[1]
        if turn:
            user = prompt["prompt_template"].format(
                question_1=ref["turns"][0], question_2=ref["turns"][1], answer_1=answers[0], answer_2=answers[1], **kwargs
            )
        else:
            user = prompt["prompt_template"].format(question=ref["turns"][0], answer=answers[0], **kwargs)
        try:
            judgment = self.judge.complete(prompt["system_prompt"], user)
        except JudgeError as err:
            # A dead judge: one warning per run (the first failure), the count in the summary
            # (n_judge_errors), an error when every judgment failed (aggregate).
            if not getattr(self, "_judge_warned", False):
                self._judge_warned = True
                where = getattr(self.judge, "url", None) or getattr(self.judge, "name", "the judge")
                log.warning("dataset %s: the judge (%s) failed: %s; that turn is rated %s and left out, as FastChat does "
                            "(further failures are counted in the summary's n_judge_errors)", self.name, where, err, JUDGE_ERROR)
            return -1.0, name, f"{JUDGE_ERROR} {err}"  # rated -1, left out
        rating = self.adjust(sample, turn, answers[turn], parse_rating(judgment))
        return rating, name, judgment

    def adjust(self, sample: Sample, turn: int, answer: str, rating: float) -> float:
        return rating

    def score_turns(self, sample: Sample, completions: list[str]) -> dict[str, Any]:
        if self.judge is None:
            return {}  # speed only
        ratings, judgments = [], []
        for turn in range(len(completions)):
            rating, name, judgment = self.judge_turn(sample, completions, turn)
            ratings.append(rating)
            judgments.append({"prompt": name, "judgment": judgment})
        valid = [r for r in ratings if r >= 0]
        return {
            "rating": sum(valid) / len(valid) if valid else None,
            "rating_turns": ratings,
            "judge": self.judge.name,
            "judgments": judgments,
        }

    def score(self, sample: Sample, completion: str) -> dict[str, Any]:
        return self.score_turns(sample, [completion])

    def aggregate(self, records: list[dict[str, Any]]) -> dict[str, Any]:
        judged = [r for r in records if "rating_turns" in r.get("score", {})]
        if not judged:
            return {"quality": NOT_JUDGED}
        verdicts = [str(j.get("judgment", "")) for r in judged for j in r["score"].get("judgments") or [] if isinstance(j, dict)]
        errors = [v for v in verdicts if v.startswith(JUDGE_ERROR)]
        if verdicts and len(errors) == len(verdicts):
            raise ConfigError(
                f"dataset {self.name}: every judgment failed ({len(errors)} of {len(verdicts)}; the first: "
                f"{' '.join(errors[0].split())[:160]}); check dataset.judge (url, model, the key's variable). The records "
                "are kept: re-score them with python -m loosespec_bench.score RUN_DIR --set judge.url=... once the judge answers"
            )
        per_turn: dict[int, list[float]] = {}
        per_cat: dict[str, list[float]] = {}
        for r in judged:
            for t, rating in enumerate(r["score"]["rating_turns"]):
                if rating >= 0:  # FastChat drops unreadable (-1) ratings
                    per_turn.setdefault(t + 1, []).append(rating)
                    per_cat.setdefault(r["meta"]["category"], []).append(rating)
        every = [x for xs in per_turn.values() for x in xs]
        out: dict[str, Any] = {
            "mt_bench_score": sum(every) / len(every) if every else None,
            "n_judged_turns": len(every),
            "n_judge_errors": len(errors),
            "judge": judged[0]["score"].get("judge"),
        }
        for t, xs in sorted(per_turn.items()):
            out[f"score_turn{t}"] = sum(xs) / len(xs)
        out["score_by_category"] = {c: sum(xs) / len(xs) for c, xs in sorted(per_cat.items())}
        return out


class KoMTBench(MTBench):
    name = "komt_bench"
    display_name = "KoMT-Bench"
    folder = "komt_bench"
    question_file = "question_ko.jsonl"
    judge_prompt_file = "judge_prompts_ko.jsonl"
    reference_file = "reference_answer_ko/gpt-4.jsonl"
    hub_repo, hub_question_file = "LGAI-EXAONE/KoMT-Bench", "raw/question_ko.jsonl"
    NO_PENALTY = (138, 140)  # JSON answers: English is expected (LG's detector.py)

    def adjust(self, sample: Sample, turn: int, answer: str, rating: float) -> float:
        if rating < 0 or sample.reference["question_id"] in self.NO_PENALTY:
            return rating
        return rating if detect_language(answer) == "ko" else math.sqrt(rating)


def detect_language(text: str) -> str | None:
    try:
        import langdetect
    except ImportError:
        raise ConfigError("dataset komt_bench: the Korean-answer rule needs langdetect (pip install langdetect)") from None
    langdetect.DetectorFactory.seed = 0
    try:
        return langdetect.detect(text)
    except langdetect.LangDetectException:  # empty or symbol-only answers
        return None
