"""The sandbox's trusted supervisor: one per sandboxed program, started by the harness.

Run as `python -I -S _sandbox_supervisor.py HARNESS_PID UID DEADLINE_S LEVEL NONCE_FD VERDICT_FD SOURCE_FD -- CMD...`
(and, inside the namespaces, as `... --ns-init ...`: the namespace's PID 1, `ns_init`) (stdlib
only, no package imports, so that it runs under -I -S). It forks CMD (the rlimits/namespace/uid
chain that ends in the program) and stays its parent:

- the forked child gets PR_SET_PDEATHSIG=SIGKILL, then re-checks getppid() (closing the race in
  which the supervisor died before the prctl), and installs a seccomp filter (below; at the
  "namespaces" level only its keyring part) before exec. Rlimits, the filter and the uid are inherited by every
  descendant, whatever way it was started (fork, spawnv_passfds, ctypes...).
- the supervisor is a child subreaper (orphans of the program are re-parented to it) and polls
  every 20 ms: when the harness is gone (getppid() changed: a `kill -9` of the harness), the
  harness asks (SIGUSR1: its wall-clock limit expired) or its own deadline passed, it kills the child and every process of the sandbox uid; when the child
  ended, it kills what is left of the uid too.
- at the "uid" level it then removes what the uid left in the world-writable places of the host
  (remove_files_of), since there is no private mount namespace there.

Its exit status is the child's (128 + signal when killed by a signal, 124 at its own deadline,
SETUP_FAILED when the chain could not be started). The sandboxed program runs under another uid
than the supervisor (root) at the "namespaces" and "uid" levels, so it cannot signal or ptrace it.
"""

from __future__ import annotations

import ctypes
import os
import select
import signal
import struct
import sys
import time

SETUP_FAILED = 199
NONCE_FD, VERDICT_FD = 3, 4  # where the program's chain finds the two pipes (see sandbox._RUNNER)
SOURCE_FD = 5  # the program's source (a memfd the runner reads, then closes): in no file of the sandbox
# World-writable places where a sandbox uid could leave files on the host ("uid" level).
WORLD_WRITABLE = ("/tmp", "/var/tmp", "/dev/shm", "/run/lock", "/run/shm", "/dev/mqueue")

PR_SET_PDEATHSIG = 1
PR_SET_NO_NEW_PRIVS = 38
PR_SET_SECCOMP = 22
PR_SET_CHILD_SUBREAPER = 36
SECCOMP_MODE_FILTER = 2
SECCOMP_RET_KILL_PROCESS = 0x80000000
SECCOMP_RET_ERRNO = 0x00050000
SECCOMP_RET_ALLOW = 0x7FFF0000
EPERM = 1
# Syscalls the "uid"/"process" levels refuse (EPERM): no socket of any family (so no network,
# no host Unix socket, abstract or not; socketpair stays allowed), no System V IPC object or
# POSIX message queue (they would outlive the run: no IPC namespace there), no kernel keyring
# entries, no io_uring (it can open sockets itself).
_BLOCKED = {
    # arch: (AUDIT_ARCH_*, {name: nr})
    "x86_64": (0xC000003E, dict(socket=41, shmget=29, semget=64, msgget=68, mq_open=240, add_key=248,
                                request_key=249, keyctl=250, io_uring_setup=425)),
    "aarch64": (0xC00000B7, dict(socket=198, shmget=194, semget=190, msgget=186, mq_open=180, add_key=217,
                                 request_key=218, keyctl=219, io_uring_setup=425)),
}


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _prctl(libc: ctypes.CDLL, *args: int) -> None:
    if libc.prctl(*[ctypes.c_ulong(a) for a in args], *[ctypes.c_ulong(0)] * (5 - len(args))) != 0:
        raise OSError(ctypes.get_errno(), f"prctl{args}")


