"""`scale=paper|cpu`: one experiment file per paper run, shrunk to this machine by `scale=cpu`."""

from __future__ import annotations

import pytest

from loosespec_bench.config import group_choices
from loosespec_bench.plan import expand, settings

from .conftest import shared_data_dir

TWINS = [e[: -len("_cpu")] for e in group_choices("experiment") if e.endswith("_cpu")]


def _points(overrides: list[str]) -> list[tuple]:
    """Every sweep point of `-m OVERRIDES` as sorted (key, value) pairs of what it computes."""
    _, jobs = expand([*overrides, f"paths.data_dir={shared_data_dir()}"])
    out = []
    for _, cfg in jobs:
        s = settings(cfg)
        s.update(limit=cfg.dataset.limit, languages=list(cfg.dataset.get("languages") or []))
        out.append(tuple(sorted((k, repr(v)) for k, v in s.items())))
    return sorted(out)


@pytest.mark.parametrize("name", TWINS)
def test_scale_cpu_composes_what_the_cpu_twin_composed(name):
    assert _points([f"experiment={name}", "scale=cpu"]) == _points([f"experiment={name}_cpu"])
