"""The pre-check: every setting of a composed config, and what this machine must provide for
it, before anything slow (a model load, a results folder, a job).

Where each range is declared (once; tests/settings/test_checks.py pins it):
  * the instantiated nodes (method, drafter, dataset): on the class their `_target_` names,
    resolved to the class (so another spelling of the same class is checked the same): its
    parameters dataclass (params.Params: the rules and drafters, whose constructors run the same
    checks) or its SETTINGS (the tasks); `_target_` must name a class of the right kind;
  * the pair: models/loading.pair_settings; the sandbox: tasks/sandbox.SANDBOX_SETTINGS;
  * the plain sections (the top level, generation, paths): the tables below, against the keys
    the packaged config.yaml declares (a key it declares is required: `~seed` is an error).
Bookkeeping names (method.name, drafter.name, dataset.name) must be names the class may be
filed under (`config_names`); every name that becomes part of a path is a safe folder name.

`validate(cfg)` checks the settings (pure: the same answer on a login node and on the GPU node);
`check_resources(cfg)` what this machine must provide: the results and data folders and the
environment here, then what the engine loads (its Engine.check_resources: our loop's devices,
model files, vocabularies, context length and EAGLE head, in engines/hf.py). The CLI
(__main__, through points.precheck_points) calls both for every point of a run or sweep that
runs here, app.run calls both before the task loads, and the plan calls validate.
"""

from __future__ import annotations

import dataclasses
import errno
import functools
import inspect
import os
import tempfile
from pathlib import Path
from typing import Any, Mapping

from omegaconf import DictConfig, OmegaConf

from .config import CONF_DIR, GROUPS, ALL_GROUPS, class_or_none, key_digest, resolve_class, safe_name, site_conf_dir
from ..errors import ConfigError
from ..omp import prepack_mode
from .path_limits import HYDRA_TAIL, RUN_FILE_TAIL, STORE_TAIL, check_environment_path_lengths, path_length_problem, shown
from ..params import (
    Rule,
    boolean,
    check_node,
    declared_rules,
    integer,
    is_int,
    optional,
    params_of,
    string,
)
from .run_settings import ENGINE_BOOKKEEPING, SECTIONS, PathsParams, RunSettings, engine_settings

class UnknownSetting(ConfigError):
    """A key that a node's class does not take; `key` is its full name (drafter.k), which
    the command line's advice reads (settings/advice.py) instead of parsing the message."""

    def __init__(self, message: str, key: str) -> None:
        super().__init__(message)
        self.key = key


# Keys of an instantiated node that the harness reads itself (build.BOOKKEEPING_KEYS), not
# arguments of its class; their ranges. `name` is checked against the class (config_names).
HARNESS_RULES: dict[str, Rule] = {
    "_target_": string,
    "name": safe_name,
    "uses_drafter": boolean,
    "needs_model": boolean,
    "needs_target": boolean,
    "needs_tokenizers": boolean,
    "vocab_top": optional(integer(1)),  # applied by build (models/subvocab.py), drafters only
}
# Constructor arguments the harness passes itself (loaded models, tokenizers): never config keys.
INJECTED = frozenset({"model", "target", "head", "draft_tokenizer", "target_tokenizer", "self"})
# Required keys of each instantiated node (the rest have defaults in the class).
REQUIRED = {"method": ("_target_", "name"), "drafter": ("_target_", "name", "k"), "dataset": ("_target_", "name")}
REQUIRED_PAIR = ("name", "target", "draft", "dtype", "device")


def _bases() -> dict[str, type]:
    from ..drafters.base import Drafter
    from ..tasks.base import Task
    from ..verifiers.base import Verifier

    return {"method": Verifier, "drafter": Drafter, "dataset": Task}


# --- the plain sections ---------------------------------------------------------------------
# The top level and generation/paths/timing: their keys, defaults and ranges are declared once
# (run_settings.py: RootParams, GenerationParams, PathsParams, TimingParams); RunSettings.build
# refuses a missing or unknown key of a section. The top level's other keys are config.yaml's
# own nodes (resources) and the groups.


@functools.lru_cache(maxsize=1)
def declared() -> frozenset[str]:
    """The keys the packaged config.yaml declares at the top level."""
    base = OmegaConf.load(CONF_DIR / "config.yaml")
    return frozenset(k for k in base if k not in ("defaults", "hydra"))


