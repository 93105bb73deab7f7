"""The speculative-decoding cost model on hand-computed cases."""

from __future__ import annotations

import pytest

from loosespec_bench.measure.costmodel import (
    Measured,
    acceptance_rates,
    best_k,
    expected_tokens,
    extend_rates,
    predicted_speedup,
    project,
    step_cost,
)


def test_expected_tokens_constant_alpha_matches_closed_form():
    # alpha = 0.8, K = 3: 1 + 0.8 + 0.64 + 0.512 = 2.952 = (1 - 0.8^4) / 0.2
    assert expected_tokens([0.8, 0.8, 0.8]) == pytest.approx(2.952)
    assert expected_tokens([0.8] * 3) == pytest.approx((1 - 0.8**4) / 0.2)


def test_expected_tokens_edge_cases():
    assert expected_tokens([]) == 1.0  # no draft: one token per step
    assert expected_tokens([1.0, 1.0]) == 3.0  # perfect draft: K + 1
    assert expected_tokens([0.0, 1.0]) == 1.0  # first position always fails
    assert expected_tokens([0.5, None, 0.9]) == 1.5  # a position nobody reached ends the sum
    with pytest.raises(ValueError):
        expected_tokens([1.5])


def test_acceptance_rates_by_position():
    # Steps (drafted, accepted): (3,3) (3,1) (3,0) (2,2)
    # pos 1: reached by all 4, accepted by 3 -> 0.75
    # pos 2: reached by (3,3) (3,1) (2,2) -> accepted by (3,3) (2,2) -> 2/3
    # pos 3: reached by (3,3) only (drafted 3, accepted >= 2) -> 1/1
    rates = acceptance_rates([3, 3, 3, 2], [3, 1, 0, 2])
    assert rates == pytest.approx([0.75, 2 / 3, 1.0])
    assert acceptance_rates([2], [0], k=3) == [0.0, None, None]
    # Short drafts (a lookup that found 1 token, or none) count as rejections when asked:
    # steps (3,3) (1,1) (0,0): pos 1 -> 2/3, pos 2 -> 1/2 (the (1,1) step reached it), pos 3 -> 1/1
    assert acceptance_rates([3, 1, 0], [3, 1, 0], short_as_reject=True) == pytest.approx([2 / 3, 1 / 2, 1.0])
    assert acceptance_rates([3, 1, 0], [3, 1, 0]) == [1.0, 1.0, 1.0]  # left out: every draft was right
    # ... and then E = 1 + mean accepted: 1 + 4/3
    assert expected_tokens(acceptance_rates([3, 1, 0], [3, 1, 0], short_as_reject=True)) == pytest.approx(1 + 4 / 3)
    with pytest.raises(ValueError):
        acceptance_rates([1, 2], [0])


def test_classical_formula_when_verification_is_free():
    # alpha = 0.8, K = 3, c = 0.1: 2.952 / 1.3
    assert predicted_speedup([0.8] * 3, 0.1) == pytest.approx(2.952 / 1.3)
    # K shorter than the measured rates uses the first K
    assert predicted_speedup([0.5, 0.5, 0.5], 0.2, 1) == pytest.approx(1.5 / 1.2)
    with pytest.raises(ValueError):
        predicted_speedup([0.5], 0.2, 2)


def test_verification_factor_overheads_and_draft_forwards():
    # CPU-like: v = 1.1, c = 0.36, K = 5, alpha = 0.8 -> E = (1 - 0.8^6) / 0.2 = 3.68928
    e = (1 - 0.8**6) / 0.2
    assert step_cost(0.36, 5, verify_factor=1.1) == pytest.approx(2.9)
    assert predicted_speedup([0.8] * 5, 0.36, verify_factor=1.1) == pytest.approx(e / 2.9)
    # MLA: 2 draft forwards per step instead of 5
    assert predicted_speedup([0.8] * 5, 0.36, verify_factor=1.1, draft_forwards=2) == pytest.approx(e / 1.82)
    # Prompt lookup: no draft model (c = 0)
    assert predicted_speedup([0.5] * 2, 0.0, verify_factor=1.05) == pytest.approx(1.75 / 1.05)
    # Overheads: 0.1 per method step, 0.02 per target-alone step
    assert predicted_speedup([0.8] * 5, 0.36, verify_factor=1.1, overhead=0.1, baseline_overhead=0.02) == pytest.approx(
        e * 1.02 / 3.0
    )


