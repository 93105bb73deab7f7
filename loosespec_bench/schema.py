"""The report schema: every run figure and every rule knob a report shows, declared once.

Read by the index (report/index.py: its columns), the tables and plots (labels, formats, the
interval columns), and the W&B sink (sinks/wandb.py: summary metric names). It sits just above
the rules (it reads their parameter classes) and below the report and the sinks, so that the
sinks, which must not import the report, read the same declarations.

Figures: a summary.json key (`source`), the index column it becomes, a human label and a kind
that fixes its format. Figures with `interval=True` have `<source>_ci_low` / `<source>_ci_high`
beside them in summary.json (the SUMMARY INTERVALS contract, stats/summary: paired bootstrap
over samples); summaries written before those keys existed have none, and the report then
prints the point value marked "no interval".

Knobs: a resolved-config key (`drafter.k`), its index column (`K`), the label prefix the
tables and legends print (`K=5`) and when it is left out of a label (its neutral value). A rule's
knobs are declared once, on its parameter class (`knob(..., shown=Shown(...))`, params.py), and
read from there (rule_knobs): nothing here names a rule or a rule's knob. A rule knob without a
Shown (a new rule's `method.<key>` in its one config file) is found in the run's config all the
same: its column and label are the key's own name (knobs_of), so a new rule needs no change to
any report code. Only the draft length K and the temperature T, which are not a rule's, are
declared here.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from .params import BOOKKEEPING_KEYS, NO_NEUTRAL, NOT_SHOWN, SHOWN_KEY, Shown, params_of
from .verifiers import rules as _rules

# -- figures ----------------------------------------------------------------------------------
KINDS = ("speedup", "tau", "score", "diff", "ratio", "count", "rate", "percent")


@dataclass(frozen=True)
class Figure:
    """One run figure: summary key -> index column, label and format."""

    column: str  # index column (also the tidy CSV's `metric`)
    source: str  # summary.json key
    label: str  # human label (table headers, plot axes, W&B)
    kind: str = "score"  # speedup (1.42×) | tau (10.79) | score (0.667) | diff (+0.33) | ratio (1.20×) | count | rate
    interval: bool = False  # summary.json carries <source>_ci_low / <source>_ci_high

    @property
    def ci_columns(self) -> tuple[str, str]:
        return f"{self.column}_ci_low", f"{self.column}_ci_high"

    @property
    def ci_sources(self) -> tuple[str, str]:
        return f"{self.source}_ci_low", f"{self.source}_ci_high"


FIGURES: tuple[Figure, ...] = (
    Figure("speedup", "speedup", "speedup over target alone (×)", "speedup", interval=True),
    Figure("speedup_median", "speedup_median_of_samples", "median per-sample speedup (×)", "speedup", interval=True),
    Figure("tau", "tau", "tau (tokens per target step)", "tau", interval=True),
    Figure("accuracy", "accuracy", "accuracy", "score", interval=True),
    Figure("baseline_accuracy", "baseline_accuracy", "target-alone accuracy", "score", interval=True),
    Figure("accuracy_diff", "accuracy_diff", "accuracy − target alone (paired)", "diff", interval=True),
    Figure("retention", "retention", "accuracy retention (method ÷ target alone)", "score", interval=True),
    Figure("tokens_per_s", "tokens_per_s", "tokens/s", "rate"),
    Figure("baseline_tokens_per_s", "baseline_tokens_per_s", "target-alone tokens/s", "rate"),
    Figure("identical_to_target", "identical_to_target", "identical to target alone", "score"),
    Figure("mismatches", "mismatches", "raw mismatches", "count"),
    Figure("loose_accepts", "loose_accepts", "loose accepts", "count"),
    Figure("loose_accept_rate", "loose_accept_rate", "loose accept rate", "score"),
    Figure("tau_with_loose", "tau_with_loose", "tau with loose accepts", "tau"),
    Figure("tau_without_loose", "tau_without_loose", "tau without loose accepts", "tau"),
    Figure("dropmatch_overhead", "dropmatch_overhead", "DropMatch overhead (share of decode time)", "score"),
    # The cost model's speedup from the work counts of every sample (summary.work_speedup_fields),
    # on the calibration's machine: a run's speed figure where no sample was timed.
    Figure("work_speedup", "work_speedup", "speedup predicted from work counts (×)", "speedup", interval=True),
)
FIGURE = {f.column: f for f in FIGURES}
# The task's headline quality figure (the generic `score` column): the first of these a summary
# has; its interval keys follow the same contract (<key>_ci_low, baseline_<key>, <key>_diff).
# A summary's own quality_figure (the task's headline, e.g. NIAH's recall) is taken first (index.py).
SCORE_KEYS = ("accuracy", "pass@1", "prompt_level_strict_acc", "rating", "quality")
SCORE = Figure("score", "score", "score (the task's headline quality figure)", "score", interval=True)
BASELINE_SCORE = Figure("baseline_score", "baseline_score", "target-alone score", "score", interval=True)
# Its paired difference from the target alone (summary key <score key>_diff, with its interval).
SCORE_DIFF = Figure("score_diff", "score_diff", "score − target alone (paired)", "diff", interval=True)


def figure(column: str) -> Figure:
    return {"score": SCORE, "baseline_score": BASELINE_SCORE, "score_diff": SCORE_DIFF}.get(column) or FIGURE[column]


def number(value: Any) -> float | None:
    """A finite float, or None (bools, strings, lists, NaN and inf are not figures)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def interval_of(summary: Mapping[str, Any], source: str) -> tuple[float | None, float | None]:
    """(<source>_ci_low, <source>_ci_high) of a summary; None where absent or malformed."""
    return number(summary.get(f"{source}_ci_low")), number(summary.get(f"{source}_ci_high"))


