"""The command line's advice: a mistake on `python -m loosespec_bench ...` said in the project's
words, as one ConfigError line that names what to change.

Hydra's own messages advise `+key=value` for a mistyped key (which adds a key the checks then
refuse), "missing EQUAL at '<EOF>'" for a bare word and "unrecognized arguments" for lm-eval's
flags. Here each becomes advice computed from the actual config tree: did-you-mean over the
group's option files (group_choices) and the composed node's keys, never a list written twice.
Nothing here loads a model; config.py's composition helpers are the only dependency.
"""

from __future__ import annotations

import difflib
import re
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Sequence

from omegaconf import DictConfig, OmegaConf

from .config import ALL_GROUPS, GROUPS, group_choices, search_dirs, searchpath_override
from ..errors import ConfigError

Compose = Callable[[list[str]], DictConfig]


def _near(word: str, choices: Sequence[str], n: int = 1) -> list[str]:
    """Close matches, case-insensitive (drafter.K -> k), returned in the choices' own spelling;
    a unique key the word begins (generation.temp -> temperature) counts as close."""
    by_lower = {str(c).lower(): str(c) for c in choices}
    close = [by_lower[m] for m in difflib.get_close_matches(word.lower(), list(by_lower), n=n, cutoff=0.6)]
    if close:
        return close
    starts = [c for low, c in by_lower.items() if len(word) >= 3 and low.startswith(word.lower())]
    return starts if len(starts) == 1 else []


def _listing(names: Sequence[str], limit: int = 20) -> str:
    names = list(names)
    more = f", ... ({len(names)} in all)" if len(names) > limit else ""
    return ", ".join(names[:limit]) + more


def _dirs(overrides: Sequence[str]) -> list:
    try:
        return search_dirs(searchpath_override(list(overrides)))
    except ConfigError:
        return search_dirs()


# --- words that are not overrides: bare words, lm-eval's flags ------------------------------

def _groups_with_option(word: str, dirs: Sequence[Any]) -> list[str]:
    return [g for g in GROUPS if word in group_choices(g, dirs)]


def bare_word_hint(word: str, dirs: Sequence[Any] | None = None) -> str:
    """`python -m loosespec_bench fly`: the override the word most likely meant."""
    dirs = list(dirs) if dirs is not None else search_dirs()
    exact = _groups_with_option(word, dirs)
    if exact:
        return (f"{word!r} is not an override (key=value); did you mean "
                + " or ".join(f"{g}={word}" for g in exact) + "?")
    top = _top_level_keys()
    if word.split(".", 1)[0] in top or word.split(".", 1)[0] in ALL_GROUPS:
        return f"{word!r} needs a value: {word}=VALUE (python -m loosespec_bench --help lists the options)"
    options = {f"{g}={o}": o for g in GROUPS for o in group_choices(g, dirs)}
    near = _near(word, list(options.values()), n=3)
    guesses = [k for k in options if options[k] in near][:3]
    hint = f"; did you mean {' or '.join(guesses)}?" if guesses else " (python -m loosespec_bench --help lists the options)"
    return f"{word!r} is not an override: write key=value, e.g. method=fly dataset=gsm8k{hint}"


def _default_is_null(group: str) -> bool:
    """Whether config.yaml's defaults list leaves `group` out unless chosen (`experiment: null`)."""
    from .config import CONF_DIR

    for entry in OmegaConf.to_container(OmegaConf.load(CONF_DIR / "config.yaml").defaults) or []:
        if isinstance(entry, dict) and group in entry:
            return entry[group] is None
    return False


def _top_level_keys() -> list[str]:
    from .config import CONF_DIR

    node = OmegaConf.load(CONF_DIR / "config.yaml")
    return [k for k in node if k not in ("defaults", "hydra")]


def _lm_eval_task(value: str, dirs: Sequence[Any]) -> str:
    datasets = group_choices("dataset", dirs)
    tasks = [t for t in value.split(",") if t]
    if all(t in datasets for t in tasks):
        return ("-m " if len(tasks) > 1 else "") + f"dataset={','.join(tasks)}"
    # Not one of ours: lm-eval's own task through the lm_eval data set.
    return ("-m " if len(tasks) > 1 else "") + f"dataset=lm_eval dataset.task={','.join(tasks)}"


