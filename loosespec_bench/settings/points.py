"""The points of a command line: what `python -m loosespec_bench [-m] OVERRIDES` runs, composed by
Hydra's own machinery (the sweeper's params crossed with the command line, each point composed
by the config loader, exactly as a launch does), and the sweep's pre-check: every point checked
(checks.validate; checks.check_resources where the points run on this machine) before the first
one loads a model. The CLI (__main__) and the planner (plan) compose through here.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Callable

from omegaconf import DictConfig, OmegaConf

from .checks import check_baseline_store, check_environment, check_resources, validate
from .config import ALL_GROUPS, CONF_DIR
from ..errors import ConfigError, one_line


class CompositionError(ConfigError):
    """Hydra could not compose a point: `cause` is Hydra's exception (its type and fields are
    what the command line's advice reads, settings/advice.py), `point` the sweep point's
    overrides (None: the whole command line)."""

    def __init__(self, message: str, cause: BaseException, point: str | None = None) -> None:
        super().__init__(message)
        self.cause = cause
        self.point = point


def at_point(err: ConfigError, where: str) -> ConfigError:
    """The same error (its type and fields kept: UnknownSetting's key, a CompositionError's
    cause) prefixed with the sweep point it belongs to."""
    out = type(err).__new__(type(err))  # not copy.copy: a subclass's __init__ takes its own fields
    out.__dict__.update(err.__dict__)
    out.args = (f"sweep point {where}: {err}",)
    out.point = where  # type: ignore[attr-defined]
    return out
from .path_limits import path_length_problem, shown

# A sweep larger than this is refused: checking it would take minutes, running it weeks.
MAX_SWEEP_POINTS = 20_000


def _check_hydra_overrides(parsed: list[Any]) -> None:
    """`hydra.<key>` overrides must name a key of Hydra's own config (HydraConf)."""
    from hydra.conf import HydraConf

    known = {f.name for f in dataclasses.fields(HydraConf)}
    for o in parsed:
        key = o.key_or_group
        if key.startswith("hydra.") and key.split(".")[1] not in known:
            raise ConfigError(f"{o.input_line}: hydra.{key.split('.')[1]} is not a Hydra setting (known: {', '.join(sorted(known))})")


def _check_given_once(parsed: list[Any]) -> None:
    """Each key once per command line: Hydra keeps the last of `seed=1 seed=2 seed=3` silently,
    so a run would use a value the user may not have meant (and a sweep is `-m seed=1,2,3`)."""
    given: dict[str, list[str]] = {}
    for o in parsed:
        key = o.key_or_group + (f"@{o.package}" if o.package else "")
        given.setdefault(key, []).append(o.input_line)
    for key, lines in given.items():
        if len(lines) > 1:
            raise ConfigError(f"{key} is given {len(lines)} times ({' '.join(lines)}); give it once "
                              f"(to run each value: -m {key}=a,b,c)")


# Sweeps up to this size are composed point by point, as Hydra's launcher does; a larger one is
# composed once per distinct set of group choices, its value overrides applied on top
# (_compose_fast): every point is still checked, in seconds instead of minutes.
FULL_CHECK = 64


