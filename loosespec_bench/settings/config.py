"""Where the configs are, their groups, and run identity.

Hydra composes the config; the checks of its values live in checks.py (which imports this
module, never the other way round).
"""

from __future__ import annotations

import difflib
import functools
import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any, Iterable, Sequence

from omegaconf import DictConfig, OmegaConf

from ..errors import ConfigError
# Where the data sets are read from (paths.data_dir), declared with the tasks that read them.
from ..tasks.base import DATA_DIR_ENV, HUB_WORDS, data_dir_setting, default_data_dir  # noqa: F401 (re-exported)

PACKAGE_DIR = Path(__file__).resolve().parent.parent  # the package (this file is in settings/)
# The configs ship inside the package, so an installed wheel runs from any folder.
CONF_DIR = PACKAGE_DIR / "conf"
SITE_CONF_ENV = "LOOSESPEC_SITE_CONF"


@functools.lru_cache(maxsize=None)
def _defaults_groups() -> tuple[tuple[str, bool], ...]:
    """(group, chosen) for each group of config.yaml's defaults list, in its order; chosen:
    its option is named by the user (`method: spd`), not composed from others
    (`optional pair_drafter: ${pair}_${drafter}`). Hydra's own groups (hydra/...) are left out."""
    out = []
    defaults = OmegaConf.to_container(OmegaConf.load(CONF_DIR / "config.yaml").defaults, resolve=False)
    for entry in defaults or []:
        if not isinstance(entry, dict):
            continue  # _self_
        for key, value in entry.items():
            group = str(key).replace("optional ", "").replace("override ", "").strip()
            if "/" not in group:
                out.append((group, not (isinstance(value, str) and "${" in value)))
    return tuple(out)


# The config groups, spelled once: read from config.yaml's defaults list. GROUPS are those a
# user chooses (method=fly); ALL_GROUPS adds the ones composed from them (pair_drafter...).
ALL_GROUPS = tuple(g for g, _ in _defaults_groups())
GROUPS = tuple(g for g, chosen in _defaults_groups() if chosen)


def site_conf_dir() -> Path | None:
    """The folder of site settings that belong neither in git nor in the package (its
    local/slurm.yaml: partition, account, setup lines; slurm/README.md): $LOOSESPEC_SITE_CONF,
    else the checkout's conf/ when the package runs from a checkout; searched after the
    packaged configs (config.yaml's hydra.searchpath). A $LOOSESPEC_SITE_CONF that is not a
    folder is a ConfigError (the pre-check says so before Hydra composes anything)."""
    env = os.environ.get(SITE_CONF_ENV)
    if env is not None:
        path = Path(env).expanduser().resolve() if env.strip() else None
        if path is None or not path.is_dir():
            raise ConfigError(f"{SITE_CONF_ENV}={env!r} is not a folder; point it at the folder holding local/slurm.yaml, or unset it")
        return path
    checkout = PACKAGE_DIR.parent
    if (checkout / "pyproject.toml").is_file() and (checkout / "conf" / "local").is_dir():
        return checkout / "conf"
    return None


def _site_searchpath() -> str:
    try:
        site = site_conf_dir()
    except ConfigError:
        site = None  # the pre-check reports it; composing goes on with the packaged configs
    # A search path entry that does not exist makes Hydra warn on every run; without a site
    # folder the packaged configs stand in (listed twice, which changes nothing).
    return f"file://{site}" if site is not None and site.is_dir() else f"file://{CONF_DIR}"


# The groups `--help` lists, in this order, with a title each; the others (hydra/launcher,
# pair_drafter, experiment_scale, paper_dataset_scale) are composed by these and not chosen directly.
HELP_GROUPS = {
    "method": "Methods (method=NAME): the acceptance rule",
    "drafter": "Drafters (drafter=NAME): who proposes the K draft tokens",
    "dataset": "Data sets (dataset=NAME)",
    "paper_dataset": "Data sets as the papers ran them (paper_dataset=NAME: the set with its paper prompt and size; sweepable)",
    "pair": "Model pairs (pair=NAME): target + draft",
    "experiment": "Experiments (-m experiment=NAME: the paper's run and its sweep)",
    "scale": "Scales (scale=NAME, with an experiment)",
    "logger": "Trackers (logger=NAME)",
    "engine": "Engines (engine=NAME): who runs the models (hf = our decoding loop)",
}
DESCRIPTION_TAG = "# description:"


