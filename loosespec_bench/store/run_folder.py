"""One run folder, one writer: every read and write of results/<experiment>/<run id>/.

Files: config.yaml, samples.jsonl (append + flush + fsync per sample), summary.json,
error.txt (a failed attempt's traceback), *.bak-<time> (what a rewrite replaced) and .lock.

Writers: a run (app.run) holds the folder's lock for its whole duration, the re-scorer
(score.py) while it rewrites. The lock is flock on .lock (filelock's lock_descriptor, on a
descriptor opened through the safe-file gate), taken without waiting: a second writer fails at
once with one `error:` line naming the holder (its pid, host, purpose and Slurm job are written
into .lock). Only a requeued Slurm job waits: its previous attempt (same SLURM_JOB_ID) may still
be writing on the node it was taken from (RunFolder.lock). flock locks belong to the open file, so the OS drops the
lock of a killed process (kill -9, an out-of-memory kill) and a rerun resumes. On NFS, Linux
maps flock to the server's byte-range locks: they hold across hosts, and a lost node's lock
goes when its lease expires (about a minute and a half by default).

Whole-file writes go to a uniquely named temp file in the same folder, then os.replace: two
processes never share a temp name and a reader never sees half a file.

Readers (resume, re-score, the index) accept every line a run writes and skip a line they
cannot read (a last line cut off by a kill, a damaged line) with a warning naming the file
and the line number.

What a folder holds is checked by one reader, RunFolder.damage(): config.yaml is YAML whose
sections are mappings, summary.json is a JSON object whose fields hold what a run writes
(schema.summary_problems), every finished line of samples.jsonl is a complete record
(`incomplete`). The report refuses a damaged folder naming it and the field (or, with
--skip-damaged, lists it as skipped), the comparison refuses it; resume regenerates and the
re-scorer skips a damaged record, each naming file:line.
"""

from __future__ import annotations

import datetime
import errno
import json
import logging
import os
import socket
import sys
from pathlib import Path
from typing import Any, Callable, Iterator

from ..errors import ConfigError

# A write that fails because of the disk, not the program: out of space or quota, read-only.
DISK_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS})
from ..safe_files import atomic_write_text, check_regular, open_fd, open_regular, read_text

log = logging.getLogger(__name__)


class FolderLocked(ConfigError):
    """Another process (a run or a re-score) is writing this run folder."""


def run_dir(cfg: Any) -> Path:
    """The folder app.run writes for this config: results_dir/experiment_name/run id, always
    under results_dir: every part is a checked name (config.safe_name), and a path that would
    still leave the folder is a ConfigError."""
    from ..settings.run_settings import PathsParams, run_path, section

    results = section(cfg, PathsParams).results_dir  # declared ranges: a non-empty string
    if not results.strip():
        raise ConfigError(f"paths.results_dir={results!r} must be a folder path (set it or LOOSESPEC_RESULTS_DIR)")
    path = run_path(cfg)  # experiment_name and the run id are checked names (safe_path_name, safe_name)
    if not path.resolve().is_relative_to(Path(results).expanduser().resolve()):
        raise ConfigError(f"the run folder {path} is not under paths.results_dir={results!r}")
    return path


def utc_stamp() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")


def atomic_write(path: Path, text: str, *, root: Path | None = None) -> None:
    """Write `text` to `path` via a unique temp file in the same folder, fsync, os.replace; never
    through a link, never over a special file, inside `root` when given (safe_files)."""
    atomic_write_text(path, text, root=root)


# A record's fields by kind (issue 74): what a run writes, checked before any reader uses it.
# Counts are whole numbers in [0, 2**31) (a 5,000-digit integer is no count); times and rates
# finite numbers or null; token ids whole numbers in [0, 2**31).
MAX_COUNT = 1 << 31
RECORD_TEXTS = ("run_id", "prompt_sha256", "prompt_text", "computed_by")
RECORD_MAPPINGS = ("meta", "timing", "baseline_source")
RECORD_LISTS = ("steps",)
METRIC_COUNTS = ("new_tokens", "steps", "prompt_tokens")
METRIC_NUMBERS = ("tau", "prefill_s", "decode_s", "total_s", "tokens_per_s", "ttft_s", "tpot_s", "e2e_s")
METRIC_COUNT_LISTS = ("accepted", "drafted")
METRIC_MAPPINGS = ("phase_s", "serving", "work", "work_per_token")


