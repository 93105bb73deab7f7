"""settings/advice.py keyed on what errors and the config tree say, not on Hydra's English (issue 71
item 5): the advice for `+key`, `~key` and `+group` is recomputed from the tree whatever words
Hydra's exception carries; _missing_key says which kind of advice it gives, and callers decide on
the kind; an experiment sized for a node's GPUs refused at scale=cpu (flags: test_flags.py)."""

from __future__ import annotations

import pytest

from loosespec_bench.errors import ConfigError
from loosespec_bench.settings import advice
from loosespec_bench.settings.points import CompositionError


def _composition_error(words: str) -> CompositionError:
    from hydra.errors import ConfigCompositionException

    # Hydra's exception type with words Hydra never wrote: the advice must not depend on them.
    return CompositionError(words, ConfigCompositionException(words))


@pytest.mark.parametrize("overrides,expected", [
    (["+seed=3"], "+seed=3: seed is already a setting; drop the +: seed=3"),
    (["+drafter=pld"], "+drafter=pld: drafter already has an option; drop the +: drafter=pld"),
    (["method=spd", "~method.theta"], "~method.theta: nothing to remove (method.theta is not a setting of method=spd"),
])
def test_conflicts_are_read_from_the_tree_not_from_hydras_words(overrides, expected):
    said = advice.explain_composition_error(_composition_error("a message in other words"), overrides)
    assert said.startswith(expected), said


def test_an_override_that_conflicts_with_nothing_leaves_the_message():
    # `+paper_dataset=mgsm`: the group has no option by default, so adding one is no conflict.
    err = _composition_error("something else went wrong")
    assert advice.explain_composition_error(err, ["+paper_dataset=mgsm"]) == "something else went wrong"


@pytest.mark.parametrize("key,kind", [
    ("dataset.limt", "near"),
    ("method.theta", "elsewhere"),
    ("limit", "top"),
    ("foo", "unknown"),
])
def test_missing_key_says_its_kind(key, kind):
    with advice._composer("config") as compose:
        cfg = compose([])
        found = advice._missing_key(key, "1", cfg, compose, advice._dirs([]))
    assert found.kind == kind, found.text
    assert str(found) == found.text


def test_a_node_sized_experiment_at_scale_cpu_is_refused_from_the_configs():
    from omegaconf import OmegaConf

    from loosespec_bench.settings.config import CONF_DIR, group_choices

    with pytest.raises(ConfigError, match="is sized for pair=llama31_8b_405b"):
        advice.check_scale_fits(["-m", "experiment=replicate_fly_405b", "scale=cpu"])
    advice.check_scale_fits(["experiment=replicate_fly_405b"])  # at its own (paper) scale: runs on GPUs
    advice.check_scale_fits(["experiment=fly_main", "scale=cpu"])  # sized for cpu by its own file
    # Every experiment without a CPU file of its own whose pair is on one device passes (the
    # refusal reads the pair's device_map, never an experiment's name).
    for name in group_choices("experiment"):
        if (CONF_DIR / "experiment_scale" / "cpu" / f"{name}.yaml").is_file():
            continue
        with advice._composer("config") as compose:
            device_map = OmegaConf.select(compose([f"experiment={name}"]), "pair.target.device_map", default=None)
        if device_map is None:
            advice.check_scale_fits([f"experiment={name}", "scale=cpu"])
        else:
            with pytest.raises(ConfigError, match=f"experiment={name} scale=cpu"):
                advice.check_scale_fits([f"experiment={name}", "scale=cpu"])
