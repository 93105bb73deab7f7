"""Contention-aware timing: what the machine was doing while a generation was timed.

A speedup is a ratio of two timings taken one after the other. On a shared machine another
process can take CPU from one side and not the other (issue 21: 4.16x printed for a ~0.9x
configuration, the target alone timed while a job ran beside it). So every timed generation
records, besides its wall time (time.perf_counter):

- cpu_s: the process's CPU time over the generation (time.process_time: every thread of the
  process, as resource.getrusage(RUSAGE_SELF) counts it); for an engine whose models run in
  child processes (vLLM's engine core and workers: Engine.out_of_process), the CPU time of the
  whole process tree (process_tree_cpu), else the run's own work would read as other processes';
- cpu_share = cpu_s / wall_s: how many cores the run itself kept busy (about the thread count
  on a quiet machine; less when other processes take cores);
- others_share: the share of the machine's CPU time that other processes used meanwhile,
  (busy CPU seconds of all CPUs, psutil.cpu_times() - own cpu_s) / (wall_s x CPU count), in
  [0, 1]; None where the counters cannot be read (then loadavg stands in);
- loadavg: os.getloadavg()'s 1-minute figure at the end (slow-moving: recorded, compared only
  without the CPU counters).

A paired sample's two sides ran under the same conditions when their others_share differ by at
most `tolerance` (an absolute share of the machine; plus the counter's grain, 2 ticks over
wall x CPUs per side, for very short generations) and their cpu_share by at most `tolerance`
relative to the larger. Otherwise the sample is re-timed (both sides again, at most
`max_retimes` times); still contaminated, it is excluded from the speed figures (its outputs
and scores still count for quality) and counted. The rule lives here; the app calls it around
every engine.generate, so every engine is timed the same way.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar

# The machine's CPU counters and the process tree, on every OS psutil supports (issue 72: it
# replaces a /proc/stat and /proc/<pid>/stat parser that only Linux had).
import psutil

from ..params import Params, integer, knob, optional, real

TICK_S = 0.01  # /proc/stat counts in clock ticks (USER_HZ = 100 on Linux): a short side's share is coarse
CLEAN, RETIMED, EXCLUDED = "clean", "retimed", "excluded"
# baseline=shared: a sample outside the timing subset whose target alone came from the store
# (baselines.py): the method's time is its own, but nothing was timed beside it.
UNTIMED = "untimed"
RETIME_MODES = (True, False, "auto")


def _retime_mode(v: Any) -> str | None:
    return None if any(v is m for m in RETIME_MODES[:2]) or v == "auto" else "must be true, false or auto"


@dataclass(frozen=True)
class TimingParams(Params):
    """The `timing` node (config.yaml's timing: restates these defaults; a test pins the two
    equal): declared once here, beside the rule that reads them. A stored config from before a
    key existed reads its default (TimingParams.read)."""

    group: ClassVar[str] = "timing"
    retime: Any = knob("auto", _retime_mode, "auto = on where the models run on the CPU")
    tolerance: float = knob(0.25, real(0, lo_open=True), "how far two sides' machine conditions may differ")
    max_retimes: int = knob(2, integer(0, 100), "re-timings of a contaminated paired sample")
    # 0: none timed, speed from the work counts only
    subset: Any = knob(None, optional(integer(0)), "baseline=shared: samples timed paired; null = all")
    side_limit: Any = knob(None, optional(real(0, 1, lo_open=True)), "the most other processes may use during either side")

    @classmethod
    def of(cls, cfg: Any) -> "TimingParams":
        """A config's timing settings (composed or stored: defaults for the keys it lacks)."""
        node = cfg.get("timing") if cfg is not None else None
        return cls.read(_plain(node))

    def retime_on(self, device: Any) -> bool:
        """timing.retime: true/false, or auto: on where the models run on the CPU (`device`),
        whose time this process's CPU share and the machine's load describe; on a GPU they do
        not (the measurements are still recorded)."""
        if isinstance(self.retime, bool):
            return self.retime
        return str(device or "cpu").startswith("cpu")


def _plain(node: Any) -> dict[str, Any]:
    if node is None:
        return {}
    if hasattr(node, "_metadata"):  # an omegaconf node
        from omegaconf import OmegaConf

        return OmegaConf.to_container(node, resolve=True)  # type: ignore[return-value]
    return dict(node)


DEFAULT_TOLERANCE = TimingParams.tolerance  # the declared default (the rule's functions' default argument)


def timing_settings(cfg: Any) -> tuple[float, int]:
    """(tolerance, max_retimes) of a config's `timing` node (TimingParams: defaults for configs from before it)."""
    t = TimingParams.of(cfg)
    return float(t.tolerance), int(t.max_retimes)


def side_limit(cfg: Any) -> float | None:
    """timing.side_limit: the most other processes may use of the machine during EITHER side
    of a paired sample, judged on each side's own share (null = off: only the difference
    between the sides is judged). Issue 46: a method timed beside 25% of other work and a
    baseline beside 2% differ by less than tolerance 0.25 and passed, reading 0.78x."""
    v = TimingParams.of(cfg).side_limit
    return None if v is None else float(v)


