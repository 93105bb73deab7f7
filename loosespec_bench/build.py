"""Build a run's components from its composed config: the task, the acceptance rule and the
drafter, through one `instantiate` that strips the harness's bookkeeping keys.

This is the one place that knows which config keys are bookkeeping and what a drafter needs
besides its own node (the draft model, tokenizers, the target); the engines, the re-scorer and
the engine benchmark all build through it. It may import drafters, verifiers, models and tasks;
nothing below it imports it. The engine (cfg.engine) is named by its `_target_` string, not
imported: engines build their drafters through this module, so they sit above it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from hydra.errors import InstantiationException
from hydra.utils import instantiate as hydra_instantiate
from omegaconf import DictConfig, OmegaConf

from .settings.config import DEFAULT_ENGINE_TARGET, check_engine, class_or_none, drafter_class, engine_class, method_class, resolve_class, uses_drafter  # noqa: F401 (re-exported)
from .drafters.base import Drafter
from .errors import ConfigError, one_line
from .models import LoadedModel, load_model
from .models.quantize import quantize_drafter
from .models.subvocab import restrict_draft_vocab
from .models.loading import load_options
from .params import BOOKKEEPING_KEYS, check_node, declared_rules, params_of  # noqa: F401 (BOOKKEEPING_KEYS re-exported)
from .settings.run_settings import PathsParams, section
from .tasks import Task
from .verifiers.base import Verifier



def instantiate(node: DictConfig | dict[str, Any], **kwargs: Any) -> Any:
    """hydra's instantiate of a config node (resolved), without the bookkeeping keys; kwargs
    add or override arguments (e.g. the loaded models a drafter needs)."""
    cfg = OmegaConf.to_container(node, resolve=True) if OmegaConf.is_config(node) else dict(node)
    assert isinstance(cfg, dict)
    for key in BOOKKEEPING_KEYS:
        cfg.pop(key, None)
    _check_settings(cfg)
    try:
        return hydra_instantiate(cfg, **kwargs)
    except InstantiationException as err:
        # Hydra wraps what the constructor raised; a ConfigError (a task's own check of its
        # settings) must reach the CLI as itself, one `error:` line.
        cause = err.__cause__ or err.__context__
        while cause is not None and not isinstance(cause, ConfigError):
            cause = cause.__cause__ or cause.__context__
        if cause is not None:
            raise cause from None
        raise


def _check_settings(cfg: dict[str, Any]) -> None:
    """A class that declares SETTINGS (the tasks) gets its node's values checked against them
    here, so that every way of building it (a run, the re-scorer) checks the same declaration;
    classes with a Params dataclass check in their constructor."""
    cls = class_or_none(cfg.get("_target_"))  # None: hydra's own error names it
    if cls is not None and issubclass(cls, Task) and params_of(cls) is None:
        check_node("dataset", cfg, declared_rules(cls))


def build_task(
    cfg: DictConfig | Mapping[str, Any],
    overrides: Sequence[str] = (),
    *,
    workers: int | None = None,
    check: Callable[[dict[str, Any]], Any] | None = None,
) -> Task:
    """The data set of a composed config (cfg.dataset): the one way a task is built (a run,
    the re-scorer, the scripts). overrides: `KEY=VALUE` settings of the dataset node applied
    first (the re-scorer's --set); workers: the sandbox's worker count, for a node that has a
    sandbox; check: called with the resolved node before it is built (the re-scorer's
    pre-check, checks.check_group_node, which sits above this module)."""
    node = cfg["dataset"]
    overrides = list(overrides)
    if workers and "sandbox" in node:
        overrides.append(f"sandbox.workers={workers}")
    if not overrides and check is None:
        return instantiate(node)
    for item in overrides:
        key, sep, _ = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--set {item!r}: expected KEY=VALUE, e.g. --set judge.kind=openai")
    try:
        data = OmegaConf.to_container(node, resolve=True) if OmegaConf.is_config(node) else dict(node)
        if overrides:
            merged = OmegaConf.merge(OmegaConf.create(data), OmegaConf.from_dotlist(overrides))
            data = OmegaConf.to_container(merged, resolve=True)
    except ConfigError:
        raise
    except Exception as err:
        raise ConfigError(f"the dataset settings cannot be read: {one_line(err)}") from None
    if not isinstance(data, dict):
        raise ConfigError("the dataset node is not a mapping of settings")
    if check is not None:
        check(data)
    return instantiate(data)


def check_data(cfg: DictConfig) -> None:
    """The data set's samples load from its local files (present, readable, well formed: the
    task's own loader, Task.samples), without a model: the CLI calls it for each data set of a
    sweep before the first point runs. A data set read from the hub (no data_dir) is left to
    the run, which loads it before its models."""
    if cfg.dataset.get("data_dir"):
        build_task(cfg).samples()


def check_artefacts(cfg: DictConfig) -> None:
    """Trained files a rule reads (its class's check_artefacts: AutoJudge's judge): a missing or
    malformed one is a ConfigError here, before any model loads or any result folder is made (app.run, per point).
    Kept out of checks.validate and the sweep pre-check, which check settings only: an experiment
    composes and validates on a machine that lacks the artefacts (the cluster has them)."""
    cls = method_class(cfg)
    if cls is not None:
        cls.check_artefacts(cfg.method)  # the rule's own (Verifier.check_artefacts)


def build_engine(cfg: DictConfig, task: Task) -> Any:
    """The loaded engine (an engines.base.Engine) of a composed config, for the task's stop
    strings: this is where the models load."""
    return engine_class(cfg)(cfg, task)


def build_verifier(cfg: DictConfig) -> Verifier:
    """The acceptance rule of a composed config (cfg.method)."""
    return instantiate(cfg.method)


def build_drafter(cfg: DictConfig, target_loaded: LoadedModel) -> Drafter | None:
    """The drafter of a composed config, or None for a method without one (method=ar).

    Loads what the drafter class declares it needs (Drafter.needs_model, needs_tokenizers,
    needs_target): the pair's draft model, its tokenizer and the target's for a draft with
    another vocabulary, the target model itself for heads on its hidden states (EAGLE-3).
    """
    if not uses_drafter(cfg):
        return None
    pair, node = cfg.pair, cfg.drafter
    cls = resolve_class(node.get("_target_"), "drafter", Drafter)
    extra: dict[str, Any] = {}
    if cls.needs_model:
        device = pair.get("draft_device") or pair.device
        draft = load_model(pair.draft.path, dtype=pair.dtype, device=device, **load_options(pair.draft))
        extra["model"] = draft.model
        if cls.needs_tokenizers:  # a draft with another vocabulary
            extra.update(draft_tokenizer=draft.tokenizer, target_tokenizer=target_loaded.tokenizer)
    if cls.needs_target:  # heads on the target's hidden states (EAGLE-3)
        extra["target"] = target_loaded.model
    drafter = instantiate(node, **extra)
    # drafter.vocab_top (FR-Spec style): the draft's LM head over the most frequent ids only,
    # before quantising so that the smaller head is the one quantised. pair.draft.quantize:
    # weight-only int8/int4 linears for the draft network (a draft model or an EAGLE-3 head),
    # once here; the target is never quantised, so lossless methods stay lossless.
    restrict_draft_vocab(drafter, node.get("vocab_top"), target_loaded.tokenizer, section(cfg, PathsParams).data_dir)
    quantize_drafter(drafter, pair.draft.get("quantize"))
    return drafter
