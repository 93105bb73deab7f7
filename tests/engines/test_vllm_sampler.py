"""engines/vllm_sampler.py without vLLM: our rules on vLLM's flattened rejection-sampler layout
give, request by request, the decisions our verifier gives step by step; replay reads them back;
the worker's rule is built from its class path and knobs; every rule either runs there or says why
not."""

from __future__ import annotations

import pytest
import torch

from loosespec_bench.engines.vllm_sampler import PLACEHOLDER, class_path, decide_flat, replay, sampler_refusal, sampler_rule
from loosespec_bench.params import params_of
from loosespec_bench.sampling import GREEDY
from loosespec_bench.step import Draft, TargetScores
from loosespec_bench.verifiers import rules
from loosespec_bench.verifiers.cascade import Cascade
from loosespec_bench.verifiers.fly import FLy
from loosespec_bench.verifiers.threshold import Threshold
from loosespec_bench.verifiers.typical import Typical

V = 32


def _logits_for(tokens: list[int], unsure: list[bool], gen: torch.Generator) -> torch.Tensor:
    """[len, V] rows whose argmax is tokens[i]; flat (high entropy) where unsure[i], else peaked."""
    rows = torch.randn(len(tokens), V, generator=gen) * 0.01
    for i, (t, u) in enumerate(zip(tokens, unsure)):
        rows[i, t] += 0.05 if u else 20.0
    return rows


def _request(k: int, mismatch_at: list[int], unsure_at: list[int], gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """A draft of k tokens and [k+1, V] target logits: the target's argmax differs at mismatch_at."""
    d = torch.randint(0, V, (k,), generator=gen)
    t = [int(x) if i not in mismatch_at else (int(x) + 1) % V for i, x in enumerate(d)] + [int(torch.randint(0, V, (1,), generator=gen))]
    return d, _logits_for(t, [i in unsure_at for i in range(k + 1)], gen)


def test_flat_layout_matches_our_verifier_request_by_request():
    gen = torch.Generator().manual_seed(0)
    rule = FLy(theta=0.3, window=2, mode="vllm")
    cases = [  # (K, mismatches, unsure positions): all accepted; deferred mismatch; rejected; K=1; 2nd mismatch in window
        (5, [], []), (6, [1], [1]), (6, [1], []), (1, [0], [0]), (6, [1, 2], [1, 2]),
    ]
    reqs = [_request(k, m, u, gen) for k, m, u in cases]
    drafts = torch.cat([d for d, _ in reqs]).to(torch.int32)
    target = torch.cat([lg[:-1] for _, lg in reqs])  # [N, V]
    bonus = torch.stack([lg[-1] for _, lg in reqs])  # [B, V]
    out, verdicts = decide_flat(rule, drafts, [k for k, _, _ in cases], target, bonus)
    assert out.shape == (len(cases), 7) and out.dtype == torch.int32
    for b, (d, lg) in enumerate(reqs):
        v = rule(Draft(tokens=d), TargetScores(logits=lg), GREEDY)
        assert verdicts[b] == (v.num_accepted, v.next_token)
        row = out[b].tolist()
        assert row[: v.num_accepted] == d[: v.num_accepted].tolist() and row[v.num_accepted] == v.next_token
        assert all(x == PLACEHOLDER for x in row[v.num_accepted + 1 :])
    # The named cases decide as FLy says: a deferred unsure mismatch keeps the draft token.
    n = [x for x, _ in verdicts]
    assert n[0] == 5 and n[1] == 6 and n[2] == 1 and n[3] == 0 and n[4] == 1


def test_replay_reads_recorded_steps_back(tmp_path):
    gen = torch.Generator().manual_seed(1)
    rule = FLy(theta=0.3, window=2, mode="vllm")
    expect = []
    for i, (k, m, u) in enumerate([(6, [1], [1]), (4, [2], [])]):
        d, lg = _request(k, m, u, gen)
        torch.save({"draft": d.to(torch.int32), "logits": lg}, tmp_path / f"step_{i:06d}.pt")
        v = rule(Draft(tokens=d), TargetScores(logits=lg), GREEDY)
        expect.append((v.num_accepted, v.next_token))
    assert replay(tmp_path, rule) == expect


@pytest.mark.parametrize("rule", [Threshold(threshold_single=0.01), Typical(), Cascade(), FLy(theta=0.3, window=2, mode="code")], ids=lambda r: type(r).__name__)
def test_every_logits_only_rule_decides_on_the_flat_layout_as_step_by_step(rule):
    gen = torch.Generator().manual_seed(2)
    cases = [(5, [], []), (6, [1], [1]), (6, [1], []), (1, [0], [0]), (6, [1, 2], [1, 2])]
    reqs = [_request(k, m, u, gen) for k, m, u in cases]
    out, verdicts = decide_flat(rule, torch.cat([d for d, _ in reqs]).to(torch.int32), [k for k, _, _ in cases],
                                torch.cat([lg[:-1] for _, lg in reqs]), torch.stack([lg[-1] for _, lg in reqs]))
    for b, (d, lg) in enumerate(reqs):
        v = rule(Draft(tokens=d), TargetScores(logits=lg), GREEDY)
        assert verdicts[b] == (v.num_accepted, v.next_token)
        assert out[b, : v.num_accepted + 1].tolist() == d[: v.num_accepted].tolist() + [v.next_token]
    # The loose rules accept an unsure mismatch somewhere (else this test would show nothing).
    assert any(n > 1 for n, _ in verdicts[1:3] + verdicts[4:])


def test_the_workers_rule_is_the_configured_one():
    """The worker (vLLM's process) rebuilds the rule from its class path and knobs."""
    knobs = params_of(Threshold).read({"threshold_single": 0.2}).values()
    rule = sampler_rule({"rule": class_path(Threshold), "knobs": knobs})
    assert type(rule) is Threshold and rule.params == Threshold(threshold_single=0.2).params
    with pytest.raises(TypeError, match="not a rule"):
        sampler_rule({"rule": "loosespec_bench.step.Draft", "knobs": {}})


# Every rule of the package, with what sampler_refusal says (None: it runs inside vLLM).
EXPECTED = {"spd": None, "ar": None, "fly": None, "threshold": None, "typical": None, "cascade": None,
            "dropmatch": "hidden states", "autojudge": "hidden states", "dropmatch_autojudge": "hidden states",
            "fsd": "q_i", "lenient": "q_i", "ensemble": "q_i", "asd": "state over a request's steps"}


def test_every_rule_runs_inside_vllm_or_says_why_not():
    seen = {}
    for cls in rules():
        if "site" in cls.__module__ or not cls.__module__.startswith("loosespec_bench."):
            continue
        name = cls.config_names[0]
        knobs = {} if getattr(cls, "needs_hidden", False) is True else params_of(cls).read({}).values()
        seen[name] = sampler_refusal(cls, knobs)
    assert set(seen) >= set(EXPECTED) - {"dropmatch_naive"}, sorted(seen)
    for name, why in seen.items():
        want = EXPECTED.get(name, "unlisted")
        assert (why is None) if want is None else (why is not None and want in why), (name, why)
