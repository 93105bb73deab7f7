"""The validation room: every setting's range declared in exactly one place, read by the
pre-check and by the constructors alike (issue 22 item 1)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from loosespec_bench.settings.checks import HARNESS_RULES, target_class, validate
from loosespec_bench.settings.run_settings import SECTIONS, RootParams
from loosespec_bench.engines.settings import VLLMParams
from loosespec_bench.settings.config import ALL_GROUPS, CONF_DIR, GROUPS, group_choices
from loosespec_bench.errors import ConfigError
from loosespec_bench.params import declared_rules, params_of, rule_sources

from ..conftest import compose_config

PKG = Path(__file__).resolve().parent.parent.parent / "loosespec_bench"


def _classes() -> dict[tuple[str, str], type]:
    """(group, option) -> the class its `_target_` names, for every packaged option."""
    out = {}
    for group in ("method", "drafter", "dataset"):
        for name in group_choices(group):
            node = OmegaConf.to_container(compose_config([f"{group}={name}"])[group], resolve=True)
            out[(group, name)] = target_class(group, node)
    return out


CLASSES = _classes()


@pytest.mark.parametrize("key", sorted(CLASSES), ids=["=".join(k) for k in sorted(CLASSES)])
def test_each_setting_has_exactly_one_declaration(key):
    group, _ = key
    cls = CLASSES[key]
    sources = rule_sources(params_of(cls) or cls)
    assert sources or params_of(cls) is not None, f"{cls.__name__} declares neither a Params dataclass nor SETTINGS"
    twice = {k: [c.__name__ for c in v] for k, v in sources.items() if len(v) != 1}
    assert twice == {}, f"{cls.__name__}: ranges declared in several classes {twice}"
    # ...and not again in the pre-check's own tables (those hold the plain sections only).
    assert not set(sources) & set(HARNESS_RULES), set(sources) & set(HARNESS_RULES)


def test_no_range_message_is_written_twice_in_the_package():
    """A hand-written check of a declared setting (`f"drafter.k={k!r} must be ..."`) may exist
    once at most (a cross rule); drafter.k used to be checked in three files."""
    sources = {p: p.read_text() for p in PKG.rglob("*.py")}
    keys = {(g, k) for (g, _), cls in CLASSES.items() for k in declared_rules(cls)}
    keys |= {("", k) for k in declared_rules(RootParams)} | {("engine", k) for k in declared_rules(VLLMParams)}
    keys |= {(section, k) for section, params in SECTIONS.items() for k in declared_rules(params)}
    counts = {}
    for group, key in sorted(keys):
        where = f"{group}.{key}" if group else key
        # A message that restates a range: `"<key>={...} must be ..."` (cross rules name two keys).
        pattern = re.compile(r"""f?["']""" + re.escape(where) + r"""=\{[^}]*\} must be""")
        hits = [str(p.relative_to(PKG)) for p, text in sources.items() for _ in pattern.finditer(text)]
        if len(hits) > 1:
            counts[where] = hits
    assert counts == {}, counts


def test_config_groups_are_spelled_once():
    """Read from config.yaml's defaults list: every chosen group has a folder of options."""
    defaults = OmegaConf.load(CONF_DIR / "config.yaml").defaults
    assert len(ALL_GROUPS) == sum(1 for d in defaults if not isinstance(d, str) and "/" not in next(iter(d)))
    for group in GROUPS:
        assert (CONF_DIR / group).is_dir(), group
    assert "pair_method" in ALL_GROUPS and "pair_method" not in GROUPS  # composed, never chosen


@pytest.mark.parametrize(
    "cls_path, knobs, override",
    [
        ("loosespec_bench.verifiers.fly.FLy", {"window": 0}, ["method=fly", "method.window=0"]),
        ("loosespec_bench.verifiers.fly.FLy", {"mode": "bogus"}, ["method=fly", "method.mode=bogus"]),
        ("loosespec_bench.verifiers.dropmatch.DropMatch", {"p": 1.0}, ["method=dropmatch", "method.p=1.0"]),
        ("loosespec_bench.drafters.PromptLookupDrafter", {"k": 0}, ["drafter=pld", "drafter.k=0"]),
        ("loosespec_bench.drafters.LookaheadDrafter", {"k": 1}, ["drafter=lookahead", "drafter.k=1"]),
    ],
)
def test_the_constructor_and_the_precheck_give_the_same_message(cls_path, knobs, override):
    from hydra._internal.utils import _locate

    with pytest.raises(ConfigError) as built:
        _locate(cls_path)(**knobs)
    with pytest.raises(ConfigError) as checked:
        validate(compose_config(override))
    assert str(built.value) == str(checked.value)


def test_eagle_depth_is_at_least_one_everywhere():
    from loosespec_bench.drafters.eagle.drafter import Eagle3Params

    with pytest.raises(ConfigError, match="drafter.depth=0"):
        Eagle3Params(depth=0)
    with pytest.raises(ConfigError, match="drafter.depth=0"):
        validate(compose_config(["drafter=eagle3_tree", "drafter.depth=0"]))
    Eagle3Params(depth=1)


def test_target_is_resolved_to_the_class_not_its_spelling():
    """Another spelling of the same class (module path vs package re-export) is checked the same."""
    a = compose_config(["drafter=pld", "drafter.k=0"])
    b = compose_config(["drafter=pld", "drafter.k=0", "drafter._target_=loosespec_bench.drafters.lookup.PromptLookupDrafter"])
    msgs = []
    for cfg in (a, b):
        with pytest.raises(ConfigError) as err:
            validate(cfg)
        msgs.append(str(err.value))
    assert msgs[0] == msgs[1]


@pytest.mark.parametrize("overrides, fragment", [
    (["method=ar", "method.uses_drafter=true"], "TargetAlone is the target alone"),
    (["method=spd", "+method.uses_drafter=false"], "SPD verifies a drafter's drafts"),
    (["method=fly", "+method.uses_drafter=false"], "FLy verifies a drafter's drafts"),
])
def test_whether_a_method_uses_a_drafter_is_its_rule_classs_to_say(overrides, fragment):
    """The target alone is recognised by its class (Verifier.target_alone), never by its name."""
    with pytest.raises(ConfigError, match=fragment):
        validate(compose_config(overrides))
