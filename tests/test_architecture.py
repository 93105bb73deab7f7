"""The package's layering, pinned by parsing every module's imports (ast, nothing is imported).

  step, sampling,       the ground floor: import nothing from the package
  generation
  drafters / verifiers  import the floor, never each other's layer or the loop (decoding)
  schema                the report's declarations: reads the rules' parameter classes (their
                        knobs' columns and labels), nothing else of the package
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


@pytest.mark.parametrize("floor", ["step.py", "sampling.py", "generation.py"])
def test_the_ground_floor_imports_nothing_from_the_package(floor):
    assert package_imports(PKG / floor) == set()


def test_the_schema_reads_only_the_rules_and_their_params():
    """schema.KNOBS is read from the rules' parameter classes (issue 39): schema may import the
    verifiers and params.py, nothing else (the sinks and the report import it)."""
    allowed = ("loosespec_bench.verifiers", "loosespec_bench.params")
    assert {m for m in package_imports(PKG / "schema.py") if not m.startswith(allowed)} == set()


@pytest.mark.parametrize("layer", ["step.py", "sampling.py", "generation.py", "drafters", "verifiers", "decoding", "models", "tasks", "measure/metrics.py"])
def test_nothing_below_build_imports_it(layer):
    assert _violations(layer, ("loosespec_bench.build",)) == {}


def test_metrics_do_not_import_the_loop():
    assert _violations("measure/metrics.py", ("loosespec_bench.decoding",)) == {}


def test_the_app_reaches_models_and_rules_only_through_an_engine():
    forbidden = ("loosespec_bench.decoding", "loosespec_bench.drafters", "loosespec_bench.verifiers", "loosespec_bench.models",
                 "loosespec_bench.engines.hf")
    assert _violations("run/app.py", forbidden) == {}


def test_the_engine_interface_imports_only_the_ground_floor():
    """engines/base.py: the ground floor, and the engine settings' declaration beside it (which
    imports only params.py)."""
    assert _violations("engines/base.py", ("loosespec_bench",)).get("loosespec_bench/engines/base.py") == [
        "loosespec_bench.engines.settings", "loosespec_bench.engines.settings.EngineParams",
        "loosespec_bench.generation", "loosespec_bench.generation.GenerationOutput"]
    assert {m for m in package_imports(PKG / "engines" / "settings.py") if not m.startswith("loosespec_bench.params")} == set()


def test_sinks_do_not_import_the_report():
    assert _violations("sinks", ("loosespec_bench.report",)) == {}


def test_the_report_and_the_wandb_sink_read_one_schema():
    """Column names, labels and renames live in schema.py (issue 22 item 4): the index, tables,
    plots and the W&B sink import it, and none of them spells a knob rename itself."""
    for module in ("report/index.py", "report/render.py", "report/labels.py", "report/grouping.py", "report/plots/figure.py", "sinks/wandb.py"):
        imports = package_imports(PKG / module)
        assert "loosespec_bench.schema" in imports or any(m.startswith("loosespec_bench.schema.") for m in imports), module
    for module in ("report/index.py", "report/render.py", "report/labels.py", "report/grouping.py", "report/tables",
                   "report/plots", "report/__main__.py", "sinks/wandb.py"):
        for path in _files(module):
            text = path.read_text()
            assert 'get("window")' not in text and 'get("p")' not in text and '"dropout_p": ' not in text, path


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
    assert _violations("settings/config.py", ("loosespec_bench.settings.checks",)) == {}


def test_params_is_a_ground_floor():
    """The rule vocabulary and Params: rules, drafters and tasks import it; it imports only errors."""
    assert {m for m in package_imports(PKG / "params.py") if not m.startswith("loosespec_bench.errors")} == set()


# ---- the whole graph: floors, circles ---------------------------------------------------------
# Every part of the package on a floor; an import goes to a lower floor, or stays inside its own
# part. A new module or package joins a floor here (the test names any that has none).
FLOORS = {
    # The basement: ConfigError, which every floor raises (params, on the ground floor, too).
    -1: ("errors",),
    # The ground floor: the package's vocabulary, imported by everything, importing nothing above.
    0: ("loosespec_bench", "step", "sampling", "generation", "omp", "params", "kv", "interrupts", "digest",
        "safe_files"),  # safe_files: opening a run folder's files as data (no links, regular files only)
    # measure/: timings, work counts, metrics, serving percentiles, the cost model, stats; slurm: the
    # queue's vocabulary (Hydra's launcher plugin reads it too), above the gate its jobs index passes.
    1: ("measure", "models", "judges", "slurm"),
    2: ("tasks", "drafters", "verifiers"),
    # settings/: config, the pre-check, points, advice, path limits; schema: the report's declarations.
    3: ("settings", "decoding", "schema"),
    # store/: the run folder, the shared target-alone store, the summary a run folder records.
    4: ("store", "build"),
    5: ("engines", "report", "sinks", "calibrate"),
    # run/: the app, resume and the table a run ends with; score: `python -m loosespec_bench.score`.
    6: ("run", "score", "data"),
    # launch/: the plan's power table, the cluster status, the sweep table (reads run/'s end table).
    7: ("launch", "__main__", "bench", "train"),
    8: ("plan",),  # plan: `python -m loosespec_bench.plan`, the launcher over launch/
    9: ("certify",),  # certify: `python -m loosespec_bench.certify`, over the planner and the run
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


# ---- scripts/ and hydra_plugins/ (issue 39 item 6) ---------------------------------------------
REPO = PKG.parent
# Hydra loads the plugins while it composes and launches a run: they sit on the engines' floor
# (5) and may import only what lies below it (slurm, run_folder, config), never the app.
HYDRA_PLUGINS_FLOOR = 5
# What a script may do to find the package: nothing. It is installed (pip install -e .).
PATH_HACKS = ("sys.path", "spec_from_file_location", "PYTHONPATH", "site.addsitedir")


def _imports_of(path: Path) -> set[str]:
    """Every absolute module name `path` imports (any package), at any depth, with the names
    imported from it (`from a import b` gives a and a.b)."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level:
            out.add(node.module or "")
            out.update(f"{node.module}.{a.name}" for a in node.names)
    return out


