"""safe_files.py: a run folder's files opened as data (tests/test_hostile_folders.py throws whole
hostile folders at the readers; these are the module's own cases, one each)."""

from __future__ import annotations

import os

import pytest

from loosespec_bench.errors import ConfigError
from loosespec_bench.safe_files import atomic_write_text, check_regular, confined, is_real_dir, read_bounded, read_text


def test_a_regular_file_reads_and_a_missing_one_is_false(tmp_path):
    (tmp_path / "a.txt").write_text("x")
    assert check_regular(tmp_path / "a.txt") and read_text(tmp_path / "a.txt") == "x"
    assert check_regular(tmp_path / "none") is False


def test_a_link_and_a_fifo_are_refused_in_one_line(tmp_path):
    (tmp_path / "a.txt").write_text("x")
    os.symlink(tmp_path / "a.txt", tmp_path / "link")
    os.mkfifo(tmp_path / "fifo")
    for name, kind in (("link", "a symbolic link"), ("fifo", "a FIFO")):
        with pytest.raises(ConfigError, match=kind):
            check_regular(tmp_path / name)
        with pytest.raises(ConfigError, match=kind):
            read_text(tmp_path / name)  # never blocks on the FIFO


def test_walks_do_not_follow_linked_folders(tmp_path):
    (tmp_path / "d").mkdir()
    os.symlink(tmp_path / "d", tmp_path / "dlink")
    assert is_real_dir(tmp_path / "d") and not is_real_dir(tmp_path / "dlink")


@pytest.mark.parametrize("name", ["..", ".", "a/b", "", "x\x00"])
def test_a_name_from_a_record_stays_one_component(tmp_path, name):
    with pytest.raises(ConfigError, match="not a plain name"):
        confined(tmp_path, name, "store")
    assert confined(tmp_path, "ok", "store") == tmp_path / "ok"


def test_reads_are_bounded_and_writes_atomic(tmp_path):
    (tmp_path / "big").write_bytes(b"0" * 100)
    with pytest.raises(ConfigError):
        read_bounded(tmp_path / "big", limit=10)
    atomic_write_text(tmp_path / "out.txt", "hello")
    assert (tmp_path / "out.txt").read_text() == "hello" and not list(tmp_path.glob(".*"))
