"""Run untrusted Python (model-written code, e.g. HumanEval completions) in a contained child.

The harness never exec()s generated code in its own process. Each program runs in a fresh
`python -I -S` child under rlimits (address space, CPU seconds, processes, file size), with a
minimal environment (no API keys or tokens from the harness's environment reach it), started
by a trusted supervisor (`_sandbox_supervisor.py`, one per program, root at the two root
levels): its child gets PR_SET_PDEATHSIG=SIGKILL (re-checking getppid() after the prctl), and
the supervisor itself polls for the harness's death (a `kill -9` of the harness), for the
harness's timeout request and for its own deadline, then kills every process of the sandbox
uid. Every program gets a fresh uid from UID_RANGE; its temp folder on the host is named
`loosespec-sandbox-<harness pid>-<uid>-*`, so each sandbox start sweeps the folders (and kills
the uids, and removes the uid's files) of harnesses that no longer live (`sweep_stale`).

Isolation levels (`isolation="auto"` takes the strongest the machine allows; results record it;
docs/sandbox.md has the table of what each guarantees):

- "namespaces" (root, util-linux `unshare`; mounts and pivot_root by syscall): new network,
  PID, IPC, UTS and mount namespaces. The program's root is a private read-only tmpfs
  (pivot_root, the host's tree detached): read-only binds of /usr and the /bin, /lib...
  folders and of the harness's Python installation, a few copied /etc files, /dev with
  null/zero/full/random/urandom, its own /proc, and one fresh tmpfs of tmp_mb bound at /tmp,
  /var/tmp, /dev/shm and /run (with /run/lock): the cap holds in total. PID 1 blanks its
  command line (/proc/1/cmdline names no host path). The repository, the data sets, the results,
  /home, /root and every host socket file are not in it; abstract Unix sockets and 127.0.0.1
  belong to the (empty) network namespace; SysV IPC objects die with the IPC namespace; kernel
  keyrings (not namespaced) are refused by seccomp. The program runs as the fresh unprivileged
  uid (no groups, no capabilities, no_new_privs) under the namespace's init (root, out of its
  reach, `_sandbox_supervisor.ns_init`), which also enforces the wall clock should the harness
  miss it.
- "uid" (root, no usable namespaces, e.g. a container without CAP_SYS_ADMIN): the fresh uid and
  rlimits, plus a seccomp filter installed before exec and inherited by every descendant however
  started (fork, `multiprocessing.util.spawnv_passfds`, ctypes): socket(), System V IPC, POSIX
  message queues, keyrings and io_uring fail with EPERM, so no network (127.0.0.1 included) and
  no host Unix socket; afterwards every process of the uid is killed and what the uid left at
  the top of the world-writable folders (/tmp, /var/tmp, /dev/shm, /run/lock...) is deleted.
  World-readable files (the repository, the data sets) stay readable, and the program sees the
  host's file tree. An audit hook (subprocess, exec, ctypes raise) is a second line only.
- "process" (not root): rlimits, seccomp filter, timeout and the audit hook, as the harness's own
  user: such code could delete or read that user's files and signal their processes. Refused
  unless `allow_same_user=True`.

At every level the program itself also runs under a second seccomp filter, installed just before
it starts (`_sandbox_supervisor.PROGRAM_BLOCKED`): no new namespaces (unshare, setns, clone with a
CLONE_NEW* flag; clone3 answers ENOSYS so the C library falls back to clone), no memfd_create or
memfd_secret (shared memory the address-space limit does not count), userfaultfd,
perf_event_open or bpf. docs/sandbox.md has the threat model and each case.

The seccomp filter exists for x86_64 and aarch64; elsewhere the "uid" and "process" levels
refuse to start (SandboxError) rather than run without it (the "namespaces" level runs, without
its keyring filter).

Memory is capped per process, so the worst case is max_procs x memory_mb (8 GiB by default).

Verdict: the program's source is run by a trusted runner (`_RUNNER`) with runpy. Only when it
returns normally does the runner read a per-run nonce from fd 3 (a pipe the harness filled and
closed; the nonce is in no file, argument, environment variable or code object of the sandbox)
and copy it to fd 4 (a pipe the harness reads), then `os._exit(0)`. The program passes when it
exited 0 and fd 4 holds exactly that nonce. So an exception, SystemExit (even 0), `os._exit`,
a signal or a timeout before the end of the tests fails, and nothing the program can find in
its source, its code constants, its memory or /proc forges a pass: printing does not reach fd 4.
Not guaranteed: a completion written against this harness can itself read fd 3 and write fd 4,
or skip the asserts (sys.settrace, objects equal to everything); code and tests share one
interpreter, so that cannot be told apart from a real pass.
"""

