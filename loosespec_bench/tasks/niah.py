"""Needle in a haystack: find "special magic numbers" hidden in Paul Graham essays.

The haystack is the essays (sorted by file name, joined, repeated if needed) cut to a chosen
length; needles are RULER's sentences "One of the special magic numbers for <key> is: <value>."
(7-digit values), inserted at chosen depths (0 = start, 100 = end), each moved back to the
end of the previous sentence as in gkamradt's NIAH. The prompt and the answer prefix are
RULER's (tasks/data/niah.json); the answer prefix pre-fills the assistant turn.

- mode "single": one value for the key, at the grid's depth.
- mode "multivalue" (what FLy used): `num_values` values for the same key; the first at the
  grid's depth, the others spread evenly around the haystack from there
  (depth + i*100/n, modulo 100).

Lengths are in tokens of the target's tokenizer (`tokenizer`, by default the pair's target
path) and count the haystack with its needles, not the instructions around it; the exact
count is recorded per sample (`context_tokens`). With `tokenizer: null`, lengths are
approximated as `chars_per_token` characters per token (4 by default, about right for English
BPE vocabularies).

Scored as RULER's string_match_all: the fraction of the values that appear in the answer
(`recall`), averaged over samples; that is the task's headline figure (quality_key), the one
lm-eval's ruler tasks report and FLy's tables print, so retention and the paired difference are
taken on it. A sample is also `correct` when all of the values appear (`accuracy`, secondary,
reported per (length, depth) cell of the grid too).
"""

from __future__ import annotations

import json
import random
import re
from functools import cached_property
from pathlib import Path
from typing import Any, Mapping

from ..errors import ConfigError
from ..params import boolean, choice, explain, integer, list_of, optional, real, string
from .base import Sample, Task

PROMPT_FILE = Path(__file__).parent / "data" / "niah.json"
_SENTENCE_END = re.compile(r"[.!?]\s")
MODES = ("single", "multivalue")


def load_tokenizer(path: str) -> Any:
    """The tokenizer of a model path as models.load_model understands it, without the model."""
    if path.startswith("tiny:"):
        from ..models.tiny import tiny_tokenizer

        return tiny_tokenizer()
    from transformers import AutoTokenizer

    source: Any = path
    if path.startswith("embedded:"):
        from ..models.loading import embedded_dir

        source = embedded_dir(path.split(":", 1)[1])
    try:
        return AutoTokenizer.from_pretrained(source)
    except OSError as err:
        raise ConfigError(
            f"dataset niah: could not load the tokenizer {path!r} ({str(err).splitlines()[0]}); "
            "set dataset.tokenizer to a loadable model path, or null to approximate lengths by characters"
        ) from None


def sentence_start(text: str, pos: int) -> int:
    """The insertion point at or before `pos` that does not split a sentence."""
    if pos <= 0:
        return 0
    if pos >= len(text):
        return len(text)
    # The last sentence end (a period followed by white space: not the one in "3.5").
    ends = [m.end() - 1 for m in _SENTENCE_END.finditer(text, 0, pos + 1)]
    return ends[-1] if ends else 0


