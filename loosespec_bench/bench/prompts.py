"""The engine benchmark's prompts: the tasks' own samples, encoded with the chat template, the
same for every contestant (and for the vLLM and step benchmarks, which rebuild them from the
same settings and check the token ids against the engine benchmark's file)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import torch
from omegaconf import OmegaConf

from loosespec_bench.build import build_task as build_task_of
from loosespec_bench.settings.config import data_dir_setting
from loosespec_bench.tasks.prompting import encode_prompt
from loosespec_bench.score import compose_dataset

TARGET = "embedded:qwen2.5-coder-1.5b-instruct"
DRAFT = "embedded:qwen2.5-coder-0.5b-instruct"
DEFAULT_SETS = "gsm8k,humaneval,ifeval"
MATH_SETS = ("gsm8k", "mgsm")  # scored here (cheap exact match) for FLy's accuracy retention


@dataclass
class Prompt:
    set: str
    id: str
    ids: torch.Tensor  # [P] int64
    task: Any


def data_dir(given: str | None) -> str | None:
    """--data-dir, else the package's own setting ($LOOSESPEC_DATA_DIR, else the default data
    folder; None: the hub), as `python -m loosespec_bench` reads it."""
    return given or data_dir_setting()


def build_task(name: str, data_dir: str | None) -> Any:
    """The task exactly as conf/dataset/<name>.yaml builds it (the harness's own defaults),
    every sample (no dataset.limit): composed and built as a run builds it (build.build_task)."""
    dataset = compose_dataset(name, data_dir)  # ConfigError for a name no dataset file has
    dataset.limit = None
    return build_task_of(OmegaConf.create({"dataset": dataset}))


def build_prompts(sets: list[str], per_set: int, data_dir: str | None, tokenizer: Any, max_prompt_tokens: int | None) -> list[Prompt]:
    prompts = []
    for name in sets:
        task = build_task(name, data_dir)
        for sample in task.samples()[:per_set]:
            _, ids = encode_prompt(tokenizer, sample, use_chat_template=True)
            if max_prompt_tokens:
                ids = ids[-max_prompt_tokens:]
            prompts.append(Prompt(name, sample.id, torch.tensor(ids, dtype=torch.long), task))
    return prompts


def load_avg() -> str:
    try:
        return "/".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "?"
