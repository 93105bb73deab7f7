"""calibrate.py on the tiny pair: a stored calibration found again by its signature."""

from __future__ import annotations

import json

import pytest
import torch

from loosespec_bench import calibrate
from loosespec_bench.calibrate import calibration_path, find_calibration, main, pair_node, signature
from loosespec_bench.measure.costmodel import Calibration


@pytest.fixture
def steady(monkeypatch) -> list[dict]:
    """measure_network runs for real (every forward it times), and what it measured is kept for the
    test to read; calibrate then stores a physical copy: bodies that never fall with the rows and
    no context terms. The tiny pair's forwards take tens of microseconds: on the loaded CI machine
    (the suite beside two Slurm test processes) one timing of each is noise, and calibrate rightly
    refuses a calibration whose noise prices a prefill below nothing (costmodel.nonphysical). These
    tests check the command's storage and signatures, never timings (the bench measures those)."""
    real, seen = calibrate.measure_network, []

    def measured(model, **kw):
        d = real(model, **kw)
        seen.append(d)
        body = [max(d["body_s"][:i + 1] + [1e-6]) for i in range(len(d["body_s"]))]
        return {**d, "body_s": body, "ctx_row_s": 0.0, "ctx_s": 0.0}

    monkeypatch.setattr(calibrate, "measure_network", measured)
    return seen


def test_calibrate_stores_a_calibration_that_runs_find_again(tmp_path, capsys, steady):
    assert main(["--pair", "tiny", "--threads", "1", "--results", str(tmp_path), "--repeats", "1", "--max-rows", "5"]) == 0
    pair = pair_node("tiny")
    cal, source = find_calibration(tmp_path, pair, 1)
    assert isinstance(cal, Calibration) and source.endswith(".json")
    t = cal.target
    assert t.rows[:5] == [1, 2, 3, 4, 5] and 512 in t.rows and len(t.body_s) == len(t.rows)
    assert len(steady) == 2  # target and draft, each measured: every field, each a non-negative cost
    for d in steady:
        assert d["rows"] == t.rows and d["ctx0"] == t.ctx0 and all(d[k] >= 0 for k in ("ctx_row_s", "ctx_s", "lm_head_row_s"))
    assert all(x >= 0 for x in t.body_s) and t.lm_head_row_s >= 0 and cal.draft is not None
    stored = json.loads(calibration_path(tmp_path, signature(pair, 1)).read_text())
    assert stored["signature"]["threads"] == 1 and stored["signature"]["pair"] == "tiny"
    assert "others_share" in stored["signature"]  # the load it was taken under
    # Another thread count is another signature: not reused.
    other, why = find_calibration(tmp_path, pair, 2)
    assert other is None and "2 threads" in why and "python -m loosespec_bench.calibrate" in why
    torch.set_num_threads(1)


def test_a_dtype_calibration_is_found_by_runs_in_that_dtype_only(tmp_path, capsys, steady):
    # The tiny pair's file says float32; --dtype bfloat16 writes a calibration that only bf16 runs find.
    assert main(["--pair", "tiny", "--dtype", "bfloat16", "--threads", "1", "--results", str(tmp_path),
                 "--repeats", "1", "--max-rows", "3"]) == 0
    pair = pair_node("tiny")
    assert find_calibration(tmp_path, pair, 1)[0] is None
    pair.dtype = "bfloat16"
    assert isinstance(find_calibration(tmp_path, pair, 1)[0], Calibration)
    torch.set_num_threads(1)


def test_unknown_pair_is_one_error_line(capsys, tmp_path):
    assert main(["--pair", "nope", "--results", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: --pair 'nope' is not a pair config") and "tiny" in err[0]


def test_unreadable_calibration_says_so(tmp_path):
    pair = pair_node("tiny")
    path = calibration_path(tmp_path, signature(pair, 1))
    path.parent.mkdir(parents=True)
    path.write_text("{}")
    cal, why = find_calibration(tmp_path, pair, 1)
    assert cal is None and "unreadable calibration" in why


@pytest.mark.parametrize("args", [["--repeats", "0"], ["--max-rows", "1"], ["--threads", "0"]])
def test_bad_settings_are_refused_before_loading(args, capsys, tmp_path):
    assert main(["--pair", "tiny", "--results", str(tmp_path), *args]) == 2
    assert capsys.readouterr().err.startswith("error: ")


def test_interleaved_medians_spread_a_slow_spell_over_every_point():
    """Known answer: three points costing 1, 2 and 3 time units; the machine runs 3x slower for
    the first four timed calls. Timed point after point, the first point's median is 3x its
    cost; timed round-robin, each point sees at most two slow calls of five, so every median is
    the true cost."""
    from loosespec_bench.calibrate import interleaved_medians

    state = {"now": 0.0, "timed": 0, "warm": 0}
    costs = [1.0, 2.0, 3.0]

    def clock() -> float:
        return state["now"]

    def make(i):
        def fn():
            if state["warm"] < len(costs):  # the warm-ups (one per point) are not timed
                state["warm"] += 1
                return
            slow = 3.0 if state["timed"] < 4 else 1.0
            state["timed"] += 1
            state["now"] += costs[i] * slow
        return fn

    got = interleaved_medians([make(i) for i in range(3)], [5, 5, 5], seed=1, clock=clock)
    assert got == costs
    assert state["timed"] == 15  # every point timed its repeats, no more

    # The sequential order the calibration used before: the first point takes the whole spell.
    state.update(now=0.0, timed=0, warm=len(costs))
    seq = []
    for i in range(3):
        times = []
        for _ in range(5):
            t0 = clock()
            make(i)()
            times.append(clock() - t0)
        seq.append(sorted(times)[2])
    assert seq[0] == 3.0 * costs[0]


def test_interleaved_medians_times_each_point_its_own_repeats():
    from loosespec_bench.calibrate import interleaved_medians

    calls = [0, 0]
    fns = [lambda: calls.__setitem__(0, calls[0] + 1), lambda: calls.__setitem__(1, calls[1] + 1)]
    interleaved_medians(fns, [5, 2])
    assert calls == [1 + 5, 1 + 2]  # a warm-up each, then its repeats


def test_calibration_records_its_check_against_a_timed_decode(tmp_path, capsys, steady):
    assert main(["--pair", "tiny", "--threads", "1", "--results", str(tmp_path), "--repeats", "1", "--max-rows", "3"]) == 0
    stored = json.loads(calibration_path(tmp_path, signature(pair_node("tiny"), 1)).read_text())
    ratio = stored["check"]["target_alone_decode_over_predicted"]
    assert ratio > 0
    assert f"{ratio:.2f}x its predicted time" in capsys.readouterr().out
    assert Calibration.from_dict(stored).check == {"target_alone_decode_over_predicted": ratio}
    old = {k: v for k, v in stored.items() if k != "check"}  # a calibration from before the check
    assert Calibration.from_dict(old).check == {}
    torch.set_num_threads(1)