def _path_hacks(path: Path) -> list[str]:
    """The dotted names and string constants in `path` that reach for a module by its path."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            parts = []
            n: ast.AST = node
            while isinstance(n, ast.Attribute):
                parts.append(n.attr)
                n = n.value
            if isinstance(n, ast.Name):
                dotted = ".".join([n.id, *reversed(parts)])
                found += [dotted for hack in PATH_HACKS if dotted == hack or dotted.endswith("." + hack)]
        elif isinstance(node, ast.Constant) and node.value in PATH_HACKS:
            found.append(repr(node.value))
    return found


def _scripts() -> list[Path]:
    return sorted((REPO / "scripts").glob("*.py"))


def test_the_script_guards_see_path_hacks_and_private_imports(tmp_path):
    # Guards the guard: each kind of reach a script must not make is seen.
    bad = tmp_path / "bad.py"
    bad.write_text("import os, sys, importlib.util\nsys.path.insert(0, 'x')\nos.environ['PYTHONPATH'] = 'x'\n"
                   "importlib.util.spec_from_file_location('m', 'm.py')\nfrom loosespec_bench.bench.engine import _x\n"
                   "from loosespec_bench.bench import _private\n")
    assert sorted(_path_hacks(bad)) == ["'PYTHONPATH'", "importlib.util.spec_from_file_location", "sys.path"]
    assert _private_names(bad) == ["loosespec_bench.bench._private", "loosespec_bench.bench.engine._x"]


def _private_names(path: Path) -> list[str]:
    return sorted(m for m in _imports_of(path) if m.startswith("loosespec_bench")
                  and any(p.startswith("_") and not p.startswith("__") for p in m.split(".")))


def test_scripts_find_the_package_by_no_path():
    """scripts/ imports the installed package, never a file by its path (no sys.path, no
    importlib by file, no PYTHONPATH): a script is a command line over the package."""
    assert _scripts(), "no scripts found: the guard would pass vacuously"
    assert {p.name: _path_hacks(p) for p in _scripts() if _path_hacks(p)} == {}


def test_scripts_import_only_the_packages_public_modules():
    """A script imports loosespec_bench's modules (existing ones) and their public names, never
    a private one, another script, or the tests."""
    modules = set(_modules())
    bad = {}
    for path in _scripts():
        imports = _imports_of(path)
        ours = {m for m in imports if m == "loosespec_bench" or m.startswith("loosespec_bench.")}
        # `from a.b import c`: a.b must be a module; c a module or a public name of it.
        unknown = sorted(m for m in ours if m not in modules and m.rsplit(".", 1)[0] not in modules)
        sibling = sorted(m for m in imports if m.split(".")[0] in {p.stem for p in _scripts()} | {"tests", "scripts"})
        problems = unknown + sibling + _private_names(path)
        if problems:
            bad[path.name] = problems
    assert bad == {}


def test_hydra_plugins_import_nothing_above_their_floor():
    """The plugins (launcher, sweeper) import only package modules below the engines' floor."""
    files = sorted((REPO / "hydra_plugins").rglob("*.py"))
    assert files, "no hydra plugins found: the guard would pass vacuously"
    bad, seen = {}, set()
    for path in files:
        ours = {m for m in _imports_of(path) if m.startswith("loosespec_bench.") and m in _modules()}
        seen |= ours
        high = sorted(m for m in ours if (_floor(m) is None or _floor(m) >= HYDRA_PLUGINS_FLOOR))
        if high:
            bad[str(path.relative_to(REPO))] = high
    assert bad == {}
    # Guards the guard: the launcher's function-level imports are seen.
    assert {"loosespec_bench.slurm", "loosespec_bench.store.run_folder", "loosespec_bench.settings.config"} <= seen
    assert {p.name for p in files if _path_hacks(p)} == set()

