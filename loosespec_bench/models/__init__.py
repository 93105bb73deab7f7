"""Model loading: hub ids, local folders, the embedded PyPI pair, tiny random models."""

from .loading import LoadedModel, load_model, resolve_dtype

__all__ = ["LoadedModel", "load_model", "resolve_dtype"]
