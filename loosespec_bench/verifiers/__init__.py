"""Acceptance rules: pure functions over target logits and draft tokens, named after the papers."""

from __future__ import annotations

from . import autojudge, cascade, ensemble, fsd, lenient, threshold, typical  # noqa: F401 (registers the rules)
from .base import Verifier
from .dropmatch import DropMatch
from .fly import FLy
from .spd import SPD, TargetAlone

__all__ = ["SPD", "DropMatch", "FLy", "TargetAlone", "Verifier", "rule_class", "rules"]


def rules() -> list[type[Verifier]]:
    """Every concrete rule of the package (Verifier subclasses that name their config)."""
    out: list[type[Verifier]] = []
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
