"""When each claim was declared and when the data it decides first existed (issue 70).

A claim is pre-registered only when its declaration precedes its data. Both dates come from
records, not from what a README says:

- declared: the first commit (author date) of the claims file in which the claim's id appears
  (git log --follow of the file); a claim not yet committed is declared "now";
- data first existed: the earliest of the data's own records: a run folder's first commit, its
  first committed summary.json's `date` less the run's timed seconds (when the run started at
  the latest), the speed-evidence folders' occasion start times (`at`); for a wall-clock claim
  also when the calibration behind its work-count gate was taken (`signature.created`), which
  a gate fitted after the timings makes in-sample.

git is not needed to regenerate a report: `provenance.json` beside the claims file keeps what git
said (`python -m loosespec_bench.report provenance CLAIMS.yaml` writes it; the report reads it when
git cannot answer, and prefers git when it can)."""

from __future__ import annotations

import json
import re
import subprocess
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Iterable

from ...safe_files import atomic_write_text, check_regular, open_regular, read_declaration_text

PROVENANCE_NAME = "provenance.json"
PRE_REGISTERED = "pre-registered"
AFTER_DATA = "declared after the data"
NO_DATA = "no data yet"
UNKNOWN = "provenance unknown"
_ID = re.compile(r"\bid:\s*[\"']?([A-Za-z0-9_.-]+)")


