"""Acceptance rules: pure functions over target logits and draft tokens, named after the papers."""

from .base import Verifier
from .dropmatch import DropMatch
from .fly import FLy
from .spd import SPD

__all__ = ["SPD", "DropMatch", "FLy", "Verifier"]
