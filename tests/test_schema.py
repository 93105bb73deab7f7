"""The report schema: figures with their interval keys, knobs with columns and labels, declared
once; an undeclared rule knob is found in a run's config with its own name."""

from __future__ import annotations

import pytest

from loosespec_bench.schema import (
    FIGURE,
    KNOB_BY_KEY,
    format_interval,
    format_value,
    has_intervals,
    interval_of,
    knobs_of,
    label_parts,
    number,
)


def test_renames_are_declared_once_with_their_labels():
    assert KNOB_BY_KEY["method.window"].column == "W" and KNOB_BY_KEY["method.window"].shown(6.0) == "W=6"
    assert KNOB_BY_KEY["method.p"].column == "dropout_p" and KNOB_BY_KEY["method.p"].shown(0.3) == "p=0.3"
    assert KNOB_BY_KEY["method.theta"].shown(0.3) == "θ=0.3"
    assert KNOB_BY_KEY["method.criterion"].shown("naive") == "naive"  # the bare value
    assert KNOB_BY_KEY["method.n_paths"].shown(5.0) == "N=5"


@pytest.mark.parametrize("key, value", [("method.mode", "code"), ("method.no_window", False), ("method.majority", 0.5),
                                        ("generation.temperature", 0.0), ("method.theta", None), ("method.theta", float("nan"))])
def test_neutral_and_missing_values_stay_out_of_labels(key, value):
    assert KNOB_BY_KEY[key].shown(value) is None


def test_a_flag_knob_shows_its_text_when_true():
    assert KNOB_BY_KEY["method.no_window"].shown(True) == "no window"


def test_an_undeclared_rule_knob_gets_its_own_column_and_label():
    flat = {"method.name": "top2", "method._target_": "ext.Top2", "method.top": 2, "method.nested.x": 1,
            "method.window": 6, "drafter.k": 3, "method.tau": 0.1}
    knobs = {k.key: k for k in knobs_of(flat)}
    assert knobs["method.top"].column == "top" and knobs["method.top"].numeric
    assert knobs["method.tau"].column == "method_tau"  # never takes over a figure's column
    assert "method.name" not in knobs and "method._target_" not in knobs and "method.nested.x" not in knobs
    assert knobs["method.window"].column == "W"
    row = {"method": "top2", "top": 2, "extra_knobs": ["top"]}
    assert label_parts(row) == ["top=2"]
    assert label_parts(row, skip=("top",)) == []


def test_knobs_of_one_rule_stay_out_of_another_rules_label():
    assert label_parts({"method": "spd", "theta": 0.3, "W": 6}) == []
    assert label_parts({"method": "fly", "theta": 0.3, "W": 6.0, "mode": "paper"}) == ["θ=0.3", "W=6", "mode=paper"]


def test_formats_and_intervals():
    assert format_value(1.4249, "speedup") == "1.42×" and format_value(0.3333, "score") == "0.333"
    assert format_value(-0.333, "diff") == "-0.333" and format_value(0.0, "diff") == "+0.000"
    assert format_value(0.0164, "percent") == "1.64%" and format_interval(0.00857, 0.0107, "percent") == "[0.86, 1.07]%"
    assert format_interval(1.214, 1.634, "speedup") == "[1.21, 1.63]"
    assert interval_of({"speedup_ci_low": 1.2, "speedup_ci_high": "x"}, "speedup") == (1.2, None)
    assert FIGURE["speedup_median"].ci_sources == ("speedup_median_of_samples_ci_low", "speedup_median_of_samples_ci_high")


@pytest.mark.parametrize("value, expected", [(1, 1.0), (True, None), ("1", None), (float("inf"), None), (None, None), ([1], None)])
def test_number_accepts_finite_numbers_only(value, expected):
    assert number(value) == expected


def test_old_summaries_are_told_from_new_ones():
    assert not has_intervals({"speedup": 1.2, "retention_ci_low": 0.5})  # the older retention interval alone
    assert has_intervals({"speedup": 1.2, "speedup_ci_low": None, "ci_level": 0.95})


def test_a_rules_knobs_are_read_from_its_params_class():
    """schema.KNOBS restates nothing: a rule's Params field with a Shown becomes a Knob (column,
    label, neutral value = the knob's default where declared so, numeric from its type), shared
    by every rule whose Params has it; two rules showing one key differently is refused."""
    from dataclasses import dataclass

    from loosespec_bench.params import DEFAULT, Shown, integer, knob
    from loosespec_bench.schema import KNOBS, rule_knobs
    from loosespec_bench.verifiers.base import VerifierParams
    from loosespec_bench.verifiers.fly import FLyParams

    assert KNOB_BY_KEY["method.top_k"].hidden == FLyParams().top_k  # the neutral value is FLy's default
    assert KNOBS[0].key == "drafter.k" and KNOBS[-1].key == "generation.temperature"

    @dataclass(frozen=True)
    class ToyParams(VerifierParams):
        depth: int = knob(2, integer(1), "the depth", shown=Shown("toy_depth", "d", "toy depth", neutral=DEFAULT))
        width: int = knob(3, integer(1))  # no Shown: labelled by its name (knobs_of)

    class Toy:  # a rule's declarations, not a Verifier subclass: verifiers.rules() stays the package's
        Params = ToyParams
        config_names = ("toy", "toy2")

    (k,) = rule_knobs([Toy])
    assert (k.key, k.column, k.label, k.hidden, k.numeric, k.methods) == ("method.depth", "toy_depth", "d", 2, True, ("toy", "toy2"))
    assert k.shown(2) is None and k.shown(4) == "d=4"

    @dataclass(frozen=True)
    class OtherParams(VerifierParams):
        depth: int = knob(2, integer(1), shown=Shown("depth", "depth"))

    class Other:
        Params = OtherParams
        config_names = ("other",)

    with pytest.raises(TypeError, match="method.depth"):
        rule_knobs([Toy, Other])
