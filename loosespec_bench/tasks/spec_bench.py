"""Spec-Bench (Xia et al. 2024): 480 prompts for measuring speculative decoding speed.

Six task groups of 80: multi-turn conversation (MT-bench's 80 two-turn questions, generated
turn by turn), translation, summarization, question answering, mathematical reasoning and
retrieval-augmented generation. Speed only, as Spec-Bench reports it: nothing is scored; the
summary gives tokens/s, tau and (with the paired baseline) speedup per task group and per
category.
"""

from __future__ import annotations

from typing import Any

from ..errors import ConfigError
from ..measure.metrics import paired_speedup
from ..params import list_of, optional, string
from .base import Sample, Task, read_jsonl, round_robin

# Spec-Bench's six task groups; MT-bench's eight categories form "multi_turn_conversation".
MT_BENCH_CATEGORIES = ("writing", "roleplay", "reasoning", "math", "coding", "extraction", "stem", "humanities")
GROUPS = ("multi_turn_conversation", "translation", "summarization", "qa", "math_reasoning", "rag")


def task_group(category: str) -> str:
    return "multi_turn_conversation" if category in MT_BENCH_CATEGORIES else category


def speed(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Pooled speed figures of some records (same definitions as metrics.summarize)."""
    tokens = sum(r["metrics"]["new_tokens"] for r in records)
    steps = sum(r["metrics"]["steps"] for r in records)
    time_s = sum(r["metrics"]["total_s"] for r in records)
    out: dict[str, Any] = {
        "n": len(records),
        "new_tokens": tokens,
        "tau": tokens / steps if steps else None,
        "tokens_per_s": tokens / time_s if time_s else None,
    }
    speedup = paired_speedup(records).get("speedup")
    if speedup is not None:
        out["speedup"] = speedup
    return out


class SpecBench(Task):
    name = "spec_bench"
    display_name = "Spec-Bench"
    SETTINGS = {"categories": optional(list_of(string))}
    group_key = "task_group"  # a small limit covers every group
    full_size = 480
    turns_per_sample = 560 / 480  # 80 of the 480 questions are two-turn
    quality_key = None  # speed only

    def __init__(self, *, categories: list[str] | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        # Filter by category or by task group name (e.g. [translation, multi_turn_conversation]).
        self.categories = list(categories) if categories else None

    def _rows(self) -> list[dict[str, Any]]:
        if self.data_dir is None:
            raise ConfigError(
                "dataset spec_bench: Spec-Bench is not published as a hub data set; set paths.data_dir "
                "(or LOOSESPEC_DATA_DIR) to a folder with spec_bench/question.jsonl"
            )
        return read_jsonl(self.local_path("spec_bench", "question.jsonl"), required=("question_id", "category", "turns"),
                          types={"question_id": (int, str), "category": str, "turns": list})

    def load_all(self) -> list[Sample]:
        out = []
        for row in self._rows():
            cat = row["category"]
            if self.categories and cat not in self.categories and task_group(cat) not in self.categories:
                continue
            turns = list(row["turns"])
            out.append(
                Sample(
                    id=str(row["question_id"]),
                    messages=self.with_system([{"role": "user", "content": turns[0]}]),
                    followups=turns[1:],
                    meta={"category": cat, "task_group": task_group(cat)},
                )
            )
        # Round-robin over task groups: any `limit` covers them all.
        return round_robin(out, "task_group")

    def aggregate(self, records: list[dict[str, Any]]) -> dict[str, Any]:
        if not records:
            return {}
        by_group: dict[str, list[dict[str, Any]]] = {}
        by_cat: dict[str, list[dict[str, Any]]] = {}
        for r in records:
            by_group.setdefault(r["meta"]["task_group"], []).append(r)
            by_cat.setdefault(r["meta"]["category"], []).append(r)
        return {
            "quality": "not scored: Spec-Bench measures speed only",
            "speed_by_task_group": {g: speed(by_group[g]) for g in GROUPS if g in by_group},
            "speed_by_category": {c: speed(rs) for c, rs in sorted(by_cat.items())},
        }