def compose_points(
    overrides: list[str], *, multirun: bool, config_name: str = "config", cover: bool = False
) -> tuple[DictConfig, list[tuple[list[str], DictConfig]]]:
    """The composed (hydra-bearing) config and, per point, (its overrides, its config without
    `hydra`): what `python -m loosespec_bench [-m] OVERRIDES` runs, expanded by Hydra's own
    machinery: the sweeper's `hydra.sweeper.params` (an experiment's own sweep) and the
    command line, crossed by BasicSweeper.split_arguments, each point composed by the config
    loader, exactly as a launch does. Every point, however many (up to MAX_SWEEP_POINTS)."""
    from hydra import initialize_config_dir
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.core.utils import setup_globals
    from hydra.types import RunMode
    from hydra._internal.utils import _locate
    from omegaconf import open_dict

    from .config import check_group_overrides

    check_group_overrides(list(overrides))
    if not (CONF_DIR / f"{config_name}.yaml").is_file():
        raise ConfigError(f"--config-name {config_name!r}: no {config_name}.yaml in {CONF_DIR}; the config is 'config'")
    setup_globals()  # ${now:...} and ${hydra:...}, as in a real launch
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3", job_name="__main__"):
            hydra = GlobalHydra.instance().hydra
            assert hydra is not None
            try:
                parser = OverridesParser.create(config_loader=hydra.config_loader)
                parsed_cli = parser.parse_overrides(list(overrides))
            except Exception as err:
                raise ConfigError(f"bad override syntax: {one_line(err)}") from None
            _check_hydra_overrides(parsed_cli)
            _check_given_once(parsed_cli)
            if not multirun:
                sweeps = [o.input_line for o in parsed_cli if o.is_sweep_override()]
                if sweeps:
                    raise ConfigError(f"{sweeps[0]} is a sweep; add -m (--multirun) to run every point, or give one value")
            mode = RunMode.MULTIRUN if multirun else RunMode.RUN
            try:
                master = hydra.compose_config(config_name, list(overrides), run_mode=mode, with_log_configuration=False)
            except ConfigError:
                raise
            except Exception as err:  # composition: unknown key, missing option, type, interpolation
                raise CompositionError(one_line(err), err) from None
            if not multirun:
                cfg = master.copy()
                with open_dict(cfg):
                    del cfg["hydra"]
                return master, [(list(overrides), cfg)]
            target = str(master.hydra.sweeper.get("_target_", ""))
            try:
                sweeper_cls = _locate(target)
            except Exception:
                sweeper_cls = None
            # By name: Hydra's plugin discovery may import the module a second time.
            if not (isinstance(sweeper_cls, type) and any(c.__name__ == BasicSweeper.__name__ for c in sweeper_cls.__mro__)):
                raise ConfigError(f"hydra.sweeper is {target}; the pre-check expands only Hydra's basic sweeper (grids)")
            # BasicSweeper.sweep: the sweeper's params first, then the command line (later keys win).
            params = [f"{k}={v}" for k, v in (master.hydra.sweeper.params or {}).items()]
            task = OmegaConf.to_container(master.hydra.overrides.task, resolve=False)
            assert isinstance(task, list)
            try:
                parsed = parser.parse_overrides(params + task)
                batches = BasicSweeper.split_arguments(parsed, None)
            except Exception as err:
                raise ConfigError(f"bad sweep: {one_line(err)}") from None
            points = batches[0] if batches else [[]]
            if not points:  # e.g. glob(*) over a key that is not a config group
                swept = [o.input_line for o in parsed if o.is_sweep_override()]
                raise ConfigError(f"the sweep has no points ({' '.join(swept)} expands to nothing); "
                                  "list the values (drafter.k=3,5) or use glob() on a config group (drafter=glob(*))")
            if len(points) > MAX_SWEEP_POINTS:
                raise ConfigError(f"the sweep has {len(points)} points, more than {MAX_SWEEP_POINTS}; split it into several sweeps")
            if cover and len(points) > FULL_CHECK:
                return master, _compose_fast(hydra, parser, master, [list(p) for p in points])
            jobs = []
            for job_overrides in points:
                try:
                    cfg = hydra.config_loader.load_sweep_config(master, list(job_overrides))
                except Exception as err:
                    where = " ".join(job_overrides)
                    raise CompositionError(f"sweep point {where}: {one_line(err)}", err, where) from None
                with open_dict(cfg):
                    del cfg["hydra"]  # as run_job hands the task its config
                jobs.append((list(job_overrides), cfg))
            return master, jobs
    finally:
        GlobalHydra.instance().clear()


def _compose_fast(hydra: Any, parser: Any, master: DictConfig, points: list[list[str]]) -> list[tuple[list[str], DictConfig]]:
    """Every point of a large sweep, composed once per distinct set of group choices (the slow
    part) and its value overrides applied as Hydra's config loader applies them
    (ConfigLoaderImpl._apply_overrides_to_config): the same configs, in seconds, not minutes."""
    from hydra._internal.config_loader_impl import ConfigLoaderImpl
    from omegaconf import open_dict

    def is_group(o: Any) -> bool:
        key = o.key_or_group.split("@", 1)[0]
        return "." not in key and (key.split("/", 1)[0] in ALL_GROUPS or key.startswith("hydra/"))

    base: dict[tuple[str, ...], DictConfig] = {}
    jobs = []
    for point in points:
        parsed = parser.parse_overrides(point)
        groups = tuple(o.input_line for o in parsed if is_group(o))
        try:
            if groups not in base:
                cfg = hydra.config_loader.load_sweep_config(master, list(groups))
                with open_dict(cfg):
                    del cfg["hydra"]
                base[groups] = cfg
            cfg = base[groups].copy()
            ConfigLoaderImpl._apply_overrides_to_config([o for o in parsed if not is_group(o)], cfg)
        except Exception as err:
            where = " ".join(point)
            raise CompositionError(f"sweep point {where}: {one_line(err)}", err, where) from None
        jobs.append((point, cfg))
    return jobs


