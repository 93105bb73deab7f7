"""The sandbox that runs model-written code: HumanEval's canonical solutions pass and empty
bodies fail, and hostile programs fail their sample without touching the machine."""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest

from loosespec_bench.errors import ConfigError
from loosespec_bench.tasks import Sample, sandbox
from loosespec_bench.tasks.humaneval import HumanEval
from loosespec_bench.tasks.sandbox import SWEEP_PREFIX, UID_RANGE, Limits, available_isolation, run_python

REPO = Path(__file__).resolve().parents[2]

LEVEL = available_isolation()
FAST = Limits(timeout_s=1.5, cpu_s=2)
# Levels to test hostile code under: the best available, and the uid fallback when root.
LEVELS = [LEVEL] + (["uid"] if LEVEL == "namespaces" else [])


def processes_of(uid: int) -> int:
    """Live (not zombie) processes running as `uid`."""
    out = subprocess.run(["ps", "-eo", "uid=,stat="], capture_output=True, text=True).stdout.split("\n")
    return sum(1 for line in out if line.split() and int(line.split()[0]) == uid and "Z" not in line.split()[1])


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
def test_fork_bomb_is_contained(level, monkeypatch):
    uid = UID_RANGE[0] + secrets.randbelow(UID_RANGE[1] - UID_RANGE[0])
    monkeypatch.setattr(sandbox, "_pick_uid", lambda: uid)
    bomb = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"
    r = run(bomb, level)
    assert not r.passed
    time.sleep(0.2)
    assert processes_of(uid) == 0  # every forked process was killed
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
    assert not run("raise SystemExit(0)\n", level).passed
    assert not run("import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\nos._exit(0)\n", level).passed
    assert not run("import atexit, os\natexit.register(lambda: os._exit(0))\nraise ValueError\n", level).passed
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


# --- the hostile cases of issue 14 ----------------------------------------------------------
def with_unguarded_child(code: str) -> str:
    """A program that runs `code`, then runs it again in a Python it starts through
    multiprocessing.util.spawnv_passfds (no audit hook there: the route that escaped the "uid"
    level before), and never passes."""
    return textwrap.dedent(f"""\
        import os, sys
        CODE = {code!r}
        exec(CODE)
        try:
            import multiprocessing.util as u
            pid = u.spawnv_passfds(os.fsencode(sys.executable), [sys.executable, "-I", "-S", "-c", CODE], [])
            os.waitpid(pid, 0)
            print("unguarded child ran", flush=True)
        except Exception as e:
            print("spawn blocked", type(e).__name__, e, flush=True)
        raise SystemExit(1)
        """)


def host_shm_keys() -> set[int]:
    return {int(line.split()[0]) for line in Path("/proc/sysvipc/shm").read_text().splitlines()[1:] if line.split()}


@pytest.mark.parametrize("level", LEVELS)
def test_ipc_and_files_do_not_outlive_the_run(level):
    key = 0x10000000 + secrets.randbelow(0x0FFFFFFF)
    name = f"loosespec-probe-{secrets.token_hex(4)}"
    places = ("/tmp", "/var/tmp", "/dev/shm", "/run/lock", "/run/shm", "/run")
    code = textwrap.dedent(f"""\
        import os
        try:
            import ctypes
            libc = ctypes.CDLL(None, use_errno=True)
            shmid = libc.shmget({key}, ctypes.c_size_t(3 << 30), 0o1666)  # IPC_CREAT | 0666, 3 GB
            print("shmget", shmid, "errno", ctypes.get_errno(), flush=True)
        except Exception as e:
            print("shm blocked", type(e).__name__, flush=True)
        for d in {places!r}:
            try:
                with open(os.path.join(d, {name!r}), "w") as f:
                    f.write("x")
                print("wrote", d, flush=True)
            except OSError as e:
                print("write blocked", d, type(e).__name__, flush=True)
        """)
    r = run(with_unguarded_child(code), level)
    assert not r.passed
    if level == "namespaces":  # it really made them, inside: they died with the namespaces
        assert "wrote /run/lock" in r.output and "shmget -1" not in r.output, r.output
    assert "unguarded child ran" in r.output and "wrote /tmp" in r.output, r.output  # made, then removed
    assert key not in host_shm_keys()
    left = [d for d in places if os.path.lexists(os.path.join(d, name))]
    if level == "process":  # README: as your own user, what it writes stays
        subprocess.run(["rm", "-f", *[os.path.join(d, name) for d in left]])
        return
    assert not left, (left, r.output)