def description(path: Path) -> str:
    """A config file's one-line description: its `# description:` line, else its first comment."""
    first = ""
    for line in path.read_text().splitlines():
        if not line.startswith("#"):
            break
        if line.startswith(DESCRIPTION_TAG):
            return line[len(DESCRIPTION_TAG) :].strip()
        text = line.lstrip("#").strip()
        if text and not text.startswith("@") and not first:
            first = text
    return first


def search_dirs(searchpath: Iterable[str] | None = None) -> list[Path]:
    """The folders Hydra composes config groups from, in its order (the first holding a file
    wins): the packaged conf/, then the `hydra.searchpath` entries that are folders (`file://`
    paths, `pkg://` packages). searchpath None means config.yaml's own: the site folder
    (site_conf_dir). A `hydra.searchpath=[...]` override replaces that list, as in Hydra, so
    an extension's folder adds its group options (method/<name>.yaml...) without editing the
    package (docs/extending.md)."""
    entries = [_site_searchpath()] if searchpath is None else [str(e) for e in searchpath]
    dirs = [CONF_DIR]
    for entry in entries:
        folder: Path | None = None
        if entry.startswith("file://"):
            folder = Path(entry[len("file://") :]).expanduser().resolve()
        elif entry.startswith("pkg://"):
            import importlib.resources

            try:
                folder = Path(str(importlib.resources.files(entry[len("pkg://") :].replace("/", "."))))
            except (ImportError, TypeError, ValueError):
                folder = None
        if folder is not None and folder.is_dir() and folder not in dirs:
            dirs.append(folder)
    return dirs


def searchpath_override(argv: Sequence[str]) -> list[str] | None:
    """The entries of a `hydra.searchpath=[...]` command-line override, None without one."""
    for arg in argv:
        if arg.lstrip("+").startswith("hydra.searchpath="):
            from hydra.core.override_parser.overrides_parser import OverridesParser

            value = OverridesParser.create().parse_overrides([arg])[0].value()
            if isinstance(value, list):
                return [str(v) for v in value]
            raise ConfigError(f"{arg}: hydra.searchpath must be a list, e.g. hydra.searchpath=[file:///path/to/conf]")
    return None


def option_file(group: str, name: str, dirs: Sequence[Path]) -> Path | None:
    """The file Hydra composes for `group=name`: the first of the search folders holding it."""
    return next((d / group / f"{name}.yaml" for d in dirs if (d / group / f"{name}.yaml").is_file()), None)


def catalog(conf_dir: Path = CONF_DIR, searchpath: Iterable[str] | None = None) -> str:
    """Every option of the user-facing groups with its description (read from the files, so a
    new config file adds its own line), the search path's folders included."""
    dirs = [conf_dir, *(d for d in search_dirs(searchpath) if d != CONF_DIR)]
    blocks = []
    for group, title in HELP_GROUPS.items():
        names = group_choices(group, dirs)
        width = max(map(len, names), default=0)
        rows = [f"  {n:<{width}}  {description(option_file(group, n, dirs))}".rstrip() for n in names]  # type: ignore[arg-type]
        blocks.append("\n".join([f"{title}:", *rows]))
    return "\n\n".join(blocks)


# Registered on import: every entry point that composes the config imports this module first.
OmegaConf.register_new_resolver("lsb.site_conf", _site_searchpath, replace=True)
# The help template (hydra/help/loosespec.yaml) goes through string.Template after
# OmegaConf: a literal $ must be doubled there.
# Its argument is the composed hydra.searchpath, so options added through it are listed too.
OmegaConf.register_new_resolver(
    "lsb.catalog", lambda searchpath=None: catalog(searchpath=searchpath).replace("$", "$$"), replace=True
)


def data_source(data_dir: Any) -> str:
    """One line naming where a run's data come from (printed at the start of a run)."""
    if data_dir is None:
        return "the Hugging Face hub (paths.data_dir=null)"
    return f"{data_dir}" + (" (the default folder)" if Path(str(data_dir)) == default_data_dir() else "")


# config.yaml: `data_dir: ${lsb.data_dir:}`.
OmegaConf.register_new_resolver("lsb.data_dir", lambda: data_dir_setting(), replace=True)



def _judge_sha256(path: Any = None) -> str | None:
    from ..judges.head import judge_sha256  # the judge file's identity

    return judge_sha256(path)


# A rule whose config reads a trained file names its contents through this resolver (conf/method/
# autojudge.yaml), so the resolved config (run id, config.yaml, the report) names the file's contents.
OmegaConf.register_new_resolver("lsb.judge_sha256", _judge_sha256, replace=True)

