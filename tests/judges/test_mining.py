"""AutoJudge's mining (judges/mining.py) on hand-built "models" whose outputs the test controls."""

from __future__ import annotations

import json

import numpy as np
import pytest

from loosespec_bench.judges.mining import MinedStore, feature_rows, first_mismatch, load_mined, mine_problem, problem_record

EOS = 0


def answer_of(y):
    """The final answer of a hand-built response: its last token before EOS."""
    body = [t for t in y if t != EOS]
    return body[-1] if body else None


class Scripted:
    """A target that continues with scripted tails and a draft with scripted argmaxes."""

    def __init__(self, draft_by_response, tails):
        self.draft_by_response = draft_by_response  # tuple(response) -> draft argmax per position
        self.tails = tails  # tuple(prefix) -> continuation tokens
        self.continue_calls = []
        self.bases = []
        self.draft_calls = 0

    def draft_argmax(self, y):
        self.draft_calls += 1
        return list(self.draft_by_response[tuple(y)])

    def continue_greedy(self, prefix, budget, base):
        assert list(base[: len(prefix) - 1]) == list(prefix[:-1])  # the prefix is cut from the answer it names
        self.bases.append(tuple(base))
        self.continue_calls.append((tuple(prefix), budget))
        return list(self.tails[tuple(prefix)])[:budget]


def mine(s, response, max_new=8, **kw):
    return mine_problem(response, draft_argmax=s.draft_argmax, continue_greedy=s.continue_greedy, answer_of=answer_of,
                        same_answer=lambda y, ref: answer_of(y) == ref, max_new_tokens=max_new, eos_ids=[EOS], **kw)


def test_unimportant_then_important_follows_the_changed_answer():
    # Target answers 13. The draft differs at 1 (21) and 3 (23). Substituting 21 and continuing
    # still ends in 13: unimportant, and the search goes on along that continuation. Substituting
    # 23 ends the answer at 23: important, the answer stays.
    s = Scripted(
        draft_by_response={(10, 11, 12, 13, EOS): (10, 21, 12, 23, EOS), (10, 21, 12, 13, EOS): (10, 21, 12, 23, EOS)},
        tails={(10, 21): (12, 13, EOS), (10, 21, 12, 23): (EOS,)},
    )
    p = mine(s, [10, 11, 12, 13, EOS])
    assert [(m.position, m.important, m.target_token, m.draft_token) for m in p.mismatches] == [(1, False, 11, 21), (3, True, 13, 23)]
    assert p.target_answer == 13 and [m.answer_after for m in p.mismatches] == [13, 23]
    assert p.final_response == [10, 21, 12, 13, EOS]
    assert p.continuations == 2 and p.stop == "no_mismatch_left"
    # The continuation budget is what is left of max_new_tokens after the prefix.
    assert s.continue_calls == [((10, 21), 6), ((10, 21, 12, 23), 4)]
    # Each continuation is told the answer it was cut from: the target's, then the new base.
    assert s.bases == [(10, 11, 12, 13, EOS), (10, 21, 12, 13, EOS)]
    # The draft is asked again only after the answer changed (start + after the unimportant one).
    assert s.draft_calls == 2


def test_feature_rows_put_the_draft_token_in_with_the_prefix_the_decision_saw():
    s = Scripted(
        draft_by_response={(10, 11, 12, 13, EOS): (10, 21, 12, 23, EOS), (10, 21, 12, 13, EOS): (10, 21, 12, 23, EOS)},
        tails={(10, 21): (12, 13, EOS), (10, 21, 12, 23): (EOS,)},
    )
    p = mine(s, [10, 11, 12, 13, EOS])
    rows = feature_rows(p)
    assert rows[0] == (p.final_response, 1) and rows[0][0][1] == 21  # unimportant: the final answer holds it
    assert rows[1] == ([10, 21, 12, 23], 3)  # important: cut after the mismatch, draft token in


def test_no_mismatch_means_nothing_mined():
    s = Scripted(draft_by_response={(10, 11, EOS): (10, 11, EOS)}, tails={})
    p = mine(s, [10, 11, EOS])
    assert p.mismatches == [] and p.continuations == 0 and p.stop == "no_mismatch_left"


