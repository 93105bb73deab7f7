"""The rules' defaults follow the released FLy code (AMD-AGI/FLy, fly/models/FLy.py), each other
behaviour a named option (issue 12 items 3 and 6), pinned on hand-built logits and tiny models:
full-K drafts near max_new_tokens, greedy drafts at T > 0, the theta <= 0.01 gate switch-off,
the official MLA lookup, vLLM's window (mode=vllm), top-k / top-p sampling, K = 15 and K > W."""

from __future__ import annotations

import pytest
import torch
from transformers import TopKLogitsWarper, TopPLogitsWarper

from loosespec_bench.settings.checks import validate
from loosespec_bench.settings.config import run_id
from loosespec_bench.decoding import generate
from loosespec_bench.drafters import MLADrafter, ModelDrafter, prompt_lookup
from loosespec_bench.errors import ConfigError
from loosespec_bench.models.tiny import tiny_model
from loosespec_bench.sampling import SamplingParams, process_logits, sample_or_argmax, tempered_probs
from loosespec_bench.step import Draft, TargetScores
from loosespec_bench.verifiers import FLy
from loosespec_bench.verifiers.dropmatch import DropMatch
from loosespec_bench.verifiers.fly import FLyParams, fly_decide
from loosespec_bench.verifiers.spd import SPD, verify_sampling

from ..conftest import compose_config
from ..helpers import code_prompt
from .test_fly import SURE, UNSURE, build_logits, case
from ..test_sampling import _chi_square_ok


# ---- 1. near max_new_tokens: FLy drafts the full K and the loop cuts the chunk ----------------


def test_rules_declare_how_they_draft_near_the_limit():
    assert FLy().drafts_full_k_near_limit is True  # official default
    assert FLy(near_limit="shrink").drafts_full_k_near_limit is False
    assert SPD().drafts_full_k_near_limit is False  # lossless: same output, shorter drafts
    assert DropMatch().drafts_full_k_near_limit is False
    with pytest.raises(ConfigError):
        FLy(near_limit="cut")


def test_fly_full_k_near_the_limit_cuts_the_same_run_the_official_decoder_makes(models):
    # The released decoder drafts K whatever the budget left, so a limit-hitting generation is
    # the prefix of a longer one: every decision (and FLy's last-W zone) is the one made far
    # from the limit. With "shrink" the drafts get shorter near the limit instead.
    target, draft, tok = models
    prompt = code_prompt(tok)
    K = 8
    long = generate(target, prompt, verifier=FLy(theta=0.3, window=3), drafter=ModelDrafter(draft, k=K),
                    max_new_tokens=60, record_steps=True)
    assert sum(len(s["loose_accepted"]) for s in long.step_records) > 0  # loose accepts happen
    for limit in (13, 22, 31):
        out = generate(target, prompt, verifier=FLy(theta=0.3, window=3), drafter=ModelDrafter(draft, k=K),
                       max_new_tokens=limit, record_steps=True)
        assert out.new_tokens == long.new_tokens[:limit] and out.stop_reason == "max_new_tokens"
        assert set(out.drafted) == {K}  # the last step drafted K too
        shrink = generate(target, prompt, verifier=FLy(theta=0.3, window=3, near_limit="shrink"),
                          drafter=ModelDrafter(draft, k=K), max_new_tokens=limit, record_steps=True)
        assert len(shrink.new_tokens) == limit and max(shrink.drafted) == K
        assert sum(shrink.drafted) < sum(out.drafted) or shrink.drafted[-1] < K


# ---- 2. the draft temperature the rule asks for ---------------------------------------------


class _Recording(ModelDrafter):
    """A draft model that notes the temperature each proposal was asked at."""

    def __init__(self, model, k):
        super().__init__(model, k)
        self.temperatures: list[float] = []

    def propose(self, tokens, k, **kw):
        self.temperatures.append(kw["sampling"].temperature)
        return super().propose(tokens, k, **kw)


