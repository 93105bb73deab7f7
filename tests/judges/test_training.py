"""Fitting the judge (judges/training.py): the released recipe on synthetic features."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("sklearn")

from loosespec_bench.judges.training import classification_metrics, fit_judge, pick_threshold, problem_bootstrap, split_by_problem


def test_split_keeps_each_problem_on_one_side():
    problem = np.repeat(np.arange(20), 3)
    s = split_by_problem(problem, seed=1, val_fraction=0.2, test_fraction=0.2)
    sides = [set(problem[s.train]), set(problem[s.val]), set(problem[s.test])]
    assert sides[0].isdisjoint(sides[1]) and sides[0].isdisjoint(sides[2]) and sides[1].isdisjoint(sides[2])
    assert sum(map(len, sides)) == 20 and len(sides[1]) == 4 and len(sides[2]) == 4


def test_threshold_is_the_largest_that_keeps_the_recall():
    y = np.array([1, 1, 1, 1, 0, 0, 0, 0])
    scores = np.array([0.9, 0.8, 0.7, 0.2, 0.6, 0.3, 0.1, 0.05])
    thr, cands = pick_threshold(y, scores, recall_target=0.75)
    assert (scores[y == 1] >= thr).mean() >= 0.75
    assert all((scores[y == 1] >= c).mean() < 0.75 for c in cands if c > thr)
    thr_all, _ = pick_threshold(y, scores, recall_target=1.0)
    assert thr_all <= 0.2  # every important mismatch must still be caught


def test_metrics_count_important_as_positive():
    m = classification_metrics(np.array([1, 1, 0, 0]), np.array([0.9, 0.1, 0.8, 0.2]), 0.5)
    assert (m["tp"], m["fn"], m["fp"], m["tn"]) == (1, 1, 1, 1)
    assert m["precision"] == 0.5 and m["recall"] == 0.5 and m["unimportant_accepted"] == 0.5
    assert m["precision_ci_low"] < 0.5 < m["precision_ci_high"]


def test_fit_separates_a_separable_signal():
    rng = np.random.default_rng(0)
    n = 400
    y = rng.integers(0, 2, n)
    X = rng.normal(size=(n, 6)).astype(np.float32)
    X[:, 2] += 3.0 * y  # one informative coordinate
    problem = np.repeat(np.arange(n // 4), 4)
    head, report = fit_judge(X, y, problem, seed=0, recall_target=0.9)
    assert report["val"]["recall"] >= 0.9
    assert report["test"]["roc_auc"] > 0.9
    assert report["split"]["test_problems"] == 15
    assert abs(head.weights[2]) == max(abs(w) for w in head.weights)


def test_one_class_is_refused():
    X = np.zeros((20, 2), dtype=np.float32)
    with pytest.raises(ValueError, match="one class"):
        fit_judge(X, np.zeros(20, dtype=int), np.arange(20))


def test_problem_bootstrap_is_wider_than_wilson_when_problems_cluster():
    # 10 problems of 10 mismatches each; whole problems are right or wrong together, so the
    # mismatches are far from independent and the interval over problems must say so.
    y = np.ones(100, dtype=int)
    problems = np.repeat(np.arange(10), 10)
    scores = np.where(problems < 7, 0.9, 0.1)  # 7 problems caught whole, 3 missed whole
    m = classification_metrics(y, scores, 0.5, problems)
    assert m["recall"] == pytest.approx(0.7) and m["problems"] == 10
    lo, hi = m["recall_problem_ci_low"], m["recall_problem_ci_high"]
    assert lo < m["recall_ci_low"] and hi > m["recall_ci_high"] and lo < 0.7 < hi


def test_problem_bootstrap_edge_cases():
    y, s = np.array([1, 0, 1]), np.array([0.9, 0.2, 0.8])
    # One problem, or fewer than 5: no interval at all.
    assert all(v == (None, None) for v in problem_bootstrap(y, s, 0.5, np.array([0, 0, 0])).values())
    assert all(v == (None, None) for v in problem_bootstrap(y, s, 0.5, np.array([0, 1, 2])).values())
    # Only important mismatches: AUC is undefined in every resample, recall is not.
    only = problem_bootstrap(np.ones(10, dtype=int), np.linspace(0.1, 0.9, 10), 0.5, np.repeat(np.arange(5), 2))
    assert only["roc_auc"] == (None, None) and only["recall"][0] is not None
    # Without problems the metrics carry no bootstrap keys.
    assert "recall_problem_ci_low" not in classification_metrics(y, s, 0.5)


def test_grouped_cv_holds_every_problem_out_once_and_reads_the_signal():
    from loosespec_bench.judges.training import grouped_cv

    rng = np.random.default_rng(1)
    n = 200
    y = rng.integers(0, 2, n)
    X = rng.normal(size=(n, 4)).astype(np.float32)
    X[:, 0] += 2.5 * y
    problems = np.repeat(np.arange(20), 10)
    cv = grouped_cv(X, y, problems, C=1.0)
    assert cv["problems"] == 20 and cv["n"] == n and cv["roc_auc"] > 0.85
    assert cv["roc_auc_problem_ci_low"] < cv["roc_auc"] < cv["roc_auc_problem_ci_high"]
    # Pure noise: chance level; fewer problems than folds: not computed.
    noise = grouped_cv(rng.normal(size=(n, 4)).astype(np.float32), y, problems, C=1.0)
    assert 0.3 < noise["roc_auc"] < 0.7
    assert grouped_cv(X[:30], y[:30], problems[:30], C=1.0) is None
