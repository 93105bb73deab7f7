"""HumanEval (Chen et al. 2021): 164 Python functions to complete, checked by unit tests.

Prompted as lm-evaluation-harness' `humaneval_instruct`: the user asks for a solution to the
problem shown in a ```python block; the assistant turn is pre-filled with "Here is the
completed function:" and the problem's own code, and the model continues the function body.
The completion is cut at the first ``` and at lm-eval's stop strings ("\\nclass", "\\ndef",
"\\n#", "\\nif", "\\nprint").

Scored as pass@1 (one greedy sample per problem): prompt + completion + the problem's tests +
`check(entry_point)` must run to the end and exit 0, executed in the sandbox (tasks/sandbox.py),
never in the harness's process.
"""

from __future__ import annotations

import gzip
import os
from typing import Any

from ..errors import ConfigError
from ..params import check_node, nested
from .base import Sample, Task, load_hub_dataset, read_jsonl
from .sandbox import SANDBOX_SETTINGS, Limits, Result, SandboxError, check_sandbox, run_many, run_python

USER_TEMPLATE = "Write a solution to the following problem and make sure that it passes the tests:\n```python\n{prompt}\n```\n"
ASSISTANT_PREFIX = "Here is the completed function:\n```python\n{prompt}\n"


class HumanEval(Task):
    name = "humaneval"
    display_name = "HumanEval"
    SETTINGS = {"sandbox": nested(SANDBOX_SETTINGS)}
    quality_figure = "pass@1"
    full_size = 164
    hub_path = "openai/openai_humaneval"

    def __init__(self, *, sandbox: dict[str, Any] | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        opts = dict(sandbox or {})
        check_node("dataset", {"sandbox": opts}, self.SETTINGS)  # keys and ranges: SANDBOX_SETTINGS
        self.isolation = opts.pop("isolation", "auto")
        self.allow_same_user = bool(opts.pop("allow_same_user", False))
        self.hide_paths = [str(p) for p in (opts.pop("hide_paths", None) or []) if p]
        self.workers = opts.pop("workers", None)
        self.limits = Limits(**opts)  # timeout_s, cpu_s, memory_mb, max_procs, file_mb, tmp_mb
        # Settings under which no program could run: refused now, not recorded as failures.
        check_sandbox(self.isolation, self.allow_same_user, self.hide_paths)

    def preflight(self) -> None:
        """An empty program must pass under these settings (before any model loads): a machine
        or setting that fails every program would otherwise read as pass@1 = 0."""
        try:
            result = run_python("pass", **self._sandbox_kwargs())
        except SandboxError as err:
            raise ConfigError(f"dataset.sandbox: {err}") from None
        if not result.passed:
            tail = " ".join(result.output.split())[-300:]
            raise ConfigError(
                f"dataset.sandbox: an empty program does not pass under these settings ({result.status}"
                f"{': ' + tail if tail else ''}); check dataset.sandbox (memory_mb, timeout_s, cpu_s, hide_paths, isolation)"
            )
        self.check_canonical(self.samples())

    def canonical_completion(self, sample: Sample) -> str | None:
        """The data's own solution as a completion (None where the data has none)."""
        return sample.meta.get("canonical_solution")

    def check_canonical(self, samples: list[Sample]) -> None:
        """Every selected sample's tests must pass its own canonical solution, before any model
        loads: a test that does not compile (or a wrong one) would score every completion 0,
        read as pass@1 = 0 rather than as broken data."""
        chosen = [(s, c) for s in samples if (c := self.canonical_completion(s))]
        if not chosen:
            return
        scores = self.score_batch([s for s, _ in chosen], [[c] for _, c in chosen])
        bad = [(s.id, sc) for (s, _), sc in zip(chosen, scores) if not sc.get("correct")]
        if bad:
            sid, sc = bad[0]
            tail = " ".join(str(sc.get("output", "")).split())[-200:]
            raise ConfigError(
                f"dataset {self.name}: the tests of {sid}{f' (and {len(bad) - 1} more)' if len(bad) > 1 else ''} fail the data's "
                f"own canonical solution ({sc.get('status')}{': ' + tail if tail else ''}); every completion would score 0 there: "
                f"fix or replace the data file (data from {self.data_dir or 'the hub'})"
            )

    def _rows(self) -> list[dict[str, Any]]:
        if self.data_dir is not None:
            path = self.local_path("humaneval", "HumanEval.jsonl.gz")
            try:
                return read_jsonl(
                    path,
                    opener=lambda f: gzip.open(f, "rt", encoding="utf-8"),  # f: opened through safe_files
                    required=("task_id", "prompt", "test", "entry_point"),
                    types={"task_id": str, "prompt": str, "test": str, "entry_point": str},
                )
            except (OSError, EOFError, UnicodeDecodeError) as err:  # not gzip, truncated
                raise ConfigError(f"{path}: unreadable ({err}); fix or replace the data file") from None
        return [dict(r) for r in load_hub_dataset(self.hub_path, None, "test")]

    def load_all(self) -> list[Sample]:
        out = []
        for row in self._rows():
            messages = [
                {"role": "user", "content": USER_TEMPLATE.format(prompt=row["prompt"])},
                # A final assistant message is a prefix the model continues (prompting.encode_messages).
                {"role": "assistant", "content": ASSISTANT_PREFIX.format(prompt=row["prompt"])},
            ]
            reference = {k: row[k] for k in ("prompt", "test", "entry_point")}
            out.append(
                Sample(
                    id=row["task_id"],
                    messages=self.with_system(messages),
                    reference=reference,
                    meta={"canonical_solution": row.get("canonical_solution")},
                )
            )
        return out

    @staticmethod
    def program(sample: Sample, completion: str) -> str:
        """The file the sandbox runs: lm-eval's build_predictions_instruct + code_eval's test."""
        cut = completion.find("```")
        body = completion if cut == -1 else completion[:cut]
        ref = sample.reference
        return f"{ref['prompt']}{body}\n{ref['test']}\ncheck({ref['entry_point']})\n"

    def _sandbox_kwargs(self) -> dict[str, Any]:
        return dict(
            limits=self.limits,
            isolation=self.isolation,
            hide_paths=[os.path.abspath(p) for p in self.hide_paths],
            allow_same_user=self.allow_same_user,
        )

    @staticmethod
    def _score(result: Result) -> dict[str, Any]:
        return {
            "correct": result.passed,
            "status": result.status,
            "isolation": result.isolation,
            "exec_s": round(result.duration_s, 3),
            "output": result.output[-1000:],
        }

    def score(self, sample: Sample, completion: str) -> dict[str, Any]:
        return self._score(run_python(self.program(sample, completion), **self._sandbox_kwargs()))

    def score_batch(self, samples: list[Sample], completions: list[list[str]]) -> list[dict[str, Any]]:
        programs = [self.program(s, c[-1]) for s, c in zip(samples, completions)]
        results = run_many(programs, workers=self.workers, **self._sandbox_kwargs())
        return [self._score(r) for r in results]

    def aggregate(self, records: list[dict[str, Any]]) -> dict[str, Any]:
        out = super().aggregate(records)
        if "accuracy" in out:
            out["pass@1"] = out["accuracy"]  # greedy, one sample per problem
        return out