from __future__ import annotations

import functools
import os
import re
import resource
import secrets
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

from ..errors import ConfigError
from ..params import boolean, choice, integer, list_of, optional, real, string
from . import _sandbox_supervisor as _sup

ISOLATION_LEVELS = ("namespaces", "uid", "process")
# Fresh uids for sandboxed programs: far above any real account, one per run, so that the
# per-user process limit of one program never counts another's processes.
UID_RANGE = (1_500_000, 2_500_000)
OUTPUT_TAIL = 4000  # characters of the program's output kept in a result


@dataclass(frozen=True)
class Limits:
    timeout_s: float = 10.0  # wall clock, then the whole process tree is killed
    cpu_s: int = 10  # RLIMIT_CPU, per process
    memory_mb: int = 1024  # RLIMIT_AS, per process
    max_procs: int = 8  # RLIMIT_NPROC for the program's uid (threads count too): stops fork bombs
    file_mb: int = 16  # RLIMIT_FSIZE: largest file it may write (its output included)
    tmp_mb: int = 64  # size of each fresh tmpfs (namespaces level)


# dataset.sandbox's keys and ranges (the code tasks' SETTINGS; the pre-check reads them). The
# floors are what a trivial program needs: below them every program fails, which would read
# as pass@1 = 0 rather than as a broken setting.
MIN_MEMORY_MB = 64  # python -I -S maps ~20 MB; the dynamic loader fails far below this
MIN_TIMEOUT_S = 0.5  # starting the supervisor, the namespaces and the interpreter takes ~0.1 s
SANDBOX_SETTINGS = {
    "isolation": choice("auto", *ISOLATION_LEVELS),
    "allow_same_user": boolean,
    "timeout_s": real(MIN_TIMEOUT_S),
    "cpu_s": integer(1),
    "memory_mb": integer(MIN_MEMORY_MB),
    "max_procs": integer(1),
    "file_mb": integer(1),
    "tmp_mb": integer(1),
    "workers": optional(integer(1)),
    "hide_paths": optional(list_of(string, nonempty=False)),
}


@dataclass
class Result:
    status: str  # "passed" | "failed" | "timeout"
    returncode: int | None
    output: str  # tail of stdout + stderr
    duration_s: float
    isolation: str

    @property
    def passed(self) -> bool:
        return self.status == "passed"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# --- what the machine allows ---------------------------------------------------------------
def _run_quiet(cmd: list[str], timeout: float = 10.0) -> bool:
    try:
        return subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


@functools.lru_cache(maxsize=None)
def available_isolation() -> str:
    """The strongest level this machine supports (probed once per process)."""
    if os.geteuid() != 0:
        return "process"
    if not shutil.which("setpriv"):
        return "process"
    if shutil.which("unshare"):
        try:  # the real thing, once: a trivial program must pass
            if run_python("pass", isolation="namespaces", limits=Limits(timeout_s=30, cpu_s=10)).passed:
                return "namespaces"
        except (SandboxError, OSError):
            pass
    return "uid"