def test_measured_derives_c_and_v_from_times():
    m = Measured(
        target_forward_s=0.120, draft_forward_s=0.045, verify_forward_s=0.132, rates=[0.8] * 5, k=5,
        overhead_s=0.006, baseline_overhead_s=0.0012,
    )
    assert m.c == pytest.approx(0.375)
    assert m.verify_factor == pytest.approx(1.1)
    e = (1 - 0.8**6) / 0.2
    assert m.speedup(with_overhead=False) == pytest.approx(e / (1.1 + 0.375 * 5))
    assert m.speedup() == pytest.approx(e * 1.01 / (1.1 + 0.375 * 5 + 0.05))


def test_project_extends_rates_geometrically():
    assert extend_rates([0.9, 0.7], 4) == [0.9, 0.7, 0.7, 0.7]
    assert extend_rates([0.9, None, 0.2], 3) == [0.9, 0.9, 0.9]
    assert extend_rates([0.9, 0.8, 0.7], 2) == [0.9, 0.8]
    with pytest.raises(ValueError):
        extend_rates([None], 2)
    # 8B -> 70B style inputs: c = 0.125, v = 1, rates [0.9, 0.8] extended to K = 4
    p = project([0.9, 0.8], c=0.125, k=4)
    e = 1 + 0.9 + 0.72 + 0.576 + 0.4608
    assert p.expected_tokens == pytest.approx(e)
    assert p.speedup == pytest.approx(e / 1.5)


def test_best_k_trades_length_against_draft_cost():
    # alpha = 0.5, c = 0.5: K=1 -> 1.5/1.5 = 1.0; K=2 -> 1.75/2 = 0.875: K = 1 is best
    assert best_k([0.5], c=0.5, k_max=4).k == 1
    # alpha = 0.9, c = 0.05: longer drafts keep paying; K=1 -> 1.9/1.05 = 1.81 ... K=8 -> 1.88 of cost
    b = best_k([0.9], c=0.05, k_max=8)
    assert b.k > 4
    # A per-K verification factor that grows fast makes short drafts win again
    assert best_k([0.9], c=0.05, k_max=4, verify_factor=[1.0, 2.0, 3.0, 4.0]).k == 1


# ---- the calibrated cost model ---------------------------------------------------------------
from loosespec_bench.measure.costmodel import Calibration, ForwardCost  # noqa: E402
from loosespec_bench.measure.work import add_forward, add_lm_head, new_work  # noqa: E402


def _cost() -> ForwardCost:
    # body: 10 ms at 1 row, 12 at 2, 20 at 10; 1 ms per LM-head row; 0.01 ms per row x context past 100
    return ForwardCost(rows=[1, 2, 10], body_s=[0.010, 0.012, 0.020], ctx0=100, ctx_row_s=1e-5, lm_head_row_s=0.001)


def test_forward_cost_interpolates_and_extrapolates_linearly():
    c = _cost()
    assert c.body(1) == pytest.approx(0.010)
    assert c.body(6) == pytest.approx(0.012 + 0.008 * 4 / 8)
    assert c.body(14) == pytest.approx(0.020 + 0.001 * 4)  # the last segment's slope, 1 ms per row
    assert c.body(0) == pytest.approx(0.008)  # below the grid: the first segment, floored at 0
    assert c.forward_s(2, 2, 150) == pytest.approx(0.012 + 0.002 + 1e-5 * 2 * 50)


