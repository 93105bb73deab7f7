"""Final-number extraction for math word problems (GSM8K, MGSM).

Two scorers live here:
- `extract_answer` / `numbers_equal`: numeric, tolerant of how people write numbers (thousands
  separators in several conventions, currency, other scripts' digits); MGSM uses it.
- `lm_eval_*`: lm-evaluation-harness' string exact match for GSM8K (its regex filters, then
  the same normalisation on both sides), so GSM8K accuracy matches what that community reports.
"""

from __future__ import annotations

import re
import unicodedata

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

    decimal_comma: read it the continental way ('1.234,5' = 1234.5, '2,5' = 2.5).
    """
    text = _SPACES.sub("", _normalise(text)).strip().lstrip("$€£¥").rstrip(".")
    if decimal_comma:
        text = text.replace(".", "").replace(",", ".")
    else:
        text = text.replace(",", "")
    try:
        return float(text)
    except ValueError:
        return None


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


# --- lm-evaluation-harness GSM8K (gsm8k_cot_llama) -------------------------------------------
# Filters of lm-eval 0.4.13 tasks/gsm8k/gsm8k-cot-llama.yaml: the last match of each regex.
LM_EVAL_STRICT = re.compile(r"The final answer is ((-?[$0-9.,]{2,})|(-?[0-9]+))")
LM_EVAL_FLEXIBLE = re.compile(r"(-?[$0-9.,]{2,})|(-?[0-9]+)")
# exact_match's regexes_to_ignore, applied in order to prediction and reference alike.
_LM_EVAL_IGNORE = [re.compile(p) for p in (",", r"\$", r"(?s).*#### ", r"\.$")]
LM_EVAL_INVALID = "[invalid]"  # what lm-eval's regex filter yields when nothing matches


def lm_eval_filter(text: str, pattern: re.Pattern[str]) -> str:
    """lm-eval's RegexFilter with group_select=-1: the last match (its first non-empty group)."""
    matches = pattern.findall(text)
    if not matches:
        return LM_EVAL_INVALID
    match = matches[-1]
    if isinstance(match, tuple):
        match = [m for m in match if m]
        match = match[0] if match else LM_EVAL_INVALID
    return match.strip()


def lm_eval_normalise(text: str) -> str:
    for pattern in _LM_EVAL_IGNORE:
        text = pattern.sub("", text)
    return text.strip().lower()  # ignore_case: true


def lm_eval_exact_match(prediction: str, reference: str) -> bool:
    return lm_eval_normalise(prediction) == lm_eval_normalise(reference)
