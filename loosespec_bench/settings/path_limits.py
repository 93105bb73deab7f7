"""The kernel's path limits, checked before anything stats a path (issue 41): a path with a
component over NAME_MAX bytes, or longer than PATH_MAX, makes stat() fail with ENAMETOOLONG, a
traceback where the harness only asked whether a folder exists. Ground floor: the environment
check runs before Hydra composes anything; checks and points ask the same question of the
paths a run will make."""

from __future__ import annotations

import os

from ..errors import ConfigError

# Linux limits: bytes in one path component (ext4, xfs, btrfs, tmpfs all stop at 255) and in a
# path the kernel takes in one call (PATH_MAX, the terminating NUL included).
NAME_MAX = 255
PATH_MAX = 4096
# What the harness appends below a folder it names: a run folder's longest file with its atomic
# write's temp name (".summary.json.<8 random>.tmp"), and Hydra's job folder below results_dir
# (_hydra/multirun/<date>/<time>/<job number>/.hydra/overrides.yaml).
RUN_FILE_TAIL = "/.summary.json.xxxxxxxx.tmp"
HYDRA_TAIL = "/_hydra/multirun/2026-12-03/17-12-42/99999/.hydra/overrides.yaml"
STORE_TAIL = "/_0123456789ab/.append.lock"  # a store folder's digest and its longest file
# Environment variables that name folders, read before Hydra composes anything.
PATH_VARIABLES = ("LOOSESPEC_RESULTS_DIR", "LOOSESPEC_DATA_DIR", "LOOSESPEC_CACHE_DIR", "LOOSESPEC_SITE_CONF")


def shown(text: str, width: int = 48) -> str:
    """A long value cut for an error line (the line stays one readable line)."""
    return text if len(text) <= width else f"{text[:width]}... ({len(text)} characters)"


def path_length_problem(path: str) -> str | None:
    """Why `path` cannot be a path on this kernel (a component over NAME_MAX bytes, or the whole
    over PATH_MAX), or None. Counted in bytes of the file system encoding, as the kernel counts:
    stat() of such a path fails with ENAMETOOLONG (a traceback where the harness only asked
    whether the folder exists)."""
    raw = os.fsencode(path)
    for part in raw.split(b"/"):
        if len(part) > NAME_MAX:
            name = shown(os.fsdecode(part), 24)
            return f"its part {name!r} is {len(part)} bytes, longer than the {NAME_MAX} bytes a file or folder name may have"
    if len(raw) >= PATH_MAX:
        return f"it is {len(raw)} bytes long, more than the {PATH_MAX - 1} bytes a path may have (PATH_MAX)"
    return None


def check_environment_path_lengths() -> None:
    """The folders named by environment variables (PATH_VARIABLES) fit the kernel's limits
    (path_length_problem), before anything stats them."""
    for name in PATH_VARIABLES:
        value = os.environ.get(name)
        if value:
            problem = path_length_problem(os.path.expanduser(value))
            if problem:
                raise ConfigError(f"{name}={shown(value)!r}: {problem}; point it at a shorter path")
