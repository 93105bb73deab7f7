"""Run untrusted Python (model-written code, e.g. HumanEval completions) in a contained child.

The harness never exec()s generated code in its own process. Each program runs in a fresh
`python -I -S` child, started in its own session, under rlimits (address space, CPU seconds,
processes, file size), with a wall-clock timeout after which the whole group is killed, in a
throw-away working directory that is also its HOME and TMPDIR, with a minimal environment (no
API keys or tokens from the harness's environment reach it).

On top of that, the strongest isolation the machine allows (`isolation="auto"`):

- "namespaces" (root, util-linux `unshare` + `setpriv`): new network namespace (only a downed
  loopback: no connection anywhere, the host's localhost included), new PID namespace (killing
  its init kills every process the program started, even ones that called setsid), new mount
  namespace in which /tmp, /var/tmp and /dev/shm are fresh size-capped tmpfs (the host's temp
  files are invisible and nothing written survives the run) and each `hide_paths` entry (e.g.
  the results folder) is covered by an empty read-only tmpfs; the harness's Python installation
  is bind-mounted read-only at /run/loosespec-python (an empty mount point left on the host), so
  the program runs under the harness's own interpreter; then the program drops to a fresh
  unprivileged uid (no groups, no capabilities, no_new_privs), so it cannot write or delete
  anything owned by root or by the user running the harness, nor read what they keep private.
- "uid" (root, no usable namespaces, e.g. a container without CAP_SYS_ADMIN): the fresh uid,
  rlimits and process-group kill, plus a kill of every process of that uid afterwards; network
  is blocked only by an audit hook (socket creation, subprocesses and ctypes raise), which code
  that finds another way to the kernel could bypass.
- "process" (not root): rlimits, timeout and the audit hook only, as the harness's own user: such
  code could delete that user's files. Refused unless `allow_same_user=True`.

Limits that remain: world-readable files (the repository, the data sets) stay readable; memory
is capped per process, so the worst case is max_procs x memory_mb (8 GiB with the defaults); at
the "uid" level, killed processes may linger as zombies until the machine's init reaps them.

`available_isolation()` says which applies; results record it. A program passes when it exits 0
and reaches its last line (a per-run marker printed after the tests), so `sys.exit(0)` or
`os._exit(0)` before the tests does not count as a pass.
"""

from __future__ import annotations

import functools
import os
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
        probe = "mount -t tmpfs -o size=1m tmpfs /tmp && setpriv --reuid=1500000 --regid=1500000 --clear-groups --no-new-privs -- true"
        if _run_quiet(_ns_prefix() + ["/bin/sh", "-c", probe]):
            return "namespaces"
    return "uid"


def _ns_prefix() -> list[str]:
    # --fork + --kill-child: the namespace's init dies with unshare, and the kernel then kills
    # every process in the PID namespace. --mount-proc: /proc shows only the sandbox.
    return ["unshare", "--net", "--pid", "--fork", "--kill-child", "--mount-proc", "--propagation", "private", "--"]


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


# Levels without a network namespace: an audit hook installed before the program runs. It
# cannot be removed from Python code; ctypes is blocked because it could call libc directly.
_GUARD = """\
import sys, runpy
_BLOCKED = ("socket.__new__", "socket.connect", "socket.bind", "socket.getaddrinfo", "subprocess.Popen",
            "os.system", "os.exec", "os.posix_spawn", "os.spawn", "ctypes.dlopen", "ctypes.dlsym")
def _guard(event, args):
    if event in _BLOCKED:
        raise PermissionError("sandbox: " + event + " is not allowed")
sys.addaudithook(_guard)
del _guard
sys.argv = ["main.py"]
runpy.run_path("main.py", run_name="__main__")
"""

# Namespaces level, run as root inside the new namespaces (PID 1 there); it stays the parent
# of the program (no exec) so that the namespace, and every process in it, ends with it.
# Arguments: uid, interpreter prefix on the host, interpreter path under that prefix, tmpfs
# size (MB), then the paths to hide. The program's source arrives on stdin.
SETUP_FAILED = 199  # exit status of the namespace script when the sandbox itself could not be built
_NS_SCRIPT = r"""
uid=$1; prefix=$2; rel=$3; tmp_mb=$4; shift 4
( set -e
for p in "$@"; do
  if [ -d "$p" ]; then mount -t tmpfs -o size=4k,mode=000,ro tmpfs "$p"
  elif [ -e "$p" ]; then mount --bind -o ro /dev/null "$p"; fi
done
mkdir -p /run/loosespec-python
mount --bind "$prefix" /run/loosespec-python
mount -o remount,bind,ro /run/loosespec-python
mount -t tmpfs -o size=${tmp_mb}m,mode=1777,nosuid,nodev tmpfs /tmp
for d in /var/tmp /dev/shm; do
  if [ -d "$d" ]; then mount -t tmpfs -o size=${tmp_mb}m,mode=1777,nosuid,nodev tmpfs "$d"; fi
done
mkdir -m 700 /tmp/work
cat > /tmp/work/main.py
chown -R "$uid:$uid" /tmp/work
) || exit 199
cd /tmp/work || exit 199
setpriv --reuid="$uid" --regid="$uid" --clear-groups --no-new-privs -- /run/loosespec-python/"$rel" -I -S main.py </dev/null
rc=$?
exit $rc
"""


