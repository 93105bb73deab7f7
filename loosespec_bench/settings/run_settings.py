"""A run's own settings (the top level, generation, timing, paths, the engine's node), declared
once with their defaults, ranges and labels, and read back as one typed object.

  RootParams        seed, baseline, warmup, chat_template, record_steps, progress, threads,
                    experiment_name, power_threshold (config.yaml's top level)
  GenerationParams  generation.* (temperature, top_k, top_p, max_new_tokens)
  TimingParams      timing.* (declared in measure/timing.py, beside the rule that reads them)
  PathsParams       paths.* (results_dir, data_dir, baselines_dir)
  the engine's      engine.* (the engine class's Params: engines/settings.py; engine.batch_size
                    is EngineParams.batch_size, the one name every module reads)

conf/config.yaml and conf/engine/<name>.yaml restate the defaults, because Hydra composes from
them and users read them there; tests/settings/test_run_settings.py pins every key and default
equal to these declarations. The pre-check (checks.validate) builds the RunSettings of a composed
config strictly (a missing or unknown key is refused); a stored config (a run folder's, read by
the re-scorer, the plan or a resume) is read with RunSettings.read: what it lacks takes its
declared default. The run id never reads these objects: it hashes the composed config as it
always did (settings/config.py run_id), so declaring the settings moved no folder.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, ClassVar, Mapping, TypeVar

from omegaconf import DictConfig, OmegaConf

from ..errors import ConfigError
from ..measure.timing import TimingParams
from ..params import (
    MAX_NEW_TOKENS_CAP,
    Params,
    boolean,
    choice,
    integer,
    knob,
    optional,
    params_of,
    real,
    string,
    temperature,
)
from .config import engine_class, run_id, safe_path_name

BASELINE_MODES = ("paired", "shared", "none")


@dataclasses.dataclass(frozen=True)
class RootParams(Params):
    group: ClassVar[str] = ""
    seed: int = knob(0, integer(0), "sampling and dropout masks; per-sample generators derive from it")
    baseline: str = knob("paired", choice(*BASELINE_MODES), "the target alone beside the method")
    warmup: bool = knob(True, boolean, "an untimed short generation of each contestant first")
    chat_template: bool = knob(True, boolean, "the target tokenizer's chat template on the messages")
    record_steps: bool = knob(True, boolean, "per-step decision records in samples.jsonl")
    progress: bool = knob(True, boolean, "a progress bar with ETA")
    threads: Any = knob(None, optional(integer(1, 4096)), "torch CPU threads; null = torch's default")
    experiment_name: str = knob("default", safe_path_name)
    power_threshold: float = knob(0.05, real(0, lo_open=True), "a quality interval wider than +- this is underpowered")


@dataclasses.dataclass(frozen=True)
class GenerationParams(Params):
    group: ClassVar[str] = "generation"
    temperature: float = knob(0.0, temperature)  # params.MIN_TEMPERATURE: tiny ones overflow
    top_k: int = knob(0, integer(0), "keep the k most likely tokens; 0 = off")
    top_p: float = knob(1.0, real(0, 1, lo_open=True), "keep the smallest set with mass >= p; 1.0 = off")
    max_new_tokens: Any = knob(None, optional(integer(1, MAX_NEW_TOKENS_CAP)), "null = the data set's own limit")


@dataclasses.dataclass(frozen=True)
class PathsParams(Params):
    group: ClassVar[str] = "paths"
    # config.yaml: ${oc.env:LOOSESPEC_RESULTS_DIR,results}
    results_dir: str = knob("results", string, "the results folder")
    # config.yaml: ${lsb.data_dir:} ($LOOSESPEC_DATA_DIR, else the default folder); null = the hub
    data_dir: Any = knob(None, optional(string), "the data sets' folder")
    baselines_dir: Any = knob(None, optional(string), "baseline=shared: the stores' folder; null = <results_dir>/_baselines")

    @property
    def baselines_root(self) -> Path:
        """The folder of the target-alone stores (store/baselines.py): baselines_dir, else
        <results_dir>/_baselines."""
        return Path(self.baselines_dir or Path(self.results_dir) / "_baselines").expanduser()


# The plain sections of config.yaml and their declarations, in the order the pre-check reads them.
SECTIONS: dict[str, type[Params]] = {"generation": GenerationParams, "paths": PathsParams, "timing": TimingParams}
# Keys of the engine node that say which class runs it and how the run is labelled, not its settings.
ENGINE_BOOKKEEPING = ("_target_", "name")


@dataclasses.dataclass(frozen=True)
class RunSettings:
    """One run's settings, typed: what the app, the summary, the plan, resume and the engines read."""

    root: RootParams
    generation: GenerationParams
    timing: TimingParams
    paths: PathsParams
    engine: Params  # the engine class's Params (EngineParams or a subclass)

    @classmethod
    def read(cls, cfg: DictConfig | Mapping[str, Any]) -> "RunSettings":
        """A composed or stored config's settings; what it lacks takes its declared default."""
        data = _container(cfg)
        return cls(
            root=RootParams.read(data),  # type: ignore[arg-type]
            **{name: params.read(_mapping(data.get(name))) for name, params in SECTIONS.items()},  # type: ignore[arg-type]
            engine=engine_params(cfg).read(_mapping(data.get("engine"))),
        )

    @staticmethod
    def sections(data: Mapping[str, Any]) -> dict[str, Params]:
        """The pre-check's: the top level and every plain section of a resolved config, every
        key present and declared (config.yaml declares them all; `~timing.tolerance` is a
        mistake) and each value in its range. RunSettings(**sections, engine=...) then."""
        for f in dataclasses.fields(RootParams):
            if f.name not in data:
                raise ConfigError(f"{f.name} is missing: it is a required setting (config.yaml declares it); drop the ~{f.name} override")
        for section, params in SECTIONS.items():
            node = data.get(section)
            known = sorted(f.name for f in dataclasses.fields(params))
            if not isinstance(node, dict):
                raise ConfigError(f"{section}={node!r} must be a mapping of settings ({', '.join(known)})")
            for key in node:
                if key not in known:
                    raise ConfigError(f"{section}.{key} is not a known setting; remove it (known in {section}: {', '.join(known)})")
            for key in known:
                if key not in node:
                    raise ConfigError(f"{section}.{key} is missing: it is a required setting; drop the ~{section}.{key} override")
        out: dict[str, Params] = {"root": RootParams.read(data)}
        out.update({name: params.build(data[name]) for name, params in SECTIONS.items()})
        return out