def test_role_cost_from_counts_equals_the_sum_of_its_forwards():
    c = _cost()
    w = new_work()
    shapes = [(1, 1, 120), (2, 2, 121), (10, 10, 130), (1, 1, 140)]
    for r, lm, ctx in shapes:
        add_forward(w, "target_verify", r, lm, ctx)
    assert c.role_s(w["target_verify"]) == pytest.approx(sum(c.forward_s(*s) for s in shapes))


def test_a_per_forward_context_term_prices_each_forward_once_whatever_its_rows():
    # The mask and the cache's bookkeeping grow with the context, not with the rows: 2e-6 s per
    # forward and cached position past ctx0, beside attention's 1e-5 per row and position.
    c = ForwardCost(rows=[1, 2, 10], body_s=[0.010, 0.012, 0.020], ctx0=100, ctx_row_s=1e-5, lm_head_row_s=0.001, ctx_s=2e-6)
    assert c.forward_s(2, 2, 150) == pytest.approx(0.012 + 0.002 + (2e-6 + 1e-5 * 2) * 50)
    assert c.forward_s(10, 0, 150) - _cost().forward_s(10, 0, 150) == pytest.approx(2e-6 * 50)  # once, not per row
    w = new_work()
    shapes = [(1, 1, 120), (2, 2, 121), (10, 10, 130), (1, 1, 40)]
    for r, lm, ctx in shapes:
        add_forward(w, "target_verify", r, lm, ctx)
    assert c.role_s(w["target_verify"]) == pytest.approx(sum(c.forward_s(*s) for s in shapes))
    # A calibration written before the term reads it as 0 and prices as before.
    old = {"rows": [1, 2, 10], "body_s": [0.010, 0.012, 0.020], "ctx0": 100, "ctx_row_s": 1e-5, "lm_head_row_s": 0.001}
    assert ForwardCost.from_dict(old).ctx_s == 0.0 and ForwardCost.from_dict(old) == _cost()
    # The refusal counts it: at 1 row the context work over ctx0 = 100 positions is 100 x (ctx_s +
    # 1e-5), at most the 10 ms body: ctx_s of 8.9e-5 holds, 9.1e-5 prices a prefill below nothing.
    assert ForwardCost.from_dict({**old, "ctx_s": 8.9e-5}).nonphysical() is None
    why = ForwardCost.from_dict({**old, "ctx_s": 9.1e-5}).nonphysical()
    assert why and "ctx_s=9.1e-05 s per forward" in why and "for 1 rows" in why


def test_calibration_predicts_forwards_lookups_extra_rows_and_steps():
    t = _cost()
    d = ForwardCost(rows=[1, 2], body_s=[0.002, 0.003], ctx0=0, ctx_row_s=0.0, lm_head_row_s=0.0)
    cal = Calibration(target=t, draft=d, extra_lm_head_row_s=0.0005, lookup_s=0.0001, step_overhead_s=0.001, signature={},
                      verify_row_s=0.0002)
    w = new_work()
    add_forward(w, "target_prefill", 10, 1, 0)
    add_forward(w, "target_verify", 2, 2, 100)
    add_forward(w, "draft_prefill", 11, 1, 0)
    add_forward(w, "draft", 1, 1, 11)
    add_lm_head(w, 10, 4, 4)
    w["lookups"], w["steps"] = 3, 1
    expected = (t.forward_s(10, 1, 0) + t.forward_s(2, 2, 100) + d.forward_s(11, 1, 0) + d.forward_s(1, 1, 11)
                + 10 * 0.0005 + 3 * 0.0001 + 0.001 + 2 * 0.0002)
    assert cal.predict_s(w) == pytest.approx(expected)
    assert Calibration.from_dict(cal.to_dict()).predict_s(w) == pytest.approx(expected)
    no_draft = Calibration(target=t, draft=None, extra_lm_head_row_s=0, lookup_s=0, step_overhead_s=0, signature={})
    with pytest.raises(ValueError, match="no draft model"):
        no_draft.predict_s(w)


