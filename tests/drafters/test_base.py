"""What drafter classes declare from their settings alone: tree drafts and K."""

from __future__ import annotations

from loosespec_bench.drafters import Eagle3Drafter, LookaheadDrafter, ModelDrafter, PromptLookupDrafter


def test_chain_drafters_draft_k_and_no_tree():
    for cls in (ModelDrafter, PromptLookupDrafter):
        assert not cls.drafts_tree({"k": 5}) and cls.draft_length({"k": 5}) == 5


def test_lookahead_drafts_a_tree_of_k():
    assert LookaheadDrafter.drafts_tree({"k": 4}) and LookaheadDrafter.draft_length({"k": 4}) == 4


def test_an_eagle_tree_is_as_long_as_its_longest_path():
    assert Eagle3Drafter.drafts_tree({"tree": True, "depth": 7, "k": 5})
    assert Eagle3Drafter.draft_length({"tree": True, "depth": 7, "k": 5}) == 8  # top_k roots, then 7 expansions
    assert Eagle3Drafter.draft_length({"tree": False, "depth": 7, "k": 5}) == 5