def _is_count(value: Any) -> bool:
    return not isinstance(value, bool) and isinstance(value, int) and 0 <= value < MAX_COUNT


def _is_finite(value: Any) -> bool:
    import math

    return not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value)


def _shown(value: Any) -> str:
    text = json.dumps(value, default=str) if not isinstance(value, int) else str(value)[:20]
    return text[:40]


def _side_problem(side: str, part: dict[str, Any]) -> str | None:
    metrics = part.get("metrics")
    if isinstance(metrics, dict):
        for key in METRIC_COUNTS:
            if metrics.get(key) is not None and not _is_count(metrics[key]):
                return f"{side}metrics.{key}={_shown(metrics[key])} is not a count"
        for key in METRIC_NUMBERS:
            if metrics.get(key) is not None and not _is_finite(metrics[key]):
                return f"{side}metrics.{key}={_shown(metrics[key])} is not a finite number"
        for key in METRIC_COUNT_LISTS:
            value = metrics.get(key)
            if value is not None and not (isinstance(value, list) and all(_is_count(v) for v in value)):
                return f"{side}metrics.{key} is not a list of counts"
        for key in METRIC_MAPPINGS:
            if metrics.get(key) is not None and not isinstance(metrics[key], dict):
                return f"{side}metrics.{key}={_shown(metrics[key])} is not an object"
    ids = part.get("output_ids")
    if ids is not None and not (isinstance(ids, list) and all(_is_count(v) for v in ids)):
        return f"{side}output_ids is not a list of token ids"
    return None


def record_problem(rec: dict[str, Any], *, need_ids: bool = False) -> str | None:
    """Why a sample record cannot be used (`incomplete`), or None; need_ids (resume: a kept
    record's tokens are compared and re-scored, its counts summed) also asks for each side's
    output_ids and metrics.new_tokens."""
    why = incomplete(rec)
    if why or not need_ids:
        return why
    for side, part in (("", rec), ("baseline.", rec.get("baseline")), ("baseline_timed.", rec.get("baseline_timed"))):
        if isinstance(part, dict) and not isinstance(part.get("output_ids"), list):
            return f"{side}output_ids is missing"
        if isinstance(part, dict) and "new_tokens" not in (part.get("metrics") or {}):
            return f"{side}metrics has no new_tokens" if part.get("metrics") else f"{side}metrics is empty"
    return None


def incomplete(rec: dict[str, Any]) -> str | None:
    """Why a sample record (a line a run appended) cannot be used, or None: every reader (resume,
    re-score, the index) needs a text id, the output text and the metrics of each side, and every
    field it holds of its kind (RECORD_*, METRIC_*: a number where a number belongs, counts
    bounded)."""
    rid = rec.get("id")
    if not isinstance(rid, str) or not rid:
        return f"its id is {json.dumps(rid)[:40]}, not a text"
    for key in RECORD_TEXTS:
        if rec.get(key) is not None and not isinstance(rec[key], str):
            return f"{key}={_shown(rec[key])} is not a text"
    for key in RECORD_MAPPINGS:
        if rec.get(key) is not None and not isinstance(rec[key], dict):
            return f"{key}={_shown(rec[key])} is not an object"
    for key in RECORD_LISTS:
        if rec.get(key) is not None and not isinstance(rec[key], list):
            return f"{key}={_shown(rec[key])} is not a list"
    ids = rec.get("prompt_ids")
    if ids is not None and not (isinstance(ids, list) and all(_is_count(v) for v in ids)):
        return "prompt_ids is not a list of token ids"
    for side, part in (("", rec), ("baseline.", rec.get("baseline")), ("baseline_timed.", rec.get("baseline_timed"))):
        if side and part is None:
            continue
        if not isinstance(part, dict):
            return f"{side.rstrip('.')} is not an object"
        if not isinstance(part.get("output_text"), str):
            return f"{side}output_text is missing or not a text"
        if not isinstance(part.get("metrics"), dict):
            return f"{side}metrics is missing or not an object"
        if "score" in part and not isinstance(part["score"], dict):
            return f"{side}score is not an object"
        if "turns" in part and not (isinstance(part["turns"], list) and all(
                isinstance(t, dict) and isinstance(t.get("output_text"), str) for t in part["turns"])):
            return f"{side}turns is not a list of turns with their output_text"
        if why := _side_problem(side, part):
            return why
    return None


