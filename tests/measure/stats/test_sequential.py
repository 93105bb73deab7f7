"""The certification procedure's statistics (measure/stats/sequential.py): its bounds are the
report's exact paired bounds, its spending sums to alpha, and over >= 1,000 simulated families
its family-wise error stays at or below alpha (printed: pytest -s shows the rates)."""

from __future__ import annotations

import numpy as np
import pytest

from loosespec_bench.measure.stats.exact import ExactPairedBinary
from loosespec_bench.measure.stats.sequential import (
    CERTIFIED, FUTILE, NOT_CERTIFIED, NOT_TESTED, Certification, Design, fixed_sequence, loss_lower, loss_upper,
    simulate_counts,
)

FAMILIES = 4000


def test_bounds_are_the_reports_exact_paired_bounds():
    rng = np.random.default_rng(1)
    for _ in range(40):
        right, wrong = int(rng.integers(0, 60)), int(rng.integers(0, 60))
        if right + wrong == 0:
            continue
        lost, gained = int(rng.integers(0, right + 1)), int(rng.integers(0, wrong + 1))
        e = ExactPairedBinary(lost, gained, right, wrong)
        a = float(rng.uniform(0.001, 0.2))
        assert loss_upper(lost, gained, right, wrong, a) == pytest.approx(-e.lower("difference", a), abs=1e-12)
        assert loss_lower(lost, gained, right, wrong, a) == pytest.approx(-e.upper("difference", a), abs=1e-12)
        if right:
            assert loss_upper(lost, gained, right, wrong, a, "retention") == pytest.approx(1 - e.lower("retention", a), abs=1e-12)


@pytest.mark.parametrize("spending", ["obrien_fleming", "pocock"])
def test_spending_sums_to_alpha_and_obrien_fleming_spends_late(spending):
    d = Design(looks=(100, 200, 300), delta=0.05, alpha=0.05, spending=spending)
    assert sum(d.alphas) == pytest.approx(0.05)
    assert all(a > 0 for a in d.alphas)
    if spending == "obrien_fleming":
        assert d.alphas[0] < 0.01 < d.alphas[-1]


@pytest.mark.parametrize("bad", [dict(looks=()), dict(looks=(5, 5)), dict(alpha=0.7), dict(delta=0), dict(spending="x"),
                                 dict(estimand="ratio")])
def test_a_bad_design_is_refused(bad):
    with pytest.raises(ValueError):
        Design(**{**dict(looks=(10, 20), delta=0.05), **bad})


def _rates(design, accuracy, losses, seed):
    """FWER (a setting whose loss is >= delta certified) and the share certifying each setting."""
    p_lost = [x / accuracy for x in losses]
    counts = simulate_counts(np.random.default_rng(seed), FAMILIES, design.looks, accuracy, p_lost, [0.0] * len(losses))
    res = fixed_sequence(design, *counts)
    null = np.asarray(losses) >= design.delta - 1e-12
    false = ((res.outcome == CERTIFIED) & null[None, :]).any(axis=1)
    return float(false.mean()), (res.outcome == CERTIFIED).mean(axis=0)


@pytest.mark.parametrize("spending", ["obrien_fleming", "pocock"])
@pytest.mark.parametrize("losses", [(0.05, 0.08), (0.0, 0.02, 0.05, 0.10), (0.0, 0.0, 0.049, 0.05)])
def test_family_wise_error_is_at_most_alpha_over_simulated_families(spending, losses):
    """Settings at the margin (loss = delta: the null's worst case) behind lossless and lossy
    ones; the looser settings lose supersets of the stricter ones' problems."""
    design = Design(looks=(150, 300, 450), delta=0.05, alpha=0.05, spending=spending)
    fwer, share = _rates(design, accuracy=0.6, losses=losses, seed=7)
    print(f"\n[{spending}] losses {losses}: FWER {fwer:.4f} over {FAMILIES} families (alpha 0.05); "
          f"certified per setting {np.round(share, 3).tolist()}")
    assert fwer <= design.alpha
    if losses[0] == 0.0:
        assert share[0] > 0.5  # and it has power where the loss is nil


