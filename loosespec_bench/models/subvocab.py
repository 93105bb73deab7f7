"""A frequency-ranked sub-vocabulary for the draft's LM head (FR-Spec style; drafter.vocab_top).

The embedded 0.5B draft's LM head is 151,936 x 896, 27% of the bytes a 1-token draft forward
reads. Restricting it to the V' most frequent tokens reads V'/151,936 of them. The head still
returns logits over the FULL vocabulary: the V' computed ones are scattered into a row of -inf,
so everything downstream (argmax, softmax for q_i, draft ids) is unchanged and every draft id is
a full-vocabulary id. Tokens outside the sub-vocabulary are never drafted, and q_i is exactly 0
there.

Lossless rules stay lossless: the target decides every token. At T > 0 exact speculative
sampling stays exact with q supported on the sub-vocabulary only: a draft token d is accepted
with min(1, p(d)/q(d)) (q(d) > 0 for every drafted d) and a rejection resamples from
norm(max(0, p - q)), which equals p outside the sub-vocabulary, so the output distribution is
still p (the proof of Leviathan et al. needs no support condition on q). Only acceptance drops
where the target puts mass outside the sub-vocabulary.

Ranking (cached under ~/.cache/loosespec_bench/vocab/): tokens counted over the text of the local
data sets (paths.data_dir: every *.jsonl / *.tsv prompt and reference answer, so it overlaps the
evaluation prompts: a frequency table, not answers, but say so when reporting), then every
remaining id by its BPE merge rank (the id order of a byte-level BPE vocabulary: earlier merges
are more frequent in the tokenizer's training corpus). Special tokens are always kept.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import logging
import os
from pathlib import Path
from typing import Any

import torch

from ..errors import ConfigError

log = logging.getLogger(__name__)

_TEXT_SUFFIXES = (".jsonl", ".jsonl.gz", ".tsv")


def _cache_dir() -> Path:
    return Path(os.environ.get("LOOSESPEC_CACHE_DIR", "~/.cache/loosespec_bench")).expanduser() / "vocab"


def _texts(data_dir: Path) -> list[str]:
    """Every string value of the local data files (prompts, reference answers, tests)."""
    out: list[str] = []

    def walk(v: Any) -> None:
        if isinstance(v, str):
            out.append(v)
        elif isinstance(v, dict):
            for x in v.values():
                walk(x)
        elif isinstance(v, list):
            for x in v:
                walk(x)

    for path in sorted(data_dir.rglob("*")):
        name = path.name
        if not path.is_file() or not name.endswith(_TEXT_SUFFIXES):
            continue
        opener = gzip.open if name.endswith(".gz") else open
        with opener(path, "rt", encoding="utf-8", errors="replace") as f:
            for line in f:
                if name.endswith(".tsv"):
                    out.append(line)
                    continue
                try:
                    walk(json.loads(line))
                except json.JSONDecodeError:
                    continue
    return out


def frequency_ranking(tokenizer: Any, vocab: int, data_dir: str | Path | None) -> torch.Tensor:
    """All ids 0..vocab-1, most frequent first (see module doc). Cached per tokenizer and corpus."""
    data = Path(data_dir).expanduser() if data_dir else None
    sig = hashlib.sha256(
        json.dumps([type(tokenizer).__name__, len(tokenizer), vocab, getattr(tokenizer, "name_or_path", ""),
                    str(data.resolve()) if data and data.is_dir() else None]).encode()
    ).hexdigest()[:12]
    path = _cache_dir() / f"ranking-{sig}.pt"
    if path.exists():
        return torch.load(path)
    counts = torch.zeros(vocab, dtype=torch.long)
    if data is not None and data.is_dir():
        texts = _texts(data)
        for i in range(0, len(texts), 256):
            for ids in tokenizer(texts[i : i + 256], add_special_tokens=False)["input_ids"]:
                counts += torch.bincount(torch.tensor(ids, dtype=torch.long).clamp_(0, vocab - 1), minlength=vocab)
        log.info("draft sub-vocabulary: counted %d tokens over %d texts in %s", int(counts.sum()), len(texts), data)
    # Most counted first; ties (incl. all uncounted) by id = BPE merge rank.
    ranking = torch.argsort(-counts, stable=True)  # stable: equal counts keep id order
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    torch.save(ranking, tmp)
    os.replace(tmp, path)
    return ranking


class SubVocabHead(torch.nn.Module):
    """An LM head over `ids` only that returns full-vocabulary logits (-inf elsewhere)."""

    def __init__(self, head: torch.nn.Linear, ids: torch.Tensor) -> None:
        super().__init__()
        ids = torch.unique(ids.to(torch.long))  # sorted, distinct
        self.vocab = head.out_features
        self.register_buffer("ids", ids.to(head.weight.device), persistent=False)
        sub = torch.nn.Linear(head.in_features, ids.numel(), bias=head.bias is not None,
                              device=head.weight.device, dtype=head.weight.dtype)
        with torch.no_grad():
            sub.weight.copy_(head.weight[self.ids])
            if head.bias is not None:
                sub.bias.copy_(head.bias[self.ids])
        sub.requires_grad_(False)
        self.sub = sub  # a plain nn.Linear: prepacked / quantised like any other layer

    @property
    def weight(self) -> torch.Tensor:  # transformers reads lm_head.weight.dtype / device in places
        return self.sub.weight

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.sub(x)  # [..., V']
        out = y.new_full((*y.shape[:-1], self.vocab), float("-inf"))
        out[..., self.ids] = y
        return out


def restrict_draft_vocab(drafter: Any, top: int | None, tokenizer: Any, data_dir: str | Path | None) -> int:
    """Give the drafter's draft model (and a wrapped drafter's) a SubVocabHead over the `top`
    most frequent ids plus the special tokens. top None: no-op. Returns the sub-vocabulary size
    (0 when nothing changed)."""
    if top is None or drafter is None:
        return 0
    if not isinstance(top, int) or top < 1:
        raise ConfigError(f"drafter.vocab_top={top!r} must be a positive integer or null")
    # What the drafter declares (drafters/base.py Drafter.vocab_top_refusal, vocab_network): why
    # its head cannot be restricted, or the network whose head is restricted.
    refusal = type(drafter).vocab_top_refusal
    if refusal:
        raise ConfigError(f"drafter.vocab_top: {refusal}")
    model = drafter.vocab_network()
    if not isinstance(model, torch.nn.Module):
        return 0  # no draft network (prompt lookup): nothing to restrict
    head = model.get_output_embeddings()
    if isinstance(head, SubVocabHead):
        return head.ids.numel()
    if type(head) is not torch.nn.Linear:
        raise ConfigError(f"drafter.vocab_top: the draft's LM head is a {type(head).__name__}, not a plain Linear")
    vocab = head.out_features
    if top >= vocab:
        return 0
    ranking = frequency_ranking(tokenizer, vocab, data_dir)
    special = torch.tensor([i for i in getattr(tokenizer, "all_special_ids", []) if 0 <= i < vocab], dtype=torch.long)
    eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    eos_ids = [eos] if isinstance(eos, int) else list(eos or [])
    extra = torch.tensor([int(i) for i in eos_ids if 0 <= int(i) < vocab], dtype=torch.long)
    ids = torch.unique(torch.cat([ranking[:top], special, extra]))
    # Round the size up to a multiple of 64 with the next-ranked ids: the int4 kernel
    # (pair.draft.quantize=int4) needs out_features % 16 == 0, and blocked kernels like round sizes.
    more = ranking[top:][~torch.isin(ranking[top:], ids)]
    ids = torch.cat([ids, more[: (-ids.numel()) % 64]])
    sub = SubVocabHead(head, ids)
    model.set_output_embeddings(sub)
    cfg = getattr(model, "config", None)
    if cfg is not None and hasattr(cfg, "tie_word_embeddings"):
        cfg.tie_word_embeddings = False
    log.info("draft LM head restricted to %d of %d ids", sub.ids.numel(), vocab)
    return sub.ids.numel()
