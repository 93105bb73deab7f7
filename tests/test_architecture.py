"""The package's layering, pinned by parsing every module's imports (ast, nothing is imported).

  step, sampling,       the ground floor: import nothing from the package
  generation, schema
  drafters / verifiers  import the floor, never each other's layer or the loop (decoding)
  metrics               reads GenerationOutput from the ground floor, never the loop
  build                 assembles drafters, verifiers, models, tasks: nothing below imports it
  engines               run the models (engines/hf.py: our loop); the app reaches models,
                        drafters, verifiers and the loop only through them
  sinks                 write results; the report reads them, never the other way round
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parent.parent / "loosespec_bench"


def _module_name(path: Path) -> str:
    rel = path.relative_to(PKG.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def package_imports(path: Path) -> set[str]:
    """Absolute names of every loosespec_bench module `path` imports, at any depth in the file
    (function-level imports count: they are dependencies all the same)."""
    name = _module_name(path)
    # The package a relative import starts from: the module's own package (itself for __init__).
    base = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                root = base[: len(base) - (node.level - 1)]
                mod = ".".join(root + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            out.add(mod)
            # `from . import x` / `from .pkg import sub` may name submodules: count them too.
            out.update(f"{mod}.{a.name}" for a in node.names)
    return {m for m in out if m == "loosespec_bench" or m.startswith("loosespec_bench.")}


def _files(sub: str) -> list[Path]:
    target = PKG / sub
    return [target] if target.suffix == ".py" else sorted(target.rglob("*.py"))


def _violations(sub: str, forbidden: tuple[str, ...]) -> dict[str, list[str]]:
    bad = {}
    for path in _files(sub):
        hits = sorted(m for m in package_imports(path) if any(m == f or m.startswith(f + ".") for f in forbidden))
        if hits:
            bad[str(path.relative_to(PKG.parent))] = hits
    return bad


def test_the_parser_sees_relative_and_function_level_imports():
    # Guards the guard: a rule that parsed nothing would pass vacuously.
    assert "loosespec_bench.step" in package_imports(PKG / "drafters" / "model.py")
    assert "loosespec_bench.drafters.base" in package_imports(PKG / "decoding" / "loop.py")
    assert "loosespec_bench.build" in package_imports(PKG / "score.py")  # imported inside a function


def test_drafters_import_neither_verifiers_nor_the_loop():
    assert _violations("drafters", ("loosespec_bench.verifiers", "loosespec_bench.decoding")) == {}


def test_verifiers_import_neither_drafters_nor_the_loop():
    assert _violations("verifiers", ("loosespec_bench.drafters", "loosespec_bench.decoding")) == {}


@pytest.mark.parametrize("floor", ["step.py", "sampling.py", "generation.py", "schema.py"])
def test_the_ground_floor_imports_nothing_from_the_package(floor):
    assert package_imports(PKG / floor) == set()


@pytest.mark.parametrize("layer", ["step.py", "sampling.py", "generation.py", "drafters", "verifiers", "decoding", "models", "tasks", "metrics.py"])
def test_nothing_below_build_imports_it(layer):
    assert _violations(layer, ("loosespec_bench.build",)) == {}


def test_metrics_do_not_import_the_loop():
    assert _violations("metrics.py", ("loosespec_bench.decoding",)) == {}


def test_the_app_reaches_models_and_rules_only_through_an_engine():
    forbidden = ("loosespec_bench.decoding", "loosespec_bench.drafters", "loosespec_bench.verifiers", "loosespec_bench.models",
                 "loosespec_bench.engines.hf")
    assert _violations("app.py", forbidden) == {}


def test_the_engine_interface_imports_only_the_ground_floor():
    assert _violations("engines/base.py", ("loosespec_bench",)).get("loosespec_bench/engines/base.py") == [
        "loosespec_bench.generation", "loosespec_bench.generation.GenerationOutput"]


def test_sinks_do_not_import_the_report():
    assert _violations("sinks", ("loosespec_bench.report",)) == {}


def test_the_report_and_the_wandb_sink_read_one_schema():
    """Column names, labels and renames live in schema.py (issue 22 item 4): the index, tables,
    plots and the W&B sink import it, and none of them spells a knob rename itself."""
    for module in ("report/index.py", "report/tables.py", "report/plots.py", "sinks/wandb.py"):
        imports = package_imports(PKG / module)
        assert "loosespec_bench.schema" in imports or any(m.startswith("loosespec_bench.schema.") for m in imports), module
    for module in ("report/index.py", "report/tables.py", "report/plots.py", "report/__main__.py", "sinks/wandb.py"):
        text = (PKG / module).read_text()
        assert 'get("window")' not in text and 'get("p")' not in text and '"dropout_p": ' not in text, module


def test_tests_mirror_the_package():
    """tests/<package path>/test_<module>.py: every test folder is a folder of the package
    (scripts/ for the scripts, fixtures/ for data), so a module's tests are where it is."""
    tests = Path(__file__).resolve().parent
    for folder in sorted(p for p in tests.rglob("*") if p.is_dir() and p.name != "__pycache__"):
        rel = folder.relative_to(tests)
        if rel.parts[0] in ("fixtures", "scripts"):
            continue
        assert (PKG / rel).is_dir(), f"tests/{rel} has no loosespec_bench/{rel} to mirror"
