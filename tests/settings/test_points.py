"""settings/points.py: a command line's points as Hydra composes them. A point that does not
compose is a CompositionError carrying Hydra's exception and the point (the advice reads those,
not the message); a settings error inside a sweep keeps its type and gains the point."""

from __future__ import annotations

import pytest
from hydra.errors import MissingConfigException

from loosespec_bench.settings.checks import UnknownSetting
from loosespec_bench.settings.points import CompositionError, at_point, compose_points, precheck_points


def test_a_missing_option_is_a_composition_error_with_hydras_exception():
    with pytest.raises(CompositionError) as info:
        compose_points(["hydra/launcher=nope"], multirun=False)
    assert isinstance(info.value.cause, MissingConfigException) and info.value.cause.missing_cfg_file == "hydra/launcher/nope"
    assert info.value.point is None


def test_a_key_a_class_does_not_take_is_an_unknown_setting_named_by_its_key_at_its_point():
    with pytest.raises(UnknownSetting) as info:
        precheck_points(["pair=tiny", "method=spd,ar", "+method.theta=0.3"], multirun=True, resources=False)
    assert info.value.key == "method.theta" and info.value.point == "method=spd"
    assert str(info.value).startswith("sweep point method=spd: method.theta is not a setting of method=spd")


def test_at_point_keeps_the_type_and_fields():
    err = at_point(UnknownSetting("drafter.K is not a setting of drafter=model", "drafter.K"), "drafter.k=3")
    assert isinstance(err, UnknownSetting) and err.key == "drafter.K" and err.point == "drafter.k=3"
    assert str(err) == "sweep point drafter.k=3: drafter.K is not a setting of drafter=model"
