"""The replication's job plan, its launch and its status, from the sweeps Hydra would run.

    python -m loosespec_bench.plan [plan|status|launch] --experiment NAME [--experiment NAME ...] [-- OVERRIDE ...]

Each `--experiment NAME` is one `-m` sweep: `python -m loosespec_bench -m experiment=NAME OVERRIDE...`
(one Slurm job array under hydra/launcher=slurm). The points of a sweep are expanded by Hydra
itself: the configured sweeper's `hydra.sweeper.params` plus the command line, parsed by Hydra's
override parser and crossed by BasicSweeper.split_arguments, and each point's config is composed
by Hydra's config loader (load_sweep_config), exactly as the launcher does in the job. So the
plan lists the same points, and the same result folders (results/<experiment>/<run id>), that a
launch creates.

Each configuration runs once. Two points are the same configuration when their run ids are
equal (config.run_id: the semantic config, without experiment_name). A configuration that several
sweeps of the plan need (e.g. FLy's released setting in the theta, W and MLA ablations) belongs to
the first sweep that has it (the order of --experiment): it runs there, into that sweep's folder,
and the later sweeps leave it out of their job arrays (hydra_plugins/loosespec_skip_sweeper: the
run ids to leave out are in $LOOSESPEC_SKIP_RUN_IDS). `plan` prints "N points, M distinct, S shared
by several sweeps" and each shared point with the sweeps that need it; `status` reports a shared
point from its owner's folder in every sweep (and a point finished in any other experiment folder
of the results directory counts as done); the report's tables select runs by configuration.

  plan    every job: its sweep values, GPUs, samples, token budget, estimated hours; totals
  status  every job: done / running (or killed) / failed / pending, read from its result folder
  launch  run the sweeps, each distinct point once (all at once: with submitit each blocks until its array ends; or
          --sequential: one after the other, for the basic launcher on one machine); driver
          logs and Hydra's sweep dirs (submitit's job logs) in results/_launch/<time>/

This module builds the plan and prints it; the jobs and their status (launch/jobs.py) and the
launch itself (launch/driver.py) sit in launch/, below it.

Cost model (an estimate to size an allocation, not a measurement):
  tokens/job  = samples x turns x max_new_tokens x fill            (fill = 1: every answer runs to the limit)
  hours/job   = load + tokens / (tps x speedup)  [+ tokens / tps when the target alone is paired]
                (baseline=shared: + tokens / tps x the timing subset's share, + the store's pass over
                the other samples divided among the points that share the store)
  GPU-hours   = hours/job x GPUs per job (hydra.launcher.gpus_per_node; 0 = CPU: node-hours)
where tps is the target alone's decode rate (tokens/s, batch 1, transformers, bf16) assumed per
pair (TARGET_TPS) and speedup the method's assumed speedup over it (declared on its rule's class,
Verifier.assumed_speedup: the paper's reported figure; 1 for a rule that reports none). Prefill
(long NIAH prompts) is not counted. Change them with --tps PAIR=N, --speedup METHOD[@PAIR]=X,
--fill F, --load-min PAIR=M.

Power (`plan`, DRY_RUN=1): the power table of power.py, from the plan's finished paired runs.
"""

from __future__ import annotations

import argparse
import datetime
import math
import os
import shlex
import sys
from pathlib import Path
from typing import Any, Sequence

from omegaconf import DictConfig, OmegaConf

from .settings.config import baseline_config, key_digest, uses_drafter
from .settings.run_settings import RunSettings
# The planner's throughput assumptions (the claims report prices an n with them too).
from .measure.costmodel import DEFAULT_LOAD_MIN, DEFAULT_TPS, FLOAT32_CPU_SLOWDOWN, LOAD_MIN, TARGET_TPS, assumed_speedup
from .errors import ConfigError
from .settings.points import varying_keys
from .launch.power import (DEFAULT_BUDGET_FACTOR, DEFAULT_DISCORDANCE, DEFAULT_EFFECT, DEFAULT_POWER, Power, format_hours,
                    format_power, observed_discordance)
