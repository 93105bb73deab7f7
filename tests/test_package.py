"""The installable package: configs inside it, `--help` from the config files, site settings
outside it, and a built wheel that runs from any folder."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import site
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

from loosespec_bench.settings.config import CONF_DIR, HELP_GROUPS, description, group_choices, site_conf_dir

from .conftest import REPO, shared_data_dir


def _env(**extra: str) -> dict[str, str]:
    return {**os.environ, "LOOSESPEC_DATA_DIR": str(shared_data_dir()), "PYTHONUNBUFFERED": "1", **extra}


def test_configs_live_in_the_package():
    assert CONF_DIR == REPO / "loosespec_bench" / "conf" and (CONF_DIR / "config.yaml").is_file()
    # The checkout's conf/ holds only the git-ignored site settings (conf/local).
    assert sorted(p.name for p in (REPO / "conf").iterdir()) == ["local"]


def test_help_lists_every_option_with_its_description_line():
    proc = subprocess.run(
        [sys.executable, "-m", "loosespec_bench", "--help"], cwd=REPO, env=_env(), capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    for group in HELP_GROUPS:
        names = group_choices(group)
        assert names, group
        for name in names:
            text = description(CONF_DIR / group / f"{name}.yaml")
            assert text, f"{group}/{name}.yaml has no description line"
            assert any(line.split(None, 1) == [name, text] for line in out.splitlines()), f"{group}={name} not listed"
    # Groups that other configs compose are not offered.
    for hidden in ("pair_drafter", "experiment_scale", "paper_dataset_scale", "launcher"):
        assert hidden not in out.lower().replace("hydra/launcher=slurm|local", "")
    assert "Scales (scale=NAME" in out and "$FLAGS_HELP" not in out
    assert "paper_dataset=NAME" in out  # the sweepable bundles users name (paper_dataset=gsm8k,mgsm)
    # The help speaks to users: no tracker issue numbers in it.
    assert not re.search(r"\bissues? \d+", out), re.search(r".*\bissues? \d+.*", out).group(0)


def test_help_into_a_closed_pipe_ends_quietly():
    # `--help | head`: the reader goes away after a few lines; no traceback on stderr.
    proc = subprocess.run(f"{sys.executable} -m loosespec_bench --help | head -3", shell=True, cwd=REPO, env=_env(),
                          capture_output=True, text=True, timeout=120)
    assert len(proc.stdout.splitlines()) == 3 and "Traceback" not in proc.stderr, proc.stderr


def test_every_listed_config_has_an_explicit_description():
    missing = [f"{g}/{n}" for g in HELP_GROUPS for n in group_choices(g)
               if not any(ln.startswith("# description:") for ln in (CONF_DIR / g / f"{n}.yaml").read_text().splitlines())]
    assert not missing, f"add a '# description: <one line>' comment to: {missing}"


def test_the_layout_names_every_top_level_module_and_the_readme_the_help_commands():
    readme = (REPO / "README.md").read_text()
    layout = (REPO / "docs" / "contributing.md").read_text().split("\n## Layout\n", 1)[1].split("\n## ", 1)[0]
    named = {line.split()[0] for line in layout.splitlines() if line.startswith("  ") and line[2:3].strip()}
    pkg = REPO / "loosespec_bench"
    tree = {p.name + ("/" if p.is_dir() else "") for p in pkg.iterdir()
            if (p.suffix == ".py" or (p / "__init__.py").is_file() or p.name == "conf") and p.name != "__pycache__"}
    assert tree - named == set(), f"docs/contributing.md's Layout misses {sorted(tree - named)}"
    assert named - tree == set(), f"docs/contributing.md's Layout names what is not in loosespec_bench/: {sorted(named - tree)}"
    assert "make help" in readme and "python -m loosespec_bench --help" in readme


def test_make_help_lists_the_targets():
    proc = subprocess.run(["make", "-s", "help"], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    listed = {line.split()[0] for line in proc.stdout.splitlines() if line.strip()}
    assert {"help", "run", "test", "replicate-70b", "replicate-cpu", "status", "report", "bench"} <= listed
    # Every target a README tells users to run is listed (slurm/README.md: make status-cpu ...).
    told = set()
    for doc in (REPO / "README.md", REPO / "slurm" / "README.md", *sorted((REPO / "docs").glob("*.md"))):
        told |= set(re.findall(r"(?<![\w-])make ([a-z][a-z0-9-]+)", doc.read_text()))
    phony = {t for mk in ("Makefile", *map(str, REPO.glob("*.mk")))
             for line in (REPO / mk).read_text().splitlines() if line.startswith(".PHONY:") for t in line.split()[1:]}
    assert sorted((told & phony) - listed) == []
    assert not [line for line in proc.stdout.splitlines() if re.search(r"\bissues? \d+", line)]
    assert all(len(line.split(None, 1)) == 2 for line in proc.stdout.splitlines() if line.strip())


def _launcher(overrides: list[str]):
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose(config_name="config", overrides=["hydra/launcher=slurm", *overrides], return_hydra_config=True).hydra.launcher


@pytest.mark.skipif(importlib.util.find_spec("hydra_plugins.hydra_submitit_launcher") is None, reason="pip install hydra-submitit-launcher")
def test_site_settings_come_from_the_checkout_or_loosespec_site_conf(tmp_path, monkeypatch):
    monkeypatch.delenv("LOOSESPEC_SITE_CONF", raising=False)
    monkeypatch.setenv("LOOSESPEC_SLURM_PARTITION", "from-env")
    assert site_conf_dir() == REPO / "conf"  # a checkout: its conf/local/slurm.yaml (git-ignored)
    site_dir = tmp_path / "site"
    (site_dir / "local").mkdir(parents=True)
    (site_dir / "local" / "slurm.yaml").write_text("partition: from-site-file\n")
    monkeypatch.setenv("LOOSESPEC_SITE_CONF", str(site_dir))
    assert site_conf_dir() == site_dir
    assert _launcher([]).partition == "from-site-file"
    monkeypatch.setenv("LOOSESPEC_SITE_CONF", str(tmp_path / "absent"))
    assert _launcher([]).partition == "from-env"  # no site file: the environment, no warning


def _site_packages() -> list[str]:
    """The running interpreter's package folders (torch, transformers, hydra, ...)."""
    paths = [*site.getsitepackages(), sysconfig.get_paths()["purelib"]]
    return list(dict.fromkeys(p for p in paths if Path(p).is_dir()))


