"""Range checks of every setting, declared per config node, run before anything slow.

Each instantiated node (method, drafter, dataset; not the logger, see validate_settings) is checked two ways:
  * its keys against the constructor of its `_target_` (inspect.signature): a key the class
    does not take (`+method.foo=1`) is an error naming it, instead of a TypeError deep in a run
    or, for classes with **kwargs, a setting silently ignored;
  * its values against RULES, a table of `key -> rule` per target class (plus `*` for keys
    every node of a group shares). A rule is a small callable returning None when the value is
    fine and else the phrase the message ends with ("must be an integer >= 1").
Plain nodes (generation, paths, the top level) are checked against the keys the packaged
config.yaml declares, so a key added there is known here without an edit.

config.validate calls `validate_settings(cfg)`; a new config option adds one line to RULES.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import math
from typing import Any, Callable

from omegaconf import DictConfig, OmegaConf

from .errors import ConfigError

Rule = Callable[[Any], "str | None"]
# Absurd beyond any model's context: catches 1e8 and typos before the model's own check.
MAX_NEW_TOKENS_CAP = 1_000_000


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_real(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def integer(lo: int | None = None, hi: int | None = None) -> Rule:
    def rule(v: Any) -> str | None:
        if _is_int(v) and (lo is None or v >= lo) and (hi is None or v <= hi):
            return None
        if hi is None:
            return f"must be an integer >= {lo}" if lo is not None else "must be an integer"
        return f"must be an integer in {lo}..{hi}"

    return rule


def real(lo: float | None = None, hi: float | None = None, *, lo_open: bool = False, hi_open: bool = False) -> Rule:
    def rule(v: Any) -> str | None:
        ok = _is_real(v)
        if ok and lo is not None:
            ok = v > lo if lo_open else v >= lo
        if ok and hi is not None:
            ok = v < hi if hi_open else v <= hi
        if ok:
            return None
        parts = []
        if lo is not None:
            parts.append(f"{'>' if lo_open else '>='} {lo:g}")
        if hi is not None:
            parts.append(f"{'<' if hi_open else '<='} {hi:g}")
        return f"must be {' and '.join(parts)} (a finite number)" if parts else "must be a finite number"

    return rule


def boolean(v: Any) -> str | None:
    return None if isinstance(v, bool) else "must be true or false"


def text(v: Any) -> str | None:
    return None if isinstance(v, str) else "must be a string"


def string(v: Any) -> str | None:
    return None if isinstance(v, str) and v != "" else "must be a non-empty string"


def choice(*options: Any) -> Rule:
    def rule(v: Any) -> str | None:
        return None if v in options else f"must be one of {', '.join(map(str, options))}"

    return rule


def optional(inner: Rule) -> Rule:
    def rule(v: Any) -> str | None:
        reason = None if v is None else inner(v)
        return reason and reason + " or null"

    return rule


def list_of(inner: Rule, *, nonempty: bool = True) -> Rule:
    def rule(v: Any) -> str | None:
        if not isinstance(v, (list, tuple)) or (nonempty and not v):
            return "must be a non-empty list" if nonempty else "must be a list"
        for x in v:
            reason = inner(x)
            if reason:
                return f"has entry {x!r} that {reason}"
        return None

    return rule


def str_or_list(v: Any) -> str | None:
    if isinstance(v, str) and v:
        return None
    return list_of(string)(v) and "must be a name or a non-empty list of names"


# --- the table ----------------------------------------------------------------------------
_TASK_COMMON: dict[str, Rule] = {
    "limit": optional(integer(1)),
    "max_new_tokens": optional(integer(1, MAX_NEW_TOKENS_CAP)),
    "stop_strings": optional(list_of(text, nonempty=False)),
    "system_prompt": optional(string),
    "sample_seed": optional(integer(0)),
}
_SANDBOX: dict[str, Rule] = {
    "isolation": choice("auto", "namespaces", "uid", "process"),
    "allow_same_user": boolean,
    "timeout_s": real(0, lo_open=True),
    "cpu_s": integer(1),
    "memory_mb": integer(1),
    "max_procs": integer(1),
    "file_mb": integer(1),
    "tmp_mb": integer(1),
    "workers": optional(integer(1)),
    "hide_paths": optional(list_of(text, nonempty=False)),
}
_JUDGE: dict[str, Rule] = {
    "kind": optional(choice("openai", "local")),
    "url": optional(string),
    "model": optional(string),
    "api_key_env": optional(string),
    "path": optional(string),
    "dtype": optional(string),
    "device": optional(string),
    "max_tokens": integer(1),
    "timeout_s": real(0, lo_open=True),
    "retries": integer(0),
}
_FEWSHOT = {"num_fewshot": integer(0)}

RULES: dict[str, dict[str, Any]] = {
    # methods
    "loosespec_bench.verifiers.fly.FLy": {
        "theta": real(0),
        "window": integer(1),
        "top_k": integer(1),
        "mode": choice("code", "paper", "vllm"),
        "no_window": boolean,
        "theta_switch_off": boolean,
        "near_limit": choice("full_k", "shrink"),
        "draft_sampling": boolean,
    },
    "loosespec_bench.verifiers.dropmatch.DropMatch": {
        "criterion": choice("naive", "js"),
        "n_paths": integer(1),
        "p": real(0, 1, hi_open=True),
        "include_clean_path": boolean,
        "majority": optional(real(0, 1, hi_open=True)),
        "lm_head_batch": optional(integer(1)),
    },
    "loosespec_bench.verifiers.autojudge.AutoJudge": {"judge_path": string, "threshold": optional(real(0, 1))},
    # drafters
    "loosespec_bench.drafters.PromptLookupDrafter": {"max_ngram": integer(1), "min_ngram": integer(1)},
    "loosespec_bench.drafters.MLADrafter": {
        "max_ngram": integer(1), "min_ngram": integer(1), "num_pred_tokens": integer(1), "lookup": choice("official", "hf"),
    },
    "loosespec_bench.drafters.CrossTokenizerDrafter": {
        "context_tokens": integer(0),
        "special_tokens": choice("keep", "skip"),
        "max_draft_factor": real(1),
    },
    "loosespec_bench.drafters.Eagle3Drafter": {
        "layers": optional(list_of(integer(0))),
        "tree": boolean,
        "total_token": integer(2, 4096),
        "depth": integer(1, 256),
        "top_k": integer(1),
    },
    "loosespec_bench.drafters.LookaheadDrafter": {"window": integer(1), "guess_set": integer(1), "seed": integer(0)},
    # data sets (the common keys are added to each)
    "loosespec_bench.tasks.gsm8k.GSM8K": {**_FEWSHOT, "match": choice("strict", "flexible"), "split": choice("test", "train")},
    "loosespec_bench.tasks.mgsm.MGSM": {
        "match": choice("strict", "flexible"),
        "prompt": choice("native_cot", "native_cot_0813"),
        "languages": str_or_list,
        "same_problems": boolean,
    },
    "loosespec_bench.tasks.humaneval.HumanEval": {"sandbox": _SANDBOX},
    "loosespec_bench.tasks.mbpp_plus.MBPPPlus": {"sandbox": _SANDBOX},
    "loosespec_bench.tasks.livecodebench.LiveCodeBench": {"sandbox": _SANDBOX, "files": str_or_list},
    "loosespec_bench.tasks.mt_bench.MTBench": {"judge": _JUDGE, "categories": optional(list_of(string))},
    "loosespec_bench.tasks.mt_bench.KoMTBench": {"judge": _JUDGE, "categories": optional(list_of(string))},
    "loosespec_bench.tasks.spec_bench.SpecBench": {"categories": optional(list_of(string))},
    "loosespec_bench.tasks.mmlu.MMLU": {"subjects": optional(list_of(string))},
    "loosespec_bench.tasks.niah.NIAH": {
        "context_lengths": list_of(integer(1)),
        "depths": list_of(real(0, 100)),
        "mode": choice("single", "multivalue"),
        "num_values": integer(1),
        "repeats": integer(1),
        "seed": integer(),
        "chars_per_token": real(0, lo_open=True),
        "answer_prefix": boolean,
    },
    "loosespec_bench.tasks.lm_eval_task.LmEvalTask": {
        "task": optional(string),  # null: LmEvalTask says which to set
        "num_fewshot": optional(integer(0)),
        "apply_chat_template": boolean,
        "fewshot_as_multiturn": boolean,
    },
}
RULES["loosespec_bench.verifiers.autojudge.DropMatchAutoJudge"] = {
    **RULES["loosespec_bench.verifiers.dropmatch.DropMatch"],
    **RULES["loosespec_bench.verifiers.autojudge.AutoJudge"],
    "combine": choice("any", "all"),
}
GROUP_COMMON: dict[str, dict[str, Rule]] = {
    "drafter": {"k": integer(1), "vocab_top": optional(integer(1))},
    "dataset": _TASK_COMMON,
}
# Keys of an instantiated node that the harness reads itself (build.BOOKKEEPING_KEYS, plus
# the ones the app or the node's own interpolations use).
HARNESS_KEYS = {"_target_", "uses_drafter", "needs_model", "needs_target", "needs_tokenizers", "vocab_top",
                "name", "data_dir", "limit", "max_new_tokens", "stop_strings", "system_prompt"}
ROOT_RULES: dict[str, Rule] = {
    "seed": integer(0),
    "baseline": choice("paired", "none"),
    "warmup": boolean,
    "chat_template": boolean,
    "record_steps": boolean,
    "progress": boolean,
    "threads": optional(integer(1, 4096)),
    "experiment_name": string,
    "power_threshold": real(0, lo_open=True),
}
TIMING_RULES: dict[str, Rule] = {
    "retime": lambda v: None if v in (True, False, "auto") else "must be true, false or auto",
    "tolerance": real(0, lo_open=True),
    "max_retimes": integer(0, 100),
}
GENERATION_RULES: dict[str, Rule] = {
    "temperature": real(0),
    "top_k": integer(0),
    "top_p": real(0, 1, lo_open=True),
    "max_new_tokens": optional(integer(1, MAX_NEW_TOKENS_CAP)),
}


def _fail(key: str, value: Any, reason: str) -> None:
    raise ConfigError(f"{key}={value!r} {reason}")


def _check_rules(prefix: str, node: dict[str, Any], rules: dict[str, Any]) -> None:
    for key, rule in rules.items():
        if key not in node:
            continue
        value = node[key]
        where = f"{prefix}.{key}" if prefix else key
        if isinstance(rule, dict):  # a nested node (dataset.sandbox, dataset.judge)
            if value is None:
                continue
            if not isinstance(value, dict):
                _fail(f"{prefix}.{key}", value, "must be a mapping of settings")
            unknown = sorted(set(value) - set(rule))
            if unknown:
                raise ConfigError(f"{prefix}.{key}.{unknown[0]} is not a setting of {prefix}.{key}; known: {', '.join(sorted(rule))}")
            _check_rules(f"{prefix}.{key}", value, rule)
            continue
        reason = rule(value)
        if reason:
            _fail(where, value, reason)


@functools.lru_cache(maxsize=None)
def _accepted(target: str) -> tuple[frozenset[str], bool] | None:
    """(keyword arguments the class takes, whether it has **kwargs); None if it cannot be imported."""
    module, _, name = target.rpartition(".")
    try:
        obj = getattr(importlib.import_module(module), name)
        params = inspect.signature(obj).parameters.values()
    except (ImportError, AttributeError, ValueError, TypeError):
        return None
    names = frozenset(p.name for p in params if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL))
    return names, any(p.kind == p.VAR_KEYWORD for p in params)


@functools.lru_cache(maxsize=None)
def _target_class(target: str) -> Any:
    """The class a `_target_` names, or None if it cannot be imported."""
    module, _, name = target.rpartition(".")
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError, ValueError):
        return None


def _check_choices(group: str, node: dict[str, Any]) -> None:
    """Settings whose allowed entries the node's class declares (`setting_choices`, e.g. MGSM's
    languages): every entry of a list (or comma-separated string) must be one of them."""
    cls = _target_class(str(node.get("_target_", "")))
    for key, allowed in (getattr(cls, "setting_choices", None) or {}).items():
        value = node.get(key)
        entries = [x.strip() for x in value.split(",")] if isinstance(value, str) else list(value or [])
        bad = [x for x in entries if x not in allowed]
        if bad:
            raise ConfigError(f"{group}.{key} has unknown entries {bad}; choose from {', '.join(allowed)}")


def _base_task_keys() -> frozenset[str]:
    from .tasks.base import Task

    return frozenset(inspect.signature(Task.__init__).parameters) - {"self"}


def _check_keys(group: str, node: dict[str, Any]) -> None:
    target = node.get("_target_")
    if not isinstance(target, str):
        return
    accepted = _accepted(target)
    if accepted is None:
        raise ConfigError(f"{group}._target_={target!r} cannot be imported; check the {group} config file")
    names, var_kw = accepted
    if var_kw and target.startswith("loosespec_bench.tasks."):
        names = names | _base_task_keys()  # tasks pass **kwargs on to Task.__init__
    elif var_kw:
        return
    for key in node:
        if key not in names and key not in HARNESS_KEYS and key not in RULES.get(target, {}):
            known = sorted(names - {"model", "target", "draft_tokenizer", "target_tokenizer", "head"})
            raise ConfigError(
                f"{group}.{key} is not a setting of {group}={node.get('name')} ({target.rsplit('.', 1)[-1]}); "
                f"remove it or use one of: {', '.join(known) or '(none)'}"
            )


@functools.lru_cache(maxsize=1)
def _declared() -> dict[str, frozenset[str]]:
    """The keys the packaged config.yaml declares at the top level and under generation/paths."""
    from .config import CONF_DIR, GROUPS

    base = OmegaConf.load(CONF_DIR / "config.yaml")
    top = frozenset(k for k in base if k != "defaults") | frozenset(GROUPS) | {"hydra", "pair_method", "pair_drafter", "experiment_scale"}
    return {
        "": top,
        "generation": frozenset(base.generation),
        "paths": frozenset(base.paths),
    }


def _check_plain(cfg: dict[str, Any]) -> None:
    declared = _declared()
    for section, known in declared.items():
        node = cfg if section == "" else cfg.get(section)
        if not isinstance(node, dict):
            if section:
                raise ConfigError(f"{section}={node!r} must be a mapping of settings ({', '.join(sorted(known))})")
            continue
        for key in node:
            if key not in known:
                where = f"{section}.{key}" if section else key
                raise ConfigError(f"{where} is not a known setting; remove it (known{' in ' + section if section else ''}: {', '.join(sorted(known))})")


def validate_settings(cfg: DictConfig) -> None:
    """Every setting's key and range; raises ConfigError naming the first bad one."""
    try:
        data = OmegaConf.to_container(cfg, resolve=True)
    except Exception as err:  # an interpolation that cannot be resolved
        text = " ".join(str(err).split("full_key:")[0].split())
        raise ConfigError(f"the config cannot be resolved: {text}") from None
    assert isinstance(data, dict)
    _check_plain(data)
    _check_rules("", data, ROOT_RULES)
    _check_rules("generation", data.get("generation") or {}, GENERATION_RULES)
    _check_rules("timing", data.get("timing") or {}, TIMING_RULES)
    # Not the logger: a tracker can never fail a run (sinks/trackers.py); a bad logger setting
    # warns once and turns the tracker off.
    for group in ("method", "drafter", "dataset"):
        node = data.get(group)
        if not isinstance(node, dict):
            continue
        _check_keys(group, node)
        _check_rules(group, node, GROUP_COMMON.get(group, {}))
        _check_rules(group, node, RULES.get(str(node.get("_target_")), {}))
    _check_cross(data)