@pytest.mark.parametrize("level", LEVELS)
def test_host_unix_sockets_are_unreachable(level):
    folder = tempfile.mkdtemp(dir="/run" if os.access("/run", os.W_OK) else None)
    os.chmod(folder, 0o755)
    path = os.path.join(folder, "host.sock")
    abstract = f"\0loosespec-probe-{secrets.token_hex(4)}"
    servers = []
    try:
        for addr in (path, abstract):
            s = socket.socket(socket.AF_UNIX)
            s.bind(addr)
            s.listen(1)
            s.settimeout(0.3)
            servers.append(s)
        os.chmod(path, 0o777)
        code = textwrap.dedent(f"""\
            import socket
            for addr in ({path!r}, {abstract!r}):
                try:
                    s = socket.socket(socket.AF_UNIX)
                    s.connect(addr)
                    print("CONNECTED", repr(addr), flush=True)
                except Exception as e:
                    print("blocked", type(e).__name__, flush=True)
            """)
        r = run(with_unguarded_child(code), level)
        assert not r.passed and "CONNECTED" not in r.output, r.output
        assert r.output.count("blocked") == 4 and "unguarded child ran" in r.output, r.output  # 2 tries x 2 processes
        for s in servers:
            with pytest.raises(socket.timeout):
                s.accept()
    finally:
        for s in servers:
            s.close()
        subprocess.run(["rm", "-rf", folder])


@pytest.mark.parametrize("level", LEVELS)
def test_no_network_from_an_unguarded_child(level):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    server.settimeout(0.5)
    port = server.getsockname()[1]
    code = textwrap.dedent(f"""\
        import socket
        try:
            socket.create_connection(("127.0.0.1", {port}), timeout=2)
            print("CONNECTED", flush=True)
        except Exception as e:
            print("blocked", type(e).__name__, flush=True)
        """)
    try:
        r = run(with_unguarded_child(code), level)
        assert not r.passed and "CONNECTED" not in r.output and r.output.count("blocked") == 2, r.output
        with pytest.raises(socket.timeout):
            server.accept()
    finally:
        server.close()


def test_data_folder_and_repository_are_hidden(data_dir):
    if LEVEL != "namespaces":
        pytest.skip("hiding world-readable folders needs the namespaces level (README: the uid level cannot)")
    code = textwrap.dedent(f"""\
        import os
        for p in ({str(data_dir)!r}, {str(data_dir / "humaneval")!r}, {str(REPO)!r}, "/work", "/home", "/root", "/var/run"):
            try:
                print(p, sorted(os.listdir(p)))
            except OSError as e:
                print(p, "hidden", type(e).__name__)
        """)
    code += textwrap.dedent(f"""\
        import sys
        for d in ("/", "/usr", "/etc", "/dev", {sys.base_prefix!r}):  # the private root is read-only
            try:
                open(os.path.join(d, "x"), "w")
                print("WROTE", d)
            except OSError as e:
                print("read-only", d, type(e).__name__)
        """)
    r = run(code, LEVEL)
    assert "HumanEval.jsonl.gz" not in r.output and "pyproject.toml" not in r.output, r.output
    assert f"{data_dir} hidden" in r.output and f"{REPO} hidden" in r.output, r.output
    assert "WROTE" not in r.output and r.output.count("read-only") == 5, r.output