from .store.run_folder import run_dir
from .tasks.sizing import full_size, set_size, turns_per_sample
from .launch.driver import launch
from .launch.dry_run import models_of, requeues_needed
# A plan's jobs and their status live in launch/ (below the planner), with the launch itself.
from .launch.jobs import Job, Sweep, format_status, job_status, slurm_states
from .verifiers import rule_class


SETTINGS = ("pair.target.path", "pair.draft.path", "pair.dtype", "pair.target.device_map", "pair.target.quantization",
            "pair.draft.quantize")
SETTINGS_AFTER = ("generation.temperature", "generation.max_new_tokens", "baseline", "seed", "engine.name", "engine.tensor_parallel_size")


def settings(cfg: DictConfig) -> dict[str, Any]:
    """What a job computes, in a few readable keys: models, rule and its parameters, drafter, decoding."""
    out: dict[str, Any] = {k: OmegaConf.select(cfg, k) for k in SETTINGS}
    out["method"] = cfg.method.name
    for k, v in cfg.method.items():
        if k not in ("_target_", "name", "uses_drafter"):
            out[f"method.{k}"] = v
    if uses_drafter(cfg):  # the rule's class says (Verifier.target_alone), not the file
        out["drafter"] = cfg.drafter.name
        out["drafter.k"] = cfg.drafter.k
    out["dataset"] = cfg.dataset.name
    out.update({k: OmegaConf.select(cfg, k) for k in SETTINGS_AFTER})
    return {k: v for k, v in out.items() if v is not None or k == "generation.max_new_tokens"}


def expand(overrides: Sequence[str]) -> tuple[DictConfig, list[tuple[list[str], DictConfig]]]:
    """The multirun config and, per job, (its sweep overrides, its composed config): what
    `python -m loosespec_bench -m OVERRIDES` would run, expanded by Hydra's own machinery
    (points.compose_points, the run's own pre-check), every point checked as a run checks it
    (checks.validate: a plan never lists a point the run would refuse)."""
    from .settings.checks import validate
    from .settings.points import compose_points

    master, points = compose_points(list(overrides), multirun=True)
    varying = varying_keys(points)
    for ov, cfg in points:
        try:
            validate(cfg)
        except ConfigError as err:
            if len(points) > 1:
                where = " ".join(o for o in ov if o.lstrip("+~").split("=", 1)[0] in varying)
                raise ConfigError(f"sweep point {where or ' '.join(ov)}: {err}") from None
            raise
    return master, points


def estimate(cfg: DictConfig, fill: float, tps: dict[str, float], speedup: dict[str, float], load_min: dict[str, float]) -> dict[str, Any]:
    """A job's size and hours (the module docstring's cost model). speedup: the command line's
    --speedup METHOD[@PAIR]=X, which win over the figure the method's rule class declares
    (costmodel.assumed_speedup)."""
    pair, method, dataset = str(cfg.pair.name), str(cfg.method.name), str(cfg.dataset.name)
    samples, exact = set_size(cfg.dataset)
    settings = RunSettings.read(cfg)  # the run's own settings, typed (settings/run_settings.py)
    max_new = settings.generation.max_new_tokens or cfg.dataset.get("max_new_tokens") or 1024
    tokens = samples * turns_per_sample(cfg.dataset) * int(max_new) * fill
    rate = tps.get(pair, DEFAULT_TPS)
    if str(cfg.pair.get("dtype")) == "float32" and str(cfg.pair.get("device") or "cpu") == "cpu":
        rate /= FLOAT32_CPU_SLOWDOWN  # the table's rates are bf16 ones
    rule = rule_class(method)  # the target alone (method=ar) has no paired target-alone side
    given = speedup.get(f"{method}@{pair}", speedup.get(method))  # the user's, by the name they typed
    gain = given if given is not None else assumed_speedup(rule, pair)
    mode = settings.root.baseline
    paired = mode in ("paired", "shared") and not (rule is not None and rule.target_alone)
    # baseline=shared: the target alone runs beside the method on the timing subset only; the
    # rest of its samples come from the store, filled once per store (build_plan shares that
    # pass among the store's points: store_h).
    subset = settings.timing.subset if mode == "shared" else None
    timed = 1.0 if subset is None or not samples else min(1.0, int(subset) / samples)
    seconds = tokens / (rate * gain) + (tokens / rate * timed if paired else 0.0) + 60 * load_min.get(pair, DEFAULT_LOAD_MIN)
    load_h = load_min.get(pair, DEFAULT_LOAD_MIN) / 60
    store_h = tokens / rate * (1.0 - timed) / 3600 if paired and mode == "shared" else 0.0
    return dict(pair=pair, method=method, dataset=dataset, samples=samples, samples_exact=exact, tokens=tokens,
                hours=seconds / 3600, paired=paired, load_h=load_h, store_h=store_h)