def engine_params(cfg: DictConfig | Mapping[str, Any]) -> type[Params]:
    """The Params the config's engine class declares (Engine.Params; engines/settings.py)."""
    cls = engine_class(cfg)  # type: ignore[arg-type]
    params = params_of(cls)
    if params is None or params.group != "engine":
        raise ConfigError(f"engine._target_={cls.__module__}.{cls.__name__} is not an engine class: it declares no engine "
                          "settings (an Engine subclass, engines/base.py); choose an engine with engine=NAME")
    return params


def engine_settings(cfg: DictConfig, node: Any = None) -> Params:
    """The engine node's settings, strictly (an unknown key refused, every value in its range)."""
    params = engine_params(cfg)
    node = _mapping(node if node is not None else _container(cfg).get("engine"))
    return params.build({k: v for k, v in node.items() if k not in ENGINE_BOOKKEEPING})


P = TypeVar("P", bound=Params)


def section(cfg: DictConfig | Mapping[str, Any], params: type[P]) -> P:
    """One declared section of a composed or stored config (RootParams: its top level), the
    declared defaults for what it lacks: for a reader that needs one section, not the engine's."""
    data = _container(cfg)
    return params.read(data if params is RootParams else _mapping(data.get(params.group)))  # type: ignore[arg-type]


def run_path(cfg: DictConfig | Mapping[str, Any]) -> Path:
    """results_dir/experiment_name/<run id>: the folder a composed config's run writes (store/
    run_folder.run_dir opens it, after checking it stays under results_dir)."""
    return Path(section(cfg, PathsParams).results_dir).expanduser() / section(cfg, RootParams).experiment_name / run_id(cfg)


def _container(cfg: DictConfig | Mapping[str, Any]) -> dict[str, Any]:
    """The keys the run's settings are read from, resolved (the method, drafter and data set
    nodes are their classes' to read, and are not resolved here)."""
    keys = [f.name for f in dataclasses.fields(RootParams)] + [*SECTIONS, "engine"]
    out: dict[str, Any] = {}
    for key in keys:
        if key not in cfg:
            continue
        value = cfg[key] if not isinstance(cfg, DictConfig) else OmegaConf.select(cfg, key)
        out[key] = OmegaConf.to_container(value, resolve=True) if OmegaConf.is_config(value) else value
    return out


def _mapping(node: Any) -> dict[str, Any]:
    return dict(node) if isinstance(node, Mapping) else {}


def run_settings(cfg: DictConfig | Mapping[str, Any]) -> RunSettings:
    """RunSettings.read: a composed or stored config's settings, defaults for what it lacks."""
    return RunSettings.read(cfg)


__all__ = ["GenerationParams", "PathsParams", "RootParams", "RunSettings", "TimingParams", "engine_params", "engine_settings",
           "run_path", "run_settings", "section"]
