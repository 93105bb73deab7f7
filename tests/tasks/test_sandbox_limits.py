"""Issue 41's sandbox cases: limits that hold below the namespaces. Each test is a hostile
completion that tries it and is refused: user namespaces (its own tmpfs past tmp_mb), memfd
(shared memory RLIMIT_AS does not count), userfaultfd, perf_event_open; the tmpfs cap in total;
/proc/1/cmdline without host paths; MBPP+'s expected values and checker out of reach."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from loosespec_bench.tasks.sandbox import Limits, available_isolation, run_python

from .test_sandbox import LEVEL, LEVELS

REPO = Path(__file__).resolve().parents[2]
LIMITS = Limits(timeout_s=10, cpu_s=5, memory_mb=256, tmp_mb=8)

# Each attempt prints "refused NAME" or "ALLOWED NAME"; run by the program itself and again by a
# Python it starts without the runner's audit hook (at the uid and process levels the hook stops
# ctypes first: the seccomp filter below it is what must hold).
ATTEMPTS = textwrap.dedent("""\
    import ctypes, os, platform
    libc = ctypes.CDLL(None, use_errno=True)
    X86 = platform.machine() == "x86_64"
    NR = dict(clone=56 if X86 else 220, clone3=435, setns=308 if X86 else 268, userfaultfd=323 if X86 else 282,
              perf_event_open=298 if X86 else 241, bpf=321 if X86 else 280)
    CLONE_NEWUSER, CLONE_NEWNS, SIGCHLD = 0x10000000, 0x20000, 17
    def report(name, r):
        err = ctypes.get_errno()
        print(("refused " if r == -1 and err in (1, 38) else "ALLOWED ") + name, r, err, flush=True)
        if r == 0 and name.startswith("clone"):
            os._exit(0)  # the child of an allowed clone
    report("unshare-user-mount", libc.unshare(CLONE_NEWUSER | CLONE_NEWNS))
    report("clone-newuser", libc.syscall(NR["clone"], CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0))
    report("clone3", libc.syscall(NR["clone3"], ctypes.create_string_buffer(88), 88))
    report("setns", libc.syscall(NR["setns"], 0, 0))
    report("userfaultfd", libc.syscall(NR["userfaultfd"], 0))
    report("perf_event_open", libc.syscall(NR["perf_event_open"], ctypes.create_string_buffer(128), 0, -1, -1, 0))
    report("bpf", libc.syscall(NR["bpf"], 0, ctypes.create_string_buffer(128), 128))
    # 24 memfds of 16 MB under a 64 MB address-space limit raised the host's shared memory by 384 MB.
    try:
        fds = []
        for _ in range(24):
            fd = os.memfd_create("fill")
            os.ftruncate(fd, 16 << 20)
            os.pwrite(fd, b"x", (16 << 20) - 1)
            fds.append(fd)
        print("ALLOWED memfd", len(fds), flush=True)
    except PermissionError:
        print("refused memfd", flush=True)
    """)
N_ATTEMPTS = 8


def program(level: str) -> str:
    """ATTEMPTS in the program (its exceptions printed, e.g. the audit hook's) and in an
    unguarded child Python."""
    return textwrap.dedent(f"""\
        import os, sys
        CODE = {ATTEMPTS!r}
        try:
            exec(CODE)
        except Exception as e:
            print("stopped before the kernel:", type(e).__name__, e, flush=True)
        import multiprocessing.util as u
        pid = u.spawnv_passfds(os.fsencode(sys.executable), [sys.executable, "-I", "-S", "-c", CODE], [])
        os.waitpid(pid, 0)
        # threads and fork still work under the filter (clone3 fails with ENOSYS, the C library falls back to clone)
        import threading
        t = threading.Thread(target=print, args=("thread ran",))
        t.start(); t.join()
        child = os.fork()
        if child == 0:
            os._exit(7)
        assert os.waitstatus_to_exitcode(os.waitpid(child, 0)[1]) == 7
        print("fork ran", flush=True)
        """)


@pytest.mark.parametrize("level", LEVELS)
def test_namespaces_memfd_userfaultfd_perf_and_bpf_are_refused(level):
    r = run_python(program(level), limits=LIMITS, isolation=level, allow_same_user=True)
    assert r.passed, r.output
    assert "ALLOWED" not in r.output, r.output
    assert r.output.count("refused ") >= N_ATTEMPTS, r.output  # the unguarded child's attempts at least
    assert "thread ran" in r.output and "fork ran" in r.output, r.output


def test_the_filter_program_checks_clone_flags_and_answers_clone3_enosys():
    import struct

    from loosespec_bench.tasks import _sandbox_supervisor as sup

    prog = sup.seccomp_program("x86_64", only=(), program=True)
    ins = [struct.unpack("=HBBI", prog[i:i + 8]) for i in range(0, len(prog), 8)]
    assert (0x45, ins[[i for i, x in enumerate(ins) if x[0] == 0x45][0]][1], 0, sup.CLONE_NEW_FLAGS) in ins  # jset on flags
    assert (0x06, 0, 0, sup.SECCOMP_RET_ERRNO | sup.ENOSYS) in ins
    for name in sup.PROGRAM_BLOCKED:
        assert any(code == 0x15 and k == sup.PROGRAM_SYSCALLS["x86_64"][name] for code, _, _, k in ins), name
    assert "socket" not in str(ins) and not any(k == 41 for code, _, _, k in ins if code == 0x15)  # only=(): no socket rule


needs_namespaces = pytest.mark.skipif(LEVEL != "namespaces", reason="the namespaces level (root with unshare) only")


@needs_namespaces
def test_tmpfs_is_capped_in_total():
    """Four writable places, one tmp_mb between them (was tmp_mb each)."""
    src = textwrap.dedent("""\
        total = 0
        for d in ("/tmp/work", "/var/tmp", "/dev/shm", "/run/lock", "/run/shm"):
            try:
                with open(d + "/fill", "wb") as f:
                    for _ in range(64):
                        f.write(b"x" * (1 << 20)); f.flush(); total += 1
            except OSError:
                pass
        print("MB", total)
        """)
    r = run_python(src, limits=LIMITS, isolation="namespaces")
    assert r.passed, r.output
    written = int(r.output.split("MB")[-1].split()[0])
    assert 1 <= written <= LIMITS.tmp_mb, r.output


@needs_namespaces
def test_proc_1_cmdline_names_no_host_path():
    src = textwrap.dedent(f"""\
        text = open("/proc/1/cmdline", "rb").read().replace(b"\\0", b" ").decode()
        print("CMDLINE", text)
        for secret in ({str(REPO)!r}, {sys.prefix!r}, "loosespec", "sandbox-"):
            assert secret not in text.replace("sandbox-init", ""), (secret, text)
        """)
    r = run_python(src, limits=LIMITS, isolation="namespaces")
    assert r.passed, r.output


# -- MBPP+: the differential check out of the program's reach --------------------------------
@pytest.fixture(scope="module")
def mbpp(data_dir):
    from loosespec_bench.tasks.mbpp_plus import MBPPPlus

    task = MBPPPlus(data_dir=str(data_dir), sandbox={"allow_same_user": True, "timeout_s": 60, "cpu_s": 60, "memory_mb": 4096})
    return task, {s.id: s for s in task.load_all()}


# What beat the old program: the caller's globals held the expected outputs and the checker.
FRAME_THIEF = textwrap.dedent("""\
    import sys, gc
    def similar_elements(a, b):
        g = sys._getframe(1).f_globals
        g["_same"] = lambda *args: True  # replace the checker
        for obj in gc.get_objects():  # anything that looks like the expected outputs
            if isinstance(obj, list) and obj and all(isinstance(x, tuple) for x in obj) and "_expected" in g:
                return g["_expected"][0]
        return g.get("_exp", g.get("_expected", [None])[0] if "_expected" in g else None)
    ```""")


def test_mbpp_plus_program_holds_neither_expected_values_nor_checker(mbpp):
    task, samples = mbpp
    s = samples["Mbpp/2"]
    row = task._local_row(s.reference["task_id"])
    base, plus = task.programs(s, "def similar_elements(a, b):\n    return ()\n```")
    for prog in (base, plus):
        assert row["canonical_solution"].strip() not in prog
        assert "_same" not in prog and "_expected" not in prog and "isclose" not in prog


def test_mbpp_plus_a_completion_cannot_reach_the_check(mbpp):
    task, samples = mbpp
    s = samples["Mbpp/2"]
    score = task.score(s, FRAME_THIEF)
    assert not score["correct"] and not score["base_correct"], score
    assert score["status"] == "failed"
    good = task.score(s, task.canonical_completion(s))
    assert good["correct"], good["output"]
