#!/usr/bin/env python
"""What each replication point cost under baseline=shared, against what it would have cost paired.

    python scripts/replication_cost.py results/cpu/runs

For every finished run folder with a shared target-alone store (summary.json's baseline_store),
from the records' own timings (rec["timing"]: the generations' wall seconds, re-timing attempts
included):

- shared: the method's generations + the target alone timed beside it (the timing subset, and
  the samples the store lacked: those are how the store fills, so there is no other pass);
- paired: what baseline=paired would have run: the method + the target alone on every sample
  (the untimed samples' target-alone time read from the store's record of it);
- ratio = shared / paired, per point and over all points, with the spread over points.

A point whose timing subset was topped up later (a resume with a larger timing.subset,
docs/algorithms.md 7.5) ran its topped-up samples' method twice: the first, untimed, run's time
(kept in timing.topped_up_from) is counted as well, in its own column ("top-up s").

Generation time only: model loading and warm-up (the same under both protocols) are left out;
the driver's wall time per point is in results/cpu/README.md.

Lab script, kept in scripts/ (not installed with the package): it reads a results folder's records
to back results/cpu/README.md's cost figures (docs/algorithms.md cites it); an audit of one
replication, not a tool a run needs.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

from loosespec_bench.store.baselines import BaselineStore
from loosespec_bench.store.run_folder import RunFolder, read_jsonl


def _wall(side: dict | None) -> float:
    return float((side or {}).get("wall_s") or 0.0)


def _attempts(rec: dict, side: str) -> float:
    """Every attempt's wall time of one side (the contaminated ones re-timed too)."""
    t = rec.get("timing") or {}
    key = "method_wall_s" if side == "method" else "baseline_wall_s"
    return _wall(t.get(side)) + sum(float(h.get(key) or 0.0) for h in t.get("contaminated_attempts") or [])


def cost_points(results: Path) -> list[dict]:
    """One dict per finished baseline=shared run under `results`: its seconds by part (method,
    timed_base, topup), shared / paired totals and ratio."""
    stores = results / "_baselines"
    store_time: dict[str, dict[str, float]] = {}
    for folder in sorted(stores.glob("*")) if stores.is_dir() else []:
        store_time[folder.name] = {r["id"]: _wall(r.get("timing")) for _, r in read_jsonl(folder / BaselineStore.SAMPLES)}
    points = []
    for summary_file in sorted(results.rglob(RunFolder.SUMMARY)):
        if any(part.startswith("_") for part in summary_file.relative_to(results).parts):
            continue
        summary = json.loads(summary_file.read_text(encoding="utf-8"))
        src = summary.get("baseline_store")
        if not src:
            continue
        recs = RunFolder(summary_file.parent, create=False).records()
        base_s = store_time.get(src["store"], {})
        method = sum(_attempts(r, "method") for r in recs)
        timed_base = sum(_attempts(r, "baseline") for r in recs if (r.get("baseline_source") or {}).get("timed"))
        # Paired would time the target alone on every sample: the timed ones as measured here,
        # the others as the store measured them.
        paired = method + timed_base + sum(base_s.get(r["id"], 0.0) for r in recs if not (r.get("baseline_source") or {}).get("timed"))
        untimed_ids = [r["id"] for r in recs if not (r.get("baseline_source") or {}).get("timed")]
        # The untimed first run of each topped-up sample: spent, though no figure reads it now.
        topup = sum(_wall(((r.get("timing") or {}).get("topped_up_from") or {}).get("method")) for r in recs)
        points.append(dict(name=f"{summary_file.parent.parent.name}/{summary_file.parent.name}", store=src["store"], n=len(recs),
                           method=method, timed_base=timed_base, paired=paired, untimed=untimed_ids, topup=topup))
    for p in points:
        p["shared"] = p["method"] + p["timed_base"] + p["topup"]
        p["ratio"] = p["shared"] / p["paired"] if p["paired"] else float("nan")
    return points


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", type=Path)
    args = ap.parse_args(argv)
    points = cost_points(args.results)
    if not points:
        print(f"no baseline=shared runs under {args.results}", file=sys.stderr)
        return 1
    print(f"{'point':<78} {'n':>3} {'timed':>5} {'method s':>9} {'TA here s':>9} {'top-up s':>9} {'shared s':>9} {'paired s':>9} "
          f"{'ratio':>6}")
    for p in points:
        print(f"{p['name'][:78]:<78} {p['n']:>3} {p['n'] - len(p['untimed']):>5} {p['method']:>9.0f} {p['timed_base']:>9.0f} "
              f"{p['topup']:>9.0f} {p['shared']:>9.0f} {p['paired']:>9.0f} {p['ratio']:>6.2f}")
    tot_s, tot_p = sum(p["shared"] for p in points), sum(p["paired"] for p in points)
    ratios = [p["ratio"] for p in points]
    print(f"\nall {len(points)} points: {tot_s / 3600:.2f} h shared vs {tot_p / 3600:.2f} h paired = {tot_s / tot_p:.2f}x "
          f"(per point: median {statistics.median(ratios):.2f}, range {min(ratios):.2f}-{max(ratios):.2f})")
    print("generation time from the records (TA = target alone); loading and warm-up excluded")
    return 0


if __name__ == "__main__":
    sys.exit(main())