def test_fly_drafts_greedily_at_any_temperature_unless_asked(models):
    assert FLy().draft_temperature(0.8) == 0.0  # the released drafter never samples
    assert FLy(draft_sampling=True).draft_temperature(0.8) == 0.8
    assert SPD().draft_temperature(0.8) == 0.8  # speculative sampling needs the drafter's q
    target, draft, tok = models
    prompt = code_prompt(tok)
    for rule, want in ((FLy(window=3), 0.0), (FLy(window=3, draft_sampling=True), 0.8), (SPD(), 0.8)):
        d = _Recording(draft, 6)
        generate(target, prompt, verifier=rule, drafter=d, max_new_tokens=12, temperature=0.8,
                 generator=torch.Generator().manual_seed(0))
        assert d.temperatures and set(d.temperatures) == {want}


# ---- 3. theta <= 0.01 switches the entropy gate off ------------------------------------------


def test_tiny_theta_switches_the_entropy_gate_off_as_the_released_code():
    # A low-entropy mismatch at 2 with a clean window: the gate rejects it at any theta > 0.01;
    # the released code keeps entropy_thre only when > 1e-2, so at 0.01 and below the window
    # alone decides (accepts).
    d, lg = case(10, {2: SURE}, bonus=9)
    assert fly_decide(d, lg, FLyParams(theta=0.011, window=4)).n == 2
    for theta in (0.01, 0.005, 0.0):
        assert fly_decide(d, lg, FLyParams(theta=theta, window=4)).n == 10
    assert fly_decide(d, lg, FLyParams(theta=0.005, window=4, theta_switch_off=False)).n == 2
    # The switch-off is the released code's: the paper and vLLM readings keep their rules.
    assert fly_decide(d, lg, FLyParams(theta=0.005, window=4, mode="vllm")).n == 2
    # The verifier passes the option through.
    v = FLy(theta=0.005, window=4, theta_switch_off=False)
    assert v(Draft(tokens=d), TargetScores(logits=lg), SamplingParams()).num_accepted == 2


# ---- 4. MLA's official lookup ------------------------------------------------------------------


def test_lookup_without_overlap_is_the_released_search():
    t = torch.tensor
    # The only 2-gram match of [3, 3] overlaps the trailing n-gram: transformers-style lookup
    # takes it; the released code searches windows inside tokens[:-2] only, finds none, and
    # falls back to the 1-gram [3], whose first match (index 1) leaves [3, 3] to continue.
    ctx = t([7, 3, 3, 3])
    assert prompt_lookup(ctx, 6, max_ngram=2).tolist() == [3]
    assert prompt_lookup(ctx, 6, max_ngram=2, overlap=False).tolist() == [3, 3]
    # Shorter than 2n: the released code's unfold would fail; here that size is skipped (the
    # 1-gram [5] then matches at 0).
    assert prompt_lookup(t([5, 5, 5]), 6, max_ngram=2, overlap=False).tolist() == [5, 5]


def successor_model(f: dict[int, int], vocab: int = 264, seed: int = 0):
    """A real Qwen2 model (1 layer, KV cache, crop) whose greedy next token is f(current token)
    (default v + 1): attention and MLP outputs are zeroed, so the LM head sees only the current
    token's normalised embedding, and row v of the head sums those of f's preimages of v."""
    model = tiny_model(seed, layers=1, vocab_size=vocab)
    with torch.no_grad():
        for layer in model.model.layers:
            layer.self_attn.o_proj.weight.zero_()
            layer.mlp.down_proj.weight.zero_()
        model.model.norm.weight.fill_(1.0)
        e = model.model.embed_tokens.weight
        e_n = e / e.pow(2).mean(-1, keepdim=True).add(1e-6).sqrt()  # [V, H] what the head reads
        head = torch.zeros_like(model.lm_head.weight)
        for u in range(vocab):
            head[f.get(u, (u + 1) % vocab)] += e_n[u]
        model.lm_head.weight.copy_(head)
    return model