def test_a_substituted_eos_ends_the_search_without_a_continuation():
    # The draft would stop at position 1: the alternative is the answer cut there (answer 10 != 12).
    s = Scripted(draft_by_response={(10, 11, 12, EOS): (10, EOS, 12, 99)}, tails={})
    p = mine(s, [10, 11, 12, EOS])
    assert [(m.position, m.important) for m in p.mismatches] == [(1, True)]
    assert s.continue_calls == [] and p.stop == "eos_substituted"


def test_ties_in_the_answer_are_unimportant():
    # A different path to the same final answer counts as unimportant (the scorer's equality).
    s = Scripted(draft_by_response={(10, 12, EOS): (11, 12, EOS), (11, 12, EOS): (11, 12, EOS)}, tails={(11,): (12, EOS)})
    p = mine(s, [10, 12, EOS])
    assert [(m.position, m.important) for m in p.mismatches] == [(0, False)]


def test_out_of_time_returns_the_problem_unfinished():
    s = Scripted(draft_by_response={(10, 11, EOS): (10, 21, EOS)}, tails={})
    p = mine(s, [10, 11, EOS], out_of_time=lambda: True)
    assert p.stop == "deadline" and p.mismatches == []


def test_first_mismatch_respects_the_left_border():
    assert first_mismatch([1, 2, 3], [9, 2, 9], 0) == 0
    assert first_mismatch([1, 2, 3], [9, 2, 9], 1) == 2
    assert first_mismatch([1, 2, 3], [9, 2, 9], 3) is None


def _record(pid, n):
    return {"id": pid, "mismatches": [{"position": i, "important": bool(i % 2)} for i in range(n)]}


def test_store_appends_resumes_and_repairs_a_crash(tmp_path):
    meta = {"hidden_size": 3, "pair": "tiny"}
    store = MinedStore(tmp_path, meta)
    store.append(_record("a", 2), np.arange(6, dtype=np.float32).reshape(2, 3))
    # A crash after the feature rows of "b" but before its line, and half a line on disk.
    with (tmp_path / "features.f32").open("ab") as f:
        f.write(np.ones((4, 3), dtype=np.float32).tobytes())
    with (tmp_path / "mined.jsonl").open("a") as f:
        f.write('{"id": "b", "mism')
    again = MinedStore(tmp_path, meta)
    assert again.done_ids == {"a"}
    assert (tmp_path / "features.f32").stat().st_size == 2 * 3 * 4
    again.append(_record("c", 1), np.full((1, 3), 7, dtype=np.float32))
    records, X, _ = load_mined(tmp_path)
    assert [r["id"] for r in records] == ["a", "c"]
    assert X.tolist() == [[0, 1, 2], [3, 4, 5], [7, 7, 7]]


def test_store_refuses_other_settings(tmp_path):
    MinedStore(tmp_path, {"hidden_size": 3, "pair": "tiny"})
    with pytest.raises(ValueError, match="pair"):
        MinedStore(tmp_path, {"hidden_size": 3, "pair": "other"})


def test_problem_record_is_json():
    s = Scripted(draft_by_response={(10, 11, EOS): (10, 21, EOS)}, tails={(10, 21): (EOS,)})
    rec = problem_record("gsm8k-train/1", mine(s, [10, 11, EOS]), 1.5)
    assert json.loads(json.dumps(rec))["mismatches"][0] == {"position": 1, "important": True, "target_token": 11,
                                                            "draft_token": 21, "answer_after": 21}


def test_a_mismatch_cap_keeps_the_uncapped_labels():
    s = Scripted(
        draft_by_response={(10, 11, 12, 13, EOS): (10, 21, 12, 23, EOS), (10, 21, 12, 13, EOS): (10, 21, 12, 23, EOS)},
        tails={(10, 21): (12, 13, EOS), (10, 21, 12, 23): (EOS,)},
    )
    capped = mine(s, [10, 11, 12, 13, EOS], max_mismatches=1)
    full = mine(s, [10, 11, 12, 13, EOS])
    assert capped.stop == "mismatch_cap" and capped.mismatches == full.mismatches[:1]
