"""DropMatch: hand-built hidden states and LM head for the criteria, p = 0 == SPD through the
loop, seeded reproducibility, JS edge cases, and the overhead record."""

from __future__ import annotations

import pytest
import torch

from loosespec_bench.settings.config import CONF_DIR
from loosespec_bench.decoding import generate
from loosespec_bench.drafters import ModelDrafter
from loosespec_bench.measure.metrics import loose_summary
from loosespec_bench.sampling import SamplingParams
from ..conftest import compose_config
from ..helpers import code_prompt, make_drafter
from loosespec_bench.step import Draft, TargetScores, longest_true_prefix
from loosespec_bench.verifiers import DropMatch
from loosespec_bench.verifiers.dropmatch import (
    DropMatchParams,
    draft_distribution,
    draw_keep_masks,
    dropmatch_decide,
    dropout_path_logits,
    js_accept,
    js_divergence,
    naive_accept,
)
from loosespec_bench.verifiers.spd import SPD


# ---- a hand-built LM head -----------------------------------------------------------------
# Hidden size 4, vocabulary 3. With h = [1, 1, 0, 0]:
#   token 0: h0 + h1 + 0.01   -> 2.01, the clean argmax (the 0.01 wins the all-dropped tie)
#   token 1: 1.5 * h0         -> 1.5;  the argmax whenever h1 is dropped and h0 kept
#   token 2: -(h0 + h1)       -> never above token 0, so never any path's argmax
H_CLEAN = torch.tensor([1.0, 1.0, 0.0, 0.0])


def hand_head() -> torch.nn.Linear:
    head = torch.nn.Linear(4, 3)
    with torch.no_grad():
        head.weight.copy_(torch.tensor([[1.0, 1.0, 0, 0], [1.5, 0, 0, 0], [-1.0, -1.0, 0, 0]]))
        head.bias.copy_(torch.tensor([0.01, 0.0, 0.0]))
    return head


def hand_scores(K: int) -> TargetScores:
    head = hand_head()
    hidden = H_CLEAN.repeat(K + 1, 1)  # [K+1, 4]
    with torch.no_grad():
        logits = head(hidden)  # [K+1, 3]
    return TargetScores(logits=logits, hidden=hidden, lm_head=head)


def test_naive_accepts_an_argmax_of_some_path_and_rejects_no_paths_argmax():
    scores = hand_scores(2)
    with torch.no_grad():
        paths = dropout_path_logits(scores.hidden[:2], scores.lm_head, n_paths=40, p=0.5,
                                    generator=torch.Generator().manual_seed(0))  # [40, 2, 3]
    winners = paths.argmax(-1)
    assert set(winners.flatten().tolist()) == {0, 1}  # 40 paths: P(no dropped-h1 path) ~ 1e-5
    assert naive_accept(torch.tensor([1, 1]), paths).tolist() == [True, True]
    assert naive_accept(torch.tensor([2, 2]), paths).tolist() == [False, False]

    rule = DropMatch(criterion="naive", n_paths=40, p=0.5)
    with torch.no_grad():
        v = rule(Draft(tokens=torch.tensor([1, 1])), scores, SamplingParams(generator=torch.Generator().manual_seed(0)))
        assert (v.num_accepted, v.next_token) == (2, 0)  # both kept, bonus = clean argmax
        assert v.record["loose_accepted"] == [0, 1] and v.record["dropmatch_s"] >= 0
        v = rule(Draft(tokens=torch.tensor([1, 2])), scores, SamplingParams(generator=torch.Generator().manual_seed(0)))
        assert (v.num_accepted, v.next_token) == (1, 0)  # stops at token 2; correction = t = 0
        v = rule(Draft(tokens=torch.tensor([2, 1])), scores, SamplingParams(generator=torch.Generator().manual_seed(0)))
        assert (v.num_accepted, v.next_token) == (0, 0)


def test_exact_match_always_accepted_and_clean_path_option():
    scores = hand_scores(1)
    with torch.no_grad():
        # p = 0.9 with 1 path: the path may well not have token 0 as argmax; d = t = 0 still passes.
        for seed in range(10):
            v = DropMatch(criterion="naive", n_paths=1, p=0.9)(
                Draft(tokens=torch.tensor([0])), scores, SamplingParams(generator=torch.Generator().manual_seed(seed)))
            assert v.num_accepted == 1 and v.record["loose_accepted"] == []
        paths = dropout_path_logits(scores.hidden[:1], scores.lm_head, n_paths=3, p=0.5, include_clean_path=True,
                                    clean_logits=scores.logits[:1], generator=torch.Generator().manual_seed(0))
    assert paths.shape == (3, 1, 3)
    torch.testing.assert_close(paths[0], scores.logits[:1])  # path 1 is the clean prediction