def build_plan(
    experiments: Sequence[str],
    common: Sequence[str] = (),
    *,
    fill: float = 1.0,
    tps: dict[str, float] | None = None,
    speedup: dict[str, float] | None = None,
    load_min: dict[str, float] | None = None,
    with_status: bool = False,
) -> list[Sweep]:
    tps = {**TARGET_TPS, **(tps or {})}
    speedup = dict(speedup or {})  # the command line's; the rules declare the assumed ones
    load_min = {**LOAD_MIN, **(load_min or {})}
    sweeps = []
    for exp in experiments:
        args = [f"experiment={exp}", *common]
        master, points = expand(args)
        launcher = master.hydra.launcher
        kind = str(launcher.get("_target_", "")).rsplit(".", 1)[-1] or "?"
        gpus = int(launcher.get("gpus_per_node") or 0)
        sweep = Sweep(
            experiment=exp,
            command=[sys.executable, "-m", "loosespec_bench", "-m", *args],
            launcher=kind,
            gpus=gpus,
            timeout_min=launcher.get("timeout_min"),
            max_requeue=int(launcher.get("max_num_timeout") or 0),
            request=_request(launcher),
            params={k: v for k, v in OmegaConf.to_container(launcher, resolve=True).items() if not str(k).startswith("_")}
            if "cpus_per_task" in launcher else {},
        )
        varying = varying_keys(points)
        for i, (ov, cfg) in enumerate(points):
            folder = run_dir(cfg)  # the folder app.run writes: results_dir/experiment_name/run id
            rid = folder.name
            est = estimate(cfg, fill, tps, speedup, load_min)
            store = key_digest(baseline_config(cfg)) if est["store_h"] else ""
            job = Job(
                sweep=exp, index=i, overrides=[o for o in ov if o.lstrip("+~").split("=", 1)[0] in varying], folder=folder,
                gpus=gpus, settings=settings(cfg), run_id=rid, store=store, models=models_of(cfg), set_size=full_size(cfg.dataset),
                **est,
            )
            sweep.jobs.append(job)
        sweeps.append(sweep)
    assign_owners(sweeps)
    share_stores(sweeps)
    if with_status:
        for s in sweeps:
            for j in s.jobs:
                j.status = job_status(j)
        slurm_states(sweeps)
    return sweeps


def share_stores(sweeps: Sequence[Sweep]) -> None:
    """baseline=shared: a store's target-alone pass (outside the timing subsets) runs once, so
    each point that reads the store is billed its share of that pass."""
    groups: dict[str, list[Job]] = {}
    for s in sweeps:
        for j in s.jobs:
            if j.store_h and j.owner is None:
                groups.setdefault(j.store, []).append(j)
    for jobs in groups.values():
        for j in jobs:
            j.hours += j.store_h / len(jobs)


def _request(launcher: DictConfig) -> str:
    """A submitit launcher's per-job request besides GPUs, e.g. '2 CPUs, 8 GB, partition cpu'."""
    if "cpus_per_task" not in launcher:
        return ""  # the basic launcher: this machine, one point after the other
    out = f"{launcher.cpus_per_task} CPUs, {launcher.mem_gb} GB"
    if "partition" in launcher:  # Slurm (submitit's local launcher has none)
        out += f", partition {launcher.partition or '(the default)'}"
    return out