def has_intervals(summary: Mapping[str, Any]) -> bool:
    """Whether a summary was written under the intervals contract (any F_ci_low key but the
    older retention_ci_*: an old summary's missing interval is 'no interval', a new one's null
    interval is 'not computable')."""
    return "ci_level" in summary or any(f"{f.source}_ci_low" in summary for f in FIGURES if f.column != "retention")


def format_value(value: float, kind: str, *, latex: bool = False) -> str:
    """One figure in its kind's format: 1.42×, 10.79, 0.667, +0.333."""
    times = r"$\times$" if latex else "×"
    if kind in ("speedup", "ratio"):
        return f"{value:.2f}{times}"
    if kind == "tau":
        return f"{value:.2f}"
    if kind == "diff":
        return f"{value:+.3f}"
    if kind == "count":
        return f"{value:g}"
    if kind == "rate":
        return f"{value:.3g}"
    if kind == "percent":  # a share, printed in percent: 0.0164 -> 1.64%
        return f"{100 * value:.2f}%"
    if kind == "ms":  # a latency in milliseconds
        return f"{value:.0f}"
    if kind in ("s", "tok_s"):  # a latency in seconds, a throughput in tokens/s
        return f"{value:.2f}"
    return f"{value:.3f}"


def format_interval(low: float, high: float, kind: str) -> str:
    """'[1.21, 1.63]' (no unit: it follows the point's)."""
    if kind == "percent":
        return f"[{100 * low:.2f}, {100 * high:.2f}]%"
    digits = 2 if kind in ("speedup", "ratio", "tau", "s", "tok_s") else 0 if kind == "ms" else 3
    fmt = "{:+.%df}" % digits if kind == "diff" else "{:.%df}" % digits
    return f"[{fmt.format(low)}, {fmt.format(high)}]"


# -- per-run bookkeeping columns read from summary.json (issue 21: intervals, power, timing) --------
RUN_FIELDS: tuple[tuple[str, str, str], ...] = (
    # (index column, summary key, kind): bool | int | float | text
    ("n_problems", "n_problems", "int"),
    ("underpowered", "underpowered", "bool"),
    ("power_threshold", "power_threshold", "float"),
    ("ci_level", "ci_level", "float"),
    ("ci_method", "ci_method", "text"),
    # the paired quality difference's discordant samples by direction and their exact sign test
    # (stats.quality_intervals): what a difference resting on a few changed answers rests on
    ("quality_lost", "quality_lost", "int"),
    ("quality_gained", "quality_gained", "int"),
    ("quality_sign_p", "quality_sign_p", "float"),
)
TIMING_FIELDS = ("clean", "retimed", "excluded", "contaminated")


# -- knobs ------------------------------------------------------------------------------------
_UNSET = NO_NEUTRAL  # Knob.hidden when every value is shown


@dataclass(frozen=True)
class Knob:
    """A setting that tells configurations apart, shown in table rows and legends."""

    key: str  # resolved-config key, e.g. drafter.k
    column: str  # index column, e.g. W
    label: str  # label prefix: `W=6`; "" = the bare value (criterion: `js`)
    axis: str = ""  # axis / header text when a sweep varies it
    hidden: Any = _UNSET  # the value left out of labels (a neutral default)
    flag: str = ""  # for booleans: the label text when true (and nothing when false)
    numeric: bool = False  # the index column is numeric (NaN where the run has no such key)
    methods: tuple[str, ...] = ()  # methods whose labels show it (empty: every method)
    chars: int = 0  # characters of a text value a label keeps (0 = all)

    def shown(self, value: Any) -> str | None:
        """The label part for a value, or None when the label leaves it out."""
        if value is None or (isinstance(value, float) and math.isnan(value)):
            return None
        if self.hidden is not _UNSET and _same(value, self.hidden):
            return None
        if isinstance(value, bool) or self.flag:
            return (self.flag or self.label or self.column) if value is True else None
        text = _text(value)
        if self.key == "drafter.k":
            text = str(int(float(value)))
        elif self.chars:
            text = text[: self.chars]  # a sha256: enough to tell two files apart in a label
        return f"{self.label}={text}" if self.label else text

    def applies(self, method: Any) -> bool:
        return not self.methods or method in self.methods


