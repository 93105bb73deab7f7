"""The table a `-m` sweep ends with: one row per point (the overrides that tell it apart, tau,
speedup and the quality figure with their intervals, n), printed once every point has run and
written into Hydra's sweep folder as sweep_summary.md and sweep_summary.csv.

A Hydra callback (conf/config.yaml, hydra.callbacks.sweep_table):
- on_job_end, in the process that ran the point (the basic launcher's, or a Slurm/submitit job):
  `point.json` in the point's Hydra job folder (<sweep dir>/<job num>/) names the point's run
  folder (results/<experiment>/<run id>, where its summary.json is), its overrides, whether it
  finished, and a failed point's error;
- on_multirun_end: reads every point's point.json and summary.json and prints the table.
A sweep with a failed point never reaches on_multirun_end (Hydra raises the first failure once
the batch has run): the table is then printed when the process exits, with the points that
finished and the ones that did not, the same way. A point whose job left no point.json (killed)
is listed as not finished.

Reads summaries only; never imports the app (it sits beside the report, above summary).
"""

from __future__ import annotations

import atexit
import csv
import io
import json
import os
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback

from ..errors import ConfigError
from ..run.end_table import count_rate
from ..safe_files import check_regular, is_real_dir, load_json_declaration, load_yaml_declaration
from ..store.run_folder import RunFolder, atomic_write, load_summary_file, run_dir
from ..schema import format_interval, format_value, number
from ..store.summary import headline_figure

POINT = "point.json"  # in each point's Hydra job folder
MARKDOWN, CSV = "sweep_summary.md", "sweep_summary.csv"
FINISHED = "COMPLETED"
CSV_COLUMNS = [
    "job", "overrides", "status", "run_folder", "tau", "tau_ci_low", "tau_ci_high", "speedup", "speedup_ci_low",
    "speedup_ci_high", "quality_figure", "quality", "quality_ci_low", "quality_ci_high", "quality_correct", "quality_n",
    "n_samples", "error",
]


def _job_num(path: Path) -> tuple[int, str]:
    return (int(path.name), "") if path.name.isdigit() else (1 << 30, path.name)


def _results_root(sweep_dir: Path, results_dir: str | Path | None) -> Path:
    """The results folder a point's run folder must be inside: the sweep's paths.results_dir when
    the callback knows it, else the folder above the sweep's `_hydra` (conf/config.yaml puts
    sweeps at <results_dir>/_hydra/multirun/...), else the sweep folder's parent."""
    if results_dir is not None:
        return Path(results_dir)
    parts = Path(sweep_dir).parts
    if "_hydra" in parts:
        i = len(parts) - 1 - parts[::-1].index("_hydra")
        return Path(*parts[:i]) if i else Path(".")
    return Path(sweep_dir).parent


def _job_folders(sweep_dir: Path, depth: int = 4) -> list[Path]:
    """The sweep's own job folders: real folders (never a link) below sweep_dir holding a regular
    .hydra/overrides.yaml, found without following links."""
    found = []
    for top, dirs, _files in os.walk(sweep_dir, followlinks=False):
        here = Path(top)
        if len(here.relative_to(sweep_dir).parts) >= depth:
            dirs[:] = []
        dirs[:] = [d for d in dirs if d != ".hydra" and is_real_dir(here / d)]
        hydra = here / ".hydra"
        try:
            if here != sweep_dir and is_real_dir(hydra) and check_regular(hydra / "overrides.yaml"):
                found.append(here)
        except ConfigError:
            continue
    return sorted(found, key=_job_num)


def _point_problem(point: Any) -> str | None:
    """Why a point.json cannot be used (its declaration: job/status texts, overrides a list of
    texts, run_folder and error a text or null), or None."""
    if not isinstance(point, dict):
        return "it is not a JSON object"
    for key in ("job", "status"):
        if key in point and not isinstance(point[key], str):
            return f"{key} is not a text"
    for key in ("run_folder", "error"):
        if point.get(key) is not None and not isinstance(point[key], str):
            return f"{key} is not a text or null"
    if "overrides" in point and not (isinstance(point["overrides"], list) and all(isinstance(o, str) for o in point["overrides"])):
        return "overrides is not a list of texts"
    return None


