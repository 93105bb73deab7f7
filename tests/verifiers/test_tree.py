"""verifiers/tree.py: any rule on a draft tree. A rule that declares itself lossless
(Verifier.lossless) is walked along the target's argmax; any other is verified path by path.
(The loop's side of trees, masks and compaction: tests/decoding/test_tree.py.)"""

from __future__ import annotations

import torch

from loosespec_bench.sampling import GREEDY
from loosespec_bench.step import Draft, TargetScores
from loosespec_bench.verifiers.spd import SPD
from loosespec_bench.verifiers.tree import verify


def _tree() -> tuple[Draft, torch.Tensor]:
    # Two root children (tokens 1, 2); the target's argmax after the pending token is 2, then 4.
    logits = torch.full((4, 6), -10.0)
    logits[0, 2] = 5.0
    logits[2, 4] = 5.0  # after node 1 (token 2)
    logits[3, 0] = 5.0  # after node 2 (token 4)
    logits[1, 3] = 5.0  # after node 0 (token 1)
    return Draft(tokens=torch.tensor([1, 2, 4]), parents=torch.tensor([-1, -1, 1])), logits


class Counting(SPD):
    """SPD's chain rule, declared not lossless: the tree is then verified path by path."""

    lossless = False
    calls = 0

    def __call__(self, draft, scores, sampling=GREEDY):
        Counting.calls += 1
        return super().__call__(draft, scores, sampling)


def test_a_lossless_rule_walks_the_argmax_and_a_declared_other_verifies_each_path():
    draft, logits = _tree()
    walked = verify(SPD(), draft, TargetScores(logits=logits), GREEDY)
    assert (walked.num_accepted, walked.path, walked.next_token) == (2, [1, 2], 0)
    Counting.calls = 0
    per_path = verify(Counting(), draft, TargetScores(logits=logits), GREEDY)
    assert Counting.calls == 2  # one call per root-to-leaf path: the rule's class said it is not lossless
    assert (per_path.num_accepted, per_path.path, per_path.next_token) == (2, [1, 2], 0)