def _ns_prefix() -> list[str]:
    # --fork + --kill-child: the namespace's init dies with unshare, and the kernel then kills
    # every process in the PID namespace (and the IPC namespace, with its objects, goes too).
    return ["unshare", "--net", "--pid", "--ipc", "--uts", "--mount", "--fork", "--kill-child", "--propagation", "private", "--"]


def _world_usable(path: str) -> bool:
    """Whether an unprivileged uid can reach and execute `path` (every directory o+x)."""
    p = Path(path).resolve()
    for parent in [*reversed(p.parents)]:
        if not parent.stat().st_mode & stat.S_IXOTH:
            return False
    return bool(p.stat().st_mode & stat.S_IXOTH)


def _host_interpreter() -> str:
    """A Python an unprivileged uid can run (levels without a mount namespace)."""
    for cand in (os.path.realpath(getattr(sys, "_base_executable", sys.executable)), sys.executable, "/usr/bin/python3"):
        if cand and os.path.exists(cand) and _world_usable(cand):
            return cand
    raise ConfigError("sandbox: no Python interpreter that an unprivileged user can execute (tried the harness's and /usr/bin/python3)")


# --- the child's side ----------------------------------------------------------------------
def _prlimit_args(limits: Limits) -> list[str]:
    """The same limits as `prlimit` options: set by a program the child execs, so the harness
    (which runs several sandboxes from threads) needs no preexec_fn, unsafe with threads."""
    mb = 1024 * 1024
    return [
        "prlimit",
        f"--as={limits.memory_mb * mb}",
        f"--cpu={limits.cpu_s}:{limits.cpu_s + 1}",
        f"--nproc={limits.max_procs}",
        f"--fsize={limits.file_mb * mb}",
        "--core=0",
        "--",
    ]


def _set_limits(limits: Limits) -> None:
    mb = 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (limits.memory_mb * mb, limits.memory_mb * mb))
    resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_s, limits.cpu_s + 1))
    resource.setrlimit(resource.RLIMIT_NPROC, (limits.max_procs, limits.max_procs))
    resource.setrlimit(resource.RLIMIT_FSIZE, (limits.file_mb * mb, limits.file_mb * mb))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


# The trusted runner: the first code in the sandboxed interpreter. It runs the program (prompt,
# completion, tests) with runpy; only if that returns normally does it read the per-run nonce
# from the pipe NONCE_FD (the harness wrote it there and closed its end; it is in no file,
# argument, environment variable or code constant of the sandbox) and copy it to VERDICT_FD,
# then exit 0 at once (os._exit: no atexit hook of the program runs after the verdict). An
# exception, SystemExit (even 0), os._exit, a signal or a timeout before that point leaves no
# nonce on VERDICT_FD: a failure. At the levels without a network namespace it first installs
# an audit hook (a second line behind the seccomp filter: subprocess, exec, ctypes raise).
_RUNNER = """\
import os, sys
_read, _write, _exit = os.read, os.write, os._exit
if {guard}:
    _BLOCKED = ("socket.__new__", "socket.connect", "socket.bind", "socket.getaddrinfo", "subprocess.Popen",
                "os.system", "os.exec", "os.posix_spawn", "os.spawn", "ctypes.dlopen", "ctypes.dlsym")
    def _guard(event, args):
        if event in _BLOCKED:
            raise PermissionError("sandbox: " + event + " is not allowed")
    sys.addaudithook(_guard)
    del _guard
sys.argv = ["<program>"]
def _flush():
    for f in (sys.stdout, sys.stderr):
        try:
            f.flush()
        except BaseException:
            pass
# The source (with its tests) from SOURCE_FD, then the fd closed: the program finds it in no file
# (/proc/self/fd included), so it cannot read its own tests' expected values.
_chunks = []
while True:
    _c = _read({source_fd}, 1 << 16)
    if not _c:
        break
    _chunks.append(_c)
os.close({source_fd})
try:
    import builtins
    _code = compile(b"".join(_chunks).decode("utf-8"), "<program>", "exec")
    # No reference to the source text survives (a frame walk finds none): tracebacks show
    # line numbers only.
    del _chunks, _c
    exec(_code, {{"__name__": "__main__", "__file__": "<program>", "__builtins__": builtins}})
except BaseException:
    try:
        import traceback
        traceback.print_exc()
    finally:
        _flush()
        _exit(1)
_flush()
_write({verdict_fd}, _read({nonce_fd}, 64))
_exit(0)
"""

