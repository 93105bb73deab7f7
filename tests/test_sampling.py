"""The sampling primitives on hand-built distributions: tempering, the exact accept test, the
residual draw, and that accept + residual together reproduce the target's distribution."""

from __future__ import annotations

import pytest
import torch

from loosespec_bench.sampling import (
    accept_exact,
    SamplingParams,
    match_vocab,
    sample_or_argmax,
    sample_residual,
    sample_token,
    tempered_probs,
)

V = 6


def _gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _chi_square_ok(counts: torch.Tensor, p: torch.Tensor) -> bool:
    # Pearson chi-square over the tokens with p > 0 (20.5: the 99.9% quantile for 5 dof, lenient
    # for fewer); a token with p = 0 must never appear.
    n = counts.sum()
    keep = p > 0
    expected = p[keep] * n
    return float(((counts[keep] - expected) ** 2 / expected).sum()) < 20.5 and bool((counts[~keep] == 0).all())


def test_tempered_probs():
    logits = torch.tensor([[1.0, 2.0, 0.5], [0.0, 0.0, 3.0]])  # [2, 3]
    torch.testing.assert_close(tempered_probs(logits, 0.5), torch.softmax(logits / 0.5, dim=-1))
    # T <= 0: the untempered softmax (a greedy drafter's q).
    torch.testing.assert_close(tempered_probs(logits, 0.0), torch.softmax(logits, dim=-1))
    p = tempered_probs(logits.half(), 2.0, _gen())
    assert p.dtype == torch.float32 and p.device == torch.device("cpu")  # the generator's device
    torch.testing.assert_close(p.sum(-1), torch.ones(2))


def test_exact_accept_when_p_at_least_q():
    # Position 0: p(d) = 0.5 >= q(d) = 0.25 -> always accepted; position 1: p(d) = 0 -> never.
    p = torch.tensor([[0.5, 0.5, 0.0], [1.0, 0.0, 0.0], [0.2, 0.3, 0.5]])  # [K+1, vocab], bonus row ignored
    q = torch.tensor([[0.25, 0.75, 0.0], [0.0, 1.0, 0.0]])
    d = torch.tensor([0, 1])
    for seed in range(200):
        assert accept_exact(p, q, d, _gen(seed)).tolist() == [True, False]


def test_exact_accept_rate_is_p_over_q_and_one_hot_q_is_p():
    p = torch.tensor([[0.3, 0.7]])
    q = torch.tensor([[0.6, 0.4]])
    g = _gen(1)
    n = 4000
    rate = sum(bool(accept_exact(p, q, torch.tensor([0]), g)[0]) for _ in range(n)) / n
    assert rate == pytest.approx(0.5, abs=0.03)  # min(1, 0.3 / 0.6)
    rate = sum(bool(accept_exact(p, None, torch.tensor([0]), g)[0]) for _ in range(n)) / n
    assert rate == pytest.approx(0.3, abs=0.03)  # q = one-hot(d): accept with p(d)


def test_accept_exact_empty_draft():
    assert accept_exact(torch.rand(1, V), None, torch.empty(0, dtype=torch.long), _gen()).shape == (0,)


def test_residual_never_picks_a_token_where_p_at_most_q():
    p = torch.tensor([0.1, 0.4, 0.2, 0.3, 0.0, 0.0])
    q = torch.tensor([0.3, 0.1, 0.2, 0.1, 0.3, 0.0])  # p <= q at 0, 2, 4, 5
    g = _gen(2)
    seen = {sample_residual(p, q, 0, g) for _ in range(500)}
    assert seen <= {1, 3} and seen == {1, 3}
    # One-hot q (q = None): everything but the draft token, in proportion to p.
    seen = {sample_residual(p, None, 3, g) for _ in range(500)}
    assert seen == {0, 1, 2}


def test_residual_with_p_equal_q_falls_back_to_p():
    p = torch.tensor([0.5, 0.5, 0.0])
    assert sample_residual(p, p.clone(), 0, _gen()) in (0, 1)


def test_residual_pads_a_shorter_draft_vocabulary():
    p = torch.tensor([0.0, 0.0, 0.0, 1.0])
    assert sample_residual(p, torch.tensor([0.5, 0.5]), 0, _gen()) == 3  # q is zero-padded to 4


def test_match_vocab():
    assert match_vocab(torch.tensor([[0.25, 0.75]]), 4).tolist() == [[0.25, 0.75, 0.0, 0.0]]
    assert match_vocab(torch.tensor([[0.2, 0.7, 0.1]]), 2).tolist() == [[pytest.approx(0.2), pytest.approx(0.7)]]


@pytest.mark.parametrize("one_hot", [False, True])
def test_accept_then_residual_reproduces_p(one_hot):
    # Speculative sampling's guarantee: d ~ q, accept with min(1, p/q), else the residual draw,
    # gives tokens distributed as p, however poor q is.
    torch.manual_seed(3)
    p = torch.softmax(torch.randn(V) * 1.5, 0)
    p[5] = 0.0  # a token the target never emits, but the draft proposes
    p = p / p.sum()
    q = torch.softmax(torch.randn(V) * 2, 0)
    g = _gen(4)
    n = 12000
    counts = torch.zeros(V)
    for _ in range(n):
        d = 5 if one_hot else sample_token(q, g)
        qq = None if one_hot else q[None]
        if accept_exact(p[None], qq, torch.tensor([d]), g)[0]:
            counts[d] += 1
        else:
            counts[sample_residual(p, None if one_hot else q, d, g)] += 1
    assert _chi_square_ok(counts, p), (counts / n, p)
    if not one_hot:  # the test has power: q's own draws fail it
        q_counts = torch.bincount(torch.multinomial(q, n, replacement=True, generator=_gen(5)), minlength=V).float()
        assert not _chi_square_ok(q_counts, p)


def test_sample_or_argmax():
    logits = torch.tensor([0.0, 3.0, 1.0, 2.9])
    tok, q = sample_or_argmax(logits, SamplingParams(0.0, generator=_gen()), want_probs=False)
    assert (tok, q) == (1, None)  # T = 0: the argmax, no distribution unless asked
    tok, q = sample_or_argmax(logits, SamplingParams(0.0, generator=_gen()), want_probs=True)
    assert tok == 1
    torch.testing.assert_close(q, torch.softmax(logits, -1))
    # T > 0: q is the tempered distribution, and the draws follow it.
    g = _gen(6)
    draws = [sample_or_argmax(logits, SamplingParams(0.7, generator=g), want_probs=False) for _ in range(3000)]
    torch.testing.assert_close(draws[0][1], torch.softmax(logits / 0.7, -1))
    counts = torch.bincount(torch.tensor([t for t, _ in draws]), minlength=4).float()
    assert _chi_square_ok(counts, torch.softmax(logits / 0.7, -1))


def test_sampling_is_seeded():
    p = torch.softmax(torch.arange(V, dtype=torch.float32), 0)
    assert [sample_token(p, _gen(9)) for _ in range(3)] == [sample_token(p, _gen(9))] * 3
