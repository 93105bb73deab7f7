"""LLM-as-judge back ends for MT-bench-style single-answer grading.

A judge turns (system prompt, user prompt) into the judge's text at temperature 0, as FastChat's
llm_judge does. Two kinds, chosen by the data set's `judge` config:

- kind "openai": any OpenAI-compatible chat-completions endpoint (`url`, `model`, the API key
  read from the environment variable named by `api_key_env`); plain urllib, no SDK needed.
- kind "local": a local causal LM (any model path models.load_model understands), greedy.

kind null (the default) means no judge: the run reports speed only and says quality was not
judged.
"""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.request
from typing import Any, Protocol

from ..errors import ConfigError
from ..params import check_node, choice, integer, optional, real, string

JUDGE_KINDS = ("openai", "local")
# dataset.judge's keys and ranges (MTBench.SETTINGS; the pre-check reads them).
JUDGE_SETTINGS = {
    "kind": optional(choice(*JUDGE_KINDS)),
    "url": optional(string),
    "model": optional(string),
    "api_key_env": optional(string),
    "path": optional(string),
    "dtype": optional(string),
    "device": optional(string),
    "max_tokens": integer(1),
    "timeout_s": real(0, lo_open=True),
    "retries": integer(0),
    "retry_sleep_s": real(0),
}


class Judge(Protocol):
    name: str

    def complete(self, system: str, user: str) -> str: ...


class JudgeError(RuntimeError):
    """The judge gave no answer (network, HTTP error, malformed reply) after its retries."""


class OpenAIJudge:
    """POST {url}/chat/completions, as FastChat's chat_completion_openai (temperature 0)."""

    def __init__(
        self,
        *,
        url: str,
        model: str,
        api_key_env: str | None = "OPENAI_API_KEY",
        max_tokens: int = 2048,
        timeout_s: float = 120.0,
        retries: int = 3,
        retry_sleep_s: float = 5.0,
    ) -> None:
        if not url or not model:
            raise ConfigError("dataset.judge: kind=openai needs judge.url (e.g. https://api.openai.com/v1) and judge.model")
        self.url = url.rstrip("/")
        if not self.url.endswith("/chat/completions"):
            self.url += "/chat/completions"
        self.model = model
        self.name = model
        self.api_key_env = api_key_env
        if api_key_env and not os.environ.get(api_key_env):
            raise ConfigError(f"dataset.judge: the API key variable {api_key_env} is not set (or set judge.api_key_env=null)")
        self.max_tokens = int(max_tokens)
        self.timeout_s = float(timeout_s)
        self.retries = int(retries)
        self.retry_sleep_s = float(retry_sleep_s)

    def complete(self, system: str, user: str) -> str:
        body = {
            "model": self.model,
            "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
            "temperature": 0,
            "max_tokens": self.max_tokens,
            "n": 1,
        }
        headers = {"Content-Type": "application/json"}
        if self.api_key_env:
            headers["Authorization"] = f"Bearer {os.environ[self.api_key_env]}"
        last = ""
        for attempt in range(self.retries + 1):
            request = urllib.request.Request(self.url, data=json.dumps(body).encode(), headers=headers, method="POST")
            try:
                with urllib.request.urlopen(request, timeout=self.timeout_s) as resp:
                    reply = json.loads(resp.read().decode("utf-8"))
                return reply["choices"][0]["message"]["content"] or ""
            except urllib.error.HTTPError as err:
                last = f"HTTP {err.code}"
                if err.code not in (408, 409, 429) and err.code < 500:
                    break  # a client error (bad key, bad model): retrying will not help
            except (urllib.error.URLError, TimeoutError, OSError, KeyError, IndexError, ValueError) as err:
                last = f"{type(err).__name__}: {err}"
            if attempt < self.retries:
                time.sleep(self.retry_sleep_s * (attempt + 1))
        raise JudgeError(f"judge {self.model} at {self.url} gave no answer ({last})")


class LocalJudge:
    """A local causal LM as the judge, greedy decoding through transformers' generate()."""

    def __init__(self, *, path: str, dtype: str = "bfloat16", device: str = "cpu", max_tokens: int = 2048) -> None:
        if not path:
            raise ConfigError("dataset.judge: kind=local needs judge.path (a model path or hub id)")
        self.path = path
        self.name = path
        self.dtype = dtype
        self.device = device
        self.max_tokens = int(max_tokens)
        self._loaded: Any = None

    def complete(self, system: str, user: str) -> str:
        import torch

        from ..models import load_model

        if self._loaded is None:  # loaded on first use: a run without judging never pays for it
            self._loaded = load_model(self.path, dtype=self.dtype, device=self.device)
        model, tok = self._loaded.model, self._loaded.tokenizer
        messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
        if getattr(tok, "chat_template", None):
            text = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
            ids = tok(text, add_special_tokens=False, return_tensors="pt").input_ids
        else:
            ids = tok(f"{system}\n\n{user}\n\n", return_tensors="pt").input_ids
        ids = ids.to(model.device)
        with torch.no_grad():
            out = model.generate(
                ids, attention_mask=torch.ones_like(ids), max_new_tokens=self.max_tokens, do_sample=False,
                pad_token_id=tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id,
            )
        return tok.decode(out[0, ids.shape[1] :], skip_special_tokens=True)


def make_judge(cfg: dict[str, Any] | None) -> Judge | None:
    """The judge a `judge:` config block asks for, or None (no judge: speed only)."""
    cfg = dict(cfg or {})
    kind = cfg.pop("kind", None)
    if kind is None:
        return None
    check_node("dataset.judge", {"kind": kind}, JUDGE_SETTINGS)  # the one declared choice
    if kind == "openai":
        keys = ("url", "model", "api_key_env", "max_tokens", "timeout_s", "retries", "retry_sleep_s")
        return OpenAIJudge(**{k: v for k, v in cfg.items() if k in keys})
    keys = ("path", "dtype", "device", "max_tokens")
    return LocalJudge(**{k: v for k, v in cfg.items() if k in keys})
