from .loop import generate

__all__ = ["generate"]
