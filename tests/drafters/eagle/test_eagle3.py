"""The EAGLE-3 head network: its unrolled training computes what drafting computes."""

from __future__ import annotations

import torch

from .conftest import prompt_ids, random_head


def test_unrolled_training_equals_chain_drafting(tiny_pair, draft_ids):
    """Training-time test (Eagle3Head.unroll) computes what chain drafting computes at every
    depth, so the head is trained on the inference computation, positions included."""
    target, _, tok = tiny_pair
    head = random_head(target, draft_ids, seed=2)
    ids = prompt_ids(tok)
    taps = (2, 1, 0)
    with torch.no_grad():
        hs = target(ids[None], output_hidden_states=True).hidden_states
        feats = torch.cat([hs[i] for i in taps], dim=-1)  # [1, P, 3H]
        steps, n = 3, ids.numel() - 4
        unrolled = head.unroll(feats[:, :n], ids[None, 1 : n + 1 + steps], steps)
        for j in (0, n // 2, n - 1):  # chain drafting after committed position j
            h, cache = head.step(feats[0, : j + 1], ids[1 : j + 2], 0, None, fused=False)
            last = h[-1:]
            for s in range(steps):
                torch.testing.assert_close(head.logits(last)[0], unrolled[s][0, j], rtol=1e-4, atol=1e-4)
                last, cache = head.step(last, ids[j + 2 + s : j + 3 + s], j + 1 + s, cache, fused=True)
