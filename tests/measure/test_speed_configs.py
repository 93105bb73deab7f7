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


# ---- every benchmark's names, declared once (issue 71 item 4) -----------------------------------
from loosespec_bench.measure import speed_configs as configs  # noqa: E402


def test_every_declared_name_has_a_label_of_its_own_and_is_ours_or_beside_ours():
    assert list(configs.DECLARED)[: len(CONFIGS)] == list(CONFIGS)  # the speed benchmark's first, in its order
    labels = [c.label for c in configs.DECLARED.values()]
    assert len(set(labels)) == len(labels)
    for name, config in configs.DECLARED.items():
        assert config.name == name and config.label
        if config.beside is None:  # ours: lower case words joined by _, run by the harness's overrides
            assert re.fullmatch(r"[a-z0-9_]+", name) and config.overrides, name
            assert all(re.fullmatch(r"[a-z_.]+=[a-z0-9_]+", o) for o in config.overrides), name
            assert sum(o.startswith("method=") for o in config.overrides) == 1, name
        else:  # a peer's: its engine's prefix, beside a configuration of ours, no harness overrides
            assert re.fullmatch(r"(hf|vllm)-[a-z0-9-]+", name) and config.overrides == (), name
            assert configs.DECLARED[config.beside].beside is None, name


def test_every_alias_maps_to_a_declared_name_and_shadows_none():
    assert configs.ALIASES == {"fly-mla": "fly_mla", "spd-mla": "spd_mla", "fly-mla-hf": "fly_mla_hf",
                               "eagle3-tree": "eagle3_tree"}
    assert configs.BATCH_OLD_NAMES == {"fly": "fly_mla"}
    for old, new in (*configs.ALIASES.items(), *configs.BATCH_OLD_NAMES.items()):
        assert new in configs.DECLARED, old
    assert not set(configs.ALIASES) & set(configs.DECLARED)  # an alias never names another configuration
    # "fly" is FLy with the draft model everywhere: FLy + MLA only in the batch bench's old files.
    assert configs.BATCH_OLD_NAMES.keys() <= configs.DECLARED.keys() and configs.config_label(configs.FLY) == "FLy"


def test_canonical_maps_old_spellings_and_keeps_any_other_name():
    assert configs.canonical("fly-mla") == configs.canonical("fly_mla") == configs.FLY_MLA
    assert configs.canonical("fly") == configs.FLY  # everywhere but the batch bench's old files
    assert configs.canonical("fly", configs.BATCH_OLD_NAMES) == configs.FLY_MLA
    assert configs.canonical("hf-ar") == configs.HF_AR and configs.canonical("cfg-spd") == "cfg-spd"  # undeclared: as spelled


def test_pick_reads_a_commands_list_through_the_declaration():
    allowed = (configs.TARGET_ALONE, configs.FLY_MLA, configs.EAGLE3_TREE)
    assert configs.pick(["ar", "fly-mla", "eagle3-tree", "fly_mla", "nope"], allowed) == (
        ["ar", "fly_mla", "eagle3_tree"], ["nope"])
    assert configs.pick(["fly"], allowed) == ([], ["fly"])  # FLy (draft model) is not among them
    assert configs.pick(["fly"], allowed, configs.BATCH_OLD_NAMES) == (["fly_mla"], [])


def test_labels_of_every_benchmarks_names():
    assert configs.config_label("fly_mla") == "FLy + MLA" and configs.config_label("vllm-spd") == "SPD on vLLM"
    assert configs.config_label("fly-mla") == "fly-mla"  # a reader maps an old spelling first (canonical)
