"""A speed-evidence folder (python -m loosespec_bench.bench.speed), read as data: its arguments,
its finished occasions' final generations and their start records, and the calibration its
analysis used. The benchmark writes these files and reads them back through here; the claims
(report/claims) decide wall-clock claims from the same generations, so both see one reading.

A folder holds `args.json`, `occasion-<o>.jsonl` (one JSON object a line: `start` / `resume`
records, one `gen` record per timed generation, its `config` a configuration's name as
measure/speed_configs.py declares it, `done` at the end of a finished occasion) and, once
analysed, `report.json` and `calibration.json`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ..errors import ConfigError
from ..safe_files import check_regular, load_json_declaration, read_text

ARGS = "args.json"
CALIBRATION = "calibration.json"  # the calibration the analysis priced the counts with (a copy)


def occasion_done(path: Path) -> bool:
    """Whether an occasion's file ends with its `done` record (an interrupted one does not)."""
    if not check_regular(path):  # a link, a FIFO or a device: ConfigError (safe_files)
        return False
    lines = read_text(path).splitlines()
    try:
        return bool(lines) and json.loads(lines[-1]).get("kind") == "done"
    except (json.JSONDecodeError, AttributeError):  # interrupted mid-line: unfinished
        return False


def unfinished_occasions(out: Path) -> list[str]:
    """The names of the occasion files in `out` that have not finished."""
    return [p.name for p in sorted(Path(out).glob("occasion-*.jsonl")) if not occasion_done(p)]


def _finite(value: Any) -> bool:
    import math

    return not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value)


def load_rows(out: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The final generations of every finished occasion in `out`, and the occasions' start and
    resume records. An unfinished occasion is left out (unfinished_occasions names it)."""
    rows: list[dict[str, Any]] = []
    starts: list[dict[str, Any]] = []
    for path in sorted(Path(out).glob("occasion-*.jsonl")):
        if not occasion_done(path):
            continue
        for n, line in enumerate(read_text(path).splitlines(), 1):
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                raise ConfigError(f"{path}:{n} is not JSON; a finished occasion is rewritten only by the benchmark "
                                  "(move the file away and rerun the occasion)") from None
            if not isinstance(rec, dict):
                raise ConfigError(f"{path}:{n} is not a record; move the file away and rerun the occasion")
            if rec.get("kind") in ("start", "resume"):
                starts.append(rec)
            elif rec.get("kind") == "gen" and rec.get("final"):
                if why := _bad_gen(rec):
                    raise ConfigError(f"{path}:{n}: a generation record {why}; a finished occasion is rewritten only by "
                                      "the benchmark (move the file away and rerun the occasion)")
                rows.append(rec)
    return rows, starts


# What a timed generation must carry for the analysis and the claims (the benchmark writes more).
_GEN_FIELDS = {"occasion": int, "problem": str, "config": str, "new_tokens": int, "wall_s": (int, float)}


def _bad_gen(rec: dict[str, Any]) -> str | None:
    for key, kind in _GEN_FIELDS.items():
        value = rec.get(key)
        if isinstance(value, bool) or not isinstance(value, kind):
            return f"has no {key} of the right type ({key}={str(value)[:40]!r})"
    if not 0 <= rec["occasion"] < 1 << 31 or not 0 <= rec["new_tokens"] < 1 << 31 or not _finite(rec["wall_s"]) or rec["wall_s"] <= 0:
        return (f"has a negative count or time, a count out of range or a wall time that is not a positive finite number "
                f"(occasion={str(rec['occasion'])[:20]}, new_tokens={str(rec['new_tokens'])[:20]}, wall_s={str(rec['wall_s'])[:20]})")
    for key in ("cpu_share", "others_share", "ttft_s", "prefill_s", "decode_s"):
        value = rec.get(key)
        if value is not None and (not _finite(value) or value < 0):
            return f"has {key}={str(value)[:40]!r}, not a finite number >= 0 or null"
    return None


def read_args(out: Path) -> dict[str, Any]:
    """The benchmark's arguments (args.json: pair, dataset, problems, max_new_tokens, ...)."""
    path = Path(out) / ARGS
    if not check_regular(path):  # a link or a FIFO: ConfigError (safe_files)
        raise ConfigError(f"{out} has no {ARGS}: not a speed-evidence folder (python -m loosespec_bench.bench.speed writes one)")
    data = load_json_declaration(path, "speed-evidence arguments")  # bounded; bad JSON is one line
    if not isinstance(data, dict):
        raise ConfigError(f"{path} is not a JSON object; rerun the benchmark into a fresh folder")
    return data


def read_calibration(out: Path) -> dict[str, Any] | None:
    """The calibration the folder's analysis used (its copy), or None where there is none."""
    path = Path(out) / CALIBRATION
    if not check_regular(path):  # a link or a FIFO: ConfigError (safe_files)
        return None
    data = load_json_declaration(path, "calibration")  # bounded; bad JSON is one line
    return data if isinstance(data, dict) else None


def cell_table(cell: Mapping[tuple[Any, Any, str], dict[str, Any]], occasions: Sequence[Any], problems: Sequence[Any], config: str,
               value: Callable[[dict[str, Any]], float], clean: bool = False) -> np.ndarray:
    """[occasions, problems] of value(record) for one configuration, from {(occasion, problem,
    config): record}; NaN where there is no record (or, with clean, a contaminated one)."""
    t = np.full((len(occasions), len(problems)), np.nan)
    for i, o in enumerate(occasions):
        for j, q in enumerate(problems):
            r = cell.get((o, q, config))
            if r is not None and not (clean and r.get("contaminated")):
                t[i, j] = float(value(r))
    return t
