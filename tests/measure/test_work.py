"""work.py: counting, merging and per-token figures on hand-built counts."""

from __future__ import annotations

import json

from loosespec_bench.measure.work import add_forward, add_lm_head, merge_work, new_work, per_token


def test_add_forward_accumulates_rows_context_and_histogram():
    w = new_work()
    add_forward(w, "target_verify", 6, 6, 100)
    add_forward(w, "target_verify", 6, 6, 103)
    add_forward(w, "target_verify", 1, 1, 109)
    r = w["target_verify"]
    assert (r["forwards"], r["rows"], r["lm_rows"]) == (3, 13, 13)
    assert r["ctx"] == 100 + 103 + 109
    assert r["ctx_rows"] == 6 * 100 + 6 * 103 + 1 * 109
    assert r["rows_hist"] == {"6": 2, "1": 1}
    json.dumps(w)  # JSON-ready: keys are strings


def test_lm_head_flops_are_two_rows_hidden_vocab():
    w = new_work()
    add_lm_head(w, 5, hidden=64, vocab=1000)
    add_lm_head(w, 3, hidden=64, vocab=1000)
    assert w["lm_head_extra"] == {"passes": 2, "rows": 8, "flops": 2 * 8 * 64 * 1000}


def test_merge_sums_every_field_and_skips_missing_counts():
    a, b = new_work(), new_work()
    add_forward(a, "draft", 1, 1, 10)
    add_forward(b, "draft", 1, 1, 20)
    add_forward(b, "draft", 3, 3, 21)
    a["emitted"], b["emitted"], b["lookups"] = 4, 6, 2
    m = merge_work([a, None, {}, b])
    assert m["draft"]["forwards"] == 3 and m["draft"]["rows"] == 5 and m["draft"]["rows_hist"] == {"1": 2, "3": 1}
    assert m["draft"]["ctx"] == 51 and m["emitted"] == 10 and m["lookups"] == 2
    assert merge_work([]) == new_work()


def test_per_token_divides_by_emitted_tokens():
    w = new_work()
    for _ in range(4):
        add_forward(w, "target_verify", 6, 6, 0)
    for _ in range(20):
        add_forward(w, "draft", 1, 1, 0)
    add_lm_head(w, 10, 8, 8)
    w["emitted"], w["lookups"] = 10, 5
    assert per_token(w) == {"target_forwards": 0.4, "target_rows": 2.4, "draft_forwards": 2.0, "draft_rows": 2.0,
                            "lm_head_extra_rows": 1.0, "lookups": 0.5}
    assert per_token(new_work())["target_forwards"] is None  # nothing emitted
    assert per_token({}) == {}
