"""The results index: one row per run folder under a results directory.

A run folder is results/<experiment>/<run id>/ with config.yaml, samples.jsonl and, once the run
ended, summary.json (app.run). Folders of killed or still running runs are indexed too:
  status = complete   summary.json is newer than samples.jsonl (the run ended after its last sample)
           partial    samples but no summary, or samples appended after the summary (a resumed run
                      that was killed): the figures are recomputed from samples.jsonl with the
                      harness's own metrics.summarize; task-specific quality beyond 0/1 `correct`
                      (judge ratings, IFEval levels) is then missing
           empty      config.yaml only (killed before its first sample)
Hydra's own folders (_hydra, .hydra), the shared target-alone stores (_baselines) and W&B folders
(wandb) are skipped.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import logging
import os
from pathlib import Path
from typing import Any, Iterable, Mapping

import pandas as pd

from ..settings.config import NON_SEMANTIC, NON_SEMANTIC_DATASET
from ..errors import ConfigError
from ..store.run_folder import DamagedRun, RunFolder, check_files, count_finished_lines, load_config_file, load_summary_file
from ..safe_files import atomic_output, is_real_dir
from ..store.summary import headline_figure, paired_quality
from ..verifiers import rule_class
from ..schema import BASELINE_SCORE, FIGURES, KNOBS, RUN_FIELDS, SCORE, SCORE_DIFF, TIMING_FIELDS, has_intervals, knob_value, knobs_of, number

log = logging.getLogger(__name__)
SKIP_DIRS = {"_hydra", ".hydra", "_baselines", "wandb", "plots", "__pycache__"}
RUN_FILES = (RunFolder.SUMMARY, RunFolder.SAMPLES, RunFolder.CONFIG)

# The columns of the index, in order: identity, the knobs (schema.KNOBS; a run's undeclared rule
# knobs are appended after them), the figures with their intervals (schema.FIGURES), power and
# timing, provenance. Every label and format lives in loosespec_bench/schema.py.
# Its interval, one bound per draft position (stats.acceptance_intervals).
ACCEPTANCE_CI = ("acceptance_by_position_ci_low", "acceptance_by_position_ci_high")
IDENTITY = ["experiment", "run_id", "status", "engine", "method", "drafter", "pair", "dataset", "subset", "tree", "seed"]
FIGURE_COLUMNS = [c for f in (*FIGURES[:6], SCORE, BASELINE_SCORE, SCORE_DIFF, *FIGURES[6:]) for c in ((f.column, *f.ci_columns) if f.interval else (f.column,))]
COLUMNS = [
    *IDENTITY, *(k.column for k in KNOBS), *FIGURE_COLUMNS, "score_name",
    "n_samples", "n_problems", "n_expected", "underpowered", "power_threshold", "ci_level", "ci_method", "intervals",
    "quality_lost", "quality_gained", "quality_sign_p",
    *(f"timing_{t}" for t in TIMING_FIELDS), "acceptance_by_position", *ACCEPTANCE_CI, "hardware", "machine", "date", "git_commit",
    "run_dir", "also_in", "summary_source", "config", "config_id", "dataset_config_id", "extra_knobs",
]
NUMERIC = [
    *(k.column for k in KNOBS if k.numeric), *(c for c in FIGURE_COLUMNS), "power_threshold", "ci_level",
    "quality_lost", "quality_gained", "quality_sign_p",
]
# What each summary field must hold is declared in schema.py (SUMMARY_NUMBERS, ...) and checked,
# with config.yaml and samples.jsonl, by the one reader of a run folder (RunFolder.damage): a
# damaged folder stops the index naming it and the field, or (skip_damaged) is listed as skipped.


# The prompt each paper ran a set under (conf/paper_dataset/<set>.yaml). A run of the set under
# another prompt is a different set for the report: its index `dataset` names the prompt
# ('mgsm (native_cot prompt)'), so no table, figure or claim pairs or averages it with the
# paper's prompt, and the paper sets' means leave it out.
PAPER_PROMPTS = {"mgsm": "native_cot_0813"}


def dataset_name(name: Any, dataset_cfg: Mapping[str, Any]) -> Any:
    """The index's data-set name: the task's, or the task's and its prompt when that is not the
    prompt of the papers' runs (PAPER_PROMPTS)."""
    prompt = dataset_cfg.get("prompt") if isinstance(dataset_cfg, Mapping) else None
    paper = PAPER_PROMPTS.get(str(name))
    if paper is None or prompt is None or prompt == paper:
        return name
    return f"{name} ({prompt} prompt)"