def test_masks_batched_scaled_and_seeded():
    hidden = torch.ones(3, 8)
    seen = []
    head = lambda x: (seen.append(x.shape), x)[1]  # identity head records what it was fed  # noqa: E731
    out = dropout_path_logits(hidden, head, n_paths=5, p=0.25, generator=torch.Generator().manual_seed(1))
    assert seen == [torch.Size([15, 8])]  # all 5 paths x 3 positions in ONE call
    vals = out.unique()
    assert len(vals) == 2 and vals[0] == 0 and vals[1].item() == pytest.approx(1 / 0.75)  # inverted dropout
    again = dropout_path_logits(hidden, head, n_paths=5, p=0.25, generator=torch.Generator().manual_seed(1))
    other = dropout_path_logits(hidden, head, n_paths=5, p=0.25, generator=torch.Generator().manual_seed(2))
    assert torch.equal(out, again) and not torch.equal(out, other)


@pytest.mark.parametrize("criterion", ["naive", "js"])
@pytest.mark.parametrize("lm_head_batch", [None, 1, 2])
def test_lazy_criterion_equals_the_eager_one_and_skips_exact_matches(criterion, lm_head_batch):
    """Evaluating the criterion only at exact-rule rejections, up to the first failure, decides
    exactly what evaluating it at every position (with the same masks) decides, whether the
    candidates' dropout paths go through the LM head all in one call (the default: one weight
    read per step) or a few positions per call."""
    torch.manual_seed(0)
    K, H, V, N, p = 6, 8, 5, 4, 0.4
    calls = []
    head = torch.nn.Linear(H, V)
    counted = lambda x: (calls.append(x.shape[0]), head(x))[1]  # noqa: E731
    checked = loose = 0
    with torch.no_grad():
        for seed in range(60):
            g = torch.Generator().manual_seed(seed)
            hidden = torch.randn(K + 1, H, generator=g)  # [K+1, H]
            logits = head(hidden)  # [K+1, V]
            t = logits.argmax(-1)
            # Draft = the target's tokens with a few random substitutions.
            d = torch.where(torch.rand(K, generator=g) < 0.4, torch.randint(0, V, (K,), generator=g), t[:K])
            probs = torch.softmax(torch.randn(K, V, generator=g), -1)
            calls.clear()
            dec = dropmatch_decide(d, probs, logits, hidden, counted, DropMatchParams(criterion=criterion, n_paths=N, p=p, lm_head_batch=lm_head_batch), SamplingParams(generator=torch.Generator().manual_seed(seed)))
            keep = draw_keep_masks(N, K, H, p, torch.Generator().manual_seed(seed), hidden.device)
            paths = dropout_path_logits(hidden[:K], head, n_paths=N, p=p, keep=keep)  # [N, K, V]
            if criterion == "naive":
                sem = naive_accept(d, paths)
            else:
                ok, maj, *_ = js_accept(d, draft_distribution(d, probs, V), paths)
                sem = ok | maj
            exact = d == t[:K]
            assert dec.n == longest_true_prefix(exact | sem) and dec.next_token == int(t[dec.n])
            assert dec.evaluated == [i for i in range(min(dec.n + 1, K)) if not exact[i]]
            assert dec.semantic[dec.evaluated].tolist() == sem[dec.evaluated].tolist()
            cand = [i for i in range(K) if not exact[i]]
            if lm_head_batch is None:  # one LM-head call per step, N rows per candidate position
                assert calls == ([N * len(cand)] if cand else [])
            else:  # calls of up to lm_head_batch candidates, only as far as the criterion got
                per = [min(lm_head_batch, len(cand) - j) for j in range(0, len(cand), lm_head_batch)]
                assert calls == [N * b for b in per[: len(calls)]] and sum(calls) >= N * len(dec.evaluated)
            checked += len(dec.evaluated)
            loose += len(dec.loose)
    assert checked > 30 and loose > 0  # not vacuous


def test_no_mismatch_no_lm_head_call():
    scores = hand_scores(3)
    calls = []
    head = lambda x: (calls.append(x.shape), scores.lm_head(x))[1]  # noqa: E731
    with torch.no_grad():
        d = dropmatch_decide(torch.tensor([0, 0, 0]), None, scores.logits, scores.hidden, head, DropMatchParams(criterion="js"), SamplingParams(generator=torch.Generator().manual_seed(0)))
    assert (d.n, d.evaluated, calls) == (3, [], [])


# ---- the JS criterion ----------------------------------------------------------------------


def test_js_divergence_basics():
    p = torch.tensor([0.5, 0.5, 0.0])
    q = torch.tensor([0.0, 0.0, 1.0])
    assert js_divergence(p, p).item() == pytest.approx(0.0, abs=1e-7)
    assert js_divergence(p, q).item() == pytest.approx(torch.log(torch.tensor(2.0)).item(), rel=1e-6)  # disjoint: ln 2
    assert js_divergence(p, q).item() == pytest.approx(js_divergence(q, p).item())


