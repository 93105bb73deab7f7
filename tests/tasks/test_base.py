"""What tasks declare for the pre-check and the planner: setting choices, sizes, turns."""

from __future__ import annotations

from omegaconf import OmegaConf

from loosespec_bench.tasks.gsm8k import GSM8K
from loosespec_bench.tasks.mgsm import LANGUAGES, MGSM
from loosespec_bench.tasks.mmlu import MMLU
from loosespec_bench.tasks.mt_bench import KoMTBench, MTBench
from loosespec_bench.tasks.niah import NIAH


def test_the_declared_size_is_the_tasks_own_data_set_only():
    assert GSM8K.size_of({"name": "gsm8k"}) == (1319, True)
    # acp_prog_gen reuses the GSM8K class for other data: its size is unknown, not GSM8K's.
    assert GSM8K.size_of({"name": "acp_prog_gen"}) == (None, False)


def test_approximate_sizes_and_category_filters_are_not_exact():
    assert MMLU.size_of({"name": "mmlu"}) == (1531, False)
    assert MTBench.size_of(OmegaConf.create({"name": "mt_bench", "categories": ["math"]})) == (80, False)  # an upper bound
    assert KoMTBench.size_of({"name": "komt_bench"}) == (80, True) and KoMTBench.turns_per_sample == 2.0


def test_sizes_that_follow_the_settings():
    assert MGSM.size_of({"languages": ["en", "fr"]}) == (500, True)
    assert MGSM.size_of({"languages": "en,fr,de"}) == (750, True)  # the comma form the constructor reads
    assert MGSM.size_of({"languages": ["all"]}) == (250 * len(LANGUAGES), True)
    assert NIAH.size_of({"context_lengths": [1024, 2048], "depths": [0, 50], "repeats": 3}) == (12, True)


def test_mgsm_declares_its_language_choices():
    assert set(MGSM.setting_choices["languages"]) == {*LANGUAGES, "all"}
    assert GSM8K.setting_choices == {}
