"""Acceptance rules: pure functions over target logits and draft tokens, named after the papers."""

from __future__ import annotations

from .asd import ASD
from .autojudge import AutoJudge, DropMatchAutoJudge
from .base import Verifier
from .cascade import Cascade
from .dropmatch import DropMatch
from .ensemble import Ensemble
from .fly import FLy
from .fsd import FSD
from .lenient import Lenient
from .spd import SPD, TargetAlone
from .threshold import Threshold
from .typical import Typical

# The package's rules in the order reports list their knobs (index columns, label parts):
# the papers' rules first, then the positionwise baselines, then the exact ones.
PACKAGE_RULES: tuple[type[Verifier], ...] = (
    FLy, DropMatch, DropMatchAutoJudge, AutoJudge, FSD, Typical, Threshold, Cascade, Ensemble, Lenient, ASD, SPD, TargetAlone,
)

__all__ = ["SPD", "DropMatch", "FLy", "TargetAlone", "Verifier", "rule_class", "rules"]


def rules() -> list[type[Verifier]]:
    """Every concrete rule (Verifier subclasses that name their config): the package's in
    PACKAGE_RULES order, then any other (a user's) in the order Python knows them."""
    out: list[type[Verifier]] = list(PACKAGE_RULES)
    todo = list(Verifier.__subclasses__())
    while todo:
        cls = todo.pop()
        todo.extend(cls.__subclasses__())
        if cls.config_names and cls not in out:
            out.append(cls)
    return out


def rule_class(name: str) -> type[Verifier] | None:
    """The rule filed under method.name `name` (its class's `config_names`), or None for a name
    no rule of the package claims (a user's method, or a folder from elsewhere: data, shown by
    its name). The one place a method name becomes a class: the report, the planner and the
    engines ask the class (display_name, lossless, target_alone), never compare names."""
    for cls in rules():
        if name in cls.config_names:
            return cls
    return None
