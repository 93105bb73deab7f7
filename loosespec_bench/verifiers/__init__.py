"""Acceptance rules: pure functions over target logits and draft tokens, named after the papers."""

from .base import Draft, TargetScores, Verdict, Verifier
from .dropmatch import DropMatch
from .fly import FLy

__all__ = ["Draft", "DropMatch", "FLy", "TargetScores", "Verdict", "Verifier"]
