"""Settings with their ranges, declared once, on the class that takes them.

The ground floor of validation: a small vocabulary of rules (`integer(1)`, `choice("code",
"paper")`, ...; each a callable returning None when a value is fine, else the phrase the error
ends with: "must be an integer >= 1") and `Params`, the base of each rule's and drafter's
parameters dataclass. A field declares its range once, with `knob(default, rule)`:

    @dataclass(frozen=True)
    class DrafterParams(Params):
        group = "drafter"
        k: int = knob(5, integer(1, MAX_DRAFT_K), "the draft length K")

A rule's knob a report shows says how, in the same declaration (`shown=Shown(column, label,
axis, neutral=DEFAULT)`: its index column, label prefix, axis text and neutral value);
schema.KNOBS is read from these (schema.rule_knobs), never restated.

`DrafterParams(**node)` checks every value (and the class's cross rules, `cross()`) and raises
one ConfigError naming the setting (`drafter.k=0 must be an integer in 1..1024 (the draft
length K)`); the pre-check (checks.py) reads the same declarations through `declared_rules`, so the
constructor and the pre-check can never disagree. A subclass may change a field's default
without repeating its rule (`k: int = 4`): the rule is looked up along the class's MRO.

Classes without a Params dataclass (the tasks) declare `SETTINGS = {key: rule}` on the class;
`declared_rules` merges those along the MRO the same way. Nothing here imports the package
beyond errors.py.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any, Callable, ClassVar, Mapping, TypeVar

from .errors import ConfigError

Rule = Callable[[Any], "str | None"]
P = TypeVar("P", bound="Params")
RULE_KEY = "rule"
DOC_KEY = "doc"
SHOWN_KEY = "shown"
# Absurd beyond any model's context: catches 1e8 and typos before the model's own check.
MAX_NEW_TOKENS_CAP = 1_000_000
MAX_DRAFT_K = 1024  # far above any paper's K (<= 15); catches typos such as k=100000
# Keys of a config node that steer the harness (what to load, whether a drafter runs, the name
# used in run ids), not arguments of the class named by _target_: the one list (build strips them
# before instantiating, the report's knobs_of skips them). Drafters' `k` is NOT one of them: a
# drafter owns its draft length. vocab_top is applied to the built drafter's network by build.
# uses_drafter / needs_*: read from the classes now (Verifier.target_alone, Drafter.needs_*); the
# keys stay in the config files and are accepted because the run id hashes the composed config:
# dropping them would change every committed run's id.
BOOKKEEPING_KEYS = ("name", "uses_drafter", "needs_model", "needs_target", "needs_tokenizers", "vocab_top")


# --- the vocabulary ---------------------------------------------------------------------------
def is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def is_real(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def integer(lo: int | None = None, hi: int | None = None) -> Rule:
    def rule(v: Any) -> str | None:
        if is_int(v) and (lo is None or v >= lo) and (hi is None or v <= hi):
            return None
        if hi is None:
            return f"must be an integer >= {lo}" if lo is not None else "must be an integer"
        return f"must be an integer in {lo}..{hi}"

    return rule


def real(lo: float | None = None, hi: float | None = None, *, lo_open: bool = False, hi_open: bool = False) -> Rule:
    def rule(v: Any) -> str | None:
        ok = is_real(v)
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


# generation.temperature: 0 (greedy) or at least this. Sampling divides float32 logits by T: at
# 1e-300 the divisor itself is 0 in float32 and a logit of 30 over 1e-38 is already inf, so the
# step's softmax gives NaN mid-generation. At 1e-6 two logits 1e-3 apart differ by e^1000 in
# probability: sampling is greedy to float32 precision already, so nothing usable is refused.
MIN_TEMPERATURE = 1e-6


def temperature(v: Any) -> str | None:
    reason = real(0)(v)
    if reason is None and 0 < v < MIN_TEMPERATURE:
        return (f"must be 0 (greedy) or >= {MIN_TEMPERATURE:g}: a smaller temperature overflows logits / T in "
                "float32 (inf, then NaN mid-generation); use 0 for greedy decoding")
    return reason


def choice(*options: Any) -> Rule:
    def rule(v: Any) -> str | None:
        return None if v in options and not isinstance(v, bool) else f"must be one of {', '.join(map(str, options))}"

    return rule


def optional(inner: Rule) -> Rule:
    def rule(v: Any) -> str | None:
        reason = None if v is None else inner(v)
        return reason and (reason if reason.startswith("has entry") else reason + " or null")

    return rule


def list_of(inner: Rule, *, nonempty: bool = True) -> Rule:
    def rule(v: Any) -> str | None:
        if not isinstance(v, Sequence) or isinstance(v, (str, bytes)) or (nonempty and not v):
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


def nested(rules: Mapping[str, Rule]) -> Rule:
    """A mapping of settings (dataset.sandbox, dataset.judge) with a rule per key; checked key
    by key by check_node, so that the message names the nested key."""

    def rule(v: Any) -> str | None:
        return None if v is None or isinstance(v, Mapping) else "must be a mapping of settings"

    rule.rules = dict(rules)  # type: ignore[attr-defined]
    return rule


def explain(rule: Rule, why: str) -> Rule:
    """The same rule, its message followed by why (`(the draft length K)`)."""

    def wrapped(v: Any) -> str | None:
        reason = rule(v)
        return reason and f"{reason} ({why})"

    if hasattr(rule, "rules"):
        wrapped.rules = rule.rules  # type: ignore[attr-defined]
    return wrapped


# --- declarations -----------------------------------------------------------------------------
class _Marker:
    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


DEFAULT: Any = _Marker("DEFAULT")  # Shown(neutral=DEFAULT): the knob's own default is its neutral value
NO_NEUTRAL: Any = _Marker("NO_NEUTRAL")  # Shown's "every value is shown" (a value no knob holds)
NOT_SHOWN: Any = _Marker("NOT_SHOWN")  # knob(shown=NOT_SHOWN): bookkeeping no report shows (a file's path)


@dataclasses.dataclass(frozen=True)
class Shown:
    """How a report shows a knob (schema.Knob reads it): its index column, the label prefix
    tables and legends print (`W=6`; "" = the bare value), the axis / header text when a sweep
    varies it, the value left out of labels (neutral: DEFAULT = the knob's default), the label
    text of a boolean that is true (flag), and how many characters of a text value a label keeps
    (chars; 0 = all: a sha256 is told apart by its first 8)."""

    column: str
    label: str
    axis: str = ""
    neutral: Any = NO_NEUTRAL
    flag: str = ""
    chars: int = 0


def knob(default: Any, rule: Rule, doc: str = "", *, shown: Any = None) -> Any:
    """A Params field with its range: `window: int = knob(6, integer(1), "the window W")`;
    shown: how a report shows it (a Shown; None: a report labels it by its name,
    schema.knobs_of; NOT_SHOWN: bookkeeping, never a report column)."""
    meta: dict[str, Any] = {RULE_KEY: explain(rule, doc) if doc else rule, DOC_KEY: doc}
    if shown is not None:
        if isinstance(shown, Shown) and shown.neutral is DEFAULT:
            shown = dataclasses.replace(shown, neutral=default)
        meta[SHOWN_KEY] = shown
    if isinstance(default, (list, dict)):
        return dataclasses.field(default_factory=lambda: type(default)(default), metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


def fail(where: str, value: Any, reason: str) -> None:
    raise ConfigError(f"{where}={value!r} {reason}")


def check_node(prefix: str, node: Mapping[str, Any], rules: Mapping[str, Rule]) -> None:
    """Every key of `node` that has a rule, checked (a nested rule key by key, unknown nested
    keys refused); raises the first ConfigError."""
    for key, rule in rules.items():
        if key not in node:
            continue
        value = node[key]
        where = f"{prefix}.{key}" if prefix else key
        reason = rule(value)
        if reason:
            fail(where, value, reason)
        inner = getattr(rule, "rules", None)
        if inner is not None and value is not None:
            unknown = sorted(set(value) - set(inner))
            if unknown:
                raise ConfigError(f"{where}.{unknown[0]} is not a setting of {where}; known: {', '.join(sorted(inner))}")
            check_node(where, value, inner)


@dataclasses.dataclass(frozen=True)
class Params:
    """Base of a class's parameters: the knobs of its config node, each with its range."""

    group: ClassVar[str] = ""  # the config group whose node these are: method, drafter

    def __post_init__(self) -> None:
        check_node(self.group, dataclasses.asdict(self), declared_rules(type(self)))
        self.cross()

    def cross(self) -> None:
        """Rules over several knobs (n_paths >= 2 with include_clean_path); raise ConfigError."""

    @classmethod
    def build(cls, knobs: Mapping[str, Any]) -> "Params":
        """cls(**knobs), an unknown key refused in one line naming the known ones."""
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(knobs) - names)
        if unknown:
            raise ConfigError(f"{cls.group}.{unknown[0]} is not a setting here; known: {', '.join(sorted(names)) or '(none)'}")
        return cls(**knobs)

    @classmethod
    def read(cls: type[P], node: Mapping[str, Any] | None) -> P:
        """The knobs of a stored node (a run folder's config.yaml, written by any version):
        the declared defaults for the keys it lacks, keys the class does not declare left
        aside; the values still checked. What the pre-check refuses (a missing or unknown key)
        is for a composed config, not for one read back."""
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in (node or {}).items() if k in names})

    @classmethod
    def defaults(cls) -> dict[str, Any]:
        """Each knob's declared default (the config files restate them; a test pins the two equal)."""
        return dict(cls().values()) if all(
            f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING for f in dataclasses.fields(cls)
        ) else {}

    def values(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}


