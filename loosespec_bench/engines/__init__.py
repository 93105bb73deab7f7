"""Engines: who runs the models. Each answers "generate these prompt ids, with or without the
configured speculative method, and report what was drafted and accepted" (base.Engine); the
run protocol above them (app: paired baseline, records, scores, summary) is the same for all.
hf.HFEngine is our decoding loop on transformers models; another backend is one more module
here and one file in conf/engine/."""

from .base import Engine

__all__ = ["Engine"]
