"""Tests of the scripts/ folder (not a package: each script is loaded from its file)."""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType

from ..conftest import REPO


def load_script(name: str) -> ModuleType:
    """scripts/<name>.py as a module, registered under its name (dataclasses and pickling look
    a module up in sys.modules)."""
    spec = importlib.util.spec_from_file_location(name, REPO / "scripts" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod
