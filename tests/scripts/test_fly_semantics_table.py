"""scripts/fly_semantics_table.py: every differing step is put down to exactly one cause, and the
cause "window" is the one the released pattern and vLLM's window are known to disagree on."""

from __future__ import annotations

import torch

from loosespec_bench.verifiers.fly import FLyParams, fly_decide

from . import load_script


def test_rows_add_up_and_the_known_window_case_differs(capsys):
    mod = load_script("fly_semantics_table")
    rows = mod.main(["--trials", "3", "--json"])
    capsys.readouterr()
    assert len(rows) == 3 * 2 * 3 * 2  # K x W x theta x match, all with K > W
    for r in rows:
        assert abs(r["code_vs_vllm"] - r["cause_theta_switch_off"] - r["cause_window"]) < 1e-12
    # A mismatch at 0 followed by W-1 matches and then a mismatch: the released pattern
    # [F, T * (W-1)] defers it, vLLM (W matches after it) does not.
    W, K = 3, 8
    t = [0] * (K + 1)
    draft = torch.tensor([1, 0, 0, 1, 0, 0, 0, 0])
    logits = torch.zeros(K + 1, 4)
    for i, tok in enumerate(t):
        logits[i, tok] = 1.0  # flat enough: top-3 entropy ~ 0.9 >= theta = 0.3
    assert mod.decide(draft, logits, "code", 0.3, W) != mod.decide(draft, logits, "vllm", 0.3, W)
    assert fly_decide(draft, logits, FLyParams(theta=0.3, window=W, mode="vllm")).n == 0