# Namespaces level: `_sandbox_supervisor.py --ns-init` runs as root inside fresh network, PID,
# IPC, UTS and mount namespaces (PID 1 there) and stays the parent of the program, so the
# namespaces, and every process in them, end with it. It builds a private root in a tmpfs:
# read-only binds of /usr (and the /bin, /lib... links or folders), of the harness's Python
# installation at its own path, a few copied /etc files, a minimal /dev, a fresh /proc, and
# size-capped tmpfs for every writable place (/tmp, /var/tmp, /dev/shm, /run with /run/lock);
# then pivot_root into it and detach the host's tree: the repository, the data sets, the
# results, /home, /root and every host socket are simply not there. The root itself is
# remounted read-only. Then it starts the program as the sandbox uid.

SETUP_FAILED = _sup.SETUP_FAILED  # exit status when the sandbox itself could not be built
STARTED = b"S"  # written to the verdict pipe by the last trusted step before the program starts
SWEEP_PREFIX = "loosespec-sandbox-"
_SWEEP_RE = re.compile(re.escape(SWEEP_PREFIX) + r"(\d+)-(\d+)-")


class SandboxError(RuntimeError):
    """The sandbox could not be set up: a fault of the machine, not of the program."""


def _kill_uid(uid: int) -> None:
    """SIGKILL every process of `uid` (see _sandbox_supervisor.kill_uid)."""
    _run_quiet(["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--", "kill", "-KILL", "-1"])


def _pick_uid() -> int:
    return UID_RANGE[0] + secrets.randbelow(UID_RANGE[1] - UID_RANGE[0])


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep_stale(tmp_root: str | None = None) -> list[str]:
    """Remove the sandbox folders of harnesses that died without cleaning up (kill -9), killing
    any process still running as their sandbox uid and (as root) deleting what that uid left in
    the host's world-writable folders. Folders are named `loosespec-sandbox-<harness pid>-<uid>-`;
    those whose harness pid still lives are left alone. Returns the folders removed."""
    root = Path(tmp_root or tempfile.gettempdir())
    removed = []
    try:
        entries = list(root.iterdir())
    except OSError:
        return removed
    for entry in entries:
        m = _SWEEP_RE.match(entry.name)
        if not m or _pid_alive(int(m.group(1))):
            continue
        uid = int(m.group(2))
        if os.geteuid() == 0 and UID_RANGE[0] <= uid < UID_RANGE[1]:
            _kill_uid(uid)
            _sup.remove_files_of(uid)
        shutil.rmtree(entry, ignore_errors=True)
        if not entry.exists():
            removed.append(str(entry))
    return removed


def _default_hidden() -> list[str]:
    """Paths covered even when a bound folder holds them: the data sets and the repository."""
    repo = Path(__file__).resolve().parents[2]
    out = [str(repo)] if (repo / "pyproject.toml").exists() else []  # not when installed as a package
    from .base import data_dir_setting  # the folder runs read by default, hub (None) aside

    data = data_dir_setting()
    if data and os.path.isdir(os.path.expanduser(data)):
        out.append(os.path.expanduser(data))
    return out


# What every program needs inside the sandbox (its interpreter, libraries, /dev, /proc and its
# working folder /tmp/work): a hidden path equal to or above one of them fails every program.
NEEDED_PATHS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/dev", "/proc", "/tmp", "/sandbox")


