"""MGSM (Shi et al. 2022): GSM8K's 250 test problems translated into 10 languages (+ English).

Two prompts (`prompt`):
- native_cot: the question and the answer cue in the problem's own language (MGSM paper's
  native-CoT cues); scored by numeric match of the final number.
- native_cot_0813: the FLy authors' zero-shot instruction prompt, their lm-eval tasks
  `mgsm_native_cot_<lang>_0813` (AMD-AGI/FLy@98c9e8e lm_eval/tasks/mgsm/native_cot/
  mgsm_native_cot_<lang>.yaml, run by 0811scripts/0814_mgsm_rede_70b.sh): an instruction in the
  problem's language ("Solve this math problem. Give the reasoning steps ... "The answer is "
  ...") + two newlines + the question, one user turn. Scored as those files score: lm-eval's
  regex filters (strict-match: first "<answer phrase> N"; flexible-extract: last number) and
  exact_match (ignore_case, ignore_punctuation; cot_yaml) against the answer number. The
  instructions and filters are data: tasks/data/mgsm_native_cot_0813.json, extracted from
  those files by rendering their doc_to_text for a test document.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any, Mapping

from ..errors import ConfigError
from .answers import LmEvalScorer, extract_answer, numbers_equal, parse_number
from ..params import boolean, choice, str_or_list
from .base import Sample, Task, load_hub_dataset, round_robin, seeded_permutation

# Per language: (question cue, step-by-step cue, final-answer phrase). The cues follow the
# MGSM paper's native-CoT exemplars; the phrase is what the scorer looks for first.
NATIVE_COT: dict[str, tuple[str, str, str]] = {
    "en": ("Question:", "Step-by-Step Answer:", "The answer is"),
    "de": ("Frage:", "Schritt-für-Schritt-Antwort:", "Die Antwort lautet"),
    "fr": ("Question :", "Réponse étape par étape :", "La réponse est"),
    "es": ("Pregunta:", "Respuesta paso a paso:", "La respuesta es"),
    "ru": ("Задача:", "Пошаговое решение:", "Ответ —"),
    "zh": ("问题：", "逐步解答：", "答案是"),
    "ja": ("問題：", "ステップごとの答え：", "答えは"),
    "th": ("โจทย์:", "คำตอบทีละขั้นตอน:", "คำตอบคือ"),
    "sw": ("Swali:", "Jibu la Hatua kwa Hatua:", "Jibu ni"),
    "bn": ("প্রশ্ন:", "ধাপে ধাপে উত্তর:", "উত্তর হল"),
    "te": ("ప్రశ్న:", "దశలవారీగా సమాధానం:", "సమాధానం"),
}
LANGUAGES = sorted(NATIVE_COT)
PROMPTS = ("native_cot", "native_cot_0813")
FLY_0813_FILE = Path(__file__).parent / "data" / "mgsm_native_cot_0813.json"
# cot_yaml's metric_list (AMD-AGI/FLy@98c9e8e lm_eval/tasks/mgsm/native_cot/cot_yaml).
FLY_0813_METRIC = [{"metric": "exact_match", "ignore_case": True, "ignore_punctuation": True}]
MATCHES = {"strict": "strict-match", "flexible": "flexible-extract"}
# How each language writes numbers when it does not use the English "1,234.5": continental
# decimal comma, with "." (de, es) or a space (fr, ru) grouping thousands. A model may use
# either convention, so these languages accept either reading of the final number.
LOCAL_NUMBERS: dict[str, dict[str, bool]] = {
    "de": {"spaced": False},
    "es": {"spaced": False},
    "fr": {"spaced": True},
    "ru": {"spaced": True},
}


class MGSM(Task):
    name = "mgsm"
    display_name = "MGSM"
    prompt_labels = {"native_cot": "native CoT", "native_cot_0813": "FLy 0813"}
    SETTINGS = {
        "match": choice(*MATCHES),
        "prompt": choice(*PROMPTS),
        "languages": str_or_list,
        "same_problems": boolean,
    }
    group_key = "language"  # order() interleaves languages itself
    hub_path = "juletxara/mgsm"
    # Read by the pre-check (checks.py) before anything loads: each entry of dataset.languages.
    setting_choices = {"languages": (*LANGUAGES, "all")}
    per_language = 250

    @classmethod
    def size_of(cls, settings: Mapping[str, Any]) -> tuple[int | None, bool]:
        """250 problems per language (dataset.languages: a list, a comma string, or all)."""
        langs = settings.get("languages") or ["en"]
        langs = [x.strip() for x in langs.split(",")] if isinstance(langs, str) else list(langs)
        return cls.per_language * (len(LANGUAGES) if langs == ["all"] else len(langs)), True

    def __init__(
        self,
        *,
        languages: list[str] | str = ("en",),
        prompt: str = "native_cot",
        match: str = "strict",
        same_problems: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        # False: each language asks different problems (a limit of 3 over [fr, de, th] is 3
        # problems); True: the same problems in every language (a cross-language comparison).
        self.same_problems = bool(same_problems)
        self.prompt, self.match = prompt, match
        # A list ([fr,de,th] on the command line) or one string ("fr" or "fr,de,th").
        langs = [x.strip() for x in languages.split(",")] if isinstance(languages, str) else list(languages)
        if langs == ["all"]:
            langs = LANGUAGES
        bad = [lang for lang in langs if lang not in NATIVE_COT]
        if bad or not langs:
            raise ConfigError(f"dataset.languages={langs} has unknown entries {bad}; choose from {LANGUAGES} or 'all'")
        self.languages = langs
        if prompt == "native_cot_0813":
            with FLY_0813_FILE.open(encoding="utf-8") as f:
                self.fly = json.load(f)["languages"]
            self.scorers = {lang: LmEvalScorer(self.fly[lang]["filter_list"], FLY_0813_METRIC) for lang in langs}
            until = [u for lang in langs for u in self.fly[lang]["until"]]
            self.stop_strings = list(dict.fromkeys([*until, *self.stop_strings]))

    def _rows(self, lang: str) -> list[tuple[str, float]]:
        if self.data_dir is not None:
            path = self.local_path("mgsm", f"mgsm_{lang}.tsv")
            # No header, no quoting: a question may contain quote characters.
            from ..safe_files import open_regular  # never a link, a FIFO (a run would hang) or a device

            with open_regular(path, "r", encoding="utf-8", newline="") as f:
                rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
            out = []
            for lineno, row in enumerate(rows, 1):
                if len(row) != 2:
                    raise ConfigError(
                        f"{path} line {lineno}: {len(row)} tab-separated field(s), expected 2 (question, answer); "
                        "fix or replace the data file"
                    )
                number = parse_number(row[1])
                if number is None:
                    raise ConfigError(f"{path} line {lineno}: the reference answer {row[1]!r} is not a number; fix or replace the data file")
                out.append((row[0], number))
            return out
        ds = load_hub_dataset(self.hub_path, lang, "test")
        return [(r["question"], float(r["answer_number"])) for r in ds]

    def load_all(self) -> list[Sample]:
        per_lang = {lang: self._rows(lang) for lang in self.languages}
        out: list[Sample] = []
        # Round-robin over languages, so that any `limit` covers every selected language.
        for i in range(max(len(rows) for rows in per_lang.values())):
            for lang, rows in per_lang.items():
                if i < len(rows):
                    question, answer = rows[i]
                    if self.prompt == "native_cot_0813":
                        content = self.fly[lang]["instruction"] + question
                    else:
                        q_cue, cot_cue, _ = NATIVE_COT[lang]
                        content = f"{q_cue} {question}\n{cot_cue}"
                    out.append(
                        Sample(
                            id=f"{lang}-{i}",
                            messages=self.with_system([{"role": "user", "content": content}]),
                            reference=answer,
                            meta={"language": lang, "problem": f"mgsm/{i}"},
                        )
                    )
        return out

    def order(self, items: list[Sample]) -> list[Sample]:
        """Round-robin over languages; within a language, problems in a seeded permutation
        (sample_seed; None: file order). Unless same_problems, language l starts its walk
        through that permutation at l * floor(N / L): the first floor(N / L) samples of each language
        are different problems from every other language's, and each language still reaches
        every problem when the whole set runs."""
        by_lang: dict[str, list[Sample]] = {}
        for s in items:
            by_lang.setdefault(s.meta["language"], []).append(s)
        n = max((len(v) for v in by_lang.values()), default=0)
        perm = seeded_permutation(n, self.sample_seed) if self.sample_seed is not None else list(range(n))
        step = 0 if self.same_problems else max(1, n // max(len(by_lang), 1))
        ordered = []
        for l_idx, samples in enumerate(by_lang.values()):
            rows = {int(s.problem.rsplit("/", 1)[1]): s for s in samples}
            walk = [perm[(j + l_idx * step) % n] for j in range(n)]
            ordered.extend(rows[i] for i in walk if i in rows)
        return round_robin(ordered, self.group_key)

    def selection(self, samples: list[Sample]) -> dict[str, Any]:
        return {**super().selection(samples), "same_problems": self.same_problems}

    def score(self, sample: Sample, completion: str) -> dict[str, Any]:
        if self.prompt == "native_cot_0813":
            return self._score_0813(sample, completion)
        lang = sample.meta["language"]
        phrase = NATIVE_COT[lang][2]
        pred = extract_answer(completion, [phrase])
        correct = numbers_equal(pred, sample.reference)
        if not correct and lang in LOCAL_NUMBERS:
            local = extract_answer(completion, [phrase], decimal_comma=True, **LOCAL_NUMBERS[lang])
            if numbers_equal(local, sample.reference):
                pred, correct = local, True
        return {"pred": pred, "correct": correct}

    def _score_0813(self, sample: Sample, completion: str) -> dict[str, Any]:
        scorer = self.scorers[sample.meta["language"]]
        ref = sample.reference
        # doc_to_target: answer_number|string ("18"; the hub stores integers).
        target = str(int(ref)) if float(ref).is_integer() else str(ref)
        filtered = scorer.filtered(completion)
        ok = {m: scorer.exact_match(filtered[name], target) for m, name in MATCHES.items()}
        return {
            "pred": filtered[MATCHES[self.match]],
            "correct": ok[self.match],
            "correct_strict": ok["strict"],
            "correct_flexible": ok["flexible"],
        }

    def aggregate(self, records: list[dict[str, Any]]) -> dict[str, Any]:
        out = super().aggregate(records)
        for lang in self.languages:
            sub = [r for r in records if r.get("meta", {}).get("language") == lang and "score" in r]
            if sub:
                out[f"accuracy_{lang}"] = sum(bool(r["score"].get("correct")) for r in sub) / len(sub)
        per_lang = [out[f"accuracy_{lang}"] for lang in self.languages if f"accuracy_{lang}" in out]
        if per_lang:
            # The figure MGSM papers report over a language set: the mean of per-language
            # accuracies (equal to `accuracy` when every language has the same sample count).
            out["accuracy_mean_languages"] = sum(per_lang) / len(per_lang)
        for m in MATCHES:
            sub = [r["score"] for r in records if f"correct_{m}" in r.get("score", {})]
            if sub:
                out[f"accuracy_{m}"] = sum(bool(x[f"correct_{m}"]) for x in sub) / len(sub)
        return out