# Keys averaged over inside one configuration: repetitions (seed) and a data set's subsets
# (MGSM languages), which the tables name in their notes.
REPEAT_KEYS = ("seed",)
SUBSET_KEYS = ("dataset.languages",)


def flat_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """A run's resolved config as {dotted key: scalar}, without the keys that do not change
    what a run computes (config.NON_SEMANTIC: paths, logger, ...; dataset.limit/data_dir).
    Lists become JSON text so that every value is hashable and comparable."""
    data = {k: v for k, v in dict(config).items() if k not in NON_SEMANTIC}
    dataset = data.get("dataset")
    if isinstance(dataset, Mapping):
        data["dataset"] = {k: v for k, v in dataset.items() if k not in NON_SEMANTIC_DATASET}
    method = data.get("method")
    if isinstance(method, Mapping) and method.get("uses_drafter") is False:
        data.pop("drafter", None)  # target alone: the drafter section is irrelevant (config.semantic_config)
    out: dict[str, Any] = {}

    def walk(prefix: str, node: Any) -> None:
        if isinstance(node, Mapping):
            for key, value in node.items():
                walk(f"{prefix}{key}.", value)
        elif isinstance(node, (list, tuple)):
            out[prefix[:-1]] = json.dumps(list(node), sort_keys=True, default=str)
        else:
            out[prefix[:-1]] = node

    walk("", data)
    return out


def config_signature(config: Mapping[str, Any], *, exclude: Iterable[str] = (), exclude_prefixes: Iterable[str] = ()) -> str:
    """The sha256 of a flat config without the given keys (and key prefixes, e.g. 'dataset.'),
    all 64 digits: the report averages the runs that share it, and a shortened one (12 digits,
    48 bits) is forged in about 2^24 tries by a folder from someone else, whose numbers would
    then be averaged into another configuration's row (issue 74)."""
    skip, prefixes = set(exclude), tuple(exclude_prefixes)
    kept = {k: v for k, v in config.items() if k not in skip and not k.startswith(prefixes)}
    return hashlib.sha256(json.dumps(kept, sort_keys=True, default=str).encode()).hexdigest()


