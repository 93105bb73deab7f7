"""MMLU (Hendrycks et al. 2021), one of DropMatch's out-of-distribution sets, as a generation
task: the model writes an answer and lm-eval's extraction reads the chosen letter.

Prompt, split, stop strings, answer filters and exact-match options are read from lm-eval
0.4.13's own MMLU task files (not re-typed):
- variant `flan_cot_zeroshot` (default): tasks/mmlu/flan_cot_zeroshot/ — "Q: ... (A) .. (D) ..
  A: Let's think step by step.", the subject's description as the system turn, the validation
  split (1,531 questions), answer = the text after "The answer is" (strict-match) or the last
  "(X)" / choice text (flexible-extract, lm-eval's multi_choice_regex), exact match against "(X)".
- variant `generative`: tasks/mmlu/generative/ — "... D. ...\\nAnswer:", the test split
  (14,042), the first line of the answer against the letter.
Data: the hub's cais/mmlu "all" config, or ${data_dir}/mmlu/<split>.jsonl in the same format
(question, subject, choices, answer index) when present.
"""

from __future__ import annotations

from typing import Any

from ..errors import ConfigError
from .answers import LmEvalScorer, lm_eval_task_config
from ..params import choice, list_of, optional, string
from .base import Sample, Task, load_hub_dataset, read_jsonl

VARIANTS = {
    "flan_cot_zeroshot": ("mmlu/flan_cot_zeroshot/_mmlu_flan_cot_zeroshot_template_yaml", "mmlu/flan_cot_zeroshot/mmlu_{subject}.yaml"),
    "generative": ("mmlu/generative/_default_template_yaml", "mmlu/generative/mmlu_{subject}.yaml"),
}
MATCHES = ("strict-match", "flexible-extract", "get_response")


class MMLU(Task):
    name = "mmlu"
    display_name = "MMLU"
    SETTINGS = {"variant": choice(*VARIANTS), "subjects": optional(list_of(string))}
    full_size, full_size_exact = 1531, False  # flan_cot_zeroshot validation split, approximately
    hub_path = "cais/mmlu"

    def __init__(self, *, variant: str = "flan_cot_zeroshot", subjects: list[str] | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.variant = variant
        template, self.subject_file = VARIANTS[variant]
        self.cfg = lm_eval_task_config(template)
        self.split = self.cfg.get("test_split") or self.cfg["validation_split"]
        self.scorer = LmEvalScorer(self.cfg["filter_list"], self.cfg["metric_list"])
        self.filter_names = [f["name"] for f in self.cfg["filter_list"]]
        until = self.cfg.get("generation_kwargs", {}).get("until", [])
        self.stop_strings = list(dict.fromkeys([*until, *self.stop_strings]))
        self.subjects = list(subjects) if subjects else None
        self._descriptions: dict[str, str] = {}

    def description(self, subject: str) -> str:
        if subject not in self._descriptions:
            try:
                self._descriptions[subject] = lm_eval_task_config(self.subject_file.format(subject=subject))["description"]
            except FileNotFoundError:
                raise ConfigError(f"MMLU subject {subject!r} has no lm-eval task file ({self.subject_file})") from None
        return self._descriptions[subject]

    def _rows(self) -> list[dict[str, Any]]:
        if self.data_dir is not None and (self.data_dir / "mmlu" / f"{self.split}.jsonl").exists():
            return read_jsonl(self.data_dir / "mmlu" / f"{self.split}.jsonl")
        return [dict(r) for r in load_hub_dataset(self.hub_path, "all", self.split)]

    def load_all(self) -> list[Sample]:
        from .answers import apply_template

        out = []
        for i, row in enumerate(self._rows()):
            if self.subjects and row["subject"] not in self.subjects:
                continue
            messages = [
                # lm-eval --apply_chat_template puts the task description in the system turn.
                {"role": "system", "content": (self.system_prompt + "\n\n" if self.system_prompt else "") + self.description(row["subject"])},
                {"role": "user", "content": apply_template(self.cfg["doc_to_text"], row)},
            ]
            target = apply_template(self.cfg["doc_to_target"], row)
            doc = {k: row[k] for k in ("question", "subject", "choices", "answer")}
            out.append(Sample(id=f"mmlu/{self.split}/{i}", messages=messages, reference=target, meta={"subject": row["subject"], "doc": doc}))
        return out

    def score(self, sample: Sample, completion: str) -> dict[str, Any]:
        filtered = self.scorer.filtered(completion, sample.meta.get("doc"))
        out: dict[str, Any] = {}
        for name in self.filter_names:
            out[f"pred,{name}"] = filtered[name]
            out[f"correct,{name}"] = self.scorer.exact_match(filtered[name], sample.reference)
        out["correct"] = out[f"correct,{self.filter_names[0]}"]
        return out

    def aggregate(self, records: list[dict[str, Any]]) -> dict[str, Any]:
        out = super().aggregate(records)
        for name in self.filter_names:
            sub = [r["score"] for r in records if f"correct,{name}" in r.get("score", {})]
            if sub:
                out[f"accuracy,{name}"] = sum(bool(s[f"correct,{name}"]) for s in sub) / len(sub)
        return out
