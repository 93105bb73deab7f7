"""Shared test fixtures: composed configs, tiny models, the local data directory."""

from __future__ import annotations

import logging
import os
import resource
from pathlib import Path

import pytest
import torch
from hydra import compose, initialize_config_dir
from omegaconf import DictConfig

from loosespec_bench.safe_files import append_text
from loosespec_bench.settings.config import CONF_DIR
from loosespec_bench.models.tiny import tiny_model, tiny_tokenizer

from .helpers import tiny_near_copy

REPO = Path(__file__).resolve().parent.parent

# Tiny models are latency-bound: one thread is ~100x faster than two oversubscribed ones on a
# loaded 2-core machine. Subprocesses (CLI tests) inherit the variable.
os.environ.setdefault("OMP_NUM_THREADS", "1")
torch.set_num_threads(1)


def shared_data_dir() -> Path:
    """The local data copies: $LOOSESPEC_DATA_DIR, else ../shared/datasets beside the repo."""
    env = os.environ.get("LOOSESPEC_DATA_DIR")
    return Path(env) if env else REPO.parent / "shared" / "datasets"


@pytest.fixture(scope="session")
def data_dir() -> Path:
    path = shared_data_dir()
    if not (path / "mgsm").is_dir():
        pytest.fail(f"local data sets not found at {path}; set LOOSESPEC_DATA_DIR")
    return path


def compose_config(overrides: list[str] | None = None, results_dir: Path | str | None = None) -> DictConfig:
    """The real config, composed as the CLI would, with test-friendly overrides."""
    base = [f"paths.data_dir={shared_data_dir()}", "progress=false"]
    if results_dir is not None:
        base.append(f"paths.results_dir={results_dir}")
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose(config_name="config", overrides=base + list(overrides or []))


@pytest.fixture(scope="session")
def tiny_pair():
    """(target, draft, tokenizer): tiny:0 target, tiny:1 draft, float32."""
    from loosespec_bench.models.tiny import tiny_model, tiny_tokenizer

    return tiny_model(0), tiny_model(1), tiny_tokenizer()


@pytest.fixture(scope="module")
def models():
    """Rule tests' tiny pair: target, a near copy of it as the draft (so drafts mostly match,
    with real mismatches), and the tiny tokenizer."""
    return tiny_model(0), tiny_near_copy(0), tiny_tokenizer()


@pytest.fixture(autouse=True)
def _no_logging_to_closed_streams():
    """A library set up in-process (Hydra's job logging, wandb) may leave a root handler bound to
    the captured stderr of the test that ran it; once pytest closes that stream, every later
    warning prints '--- Logging error ---' and a traceback into whichever test logs next."""
    yield
    for h in list(logging.root.handlers):
        stream = getattr(h, "stream", None)
        if isinstance(h, logging.StreamHandler) and getattr(stream, "closed", False):
            logging.root.removeHandler(h)


def pytest_configure(config: pytest.Config) -> None:
    # Declared here, not in pyproject's marker list: only tests/test_slurm.py and
    # scripts/run_tests.sh (which runs these in their own process) use it.
    config.addinivalue_line(
        "markers", "slurm_side: a slurm test whose jobs run on the local cluster's partition side (n3, n4), never "
        "on cpu (n1, n2) where the node faults strike: make test runs these in a second slurm process beside them")


def _cpu_s(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):
    """LOOSESPEC_TEST_CPU=FILE appends one line per test: its node id, then the CPU seconds (user +
    sys) of this process and of the child processes it waited for (the CLI tests' subprocesses),
    setup and teardown included (a module fixture counts in its module's first test). On a
    shared machine wall times measure the neighbours; CPU time measures the test."""
    out = os.environ.get("LOOSESPEC_TEST_CPU")
    if not out:
        yield
        return
    own, kids = _cpu_s(resource.RUSAGE_SELF), _cpu_s(resource.RUSAGE_CHILDREN)
    yield
    own, kids = _cpu_s(resource.RUSAGE_SELF) - own, _cpu_s(resource.RUSAGE_CHILDREN) - kids
    # One short line per write with O_APPEND: the lines of two xdist workers do not interleave.
    append_text(out, f"{item.nodeid}\t{own:.2f}\t{kids:.2f}\n")