class NIAH(Task):
    name = "niah"
    display_name = "NIAH"
    quality_key = "recall"  # RULER's score; `correct` (all values) stays in each sample's score
    quality_figure = "recall"
    SETTINGS = {
        "context_lengths": list_of(explain(integer(64), "tokens")),
        "depths": list_of(explain(real(0, 100), "a percentage")),
        "mode": choice(*MODES),
        "num_values": integer(1),
        "repeats": integer(1),
        "seed": integer(),
        "tokenizer": optional(string),
        "chars_per_token": real(0, lo_open=True),
        "answer_prefix": boolean,
    }
    shuffle = False  # load_all's repeat x length x depth order is the design a limit cuts

    @classmethod
    def size_of(cls, settings: Mapping[str, Any]) -> tuple[int | None, bool]:
        """One sample per (context length, depth, repeat)."""
        lengths = settings.get("context_lengths", (512, 1024))
        depths = settings.get("depths", (0, 50, 100))
        return len(lengths) * len(depths) * int(settings.get("repeats", 1)), True

    def __init__(
        self,
        *,
        context_lengths: list[int] = (512, 1024),
        depths: list[float] = (0, 50, 100),
        mode: str = "multivalue",
        num_values: int = 4,
        repeats: int = 1,
        seed: int = 0,
        tokenizer: str | None = None,
        chars_per_token: float = 4.0,
        answer_prefix: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        # Ranges: SETTINGS (checked by build.instantiate and the pre-check).
        self.context_lengths = [int(x) for x in context_lengths]
        self.depths = [float(d) for d in depths]
        self.mode = mode
        self.num_values = 1 if mode == "single" else int(num_values)
        self.repeats = int(repeats)
        self.seed = int(seed)
        self.tokenizer_path = tokenizer
        self.chars_per_token = float(chars_per_token)
        self.answer_prefix = answer_prefix
        with PROMPT_FILE.open(encoding="utf-8") as f:
            self.prompt = json.load(f)

    # -- lengths in tokens ---------------------------------------------------------------------
    @cached_property
    def tokenizer(self) -> Any:
        return load_tokenizer(self.tokenizer_path) if self.tokenizer_path else None

    def count_tokens(self, text: str) -> int:
        if self.tokenizer is None:
            return round(len(text) / self.chars_per_token)
        return len(self.tokenizer(text, add_special_tokens=False).input_ids)

    @cached_property
    def haystack(self) -> str:
        if self.data_dir is None:
            raise ConfigError(
                "dataset niah: the Paul Graham essays are not a hub data set; set paths.data_dir "
                "(or LOOSESPEC_DATA_DIR) to a folder with niah/PaulGrahamEssays/*.txt"
            )
        folder = self.local_path("niah", "PaulGrahamEssays")
        files = sorted(folder.glob("*.txt"))
        if not files:
            raise ConfigError(f"dataset niah: no essays (*.txt) in {folder}")
        return "\n\n".join(p.read_text(encoding="utf-8") for p in files)

    def _haystack_ids(self, tokens: int) -> list[int]:
        """At least `tokens` token ids of the haystack (repeated if needed). Tokenizes only a
        prefix long enough, grown as needed: 600 kB of essays take seconds to tokenize."""
        chars = 8 * tokens
        while True:
            text = self.haystack * (chars // len(self.haystack) + 1)
            ids = list(self.tokenizer(text[:chars], add_special_tokens=False).input_ids)
            if len(ids) > tokens:
                return ids
            chars *= 2

    def _cut(self, tokens: int, depths: list[float]) -> tuple[str, list[int]]:
        """The haystack's first `tokens` tokens as text, and the character offset at each of
        `depths` percent of those tokens (depths are measured in tokens, as lengths are)."""
        if self.tokenizer is None:
            n = int(tokens * self.chars_per_token)
            reps = n // len(self.haystack) + 1
            text = ("\n\n".join([self.haystack] * reps))[:n]
            return text, [int(len(text) * d / 100) for d in depths]
        # One token short of the end of the tokenized prefix: the last one may be cut mid-word.
        ids = self._haystack_ids(tokens + 1)[:tokens]
        text = self.tokenizer.decode(ids)
        return text, [len(self.tokenizer.decode(ids[: int(len(ids) * d / 100)])) for d in depths]

    # -- samples -------------------------------------------------------------------------------
    def needle_depths(self, depth: float) -> list[float]:
        if self.num_values == 1:
            return [depth]
        return [depth] + [(depth + i * 100.0 / self.num_values) % 100.0 for i in range(1, self.num_values)]

    def build(self, length: int, depth: float, repeat: int) -> Sample:
        # Keys and values depend on the cell only (not on the tokenizer): re-scoring needs no model.
        rng = random.Random(f"niah-{self.seed}-{self.mode}-{self.num_values}-{length}-{depth}-{repeat}")
        key = rng.choice(self.prompt["keys"])
        values = [str(rng.randint(1_000_000, 9_999_999)) for _ in range(self.num_values)]
        needles = [self.prompt["needle"].format(key=key, value=v) for v in values]
        budget = length - sum(self.count_tokens(" " + n) for n in needles)
        if budget < 16:
            raise ConfigError(f"dataset niah: context length {length} leaves no room for {len(needles)} needles")
        text, marks = self._cut(budget, self.needle_depths(depth))
        # Character positions, then insert from the end so earlier positions stay valid.
        places = [(sentence_start(text, raw), needle) for raw, needle in zip(marks, needles)]
        for pos, needle in sorted(places, key=lambda p: p[0], reverse=True):
            text = text[:pos] + (" " + needle if pos > 0 else needle + " ") + text[pos:]
        context = text.strip()
        content = self.prompt["template"].format(context=context, key=key)
        messages = [{"role": "user", "content": content}]
        if self.answer_prefix:
            messages.append({"role": "assistant", "content": self.prompt["answer_prefix"].format(key=key)})
        offsets = [context.find(n) for n in needles]
        return Sample(
            id=f"{self.mode}-L{length}-D{depth:g}-r{repeat}",
            messages=self.with_system(messages),
            reference={"key": key, "values": values},
            meta={
                "context_length": length,
                "depth": depth,
                "needle_depths": self.needle_depths(depth),
                "context_tokens": self.count_tokens(context),
                "context_chars": len(context),
                "needle_offsets": offsets,  # character offset of each needle in the context
                "tokenizer": self.tokenizer_path or f"approx:{self.chars_per_token:g} chars/token",
            },
        )

    def load_all(self) -> list[Sample]:
        # Repeat-major, then length, then depth: a small `limit` still covers several depths.
        return [
            self.build(length, depth, r)
            for r in range(self.repeats)
            for length in self.context_lengths
            for depth in self.depths
        ]

    # -- scoring -------------------------------------------------------------------------------
    def score(self, sample: Sample, completion: str) -> dict[str, Any]:
        text = completion.lower()
        found = [v.lower() in text for v in sample.reference["values"]]
        return {"correct": all(found), "recall": sum(found) / len(found), "found": found}

    def aggregate(self, records: list[dict[str, Any]]) -> dict[str, Any]:
        out = super().aggregate(records)
        scored = [r for r in records if "recall" in r.get("score", {})]
        if not scored:
            return out
        out["recall"] = sum(r["score"]["recall"] for r in scored) / len(scored)
        cells: dict[str, list[bool]] = {}
        for r in scored:
            cell = f"L{r['meta']['context_length']}-D{r['meta']['depth']:g}"
            cells.setdefault(cell, []).append(bool(r["score"]["correct"]))
        out["accuracy_by_cell"] = {c: sum(v) / len(v) for c, v in cells.items()}
        return out