def config_ids(config: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """(configuration id, data-set settings id) of a flat config; (None, None) without one.

    A table row is one configuration: every resolved key but the repetition (seed) and the data
    set's own keys; its cell on a data set is one setting of that data set's keys (subsets
    averaged). Nothing outside these two ids is ever averaged together."""
    if not config:
        return None, None
    row = config_signature(config, exclude=REPEAT_KEYS, exclude_prefixes=("dataset.",))
    ds = {k: v for k, v in config.items() if k.startswith("dataset.") and k not in SUBSET_KEYS}
    return row, config_signature(ds)


def differing_keys(configs: Iterable[Mapping[str, Any]], *, ignore: Iterable[str] = ()) -> list[str]:
    """The dotted keys whose values are not the same in all of the given flat configs."""
    configs = list(configs)
    skip = set(ignore)
    keys = sorted({k for c in configs for k in c} - skip)
    return [k for k in keys if len({json.dumps(c.get(k), sort_keys=True, default=str) for c in configs}) > 1]


def find_run_dirs(results_dir: str | Path) -> list[Path]:
    """Run folders under results_dir (which may itself be an experiment or a run folder)."""
    root = Path(results_dir)
    if not root.is_dir():
        return []
    found: list[Path] = []

    def walk(path: Path) -> None:
        # os.path.lexists: a run file that is a link still marks a run folder (index_run then
        # skips it with a warning: safe_files refuses links); links to folders are never
        # followed (two links to `.` would make 2^depth paths).
        if any(os.path.lexists(path / name) for name in RUN_FILES):
            found.append(path)
            return  # a run folder's subfolders (wandb/, plots/) are not runs
        try:
            children = sorted(path.iterdir())
        except OSError:
            return
        for child in children:
            if is_real_dir(child) and child.name not in SKIP_DIRS and not child.name.startswith("."):
                walk(child)

    walk(root)
    return found


def read_records(run_dir: str | Path) -> list[dict[str, Any]]:
    """samples.jsonl records exactly as the harness reads them on resume (first line per id;
    a line cut off by a kill is skipped)."""
    return RunFolder(run_dir, create=False).records()


def summary_from_records(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Run figures recomputed from samples (a killed run), with the harness's definitions."""
    from ..measure.metrics import summarize

    def quality(recs: list[dict[str, Any]]) -> dict[str, Any]:
        scored = [r for r in recs if (r.get("score") or {}).get("correct") is not None]
        return {"accuracy": sum(bool(r["score"]["correct"]) for r in scored) / len(scored)} if scored else {}

    return summarize(records, *paired_quality(quality, records))


def _num(value: Any) -> float | None:
    return number(value)


def summary_row(summary: dict[str, Any], config: dict[str, Any] | None, run_dir: Path | None = None) -> dict[str, Any]:
    """One index row from a summary (and the run's config, when known): the columns of
    loosespec_bench/schema.py (figures, their intervals, knobs) and the run's identity."""
    cfg = config or {}
    method_cfg = cfg.get("method") if isinstance(cfg.get("method"), Mapping) else {}
    drafter_cfg = cfg.get("drafter") if isinstance(cfg.get("drafter"), Mapping) else {}
    dataset_cfg = cfg.get("dataset") if isinstance(cfg.get("dataset"), Mapping) else {}
    uses_drafter = method_cfg.get("uses_drafter", True) if method_cfg else summary.get("drafter") is not None
    # The task's headline figure (summary.headline_figure: the one quality choice).
    score_name = headline_figure(summary)
    languages = dataset_cfg.get("languages")
    flat = flat_config(cfg) if cfg else {}
    row: dict[str, Any] = {
        "experiment": summary.get("experiment") or cfg.get("experiment_name") or (run_dir.parent.name if run_dir else None),
        "run_id": run_dir.name if run_dir else None,
        # The decoding engine (engine=hf: our loop; engine=vllm): runs before the engine seam are ours.
        "engine": summary.get("engine") or (cfg.get("engine") or {}).get("name") or "hf",
        "method": summary.get("method") or method_cfg.get("name"),
        "drafter": summary.get("drafter") if "drafter" in summary else (drafter_cfg.get("name") if uses_drafter else None),
        "pair": summary.get("pair") or (cfg.get("pair") or {}).get("name"),
        "dataset": dataset_name(summary.get("dataset") or dataset_cfg.get("name"), dataset_cfg),
        "subset": ",".join(map(str, languages)) if isinstance(languages, list) else None,
        # Tree drafts (EAGLE's dynamic tree, Lookahead): K is then the longest path.
        "tree": bool(summary.get("tree", drafter_cfg.get("tree") or drafter_cfg.get("name") == "lookahead")),
        "seed": summary.get("seed", cfg.get("seed")),
    }
    # Knobs: every declared knob and every undeclared rule knob of the run's config (schema.knobs_of).
    knobs = knobs_of(flat)
    for knob in knobs:
        value = knob_value(flat, knob)
        row[knob.column] = _num(value) if knob.numeric else value
    row["extra_knobs"] = [k.column for k in knobs if k not in KNOBS]
    k = summary.get("k")
    if _num(k) is None and drafter_cfg and uses_drafter:
        k = drafter_cfg.get("k")
    row["K"] = _num(k)
    if _num(summary.get("temperature")) is not None:
        row["temperature"] = _num(summary["temperature"])
    # Figures and their intervals.
    for fig in FIGURES:
        row[fig.column] = _num(summary.get(fig.source))
        if fig.interval:
            row[fig.ci_columns[0]], row[fig.ci_columns[1]] = (_num(summary.get(s)) for s in fig.ci_sources)
    if row["accuracy_diff"] is None and row["accuracy"] is not None and row["baseline_accuracy"] is not None:
        row["accuracy_diff"] = row["accuracy"] - row["baseline_accuracy"]  # the point; the paired interval needs the contract's keys
    row["score_name"] = score_name
    row["score"] = _num(summary.get(score_name)) if score_name else None
    row["score_ci_low"] = _num(summary.get(f"{score_name}_ci_low")) if score_name else None
    row["score_ci_high"] = _num(summary.get(f"{score_name}_ci_high")) if score_name else None
    for end in ("", "_ci_low", "_ci_high"):  # the target alone's, and the paired difference from it
        row[f"baseline_score{end}"] = _num(summary.get(f"baseline_{score_name}{end}")) if score_name else None
        row[f"score_diff{end}"] = _num(summary.get(f"{score_name}_diff{end}")) if score_name else None
    for column, key, kind in RUN_FIELDS:
        value = summary.get(key)
        row[column] = (bool(value) if isinstance(value, bool) else None) if kind == "bool" else (
            _num(value) if kind in ("int", "float") else (value if isinstance(value, str) else None))
    row["intervals"] = has_intervals(summary)
    timing = summary.get("timing") if isinstance(summary.get("timing"), Mapping) else {}
    for t in TIMING_FIELDS:
        value = timing.get(t)
        row[f"timing_{t}"] = value if isinstance(value, (bool, int)) else None
    acc = summary.get("acceptance_by_position")
    row.update(
        n_samples=summary.get("n_samples") if isinstance(summary.get("n_samples"), int) else None,
        n_expected=dataset_cfg.get("limit"),
        acceptance_by_position=[float(x) for x in acc] if isinstance(acc, list) and all(number(x) is not None for x in acc) else [],
        **{key: [None if x is None else float(x) for x in summary[key]] if isinstance(summary.get(key), list) else []
           for key in ACCEPTANCE_CI},
        hardware=summary.get("hardware"),
        machine=machine_label(summary),
        date=summary.get("date"),
        git_commit=summary.get("git_commit"),
        run_dir=str(run_dir) if run_dir else summary.get("run_dir"),
        also_in=None,
    )
    row["config"] = flat
    row["config_id"], row["dataset_config_id"] = config_ids(flat)
    rule = rule_class(str(row["method"]))
    if rule is not None and rule.target_alone:  # the target alone drafts nothing: K = 0
        row["K"] = 0.0
        row["drafter"] = None
    return row


def machine_label(summary: Mapping[str, Any]) -> str | None:
    """The machine a run's speed was measured on: CPU name, signature and vector ISA (summary.
    machine()), e.g. 'AMD EPYC (AuthenticAMD family 25 model 1 stepping 1, AVX2)'. Speed figures
    of two runs are comparable only where these agree. Runs written before the signature was
    recorded read '<name> (signature not recorded)': 'AMD EPYC' alone named two CPUs here."""
    name = summary.get("cpu_model")
    if not isinstance(name, str):
        return None
    signature, isa = summary.get("cpu_signature"), summary.get("cpu_isa")
    if not isinstance(signature, str):
        return f"{name} (signature not recorded)"
    return f"{name} ({signature}, {isa})" if isinstance(isa, str) else f"{name} ({signature})"


def index_run(run_dir: str | Path) -> dict[str, Any]:
    """The index row of one run folder, complete or not. Raises DamagedRun (naming the folder
    and the field) for a folder whose config.yaml, summary.json or samples.jsonl is damaged
    (RunFolder.damage: the checks resume, re-score and compare share)."""
    run_dir = Path(run_dir)
    try:
        check_files(run_dir)  # a link, a FIFO or a device in place of a run file (safe_files)
    except DamagedRun:
        raise
    except ConfigError as err:  # never opened: a damaged folder like any other (strict, or --skip-damaged)
        raise DamagedRun(str(err)) from None
    folder = RunFolder(run_dir, create=False)
    folder.check()
    config = load_config_file(run_dir / RunFolder.CONFIG)[0] or {}
    samples = run_dir / RunFolder.SAMPLES
    summary_path = run_dir / RunFolder.SUMMARY
    summary = load_summary_file(summary_path)[0]
    n_lines = count_finished_lines(samples)
    # A summary older than samples.jsonl was written by an earlier invocation; the later one was
    # killed after appending samples (e.g. a resumed run with a larger dataset.limit).
    stale = summary is not None and samples.exists() and samples.stat().st_mtime_ns > summary_path.stat().st_mtime_ns
    if summary is not None and not (stale and n_lines > (summary.get("n_samples") or 0)):
        row = summary_row(summary, config, run_dir)
        row.update(status="complete", summary_source="summary.json")
        return row
    records = read_records(run_dir) if n_lines else []
    if records:
        row = summary_row(summary_from_records(records), config, run_dir)
        row.update(status="partial", summary_source="samples.jsonl (recomputed: the run did not finish)")
    else:
        row = summary_row({"n_samples": 0}, config, run_dir)
        row.update(status="empty", summary_source="none (no finished sample)")
    newest = max((p.stat().st_mtime for p in (samples, run_dir / RunFolder.CONFIG) if p.exists()), default=None)
    if newest is not None:  # the time of the last write, for lack of the summary's date
        row["date"] = datetime.datetime.fromtimestamp(newest, datetime.timezone.utc).isoformat(timespec="seconds")
    return row


def _drop_duplicate_runs(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per run id: a run folder copied into a second experiment folder (the same run id,
    so the same configuration) is counted once. The copy with the most samples (then the newest)
    stays; the others are named in its `also_in` column and in a warning."""
    by_id: dict[Any, list[dict[str, Any]]] = {}
    for row in rows:
        by_id.setdefault(row.get("run_id"), []).append(row)
    out = []
    for run_id, group in by_id.items():
        if run_id is None or len(group) == 1:
            out += group
            continue
        best = max(group, key=lambda r: ((r.get("n_samples") or 0), str(r.get("date") or "")))
        others = [r["run_dir"] for r in group if r is not best]
        log.warning("run %s is in %d folders: counted once (%s); also in %s", run_id, len(group), best["run_dir"], ", ".join(others))
        best["also_in"] = "; ".join(others)
        out.append(best)
    return out


def check_config_ids(rows: list[dict[str, Any]]) -> None:
    """Runs that share a configuration id hold the same configuration (the id's keys): else a
    ConfigError naming two of the folders, never one table row over both (config_signature)."""
    seen: dict[tuple[str, Any], dict[str, Any]] = {}
    for row in rows:
        cfg = row.get("config") or {}
        for column, keys in (("config_id", {k: v for k, v in cfg.items() if not k.startswith("dataset.") and k not in REPEAT_KEYS}),
                             ("dataset_config_id", {k: v for k, v in cfg.items() if k.startswith("dataset.") and k not in SUBSET_KEYS})):
            if row.get(column) is None:
                continue
            first = seen.setdefault((column, row[column]), {"run_dir": row.get("run_dir"), "keys": keys})
            if first["keys"] != keys:
                raise ConfigError(f"{first['run_dir']} and {row.get('run_dir')} share {column} {row[column]} but their "
                                  "configurations differ; the report would average them as one: remove or rename the "
                                  "folder that is not yours")


def load_index(results_dir: str | Path = "results", experiment: str | None = None, *, skip_damaged: bool = False) -> pd.DataFrame:
    """One row per run folder under results_dir, columns COLUMNS (plus a column per undeclared
    rule knob that some run has); experiment filters by experiment name (fnmatch pattern).
    Sorted by experiment, method, drafter, K, dataset. A run id found in several folders counts
    once. A damaged folder (RunFolder.damage) raises DamagedRun naming it and the field; with
    skip_damaged it is left out with a warning and listed in df.attrs["skipped"] as
    (folder, why) pairs."""
    from fnmatch import fnmatch

    rows = []
    skipped: list[tuple[str, str]] = []
    for run_dir in find_run_dirs(results_dir):
        try:
            rows.append(index_run(run_dir))
        except DamagedRun as err:
            if not skip_damaged:
                raise
            log.warning("%s; skipped (--skip-damaged)", err)
            skipped.append((str(run_dir), str(err)))
    rows = _drop_duplicate_runs(rows)
    check_config_ids(rows)
    extra = list(dict.fromkeys(c for r in rows for c in r.get("extra_knobs") or []))
    df = pd.DataFrame(rows, columns=[*COLUMNS, *(c for c in extra if c not in COLUMNS)])
    for col in NUMERIC:  # None -> NaN, so that means and sorting work column-wise
        df[col] = pd.to_numeric(df[col], errors="coerce")
    if experiment:
        df = df[df["experiment"].astype(str).map(lambda e: fnmatch(e, experiment))]
    if not df.empty:
        df = df.sort_values(["experiment", "method", "drafter", "K", "pair", "dataset", "run_id"], na_position="first", kind="stable")
    df = df.reset_index(drop=True)
    df.attrs["skipped"] = skipped
    return df


def index_to_csv(df: pd.DataFrame, path: str | Path) -> Path:
    """The index as CSV (list columns as JSON)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    out = df.copy()
    out["config"] = out["config"].map(lambda v: json.dumps(v, sort_keys=True, default=str) if isinstance(v, dict) else "")
    for col in ("acceptance_by_position", *ACCEPTANCE_CI):
        out[col] = out[col].map(lambda v: json.dumps([None if x is None else round(x, 6) for x in v]) if isinstance(v, list) else "")
    out["extra_knobs"] = out["extra_knobs"].map(lambda v: ",".join(v) if isinstance(v, list) else "")
    with atomic_output(path) as tmp:  # never through a link, never half a file (safe_files)
        out.to_csv(tmp, index=False)
    return path