def retime_enabled(cfg: Any) -> bool:
    """timing.retime (TimingParams.retime_on) for a config's pair.device."""
    return TimingParams.of(cfg).retime_on((cfg.get("pair") or {}).get("device", "cpu"))


# psutil.cpu_times() fields that are not work: idle and iowait (waiting), and guest / guest_nice,
# which Linux counts inside user / nice already (adding them would count a VM's time twice).
_NOT_BUSY = ("idle", "iowait", "guest", "guest_nice")


def read_proc_stat() -> float | None:
    """Busy CPU seconds of the whole machine since boot (all CPUs; idle and iowait excluded):
    psutil.cpu_times(), which reads /proc/stat's first line on Linux and the kernel's counters
    on macOS, BSD and Windows; None where psutil cannot read them."""
    try:
        times = psutil.cpu_times()
    except (OSError, RuntimeError, NotImplementedError):
        return None
    return sum(v for k, v in times._asdict().items() if k not in _NOT_BUSY)


def process_tree_cpu() -> float:
    """CPU seconds of this process, its reaped children and its live descendants (the engine
    processes vLLM starts): psutil's process tree; a descendant that exits between the listing
    and the reading counts once reaped (RUSAGE_CHILDREN) or not at all."""
    import resource

    own = time.process_time()
    reaped = resource.getrusage(resource.RUSAGE_CHILDREN)
    total = own + reaped.ru_utime + reaped.ru_stime
    try:
        children = psutil.Process().children(recursive=True)
    except (psutil.Error, OSError):
        return total
    for child in children:
        try:
            t = child.cpu_times()
        except (psutil.Error, OSError):  # exited meanwhile
            continue
        total += t.user + t.system
    return total


def _loadavg() -> float | None:
    try:
        return os.getloadavg()[0]
    except OSError:
        return None


@dataclass
class Clocks:
    """The clocks a timed generation reads; tests inject fakes."""

    wall: Callable[[], float] = time.perf_counter
    cpu: Callable[[], float] = time.process_time
    machine_busy: Callable[[], float | None] = read_proc_stat
    loadavg: Callable[[], float | None] = _loadavg
    cpu_count: int = field(default_factory=lambda: os.cpu_count() or 1)


class Probe:
    """One side's timed generations (all turns of a sample): start() / stop() around each."""

    def __init__(self, clocks: Clocks) -> None:
        self.clocks = clocks
        self.wall_s = 0.0
        self.cpu_s = 0.0
        self.busy_s: float | None = 0.0
        self.loadavg: float | None = None
        self._start: tuple[float, float, float | None] | None = None

    def start(self) -> None:
        self._start = (self.clocks.wall(), self.clocks.cpu(), self.clocks.machine_busy())

    def stop(self) -> None:
        assert self._start is not None, "Probe.stop() without start()"
        w0, c0, b0 = self._start
        b1 = self.clocks.machine_busy()
        self.wall_s += self.clocks.wall() - w0
        self.cpu_s += self.clocks.cpu() - c0
        self.busy_s = None if b0 is None or b1 is None or self.busy_s is None else self.busy_s + (b1 - b0)
        self.loadavg = self.clocks.loadavg()
        self._start = None

    def record(self) -> dict[str, Any]:
        """The side's timing fields (rec["timing"]["method"|"baseline"])."""
        wall = self.wall_s
        others = None
        if self.busy_s is not None and wall > 0:
            others = min(1.0, max(0.0, (self.busy_s - self.cpu_s) / (wall * self.clocks.cpu_count)))
        return {
            "wall_s": wall,
            "cpu_s": self.cpu_s,
            "cpu_share": self.cpu_s / wall if wall > 0 else None,
            "others_share": others,
            "loadavg": self.loadavg,
            "cpu_count": self.clocks.cpu_count,
        }


def differ(
    a: dict[str, Any], b: dict[str, Any], tolerance: float = DEFAULT_TOLERANCE, limit: float | None = None
) -> list[str]:
    """Why two sides' timing conditions differ beyond `tolerance` ([] when they match), and,
    with a side `limit`, which side ran beside more than `limit` of other work (each side
    judged on its own share, plus the counter's grain; a = the method, b = the target alone)."""
    reasons = []
    if limit is not None:
        for name, x in (("method", a), ("target alone", b)):
            share = x.get("others_share")
            grain = 2 * TICK_S / max(x.get("wall_s") or 0.0, 1e-9) / (x.get("cpu_count") or 1)
            if share is not None and share > limit + grain:
                reasons.append(f"other processes used {share:.2f} of the CPU during the {name} side (limit {limit:.2f})")
    oa, ob = a.get("others_share"), b.get("others_share")
    if oa is not None and ob is not None:
        # Each side's share is read to within 2 ticks over wall x CPUs: added to the tolerance,
        # so that a 50 ms generation is not called contaminated by the counter's grain.
        grain = sum(2 * TICK_S / max(x.get("wall_s") or 0.0, 1e-9) / (x.get("cpu_count") or 1) for x in (a, b))
        if abs(oa - ob) > tolerance + grain:
            reasons.append(f"other processes' CPU share {oa:.2f} vs {ob:.2f}")
    else:  # no /proc/stat: the 1-minute load per core stands in
        la, lb = a.get("loadavg"), b.get("loadavg")
        n = a.get("cpu_count") or 1
        if la is not None and lb is not None and abs(la - lb) / n > tolerance:
            reasons.append(f"load average {la:.2f} vs {lb:.2f} on {n} CPUs")
    sa, sb = a.get("cpu_share"), b.get("cpu_share")
    if sa and sb and abs(sa - sb) / max(sa, sb) > tolerance:
        reasons.append(f"own CPU share {sa:.2f} vs {sb:.2f} cores")
    return reasons


