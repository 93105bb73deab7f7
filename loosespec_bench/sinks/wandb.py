"""Weights & Biases tracker: `logger=wandb` (conf/logger/wandb.yaml).

Offline by default: no account, no network. The W&B run is written inside the run folder,
    results/<experiment>/<run id>/wandb/offline-run-<time>-<wandb id>/run-<wandb id>.wandb
(under $WANDB_DIR/wandb/ instead when WANDB_DIR is set) and uploaded later with
`wandb sync --id <W&B id> <that folder>` (a whole sweep: `wandb sync results/<experiment>/*/wandb/offline-run-*`).
A resumed run folder writes a second offline folder under the same W&B id; its steps go on
from the first one's (the last step is kept in the run folder, wandb.json), so `wandb sync
<first> <second>`, which uploads one run's folders in order of start time, gives one history.
The end of the run prints that command with its id, project, entity and folders. The group is
decided when the folder's first process starts and kept in wandb.json, so a point of a sweep
resumed alone (outside the sweep) stays in its sweep's group.
`logger.mode=online` logs live (needs `wandb login` or WANDB_API_KEY).

What is logged:
- config: the resolved Hydra config, plus run_id and run_dir; name = the run id (the config
  hash that names the run folder); group = the sweep's own name (sweep_group): experiment_name
  for a named experiment, and for an ad-hoc `-m` sweep under the default name that name plus the
  sweep's start (Hydra's sweep folder), so two such sweeps are two groups; a single run under
  the default name has no group; logger.group overrides it; tags = logger.tags + method/drafter/pair/dataset;
- id: deterministic, from the experiment and the run id (wandb_run_id), with resume="allow":
  a resumed run folder continues its W&B run, its per-sample history going on from the number
  of samples already finished (their own history was logged by the earlier process);
- per sample (x axis sample/index): tau, tokens, steps, tokens/s, the paired target-alone
  tokens/s and the sample's speedup (metrics.sample_speedup), identical-to-target, score
  fields, loose accepts;
- per verification step (x axis step/index, only with logger.log_steps=true: off by default, as
  a GSM8K run is ~50k rows): draft tokens offered and
  accepted, accepted length (accepted + 1, the tau of that step), and for lossy rules the raw
  mismatches and loose accepts of the step;
- at the end: the run summary = the run's figures (summary.json's scalars, nested fields
  flattened as a/b, intervals as <figure>_ci_low/_ci_high). The per-sample and per-step series
  are defined with summary="none" (define_metric), so no last-sample value stands in for a run
  figure. Then a samples table (prompt, output, the target-alone output, per-sample figures),
  samples.jsonl as an artifact (type "samples"), and the per-run plots (acceptance rate by
  draft position, FLy mismatch entropies) as images.

This class may raise: app.run only ever calls it through sinks.trackers.SafeTracker.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
from pathlib import Path
from typing import Any, Callable

from omegaconf import DictConfig, OmegaConf

from ..errors import ConfigError
from ..safe_files import check_regular, is_real_dir, load_json_declaration
from ..measure.metrics import sample_speedup
from ..store.run_folder import RunFolder, atomic_write
from ..schema import FIGURES
from ..measure.stats.intervals import speed_baseline

log = logging.getLogger(__name__)
MODES = ("offline", "online", "disabled")
TAG_MAX = 64  # W&B rejects longer tags


def _number(value: Any) -> float | int | None:
    """A loggable scalar (bools as 0/1), or None."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, (int, float)) and not (isinstance(value, float) and math.isnan(value)):
        return value
    return None


