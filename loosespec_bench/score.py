"""Score again, without generating: `python -m loosespec_bench.score PATH [options]`.

PATH is either
- a result folder (config.yaml + samples.jsonl [+ summary.json]): every record's score (and its
  baseline's) is recomputed with the current scorer, samples.jsonl is rewritten (new file,
  fsync, atomic rename; the old one kept as samples.jsonl.bak-<time>; a line that cannot be
  read, e.g. one cut off by a kill, is skipped with a warning and stays only in the backup),
  under the folder's lock (refused while a run writes the folder), and the summary's
  quality fields (accuracy, retention and its interval, ...) are recomputed, the speed fields
  left as they were measured; or
- a JSONL of completions for any data set (`--dataset` required): one object per line with the
  sample id (`id`, `task_id` or `question_id`) and the answer (`completion`, `output_text`, a
  list of answers per turn in `completions`/`turns`, or FastChat's `choices[0].turns`).
  Writes <name>.scored.jsonl (each line with its `score`) and <name>.summary.json.

Options: --dataset NAME (a conf/dataset file; for folders, overrides the run's), --data-dir DIR
(default: the run's, else LOOSESPEC_DATA_DIR), --set KEY=VALUE for dataset settings (e.g.
--set judge.kind=openai --set judge.url=http://localhost:8000/v1), --workers N (parallel
sandboxed programs for HumanEval).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from .baselines import judge_against_store
from .errors import ConfigError
from .run_folder import RunFolder, atomic_write, first_per_id, read_jsonl, utc_stamp
from .summary import DEFAULT_POWER_THRESHOLD, build_summary
from .timing import timing_settings  # the run's own settings, defaults for old configs
from .tasks import Sample, Task

RETENTION_KEYS = ("retention",)  # plus every key stats.retention_summary writes (retention_*)
log = logging.getLogger(__name__)


def build_task(node: DictConfig, overrides: list[str], workers: int | None = None) -> Task:
    """Instantiate a dataset config node (as build.build_task) after `--set` overrides, the
    node checked as a run's pre-check checks it (checks.check_group_node)."""
    from .build import instantiate
    from .checks import check_group_node, one_line

    if workers and "sandbox" in node:
        overrides = [*overrides, f"sandbox.workers={workers}"]
    for item in overrides:
        key, sep, _ = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--set {item!r}: expected KEY=VALUE, e.g. --set judge.kind=openai")
    try:
        data = OmegaConf.to_container(node, resolve=True)
        if overrides:
            merged = OmegaConf.merge(OmegaConf.create(data), OmegaConf.from_dotlist(overrides))
            data = OmegaConf.to_container(merged, resolve=True)
    except ConfigError:
        raise
    except Exception as err:
        raise ConfigError(f"the dataset settings cannot be read: {one_line(err)}") from None
    if not isinstance(data, dict):
        raise ConfigError("the dataset node is not a mapping of settings")
    check_group_node("dataset", data, require=False)
    task = instantiate(data)
    return task


def compose_dataset(name: str, data_dir: str | None) -> DictConfig:
    """conf/dataset/<name>.yaml resolved within the root config (for ${paths...} and ${pair...})."""
    from hydra import compose, initialize_config_dir

    from .config import CONF_DIR, check_group_overrides

    check_group_overrides([f"dataset={name}"])
    overrides = [f"dataset={name}"]
    if data_dir:
        overrides.append(f"paths.data_dir={data_dir}")
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose(config_name="config", overrides=overrides)
    OmegaConf.resolve(cfg)
    return cfg.dataset


def _load_config(path: Path) -> DictConfig | None:
    """A folder's config.yaml; unreadable, not a mapping or without a dataset node: ConfigError."""
    if not path.exists():
        return None
    try:
        cfg = OmegaConf.load(path)
    except Exception as err:
        raise ConfigError(f"{path} is not readable YAML ({' '.join(str(err).split())[:160]}); pass --dataset NAME") from None
    if not isinstance(cfg, DictConfig) or not isinstance(cfg.get("dataset"), DictConfig):
        raise ConfigError(f"{path} holds no dataset settings (not a run's config.yaml); pass --dataset NAME")
    return cfg