def _paths(*rows: list[float]) -> torch.Tensor:
    return torch.tensor(rows).unsqueeze(1)  # [N, 1, vocab]: one draft position


def test_fast_path_js_equals_the_plain_formula_and_survives_masked_logits():
    from loosespec_bench.verifiers.dropmatch import _js_paths_to_centroid

    z = torch.randn(5, 3, 50, generator=torch.Generator().manual_seed(0)) * 4  # [N, K, vocab]
    z[:, 1, 7] = float("-inf")  # a masked token in every path
    z[2, 2, 9] = float("-inf")  # and in one path only
    P = torch.softmax(z, -1)
    c = torch.softmax(z.mean(0), -1)
    got, c_got = _js_paths_to_centroid(z)
    assert torch.isfinite(got).all()
    torch.testing.assert_close(got, js_divergence(P, c.unsqueeze(0)), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(c_got, c)


def test_js_draft_distribution_equal_to_centroid_is_accepted():
    paths = _paths([2.0, 1.0, 0.0], [1.0, 2.0, 0.0], [1.5, 1.5, 0.0])
    c = torch.softmax(paths.mean(0), -1)  # [1, 3]
    ok, maj, js_q, js_max = js_accept(torch.tensor([2]), c, paths, majority=None)
    assert ok.tolist() == [True] and js_q.item() == pytest.approx(0.0, abs=1e-6) and js_max.item() > 0


def test_js_one_hot_draft_far_from_a_tight_consensus_is_rejected():
    # Paths agree closely on token 0; a one-hot draft on token 1 is much farther from c than
    # any path.
    paths = _paths([5.0, 0.0, 0.0], [5.1, 0.0, 0.0], [4.9, 0.1, 0.0])
    q = draft_distribution(torch.tensor([1]), None, 3)  # one-hot(d)
    ok, maj, js_q, js_max = js_accept(torch.tensor([1]), q, paths)
    assert ok.tolist() == [False] and maj.tolist() == [False] and js_q.item() > js_max.item()


def test_js_majority_rule_threshold():
    # 3 of 4 soft paths lean to token 1: they all sit close to the centroid, while the one-hot
    # draft on token 1 is far from it, so the JS test fails and only the majority rule accepts.
    paths = _paths([0.0, 0.5, 0.0], [0.0, 0.5, 0.0], [0.0, 0.5, 0.0], [0.5, 0.0, 0.0])
    q = draft_distribution(torch.tensor([1]), None, 3)
    ok, maj, *_ = js_accept(torch.tensor([1]), q, paths, majority=0.5)
    assert ok.tolist() == [False] and maj.tolist() == [True]  # JS fails, the majority accepts
    assert js_accept(torch.tensor([1]), q, paths, majority=None)[1].tolist() == [False]
    assert js_accept(torch.tensor([1]), q, paths, majority=0.75)[1].tolist() == [False]  # 3 > 3 is false
    # Exactly half is not "more than half".
    half = _paths([0.0, 0.5, 0.0], [0.0, 0.5, 0.0], [0.5, 0.0, 0.0], [0.5, 0.0, 0.0])
    assert js_accept(torch.tensor([1]), q, half, majority=0.5)[1].tolist() == [False]


def test_js_with_p0_accepts_only_exact_matches():
    # p = 0: every path is the clean prediction, the spread max_k JS(P^(k), c) is ~0.
    scores = hand_scores(2)
    probs = torch.softmax(torch.tensor([[0.0, 3.0, 0.0], [0.0, 3.0, 0.0]]), -1)
    with torch.no_grad():
        d = dropmatch_decide(torch.tensor([0, 1]), probs, scores.logits, scores.hidden, scores.lm_head, DropMatchParams(criterion="js", n_paths=5, p=0.0))
    assert (d.n, d.next_token) == (1, 0) and d.evaluated == [1] and d.js_max[1].abs() < 1e-6


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_empty_draft_emits_a_target_token(temperature):
    scores = hand_scores(0)
    with torch.no_grad():
        v = DropMatch()(Draft(tokens=torch.empty(0, dtype=torch.long)), scores,
                        SamplingParams(temperature, generator=torch.Generator().manual_seed(0)))
    assert v.num_accepted == 0 and v.next_token in (0, 1, 2) and v.record["raw_match"] == []
    if temperature == 0:
        assert v.next_token == 0


def test_sampling_fallback_is_speculative_sampling_for_rejected_tokens():
    # T > 0 with a token no path votes for (token 2): it can still pass the exact test
    # min(1, p/q) with q one-hot, i.e. with probability p(2); else the correction is drawn
    # from p with token 2 removed.
    scores = hand_scores(1)
    rule = DropMatch(criterion="naive", n_paths=5, p=0.3)
    p2 = torch.softmax(scores.logits[0], -1)[2].item()
    with torch.no_grad():
        outs = [rule(Draft(tokens=torch.tensor([2])), scores,
                     SamplingParams(1.0, generator=torch.Generator().manual_seed(s))) for s in range(400)]
    kept = sum(v.num_accepted for v in outs) / len(outs)
    assert abs(kept - p2) < 0.05
    assert all(v.next_token != 2 for v in outs if v.num_accepted == 0)


def test_draft_vocabulary_padding():
    q = draft_distribution(torch.tensor([1]), torch.tensor([[0.25, 0.75]]), 4)
    assert q.tolist() == [[0.25, 0.75, 0.0, 0.0]]
    assert draft_distribution(torch.tensor([1]), torch.tensor([[0.2, 0.7, 0.1]]), 2).shape == (1, 2)


def test_validation():
    for bad in (dict(criterion="cosine"), dict(n_paths=0), dict(p=1.0), dict(majority=1.5),
                dict(n_paths=1, include_clean_path=True)):
        with pytest.raises(ValueError):
            DropMatch(**bad)
    assert DropMatch(criterion="js").needs_draft_probs and not DropMatch(criterion="naive").needs_draft_probs
    assert DropMatch.needs_hidden is True


# ---- through the decoding loop on tiny models --------------------------------------------------


@pytest.mark.parametrize(("criterion", "drafter"), [("naive", "model"), ("js", "model"), ("js", "pld"), ("naive", "mla")])
def test_p0_equals_vanilla_spd_token_for_token(models, criterion, drafter):
    target, draft, tok = models
    prompt = code_prompt(tok)
    rule = DropMatch(criterion=criterion, p=0.0)
    kw = dict(max_new_tokens=40, record_steps=True, generator=torch.Generator().manual_seed(0))
    out = generate(target, prompt, verifier=rule, drafter=make_drafter(drafter, draft, k=6), **kw)
    spd = generate(target, prompt, verifier=SPD(), drafter=make_drafter(drafter, draft, k=6), **kw)
    assert out.new_tokens == spd.new_tokens and out.accepted == spd.accepted
    flags = [f for s in out.step_records for f in s["raw_match"]]
    assert any(flags) and not all(flags)  # not vacuous: matches and mismatches both occurred


@pytest.mark.parametrize("temperature", [0.0, 0.8])
def test_seeded_runs_reproducible_and_loose(models, temperature):
    target, draft, tok = models
    prompt = code_prompt(tok)

    def run(seed):
        return generate(target, prompt, verifier=DropMatch(criterion="naive", n_paths=5, p=0.3),
                        drafter=ModelDrafter(draft, k=6), max_new_tokens=40, record_steps=True,
                        temperature=temperature, generator=torch.Generator().manual_seed(seed))

    a, b = run(5), run(5)
    assert a.new_tokens == b.new_tokens and a.accepted == b.accepted
    assert [s["loose_accepted"] for s in a.step_records] == [s["loose_accepted"] for s in b.step_records]
    rec = {"metrics": {"decode_s": a.decode_s}, "steps": a.step_records}
    s = loose_summary([rec])
    assert s["tau_with_loose"] >= s["tau_without_loose"]
    assert 0 < s["dropmatch_overhead"] < 1


def test_loose_accepts_keep_the_loop_consistent(models):
    # Each step's last token must be the target's greedy token after the committed prefix.
    target, draft, tok = models
    prompt = code_prompt(tok)
    out = generate(target, prompt, verifier=DropMatch(criterion="naive", n_paths=8, p=0.5),
                   drafter=ModelDrafter(draft, k=6), max_new_tokens=40, record_steps=True,
                   generator=torch.Generator().manual_seed(0))
    assert sum(len(s["loose_accepted"]) for s in out.step_records) > 0
    seq = prompt.tolist()
    with torch.inference_mode():
        for s, e in zip(out.step_records, out.emitted):
            seq += s["draft"][: s["accepted"]]
            if e == s["accepted"] + 1:
                assert s["next"] == int(target(torch.tensor([seq])).logits[0, -1].argmax())
                seq.append(s["next"])


DROPMATCH_EXPERIMENTS = sorted(p.stem for p in (CONF_DIR / "experiment").glob("dropmatch_*.yaml"))


@pytest.mark.parametrize("name", DROPMATCH_EXPERIMENTS)
def test_dropmatch_experiment_files_run_dropmatch(name):
    # Composition and sweep keys of every experiment: tests/settings/test_config.py.
    cfg = compose_config([f"experiment={name}"])
    assert cfg.experiment_name == name and cfg.method.name == "dropmatch"