def assign_owners(sweeps: Sequence[Sweep]) -> None:
    """Each distinct configuration (run id) runs once: in the first sweep of the plan that has it,
    into that sweep's folder results/<experiment>/<run id>; a later sweep that needs it too reads
    its results from there (plan status, the report tables select runs by configuration)."""
    first: dict[str, tuple[int, Job]] = {}
    for n, s in enumerate(sweeps):
        for j in s.jobs:
            j.owner, j.needed_by = None, []
            sweep_n, own = first.get(j.run_id, (n, None))
            if own is None or sweep_n == n:
                first.setdefault(j.run_id, (n, j))
                if own is None:
                    j.needed_by.append(s.experiment)
                continue  # the same run id twice within one sweep: duplicates() reports it
            j.owner, j.folder = own, own.folder
            if s.experiment not in own.needed_by:
                own.needed_by.append(s.experiment)


def shared_points(sweeps: Sequence[Sweep]) -> list[Job]:
    """The launched jobs whose configuration several sweeps of the plan need."""
    return [j for s in sweeps for j in s.jobs if j.launched and len(j.needed_by) > 1]


def duplicates(sweeps: Sequence[Sweep]) -> dict[Path, list[Job]]:
    """Result folders that more than one launched job writes (at the same time). A point that
    several sweeps share is launched once (Job.owner) and does not count."""
    seen: dict[Path, list[Job]] = {}
    for s in sweeps:
        for j in s.jobs:
            if j.launched:
                seen.setdefault(j.folder.resolve(), []).append(j)
    return {k: v for k, v in seen.items() if len(v) > 1}


def repeated_configs(sweeps: Sequence[Sweep]) -> int:
    """Jobs whose configuration (run id) an earlier sweep of the plan runs: not launched again."""
    return sum(1 for s in sweeps for j in s.jobs if not j.launched)


def power_plan(sweeps: Sequence[Sweep], power: float = DEFAULT_POWER, assumed: float = DEFAULT_DISCORDANCE,
               effect: float = DEFAULT_EFFECT, budget_factor: float = DEFAULT_BUDGET_FACTOR) -> list[Power]:
    """Per data set of the plan: the paired n at which the exact McNemar test of method vs target
    alone rejects with probability `power` at the observed effect (stats.n_for_power_mcnemar),
    whether it is within budget_factor x the plan's n, and its cost."""
    from .measure.stats.verdicts import n_for_power_mcnemar

    by_set: dict[str, list[tuple[Sweep, Job]]] = {}
    for s in sweeps:
        for j in s.jobs:
            by_set.setdefault(j.dataset, []).append((s, j))
    out = []
    for name, jobs in by_set.items():
        lost = gained = pairs = runs = 0
        for _, j in jobs:
            if not j.paired:
                continue
            lo, ga, n = observed_discordance((j.owner or j).folder)
            lost, gained, pairs, runs = lost + lo, gained + ga, pairs + n, runs + (n > 0)
        if pairs:
            # No discordant pair in a few samples says little: the rule of three bounds it by 3/n.
            d = min((lost + gained) / pairs if lost + gained else 3 / pairs, 1.0)
            delta = (gained - lost) / pairs
        else:
            d, delta = assumed, effect
        n_needed = n_for_power_mcnemar(d, delta, power)
        n_planned = max(j.samples for _, j in jobs)
        set_size = max((j.set_size for _, j in jobs), default=0)
        gpus = {s.gpus for s, _ in jobs}
        hours = 0.0
        if n_needed is not None and math.isfinite(n_needed) and not (set_size and n_needed > set_size):
            for s, j in jobs:
                if not j.launched:
                    continue
                per_sample = (j.hours - j.load_h) / j.samples if j.samples else 0.0
                hours += (j.load_h + per_sample * math.ceil(n_needed)) * max(s.gpus, 1)
        out.append(Power(
            dataset=name, discordance=d, effect=delta, observed_pairs=pairs, runs=runs,
            n_needed=None if n_needed is None else (n_needed if math.isinf(n_needed) else float(math.ceil(n_needed))),
            n_planned=n_planned, budget=budget_factor * n_planned if n_planned else None,
            hours_at_n=hours, unit="GPU-h" if any(gpus) else "CPU node-h", set_size=set_size,
        ))
    return out