def official_draft_with_ngram(ctx: list[int], f, k: int, max_ngram: int = 4, num_pred: int = 6):
    """The released draft_with_ngram as read (fly/models/FLy.py), on a draft model whose greedy
    token after x is f(x): returns (draft[:k], forwards, guessed tokens fed)."""

    def find(ids: list[int]) -> list[int]:
        L = len(ids)
        for n in range(max_ngram, 0, -1):
            if L <= n:
                continue
            head, tail = ids[:-n], ids[-n:]
            for i in range(len(head) - n + 1):  # windows inside input_ids[:, :-n]
                if head[i : i + n] == tail:
                    return ids[i + n : min(i + n + num_pred, L)]
        return []

    prompt, init = list(ctx), len(ctx)
    prev = list(range(101, 101 + num_pred))  # the dummy first guess
    forwards = fed = 0
    while len(prompt) - init < k:
        guess = find(prompt) or prev
        prev = guess
        forwards += 1
        fed += len(guess)
        new, last = [], prompt[-1]
        for g in guess:  # accepted prefix, then the draft model's own token
            if g != f(last):
                break
            new.append(g)
            last = g
        new.append(f(last))
        prompt += new
    return prompt[init:][:k], forwards, fed


def test_mla_official_lookup_same_draft_and_the_authors_forward_counts():
    # Draft model: 9 -> 9 (it continues a run of 9s), v -> v + 1 elsewhere. The context ends in
    # a run of four 9s. Released lookup: the 2-gram [9, 9] inside ctx[:-2] guesses [9, 9], then
    # [9, 9, 9, 9], then six 9s: 3 forwards, 12 guessed tokens fed. Transformers-style lookup
    # matches the 4-gram overlapping the tail and guesses one 9 at first: 4 forwards, 11 fed.
    f_map = {9: 9}
    model = successor_model(f_map)
    f = lambda x: f_map.get(x, (x + 1) % 264)  # noqa: E731
    ctx = [1, 2, 3, 9, 9, 9, 9]
    K = 15
    ref = ModelDrafter(model, k=K)
    ref.reset(torch.tensor(ctx))
    greedy = ref.propose(torch.tensor(ctx), K).tokens.tolist()
    want, forwards, fed = official_draft_with_ngram(ctx, f, K)
    assert greedy == want == [9] * K
    counts = {}
    for lookup in ("official", "hf"):
        mla = MLADrafter(model, k=K, lookup=lookup)
        mla.reset(torch.tensor(ctx))
        d = mla.propose(torch.tensor(ctx), K)
        assert d.tokens.tolist() == greedy  # same draft tokens either way
        counts[lookup] = (d.info["draft_forwards"], d.info["lookup_proposed"])
    assert counts["official"] == (forwards, fed) == (3, 12)  # the released code's cost profile
    assert counts["hf"] == (4, 11)  # overlapping matches change the count


def test_mla_official_dummy_guess_and_whole_guesses():
    # No n-gram of the context repeats: the first forward feeds the dummy 101..106 (the released
    # code's), later guesses are fed whole and the draft is cut at K.
    model = successor_model({})
    f = lambda x: (x + 1) % 264  # noqa: E731
    ctx = [10, 20, 30, 40, 50, 60, 70, 80]
    for K in (3, 7, 15):
        want, forwards, fed = official_draft_with_ngram(ctx, f, K)
        mla = MLADrafter(model, k=K)  # lookup=official is the default
        mla.reset(torch.tensor(ctx))
        d = mla.propose(torch.tensor(ctx), K)
        assert d.tokens.tolist() == want == list(range(81, 81 + K))
        assert (d.info["draft_forwards"], d.info["lookup_proposed"]) == (forwards, fed)
        assert d.info["lookup_proposed"] >= 6  # the dummy guess was fed


def test_mla_lookup_option_is_validated_and_configured():
    with pytest.raises(ConfigError):
        MLADrafter(tiny_model(0), lookup="vllm")
    assert compose_config(["method=fly", "drafter=mla"]).drafter.lookup == "official"


# ---- 5. vLLM's window (mode=vllm) --------------------------------------------------------------


def test_vllm_window_disagrees_with_the_released_rule_on_the_documented_example():
    # docs/algorithms.md section 4.4: d = [1,0,0,1,0,0,0,0], every target token 0, W = 3. The released rule
    # matches the pattern [F,T,T] at 0 and 3 (a_3 is a mismatch inside 0's window, but the
    # code's pattern stops before it); vLLM needs a_1..a_3 all true after 0 and rejects there.
    d = torch.tensor([1, 0, 0, 1, 0, 0, 0, 0])
    lg = build_logits([0] * 9, [UNSURE, SURE, SURE, UNSURE, SURE, SURE, SURE, SURE, SURE])
    assert fly_decide(d, lg, FLyParams(theta=0.3, window=3, mode="code")).n == 8
    vllm = fly_decide(d, lg, FLyParams(theta=0.3, window=3, mode="vllm"))
    assert (vllm.n, vllm.next_token) == (0, 0)
    assert vllm.deferred.tolist()[3] is True  # 3 would be deferred, but 0 already failed


