"""What a busy machine costs a run under each OpenMP wait policy: `make run`'s command on one
problem, quiet and beside busy processes, with the threads spinning (ACTIVE: libgomp's and our
quiet-machine choice), sleeping (PASSIVE), or as the run decides (omp.default_wait_policy: PASSIVE
when the load average is above the core count).

A spinning compute thread that loses its core to another process stalls every barrier its partners
wait at, so on a shared machine a run can burn many times the CPU it needs. This measures that, side
by side in one invocation: each cell runs the same command in a child process of its own (a fresh
results folder, so nothing resumes), and wait4 gives its CPU seconds (user + system, the harness's
import and model load included) beside its wall time. "Busy" is --hogs pure-Python spin processes
started for the repeat's busy block once the 1-minute load average passes the core count (as on a
machine that has been busy a while: the run's own rule reads that average), and stopped after it;
the quiet block waits for the average to fall below the core count. Policies are interleaved
(their order rotated per repeat), so slow drift of the machine does not favour one.

  python -m loosespec_bench.bench.busy                                  # hogs = 2 x cores, 2 repeats
  python -m loosespec_bench.bench.busy --repeats 1 --json results/bench/busy.json -- pair=tiny

Nothing else may run meanwhile: the quiet cells are quiet only if the machine is. The load of
each cell (load average at its end, other processes' CPU share over it) is printed beside it.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import psutil

from ..safe_files import atomic_write_text, open_regular, read_text
from .child import watch
from .memory import MAKE_RUN

POLICIES = ("ACTIVE", "PASSIVE", "auto")  # auto: no OMP_WAIT_POLICY given, the run's own rule decides
SPIN = "while True:\n    pass"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m loosespec_bench.bench.busy", description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog="\n".join(__doc__.splitlines()[2:]))
    cores = os.cpu_count() or 1
    ap.add_argument("--hogs", type=int, default=2 * cores, help=f"spin processes that make the machine busy (default 2 x cores = {2 * cores})")
    ap.add_argument("--repeats", type=int, default=2, help="runs per cell (default 2)")
    ap.add_argument("--max-new-tokens", type=int, default=32, help="generation.max_new_tokens (default 32)")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds a run may take before it is stopped and recorded as cut (default 900)")
    ap.add_argument("--policies", default=",".join(POLICIES), help=f"comma list of {', '.join(POLICIES)}")
    ap.add_argument("--json", type=Path, default=None, help="also write every run's figures here")
    ap.add_argument("overrides", nargs="*", help="more overrides for the run (after --)")
    args = ap.parse_args(argv)
    args.policies = [p.strip() for p in args.policies.split(",") if p.strip()]
    if not args.policies or any(p not in POLICIES for p in args.policies):
        ap.error(f"--policies takes a comma list of {', '.join(POLICIES)}")
    if args.hogs < 1 or args.repeats < 1 or args.max_new_tokens < 1 or not args.timeout > 0:
        ap.error("--hogs, --repeats and --max-new-tokens must be >= 1 and --timeout > 0")
    return args


def others_share(before: Any, after: Any, own_s: float, wall_s: float) -> float:
    """Other processes' share of the machine's CPU over a run: busy CPU time minus the run's own,
    over cores x wall."""
    busy = sum(after) - after.idle - getattr(after, "iowait", 0.0) - (sum(before) - before.idle - getattr(before, "iowait", 0.0))
    return max(0.0, busy - own_s) / ((os.cpu_count() or 1) * wall_s) if wall_s > 0 else 0.0


@contextmanager
def machine(busy: bool, hogs: int) -> Iterator[None]:
    """Quiet: wait (up to 5 min) for the 1-minute load average to fall below the core count, so
    that a run's own rule sees a quiet machine. Busy: start the spinners and wait (up to 3 min)
    for the load average to pass the core count, as on a machine that has been busy for a while;
    they stop when the block ends."""
    cores = os.cpu_count() or 1
    spinners = [subprocess.Popen([sys.executable, "-c", SPIN], stdin=subprocess.DEVNULL) for _ in range(hogs if busy else 0)]
    try:
        deadline = time.monotonic() + (180 if busy else 300)
        while time.monotonic() < deadline and (os.getloadavg()[0] <= cores if busy else os.getloadavg()[0] >= cores):
            time.sleep(2.0)
        yield
    finally:
        for s in spinners:
            s.kill()
        for s in spinners:
            s.wait()


def one_run(cmd: list[str], policy: str, busy: bool, timeout: float, work: Path, tag: str) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    if policy != "auto":
        env["OMP_WAIT_POLICY"] = policy
    load0 = os.getloadavg()[0]
    cpu0 = psutil.cpu_times()
    start = time.monotonic()
    log = work / f"{tag}.log"
    with open_regular(log, "ab") as out:  # a file, not a pipe: a full pipe would stall the run
        proc = subprocess.Popen([*cmd, f"paths.results_dir={work / tag}"], env=env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=out)
    ended = watch(proc, 0.2, timeout=timeout)
    wall, cut = time.monotonic() - start, ended.cut
    err = read_text(log)
    own = ended.usage.ru_utime + ended.usage.ru_stime
    share = others_share(cpu0, psutil.cpu_times(), own, wall)
    said = [line for line in err.splitlines() if "this machine is busy" in line]
    policy_said = next((w.split("=", 1)[1].rstrip(",") for w in said[0].split() if w.startswith("OMP_WAIT_POLICY=")), None) if said else None
    return {"policy": policy, "machine": "busy" if busy else "quiet", "exit": proc.returncode, "cut": cut, "wall_s": round(wall, 1),
            "cpu_s": round(own, 1), "load_1min_at_start": round(load0, 1), "others_share": round(share, 3),
            "said_busy": bool(said), "policy_said": policy_said, "stderr_tail": err[-600:] if proc.returncode and not cut else ""}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="loosespec-busy-"))
    cmd = [sys.executable, "-m", "loosespec_bench", *MAKE_RUN, "dataset.limit=1", f"generation.max_new_tokens={args.max_new_tokens}", "progress=false",
           *args.overrides]
    cores = os.cpu_count() or 1
    print(f"a busy machine's cost: {' '.join(cmd[1:])}\n  {cores} cores; busy = {args.hogs} spin processes; policies "
          f"{', '.join(args.policies)}; {args.repeats} repeat(s), interleaved; load average now {os.getloadavg()[0]:.1f}", flush=True)
    runs: list[dict[str, Any]] = []
    try:
        for r in range(args.repeats):
            order = args.policies[r % len(args.policies):] + args.policies[: r % len(args.policies)]
            for busy in (False, True):
                with machine(busy, args.hogs):
                    for policy in order:
                        row = one_run(cmd, policy, busy, args.timeout, work, f"r{r}-{policy}-{int(busy)}")
                        row["repeat"] = r
                        runs.append(row)
                        print(f"  repeat {r}  {row['machine']:5}  {policy:7}  wall {row['wall_s']:7.1f} s  CPU {row['cpu_s']:7.1f} s  "
                              f"load {row['load_1min_at_start']:4.1f}  others {row['others_share']:.0%}"
                              + ("  CUT at the timeout" if row["cut"] else "") + (f"  EXIT {row['exit']}" if row["exit"] and not row["cut"] else "")
                              + (f"  (said busy, {row['policy_said']})" if row["said_busy"] else ""), flush=True)
                        if row["exit"] and not row["cut"]:
                            print(row["stderr_tail"], file=sys.stderr)
                            print("error: a run failed (its output's end above); fix that before measuring", file=sys.stderr)
                            return 2
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"\n{'machine':7} {'policy':8} {'wall s (median)':>16} {'CPU s (median)':>15} {'CPU / quiet ACTIVE CPU':>23}  runs")
    ref = [x["cpu_s"] for x in runs if x["machine"] == "quiet" and x["policy"] == "ACTIVE"]
    ref_cpu = statistics.median(ref) if ref else None
    for where in ("quiet", "busy"):
        for policy in args.policies:
            cell = [x for x in runs if x["machine"] == where and x["policy"] == policy]
            wall = statistics.median(x["wall_s"] for x in cell)
            cpu = statistics.median(x["cpu_s"] for x in cell)
            ratio = f"{cpu / ref_cpu:.2f}x" if ref_cpu else "-"
            cut = sum(x["cut"] for x in cell)
            print(f"{where:7} {policy:8} {wall:16.1f} {cpu:15.1f} {ratio:>23}  {len(cell)}" + (f" ({cut} cut at {args.timeout:g} s: lower bounds)" if cut else ""))
    print("CPU s: the run's own user + system seconds (wait4), its import and model load included; auto: no OMP_WAIT_POLICY given, "
          "the run's rule decides (said busy: the run's busy line and the policy it names)")
    if args.json is not None:
        atomic_write_text(args.json, json.dumps({"command": cmd[1:], "cores": cores, "hogs": args.hogs, "runs": runs}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