FORGER = textwrap.dedent("""\
    import gc, os, sys
    seen = set()
    def show(s):
        if isinstance(s, (str, bytes)) and s not in seen:
            seen.add(s)
            print(s if isinstance(s, str) else s.decode("latin-1"))
    for path in [__file__, *sys.argv, "/sandbox/runner.py", "runner.py", "/proc/self/cmdline", "/proc/self/environ"]:
        try:
            show(open(path, "rb").read())
        except OSError:
            pass
    f = sys._getframe()
    while f is not None:  # every constant of every code object on the stack (the runner's too)
        for c in f.f_code.co_consts:
            show(c)
        for v in list(f.f_globals.values()) + list(f.f_locals.values()):
            show(v)
        f = f.f_back
    for o in gc.get_objects():
        if hasattr(o, "co_consts"):
            for c in o.co_consts:
                show(c)
    sys.stdout.flush()
    os._exit(0)
    """)


@pytest.mark.parametrize("level", LEVELS)
def test_a_pass_cannot_be_forged_by_replaying_what_the_program_can_see(level, humaneval):
    r = run(FORGER, level)
    assert not r.passed and r.returncode == 0
    # It printed everything it could find (the runner's file, its constants, every code
    # object's), yet not its own source: that is in no file and no object of the sandbox.
    assert "nonce" in r.output or "_read" in r.output, r.output
    assert "sys._getframe" not in r.output, r.output
    sample = humaneval.load_all()[0]
    completion = textwrap.indent(FORGER, "    ")
    res = run(humaneval.program(sample, completion), level)
    assert not res.passed and res.returncode == 0


# The probe's `read-own-tests-forge`: a completion that parses `assert candidate(...) == X` out of
# the program file it runs in and returns the expected value. It failed before the source came
# through a closed memfd (it read /sandbox/main.py, or main.py in its working folder).
OWN_TESTS_FORGER = textwrap.dedent("""\
    import glob, os, re
    def candidate(x):
        paths = [globals().get("__file__"), "/sandbox/main.py", "main.py", *glob.glob("/proc/self/fd/*"),
                 *glob.glob("/tmp/*/main.py"), *glob.glob("/tmp/**/main.py", recursive=True)]
        for path in paths:
            try:
                text = open(path, errors="replace").read()
            except (OSError, TypeError):
                continue
            m = re.search(r"assert candidate\\(" + re.escape(repr(x)) + r"\\) == (\\d+)", text)
            if m:
                return int(m.group(1))
        return None
    """)


@pytest.mark.parametrize("level", LEVELS)
def test_a_completion_cannot_read_its_own_tests(level):
    program = OWN_TESTS_FORGER + "\nassert candidate(3) == 9417\nassert candidate(4) == 2290\n"
    r = run(program, level)
    assert not r.passed, r.output
    assert "AssertionError" in r.output, r.output  # it ran, found nothing, and the asserts failed


# The probe's `vsock-diag`: socket(AF_VSOCK) reached the hypervisor from the namespaces level,
# whose network namespace does not cover vsock. Every family but AF_UNIX is refused (EPERM) at
# every level (the uid and process levels refuse AF_UNIX too: the host's sockets are visible there).
SOCKET_FAMILIES = textwrap.dedent("""\
    import socket
    opened = []
    for name, fam, kind in (("AF_INET", 2, 1), ("AF_INET6", 10, 1), ("AF_VSOCK", 40, 1), ("AF_NETLINK", 16, 3),
                            ("AF_PACKET", 17, 3), ("AF_BLUETOOTH", 31, 1), ("AF_ALG", 38, 5)):
        try:
            socket.socket(fam, kind).close()
            opened.append(name)
        except PermissionError:
            pass
        except OSError as e:  # e.g. EAFNOSUPPORT: the filter did not stop it, the kernel did
            opened.append(name + " reached the kernel: " + type(e).__name__)
    print("OPENED", opened)
    assert not opened, opened
    try:
        socket.socket(40, 1).connect((2, 1024))
    except PermissionError:
        print("vsock refused")
    """)