def test_vllm_window_needs_pos_plus_w_below_k_and_has_no_switch_off():
    K, W = 10, 4
    d, lg = case(K, {5: UNSURE}, bonus=9)  # 5 + 4 < 10: deferred
    assert fly_decide(d, lg, FLyParams(theta=0.3, window=W, mode="vllm")).n == K
    d, lg = case(K, {6: UNSURE})  # 6 + 4 = 10: no
    assert fly_decide(d, lg, FLyParams(theta=0.3, window=W, mode="vllm")).n == 6
    with pytest.raises(ConfigError):
        FLy(mode="vllmm")


def test_vllm_mode_at_t_gt_0_is_speculative_sampling_where_it_never_defers(models):
    # theta = 2 > log 3 bounds the top-3 entropy: no deferral, so vLLM's native test, residual
    # and bonus must reproduce SPD draw for draw (same draft, same generator stream).
    target, draft, tok = models
    prompt = code_prompt(tok)
    kw = dict(max_new_tokens=30, temperature=0.8, top_p=0.9)
    spd = generate(target, prompt, verifier=SPD(), drafter=ModelDrafter(draft, k=8),
                   generator=torch.Generator().manual_seed(5), **kw)
    fly = generate(target, prompt, verifier=FLy(theta=2.0, window=3, mode="vllm", draft_sampling=True, near_limit="shrink"),
                   drafter=ModelDrafter(draft, k=8), generator=torch.Generator().manual_seed(5), **kw)
    assert fly.new_tokens == spd.new_tokens and fly.accepted == spd.accepted


# ---- 6. top-k and top-p ------------------------------------------------------------------------


def test_process_logits_matches_transformers_warpers():
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(6, 50, generator=g) * 3
    logits[0, :3] = 5.0  # ties at the k-th value stay, as transformers keeps them
    for T, k, p in [(0.7, 5, 1.0), (1.3, 0, 0.8), (0.9, 10, 0.5), (1.0, 3, 0.95), (1.0, 1, 1.0)]:
        want = logits / T
        if k:
            want = TopKLogitsWarper(top_k=k)(None, want)
        if p < 1.0:
            want = TopPLogitsWarper(top_p=p)(None, want)
        got = process_logits(logits, T, k, p)
        assert torch.equal(got.isinf(), want.isinf()), (T, k, p)
        torch.testing.assert_close(got[~got.isinf()], want[~want.isinf()])
    probs = torch.tensor([[0.5, 0.3, 0.15, 0.05]]).log()
    assert tempered_probs(probs, 1.0, top_p=0.75).gt(0).tolist() == [[True, True, False, False]]
    assert tempered_probs(probs, 1.0, top_p=0.85).gt(0).tolist() == [[True, True, True, False]]
    assert tempered_probs(probs, 1.0, top_k=1).tolist() == [[1.0, 0.0, 0.0, 0.0]]
    # T = 0: greedy decisions read the untruncated logits.
    torch.testing.assert_close(process_logits(probs, 0.0, 1, 0.1), probs)


@pytest.mark.parametrize(("top_k", "top_p"), [(4, 1.0), (0, 0.7), (5, 0.8)])
def test_spd_accept_and_residual_reproduce_the_processed_target(top_k, top_p):
    torch.manual_seed(11)
    V = 8
    target_logits = (torch.randn(2, V) * 1.5)  # [K+1 = 2, V]: row 0 decides the first token
    draft_logits = torch.randn(V) * 2
    T = 0.9
    p = tempered_probs(target_logits[0], T, top_k=top_k, top_p=top_p)
    assert (p == 0).any()  # the truncation bites
    g = torch.Generator().manual_seed(12)
    n = 6000
    counts = torch.zeros(V)
    for _ in range(n):
        d, q = sample_or_argmax(draft_logits, SamplingParams(T, top_k, top_p, g), want_probs=True)
        m, nxt = verify_sampling(torch.tensor([d]), q[None], target_logits, temperature=T, generator=g,
                                 top_k=top_k, top_p=top_p)
        counts[d if m == 1 else nxt] += 1
    assert _chi_square_ok(counts, p), (counts / n, p)
    # The test has power: the untruncated target fails it.
    assert not _chi_square_ok(counts, tempered_probs(target_logits[0], T))


