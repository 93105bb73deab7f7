"""Fitting AutoJudge's classifier (released code: src/train_head_gsm8k.py).

As released: problems (not mismatches) are shuffled with a seed and split, so no problem has
mismatches on both sides; features are standardised (StandardScaler fitted on the training
part); a logistic regression (positive class = important) is fitted for every C of the released
grid, (10 ** 0.5) ** -[14..1] and 1, 3, 10, 50, 100, and the C with the best validation ROC AUC
is kept; candidate thresholds are the 26 quantiles 0, 0.04, .., 1 of the validation scores.

Threshold: the largest candidate whose validation recall of "important" reaches
`recall_target` (a mismatch scoring at or above the threshold is corrected). The released
trainer stores all 26 candidates and its evaluation sweeps them; the recall reading is the one
this harness's brief names; `--threshold` of train/autojudge.py sets one by hand.

Unlike the released trainer, a third part of the problems (`test_fraction`) is kept out of both
the choice of C and of the threshold, and the judge's precision/recall are reported on it, with
Wilson 95% intervals (which treat mismatches as independent: optimistic, since one problem's
mismatches share its answer) and, where problems are given, 95% percentile intervals of a
bootstrap over problems (whole problems resampled: the honest interval for these data).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .head import JudgeHead

C_GRID = [float(c) for c in (10**0.5) ** -np.arange(1, 15)[::-1]] + [1.0, 3.0, 10.0, 50.0, 100.0]
QUANTILES = np.linspace(0, 1, 26)
MIN_BOOTSTRAP_PROBLEMS = 5  # fewer held-out problems: no bootstrap interval


@dataclass
class Split:
    train: np.ndarray  # row indices
    val: np.ndarray
    test: np.ndarray


def split_by_problem(problem_of_row: np.ndarray, *, seed: int, val_fraction: float, test_fraction: float) -> Split:
    """Row indices of train / validation / test, problems shuffled with `seed` and cut by count."""
    problems = np.unique(problem_of_row)
    rng = np.random.default_rng(seed)
    rng.shuffle(problems)
    n = len(problems)
    n_test = int(round(n * test_fraction))
    n_val = int(round(n * val_fraction))
    test_p, val_p = set(problems[:n_test]), set(problems[n_test : n_test + n_val])
    rows = np.arange(len(problem_of_row))
    in_test = np.array([p in test_p for p in problem_of_row], dtype=bool)
    in_val = np.array([p in val_p for p in problem_of_row], dtype=bool)
    return Split(rows[~in_test & ~in_val], rows[in_val], rows[in_test])


def wilson(k: int, n: int) -> tuple[float | None, float | None]:
    """95% Wilson interval of k successes in n (None, None when n = 0)."""
    if n == 0:
        return None, None
    from scipy.stats import binomtest

    ci = binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
    return float(ci.low), float(ci.high)


def _point_metrics(y: np.ndarray, scores: np.ndarray, threshold: float) -> dict[str, float | None]:
    from sklearn.metrics import roc_auc_score

    pred = scores >= threshold
    tp, fp = int((pred & (y == 1)).sum()), int((pred & (y == 0)).sum())
    fn, tn = int((~pred & (y == 1)).sum()), int((~pred & (y == 0)).sum())
    return {
        "precision": tp / (tp + fp) if tp + fp else None,
        "recall": tp / (tp + fn) if tp + fn else None,
        "unimportant_accepted": tn / (tn + fp) if tn + fp else None,
        "roc_auc": float(roc_auc_score(y, scores)) if len(set(y.tolist())) == 2 else None,
    }


def problem_bootstrap(
    y: np.ndarray, scores: np.ndarray, threshold: float, problems: np.ndarray, *, n_resamples: int = 2000, seed: int = 0
) -> dict[str, tuple[float | None, float | None]]:
    """95% percentile intervals of precision, recall, unimportant accepted and ROC AUC from a
    bootstrap over problems: each resample draws len(unique problems) problems with replacement
    and takes all their mismatches (a problem's mismatches are not independent). A resample where
    a figure is undefined (no predicted / actual positive, one class) is left out of that figure;
    (None, None) with fewer than MIN_BOOTSTRAP_PROBLEMS problems (2 problems have 3 distinct
    resamples: no interval worth printing) or under 100 defined resamples."""
    ids = np.unique(problems)
    out: dict[str, tuple[float | None, float | None]] = {k: (None, None) for k in ("precision", "recall", "unimportant_accepted", "roc_auc")}
    if len(ids) < MIN_BOOTSTRAP_PROBLEMS:
        return out
    rows = {p: np.flatnonzero(problems == p) for p in ids}
    rng = np.random.default_rng(seed)
    draws: dict[str, list[float]] = {k: [] for k in out}
    for _ in range(n_resamples):
        take = np.concatenate([rows[p] for p in rng.choice(ids, size=len(ids), replace=True)])
        for k, v in _point_metrics(y[take], scores[take], threshold).items():
            if v is not None:
                draws[k].append(v)
    for k, vals in draws.items():
        if len(vals) >= 100:
            out[k] = (float(np.percentile(vals, 2.5)), float(np.percentile(vals, 97.5)))
    return out


def classification_metrics(
    y: np.ndarray, scores: np.ndarray, threshold: float, problems: np.ndarray | None = None
) -> dict[str, Any]:
    """Precision / recall of "important" (score >= threshold), their Wilson intervals, the share
    of unimportant mismatches the judge lets through, and the ROC AUC where both classes occur.
    problems ([n], the problem of each row): adds `<figure>_problem_ci_low/high` (bootstrap over
    problems) and the problem count."""
    from sklearn.metrics import roc_auc_score

    pred = scores >= threshold
    tp = int((pred & (y == 1)).sum())
    fp = int((pred & (y == 0)).sum())
    fn = int((~pred & (y == 1)).sum())
    tn = int((~pred & (y == 0)).sum())
    p_lo, p_hi = wilson(tp, tp + fp)
    r_lo, r_hi = wilson(tp, tp + fn)
    a_lo, a_hi = wilson(tn, tn + fp)
    out: dict[str, Any] = {
        "n": int(len(y)), "important": int((y == 1).sum()),
        "precision": tp / (tp + fp) if tp + fp else None, "precision_ci_low": p_lo, "precision_ci_high": p_hi,
        "recall": tp / (tp + fn) if tp + fn else None, "recall_ci_low": r_lo, "recall_ci_high": r_hi,
        # What the judge buys: the unimportant mismatches it accepts (the speed), of all unimportant.
        "unimportant_accepted": tn / (tn + fp) if tn + fp else None,
        "unimportant_accepted_ci_low": a_lo, "unimportant_accepted_ci_high": a_hi,
        "roc_auc": float(roc_auc_score(y, scores)) if len(set(y.tolist())) == 2 else None,
        "tp": tp, "fp": fp, "fn": fn, "tn": tn,
    }
    if problems is not None:
        out["problems"] = int(len(np.unique(problems)))
        for k, (lo, hi) in problem_bootstrap(y, scores, threshold, problems).items():
            out[f"{k}_problem_ci_low"], out[f"{k}_problem_ci_high"] = lo, hi
    return out


def pick_threshold(y: np.ndarray, scores: np.ndarray, recall_target: float) -> tuple[float, list[float]]:
    """The largest candidate threshold (validation-score quantile) whose recall of "important"
    on (y, scores) is at least recall_target; the candidates are returned too."""
    candidates = sorted({float(np.quantile(scores, q)) for q in QUANTILES})
    best = candidates[0]  # the smallest: every mismatch counts as important (recall 1)
    for thr in candidates:
        pred = scores >= thr
        pos = int((y == 1).sum())
        recall = (pred & (y == 1)).sum() / pos if pos else 1.0
        if recall >= recall_target:
            best = thr
    return best, candidates


def grouped_cv(
    X: np.ndarray, y: np.ndarray, problem_of_row: np.ndarray, *, C: float, folds: int = 5, max_iter: int = 1000
) -> dict[str, Any] | None:
    """Out-of-fold ROC AUC with every problem held out once (GroupKFold over problems, the
    scaler and the regression refitted per fold at the chosen C), pooled over the folds, with a
    bootstrap-over-problems interval: with few problems, a steadier reading of how well the
    features separate important from unimportant mismatches than one small test part. None with
    fewer than `folds` problems or one class."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import roc_auc_score
    from sklearn.model_selection import GroupKFold
    from sklearn.preprocessing import StandardScaler

    n_problems = len(np.unique(problem_of_row))
    if n_problems < folds or len(set(y.tolist())) < 2:
        return None
    oof = np.zeros(len(y), dtype=float)
    for tr, te in GroupKFold(n_splits=folds).split(X, y, groups=problem_of_row):
        if len(set(y[tr].tolist())) < 2:
            return None
        scaler = StandardScaler().fit(X[tr])
        model = LogisticRegression(C=C, max_iter=max_iter).fit(scaler.transform(X[tr]), y[tr])
        oof[te] = model.predict_proba(scaler.transform(X[te]))[:, 1]
    lo, hi = problem_bootstrap(y, oof, 0.5, problem_of_row)["roc_auc"]
    return {"folds": folds, "n": int(len(y)), "important": int(y.sum()), "problems": n_problems,
            "roc_auc": float(roc_auc_score(y, oof)), "roc_auc_problem_ci_low": lo, "roc_auc_problem_ci_high": hi}


def fit_judge(
    X: np.ndarray,
    y: np.ndarray,
    problem_of_row: np.ndarray,
    *,
    seed: int = 52,
    val_fraction: float = 0.15,
    test_fraction: float = 0.15,
    recall_target: float = 0.9,
    threshold: float | None = None,
    max_iter: int = 1000,
) -> tuple[JudgeHead, dict[str, Any]]:
    """Fit the released classifier on X ([n, H] float32 features), y ([n] 1 = important).
    Returns the judge and a report (C search, splits, validation and test metrics)."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import roc_auc_score
    from sklearn.preprocessing import StandardScaler

    split = split_by_problem(problem_of_row, seed=seed, val_fraction=val_fraction, test_fraction=test_fraction)
    if len(split.train) == 0 or len(split.val) == 0:
        raise ValueError(f"too few mined problems to split ({len(np.unique(problem_of_row))}); mine more")
    if len(set(y[split.train].tolist())) < 2:
        raise ValueError("the training part holds only one class (all important or all unimportant); mine more problems")
    scaler = StandardScaler().fit(X[split.train])
    Xtr, Xva = scaler.transform(X[split.train]), scaler.transform(X[split.val])
    search = []
    best = None
    for C in C_GRID:
        model = LogisticRegression(C=C, max_iter=max_iter).fit(Xtr, y[split.train])
        val_scores = model.predict_proba(Xva)[:, 1]
        auc = float(roc_auc_score(y[split.val], val_scores)) if len(set(y[split.val].tolist())) == 2 else 0.0
        search.append({"C": C, "val_roc_auc": auc})
        if best is None or auc > best[0]:  # ties keep the smaller C (the grid ascends), as released
            best = (auc, C, model, val_scores)
    auc, C, model, val_scores = best
    if threshold is None:
        thr, candidates = pick_threshold(y[split.val], val_scores, recall_target)
        how = f"largest validation-quantile threshold with validation recall >= {recall_target}"
    else:
        thr, candidates, how = float(threshold), [], "set by hand"
    head = JudgeHead(
        mean=scaler.mean_.astype(float).tolist(), scale=scaler.scale_.astype(float).tolist(),
        weights=model.coef_[0].astype(float).tolist(), bias=float(model.intercept_[0]), threshold=float(thr),
    )
    report: dict[str, Any] = {
        "classifier": "sklearn StandardScaler + LogisticRegression (released src/train_head_gsm8k.py)",
        "C": C, "C_search": search, "threshold_rule": how, "recall_target": recall_target,
        "threshold_candidates": candidates, "seed": seed,
        "split": {"by": "problem", "train_rows": int(len(split.train)), "val_rows": int(len(split.val)),
                  "test_rows": int(len(split.test)),
                  "train_problems": int(len(np.unique(problem_of_row[split.train]))),
                  "val_problems": int(len(np.unique(problem_of_row[split.val]))),
                  "test_problems": int(len(np.unique(problem_of_row[split.test]))) if len(split.test) else 0},
        "train": classification_metrics(y[split.train], head.score_numpy(X[split.train]), thr),
        "val": classification_metrics(y[split.val], head.score_numpy(X[split.val]), thr, problem_of_row[split.val]),
    }
    if len(split.test):
        report["test"] = classification_metrics(y[split.test], head.score_numpy(X[split.test]), thr, problem_of_row[split.test])
    cv = grouped_cv(X, y, problem_of_row, C=C, max_iter=max_iter)
    if cv is not None:
        report["grouped_cv"] = cv
    return head, report
