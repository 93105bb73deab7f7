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
    return ConfigError(f"{path} is {kind}, not a regular file: the files the harness reads and writes must be plain files "
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


def open_regular(path: str | os.PathLike[str], mode: str = "rb", encoding: str | None = None,
                 newline: str | None = None) -> IO[Any]:
    """open() for the modes a run folder needs (r, rb, rb+, a, ab), through `open_fd`."""
    fd = open_fd(path, _FLAGS[mode])
    try:
        if "b" in mode:
            return os.fdopen(fd, mode)
        return os.fdopen(fd, mode, encoding=encoding, newline=newline)
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


# --- Round four (issue 74): one gate for every file the package reads or writes. -------------
#
# Reads of what a user or a folder supplies are bounded (a sparse 8 GB file given as a
# declaration must not be read into memory); writes go to a temp file in the same folder, then
# os.replace (a reader never sees half a file, a full disk leaves nothing half-written), and
# never through a link: the target must be absent or a regular file, and (with `root`) its
# folder must be inside root once links are resolved (a `tables` folder linked elsewhere).

MAX_DECLARATION_BYTES = 16 << 20  # claims.yaml, calibrations, GPU profiles, point.json, report.json
MAX_DATA_BYTES = 1 << 30          # a data file given to `data --from`


def read_bounded(path: str | os.PathLike[str], limit: int = MAX_DECLARATION_BYTES, what: str = "file") -> bytes:
    """The bytes of a regular file (never a link, a FIFO or a device), at most `limit` of them:
    a longer file is a ConfigError naming it (nothing past the limit is read)."""
    p = Path(path)
    with open_regular(p, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size > limit:
            raise ConfigError(f"{p}: the {what} is {size} bytes, more than the {limit} this reader takes")
        data = f.read(limit + 1)
    if len(data) > limit:
        raise ConfigError(f"{p}: the {what} is more than {limit} bytes, more than this reader takes")
    return data


def read_declaration_text(path: str | os.PathLike[str], what: str = "file", limit: int = MAX_DECLARATION_BYTES) -> str:
    """A declaration's text, every failure one ConfigError naming the file: missing, a link or
    a special file, too long, not UTF-8, unreadable."""
    p = Path(path)
    try:
        data = read_bounded(p, limit, what)
    except FileNotFoundError:
        raise ConfigError(f"{p}: no such {what}") from None
    except OSError as err:
        raise ConfigError(f"{p}: the {what} cannot be read ({err.strerror or err})") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ConfigError(f"{p}: the {what} is not UTF-8 text (byte {err.start})") from None


def load_json_declaration(path: str | os.PathLike[str], what: str = "file", limit: int = MAX_DECLARATION_BYTES,
                          *, allow_nan: bool = True) -> Any:
    """json.loads of a declaration read through the gate; bad JSON (or nesting too deep, or an
    integer over 4300 digits) is one ConfigError naming the file. NaN and Infinity (Python's
    json writes them) are parsed unless allow_nan=False: the declaration's typed check
    (store/declarations.py) then names the field that holds one."""
    import json

    text = read_declaration_text(path, what, limit)

    def _no_constant(name: str) -> Any:
        raise ValueError(f"{name} is not a JSON number")

    try:
        return json.loads(text, **({} if allow_nan else {"parse_constant": _no_constant}))
    except (ValueError, RecursionError) as err:
        raise ConfigError(f"{path}: the {what} is not valid JSON ({str(err)[:80]})") from None


MAX_YAML_NODES = 1_000_000  # nodes once aliases are expanded: a billion-laughs file is refused


def parse_yaml_declaration(text: str, path: str | os.PathLike[str], what: str = "file") -> Any:
    """yaml.safe_load of a declaration's text: aliases are fine (claims.yaml's selectors use
    them) but the document they expand to is bounded (a billion-laughs file, or a recursive
    alias, is refused before anything walks it); bad YAML is one ConfigError naming the file."""
    import yaml

    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
        sizes: dict[int, int] = {}
        visiting: set[int] = set()

        def size(node: Any) -> int:
            key = id(node)
            if key in sizes:
                return sizes[key]
            if key in visiting:
                raise ConfigError(f"{path}: the {what} holds a recursive YAML alias")
            visiting.add(key)
            total = 1
            if isinstance(node, yaml.SequenceNode):
                for child in node.value:
                    total += size(child)
            elif isinstance(node, yaml.MappingNode):
                for k, v in node.value:
                    total += size(k) + size(v)
            visiting.discard(key)
            sizes[key] = min(total, MAX_YAML_NODES + 1)
            if total > MAX_YAML_NODES:
                raise ConfigError(f"{path}: the {what} expands to more than {MAX_YAML_NODES} YAML nodes "
                                  "(aliases repeated inside aliases?); write the values out")
            return sizes[key]

        if root is not None:
            size(root)
        return yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise ConfigError(f"{path}: the {what} is not YAML ({str(err).splitlines()[0][:80]})") from None
    except RecursionError:
        raise ConfigError(f"{path}: the {what} is nested too deeply") from None


def load_yaml_declaration(path: str | os.PathLike[str], what: str = "file", limit: int = MAX_DECLARATION_BYTES) -> Any:
    """A YAML declaration read through the gate (bounded, never a link or a FIFO, UTF-8) and
    parsed by parse_yaml_declaration."""
    return parse_yaml_declaration(read_declaration_text(path, what, limit), path, what)


def check_write_target(path: str | os.PathLike[str], root: str | os.PathLike[str] | None = None) -> Path:
    """`path` when a write may replace it: absent or a regular file (never a link, even a dangling
    one, nor a special file or a folder), its folder a real folder, and (root given) that folder
    inside root once links are resolved. Else a ConfigError naming the path."""
    p = Path(path)
    check_regular(p)  # a link or a special file: ConfigError
    parent = p.parent if str(p.parent) else Path(".")
    if not os.path.isdir(parent):
        raise ConfigError(f"{p}: its folder {parent} is not a folder")
    if root is not None:
        real_root = Path(os.path.realpath(root))
        real_parent = Path(os.path.realpath(parent))
        if real_parent != real_root and not real_parent.is_relative_to(real_root):
            raise ConfigError(f"{p}: its folder leads to {real_parent}, outside {root} (a symbolic link on the way?); "
                              "outputs are written only inside their own folder")
    if len(p.name.encode("utf-8", "surrogatepass")) > 240:
        raise ConfigError(f"{p}: the name is over 240 bytes (a file system name is at most 255, with room for a temp name)")
    return p


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes, *, root: str | os.PathLike[str] | None = None) -> Path:
    """Write `data` to a unique temp file in path's folder, fsync, os.replace onto path: never
    through a link, never half a file (an error, a full disk or a kill leave the old file)."""
    import tempfile

    p = check_write_target(path, root)
    fd, tmp = tempfile.mkstemp(dir=p.parent if str(p.parent) else ".", prefix=f".{p.name[:200]}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o644)  # mkstemp makes 0600: outputs are for the group to read too
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, p)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    return p


def atomic_write_text(path: str | os.PathLike[str], text: str, *, root: str | os.PathLike[str] | None = None) -> Path:
    return atomic_write_bytes(path, text.encode("utf-8"), root=root)


class atomic_output:
    """`with atomic_output(path) as tmp: frame.to_csv(tmp)`: for writers that want a path of
    their own (pandas, matplotlib). The temp file keeps path's suffix (savefig reads the format
    from it); on success it replaces path, on any error it is removed."""

    def __init__(self, path: str | os.PathLike[str], *, root: str | os.PathLike[str] | None = None) -> None:
        self.path = check_write_target(path, root)
        self.tmp: Path | None = None

    def __enter__(self) -> Path:
        import tempfile

        fd, tmp = tempfile.mkstemp(dir=self.path.parent if str(self.path.parent) else ".",
                                   prefix=f".{self.path.name[:200]}.", suffix=f".tmp{self.path.suffix}")
        os.fchmod(fd, 0o644)
        os.close(fd)
        self.tmp = Path(tmp)
        return self.tmp

    def __exit__(self, exc_type: Any, *exc: Any) -> None:
        assert self.tmp is not None
        if exc_type is None:
            try:
                check_regular(self.tmp)  # the writer wrote a file, not something else in its place
                os.replace(self.tmp, self.path)
                return
            except BaseException:
                try:
                    os.unlink(self.tmp)
                except FileNotFoundError:
                    pass
                raise
        try:
            os.unlink(self.tmp)
        except FileNotFoundError:
            pass


def append_text(path: str | os.PathLike[str], text: str) -> None:
    """Append to a regular file (created if absent), never through a link or into a FIFO."""
    fd = open_fd(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    with os.fdopen(fd, "a", encoding="utf-8") as f:
        f.write(text)
        f.flush()