def read_points(sweep_dir: Path, results_dir: str | Path | None = None) -> list[dict[str, Any]]:
    """Every point of the sweep folder, in job order: {job, overrides, status, run_folder,
    summary, error}. status: COMPLETED (its summary read), FAILED, "not finished" (a job
    folder without point.json: the job was killed, or never reached its end) or "skipped" (a
    point.json that is a link, a FIFO, not a point, or names a run folder outside the results
    folder: its numbers are never read; `error` says why).

    Points are read only from the sweep's own job folders (real folders, no link followed), each
    file through the gate (safe_files: bounded, never a link or a FIFO)."""
    points = []
    sweep_dir = Path(sweep_dir)
    root = Path(os.path.realpath(_results_root(sweep_dir, results_dir)))
    for job in _job_folders(sweep_dir):
        point: dict[str, Any] = {"job": job.name, "overrides": [], "status": "not finished", "run_folder": None,
                                 "summary": None, "error": None}
        try:
            point["overrides"] = [str(o) for o in load_yaml_declaration(job / ".hydra" / "overrides.yaml", "overrides file") or []]
        except (ConfigError, TypeError):
            pass  # an unreadable file: the point is listed without its overrides
        try:
            if os.path.lexists(job / POINT):
                found = load_json_declaration(job / POINT, "sweep point", limit=1 << 20)
                why = _point_problem(found)
                if why:
                    raise ConfigError(f"{job / POINT}: {why}")
                point.update({k: found[k] for k in ("overrides", "status", "run_folder", "error") if k in found})
                point["job"] = job.name
        except ConfigError as err:
            point.update(status="skipped", run_folder=None, error=str(err)[:300])
        folder = point.get("run_folder")
        if point["status"] == FINISHED and folder:
            real = Path(os.path.realpath(folder))
            if not real.is_relative_to(root) or not is_real_dir(folder):
                point.update(status="skipped", error=f"its run folder {folder} is not a folder inside {root}; not read")
            else:
                summary, problems = load_summary_file(Path(folder) / RunFolder.SUMMARY)
                if summary is None:
                    point["status"] = "FAILED"
                    point["error"] = "; ".join(problems) or f"no {RunFolder.SUMMARY} in {folder}"
                point["summary"] = summary
        points.append(point)
    return points


def _varying(points: list[dict[str, Any]]) -> tuple[list[str], list[list[str]]]:
    """(the overrides every point shares, each point's own): a row names what tells it apart."""
    if not points:
        return [], []
    common = [o for o in points[0]["overrides"] if all(o in p["overrides"] for p in points)]
    if len(points) == 1:
        return [], [points[0]["overrides"]]
    return common, [[o for o in p["overrides"] if o not in common] for p in points]


def _with_interval(s: dict[str, Any], key: str, kind: str) -> str:
    value = number(s.get(key))
    if value is None:
        return "-"
    low, high = number(s.get(f"{key}_ci_low")), number(s.get(f"{key}_ci_high"))
    text = format_value(value, kind)
    return text + (" " + format_interval(low, high, kind) if low is not None and high is not None else "")


def _quality(s: dict[str, Any]) -> tuple[str | None, str]:
    """(the figure's name, `13/30 = 0.433 [0.255, 0.626]`); (None, "-") for a speed-only set."""
    fig = headline_figure(s)
    if fig is None:
        return None, "-"
    text = _with_interval(s, fig, "accuracy")
    counts = s.get("quality_counts") or {}
    counted = count_rate(counts.get("correct"), counts.get("n"), number(s.get(fig)))
    if counted is not None:
        text = counted + text[len(format_value(float(s[fig]), "accuracy")):]
    return fig, text


def table_rows(points: list[dict[str, Any]]) -> tuple[list[str], list[str], list[list[str]]]:
    """(common overrides, header, one row per finished point)."""
    common, own = _varying(points)
    figures = {_quality(p["summary"])[0] for p in points if p["summary"]} - {None}
    quality_head = figures.pop() if len(figures) == 1 else "quality"
    header = ["#", "point", "tau", "speedup", quality_head, "n"]
    rows = []
    for p, mine in zip(points, own):
        s = p["summary"]
        if not s:
            continue
        fig, quality = _quality(s)
        if fig is not None and quality_head == "quality":
            quality = f"{fig} {quality}"
        rows.append([p["job"], " ".join(mine) or "-", _with_interval(s, "tau", "tau"), _with_interval(s, "speedup", "speedup"),
                     quality, str(s.get("n_samples", "-"))])
    return common, header, rows


def _unfinished(points: list[dict[str, Any]]) -> list[str]:
    common, own = _varying(points)
    out = []
    for p, mine in zip(points, own):
        if p["summary"]:
            continue
        where = f" (see {Path(p['run_folder']) / RunFolder.ERROR})" if p.get("run_folder") and p["status"] == "FAILED" else ""
        why = f": {p['error']}" if p.get("error") else ""
        out.append(f"{p['job']} {' '.join(mine) or '-'}: {p['status'].lower()}{why}{where}")
    return out


def format_text(sweep_dir: Path, points: list[dict[str, Any]]) -> str:
    common, header, rows = table_rows(points)
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    line = lambda r: "  ".join(c.ljust(w) if i < len(r) - 1 else c for i, (c, w) in enumerate(zip(r, widths))).rstrip()  # noqa: E731
    rule = "=" * min(100, max(len(line(r)) for r in [header, *rows]))
    failed = _unfinished(points)
    out = ["", f"sweep of {len(points)} point(s), {len(rows)} finished, {len(failed)} not: {sweep_dir}"]
    if common:
        out.append(f"every point: {' '.join(common)}")
    out += [rule, line(header), *(line(r) for r in rows), rule]
    if failed:
        out += ["did not finish:", *(f"  {f}" for f in failed)]
    out.append(f"written into that folder: {MARKDOWN}, {CSV}")
    return "\n".join(out)


