"""AutoJudge and DropMatch + AutoJudge decisions on hand-built logits and hidden states.

The judge here is hand-built too: hidden size 2, score = sigmoid(h[0]), threshold 0.5, so a
hidden row with h[0] >= 0 is "important" (the target's token is emitted) and h[0] < 0 is
"unimportant" (the draft token is kept)."""

from __future__ import annotations

import pytest
import torch

from loosespec_bench.errors import ConfigError
from loosespec_bench.judges.head import JudgeHead
from loosespec_bench.verifiers.autojudge import AutoJudge, DropMatchAutoJudge, autojudge_decide
from loosespec_bench.sampling import SamplingParams
from loosespec_bench.step import Draft, TargetScores
from loosespec_bench.verifiers.spd import verify_sampling

V = 6
IMP, UNIMP = 2.0, -2.0  # h[0] of an important / unimportant row


@pytest.fixture()
def judge_dir(tmp_path):
    JudgeHead(mean=[0.0, 0.0], scale=[1.0, 1.0], weights=[1.0, 0.0], bias=0.0, threshold=0.5).save(tmp_path)
    return tmp_path


def logits_for(tokens):
    """[len, V] logits whose argmax is tokens[i] at row i."""
    out = torch.full((len(tokens), V), -5.0)
    out[torch.arange(len(tokens)), torch.tensor(tokens)] = 5.0
    return out


def hidden_for(rows):
    """[K+1, 2]: row 0 is the pending token's (never judged), rows 1..K the draft positions'."""
    return torch.tensor([[0.0, 0.0]] + [[h, 0.0] for h in rows])


def decide(judge_dir, draft, target, rows, threshold=None, **kw):
    v = AutoJudge(judge_path=str(judge_dir), threshold=threshold)
    return v(Draft(tokens=torch.tensor(draft)), TargetScores(logits=logits_for(target), hidden=hidden_for(rows)), SamplingParams(**kw))


def test_all_matches_take_the_bonus_whatever_the_judge(judge_dir):
    v = decide(judge_dir, [1, 2, 3], [1, 2, 3, 4], [IMP, IMP, IMP])
    assert (v.num_accepted, v.next_token) == (3, 4)
    assert v.record["loose_accepted"] == [] and v.record["judged_positions"] == []


def test_an_unimportant_mismatch_keeps_the_draft_token(judge_dir):
    v = decide(judge_dir, [1, 5, 3], [1, 2, 3, 4], [IMP, UNIMP, IMP])
    assert (v.num_accepted, v.next_token) == (3, 4)
    assert v.record["loose_accepted"] == [1] and v.record["judge_important"] == [False]


def test_an_important_mismatch_is_spd(judge_dir):
    v = decide(judge_dir, [1, 5, 3], [1, 2, 3, 4], [UNIMP, IMP, UNIMP])
    assert (v.num_accepted, v.next_token) == (1, 2)  # the target's token at the mismatch
    assert v.record["judged_positions"] == [1] and v.record["judge_scores"][0] > 0.5


def test_first_unimportant_then_important_stops_at_the_second(judge_dir):
    v = decide(judge_dir, [5, 2, 5, 4], [1, 2, 3, 4, 0], [UNIMP, IMP, IMP, IMP])
    assert (v.num_accepted, v.next_token) == (2, 3)
    assert v.record["judged_positions"] == [0, 2] and v.record["judge_important"] == [False, True]
    assert v.record["mismatch_positions"] == [0, 2]


def test_the_judge_reads_the_row_after_the_draft_token(judge_dir):
    # Row i (the state BEFORE reading d_i) says important, row i+1 (after reading it) says not:
    # the judge must read row i+1, as the released code reads the hidden state at d_i's position.
    v = decide(judge_dir, [5], [1, 2], [UNIMP])  # hidden rows: [pending: h=0 -> 0.5 = important, d_0: UNIMP]
    assert v.num_accepted == 1


def test_a_score_at_the_threshold_is_important(judge_dir):
    v = decide(judge_dir, [5], [1, 2], [0.0])  # sigmoid(0) = 0.5 = threshold
    assert (v.num_accepted, v.next_token) == (0, 1)


@pytest.mark.parametrize("threshold, expected", [(0.0, (0, 1)), (1.0, (2, 3))])
def test_threshold_override_bounds(judge_dir, threshold, expected):
    # 0: every mismatch is important (exactly SPD); 1: none is (every mismatch accepted).
    v = decide(judge_dir, [5, 5], [1, 2, 3], [IMP, IMP], threshold=threshold)
    assert (v.num_accepted, v.next_token) == expected


def test_empty_draft_is_a_target_step(judge_dir):
    v = decide(judge_dir, [], [4], [])
    assert (v.num_accepted, v.next_token) == (0, 4)


