"""How the report names a configuration: a method label ('FLy (mla, K=15, θ=0.3, W=6)') and a
rule's own setting ('js, N=5, p=0.3'), from the knob columns loosespec_bench/schema.py declares;
and what a run's method is, asked of its rule's class (verifiers.rule_class: display_name,
lossless, target_alone), never read off its name."""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any, Iterable

import pandas as pd

from ..settings.config import dataset_display_name, engine_display_name
from ..schema import KNOB_BY_KEY, label_parts
from ..verifiers import FLy, Verifier, rule_class
from .render import is_missing



def fly_column(knob: str) -> str:
    """The results index's column of one of FLy's knobs (schema reads it from FLyParams)."""
    return KNOB_BY_KEY[f"method.{knob}"].column


# The index's `dataset` of a run under a prompt that is not the papers' (index.dataset_name).
_PROMPT_SUFFIX = re.compile(r"^(?P<name>\S+) \((?P<prompt>\S+) prompt\)$")


def dataset_label(dataset: Any) -> str:
    """How tables, figures and captions name an index `dataset`: the task class's display_name
    (config.dataset_display_name, declared once on the class: 'MBPP+'), with a prompt that is
    not the papers' named by the class too ('MGSM (native CoT prompt)')."""
    text = str(dataset)
    match = _PROMPT_SUFFIX.match(text)
    if match:
        return dataset_display_name(match["name"], match["prompt"])
    return dataset_display_name(text)


# FLy's knobs as the index names them: the report's FLy tables and figures select by these.
THETA, W, NO_WINDOW = fly_column(FLy.THRESHOLD), fly_column(FLy.WINDOW), fly_column(FLy.NO_WINDOW)


@lru_cache(maxsize=None)
def rule_of(method: Any) -> type[Verifier] | None:
    """The rule class of a run's method name; None for a name no rule of the package claims (a
    user's method, a folder from elsewhere: data, printed as its name) and for a missing one."""
    return rule_class(method) if isinstance(method, str) else None


def rule_name(method: Any) -> str:
    """A method as the report prints it: its rule's display name, or the name itself."""
    rule = rule_of(method)
    return rule.display_name if rule is not None and rule.display_name else str(method)


def is_rule(method: Any, cls: type[Verifier]) -> bool:
    """Whether a run's method is exactly the rule `cls` (not a subclass: the target alone is
    SPD's subclass, DropMatch + AutoJudge DropMatch's)."""
    return rule_of(method) is cls


def is_lossless(method: Any) -> bool:
    """The rule's output is the target's own up to numerics (exact SPD, the target alone)."""
    rule = rule_of(method)
    return rule is not None and rule.lossless


def is_target_alone(method: Any) -> bool:
    """The method is the target alone (no drafter: the speedup baseline)."""
    rule = rule_of(method)
    return rule is not None and rule.target_alone


def is_exact(method: Any) -> bool:
    """Lossless speculative decoding with a drafter (SPD): its drafter names it (EAGLE-3, PLD)."""
    return is_lossless(method) and not is_target_alone(method)


def is_eagle(drafter: Any) -> bool:
    return isinstance(drafter, str) and drafter.lower().startswith("eagle")


def method_label(row: dict | pd.Series, skip: Iterable[str] = ()) -> str:
    """e.g. 'FLy (mla, K=15, θ=0.3, W=6)', 'SPD (pld, K=10)', 'EAGLE-3 + DropMatch (K=10, js)'.
    The knob parts come from loosespec_bench/schema.py (label_parts): a new rule's knobs appear
    without a change here. skip: index columns left out (the x axis of a plot)."""
    skip = set(skip)
    row = {k: (None if k in skip else v) for k, v in dict(row).items()}
    method, drafter = row.get("method"), row.get("drafter")
    if is_eagle(drafter):
        version = "EAGLE-2" if str(drafter).lower().startswith("eagle2") else "EAGLE-3"
        name = version + ("" if is_exact(method) else f" + {rule_name(method)}")
        # Ours says which drafting it was: the papers' EAGLE figures are dynamic trees.
        parts = [] if is_missing(row.get("tree")) or row.get("tree") is None else ["tree" if row.get("tree") else "chain"]
    elif is_exact(method) and drafter == "pld":
        name, parts = "PLD", []
    elif drafter == "lookahead":
        name = "Lookahead" + ("" if is_exact(method) else f" + {rule_name(method)}")
        parts = []
    else:
        name = rule_name(method)
        parts = [str(drafter)] if drafter else []
    if not is_missing(row.get("K")) and row.get("K"):
        parts.append(f"K={int(row['K'])}")
    parts += label_parts(row, skip=skip)
    # Another engine's row sits beside our loop's under the same method: the label says which.
    engine = row.get("engine")
    if isinstance(engine, str) and engine and engine_display_name(engine):
        name += f" on {engine_display_name(engine)}"
    return f"{name} ({', '.join(parts)})" if parts else name


def rule_setting(row: dict | pd.Series) -> str:
    """A rule's own knobs as text ('js, N=5, p=0.3'), from the row's knob columns (schema)."""
    return ", ".join(label_parts(row, skip=("temperature",))) or "defaults"
