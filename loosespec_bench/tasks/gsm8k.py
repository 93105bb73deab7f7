"""GSM8K (Cobbe et al. 2021): 1,319 grade-school math test problems.

Prompted as lm-evaluation-harness' `gsm8k_cot_llama`: an instruction asking for "The final
answer is N", with the Wei et al. chain-of-thought exemplars as earlier user/assistant chat
turns. Instruction (doc_to_text) and exemplars (fewshot_config.samples) are read from lm-eval's
own task file, tasks/gsm8k/gsm8k-cot-llama.yaml, not re-typed (`dataset=lm_eval
dataset.task=gsm8k_cot_llama` builds the same prompt through lm-eval's task object). The paper
setting is 8 shots; `num_fewshot` defaults lower in conf/dataset/gsm8k.yaml to keep CPU prompts
short.

Scored as lm-eval scores it: the last "The final answer is N" (strict-match) or the last
number (flexible-extract), then string exact match after removing commas, "$", a trailing
"." and case, against the reference after "#### ".
"""

from __future__ import annotations

from typing import Any

from ..errors import ConfigError
from .answers import LmEvalScorer, apply_template, extract_answer, lm_eval_task_config, parse_number
from ..params import check_node, choice, declared_rules, integer
from .base import Sample, Task, load_hub_dataset, read_jsonl

MATCHES = ("strict", "flexible")
# test = the evaluation set; train = the 7,473 training problems, which only AutoJudge's mining
# reads (train/mine_autojudge.py): never evaluate on it.
SPLITS = ("test", "train")
# lm-eval's own filters (strict-match, flexible-extract) and exact_match options, read from
# its task file rather than re-typed.
LM_EVAL_YAML = "gsm8k/gsm8k-cot-llama.yaml"
FILTER_NAMES = {"strict": "strict-match", "flexible": "flexible-extract"}


def load_prompt() -> dict[str, Any]:
    """lm-eval's gsm8k_cot_llama prompt: {"instruction": jinja doc_to_text, "exemplars": [...]}."""
    cfg = lm_eval_task_config(LM_EVAL_YAML)
    shots = [{"question": x["question"], "answer": x["target"]} for x in cfg["fewshot_config"]["samples"]]
    return {"instruction": cfg["doc_to_text"], "exemplars": shots}


class GSM8K(Task):
    name = "gsm8k"
    display_name = "GSM8K"
    SETTINGS = {"num_fewshot": integer(0), "match": choice(*MATCHES), "split": choice(*SPLITS)}
    full_size = 1319  # the test split
    hub_path = "openai/gsm8k"

    def __init__(self, *, num_fewshot: int = 8, match: str = "strict", split: str = "test", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.prompt = load_prompt()
        n = len(self.prompt["exemplars"])
        if not isinstance(num_fewshot, int) or not 0 <= num_fewshot <= n:
            raise ConfigError(f"dataset.num_fewshot={num_fewshot!r} must be an integer in 0..{n} (the paper used 8)")
        # The declared ranges (SETTINGS), also for a GSM8K built without the pre-check (mining).
        check_node("dataset", {"match": match, "split": split}, declared_rules(GSM8K))
        self.num_fewshot = num_fewshot
        self.match = match
        self.split = split
        self.scorer = LmEvalScorer.from_task_yaml(LM_EVAL_YAML)

    def _rows(self) -> list[dict[str, str]]:
        if self.data_dir is not None:
            return read_jsonl(self.local_path("gsm8k", f"{self.split}.jsonl"), required=("question", "answer"),
                              types={"question": str, "answer": str})
        return [dict(r) for r in load_hub_dataset(self.hub_path, "main", self.split)]

    def user_turn(self, question: str) -> str:
        return apply_template(self.prompt["instruction"], {"question": question})

    def messages(self, question: str) -> list[dict[str, str]]:
        turns: list[dict[str, str]] = []
        # lm-eval's sampler "first_n": always the first n exemplars, in file order.
        for ex in self.prompt["exemplars"][: self.num_fewshot]:
            turns.append({"role": "user", "content": self.user_turn(ex["question"])})
            turns.append({"role": "assistant", "content": ex["answer"]})
        turns.append({"role": "user", "content": self.user_turn(question)})
        return self.with_system(turns)

    def load_all(self) -> list[Sample]:
        out = []
        for i, row in enumerate(self._rows()):
            # The reference is the text after "#### " (lm-eval's doc_to_target), e.g. "1,600".
            reference = row["answer"].split("####")[-1].strip()
            if "####" not in row["answer"] or parse_number(reference) is None:
                where = self.local_path("gsm8k", f"{self.split}.jsonl") if self.data_dir is not None else self.hub_path
                raise ConfigError(
                    f"{where} line {i + 1}: the reference answer {reference[-40:]!r} is not a number after '####'; "
                    "fix or replace the data file"
                )
            # Train problems get their own ids, so a train record can never pass for a test one.
            sid = f"gsm8k/{i}" if self.split == "test" else f"gsm8k-{self.split}/{i}"
            out.append(Sample(id=sid, messages=self.messages(row["question"]), reference=reference))
        return out

    def score(self, sample: Sample, completion: str) -> dict[str, Any]:
        filtered = self.scorer.filtered(completion)
        preds = {m: filtered[FILTER_NAMES[m]] for m in MATCHES}
        ok = {m: self.scorer.exact_match(preds[m], sample.reference) for m in MATCHES}
        return {
            "pred": preds[self.match],
            "pred_number": extract_answer(completion, ["The final answer is"]),
            "correct": ok[self.match],
            "correct_strict": ok["strict"],
            "correct_flexible": ok["flexible"],
        }

    def aggregate(self, records: list[dict[str, Any]]) -> dict[str, Any]:
        out = super().aggregate(records)
        scored = [r["score"] for r in records if "correct_strict" in r.get("score", {})]
        if scored:
            out["accuracy_strict"] = sum(s["correct_strict"] for s in scored) / len(scored)
            out["accuracy_flexible"] = sum(s["correct_flexible"] for s in scored) / len(scored)
            out["accuracy_match"] = self.match
        return out
