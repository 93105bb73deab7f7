"""Configuration checks and run identity.

Hydra composes the config; this module rejects values that would otherwise fail deep inside a
run (or, worse, run and mean nothing), each with a one-line message naming the bad value.
"""

from __future__ import annotations

import difflib
import hashlib
import json
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from .errors import ConfigError

CONF_DIR = Path(__file__).resolve().parent.parent / "conf"
GROUPS = ("method", "drafter", "pair", "dataset", "logger", "experiment", "paper_dataset")
# Keys that change where or how a run is reported, not what it computes: excluded from the
# run id so that e.g. turning W&B on, or growing dataset.limit, resumes the same folder.
NON_SEMANTIC = ("paths", "logger", "progress", "hydra", "experiment_name")
NON_SEMANTIC_DATASET = ("limit", "data_dir")


def group_choices(group: str, conf_dir: Path = CONF_DIR) -> list[str]:
    folder = conf_dir / group
    return sorted(p.stem for p in folder.glob("*.yaml")) if folder.is_dir() else []


def check_group_overrides(argv: list[str], conf_dir: Path = CONF_DIR) -> None:
    """Reject `group=unknown` command-line overrides before Hydra prints a multi-line error."""
    for arg in argv:
        if "=" not in arg or arg.startswith("-"):
            continue
        key, value = arg.split("=", 1)
        key = key.lstrip("+~")
        if key not in GROUPS or "(" in value:  # leave sweep functions (glob, choice...) to Hydra
            continue
        choices = group_choices(key, conf_dir)
        for v in value.split(","):
            if v and v != "null" and v not in choices:
                near = difflib.get_close_matches(v, choices, n=1)
                hint = f" (did you mean {near[0]!r}?)" if near else ""
                raise ConfigError(f"{key}={v!r} is not a known {key}{hint}; choose one of: {', '.join(choices)}")


def _need(cond: bool, msg: str) -> None:
    if not cond:
        raise ConfigError(msg)


def validate(cfg: DictConfig) -> None:
    """Value checks that Hydra's composition cannot express."""
    k = cfg.drafter.get("k")
    _need(isinstance(k, int) and not isinstance(k, bool) and k >= 1, f"drafter.k={k!r} must be an integer >= 1 (the draft length K)")
    t = cfg.generation.temperature
    _need(isinstance(t, (int, float)) and t >= 0, f"generation.temperature={t!r} must be >= 0 (0 = greedy)")
    is_tree = uses_drafter(cfg) and (bool(cfg.drafter.get("tree")) or cfg.drafter.name == "lookahead")
    _need(not (is_tree and t > 0), f"generation.temperature={t!r}: tree drafts (drafter.tree=true, drafter=lookahead) "
          "are verified at temperature 0 only (lossless tree sampling is not implemented)")
    m = cfg.generation.max_new_tokens
    _need(m is None or (isinstance(m, int) and m >= 1), f"generation.max_new_tokens={m!r} must be an integer >= 1 or null (the data set's default)")
    lim = cfg.dataset.get("limit")
    _need(lim is None or (isinstance(lim, int) and lim >= 1), f"dataset.limit={lim!r} must be an integer >= 1 or null (the whole set)")
    _need(cfg.baseline in ("paired", "none"), f"baseline={cfg.baseline!r} must be 'paired' or 'none'")
    from .models.loading import resolve_dtype

    resolve_dtype(cfg.pair.dtype)
    for role in ("target", "draft"):
        path = cfg.pair[role].get("path")
        _need(isinstance(path, str) and path != "", f"pair.{role}.path must be set (a hub id, a local folder, embedded:<name> or tiny:<seed>)")


def semantic_config(cfg: DictConfig) -> dict[str, Any]:
    """The part of the resolved config that determines a run's results."""
    data = OmegaConf.to_container(cfg, resolve=True)
    assert isinstance(data, dict)
    for key in NON_SEMANTIC:
        data.pop(key, None)
    for key in NON_SEMANTIC_DATASET:
        data.get("dataset", {}).pop(key, None)
    if not uses_drafter(cfg):
        data.pop("drafter", None)  # target alone: the drafter is irrelevant
    return data


def uses_drafter(cfg: DictConfig) -> bool:
    return bool(cfg.method.get("uses_drafter", True))


def run_id(cfg: DictConfig) -> str:
    """Readable and deterministic: the same command maps to the same folder (resume)."""
    digest = hashlib.sha256(json.dumps(semantic_config(cfg), sort_keys=True).encode()).hexdigest()[:8]
    drafter = f"{cfg.drafter.name}-k{cfg.drafter.k}" if uses_drafter(cfg) else "none"
    if uses_drafter(cfg) and cfg.drafter.get("tree"):
        drafter += f"-tree{cfg.drafter.total_token}d{cfg.drafter.depth}t{cfg.drafter.top_k}"
    return f"{cfg.method.name}_{drafter}_{cfg.pair.name}_{cfg.dataset.name}_{digest}"