def format_markdown(sweep_dir: Path, points: list[dict[str, Any]]) -> str:
    common, header, rows = table_rows(points)
    esc = lambda c: c.replace("|", "\\|")  # noqa: E731
    out = [f"# Sweep {sweep_dir}", ""]
    if common:
        out += [f"Every point: `{' '.join(common)}`", ""]
    out += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(esc(c) for c in r) + " |" for r in rows]
    failed = _unfinished(points)
    if failed:
        out += ["", "Did not finish:", "", *(f"- {esc(f)}" for f in failed)]
    out += ["", "Intervals: 95%, as in each run's summary.json (quality: exact for 0/1 scores)."]
    return "\n".join(out) + "\n"


def format_csv(points: list[dict[str, Any]]) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for p in points:
        s = p["summary"] or {}
        fig = headline_figure(s) if s else None
        counts = s.get("quality_counts") or {}
        row = {"job": p["job"], "overrides": " ".join(p["overrides"]), "status": p["status"], "run_folder": p.get("run_folder"),
               **{k: s.get(k) for k in ("tau", "tau_ci_low", "tau_ci_high", "speedup", "speedup_ci_low", "speedup_ci_high",
                                        "n_samples")},
               "quality_figure": fig, "quality": s.get(fig) if fig else None,
               "quality_ci_low": s.get(f"{fig}_ci_low") if fig else None, "quality_ci_high": s.get(f"{fig}_ci_high") if fig else None,
               "quality_correct": counts.get("correct"), "quality_n": counts.get("n"), "error": p.get("error")}
        writer.writerow(["" if row[c] is None else row[c] for c in CSV_COLUMNS])
    return buf.getvalue()


def report(sweep_dir: Path, results_dir: str | Path | None = None) -> str | None:
    """Print the sweep's table and write sweep_summary.md / .csv into its folder; the text, or
    None for a folder without points. Points whose run folder is outside results_dir (read_points)
    are skipped, each with a line."""
    sweep_dir = Path(sweep_dir)
    points = read_points(sweep_dir, results_dir)
    if not points:
        return None
    text = format_text(sweep_dir, points)
    try:
        atomic_write(sweep_dir / MARKDOWN, format_markdown(sweep_dir, points), root=sweep_dir)
        atomic_write(sweep_dir / CSV, format_csv(points), root=sweep_dir)
    except OSError as err:
        text = text.rsplit("\n", 1)[0] + f"\n({MARKDOWN} and {CSV} could not be written: {err})"
    print(text, flush=True)
    return text


def _error_line(err: Any) -> str:
    text = f"{type(err).__name__}: {err}" if isinstance(err, BaseException) else str(err)
    first = text.strip().splitlines()[0] if text.strip() else type(err).__name__
    return first[:300]


def _config_results_dir(config: Any) -> str | None:
    try:
        value = config.paths.results_dir
        return value if isinstance(value, str) and value else None
    except Exception:  # noqa: BLE001 (a config without paths: read_points infers the folder)
        return None


class SweepTable(Callback):
    """conf/config.yaml's hydra.callbacks.sweep_table: the sweep's table (module doc)."""

    def __init__(self) -> None:
        self._sweep_dir: Path | None = None
        self._results_dir: str | None = None
        self._done = True

    def on_multirun_start(self, config: Any, **kwargs: Any) -> None:
        self._sweep_dir = Path(str(config.hydra.sweep.dir))
        self._results_dir = _config_results_dir(config)
        self._done = False
        atexit.register(self._at_exit)  # a failed point: Hydra raises before on_multirun_end

    def on_job_end(self, config: Any, job_return: Any, **kwargs: Any) -> None:
        try:
            from hydra.types import RunMode

            if config.hydra.mode != RunMode.MULTIRUN:
                return
            out = Path(str(config.hydra.runtime.output_dir))
            try:
                folder: str | None = str(run_dir(job_return.cfg))
            except Exception:  # noqa: BLE001 (a config that names no folder: the point is listed without one)
                folder = None
            status = getattr(job_return.status, "name", str(job_return.status))
            error = None if status == FINISHED else _error_line(getattr(job_return, "_return_value", None))
            atomic_write(out / POINT, json.dumps({  # never through a link (safe_files)
                "job": out.name, "overrides": [str(o) for o in (job_return.overrides or [])], "status": status,
                "run_folder": folder, "error": error,
            }) + "\n")
        except Exception:  # noqa: BLE001 (the sweep's table is a convenience: never fail a point for it)
            pass

    def on_multirun_end(self, config: Any, **kwargs: Any) -> None:
        self._done = True
        try:
            report(Path(str(config.hydra.sweep.dir)), _config_results_dir(config) or self._results_dir)
        except Exception as err:  # noqa: BLE001 (every point's results are in its run folder already)
            print(f"[loosespec_bench] the sweep's table could not be made ({type(err).__name__}: {err})", flush=True)

    def _at_exit(self) -> None:
        if self._done or self._sweep_dir is None:
            return
        self._done = True
        try:
            report(self._sweep_dir, self._results_dir)
        except Exception:  # noqa: BLE001 (at exit: nothing to add to the error Hydra printed)
            pass
