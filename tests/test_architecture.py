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


def test_config_never_imports_checks():
    """checks imports config (the groups, run ids), never the other way round: no circle."""
    assert _violations("config.py", ("loosespec_bench.checks",)) == {}


def test_params_is_a_ground_floor():
    """The rule vocabulary and Params: rules, drafters and tasks import it; it imports only errors."""
    assert {m for m in package_imports(PKG / "params.py") if not m.startswith("loosespec_bench.errors")} == set()


# ---- the whole graph: floors, circles ---------------------------------------------------------
# Every part of the package on a floor; an import goes to a lower floor, or stays inside its own
# part. A new module or package joins a floor here (the test names any that has none).
FLOORS = {
    # The basement: ConfigError, which every floor raises (params, on the ground floor, too).
    -1: ("errors",),
    0: ("loosespec_bench", "step", "sampling", "generation", "schema", "omp", "stats", "costmodel", "slurm", "timing", "params",
        "work", "safe_files"),  # safe_files: opening a run folder's files as data (no links, regular files only)
    1: ("models", "metrics", "judges"),  # judges: AutoJudge's classifier file, read by verifiers
    2: ("tasks", "drafters", "verifiers"),
    3: ("prompting", "config", "decoding"),
    4: ("checks", "run_folder", "build", "summary"),
    5: ("engines", "status", "report", "sinks", "baselines", "calibrate"),  # baselines: the shared target-alone store
    6: ("app", "score", "plan", "data", "advice"),  # data: `python -m loosespec_bench.data`; advice: the CLI's error lines
    7: ("__main__",),
}
# No arrow runs up: config.validate's lazy import of checks is gone (the validation room, issue
# 22 item 1, moved validate into checks.py). Kept as a set so a test names any new one.
KNOWN_UPWARD: set[tuple[str, str]] = set()


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(PKG.rglob("*.py"))}


def _graph() -> dict[str, set[str]]:
    """module -> the package modules it imports (names that are not modules, such as
    `loosespec_bench.step.Draft`, dropped)."""
    mods = _modules()
    return {m: {i for i in package_imports(p) if i in mods and i != m} for m, p in mods.items()}


def _part(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def _floor(module: str) -> int | None:
    return next((f for f, parts in FLOORS.items() if _part(module) in parts), None)


def test_every_part_of_the_package_has_a_floor():
    assert sorted({_part(m) for m in _modules() if _floor(m) is None}) == []


def test_no_arrow_runs_up_a_floor():
    upward = {
        (m, i) for m, imports in _graph().items() for i in imports
        if _part(m) != _part(i) and None not in (_floor(m), _floor(i)) and _floor(i) >= _floor(m)  # type: ignore[operator]
    }
    assert upward == KNOWN_UPWARD


def _circles(graph: dict[str, set[str]]) -> list[set[str]]:
    """Strongly connected sets of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                comp.add(w)
                if w == v:
                    break
            if len(comp) > 1:
                circles.append(comp)

    for v in graph:
        if v not in index:
            visit(v)
    return circles


def test_no_import_circles():
    graph = {m: {i for i in imports if (m, i) not in KNOWN_UPWARD} for m, imports in _graph().items()}
    assert _circles(graph) == []


def test_the_circle_finder_sees_circles():
    # Guards the guard: a two-module circle, a three-module one and a module outside both.
    found = _circles({"a": {"b"}, "b": {"a"}, "c": {"a", "d"}, "d": {"e"}, "e": {"c"}})
    assert sorted(map(sorted, found)) == [["a", "b"], ["c", "d", "e"]]


def test_the_eagle_heads_import_neither_each_other_nor_each_others_privates():
    eagle = "loosespec_bench.drafters.eagle"
    for a, b in (("eagle2", "eagle3"), ("eagle3", "eagle2")):
        path = PKG / "drafters" / "eagle" / f"{a}.py"
        assert f"{eagle}.{b}" not in package_imports(path)
        assert not any(m.startswith(f"{eagle}.{b}.") for m in package_imports(path))
    # No private name crosses a module boundary inside the EAGLE package.
    for path in (PKG / "drafters" / "eagle").glob("*.py"):
        private = [n for n in package_imports(path) if n.rsplit(".", 1)[-1].startswith("_") and not n.endswith("__init__")]
        assert private == [], path.name


def test_the_eagle_heads_share_one_cached_attention_step():
    head = "loosespec_bench.drafters.eagle.head"
    for name in ("eagle2.py", "eagle3.py"):
        assert f"{head}.CachedAttention" in package_imports(PKG / "drafters" / "eagle" / name)
