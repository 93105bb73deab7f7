from .loop import PrefixCache, generate

__all__ = ["PrefixCache", "generate"]