# What the program itself is refused at every level (installed last, just before the runner
# starts, so the trusted chain, `unshare` included, keeps them): new namespaces (unshare, setns,
# clone with a CLONE_NEW* flag: a user namespace would give it the capabilities to mount its own
# tmpfs past tmp_mb, or to reach kernel code paths meant for root), anonymous memory files
# (memfd_create, memfd_secret: shared memory that RLIMIT_AS does not count; 24 memfds of 16 MB
# under a 64 MB limit raised the host's shared memory by 384 MB), userfaultfd, perf_event_open
# and bpf. clone3 passes its flags in memory a filter cannot read: it fails with ENOSYS, and the
# C library falls back to clone (threads and fork keep working), whose flags are checked.
PROGRAM_SYSCALLS = {
    "x86_64": dict(unshare=272, setns=308, memfd_create=319, memfd_secret=447, userfaultfd=323,
                   perf_event_open=298, bpf=321, clone=56, clone3=435),
    "aarch64": dict(unshare=97, setns=268, memfd_create=279, memfd_secret=447, userfaultfd=282,
                    perf_event_open=241, bpf=280, clone=220, clone3=435),
}
PROGRAM_BLOCKED = ("unshare", "setns", "memfd_create", "memfd_secret", "userfaultfd", "perf_event_open", "bpf")
# CLONE_NEWTIME, NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET (linux/sched.h).
CLONE_NEW_FLAGS = 0x80 | 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000
ENOSYS = 38

# The namespaces level: network, IPC and mounts are namespaced there, but keyrings are not, nor
# are some socket families (AF_VSOCK reaches the hypervisor from any network namespace); io_uring
# can open sockets itself. So sockets other than AF_UNIX (which reach only the private root's
# own sockets) fail with EPERM there too, and keyrings and io_uring as at the other levels.
NAMESPACES_BLOCKED = ("add_key", "request_key", "keyctl", "io_uring_setup")
AF_UNIX = 1
SECCOMP_DATA_ARG0 = 16  # offsetof(struct seccomp_data, args[0]); its low 32 bits on little-endian


def seccomp_program(machine: str | None = None, only: tuple[str, ...] | None = None, unix_sockets: bool = False,
                    program: bool = False) -> bytes:
    """The BPF filter: wrong architecture (32-bit or x32 syscalls) kills the process, the
    blocked syscalls (all of _BLOCKED, or those named in `only`) fail with EPERM, everything
    else is allowed. unix_sockets: socket() is allowed for AF_UNIX only (every other family,
    AF_VSOCK, AF_NETLINK, AF_PACKET and AF_INET* included, fails with EPERM). program: also
    PROGRAM_BLOCKED (EPERM), clone with a CLONE_NEW* flag (EPERM) and clone3 (ENOSYS)."""
    machine = machine or os.uname().machine
    if machine not in _BLOCKED:
        raise OSError(f"no seccomp filter for architecture {machine}")
    arch, calls = _BLOCKED[machine]
    extra = PROGRAM_SYSCALLS[machine] if program else {}
    ld, jeq, jge, jset, ret = 0x20, 0x15, 0x35, 0x45, 0x06
    nrs = sorted(nr for name, nr in calls.items() if (only is None or name in only) and not (unix_sockets and name == "socket"))
    nrs += sorted(extra[name] for name in PROGRAM_BLOCKED if extra and extra[name] not in nrs)
    # Instructions with symbolic jump targets ("allow", "errno", "kill", "family"), resolved below.
    prog: list[tuple] = [(ld, 0, 0, 4), (jeq, None, "kill", arch), (ld, 0, 0, 0)]
    if machine == "x86_64":
        prog.append((jge, "kill", None, 0x40000000))
    prog += [(jeq, "errno", None, nr) for nr in nrs]
    if unix_sockets:
        prog.append((jeq, "family", None, calls["socket"]))
    if extra:
        prog += [(jeq, "enosys", None, extra["clone3"]), (jeq, "clone", None, extra["clone"])]
    labels = {"allow": len(prog)}
    prog.append((ret, 0, 0, SECCOMP_RET_ALLOW))
    if unix_sockets:
        labels["family"] = len(prog)
        # BPF jumps only forward: an allow of its own after the family test.
        prog += [(ld, 0, 0, SECCOMP_DATA_ARG0), (jeq, None, "errno", AF_UNIX), (ret, 0, 0, SECCOMP_RET_ALLOW)]
    if extra:
        labels["clone"] = len(prog)  # clone's flags are its first argument (x86_64 and aarch64)
        prog += [(ld, 0, 0, SECCOMP_DATA_ARG0), (jset, "errno", None, CLONE_NEW_FLAGS), (ret, 0, 0, SECCOMP_RET_ALLOW)]
    labels["errno"] = len(prog)
    prog.append((ret, 0, 0, SECCOMP_RET_ERRNO | EPERM))
    labels["enosys"] = len(prog)
    prog.append((ret, 0, 0, SECCOMP_RET_ERRNO | ENOSYS))
    labels["kill"] = len(prog)
    prog.append((ret, 0, 0, SECCOMP_RET_KILL_PROCESS))
    out = []
    for pc, (code, jt, jf, k) in enumerate(prog):
        # BPF jumps are relative to the next instruction; None = fall through (0).
        rel = lambda t: 0 if t is None else (labels[t] - (pc + 1) if isinstance(t, str) else t)  # noqa: E731
        jt_, jf_ = rel(jt), rel(jf)
        assert 0 <= jt_ < 256 and 0 <= jf_ < 256
        out.append(struct.pack("=HBBI", code, jt_, jf_, k))
    return b"".join(out)