# ---- a rule's knob names live in its own module (issue 39 item 6) --------------------------------
# Bare names that also mean something else in the package, checked only as `method.<name>`.
OTHER_MEANINGS = {
    "p": "p-values and probabilities (stats, summary, compare)",
    "weight": "torch parameters (decoding)",
    "alpha": "plot transparency (report)",
    "threshold": "the Threshold rule's own method name (verifiers/threshold.py)",
}
# The vLLM bridge maps FLy's knobs onto vLLM's options and refuses the ones vLLM lacks: a mapping
# names both sides. Its knob list and defaults come from FLyParams (engines/vllm.py fly_params).
ALLOWED = {"loosespec_bench/engines/vllm.py": {"mode", "no_window", "top_k"}}


def _knob_owners() -> dict[str, set[Path]]:
    """knob name -> the modules allowed to name it: the modules of the rules that take it and of
    the parameter classes that declare it."""
    import dataclasses
    import sys

    from loosespec_bench.params import params_of
    from loosespec_bench.verifiers import rules

    owners: dict[str, set[Path]] = {}
    for rule in rules():
        params = params_of(rule)
        if params is None:
            continue
        declaring = [k for k in params.__mro__ if "__dataclass_fields__" in k.__dict__]
        for field in dataclasses.fields(params):
            mods = {rule.__module__, *(k.__module__ for k in declaring if field.name in k.__dict__.get("__annotations__", {}))}
            owners.setdefault(field.name, set()).update(Path(sys.modules[m].__file__).resolve() for m in mods)
    return owners