def _same(a: Any, b: Any) -> bool:
    try:
        return float(a) == float(b) if not isinstance(a, (str, bool)) and not isinstance(b, (str, bool)) else a == b
    except (TypeError, ValueError):
        return a == b


def _text(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def _field_is_numeric(field: dataclasses.Field) -> bool:
    # The annotation as text (the params modules use `from __future__ import annotations`).
    kind = field.type if isinstance(field.type, str) else getattr(field.type, "__name__", str(field.type))
    return "bool" not in kind and ("int" in kind or "float" in kind)


def rule_knobs(rule_classes: Iterable[type] | None = None) -> tuple[Knob, ...]:
    """The shown knobs of the rules (verifiers.rules() by default), read from each rule's Params
    (a field's `shown`, params.Shown), in the rules' order then their fields'. A knob several
    rules share (DropMatch's in DropMatch + AutoJudge) is one Knob whose `methods` names them all;
    two rules showing one key differently is an error of their declarations."""
    if rule_classes is None:
        rule_classes = _rules()
    found: dict[str, tuple[Shown, bool, list[str]]] = {}
    for cls in rule_classes:
        params = params_of(cls)
        if params is None:
            continue
        for field in dataclasses.fields(params):
            shown = field.metadata.get(SHOWN_KEY)
            if not isinstance(shown, Shown):
                continue
            key = f"method.{field.name}"
            if key in found and found[key][0] != shown:
                raise TypeError(f"{key}: {cls.__name__} shows it as {shown}, another rule as {found[key][0]}")
            entry = found.setdefault(key, (shown, _field_is_numeric(field), []))
            entry[2].extend(n for n in cls.config_names if n not in entry[2])
    return tuple(
        Knob(key, s.column, s.label, s.axis, hidden=s.neutral, flag=s.flag, numeric=numeric, methods=tuple(methods), chars=s.chars)
        for key, (s, numeric, methods) in found.items()
    )


KNOBS: tuple[Knob, ...] = (
    Knob("drafter.k", "K", "K", "draft length K (tokens)", numeric=True),
    *rule_knobs(),
    Knob("generation.temperature", "temperature", "T", "temperature T", hidden=0.0, numeric=True),
)
KNOB_BY_KEY = {k.key: k for k in KNOBS}
KNOB_BY_COLUMN = {k.column: k for k in KNOBS}
# method.* keys that are bookkeeping, not knobs: the harness's own (params.BOOKKEEPING_KEYS,
# _target_, a description) and a rule's knobs declared `shown=NOT_SHOWN` (AutoJudge's judge file path).
METHOD_BOOKKEEPING = tuple(dict.fromkeys(("_target_", "description", *BOOKKEEPING_KEYS, *(
    f.name for cls in _rules() if params_of(cls) is not None for f in dataclasses.fields(params_of(cls))
    if f.metadata.get(SHOWN_KEY) is NOT_SHOWN))))


def knobs_of(config: Mapping[str, Any]) -> list[Knob]:
    """The knobs of one run: the declared ones its flat config (dotted keys) has, plus every
    other scalar method.<key> (a rule's own knob that nothing declares: column and label are
    its name, prefixed `method_` where the name is already an index column)."""
    out = [k for k in KNOBS if k.key in config]
    for key, value in config.items():
        if not key.startswith("method.") or key in KNOB_BY_KEY:
            continue
        name = key.split(".", 1)[1]
        if name in METHOD_BOOKKEEPING or "." in name or isinstance(value, (dict, list)):
            continue
        column = name if name not in RESERVED_COLUMNS else f"method_{name}"
        numeric = isinstance(value, (int, float)) and not isinstance(value, bool)
        out.append(Knob(key, column, name, name, numeric=numeric))
    return out


def knob_value(config: Mapping[str, Any], knob: Knob) -> Any:
    """A knob's value in a flat config (lists as JSON text)."""
    value = config.get(knob.key)
    if isinstance(value, (list, dict)):
        return json.dumps(value, sort_keys=True)
    return value


def label_parts(row: Mapping[str, Any], *, skip: Iterable[str] = ()) -> list[str]:
    """The knob parts of a method label from an index row: every knob column the row has a
    value for (declared order, then the run's undeclared knobs), neutral values left out.
    skip: columns left out (a plot's x axis)."""
    skip = set(skip)
    method = row.get("method")
    parts = []
    extra = row.get("extra_knobs")
    extra = extra if isinstance(extra, (list, tuple)) else ()
    knobs = [*KNOBS, *(Knob(f"method.{c}", c, c) for c in extra if c not in KNOB_BY_COLUMN)]
    for knob in knobs:
        if knob.column in skip or knob.key == "drafter.k" or not knob.applies(method):
            continue
        part = knob.shown(row.get(knob.column))
        if part:
            parts.append(part)
    return parts


# Index columns a rule knob's name must not take over (knobs_of prefixes them).
RESERVED_COLUMNS = {
    "experiment", "run_id", "status", "method", "drafter", "pair", "dataset", "subset", "tree", "seed", "score",
    "score_name", "n_samples", "n_expected", "hardware", "date", "git_commit", "run_dir", "summary_source",
    "config", "config_id", "dataset_config_id", "extra_knobs", "top_k",
    *FIGURE, *(c for f in FIGURES for c in f.ci_columns), *(c for c, _, _ in RUN_FIELDS),
}


# -- summary.json: what each field a reader uses must hold -------------------------------------
# Read by the one checker of a run folder (run_folder.RunFolder.damage), which the report, the
# comparison and the status use: a summary whose field holds anything else is a damaged run
# (the report refuses it, naming the folder and the field, unless --skip-damaged). null is
# always allowed (a figure that could not be computed). Keys not named here are not checked.
SUMMARY_NUMBERS: tuple[str, ...] = tuple(dict.fromkeys([
    *(f.source for f in FIGURES), *(s for f in FIGURES if f.interval for s in f.ci_sources),
    *(key for _, key, kind in RUN_FIELDS if kind in ("int", "float")), "temperature", "k",
]))
SUMMARY_COUNTS = ("n_samples", "n_problems", "seed", "quality_lost", "quality_gained", "work_speedup_n")  # whole numbers >= 0
SUMMARY_TEXTS = ("experiment", "method", "drafter", "pair", "dataset", "engine", "quality_figure", "date", "hardware",
                 "git_commit", "cpu_model", "cpu_signature", "cpu_isa", *(key for _, key, kind in RUN_FIELDS if kind == "text"))
SUMMARY_FLAGS = ("tree", *(key for _, key, kind in RUN_FIELDS if kind == "bool"))
SUMMARY_MAPPINGS = ("timing", "quality_counts", "quality_by_group")
# Lists of one value per draft position: the acceptance rates (numbers), their interval bounds
# (numbers, null where undefined).
SUMMARY_NUMBER_LISTS = ("acceptance_by_position",)
SUMMARY_BOUND_LISTS = ("acceptance_by_position_ci_low", "acceptance_by_position_ci_high")


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def summary_problems(summary: Any) -> list[str]:
    """What is wrong in a summary.json's content, one entry per field ('tau='fast' is not a
    number'); [] for a summary a run could have written."""
    if not isinstance(summary, Mapping):
        return [f"it holds {type(summary).__name__} {_shown(summary)}, not an object of figures"]
    bad = []
    for key, value in summary.items():
        if value is None:
            continue
        if key in SUMMARY_NUMBERS and key not in SUMMARY_COUNTS and number(value) is None and not _non_finite(value):
            bad.append(f"{key}={_shown(value)} is not a number")
        elif key in SUMMARY_COUNTS and not (isinstance(value, int) and not isinstance(value, bool) and value >= 0):
            bad.append(f"{key}={_shown(value)} is not a whole number >= 0")
        elif key in SUMMARY_TEXTS and not isinstance(value, str):
            bad.append(f"{key}={_shown(value)} is not a text")
        elif key in SUMMARY_FLAGS and not isinstance(value, bool):
            bad.append(f"{key}={_shown(value)} is not true or false")
        elif key in SUMMARY_MAPPINGS and not isinstance(value, Mapping):
            bad.append(f"{key}={_shown(value)} is not an object")
        elif key in SUMMARY_NUMBER_LISTS and not (isinstance(value, list) and all(number(x) is not None for x in value)):
            bad.append(f"{key}={_shown(value)} is not a list of numbers")
        elif key in SUMMARY_BOUND_LISTS and not (isinstance(value, list) and all(x is None or number(x) is not None for x in value)):
            bad.append(f"{key}={_shown(value)} is not a list of numbers (null where undefined)")
    return bad


def _non_finite(value: Any) -> bool:
    # NaN / infinity: a figure that is a number but undefined (an older summary's NaN); the
    # readers show it as missing (number() gives None), so it is not damage.
    return isinstance(value, float) and not math.isfinite(value)
