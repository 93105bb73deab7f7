"""models/gguf.py: the one GGUF conversion helper (the embedded pair's and SmolLM2's), the cache's
lock and permissions. The conversion itself runs on real GGUF files in the slow tests
(tests/models/test_embedded.py, tests/test_real_pair.py)."""

from __future__ import annotations

import os
import stat

from loosespec_bench.models import embedded, smollm
from loosespec_bench.models.gguf import convert_gguf, file_lock, make_shareable


def test_made_files_get_the_umask_not_the_temp_files_0600(tmp_path):
    folder = tmp_path / "hf"
    folder.mkdir(mode=0o700)
    (folder / "model.safetensors").write_bytes(b"x")
    os.chmod(folder / "model.safetensors", 0o600)
    old = os.umask(0o022)
    try:
        make_shareable(folder)
    finally:
        os.umask(old)
    assert stat.S_IMODE(folder.stat().st_mode) == 0o755
    assert stat.S_IMODE((folder / "model.safetensors").stat().st_mode) == 0o644


def test_the_lock_is_taken_and_released(tmp_path):
    with file_lock(tmp_path / ".lock"):
        pass
    with file_lock(tmp_path / ".lock"):  # released: taken again at once
        pass


def test_both_models_convert_through_the_one_helper():
    assert embedded.convert_gguf is convert_gguf and smollm.convert_gguf is convert_gguf
    assert not hasattr(smollm, "_make_shareable") and not hasattr(embedded, "_file_lock")