def _settings_of_other_classes() -> set[str]:
    """Setting names other classes declare (drafters' and tasks' knobs, generation.*, the judge
    file's fields): a bare string with such a name is theirs, not a rule's."""
    import dataclasses
    import importlib
    import pkgutil

    import loosespec_bench.drafters
    import loosespec_bench.tasks
    from loosespec_bench.settings.run_settings import GenerationParams
    from loosespec_bench.drafters.base import Drafter
    from loosespec_bench.judges.head import JudgeHead
    from loosespec_bench.params import declared_rules
    from loosespec_bench.tasks.base import Task

    for package in (loosespec_bench.drafters, loosespec_bench.tasks):  # every class, not only those imported so far
        for mod in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            importlib.import_module(mod.name)
    names = set(declared_rules(GenerationParams)) | {f.name for f in dataclasses.fields(JudgeHead)}
    for base in (Drafter, Task):
        todo = [base]
        while todo:
            cls = todo.pop()
            todo.extend(cls.__subclasses__())
            names.update(declared_rules(cls))
    return names


def knob_name_uses() -> dict[str, set[str]]:
    """module -> the rule knob names it spells outside the rules' own modules: `method.<name>`
    anywhere in its text (code, messages, docstrings), and a string literal equal to the name
    (for names no other class uses as a setting and without another meaning, OTHER_MEANINGS)."""
    import re

    owners = _knob_owners()
    elsewhere = _settings_of_other_classes()
    out: dict[str, set[str]] = {}
    for path in sorted(PKG.rglob("*.py")):
        text = path.read_text()
        literals = {n.value for n in ast.walk(ast.parse(text)) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
        rel = str(path.relative_to(PKG.parent))
        for name, mods in owners.items():
            if path.resolve() in mods or name in ALLOWED.get(rel, ()):
                continue
            bare = name not in elsewhere and name not in OTHER_MEANINGS and name in literals
            if bare or re.search(rf"\bmethod\.{re.escape(name)}\b", text):
                out.setdefault(rel, set()).add(name)
    return out


def test_the_knob_name_guard_sees_a_knob_named_elsewhere():
    # Guards the guard: FLy's window is FLy's, and the scan finds the names it must.
    owners = _knob_owners()
    assert PKG.joinpath("verifiers", "fly.py").resolve() in owners["window"]
    assert {"theta", "window", "criterion", "n_paths", "judge_sha256", "div_type"} <= set(owners)


def test_a_rules_knob_names_appear_only_in_its_own_module():
    """Issue 39: a rule's knobs (its Params fields: range, default, report column, label,
    neutral value) are declared once, in its verifier module; the schema, the engines and the
    report read them from the class. Scope: the package's Python modules (loosespec_bench/
    **/*.py). Not checked: the config files (conf/method/<name>.yaml declares the knob's config
    value, and conf/method_drafter, pair_method and experiment/* set knobs for a run: setting a
    knob is using it, not restating it), tests/, scripts/ and hydra_plugins/. A knob counts as
    named where `method.<name>` appears (code, messages, docstrings) or, for a name that no other
    class uses as a setting and that has no other meaning here, as a string literal. ALLOWED:
    the vLLM bridge (a mapping names both sides). The report's FLy tables and figures ask FLy
    for the knobs they read (FLy.THRESHOLD, WINDOW, NO_WINDOW) and schema for their columns."""
    assert knob_name_uses() == {}


# ---- the report wing's rooms (issue 39 item 2) ------------------------------------------------
# Inside report/, a module imports only rooms below its own: the renderer knows nothing of runs,
# the labels ask the rules' classes, grouping shapes runs into rows; the paper tables, the plots
# and the claims stand on those and never on each other; the command line is on top. A new
# module or subpackage of report/ joins a room here (the test names any that has none).
REPORT_ROOMS = {
    0: ("render", "index", "compare",  # cells and tables as text; the results index; two runs on their samples
        "acceptance"),  # acceptance: a run's per-request acceptance in vLLM's and AIPerf's schemas
    1: ("labels",),  # a configuration's name, asked of its rule (verifiers.rule_class)
    2: ("grouping", "project"),  # runs into rows, figures and notes; the hardware projection
    2.5: ("batches",),  # a batch sweep's points (serving figures per configuration and batch size), from grouping's runs
    3: ("tables", "plots", "claims"),  # the papers' tables, the figures, the claims' verdicts
    3.5: ("frontier",),  # the loose rules' frontier: its tables and its figure in the figures' style (plots)
    4: ("__main__",),
}


def _report_room(module: str) -> str | None:
    parts = module.split(".")
    if parts[:2] != ["loosespec_bench", "report"]:
        return None
    return parts[2] if len(parts) > 2 else "__init__"


def _report_floor(room: str) -> int | None:
    return next((f for f, rooms in REPORT_ROOMS.items() if room in rooms), None)


def test_every_report_module_has_a_room():
    rooms = {_report_room(m) for m in _modules()} - {None, "__init__"}
    assert sorted(r for r in rooms if _report_floor(r) is None) == []


def test_the_report_wing_is_in_layers():
    # Guards the guard: the parser sees a paper table's import of grouping.
    assert "loosespec_bench.report.grouping" in package_imports(PKG / "report" / "tables" / "fly.py")
    upward = set()
    for module, imports in _graph().items():
        room = _report_room(module)
        if room in (None, "__init__"):
            continue
        for imported in imports:
            other = _report_room(imported)
            if other is None or other == room:
                continue
            # The package's __init__ (report's public API) is above every room.
            if other == "__init__" or _report_floor(other) >= _report_floor(room):  # type: ignore[operator]
                upward.add((module, imported))
    assert upward == set()


def test_no_private_name_crosses_a_report_module():
    for path in sorted((PKG / "report").rglob("*.py")):
        private = [n for n in package_imports(path)
                   if n.startswith("loosespec_bench.report.") and n.rsplit(".", 1)[-1].startswith("_")
                   and n.rsplit(".", 1)[-1] not in ("__init__", "__main__")]
        assert private == [], path.relative_to(PKG)


def test_no_report_module_is_over_700_lines():
    long = {str(p.relative_to(PKG)): n for p in sorted((PKG / "report").rglob("*.py")) if (n := len(p.read_text().splitlines())) > 700}
    assert long == {}


# ---- issue 71 item 6: the package's shape, its settings read through their declarations ----------
MAX_MODULE_LINES = 700
MAX_ROOT_MODULES = 20  # the package root's modules (__init__ and __main__ included); the rest live in wings


# Over the cap for now, each with what will bring it back (the list only shrinks).
OVER_THE_CAP: dict[str, str] = {}  # plan.py left it: its jobs, status and launch moved to launch/ (issue 71)


def test_no_module_in_the_package_is_over_700_lines():
    long = {str(p.relative_to(PKG)): n for p in sorted(PKG.rglob("*.py")) if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES}
    assert set(long) - set(OVER_THE_CAP) == set(), long
    assert set(OVER_THE_CAP) <= set(long), "a module back under the cap leaves OVER_THE_CAP"


def test_the_package_root_holds_at_most_20_modules():
    root = sorted(p.name for p in PKG.glob("*.py"))
    assert len(root) <= MAX_ROOT_MODULES, root


# Run-level settings (the top level, generation.*, timing.*, paths.*, engine.*) are declared once
# (settings/run_settings.py, measure/timing.py TimingParams, engines/settings.py) and read through
# RunSettings / the Params (or run_settings.section for one of them), never as raw config keys with
# a default of their own. Scope: the whole package.
RUN_SETTING_KEYS = ("timing", "generation", "seed", "baseline", "threads", "warmup", "progress", "chat_template",
                    "record_steps", "power_threshold", "experiment_name", "paths")
RAW_SETTING_READ = (
    r"\bcfg\.(?:" + "|".join(RUN_SETTING_KEYS) + r")\b"
    r"|\bcfg\.get\(\s*[\"'](?:" + "|".join(RUN_SETTING_KEYS) + r")[\"']"
    r"|[\"']batch_size[\"']\s*\)\s*or\s+1|get\(\s*[\"']batch_size[\"']\s*,\s*1\s*\)"
)
SETTINGS_READERS = ("",)  # the package
# Modules that may read the keys themselves, each with why.
RAW_SETTINGS_ALLOWED: dict[str, str] = {
    "settings/run_settings.py": "the declaration and its readers",
    "measure/timing.py": "TimingParams.of: the timing declaration's own reader",
    # A folder from elsewhere: its stored config is data, shown or tried as it is (a value no
    # declaration allows must not stop the re-score or the report), never checked or defaulted.
    "score.py": "a stored run folder's config, read as data",
    "report/index.py": "a stored run folder's config, read as data",
}


def raw_setting_reads() -> dict[str, list[str]]:
    import re

    pattern = re.compile(RAW_SETTING_READ)
    out: dict[str, list[str]] = {}
    for sub in SETTINGS_READERS:
        for path in _files(sub):
            rel = str(path.relative_to(PKG))
            hits = [m.group(0) for m in pattern.finditer(path.read_text())]
            if hits and rel not in RAW_SETTINGS_ALLOWED:
                out[rel] = hits
    return out


def test_the_raw_setting_guard_sees_raw_reads(tmp_path):
    import re

    pattern = re.compile(RAW_SETTING_READ)
    for text in ('cfg.timing.get("subset")', 'cfg.get("power_threshold", 0.05)', 'int(node.get("batch_size") or 1)',
                 'eng.get("batch_size", 1)', "int(cfg.seed)"):
        assert pattern.search(text), text
    assert not pattern.search("settings.timing.subset") and not pattern.search("cfg.method.name")


def test_run_level_settings_are_read_through_their_declaration():
    assert raw_setting_reads() == {}
    assert all((PKG / rel).is_file() for rel in RAW_SETTINGS_ALLOWED), "an allowed module that no longer exists leaves the list"


def test_engine_batch_size_has_one_name():
    """engine.batch_size is the one name of the requests an engine runs at once; vLLM's keyword
    for it (max_num_seqs) is spelled where it is handed to vLLM, and where records from before
    issue 71 are read (measure/serving.py batch_size_of)."""
    spelled = {str(p.relative_to(PKG)) for p in PKG.rglob("*.py") if "max_num_seqs" in p.read_text()}
    assert spelled <= {"engines/vllm.py", "engines/vllm_serving.py", "engines/settings.py", "measure/serving.py", "bench/vllm.py"}


def test_the_precheck_recognises_no_class_by_its_name():
    """settings/checks.py asks a class what it is (its Params' group, its declared capabilities),
    never compares class or module names, and resolves `_target_` through config.resolve_class only."""
    text = (PKG / "settings" / "checks.py").read_text()
    assert "__name__ ==" not in text and ".__module__.endswith" not in text
    assert "_locate" not in text and "hashlib" not in text


# --- Issue 74: every file the package reads or writes passes one gate (safe_files). ----------
# A direct file access (open(), Path.open / read_text / write_text / read_bytes / write_bytes,
# json.load, pandas' to_csv, matplotlib's savefig) outside safe_files is a failure unless its
# module is allowed below, with the reason. A writer handed the temp path of
# `with atomic_output(...) as tmp:` (pandas, matplotlib) is inside the gate.
FILE_ACCESS = {"open", "read_text", "write_text", "read_bytes", "write_bytes", "to_csv", "savefig"}
GATE_ALLOWED = {
    # The gate itself.
    "safe_files.py": "the gate",
    # Kernel pseudo-files (/proc/stat, /proc/<pid>/stat, /proc/cpuinfo): not user data, not regular files.
    "measure/timing.py": "/proc readers", "store/summary.py": "/proc/cpuinfo", "bench/batch.py": "/proc/stat; --out of a bench tool",
    # The sandbox writes its own jail's files (etc/passwd, dev/*) and its runner into its own temp folders.
    "tasks/_sandbox_supervisor.py": "inside its own jail", "tasks/sandbox.py": "its own temp folders",
    # Model caches: the Hugging Face hub cache stores every file as a link to a blob; links are its layout.
    "digest.py": "hashes cached model files (links)", "models/embedded.py": "model cache", "models/gguf.py": "model cache",
    "models/loading.py": "model cache", "models/smollm.py": "model cache", "engines/hf.py": "model config in the cache",
    "drafters/eagle/checkpoint.py": "head checkpoints in the cache", "engines/vllm_sampler.py": "vLLM's own record folder",
    # Packaged files of this installation (never a user's or a folder's).
    "tasks/niah.py": "packaged prompt", "tasks/mgsm.py": "packaged FLy prompts (its data files go through the gate)", "tasks/answers.py": "packaged answers", "settings/config.py": "packaged site conf",
    # Developer tools writing to their own --out (not the harness's commands).
    "bench/engine.py": "--out", "bench/forward_cost.py": "--out", "bench/vllm.py": "--out / --ours",
    "train/autojudge.py": "--out", "train/eagle3.py": "--out", "judges/head.py": "judge cache", "judges/mining.py": "its mining folder",
    "settings/checks.py": "mkstemp probe of a folder's writability",
}


def own_classes_with(path: Path, tree: ast.AST, method: str) -> set[str]:
    """The names `path` imports from the package (a relative import, or loosespec_bench.*) that
    are classes defining `method` in their own module: `BaselineStore(...).open()` is the
    store's method (its file access is checked in its own module), not Path.open."""
    out: set[str] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom):
            continue
        if node.level:
            folder = path.parent
            for _ in range(node.level - 1):
                folder = folder.parent
        elif (node.module or "").split(".")[0] == PKG.name:
            folder = PKG.parent
        else:
            continue
        base = folder.joinpath(*node.module.split(".")) if node.module else folder
        source = next((f for f in (base.with_suffix(".py"), base / "__init__.py") if f.is_file()), None)
        if source is None:
            continue
        classes = {c.name for c in ast.walk(ast.parse(source.read_text())) if isinstance(c, ast.ClassDef)
                   and any(isinstance(f, ast.FunctionDef) and f.name == method for f in c.body)}
        out.update(a.asname or a.name for a in node.names if a.name in classes)
    return out