def _pair_for_model_args(value: str, dirs: Sequence[Any]) -> str:
    """`--model_args pretrained=X,dtype=Y,device=Z` as pair overrides: the pair whose target is
    X when one is declared, else pair.target.path=X."""
    args = dict(part.split("=", 1) for part in value.split(",") if "=" in part)
    out = []
    pretrained = args.get("pretrained")
    if pretrained:
        pairs = []
        for name in group_choices("pair", dirs):
            path = next((d / "pair" / f"{name}.yaml" for d in dirs if (d / "pair" / f"{name}.yaml").is_file()), None)
            node = OmegaConf.load(path) if path is not None else {}
            if str(OmegaConf.select(node, "target.path", default="")) == pretrained:
                pairs.append(name)
        out.append(f"pair={pairs[0]}" if pairs else f"pair.target.path={pretrained} pair.draft.path=DRAFT")
    if "dtype" in args:
        out.append(f"pair.dtype={args['dtype']}")
    if "device" in args:
        out.append(f"pair.device={args['device']}")
    return " ".join(out) or "pair=NAME (python -m loosespec_bench --help lists the pairs)"


def _engine_for_model(value: str, dirs: Sequence[Any]) -> str:
    engines = group_choices("engine", dirs)
    return f"engine={value}" if value in engines else f"engine=NAME (one of {', '.join(engines)})"


def _kv(value: str, prefix: str) -> str:
    return " ".join(f"{prefix}.{part}" for part in value.split(",") if "=" in part) or f"{prefix}.KEY=VALUE"


# lm-eval's flags (lm_eval --help), each with the override that does the same here; None: the
# flag has no equivalent (said so, rather than silently dropped).
LM_EVAL_FLAGS: dict[str, Callable[[str, Sequence[Any]], str] | str | None] = {
    "--tasks": _lm_eval_task,
    "--limit": lambda v, d: f"dataset.limit={v}",
    "--output_path": lambda v, d: f"paths.results_dir={v}",
    "--model_args": _pair_for_model_args,
    "--model": _engine_for_model,
    "--num_fewshot": lambda v, d: f"dataset.num_fewshot={v}",
    "--device": lambda v, d: f"pair.device={v}",
    "--seed": lambda v, d: f"seed={v}",
    "--gen_kwargs": lambda v, d: _kv(v, "generation"),
    "--wandb_args": lambda v, d: "logger=wandb " + _kv(v, "logger"),
    "--include_path": lambda v, d: f"dataset=lm_eval dataset.include_path={v}",
    "--system_instruction": lambda v, d: f"dataset.system_prompt={v!r}",
    "--apply_chat_template": "chat_template=true",
    "--fewshot_as_multiturn": "dataset.fewshot_as_multiturn=true",
    "--log_samples": "",  # samples.jsonl is always written
    "--batch_size": None,
}
# Flags of lm-eval that take no value.
LM_EVAL_SWITCHES = ("--apply_chat_template", "--fewshot_as_multiturn", "--log_samples")


def hydra_flags() -> set[str]:
    """Every option string Hydra's own parser knows (-m, --cfg, -cn ...)."""
    from hydra._internal.utils import get_args_parser

    return set(get_args_parser()._option_string_actions)