# Keys that change where or how a run is reported, not what it computes: excluded from the
# run id so that e.g. turning W&B on, or growing dataset.limit, resumes the same folder.
# timing and power_threshold decide which timings count and what is flagged, not what runs;
# resources: where a job runs.
NON_SEMANTIC = ("paths", "logger", "progress", "hydra", "experiment_name", "resources", "timing", "power_threshold")
# Which samples run, not what a sample computes: records are keyed by sample id, so a folder
# holds any selection's samples (and runs from before these keys keep their run ids).
NON_SEMANTIC_DATASET = ("limit", "data_dir", "sample_seed", "same_problems")
# Sandbox settings that say where or how fast code runs, not what it computes: the hidden paths
# name the results folder, so a run id would otherwise change with LOOSESPEC_RESULTS_DIR.
NON_SEMANTIC_SANDBOX = ("hide_paths", "workers")
NEUTRAL_GENERATION = {"top_k": 0, "top_p": 1.0}
# The engine every run used before the engine group existed: its runs keep their ids (and
# folders), so only another engine's runs carry the engine node in their digest.
DEFAULT_ENGINE = "hf"
# Engine keys added after runs existed, at their neutral value (none given): left out of the run
# id, so that those runs' folders and ids stay theirs (engine.speculative_config, issue 72).
NEUTRAL_ENGINE = {"speculative_config": None}


def group_choices(group: str, conf_dir: Path | Sequence[Path] = CONF_DIR) -> list[str]:
    """The options of a config group: the yaml files in `<conf_dir>/<group>/`, over every
    folder when given several (search_dirs)."""
    dirs = [conf_dir] if isinstance(conf_dir, Path) else list(conf_dir)
    return sorted({p.stem for d in dirs if (d / group).is_dir() for p in (d / group).glob("*.yaml")})


def check_group_overrides(argv: list[str], conf_dir: Path = CONF_DIR) -> None:
    """Reject `group=unknown` command-line overrides before Hydra prints a multi-line error.

    Options are looked up where Hydra will look: conf_dir, then the search path (the site
    folder, or the folders of a `hydra.searchpath=[...]` override in argv)."""
    dirs = [conf_dir, *(d for d in search_dirs(searchpath_override(argv)) if d != CONF_DIR)]
    for arg in argv:
        if "=" not in arg or arg.startswith("-"):
            continue
        key, value = arg.split("=", 1)
        key = key.lstrip("+~")
        if key not in GROUPS or "(" in value:  # leave sweep functions (glob, choice...) to Hydra
            continue
        choices = group_choices(key, dirs)
        for v in value.split(","):
            if v and v != "null" and v not in choices:
                near = suggest_options(key, v, dirs)
                hint = f" (did you mean {' or '.join(repr(n) for n in near)}?)" if near else ""
                raise ConfigError(f"{key}={v!r} is not a known {key}{hint}; choose one of: {', '.join(choices)}")


def suggest_options(group: str, word: str, dirs: Sequence[Path]) -> list[str]:
    """The options of `group` a mistyped `word` most likely meant, read from the group's files:
    the same name in another case (FLY), else the options whose name or `# description:` line
    holds the word (scale=gpu -> paper, pair=llama -> the Llama pairs), else difflib's closest
    name. Empty when nothing is close: no suggestion beats a wrong one."""
    choices = group_choices(group, dirs)
    low = word.lower()
    same = [c for c in choices if c.lower() == low]
    if same:
        return same
    pattern = re.compile(rf"(?<![a-z0-9]){re.escape(low)}(?![a-z0-9])")
    named = [c for c in choices if low in c.lower().split("_") or (len(low) >= 3 and c.lower().startswith(low))]
    described = [c for c in choices if (f := option_file(group, c, dirs)) is not None and pattern.search(description(f).lower())]
    found = list(dict.fromkeys(named + described))
    if 0 < len(found) <= 4:
        return found
    return difflib.get_close_matches(low, choices, n=1)


def semantic_config(cfg: DictConfig) -> dict[str, Any]:
    """The part of the resolved config that determines a run's results."""
    data = OmegaConf.to_container(cfg, resolve=True)
    assert isinstance(data, dict)
    for key in NON_SEMANTIC:
        data.pop(key, None)
    for key in NON_SEMANTIC_DATASET:
        data.get("dataset", {}).pop(key, None)
    sandbox = data.get("dataset", {}).get("sandbox")
    if isinstance(sandbox, dict):
        for key in NON_SEMANTIC_SANDBOX:
            sandbox.pop(key, None)
    # Sampling truncation at its neutral value computes what runs from before the keys existed
    # computed: leaving it out keeps their folders (resume) and run ids.
    for key, neutral in NEUTRAL_GENERATION.items():
        if data.get("generation", {}).get(key, neutral) == neutral:
            data.get("generation", {}).pop(key, None)
    engine = data.get("engine") or {}
    for key, neutral in NEUTRAL_ENGINE.items():
        if engine.get(key, neutral) == neutral:
            engine.pop(key, None)
    if engine.get("name", DEFAULT_ENGINE) == DEFAULT_ENGINE:
        data.pop("engine", None)
    if not uses_drafter(cfg):
        data.pop("drafter", None)  # target alone: the drafter is irrelevant
    return data