def test_predicted_speedup_pools_tokens_over_predicted_time():
    # Method: 10 tokens in 2 s and 30 in 4 s; target alone: 10 in 5 s and 30 in 15 s -> (40/6) / (40/20) = 3.333,
    # pooled as summary.cost_model_fields pools the predicted times (stats.speedup_of_sums).
    from loosespec_bench.measure.stats.intervals import speedup_of_sums

    s = speedup_of_sums([10, 30], [2.0, 4.0], [10, 30], [5.0, 15.0])
    assert s == pytest.approx((40 / 6) / (40 / 20))


class _PerTokenCalibration:
    """predict_s = the work's `t` (a stand-in whose predictions are known by hand)."""

    def predict_s(self, work):
        return work["t"]


def _rec(tokens, method_t, base_t, timed):
    base = {"metrics": {"new_tokens": tokens, "work": {"t": base_t}}} if base_t is not None else {"metrics": {"new_tokens": tokens}}
    return {"metrics": {"new_tokens": tokens, "work": {"t": method_t}}, "baseline": base,
            "timing": {"status": "clean" if timed else "untimed"}}


def test_work_speedup_counts_every_sample_with_counts_on_both_sides_timed_or_not():
    from loosespec_bench.store.summary import work_speedup_fields

    # Two untimed samples (target alone from the store) and one timed: (40/6) / (40/20) = 3.333 over
    # the first two; the third has no counts on its target-alone side and is left out (n = 2).
    recs = [_rec(10, 2.0, 5.0, False), _rec(30, 4.0, 15.0, True), _rec(50, 1.0, None, False)]
    got = work_speedup_fields(recs, _PerTokenCalibration(), seed=0)
    assert got["work_speedup"] == pytest.approx((40 / 6) / (40 / 20)) and got["work_speedup_n"] == 2
    assert got["work_speedup_ci_low"] <= got["work_speedup"] <= got["work_speedup_ci_high"]
    assert work_speedup_fields([_rec(10, 2.0, None, False)], _PerTokenCalibration(), seed=0) == {}


def test_a_run_with_no_timed_sample_still_has_a_work_speedup():
    from loosespec_bench.store.summary import cost_model_fields

    recs = [_rec(10, 2.0, 5.0, False), _rec(30, 4.0, 15.0, False)]
    for r in recs:
        r["metrics"]["total_s"] = 1.0
    out = cost_model_fields(recs, [], _PerTokenCalibration(), "stub", seed=0)
    assert out["predicted_speedup"] is None and "no timed paired sample" in out["cost_model"]["why"]
    assert out["work_speedup"] == pytest.approx((40 / 6) / (40 / 20))


# ---- the LM head's share of a decoder's weight work (DropMatch's overhead projected) ----------
from loosespec_bench.measure.costmodel import lm_head_share, weight_macs_per_token  # noqa: E402

# Llama-3.1-70B-Instruct's config.json fields (test data: the harness reads the 70B from its profile).
LLAMA31_70B = {"hidden_size": 8192, "intermediate_size": 28672, "num_hidden_layers": 80,
               "num_attention_heads": 64, "num_key_value_heads": 8, "vocab_size": 128256}


def test_weight_macs_of_llama_70b_by_hand():
    # Per layer: q and o 2 x 8192^2, k and v 2 x 8192 x (8 kv heads x 128), gate/up/down 3 x 8192 x 28672.
    per_layer = 2 * 8192 * 8192 + 2 * 8192 * 8 * 128 + 3 * 8192 * 28672
    assert weight_macs_per_token(LLAMA31_70B) == (80 * per_layer, 8192 * 128256)
    assert lm_head_share(LLAMA31_70B) == pytest.approx(0.01512, abs=1e-5)


