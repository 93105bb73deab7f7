"""drafter=model_xtok: a draft model whose tokenizer differs from the target's.

Text is the common currency, as in Hugging Face's universal assisted generation
(`AssistedCandidateGeneratorDifferentTokenizers`):
  1. target -> draft: the committed target tokens are decoded to text and re-tokenised with the
     draft tokenizer. The draft's KV cache is cropped to the longest common prefix of what it
     has seen and these ids (ModelDrafter's rollback), so verification results -- accepted draft
     text, a correction, a bonus token -- reach the draft's cache through the text, and a
     re-tokenisation that only changes the last few draft tokens costs only those positions.
  2. the draft model drafts greedily in its own vocabulary until its text re-tokenises into at
     least K+1 target tokens (or 2K draft steps, or its EOS);
  3. draft -> target: the new draft text is re-tokenised with the target tokenizer together with
     the last few committed target tokens (`context_tokens`), whose own ids are then stripped, so
     that a word continued across the boundary is split the way the target splits it; the last
     target token is dropped unless drafting stopped at EOS, since it may be the prefix of a
     longer word. At most K tokens are proposed.
Special tokens: with special_tokens=keep (default) they are decoded as text and re-tokenised,
so chat markers shared by both tokenizers (ChatML's <|im_start|> / <|im_end|>: SmolLM2 and
Qwen) map onto each other, EOS included; `skip` drops them as transformers does.

The draft is greedy at every temperature and no draft distribution over the target's
vocabulary exists, so it returns probs=None: a deterministic draft's distribution is one-hot,
which keeps speculative sampling exact. Correctness never depends on the mapping: the verifier
checks every proposed target token, so a bad re-tokenisation only costs acceptance.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from ..params import choice, integer, knob, real
from ..sampling import GREEDY, SamplingParams
from ..step import Draft, empty_draft
from .base import Drafter, DrafterParams
from .model import ModelDrafter


@dataclass(frozen=True)
class CrossTokenizerParams(DrafterParams):
    context_tokens: int = knob(4, integer(0), "committed target tokens re-tokenised with the draft text")
    special_tokens: str = knob("keep", choice("keep", "skip"))
    max_draft_factor: float = knob(2.0, real(1), "at most factor x K draft-model steps per proposal")


class CrossTokenizerDrafter(Drafter):
    name = "model_xtok"
    config_names = ("model_xtok",)
    vocab_top_refusal = "it applies to drafts with the target's tokenizer (not drafter=model_xtok)"
    Params = CrossTokenizerParams
    needs_model = True  # build passes the draft model (model=) ...
    needs_tokenizers = True  # ... and both tokenizers (draft_tokenizer=, target_tokenizer=)
    batch_refusal = ("it re-tokenizes each row's text for its draft model and maps the draft back; "
                     "no batch program for that yet (decoding/ragged.py)")

    def __init__(
        self,
        model: PreTrainedModel,
        draft_tokenizer: PreTrainedTokenizerBase,
        target_tokenizer: PreTrainedTokenizerBase,
        **knobs: Any,
    ) -> None:
        super().__init__(**knobs)
        p = self.params
        # The draft's KV cache and its prefix rollback; its K is unused (each call says how many).
        self.inner = ModelDrafter(model, k=p.k)
        self.dtok = draft_tokenizer
        self.ttok = target_tokenizer
        self.context_tokens = p.context_tokens
        self.skip_special = p.special_tokens == "skip"
        self.max_draft_factor = p.max_draft_factor
        self.draft_eos = {i for i in [draft_tokenizer.eos_token_id, getattr(model.generation_config, "eos_token_id", None)]
                          for i in (i if isinstance(i, list) else [i]) if isinstance(i, int)}
        self.prefix = self._bos_prefix()

    def _bos_prefix(self) -> list[int]:
        """The ids the draft tokenizer puts before any text (e.g. Llama's BOS), [] for none."""
        plain = self.dtok("a", add_special_tokens=False).input_ids
        full = self.dtok("a", add_special_tokens=True).input_ids
        for i in range(len(full) - len(plain) + 1):
            if full[i : i + len(plain)] == plain:
                return list(full[:i])
        return []

    def modules(self) -> list[torch.nn.Module]:
        return self.inner.modules()

    def reset(self, prompt_ids: torch.Tensor) -> None:
        self.inner.reset(prompt_ids)

    def _to_draft(self, tokens: torch.Tensor) -> torch.Tensor:
        """All committed target tokens as draft ids ([m] int64)."""
        text = self.ttok.decode(tokens.tolist(), skip_special_tokens=self.skip_special)
        ids = self.dtok(text, add_special_tokens=False).input_ids
        bos = self.dtok.bos_token
        if self.prefix and not (bos and text.startswith(bos)):
            ids = self.prefix + ids
        return torch.tensor(ids, dtype=torch.long)

    def _to_target(self, tokens: torch.Tensor, draft_text: str) -> list[int]:
        """Target ids for draft_text continuing the committed `tokens` (maybe [] if unalignable)."""
        ctx = tokens[-self.context_tokens :].tolist() if self.context_tokens > 0 else []
        ctx_text = self.ttok.decode(ctx, skip_special_tokens=self.skip_special)
        ids = self.ttok(ctx_text + draft_text, add_special_tokens=False).input_ids
        if ids[: len(ctx)] == ctx:
            return ids[len(ctx) :]
        # The boundary re-tokenised differently (a merge across it, or a byte split inside a
        # character): start after the first target token that ends exactly where the context's
        # text ends, if any; otherwise propose nothing this step.
        for i in range(1, len(ids) + 1):
            head = self.ttok.decode(ids[:i], skip_special_tokens=self.skip_special)
            if head == ctx_text:
                return ids[i:]
            if len(head) > len(ctx_text):
                break
        return []

    @torch.inference_mode()
    def propose(
        self,
        tokens: torch.Tensor,
        k: int,
        sampling: SamplingParams = GREEDY,
        *,
        want_probs: bool = False,
    ) -> Draft:
        if k <= 0:
            return empty_draft()
        ctx = self._to_draft(tokens)  # [m] the committed text in the draft's vocabulary
        if ctx.numel() == 0:
            return empty_draft()
        drafted: list[int] = []
        target_ids: list[int] = []
        ended = False
        max_steps = max(k, int(self.max_draft_factor * k))
        while len(drafted) < max_steps:
            # Greedy draft steps; the first call rolls the cache back to what survived.
            step = min(k + 1 - len(target_ids), max_steps - len(drafted)) if drafted else k
            new = self.inner.propose(torch.cat([ctx, torch.tensor(drafted, dtype=torch.long)]), max(step, 1)).tokens.tolist()
            for j, tok in enumerate(new):
                if tok in self.draft_eos:
                    new, ended = new[: j + (0 if self.skip_special else 1)], True
                    break
            drafted += new
            text = self.dtok.decode(drafted, skip_special_tokens=self.skip_special)
            target_ids = self._to_target(tokens, text)
            if ended or len(target_ids) > k:
                break
        if not ended:
            target_ids = target_ids[:-1]  # the last piece may be the start of a longer word
        out = target_ids[:k]
        return Draft(
            tokens=torch.tensor(out, dtype=torch.long),
            probs=None,
            info={"draft_tokens": len(drafted), "target_tokens": len(out)},
        )
