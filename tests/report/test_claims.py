"""report/claims.py: the papers' claims decided from runs (verdicts, n to decide, selection)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from loosespec_bench.app import run
from loosespec_bench.report.claims import (
    Claim, decide, decisions_to_csv, format_claims, format_examples, loose_examples, n_to_decide, select, verdict,
)
from loosespec_bench.report.index import load_index

from ..conftest import compose_config

TINY = ["experiment=smoke_tiny", "warmup=false"]


@pytest.mark.parametrize("iv, direction, line, expect", [
    ((1.0, 0.5, 1.5), +1, 0.0, "confirmed"),  # interval above 0, claimed up
    ((1.0, 0.5, 1.5), -1, 0.0, "contradicted"),  # claimed down, measured up
    ((-1.0, -1.5, -0.5), -1, 0.0, "confirmed"),
    ((0.2, -0.1, 0.5), +1, 0.0, "undecided at this n"),  # straddles 0
    ((0.995, 0.991, 1.0), +1, 0.99, "confirmed"),  # retention above its 0.99 floor
    ((0.95, 0.90, 0.985), +1, 0.99, "contradicted"),  # retention below it
    ((0.97, 0.93, 1.0), +1, 0.99, "undecided at this n"),
    ((1.0, None, None), +1, 0.0, "undecided (no interval)"),
])
def test_verdict_against_the_claimed_direction_and_line(iv, direction, line, expect):
    assert verdict(*iv, direction, 30, line=line) == expect


def test_no_verdict_below_ten_problems():
    assert verdict(1.0, 0.9, 1.1, +1, 9).startswith("undecided (n=9")


def test_n_to_decide_scales_with_the_squared_spread_over_the_effect():
    assert n_to_decide(0.25, -0.25, 0.75, 30) == 120  # half-width 0.5, effect 0.25: 30 x 4
    assert n_to_decide(0.0, -0.5, 0.5, 30) is None  # no effect: no n decides it
    assert n_to_decide(0.97, 0.93, 1.0, 30, line=0.99) == 68  # effect 0.02, upper side 0.03: 30 x 1.5^2
    # Named case (DropMatch + AutoJudge on IFEval): a skewed interval whose upper side just
    # reaches past the line; an undecided claim never "needs" the n it already has.
    assert n_to_decide(0.571, 0.167, 1.0, 30, line=0.99) == 32
    assert n_to_decide(2.0, 1.5, 2.5, 3) == 10  # never below the verdict's minimum n
    assert n_to_decide(None, None, None, 30) is None


def _index(rows: list[dict]) -> pd.DataFrame:
    base = {"status": "complete", "dataset": "gsm8k", "n_samples": 30, "no_window": False, "mode": "code", "run_dir": "x"}
    return pd.DataFrame([{**base, **r} for r in rows])


def test_select_takes_the_matching_run_with_most_samples_and_skips_ablation_modes():
    df = _index([
        {"method": "fly", "K": 15.0, "theta": 0.3, "W": 6.0, "drafter": "mla", "n_samples": 3, "run_dir": "small"},
        {"method": "fly", "K": 15.0, "theta": 0.3, "W": 6.0, "drafter": "mla", "n_samples": 30, "run_dir": "big"},
        {"method": "fly", "K": 15.0, "theta": 0.3, "W": 6.0, "drafter": "mla", "n_samples": 90, "run_dir": "nowin", "no_window": True},
        {"method": "fly", "K": 15.0, "theta": 0.30000001, "W": 6.0, "drafter": "model", "run_dir": "model"},
        {"method": "spd", "K": 15.0, "drafter": "model", "run_dir": "spd", "status": "running"},
    ])
    fly = {"method": "fly", "theta": 0.3, "W": 6, "K": 15}
    assert select(df, {**fly, "drafter": "mla"}, "gsm8k")["run_dir"] == "big"
    assert select(df, {**fly, "drafter": "model"}, "gsm8k")["run_dir"] == "model"  # float knobs compare with tolerance
    assert select(df, {"method": "spd", "K": 15}, "gsm8k") is None  # not finished
    assert select(df, {**fly, "drafter": "mla"}, "mgsm") is None


def test_decide_on_two_tiny_runs(tmp_path):
    for ov in (["method=spd", "drafter.k=3"], ["method=spd", "drafter.k=6"]):
        run(compose_config([*TINY, "dataset.limit=12", "pair.dtype=float32", *ov, f"experiment_name=e{ov[1][-1]}"],
                           results_dir=tmp_path))
    index = load_index(tmp_path)
    claim = Claim("t", "test", "a longer draft raises tau", "tau", {"method": "spd", "K": 6}, {"method": "spd", "K": 3})
    same = Claim("s", "test", "lossless keeps accuracy", "retention", {"method": "spd", "K": 6}, None, margin=0.99)
    decisions = decide(index, (claim, same), n_boot=500)
    tau = next(d for d in decisions if d.claim.id == "t")
    assert tau.n == 12 and tau.dataset == index["dataset"].iloc[0]
    point, low, high = tau.diff
    assert low <= point <= high
    assert tau.verdict == verdict(point, low, high, +1, 12)
    text = format_claims(decisions)
    assert "a longer draft raises tau (tau)" in text and f"**{tau.verdict}**" in text
    csv = pd.read_csv(decisions_to_csv(decisions, tmp_path / "c.csv"))
    assert list(csv["claim"]) == [d.claim.id for d in decisions]


def test_a_speed_claim_compares_only_runs_measured_on_one_cpu(tmp_path):
    """Each speedup is paired on its own machine; two of them differ by CPU as much as by method
    (bf16 with and without native kernels), so across CPUs the claim says so instead of a verdict."""
    for k in ("3", "6"):
        # timing.retime=false: this test is about CPUs, not contention; under load a re-timed sample
        # that stays contaminated would leave the speed figures and change n.
        run(compose_config([*TINY, "dataset.limit=4", "pair.dtype=float32", "method=spd", f"drafter.k={k}",
                            f"experiment_name=e{k}", "timing.retime=false"], results_dir=tmp_path))
    claim = Claim("v", "test", "a longer draft is faster", "speedup", {"method": "spd", "K": 6}, {"method": "spd", "K": 3})
    same = decide(load_index(tmp_path), (claim,), n_boot=200)[0]
    assert not same.verdict.startswith("not comparable") and same.n == 4  # one machine: decided as usual
    moved = next(tmp_path.glob("e6/*/summary.json"))
    summary = json.loads(moved.read_text())
    summary.update(cpu_signature="GenuineIntel family 6 model 143 stepping 8", cpu_isa="AVX512")
    moved.write_text(json.dumps(summary))
    index = load_index(tmp_path)
    assert index["machine"].nunique() == 2
    d = decide(index, (claim,), n_boot=200)[0]
    assert d.verdict.startswith("not comparable: speed measured on different CPUs") and "AVX512" in d.verdict
    assert d.b[0] == pytest.approx(summary["speedup"]) and d.diff == (None, None, None)
    assert "| - |" in format_claims([d])  # no n: nothing was paired


def test_loose_examples_name_the_kept_draft_token(tmp_path):
    summary = run(compose_config([*TINY, "dataset.limit=1"], results_dir=tmp_path))
    folder = Path(summary["run_dir"])
    lines = (folder / "samples.jsonl").read_text().splitlines()
    rec = json.loads(lines[0])
    # A hand-made loose accept that cost the answer: the target alone right, the method wrong.
    rec["baseline"]["score"] = {"correct": True, "pred": "4"}
    rec["score"] = {"correct": False, "pred": "5"}
    rec["output_ids"] = [11, 12, 13, 14, 15, 16]
    rec["steps"] = [{"draft": [11, 12], "accepted": 2, "target_tokens": [11, 12]},
                    {"draft": [14, 99], "accepted": 1, "target_tokens": [77, 99], "loose_accepted": [0]}]
    (folder / "samples.jsonl").write_text(json.dumps(rec) + "\n")
    ex = loose_examples(folder)
    # Step 1 emitted 3 tokens (2 accepted + 1), so the loose accept is output position 3.
    assert ex == [{"id": rec["id"], "change": "lost", "context": "11 12 13", "draft_token": "14", "target_token": "77",
                   "loose_accepts_in_sample": 1, "answer": "5", "target_answer": "4", "reference": rec["reference"]}]
    # The reverse (named case: DropMatch on HumanEval lost 4 answers and gained 6): shown too, after.
    rec["baseline"]["score"], rec["score"] = rec["score"], rec["baseline"]["score"]
    (folder / "samples.jsonl").write_text(json.dumps(rec) + "\n")
    (gained,) = loose_examples(folder)
    assert gained["change"] == "gained" and gained["answer"] == "4" and gained["target_answer"] == "5"
    assert "| gained |" in format_examples({"run": [gained]})
    # A sample whose answer did not change, or changed without a loose accept, is not an example.
    rec["score"] = dict(rec["baseline"]["score"])
    (folder / "samples.jsonl").write_text(json.dumps(rec) + "\n")
    assert loose_examples(folder) == []


def test_an_ifeval_example_names_the_instructions_it_failed():
    from loosespec_bench.report.claims import _answer, _reference

    reference = {"key": 3724, "prompt": "Write a tweet ...",
                 "instruction_id_list": ["detectable_format:number_highlighted_sections", "punctuation:no_comma"]}
    method = {"correct": False, "prompt_strict": False, "inst_strict": [False, True]}
    target = {"correct": True, "prompt_strict": True, "inst_strict": [True, True]}
    assert _answer(method, reference) == "failed detectable_format:number_highlighted_sections"
    assert _answer(target, reference) == "all instructions followed"
    assert _reference(reference) == "detectable_format:number_highlighted_sections, punctuation:no_comma"
    # A task with an extracted answer keeps it.
    assert _answer({"correct": True, "pred": "4"}, {"answer": "4"}) == "4"


def test_retention_with_no_changed_answer_waits_for_the_rule_of_three():
    from loosespec_bench.report.claims import no_loss_bound as no_change_bound

    same = [(1.0, 1.0)] * 15 + [(0.0, 0.0)] * 15  # 30 problems, half right, none changed
    verdict_text, need = no_change_bound(same, 0.99)
    # 3/30 of answers could still change: retention down to 1 - 0.1 / 0.5 = 0.8.
    assert verdict_text.startswith("undecided (no answer changed in 30") and "0.80" in verdict_text
    assert need == 600  # 3 / (0.01 x 0.5)
    assert no_change_bound([(1.0, 1.0)] * 400, 0.99) == ("confirmed", None)
    assert no_change_bound([(0.0, 1.0), (1.0, 1.0)], 0.99) is None  # an answer lost: the bootstrap decides


def test_retention_with_answers_only_gained_still_bounds_the_unseen_losses():
    from loosespec_bench.report.claims import no_loss_bound

    # Named case (SPD K = 15 on HumanEval): 15 of 30 right alone, one gained, none lost. The
    # bootstrap's lower bound is exactly 1 (no resample holds a loss): "confirmed" would be
    # an artefact. Up to 3 losses in 30 are plausible: retention down to (15 + 1 - 3) / 15.
    pairs = [(1.0, 1.0)] * 15 + [(1.0, 0.0)] + [(0.0, 0.0)] * 14
    verdict_text, need = no_loss_bound(pairs, 0.99)
    assert verdict_text.startswith("undecided (no answer lost in 30, 1 gained") and "0.87" in verdict_text
    assert need == 79  # 3 / (0.01 x 0.5 + 1/30) = 78.3
    # FLy on HumanEval: 4 gained, none lost: (15 + 4 - 3) / 15 = 1.07 clears 0.99 even so.
    assert no_loss_bound([(1.0, 1.0)] * 15 + [(1.0, 0.0)] * 4 + [(0.0, 0.0)] * 11, 0.99) == ("confirmed", None)
    # Graded scores (a judge's rating) that only rose: no rule of three for them.
    assert no_loss_bound([(0.8, 0.5), (0.5, 0.5)], 0.99) is None


def test_a_retention_claims_noise_floor_is_the_lossless_rule_at_its_own_k():
    from loosespec_bench.report.claims import CLAIMS, floor_selection

    by_id = {c.id: c for c in CLAIMS}
    assert floor_selection(by_id["dropmatch_retention"]) == {"method": "spd", "drafter": "model", "K": 10}
    assert floor_selection(by_id["fly_retention"]) == {"method": "spd", "drafter": "model", "K": 15}
    # The AutoJudge rows run at their own K (5 at scale=cpu): their floor is SPD at that K, the
    # same run their tau claims compare with.
    for cid in ("autojudge_retention", "dropmatch_autojudge_retention"):
        assert floor_selection(by_id[cid]) == by_id["autojudge_tau"].a == {"method": "spd", "drafter": "model", "K": 5}


def test_an_accuracy_verdict_needs_the_exact_test_on_the_discordant_problems():
    from loosespec_bench.report.claims import mcnemar_check

    # 4 answers lost, none gained, of 30: the paired bootstrap excludes 0; the exact test does not.
    verdict_text, need = mcnemar_check((4, 0), 30)
    assert verdict_text.startswith("undecided") and "4 against 0" in verdict_text and "p = 0.125" in verdict_text
    assert need == 60  # 8 against 0: p = 0.0078
    assert mcnemar_check((9, 0), 30) is None  # p = 0.0039: the verdict stands
    assert mcnemar_check((0, 0), 30) is None


def test_a_retention_loss_needs_the_exact_test_too(tmp_path):
    # Named case: 12 problems, all right alone; the method loses 4 and gains none. The bootstrap
    # puts retention (8/12) well below 0.99, but 4 against 0 is p = 0.125 by the exact test.
    summary = run(compose_config([*TINY, "dataset.limit=12", "pair.dtype=float32", "method=spd"], results_dir=tmp_path))
    path = Path(summary["run_dir"]) / "samples.jsonl"
    recs = [json.loads(line) for line in path.read_text().splitlines()]
    for i, rec in enumerate(recs):
        rec["baseline"]["score"] = {**rec["baseline"]["score"], "correct": True}
        rec["score"] = {**rec["score"], "correct": i >= 4}
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    claim = Claim("r", "test", "keeps accuracy", "retention", {"method": "spd"}, None, margin=0.99)
    (d,) = decide(load_index(tmp_path), (claim,), n_boot=500)
    assert d.b[2] < 0.99  # the bootstrap alone would say contradicted
    assert d.verdict.startswith("undecided (the difference rests on 4 discordant problems") and d.n_needed == 24


def test_code_and_recall_examples_say_why_they_failed():
    from loosespec_bench.report.claims import _answer, _reference

    # Named case (DropMatch naive on HumanEval/64): the answer column said "None" and the
    # reference column a dump of the prompt; a reader needs the failing assertion.
    humaneval = {"prompt": "def vowels_count(s):\n ...", "test": "def check(c): ...", "entry_point": "vowels_count"}
    failed = {"correct": False, "status": "failed",
              "output": "Traceback (most recent call last):\n  File \"<program>\", line 31, in check\nAssertionError: Test 2\n"}
    assert _answer(failed, humaneval) == "failed: AssertionError: Test 2"
    assert _answer({"correct": True, "status": "passed", "output": ""}, humaneval) == "passed"
    assert _answer({"correct": False, "status": "timeout", "output": ""}, humaneval) == "timeout"
    assert _reference(humaneval) == "tests of vowels_count()"
    # Graded recall (NIAH): the recall and the values missed, not "None".
    needle = {"key": "plain-cabinet", "values": ["8374296", "9411991", "5953528"]}
    assert _answer({"correct": False, "recall": 2 / 3, "found": [True, False, True]}, needle) == "recall 0.67, missed 9411991"
    assert _answer({"correct": True, "recall": 1.0, "found": [True] * 3}, needle) == "recall 1.00"
    assert _reference(needle) == "3 values of plain-cabinet"