def _check_plain(data: dict[str, Any]) -> None:
    top_known = declared() | frozenset(ALL_GROUPS) | {"hydra"}
    for key in data:
        if key not in top_known:
            raise ConfigError(f"{key} is not a known setting; remove it (known: {', '.join(sorted(top_known - {'hydra'}))})")
    for key in sorted(declared() - set(SECTIONS)):
        if key not in data:
            raise ConfigError(f"{key} is missing: it is a required setting (config.yaml declares it); drop the ~{key} override")
    for group in ("method", "pair", "dataset") + (("drafter",) if _uses_drafter(data) else ()):
        if not isinstance(data.get(group), dict):
            raise ConfigError(f"{group} is missing or not a mapping of settings: choose one ({group}=NAME)")


def _uses_drafter(data: Mapping[str, Any]) -> bool:
    """Whether the method verifies a drafter's drafts: its class says (Verifier.target_alone);
    a class that cannot be resolved is the method check's to report."""
    method = data.get("method")
    cls = class_or_none(method.get("_target_")) if isinstance(method, dict) else None
    return not bool(getattr(cls, "target_alone", False))


# --- the instantiated nodes -----------------------------------------------------------------
def target_class(group: str, node: Mapping[str, Any]) -> type:
    """The class a node's `_target_` names; a ConfigError unless it is a class of the group's
    kind (a Verifier for method, a Drafter for drafter, a Task for dataset)."""
    return resolve_class(node.get("_target_"), group, _bases()[group])


def _signature_keys(cls: type) -> set[str]:
    """Keyword arguments the class takes, following **kwargs up its bases (tasks)."""
    names: set[str] = set()
    for klass in cls.__mro__:
        init = klass.__dict__.get("__init__")
        if init is None:
            continue
        params = inspect.signature(init).parameters.values()
        names |= {p.name for p in params if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)}
        if not any(p.kind == p.VAR_KEYWORD for p in params):
            break
    return names - INJECTED


def routes_to_params(cls: type) -> bool:
    """Whether the class's knobs go through its Params dataclass (its constructor passes
    **knobs on, as every packaged rule and drafter does); a subclass written with its own
    keyword arguments (an extension's rule) is checked against its signature instead."""
    if params_of(cls) is None:
        return False
    params = inspect.signature(cls.__init__).parameters.values()
    return any(p.kind == p.VAR_KEYWORD for p in params)


def accepted_keys(cls: type) -> set[str]:
    if routes_to_params(cls):
        names = {f.name for f in dataclasses.fields(params_of(cls))}  # type: ignore[arg-type]
    else:
        names = _signature_keys(cls)
    return names | (set(declared_rules(cls)) if routes_to_params(cls) or params_of(cls) is None else set())


def _known_names(cls: type) -> tuple[str, ...]:
    names = getattr(cls, "config_names", None)
    if names is None:  # tasks: their own name
        names = (getattr(cls, "name", ""),)
    return tuple(names)


def _check_choices(group: str, node: Mapping[str, Any], cls: type) -> None:
    """Settings whose allowed entries the node's class declares (`setting_choices`, e.g. MGSM's
    languages): every entry of a list (or comma-separated string) must be one of them."""
    for key, allowed in (getattr(cls, "setting_choices", None) or {}).items():
        value = node.get(key)
        entries = [x.strip() for x in value.split(",")] if isinstance(value, str) else list(value or [])
        bad = [x for x in entries if x not in allowed]
        if bad:
            raise ConfigError(f"{group}.{key} has unknown entries {bad}; choose from {', '.join(allowed)}")