@pytest.mark.parametrize("estimand", ["difference", "retention"])
def test_family_wise_error_with_gains_beside_the_losses(estimand):
    """Settings that lose and gain (net loss at the margin: loss = p_lost acc - p_gained (1 - acc),
    or 1 - retention = p_lost - p_gained (1 - acc) / acc), behind a balanced one."""
    acc, delta = 0.6, 0.05
    design = Design(looks=(200, 400, 600), delta=delta, alpha=0.05, estimand=estimand)
    p_gained = [0.05, 0.05, 0.10]
    if estimand == "difference":
        p_lost = [0.05 * (1 - acc) / acc, (delta + 0.05 * (1 - acc)) / acc, (delta + 0.10 * (1 - acc)) / acc]
    else:
        p_lost = [0.05 * (1 - acc) / acc, delta + 0.05 * (1 - acc) / acc, delta + 0.10 * (1 - acc) / acc]
    counts = simulate_counts(np.random.default_rng(11), FAMILIES, design.looks, acc, p_lost, p_gained)
    res = fixed_sequence(design, *counts)
    fwer = float((res.outcome[:, 1:] == CERTIFIED).any(axis=1).mean())
    print(f"\n[{estimand}, gains beside losses] FWER {fwer:.4f} over {FAMILIES} families (alpha 0.05); "
          f"balanced setting certified in {(res.outcome[:, 0] == CERTIFIED).mean():.3f}")
    assert fwer <= design.alpha


def test_error_at_a_liberal_level_is_still_bounded_and_the_bound_is_not_vacuous():
    """At alpha = 0.2 with one look the exact-conservative test's error is below alpha but not 0."""
    design = Design(looks=(400,), delta=0.05, alpha=0.2)
    fwer, _ = _rates(design, accuracy=0.5, losses=(0.05,), seed=3)
    print(f"\n[one look, alpha 0.2] loss at the margin: error {fwer:.4f} over {FAMILIES} families")
    assert 0 < fwer <= 0.2


def test_the_stepwise_certification_is_the_vectorised_procedure():
    design = Design(looks=(40, 80, 120), delta=0.1, alpha=0.05)
    counts = simulate_counts(np.random.default_rng(5), 200, design.looks, 0.5, [0.0, 0.1, 0.2, 0.5], [0.0, 0.05, 0.1, 0.0])
    batch = fixed_sequence(design, *counts)
    for f in range(200):
        c = Certification(design, 4)
        while (nxt := c.next()) is not None:
            s, k = nxt
            c.feed(*(int(x[f, s, k]) for x in counts))
        assert c.outcome == batch.outcome[f].tolist()
        assert c.decided_at == batch.look[f].tolist()
        assert c.certified == batch.certified[f]


def test_a_lossy_setting_fails_at_the_first_look_and_ends_the_sequence():
    design = Design(looks=(30, 60), delta=0.1, alpha=0.05)
    c = Certification(design, 3)
    assert c.feed(0, 0, 30, 0) == 0      # 0 of 30 lost: the first look's alpha (0.01) is too small
    assert c.feed(0, 0, 60, 0) == CERTIFIED  # 0 of 60 at the last look: bound 0.063 < 0.1
    assert c.next() == (1, 1)             # the next setting, at the same look
    assert c.feed(50, 0, 60, 0) == FUTILE  # 50 of 60 lost: the loss is shown far past the margin
    assert c.done and c.outcome == [CERTIFIED, FUTILE, NOT_TESTED] and c.certified == 1
    fresh = Certification(design, 2)
    assert fresh.feed(25, 0, 30, 0) == FUTILE and fresh.decided_at == [0, -1]  # lossy: out at the first look


def test_a_setting_that_never_clears_the_margin_fails_at_the_last_look():
    design = Design(looks=(20, 40), delta=0.05, alpha=0.05)
    c = Certification(design, 1)
    c.feed(1, 1, 10, 10)
    c.feed(2, 2, 20, 20)
    assert c.outcome == [NOT_CERTIFIED] and c.done
