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
(default: LOOSESPEC_DATA_DIR; never the folder's own path), --set KEY=VALUE for dataset settings
(e.g. --set judge.kind=openai --set judge.url=http://localhost:8000/v1), --workers N (parallel
sandboxed programs for HumanEval), --baselines-dir DIR (a shared-baseline run's stores).

A folder is data (it may come from someone else): its task and prompt settings are read and
checked against this installation's declared settings for that task; the class, the sandbox's
level and (higher) limits, the judge, lm-eval's include_path and NLTK's data come from this
installation and --set only (`trusted_dataset_node`; docs/sandbox.md has the threat model).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from .store.baselines import judge_against_store
from .errors import ConfigError
from .store.run_folder import RunFolder, atomic_write, check_files, first_per_id, read_jsonl, summary_json, utc_stamp
from .safe_files import check_regular, read_text
from .store.summary import build_summary, paired_quality
from .settings.run_settings import RootParams  # the defaults a config from before a key existed reads
from .measure.timing import timing_settings  # the run's own settings, defaults for old configs
from .tasks import Sample, Task

RETENTION_KEYS = ("retention",)  # plus every key stats.retention_summary writes (retention_*)
log = logging.getLogger(__name__)


def build_task(node: DictConfig, overrides: list[str], workers: int | None = None) -> Task:
    """build.build_task of a stored dataset node after `--set` overrides, the node checked as a
    run's pre-check checks it (checks.check_group_node)."""
    from . import build
    from .settings.checks import check_group_node

    return build.build_task({"dataset": node}, overrides, workers=workers,
                            check=lambda data: check_group_node("dataset", data, require=False))


def compose_dataset(name: str, data_dir: str | None) -> DictConfig:
    """conf/dataset/<name>.yaml resolved within the root config (for ${paths...} and ${pair...})."""
    from hydra import compose, initialize_config_dir

    from .settings.config import CONF_DIR, check_group_overrides

    check_group_overrides([f"dataset={name}"])
    overrides = [f"dataset={name}"]
    if data_dir:
        overrides.append(f"paths.data_dir={data_dir}")
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose(config_name="config", overrides=overrides)
    OmegaConf.resolve(cfg)
    return cfg.dataset


def _calibration(cfg: Any, old: dict[str, Any], folder: Path | None = None) -> dict[str, Any]:
    """build_summary's calibration arguments: the stored one for the run's pair on this
    machine (calibrate.find_calibration), or none with the reason. A run timed on another CPU
    than this one gets none: this machine's costs would not predict that run's times."""
    if cfg is None or not cfg.get("pair") or not cfg.get("paths"):
        return {"calibration": None, "calibration_source": "no run config to find a calibration for"}
    from .calibrate import find_calibration
    from .store.summary import machine

    ran_on = old.get("cpu_signature")
    if ran_on is not None and ran_on != machine()["cpu_signature"]:
        return {"calibration": None, "calibration_source": f"the run was timed on another CPU ({ran_on})"}

    # The results folder the run folder sits in (results/<experiment>/<run id>), never the
    # folder's own paths.results_dir (data from elsewhere: it could name any folder); the
    # calibration must then match the run's signature (store/declarations.py).
    root = folder.resolve().parent.parent if folder is not None else Path(str(cfg.paths.results_dir))
    threads = cfg.get("threads")
    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or not 1 <= threads <= 4096):
        return {"calibration": None, "calibration_source": f"threads={str(threads)[:40]!r} in the run's config is not a thread count"}
    try:
        cal, source = find_calibration(root, cfg.pair, int(threads) if threads else None)
    except (ConfigError, ValueError, TypeError, KeyError, AttributeError) as err:  # a pair node that is not one
        return {"calibration": None, "calibration_source": f"no calibration: {str(err)[:200]}"}
    return {"calibration": cal, "calibration_source": source}


def _load_config(path: Path) -> DictConfig | None:
    """A folder's config.yaml; unreadable, not a mapping or without a dataset node: ConfigError.
    Read as data: never through a link, never a FIFO (safe_files), YAML without tags."""
    if not check_regular(path):
        return None
    try:
        text = read_text(path)
        cfg = OmegaConf.create(text)
    except ConfigError:
        raise
    except Exception as err:
        raise ConfigError(f"{path} is not readable YAML ({' '.join(str(err).split())[:160]}); pass --dataset NAME") from None
    if not isinstance(cfg, DictConfig) or not isinstance(cfg.get("dataset"), DictConfig):
        raise ConfigError(f"{path} holds no dataset settings (not a run's config.yaml); pass --dataset NAME")
    return cfg


# --- the trust boundary: a run folder is data -------------------------------------------------
# A folder from someone else names its task and the prompt settings that produced its records;
# those are data, checked against the installed task's declared settings. What executes code or
# reaches out comes from this installation and the command line (--set), never from the folder:
# the class (_target_), the sandbox's level and limits, the judge (kind, endpoint, key variable,
# model), lm-eval's include_path (task YAMLs with !function import Python), NLTK's data (pickles).
# A folder that asks for more than the installation's defaults gets one error line naming the key.
MUST_MATCH = ("include_path", "nltk_data")  # equal to the installation's (after --set), else refused
LOCAL_ONLY = ("data_dir",)  # where this machine keeps its data: --data-dir / LOOSESPEC_DATA_DIR, never the folder's
SANDBOX_LIMITS = ("timeout_s", "cpu_s", "memory_mb", "max_procs", "file_mb", "tmp_mb")  # the folder's when not above ours
SANDBOX_LOCAL = ("workers", "hide_paths")  # this machine's


def _packaged_datasets() -> dict[str, dict[str, Any]]:
    """conf/dataset/<name>.yaml of this installation: name -> its (unresolved) settings."""
    from .settings.config import CONF_DIR

    out = {}
    for path in sorted((CONF_DIR / "dataset").glob("*.yaml")):
        data = OmegaConf.to_container(OmegaConf.load(path), resolve=False)
        if isinstance(data, dict):
            out[path.stem] = data
    return out


def _refuse(key: str, value: Any, why: str) -> ConfigError:
    shown = json.dumps(value, default=str)[:120]
    return ConfigError(f"the run folder's config.yaml sets dataset.{key}={shown}: {why}")


def _no_code_keys(node: Any, prefix: str = "") -> None:
    """No `_target_` below the top and no interpolation anywhere: a run writes its config resolved."""
    if isinstance(node, dict):
        for key, value in node.items():
            if not isinstance(key, str):
                raise _refuse(f"{prefix}{key}", value, "keys must be names")
            if key == "_target_" and prefix:
                raise _refuse(f"{prefix}{key}", value, "a run folder cannot name classes; settings are data")
            _no_code_keys(value, f"{prefix}{key}.")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            _no_code_keys(value, f"{prefix.rstrip('.')}[{i}].")
    elif isinstance(node, str) and "${" in node:
        raise _refuse(prefix.rstrip("."), node, "a run's config.yaml is written resolved; an interpolation (${...}) "
                      "in a folder from elsewhere is refused (it could read this machine's environment)")


def folder_task_name(node: dict[str, Any]) -> str:
    """The installed conf/dataset file a folder's dataset node was made from, by its class."""
    packaged = _packaged_datasets()
    target, name = node.get("_target_"), node.get("name")
    if target is None:
        hits = [k for k, v in packaged.items() if v.get("name") == name]
    else:
        hits = [k for k, v in packaged.items() if v.get("_target_") == target]
        if len(hits) > 1:
            hits = [k for k in hits if packaged[k].get("name") == name] or hits[:1]
    if not hits:
        raise _refuse("_target_" if target is not None else "name", target if target is not None else name,
                      f"not a data set of this installation ({', '.join(sorted(packaged))}); pass --dataset NAME")
    return hits[0]


def trusted_dataset_node(folder_node: Any, data_dir: str | None, overrides: list[str]) -> DictConfig:
    """The dataset node a folder's records are re-scored under: this installation's conf for the
    folder's task (with --set), its prompt settings taken from the folder (checked by the
    task's declared settings in build_task), nothing that executes or reaches out."""
    folder = OmegaConf.to_container(folder_node, resolve=False) if OmegaConf.is_config(folder_node) else folder_node
    if not isinstance(folder, dict):
        raise ConfigError("the run folder's config.yaml: dataset is not a mapping of settings; pass --dataset NAME")
    _no_code_keys(folder)
    conf = folder_task_name(folder)
    # data_dir None: the config's own default ($LOOSESPEC_DATA_DIR; null = the hub).
    base = OmegaConf.to_container(compose_dataset(conf, data_dir), resolve=True)
    assert isinstance(base, dict)
    if base.get("_target_") != folder.get("_target_", base.get("_target_")):
        raise _refuse("_target_", folder.get("_target_"), f"this installation's {conf} is {base.get('_target_')}")
    ours = base
    if overrides:  # the command line's settings are ours too
        for item in overrides:
            key, sep, _ = item.partition("=")
            if not sep or not key.strip():
                raise ConfigError(f"--set {item!r}: expected KEY=VALUE, e.g. --set judge.kind=openai")
        try:
            merged = OmegaConf.merge(OmegaConf.create(base), OmegaConf.from_dotlist(overrides))
            ours = OmegaConf.to_container(merged, resolve=True)
        except Exception as err:
            from .errors import one_line

            raise ConfigError(f"--set {' '.join(overrides)[:120]}: cannot be applied to the dataset settings ({one_line(err)})") from None
        assert isinstance(ours, dict)
    out = dict(base)
    for key, value in folder.items():
        if key in ("_target_", *LOCAL_ONLY):
            continue
        if key in MUST_MATCH:
            if value != ours.get(key):
                raise _refuse(key, value, f"this installation uses {json.dumps(ours.get(key))}; a run folder cannot choose "
                              f"it (it loads code or data that runs); pass --set {key}=... yourself if you trust it")
            continue
        if key == "judge":
            mine = ours.get("judge") or {}
            if not isinstance(value, dict):
                raise _refuse(key, value, "not a mapping of judge settings")
            for sub, v in value.items():
                if v != mine.get(sub):
                    raise _refuse(f"judge.{sub}", v, f"this installation's (with --set) is {json.dumps(mine.get(sub))}; "
                                  "a run folder cannot choose the judge, its endpoint or its key; "
                                  f"pass --set judge.{sub}=... yourself to re-score with it")
            continue
        if key == "sandbox":
            mine = dict(ours.get("sandbox") or {})
            if not isinstance(value, dict):
                raise _refuse(key, value, "not a mapping of sandbox settings")
            taken = dict(base.get("sandbox") or {})
            for sub, v in value.items():
                if sub in SANDBOX_LOCAL:
                    continue
                if sub in SANDBOX_LIMITS and sub in mine:
                    try:
                        above = float(v) > float(mine[sub])
                    except (TypeError, ValueError):
                        raise _refuse(f"sandbox.{sub}", v, "not a number") from None
                    if above:
                        raise _refuse(f"sandbox.{sub}", v, f"above this installation's {mine[sub]}; a run folder cannot "
                                      f"raise the sandbox's limits; pass --set sandbox.{sub}={v} yourself if you want it")
                    taken[sub] = v  # the run's own (tighter) limit: its scores are reproduced
                    continue
                if sub == "allow_same_user" and v is False:
                    continue
                if v != mine.get(sub):
                    raise _refuse(f"sandbox.{sub}", v, f"this installation's (with --set) is {json.dumps(mine.get(sub))}; "
                                  "a run folder cannot choose how its records' code is isolated")
            out["sandbox"] = taken
            continue
        out[key] = value  # a prompt or selection setting: data, checked against the task's declared settings
    return OmegaConf.create(out)


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
    quality, baseline_quality = paired_quality(task.aggregate, records)
    out = dict(quality)
    for key, value in baseline_quality.items():
        out[f"baseline_{key}"] = value
    return out


def rescore_folder(
    folder: Path, *, dataset: str | None, data_dir: str | None, overrides: list[str], workers: int | None = None,
    summary_only: bool = False, baselines_dir: str | None = None,
) -> dict[str, Any]:
    """Re-score a result folder's records and rebuild its summary.json (the old files kept as
    *.bak-<stamp>). summary_only: keep the records' scores and rebuild the summary alone, so that
    figures the harness added since the run (e.g. quality_lost / quality_gained) appear without
    running any scorer again."""
    check_files(folder)  # links, FIFOs, devices in place of its files: refused before anything is read or written
    samples_path = folder / RunFolder.SAMPLES
    if not check_regular(samples_path):
        raise ConfigError(f"{folder} has no {RunFolder.SAMPLES}: not a result folder")
    config_path = folder / RunFolder.CONFIG
    cfg = _load_config(config_path)
    if dataset or cfg is None:
        if not dataset:
            raise ConfigError(f"{folder} has no config.yaml: pass --dataset NAME")
        node = compose_dataset(dataset, data_dir)
    else:
        node = trusted_dataset_node(cfg.dataset, data_dir, overrides)  # the folder's settings are data
    task = build_task(node, overrides, workers)
    task.preflight()  # e.g. the sandbox runs an empty program under these settings

    lock_path = folder / RunFolder.LOCK
    had_lock = lock_path.exists()
    try:
        with RunFolder(folder, create=False) as run_folder:
            return _rescore_locked(run_folder, task, cfg, rescore=not summary_only, baselines_dir=baselines_dir)
    except ConfigError as err:
        from .store.run_folder import FolderLocked

        if not had_lock and not isinstance(err, FolderLocked):
            lock_path.unlink(missing_ok=True)  # a refused re-score leaves no lock file behind
        raise
    except OSError as err:  # a read-only or full disk: the old files are untouched
        if not had_lock:
            lock_path.unlink(missing_ok=True)
        raise ConfigError(f"{folder}: cannot write the re-scored files ({err.strerror or err}); nothing was changed") from None


def _rescore_locked(run_folder: RunFolder, task: Task, cfg: DictConfig | None, *, rescore: bool = True,
                    baselines_dir: str | None = None) -> dict[str, Any]:
    folder = run_folder.path
    # The folder's numbers, checked before anything is rewritten (a refusal changes nothing).
    seed, threshold = _number(cfg, "seed", RootParams.seed, int), _number(cfg, "power_threshold", RootParams.power_threshold, float)
    # The lock: a run still appending (or another re-score) would lose samples to the rewrite.
    run_folder.lock("re-score")
    lines = run_folder.lines()  # every readable line; an unreadable one is skipped with a warning
    if not lines:
        raise ConfigError(f"{folder / RunFolder.SAMPLES} has no readable sample record; nothing to re-score (the file is left as it is)")
    # Records from before quality was judged against the shared store on every sample: their
    # timed samples take the store's target alone for quality, the fresh one kept for speed.
    judged = 0
    if cfg is not None and cfg.get("baseline") == "shared":
        # The stores' folder is this machine's (--baselines-dir, else the results tree the folder
        # sits in), never a path from the folder's config; store names are confined to it.
        root = Path(baselines_dir).expanduser() if baselines_dir else folder.parent.parent / "_baselines"
        lines, judged = judge_against_store(lines, root)
    new_lines = rescore_records(task, samples_by_id(task), lines, where=str(folder / RunFolder.SAMPLES)) if rescore else lines
    if len(new_lines) != len(lines):
        raise ConfigError(f"{folder}: the re-score would drop {len(lines) - len(new_lines)} record(s); nothing was changed")

    task.aggregate(first_per_id(new_lines))  # a refusal there (every judgment failed) comes before any rewrite
    stamp = utc_stamp()
    # The old file kept as samples.jsonl.bak-<stamp>; a summary-only rebuild leaves the records
    # untouched unless they moved onto the store.
    backup = run_folder.rewrite_samples(new_lines, stamp) if rescore or judged else None

    # The summary: drop the old score-derived fields, recompute them from the new scores.
    old_records = first_per_id(lines)
    records = first_per_id(new_lines)
    old = run_folder.read_summary() or {}  # a damaged one (schema.summary_problems) is rebuilt, not carried over
    summary_backup = run_folder.backup(RunFolder.SUMMARY, stamp)  # whatever it held, damaged or not
    stale = set(quality_fields(task, old_records)) | {k for k in old if k in RETENTION_KEYS or k.startswith("retention_")}
    summary = {k: v for k, v in old.items() if k not in stale}
    # Every figure and its interval again (speed ones included: the same records give the
    # same points; folders from before the intervals gain them). Old records have no
    # timing data: the summary's timing says "not recorded".
    summary.update(build_summary(
        task, records, seed=seed,
        power_threshold=threshold,
        timing_tolerance=timing_settings(cfg)[0] if cfg is not None else None,
        **_calibration(cfg, old, folder),
    ))
    summary.setdefault("dataset", task.name)
    summary["rescored"] = {"at": stamp, "by": "loosespec_bench.score", "backup": backup.name if backup else None,
                           "scores": "recomputed" if rescore else "kept (--summary-only)",
                           **({"judged_against_store": judged} if judged else {}),
                           **({"before": old["rescored"]} if isinstance(old.get("rescored"), dict) else {})}
    try:
        run_folder.write_summary(summary)
    except BaseException:  # a full disk: summary.json is untouched (atomic), so its copy goes too
        if summary_backup is not None:
            summary_backup.unlink(missing_ok=True)
        raise
    return summary


def _number(cfg: DictConfig | None, key: str, default: Any, kind: type) -> Any:
    """A number the folder's config.yaml holds (seed, power_threshold), or a ConfigError naming it."""
    if cfg is None or cfg.get(key) is None:
        return default
    value = cfg.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (kind is int and not float(value).is_integer()):
        raise ConfigError(f"the run folder's config.yaml: {key}={str(value)[:60]!r} is not a{'n integer' if kind is int else ' number'}")
    out = kind(value)
    if out != out or out in (float("inf"), float("-inf")):
        raise ConfigError(f"the run folder's config.yaml: {key}={value!r} is not a finite number")
    return out


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
    task = build_task(compose_dataset(dataset, data_dir), overrides, workers)
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
    atomic_write(path.with_name(f"{stem}.summary.json"), summary_json(summary))
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
    parser.add_argument("--baselines-dir", help="a shared-baseline run's stores (default: <results tree>/_baselines; never the folder's own setting)")
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
            summary = rescore_folder(args.path, **kwargs, summary_only=args.summary_only, baselines_dir=args.baselines_dir)
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
