"""Sampling primitives, written once: tempering, the exact accept test, the residual and bonus
draws, and a drafter's sample-or-argmax.

Speculative sampling (Leviathan et al. 2023; Chen et al. 2023) in the papers' symbols: p_i is
the target's tempered distribution at draft position i, q_i the drafter's, d_i the draft token.
  accept d_i          with probability min(1, p_i(d_i) / q_i(d_i))      (`accept_exact`)
  on the first reject  draw from norm(max(0, p_i - q_i))                  (`sample_residual`)
  when all K pass      draw the bonus from p_{K+1}                        (`sample_token`)
  the token after an accepted prefix of n: the bonus or the residual     (`exact_tail`)
A drafter without probabilities (prompt lookup, MLA, cross-tokenizer) has q_i = one-hot(d_i),
passed as q = None. The loose rules (FLy, DropMatch) and SPD call these; drafters call
`sample_or_argmax`.

`SamplingParams` (temperature, top-k, top-p, the seeded generator; vLLM's SamplingMetadata is
the model) is the one object a drafter's `propose` and a rule's `__call__` take for all four.

Top-k and top-p (nucleus) truncation apply at T > 0 to the target's p and the drafter's q
alike, in the order transformers' and vLLM's samplers use: temperature, then top-k, then top-p
(`process_logits`). SPD stays exactly lossless with respect to that processed p.

Every draw happens on the generator's device (the run's seeded CPU generator in practice), so
a seed reproduces a run whichever device the models sit on; the logits' device is used when
there is no generator. This module imports nothing from the package.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch


@dataclass(frozen=True)
class SamplingParams:
    """How a step samples: temperature (0 = greedy), top-k / top-p truncation at T > 0 (0 / 1.0
    = off) and the run's seeded generator (None: torch's global one)."""

    temperature: float = 0.0
    top_k: int = 0
    top_p: float = 1.0
    generator: torch.Generator | None = None

    @property
    def greedy(self) -> bool:
        return self.temperature <= 0

    def at(self, temperature: float) -> "SamplingParams":
        """The same truncation and generator at another temperature (a rule's draft temperature)."""
        return replace(self, temperature=temperature)


GREEDY = SamplingParams()


def generator_device(generator: torch.Generator | None, default: torch.device) -> torch.device:
    """Where draws from `generator` must happen: a CPU generator cannot draw on an accelerator."""
    return generator.device if generator is not None else default


def process_logits(logits: torch.Tensor, temperature: float, top_k: int = 0, top_p: float = 1.0) -> torch.Tensor:
    """The sampling distribution's logits: logits / T, then top-k, then top-p, in float32.

    Tokens cut by top-k or top-p get -inf. top_k = 0 and top_p = 1 are off. As transformers'
    TopKLogitsWarper / TopPLogitsWarper and vLLM's sampler: top-k keeps every token tied with
    the k-th largest logit; top-p keeps the smallest set of most likely tokens whose mass reaches
    p (at least one token). T <= 0 leaves the logits unscaled and untruncated: a greedy decision
    reads only the argmax, which both truncations always keep.
    logits: [..., vocab]. Returns [..., vocab].
    """
    z = logits.float()
    if temperature <= 0:
        return z
    z = z / temperature
    vocab = z.shape[-1]
    if 0 < top_k < vocab:
        kth = z.topk(top_k, dim=-1).values[..., -1:]  # [..., 1] the k-th largest logit
        z = z.masked_fill(z < kth, float("-inf"))
    if top_p < 1.0:
        # Ascending sort: a token goes when the mass of itself and every less likely token is
        # at most 1 - p, i.e. the more likely tokens already hold p; the most likely one stays.
        sorted_z, order = z.sort(dim=-1)  # [..., vocab] ascending
        cum = sorted_z.softmax(dim=-1).cumsum(dim=-1)  # [..., vocab]
        drop_sorted = cum <= 1.0 - top_p
        drop_sorted[..., -1] = False
        drop = drop_sorted.scatter(-1, order, drop_sorted)  # back to vocabulary order
        z = z.masked_fill(drop, float("-inf"))
    return z


def tempered_probs(
    logits: torch.Tensor,
    temperature: float,
    generator: torch.Generator | None = None,
    *,
    top_k: int = 0,
    top_p: float = 1.0,
) -> torch.Tensor:
    """softmax(process_logits(logits, T, top_k, top_p)) in float32 over the last dim, moved to
    the generator's device.

    T <= 0 gives the untempered, untruncated softmax (a greedy drafter's q, DropMatch's js
    criterion at T = 0). logits: [..., vocab]. Returns [..., vocab].
    """
    z = process_logits(logits, temperature, top_k, top_p)
    # softmax where the logits are (one [.., vocab] copy to the host instead of the logits' own).
    return torch.softmax(z, dim=-1).to(generator_device(generator, logits.device))


def match_vocab(q: torch.Tensor, vocab: int) -> torch.Tensor:
    """A draft distribution [..., vocab_draft] cut or zero-padded to the target's vocabulary:
    padded embedding rows make the two sizes differ even for one tokenizer."""
    q = q.float()
    if q.shape[-1] > vocab:
        return q[..., :vocab]
    if q.shape[-1] < vocab:
        return torch.nn.functional.pad(q, (0, vocab - q.shape[-1]))
    return q


def accept_exact(
    p: torch.Tensor, q: torch.Tensor | None, draft_tokens: torch.Tensor, generator: torch.Generator | None
) -> torch.Tensor:
    """The speculative-sampling test u_i < p_i(d_i) / q_i(d_i), u_i ~ U(0, 1), for all K at once.

    p: [>= K, vocab] target probabilities (extra rows, e.g. the bonus row, are ignored); q: [K,
    vocab_draft] or None (one-hot: q_i(d_i) = 1); draft_tokens: [K]. Returns [K] bool on p's
    device. Where p_i(d_i) >= q_i(d_i) the token is accepted whatever u is.
    """
    k = draft_tokens.numel()
    dev = p.device
    idx = torch.arange(k, device=dev)
    d = draft_tokens.to(dev)
    p_d = p[idx, d]  # [K] p_i(d_i)
    q_d = torch.ones_like(p_d) if q is None else q.float().to(dev)[idx, d]  # [K] q_i(d_i)
    # All K uniforms in one draw: one host sync per step instead of K, and the generator's
    # stream does not depend on where the first rejection falls.
    u = torch.rand(k, generator=generator, device=dev)  # [K]
    return u * q_d < p_d  # u < p/q without dividing by a possibly tiny q


def sample_token(probs: torch.Tensor, generator: torch.Generator | None) -> int:
    """One draw from a [vocab] distribution (the bonus token, a correction, a drafter's sample)."""
    return int(torch.multinomial(probs, 1, generator=generator))


def sample_residual(
    p: torch.Tensor, q: torch.Tensor | None, draft_token: int, generator: torch.Generator | None
) -> int:
    """The correction after rejecting d: a draw from norm(max(0, p - q)).

    p: [vocab] target row; q: [vocab_draft] draft row, or None for one-hot(d) (then the residual
    is p with d removed). A token where p <= q can never be drawn.
    """
    if q is None:
        residual = p.clone()  # max(0, p - one-hot(d)) is p with d zeroed: p(d) <= 1
        residual[draft_token] = 0.0
    else:
        residual = torch.clamp(p - match_vocab(q, p.shape[-1]).to(p.device), min=0.0)  # [vocab]
    total = residual.sum()
    # p <= q everywhere only when p == q, where the rejection had probability 0: a float edge.
    dist = residual / total if total > 0 else p
    return sample_token(dist, generator)


def exact_tail(
    p: torch.Tensor, q: torch.Tensor | None, draft_tokens: torch.Tensor, n: int, generator: torch.Generator | None
) -> int:
    """The token after an accepted prefix of n draft tokens at T > 0, as speculative sampling
    draws it: the bonus from p_{K+1} when all K were accepted, else the residual draw at the
    first rejected position, norm(max(0, p_n - q_n)).

    p: [K+1, vocab] processed target probabilities; q: [K, vocab_draft] or None (one-hot);
    draft_tokens: [K]. SPD, FLy (mode vllm) and DropMatch at T > 0 end their step with it.
    """
    k = draft_tokens.numel()
    if n == k:
        return sample_token(p[k], generator)  # the bonus token
    return sample_residual(p[n], None if q is None else q[n], int(draft_tokens[n]), generator)


def sample_or_argmax(
    logits: torch.Tensor, sampling: SamplingParams, *, want_probs: bool
) -> tuple[int, torch.Tensor | None]:
    """A drafter's next token: a draw from the processed softmax (T, top-k, top-p) at T > 0,
    else the argmax.

    logits: [vocab]. Returns (token, q) where q ([vocab], on the generator's device) is the
    distribution the token came from; at T = 0 it is the untempered softmax when want_probs
    (DropMatch's js criterion reads it), else None.
    """
    generator = sampling.generator
    if not sampling.greedy:
        q = tempered_probs(logits, sampling.temperature, generator, top_k=sampling.top_k, top_p=sampling.top_p)
        return sample_token(q, generator), q
    q = tempered_probs(logits, 0.0, generator) if want_probs else None
    return int(logits.argmax()), q
