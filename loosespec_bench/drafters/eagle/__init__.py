"""EAGLE drafters: head networks (head.py shared, eagle3.py, eagle2.py), their checkpoints
(checkpoint.py) and the chain / dynamic-tree drafter (drafter.py)."""

from .drafter import Eagle3Drafter

__all__ = ["Eagle3Drafter"]