def runs_here(master: DictConfig) -> bool:
    """Whether the points run on this machine (Hydra's basic launcher, submitit's local one):
    then what the machine provides is checked before the sweep starts; a cluster's jobs check
    it on their node (app.run)."""
    launcher = str(OmegaConf.select(master, "hydra.launcher._target_") or "")
    return launcher.endswith(("BasicLauncher", "LocalLauncher"))


def precheck_points(overrides: list[str], *, multirun: bool, config_name: str = "config",
                    resources: bool | None = None,
                    data_check: Callable[[DictConfig], None] | None = None,
                    settings_check: Callable[[list[tuple[list[str], DictConfig]]], None] | None = None,
                    ) -> list[tuple[list[str], DictConfig]]:
    """Compose every point of a command line and check it (validate; check_resources where the
    points run here, or as `resources` says); a bad point is one ConfigError naming it. Every
    point's settings are checked before any point's machine: a wrong setting is named as such
    even where the machine also lacks something (a model package, a folder).
    settings_check (the CLI's advice over the whole command line): called with the points once
    their settings passed, before the machine is asked.
    data_check (build.check_data, from the CLI): called once per distinct data set of a sweep
    that runs here, so that a point whose data is missing or malformed stops the sweep before
    the first point loads its models (a single run loads its data before its models itself)."""
    check_environment()
    master, points = compose_points(overrides, multirun=multirun, config_name=config_name, cover=True)
    check_hydra_job(master)  # hydra.job.chdir, Hydra's job folders' lengths (issue 41)
    varying = varying_keys(points)

    def naming_the_point(point: list[str], check: Callable[[], None]) -> None:
        try:
            check()
        except ConfigError as err:
            if len(points) > 1:
                where = " ".join(p for p in point if p.lstrip("+~").split("=", 1)[0] in varying) or " ".join(point)
                raise at_point(err, where) from None
            raise

    for point, cfg in points:
        naming_the_point(point, lambda: validate(cfg))
    if settings_check is not None:  # before the collision check: `method=ar drafter.k=3,5` is one mistake, named
        settings_check(points)
    check_run_id_collisions(points, varying)  # two points, one run folder (issue 41)
    if multirun and resources is not False:
        check_slurm_cluster(master)  # a Slurm launcher without a cluster (issue 41)
    here = runs_here(master) if resources is None else resources
    if not here:
        return points
    seen: set[str] = set()
    data_seen: set[str] = set()

    def machine(cfg: DictConfig) -> None:
        key = repr([OmegaConf.to_container(cfg[k], resolve=True) for k in ("pair", "paths", "drafter", "generation")]
                   + [cfg.method.get("uses_drafter", True), OmegaConf.to_container(cfg.dataset, resolve=True)])
        if key not in seen:  # the machine's answer depends on these only
            seen.add(key)
            check_resources(cfg)
        check_baseline_store(cfg)  # each point's store (the cache key above lacks `baseline`)
        data_key = repr(OmegaConf.to_container(cfg.dataset, resolve=True))
        if data_check is not None and len(points) > 1 and data_key not in data_seen:
            data_seen.add(data_key)
            data_check(cfg)

    for point, cfg in points:
        naming_the_point(point, lambda: machine(cfg))
    return points


def varying_keys(points: list[tuple[list[str], DictConfig]]) -> set[str]:
    values: dict[str, set[str]] = {}
    for ov, _ in points:
        for o in ov:
            key, _, value = o.partition("=")
            values.setdefault(key.lstrip("+~"), set()).add(value)
    return {k for k, v in values.items() if len(v) > 1}