def check_group_node(group: str, node: dict[str, Any], *, require: bool = True) -> type:
    """One instantiated node: its class, keys, values, bookkeeping names and the class's own
    cross rules (a Params dataclass is built: the constructor's checks, exactly)."""
    if require:
        for key in REQUIRED[group]:
            if key not in node:
                raise ConfigError(f"{group}.{key} is missing: it is a required setting of {group}; drop the ~{group}.{key} override")
    cls = target_class(group, node)
    accepted = accepted_keys(cls)
    for key in node:
        if key not in accepted and key not in HARNESS_RULES:
            raise UnknownSetting(
                f"{group}.{key} is not a setting of {group}={node.get('name')} ({cls.__name__}); "
                f"remove it or use one of: {', '.join(sorted(accepted)) or '(none)'}", f"{group}.{key}"
            )
    check_node(group, node, HARNESS_RULES)
    if routes_to_params(cls) or params_of(cls) is None:
        check_node(group, node, declared_rules(cls))
    names = _known_names(cls)
    name = node.get("name")
    if names and name is not None and name not in names:
        raise ConfigError(
            f"{group}.name={name!r} does not match {group}._target_ ({cls.__name__}), which is filed as {' or '.join(names)}; "
            f"choose {group}={name} instead of renaming, or drop the {group}.name override"
        )
    # The rule's class says whether it is the target alone (Verifier.target_alone, method=ar);
    # every other rule verifies a drafter's drafts.
    uses = node.get("uses_drafter", True)
    if group == "method" and bool(getattr(cls, "target_alone", False)) == bool(uses):
        raise ConfigError(
            f"method.name={name!r} with method.uses_drafter={uses}: {cls.__name__} "
            + ("is the target alone, which uses no drafter (method=ar)" if uses else "verifies a drafter's drafts (method=spd, fly, ...)")
            + "; drop the method.uses_drafter override"
        )
    params = params_of(cls) if routes_to_params(cls) else None
    if params is not None:
        fields = {f.name for f in dataclasses.fields(params)}
        params.build({k: v for k, v in node.items() if k in fields})  # ranges + cross rules, as the constructor
    _check_choices(group, node, cls)
    hook = getattr(cls, "check_config", None)
    if callable(hook):
        hook(node)
    return cls


# --- validate: the settings -----------------------------------------------------------------
def resolved(cfg: DictConfig) -> dict[str, Any]:
    try:
        data = OmegaConf.to_container(cfg, resolve=True)
    except Exception as err:  # an interpolation that cannot be resolved
        text = " ".join(str(err).split("full_key:")[0].split())
        raise ConfigError(f"the config cannot be resolved: {text}") from None
    if not isinstance(data, dict):
        raise ConfigError("the config is not a mapping of settings")
    return data


def validate(cfg: DictConfig, data: dict[str, Any] | None = None) -> RunSettings:
    """Every setting's key, range and cross rule (module docstring); pure. Returns the run's
    settings, typed (run_settings.RunSettings), for the app to read. `data`: the config,
    resolved (resolved(cfg)), where the caller has it."""
    from ..models.loading import pair_settings

    data = resolved(cfg) if data is None else data
    _check_plain(data)
    sections = RunSettings.sections(data)  # the top level, generation, paths, timing (run_settings.py)
    pair = data["pair"]
    for key in REQUIRED_PAIR:
        if key not in pair:
            raise ConfigError(f"pair.{key} is missing: it is a required setting of the pair; drop the ~pair.{key} override")
    rules = pair_settings()
    for key in pair:
        if key not in rules:
            raise ConfigError(f"pair.{key} is not a setting of a pair; remove it (known: {', '.join(sorted(rules))})")
    check_node("pair", pair, rules)
    for role in ("target", "draft"):
        if not isinstance(pair[role].get("path"), str) or not pair[role]["path"]:
            raise ConfigError(f"pair.{role}.path must be set (a hub id, a local folder, embedded:<name> or tiny:<seed>)")
    if safe_name(pair["name"]):
        raise ConfigError(f"pair.name={pair['name']!r} {safe_name(pair['name'])}")
    # The logger's mode only: a tracker can never fail a run (sinks/trackers.py), and an outage or
    # a bad key warns once and turns the tracker off; but a mode that is not one (WANDB_MODE=garbage)
    # is a typo the user should hear of before the run, not a silent run without its tracker.
    _check_logger_mode(data.get("logger"))
    classes = {}
    for group in ("method", "drafter", "dataset"):
        if group == "drafter" and not _uses_drafter(data):
            # The target alone uses no drafter, but a drafter setting given with it is still
            # checked: `method=ar drafter.k=0` is a mistake to say, not a value to ignore.
            if isinstance(data.get("drafter"), dict):
                try:
                    check_group_node(group, data[group])
                except ConfigError as err:
                    raise ConfigError(f"{err} (method={data['method'].get('name')} uses no drafter: "
                                      "drop the drafter override, or fix its value)") from None
            continue
        classes[group] = check_group_node(group, data[group])
    from .config import check_engine

    check_engine_node(data)  # engine name, class and keys (issue 41)
    settings = RunSettings(**sections, engine=engine_settings(cfg, data.get("engine")))  # type: ignore[arg-type]
    _check_cross(data, classes, settings)
    check_engine(cfg)  # what the chosen engine cannot honour (engines/base.py Engine.check)
    check_path_lengths(cfg, data)  # NAME_MAX / PATH_MAX of every path the run makes (issue 41)
    return settings