# Keys that say which rule decodes (or how the run is protocolled), not what the target alone
# computes: a baseline store's key (baseline_config) leaves them out.
NOT_TARGET_ALONE = ("method", "drafter", "baseline", "record_steps", "warmup")


def baseline_config(cfg: DictConfig) -> dict[str, Any]:
    """The part of the resolved config that determines the target alone's output on a sample:
    the run's semantic config without the rule and protocol keys (NOT_TARGET_ALONE). Everything
    else stays (pair, dtype, device, data set and prompt settings, generation settings, chat
    template, engine, seed, threads), so two runs share a baseline store only where the target
    alone would compute the same thing (baselines.py)."""
    data = semantic_config(cfg)
    for key in NOT_TARGET_ALONE:
        data.pop(key, None)
    return data


def key_digest(key: Any) -> str:
    """The 12 hex digits a baseline store's folder is named by: the sha256 of its key (baseline_config)."""
    return hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()[:12]


def resolve_class(target: Any, group: str = "", base: type | None = None) -> type:
    """The class a config node's `_target_` names, not built: the one resolver (the drafter's,
    the engine's, the method's, the settings check's). A ConfigError naming `group` when the name
    is missing, cannot be imported, or (with `base`) is not a subclass of base."""
    from hydra.utils import get_class

    where = f"{group}._target_" if group else "_target_"
    if not isinstance(target, str) or not target:
        raise ConfigError(f"{where} is missing: the {group or 'node'} config file must name its class")
    try:
        cls = get_class(target)
    except Exception as err:
        raise ConfigError(f"{where}={target!r} cannot be imported ({err}); check the {group or 'node'} config file") from None
    if base is not None and not issubclass(cls, base):
        raise ConfigError(f"{where}={target!r} is not a {base.__name__} class; name one (e.g. {base.__module__}.{base.__name__} subclasses)")
    return cls


def class_or_none(target: Any) -> type | None:
    """resolve_class, or None where it cannot (the check that says why runs elsewhere)."""
    try:
        return resolve_class(target)
    except ConfigError:
        return None


def method_class(cfg: DictConfig) -> type | None:
    """The rule a config's method node names: the package's rule filed under method.name
    (verifiers.rule_class; a stored config's name outlives a moved class), else the class its
    _target_ names, else None (a stored config whose rule cannot be imported here)."""
    from ..verifiers import rule_class

    return rule_class(str(cfg.method.get("name"))) or class_or_none(cfg.method.get("_target_"))


def target_alone(cfg: DictConfig) -> bool:
    """Whether the config's method is the target alone (its class says: Verifier.target_alone).
    A stored config whose rule cannot be imported falls back to its own `uses_drafter: false`."""
    cls = method_class(cfg)
    if cls is None:
        return cfg.method.get("uses_drafter", True) is False
    return bool(getattr(cls, "target_alone", False))


def uses_drafter(cfg: DictConfig) -> bool:
    """Whether a drafter runs: every rule but the target alone. (conf/method/ar.yaml keeps its
    `uses_drafter: false` only because the run id hashes the composed method node; the class is
    what is read. tests/settings/test_config.py checks the two agree.)"""
    return not target_alone(cfg)


# A name that becomes part of a path (run ids, experiment folders): letters, digits and . _ - +
# = @, not starting with a dot, so that no name climbs out of the results folder or hides.
SAFE_NAME = re.compile(r"^[A-Za-z0-9_+=@-][A-Za-z0-9._+=@-]*$")


def safe_name(value: Any) -> str | None:
    """None when `value` may be one path component of a run folder, else why not."""
    if not isinstance(value, str) or not SAFE_NAME.match(value) or len(value) > 128:
        return "must be a name of letters, digits and . _ - + = @ (at most 128, not starting with a dot): it names a folder"
    return None


def safe_path_name(value: Any) -> str | None:
    """None when `value` may be a relative folder path of safe names (experiment_name: cpu/runs)."""
    if not isinstance(value, str) or not value or any(safe_name(part) for part in value.split("/")):
        return ("must be a relative folder name of letters, digits and . _ - + = @ (parts separated by /, "
                "no .., no leading /): run folders stay under paths.results_dir")
    return None