def install_seccomp(libc: ctypes.CDLL, only: tuple[str, ...] | None = None, unix_sockets: bool = False,
                    program: bool = False) -> None:
    prog = seccomp_program(only=only, unix_sockets=unix_sockets, program=program)
    buf = ctypes.create_string_buffer(prog, len(prog))

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    fprog = SockFprog(len(prog) // 8, ctypes.cast(buf, ctypes.c_void_p))
    _prctl(libc, PR_SET_NO_NEW_PRIVS, 1)
    if libc.prctl(ctypes.c_int(PR_SET_SECCOMP), ctypes.c_ulong(SECCOMP_MODE_FILTER), ctypes.byref(fprog), ctypes.c_ulong(0), ctypes.c_ulong(0)) != 0:
        raise OSError(ctypes.get_errno(), "seccomp filter")


def kill_uid(uid: int) -> None:
    """SIGKILL every process of `uid`, in every PID namespace below ours: a forked helper takes
    that uid, and kill(-1) then reaches exactly those processes (and not the helper)."""
    if uid <= 0:
        return
    pid = os.fork()
    if pid == 0:
        try:
            os.setgroups([])
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
            for _ in range(3):  # a second pass for anything forked while the first ran
                try:
                    os.kill(-1, signal.SIGKILL)
                except ProcessLookupError:
                    break
        finally:
            os._exit(0)
    os.waitpid(pid, 0)


def remove_files_of(uid: int) -> None:
    """Delete what `uid` created at the top of the host's world-writable folders."""
    if uid <= 0:
        return
    for folder in WORLD_WRITABLE:
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for e in entries:
            try:
                if e.stat(follow_symlinks=False).st_uid != uid:
                    continue
                if e.is_dir(follow_symlinks=False):
                    import shutil

                    shutil.rmtree(e.path, ignore_errors=True)  # fd-based: never follows the uid's symlinks
                else:
                    os.unlink(e.path)
            except OSError:
                pass


def _remap(fds: tuple[int, ...]) -> None:
    """Move the nonce and verdict pipes and the source to fds 3, 4 and 5, where the runner expects them."""
    import fcntl

    high = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10) for fd in fds]
    for fd in fds:
        os.close(fd)
    for target, fd in zip((NONCE_FD, VERDICT_FD, SOURCE_FD), high):
        os.dup2(fd, target, inheritable=True)
        os.close(fd)