def _check_logger_mode(node: Any) -> None:
    """logger.mode against the modes the tracker's class declares (its MODES), when it has both."""
    if not isinstance(node, dict) or "mode" not in node or not isinstance(node.get("_target_"), str):
        return
    # A tracker that cannot be imported warns and turns itself off (trackers.py): None here.
    modes = getattr(class_or_none(node["_target_"]), "MODES", None)
    mode = node["mode"]
    if modes and mode not in modes:
        env = os.environ.get("WANDB_MODE")
        source = " (from WANDB_MODE)" if env is not None and env == mode else ""
        raise ConfigError(f"logger.mode={mode!r}{source} is not a mode of logger={node.get('name')}; "
                          f"use one of {', '.join(modes)}" + (" (set WANDB_MODE to one, or unset it)" if source else ""))


def _with_defaults(cls: type, node: Mapping[str, Any]) -> dict[str, Any]:
    """The node with its class's Params defaults under it (a key the config file leaves out)."""
    params = params_of(cls)
    defaults = {f.name: f.default for f in dataclasses.fields(params)
                if f.default is not dataclasses.MISSING} if params is not None else {}
    return {**defaults, **node}


def _check_cross(data: dict[str, Any], classes: dict[str, type], settings: RunSettings) -> None:
    gen, method = data["generation"], data["method"]
    batch = settings.engine.batch_size  # type: ignore[attr-defined]
    if settings.root.baseline == "shared" and batch > 1 and settings.timing.subset != 0:  # subset 0: nothing timed
        raise ConfigError(
            f"baseline=shared times a subset of samples one request at a time, but engine.batch_size={batch} "
            "submits requests in batches (throughput mode): use baseline=paired with engine.batch_size > 1"
        )
    drafter = data.get("drafter") if "drafter" in classes else None
    t = gen["temperature"]
    if drafter is not None:
        # The drafter's class says whether it proposes trees and its K (a tree's longest path).
        settings = _with_defaults(classes["drafter"], drafter)
        is_tree = classes["drafter"].drafts_tree(settings)
        if is_tree and t > 0:
            raise ConfigError(
                f"generation.temperature={t!r}: tree drafts (drafter.tree=true, drafter=lookahead) "
                "are verified at temperature 0 only (lossless tree sampling is not implemented)"
            )
        # What the rule needs of the draft length (FLy: K above its window) is the rule's to say.
        classes["method"].check_draft_length(_with_defaults(classes["method"], method), classes["drafter"].draft_length(settings))


# --- check_resources: what this machine must provide ----------------------------------------
def check_results_dir(value: Any, where: str = "paths.results_dir") -> None:
    """The results folder exists as a writable folder, or can be created (what is created to
    find out is removed again: a rejected run leaves nothing)."""
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{where}={value!r} must be a folder path (LOOSESPEC_RESULTS_DIR, if set, must not be empty)")
    path = Path(value).expanduser()
    probe = path
    missing: list[Path] = []
    while not probe.exists():
        if probe.is_symlink():
            raise ConfigError(f"{where}={value!r}: {probe} is a broken symbolic link")
        missing.append(probe)
        probe = probe.parent
    if not probe.is_dir():
        raise ConfigError(f"{where}={value!r}: {probe} is not a folder; choose a folder for the results")
    try:
        for folder in reversed(missing):
            folder.mkdir()
        fd, tmp = tempfile.mkstemp(dir=path, prefix=".loosespec-write-test-")
        os.close(fd)
        os.unlink(tmp)
    except OSError as err:
        reason = {errno.EROFS: "read-only file system", errno.EACCES: "permission denied", errno.ENOSPC: "no space left"}.get(
            err.errno, err.strerror or str(err))
        raise ConfigError(f"{where}={value!r}: cannot write there ({reason}); choose a writable folder") from None
    finally:
        for folder in missing:
            try:
                folder.rmdir()
            except OSError:
                pass