def drafter_class(cfg: DictConfig) -> Any:
    """The drafters.base.Drafter subclass cfg.drafter names (not built), or None for a method
    without a drafter or a `_target_` that cannot be imported (the settings check says so)."""
    return class_or_none(cfg.drafter.get("_target_")) if uses_drafter(cfg) else None


def drafts_tree(cfg: DictConfig) -> bool:
    """Whether the configured drafter proposes trees (its class says: Drafter.drafts_tree)."""
    cls = drafter_class(cfg)
    return bool(cls is not None and cls.drafts_tree(cfg.drafter))


# The engine of a config composed before the engine group existed (a stored config.yaml).
DEFAULT_ENGINE_TARGET = "loosespec_bench.engines.hf.HFEngine"


def engine_class(cfg: DictConfig) -> type:
    """The engines.base.Engine subclass a composed config names (cfg.engine._target_; hf when
    the config has no engine node), not yet built: its `check(cfg)` runs before any model loads."""
    node = cfg.get("engine") or {}
    return resolve_class(node.get("_target_") or DEFAULT_ENGINE_TARGET, "engine")


def _group_class(group: str, name: str) -> type | None:
    """The class conf/<group>/<name>.yaml names (its `_target_`, or the `_target_` of the option
    it extends through its defaults list, e.g. acp_prog_gen -> lm_eval), not built; None when
    this install files no such option or its class cannot be imported (a folder from elsewhere
    is data: its names are looked up, never run)."""
    if safe_name(name) is not None:
        return None
    try:
        folders = search_dirs()
    except ConfigError:  # a bad LOOSESPEC_SITE_CONF: the packaged options still have their names
        folders = [CONF_DIR]
    seen: set[str] = set()
    while name not in seen:
        seen.add(name)
        path = next((f / group / f"{name}.yaml" for f in folders if (f / group / f"{name}.yaml").is_file()), None)
        if path is None:
            return None
        try:
            node = OmegaConf.load(path)
            target = node.get("_target_")
            if target:
                from hydra.utils import get_class

                return get_class(str(target))
            parents = [d for d in (node.get("defaults") or []) if isinstance(d, str) and d != "_self_"]
        except Exception:
            return None
        if not parents:
            return None
        name = parents[0]
    return None


@functools.lru_cache(maxsize=None)
def engine_display_name(name: str) -> str:
    """How the report names engine=<name> beside a method: its class's display_name
    (Engine.display_name: "vLLM"; "" for our own loop, no tag). An engine this install does
    not file (no engine/<name>.yaml on the search path, or a class that cannot be imported) is
    named by its name."""
    cls = _group_class("engine", name)
    return str(getattr(cls, "display_name", name)) if cls is not None else name


@functools.lru_cache(maxsize=None)
def dataset_display_name(name: str, prompt: str | None = None) -> str:
    """How tables, figures and captions name dataset=<name>: its task class's display_name
    (tasks.base.Task.display_name: "MBPP+"), with `prompt` (a prompt that is not the papers')
    named by the class's prompt_labels: "MGSM (native CoT prompt)". A set this install does not
    file, or whose class declares no display name, is named by its name."""
    cls = _group_class("dataset", name)
    label = str(getattr(cls, "display_name", "") or name)
    if prompt:
        label += f" ({(getattr(cls, 'prompt_labels', None) or {}).get(prompt, prompt)} prompt)"
    return label


def check_engine(cfg: DictConfig) -> None:
    """The configured engine's own check of the settings it cannot honour (ConfigError)."""
    engine_class(cfg).check(cfg)


def run_id(cfg: DictConfig) -> str:
    """Readable and deterministic: the same command maps to the same folder (resume). Its parts
    are names the pre-check has checked (safe_name); an unchecked config with a name that would
    climb out of the results folder is a ConfigError here too."""
    digest = hashlib.sha256(json.dumps(semantic_config(cfg), sort_keys=True).encode()).hexdigest()[:8]
    drafter = f"{cfg.drafter.name}-k{cfg.drafter.k}" if uses_drafter(cfg) else "none"
    if uses_drafter(cfg) and cfg.drafter.get("tree"):
        drafter += f"-tree{cfg.drafter.total_token}d{cfg.drafter.depth}t{cfg.drafter.top_k}"
    rid = f"{cfg.method.name}_{drafter}_{cfg.pair.name}_{cfg.dataset.name}_{digest}"
    if safe_name(rid):
        raise ConfigError(f"run id {rid!r} is not a folder name; method.name, drafter.name, pair.name and dataset.name "
                          "must be names of letters, digits and . _ - + = @")
    return rid
