"""summary.json: built in one place for the app (after a run) and the re-scorer (after new
scores), so that both always hold the same figures under the same definitions."""

from __future__ import annotations

import datetime
import os
import platform
import subprocess
from pathlib import Path
from typing import Any, Callable, Mapping

from ..measure.costmodel import Calibration
from ..digest import file_sha256
from ..measure.metrics import summarize
from ..measure.serving import serving_summary
from ..schema import SCORE_KEYS, number
from ..measure.stats.intervals import (
    acceptance_intervals, ci_fields, paired_bootstrap, quality_interval, quality_intervals, retention_summary, speed_baseline,
    speed_intervals, speedup_of_sums,
)
from ..measure.stats.exact import is_binary, sign_test_p
from ..measure.timing import counts_for_speed, timing_summary
from ..settings.run_settings import RootParams, RunSettings

DEFAULT_POWER_THRESHOLD = RootParams.power_threshold  # declared once (settings/run_settings.py): 5 points

TAU_DEFINITION = "emitted tokens / verification steps, bonus or correction token included"


def baseline_records(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The paired target-alone side of each record that has one, as a record of its own (its
    score, tokens and timing in place of the method's; the sample's id and problem kept)."""
    return [{**r, **r["baseline"]} for r in records if r.get("baseline")]


def paired_quality(
    aggregate: Callable[[list[dict[str, Any]]], dict[str, Any]], records: list[dict[str, Any]]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the method's quality, its paired target alone's): `aggregate` (a task's) over the
    records and over their baseline sides. The one quality rule of the summary, the re-scorer
    and the report's summary of a killed run."""
    return aggregate(records), aggregate(baseline_records(records))


def headline_figure(summary: Mapping[str, Any]) -> str | None:
    """The summary key of the task's headline quality figure: the summary's quality_figure
    (NIAH's recall, not its all-found accuracy) when it holds a number, else the first of
    schema.SCORE_KEYS it holds (summaries that predate the field)."""
    own = summary.get("quality_figure")
    if isinstance(own, str) and number(summary.get(own)) is not None:
        return own
    return next((k for k in SCORE_KEYS if number(summary.get(k)) is not None), None)


def build_summary(
    task: Any,
    records: list[dict[str, Any]],
    *,
    seed: int,
    power_threshold: float = DEFAULT_POWER_THRESHOLD,
    timing_tolerance: float | None = None,
    calibration: Calibration | None = None,
    calibration_source: str | None = None,
) -> dict[str, Any]:
    """Every figure computed from the records: speed (metrics.summarize), the task's quality
    for the method and its paired target-alone run, retention, and beside each figure F its
    paired-bootstrap interval F_ci_low / F_ci_high (stats/intervals.py); n_problems (distinct problems),
    the timing verdicts (timing.timing_summary) and the power flag. `records`: one per sample
    (first per id). Records without timing data (runs from before it) count as timed."""
    quality, baseline_quality = paired_quality(task.aggregate, records)
    summary = summarize(records, quality, baseline_quality)
    # "retention" comes from summarize when the task reports accuracy, else (e.g. judge
    # ratings) from the bootstrap's paired ratio.
    ci = retention_summary(records, task.quality_key, seed=seed)
    if ci and (summary.get("retention") is None or task.quality_key != "correct"):
        # summarize() divides accuracies; a task whose headline is another figure (NIAH's
        # recall) has its retention, like its interval, on that figure.
        summary["retention"] = ci["retention_paired"]
    summary.update(ci)
    figure = getattr(task, "quality_figure", "accuracy")
    timed = [r for r in records if counts_for_speed(r)]
    summary.update(speed_intervals(records, timed, seed=seed))
    summary.update(acceptance_intervals(records, seed=seed))
    qual = quality_intervals(records, task.quality_key, figure, seed=seed, power_threshold=power_threshold)
    if figure != "accuracy" and task.quality_key == "correct" and "accuracy" in summary:
        # pass@1 is the accuracy of greedy answers: the same interval under both names.
        qual.update({k.replace(figure, "accuracy", 1): v for k, v in qual.items() if k.startswith((figure, f"baseline_{figure}"))})
    summary.update(qual)
    # lm-eval's results fields, keyed by the data set as lm-eval keys them by task.
    summary["n-shot"] = {task.name: int(task.num_fewshot)}
    summary["versions"] = {task.name: str(task.version)}
    counts = quality_counts(records, task.quality_key)
    if counts:
        summary["quality_counts"] = counts
    groups = quality_by_group(records, task.quality_key, getattr(task, "group_key", None), seed=seed)
    if groups:
        summary["quality_by_group"] = groups
    if task.quality_key is not None:
        summary.setdefault("underpowered", None)  # no paired quality: no power statement
        summary.setdefault("power_threshold", power_threshold)
    summary["quality_figure"] = figure if task.quality_key is not None else None
    summary.update(ci_fields(seed=seed))
    summary["n_problems"] = len({problem_of(r) for r in records})
    summary["timing"] = timing_summary(records, timing_tolerance)
    shared = baseline_sources(records)
    if shared:
        summary["baseline_store"] = shared
    summary.update(work_sign_tests(records))
    served = serving_summary(records, seed=seed)
    if served:
        summary["serving"] = served
    summary.update(cost_model_fields(records, timed, calibration, calibration_source, seed=seed))
    if summary.get("predicted_speedup") and summary.get("speedup") is not None:
        # measured / predicted - 1: positive when the run went faster than the counts predict.
        summary["predicted_gap"] = summary["speedup"] / summary["predicted_speedup"] - 1.0
    return summary


def _scores(records: list[dict[str, Any]], key: str) -> list[float]:
    """score[key] of each record that has one, as numbers (bools as 0/1)."""
    out = []
    for r in records:
        v = (r.get("score") or {}).get(key)
        if v is not None and not isinstance(v, str):
            out.append(float(v))
    return out


def _count_fields(scores: list[float], prefix: str = "") -> dict[str, Any]:
    """{n, correct} of one side's 0/1 scores: the count a rate is of (`13/30 = 0.433`); only n
    for graded scores (a mean rating is no count)."""
    out: dict[str, Any] = {f"{prefix}n": len(scores)}
    if is_binary(scores):
        out[f"{prefix}correct"] = int(sum(scores))
    return out


def quality_counts(records: list[dict[str, Any]], key: str | None) -> dict[str, Any] | None:
    """The counts behind the quality figure and its target alone's (the same records the task's
    aggregate and the intervals read): {n, correct, baseline_n, baseline_correct}, `correct`
    only for 0/1 scores. The end table prints a rate as its count over n; None without a
    quality key or scores."""
    if key is None:
        return None
    mine = _scores(records, key)
    if not mine:
        return None
    theirs = _scores(baseline_records(records), key)
    return {**_count_fields(mine), **(_count_fields(theirs, "baseline_") if theirs else {})}


def quality_by_group(
    records: list[dict[str, Any]], key: str | None, group_key: str | None, *, seed: int
) -> dict[str, Any] | None:
    """The quality figure per group of a set with groups (the task's group_key: MGSM's
    languages, MT-bench's categories), each side's: {"key": group_key, "groups": {group: {n,
    correct, value, ci_low, ci_high, baseline_n, baseline_correct, baseline_value,
    baseline_ci_low, baseline_ci_high}}}, groups in the order the samples first name them, each
    interval from stats.intervals.quality_interval (exact Clopper-Pearson for 0/1 scores).
    None without a quality key, a group key, or scores."""
    if key is None or not group_key:
        return None
    by: dict[str, list[dict[str, Any]]] = {}
    for r in records:
        by.setdefault(str((r.get("meta") or {}).get(group_key)), []).append(r)
    groups: dict[str, Any] = {}
    for name, recs in by.items():
        row: dict[str, Any] = {}
        for prefix, side in (("", recs), ("baseline_", baseline_records(recs))):
            scores = _scores(side, key)
            if not scores:
                continue
            value, low, high = quality_interval("mean", scores, seed=seed)
            row.update(_count_fields(scores, prefix))
            row.update({f"{prefix}value": value, f"{prefix}ci_low": low, f"{prefix}ci_high": high})
        if row:
            groups[name] = row
    return {"key": group_key, "groups": groups} if groups else None


def work_sign_tests(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Exact paired decisions on work counts, method against its target alone, per problem:
    for target forwards per emitted token, how many problems the method needs fewer / more /
    as many, and the two-sided sign test's p (stats.sign_test_p; ties left out). Counts
    depend only on the tokens, so no timing noise enters. {} without paired counts."""
    per: dict[str, tuple[float, float]] = {}
    for r in records:
        base = r.get("baseline") or {}
        mw = (r.get("metrics") or {}).get("work_per_token") or {}
        bw = (base.get("metrics") or {}).get("work_per_token") or {}
        if mw.get("target_forwards") is not None and bw.get("target_forwards") is not None:
            per.setdefault(problem_of(r), (mw["target_forwards"], bw["target_forwards"]))
    if not per:
        return {}
    fewer = sum(1 for m, b in per.values() if m < b)
    more = sum(1 for m, b in per.values() if m > b)
    return {"target_forwards_per_token_sign": {
        "fewer": fewer, "more": more, "ties": len(per) - fewer - more, "p": sign_test_p(fewer, more),
        "test": "exact two-sided sign test over problems, method vs its target alone, ties left out",
    }}


def cost_model_fields(
    records: list[dict[str, Any]], timed: list[dict[str, Any]], calibration: Calibration | None, source: str | None,
    *, seed: int,
) -> dict[str, Any]:
    """The calibrated cost model's prediction (costmodel.Calibration.predict_s) beside the
    measured figures: predicted_speedup with its paired-bootstrap interval over the same timed
    samples as the measured speedup, predicted_tokens_per_s of the method, and per side the
    measured / predicted time ratio. predicted_speedup None (with cost_model.why) without a
    calibration for this machine or without work counts (vLLM runs)."""
    info: dict[str, Any] = {"calibration": source}
    out: dict[str, Any] = {"cost_model": info, "predicted_speedup": None}
    if calibration is None:
        info["why"] = source or "no calibration given"
        return out
    mine = [r["metrics"] for r in records if (r.get("metrics") or {}).get("work")]
    if not mine:
        info["why"] = "the records carry no work counts (an engine that does not count them, or an old run)"
        return out
    pred_m = sum(calibration.predict_s(m["work"]) for m in mine)
    out["predicted_tokens_per_s"] = sum(m["new_tokens"] for m in mine) / pred_m if pred_m > 0 else None
    info["method_time_measured_over_predicted"] = sum(m["total_s"] for m in mine) / pred_m if pred_m > 0 else None
    out.update(work_speedup_fields(records, calibration, seed=seed))
    sides = [(r["metrics"], speed_baseline(r)["metrics"]) for r in timed if r.get("baseline")]
    sides = [(m, b) for m, b in sides if m.get("work") and b.get("work")]
    if not sides:
        info["why"] = "no timed paired sample with work counts on both sides"
        return out
    pm = [calibration.predict_s(m["work"]) for m, _ in sides]
    pb = [calibration.predict_s(b["work"]) for _, b in sides]
    cols = ([m["new_tokens"] for m, _ in sides], pm, [b["new_tokens"] for _, b in sides], pb)
    point, low, high = paired_bootstrap(cols, speedup_of_sums, seed=seed)
    out.update(predicted_speedup=point, predicted_speedup_ci_low=low, predicted_speedup_ci_high=high)
    info["baseline_time_measured_over_predicted"] = sum(b["total_s"] for _, b in sides) / sum(pb) if sum(pb) > 0 else None
    info["n"] = len(sides)
    return out


def work_speedup_fields(records: list[dict[str, Any]], calibration: Calibration, *, seed: int) -> dict[str, Any]:
    """The speedup the calibrated cost model predicts from the work counts alone, over every
    sample whose method and target-alone sides both carry them (timed or not: the counts depend
    only on the tokens, so a store's target alone counts as much as a fresh one): work_speedup
    with its paired-bootstrap interval over problems and work_speedup_n. It is what a run with
    no timed sample (timing.subset=0) still says about speed, on the calibration's machine;
    predicted_speedup is the same prediction restricted to the timed samples, to set beside
    the measured speedup. {} where no sample has counts on both sides."""
    sides = [(r["metrics"], r["baseline"]["metrics"]) for r in records
             if (r.get("metrics") or {}).get("work") and ((r.get("baseline") or {}).get("metrics") or {}).get("work")]
    if not sides:
        return {}
    cols = ([m["new_tokens"] for m, _ in sides], [calibration.predict_s(m["work"]) for m, _ in sides],
            [b["new_tokens"] for _, b in sides], [calibration.predict_s(b["work"]) for _, b in sides])
    point, low, high = paired_bootstrap(cols, speedup_of_sums, seed=seed)
    return {"work_speedup": point, "work_speedup_ci_low": low, "work_speedup_ci_high": high, "work_speedup_n": len(sides)}


def baseline_sources(records: list[dict[str, Any]]) -> dict[str, Any] | None:
    """baseline=shared (baselines.py): which samples' target alone was reused from the store,
    which was computed in this run (and written there), which was timed beside the method, and
    where a fresh timed run's tokens differed from the store's. None for other runs."""
    src = [(r["id"], r["baseline_source"]) for r in records if isinstance(r.get("baseline_source"), dict)]
    if not src:
        return None
    return {
        "store": src[0][1].get("store"),
        "reused": [i for i, s in src if str(s.get("origin", "")).startswith("reused")],
        "computed_here": [i for i, s in src if s.get("origin") == "computed here"],
        "timed": [i for i, s in src if s.get("timed")],
        "store_mismatches": [i for i, s in src if s.get("matches_store") is False],
    }


def problem_of(rec: dict[str, Any]) -> str:
    """The problem a record answered (tasks.base.Sample.problem, kept in its meta). MGSM
    records from before meta["problem"] (ids "<lang>-<row>") name their row: fr-0, de-0 and
    th-0 are one problem."""
    meta = rec.get("meta") or {}
    if "problem" in meta:
        return str(meta["problem"])
    lang, sid = meta.get("language"), str(rec["id"])
    if lang and sid.startswith(f"{lang}-") and sid[len(lang) + 1:].isdigit():
        return f"mgsm/{sid[len(lang) + 1:]}"
    return sid


def run_metadata(cfg: Any, task_name: str, run_dir: Path) -> dict[str, Any]:
    """What ran where: the config's method/drafter/pair, the code version, the machine."""
    import torch

    from .. import __version__
    from ..settings.config import drafter_class, uses_drafter

    drafts = uses_drafter(cfg)
    cls = drafter_class(cfg)
    settings = RunSettings.read(cfg)  # the run's settings, typed (a stored config's lacking ones: their defaults)
    return dict(
        method=cfg.method.name,
        drafter=cfg.drafter.name if drafts else None,
        # K as the drafter's class counts it: a tree's longest path, the most tokens one step can accept.
        k=(cls.draft_length(cfg.drafter) if cls is not None else int(cfg.drafter.k)) if drafts else 0,
        tree=bool(cls is not None and cls.drafts_tree(cfg.drafter)),
        pair=cfg.pair.name,
        dataset=task_name,
        temperature=float(settings.generation.temperature),
        seed=settings.root.seed,
        baseline=settings.root.baseline,
        experiment=settings.root.experiment_name,
        run_dir=str(run_dir),
        harness_version=__version__,
        git_commit=git_commit(),
        git_dirty=git_dirty(),
        hardware=hardware(cfg.pair.device),
        torch=torch.__version__,
        transformers=_version("transformers"),
        **machine(),
        date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        tau_definition=TAU_DEFINITION,
        **engine_metadata(cfg),
    )


# run_metadata's keys that describe how and where the samples were produced: a summary recomputed
# later (a re-pass with nothing left to run) keeps them, so that a run's CPU and commit stay its own.
RUN_PROVENANCE = ("harness_version", "git_commit", "git_dirty", "hardware", "torch", "transformers",
                  "cpu_model", "cpu_signature", "cpu_isa", "cpu_count", "memory_gb", "date")


def _version(dist: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return None


def machine() -> dict[str, Any]:
    """cpu_model, cpu_signature, cpu_isa, cpu_count, memory_gb of this machine (None where unknown).

    The model name alone does not tell two CPUs apart ("AMD EPYC" names a Milan without AVX-512
    and a Genoa with AVX-512 BF16 on the same cloud, and bf16 decodes at very different speeds on
    them), so speed figures are compared only between runs whose signature and ISA agree."""
    info: dict[str, str] = {}
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if not line.strip():
                    break  # the first processor's block is enough
                key, _, value = line.partition(":")
                info.setdefault(key.strip(), value.strip())
    except OSError:
        pass
    model = info.get("model name")
    signature = None
    if "vendor_id" in info:
        signature = f"{info['vendor_id']} family {info.get('cpu family', '?')} model {info.get('model', '?')} stepping {info.get('stepping', '?')}"
    try:
        memory_gb: float | None = round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)
    except (ValueError, OSError, AttributeError):
        memory_gb = None
    try:  # the vector ISA torch's kernels dispatch to here: "AVX512", "AVX2", ...
        import torch

        isa: str | None = torch.backends.cpu.get_cpu_capability()
    except (AttributeError, RuntimeError):
        isa = None
    return {
        "cpu_model": model or platform.processor() or None,
        "cpu_signature": signature,
        "cpu_isa": isa,
        "cpu_count": os.cpu_count(),
        "memory_gb": memory_gb,
    }


def data_files(task: Any) -> dict[str, str]:
    """{path relative to the data directory: sha256} of every data file the task read."""
    out = {}
    root = getattr(task, "data_dir", None)
    for path in sorted(getattr(task, "data_files", ()) or ()):
        path = Path(path)
        if not path.is_file():
            continue
        try:
            name = str(path.relative_to(root)) if root else str(path)
        except ValueError:
            name = str(path)
        out[name] = file_sha256(path)
    return out


def _checkout() -> Path | None:
    """The git checkout this package runs from; None for an installed copy (an installed copy
    inside another repository, e.g. a project's .venv, must not report that repository)."""
    here = Path(__file__).resolve().parent.parent  # the package folder (this file is in store/)
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--show-toplevel"], cwd=here, capture_output=True, text=True, timeout=5
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return here.parent if out and Path(out).resolve() == here.parent else None


def git_dirty() -> bool | None:
    """Whether tracked files differ from the commit (results/ excluded: runs write there)."""
    root = _checkout()
    if root is None:
        return None
    try:
        out = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no", "--", ".", ":(exclude)results"],
            cwd=root, capture_output=True, text=True, timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return bool(out.stdout.strip()) if out.returncode == 0 else None


def engine_metadata(cfg: Any) -> dict[str, Any]:
    """Which engine generated (engine=hf: our loop), its version, and how timing reads: at
    engine.batch_size > 1 requests ran B at once, so tokens/s is throughput, not latency."""
    from ..settings.config import engine_class

    node = cfg.get("engine") or {}
    engine = engine_class(cfg)  # the engine says its own version (Engine.version: None for our loop)
    name = str(node.get("name") or engine.name)
    batch = RunSettings.read(cfg).engine.batch_size  # engine.batch_size, its default declared once (EngineParams)
    version = engine.version()
    timing = "per-request latency (batch 1)" if batch == 1 else (
        f"throughput at batch size {batch}: {batch} requests at once, each timed as its batch's wall time / {batch}; "
        "not per-request latency"
    ) if engine.serves_batches else (
        # Our loop's batches (engine=hf): rows share every forward, so the run is quality only.
        f"none: quality only, {batch} problems decoded at once by our loop (samples untimed)"
    )
    return {"engine": name, "engine_version": version, "batch_size": batch, "timing_mode": timing}


def git_commit() -> str | None:
    # Only a checkout has a commit of its own: an installed copy inside another repository (a
    # project's .venv) must not report that repository's commit.
    here = Path(__file__).resolve().parent.parent  # the package folder (this file is in store/)
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--show-toplevel", "HEAD"], cwd=here, capture_output=True, text=True, timeout=5
        ).stdout.split()
    except (OSError, subprocess.SubprocessError):
        return None
    return out[1] if len(out) == 2 and Path(out[0]).resolve() == here.parent else None


def hardware(device: str) -> str:
    import torch

    from .. import omp

    if device.startswith("cuda") and torch.cuda.is_available():
        return f"{torch.cuda.get_device_name(0)} x{torch.cuda.device_count()}"
    return f"{platform.machine()} CPU, {torch.get_num_threads()} threads, OMP_WAIT_POLICY={omp.describe()}"