# Thread counts the numeric libraries read at import (torch's OpenMP and MKL): a value that is
# not one is ignored by them with at most a warning, so the run's speed rests on a default.
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")


def check_environment() -> None:
    """Environment variables the harness reads, before Hydra reads them."""
    check_environment_path_lengths()  # before anything stats them (issue 41)
    site_conf_dir()  # a LOOSESPEC_SITE_CONF that is not a folder
    cache = os.environ.get("LOOSESPEC_CACHE_DIR")
    if cache is not None:
        path = Path(cache).expanduser()
        if not cache.strip() or (path.exists() and not path.is_dir()):
            raise ConfigError(f"LOOSESPEC_CACHE_DIR={cache!r} is not a folder; point it at a folder for the converted models, or unset it")
    for name in THREAD_VARIABLES:
        value = os.environ.get(name)
        # OpenMP's form: a whole number of threads, or a comma-separated list (nested levels).
        if value is not None and not all(part.strip().isdigit() and int(part) > 0 for part in value.split(",")):
            raise ConfigError(f"{name}={value!r} is not a number of threads; set it to a whole number >= 1 (e.g. {name}=2) "
                              "or unset it (threads=N sets the run's own)")
    try:
        prepack_mode()
    except ValueError as e:
        raise ConfigError(str(e)) from None
    log_level = os.environ.get("LOOSESPEC_LOG")
    if log_level is not None:
        import logging

        if not isinstance(logging.getLevelName(log_level.upper()), int):
            raise ConfigError(f"LOOSESPEC_LOG={log_level!r} is not a log level; use DEBUG, INFO, WARNING or ERROR")


def check_resources(cfg: DictConfig, data: dict[str, Any] | None = None) -> None:
    """What this machine must provide for the config (module docstring); raises ConfigError.
    `data`: the config, resolved, where the caller has it."""
    data = resolved(cfg) if data is None else data
    check_environment()
    check_results_dir(data["paths"]["results_dir"])
    check_baseline_store(cfg, data)  # the store root and this point's store (issue 41)
    check_free_space(data["paths"]["results_dir"], data)
    if data.get("baseline") == "shared" and data["paths"].get("baselines_dir") is not None:
        check_results_dir(data["paths"]["baselines_dir"], "paths.baselines_dir")
    data_dir = data["paths"].get("data_dir")
    if data_dir is not None and not Path(data_dir).expanduser().is_dir():
        raise ConfigError(
            f"paths.data_dir={data_dir!r} is not a folder (LOOSESPEC_DATA_DIR); prepare the data sets there with "
            "`make data` (python -m loosespec_bench.data), or set LOOSESPEC_DATA_DIR=null to load from the hub"
        )
    from .config import engine_class

    # What the engine loads (model files, devices, heads) is its own to check (Engine.check_resources).
    engine_class(cfg).check_resources(cfg)


def estimated_results_bytes(data: Mapping[str, Any]) -> tuple[int, str]:
    """A lower bound on what a run writes into its results folder, and how it was reckoned:
    per sample at least RECORD_BYTES plus TOKEN_BYTES per new token on each side (the method's
    and the target alone's: token ids, text and per-step counts; the committed CPU runs wrote
    40 to 106 bytes per token), plus the config and the summary."""
    dataset = data.get("dataset") or {}
    n = dataset.get("limit")
    if not is_int(n):
        try:
            n = target_class("dataset", dataset).size_of(dataset)[0]
        except ConfigError:
            n = None
    n = n if is_int(n) and n > 0 else 1
    tokens = (data.get("generation") or {}).get("max_new_tokens") or dataset.get("max_new_tokens")
    tokens = tokens if is_int(tokens) and tokens > 0 else 256
    sides = 1 if data.get("baseline") == "none" or not _uses_drafter(data) else 2
    need = FOLDER_BYTES + n * (RECORD_BYTES + sides * tokens * TOKEN_BYTES)
    return need, f"{n} sample(s) x {tokens} new tokens x {sides} side(s)"