def completions_of(side: dict[str, Any]) -> list[str]:
    """The answers of one contestant's record part, one per turn."""
    if side.get("turns"):
        return [t["output_text"] for t in side["turns"]]
    return [side["output_text"]]


def samples_by_id(task: Task) -> dict[str, Sample]:
    return {s.id: s for s in task.load_all()}


def find_sample(samples: dict[str, Sample], key: Any) -> Sample:
    key = str(key)
    if key in samples:
        return samples[key]
    # A bare index or number ("0" for "gsm8k/0", 81 for MT-bench's "81").
    hits = [s for k, s in samples.items() if k.rsplit("/", 1)[-1] == key]
    if len(hits) == 1:
        return hits[0]
    raise ConfigError(f"no sample with id {key!r} in this data set (ids look like {next(iter(samples), '?')!r})")


def rescore_records(task: Task, samples: dict[str, Sample], records: list[dict[str, Any]], where: str = "") -> list[dict[str, Any]]:
    """New records with `score` (and `baseline.score`, `baseline_timed.score`) recomputed; everything else kept. A
    record whose id the data set does not have is kept as it was, with a warning: one stray
    record never blocks a folder, and a re-score never drops one."""
    jobs: list[tuple[dict[str, Any], Sample, list[str]]] = []
    out = []
    for rec in records:
        rec = json.loads(json.dumps(rec))  # deep copy: the caller keeps the old records
        try:
            sample = find_sample(samples, rec["id"])
        except ConfigError as err:
            log.warning("%s: %s; record kept with its old score", where, err)
            out.append(rec)
            continue
        jobs.append((rec, sample, completions_of(rec)))
        for side in ("baseline", "baseline_timed"):  # the fresh target alone of a shared-store run too
            if rec.get(side):
                jobs.append((rec[side], sample, completions_of(rec[side])))
        out.append(rec)
    scores = task.score_batch([j[1] for j in jobs], [j[2] for j in jobs])
    for (side, _, _), score in zip(jobs, scores):
        side["score"] = score
    return out


def quality_fields(task: Task, records: list[dict[str, Any]]) -> dict[str, Any]:
    """Every summary field that depends on scores (as app.run computes them)."""
    quality = task.aggregate(records)
    baseline_quality = task.aggregate([{**r, **r["baseline"]} for r in records if r.get("baseline")])
    out = dict(quality)
    for key, value in baseline_quality.items():
        out[f"baseline_{key}"] = value
    return out


def rescore_folder(
    folder: Path, *, dataset: str | None, data_dir: str | None, overrides: list[str], workers: int | None = None,
    summary_only: bool = False,
) -> dict[str, Any]:
    """Re-score a result folder's records and rebuild its summary.json (the old files kept as
    *.bak-<stamp>). summary_only: keep the records' scores and rebuild the summary alone, so that
    figures the harness added since the run (e.g. quality_lost / quality_gained) appear without
    running any scorer again."""
    samples_path = folder / RunFolder.SAMPLES
    if not samples_path.exists():
        raise ConfigError(f"{folder} has no {RunFolder.SAMPLES}: not a result folder")
    if samples_path.is_dir():
        raise ConfigError(f"{samples_path} is a folder, not the run's samples file")
    config_path = folder / RunFolder.CONFIG
    cfg = _load_config(config_path)
    if dataset or cfg is None:
        if not dataset:
            raise ConfigError(f"{folder} has no config.yaml: pass --dataset NAME")
        node = compose_dataset(dataset, data_dir or os.environ.get("LOOSESPEC_DATA_DIR"))
    else:
        node = cfg.dataset
        if data_dir:
            node.data_dir = data_dir
        elif not node.get("data_dir") and os.environ.get("LOOSESPEC_DATA_DIR"):
            node.data_dir = os.environ["LOOSESPEC_DATA_DIR"]
    task = build_task(node, overrides, workers)
    task.preflight()  # e.g. the sandbox runs an empty program under these settings

    lock_path = folder / RunFolder.LOCK
    had_lock = lock_path.exists()
    try:
        with RunFolder(folder, create=False) as run_folder:
            return _rescore_locked(run_folder, task, cfg, rescore=not summary_only)
    except ConfigError as err:
        from .run_folder import FolderLocked

        if not had_lock and not isinstance(err, FolderLocked):
            lock_path.unlink(missing_ok=True)  # a refused re-score leaves no lock file behind
        raise
    except OSError as err:  # a read-only or full disk: the old files are untouched
        if not had_lock:
            lock_path.unlink(missing_ok=True)
        raise ConfigError(f"{folder}: cannot write the re-scored files ({err.strerror or err}); nothing was changed") from None


