"""FSD: divergences against the published definition (the reference's F.kl_div forms) on random
logits, and the rule on hand-built distributions (named edge cases)."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from loosespec_bench.sampling import SamplingParams
from loosespec_bench.errors import ConfigError
from loosespec_bench.verifiers.fsd import FSDParams, FSD, DIVERGENCES, divergence, fsd_decide, restrict_support

from .loose_cases import V, logits_from, probs_of, row, tokens


def reference_divs(p: torch.Tensor, q: torch.Tensor, kind: str) -> torch.Tensor:
    """maxholsman/fsd _speculative_backoff_sampling's divergences, as published (F.kl_div(input,
    target) = sum target * (log target - input)), and top_k_*: the target's top 50 + a rest bucket."""
    if kind.startswith("top_k_"):
        p_top, idx = torch.topk(p, 50, dim=-1)
        q_top = torch.gather(q, -1, idx)
        mask = torch.zeros_like(p, dtype=torch.bool).scatter_(-1, idx, True)
        p = torch.cat((p_top, (p * ~mask).sum(-1, keepdim=True)), -1)
        q = torch.cat((q_top, (q * ~mask).sum(-1, keepdim=True)), -1)
        kind = kind[len("top_k_"):]
    if kind == "kl":
        return F.kl_div(torch.log(p), q, reduction="none").sum(-1)
    if kind == "kl_reversed":
        return F.kl_div(torch.log(q), p, reduction="none").sum(-1)
    if kind == "js":  # the textbook JS: 1/2 KL(p || m) + 1/2 KL(q || m)
        m = 0.5 * (p + q)
        return (0.5 * F.kl_div(torch.log(m), p, reduction="none") + 0.5 * F.kl_div(torch.log(m), q, reduction="none")).sum(-1)
    if kind == "js_code":  # the reference's js_div, verbatim in form
        m = 0.5 * (p + q)
        return (0.5 * F.kl_div(torch.log(p), m, reduction="none") + 0.5 * F.kl_div(torch.log(q), m, reduction="none")).sum(-1)
    return 0.5 * torch.abs(p - q).sum(-1)


