"""Vanilla SPD acceptance rules on hand-built logits, and the sampling rule's distribution."""

from __future__ import annotations

import pytest
import torch

from loosespec_bench.verifiers.spd import verify_greedy, verify_sampling

V = 8  # vocabulary of the hand-built cases


def logits_for(tokens: list[int], vocab: int = V) -> torch.Tensor:
    """[len(tokens), vocab] logits whose argmax row by row is `tokens`."""
    out = torch.zeros(len(tokens), vocab)
    out[torch.arange(len(tokens)), torch.tensor(tokens)] = 5.0
    return out


def test_perfect_match_takes_bonus_token():
    draft = torch.tensor([1, 2, 3])
    n, nxt = verify_greedy(draft, logits_for([1, 2, 3, 7]))
    assert (n, nxt) == (3, 7)


def test_first_token_mismatch_emits_correction():
    draft = torch.tensor([1, 2, 3])
    n, nxt = verify_greedy(draft, logits_for([4, 2, 3, 7]))
    assert (n, nxt) == (0, 4)


def test_mismatch_in_the_middle_stops_there_even_if_later_tokens_match():
    draft = torch.tensor([1, 2, 3, 4])
    n, nxt = verify_greedy(draft, logits_for([1, 5, 3, 4, 0]))
    assert (n, nxt) == (1, 5)


def test_k_equals_one():
    assert verify_greedy(torch.tensor([6]), logits_for([6, 2])) == (1, 2)
    assert verify_greedy(torch.tensor([6]), logits_for([1, 2])) == (0, 1)


def test_empty_draft_is_plain_greedy_step():
    assert verify_greedy(torch.empty(0, dtype=torch.long), logits_for([3])) == (0, 3)


def test_sampling_rejects_temperature_zero():
    with pytest.raises(ValueError):
        verify_sampling(torch.tensor([1]), None, logits_for([1, 2]), temperature=0.0)


def _empirical_first_token(p: torch.Tensor, q: torch.Tensor | None, draft_token_sampler, n: int, seed: int) -> torch.Tensor:
    """Distribution of the first emitted token under speculative sampling with K = 1."""
    gen = torch.Generator().manual_seed(seed)
    logits = torch.log(p).expand(2, -1).clone()  # [K+1, V]; temperature 1 keeps p as is
    counts = torch.zeros(p.numel())
    for _ in range(n):
        d = draft_token_sampler(gen)
        n_acc, nxt = verify_sampling(torch.tensor([d]), q, logits, temperature=1.0, generator=gen)
        counts[d if n_acc == 1 else nxt] += 1
    return counts / n


def _chi_square_ok(freq: torch.Tensor, p: torch.Tensor, n: int) -> bool:
    # Pearson chi-square against p; threshold ~ the 99.9% quantile for V-1 = 7 dof (24.3).
    expected = p * n
    stat = ((freq * n - expected) ** 2 / expected).sum()
    return float(stat) < 24.3


def test_speculative_sampling_reproduces_target_distribution_with_draft_probs():
    torch.manual_seed(0)
    p = torch.softmax(torch.randn(V), 0)
    q = torch.softmax(torch.randn(V) * 2, 0)  # a poor draft: differs a lot from p
    n = 20000
    freq = _empirical_first_token(p, q[None], lambda g: int(torch.multinomial(q, 1, generator=g)), n, seed=1)
    assert _chi_square_ok(freq, p, n), (freq, p)
    # And a draft distribution alone would have failed the same test (the test has power).
    assert not _chi_square_ok(q, p, n)


def test_speculative_sampling_with_one_hot_draft_reproduces_target_distribution():
    # Prompt lookup has no q: the rule treats q as one-hot on the proposed token.
    torch.manual_seed(1)
    p = torch.softmax(torch.randn(V), 0)
    n = 20000
    freq = _empirical_first_token(p, None, lambda g: 3, n, seed=2)
    assert _chi_square_ok(freq, p, n), (freq, p)
