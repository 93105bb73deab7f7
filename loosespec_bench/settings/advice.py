"""The command line's advice: a mistake on `python -m loosespec_bench ...` said in the project's
words, as one ConfigError line that names what to change.

Hydra's own messages advise `+key=value` for a mistyped key (which adds a key the checks then
refuse), "missing EQUAL at '<EOF>'" for a bare word and "unrecognized arguments" for lm-eval's
flags (settings/flags.py says those). Here each becomes advice computed from the actual config tree: did-you-mean over the
group's option files (group_choices) and the composed node's keys, never a list written twice.
Nothing here loads a model; config.py's composition helpers are the only dependency.
"""

from __future__ import annotations

import difflib
import re
from contextlib import contextmanager
from typing import Any, Callable, Iterator, NamedTuple, Sequence

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


# --- words that are not overrides: bare words (flags: settings/flags.py) ------------------------

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


def check_scale_fits(overrides: Sequence[str], config_name: str = "config") -> None:
    """An experiment at a scale that puts it on another pair (scale=cpu: the embedded pair)
    without a file of its own at that scale (experiment_scale/<scale>/<experiment>.yaml), whose
    pair splits its target over a node's GPUs (pair.target.device_map, the 405B pair), is
    refused before anything launches: its points would run the smaller pair under its name
    (the 405B replication's 16 points at scale=cpu are the 70B replication's CPU runs again,
    labelled 405B). The facts are read from the configs: the scale's pair, the experiment's own
    pair and its device_map; nothing here names an experiment."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    from .config import option_file

    given: dict[str, list[str]] = {}
    try:
        for o in OverridesParser.create().parse_overrides([x for x in overrides if x.partition("=")[0].lstrip("+") in ("experiment", "scale")]):
            values = list(o.sweep_string_iterator()) if o.is_sweep_override() else [str(o.value())]
            given[o.key_or_group] = values
    except Exception:
        return  # the syntax check names a bad override
    experiments, scales = given.get("experiment", []), given.get("scale", [])
    dirs = _dirs(overrides)
    todo = [(e, sc) for e in experiments for sc in scales if e not in ("null", "None") and option_file("experiment_scale", f"{sc}/{e}", dirs) is None]
    if not todo:
        return
    with _composer(config_name) as compose:
        for experiment, scale in todo:
            try:
                own = compose([f"experiment={experiment}"])
                scaled = compose([f"experiment={experiment}", f"scale={scale}"])
            except Exception:
                return  # a bad name: the pre-check says what is wrong with it
            pair, small = _choice(own, "pair"), _choice(scaled, "pair")
            device_map = OmegaConf.select(own, "pair.target.device_map", default=None)
            if pair == small or device_map is None:
                continue
            described = [n for n in group_choices("experiment", dirs) if option_file("experiment_scale", f"{scale}/{n}", dirs)]
            raise ConfigError(
                f"experiment={experiment} scale={scale}: {experiment} is sized for pair={pair}, whose target is split over "
                f"a node's GPUs (pair.target.device_map={device_map}), and has no {scale} scale of its own; scale={scale} "
                f"would run its points on pair={small} under its name. Run it on GPUs (drop scale={scale}; "
                f"-m hydra/launcher=slurm), or an experiment sized for {scale} ({len(described)} are: "
                f"python -m loosespec_bench ls experiments)")


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
                                  + _missing_key(key, value, cfg, compose, dirs).text)


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


class KeyAdvice(NamedTuple):
    """What _missing_key found for a key the config lacks: the line, and which kind of advice it
    is, so that a caller decides on the kind (never by re-reading the line's words).
    kind: 'value' (a value given subkeys), 'near' (a close key of the same node), 'elsewhere'
    (the key of other options of its group), 'near_elsewhere' (a close key of other options),
    'top' (a top-level key that lives in a node), 'unknown' (nothing close)."""

    text: str
    kind: str

    def __str__(self) -> str:
        return self.text


def _missing_key(key: str, value: str, cfg: DictConfig | None, compose: Compose, dirs: Sequence[Any]) -> KeyAdvice:
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
        head = ".".join(parts[: depth + 1])
        return KeyAdvice(f"{key}={value}: {head} is a value, not a group of settings; set it directly ({head}=VALUE)", "value")
    near = _near(leaf, keys)
    if near:
        fixed = ".".join([*parts[:depth], near[0], *parts[depth + 1 :]])
        return KeyAdvice(f"{key} is not a setting of {owner}; did you mean {fixed}={value}?", "near")
    if group and depth >= 1:
        sub = ".".join(parts[1 : depth + 1])
        have = [o for o, ks in _options_with(group, sub, compose, dirs) if leaf in ks]
        if have:
            return KeyAdvice(f"{key} is not a setting of {owner}; it is one of {group}={', '.join(have)}: choose one of those "
                             f"({group}={have[0]} {key}={value}) or leave {key} out", "elsewhere")
        others = _options_with(group, sub, compose, dirs)
        close = sorted({n for _, ks in others for n in _near(leaf, ks)})
        if close:
            owners = [o for o, ks in others if close[0] in ks]
            fixed = ".".join([*parts[:-1], close[0]])
            return KeyAdvice(f"{key} is not a setting of {owner}; did you mean {fixed}? It is a setting of "
                             f"{group}={', '.join(owners)} ({group}={owners[0]} {fixed}={value})", "near_elsewhere")
    if depth == 0 and cfg is not None:
        # A key given at the top that lives in a node: `limit=2` -> dataset.limit=2.
        homes = [f"{n}.{leaf}" for n in cfg if n != "hydra" and isinstance(cfg.get(n), DictConfig) and leaf in cfg[n]]
        if homes:
            return KeyAdvice(f"{key} is not a top-level setting; did you mean {homes[0]}={value}?", "top")
    where = f"of {owner}" if depth else "at the top level"
    return KeyAdvice(f"{key} is not a setting {where}; {'known: ' + _listing(sorted(keys)) if keys else 'remove it'}", "unknown")


# Hydra's one message the advice still reads as text: a group override it cannot place
# (`method@foo=fly`: "Could not override 'method@foo'") raises ConfigCompositionException with no
# field and no omegaconf error under it. Every other case is read from the error's type and
# fields (checks.UnknownSetting's key, MissingConfigException's missing_cfg_file, omegaconf's
# full_key) or recomputed from the overrides and the config tree (_override_conflict: `+key`
# on a key that exists, `~key` on one that does not, `+group` on a group that has an option),
# where Hydra says it only in English ("An item is already at", "Could not delete", "Multiple
# values for").
_OVERRIDE = re.compile(r"[Cc]ould not override '([^']+)'")


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
    # Hydra offers only text here (see _OVERRIDE).
    m = _OVERRIDE.search(message)
    return m.group(1) if m else None


def _override_conflict(overrides: Sequence[str], compose: Compose, without: Callable[[str], DictConfig | None]) -> tuple[str, str] | None:
    """(the override, its kind) that conflicts with the tree it meets, recomputed from the tree
    composed without it: kind 'append' (`+key` on a key the config has), 'delete' (`~key` on
    one it lacks), 'group' (`+group=NAME` on a group that already has an option). Hydra raises
    these as ConfigCompositionException with no field; its English message is not read."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parser = OverridesParser.create()
    for line in overrides:
        try:
            o = parser.parse_overrides([line])[0]
        except Exception:
            continue
        if not (o.is_add() or o.is_delete()) or o.is_force_add():
            continue
        key = o.key_or_group
        cfg = without(line)
        if cfg is None:
            continue
        if key in ALL_GROUPS:
            if o.is_add() and _choice(cfg, key) is not None:
                return line, "group"
            continue
        present = OmegaConf.select(cfg, key, default=_ABSENT, throw_on_missing=False) is not _ABSENT
        if o.is_add() and present:
            return line, "append"
        if o.is_delete() and not present:
            return line, "delete"
    return None


_ABSENT = object()


def explain_composition_error(error: BaseException, overrides: Sequence[str], config_name: str = "config") -> str:
    """The pre-check's line for a composition error as advice: did-you-mean over the node's real
    keys and the group's real options, never Hydra's `+key`. Read from the error's type and
    fields (checks.UnknownSetting's key; points.CompositionError's cause and point: Hydra's
    MissingConfigException, omegaconf's key error), Hydra's text only where its exception has
    no field. The config is composed without the offending override to read the tree the user
    meant to change. Other errors come back as their message."""
    from hydra.errors import ConfigCompositionException, MissingConfigException

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
            found = _missing_key(key, value, without(line), compose, dirs)
            advice = prefix + found.text
            group = key.split(".", 1)[0]
            if found.kind == "elsewhere" and group in ALL_GROUPS and any(o.startswith(f"{group}=") and "," in o for o in original):
                advice += f"; a -m sweep over {group} sets it for every point: sweep the {group}s that have it on their own"
            return advice
        if isinstance(error, UnknownSetting) and any(o.startswith(f"+{error.key}=") for o in original):
            # `+method.<a FLy knob>=...` under spd: the checks refuse it ("use one of: (none)"); the
            # advice says where the key does live, or its close spelling.
            key = error.key
            line, value = by_key(key)
            found = _missing_key(key, value, without(line), compose, dirs)
            if found.kind in ("near", "near_elsewhere", "top", "elsewhere"):
                return f"{prefix}{line}: {found.text} (without the +)"
            return message
        if isinstance(cause, ConfigCompositionException) and (conflict := _override_conflict(overrides, compose, without)):
            line, kind = conflict
            key = line.lstrip("+~").partition("=")[0]
            _, value = by_key(key)
            if kind == "append":
                return f"{prefix}{line}: {key} is already a setting; drop the +: {key}={value}"
            if kind == "group":
                return f"{prefix}{line}: {key} already has an option; drop the +: {key}={value}"
            return f"{prefix}{line}: nothing to remove ({_missing_key(key, 'VALUE', without(line), compose, dirs).text})"
        if isinstance(cause, MissingConfigException) and "/" in str(cause.missing_cfg_file or ""):
            group, option = str(cause.missing_cfg_file).rsplit("/", 1)
            options = group_choices(group, dirs)
            near = _near(option, options) if option else []
            hint = f" (did you mean {near[0]!r}?)" if near else ""
            return f"{prefix}{group}={option!r} is not a known {group}{hint}; choose one of: {_listing(options)}"
    return message


__all__ = ["KeyAdvice", "bare_word_hint", "check_added_keys", "check_declared_sweep", "check_drafter_used",
           "check_override_syntax", "check_scale_fits", "explain_composition_error"]
