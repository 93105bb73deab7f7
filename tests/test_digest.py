"""digest.py: a file's sha256, read in blocks."""

from __future__ import annotations

import hashlib

from loosespec_bench.digest import file_sha256


def test_the_sha256_of_a_file_larger_than_a_block(tmp_path):
    data = bytes(range(256)) * 10_000  # 2.5 MB: several blocks
    (tmp_path / "f").write_bytes(data)
    assert file_sha256(tmp_path / "f") == hashlib.sha256(data).hexdigest()
    (tmp_path / "e").write_bytes(b"")
    assert file_sha256(str(tmp_path / "e")) == hashlib.sha256(b"").hexdigest()