FOLDER_BYTES = 16 * 1024  # config.yaml, summary.json, .lock
RECORD_BYTES = 2 * 1024  # a record's fixed part (prompt hash, metrics, timing, score)
TOKEN_BYTES = 64


def check_free_space(value: str, data: Mapping[str, Any], where: str = "paths.results_dir") -> None:
    """The results folder's file system has room for the run's records (estimated_results_bytes):
    a disk that fills mid-run costs the run (its finished samples stay, but it stops)."""
    import shutil

    probe = Path(value).expanduser()
    while not probe.exists():
        probe = probe.parent
    try:
        free = shutil.disk_usage(probe).free
    except OSError:
        return  # check_results_dir has said what it could not write
    need, how = estimated_results_bytes(data)
    if free < need:
        raise ConfigError(f"{where}={value!r}: {free // 1024} KiB free on its file system, and this run writes at least "
                          f"{need // 1024} KiB ({how}); free space there or choose another folder")


def precheck_config(cfg: DictConfig, *, resources: bool = True) -> RunSettings:
    """validate, then (resources) check_resources: what the CLI and app.run call. Returns the
    run's settings, typed (RunSettings), as validate built them."""
    data = resolved(cfg)  # once: every check below reads the same resolved settings
    settings = validate(cfg, data)
    if resources:
        check_resources(cfg, data)
    return settings


# --- issue 41: the paths a run makes, the engine node, the shared baseline store -------------
def check_path_lengths(cfg: DictConfig, data: Mapping[str, Any] | None = None) -> None:
    """Every path a run creates or reads fits the kernel's limits (NAME_MAX per name, PATH_MAX in
    all; path_length_problem): paths.results_dir with Hydra's job folder below it, the run folder
    results_dir/experiment_name/<run id> with its files, the shared baseline store, paths.data_dir.
    Relative folders count from the current folder, as the run opens them. Otherwise the run
    (or Hydra, after it made its job folder) stops with ENAMETOOLONG."""
    from .config import run_id

    data = resolved(cfg) if data is None else data
    paths = data.get("paths") if isinstance(data.get("paths"), dict) else {}
    results = paths.get("results_dir")
    if not isinstance(results, str) or not results.strip():
        return  # the settings check says what is wrong with it
    root = os.path.abspath(os.path.expanduser(results))
    checks: list[tuple[str, str, str]] = [("paths.results_dir", results, root + HYDRA_TAIL)]
    for key in ("data_dir", "baselines_dir"):
        value = paths.get(key)
        if isinstance(value, str) and value:
            checks.append((f"paths.{key}", value, os.path.abspath(os.path.expanduser(value))
                           + (STORE_TAIL if key == "baselines_dir" else "")))
    name = data.get("experiment_name")
    try:
        rid = run_id(cfg)
    except (ConfigError, Exception):  # a name the settings check refuses: it says so
        rid = None
    if isinstance(name, str) and rid:
        run = os.path.join(root, name, rid)
        checks.append(("experiment_name", name, run + RUN_FILE_TAIL))
        checks.append((f"the run folder {shown(run)!r}", rid, run + RUN_FILE_TAIL))
    if data.get("baseline") == "shared" and not paths.get("baselines_dir"):
        pair, dataset = data.get("pair") or {}, data.get("dataset") or {}
        try:
            task = target_class("dataset", dataset).name_of(dataset)
        except ConfigError:
            task = dataset.get("name")  # the dataset check says what is wrong with it
        store = os.path.join(os.path.abspath(PathsParams.read(paths).baselines_root), f"{pair.get('name')}_{task}")
        checks.append(("the baseline store (paths.results_dir/_baselines)", store, store + STORE_TAIL))
    for where, value, full in checks:
        problem = path_length_problem(full)
        if problem:
            what = f"{where}={shown(value)!r}" if where.startswith(("paths.", "experiment_name")) else where
            fix = (f"choose a shorter {where}" if where.startswith("paths.") and where != "paths.results_dir"
                   else "choose a shorter paths.results_dir, experiment_name or pair.name")
            raise ConfigError(f"{what}: the paths the run writes there are too long ({problem}); {fix}")