MAX_DRAFT_K = 1024  # far above any paper's K (<= 15); catches typos such as k=100000


def _check_cross(data: dict[str, Any]) -> None:
    drafter = data.get("drafter") or {}
    k = drafter.get("k")
    if _is_int(k) and k > MAX_DRAFT_K:
        raise ConfigError(f"drafter.k={k} is beyond any useful draft length; use 1..{MAX_DRAFT_K}")
    lo, hi = drafter.get("min_ngram"), drafter.get("max_ngram")
    if _is_int(lo) and _is_int(hi) and lo > hi:
        raise ConfigError(f"drafter.min_ngram={lo} must be <= drafter.max_ngram={hi}")
    method = data.get("method") or {}
    if method.get("include_clean_path") and _is_int(method.get("n_paths")) and method["n_paths"] < 2:
        raise ConfigError(f"method.n_paths={method['n_paths']} must be >= 2 with method.include_clean_path=true")
    _check_choices("dataset", data.get("dataset") or {})
    pair = data.get("pair") or {}
    quantize = (pair.get("draft") or {}).get("quantize")
    if quantize not in (None, "none", "int8", "int4"):
        raise ConfigError(f"pair.draft.quantize={quantize!r} must be one of none, int8, int4 (weight-only, the draft only)")
    device = pair.get("device")
    if device is not None and not (isinstance(device, str) and (device in ("cpu", "cuda", "mps", "auto") or device.startswith("cuda:"))):
        raise ConfigError(f"pair.device={device!r} must be cpu, cuda, cuda:<n>, mps or auto")