def _rescore_locked(run_folder: RunFolder, task: Task, cfg: DictConfig | None, *, rescore: bool = True) -> dict[str, Any]:
    folder = run_folder.path
    # The lock: a run still appending (or another re-score) would lose samples to the rewrite.
    run_folder.lock("re-score")
    lines = run_folder.lines()  # every readable line; an unreadable one is skipped with a warning
    if not lines:
        raise ConfigError(f"{folder / RunFolder.SAMPLES} has no readable sample record; nothing to re-score (the file is left as it is)")
    # Records from before quality was judged against the shared store on every sample: their
    # timed samples take the store's target alone for quality, the fresh one kept for speed.
    judged = 0
    if cfg is not None and cfg.get("baseline") == "shared":
        stores = cfg.get("paths", {}).get("baselines_dir")
        lines, judged = judge_against_store(lines, Path(stores).expanduser() if stores else folder.parent.parent / "_baselines")
    new_lines = rescore_records(task, samples_by_id(task), lines, where=str(folder / RunFolder.SAMPLES)) if rescore else lines
    if len(new_lines) != len(lines):
        raise ConfigError(f"{folder}: the re-score would drop {len(lines) - len(new_lines)} record(s); nothing was changed")

    stamp = utc_stamp()
    # The old file kept as samples.jsonl.bak-<stamp>; a summary-only rebuild leaves the records
    # untouched unless they moved onto the store.
    backup = run_folder.rewrite_samples(new_lines, stamp) if rescore or judged else None

    # The summary: drop the old score-derived fields, recompute them from the new scores.
    old_records = first_per_id(lines)
    records = first_per_id(new_lines)
    old = run_folder.read_summary() or {}  # a damaged one (schema.summary_problems) is rebuilt, not carried over
    run_folder.backup(RunFolder.SUMMARY, stamp)  # whatever it held, damaged or not
    stale = set(quality_fields(task, old_records)) | {k for k in old if k in RETENTION_KEYS or k.startswith("retention_")}
    summary = {k: v for k, v in old.items() if k not in stale}
    seed = int(cfg.seed) if cfg is not None and "seed" in cfg else 0
    # Every figure and its interval again (speed ones included: the same records give the
    # same points; folders from before the intervals gain them). Old records have no
    # timing data: the summary's timing says "not recorded".
    summary.update(build_summary(
        task, records, seed=seed,
        power_threshold=float(cfg.get("power_threshold", DEFAULT_POWER_THRESHOLD)) if cfg is not None else DEFAULT_POWER_THRESHOLD,
        timing_tolerance=timing_settings(cfg)[0] if cfg is not None else None,
    ))
    summary.setdefault("dataset", task.name)
    summary["rescored"] = {"at": stamp, "by": "loosespec_bench.score", "backup": backup.name if backup else None,
                           "scores": "recomputed" if rescore else "kept (--summary-only)",
                           **({"judged_against_store": judged} if judged else {}),
                           **({"before": old["rescored"]} if isinstance(old.get("rescored"), dict) else {})}
    run_folder.write_summary(summary)
    return summary


def _line_id(row: dict[str, Any]) -> Any:
    for key in ("id", "task_id", "question_id"):
        if key in row:
            return row[key]
    raise ConfigError(f"a completion line has no id (id, task_id or question_id): {json.dumps(row)[:120]}")


