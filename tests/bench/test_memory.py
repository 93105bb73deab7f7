"""bench/memory.py: the process tree's peak is the sum of its members, the largest process's its
own high-water mark (not the spawner's, which wait4 would carry); the conversion lines the run
prints are read back; bad arguments are one usage error."""

from __future__ import annotations

import sys
import textwrap

import pytest

from loosespec_bench.bench import memory

MIB = 2**20

# A parent holding 200 MiB while a child (named like a conversion) holds 300 MiB: the tree holds
# ~500 MiB at once, the largest process ~300 MiB.
TREE = textwrap.dedent("""
    import subprocess, sys, time
    held = bytearray(200 * 2**20)
    child = "import time; x = bytearray(300 * 2**20); time.sleep(1.5)  # convert_here"
    subprocess.run([sys.executable, "-c", child], check=True)
    print("[loosespec_bench] converted tiny-model once into /x in a child process: 2 s, peak 0.3 GiB resident", file=sys.stderr)
""")


def test_the_tree_sums_its_members_and_the_largest_is_one_process_own_peak(tmp_path):
    held = bytearray(900 << 20)
    held[:: 4096] = b"x" * len(held[:: 4096])  # the measuring process is large (a pytest worker may be too)
    got = memory.measure([sys.executable, "-c", TREE], {}, tmp_path / "log", 0.05)
    del held
    assert got["exit"] == 0
    assert 0.45 <= got["tree_peak_gib"] < 0.75  # ~0.5 GiB + two interpreters
    assert 0.29 <= got["largest_process_gib"] < 0.45  # the child's 300 MiB, not the sum
    assert got["conversion_peak_gib"] >= 0.29 and 0.19 <= got["run_process_peak_gib"] < 0.29
    assert 0.45 <= got["tree_anon_peak_gib"] <= got["tree_peak_gib"]  # bytearrays are anonymous memory
    assert 0.19 <= got["run_process_anon_peak_gib"] and 0.29 <= got["conversion_anon_peak_gib"]
    assert got["conversions"] == [{"model": "tiny-model", "seconds": 2, "peak_gib": 0.3}]


def test_the_conversion_line_is_the_one_the_run_prints():
    # models/embedded._convert_to_hf's line, as it formats it
    line = "[loosespec_bench] converted qwen2.5-coder-1.5b-instruct once into /c/m in a child process: 212 s, peak 6.1 GiB resident"
    m = memory.CONVERTED.search(line)
    assert m and m.groups() == ("qwen2.5-coder-1.5b-instruct", "212", "6.1")


@pytest.mark.parametrize("argv, says", [(["--limit", "0"], "--limit"), (["--budget-gib", "nan"], "--budget-gib")])
def test_bad_arguments_are_one_usage_error(argv, says, capsys):
    with pytest.raises(SystemExit) as stop:
        memory.main(argv)
    assert stop.value.code == 2 and says in capsys.readouterr().err