def test_sampling_with_every_mismatch_important_is_spd(judge_dir):
    # Threshold 0: the judge never accepts, so the draws are speculative sampling's, the same
    # generator stream giving the same tokens.
    torch.manual_seed(0)
    logits = torch.randn(4, V)
    draft = torch.tensor([1, 2, 3])
    q = torch.softmax(torch.randn(3, V), dim=-1)
    head = JudgeHead.load(judge_dir)
    for seed in range(20):
        ours = autojudge_decide(draft, q, logits, hidden_for([IMP] * 3), head, threshold=0.0, temperature=0.8,
                                generator=torch.Generator().manual_seed(seed))
        ref = verify_sampling(draft, q, logits, temperature=0.8, generator=torch.Generator().manual_seed(seed))
        assert (ours.n, ours.next_token) == ref


def test_sampling_keeps_an_unimportant_token_the_exact_test_rejects(judge_dir):
    logits = logits_for([1, 2]) * 10  # p(d = 5) ~ 0: the exact test rejects it
    head = JudgeHead.load(judge_dir)
    d = autojudge_decide(torch.tensor([5]), None, logits, hidden_for([UNIMP]), head, threshold=0.5, temperature=1.0,
                         generator=torch.Generator().manual_seed(0))
    assert d.n == 1 and d.loose == [0] and d.next_token == 2  # bonus from p_2


def test_a_judge_changed_since_the_config_recorded_it_is_refused(judge_dir):
    from loosespec_bench.judges.head import judge_sha256

    recorded = judge_sha256(judge_dir)
    AutoJudge(judge_path=str(judge_dir), judge_sha256=recorded)  # unchanged: loads
    JudgeHead(mean=[0.0, 0.0], scale=[1.0, 1.0], weights=[0.0, 1.0], bias=0.0, threshold=0.5).save(judge_dir)
    with pytest.raises(ConfigError, match="changed since"):
        AutoJudge(judge_path=str(judge_dir), judge_sha256=recorded)
    with pytest.raises(ConfigError, match="changed since"):
        DropMatchAutoJudge(judge_path=str(judge_dir), judge_sha256=recorded)


def test_missing_judge_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="no trained judge"):
        AutoJudge(judge_path=str(tmp_path / "none"))
    with pytest.raises(ConfigError, match="threshold"):
        JudgeHead(mean=[0.0], scale=[1.0], weights=[1.0], bias=0.0, threshold=0.5).save(tmp_path)
        AutoJudge(judge_path=str(tmp_path), threshold=1.5)


# -- DropMatch + AutoJudge --------------------------------------------------------------------
def lm_head_voting_for(token):
    """An LM head whose every dropout path votes for `token` (DropMatch's criterion accepts it)."""
    def head(x):  # [n, H] -> [n, V]
        out = torch.full((x.shape[0], V), -5.0)
        out[:, token] = 5.0
        return out
    return head


def combined(judge_dir, draft, target, rows, lm_head, combine):
    v = DropMatchAutoJudge(judge_path=str(judge_dir), combine=combine, criterion="naive", n_paths=3, p=0.3)
    scores = TargetScores(logits=logits_for(target), hidden=hidden_for(rows), lm_head=lm_head)
    return v(Draft(tokens=torch.tensor(draft)), scores, SamplingParams(generator=torch.Generator().manual_seed(0)))


def test_any_judge_accepts_without_computing_dropmatch(judge_dir):
    v = combined(judge_dir, [5, 2], [1, 2, 3], [UNIMP, IMP], lm_head_voting_for(1), "any")
    assert v.num_accepted == 2 and v.record["judge_accepted"] == [0] and v.record["evaluated_positions"] == []


def test_any_dropmatch_rescues_what_the_judge_rejects(judge_dir):
    v = combined(judge_dir, [5, 2], [1, 2, 3], [IMP, IMP], lm_head_voting_for(5), "any")
    assert v.num_accepted == 2 and v.record["evaluated_positions"] == [0] and v.record["judge_accepted"] == []


def test_any_fails_when_both_reject(judge_dir):
    v = combined(judge_dir, [5, 2], [1, 2, 3], [IMP, IMP], lm_head_voting_for(1), "any")
    assert (v.num_accepted, v.next_token) == (0, 1)


def test_all_judge_veto_beats_dropmatch(judge_dir):
    v = combined(judge_dir, [5, 2], [1, 2, 3], [IMP, IMP], lm_head_voting_for(5), "all")
    assert (v.num_accepted, v.next_token) == (0, 1) and v.record["evaluated_positions"] == []


def test_all_needs_dropmatch_too(judge_dir):
    rejected = combined(judge_dir, [5, 2], [1, 2, 3], [UNIMP, IMP], lm_head_voting_for(1), "all")
    accepted = combined(judge_dir, [5, 2], [1, 2, 3], [UNIMP, IMP], lm_head_voting_for(5), "all")
    assert rejected.num_accepted == 0 and accepted.num_accepted == 2


def test_combine_must_be_known(judge_dir):
    with pytest.raises(ConfigError, match="combine"):
        DropMatchAutoJudge(judge_path=str(judge_dir), combine="either")