def _child(cmd: list[str], supervisor: int, level: str, fds: tuple[int, ...]) -> None:
    try:
        libc = _libc()
        _prctl(libc, PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != supervisor:  # the supervisor died before the prctl took effect
            os._exit(SETUP_FAILED)
        os.setpgid(0, 0)  # its own process group: killed as a whole at the end (all levels)
        _remap(fds)
        if level in ("uid", "process"):
            install_seccomp(libc, program=True)  # the chain (prlimit, setpriv) needs none of the program's calls
            os.write(VERDICT_FD, b"S")  # the last trusted step before the program's chain
        elif os.uname().machine in _BLOCKED:  # network and IPC are namespaced; keyrings, vsock... are not
            install_seccomp(libc, only=NAMESPACES_BLOCKED + ("socket",), unix_sockets=True)
        os.execvp(cmd[0], cmd)
    except BaseException as e:  # noqa: BLE001 - report and never return into the supervisor's code
        try:
            os.write(2, f"sandbox supervisor: {e}\n".encode())
        finally:
            os._exit(SETUP_FAILED)


def main(argv: list[str]) -> int:
    harness, uid, deadline, level = int(argv[0]), int(argv[1]), float(argv[2]), argv[3]
    fds = (int(argv[4]), int(argv[5]), int(argv[6]))
    assert argv[7] == "--"
    cmd = argv[8:]
    if os.getppid() != harness:
        return SETUP_FAILED
    libc = _libc()
    try:
        _prctl(libc, PR_SET_CHILD_SUBREAPER, 1)
    except OSError:
        pass
    stop = []  # SIGUSR1 from the harness: its timeout expired, kill and clean up now
    signal.signal(signal.SIGUSR1, lambda *_: stop.append(1))
    me = os.getpid()
    start = time.monotonic()
    child = os.fork()
    if child == 0:
        _child(cmd, me, level, fds)
    for fd in fds:  # the child has them; a same-uid program must not find them in our /proc/<pid>/fd
        os.close(fd)
    try:  # wake up as soon as the child ends (pidfd), else every 20 ms
        poller = select.poll()
        poller.register(os.pidfd_open(child), select.POLLIN)
        wait_child = lambda t: poller.poll(t * 1000)  # noqa: E731
    except (AttributeError, OSError):
        wait_child = time.sleep
    status: int | None = None
    killed_by_us = False
    while True:
        try:
            pid, st = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if pid:
            if pid == child:
                status = st
            continue  # reap everything that is ready before sleeping
        if status is not None:
            break  # the chain ended; what is left of the uid is killed below
        if stop or os.getppid() != harness or time.monotonic() - start > deadline:
            killed_by_us = True
            try:
                os.kill(child, signal.SIGKILL)
            except ProcessLookupError:
                pass
            break
        wait_child(0.02)
    try:
        os.killpg(child, signal.SIGKILL)  # the "process" level's only handle on descendants
    except (ProcessLookupError, PermissionError):
        pass
    if level != "process":
        kill_uid(uid)
    if level == "uid":
        remove_files_of(uid)
    # Reap what is left (orphans re-parented to us, the child if we killed it). At the "process"
    # level nothing was killed by uid: do not wait for the program's orphans.
    end = time.monotonic() + (2.0 if level != "process" else 0.0)
    while True:
        try:
            pid, st = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if pid == child and status is None:
            status = st
        if not pid:
            if time.monotonic() >= end:
                break
            time.sleep(0.01)
    if killed_by_us or status is None:
        return 124
    code = os.waitstatus_to_exitcode(status)
    return code if code >= 0 else 128 - code


# --- the namespaces level's init --------------------------------------------------------------
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT, MS_BIND = 1, 2, 4, 8, 32, 4096
MNT_DETACH = 2
SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}
ETC_FILES = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "nsswitch.conf")