def format_plan(sweeps: Sequence[Sweep], title: str = "", fill: float = 1.0) -> str:
    lines = [f"== plan{': ' + title if title else ''} =="]
    tot_jobs = tot_gpuh = tot_hours = all_gpuh = 0.0
    for s in sweeps:
        unit = "GPU-h" if s.gpus else "CPU node-h"
        own = [j for j in s.jobs if j.launched]
        sweep_gpuh = sum(j.hours * max(s.gpus, 1) for j in own)
        lines.append("")
        elsewhere = len(s.jobs) - len(own)
        note = f"; {elsewhere} run by an earlier sweep" if elsewhere else ""
        lines.append(f"[{s.experiment}] {len(s.jobs)} jobs{note} ({'one Slurm job array' if 'Slurm' in s.launcher else s.launcher}), "
                     f"{s.gpus} GPU(s)/job{', ' + s.request if s.request else ''}, est. {format_hours(sweep_gpuh)} {unit}")
        lines.append("  $ " + shlex.join(["python", *s.command[1:]]))
        lines.append("  settings: " + ", ".join(f"{k}={v}" for k, v in s.settings().items()))
        lines.append(f"  {'#':>3}  {'sweep point':<48} {'samples':>8} {'tokens':>10} {'hours':>7}  result folder")
        for j in s.jobs:
            point = " ".join(j.overrides) or "(single point)"
            n = "?" if not j.samples and not j.samples_exact else f"{j.samples}" + ("" if j.samples_exact else "*")
            if j.owner is not None:
                lines.append(f"  {j.index:>3}  {point:<48} {n:>8} {'shared':>10} {'-':>7}  = [{j.owner.sweep}] #{j.owner.index}: {j.folder}")
                continue
            shared = f"  (shared: {', '.join(j.needed_by)})" if len(j.needed_by) > 1 else ""
            lines.append(f"  {j.index:>3}  {point:<48} {n:>8} {j.tokens:>10,.0f} {j.hours:>7.1f}  {j.folder}{shared}")
            need = requeues_needed(j.hours, s.timeout_min)
            if need and need > s.max_requeue:
                lines.append(f"       ! est. {j.hours:.0f} h > timeout_min x (max_num_timeout + 1) = {s.timeout_min * (s.max_requeue + 1) / 60:.0f} h")
            elif need:
                lines.append(f"       requeues: est. {j.hours:.1f} h > the {s.timeout_min / 60:g} h limit: ~{need} requeue(s) "
                             f"(max_num_timeout={s.max_requeue}), each resuming from the samples on disk")
        tot_jobs += len(own)
        tot_gpuh += sweep_gpuh
        all_gpuh += sum(j.hours * max(s.gpus, 1) for j in s.jobs)
        tot_hours += sum(j.hours for j in own)
    dup = duplicates(sweeps)
    lines.append("")
    unit = "GPU-hours" if any(s.gpus for s in sweeps) else "CPU node-hours"
    points = sum(len(s.jobs) for s in sweeps)
    shared = shared_points(sweeps)
    lines.append(f"points: {points} points, {int(tot_jobs)} distinct, {len(shared)} shared by several sweeps "
                 f"(run once, in the first sweep that has them; {repeated_configs(sweeps)} jobs saved, est. {format_hours(all_gpuh - tot_gpuh)} {unit})")
    for j in shared:
        lines.append(f"  shared: {j.run_id}  [{j.sweep}] #{j.index} -> " + ", ".join(j.needed_by))
    lines.append(f"total: {len(sweeps)} sweeps, {int(tot_jobs)} jobs, est. {format_hours(tot_gpuh)} {unit} (job-hours {format_hours(tot_hours)})")
    gpus = sorted({s.gpus for s in sweeps})
    lines.append(f"GPUs per job: {', '.join(map(str, gpus))}")
    long = [(s, j, requeues_needed(j.hours, s.timeout_min)) for s in sweeps for j in s.jobs if j.launched]
    long = [x for x in long if x[2]]
    if long:
        limit = {s.timeout_min for s, _, _ in long}
        lines.append(f"time limit: {len(long)} points exceed hydra.launcher.timeout_min ("
                     + ", ".join(f"{t / 60:g} h" for t in sorted(limit)) + ") and rely on requeues "
                     "(each resumes from its samples on disk; max_num_timeout bounds them):")
        for s, j, need in sorted(long, key=lambda x: -x[1].hours):
            over = "  ! more than max_num_timeout allows" if need > s.max_requeue else ""
            lines.append(f"  [{s.experiment}] #{j.index} {' '.join(j.overrides) or '(single point)'}: est. {j.hours:.1f} h, "
                         f"~{need} requeue(s){over}")
    for folder, jobs in dup.items():
        lines.append(f"WARNING: {len(jobs)} jobs write {folder}: " + ", ".join(f"{j.sweep}#{j.index}" for j in jobs))
    lines.append(
        f"cost model: hours = load + samples x turns x max_new_tokens x fill({fill}) / (tps x speedup) "
        "[+ same / tps for the paired target alone]; * = upper bound or approximate size; ? = size unknown offline (load time only)"
    )
    return "\n".join(lines)


