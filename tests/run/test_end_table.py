"""The end-of-run table follows the field's conventions: per-group rows under a set with groups
(MGSM's languages, Spec-Bench's task groups), each rate that is a count over n printed with its
count (`20/30 = 0.667`), every row and note of the table at most 100 characters."""

from __future__ import annotations

import pytest

from loosespec_bench.run.end_table import WIDTH, count_rate, format_summary
from loosespec_bench.store.summary import build_summary
from loosespec_bench.tasks.base import Task
from loosespec_bench.tasks.mgsm import MGSM
from loosespec_bench.tasks.spec_bench import SpecBench

from ..store.test_summary import _rec

LANGS = ["bn", "de", "fr"]
META = {"method": "fly", "pair": "qwen25_coder_embedded", "dataset": "mgsm", "tau_definition": "-", "run_dir": "r"}


class Grouped(Task):
    group_key = MGSM.group_key  # "language": the summary reads the task's own group key


def _mgsm_summary() -> dict:
    # bn: the method 0/10, the target alone 7/10; de and fr: the method 10/10.
    recs = [_rec(i, i % 3 != 0, i % 4 != 0, lang=LANGS[i % 3]) for i in range(30)]
    return build_summary(Grouped(), recs, seed=0)


def test_the_summary_keeps_counts_and_per_group_quality_with_exact_intervals():
    s = _mgsm_summary()
    assert s["quality_counts"] == {"n": 30, "correct": 20, "baseline_n": 30, "baseline_correct": 22}
    by = s["quality_by_group"]
    assert by["key"] == "language" and list(by["groups"]) == LANGS
    bn = by["groups"]["bn"]
    assert (bn["n"], bn["correct"], bn["value"], bn["baseline_correct"]) == (10, 0, 0.0, 7)
    # Clopper-Pearson at 0 of 10: [0, 1 - 0.025^(1/10)].
    assert bn["ci_low"] == 0.0 and bn["ci_high"] == pytest.approx(1 - 0.025 ** (1 / 10))
    assert by["groups"]["de"]["ci_high"] == 1.0 and by["groups"]["de"]["ci_low"] == pytest.approx(0.025 ** (1 / 10))


def test_mgsm_prints_accuracy_per_language_with_counts_and_intervals():
    block = format_summary({**_mgsm_summary(), **META})
    lines = block.splitlines()
    assert any(ln.startswith("accuracy ") and "20/30 = 0.667 [" in ln for ln in lines)
    assert any(ln.startswith("target-alone accuracy") and "22/30 = 0.733 [" in ln for ln in lines)
    head = lines.index(next(ln for ln in lines if ln.startswith("accuracy by language")))
    assert "method" in lines[head] and "target alone" in lines[head]
    rows = {ln.split()[0]: ln for ln in lines[head + 1 : head + 4]}
    assert list(rows) == LANGS
    assert "0/10 = 0.000 [0.000, 0.308]" in rows["bn"] and "7/10 = 0.700 [0.348, 0.933]" in rows["bn"]
    assert "10/10 = 1.000 [0.692, 1.000]" in rows["de"]
    assert "identical to target alone" in block and "30/30 = 1.000" in block


def test_every_row_and_note_of_the_table_is_at_most_100_characters():
    s = {**_mgsm_summary(), **META, "tau_definition": "emitted tokens / verification steps, bonus or correction token included"}
    lines = format_summary(s).splitlines()
    table = lines[: next(i for i, ln in enumerate(lines) if ln.startswith("results:"))]
    assert table and max(map(len, table)) <= WIDTH, [ln for ln in table if len(ln) > WIDTH]


def test_a_run_of_one_group_prints_no_group_rows():
    recs = [_rec(i, True, True, lang="fr") for i in range(4)]
    block = format_summary({**build_summary(Grouped(), recs, seed=0), **META})
    assert "by language" not in block and "4/4 = 1.000" in block


def test_spec_bench_prints_speed_per_task_group():
    assert SpecBench.group_key == "task_group"
    s = {**META, "dataset": "spec_bench", "n_samples": 4, "speedup": 1.5, "tau": 2.0,
         "speed_by_task_group": {"mt_bench": {"n": 2, "tau": 2.5, "tokens_per_s": 10.0, "speedup": 1.8},
                                 "translation": {"n": 2, "tau": 1.5, "tokens_per_s": 8.0, "speedup": 1.2}}}
    lines = format_summary(s).splitlines()
    assert any(ln.startswith("speed by task group") for ln in lines)
    row = next(ln for ln in lines if ln.strip().startswith("mt_bench"))
    assert "n=2" in row and "tau 2.50" in row and "10.00 tokens/s" in row and "1.80×" in row


def test_a_graded_figure_prints_no_count():
    assert count_rate(3, 5, 0.6) == "3/5 = 0.600"
    assert count_rate(3, 5, 0.7) is None and count_rate(None, 5, 0.6) is None and count_rate(True, 1, 1.0) is None
    recs = [_rec(i, True, True, lang=LANGS[i % 3]) for i in range(6)]
    for i, r in enumerate(recs):
        r["score"] = {"rating": 5.0 + i}
        r["baseline"]["score"] = {"rating": 6.0}

    class Rated(Grouped):
        quality_key = "rating"
        quality_figure = "rating"

    s = build_summary(Rated(), recs, seed=0)
    assert s["quality_counts"] == {"n": 6, "baseline_n": 6}
    block = format_summary({**s, **META})
    row = next(ln for ln in block.splitlines() if ln.strip().startswith("bn"))
    assert "/" not in row and "(n=2)" in row


def test_a_run_served_in_batches_prints_its_throughput_with_intervals():
    s = {**_mgsm_summary(), **META}
    s["serving"] = {"batch_size": 4, "request_rate": None, "n_timed_batches": 6, "n_batches": 2, "repeats": 3, "others_share_max": 0.004,
                    "throughput_tok_s": 12.5, "throughput_tok_s_ci_low": 11.0, "throughput_tok_s_ci_high": 13.25,
                    "baseline_throughput_tok_s": 10.0, "baseline_throughput_tok_s_ci_low": None, "baseline_throughput_tok_s_ci_high": None,
                    "throughput_speedup": 1.25, "throughput_speedup_ci_low": 1.1, "throughput_speedup_ci_high": 1.4}
    text = format_summary(s)
    flat = " ".join(text.split())  # rows wrap at the table's width
    assert "batches of 4, arriving at once; 6 timed batches (2 distinct x 3 repeats)" in flat
    assert "12.50 [11.00, 13.25]" in text and "1.25× [1.10, 1.40]" in text and "10.00 (no interval" in text
    assert all(len(line) <= WIDTH for line in text.splitlines())
    assert "throughput tok/s" not in format_summary({**_mgsm_summary(), **META})  # a run of our loop: no serving rows