@pytest.mark.parametrize("level", LEVELS)
def test_every_socket_family_but_unix_is_refused(level):
    r = run(SOCKET_FAMILIES, level)
    assert r.passed, r.output
    assert "vsock refused" in r.output, r.output


def test_the_namespaces_filter_allows_unix_sockets_only():
    """The BPF program itself (architecture-independent reading of its layout): socket() is
    in the namespaces level's filter, compared against AF_UNIX."""
    from loosespec_bench.tasks import _sandbox_supervisor as sup

    prog = sup.seccomp_program("x86_64", only=(*sup.NAMESPACES_BLOCKED, "socket"), unix_sockets=True)
    words = [prog[i:i + 8] for i in range(0, len(prog), 8)]
    import struct

    ins = [struct.unpack("=HBBI", w) for w in words]
    assert (0x20, 0, 0, sup.SECCOMP_DATA_ARG0) in ins  # loads the family argument
    assert any(code == 0x15 and k == sup.AF_UNIX for code, _, _, k in ins)
    assert any(code == 0x15 and k == 41 for code, _, _, k in ins)  # socket's number on x86_64


def sandbox_uid_of(harness_pid: int) -> int | None:
    for entry in Path(tempfile.gettempdir()).iterdir():
        if entry.name.startswith(f"{SWEEP_PREFIX}{harness_pid}-"):
            return int(entry.name[len(SWEEP_PREFIX):].split("-")[1])
    return None


@pytest.mark.parametrize("level", LEVELS)
def test_kill_9_of_the_harness_kills_the_program(level):
    if level == "process":
        pytest.skip("needs root (a sandbox uid to count processes of)")
    program = "import os, time\nif os.fork() == 0:\n    os.setsid()\n    time.sleep(120)\nprint('started', flush=True)\ntime.sleep(120)\n"
    script = (
        "from loosespec_bench.tasks.sandbox import Limits, run_python\n"
        f"run_python({program!r}, limits=Limits(timeout_s=120, cpu_s=5), isolation={level!r})\n"
    )
    harness = subprocess.Popen([sys.executable, "-c", script], cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        uid = None
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and (uid is None or processes_of(uid) < 2):
            uid = uid or sandbox_uid_of(harness.pid)
            time.sleep(0.1)
        assert uid is not None and processes_of(uid) >= 2  # the program and its setsid() child
    finally:
        harness.kill()
        harness.wait()
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and processes_of(uid):
        time.sleep(0.05)
    assert processes_of(uid) == 0
    # The folder the dead harness left is swept by the next sandbox start.
    assert sandbox_uid_of(harness.pid) == uid
    assert run("pass", level).passed
    assert sandbox_uid_of(harness.pid) is None


def test_stale_sandbox_folders_are_swept():
    if os.geteuid() != 0:
        pytest.skip("needs root")
    dead = subprocess.Popen(["true"])
    dead.wait()
    uid = UID_RANGE[0] + secrets.randbelow(UID_RANGE[1] - UID_RANGE[0])
    folder = Path(tempfile.mkdtemp(prefix=f"{SWEEP_PREFIX}{dead.pid}-{uid}-"))
    (folder / "output.txt").write_text("left behind")
    live = Path(tempfile.mkdtemp(prefix=f"{SWEEP_PREFIX}{os.getpid()}-{uid}-"))  # our own: kept
    leftover = Path("/dev/shm") / f"loosespec-probe-{secrets.token_hex(4)}"
    leftover.write_text("x")
    os.chown(leftover, uid, uid)
    stray = subprocess.Popen(["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--", "sleep", "60"],
                             start_new_session=True)
    try:
        deadline = time.monotonic() + 10
        while processes_of(uid) < 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert processes_of(uid) == 1
        assert run("pass", LEVEL).passed
        assert not folder.exists() and live.exists() and not leftover.exists()
        stray.wait(timeout=5)
        assert processes_of(uid) == 0
    finally:
        stray.kill()
        subprocess.run(["rm", "-rf", str(folder), str(live), str(leftover)])
