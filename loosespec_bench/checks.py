"""The pre-check: every setting of a composed config, and what this machine must provide for
it, before anything slow (a model load, a results folder, a job).

Where each range is declared (once; tests/test_checks.py pins it):
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
`check_resources(cfg)` what this machine must provide: the devices, the results folder, the
model files (paths, vocabularies, context length, an EAGLE head) and the environment. The CLI
(__main__) calls both for every point of a run or sweep that runs here, app.run calls both
before the task loads, and the plan calls validate.
"""

from __future__ import annotations

import dataclasses
import errno
import functools
import inspect
import os
import tempfile
from pathlib import Path
from typing import Any, Callable, Mapping

from omegaconf import DictConfig, OmegaConf

from .config import CONF_DIR, GROUPS, ALL_GROUPS, safe_name, safe_path_name, site_conf_dir
from .errors import ConfigError
from .params import (
    MAX_NEW_TOKENS_CAP,
    Rule,
    boolean,
    check_node,
    choice,
    declared_rules,
    integer,
    is_int,
    optional,
    params_of,
    real,
    string,
    temperature,
)

ROOT_RULES: dict[str, Rule] = {
    "seed": integer(0),
    "baseline": choice("paired", "shared", "none"),
    "warmup": boolean,
    "chat_template": boolean,
    "record_steps": boolean,
    "progress": boolean,
    "threads": optional(integer(1, 4096)),
    "experiment_name": safe_path_name,
    "power_threshold": real(0, lo_open=True),
}
TIMING_RULES: dict[str, Rule] = {
    "retime": lambda v: None if v in (True, False, "auto") else "must be true, false or auto",
    "tolerance": real(0, lo_open=True),
    "max_retimes": integer(0, 100),
    "subset": optional(integer(1)),
    "side_limit": optional(real(0, 1, lo_open=True)),
}
GENERATION_RULES: dict[str, Rule] = {
    "temperature": temperature,  # params.MIN_TEMPERATURE: tiny ones overflow
    "top_k": integer(0),
    "top_p": real(0, 1, lo_open=True),
    "max_new_tokens": optional(integer(1, MAX_NEW_TOKENS_CAP)),
}
PATHS_RULES: dict[str, Rule] = {"results_dir": string, "data_dir": optional(string), "baselines_dir": optional(string)}
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
    from .drafters.base import Drafter
    from .tasks.base import Task
    from .verifiers.base import Verifier

    return {"method": Verifier, "drafter": Drafter, "dataset": Task}


# --- the plain sections ---------------------------------------------------------------------
# Plain mappings of config.yaml whose every key it declares (an unknown one is refused).
PLAIN_SECTIONS = ("generation", "paths", "timing")


@functools.lru_cache(maxsize=1)
def declared() -> dict[str, frozenset[str]]:
    """The keys the packaged config.yaml declares at the top level and under generation/paths/timing."""
    base = OmegaConf.load(CONF_DIR / "config.yaml")
    top = frozenset(k for k in base if k not in ("defaults", "hydra"))
    return {"": top, **{section: frozenset(base[section]) for section in PLAIN_SECTIONS}}


def _check_plain(data: dict[str, Any]) -> None:
    known = declared()
    top_known = known[""] | frozenset(ALL_GROUPS) | {"hydra"}
    for key in data:
        if key not in top_known:
            raise ConfigError(f"{key} is not a known setting; remove it (known: {', '.join(sorted(top_known - {'hydra'}))})")
    for key in sorted(known[""]):
        if key not in data:
            raise ConfigError(f"{key} is missing: it is a required setting (config.yaml declares it); drop the ~{key} override")
    for section in PLAIN_SECTIONS:
        node = data.get(section)
        if not isinstance(node, dict):
            raise ConfigError(f"{section}={node!r} must be a mapping of settings ({', '.join(sorted(known[section]))})")
        for key in node:
            if key not in known[section]:
                raise ConfigError(f"{section}.{key} is not a known setting; remove it (known in {section}: {', '.join(sorted(known[section]))})")
        for key in sorted(known[section]):
            if key not in node:
                raise ConfigError(f"{section}.{key} is missing: it is a required setting; drop the ~{section}.{key} override")
    for group in ("method", "pair", "dataset") + (("drafter",) if _uses_drafter(data) else ()):
        if not isinstance(data.get(group), dict):
            raise ConfigError(f"{group} is missing or not a mapping of settings: choose one ({group}=NAME)")