def check_engine_node(data: Mapping[str, Any]) -> None:
    """The engine node: a mapping whose `_target_` is an engine class (one that declares engine
    settings: Engine.Params, engines/settings.py; asked of the class, never its name), whose
    `name` is the name that class is filed under (engine.name=vllm on the HF engine labelled the
    run vLLM, skipped the HF resource checks and ran transformers), and whose keys are the
    settings its class declares (an unknown key such as engine.foo was ignored)."""
    node = data.get("engine")
    if node is None:
        return  # the default engine (hf)
    known = _engine_names()
    if not isinstance(node, dict):
        raise ConfigError(f"engine={node!r} must be a mapping of settings; choose an engine (engine={' or engine='.join(known)})")
    target = node.get("_target_")
    cls = class_or_none(target)
    params = params_of(cls) if cls is not None else None
    if params is None or params.group != "engine":
        raise ConfigError(f"engine._target_={target!r} is not an Engine class (engines/base.py); choose an engine "
                          f"(engine={' or engine='.join(known)}) instead of setting engine._target_")
    filed = getattr(cls, "name", None)
    name = node.get("name")
    if name != filed:
        if name in known:
            raise ConfigError(f"engine.name={name!r} does not match engine._target_ ({cls.__name__}, which is engine={filed}): "  # type: ignore[union-attr]
                              f"the name labels the run, the class runs it; choose engine={name} instead of renaming, "
                              "or drop the engine.name override")
        raise ConfigError(f"engine.name={name!r} is not a known engine; choose one with engine=NAME ({', '.join(known)})")
    declared_keys = {f.name for f in dataclasses.fields(params)}
    for key in node:
        if key not in declared_keys and key not in ENGINE_BOOKKEEPING:
            raise UnknownSetting(f"engine.{key} is not a setting of engine={filed} ({cls.__name__}); remove it"  # type: ignore[union-attr]
                                 f" (settings of engine={filed}: {', '.join(sorted(declared_keys)) or 'none'})", f"engine.{key}")


@functools.lru_cache(maxsize=1)
def _engine_names() -> list[str]:
    """The packaged engines (conf/engine/*.yaml)."""
    from .config import group_choices

    return group_choices("engine")


def check_baseline_store(cfg: DictConfig, data: dict[str, Any] | None = None) -> None:
    """baseline=shared: the store root (paths.baselines_dir, else results_dir/_baselines, which
    was never checked) is a writable folder on a writable file system, a default root that is a
    symbolic link leads nowhere outside paths.results_dir, and this point's store folder (its
    name depends on the pair, data set and generation settings: each sweep point its own) is a
    real writable folder if it exists. Nothing is created (check_results_dir removes its probes)."""
    from .config import baseline_config

    data = resolved(cfg) if data is None else data
    if data.get("baseline") != "shared" or not _uses_drafter(data):
        return  # no store: the target alone runs beside the method, or is the method
    explicit = data["paths"].get("baselines_dir")
    where = "paths.baselines_dir" if explicit else "the baseline store root (paths.results_dir/_baselines)"
    root = PathsParams.read(data["paths"]).baselines_root  # the folder the store opens (app.run reads the same)
    if not explicit and root.is_symlink():
        results = os.path.realpath(os.path.expanduser(str(data["paths"]["results_dir"])))
        target = os.path.realpath(root)
        if not Path(target).is_relative_to(results):
            raise ConfigError(f"{root} is a symbolic link to {target}, outside paths.results_dir: the shared baselines would be "
                              f"written there; replace the link by a folder, or name that folder (paths.baselines_dir={target})")
    check_results_dir(str(root), where)
    pair, dataset = data["pair"], data["dataset"]
    # BaselineStore's folder, as app.run names it: <pair>_<the task's name>_<config.key_digest>.
    store = root / f"{pair.get('name')}_{target_class('dataset', dataset).name_of(dataset)}_{key_digest(baseline_config(cfg))}"
    if store.is_symlink():
        raise ConfigError(f"the baseline store {store} is a symbolic link; a store is a folder of its own under {where}: "
                          "remove the link (the run makes the folder)")
    if store.exists() and not store.is_dir():
        raise ConfigError(f"the baseline store {store} is not a folder; remove it (the run makes the folder)")
    if store.is_dir():
        check_results_dir(str(store), f"the baseline store {store.name}")


__all__ = [
    "GROUPS",
    "check_group_node",
    "check_resources",
    "check_results_dir",
    "precheck_config",
    "target_class",
    "validate",
]