def read_jsonl(path: Path, *, run_file: bool = True, damaged: list[str] | None = None) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) for every readable line of a JSONL file; a line that is not JSON,
    not an object or (run_file) not a complete sample record (`incomplete`: an id that is not
    a text, no output_text, metrics null...) is skipped with a warning naming the file and line.

    run_file: the file a run appends to, where a last line without its newline is a write cut
    off by a kill (the next append truncates it, so it is never used); other JSONL files (a
    user's completions) may just lack the final newline.

    damaged: if given, gets 'line N: why' for every skipped line but a cut-off last line (which
    a kill leaves in a healthy folder).
    """
    # Never through a link, never a FIFO or a device (safe_files): a folder from someone else.
    try:
        f = open_regular(path, "rb")
    except FileNotFoundError:
        return
    with f:
        for lineno, raw in enumerate(f, 1):
            if not raw.strip():
                continue
            if run_file and not raw.endswith(b"\n"):
                log.warning("%s line %d: cut off (the writer was killed mid-line?); skipped", path, lineno)
                continue
            try:
                obj = json.loads(raw.decode("utf-8"))
            except (ValueError, RecursionError) as err:  # not UTF-8, not JSON, an integer over 4300 digits
                log.warning("%s line %d: unreadable (%s); skipped", path, lineno, str(err)[:80])
                if damaged is not None:
                    damaged.append(f"line {lineno} is not JSON ({str(err)[:60]})")
                continue
            if not isinstance(obj, dict) or (run_file and "id" not in obj):
                what = "sample record (no id)" if run_file else "JSON object"
                log.warning("%s line %d: not a %s; skipped", path, lineno, what)
                if damaged is not None:
                    damaged.append(f"line {lineno} is not a {what}")
                continue
            why = incomplete(obj) if run_file else None
            if why:
                # Treated like an unreadable line: resume regenerates the sample, re-score skips it.
                log.warning("%s line %d: an incomplete sample record (%s); skipped", path, lineno, why)
                if damaged is not None:
                    damaged.append(f"line {lineno}: {why}")
                continue
            yield lineno, obj


# config.yaml: the sections a reader takes apart (a mapping each, when present) and the names
# that label a run (a text each: the report's rows, the folder names).
CONFIG_SECTIONS = ("method", "drafter", "pair", "dataset", "generation", "paths", "engine", "logger", "timing")
CONFIG_NAMES = ("experiment_name", "method.name", "drafter.name", "pair.name", "dataset.name")


def config_problems(config: Any) -> list[str]:
    """What is wrong in a run's config.yaml content (as YAML loads it), one entry per key;
    [] for a config a run could have written."""
    if not isinstance(config, dict):
        return [f"it holds {type(config).__name__} {json.dumps(config, default=str)[:40]}, not a mapping of settings"]
    bad = [f"{key}={json.dumps(config[key], default=str)[:40]} is not a mapping of settings"
           for key in CONFIG_SECTIONS if config.get(key) is not None and not isinstance(config[key], dict)]
    for dotted in CONFIG_NAMES:
        node: Any = config
        for part in dotted.split("."):
            node = node.get(part) if isinstance(node, dict) else None
        if node is not None and not isinstance(node, str):
            bad.append(f"{dotted}={json.dumps(node, default=str)[:40]} is not a text")
    seed = config.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        bad.append(f"seed={json.dumps(seed, default=str)[:40]} is not a whole number")
    return bad


def _load_checked(path: Path, parse: Callable[[str], Any], kind: str, errors: tuple[type[BaseException], ...],
                  problems_of: Callable[[Any], list[str]]) -> tuple[Any, list[str]]:
    """(a run file parsed, what is wrong with it); (None, []) when there is none. Read as data:
    never through a link, never a FIFO or a device (safe_files)."""
    if not os.path.lexists(path):
        return None, []
    try:
        data = parse(read_text(path))
    except ConfigError as err:  # a link, a FIFO, a device or a folder: never read
        return None, [str(err)]
    except UnicodeDecodeError as err:
        return None, [f"it is not UTF-8 text ({err.reason})"]
    except errors as err:
        return None, [f"it is not {kind} ({' '.join(str(err).split())[:80]})"]
    problems = problems_of(data)
    return (data if not problems else None), problems


def load_config_file(path: Path) -> tuple[dict[str, Any] | None, list[str]]:
    """(a run's config.yaml as a dict, what is wrong with it); (None, []) when there is none."""
    import yaml

    return _load_checked(path, yaml.safe_load, "YAML", (OSError, yaml.YAMLError), config_problems)


def load_summary_file(path: Path) -> tuple[dict[str, Any] | None, list[str]]:
    """(a run's summary.json, what is wrong with it); (None, []) when there is none."""
    from ..schema import summary_problems

    return _load_checked(path, json.loads, "JSON", (OSError, ValueError, RecursionError), summary_problems)


class DamagedRun(ConfigError):
    """A run folder whose config.yaml, summary.json or samples.jsonl is not what a run writes."""


def count_finished_lines(path: Path) -> int:
    """Lines written to the end (a cut-off last line is not one), without parsing: cheap for
    status displays."""
    try:
        with open_regular(path, "rb") as f:
            return sum(1 for line in f if line.endswith(b"\n"))
    except (OSError, ConfigError):  # missing, a link, a FIFO: no finished line to show
        return 0


def first_per_id(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The first record of each sample id, in file order (the one a run resumes from)."""
    seen: set[str] = set()
    out = []
    for r in records:
        if r["id"] not in seen:
            seen.add(r["id"])
            out.append(r)
    return out


class RunFolder:
    SAMPLES = "samples.jsonl"
    SUMMARY = "summary.json"
    CONFIG = "config.yaml"
    ERROR = "error.txt"
    LOCK = ".lock"

    def __init__(self, path: str | Path, *, create: bool = True) -> None:
        self.path = Path(path)
        if create:
            self.path.mkdir(parents=True, exist_ok=True)
        self._fh: Any = None
        self._lock_fd: int | None = None

    # -- the lock ----------------------------------------------------------------------------
    # How long a requeued Slurm job waits for its own previous attempt to let go of the folder.
    # Slurm may start the new attempt while the old step still runs: on a node marked DOWN whose
    # slurmd lives on, the old step dies only at KillWait's SIGKILL, and one on a node cut off
    # keeps its lock until the NFS lease expires (about 90 s by default). Past this, FolderLocked.
    REQUEUE_WAIT_S = 600.0

    def lock(self, purpose: str, *, requeue_wait_s: float | None = None) -> None:
        """Take the folder's exclusive lock or raise FolderLocked naming the holder.

        Inside a Slurm job whose previous attempt (the same SLURM_JOB_ID: a requeue) still holds
        the lock, wait for it to go (up to requeue_wait_s, default REQUEUE_WAIT_S) instead of
        refusing: the folder keeps a single writer, and the new attempt resumes from every sample
        the old one wrote. Any other holder is refused at once."""
        import time

        from filelock import lock_descriptor

        if self._lock_fd is not None:
            return
        self.path.mkdir(parents=True, exist_ok=True)
        job = os.environ.get("SLURM_JOB_ID")
        wait_s = self.REQUEUE_WAIT_S if requeue_wait_s is None else requeue_wait_s
        start = time.monotonic()
        told = False
        while True:
            fd = open_fd(self.path / self.LOCK, os.O_RDWR | os.O_CREAT, 0o644)  # never through a link (safe_files)
            try:
                # filelock's primitive on our own descriptor (flock on Unix), not its FileLock:
                # FileLock opens the file itself, outside the safe-file gate, and hands out no
                # descriptor to write the holder's record into.
                if lock_descriptor(fd, blocking=False):
                    break
            except BaseException:
                os.close(fd)
                raise
            os.close(fd)
            info = self._holder_info()
            mine = bool(job) and str(info.get("slurm_job")) == job
            if not mine or time.monotonic() - start >= wait_s:
                tail = (f"; job {job}'s previous attempt still holds it after {wait_s:.0f} s: it is still running somewhere "
                        f"(see `squeue -j {job}` and that host); scancel it or wait, then relaunch") if mine else \
                    "; wait for it to finish (one writer per run folder)"
                raise FolderLocked(f"{self.path} is in use by {self.holder() or 'another process'}{tail}") from None
            if not told:
                log.warning("%s: job %s's previous attempt (%s) still writes this folder; waiting for it to stop "
                            "(up to %.0f s) before resuming", self.path, job, self.holder(), wait_s)
                told = True
            time.sleep(1.0)
        if told:
            log.warning("%s: the previous attempt is gone after %.0f s; resuming", self.path, time.monotonic() - start)
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps({
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "purpose": purpose,
            "since": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "command": " ".join(sys.argv),
            "slurm_job": job,
            "slurm_node": os.environ.get("SLURMD_NODENAME"),
        }).encode() + b"\n", 0)
        os.fsync(fd)
        self._lock_fd = fd

    def unlock(self) -> None:
        # The lock file stays: were it removed, a process that opened the old file just before
        # could lock that orphaned inode while another locks a new file: two writers.
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # closing the descriptor releases the flock
            self._lock_fd = None

    def _holder_info(self) -> dict[str, Any]:
        try:
            info = json.loads(read_text(self.path / self.LOCK))  # never through a link or a FIFO
        except (OSError, ValueError, ConfigError):
            return {}
        return info if isinstance(info, dict) else {}

    def holder(self) -> str | None:
        """Who wrote the lock file last, as 'pid P on HOST (purpose, since ...)' (+ its Slurm job)."""
        info = self._holder_info()
        if not info:
            return None
        job = f", Slurm job {info['slurm_job']} on node {info.get('slurm_node')}" if info.get("slurm_job") else ""
        return f"pid {info.get('pid')} on {info.get('host')} ({info.get('purpose')}, since {info.get('since')}{job})"

    def __enter__(self) -> "RunFolder":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- samples -----------------------------------------------------------------------------
    def lines(self) -> list[dict[str, Any]]:
        """Every readable record in samples.jsonl, duplicates included, in file order."""
        return [rec for _, rec in read_jsonl(self.path / self.SAMPLES)]

    def records(self) -> list[dict[str, Any]]:
        """Finished samples, first occurrence per id; unreadable lines skipped with a warning."""
        return first_per_id(self.lines())

    def damage(self) -> list[str]:
        """What is damaged in this folder, one 'file: what' entry each ([] for a folder a run,
        killed or not, could have left): config.yaml and summary.json unreadable or holding the
        wrong kind of value (config_problems, schema.summary_problems), samples.jsonl lines
        that are not complete records (a last line cut off by a kill is not damage)."""
        out = [f"{self.CONFIG}: {p}" for p in load_config_file(self.path / self.CONFIG)[1]]
        out += [f"{self.SUMMARY}: {p}" for p in load_summary_file(self.path / self.SUMMARY)[1]]
        samples = self.path / self.SAMPLES
        if samples.exists() and not samples.is_file():
            out.append(f"{self.SAMPLES}: it is not a file")
        elif samples.exists():
            damaged: list[str] = []
            for _ in read_jsonl(samples, damaged=damaged):
                pass
            out += [f"{self.SAMPLES} {d}" for d in damaged]
        return out

    def check(self) -> None:
        """Raise DamagedRun naming the folder and the first damaged field (damage())."""
        problems = self.damage()
        if problems:
            more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
            # A summary is derived data: the re-scorer rebuilds it from the records.
            rebuild = (f" (python -m loosespec_bench.score --summary-only {self.path} rebuilds it from the records)"
                       if problems[0].startswith(self.SUMMARY) else "")
            raise DamagedRun(f"run folder {self.path}: {problems[0]}{more}{rebuild}")

    def _repair_tail(self) -> None:
        """Drop a partial last line so the next append starts on a fresh line."""
        path = self.path / self.SAMPLES
        if not check_regular(path) or path.stat().st_size == 0:
            return
        with open_regular(path, "rb+") as f:
            data = f.read()
            if data.endswith(b"\n"):
                return
            f.truncate(data.rfind(b"\n") + 1)

    def append(self, record: dict[str, Any]) -> None:
        if self._fh is None:
            self._repair_tail()
            self._fh = open_regular(self.path / self.SAMPLES, "a", encoding="utf-8")
        self._fh.write(json.dumps(record, ensure_ascii=False) + "\n")
        self._fh.flush()
        os.fsync(self._fh.fileno())

    def rewrite_samples(self, records: list[dict[str, Any]], stamp: str | None = None) -> Path:
        """Replace samples.jsonl with `records` (the old file kept as samples.jsonl.bak-<stamp>);
        returns the backup's path. Only under the lock: an appending run would lose samples."""
        if self._lock_fd is None:
            raise RuntimeError("rewrite_samples needs the folder's lock")
        if self._fh is not None:
            self._fh.close()
            self._fh = None
        backup = self.backup(self.SAMPLES, stamp)
        try:
            atomic_write(self.path / self.SAMPLES, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))
        except BaseException:  # a full disk: the old file is untouched, so its copy goes too
            if backup is not None:
                backup.unlink(missing_ok=True)
            raise
        assert backup is not None
        return backup

    def replace_record(self, record: dict[str, Any]) -> None:
        """Put `record` in place of the first record with its id (every reader's first record per
        id), other lines unchanged; atomic (a crash leaves the old file or the new one). Only
        under the lock. Used by a timing top-up (resume.timing_topup), which re-runs a finished
        sample timed and keeps what the old record measured inside the new one."""
        if self._lock_fd is None:
            raise RuntimeError("replace_record needs the folder's lock")
        if self._fh is not None:
            self._fh.close()
            self._fh = None
        self._repair_tail()
        path = self.path / self.SAMPLES
        lines = read_text(path).splitlines(keepends=True) if check_regular(path) else []
        new_line = json.dumps(record, ensure_ascii=False) + "\n"
        # Line by line as text: lines the readers skip (unreadable, incomplete) stay as they were.
        for pos, line in enumerate(lines):
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if isinstance(rec, dict) and rec.get("id") == record["id"] and not incomplete(rec):
                lines[pos] = new_line
                break
        else:
            lines.append(new_line)
        atomic_write(path, "".join(lines))

    def backup(self, name: str, stamp: str | None = None) -> Path | None:
        """A copy of `name` as <name>.bak-<stamp> (None when there is no such file)."""
        import shutil

        src = self.path / name
        if not check_regular(src):  # a link or a special file is refused, never copied through
            return None
        dst = self.path / f"{name}.bak-{stamp or utc_stamp()}"
        if os.path.lexists(dst):  # a link planted under the backup's name is replaced, never written through
            os.unlink(dst)
        shutil.copy2(src, dst, follow_symlinks=False)
        return dst

    # -- whole files -------------------------------------------------------------------------
    def write_config(self, yaml_text: str) -> None:
        atomic_write(self.path / self.CONFIG, yaml_text)

    def read_summary(self) -> dict[str, Any] | None:
        """summary.json, or None when there is none or it is damaged (a warning says why)."""
        data, problems = load_summary_file(self.path / self.SUMMARY)
        if problems:
            log.warning("%s: %s; ignored", self.path / self.SUMMARY, "; ".join(problems))
        return data

    def write_summary(self, summary: dict[str, Any]) -> None:
        atomic_write(self.path / self.SUMMARY, summary_json(summary))

    def clear_error(self) -> None:
        (self.path / self.ERROR).unlink(missing_ok=True)

    def close(self) -> None:
        if self._fh is not None:
            fh, self._fh = self._fh, None
            try:
                fh.close()  # flushes what is buffered: after a failed append, that record again
            except OSError as err:
                # The disk refused a record's flush and refuses it again now: that record never
                # finished (every finished one was fsynced), and the next append repairs a cut
                # tail (_repair_tail). The descriptor is closed all the same (io closes it even
                # when the flush fails); the caller reports the disk error it already caught.
                if err.errno not in DISK_ERRNOS:
                    raise
        self.unlock()


def standard_json(obj: Any, path: str = "", found: list[str] | None = None) -> tuple[Any, list[str]]:
    """`obj` with every NaN or infinity replaced by None (standard JSON has neither: Python
    writes NaN / Infinity, which other readers refuse), and the dotted paths of those replaced."""
    found = [] if found is None else found
    if isinstance(obj, float) and (obj != obj or obj in (float("inf"), float("-inf"))):
        found.append(path or "(top)")
        return None, found
    if isinstance(obj, dict):
        return {k: standard_json(v, f"{path}.{k}" if path else str(k), found)[0] for k, v in obj.items()}, found
    if isinstance(obj, (list, tuple)):
        return [standard_json(v, f"{path}[{i}]", found)[0] for i, v in enumerate(obj)], found
    return obj, found


def summary_json(summary: dict[str, Any]) -> str:
    """summary.json's text: standard JSON only; a figure that came out NaN or infinite is written
    as null and named in `nonfinite_fields` (the flag that it was not a missing value)."""
    clean, found = standard_json(summary)
    if found:
        clean["nonfinite_fields"] = found
    return json.dumps(clean, indent=2, ensure_ascii=False, allow_nan=False) + "\n"


def check_files(path: Path) -> None:
    """Every file a run folder's readers and writers open is a regular file or absent (a link, a
    FIFO, a device or a folder in its place: ConfigError), checked before anything is read or
    written, so that a refusal changes nothing. The opens themselves check again (safe_files)."""
    for name in (RunFolder.CONFIG, RunFolder.SAMPLES, RunFolder.SUMMARY, RunFolder.LOCK, RunFolder.ERROR):
        check_regular(path / name)


def write_error(folder: Path, text: str) -> Path:
    """error.txt in `folder` (any folder: a run's, or Hydra's job dir when the run has none);
    a disk that cannot take it costs a warning, never a second traceback."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        log.warning("%s could not be created (%s); the error is not recorded there", folder, err)
        return folder / RunFolder.ERROR
    job = os.environ.get("SLURM_ARRAY_JOB_ID") and f"{os.environ['SLURM_ARRAY_JOB_ID']}_{os.environ.get('SLURM_ARRAY_TASK_ID')}"
    job = job or os.environ.get("SLURM_JOB_ID") or os.environ.get("SUBMITIT_LOCAL_JOB_ID")
    header = [
        f"failed: {datetime.datetime.now(datetime.timezone.utc).isoformat(timespec='seconds')}",
        f"host: {socket.gethostname()}",
        f"job: {job or '-'}",
        f"command: {' '.join(sys.argv)}",
        f"overrides: {' '.join(_hydra_overrides())}",
        "",
    ]
    path = folder / RunFolder.ERROR
    try:
        atomic_write(path, "\n".join(header) + text)
    except OSError as err:  # a full or read-only disk: the error itself is what the user must see
        log.warning("%s could not be written (%s); the traceback follows on stderr", path, err)
    return path


def _hydra_overrides() -> list[str]:
    try:
        from hydra.core.hydra_config import HydraConfig

        return list(HydraConfig.get().overrides.task)
    except Exception:  # not under Hydra (tests, notebooks)
        return []