def _mount(libc: ctypes.CDLL, src: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    enc = lambda v: v.encode() if v is not None else None  # noqa: E731
    if libc.mount(enc(src), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount {src} on {target}: {os.strerror(err)}")


def build_root(libc: ctypes.CDLL, host: str, uid: int, prefix: str, tmp_mb: int, hide: list[str]) -> None:
    """Build the private root in HOST/root and pivot_root into it (described in sandbox.py)."""
    import shutil

    r = os.path.join(host, "root")
    os.mkdir(r)
    ro = MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV
    tmpfs = lambda path, mode, size=f"{tmp_mb}m": _mount(libc, "tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV, f"size={size},mode={mode}")  # noqa: E731
    tmpfs(r, "755", "32m")
    os.chdir(r)
    for d in ("etc", "dev", "proc", "tmp", "var/tmp", "run", "home", "root", "sandbox", ".oldroot", ".w", "." + prefix):
        os.makedirs(d, exist_ok=True)
    for d in ("usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        if os.path.islink("/" + d):
            os.symlink(os.readlink("/" + d), d)
        elif os.path.isdir("/" + d):
            os.makedirs(d, exist_ok=True)
            _mount(libc, "/" + d, d, None, MS_BIND)
            _mount(libc, None, d, None, ro)
    _mount(libc, prefix, "." + prefix, None, MS_BIND)
    _mount(libc, None, "." + prefix, None, ro)
    for f in ETC_FILES:
        src = "/etc/" + f
        if os.path.isdir(src):
            shutil.copytree(src, "etc/" + f)
        elif os.path.exists(src):
            shutil.copyfile(src, "etc/" + f)
    with open("etc/passwd", "w") as fh:
        fh.write(f"root:x:0:0:root:/root:/usr/sbin/nologin\nsandbox:x:{uid}:{uid}::/tmp/work:/usr/sbin/nologin\n")
    with open("etc/group", "w") as fh:
        fh.write(f"root:x:0:\nsandbox:x:{uid}:\n")
    with open("etc/hosts", "w") as fh:
        fh.write("127.0.0.1 localhost\n")
    # The runner only: the program's source (with its tests) comes through SOURCE_FD, never a file.
    shutil.copyfile(os.path.join(host, "runner.py"), "sandbox/runner.py")
    os.chmod("sandbox/runner.py", 0o644)
    # Every writable place is a folder of ONE tmpfs of tmp_mb, bound where it belongs: the cap
    # holds in total (four tmpfs of tmp_mb each would give 4 x tmp_mb).
    tmpfs(".w", "755")
    for d, mode in (("tmp", 0o1777), ("var_tmp", 0o1777), ("shm", 0o1777), ("run", 0o755), ("run/lock", 0o1777), ("run/shm", 0o1777)):
        os.mkdir(".w/" + d)
        os.chmod(".w/" + d, mode)
    writable = MS_NOSUID | MS_NODEV
    _mount(libc, "tmpfs", "dev", "tmpfs", MS_NOSUID, "size=64k,mode=755")
    for n in ("null", "zero", "full", "random", "urandom"):
        open("dev/" + n, "w").close()
        _mount(libc, "/dev/" + n, "dev/" + n, None, MS_BIND)
    os.symlink("/proc/self/fd", "dev/fd")
    for i, n in enumerate(("stdin", "stdout", "stderr")):
        os.symlink(f"/proc/self/fd/{i}", "dev/" + n)
    os.mkdir("dev/shm")
    for src, dst in ((".w/shm", "dev/shm"), (".w/tmp", "tmp"), (".w/var_tmp", "var/tmp"), (".w/run", "run")):
        _mount(libc, src, dst, None, MS_BIND)
        _mount(libc, None, dst, None, MS_REMOUNT | MS_BIND | writable)
    if libc.umount2(b".w", MNT_DETACH) != 0:  # the binds keep the one tmpfs alive
        raise OSError(ctypes.get_errno(), "umount .w")
    os.rmdir(".w")
    _mount(libc, None, "dev", None, MS_REMOUNT | MS_RDONLY | MS_NOSUID)
    _mount(libc, "proc", "proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    os.mkdir("tmp/work", 0o700)
    os.chown("tmp/work", uid, uid)
    for p in hide:  # anything asked to be hidden that a bound folder holds
        q = "." + p
        if os.path.isdir(q):
            _mount(libc, "tmpfs", q, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV, "size=4k,mode=000")
        elif os.path.exists(q):
            _mount(libc, "/dev/null", q, None, MS_BIND)
            _mount(libc, None, q, None, ro)
    _mount(libc, None, r, None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)
    if libc.syscall(ctypes.c_long(SYS_PIVOT_ROOT[os.uname().machine]), b".", b".oldroot") != 0:
        raise OSError(ctypes.get_errno(), "pivot_root")
    os.chdir("/")
    if libc.umount2(b"/.oldroot", MNT_DETACH) != 0:
        raise OSError(ctypes.get_errno(), "umount /.oldroot")


def blank_cmdline(title: bytes = b"sandbox-init") -> None:
    """Overwrite this process's argument area (what /proc/<pid>/cmdline shows: here the
    interpreter's path in the virtual environment, this file's in the repository, the host
    folder and the hidden paths) with `title` and NULs, through /proc/self/mem (root: PID 1 of
    the namespaces). Python keeps its own copies of argv; the C area is only what others read."""
    with open("/proc/self/stat", "rb") as f:
        fields = f.read().rsplit(b")", 1)[1].split()
    # Fields 48 and 49 (arg_start, arg_end), counted from 1 with pid and comm before the ")".
    start, end = int(fields[47 - 2]), int(fields[48 - 2])
    if end <= start:
        return
    data = title[: end - start - 1].ljust(end - start, b"\0")
    with open("/proc/self/mem", "r+b", buffering=0) as mem:
        mem.seek(start)
        mem.write(data)


def ns_init(argv: list[str]) -> int:
    """PID 1 of the sandbox's namespaces (root): build the private root, start the program as
    the sandbox uid under the program's seccomp filter, reap everything, and kill the namespace
    at the inner deadline. When it returns, the kernel kills every process left in the PID
    namespace."""
    host, uid, prefix, exe, tmp_mb, wall = argv[0], int(argv[1]), argv[2], argv[3], int(argv[4]), float(argv[5])
    hide = argv[6:]
    try:
        libc = _libc()
        build_root(libc, host, uid, prefix, tmp_mb, hide)
        blank_cmdline()  # /proc/1/cmdline names no host path
    except BaseException as e:  # noqa: BLE001
        os.write(2, f"sandbox setup: {e}\n".encode())
        return SETUP_FAILED
    os.write(VERDICT_FD, b"S")  # the last trusted step before the program
    start = time.monotonic()
    child = os.fork()
    if child == 0:
        try:
            os.chdir("/tmp/work")
            os.setgroups([])
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
            _prctl(libc, PR_SET_NO_NEW_PRIVS, 1)
            if os.uname().machine in _BLOCKED:  # no namespaces, memfd, userfaultfd, perf, bpf (PROGRAM_BLOCKED)
                install_seccomp(libc, only=(), program=True)
            os.execv(exe, [exe, "-I", "-S", "/sandbox/runner.py"])
        finally:
            os._exit(127)
    try:
        poller = select.poll()
        poller.register(os.pidfd_open(child), select.POLLIN)
        wait_child = lambda t: poller.poll(t * 1000)  # noqa: E731
    except (AttributeError, OSError):
        wait_child = time.sleep
    status = None
    while True:  # PID 1 of the namespace: reap every orphan, wait for the program
        try:
            pid, st = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if pid == child:
            status = st
            break
        if pid:
            continue
        if time.monotonic() - start > wall:
            break
        wait_child(0.02)
    if status is None:
        return 124
    code = os.waitstatus_to_exitcode(status)
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    if sys.argv[1:2] == ["--ns-init"]:
        sys.exit(ns_init(sys.argv[2:]))
    sys.exit(main(sys.argv[1:]))
