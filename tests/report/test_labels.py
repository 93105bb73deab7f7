"""report/labels.py: a method's name and kind are asked of its rule's class (verifiers.rule_class),
never read off the name; a name no rule claims prints as itself."""

from __future__ import annotations

import pytest

pytest.importorskip("pandas")

from loosespec_bench.report.labels import (  # noqa: E402
    is_exact, is_lossless, is_rule, is_target_alone, method_label, rule_name, rule_of,
)
from loosespec_bench.verifiers import SPD, FLy, TargetAlone  # noqa: E402


def test_a_method_prints_as_its_rules_display_name():
    assert rule_name("fly") == "FLy" and rule_name("spd") == "SPD" and rule_name("ar") == "target alone"
    assert rule_name("dropmatch_autojudge") == "DropMatch + AutoJudge"


def test_a_name_no_rule_claims_prints_as_itself_and_is_neither_lossless_nor_the_target_alone():
    # A user's method, or a folder from elsewhere: data, shown by its name.
    assert rule_of("my_rule") is None and rule_name("my_rule") == "my_rule"
    assert not is_lossless("my_rule") and not is_target_alone("my_rule") and not is_exact("my_rule")
    assert rule_of(None) is None and rule_of(float("nan")) is None
    assert method_label({"method": "my_rule", "drafter": "model", "K": 5}) == "my_rule (model, K=5)"


def test_lossless_target_alone_and_exact_come_from_the_class():
    assert is_lossless("spd") and is_lossless("ar") and not is_lossless("fly") and not is_lossless("dropmatch")
    assert is_target_alone("ar") and not is_target_alone("spd")
    assert is_exact("spd") and not is_exact("ar") and not is_exact("fly")
    # The class itself, not a subclass: the target alone is SPD's subclass but not SPD.
    assert rule_of("ar") is TargetAlone and is_rule("spd", SPD) and not is_rule("ar", SPD) and is_rule("fly", FLy)


@pytest.mark.parametrize("row, label", [
    ({"method": "spd", "drafter": "eagle3"}, "EAGLE-3"),
    ({"method": "dropmatch", "drafter": "eagle3"}, "EAGLE-3 + DropMatch"),
    ({"method": "my_rule", "drafter": "eagle2"}, "EAGLE-2 + my_rule"),
    ({"method": "spd", "drafter": "pld", "K": 10}, "PLD (K=10)"),
    ({"method": "fly", "drafter": "lookahead"}, "Lookahead + FLy"),
    ({"method": "spd", "drafter": "model", "K": 15, "engine": "vllm"}, "SPD on vLLM (model, K=15)"),
])
def test_the_drafter_names_exact_speculative_decoding(row, label):
    assert method_label(row) == label


def test_a_data_set_is_named_by_its_task_class():
    """The display name is declared once, on the task class (Task.display_name), and every
    table, figure and caption asks for it through labels.dataset_label."""
    from loosespec_bench.report.labels import dataset_label
    from loosespec_bench.tasks.mbpp_plus import MBPPPlus
    from loosespec_bench.tasks.mgsm import MGSM

    assert dataset_label("mbpp_plus") == MBPPPlus.display_name == "MBPP+"
    assert dataset_label("mgsm") == "MGSM"
    # A prompt that is not the papers' (index.dataset_name) is named by the class's labels.
    assert dataset_label("mgsm (native_cot prompt)") == f"MGSM ({MGSM.prompt_labels['native_cot']} prompt)"
    # An lm-eval set (acp_prog_gen extends lm_eval) and a set this install does not file keep
    # their names; a name that is not a file name is never looked up as a path.
    assert [dataset_label(n) for n in ("acp_prog_gen", "someone_elses", "../x")] == ["acp_prog_gen", "someone_elses", "../x"]


def test_every_packaged_data_set_has_a_display_name():
    from loosespec_bench.settings.config import CONF_DIR, dataset_display_name

    names = sorted(p.stem for p in (CONF_DIR / "dataset").glob("*.yaml"))
    unnamed = [n for n in names if dataset_display_name(n) == n and n not in ("lm_eval", "acp_prog_gen")]
    assert unnamed == []