def test_the_70b_profiles_head_share_agrees_with_its_shape():
    # The report projects onto the H100 profile's target (parameter count, vocab, hidden); counted
    # from the config's shape instead, the share differs only by the norms' and biases' weights.
    from loosespec_bench.report.project import PAPERS_70B_PROFILE, lm_head_share_of_profile, load_profile

    assert lm_head_share_of_profile(load_profile(PAPERS_70B_PROFILE)) == pytest.approx(lm_head_share(LLAMA31_70B), rel=2e-3)


def test_lm_head_share_of_the_embedded_target_is_about_ten_times_a_70b():
    # Qwen2.5-Coder-1.5B's config.json fields (head_dim absent: hidden / heads = 128).
    qwen = {"hidden_size": 1536, "intermediate_size": 8960, "num_hidden_layers": 28, "num_attention_heads": 12,
            "num_key_value_heads": 2, "vocab_size": 151936}
    body = 28 * (2 * 1536 * 1536 + 2 * 1536 * 2 * 128 + 3 * 1536 * 8960)
    assert weight_macs_per_token(qwen) == (body, 1536 * 151936)
    assert lm_head_share(qwen) == pytest.approx(0.1512, abs=1e-4)
    # An explicit head_dim wins over hidden / heads; no kv heads field means multi-head attention.
    assert weight_macs_per_token({**qwen, "head_dim": 64})[0] == 28 * (2 * 1536 * 1536 + 2 * 1536 * 2 * 64 + 3 * 1536 * 8960)
    no_kv = {k: v for k, v in qwen.items() if k != "num_key_value_heads"}
    assert weight_macs_per_token(no_kv)[0] == 28 * (4 * 1536 * 1536 + 3 * 1536 * 8960)


def test_lm_head_share_is_none_without_a_decoder_shape():
    assert weight_macs_per_token({"vocab_size": 1000, "model_type": "tiny"}) is None
    assert lm_head_share({"vocab_size": 1000}) is None
    assert lm_head_share({**LLAMA31_70B, "hidden_size": None}) is None


# ---- issue 74: a calibration never prices a forward below nothing ------------------------------
from loosespec_bench.errors import ConfigError  # noqa: E402


def _steep(ctx_row_s: float) -> dict:
    """A calibration's stored form whose target body was measured at ctx0 = 64 cached positions
    (10 ms a row at 1 row, then 2 ms a row), every field of the kind and range the declaration
    check accepts; only its context slope varies."""
    fwd = {"rows": [1, 2, 4, 512], "body_s": [0.010, 0.012, 0.016, 1.032], "ctx0": 64, "ctx_row_s": ctx_row_s,
           "lm_head_row_s": 1e-4}
    return {"target": fwd, "draft": None, "extra_lm_head_row_s": 0.0, "lookup_s": 0.0, "step_overhead_s": 0.0,
            "verify_row_s": 0.0, "check": {}, "signature": {}}


def _target_alone(prompt: int, tokens: int) -> dict:
    w = new_work()
    add_forward(w, "target_prefill", prompt, 1, 0)
    for i in range(tokens):
        add_forward(w, "target_verify", 1, 1, prompt + i)
    w["steps"] = tokens
    return w


def test_a_steep_context_slope_used_to_price_a_prefill_below_nothing_and_is_refused():
    # 1e-4 s per row and cached position: the attention over ctx0 = 64 positions alone would be
    # 6.4 ms a row, more than the 2 ms a row the whole body costs past 4 rows. A 300-row prefill
    # from an empty cache was priced 0.608 - 300 x 64 x 1e-4 = -1.31 s (+ its LM-head row).
    steep = _steep(1e-4)
    cost = ForwardCost.from_dict(steep["target"])  # the network's costs alone still read
    prefill = cost.body(300) + 1e-4 * 1 + 1e-4 * 300 * (0 - 64)
    assert prefill == pytest.approx(0.016 + 0.002 * 296 + 1e-4 - 1.92) and prefill < 0
    assert cost.role_s(_target_alone(300, 4)["target_prefill"]) == pytest.approx(prefill)
    assert "ctx_row_s" in cost.nonphysical()
    with pytest.raises(ConfigError) as err:
        Calibration.from_dict(steep, where="results/_calibration/embedded/abc.json")
    msg = str(err.value)
    assert msg.startswith("results/_calibration/embedded/abc.json: target.ctx_row_s=0.0001 s prices the attention")
    assert "less than nothing" in msg and "\n" not in msg
    with pytest.raises(ConfigError, match="the calibration: target.ctx_row_s"):  # built in code: refused alike
        Calibration(target=cost, draft=None, extra_lm_head_row_s=0, lookup_s=0, step_overhead_s=0, signature={})


