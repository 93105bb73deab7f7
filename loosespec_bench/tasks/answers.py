"""Final-number extraction for math word problems (GSM8K, MGSM)."""

from __future__ import annotations

import re
import unicodedata

# A number with optional sign, thousands separators and decimals: -1,234.5 / 1 234 / 3.
_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?|-?\.\d+")


def _to_ascii_digits(text: str) -> str:
    # Bengali, Telugu, Thai, full-width... digits count as numbers too.
    return "".join(str(unicodedata.digit(c)) if c.isdigit() and not c.isascii() else c for c in text)


def parse_number(text: str) -> float | None:
    """Parse one number string ('1,234', '$5', '-3.50') to float; None if it is not one."""
    text = _to_ascii_digits(text).replace(",", "").strip().rstrip(".")
    try:
        return float(text)
    except ValueError:
        return None


def extract_answer(text: str, answer_phrases: list[str] = ()) -> float | None:
    """The model's final number: after the last answer phrase if any, else the last number."""
    text = _to_ascii_digits(text)
    # '\boxed{42}' is how many instruct models state the answer.
    boxed = re.findall(r"\\boxed\{([^}]*)\}", text)
    if boxed:
        nums = _NUMBER.findall(boxed[-1].replace(" ", ""))
        if nums:
            return parse_number(nums[-1])
    for phrase in answer_phrases:
        pos = text.lower().rfind(phrase.lower())
        if pos >= 0:
            nums = _NUMBER.findall(text[pos + len(phrase) :])
            if nums:
                return parse_number(nums[0])
    nums = _NUMBER.findall(text)
    return parse_number(nums[-1]) if nums else None


def numbers_equal(a: float | None, b: float | None) -> bool:
    return a is not None and b is not None and abs(a - b) <= 1e-6 * max(1.0, abs(b))
