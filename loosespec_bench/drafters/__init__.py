"""Drafters propose; they never decide. See base.Drafter for the interface."""

from .base import Drafter
from .lookup import PromptLookupDrafter, prompt_lookup
from .model import ModelDrafter

__all__ = ["Drafter", "ModelDrafter", "PromptLookupDrafter", "prompt_lookup"]