@pytest.mark.parametrize("rule", ["spd", "fly", "dropmatch"])
def test_top_k_1_reaches_drafter_and_rule_through_the_loop(models, rule):
    # top_k = 1 at T > 0 leaves one token per distribution: every rule must then decode as the
    # greedy target alone, which holds only if the loop passed top_k to the rule and the drafter.
    target, draft, tok = models
    prompt = code_prompt(tok)
    verifier = {"spd": SPD(), "fly": FLy(theta=2.0, window=3, draft_sampling=True, near_limit="shrink"),
                "dropmatch": DropMatch(criterion="naive", p=0.0)}[rule]
    ar = generate(target, prompt, verifier=SPD(), max_new_tokens=24)
    out = generate(target, prompt, verifier=verifier, drafter=ModelDrafter(draft, k=8), max_new_tokens=24,
                   temperature=1.0, top_k=1, generator=torch.Generator().manual_seed(0))
    assert out.new_tokens == ar.new_tokens
    assert sum(out.accepted) > 0


@pytest.mark.parametrize(("override", "bad"), [
    ("generation.top_p=0", "generation.top_p=0"), ("generation.top_p=1.5", "generation.top_p=1.5"),
    ("generation.top_k=-1", "generation.top_k=-1"), ("generation.top_k=2.5", "generation.top_k=2.5"),
])
def test_sampling_truncation_is_validated(override, bad):
    with pytest.raises(ConfigError) as e:
        validate(compose_config([override]))
    assert bad in str(e.value) and "\n" not in str(e.value)
    validate(compose_config(["generation.top_p=0.9", "generation.top_k=50"]))


def test_neutral_truncation_keeps_existing_run_ids():
    base = compose_config(["drafter.k=3"])
    assert run_id(base) == run_id(compose_config(["drafter.k=3", "generation.top_p=1.0", "generation.top_k=0"]))
    assert run_id(base) != run_id(compose_config(["drafter.k=3", "generation.top_p=0.9"]))


# ---- issue 12 item 3: K = 15 for FLy, K <= W refused ----------------------------------------


def test_method_fly_composes_with_the_released_k():
    # `python -m loosespec_bench method=fly dataset=mgsm`, composed (no model is loaded).
    cfg = compose_config(["method=fly", "dataset=mgsm"])
    assert cfg.drafter.k == 15 and cfg.method.window == 6 and cfg.method.mode == "code"
    assert cfg.method.near_limit == "full_k" and cfg.method.draft_sampling is False
    assert cfg.method.theta_switch_off is True
    validate(cfg)
    assert compose_config(["method=fly", "drafter=mla"]).drafter.k == 15
    assert compose_config(["method=fly", "drafter=mla", "drafter.k=25"]).drafter.k == 25  # the user wins
    assert compose_config(["method=spd"]).drafter.k == 5  # other methods keep the drafter's K


def test_fly_with_k_not_above_w_is_a_config_error():
    with pytest.raises(ConfigError) as e:
        validate(compose_config(["method=fly", "drafter.k=5"]))
    assert str(e.value) == (
        "drafter.k=5 <= method.window=6: the deferral window never fills and FLy equals SPD; "
        "raise K or set method.no_window=true for the no-window ablation"
    )
    with pytest.raises(ConfigError):
        validate(compose_config(["method=fly", "method.mode=vllm", "drafter.k=6"]))  # vLLM: W < K
    validate(compose_config(["method=fly", "drafter.k=5", "method.no_window=true"]))
    validate(compose_config(["method=fly", "drafter.k=7"]))
    validate(compose_config(["method=spd", "drafter.k=3"]))
