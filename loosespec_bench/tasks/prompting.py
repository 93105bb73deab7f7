"""From a task's sample to the target's token ids and back: the chat template, end-of-sequence
ids, stop strings, and the hash that ties a stored record to the prompt it answered.

Shared by the app, the engine benchmark (bench/) and the tests, so none of
them has to import the app.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Callable

from . import Sample


def chat_template_kwargs(cfg: Any) -> dict[str, Any]:
    """The pair's extra chat-template variables (pair.chat_template_kwargs), e.g. Qwen3's
    {enable_thinking: false}: thinking mode off, as FLy's Qwen3 runs (enable_qwen_thinking=False)."""
    from omegaconf import OmegaConf

    kw = OmegaConf.select(cfg, "pair.chat_template_kwargs", default=None) if OmegaConf.is_config(cfg) else None
    if kw is None:
        return {}
    return dict(OmegaConf.to_container(kw, resolve=True) if OmegaConf.is_config(kw) else kw)


def encode_prompt(
    tokenizer: Any, sample: Sample, use_chat_template: bool, template_kwargs: dict[str, Any] | None = None
) -> tuple[str, list[int]]:
    """The exact text given to the tokenizer (after the chat template) and its ids."""
    return encode_messages(tokenizer, sample.messages, use_chat_template, template_kwargs)


def encode_messages(
    tokenizer: Any, messages: list[dict[str, str]], use_chat_template: bool, template_kwargs: dict[str, Any] | None = None
) -> tuple[str, list[int]]:
    """encode_prompt for any message list. A final assistant message is an answer prefix that
    the model continues (lm-eval's gen_prefix: HumanEval instruct, NIAH's answer prefix).
    template_kwargs: extra variables the chat template reads (chat_template_kwargs(cfg))."""
    if use_chat_template and getattr(tokenizer, "chat_template", None):
        prefill = messages[-1]["role"] == "assistant"
        text = tokenizer.apply_chat_template(
            messages, add_generation_prompt=not prefill, continue_final_message=prefill, tokenize=False,
            **(template_kwargs or {}),
        )
    else:
        text = "\n\n".join(m["content"] for m in messages)
    # The template already holds the special tokens; adding BOS again would change the prompt.
    ids = tokenizer(text, add_special_tokens=not use_chat_template).input_ids
    return text, list(ids)


def eos_ids(loaded: Any) -> set[int]:
    """End-of-sequence ids of a LoadedModel: its tokenizer's and its generation config's."""
    ids: set[int] = set()
    for src in (loaded.tokenizer.eos_token_id, getattr(loaded.model.generation_config, "eos_token_id", None)):
        if isinstance(src, int):
            ids.add(src)
        elif src:
            ids.update(int(i) for i in src)
    return ids


def make_stop_fn(tokenizer: Any, stop_strings: list[str]) -> Callable[[list[int]], bool] | None:
    if not stop_strings:
        return None

    def stop_fn(new_ids: list[int]) -> bool:
        text = tokenizer.decode(new_ids, skip_special_tokens=True)
        return any(s in text for s in stop_strings)

    return stop_fn


def cut_at_stop(text: str, stop_strings: list[str]) -> str:
    cut = min((text.find(s) for s in stop_strings if s in text), default=-1)
    return text[:cut] if cut >= 0 else text


def sample_hash(sample: Sample) -> str:
    """sha256 of the sample's content (messages, reference, follow-up turns) as canonical JSON.

    Stored in every record (`prompt_sha256`): resume reuses a record only when the data it was
    generated from is unchanged, since sample ids alone survive edits to a local data file.
    """
    content = {"messages": sample.messages, "reference": sample.reference, "followups": list(sample.followups)}
    text = json.dumps(content, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
