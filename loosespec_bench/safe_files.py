"""Opening the files of a run folder (or a store, or a completions file) as plain data.

Run folders travel: results/cpu is committed, people exchange folders to re-score or compare
them. A folder from someone else may hold a symbolic link where a file belongs (a
`samples.jsonl` linked to a file elsewhere would be cut back and appended to by a resume), a
FIFO (every reader blocks for ever) or a device node. So every file of a run folder is opened
here:

- the last component is never followed (O_NOFOLLOW): a link is refused with one ConfigError;
- only regular files: lstat first (a FIFO or a device is refused before any open: opening a
  device can have effects of its own), then the open itself with O_NONBLOCK (a FIFO swapped in
  between cannot block it) and fstat on the descriptor (what was opened is what is checked);
- a missing file is reported as such (None / FileNotFoundError), as before.

Directory walks (the report's index) use `is_real_dir`, which does not follow links either.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import IO, Any

from .errors import ConfigError

_KIND = {stat.S_IFIFO: "a FIFO (named pipe)", stat.S_IFCHR: "a character device", stat.S_IFBLK: "a block device",
         stat.S_IFSOCK: "a socket", stat.S_IFDIR: "a folder", stat.S_IFLNK: "a symbolic link"}


def _refusal(path: Path, mode: int) -> ConfigError:
    kind = _KIND.get(stat.S_IFMT(mode), "not a regular file")
    return ConfigError(f"{path} is {kind}, not a regular file: a run folder's files must be plain files "
                       "(links and special files are refused; they could lead outside results/ or block the reader)")


def check_regular(path: str | os.PathLike[str]) -> bool:
    """True when `path` is a regular file (not followed if a link), False when it does not exist;
    anything else (a link, a FIFO, a device, a folder) is a ConfigError."""
    p = Path(path)
    try:
        st = os.lstat(p)
    except FileNotFoundError:
        return False
    except NotADirectoryError:
        return False
    if not stat.S_ISREG(st.st_mode):
        raise _refusal(p, st.st_mode)
    return True


def open_fd(path: str | os.PathLike[str], flags: int = os.O_RDONLY, mode: int = 0o644) -> int:
    """os.open of a regular file, never through a link and never blocking on a FIFO; the
    descriptor is back in blocking mode. FileNotFoundError when it does not exist (and flags
    do not create it); ConfigError for a link or a special file."""
    p = Path(path)
    try:
        st = os.lstat(p)
    except FileNotFoundError:
        if not flags & os.O_CREAT:
            raise
    else:
        if not stat.S_ISREG(st.st_mode):
            raise _refusal(p, st.st_mode)
    try:
        fd = os.open(p, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, mode)
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise _refusal(p, stat.S_IFLNK) from None
        if err.errno == errno.ENXIO:  # a FIFO opened for writing without a reader
            raise _refusal(p, stat.S_IFIFO) from None
        if err.errno == errno.EISDIR:
            raise _refusal(p, stat.S_IFDIR) from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise _refusal(p, st.st_mode)
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


_FLAGS = {"r": os.O_RDONLY, "rb": os.O_RDONLY, "rb+": os.O_RDWR, "r+b": os.O_RDWR,
          "a": os.O_WRONLY | os.O_APPEND | os.O_CREAT, "ab": os.O_WRONLY | os.O_APPEND | os.O_CREAT}


def open_regular(path: str | os.PathLike[str], mode: str = "rb", encoding: str | None = None) -> IO[Any]:
    """open() for the modes a run folder needs (r, rb, rb+, a, ab), through `open_fd`."""
    fd = open_fd(path, _FLAGS[mode])
    try:
        return os.fdopen(fd, mode, encoding=encoding if "b" not in mode else None)
    except BaseException:
        os.close(fd)
        raise


def read_bytes(path: str | os.PathLike[str]) -> bytes:
    with open_regular(path, "rb") as f:
        return f.read()


def read_text(path: str | os.PathLike[str], encoding: str = "utf-8") -> str:
    return read_bytes(path).decode(encoding)


def is_real_dir(path: str | os.PathLike[str]) -> bool:
    """A folder that is not a link to one (walks never follow links: two links to `.` would
    make a walk visit 2^depth paths)."""
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def confined(root: str | os.PathLike[str], name: str, what: str) -> Path:
    """root/name when `name` is one plain path component (no separator, not '.' or '..', no NUL),
    else a ConfigError naming `what`: a name read from a record or a config never leaves root."""
    if (not isinstance(name, str) or not name or name in (".", "..") or "/" in name or "\\" in name
            or "\x00" in name or len(name.encode("utf-8", "surrogatepass")) > 255):
        raise ConfigError(f"{what}={str(name)[:80]!r} is not a plain name under {root}: "
                          "a name read from a record or a config is one path component, never a path")
    return Path(root) / name
