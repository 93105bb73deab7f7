"""loosespec_bench.measure.serving: how often a batch repeats, and the serving figures on hand-built
records with known answers."""

from __future__ import annotations

import pytest

from loosespec_bench.measure.serving import MIN_UNITS, batch_repeats, serving_summary, side_summary


@pytest.mark.parametrize("n, batch, want, repeats", [
    (16, 16, 3, 3), (16, 8, 3, 2), (16, 4, 3, 1), (16, 1, 3, 1), (5, 2, 3, 1), (3, 2, 4, 2), (0, 4, 3, 1), (16, 16, 1, 1),
])
def test_batch_repeats(n, batch, want, repeats):
    assert batch_repeats(n, batch, want) == repeats


def _serving(batch: str, spans, tokens, ttft, e2e, new, load=None):
    return {"batch": batch, "batch_size": 2, "max_num_seqs": 2, "request_rate": None, "makespan_s": spans, "batch_tokens": tokens,
            "ttft_s": ttft, "e2e_s": e2e, "new_tokens": new, "identical_repeats": True, **({"load": load} if load else {})}


def _record(batch, spans, tokens, ttft, e2e, new, base_spans, status="clean", load=None):
    return {
        "metrics": {"serving": _serving(batch, spans, tokens, ttft, e2e, new, load)},
        "baseline": {"metrics": {"serving": _serving(batch, base_spans, tokens, [t * 2 for t in ttft], [x * 2 for x in e2e], new)}},
        "timing": {"status": status},
    }


def test_throughput_is_tokens_over_summed_makespans_and_the_speedup_pairs_the_batches():
    # Two batches of two requests (one repeat each): 10 and 20 tokens in 2 s and 3 s; the
    # target alone took 4 s and 6 s on the same batches.
    recs = [
        _record("a", [2.0], [10], [0.5], [2.0], [5], [4.0]), _record("a", [2.0], [10], [1.0], [2.0], [5], [4.0]),
        _record("b", [3.0], [20], [0.5], [3.0], [11], [6.0]), _record("b", [3.0], [20], [1.5], [3.0], [9], [6.0]),
    ]
    sv = serving_summary(recs)
    assert sv["throughput_tok_s"] == pytest.approx(6.0) and sv["baseline_throughput_tok_s"] == pytest.approx(3.0)
    assert sv["throughput_speedup"] == pytest.approx(2.0)
    assert (sv["n_batches"], sv["repeats"], sv["n_timed_batches"], sv["n_requests"]) == (2, 1, 2, 4)
    # TPOT per request: (e2e - ttft) / (n - 1): 0.375, 0.25, 0.25, 0.1875; median 0.25.
    assert sv["tpot_s_median"] == pytest.approx(0.25)
    assert sv["ttft_s_median"] == pytest.approx(0.75) and sv["baseline_ttft_s_median"] == pytest.approx(1.5)
    assert sv["e2e_s_p99"] == pytest.approx(3.0)
    # Fewer than MIN_UNITS timed batches: no interval.
    assert 2 < MIN_UNITS and sv["throughput_tok_s_ci_low"] is None and sv["throughput_speedup_ci_high"] is None


def test_repeats_are_units_and_intervals_hold_the_point():
    recs = [
        _record("a", [2.0, 2.2, 1.9], [10, 10, 10], [0.5, 0.6, 0.4], [2.0, 2.1, 1.8], [5, 5, 5], [4.0, 4.1, 3.9]),
        _record("b", [3.0, 3.3, 2.9], [20, 20, 20], [0.5, 0.5, 0.6], [3.0, 3.2, 2.8], [11, 11, 11], [6.0, 5.5, 6.5]),
    ]
    sv = serving_summary(recs, seed=3)
    assert (sv["n_batches"], sv["repeats"], sv["n_timed_batches"]) == (2, 3, 6)
    assert sv["throughput_tok_s"] == pytest.approx(90 / 15.3)
    for key in ("throughput_tok_s", "throughput_speedup", "tpot_s_median", "ttft_s_p90", "baseline_e2e_s_median"):
        assert sv[f"{key}_ci_low"] <= sv[key] <= sv[f"{key}_ci_high"], key
    assert serving_summary(recs, seed=3) == sv  # seeded


def test_excluded_timings_and_unserved_records_are_left_out():
    recs = [_record("a", [2.0], [10], [0.5], [2.0], [5], [4.0]), _record("b", [3.0], [20], [0.5], [3.0], [11], [6.0], status="excluded")]
    assert serving_summary(recs)["n_timed_batches"] == 1
    assert serving_summary([{"metrics": {}, "timing": {"status": "clean"}}]) is None


def test_load_is_read_once_per_batch_and_repeat():
    load = [{"others_share": 0.01, "loadavg": 1.5}, {"others_share": 0.2, "loadavg": 2.5}]
    recs = [_record("a", [2.0, 2.0], [10, 10], [0.5, 0.5], [2.0, 2.0], [5, 5], [4.0, 4.0], load=load)] * 2
    sv = serving_summary(recs)
    assert sv["others_share_max"] == 0.2 and sv["others_share_median"] == pytest.approx(0.105) and sv["loadavg_1m_max"] == 2.5


def test_side_summary_keeps_the_batches_of_pooled_runs_apart():
    one = [{"serving": _serving("a", [2.0], [10], [0.5], [2.0], [5])}]
    two = [{"serving": _serving("a", [8.0], [10], [0.5], [2.0], [5])}]  # the same batch id in another run
    pooled = side_summary([one, two])
    assert pooled["n_timed_batches"] == 2 and pooled["throughput_tok_s"] == pytest.approx(20 / 10)
    assert side_summary([[{"metrics": 1}]]) is None