def model_needs(sweeps: Sequence[Sweep]) -> list[Any]:
    """Every hub model and head the plan's launched points load (launch/dry_run.ModelNeed)."""
    from .launch.dry_run import ModelNeed

    needs: dict[str, ModelNeed] = {}
    for s in sweeps:
        for j in s.jobs:
            if not j.launched:
                continue
            for repo, role in j.models:
                need = needs.setdefault(repo, ModelNeed(repo, [], []))
                need.roles += [role] if role not in need.roles else []
                need.sweeps += [s.experiment] if s.experiment not in need.sweeps else []
    return sorted(needs.values(), key=lambda n: n.repo.lower())


def format_checks(sweeps: Sequence[Sweep], cluster: tuple[Any, Any] | None = None) -> str:
    """The dry run's checks (launch/dry_run.py): the models against the local cache, each
    Slurm sweep's request against the cluster where sinfo answers."""
    from .launch.dry_run import check_cache, check_cluster, format_models, query_cluster

    needs = model_needs(sweeps)
    check_cache(needs)
    lines = [format_models(needs)]
    slurm = [s for s in sweeps if "Slurm" in s.launcher and s.params]
    if slurm:
        nodes, limits = cluster if cluster is not None else query_cluster()
        seen: dict[str, list[str]] = {}
        for s in slurm:
            keys = {k: s.params.get(k) for k in ("partition", "gpus_per_node", "gpus_per_task", "tasks_per_node", "mem_gb",
                                                 "cpus_per_task", "timeout_min")}
            seen.setdefault(check_cluster(keys, nodes, limits), []).append(s.experiment)
        for verdict, names in seen.items():
            lines.append(f"cluster: {verdict} ({len(names)} sweep{'s' if len(names) > 1 else ''})")
    return "\n".join(lines)


def _pairs(items: Sequence[str], flag: str) -> dict[str, float]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        try:
            number = float(value)
        except ValueError:
            number = math.nan
        if not sep or not key or not math.isfinite(number) or number <= 0:
            raise ConfigError(f"{flag} {item!r}: expected NAME=NUMBER with a number > 0")
        out[key] = number
    return out