def rule_sources(cls: type) -> dict[str, list[type]]:
    """For each key, every class along cls's MRO that declares a rule for it (the test that a
    range is declared in exactly one place reads this)."""
    out: dict[str, list[type]] = {}
    for klass in cls.__mro__:
        own = klass.__dict__
        if "SETTINGS" in own:
            for key in own["SETTINGS"]:
                out.setdefault(key, []).append(klass)
        if dataclasses.is_dataclass(klass) and "__dataclass_fields__" in own:
            annotations = own.get("__annotations__", {})
            for f in own["__dataclass_fields__"].values():
                if f.name in annotations and RULE_KEY in f.metadata:
                    out.setdefault(f.name, []).append(klass)
    return out


def declared_rules(cls: type) -> dict[str, Rule]:
    """key -> rule for a Params dataclass (field metadata) or a class with SETTINGS, the
    nearest declaration along the MRO winning (a subclass may change only a default)."""
    params = getattr(cls, "Params", None)
    if isinstance(params, type) and issubclass(params, Params) and not (isinstance(cls, type) and issubclass(cls, Params)):
        cls = params
    rules: dict[str, Rule] = {}
    for klass in reversed(cls.__mro__):
        own = klass.__dict__
        if isinstance(own.get("SETTINGS"), Mapping):
            rules.update(own["SETTINGS"])
        if dataclasses.is_dataclass(klass) and "__dataclass_fields__" in own:
            annotations = own.get("__annotations__", {})
            for f in own["__dataclass_fields__"].values():
                if f.name in annotations and RULE_KEY in f.metadata:
                    rules[f.name] = f.metadata[RULE_KEY]
    return rules


def params_of(cls: type) -> type[Params] | None:
    params = getattr(cls, "Params", None)
    return params if isinstance(params, type) and issubclass(params, Params) else None