def check_flags(argv: Sequence[str]) -> None:
    """Flags Hydra does not know, said as the overrides that do the same: lm-eval's
    (`--tasks gsm8k --limit 10` -> `dataset=gsm8k dataset.limit=10`) and `--key value` for a
    config key or group (`--method fly` -> `method=fly`). ConfigError with the whole command's
    translation, so that one line is enough to fix it."""
    known = hydra_flags()
    dirs = _dirs(argv)
    top = set(_top_level_keys()) | set(ALL_GROUPS)
    said: list[str] = []
    equivalent: list[str] = []
    missing: list[str] = []
    i = 0
    args = list(argv)
    while i < len(args):
        arg = args[i]
        flag, eq, inline = arg.partition("=")
        if not arg.startswith("-") or flag in known:
            i += 1
            continue
        if not arg.startswith("--"):  # -M, -c: a short flag Hydra does not have
            same = [k for k in sorted(known) if k.lower() == flag.lower()] or _near(flag, sorted(known))
            hint = f" (did you mean {same[0]}?)" if same else ""
            raise ConfigError(f"{flag} is not an option{hint}; settings are key=value overrides "
                              "(python -m loosespec_bench --help lists them)")
        takes_value = flag not in LM_EVAL_SWITCHES
        value = inline if eq else (args[i + 1] if takes_value and i + 1 < len(args) and not args[i + 1].startswith("-") else None)
        consumed = 1 + (1 if takes_value and not eq and value is not None else 0)
        name = flag[2:].replace("-", "_")
        said.append(" ".join(args[i : i + consumed]))
        if flag in LM_EVAL_FLAGS:
            rule = LM_EVAL_FLAGS[flag]
            if rule is None:
                missing.append(f"{flag} has no equivalent: samples run one at a time, speculative decoding is timed per sequence")
            elif isinstance(rule, str):
                if rule:
                    equivalent.append(rule)
            elif value is None:
                missing.append(f"{flag} needs a value")
            else:
                equivalent.append(rule(value, dirs))
        elif name in top or name.split(".")[0] in top:
            equivalent.append(f"{name}={value}" if value is not None else f"{name}=VALUE")
        else:
            near = _near(flag, sorted(known), n=1)
            hint = f" (did you mean {near[0]}?)" if near else ""
            raise ConfigError(f"{flag} is not an option{hint}; settings are key=value overrides "
                              "(python -m loosespec_bench --help lists them)")
        i += consumed
    if not said:
        return
    rest = [a for a in args if not a.startswith("-")]
    # values consumed by the flags are not overrides
    for s in said:
        for part in s.split(" ")[1:]:
            if part in rest:
                rest.remove(part)
    parts = [*rest, *equivalent]
    command = "python -m loosespec_bench " + " ".join(parts) if parts else ""
    lm_eval = any(s.split(" ")[0].split("=")[0] in LM_EVAL_FLAGS for s in said)
    text = f"{' '.join(said)}: {'lm-eval style flags' if lm_eval else 'not flags'}; this harness takes key=value overrides"
    if command:
        text += f": {command}"
    if missing:
        text += "; " + "; ".join(missing)
    raise ConfigError(text)


# --- overrides Hydra cannot read ------------------------------------------------------------

_PAIRS = {"[": "]", "{": "}", "(": ")"}


def _unbalanced(value: str) -> str | None:
    """The first bracket or quote of `value` that is not closed (or closed without opening)."""
    stack: list[str] = []
    quote: str | None = None
    for ch in value:
        if quote:
            if ch == quote:
                quote = None
            continue
        if ch in "'\"":
            quote = ch
        elif ch in _PAIRS:
            stack.append(ch)
        elif ch in _PAIRS.values():
            if not stack or _PAIRS[stack.pop()] != ch:
                return f"{ch} without its opening bracket"
    if quote:
        return f"the quote {quote} is not closed"
    if stack:
        return f"{stack[-1]} is not closed ({_PAIRS[stack[-1]]} missing)"
    return None


