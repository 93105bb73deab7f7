"""build.py: one instantiate for every config node, and the drafter factory."""

from __future__ import annotations

import pytest
import torch
from omegaconf import OmegaConf

from loosespec_bench.build import BOOKKEEPING_KEYS, build_drafter, build_verifier, instantiate
from loosespec_bench.decoding import generate
from loosespec_bench.drafters import ModelDrafter, PromptLookupDrafter
from loosespec_bench.errors import ConfigError
from loosespec_bench.models import load_model
from loosespec_bench.step import Draft
from loosespec_bench.verifiers import DropMatch, SPD, Verifier

from .conftest import compose_config


def test_instantiate_strips_bookkeeping_but_keeps_the_drafters_k():
    node = OmegaConf.create({"_target_": "loosespec_bench.drafters.PromptLookupDrafter", "k": 7, "max_ngram": 2,
                             **{key: True for key in BOOKKEEPING_KEYS}})
    d = instantiate(node)
    assert isinstance(d, PromptLookupDrafter) and d.k == 7 and d.max_ngram == 2
    assert instantiate({"_target_": "loosespec_bench.drafters.PromptLookupDrafter", "name": "pld"}, k=3).k == 3


def test_build_drafter_and_verifier_from_the_config():
    target = load_model("tiny:0", dtype="float32")
    cfg = compose_config(["experiment=smoke_tiny", "drafter=model", "drafter.k=3", "method=dropmatch"])
    drafter = build_drafter(cfg, target)
    assert isinstance(drafter, ModelDrafter) and drafter.k == 3  # the draft model loaded, K from the yaml
    assert drafter.modules() == [drafter.model]
    assert isinstance(build_verifier(cfg), DropMatch)
    pld = build_drafter(compose_config(["experiment=smoke_tiny", "drafter=pld"]), target)
    assert isinstance(pld, PromptLookupDrafter) and pld.k == 10 and pld.modules() == []
    assert build_drafter(compose_config(["experiment=smoke_tiny", "method=ar"]), target) is None


def test_the_loop_asks_the_verifier_for_draft_probs(tiny_pair):
    """want_probs reaches propose() from verifier.needs_draft_probs, with no argument threaded."""
    target, draft, tok = tiny_pair

    class Probing(SPD):
        needs_draft_probs = True

    class Recording(ModelDrafter):
        def propose(self, tokens, k, **kw) -> Draft:
            self.asked = getattr(self, "asked", []) + [(k, kw["want_probs"])]
            return super().propose(tokens, k, **kw)

    prompt = torch.tensor(tok("Question: 2 + 2 =", add_special_tokens=False).input_ids)
    for verifier, want in ((SPD(), False), (Probing(), True)):
        d = Recording(draft, k=4)
        generate(target, prompt, verifier=verifier, drafter=d, max_new_tokens=7)
        assert {w for _, w in d.asked} == {want}
        assert max(k for k, _ in d.asked) == 4 and d.asked[-1][0] < 4  # drafter.k, capped near the budget
    assert Verifier.needs_draft_probs is False and Verifier.needs_hidden is False


def test_a_drafter_refuses_a_draft_length_below_one():
    for bad in (0, -1, 2.5, True):
        with pytest.raises(ConfigError, match="drafter.k"):
            PromptLookupDrafter(k=bad)


def test_check_artefacts_names_a_missing_judge(tmp_path):
    from loosespec_bench.build import check_artefacts
    from loosespec_bench.errors import ConfigError

    from .conftest import compose_config

    cfg = compose_config(["pair=tiny", "method=autojudge", f"method.judge_path={tmp_path}"])
    with pytest.raises(ConfigError, match="no trained judge"):
        check_artefacts(cfg)
    check_artefacts(compose_config(["pair=tiny", "method=spd"]))  # rules without artefacts pass
