"""MGSM (Shi et al. 2022): GSM8K's 250 test problems translated into 10 languages (+ English).

Prompted as native chain of thought (the question and the answer cue in the problem's own
language), as FLy evaluated it; scored by exact match of the final number.
"""

from __future__ import annotations

import csv
from typing import Any

from ..errors import ConfigError
from .answers import extract_answer, numbers_equal, parse_number
from .base import Sample, Task, load_hub_dataset

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
    hub_path = "juletxara/mgsm"

    def __init__(self, *, languages: list[str] | str = ("en",), **kwargs: Any) -> None:
        super().__init__(**kwargs)
        # A list ([fr,de,th] on the command line) or one string ("fr" or "fr,de,th").
        langs = [x.strip() for x in languages.split(",")] if isinstance(languages, str) else list(languages)
        if langs == ["all"]:
            langs = LANGUAGES
        bad = [lang for lang in langs if lang not in NATIVE_COT]
        if bad or not langs:
            raise ConfigError(f"dataset.languages={langs} has unknown entries {bad}; choose from {LANGUAGES} or 'all'")
        self.languages = langs

    def _rows(self, lang: str) -> list[tuple[str, float]]:
        if self.data_dir is not None:
            path = self.local_path("mgsm", f"mgsm_{lang}.tsv")
            # No header, no quoting: a question may contain quote characters.
            with path.open(encoding="utf-8", newline="") as f:
                rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
            return [(q, parse_number(a)) for q, a in rows]
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
                    q_cue, cot_cue, _ = NATIVE_COT[lang]
                    content = f"{q_cue} {question}\n{cot_cue}"
                    out.append(
                        Sample(
                            id=f"{lang}-{i}",
                            messages=self.with_system([{"role": "user", "content": content}]),
                            reference=answer,
                            meta={"language": lang},
                        )
                    )
        return out

    def score(self, sample: Sample, completion: str) -> dict[str, Any]:
        lang = sample.meta["language"]
        phrase = NATIVE_COT[lang][2]
        pred = extract_answer(completion, [phrase])
        correct = numbers_equal(pred, sample.reference)
        if not correct and lang in LOCAL_NUMBERS:
            local = extract_answer(completion, [phrase], decimal_comma=True, **LOCAL_NUMBERS[lang])
            if numbers_equal(local, sample.reference):
                pred, correct = local, True
        return {"pred": pred, "correct": correct}

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
        return out