def check_override_syntax(overrides: Sequence[str]) -> None:
    """Each override Hydra's grammar cannot read, said as what to write instead: a bare word
    (the option it names), `group=` with no value (the group's options), an unbalanced bracket
    or quote, `~group` on a group every run needs."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parser = OverridesParser.create()
    dirs = _dirs(overrides)
    for i, arg in enumerate(overrides):
        if "=" not in arg and not arg.startswith("~"):
            before = overrides[i - 1] if i else ""
            if "=" in before and not _groups_with_option(arg, dirs) and arg.split(".", 1)[0] not in ALL_GROUPS:
                # `drafter.k=3 5`: a value cut by a space, or values meant as a sweep.
                key = before.partition("=")[0]
                raise ConfigError(f"{arg!r} is not an override (key=value); a value with a space needs quotes "
                                  f"({key}='{before.partition('=')[2]} {arg}'), several values are a sweep (-m {key}={before.partition('=')[2]},{arg})")
            raise ConfigError(bare_word_hint(arg, dirs))
        key, _, value = arg.partition("=")
        if value.endswith(",") and not value.endswith("\\,"):
            raise ConfigError(f"{arg} ends with a comma; one value is {key}={value.rstrip(',')}, several are a sweep "
                              f"(-m {key}={value.rstrip(',')},OTHER)")
        bare_key = key.lstrip("+~").split("@", 1)[0]
        if "=" in arg and value == "" and bare_key in ALL_GROUPS:
            raise ConfigError(f"{arg} gives {bare_key} no option; choose one of: {_listing(group_choices(bare_key, dirs))}")
        if "=" in arg and value == "":
            raise ConfigError(f"{arg} gives {bare_key} no value; write {bare_key}=VALUE, or {bare_key}=null where null is allowed")
        if key.startswith("~") and bare_key in ALL_GROUPS:
            if _default_is_null(bare_key):
                raise ConfigError(f"{arg}: to leave {bare_key} out write {bare_key}=null (the other groups' choices refer to it)")
            raise ConfigError(f"{arg} removes the {bare_key} group, which every run needs; choose another option "
                              f"({bare_key}=NAME: {_listing(group_choices(bare_key, dirs))})")
        try:
            parser.parse_overrides([arg])
        except Exception as err:
            why = _unbalanced(value)
            if why:
                raise ConfigError(f"{arg}: {why}; close it, or quote the whole value ({bare_key}='...')") from None
            from ..errors import one_line

            raise ConfigError(f"{arg}: not an override Hydra can read ({one_line(err)}); write key=value, quoting a "
                              f"value with spaces or special characters ({bare_key}='...')") from None


# --- a sweep without -m, a drafter no point uses ------------------------------------------------

def check_declared_sweep(overrides: Sequence[str], config_name: str = "config") -> None:
    """A command without -m whose config declares a sweep (an experiment's hydra.sweeper.params)
    is refused: Hydra would run one point, the experiment file's own values, exit 0, and the
    user would take it for the experiment. Refusing (rather than running the sweep) keeps the
    rule that -m is what starts several runs (hours of them, at paper scale) and that a command
    without it is one run. Giving every swept key one value on the command line picks one point
    on purpose: that runs."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    if not any(o.lstrip("+").startswith(("experiment=", "hydra.sweeper")) for o in overrides):
        return  # only an experiment (or a sweeper override) declares a sweep
    try:
        with _composer(config_name) as compose:
            cfg = compose(list(overrides))
    except Exception:
        return  # a bad command: the pre-check says what is wrong with it

    node = OmegaConf.select(cfg, "hydra.sweeper.params")
    params = OmegaConf.to_container(node, resolve=False) if isinstance(node, DictConfig) else {}
    assert isinstance(params, dict)
    given = {o.lstrip("+~").split("=", 1)[0] for o in overrides}
    parsed = OverridesParser.create().parse_overrides([f"{k}={v}" for k, v in params.items() if str(k) not in given])
    # A one-value param (a scale's `pair: qwen25_coder_embedded`) is a setting, not a sweep.
    swept = [o for o in parsed if o.is_sweep_override()]
    if not swept:
        return
    point = " ".join(f"{o.key_or_group}={next(iter(o.sweep_string_iterator()))}" for o in swept)
    who = next((o for o in overrides if o.startswith("experiment=")), "this config")
    raise ConfigError(f"{who} declares a sweep ({' '.join(o.input_line for o in swept)}); add -m to run every point "
                      f"(python -m loosespec_bench -m {' '.join(overrides)}), or give each swept key one value for one run "
                      f"(e.g. {point})")


def check_added_keys(overrides: Sequence[str], config_name: str = "config") -> None:
    """`+group.key=value` on an option that no class reads (logger=none, where logger=wandb has
    a _target_): the checks cannot refuse it, the run would ignore it. Said as the key's real home."""
    added = [o for o in overrides if o.startswith("+") and not o.startswith("++") and "." in o.partition("=")[0]]
    if not added:
        return
    with _composer(config_name) as compose:
        plain = [o for o in overrides if o not in added]
        try:
            cfg = compose(_first_points(plain))
        except Exception:
            return  # the pre-check has said what is wrong
        dirs = _dirs(overrides)
        for line in added:
            key, _, value = line[1:].partition("=")
            group = key.split(".", 1)[0]
            node = cfg.get(group) if group in ALL_GROUPS else None
            # An option with no class where the group's others have one (logger=none beside
            # wandb): nothing reads its keys. Groups without classes (pair) are checked by validate.
            if (isinstance(node, DictConfig) and "_target_" not in node and OmegaConf.select(cfg, key, default=None) is None
                    and any("_target_" in keys for _, keys in _options_with(group, "", compose, dirs))):
                raise ConfigError(f"{line}: {group}={_choice(cfg, group)} reads no settings; "
                                  + _missing_key(key, value, cfg, compose, dirs))


def check_drafter_used(overrides: Sequence[str], points: Sequence[tuple[list[str], DictConfig]]) -> None:
    """A drafter or drafter setting on the command line that no point of the run uses (method=ar
    runs the target alone): ignoring it silently would let `method=ar drafter=pld` pass for a
    PLD run."""
    from .config import uses_drafter

    given = [o for o in overrides if o.lstrip("+~").split("=", 1)[0].split(".", 1)[0].split("@", 1)[0] == "drafter"]
    if not given or any(uses_drafter(cfg) for _, cfg in points):
        return
    methods = sorted({str(cfg.method.get("name")) for _, cfg in points})
    raise ConfigError(f"{' '.join(given)}: method={','.join(methods)} uses no drafter (the target decodes alone); "
                      "remove the drafter setting, or choose a method that drafts (e.g. method=spd)")


# --- composition errors ---------------------------------------------------------------------

def _choice(cfg: DictConfig | None, group: str) -> str | None:
    if cfg is None:
        return None
    choice = OmegaConf.select(cfg, f"hydra.runtime.choices.{group}", default=None)
    return str(choice) if choice is not None else None


def _options_with(group: str, subkey: str, compose: Compose, dirs: Sequence[Any]) -> list[tuple[str, list[str]]]:
    """(option, the keys of its node at subkey's parent) for each option of the group, composed
    as the run would compose it (defaults lists included)."""
    out = []
    parent = subkey.rsplit(".", 1)[0] if "." in subkey else ""
    for option in group_choices(group, dirs):
        try:
            node = compose([f"{group}={option}"])[group]
        except Exception:
            continue
        sub = OmegaConf.select(node, parent, default=None) if parent else node
        if isinstance(sub, DictConfig):
            out.append((option, [str(k) for k in sub.keys()]))
    return out


def _missing_key(key: str, value: str, cfg: DictConfig | None, compose: Compose, dirs: Sequence[Any]) -> str:
    """`key=value` where the composed config has no `key`: the node's own close keys, else the
    options of its group that have it, else where a key of that name lives."""
    parts = key.split(".")
    # The deepest node that exists.
    depth = 0
    node: Any = cfg
    while cfg is not None and depth < len(parts) - 1:
        child = node.get(parts[depth]) if isinstance(node, DictConfig) else None
        if not isinstance(child, DictConfig):
            break
        node = child
        depth += 1
    parent = ".".join(parts[:depth])
    leaf = parts[depth]
    keys = [str(k) for k in node.keys() if k not in ("defaults", "hydra")] if isinstance(node, DictConfig) else []
    group = parts[0] if parts[0] in ALL_GROUPS else None
    choice = _choice(cfg, group) if group else None
    owner = f"{group}={choice}" if group and choice else (parent or "the config")
    if depth < len(parts) - 1 and isinstance(node, DictConfig) and leaf in node:
        return f"{key}={value}: {'.'.join(parts[: depth + 1])} is a value, not a group of settings; set it directly ({'.'.join(parts[: depth + 1])}=VALUE)"
    near = _near(leaf, keys)
    if near:
        fixed = ".".join([*parts[:depth], near[0], *parts[depth + 1 :]])
        return f"{key} is not a setting of {owner}; did you mean {fixed}={value}?"
    if group and depth >= 1:
        sub = ".".join(parts[1 : depth + 1])
        have = [o for o, ks in _options_with(group, sub, compose, dirs) if leaf in ks]
        if have:
            return (f"{key} is not a setting of {owner}; it is one of {group}={', '.join(have)}: choose one of those "
                    f"({group}={have[0]} {key}={value}) or leave {key} out")
        others = _options_with(group, sub, compose, dirs)
        close = sorted({n for _, ks in others for n in _near(leaf, ks)})
        if close:
            owners = [o for o, ks in others if close[0] in ks]
            fixed = ".".join([*parts[:-1], close[0]])
            return (f"{key} is not a setting of {owner}; did you mean {fixed}? It is a setting of "
                    f"{group}={', '.join(owners)} ({group}={owners[0]} {fixed}={value})")
    if depth == 0 and cfg is not None:
        # A key given at the top that lives in a node: `limit=2` -> dataset.limit=2.
        homes = [f"{n}.{leaf}" for n in cfg if n != "hydra" and isinstance(cfg.get(n), DictConfig) and leaf in cfg[n]]
        if homes:
            return f"{key} is not a top-level setting; did you mean {homes[0]}={value}?"
    where = f"of {owner}" if depth else "at the top level"
    return f"{key} is not a setting {where}; {'known: ' + _listing(sorted(keys)) if keys else 'remove it'}"


# Hydra's messages where its exception carries no field to read (after errors.one_line: first
# letter lowered, lines joined by "; "). The rest is read from the error's type and fields: our
# UnknownSetting's key, Hydra's MissingConfigException (missing_cfg_file), omegaconf's key error
# under a failed override (full_key).
_OVERRIDE = re.compile(r"[Cc]ould not override '([^']+)'")
_APPEND = re.compile(r"[Aa]n item is already at '([^']+)'")
_DELETE = re.compile(r"[Cc]ould not delete from config\. '([^']+)' does not exist")
_MULTIPLE = re.compile(r"[Mm]ultiple values for ([\w/]+)\.")


def _first_points(overrides: Sequence[str]) -> list[str]:
    """Each sweep override (-m method=spd,fly) as its first value: a config to read keys from
    (the master compose of a sweep fails before any point is named)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parser = OverridesParser.create()
    out = []
    for line in overrides:
        try:
            o = parser.parse_overrides([line])[0]
            out.append(f"{o.get_key_element()}={next(iter(o.sweep_string_iterator()))}" if o.is_sweep_override() else line)
        except Exception:
            out.append(line)
    return out


@contextmanager
def _composer(config_name: str) -> Iterator[Compose]:
    """compose(overrides) -> the config (with its hydra node) as a run composes it."""
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.types import RunMode

    from .config import CONF_DIR

    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3", job_name="__main__"):
            hydra = GlobalHydra.instance().hydra
            assert hydra is not None
            yield lambda ov: hydra.compose_config(config_name, list(ov), run_mode=RunMode.RUN, with_log_configuration=False)
    finally:
        GlobalHydra.instance().clear()


def _override_key(cause: BaseException | None, message: str) -> str | None:
    """The key of a failed override: omegaconf's key error under Hydra's says it (full_key);
    Hydra's own text where it has none (`method@foo=fly`)."""
    from omegaconf.errors import OmegaConfBaseException

    from hydra.errors import ConfigCompositionException

    if not isinstance(cause, ConfigCompositionException):
        return None
    inner = cause.__cause__ or cause.__context__
    if isinstance(inner, OmegaConfBaseException) and getattr(inner, "full_key", None):
        return str(inner.full_key)
    m = _OVERRIDE.search(message)
    return m.group(1) if m else None


def explain_composition_error(error: BaseException, overrides: Sequence[str], config_name: str = "config") -> str:
    """The pre-check's line for a composition error as advice: did-you-mean over the node's real
    keys and the group's real options, never Hydra's `+key`. Read from the error's type and
    fields (checks.UnknownSetting's key; points.CompositionError's cause and point: Hydra's
    MissingConfigException, omegaconf's key error), Hydra's text only where its exception has
    no field. The config is composed without the offending override to read the tree the user
    meant to change. Other errors come back as their message."""
    from hydra.errors import MissingConfigException

    from .checks import UnknownSetting

    message = str(error)
    dirs = _dirs(overrides)
    original = list(overrides)
    prefix = ""
    point = getattr(error, "point", None)
    if point is not None:
        # A point of a -m sweep: its own overrides (one value each) say what was composed.
        prefix, overrides = f"sweep point {point}: ", point.split()
    overrides = _first_points(overrides)
    cause = getattr(error, "cause", None)

    def by_key(key: str) -> tuple[str, str]:
        """The override (as composed) that names key, and its value as the user typed it."""
        typed = next((o.partition("=")[2] for o in original if o.partition("=")[0].lstrip("+~") == key), "")
        for o in overrides:
            k, _, v = o.partition("=")
            if k.lstrip("+~") == key:
                return o, typed or v
        return key, typed

    with _composer(config_name) as compose:

        def without(line: str) -> DictConfig | None:
            try:
                return compose([o for o in overrides if o != line])
            except Exception:
                return None

        if key := _override_key(cause, message):
            line, value = by_key(key)
            if "@" in key or "/" in key:
                base = re.split(r"[@/]", key, maxsplit=1)[0]
                if base in ALL_GROUPS:
                    return f"{prefix}{line}: choose an option with {base}=NAME ({_listing(group_choices(base, dirs))})"
            advice = prefix + _missing_key(key, value, without(line), compose, dirs)
            group = key.split(".", 1)[0]
            if "it is one of" in advice and group in ALL_GROUPS and any(o.startswith(f"{group}=") and "," in o for o in original):
                advice += f"; a -m sweep over {group} sets it for every point: sweep the {group}s that have it on their own"
            return advice
        if isinstance(error, UnknownSetting) and any(o.startswith(f"+{error.key}=") for o in original):
            # `+method.<a FLy knob>=...` under spd: the checks refuse it ("use one of: (none)"); the
            # advice says where the key does live, or its close spelling.
            key = error.key
            line, value = by_key(key)
            advice = _missing_key(key, value, without(line), compose, dirs)
            if "did you mean" in advice or "it is one of" in advice:
                return f"{prefix}{line}: {advice} (without the +)"
            return message
        if m := _APPEND.search(message):
            key = m.group(1)
            line, value = by_key(key)
            return f"{prefix}{line}: {key} is already a setting; drop the +: {key}={value}"
        if m := _DELETE.search(message):
            key = m.group(1)
            line, _ = by_key(key)
            return f"{prefix}{line}: nothing to remove ({_missing_key(key, 'VALUE', without(line), compose, dirs)})"
        if m := _MULTIPLE.search(message):
            group = m.group(1)
            line, value = by_key(group)
            return f"{prefix}{line}: {group} already has an option; drop the +: {group}={value}"
        if isinstance(cause, MissingConfigException) and "/" in str(cause.missing_cfg_file or ""):
            group, option = str(cause.missing_cfg_file).rsplit("/", 1)
            options = group_choices(group, dirs)
            near = _near(option, options) if option else []
            hint = f" (did you mean {near[0]!r}?)" if near else ""
            return f"{prefix}{group}={option!r} is not a known {group}{hint}; choose one of: {_listing(options)}"
    return message


__all__ = ["bare_word_hint", "check_added_keys", "check_declared_sweep", "check_drafter_used", "check_flags", "check_override_syntax",
           "explain_composition_error"]