def flatten_summary(summary: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Scalars and strings of a (nested) summary as flat keys: phase_fraction/draft,
    acceptance_by_position/1 (1-based draft position)."""
    out: dict[str, Any] = {}
    for key, value in summary.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(flatten_summary(value, f"{name}/"))
        elif isinstance(value, (list, tuple)):
            for i, item in enumerate(value, 1):
                if _number(item) is not None:
                    out[f"{name}/{i}"] = _number(item)
        elif _number(value) is not None:
            out[name] = _number(value)
        elif isinstance(value, str):
            out[name] = value
    return out


def sample_log(record: dict[str, Any], index: int) -> dict[str, Any]:
    """Per-sample metrics from one samples.jsonl record (the keys app.Runner writes)."""
    m = record.get("metrics", {})
    data: dict[str, Any] = {"sample/index": index}
    for key in ("tau", "new_tokens", "steps", "tokens_per_s", "prefill_s", "decode_s", "total_s", "prompt_tokens"):
        if _number(m.get(key)) is not None:
            data[f"sample/{key}"] = m[key]
    for key, value in (record.get("score") or {}).items():
        if _number(value) is not None:
            data[f"sample/score/{key}"] = _number(value)
    base = speed_baseline(record)  # the target alone timed beside the method (its tokens/s)
    if base:
        bm = base.get("metrics", {})
        if _number(bm.get("tokens_per_s")) is not None:
            data["sample/baseline_tokens_per_s"] = bm["tokens_per_s"]
        speedup = sample_speedup(record)
        if speedup is not None:
            data["sample/speedup"] = speedup
        data["sample/identical_to_target"] = int(base.get("output_ids") == record.get("output_ids"))
        for key, value in (base.get("score") or {}).items():
            if _number(value) is not None:
                data[f"sample/baseline_score/{key}"] = _number(value)
    loose = [s for s in record.get("steps", []) if "raw_match" in s]
    if loose:
        data["sample/mismatches"] = sum(sum(not f for f in s["raw_match"]) for s in loose)
        data["sample/loose_accepts"] = sum(len(s.get("loose_accepted", [])) for s in loose)
    return data


def step_logs(record: dict[str, Any], index: int, first_step: int) -> list[dict[str, Any]]:
    """Per-step rows: offered/accepted draft tokens, and the loose-rule fields when present."""
    m = record.get("metrics", {})
    accepted, drafted = m.get("accepted", []), m.get("drafted", [])
    steps = record.get("steps", [])
    aligned = len(steps) == len(accepted)
    rows = []
    for j, (acc, off) in enumerate(zip(accepted, drafted)):
        row = {
            "step/index": first_step + j,
            "step/sample": index,
            "step/drafted": off,
            "step/accepted": acc,
            "step/accepted_length": acc + 1,  # accepted drafts + the correction/bonus token
        }
        if aligned and "raw_match" in steps[j]:
            row["step/mismatches"] = sum(not f for f in steps[j]["raw_match"])
            row["step/loose_accepts"] = len(steps[j].get("loose_accepted", []))
        rows.append(row)
    return rows


SAMPLE_COLUMNS = [
    "id", "meta", "tau", "new_tokens", "steps", "tokens_per_s", "baseline_tokens_per_s", "speedup",
    "correct", "baseline_correct", "identical_to_target", "loose_accepts", "prompt", "output_text",
    "target_alone_output", "reference",
]


def wandb_run_id(experiment: Any, run_id: str) -> str:
    """The W&B id of a run folder: the same for every process that works on it (resume), and
    different for the same run id under two experiments (W&B ids are unique per project)."""
    return hashlib.sha256(f"{experiment}/{run_id}".encode()).hexdigest()[:20]


def _default_experiment_name() -> Any:
    from ..settings.config import CONF_DIR  # config.yaml's experiment_name, declared there once

    return OmegaConf.load(CONF_DIR / "config.yaml").get("experiment_name")


def sweep_group(experiment: Any) -> str | None:
    """The W&B group of a run: its sweep's own name. A named experiment (an experiment file's
    experiment_name, or one given on the command line) is that name, across launches; an ad-hoc
    `-m` sweep under the default name gets the sweep's start, read from Hydra's sweep folder
    (<date>/<time>), so that two such sweeps are two groups; a single run under the default
    name belongs to no sweep: no group (None), so that unrelated runs do not pile up in one."""
    default = str(_default_experiment_name())
    name = str(experiment) if experiment is not None else default
    try:
        from hydra.core.hydra_config import HydraConfig
        from hydra.types import RunMode

        hydra = HydraConfig.get()
        multirun, sweep_dir = hydra.mode == RunMode.MULTIRUN, str(hydra.sweep.dir)
    except Exception:  # noqa: BLE001 (outside a Hydra app, e.g. the Python API: no sweep)
        multirun, sweep_dir = False, ""
    if name != default:
        return name
    return "_".join([name, *Path(sweep_dir).parts[-2:]]) if multirun else None


STATE = "wandb.json"  # in the run folder: the W&B id, the next step, the offline folders so far


def sync_command(folders: list[str], wid: str, project: str | None = None, entity: str | None = None) -> str:
    """`wandb sync` of one run's offline folders: W&B uploads a run's folders in order of start
    time, so a resumed run's folders become one history; --id names the run they upload to (the
    deterministic id this harness gave it), so a later upload of another process's folder lands
    in the same run, and -p / -e the project and entity it was logged under."""
    where = [f"-p {project}"] if project else []
    where += [f"-e {entity}"] if entity else []
    return " ".join(["wandb sync", f"--id {wid}", *where, *folders])


def run_figures(summary: dict[str, Any]) -> dict[str, Any]:
    """The run's figures for the W&B summary: the schema's figures with their intervals first
    (loosespec_bench/schema.py: the same names the report's index reads), then every other
    scalar of summary.json (flatten_summary)."""
    flat = flatten_summary(summary)
    first = [k for f in FIGURES for k in (f.source, *(f.ci_sources if f.interval else ())) if k in flat]
    return {**{k: flat[k] for k in first}, **{k: v for k, v in flat.items() if k not in first}}


def sample_row(record: dict[str, Any], max_chars: int) -> list[Any]:
    m = record.get("metrics", {})
    base = record.get("baseline") or {}  # quality: the store's target alone under baseline=shared
    b_tps = ((speed_baseline(record) or {}).get("metrics") or {}).get("tokens_per_s")  # speed: the one timed beside
    speedup = sample_speedup(record)
    meta = record.get("meta")
    return [
        str(record.get("id")),
        ", ".join(f"{k}={v}" for k, v in meta.items()) if isinstance(meta, dict) else str(meta or ""),
        m.get("tau"),
        m.get("new_tokens"),
        m.get("steps"),
        m.get("tokens_per_s"),
        b_tps,
        speedup,
        _number((record.get("score") or {}).get("correct")),
        _number((base.get("score") or {}).get("correct")),
        int(base.get("output_ids") == record.get("output_ids")) if base else None,
        sum(len(s.get("loose_accepted", [])) for s in record.get("steps", [])) if record.get("steps") else None,
        str(record.get("prompt_text", ""))[-max_chars:],  # the end of a long few-shot prompt is the question
        str(record.get("output_text", ""))[:max_chars],
        str(base.get("output_text", ""))[:max_chars] if base else None,
        str(record.get("reference", ""))[:max_chars],
    ]


class WandbTracker:
    """W&B run per run folder. Arguments are the keys of conf/logger/wandb.yaml."""

    MODES = MODES  # the values of logger.mode (checks.validate reads them off the class)

    def __init__(
        self,
        project: str = "loosespec_bench",
        entity: str | None = None,
        mode: str = "offline",
        group: str | None = None,
        tags: list[str] | None = None,
        job_type: str | None = None,
        notes: str | None = None,
        log_steps: bool = False,
        plots: bool = True,
        system_metrics: bool = True,
        max_table_rows: int = 1000,
        max_text_chars: int = 2000,
        init_timeout: float = 60.0,
        teardown: bool = True,
        plotter: Callable[..., dict[str, Path]] | None = None,
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"logger.mode={mode!r} must be one of {', '.join(MODES)}")
        self.project = project
        self.entity = entity
        self.mode = mode
        self.group = group
        self._group: str | None = None  # the group this run logs under (start: stored, given or the sweep's)
        self.tags = [str(t) for t in (tags or [])]
        self.job_type = job_type
        self.notes = notes
        self.log_steps = bool(log_steps)
        self.plots = bool(plots)
        self.system_metrics = bool(system_metrics)
        self.max_table_rows = int(max_table_rows)
        self.max_text_chars = int(max_text_chars)
        self.init_timeout = float(init_timeout)
        self.teardown = bool(teardown)
        # Makes the per-run plots: plotter(summary, records, config, method, out_dir) -> {name: png}.
        # Handed in by whoever builds the tracker (app.run: report.plots.tracker_plots); the sinks
        # never import the report, which reads what they write.
        self.plotter = plotter
        self.run: Any = None
        self.run_dir: Path | None = None
        self.wandb_dir: Path | None = None  # offline-run-* (or run-*) folder of this W&B run
        self._n_samples = 0
        self._n_steps = 0
        self._step = 0  # the next W&B step (history row), continued across resumed processes
        self._folders: list[str] = []  # this W&B run's offline folders, oldest first
        self._method: dict[str, Any] = {}  # the method node (the rule's knobs), for the tracker's plots
        self._config: dict[str, Any] = {}  # the resolved config, for the plots' labels

    def start(self, cfg: DictConfig, run_dir: Path, run_id: str) -> None:
        import wandb  # imported here: a missing package is a tracker failure, not an import error of the app

        config = OmegaConf.to_container(cfg, resolve=True) if isinstance(cfg, DictConfig) else dict(cfg)
        assert isinstance(config, dict)
        config.update(run_id=run_id, run_dir=str(run_dir))
        method = (config.get("method") or {}).get("name")
        uses_drafter = (config.get("method") or {}).get("uses_drafter", True)
        facets = {
            "method": method,
            "drafter": (config.get("drafter") or {}).get("name") if uses_drafter else None,
            "pair": (config.get("pair") or {}).get("name"),
            "dataset": (config.get("dataset") or {}).get("name"),
        }
        tags = self.tags + [f"{k}:{v}" for k, v in facets.items() if v]
        self.run_dir = Path(run_dir)
        self._config = config
        self._method = dict(config.get("method") or {})  # the plotter picks the knobs its figure reads
        settings = wandb.Settings(
            console="off",  # the harness's own output stays as it is
            silent=True,
            disable_git=True,  # the summary records the git commit itself
            save_code=False,
            x_disable_stats=not self.system_metrics,
            init_timeout=self.init_timeout,
        )
        # A resumed folder: its finished samples (and their steps) were logged by the earlier
        # process; this one's history goes on after them.
        earlier = RunFolder(self.run_dir, create=False).records() if (self.run_dir / RunFolder.SAMPLES).exists() else []
        self._n_samples = len(earlier)
        self._n_steps = sum(len((r.get("metrics") or {}).get("accepted") or []) for r in earlier)
        wid = wandb_run_id(config.get("experiment_name"), run_id)
        # An offline resume starts a new offline folder whose steps would restart at 0 (and the
        # upload would drop them as out of order): the steps go on from the last process's.
        state = self._read_state(wid)
        step = state.get("next_step", 0)
        self._step = step if isinstance(step, int) and not isinstance(step, bool) and 0 <= step < 1 << 40 else 0
        folders = state.get("folders", [])
        self._folders = [str(f) for f in folders] if isinstance(folders, list) else []
        # W&B writes under <dir>/wandb/: in the run folder that must be a real folder, never a
        # link (a folder from elsewhere would have W&B write through it, outside results/).
        if not os.environ.get("WANDB_DIR"):
            own = self.run_dir / "wandb"
            if os.path.lexists(own) and not is_real_dir(own):
                raise ConfigError(f"{own} is a symbolic link or not a folder: W&B would write through it; "
                                  "remove it (the tracker writes its offline folders there)")
        # The group is the sweep's, decided when the folder's first process started: a point of an
        # ad-hoc -m sweep resumed later as a single run (no sweep folder then) keeps that group.
        stored = state.get("group")
        self._group = self.group or (stored if isinstance(stored, str) and stored else None) \
            or sweep_group(config.get("experiment_name"))
        self.run = wandb.init(
            project=self.project,
            entity=self.entity,
            group=self._group,
            job_type=self.job_type or method,
            name=run_id,
            id=wid,
            resume="allow",
            tags=[t[:TAG_MAX] for t in dict.fromkeys(tags)],
            notes=self.notes,
            config=config,
            # WANDB_DIR, where set, is where the user keeps W&B's files; else the run folder.
            dir=os.environ.get("WANDB_DIR") or str(self.run_dir),
            mode=self.mode,
            reinit="create_new",  # one process may run a whole Hydra sweep: one W&B run per point
            settings=settings,
        )
        self.wandb_dir = Path(self.run.dir).parent
        if self.mode == "offline" and str(self.wandb_dir) not in self._folders:
            self._folders.append(str(self.wandb_dir))
        self._write_state()
        # The series' last values are not run figures: summary="none" keeps them out of the run
        # summary, which finish() fills with the run's own figures.
        self.run.define_metric("sample/index", summary="none")
        self.run.define_metric("sample/*", step_metric="sample/index", summary="none")
        self.run.define_metric("step/index", summary="none")
        self.run.define_metric("step/*", step_metric="step/index", summary="none")

    def _log(self, data: dict[str, Any]) -> None:
        self.run.log(data, step=self._step)
        self._step += 1

    def _read_state(self, wid: str) -> dict[str, Any]:
        path = self.run_dir / STATE if self.run_dir is not None else None
        try:  # through the gate: never a link or a FIFO, bounded
            state = load_json_declaration(path, "W&B state") if path is not None and check_regular(path) else {}
        except (OSError, ValueError):  # ConfigError is a ValueError
            return {}  # unreadable: W&B's own steps from 0, as before
        return state if isinstance(state, dict) and state.get("id") == wid else {}

    def _write_state(self) -> None:
        if self.run_dir is None or self.run is None:
            return
        state: dict[str, Any] = {"id": self.run.id, "next_step": self._step, "folders": self._folders}
        if self._group:
            state["group"] = self._group
        atomic_write(self.run_dir / STATE, json.dumps(state) + "\n")

    def log_sample(self, record: dict[str, Any]) -> None:
        index = self._n_samples
        self._log(sample_log(record, index))
        if self.log_steps:
            rows = step_logs(record, index, self._n_steps)
            for row in rows:
                self._log(row)
            self._n_steps += len(rows)
        self._n_samples += 1
        self._write_state()  # a kill after this sample still resumes after its step

    def finish(self, summary: dict[str, Any], records: list[dict[str, Any]]) -> None:
        import wandb

        self.run.summary.update(run_figures(summary))
        table = wandb.Table(
            columns=SAMPLE_COLUMNS, data=[sample_row(r, self.max_text_chars) for r in records[: self.max_table_rows]]
        )
        self._log({"samples": table})
        samples = self.run_dir / RunFolder.SAMPLES if self.run_dir is not None else None
        if samples is not None and samples.is_file():
            artifact = wandb.Artifact(f"samples-{self.run.id}", type="samples",
                                      metadata={"run_id": self.run_dir.name, "n_samples": len(records)})
            artifact.add_file(str(samples), name=RunFolder.SAMPLES)
            self.run.log_artifact(artifact)
        if self.plots and self.plotter is not None:
            try:
                images = {f"plots/{name}": wandb.Image(str(path)) for name, path in self._plot(summary, records).items()}
            except Exception as err:  # noqa: BLE001 (plots are optional; the summary and table are logged)
                log.warning("W&B tracker: plots skipped (%s: %s)", type(err).__name__, err)
                self.run.summary["plots_error"] = f"{type(err).__name__}: {err}"
            else:
                self._log(images)
        self._write_state()
        run, self.run = self.run, None
        url = run.url if self.mode == "online" else None
        run.finish()
        self._flush(wandb)
        if self.mode == "offline" and self._folders:
            what = "W&B offline run" if len(self._folders) == 1 else f"W&B offline run in {len(self._folders)} folders (resumed)"
            print(f"[loosespec_bench] {what}: upload with `{sync_command(self._folders, run.id, self.project, self.entity)}`",
                  flush=True)
        elif url:
            print(f"[loosespec_bench] W&B run: {url}", flush=True)

    def _plot(self, summary: dict[str, Any], records: list[dict[str, Any]]) -> dict[str, Path]:
        """This run's plots as PNGs inside the W&B run's files folder (synced with it)."""
        assert self.plotter is not None
        return self.plotter(summary, records, self._config, self._method, Path(self.run.dir) / "plots")

    def _flush(self, wandb: Any) -> None:
        """Wait until W&B's service process has written everything. run.finish() returns once the
        run is closed, but the service writes the .wandb file asynchronously; teardown waits for
        it, so the offline folder is complete (syncable) when the harness moves on. The next run
        of a sweep starts a fresh service (about a second)."""
        if self.teardown:
            wandb.teardown()

    def close(self) -> None:
        """End a run that did not reach finish() (an exception in the run): marked failed."""
        run, self.run = self.run, None
        if run is not None:
            import wandb

            run.finish(exit_code=1)
            self._flush(wandb)