def _uses_drafter(data: Mapping[str, Any]) -> bool:
    method = data.get("method")
    return bool(method.get("uses_drafter", True)) if isinstance(method, dict) else True


# --- the instantiated nodes -----------------------------------------------------------------
def target_class(group: str, node: Mapping[str, Any]) -> type:
    """The class a node's `_target_` names; a ConfigError unless it is a class of the group's
    kind (a Verifier for method, a Drafter for drafter, a Task for dataset)."""
    from hydra._internal.utils import _locate

    target = node.get("_target_")
    if not isinstance(target, str) or not target:
        raise ConfigError(f"{group}._target_ is missing: the {group} config file must name its class")
    base = _bases()[group]
    try:
        cls = _locate(target)
    except Exception:
        raise ConfigError(f"{group}._target_={target!r} cannot be imported; check the {group} config file") from None
    if not (isinstance(cls, type) and issubclass(cls, base)):
        raise ConfigError(f"{group}._target_={target!r} is not a {base.__name__} class; name one (e.g. {base.__module__}.{base.__name__} subclasses)")
    return cls


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
            raise ConfigError(
                f"{group}.{key} is not a setting of {group}={node.get('name')} ({cls.__name__}); "
                f"remove it or use one of: {', '.join(sorted(accepted)) or '(none)'}"
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
    if group == "method" and name in ("ar", "spd") and (name == "ar") != (not node.get("uses_drafter", True)):
        raise ConfigError(
            f"method.name={name!r} with method.uses_drafter={node.get('uses_drafter', True)}: 'ar' is the target alone "
            "(method=ar), 'spd' uses a drafter (method=spd); choose the method instead of renaming it"
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


def validate_settings(cfg: DictConfig) -> None:
    """Every setting's key and range; raises ConfigError naming the first bad one."""
    validate(cfg)


def validate(cfg: DictConfig) -> None:
    """Every setting's key, range and cross rule (module docstring); pure."""
    from .models.loading import pair_settings

    data = resolved(cfg)
    _check_plain(data)
    check_node("", data, ROOT_RULES)
    check_node("generation", data["generation"], GENERATION_RULES)
    check_node("paths", data["paths"], PATHS_RULES)
    check_node("timing", data.get("timing") or {}, TIMING_RULES)
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
    _check_cross(data, classes)
    from .config import check_engine

    check_engine(cfg)  # what the chosen engine cannot honour (engines/base.py Engine.check)


def _check_logger_mode(node: Any) -> None:
    """logger.mode against the modes the tracker's class declares (its MODES), when it has both."""
    from hydra._internal.utils import _locate

    if not isinstance(node, dict) or "mode" not in node or not isinstance(node.get("_target_"), str):
        return
    try:
        modes = getattr(_locate(node["_target_"]), "MODES", None)
    except Exception:  # a tracker that cannot be imported warns and turns itself off (trackers.py)
        return
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


def _check_cross(data: dict[str, Any], classes: dict[str, type]) -> None:
    from .verifiers.fly import FLy

    gen, method = data["generation"], data["method"]
    batch = (data.get("engine") or {}).get("batch_size") or 1
    if data.get("baseline") == "shared" and is_int(batch) and batch > 1:
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
        k, w = classes["drafter"].draft_length(settings), method.get("window")
        if issubclass(classes["method"], FLy) and not method.get("no_window", False) and is_int(w) and k <= w:
            raise ConfigError(
                f"drafter.k={k} <= method.window={w}: the deferral window never fills and FLy equals SPD; "
                "raise K or set method.no_window=true for the no-window ablation"
            )


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
    log_level = os.environ.get("LOOSESPEC_LOG")
    if log_level is not None:
        import logging

        if not isinstance(logging.getLevelName(log_level.upper()), int):
            raise ConfigError(f"LOOSESPEC_LOG={log_level!r} is not a log level; use DEBUG, INFO, WARNING or ERROR")


def check_resources(cfg: DictConfig) -> None:
    """What this machine must provide for the config (module docstring); raises ConfigError."""
    from .models.loading import check_device, load_options, model_config

    data = resolved(cfg)
    check_environment()
    check_results_dir(data["paths"]["results_dir"])
    check_free_space(data["paths"]["results_dir"], data)
    if data.get("baseline") == "shared" and data["paths"].get("baselines_dir") is not None:
        check_results_dir(data["paths"]["baselines_dir"], "paths.baselines_dir")
    data_dir = data["paths"].get("data_dir")
    if data_dir is not None and not Path(data_dir).expanduser().is_dir():
        raise ConfigError(
            f"paths.data_dir={data_dir!r} is not a folder (LOOSESPEC_DATA_DIR); prepare the data sets there with "
            "`make data` (python -m loosespec_bench.data), or set LOOSESPEC_DATA_DIR=null to load from the hub"
        )
    from .config import DEFAULT_ENGINE

    if (data.get("engine") or {}).get("name", DEFAULT_ENGINE) != DEFAULT_ENGINE:
        # The model files, devices and heads below are what our own loop (engines/hf.py) loads
        # through transformers; another engine (vLLM) reads them itself and its check and
        # constructor refuse what it cannot load (engines/vllm.py).
        return
    pair = data["pair"]
    uses = _uses_drafter(data)
    drafter = data.get("drafter") or {}
    needs_draft_model = uses and bool(drafter.get("needs_model", False))
    check_device("pair.device", pair["device"])
    if needs_draft_model and pair.get("draft_device"):
        check_device("pair.draft_device", pair["draft_device"])
    roles = ("target", "draft") if needs_draft_model else ("target",)
    configs = {}
    for role in roles:
        node = pair[role]
        path = node["path"]
        opts = load_options(node)
        if path.startswith("tiny:") and opts:
            raise ConfigError(f"pair.{role}: {', '.join(sorted(opts))} apply to from_pretrained models; tiny models use pair.device")
        if opts.get("device_map") is not None:
            import importlib.util

            if importlib.util.find_spec("accelerate") is None:
                raise ConfigError(f"pair.{role}.device_map needs the accelerate package (pip install 'loosespec_bench[slurm]')")
        try:
            configs[role] = model_config(path)
        except ConfigError as err:
            raise ConfigError(f"pair.{role}.path: {err}") from None
    target = configs.get("target") or {}
    if needs_draft_model and not drafter.get("needs_tokenizers", False):
        draft = configs.get("draft") or {}
        tv, dv = target.get("vocab_size"), draft.get("vocab_size")
        if is_int(tv) and is_int(dv) and (dv > tv or tv - dv > 1024):
            raise ConfigError(
                f"pair.draft.path={pair['draft']['path']!r} has a vocabulary of {dv} tokens, the target {tv}: "
                "a draft must share the target's tokenizer (or use drafter=model_xtok for another tokenizer)"
            )
    ctx = target.get("max_position_embeddings")
    max_new = data["generation"].get("max_new_tokens") or data["dataset"].get("max_new_tokens")
    if is_int(ctx) and is_int(max_new) and max_new >= ctx:
        raise ConfigError(
            f"generation.max_new_tokens={max_new} does not fit the target's context of {ctx} tokens "
            "(max_position_embeddings); lower it"
        )
    if uses and drafter.get("needs_target", False):
        _check_head(drafter, target)


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


def _check_head(drafter: Mapping[str, Any], target: Mapping[str, Any]) -> None:
    """An EAGLE head: named, and a local one is a folder with config.json of the target's vocabulary."""
    import json

    head = drafter.get("head_path")
    name = drafter.get("name")
    if not head:
        raise ConfigError(
            f"drafter={name} needs a head: this pair has no pair.{name}_head and no "
            f"loosespec_bench/conf/pair_drafter/<pair>_{name}.yaml; set drafter.head_path=<folder or hub id>"
        )
    if head == "random":
        return
    folder = Path(os.path.expanduser(head))
    if head.startswith(("/", ".", "~")) or folder.exists():
        if not (folder / "config.json").is_file():
            raise ConfigError(
                f"drafter.head_path={head!r}: no head there (no config.json); train one (scripts/train_eagle3.py) "
                "or point drafter.head_path at a head folder or hub id"
            )
        try:
            vocab = json.loads((folder / "config.json").read_text(encoding="utf-8")).get("vocab_size")
        except (OSError, ValueError, AttributeError):
            return  # the loader names the file when it reads it
        tv = target.get("vocab_size")
        if is_int(vocab) and is_int(tv) and vocab != tv:
            raise ConfigError(f"drafter.head_path={head!r} is a head for a vocabulary of {vocab} tokens, the target has {tv}")


# --- the points of a command line ----------------------------------------------------------
# A sweep larger than this is refused: checking it would take minutes, running it weeks.
MAX_SWEEP_POINTS = 20_000


def one_line(err: BaseException) -> str:
    """A Hydra / OmegaConf error as one line: its text without the grammar link and the
    full_key / object_type detail lines."""
    lines = []
    for line in str(err).splitlines():
        line = line.strip()
        if not line or line.startswith(("See https://hydra.cc", "full_key:", "object_type", "reference_type", "Available options")):
            continue
        lines.append(line.rstrip("."))
    text = "; ".join(lines) or type(err).__name__
    if text[:1].isupper() and not text[1:2].isupper():  # "Could not ..." -> "could not ...", not "ABC"
        text = text[:1].lower() + text[1:]
    return text


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
                raise ConfigError(one_line(err)) from None
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
                    raise ConfigError(f"sweep point {' '.join(job_overrides)}: {one_line(err)}") from None
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
            raise ConfigError(f"sweep point {' '.join(point)}: {one_line(err)}") from None
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
                    data_check: Callable[[DictConfig], None] | None = None) -> list[tuple[list[str], DictConfig]]:
    """Compose every point of a command line and check it (validate; check_resources where the
    points run here, or as `resources` says); a bad point is one ConfigError naming it.
    data_check (build.check_data, from the CLI): called once per distinct data set of a sweep
    that runs here, so that a point whose data is missing or malformed stops the sweep before
    the first point loads its models (a single run loads its data before its models itself)."""
    check_environment()
    master, points = compose_points(overrides, multirun=multirun, config_name=config_name, cover=True)
    here = runs_here(master) if resources is None else resources
    varying = varying_keys(points)
    seen: set[str] = set()
    data_seen: set[str] = set()
    for point, cfg in points:
        try:
            validate(cfg)
            if here:
                key = repr([OmegaConf.to_container(cfg[k], resolve=True) for k in ("pair", "paths", "drafter", "generation")]
                           + [cfg.method.get("uses_drafter", True), OmegaConf.to_container(cfg.dataset, resolve=True)])
                if key not in seen:  # the machine's answer depends on these only
                    seen.add(key)
                    check_resources(cfg)
                data_key = repr(OmegaConf.to_container(cfg.dataset, resolve=True))
                if data_check is not None and len(points) > 1 and data_key not in data_seen:
                    data_seen.add(data_key)
                    data_check(cfg)
        except ConfigError as err:
            if len(points) > 1:
                where = " ".join(p for p in point if p.lstrip("+~").split("=", 1)[0] in varying) or " ".join(point)
                raise ConfigError(f"sweep point {where}: {err}") from None
            raise
    return points


def varying_keys(points: list[tuple[list[str], DictConfig]]) -> set[str]:
    values: dict[str, set[str]] = {}
    for ov, _ in points:
        for o in ov:
            key, _, value = o.partition("=")
            values.setdefault(key.lstrip("+~"), set()).add(value)
    return {k for k, v in values.items() if len(v) > 1}


def precheck_config(cfg: DictConfig, *, resources: bool = True) -> None:
    """validate, then (resources) check_resources: what the CLI and app.run call."""
    validate(cfg)
    if resources:
        check_resources(cfg)


__all__ = [
    "GROUPS",
    "check_group_node",
    "check_resources",
    "check_results_dir",
    "precheck_config",
    "target_class",
    "validate",
]
