"""IFEval (Zhou et al. 2023): 541 prompts with verifiable instructions ("no commas", "at least
300 words", ...).

Prompted with the prompt alone as the user turn (zero-shot, as lm-eval's `ifeval`). Scored with
the official checks as lm-evaluation-harness 0.4.13 ships them (lm_eval.tasks.ifeval: strict
and loose, each at prompt level (all instructions followed) and instruction level).

Offline, the checker's NLTK tokenizers come from <data_dir>/ifeval/nltk_data (NLTK_DATA is set
before nltk is imported; without it lm-eval would try to download punkt_tab). langdetect,
used by the language checks, is seeded (DetectorFactory.seed = 0) so scores are repeatable.

Only the ifeval subpackage of lm_eval is used. With lm_eval installed with its dependencies it
imports normally; with `pip install --no-deps lm_eval` (plus nltk, langdetect, immutabledict)
the subpackage is imported without running lm_eval/tasks/__init__.py, which would pull in
`datasets`, `evaluate` and the rest of lm-eval's task machinery.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import types
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..params import optional, string
from .base import Sample, Task, load_hub_dataset, read_jsonl

LM_EVAL_VERSION = "0.4.13"


def _set_nltk_data(path: Path | None) -> None:
    if path is None:
        return
    if not path.is_dir():
        raise ConfigError(f"dataset ifeval: NLTK data folder {path} not found (set dataset.nltk_data)")
    current = os.environ.get("NLTK_DATA", "")
    if str(path) not in current.split(os.pathsep):
        os.environ["NLTK_DATA"] = os.pathsep.join(p for p in (str(path), current) if p)
    if "nltk" in sys.modules:  # nltk reads NLTK_DATA at import; add it to a live nltk too
        import nltk

        if str(path) not in nltk.data.path:
            nltk.data.path.insert(0, str(path))


def ifeval_utils(nltk_data: Path | None = None) -> types.ModuleType:
    """lm_eval.tasks.ifeval.utils, importable with or without lm-eval's heavy dependencies."""
    _set_nltk_data(nltk_data)
    try:
        utils = importlib.import_module("lm_eval.tasks.ifeval.utils")
    except ModuleNotFoundError as err:
        spec = importlib.util.find_spec("lm_eval")
        if spec is None or not spec.submodule_search_locations:
            raise ConfigError(
                f"dataset ifeval needs lm_eval=={LM_EVAL_VERSION} (its official instruction checks) with nltk>=3.9.1, "
                "langdetect and immutabledict: pip install 'loosespec_bench[tasks]'"
            ) from None
        if err.name in ("nltk", "langdetect", "immutabledict"):
            raise ConfigError(f"dataset ifeval: the IFEval checker needs {err.name!r}: pip install {err.name}") from None
        # lm_eval is there but its task registry's dependencies are not: register a bare
        # `lm_eval.tasks` package (no __init__ run) so that only the ifeval files load.
        tasks_dir = Path(next(iter(spec.submodule_search_locations))) / "tasks"
        pkg = types.ModuleType("lm_eval.tasks")
        pkg.__path__ = [str(tasks_dir)]
        sys.modules["lm_eval.tasks"] = pkg
        utils = importlib.import_module("lm_eval.tasks.ifeval.utils")
    import langdetect

    langdetect.DetectorFactory.seed = 0  # langdetect is random unless seeded
    return utils


class IFEval(Task):
    name = "ifeval"
    display_name = "IFEval"
    SETTINGS = {"nltk_data": optional(string)}
    full_size = 541
    hub_path = "google/IFEval"

    def __init__(self, *, nltk_data: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if nltk_data:
            self.nltk_data: Path | None = Path(os.path.expanduser(nltk_data))
        elif self.data_dir is not None:
            self.nltk_data = self.data_dir / "ifeval" / "nltk_data"
        else:
            self.nltk_data = None  # hub mode: nltk's own search path (lm-eval downloads punkt_tab if missing)
        if nltk_data and not self.nltk_data.is_dir():  # before any model loads, not at scoring time
            raise ConfigError(f"dataset.nltk_data={nltk_data!r} is not a folder; point it at NLTK data (punkt_tab) or null")
        self._utils: types.ModuleType | None = None

    @property
    def utils(self) -> types.ModuleType:
        if self._utils is None:
            self._utils = ifeval_utils(self.nltk_data)
        return self._utils

    def _rows(self) -> list[dict[str, Any]]:
        if self.data_dir is not None:
            return read_jsonl(self.local_path("ifeval", "input_data.jsonl"),
                              types={"key": int, "prompt": str, "instruction_id_list": list, "kwargs": list})
        return [dict(r) for r in load_hub_dataset(self.hub_path, None, "train")]

    def preflight(self) -> None:
        """The checker loads (lm-eval, NLTK data) and knows every instruction id of the samples,
        before any model loads: an unknown id would otherwise fail at scoring, after generation."""
        known = set(self.utils.instructions_registry.INSTRUCTION_DICT)
        for s in self.samples():
            bad = [i for i in s.reference["instruction_id_list"] if i not in known]
            if bad:
                raise ConfigError(
                    f"dataset ifeval: sample {s.id} names unknown instruction id(s) {bad} "
                    f"(data from {self.data_dir or 'the hub'}); the checker knows e.g. {sorted(known)[:3]}"
                )

    def load_all(self) -> list[Sample]:
        out = []
        for row in self._rows():
            reference = {k: row[k] for k in ("key", "prompt", "instruction_id_list", "kwargs")}
            out.append(
                Sample(
                    id=str(row["key"]),
                    messages=self.with_system([{"role": "user", "content": row["prompt"]}]),
                    reference=reference,
                )
            )
        return out

    def score(self, sample: Sample, completion: str) -> dict[str, Any]:
        # lm-eval's process_results: strict and loose, at prompt and instruction level.
        res = self.utils.process_results(sample.reference, [completion])
        return {
            "correct": bool(res["prompt_level_strict_acc"]),
            "prompt_strict": bool(res["prompt_level_strict_acc"]),
            "prompt_loose": bool(res["prompt_level_loose_acc"]),
            "inst_strict": [bool(x) for x in res["inst_level_strict_acc"]],
            "inst_loose": [bool(x) for x in res["inst_level_loose_acc"]],
        }

    def aggregate(self, records: list[dict[str, Any]]) -> dict[str, Any]:
        scores = [r["score"] for r in records if "prompt_strict" in r.get("score", {})]
        if not scores:
            return {}

        def mean(xs: list[bool]) -> float:
            return sum(xs) / len(xs) if xs else 0.0

        out = {
            "prompt_level_strict_acc": mean([s["prompt_strict"] for s in scores]),
            "inst_level_strict_acc": mean([x for s in scores for x in s["inst_strict"]]),
            "prompt_level_loose_acc": mean([s["prompt_loose"] for s in scores]),
            "inst_level_loose_acc": mean([x for s in scores for x in s["inst_loose"]]),
        }
        out["accuracy"] = out["prompt_level_strict_acc"]  # what retention uses
        return out
