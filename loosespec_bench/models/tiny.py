"""Tiny randomly initialised models and a byte-level tokenizer, built offline from a config.

They exercise every code path (caches, rollback, verifiers, drafters, chat templates) in
seconds. `tiny:<seed>` gives the same weights for the same seed, so `tiny:0` drafting for
`tiny:0` accepts everything and `tiny:1` drafting for `tiny:0` accepts little.
"""

from __future__ import annotations

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
# A Qwen-style template, so the chat-template path is the real one.
CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def tiny_tokenizer() -> PreTrainedTokenizerFast:
    """Byte-level tokenizer: ids 0..255 are bytes, then the special tokens (vocab 259)."""
    byte_chars = pre_tokenizers.ByteLevel.alphabet()
    byte_chars = sorted(byte_chars, key=lambda c: ord(c))
    vocab = {c: i for i, c in enumerate(byte_chars)}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens(SPECIAL_TOKENS)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>", bos_token=None
    )
    fast.chat_template = CHAT_TEMPLATE
    return fast


TINY_VOCAB = 264
TINY_CONTEXT = 32768  # byte-level tokens: an 8-shot GSM8K prompt is ~4.3k


def tiny_model(seed: int = 0, *, layers: int = 2, hidden: int = 64, vocab_size: int = TINY_VOCAB) -> Qwen2ForCausalLM:
    """A Qwen2-architecture model with random weights fixed by `seed` (float32, eval mode)."""
    config = Qwen2Config(
        vocab_size=vocab_size,
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=TINY_CONTEXT,
        tie_word_embeddings=False,
        eos_token_id=258,  # <|im_end|> in tiny_tokenizer()
        pad_token_id=256,
    )
    # Seed a private generator state only for the init, then restore the global one.
    state = torch.random.get_rng_state()
    try:
        torch.manual_seed(seed)
        model = Qwen2ForCausalLM(config)
        # Default init gives near-uniform logits; sharper weights make greedy choices
        # well separated, so float ties cannot blur lossless checks.
        with torch.no_grad():
            model.lm_head.weight.mul_(8.0)
    finally:
        torch.random.set_rng_state(state)
    return model.eval()


def tiny_near_copy(seed: int = 0, scale: float = 0.1, noise_seed: int = 1234) -> torch.nn.Module:
    """tiny_model(seed) with `scale` relative weight noise: a draft that agrees with its target
    often but not always, so drafts hold both matches and mismatches (tiny:1 against tiny:0
    matches almost never, which would make lossless and loose-acceptance tests say nothing)."""
    model = tiny_model(seed)
    g = torch.Generator().manual_seed(noise_seed)
    with torch.no_grad():
        for p in model.parameters():
            if p.numel() > 1:
                p.add_(torch.randn(p.shape, generator=g) * scale * p.std())
    return model