class SandboxError(RuntimeError):
    """The sandbox could not be set up: a fault of the machine, not of the program."""


def _kill_uid(uid: int) -> None:
    """SIGKILL every process of `uid` (the "uid" level, without a PID namespace), from a
    helper that takes that uid: kill(-1) then reaches exactly those processes."""
    _run_quiet(["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--", "kill", "-KILL", "-1"])


def _pick_uid() -> int:
    return UID_RANGE[0] + secrets.randbelow(UID_RANGE[1] - UID_RANGE[0])


def run_python(
    source: str,
    *,
    limits: Limits = Limits(),
    isolation: str = "auto",
    hide_paths: Iterable[str | os.PathLike[str]] = (),
    allow_same_user: bool = False,
) -> Result:
    """Run `source` as a Python program under `isolation`; see the module docstring."""
    level = available_isolation() if isolation == "auto" else isolation
    if level not in ISOLATION_LEVELS:
        raise ConfigError(f"sandbox isolation={isolation!r}: choose auto or one of {ISOLATION_LEVELS}")
    if level == "process" and not allow_same_user:
        raise ConfigError(
            "sandbox: executing generated code needs root here (a separate uid, and namespaces where available); "
            "not root, the code would run as your own user and could delete your files. "
            "Set dataset.sandbox.allow_same_user=true to accept that risk."
        )
    marker = f"__loosespec_done_{secrets.token_hex(16)}__"
    program = f"{source}\n\nprint({marker!r}, flush=True)\n"
    host_dir = Path(tempfile.mkdtemp(prefix="loosespec-sandbox-"))  # 0700, root's: holds the output file
    uid = _pick_uid() if level in ("namespaces", "uid") else None
    start = time.monotonic()
    timed_out = False
    try:
        out_path = host_dir / "output.txt"
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"}
        with out_path.open("wb") as out:
            if level == "namespaces":
                prefix = os.path.realpath(sys.base_prefix)
                exe = os.path.realpath(getattr(sys, "_base_executable", sys.executable))
                if not exe.startswith(prefix + os.sep):
                    prefix, exe = os.path.dirname(os.path.dirname(exe)), exe
                rel = os.path.relpath(exe, prefix)
                hide = [os.path.realpath(p) for p in hide_paths]
                cmd = _ns_prefix() + ["/bin/sh", "-c", _NS_SCRIPT, "sh", str(uid), prefix, rel, str(limits.tmp_mb), *hide]
                env.update(HOME="/tmp/work", TMPDIR="/tmp/work")
                (host_dir / "main.py").write_text(program, encoding="utf-8")
                stdin = (host_dir / "main.py").open("rb")
                cwd = "/"
            else:
                work = host_dir / "work"
                work.mkdir()
                (work / "main.py").write_text(program, encoding="utf-8")
                (work / "guard.py").write_text(_GUARD, encoding="utf-8")
                cmd = [_host_interpreter(), "-I", "-S", "guard.py"]
                env.update(HOME=str(work), TMPDIR=str(work))
                stdin = subprocess.DEVNULL
                cwd = str(work)
                if uid is not None:
                    os.chmod(host_dir, 0o711)  # the uid may pass through to its work dir, not list it
                    for path in (work, work / "main.py", work / "guard.py"):
                        os.chown(path, uid, uid)
                    cmd = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--no-new-privs", "--", *cmd]
            preexec = None
            if shutil.which("prlimit"):
                cmd = _prlimit_args(limits) + cmd
            else:  # no util-linux prlimit: set the limits between fork and exec instead
                preexec = functools.partial(_set_limits, limits)
            try:
                proc = subprocess.Popen(
                    cmd, stdin=stdin, stdout=out, stderr=subprocess.STDOUT, cwd=cwd, env=env,
                    start_new_session=True, preexec_fn=preexec, close_fds=True,
                )
            finally:
                if stdin is not subprocess.DEVNULL:
                    stdin.close()
            try:
                returncode: int | None = proc.wait(timeout=limits.timeout_s)
            except subprocess.TimeoutExpired:
                timed_out = True
                _kill_group(proc.pid)
                proc.wait()
                returncode = None
            finally:
                if uid is not None and level == "uid":
                    _kill_uid(uid)
        duration = time.monotonic() - start
        text = _tail(out_path)
    finally:
        shutil.rmtree(host_dir, ignore_errors=True)
    if level == "namespaces" and returncode == SETUP_FAILED and marker not in text:
        raise SandboxError(f"the sandbox could not be set up (namespaces level): {text.strip()[-500:]}")
    reached_end = marker in text
    text = text.replace(marker + "\n", "").replace(marker, "")
    if timed_out:
        status = "timeout"
    elif returncode == 0 and reached_end:
        status = "passed"
    else:
        status = "failed"
    return Result(status=status, returncode=returncode, output=text, duration_s=duration, isolation=level)


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _tail(path: Path) -> str:
    size = path.stat().st_size
    with path.open("rb") as f:
        f.seek(max(0, size - 4 * OUTPUT_TAIL))
        return f.read().decode("utf-8", errors="replace")[-OUTPUT_TAIL:]


def run_many(sources: Sequence[str], *, workers: int | None = None, **kwargs: Any) -> list[Result]:
    """Run programs concurrently (threads only wait on child processes), results in order."""
    workers = workers or max(2, 2 * (os.cpu_count() or 1))
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(lambda s: run_python(s, **kwargs), sources))
