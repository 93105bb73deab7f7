"""Final-number extraction for math word problems (GSM8K, MGSM).

Two scorers live here:
- `extract_answer` / `numbers_equal`: numeric, tolerant of how people write numbers (thousands
  separators in several conventions, currency, other scripts' digits); MGSM uses it.
- `LmEvalScorer`: lm-evaluation-harness' own regex filters and string exact match, configured
  from lm-eval's task YAML (GSM8K) or the authors' task file (MGSM 0813), so accuracy matches
  what that community reports.
"""

from __future__ import annotations

import functools
import importlib.util
import math
import re
import unicodedata
from pathlib import Path
from typing import Any

import yaml

from ..errors import ConfigError

# A number with optional sign, thousands separators and decimals: -1,234.5 / 1.234,5 / 3.
# Non-breaking and narrow spaces group thousands too ("1\u202f234", French typography); a
# plain space only when the caller says the language writes numbers that way (`spaced`),
# because in English "3 100-metre sprints" is two numbers.
# A minus sign counts only where it cannot be a hyphen or a subtraction ("18-3", "COVID-19").
_SIGN = r"(?:(?<![\w.])-)?"
_NUMBER = re.compile(rf"{_SIGN}(?:\d{{1,3}}(?:[\u00a0\u202f]\d{{3}})+(?:[.,]\d+)?|\d[\d,.]*\d|\d|\.\d+)")
_NUMBER_SPACED = re.compile(rf"{_SIGN}(?:\d{{1,3}}(?:[ \u00a0\u202f]\d{{3}})+(?:[.,]\d+)?|\d[\d,.]*\d|\d|\.\d+)")
_SPACES = re.compile(r"[ \u00a0\u202f]")
# The Unicode minus sign is a minus too (an en dash is more often a range: "3–5").
_MINUS = str.maketrans({"\u2212": "-"})


def _to_ascii_digits(text: str) -> str:
    # Bengali, Telugu, Thai, full-width... digits count as numbers too.
    return "".join(str(unicodedata.digit(c)) if c.isdigit() and not c.isascii() else c for c in text)


def _normalise(text: str) -> str:
    return _to_ascii_digits(text).translate(_MINUS)


def parse_number(text: str, decimal_comma: bool = False) -> float | None:
    """Parse one number string ('1,234', '$5', '-3.50', '1 234') to float; None if it is not one.
    'inf', 'nan', 'infinity' (which float() reads) are not numbers here: a reference answer of
    nan equals nothing and one of inf is no problem's answer.

    decimal_comma: read it the continental way ('1.234,5' = 1234.5, '2,5' = 2.5).
    """
    text = _SPACES.sub("", _normalise(text)).strip().lstrip("$€£¥").rstrip(".")
    if decimal_comma:
        text = text.replace(".", "").replace(",", ".")
    else:
        text = text.replace(",", "")
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _numbers(text: str, spaced: bool = False) -> list[str]:
    # A trailing separator belongs to the sentence ("is 42." / "is 42, so"), not the number.
    return [n.rstrip(".,") for n in (_NUMBER_SPACED if spaced else _NUMBER).findall(text)]


def extract_answer_text(text: str, answer_phrases: list[str] = (), spaced: bool = False) -> str | None:
    """The model's final number as written: in the last \\boxed{}, else after the last answer
    phrase, else the last number in the text."""
    text = _normalise(text)
    # '\boxed{42}' is how many instruct models state the answer.
    boxed = re.findall(r"\\boxed\{([^}]*)\}", text)
    if boxed:
        nums = _numbers(boxed[-1], spaced)
        if nums:
            return nums[-1]
    for phrase in answer_phrases:
        pos = text.lower().rfind(phrase.lower())
        if pos >= 0:
            nums = _numbers(text[pos + len(phrase) :], spaced)
            if nums:
                return nums[0]
    nums = _numbers(text, spaced)
    return nums[-1] if nums else None


def extract_answer(
    text: str, answer_phrases: list[str] = (), decimal_comma: bool = False, spaced: bool = False
) -> float | None:
    """The model's final number: after the last answer phrase if any, else the last number."""
    raw = extract_answer_text(text, answer_phrases, spaced)
    return None if raw is None else parse_number(raw, decimal_comma)


def numbers_equal(a: float | None, b: float | None) -> bool:
    return a is not None and b is not None and abs(a - b) <= 1e-6 * max(1.0, abs(b))


# --- lm-evaluation-harness filters and exact match ------------------------------------------
# Not re-typed here: the regexes and exact_match options come from lm-eval's own task YAML
# (e.g. tasks/gsm8k/gsm8k-cot-llama.yaml), and lm-eval's RegexFilter / take_first and
# exact_match metric do the work.


def lm_eval_task_config(relpath: str) -> dict[str, Any]:
    """One of lm-eval's bundled task YAMLs (plain YAML ones), read without building the task."""
    spec = importlib.util.find_spec("lm_eval")
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError("this scorer needs lm_eval==0.4.13 (pip install lm_eval==0.4.13)")
    path = Path(list(spec.submodule_search_locations)[0]) / "tasks" / relpath
    with path.open(encoding="utf-8") as f:
        return yaml.safe_load(f)


def apply_template(template: str, doc: dict[str, Any]) -> str:
    """lm-eval's `apply_template` (its jinja environment, with its filters), but each template
    compiled once: lm-eval compiles on every call, and a GSM8K load renders 8 exemplars and the
    question for each of 1,319 problems (11,871 compiles, ~4 s of every run's start)."""
    return _compiled(template).render(**doc)


@functools.lru_cache(maxsize=256)
def _compiled(template: str) -> Any:
    from lm_eval.utils import env

    return env.from_string(template)


class LmEvalScorer:
    """A task's filter ensembles (its `filter_list`) and its exact_match options (its
    `metric_list` entry), run with lm-eval's own filter and metric functions."""

    def __init__(self, filter_list: list[dict[str, Any]], metric_list: list[dict[str, Any]]) -> None:
        from lm_eval.filters import build_filter_ensemble

        self.ensembles = [
            build_filter_ensemble(
                f["name"], [(c["function"], {k: v for k, v in c.items() if k != "function"}) for c in f["filter"]]
            )
            for f in filter_list
        ]
        (em,) = [m for m in metric_list if m["metric"] == "exact_match"]
        self.em_kwargs = {k: v for k, v in em.items() if k not in ("metric", "aggregation", "higher_is_better")}

    @classmethod
    def from_task_yaml(cls, relpath: str) -> "LmEvalScorer":
        cfg = lm_eval_task_config(relpath)
        return cls(cfg["filter_list"], cfg["metric_list"])

    def filtered(self, completion: str, doc: dict[str, Any] | None = None) -> dict[str, str]:
        """Each filter ensemble's answer, by ensemble name (e.g. strict-match, flexible-extract);
        `doc` for filters that read the document (multi_choice_regex reads its choices)."""
        from lm_eval.api.instance import Instance

        inst = Instance(request_type="generate_until", doc=dict(doc or {}), arguments=("", {}), idx=0)
        inst.resps = [completion]
        for ensemble in self.ensembles:
            ensemble.apply([inst])
        return dict(inst.filtered_resps)

    def exact_match(self, prediction: str, reference: str) -> bool:
        from lm_eval.api.metrics import exact_match_hf_evaluate

        out = exact_match_hf_evaluate(predictions=[prediction], references=[str(reference)], **self.em_kwargs)
        return bool(out["exact_match"] == 1.0)
