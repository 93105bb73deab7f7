"""The sandbox that runs model-written code: HumanEval's canonical solutions pass and empty
bodies fail, and hostile programs fail their sample without touching the machine."""

from __future__ import annotations

import os
import socket
import subprocess
import time

import pytest

from loosespec_bench.errors import ConfigError
from loosespec_bench.tasks import Sample
from loosespec_bench.tasks.humaneval import HumanEval
from loosespec_bench.tasks.sandbox import UID_RANGE, Limits, available_isolation, run_python

LEVEL = available_isolation()
FAST = Limits(timeout_s=1.5, cpu_s=2)
# Levels to test hostile code under: the best available, and the uid fallback when root.
LEVELS = [LEVEL] + (["uid"] if LEVEL == "namespaces" else [])


def sandbox_processes() -> int:
    """Live (not zombie) processes running as a sandbox uid."""
    out = subprocess.run(["ps", "-eo", "uid=,stat="], capture_output=True, text=True).stdout.split("\n")
    return sum(1 for line in out if line.split() and UID_RANGE[0] <= int(line.split()[0]) < UID_RANGE[1] and "Z" not in line.split()[1])


def run(source: str, level: str, **kwargs):
    return run_python(source, limits=FAST, isolation=level, allow_same_user=True, **kwargs)


@pytest.fixture(scope="module")
def humaneval(data_dir):
    return HumanEval(data_dir=str(data_dir), sandbox={"timeout_s": 10})


def test_humaneval_canonical_solutions_pass_and_empty_bodies_fail(humaneval):
    samples = humaneval.load_all()
    assert len(samples) == 164
    start = time.monotonic()
    canonical = humaneval.score_batch(samples, [[s.meta["canonical_solution"]] for s in samples])
    failed = [(s.id, r["status"], r["output"][-300:]) for s, r in zip(samples, canonical) if not r["correct"]]
    assert not failed, failed[:3]
    empty = humaneval.score_batch(samples, [["    pass\n"] for _ in samples])
    assert sum(r["correct"] for r in empty) == 0
    assert time.monotonic() - start < 60
    assert {r["isolation"] for r in canonical} == {LEVEL}


def test_instruct_completion_is_cut_at_the_code_fence(humaneval):
    sample = humaneval.load_all()[0]
    completion = sample.meta["canonical_solution"] + "```\n\nThis function checks every pair.\n"
    assert humaneval.score(sample, completion)["correct"]


@pytest.mark.parametrize("level", LEVELS)
def test_infinite_loop_times_out(level):
    start = time.monotonic()
    r = run("while True:\n    pass\n", level)
    assert r.status == "timeout" and not r.passed
    assert time.monotonic() - start < FAST.timeout_s + 3


@pytest.mark.parametrize("level", LEVELS)
def test_fork_bomb_is_contained(level):
    bomb = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"
    r = run(bomb, level)
    assert not r.passed
    time.sleep(0.2)
    assert sandbox_processes() == 0  # every forked process was killed
    assert run("print('still fine')", level).passed


@pytest.mark.parametrize("level", LEVELS)
def test_huge_allocation_fails(level):
    r = run("x = bytearray(50 * 10**9)\nprint(len(x))\n", level)
    assert r.status == "failed" and "MemoryError" in r.output


@pytest.mark.parametrize("level", LEVELS)
def test_cannot_delete_or_write_files_outside(level, tmp_path):
    if level == "process":
        pytest.skip("the process level runs as the harness's user: it cannot protect that user's files")
    outside = tmp_path / "outside"
    outside.mkdir()
    canary = outside / "canary.txt"
    canary.write_text("keep me")
    # World-readable, owned by root: only the uid (and the mount namespace) protect it.
    os.chmod(tmp_path, 0o755)
    os.chmod(outside, 0o755)
    hostile = (
        "import os, shutil\n"
        f"for f in (lambda: os.remove({str(canary)!r}), lambda: shutil.rmtree({str(outside)!r}),\n"
        f"          lambda: open({str(outside / 'new.txt')!r}, 'w').write('x'), lambda: os.remove(os.path.expanduser('~root/.bashrc'))):\n"
        "    try:\n"
        "        f()\n"
        "        print('ESCAPED')\n"
        "    except OSError as e:\n"
        "        print('blocked', type(e).__name__)\n"
        "raise SystemExit(1)\n"
    )
    r = run(hostile, level)
    assert not r.passed and "ESCAPED" not in r.output and r.output.count("blocked") == 4
    assert canary.read_text() == "keep me" and not (outside / "new.txt").exists()


def test_hidden_paths_are_invisible(tmp_path):
    if LEVEL != "namespaces":
        pytest.skip("hiding paths needs the namespaces level")
    results = tmp_path / "results"
    results.mkdir()
    (results / "samples.jsonl").write_text("{}\n")
    os.chmod(tmp_path, 0o755)
    os.chmod(results, 0o755)
    r = run(f"import os\nprint(os.listdir({str(results)!r}))\n", LEVEL, hide_paths=[results])
    assert not r.passed and "samples.jsonl" not in r.output
    assert (results / "samples.jsonl").read_text() == "{}\n"


@pytest.mark.parametrize("level", LEVELS)
def test_no_network(level):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    server.settimeout(0.5)
    port = server.getsockname()[1]
    try:
        r = run(f"import socket\ns = socket.create_connection(('127.0.0.1', {port}), timeout=2)\nprint('CONNECTED')\n", level)
        assert not r.passed and "CONNECTED" not in r.output
        with pytest.raises(socket.timeout):
            server.accept()  # nothing reached the harness's listener
    finally:
        server.close()


@pytest.mark.parametrize("level", LEVELS)
def test_early_exit_is_not_a_pass(level):
    assert not run("import sys\nsys.exit(0)\n", level).passed
    assert not run("import os\nos._exit(0)\n", level).passed
    assert run("x = 1\n", level).passed


def test_environment_is_clean(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    r = run("import os\nprint(sorted(os.environ))\nprint(os.getcwd() == os.environ['HOME'])\n", LEVEL)
    assert r.passed and "OPENAI_API_KEY" not in r.output and "True" in r.output


def test_hostile_completion_fails_its_humaneval_sample(humaneval):
    humaneval.limits = FAST
    sample = humaneval.load_all()[0]
    assert humaneval.score(sample, "    while True:\n        pass\n")["status"] == "timeout"
    assert humaneval.score(sample, "    import os\n    os.fork(); os.fork()\n    return True\n")["correct"] is False
    good = humaneval.score(sample, sample.meta["canonical_solution"])
    assert good["correct"], good["output"]


def test_process_level_needs_consent():
    with pytest.raises(ConfigError, match="allow_same_user"):
        run_python("print(1)", isolation="process")


def test_sample_reference_carries_the_tests(humaneval):
    s: Sample = humaneval.load_all()[5]
    program = humaneval.program(s, "    return 1\n")
    assert program.startswith(s.reference["prompt"]) and program.rstrip().endswith(f"check({s.reference['entry_point']})")
