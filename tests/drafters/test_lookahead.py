"""drafter=lookahead: the Jacobi lookahead branch as extra tree nodes, the n-gram pool, and
equality with the target alone (fp32, greedy)."""

from __future__ import annotations

import pytest
import torch

from loosespec_bench.decoding import generate
from loosespec_bench.decoding.loop import tree_inputs
from loosespec_bench.drafters import LookaheadDrafter
from loosespec_bench.errors import ConfigError
from loosespec_bench.step import ancestor_matrix
from loosespec_bench.verifiers.fly import FLy
from loosespec_bench.verifiers.spd import SPD

PROMPT = "def add(a, b):\n    return a + b\n\ndef add3(a, b, c):\n    return a + b + c\n\ndef add4(a, b, c, d):\n"


def _prompt(tok, text: str = PROMPT) -> torch.Tensor:
    return torch.tensor(tok(text, add_special_tokens=False).input_ids)


def test_lookahead_branch_attends_along_the_diagonal():
    d = LookaheadDrafter(k=3, window=4, guess_set=2)  # N = 4: level 0 (3 tokens) + levels 1, 2
    d.reset(torch.arange(10, 30))
    d.levels = [[1, 2, 3], [11, 12, 13, 14], [21, 22, 23, 24]]
    draft = d.propose(torch.tensor([5, 6]), 3)
    assert draft.k == 0  # empty pool: no guesses yet
    xt = draft.extra_tokens.tolist()
    assert xt == [1, 2, 3, 11, 21, 12, 22, 13, 23, 14, 24]
    anc = ancestor_matrix(draft.extra_parents)
    # level-2 token of column 2 (23) sees: level0 [1, 2] (columns 0..1's keys), level1 13, itself.
    i = xt.index(23)
    assert [xt[j] for j in range(len(xt)) if anc[i, j]] == [1, 2, 13, 23]
    ids, pos, _ = tree_inputs(draft, 7, torch.float32, torch.device("cpu"))
    assert pos[0, 1 + i] == 7 + 4  # pending at 7, then four tokens deep


def test_pool_and_window_update():
    d = LookaheadDrafter(k=2, window=3, guess_set=1)  # N = 3: level 0 + level 1
    d.reset(torch.arange(10, 30))
    d.levels = [[1, 2], [11, 12, 13]]
    d.propose(torch.tensor([5, 6]), 2)
    logits = torch.zeros(len(d._top) + 2, 50)
    for j, tok in zip(d._top, (31, 32, 33)):
        logits[j, tok] = 1.0
    d.observe_scores(logits)
    # n-grams (key, level1[i], new[i]): key 6 (pending) for column 0, level0[i-1] after.
    assert {k: list(v) for k, v in d.pool.items()} == {6: [(11, 31)], 1: [(12, 32)], 2: [(13, 33)]}
    assert d.levels == [[12, 13], [31, 32, 33]]
    guess = d.propose(torch.tensor([1]), 2)
    assert guess.tokens.tolist() == [12, 32] and guess.parents.tolist() == [-1, 0]


@pytest.mark.parametrize("k,window,guess_set", [(4, 7, 7), (2, 3, 2), (6, 5, 4)])
def test_lookahead_equals_target_alone(tiny_pair, k, window, guess_set):
    target, _, tok = tiny_pair
    prompt = _prompt(tok)
    ref = generate(target, prompt, verifier=SPD(), max_new_tokens=60)
    out = generate(target, prompt, verifier=SPD(), drafter=LookaheadDrafter(k=k, window=window, guess_set=guess_set),
                   max_new_tokens=60, record_steps=True)
    assert out.new_tokens == ref.new_tokens
    assert out.steps <= ref.steps


def test_lookahead_accepts_on_repetitive_text(tiny_pair):
    """A target that loops (tiny random models do) is exactly what n-grams from its own Jacobi
    trajectory predict: some steps must accept guesses."""
    target, _, tok = tiny_pair
    out = generate(target, _prompt(tok), verifier=SPD(), drafter=LookaheadDrafter(), max_new_tokens=120)
    assert sum(out.accepted) > 0 and out.tau > 1.0


def test_lookahead_with_a_loose_rule_runs(tiny_pair):
    target, _, tok = tiny_pair
    out = generate(target, _prompt(tok), verifier=FLy(theta=0.0, window=2), drafter=LookaheadDrafter(), max_new_tokens=30)
    assert len(out.new_tokens) == 30


def test_lookahead_config_errors():
    with pytest.raises(ConfigError, match="window"):
        LookaheadDrafter(window=1)