def check_sandbox(isolation: str, allow_same_user: bool, hide_paths: Iterable[str | os.PathLike[str]] = ()) -> None:
    """Settings that no program could run under, refused before anything runs (ConfigError)."""
    level = available_isolation() if isolation == "auto" else isolation
    if level not in ISOLATION_LEVELS:
        raise ConfigError(f"dataset.sandbox.isolation={isolation!r}: choose auto or one of {ISOLATION_LEVELS}")
    if level == "process" and not allow_same_user:
        raise ConfigError(
            "sandbox: executing generated code needs root here (a separate uid, and namespaces where available); "
            "not root, the code would run as your own user and could delete your files. "
            f"{'dataset.sandbox.isolation=process asks for that level; ' if isolation == 'process' else ''}"
            "Set dataset.sandbox.allow_same_user=true to accept that risk."
        )
    needed = [*NEEDED_PATHS, os.path.realpath(sys.base_prefix)]
    for entry in hide_paths:
        path = os.fspath(entry)
        real = os.path.realpath(os.path.abspath(path)).rstrip("/") or "/"
        for need in needed:
            if real == "/" or need == real or need.startswith(real + "/"):
                raise ConfigError(f"dataset.sandbox.hide_paths entry {path!r} would hide {need}, which every program needs; "
                                  "hide only folders below it (the data, the results)")