# --- issue 41: a command line's points: Hydra's job folder, one run folder each, a cluster to launch on
def check_hydra_job(master: DictConfig) -> None:
    """Hydra's job folders (hydra.run.dir, hydra.sweep.dir) fit the kernel's path limits
    (path_length_problem: Hydra makes them before the run and stopped with a traceback), and
    hydra.job.chdir stays false. The harness writes each run to
    paths.results_dir/experiment_name/<run id> and resolves every relative path (results, data,
    models, heads) from the folder the command starts in; with chdir Hydra first changes into its
    own job folder, so a relative results_dir put the run under results/_hydra/..., where the
    report and `make status` never look. Refused rather than made to work: nothing in the harness
    uses Hydra's job folder as a working folder, and every relative path in a config would have to
    be rewritten for it."""
    for key, tail in (("hydra.run.dir", "/.hydra/overrides.yaml"), ("hydra.sweep.dir", "/99999/.hydra/overrides.yaml")):
        try:
            folder = OmegaConf.select(master, key, default=None)
        except Exception:  # an interpolation Hydra itself reports when it launches
            continue
        full = os.path.abspath(os.path.expanduser(str(folder))) if folder else ""
        try:
            results = os.path.abspath(os.path.expanduser(str(OmegaConf.select(master, "paths.results_dir"))))
        except Exception:
            results = None
        if not full or (results and full.startswith(results + os.sep)):
            continue  # below paths.results_dir (the default): check_path_lengths names results_dir itself
        problem = path_length_problem(full + tail)
        if problem:
            raise ConfigError(f"{key}={shown(str(folder))!r}: Hydra's job folder would be too long ({problem}); "
                              f"choose a shorter {key}, or drop the override (its default is below paths.results_dir)")
    if OmegaConf.select(master, "hydra.job.chdir", default=False):
        raise ConfigError("hydra.job.chdir=true: the harness writes runs to paths.results_dir/<experiment_name>/<run id> "
                          "from the folder you start in, and would write them under results/_hydra/... (where report and "
                          "status never look); drop the override (hydra.job.chdir=false)")


def check_run_id_collisions(points: list[tuple[list[str], DictConfig]], varying: set[str]) -> None:
    """No two points of a sweep run in one run folder: points whose values differ only where the
    run id does not look (progress=true,false; timing.*) or repeat (drafter.k=3,3) are one run,
    and started at once (a launcher's parallel jobs) they would fight over its lock."""
    if len(points) < 2:
        return
    from .run_settings import run_path

    seen: dict[str, tuple[int, str]] = {}
    for number, (point, cfg) in enumerate(points):
        try:
            folder = os.path.abspath(run_path(cfg))  # the folder store/run_folder.run_dir opens
        except ConfigError:
            continue  # validate has refused it already
        label = " ".join(p for p in point if p.lstrip("+~").split("=", 1)[0] in varying) or " ".join(point) or "(no overrides)"
        if folder in seen:
            first, other = seen[folder]
            what = (f"sweep points #{first} and #{number} are the same point ({label}) listed twice" if other == label else
                    f"sweep points #{first} ({other}) and #{number} ({label}) differ only where the run id does not look")
            raise ConfigError(f"{what}: both would run in the run folder {folder}; drop one of them")
        seen[folder] = (number, label)


# How long the Slurm controller may take to answer `sinfo` before the cluster counts as down.
SLURM_ANSWER_S = 20


def check_slurm_cluster(master: DictConfig) -> None:
    """A Slurm launcher (hydra/launcher=slurm) needs a Slurm client here (sbatch, sinfo on PATH)
    and a controller that answers (sinfo within SLURM_ANSWER_S): otherwise one line, before
    Hydra makes the sweep folder (submitit failed inside the launch, after it)."""
    import shutil
    import subprocess

    launcher = str(OmegaConf.select(master, "hydra.launcher._target_") or "")
    if not launcher.endswith("SlurmLauncher"):
        return
    fix = "run the command on the cluster's login node, or drop hydra/launcher=slurm to run the points here"
    for tool in ("sbatch", "sinfo"):
        if shutil.which(tool) is None:
            raise ConfigError(f"hydra/launcher=slurm: {tool} is not on PATH (no Slurm client on this machine); {fix}")
    try:
        out = subprocess.run(["sinfo", "-h", "-o", "%P"], capture_output=True, text=True, timeout=SLURM_ANSWER_S)
    except subprocess.TimeoutExpired:
        raise ConfigError(f"hydra/launcher=slurm: the Slurm controller did not answer sinfo within {SLURM_ANSWER_S} s; {fix}") from None
    except OSError as err:
        raise ConfigError(f"hydra/launcher=slurm: sinfo cannot run ({err.strerror or err}); {fix}") from None
    if out.returncode != 0:
        said = [ln.strip().removeprefix("sinfo: ") for ln in out.stderr.splitlines() if ln.strip()]
        why = shown(said[-1], 160) if said else f"exit {out.returncode}"
        raise ConfigError(f"hydra/launcher=slurm: the Slurm controller cannot be reached (sinfo: {why}); {fix}")
