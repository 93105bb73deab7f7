"""The speculative-decoding cost model on hand-computed cases."""

from __future__ import annotations

import pytest

from loosespec_bench.costmodel import (
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