def _line_completions(row: dict[str, Any]) -> list[str]:
    for key in ("completions", "turns"):
        if key in row:
            value = row[key]
            if not isinstance(value, list) or not value or not all(isinstance(x, str) for x in value):
                raise ConfigError(f"{key!r} must be a non-empty list of answers (text), one per turn")
            return list(value)
    for key in ("completion", "output_text", "response"):
        if isinstance(row.get(key), str):
            return [row[key]]
    if "choices" in row:  # FastChat model_answer files
        choices = row["choices"]
        turns = choices[0].get("turns") if isinstance(choices, list) and choices and isinstance(choices[0], dict) else None
        if not isinstance(turns, list) or not turns or not all(isinstance(x, str) for x in turns):
            raise ConfigError("'choices' must be FastChat's [{\"turns\": [answer, ...]}]")
        return list(turns)
    raise ConfigError(f"no answer (completion, completions, output_text): {json.dumps(row)[:120]}")


def score_jsonl(
    path: Path, *, dataset: str | None, data_dir: str | None, overrides: list[str], workers: int | None = None
) -> dict[str, Any]:
    if not dataset:
        raise ConfigError("scoring a JSONL of completions needs --dataset NAME")
    task = build_task(compose_dataset(dataset, data_dir or os.environ.get("LOOSESPEC_DATA_DIR")), overrides, workers)
    task.preflight()
    samples = samples_by_id(task)
    numbered = list(read_jsonl(path, run_file=False))
    if not numbered:
        raise ConfigError(f"{path} holds no readable completion line (one JSON object per line)")
    rows, picked, answers = [], [], []
    for lineno, row in numbered:
        try:
            picked.append(find_sample(samples, _line_id(row)))
            answers.append(_line_completions(row))
        except ConfigError as err:
            raise ConfigError(f"{path} line {lineno}: {err}") from None
        rows.append(row)
    scores = task.score_batch(picked, answers)
    records = [
        {**row, "id": s.id, "meta": s.meta, "score": score} for row, s, score in zip(rows, picked, scores)
    ]
    stem = path.name[: -len(".jsonl")] if path.name.endswith(".jsonl") else path.name
    atomic_write(path.with_name(f"{stem}.scored.jsonl"), "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))
    summary = {"dataset": task.name, "n_samples": len(records), "source": str(path), **task.aggregate(records)}
    atomic_write(path.with_name(f"{stem}.summary.json"), json.dumps(summary, indent=2, ensure_ascii=False) + "\n")
    return summary


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--workers {text!r} must be an integer >= 1") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"--workers {value} must be an integer >= 1")
    return value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m loosespec_bench.score", description=__doc__.split("\n\n")[0])
    parser.add_argument("path", type=Path, help="a result folder, or a JSONL of completions")
    parser.add_argument("--dataset", help="data set name (conf/dataset/NAME.yaml); required for a JSONL")
    parser.add_argument("--data-dir", help="local data directory (default: the run's, else LOOSESPEC_DATA_DIR)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="dataset setting, repeatable")
    parser.add_argument("--workers", type=_positive_int, help="parallel sandboxed programs (HumanEval)")
    parser.add_argument("--summary-only", action="store_true",
                        help="a result folder: keep its scores, rebuild summary.json from the records (new summary fields)")

    def error(message: str) -> None:  # one line, exit 2, as every other bad input
        print(f"error: {message} (--help lists the options)", file=sys.stderr)
        sys.exit(2)

    parser.error = error  # type: ignore[method-assign]
    args = parser.parse_args(argv)
    kwargs = dict(dataset=args.dataset, data_dir=args.data_dir, overrides=list(args.set), workers=args.workers)
    try:
        if args.path.is_dir():
            summary = rescore_folder(args.path, **kwargs, summary_only=args.summary_only)
        elif args.path.is_file():
            summary = score_jsonl(args.path, **kwargs)
        else:
            raise ConfigError(f"{args.path} is neither a result folder nor a file")
    except OSError as err:  # a read-only or full disk writing the scored files
        print(f"error: {args.path}: cannot write the results ({err.strerror or err})", file=sys.stderr)
        return 2
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    shown = {k: v for k, v in summary.items() if not isinstance(v, (list, dict)) or k.endswith("by_cell")}
    print(json.dumps(shown, indent=2, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
