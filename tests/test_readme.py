"""README.md's facts, checked against the tree: at most 200 lines; every file and page it names
exists; every make target it names is listed by `make help` and dry-runs; every count it states
matches the configs; every `python -m loosespec_bench ...` command in it composes (and, outside
the experiment sweeps, passes the pre-check); the other entry points it names answer --help with
the flags it uses; the end table it shows is its committed run's."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from loosespec_bench.settings.config import CONF_DIR, default_data_dir, group_choices
from loosespec_bench.schema import figure

from .conftest import REPO

README = (REPO / "README.md").read_text(encoding="utf-8")
PATH_PREFIXES = ("docs/", "results/", "scripts/", "loosespec_bench/", "tests/", "notebooks/", "slurm/")


def _code_blocks(text: str) -> list[str]:
    return text.split("```")[1::2]


def _commands(prefix: str) -> list[str]:
    """Every command starting with `prefix` in the README: lines of code blocks and inline code,
    shell comments cut."""
    found = []
    for block in _code_blocks(README):
        found += [line.split("  #")[0].strip() for line in block.splitlines() if line.strip().startswith(prefix)]
    prose = "".join(README.split("```")[0::2])
    found += [m.strip() for m in re.findall(r"`([^`]+)`", prose) if m.strip().startswith(prefix)]
    return list(dict.fromkeys(c for c in found if c))


def test_the_readme_is_short():
    assert len(README.splitlines()) <= 200


def test_every_file_and_page_it_names_exists():
    links = [t for t in re.findall(r"\]\(([^)]+)\)", README) if not t.startswith(("http://", "https://", "#"))]
    inline = [t.strip().rstrip(".,:;") for t in re.findall(r"`([^`\s]+)`", README) if t.startswith(PATH_PREFIXES)]
    named = set(links) | set(inline)
    assert len(links) >= 12 and any(n.startswith("results/") for n in named)  # the check reads what it should
    missing = sorted(n for n in named if not (REPO / n.split("#")[0]).exists())
    assert not missing, f"README names files that do not exist: {missing}"


def test_the_default_data_folder_is_the_codes():
    assert str(default_data_dir()).replace(str(Path.home()), "~") in README


def _make_help_targets() -> set[str]:
    out = subprocess.run(["make", "-s", "help"], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return {line.split()[0] for line in out.stdout.splitlines() if line.strip()}


def test_every_make_target_it_names_is_listed_and_dry_runs():
    named = {c.split()[1] for c in _commands("make ")}
    assert {"install", "data", "run", "report", "test", "help"} <= named
    listed = _make_help_targets()
    assert named <= listed, f"README names make targets `make help` does not list: {sorted(named - listed)}"
    for target in sorted(named):
        dry = subprocess.run(["make", "-n", target], cwd=REPO, capture_output=True, text=True, timeout=60)
        assert dry.returncode == 0, f"make -n {target}: {dry.stderr}"


def test_every_count_it_states_matches_the_configs():
    rows = re.findall(r"^\| `([a-z_]+)=` \| (\d+) \|", README, flags=re.M)
    assert len(rows) >= 5
    for group, count in rows:
        assert int(count) == len(group_choices(group)), f"README says {group}= has {count} options; conf has {len(group_choices(group))}"
    # Every option it gives as an example exists.
    for line in README.splitlines():
        m = re.match(r"^\| `([a-z_]+)=` \| \d+ \| (.*) \|$", line)
        if m:
            for option in re.findall(r"`([a-z0-9_]+)`", m.group(2)):
                assert option in group_choices(m.group(1)), f"{m.group(1)}={option}"


def test_every_harness_command_in_it_composes_and_passes_the_precheck():
    from hydra import compose, initialize_config_dir

    from loosespec_bench.__main__ import precheck

    commands = _commands("python -m loosespec_bench ")
    assert len(commands) >= 5, commands
    for command in commands:
        argv = command.split()[3:]
        if "--version" in argv or "--help" in argv:
            continue
        overrides = [a for a in argv if a != "-m"]
        if any(a.startswith("experiment=") for a in overrides):
            # A paper sweep: its overrides compose (checking every point of it takes ~30 s).
            with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
                compose(config_name="config", overrides=overrides)
        else:
            precheck(argv, resources=False)  # raises ConfigError with the one-line message


@pytest.mark.parametrize("module", ["loosespec_bench.data", "loosespec_bench.report", "loosespec_bench.score", "loosespec_bench.plan"])
def test_every_other_entry_point_it_names_answers_help_with_the_flags_it_uses(module):
    assert f"python -m {module}" in README
    helped = subprocess.run([sys.executable, "-m", module, "--help"], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert helped.returncode == 0, helped.stderr
    flags = set()
    for command in _commands(f"python -m {module}"):
        flags |= set(re.findall(r"(--[a-z][a-z-]*)", command))
    # The flags named beside the command in prose (e.g. "--check, --sets mgsm,gsm8k").
    for line in README.splitlines():
        if f"python -m {module}`" in line or f"python -m {module} " in line:
            flags |= set(re.findall(r"(--[a-z][a-z-]*)", line))
    assert all(flag in helped.stdout for flag in flags), (module, sorted(f for f in flags if f not in helped.stdout))


def test_the_version_flag_prints_the_harness_version():
    from loosespec_bench import __version__

    assert "python -m loosespec_bench --version" in README
    out = subprocess.run([sys.executable, "-m", "loosespec_bench", "--version"], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.startswith(f"loosespec_bench {__version__}")


def test_the_end_table_it_shows_is_its_committed_runs():
    folder = re.search(r"`(results/cpu/runs/[^`]+)`", README).group(1)
    s = json.loads((REPO / folder / "summary.json").read_text())
    table = next(b for b in _code_blocks(README) if "tau (tokens per target step)" in b)

    def row(label: str) -> str:
        return next(line[len(label):].strip() for line in table.splitlines() if line.startswith(label))

    assert row("samples (distinct problems)") == str(s["n_samples"])
    assert row("tau (tokens per target step)") == f"{s['tau']:.2f} [{s['tau_ci_low']:.2f}, {s['tau_ci_high']:.2f}]"
    # The end-of-run table prints the report's labels and formats (schema.figure, format_value).
    assert row(figure("speedup").label).startswith(f"{s['speedup']:.2f}× [{s['speedup_ci_low']:.2f}, {s['speedup_ci_high']:.2f}]")
    # A rate that is a count over n is printed with its count: `13/30 = 0.433 [...]`.
    accuracy = row(figure("accuracy").label + " ")
    assert accuracy.startswith(f"{round(s['accuracy'] * s['n_samples'])}/{s['n_samples']} = {s['accuracy']:.3f} [")
    assert row("method / drafter / K").split(" / ")[0] == s["method"]
