"""A replication plan's launch (`python -m loosespec_bench.plan launch`): each sweep's `-m`
command started as a driver process, the points an earlier sweep runs or that are done left out
of its array, the budget printed first, and a stop (Ctrl-C, SIGTERM, SIGHUP) ended with one line
that says what keeps running. Driver logs, skip lists and Hydra's sweep dirs go to the launch's
log folder (results/_launch/<time>/), written through the safe-file gate.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Sequence

from hydra_plugins.loosespec_skip_sweeper.skip_sweeper import SKIP_ENV, SkipSweeper

from ..safe_files import atomic_write_text, open_regular, read_bytes
from ..store.status import point_status
from .jobs import Sweep, folder_status
from .power import format_hours


def budget_line(sweeps: Sequence[Sweep]) -> str:
    """What a launch will cost, printed before it starts: the points it runs, those already done,
    and the planner's hours left, a started point counted by the samples still missing (its model
    load counted whole)."""
    left = total = 0.0
    points = done = started = 0
    classes = point_classes(sweeps)
    for s in sweeps:
        per = max(s.gpus, 1)  # GPU-hours: each job's hours times its GPUs, as the plan prints them
        for j in (j for j in s.jobs if j.launched):
            points += 1
            total += j.hours * per
            st = folder_status(j, j.folder)
            if st.state == "done":
                done += 1
                continue
            frac = min(st.samples / j.samples, 1.0) if j.samples else 0.0
            started += frac > 0
            left += (j.load_h + (j.hours - j.load_h) * (1 - frac)) * per
    unit = "GPU-hours" if any(s.gpus for s in sweeps) else "CPU node-hours"
    running = sum(1 for c in classes.values() if c == "running")
    pending = sum(1 for c in classes.values() if c == "pending")
    attach = f", {running} running and {pending} pending in Slurm (attached to, not submitted again)" if running or pending else ""
    return (f"budget: {points} points, {done} done{attach}, {points - done - running - pending} to run ({started} of them resume from their "
            f"samples on disk); est. {format_hours(left)} {unit} left of {format_hours(total)} "
            "(the planner's rates; `plan` mode prints each point)")


def point_classes(sweeps: Sequence[Sweep]) -> dict[Path, str]:
    """Each launched point's class before a launch (slurm.classify_point): done, running or
    pending (the job recorded for its folder alive in squeue: the launcher attaches to it), or to
    run. One squeue call; without squeue every unfinished point is to run."""
    from ..slurm import classify_point, query_queue, recorded_jobs

    own = [j for s in sweeps for j in s.jobs if j.launched]
    done = {j.folder.resolve(): folder_status(j, j.folder).state == "done" for j in own}
    records = recorded_jobs({j.folder.parent.parent.resolve() for j in own}) if own else {}
    ids = sorted({records[f] for f, d in done.items() if not d and f in records})
    queue = query_queue(ids) if ids and shutil.which("squeue") else None
    return {f: classify_point(d, records.get(f), queue) for f, d in done.items()}


def launch(sweeps: Sequence[Sweep], *, sequential: bool, log_dir: Path) -> int:
    """Run every sweep's `-m` command. In parallel (submitit: each blocks until its array ends,
    so all arrays are queued at once), or one after the other. Returns the number that failed,
    -1 when stopped (Ctrl-C, SIGTERM, SIGHUP: one line says what keeps running; no traceback)."""
    import signal as _signal

    def stop(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    live: list[tuple[Sweep, subprocess.Popen[bytes], Path]] = []
    # SIGINT too, not only Python's default: a process started in the background by a
    # non-interactive shell (`cmd &`, as CI runs the slurm tests) inherits SIGINT ignored, and
    # Python then installs no KeyboardInterrupt for it. A handler set here is also reset to the
    # default in the drivers started below (exec), so that interrupt_launch's SIGINT stops them.
    old = {sig: _signal.signal(sig, stop) for sig in (_signal.SIGINT, _signal.SIGTERM, _signal.SIGHUP)}
    try:
        return _launch(sweeps, sequential=sequential, log_dir=log_dir, live=live)
    except KeyboardInterrupt:
        _signal.signal(_signal.SIGINT, _signal.SIG_IGN)  # a second Ctrl-C must not cut the line short
        print(interrupt_launch(sweeps, live), file=sys.stderr, flush=True)
        return -1
    finally:
        for sig, handler in old.items():
            _signal.signal(sig, handler)


def _launch(sweeps: Sequence[Sweep], *, sequential: bool, log_dir: Path,
            live: list[tuple[Sweep, "subprocess.Popen[bytes]", Path]]) -> int:
    log_dir.mkdir(parents=True, exist_ok=True)
    print(budget_line(sweeps), flush=True)
    failed = 0
    procs: list[tuple[Sweep, subprocess.Popen[bytes], Path]] = []
    for s in sweeps:
        log = log_dir / f"{s.experiment}.log"
        # Sweeps started in the same second would share Hydra's default ${now:...} sweep dir.
        command = [*s.command, f"hydra.sweep.dir={log_dir.resolve() / s.experiment}"]
        env = dict(os.environ)
        # Left out of the array: points an earlier sweep runs, and points already done (a relaunch
        # after a cancelled or failed point runs only what is missing).
        done = {j.run_id for j in s.jobs if j.launched and folder_status(j, j.folder).state == "done"}
        skip = sorted({j.run_id for j in s.jobs if not j.launched} | done)
        own = sum(j.launched and j.run_id not in done for j in s.jobs)
        if not own:
            why = "done or run in earlier sweeps" if done else "run in earlier sweeps"
            print(f"[{s.experiment}] all {len(s.jobs)} points {why}: not launched", flush=True)
            continue
        if skip:
            # The points an earlier sweep runs: left out of this sweep's array (loosespec_bench.sweeper).
            skip_file = log_dir.resolve() / f"{s.experiment}.skip"
            atomic_write_text(skip_file, "".join(f"{r}\n" for r in skip), root=log_dir)  # never through a link
            env[SKIP_ENV] = str(skip_file)
            command.append(f"hydra.sweeper._target_={SkipSweeper.__module__}.{SkipSweeper.__name__}")
        print(f"$ {shlex.join(['python', *command[1:]])}\n  -> {own} jobs"
              + (f" ({len(s.jobs) - own} left out, done or run by earlier sweeps: {skip_file})" if skip else "")
              + f", log {log}", flush=True)
        with open_regular(log, "ab") as fh:  # appended across relaunches; never through a link, never a FIFO
            # Its own session: a Ctrl-C in the terminal reaches this process only, which then
            # stops each driver once (SIGINT) and prints one line for all (interrupt_launch).
            proc = subprocess.Popen(command, stdout=fh, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        live.append((s, proc, log))
        if sequential:
            rc = proc.wait()
            failed += rc != 0
            print(f"  {'done' if rc == 0 else f'FAILED (exit {rc}; see the log and make status)'}", flush=True)
        else:
            procs.append((s, proc, log))
    if procs:
        print(f"{len(procs)} sweeps launched; waiting for them (the jobs keep running if this process is stopped; "
              "`make status` shows where they stand)", flush=True)
    for s, proc, log in procs:
        rc = proc.wait()
        failed += rc != 0
        print(f"[{s.experiment}] {'done' if rc == 0 else f'exit {rc}: some points failed or ended without a result (error.txt in their folders; the log says which: {log})'}", flush=True)
    return failed


def interrupt_launch(sweeps: Sequence[Sweep], live: Sequence[tuple[Sweep, "subprocess.Popen[bytes]", Path]]) -> str:
    """A launch stopped (Ctrl-C, SIGTERM, SIGHUP): each driver still running is stopped with
    SIGINT (it exits at once, leaving its jobs to Slurm), then one line: the points finished, the
    arrays that keep running with the scancel that stops them, and what a relaunch does."""
    import re
    import signal as _signal

    from ..slurm import ALIVE, interrupt_line, query_queue, recorded_jobs

    for _, proc, _ in live:
        if proc.poll() is None:
            try:
                proc.send_signal(_signal.SIGINT)
            except OSError:
                pass
    for _, proc, _ in live:
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
    own = [j for s in sweeps for j in s.jobs if j.launched]
    finished = sum(1 for j in own if point_status(j.folder).state == "done")
    records = recorded_jobs({j.folder.parent.parent.resolve() for j in own})
    ids: dict[str, str] = {}
    for j in own:
        job = records.get(j.folder.resolve())
        if job:
            ids[job] = j.sweep
    for s, _, log in live:  # arrays the drivers named, in case a record was not written
        try:
            for m in re.finditer(r"job array (\d+):", read_bytes(log).decode(errors="replace")):
                ids.setdefault(m.group(1), s.experiment)
        except (OSError, ValueError):  # gone, or not a plain file (ConfigError): its records still count
            pass
    queue = query_queue(sorted(ids)) if ids and shutil.which("squeue") else {}
    arrays: dict[str, str] = {}
    alive = 0
    for job, sweep in ids.items():
        base = job.split("_")[0]
        entries = [] if queue is None else [e for k, e in queue.items() if k == job or ("_" not in job and k.split("_")[0] == base)]
        if queue is None or any(e.state in ALIVE for e in entries):
            alive += 1 if queue is None else sum(e.state in ALIVE for e in entries)
            arrays[base] = sweep
    return interrupt_line(arrays, finished, len(own), alive)