def _git(args: list[str], cwd: Path) -> str | None:
    try:
        res = subprocess.run(["git", *args], cwd=str(cwd), capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    return res.stdout if res.returncode == 0 else None


def git_root(path: Path) -> Path | None:
    out = _git(["rev-parse", "--show-toplevel"], Path(path).resolve().parent if Path(path).is_file() else Path(path).resolve())
    return Path(out.strip()) if out else None


def _iso(t: datetime) -> str:
    return t.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(text: Any) -> datetime | None:
    if text is None:
        return None
    if isinstance(text, (int, float)):
        try:
            return datetime.fromtimestamp(float(text), tz=timezone.utc)
        except (OverflowError, ValueError, OSError):  # NaN, 1e999, a year past 9999: no time
            return None
    try:
        t = datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    except ValueError:
        return None
    return t if t.tzinfo else t.replace(tzinfo=timezone.utc)


def declared_from_git(decl_path: Path) -> dict[str, tuple[str, str]] | None:
    """claim id -> (commit, ISO date) of the first commit of the claims file naming it; None
    without git (or outside a repository)."""
    decl_path = Path(decl_path).resolve()
    root = git_root(decl_path)
    if root is None:
        return None
    rel = decl_path.relative_to(root).as_posix()
    log = _git(["log", "--reverse", "--follow", "--format=%x00%H %aI", "--name-only", "--", rel], root)
    if log is None:
        return None
    out: dict[str, tuple[str, str]] = {}
    for chunk in log.split("\x00"):
        lines = [x for x in chunk.strip().splitlines() if x.strip()]
        if not lines:
            continue
        commit, date = lines[0].split(" ", 1)
        path = lines[-1] if len(lines) > 1 else rel
        text = _git(["show", f"{commit}:{path}"], root) or ""
        for cid in _ID.findall(text):
            out.setdefault(cid, (commit[:12], _iso(parse_time(date))))  # type: ignore[arg-type]
    return out


def _first_commit(path: Path, root: Path) -> tuple[str, str] | None:
    rel = Path(path).resolve().relative_to(root).as_posix()
    log = _git(["log", "--reverse", "--format=%H %aI", "--", rel], root)
    if not log or not log.strip():
        return None
    commit, date = log.strip().splitlines()[0].split(" ", 1)
    return commit, _iso(parse_time(date))  # type: ignore[arg-type]


def _json_or_none(path: Path, what: str) -> Any:
    """The JSON in `path`; None where it is absent or not JSON (no time is read from it). Read
    through the gate: a link, a FIFO, a device or an oversized file is one ConfigError naming
    it, never followed, never waited on."""
    if not check_regular(path):
        return None
    text = read_declaration_text(path, what)
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return None


def _run_time_s(summary: dict[str, Any]) -> float:
    """A run's timed seconds as its summary states them (method and target alone where both)."""
    total = 0.0
    base = summary.get("baseline")
    for v in (summary.get("time_s"), base.get("time_s") if isinstance(base, dict) else None):
        # A finite, non-negative count of seconds only: NaN or 1e999 would move the start anywhere.
        if isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v < 1e9:
            total += float(v)
    return total


def data_first(folder: Path, root: Path | None) -> tuple[str, str] | None:
    """(ISO time, how it was read) the data of a run folder or a speed-evidence folder first
    existed at the latest; None where no record says."""
    folder = Path(folder)
    seen: list[tuple[datetime, str]] = []
    occasions = sorted(folder.glob("occasion-*.jsonl"))
    for occ in occasions:
        with open_regular(occ, "r", encoding="utf-8", newline="") as fh:  # never a link or a FIFO
            for line in fh:
                try:
                    rec = json.loads(line)
                except (ValueError, RecursionError):
                    continue
                t = parse_time(rec.get("at")) if isinstance(rec, dict) else None
                if t is not None:
                    seen.append((t, f"{occ.name}: first timing record"))
                    break
    summary_file = folder / "summary.json"
    first_summary: dict[str, Any] | None = None
    if root is not None:
        for name in ("samples.jsonl", *(o.name for o in occasions)):
            if (folder / name).exists():
                got = _first_commit(folder / name, root)
                if got:
                    seen.append((parse_time(got[1]), f"first commit of {name} ({got[0][:12]})"))  # type: ignore[arg-type]
        if summary_file.exists():
            got = _first_commit(summary_file, root)
            if got:
                rel = summary_file.resolve().relative_to(root).as_posix()
                text = _git(["show", f"{got[0]}:{rel}"], root)
                try:
                    first_summary = json.loads(text) if text else None
                except ValueError:
                    first_summary = None
    if first_summary is None:
        first_summary = _json_or_none(summary_file, "summary")
    if isinstance(first_summary, dict):
        end = parse_time(first_summary.get("date"))
        if end is not None:
            start = end - timedelta(seconds=_run_time_s(first_summary))
            seen.append((start, "first summary.json's date less its timed seconds"))
    seen = [s for s in seen if s[0] is not None]
    if not seen:
        return None
    t, how = min(seen, key=lambda s: s[0])
    return _iso(t), how


def calibration_time(folder: Path) -> str | None:
    """When the calibration a speed-evidence folder's work counts are priced by was taken."""
    raw = _json_or_none(Path(folder) / "calibration.json", "calibration")
    t = parse_time(((raw.get("signature") or {}) if isinstance(raw, dict) else {}).get("created"))
    return _iso(t) if t else None


@dataclass
class Record:
    """What provenance.json holds for one declaration."""
    declared: dict[str, dict[str, str]]  # claim id -> {"at", "commit"}
    data: dict[str, dict[str, str]]  # folder (relative to the claims file) -> {"at", "how"}
    calibration: dict[str, str]  # speed folder -> when its calibration was taken
    source: str = "git"


def rel_path(folder: str | Path, base: Path) -> str:
    p = Path(folder).resolve()
    try:
        return p.relative_to(base.resolve()).as_posix()
    except ValueError:
        return p.as_posix()


def collect(decl_path: Path, folders: Iterable[str], speed_folders: Iterable[str] = ()) -> Record:
    """The provenance of a declaration and the folders its decisions read: from git where it
    answers, else from the committed provenance.json beside the declaration."""
    decl_path = Path(decl_path)
    base = decl_path.resolve().parent
    stored = load(decl_path)
    declared_git = declared_from_git(decl_path)
    root = git_root(decl_path) if declared_git is not None else None
    if declared_git is None and stored is not None:
        rec = stored
        rec.source = "provenance.json (no git)"
    else:
        rec = Record({k: {"at": v[1], "commit": v[0]} for k, v in (declared_git or {}).items()}, {}, {},
                     source="git" if declared_git is not None else "none")
    for folder in {*folders, *speed_folders}:
        key = rel_path(folder, base)
        if key in rec.data and rec.source != "git":
            continue
        got = data_first(Path(folder), root)
        if got is None and stored is not None and key in stored.data:
            rec.data[key] = stored.data[key]
        elif got is not None:
            rec.data[key] = {"at": got[0], "how": got[1]}
    for folder in speed_folders:
        key = rel_path(folder, base)
        t = calibration_time(Path(folder))
        if t:
            rec.calibration[key] = t
    return rec


def load(decl_path: Path) -> Record | None:
    raw = _json_or_none(Path(decl_path).with_name(PROVENANCE_NAME), "provenance record")
    if not isinstance(raw, dict):
        return None

    def entries(key: str, texts: bool = False) -> dict[str, Any]:
        # Only entries of the shape write() gives them (name -> {"at": text, ...}; calibration:
        # name -> a time text): anything else in a hand-edited file is dropped, never a date.
        node = raw.get(key)
        if not isinstance(node, dict):
            return {}
        return {k: v for k, v in node.items() if isinstance(v, str) == texts and (
            texts or (isinstance(v, dict) and all(isinstance(x, str) for x in v.values())))}

    return Record(entries("declared"), entries("data"), entries("calibration", texts=True),
                  source=str(raw.get("source") or "provenance.json")[:80])


def write(decl_path: Path, rec: Record) -> Path:
    """provenance.json beside the declaration (sorted, so that a regeneration diffs cleanly).
    Only a record read from git is written: a copy without git keeps the committed one."""
    path = Path(decl_path).with_name(PROVENANCE_NAME)
    if rec.source != "git":
        return path
    body = {
        "about": ("when each claim of claims.yaml was declared (first commit naming its id) and when the data it decides "
                  "first existed (the folders' own records); written from git by the claims report, read when git is absent"),
        "source": "git",
        "declared": dict(sorted(rec.declared.items())),
        "data": dict(sorted(rec.data.items())),
        "calibration": dict(sorted(rec.calibration.items())),
    }
    atomic_write_text(path, json.dumps(body, indent=1) + "\n")  # never through a link, never half a file
    return path


def status(declared_at: str | None, data_at: str | None) -> str:
    """pre-registered only when the declaration precedes every record of the data."""
    if data_at is None:
        return NO_DATA
    if declared_at is None:
        return UNKNOWN
    d, t = parse_time(declared_at), parse_time(data_at)
    if d is None or t is None:
        return UNKNOWN
    return PRE_REGISTERED if d < t else AFTER_DATA


def now_iso() -> str:
    return _iso(datetime.now(timezone.utc))