def _fill(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and 0 < value <= 1):
        raise argparse.ArgumentTypeError(f"--fill {text!r} must be a number in (0, 1] (the mean fraction of max_new_tokens generated)")
    return value


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    common: list[str] = []
    if "--" in argv:
        cut = argv.index("--")
        argv, common = argv[:cut], argv[cut + 1 :]
    ap = argparse.ArgumentParser(prog="python -m loosespec_bench.plan", description=__doc__.split("\n\n")[0])
    ap.add_argument("mode", nargs="?", default="plan", choices=["plan", "status", "launch", "models"])
    ap.add_argument("--experiment", "-e", action="append", default=[], help="one -m sweep: experiment=NAME (repeat)")
    ap.add_argument("--title", default="")
    ap.add_argument("--fill", type=_fill, default=1.0, help="mean fraction of max_new_tokens generated (default 1: upper bound)")
    ap.add_argument("--tps", action="append", default=[], help="PAIR=tokens/s of the target alone")
    ap.add_argument("--speedup", action="append", default=[], help="METHOD[@PAIR]=x over the target alone")
    ap.add_argument("--load-min", action="append", default=[], help="PAIR=minutes to load the models")
    ap.add_argument("--power", type=float, default=DEFAULT_POWER,
                    help="plan: the power the table sizes n for (default %(default)s)")
    ap.add_argument("--effect", type=float, default=DEFAULT_EFFECT,
                    help="plan: accuracy difference assumed where no paired run has finished (default %(default)s)")
    ap.add_argument("--budget-factor", type=float, default=DEFAULT_BUDGET_FACTOR,
                    help="plan: an n above this x the planned n is 'not decidable at this scale' (default %(default)s)")
    ap.add_argument("--discordance", type=float, default=DEFAULT_DISCORDANCE,
                    help="plan: discordance assumed where no paired run has finished (default %(default)s)")
    ap.add_argument("--sequential", action="store_true", help="launch: one sweep after the other")
    ap.add_argument("--log-dir", default=None, help="launch: where each sweep's driver log goes")

    def error(message: str) -> None:  # one line, exit 2, as every other bad input
        print(f"error: {message} (--help lists the options)", file=sys.stderr)
        sys.exit(2)

    ap.error = error  # type: ignore[method-assign]
    args = ap.parse_args(argv)
    if not args.experiment:
        ap.error("give at least one --experiment")
    try:
        if args.mode == "status":
            from .settings.checks import check_environment

            check_environment()
            results = os.environ.get("LOOSESPEC_RESULTS_DIR")
            if results is not None and (not results.strip() or (Path(results).exists() and not Path(results).is_dir())):
                raise ConfigError(f"LOOSESPEC_RESULTS_DIR={results!r} is not a results folder")
        sweeps = build_plan(
            args.experiment, common, fill=args.fill, tps=_pairs(args.tps, "--tps"),
            speedup=_pairs(args.speedup, "--speedup"), load_min=_pairs(args.load_min, "--load-min"),
            with_status=args.mode == "status",
        )
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except Exception as err:  # Hydra composition errors: one readable line
        hint = " (hydra/launcher=slurm|local need: pip install hydra-submitit-launcher)" if "submitit" in str(err) else ""
        print(f"error: {type(err).__name__}: {err}{hint}", file=sys.stderr)
        return 2
    if args.mode == "plan":
        bad = [f"{flag}={v:g} must be in {rng}" for flag, v, ok, rng in (
            ("--power", args.power, 0 < args.power < 1, "(0, 1)"),
            ("--effect", args.effect, 0 < abs(args.effect) <= args.discordance, "0 < |E| <= --discordance"),
            ("--discordance", args.discordance, 0 < args.discordance <= 1, "(0, 1]"),
            ("--budget-factor", args.budget_factor, args.budget_factor > 0, "(0, inf)")) if not ok]
        if bad:
            print(f"error: {'; '.join(bad)}", file=sys.stderr)
            return 2
        print(format_plan(sweeps, args.title, args.fill))
        print()
        print(format_power(power_plan(sweeps, args.power, args.discordance, args.effect, args.budget_factor),
                           args.power, args.budget_factor))
        print()
        print(format_checks(sweeps))
        return 1 if duplicates(sweeps) else 0
    if args.mode == "models":
        from .launch.dry_run import download_lines

        print("\n".join(download_lines(model_needs(sweeps))))
        return 0
    if args.mode == "status":
        print(format_status(sweeps, args.title))
        return 0
    if duplicates(sweeps):
        print(format_plan(sweeps, args.title, args.fill), file=sys.stderr)
        print("error: two jobs would write one result folder at once; fix the sweeps first", file=sys.stderr)
        return 2
    stamp = datetime.datetime.now().strftime("%Y-%m-%d_%H-%M-%S")
    results = os.environ.get("LOOSESPEC_RESULTS_DIR", "results")
    log_dir = Path(args.log_dir or Path(results) / "_launch" / stamp)
    try:
        failed = launch(sweeps, sequential=args.sequential, log_dir=log_dir)
    except ConfigError as err:  # a log or skip file that is a link or a FIFO (safe_files): one line
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 130 if failed < 0 else (1 if failed else 0)


if __name__ == "__main__":
    sys.exit(main())
