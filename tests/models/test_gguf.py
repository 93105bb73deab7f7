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


def test_the_lock_excludes_another_process_until_released(tmp_path):
    # filelock's flock on our descriptor: another process's non-blocking attempt fails while the
    # block runs and succeeds after it.
    import subprocess
    import sys

    probe = ("import os, sys\nfrom filelock import lock_descriptor\n"
             "fd = os.open(sys.argv[1], os.O_RDWR)\nprint(lock_descriptor(fd, blocking=False))")
    lock = tmp_path / ".lock"
    with file_lock(lock):
        held = subprocess.run([sys.executable, "-c", probe, str(lock)], capture_output=True, text=True, timeout=60)
    free = subprocess.run([sys.executable, "-c", probe, str(lock)], capture_output=True, text=True, timeout=60)
    assert (held.stdout.strip(), free.stdout.strip()) == ("False", "True"), (held.stderr, free.stderr)


def test_the_lock_refuses_a_link(tmp_path):
    import pytest

    from loosespec_bench.errors import ConfigError

    (tmp_path / "elsewhere").write_text("")
    (tmp_path / ".lock").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(ConfigError):
        with file_lock(tmp_path / ".lock"):
            pass


# A target for in_child: allocates `mib` MiB and touches it, so that the child's peak shows it.
def _hold(mib: str, out: str) -> None:
    from pathlib import Path

    block = bytearray(int(mib) << 20)
    block[:: 4096] = b"x" * len(block[:: 4096])  # every page touched: resident, not just reserved
    Path(out).write_text(str(len(block)))


def _fail() -> None:
    raise RuntimeError("the child's own error")


def test_in_child_runs_the_function_elsewhere_and_says_its_peak(tmp_path):
    import resource

    from loosespec_bench.models.gguf import in_child

    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    peak = in_child("tests.models.test_gguf:_hold", "300", str(tmp_path / "done"))
    assert (tmp_path / "done").read_text() == str(300 << 20)  # it ran, in the child
    assert peak is not None and peak >= 300 << 20  # the child's peak holds the 300 MiB it touched
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 100 << 10  # not this process's (KiB)


def test_in_child_peak_is_the_childs_own_not_the_spawning_process_high_water_mark(tmp_path):
    """exec carries the spawner's high-water mark into the child's ru_maxrss: a conversion spawned
    by a run that had loaded a model "peaked" at the run's size. The child's own VmHWM is said."""
    import sys

    from loosespec_bench.models.gguf import in_child

    held = bytearray(900 << 20)
    held[:: 4096] = b"x" * len(held[:: 4096])  # this process now holds 900 MiB more
    peak = in_child("tests.models.test_gguf:_hold", "100", str(tmp_path / "done"))
    assert peak is not None and peak >= 100 << 20
    if sys.platform.startswith("linux"):
        assert peak < 700 << 20, f"{peak >> 20} MiB: the spawning process's 900 MiB, not the child's own"
    del held


def test_in_child_failure_is_a_runtime_error_naming_the_target(capfd):
    import pytest

    from loosespec_bench.models.gguf import in_child

    with pytest.raises(RuntimeError, match=r"tests.models.test_gguf:_fail failed in its child process \(exit status 1"):
        in_child("tests.models.test_gguf:_fail")
    assert "the child's own error" in capfd.readouterr().err  # its traceback reached the user