@pytest.mark.parametrize("kind", DIVERGENCES)
@pytest.mark.parametrize("support", ["full", "top_k"])
def test_divergence_and_decisions_match_the_published_definition_on_random_logits(kind, support):
    g = torch.Generator().manual_seed(7)
    vocab, K = 300, 12
    for trial in range(25):
        target = torch.randn(K + 1, vocab, generator=g) * (0.5 + trial / 10)  # sharp and flat rows
        draft_logits = target[:K] + torch.randn(K, vocab, generator=g) * 1.5
        q = torch.softmax(draft_logits, -1)
        d_tok = q.argmax(-1)
        p = torch.softmax(target, -1)
        ref = reference_divs(p[:K], q, kind if support == "full" else f"top_k_{kind}")
        ps, qs = restrict_support(p[:K], q, support, 50, 0.9)
        ours = divergence(ps, qs, kind)
        torch.testing.assert_close(ours, ref, rtol=1e-4, atol=1e-6)
        # Half the positions pass (a decision test, not a trivial one); the threshold sits midway
        # between two values so that float rounding of either side cannot flip a decision.
        s_ref = ref.sort().values
        thr = float(s_ref[K // 2 - 1] + s_ref[K // 2]) / 2
        dec = fsd_decide(d_tok, q, target, FSDParams(div_threshold=thr, div_type=kind, support=support))
        ref_accept = ref <= thr
        n_ref = int(ref_accept.long().cumprod(0).sum())
        assert dec.n == n_ref
        assert dec.next_token == int(p[n_ref].argmax())
        assert dec.accept.tolist() == ref_accept.tolist()


def test_an_exact_match_is_rejected_when_the_distributions_differ_unless_accept_matches():
    target = logits_from([row(1, 0.6), row(2)])
    q = probs_of([row(1, 0.99)])
    d = fsd_decide(tokens(1), q, target, FSDParams(div_threshold=0.01, div_type="tv"))
    assert d.a.tolist() == [True] and d.n == 0 and d.next_token == 1  # same token, step ends
    assert fsd_decide(tokens(1), q, target, FSDParams(div_threshold=0.01, div_type="tv", accept_matches=True)).n == 1


def below(x: float) -> float:
    """The float32 just below x (the rules compare in float32)."""
    return float(torch.nextafter(torch.tensor(x), torch.tensor(-1.0)))


def test_threshold_exactly_met_accepts():
    target = logits_from([row(1, 0.6), row(2)])
    q = probs_of([row(3, 0.6)])
    p = torch.softmax(target, -1)
    tv = float(divergence(p[:1], q, "tv")[0])
    assert fsd_decide(tokens(3), q, target, FSDParams(div_threshold=tv, div_type="tv")).n == 1
    assert fsd_decide(tokens(3), q, target, FSDParams(div_threshold=below(tv), div_type="tv")).n == 0


def test_zero_probability_tokens_give_infinite_kl_and_finite_js_tv():
    p0 = [0.0] * V
    p0[1] = 1.0  # the target gives token 3 no mass
    target = logits_from([p0, row(2)])
    q = probs_of([row(3, 1.0)])
    d = fsd_decide(tokens(3), q, target, FSDParams(div_threshold=1e9, div_type="kl"))  # KL(q||p) = inf
    assert math.isinf(float(d.stat[0])) and d.n == 0
    js = fsd_decide(tokens(3), q, target, FSDParams(div_threshold=1e9, div_type="js"))
    assert float(js.stat[0]) == pytest.approx(math.log(2), abs=1e-6) and js.n == 1
    assert math.isinf(float(fsd_decide(tokens(3), q, target, FSDParams(div_threshold=1e9, div_type="js_code")).stat[0]))
    assert float(fsd_decide(tokens(3), q, target, FSDParams(div_threshold=2.0, div_type="tv")).stat[0]) == pytest.approx(1.0)


def test_top_p_support_reads_only_the_target_nucleus():
    p0 = [0.0] * V
    p0[0], p0[1], p0[2] = 0.6, 0.3, 0.1
    q0 = [0.0] * V
    q0[0], q0[1], q0[4] = 0.6, 0.3, 0.1  # differs only outside the 0.9 nucleus {0, 1}
    target = logits_from([p0, row(0)])
    d = fsd_decide(tokens(0), probs_of([q0]), target, FSDParams(div_threshold=1e-6, div_type="tv", support="top_p", support_p=0.9))
    assert d.n == 1 and float(d.stat[0]) == pytest.approx(0.0, abs=1e-6)
    assert fsd_decide(tokens(0), probs_of([q0]), target, FSDParams(div_threshold=1e-6, div_type="tv")).n == 0  # full support


def test_end_of_draft_emits_the_bonus_and_k_zero_the_target_token():
    target = logits_from([row(1), row(2), row(6)])
    q = probs_of([row(1), row(2)])
    d = fsd_decide(tokens(1, 2), q, target, FSDParams(div_threshold=0.1, div_type="js"))
    assert d.n == 2 and d.next_token == 6
    assert fsd_decide(tokens(), None, logits_from([row(5)]), FSDParams(div_threshold=0.1)).next_token == 5


def test_sampling_draws_the_next_token_from_p_without_a_residual():
    # d_0 is rejected; the draw comes from p_0, which puts all its mass on d_0's own token 3:
    # speculative sampling's residual would exclude it, FSD's draw from p cannot.
    p0 = [0.0] * V
    p0[3] = 1.0
    target = logits_from([p0, row(0)])
    q = probs_of([row(3, 0.5)])
    d = fsd_decide(tokens(3), q, target, FSDParams(div_threshold=0.0, div_type="tv"), SamplingParams(temperature=1.0, generator=torch.Generator().manual_seed(0)))
    assert d.n == 0 and d.next_token == 3


def test_params_refuse_bad_values():
    with pytest.raises(ConfigError, match="method.div_type='hellinger'"):
        FSD(div_type="hellinger")
    with pytest.raises(ConfigError, match="method.div_threshold=-1"):
        FSD(div_threshold=-1)
    assert FSD().needs_draft_probs
