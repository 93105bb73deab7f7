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
import os
import sys
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from .errors import ConfigError
from .run_folder import RunFolder, atomic_write, first_per_id, read_jsonl, utc_stamp
from .summary import DEFAULT_POWER_THRESHOLD, build_summary
from .timing import timing_settings  # the run's own settings, defaults for old configs
from .tasks import Sample, Task

RETENTION_KEYS = ("retention",)  # plus every key stats.retention_summary writes (retention_*)


def build_task(node: DictConfig, overrides: list[str], workers: int | None = None) -> Task:
    """Instantiate a dataset config node (as build.build_task) after `--set` overrides."""
    from .build import instantiate

    if workers and "sandbox" in node:
        overrides = [*overrides, f"sandbox.workers={workers}"]
    if overrides:
        node = OmegaConf.merge(node, OmegaConf.from_dotlist(overrides))
    return instantiate(node)


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


def rescore_records(task: Task, samples: dict[str, Sample], records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """New records with `score` (and `baseline.score`) recomputed; everything else kept."""
    jobs: list[tuple[dict[str, Any], Sample, list[str]]] = []
    out = []
    for rec in records:
        rec = json.loads(json.dumps(rec))  # deep copy: the caller keeps the old records
        sample = find_sample(samples, rec["id"])
        jobs.append((rec, sample, completions_of(rec)))
        if rec.get("baseline"):
            jobs.append((rec["baseline"], sample, completions_of(rec["baseline"])))
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
    folder: Path, *, dataset: str | None, data_dir: str | None, overrides: list[str], workers: int | None = None
) -> dict[str, Any]:
    samples_path = folder / RunFolder.SAMPLES
    if not samples_path.exists():
        raise ConfigError(f"{folder} has no {RunFolder.SAMPLES}: not a result folder")
    config_path = folder / RunFolder.CONFIG
    cfg = OmegaConf.load(config_path) if config_path.exists() else None
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

    with RunFolder(folder, create=False) as run_folder:
        # The lock: a run still appending (or another re-score) would lose samples to the rewrite.
        run_folder.lock("re-score")
        lines = run_folder.lines()  # every readable line; an unreadable one is skipped with a warning
        new_lines = rescore_records(task, samples_by_id(task), lines)

        stamp = utc_stamp()
        backup = run_folder.rewrite_samples(new_lines, stamp)  # the old file kept as samples.jsonl.bak-<stamp>

        # The summary: drop the old score-derived fields, recompute them from the new scores.
        old_records = first_per_id(lines)
        records = first_per_id(new_lines)
        old = run_folder.read_summary() or {}
        if old:
            run_folder.backup(RunFolder.SUMMARY, stamp)
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
        summary["rescored"] = {"at": stamp, "by": "loosespec_bench.score", "backup": backup.name}
        run_folder.write_summary(summary)
    return summary


def _line_id(row: dict[str, Any]) -> Any:
    for key in ("id", "task_id", "question_id"):
        if key in row:
            return row[key]
    raise ConfigError(f"a completion line has no id (id, task_id or question_id): {json.dumps(row)[:120]}")


def _line_completions(row: dict[str, Any]) -> list[str]:
    for key in ("completions", "turns"):
        if isinstance(row.get(key), list):
            return [str(x) for x in row[key]]
    for key in ("completion", "output_text", "response"):
        if isinstance(row.get(key), str):
            return [row[key]]
    if row.get("choices"):  # FastChat model_answer files
        return list(row["choices"][0]["turns"])
    raise ConfigError(f"a completion line has no answer (completion, completions, output_text): {json.dumps(row)[:120]}")


def score_jsonl(
    path: Path, *, dataset: str | None, data_dir: str | None, overrides: list[str], workers: int | None = None
) -> dict[str, Any]:
    if not dataset:
        raise ConfigError("scoring a JSONL of completions needs --dataset NAME")
    task = build_task(compose_dataset(dataset, data_dir or os.environ.get("LOOSESPEC_DATA_DIR")), overrides, workers)
    samples = samples_by_id(task)
    rows = [row for _, row in read_jsonl(path, run_file=False)]
    picked = [find_sample(samples, _line_id(r)) for r in rows]
    scores = task.score_batch(picked, [_line_completions(r) for r in rows])
    records = [
        {**row, "id": s.id, "meta": s.meta, "score": score} for row, s, score in zip(rows, picked, scores)
    ]
    stem = path.name[: -len(".jsonl")] if path.name.endswith(".jsonl") else path.name
    atomic_write(path.with_name(f"{stem}.scored.jsonl"), "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))
    summary = {"dataset": task.name, "n_samples": len(records), "source": str(path), **task.aggregate(records)}
    atomic_write(path.with_name(f"{stem}.summary.json"), json.dumps(summary, indent=2, ensure_ascii=False) + "\n")
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m loosespec_bench.score", description=__doc__.split("\n\n")[0])
    parser.add_argument("path", type=Path, help="a result folder, or a JSONL of completions")
    parser.add_argument("--dataset", help="data set name (conf/dataset/NAME.yaml); required for a JSONL")
    parser.add_argument("--data-dir", help="local data directory (default: the run's, else LOOSESPEC_DATA_DIR)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="dataset setting, repeatable")
    parser.add_argument("--workers", type=int, help="parallel sandboxed programs (HumanEval)")
    args = parser.parse_args(argv)
    kwargs = dict(dataset=args.dataset, data_dir=args.data_dir, overrides=list(args.set), workers=args.workers)
    try:
        if args.path.is_dir():
            summary = rescore_folder(args.path, **kwargs)
        elif args.path.is_file():
            summary = score_jsonl(args.path, **kwargs)
        else:
            raise ConfigError(f"{args.path} is neither a result folder nor a file")
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    shown = {k: v for k, v in summary.items() if not isinstance(v, (list, dict)) or k.endswith("by_cell")}
    print(json.dumps(shown, indent=2, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