def status(rec: dict[str, Any]) -> str | None:
    """A record's timing verdict (clean / retimed / excluded); None: not recorded (old runs)."""
    t = rec.get("timing")
    return t.get("status") if isinstance(t, dict) else None


def counts_for_speed(rec: dict[str, Any]) -> bool:
    """Whether a paired record's timings enter the speed figures (all but excluded ones and
    those whose target alone was read from a shared store, untimed)."""
    return status(rec) not in (EXCLUDED, UNTIMED)


def timing_summary(records: list[dict[str, Any]], tolerance: float | None = None) -> dict[str, Any]:
    """summary["timing"]: counts of clean / re-timed / excluded paired samples, records without
    timing data, whether the speed figures rest on contaminated timing, and the machine's
    conditions (median other processes' share) for the speed figures' load line."""
    paired = [r for r in records if r.get("baseline")]
    verdicts = [status(r) for r in paired]
    out: dict[str, Any] = {
        "clean": verdicts.count(CLEAN),
        "retimed": verdicts.count(RETIMED),
        "excluded": verdicts.count(EXCLUDED),
        "untimed": verdicts.count(UNTIMED),
        "not_recorded": verdicts.count(None),
        # Timed by a later resume with a larger timing.subset (resume.timing_topup): paired all the
        # same, but on another occasion than the run's first samples.
        "topped_up": sum(1 for r in paired if "topped_up_from" in (r.get("timing") or {})),
        # ... whose method tokens came out differently the second time (bf16 nondeterminism):
        # the records hold the new tokens, so quality figures moved with them.
        "topped_up_changed": sum(1 for r in paired
                                 if ((r.get("timing") or {}).get("topped_up_from") or {}).get("method_output_matches") is False),
        "tolerance": tolerance,
    }
    shares = [
        side["others_share"]
        for r in paired if status(r) in (CLEAN, RETIMED)
        for side in (r["timing"].get("method", {}), r["timing"].get("baseline", {}))
        if side.get("others_share") is not None
    ]
    shares.sort()
    out["others_share_median"] = shares[len(shares) // 2] if shares else None
    out["others_share_max"] = shares[-1] if shares else None
    # Contaminated: samples had to be dropped (the figure rests on fewer, and possibly not the
    # typical, samples), or every timed sample ran beside other work (both sides slowed: the
    # ratio may hold, but the figure is not a quiet-machine one).
    busy = out["others_share_median"] is not None and tolerance is not None and out["others_share_median"] > tolerance
    out["busy"] = busy
    out["contaminated"] = bool(out["excluded"] or busy)
    return out


def timing_line(t: dict[str, Any] | None) -> str:
    """`timing: 18 clean, 2 re-timed, 0 excluded` (+ what the timing rests on)."""
    if not t:
        return "timing: no paired samples"
    total = t["clean"] + t["retimed"] + t["excluded"]
    if total == 0 and t.get("not_recorded"):
        return f"timing: not recorded ({t['not_recorded']} paired samples from before contention-aware timing)"
    line = f"timing: {t['clean']} clean, {t['retimed']} re-timed, {t['excluded']} excluded"
    if t.get("untimed"):
        line += f", {t['untimed']} untimed (target alone from the shared store)"
    if t.get("topped_up"):
        line += f" ({t['topped_up']} of the timed ones by a later top-up of timing.subset"
        if t.get("topped_up_changed"):
            line += f"; {t['topped_up_changed']} of those answered with other tokens the second time"
        line += ")"
    if t.get("others_share_median") is not None:
        line += f"; other processes used {t['others_share_median']:.0%} of the CPU (median)"
    return line


def contamination_warning(t: dict[str, Any] | None) -> str | None:
    """The run's last line when its speed rests on contaminated timing; None otherwise."""
    if not t or not t.get("contaminated"):
        return None
    why = []
    if t.get("excluded"):
        why.append(f"{t['excluded']} sample(s) stayed contaminated after re-timing and are left out of the speedup")
    if t.get("busy"):
        why.append(f"other processes used {t['others_share_median']:.0%} of the CPU during timing")
    return "WARNING: speed measured under contention: " + "; ".join(why) + " (rerun on a quiet machine to cite it)"
