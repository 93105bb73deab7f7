"""judges/continuation.py: the incremental draft argmax equals one full forward."""

from __future__ import annotations

import torch

from loosespec_bench.judges.continuation import IncrementalArgmax


def _ids(tok, text="Question: 3 apples and 4 apples make how many? Answer step by step."):
    return tok(text, add_special_tokens=False).input_ids


def test_incremental_argmax_equals_one_full_forward(tiny_pair):
    _, draft, tok = tiny_pair
    prompt = _ids(tok)
    P = len(prompt)
    inc = IncrementalArgmax(draft, prompt)
    answers = [[5, 6, 7, 8, 9, 10], [5, 6, 7, 20, 21], [5, 6, 7, 20, 21, 22, 23], [30]]
    for answer in answers:
        with torch.inference_mode():
            full = draft(torch.tensor([prompt + answer])).logits[0, P - 1 : P - 1 + len(answer)].argmax(-1).tolist()
        assert inc(answer) == full
    # Read: the first answer whole, then only what changed (3 + 2, 2 after the shared 5, 1).
    assert inc.fed == (P + 6) + 2 + 2 + 1
