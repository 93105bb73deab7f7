"""Fit AutoJudge's classifier on a mined set and save it beside the pair's trained artefacts.

    python -m loosespec_bench.train.autojudge --mined ~/.cache/loosespec_bench/autojudge/<pair>/mined \
        [--out ~/.cache/loosespec_bench/autojudge/<pair>] [--recall-target 0.9] [--threshold T]

Writes <out>/judge.json (weights, threshold, provenance: the mined set's settings and sha256,
the C search and held-out precision/recall of "important") and <out>/training_report.json.
Needs scikit-learn (pip install 'loosespec_bench[autojudge]'); the verifier does not.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from loosespec_bench.digest import file_sha256 as sha256


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m loosespec_bench.train.autojudge", description=__doc__.splitlines()[0])
    ap.add_argument("--mined", required=True, help="folder written by python -m loosespec_bench.train.mine_autojudge")
    ap.add_argument("--out", default=None, help="judge folder (default: the mined folder's parent)")
    ap.add_argument("--recall-target", type=float, default=0.9, help="validation recall of important mismatches the threshold keeps")
    ap.add_argument("--threshold", type=float, default=None, help="a threshold by hand instead of the recall rule")
    ap.add_argument("--seed", type=int, default=52, help="problem shuffle of the split (the released trainer's 52)")
    ap.add_argument("--val-fraction", type=float, default=0.15)
    ap.add_argument("--test-fraction", type=float, default=0.15)
    args = ap.parse_args(argv)
    mined = Path(args.mined).expanduser()
    if not (mined / "mined.jsonl").is_file() or not (mined / "meta.json").is_file():
        print(f"error: --mined {mined} holds no mined set (mined.jsonl, meta.json); run python -m loosespec_bench.train.mine_autojudge first", file=sys.stderr)
        return 2
    if not 0 < args.recall_target <= 1:
        print("error: --recall-target must be in (0, 1]", file=sys.stderr)
        return 2
    try:
        import sklearn  # noqa: F401
    except ImportError:
        print("error: training needs scikit-learn: pip install 'loosespec_bench[autojudge]'", file=sys.stderr)
        return 2
    from loosespec_bench.judges.mining import load_mined
    from loosespec_bench.judges.training import fit_judge

    records, X, meta = load_mined(mined)
    y = np.array([int(m["important"]) for r in records for m in r["mismatches"]], dtype=np.int64)
    problem = np.array([r["id"] for r in records for _ in r["mismatches"]])
    try:
        head, report = fit_judge(X, y, problem, seed=args.seed, val_fraction=args.val_fraction,
                                 test_fraction=args.test_fraction, recall_target=args.recall_target, threshold=args.threshold)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    mined_s = sum(r.get("seconds", 0.0) for r in records)
    head.provenance = {
        "trained": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "mined_set": {**meta, "folder": str(mined), "problems": len(records),
                      "skipped_problems": sum("skipped" in r for r in records),
                      "mismatches": int(len(y)), "important": int(y.sum()), "mining_seconds": round(mined_s, 1),
                      "files_sha256": {f: sha256(mined / f) for f in ("mined.jsonl", "features.f32", "meta.json")}},
        **{k: report[k] for k in ("classifier", "C", "threshold_rule", "recall_target", "seed", "split")},
        "heldout": {k: report[k] for k in ("val", "test", "grouped_cv") if k in report},
    }
    out = Path(args.out).expanduser() if args.out else mined.parent
    path = head.save(out)
    (out / "training_report.json").write_text(json.dumps(report, indent=1))
    t = report.get("test", report["val"])

    def fig(name: str) -> str:
        v, lo, hi = t.get(name), t.get(f"{name}_problem_ci_low"), t.get(f"{name}_problem_ci_high")
        return "n/a" if v is None else f"{v:.3f}" + (f" [{lo:.3f}, {hi:.3f}]" if lo is not None else "")

    print(f"judge -> {path}: C={report['C']:.3g}, threshold {head.threshold:.4f}; "
          f"held-out {'test' if 'test' in report else 'validation'} ({t['n']} mismatches, {t['important']} important, "
          f"{t.get('problems', '?')} problems): precision {fig('precision')}, recall {fig('recall')}, "
          f"unimportant accepted {fig('unimportant_accepted')}, ROC AUC {fig('roc_auc')} "
          "([95% bootstrap over problems]; Wilson intervals in training_report.json)")
    cv = report.get("grouped_cv")
    if cv:
        lo, hi = cv["roc_auc_problem_ci_low"], cv["roc_auc_problem_ci_high"]
        print(f"grouped {cv['folds']}-fold cross-validation over problems ({cv['n']} mismatches, {cv['problems']} problems): "
              f"out-of-fold ROC AUC {cv['roc_auc']:.3f}" + (f" [{lo:.3f}, {hi:.3f}]" if lo is not None else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
