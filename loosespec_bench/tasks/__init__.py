"""Tasks load samples and score completions; one module per data set."""

from .base import Sample, Task

__all__ = ["Sample", "Task"]
