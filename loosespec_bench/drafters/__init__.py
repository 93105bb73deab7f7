"""Drafters propose; they never decide. See base.Drafter for the interface."""

from .base import Drafter
from .cross_tokenizer import CrossTokenizerDrafter
from .eagle import Eagle3Drafter
from .lookahead import LookaheadDrafter
from .lookup import PromptLookupDrafter, prompt_lookup
from .mla import MLADrafter
from .model import ModelDrafter

__all__ = [
    "CrossTokenizerDrafter",
    "Drafter",
    "Eagle3Drafter",
    "LookaheadDrafter",
    "MLADrafter",
    "ModelDrafter",
    "PromptLookupDrafter",
    "prompt_lookup",
]