def run_python(
    source: str,
    *,
    limits: Limits = Limits(),
    isolation: str = "auto",
    hide_paths: Iterable[str | os.PathLike[str]] = (),
    allow_same_user: bool = False,
    output_chars: int = OUTPUT_TAIL,
) -> Result:
    """Run `source` as a Python program under `isolation`; see the module docstring.
    output_chars: how much of the output's end the result keeps (a program that reports values,
    e.g. MBPP+'s outputs for the harness to compare, needs more than the default tail)."""
    check_sandbox(isolation, allow_same_user)
    level = available_isolation() if isolation == "auto" else isolation
    sweep_stale()
    uid = _pick_uid() if level in ("namespaces", "uid") else None
    # 0700, root's: holds the output file; its name lets a later harness sweep it (and the uid).
    host_dir = Path(tempfile.mkdtemp(prefix=f"{SWEEP_PREFIX}{os.getpid()}-{uid or 0}-"))
    nonce = secrets.token_hex(16).encode()
    start = time.monotonic()
    timed_out = False
    nonce_r = nonce_w = verdict_r = verdict_w = source_fd = -1
    try:
        nonce_r, nonce_w = os.pipe()
        verdict_r, verdict_w = os.pipe()
        os.write(nonce_w, nonce)
        os.close(nonce_w)
        nonce_w = -1
        out_path = host_dir / "output.txt"
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"}
        runner_args = dict(nonce_fd=_sup.NONCE_FD, verdict_fd=_sup.VERDICT_FD, source_fd=_sup.SOURCE_FD, guard=level != "namespaces")
        # The source goes in through a memfd (no file in the sandbox holds it; see _RUNNER).
        source_fd = os.memfd_create("loosespec-program", 0)
        os.write(source_fd, source.encode("utf-8"))
        os.lseek(source_fd, 0, os.SEEK_SET)
        wall = f"{limits.timeout_s + 1:.2f}"  # inner limit, should the harness's own be missed
        with out_path.open("wb") as out:
            if level == "namespaces":
                prefix = os.path.realpath(sys.base_prefix)
                exe = os.path.realpath(getattr(sys, "_base_executable", sys.executable))
                if not exe.startswith(prefix + os.sep):
                    prefix = os.path.dirname(os.path.dirname(exe))
                hide = [os.path.realpath(p) for p in [*hide_paths, *_default_hidden()]]
                (host_dir / "runner.py").write_text(_RUNNER.format(**runner_args), encoding="utf-8")
                cmd = _ns_prefix() + [sys.executable, "-I", "-S", _sup.__file__, "--ns-init", str(host_dir), str(uid),
                                      prefix, exe, str(limits.tmp_mb), wall, *hide]
                env.update(HOME="/tmp/work", TMPDIR="/tmp/work")
                cwd = "/"
            else:
                work = host_dir / "work"
                work.mkdir()
                (work / "runner.py").write_text(_RUNNER.format(**runner_args), encoding="utf-8")
                cmd = [_host_interpreter(), "-I", "-S", "runner.py"]
                env.update(HOME=str(work), TMPDIR=str(work))
                cwd = str(work)
                if uid is not None:
                    os.chmod(host_dir, 0o711)  # the uid may pass through to its work dir, not list it
                    for path in (work, work / "runner.py"):
                        os.chown(path, uid, uid)
                    cmd = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--no-new-privs", "--", *cmd]
            preexec = None
            if shutil.which("prlimit"):
                cmd = _prlimit_args(limits) + cmd
            else:  # no util-linux prlimit: set the limits between fork and exec instead
                preexec = functools.partial(_set_limits, limits)
            supervisor = [sys.executable, "-I", "-S", _sup.__file__, str(os.getpid()), str(uid or -1),
                          f"{limits.timeout_s + 2:.2f}", level, str(nonce_r), str(verdict_w), str(source_fd), "--", *cmd]
            proc = subprocess.Popen(
                supervisor, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, cwd=cwd, env=env,
                start_new_session=True, preexec_fn=preexec, close_fds=True, pass_fds=(nonce_r, verdict_w, source_fd),
            )
            os.close(nonce_r)
            os.close(verdict_w)
            os.close(source_fd)
            nonce_r = verdict_w = source_fd = -1
            try:
                returncode: int | None = proc.wait(timeout=limits.timeout_s)
            except subprocess.TimeoutExpired:
                timed_out = True
                returncode = None
                proc.send_signal(signal.SIGUSR1)  # the supervisor kills the uid's processes and cleans up
                try:
                    proc.wait(timeout=5)
                except subprocess.TimeoutExpired:  # backstop: kill it with its group, clean up for it
                    _kill_group(proc.pid)
                    proc.wait()
                    if uid is not None:
                        _kill_uid(uid)
                        if level == "uid":
                            _sup.remove_files_of(uid)
        duration = time.monotonic() - start
        verdict = _read_available(verdict_r)
        text = _tail(out_path, output_chars)
    finally:
        for fd in (nonce_r, nonce_w, verdict_r, verdict_w, source_fd):
            if fd >= 0:
                os.close(fd)
        shutil.rmtree(host_dir, ignore_errors=True)
    started = verdict.startswith(STARTED)
    if returncode == SETUP_FAILED and not started:
        raise SandboxError(f"the sandbox could not be set up ({level} level): {text.strip()[-500:]}")
    if timed_out:
        status = "timeout"
    elif returncode == 0 and verdict == STARTED + nonce:
        status = "passed"
    else:
        status = "failed"
    return Result(status=status, returncode=returncode, output=text, duration_s=duration, isolation=level)


def _read_available(fd: int) -> bytes:
    """What the sandbox wrote to the verdict pipe (every writer is gone or killed by now)."""
    os.set_blocking(fd, False)
    chunks = []
    while True:
        try:
            chunk = os.read(fd, 4096)
        except BlockingIOError:
            break
        if not chunk:
            break
        chunks.append(chunk)
        if sum(map(len, chunks)) > 1 << 16:
            break
    return b"".join(chunks)


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _tail(path: Path, chars: int = OUTPUT_TAIL) -> str:
    size = path.stat().st_size
    with path.open("rb") as f:
        f.seek(max(0, size - 4 * chars))
        return f.read().decode("utf-8", errors="replace")[-chars:]


def run_many(sources: Sequence[str], *, workers: int | None = None, **kwargs: Any) -> list[Result]:
    """Run programs concurrently (threads only wait on child processes), results in order."""
    workers = workers or max(2, 2 * (os.cpu_count() or 1))
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(lambda s: run_python(s, **kwargs), sources))