def direct_file_access(path: Path) -> list[str]:
    """'line: call' for every direct file access in `path` (module comment above)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    own = own_classes_with(path, tree, "open")  # Store(...).open(): our method, not Path.open
    gated: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.With):
            for item in node.items:
                call = item.context_expr
                if (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == "atomic_output"
                        and isinstance(item.optional_vars, ast.Name)):
                    gated.add(item.optional_vars.id)
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        if isinstance(f, ast.Name) and f.id == "open":
            out.append(f"{node.lineno}: open(")
        elif isinstance(f, ast.Attribute) and f.attr in FILE_ACCESS:
            if isinstance(f.value, ast.Name) and f.value.id in ("os", "gzip", "zipfile", "tarfile", "wandb", "self", "z"):
                continue  # os.open (descriptors), archives' members, W&B's API, our own methods
            if node.args and isinstance(node.args[0], ast.Name) and node.args[0].id in gated:
                continue
            if (f.attr == "open" and isinstance(f.value, ast.Call) and isinstance(f.value.func, ast.Name)
                    and f.value.func.id in own):
                continue
            out.append(f"{node.lineno}: .{f.attr}(")
        elif isinstance(f, ast.Attribute) and f.attr == "load" and isinstance(f.value, ast.Name) and f.value.id in ("json", "yaml"):
            out.append(f"{node.lineno}: {f.value.id}.load(")
    return out


def test_the_gate_guard_sees_direct_file_access(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text("import json\nfrom pathlib import Path\n"
                     "def f(p, df, fig):\n    open(p)\n    Path(p).read_text()\n    Path(p).write_text('x')\n"
                     "    json.load(open(p))\n    df.to_csv(p)\n"
                     "    with atomic_output(p) as tmp:\n        fig.savefig(tmp)\n")
    found = direct_file_access(probe)
    assert sorted(x.split(": ")[1] for x in found) == [".read_text(", ".to_csv(", ".write_text(", "json.load(", "open(", "open("]
    # A class of the package with its own open() (BaselineStore.open): its method, not a file access.
    (tmp_path / "store.py").write_text("class Store:\n    def open(self):\n        return self\n")
    (tmp_path / "app.py").write_text("from pathlib import Path\nfrom .store import Store\n"
                                     "def f(p):\n    Store(p).open()\n    Path(p).open()\n")
    assert direct_file_access(tmp_path / "app.py") == ["5: .open("]


def test_every_file_access_passes_the_gate():
    bad = {}
    for path in sorted(PKG.rglob("*.py")):
        rel = str(path.relative_to(PKG))
        if rel in GATE_ALLOWED:
            continue
        if hits := direct_file_access(path):
            bad[rel] = hits
    assert bad == {}, ("files opened outside loosespec_bench/safe_files.py (read through read_bounded / "
                       "load_json_declaration / open_regular, write through atomic_write_text / atomic_output), or "
                       f"an allowed module with its reason in GATE_ALLOWED: {bad}")


def test_the_gate_allow_list_names_only_modules_that_exist():
    assert [m for m in GATE_ALLOWED if not (PKG / m).is_file()] == []


# ---- issue 71 item 4: one vocabulary of configuration names, declared once ---------------------
# Every benchmark's configuration names (the speed benchmark's, the engine, batch and vLLM benches'
# contestants) and their old spellings are declared in measure/speed_configs.py; bench/ matches a
# name only through it (its constants, DECLARED, canonical / pick), never by a string of its own.
NAMES_DECLARATION = PKG / "measure" / "speed_configs.py"


def spelled_config_names(path: Path, names: set[str]) -> list[str]:
    """`line: name` for every string literal in `path` equal to one of `names` (a docstring, a
    message or an f-string piece that only contains a name is not one)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    return sorted(f"{n.lineno}: {n.value}" for n in ast.walk(tree)
                  if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value in names)


def _declared_config_names() -> set[str]:
    from loosespec_bench.measure import speed_configs

    return set(speed_configs.DECLARED) | set(speed_configs.ALIASES) | set(speed_configs.BATCH_OLD_NAMES)


def test_the_config_name_guard_sees_a_name_spelled_outside_its_declaration(tmp_path):
    # Guards the guard: a literal equal to a name or an alias is found; text that only holds one is not.
    (tmp_path / "m.py").write_text('"""Runs fly-mla."""\nA = ("ar", "fly-mla")\nB = f"{A} vs ar"\nC = "ar,spd"\n')
    assert spelled_config_names(tmp_path / "m.py", _declared_config_names()) == ["2: ar", "2: fly-mla"]


def test_bench_matches_configuration_names_only_through_their_declaration():
    names = _declared_config_names()
    assert {"ar", "fly_mla", "fly-mla", "hf-ar", "vllm-spd", "eagle3_tree"} <= names
    bad = {str(p.relative_to(PKG)): hits for p in sorted((PKG / "bench").rglob("*.py"))
           if (hits := spelled_config_names(p, names))}
    assert bad == {}, f"configuration names spelled outside {NAMES_DECLARATION.relative_to(PKG)}: {bad}"