def test_a_gentle_context_slope_prices_every_forward_at_or_above_zero():
    # 2e-5 s: the attention over 64 positions is 1.28 ms a row, under the 2 ms a row of the body.
    cal = Calibration.from_dict(_steep(2e-5))
    assert cal.target.nonphysical() is None
    for prompt in (1, 30, 300, 5000):
        assert cal.predict_s(_target_alone(prompt, 4)) > 0
    # The bound is the body's growth past its last rows, 2 ms a row: 64 x 3.1e-5 = 1.98 ms holds.
    assert Calibration.from_dict(_steep(3.1e-5)).target.nonphysical() is None
    # 64 x 3.14e-5 = 2.01 ms a row stays under every measured body (1.029 s of attention at 512 rows
    # against 1.032 s) but outgrows the body past them: a ~700-row prompt would be priced below zero.
    long_prompt = ForwardCost.from_dict(_steep(3.14e-5)["target"])
    assert long_prompt.forward_s(512, 0, 0) > 0 and long_prompt.forward_s(1000, 0, 0) < 0
    assert "for 131072 rows" in long_prompt.nonphysical()


def test_a_body_that_falls_past_its_last_rows_is_refused():
    # A longer forward would be extrapolated as cheaper, and past ~2,500 rows as free.
    falling = _steep(0.0)
    falling["target"]["body_s"] = [0.010, 0.012, 0.016, 0.015]
    with pytest.raises(ConfigError, match=r"cal.json: target.body_s falls from 0.016 s at 4 rows to 0.015 s at 512"):
        Calibration.from_dict(falling, where="cal.json")


def test_a_run_is_given_no_prediction_from_a_nonphysical_calibration(tmp_path):
    # find_calibration (a run's, the speed bench's): the calibration matching this machine is not
    # used, and the reason names the term.
    import json

    import torch

    from loosespec_bench.calibrate import calibration_path, find_calibration, pair_node, signature

    pair = pair_node("tiny")
    sig = signature(pair, torch.get_num_threads())
    path = calibration_path(tmp_path, sig)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({**_steep(1e-4), "signature": sig}))
    cal, why = find_calibration(tmp_path, pair)
    assert cal is None and "target.ctx_row_s" in why and "less than nothing" in why
    path.write_text(json.dumps({**_steep(2e-5), "signature": sig}))
    cal, why = find_calibration(tmp_path, pair)
    assert cal is not None and why == str(path)


# ---- the planner's assumed speedups, declared on the rule classes ------------------------------
from loosespec_bench.measure.costmodel import ANY_PAIR, assumed_speedup  # noqa: E402


def test_an_assumed_speedup_is_read_from_the_class_by_pair():
    class Reported:
        assumed_speedup = {ANY_PAIR: 2.0, "big-pair": 5.0}

    class Derived(Reported):  # another rule: the paper's figure is not its own
        pass

    class Silent:
        pass

    assert assumed_speedup(Reported, "big-pair") == 5.0 and assumed_speedup(Reported, "tiny") == 2.0
    assert assumed_speedup(Derived, "big-pair") == 1.0 and assumed_speedup(Silent, "tiny") == 1.0
    assert assumed_speedup(None, "tiny") == 1.0  # a method no rule class claims