def test_wheel_installs_and_runs_smoke_tiny_from_any_folder(tmp_path):
    """Build the wheel, install it alone (--no-deps) into a fresh venv that sees this
    interpreter's packages (so torch is not reinstalled), and run from a folder outside the repo."""
    if importlib.util.find_spec("setuptools") is None:
        pytest.skip("building the wheel without isolation needs setuptools")
    # A copy of the sources: building in the checkout would leave build/ and *.egg-info there.
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, src / name)
    shutil.copytree(REPO / "loosespec_bench", src / "loosespec_bench", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    dist = tmp_path / "dist"
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(dist), str(src)],
        capture_output=True, text=True, timeout=300,
    )
    assert build.returncode == 0, build.stderr
    (wheel,) = dist.glob("loosespec_bench-*.whl")

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    purelib = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], capture_output=True, text=True, check=True
    ).stdout.strip()
    # --system-site-packages reaches the base interpreter's packages only; when this test runs
    # in a venv, a .pth adds that venv's packages after the fresh venv's own.
    (Path(purelib) / "_test_parent_packages.pth").write_text("\n".join(_site_packages()) + "\n")
    install = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "-q", str(wheel)],
        capture_output=True, text=True, timeout=300,
    )
    assert install.returncode == 0, install.stderr

    cwd = tmp_path / "elsewhere"
    cwd.mkdir()
    env = _env(OMP_NUM_THREADS="1")
    env.pop("PYTHONPATH", None)
    env.pop("LOOSESPEC_SITE_CONF", None)
    where = subprocess.run([python, "-c", "import loosespec_bench; print(loosespec_bench.__file__)"], cwd=cwd, env=env,
                           capture_output=True, text=True, timeout=120)
    assert where.stdout.strip().startswith(str(venv)), where.stdout + where.stderr  # the installed copy, not the checkout

    results = tmp_path / "results"
    run = subprocess.run(
        [python, "-m", "loosespec_bench", "experiment=smoke_tiny", f"paths.results_dir={results}", "progress=false", "threads=1"],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=300,
    )
    assert run.returncode == 0, run.stderr
    assert "not available" not in run.stderr  # no warning about a missing search path
    (summary,) = (results / "smoke_tiny").glob("*/summary.json")
    assert '"n_samples": 3' in summary.read_text()
    assert not (cwd / "results").exists() and not (cwd / "outputs").exists()
    helped = subprocess.run([venv / "bin" / "loosespec-bench", "--help"], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)
    assert helped.returncode == 0 and "smoke_tiny" in helped.stdout and "fly_main" in helped.stdout, helped.stderr


def test_make_clean_results_keeps_the_committed_results(tmp_path):
    """results/cpu is committed (.gitignore): clean-results deletes only ignored result folders."""
    clone = tmp_path / "repo"
    subprocess.run(["git", "clone", "-q", "--no-checkout", str(REPO), str(clone)], check=True, timeout=120)
    # Only what the rule needs: the Makefile (+ included .mk files), .gitignore, one committed result.
    committed = [p for p in subprocess.run(["git", "ls-files", "results/cpu"], cwd=REPO, capture_output=True,
                                           text=True, check=True).stdout.split() if p.endswith(".md")][:1]
    subprocess.run(["git", "checkout", "-q", "HEAD", "--", *committed], cwd=clone, check=True, timeout=120)
    for name in ("Makefile", "replicate.mk", "report.mk", "bench.mk", "vllm.mk", ".gitignore"):  # as in this checkout
        shutil.copy(REPO / name, clone / name)
    scratch = clone / "results" / "default" / "run1"
    scratch.mkdir(parents=True)
    (scratch / "samples.jsonl").write_text("{}\n")
    (clone / "results" / "_hydra").mkdir()
    proc = subprocess.run(["make", "-s", "clean-results"], cwd=clone, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert not (clone / "results" / "default").exists() and not (clone / "results" / "_hydra").exists()
    assert committed and all((clone / p).is_file() for p in committed)
