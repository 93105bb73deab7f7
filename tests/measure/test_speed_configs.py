"""measure/speed_configs.py: the speed benchmark's configuration names, declared once."""

from __future__ import annotations

import re

import pytest

from loosespec_bench.measure.speed_configs import (
    CONFIGS, COUNT_TESTS, TARGET_ALONE, config_label, declared_order, spd_draft_length)


def test_every_configuration_has_its_name_overrides_and_a_label_of_its_own():
    assert TARGET_ALONE in CONFIGS and CONFIGS[TARGET_ALONE].overrides == ("method=ar",)
    for name, config in CONFIGS.items():
        assert config.name == name and config.label and config.overrides
        assert all(re.fullmatch(r"[a-z_.]+=[a-z0-9_]+", o) for o in config.overrides), name
    labels = [c.label for c in CONFIGS.values()]
    assert len(set(labels)) == len(labels)  # a reader tells every row apart


def test_the_names_folders_recorded_are_all_still_declared():
    # The committed folders (results/cpu/evidence/speed_*, results/bench/speed-evidence-2026-12-03)
    # hold these names: a name is never renamed, or those folders would read as undeclared.
    recorded = {"ar", "spd", "fly", "fly_mla", "dropmatch", "pld", "spd_k5", "spd_k10", "spd_k15", "xtok_spd", "xtok_fly"}
    assert recorded <= set(CONFIGS)


def test_the_spd_series_declares_the_k_its_overrides_set():
    series = {name: c.spd_k for name, c in CONFIGS.items() if c.spd_k is not None}
    assert sorted(series.values()) == [5, 10, 15]
    for name, k in series.items():
        assert "method=spd" in CONFIGS[name].overrides and f"drafter.k={k}" in CONFIGS[name].overrides
        assert spd_draft_length(name) == k
    assert spd_draft_length("spd") is None and spd_draft_length("spd_k7") is None  # undeclared: not in the series


def test_labels_and_order_of_declared_and_undeclared_names():
    assert config_label("spd_k15") == "SPD, K = 15" and config_label(TARGET_ALONE) == "target alone"
    assert config_label("someone_elses") == "someone_elses"  # shown as spelled
    assert declared_order({"zz", "fly_mla", TARGET_ALONE, "aa"}) == [TARGET_ALONE, "fly_mla", "aa", "zz"]


@pytest.mark.parametrize("test", COUNT_TESTS)
def test_each_count_test_compares_two_declared_configurations(test):
    a, b, count = test
    assert a in CONFIGS and b in CONFIGS and a != b and count in ("target_forwards", "draft_forwards")
