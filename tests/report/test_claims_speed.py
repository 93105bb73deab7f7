"""report/claims/speed.py and the wall-clock rows of report/claims/decide.py: claims decided
from a speed-evidence folder (configurations timed interleaved over several occasions), on
hand-built timings with known answers."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from loosespec_bench.measure.costmodel import Calibration, ForwardCost
from loosespec_bench.errors import ConfigError
from loosespec_bench.report.claims.verdicts import decide
from loosespec_bench.report.claims.declaration import load_declaration
from loosespec_bench.report.claims.markdown import format_claims
from loosespec_bench.measure.work import add_forward, new_work

NO_RUNS = pd.DataFrame(columns=["status", "dataset"])
# One target forward costs 0.05 s in this calibration: a configuration's predicted time is its
# forwards' count x 0.05 s, so the counts' side of a comparison is set by the forwards below.
CALIBRATION = Calibration(target=ForwardCost(rows=[1, 2], body_s=[0.05, 0.1], ctx0=0, ctx_row_s=0, lm_head_row_s=0),
                          draft=None, extra_lm_head_row_s=0, lookup_s=0, step_overhead_s=0, signature={})


def _work(forwards: int, tokens: int = 20) -> dict:
    w = new_work()
    for _ in range(forwards):
        add_forward(w, "target_verify", 1, 1, 0)
    w["steps"], w["emitted"] = forwards, tokens
    return w


def speed_folder(path: Path, speed: dict[str, tuple[float, ...]], forwards: dict[str, int], *, problems: int = 12,
                 dataset: str = "gsm8k", calibration: bool = True, finished: tuple[bool, ...] | None = None) -> Path:
    """A folder as scripts/bench_speed_evidence.py leaves it: the target alone ("ar") takes
    1 + 0.1 p seconds for problem p's 20 tokens, configuration c that time / speed[c][occasion],
    with a +-3% wobble per problem (so that resamples spread)."""
    path.mkdir(parents=True)
    occasions = len(next(iter(speed.values())))
    (path / "args.json").write_text(json.dumps({"pair": "qwen25_coder_embedded", "dataset": dataset, "problems": problems}))
    for o in range(1, occasions + 1):
        recs = [{"kind": "start", "occasion": o, "segment": 0, "machine": {"cpu_signature": "6/207"}}]
        for p in range(problems):
            t = 1.0 + 0.1 * p
            for c, s in {"ar": (1.0,) * occasions, **speed}.items():
                wobble = 1.0 if c == "ar" else 1.0 + 0.03 * (((p * 7 + o + len(c)) % 5) - 2) / 2
                recs.append({"kind": "gen", "occasion": o, "segment": 0, "problem": f"p{p}", "config": c, "attempt": 0,
                             "final": True, "contaminated": False, "new_tokens": 20, "tokens_sha": f"s{p}",
                             "wall_s": t / s[o - 1] * wobble, "cpu_share": 1.0, "others_share": 0.01,
                             "work": _work(forwards.get(c, 20))})
        if finished is None or finished[o - 1]:
            recs.append({"kind": "done", "occasion": o})
        (path / f"occasion-{o}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    if calibration:
        (path / "calibration.json").write_text(json.dumps({**CALIBRATION.to_dict(), "source": "test"}))
    return path


def declaration(root: Path, claims: str, families: str = "s: {}") -> Path:
    path = root / "claims.yaml"
    path.write_text(f"families: {{{families}}}\nclaims:\n{claims}")
    return path


def claim(cid: str, b: str, a: str | None = None, folder: str = "speed_gsm8k", **extra: str) -> str:
    fields = {"id": cid, "paper": "FLy", "family": "s", "figure": "speedup", "estimand": "ratio", "test": "occasions",
              "folder": folder, "sets": "[gsm8k]", "text": f"\"{b} is faster than {a or 'the target alone'}\"",
              "b": f"{{config: {b}}}", **extra}
    if a is not None:
        fields["a"] = a if a.startswith("{") else f"{{config: {a}}}"
    return "  - {" + ", ".join(f"{k}: {v}" for k, v in fields.items()) + "}\n"


def test_faster_on_both_occasions_and_in_the_counts_is_confirmed(tmp_path):
    speed_folder(tmp_path / "speed_gsm8k", {"fly": (1.6, 1.4), "spd": (1.2, 1.1)}, {"fly": 8, "spd": 12})
    decl = load_declaration(declaration(tmp_path, claim("fly_spd", "fly", "spd") + claim("fly_ar", "fly")))
    rows = {d.claim.id: d for d in decide(NO_RUNS, decl, n_boot=2000)}
    d = rows["fly_spd"]
    assert d.verdict == "confirmed" and d.test == "occasions" and d.n == 12 and d.dataset == "gsm8k"
    assert 1.15 < d.diff[0] < 1.35 and d.diff[1] > 1.0
    assert d.counts_side == "faster" and "the work counts predict 1.500" in d.note  # 12 forwards against 8
    assert "2 occasions x 12 problems" in d.note and "0 problem blocks contaminated" in d.note
    assert d.counts.startswith("A = spd; B / A by occasion 1.3") and d.b[0] == pytest.approx(1.5, abs=0.05)
    assert rows["fly_ar"].verdict == "confirmed" and rows["fly_ar"].counts_side == "faster"  # 8 forwards against 20
    md = format_claims(list(rows.values()), decl)
    assert "two-way (problems x occasions) percentile bootstrap" in md and "wall-clock rate" in md


def test_a_wall_clock_verdict_the_counts_contradict_is_undecided(tmp_path):
    # Faster on the clock, but the counts (more forwards than SPD) say slower: something other
    # than the counted work moved the time, and the verdict does not stand on the clock alone.
    speed_folder(tmp_path / "speed_gsm8k", {"fly": (1.6, 1.5), "spd": (1.1, 1.0)}, {"fly": 14, "spd": 12})
    (d,) = decide(NO_RUNS, load_declaration(declaration(tmp_path, claim("c", "fly", "spd"))), n_boot=1000)
    assert d.verdict == "undecided (wall-clock says faster, the work counts say slower)"


def test_without_a_calibration_no_wall_clock_verdict_stands(tmp_path):
    speed_folder(tmp_path / "speed_gsm8k", {"fly": (1.6, 1.5), "spd": (1.1, 1.0)}, {"fly": 8, "spd": 12}, calibration=False)
    (d,) = decide(NO_RUNS, load_declaration(declaration(tmp_path, claim("c", "fly", "spd"))), n_boot=1000)
    assert d.verdict.startswith("undecided (wall-clock says faster; no work-count check")
    assert "no calibration.json" in d.note


def test_a_calibration_that_prices_a_forward_below_nothing_gives_no_prediction_not_a_stop(tmp_path):
    """The committed speed_xtok calibration priced a 256-row prefill at -0.089 s (costmodel refuses
    such costs since issue 74): the claim keeps its wall-clock figures, says why it has no
    prediction (the file and the term), and the rest of the claims file is still decided."""
    folder = speed_folder(tmp_path / "speed_gsm8k", {"fly": (1.6, 1.5), "spd": (1.1, 1.0)}, {"fly": 8, "spd": 12}, calibration=False)
    bad = CALIBRATION.to_dict()
    # ctx_row_s x ctx0 x rows = 0.001 x 100 x rows > the body (0.05 s per row): below nothing.
    bad["target"] = {**bad["target"], "ctx0": 100, "ctx_row_s": 0.001}
    (folder / "calibration.json").write_text(json.dumps({**bad, "source": "test"}))
    (d,) = decide(NO_RUNS, load_declaration(declaration(tmp_path, claim("c", "fly", "spd"))), n_boot=1000)
    assert d.verdict.startswith("undecided (wall-clock says faster; no work-count check"), d.verdict
    assert "calibration.json's target.ctx_row_s=" in d.note and "less than nothing" in d.note, d.note


def test_against_the_best_of_several_settings(tmp_path):
    # FLy beats SPD at K = 15 but not SPD at K = 5, the fastest here: "faster than SPD at its
    # best K" is contradicted, while the paper's comparison (K = 15) is confirmed.
    speed_folder(tmp_path / "speed_gsm8k", {"fly": (1.3, 1.3), "spd_k5": (1.8, 1.7), "spd_k15": (1.0, 1.0)},
                 {"fly": 10, "spd_k5": 8, "spd_k15": 14})
    decl = load_declaration(declaration(tmp_path, claim("paper_k", "fly", "spd_k15")
                                        + claim("best_k", "fly", "{best_of: [spd_k5, spd_k15]}")))
    rows = {d.claim.id: d for d in decide(NO_RUNS, decl, n_boot=1000)}
    assert rows["paper_k"].verdict == "confirmed"
    best = rows["best_k"]
    assert best.verdict == "contradicted" and best.counts.startswith("A = spd_k5") and best.diff[0] < 0.8


def test_an_occasion_effect_leaves_a_small_gain_undecided(tmp_path):
    # +12% on one occasion, -4% on the other: the problems alone would call it faster, the
    # occasions do not.
    speed_folder(tmp_path / "speed_gsm8k", {"fly": (1.12, 0.96), "spd": (1.0, 1.0)}, {"fly": 10, "spd": 12})
    (d,) = decide(NO_RUNS, load_declaration(declaration(tmp_path, claim("c", "fly", "spd"))), n_boot=2000)
    assert d.diff[1] < 1.0 < d.diff[2] and d.verdict.startswith(("undecided at this n", "not decidable"))
    # Its cost at the n for power: the timed seconds per problem of both sides, every occasion.
    assert d.n_needed > 12 and d.cpu_hours == pytest.approx(d.n_needed * d.per_problem_s / 3600)
    assert d.cluster_gpu_hours is None


def test_unfinished_occasions_are_left_out_and_none_finished_is_no_row(tmp_path):
    speed_folder(tmp_path / "speed_gsm8k", {"fly": (1.5, 1.5), "spd": (1.0, 1.0)}, {"fly": 8, "spd": 12}, finished=(True, False))
    (d,) = decide(NO_RUNS, load_declaration(declaration(tmp_path, claim("c", "fly", "spd"))), n_boot=500)
    assert "1 occasions x 12 problems" in d.note and "unfinished, left out: occasion-2.jsonl" in d.note
    other = tmp_path / "other"
    other.mkdir()
    speed_folder(other / "speed_gsm8k", {"fly": (1.5,), "spd": (1.0,)}, {}, finished=(False,))
    assert decide(NO_RUNS, load_declaration(declaration(other, claim("c", "fly", "spd")))) == []
    empty = tmp_path / "empty"
    empty.mkdir()
    assert decide(NO_RUNS, load_declaration(declaration(empty, claim("c", "fly", "spd")))) == []  # not yet run


@pytest.mark.parametrize("text, message", [
    (claim("c", "fly", "spd", folder="../elsewhere"), "is not a plain name"),
    (claim("c", "fly", "spd", folder="a/b"), "is not a plain name"),
    (claim("c", "fly", "{best_of: [spd_k5]}"), "best_of"),
    (claim("c", "{method: fly}", "spd").replace("{config: {method: fly}}", "{method: fly}"), "names the benchmark's configurations"),
    (claim("c", "fly", "spd", estimand="difference"), "needs estimand: ratio"),
    (claim("c", "fly", "spd").replace("test: occasions, ", ""), "folder is for wall-clock claims"),
])
def test_a_bad_wall_clock_claim_is_one_clear_error(tmp_path, text, message):
    with pytest.raises(ConfigError, match=message):
        load_declaration(declaration(tmp_path, text))


def test_a_folder_without_the_declared_configuration_or_set_is_one_clear_error(tmp_path):
    speed_folder(tmp_path / "speed_gsm8k", {"fly": (1.5, 1.5)}, {})
    with pytest.raises(ConfigError, match=r"no timings of \['spd_k15'\].*declare the benchmark's configuration names"):
        decide(NO_RUNS, load_declaration(declaration(tmp_path, claim("c", "fly", "spd_k15"))))
    with pytest.raises(ConfigError, match="timed 'gsm8k', not \\['humaneval'\\]"):
        decide(NO_RUNS, load_declaration(declaration(tmp_path, claim("c", "fly", sets="[humaneval]"))))


def test_a_linked_occasion_file_is_refused(tmp_path):
    folder = speed_folder(tmp_path / "speed_gsm8k", {"fly": (1.5, 1.5)}, {})
    real = tmp_path / "real.jsonl"
    (folder / "occasion-1.jsonl").rename(real)
    (folder / "occasion-1.jsonl").symlink_to(real)
    with pytest.raises(ConfigError, match="link"):
        decide(NO_RUNS, load_declaration(declaration(tmp_path, claim("c", "fly"))))


def test_claims_without_data_are_listed_as_declared(tmp_path):
    speed_folder(tmp_path / "speed_gsm8k", {"fly": (1.6, 1.4), "spd": (1.2, 1.1)}, {"fly": 8, "spd": 12})
    decl = load_declaration(declaration(tmp_path, claim("here", "fly", "spd") + claim("later", "fly", "spd", folder="speed_humaneval")))
    md = format_claims(decide(NO_RUNS, decl, n_boot=500), decl)
    assert "Declared, no data yet (1): `later` (folder `speed_humaneval`)." in md


@pytest.mark.parametrize("edit", [{"wall_s": "fast"}, {"config": None}, {"new_tokens": -1}, {"occasion": "1"}])
def test_a_damaged_generation_record_is_one_clear_error(tmp_path, edit):
    folder = speed_folder(tmp_path / "speed_gsm8k", {"fly": (1.5, 1.5)}, {})
    path = folder / "occasion-1.jsonl"
    lines = path.read_text().splitlines()
    lines[1] = json.dumps({**json.loads(lines[1]), **edit})
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ConfigError, match=r"occasion-1.jsonl:2: a generation record has"):
        decide(NO_RUNS, load_declaration(declaration(tmp_path, claim("c", "fly"))))


def test_a_linked_speed_folder_is_refused(tmp_path):
    real = speed_folder(tmp_path / "elsewhere", {"fly": (1.5, 1.5)}, {})
    (tmp_path / "speed_gsm8k").symlink_to(real)
    with pytest.raises(ConfigError, match="is a link or not a folder"):
        decide(NO_RUNS, load_declaration(declaration(tmp_path, claim("c", "fly"))))
