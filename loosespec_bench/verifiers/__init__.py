"""Acceptance rules: pure functions over target logits and draft tokens, named after the papers."""

from .base import Draft, TargetScores, Verdict, Verifier

__all__ = ["Draft", "TargetScores", "Verdict", "Verifier"]
