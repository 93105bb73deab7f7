"""FLy: the released code's rule on hand-built logits (named edge cases), the paper reading,
the no-window ablation, sampling, and FLy == SPD through the decoding loop when the entropy
gate rejects every mismatch."""

from __future__ import annotations

import math

import pytest
import torch


from loosespec_bench.settings.config import CONF_DIR
from loosespec_bench.decoding import generate
from loosespec_bench.drafters import ModelDrafter
from loosespec_bench.measure.metrics import loose_summary, summarize
from loosespec_bench.sampling import SamplingParams
from ..conftest import compose_config
from ..helpers import code_prompt, make_drafter
from loosespec_bench.step import Draft, TargetScores
from loosespec_bench.verifiers import FLy
from loosespec_bench.verifiers.fly import (
    deferral_code,
    deferral_paper,
    FLyParams,
    fly_decide,
    normalized_entropy,
    topk_entropy,
)
from loosespec_bench.verifiers.spd import SPD

V = 16  # vocabulary of the hand-built cases


def verify_greedy(draft_tokens: torch.Tensor, target_logits: torch.Tensor, **knobs) -> tuple[int, int]:
    """Greedy FLy's (n, next_token): keep draft_tokens[:n], then emit next_token."""
    d = fly_decide(draft_tokens, target_logits, FLyParams(**knobs))
    return d.n, d.next_token
SURE, UNSURE = "sure", "unsure"


def build_logits(t: list[int], kinds: list[str] | None = None) -> torch.Tensor:
    """[K+1, V] logits whose row i has argmax t[i].

    "sure": one dominant token, top-3 entropy H ~ 1e-6 (below any theta used here).
    "unsure": the argmax and two runners-up nearly tied, H ~ 1.0 (above theta = 0.3).
    """
    kinds = kinds or [SURE] * len(t)
    rows = []
    for tok, kind in zip(t, kinds):
        row = torch.zeros(V)
        if kind == SURE:
            row[tok] = 20.0
        else:
            row[tok] = 5.0
            row[(tok + 1) % V] = 4.9
            row[(tok + 2) % V] = 4.9
        rows.append(row)
    return torch.stack(rows)


def other(tok: int) -> int:
    """A token that is not `tok` and not one of its unsure runners-up."""
    return (tok + 7) % V


def case(K: int, mismatch: dict[int, str], bonus: int = 3) -> tuple[torch.Tensor, torch.Tensor]:
    """Draft d and logits where the target's tokens t_i = i % V, and the draft differs from the
    target exactly at the positions in `mismatch` (value: that row's kind)."""
    t = [(i % V) for i in range(K)] + [bonus]
    kinds = [mismatch.get(i, SURE) for i in range(K)] + [SURE]
    d = torch.tensor([other(t[i]) if i in mismatch else t[i] for i in range(K)])
    return d, build_logits(t, kinds)


# ---- the code reading (default) --------------------------------------------------------------


def test_entropy_is_top3_unnormalised():
    logits = torch.zeros(2, 10)  # uniform over 10: top-3 terms 3 * 0.1 * ln 10
    logits[1, 0] = 50.0  # one-hot
    H = topk_entropy(logits, 3)
    assert H[0].item() == pytest.approx(3 * 0.1 * math.log(10), rel=1e-5)
    assert H[1].item() == pytest.approx(0.0, abs=1e-6)
    # The paper's normalised full-vocab entropy of a uniform row is 1.
    assert normalized_entropy(logits)[0].item() == pytest.approx(1.0, rel=1e-5)
    d, lg = case(4, {1: UNSURE})
    H = topk_entropy(lg[:4], 3)
    assert H[1] > 0.9 and H[0] < 1e-3


def test_no_mismatch_accepts_all_and_emits_bonus():
    d, lg = case(10, {}, bonus=9)
    assert verify_greedy(d, lg, theta=0.3, window=4) == (10, 9)
    dec = fly_decide(d, lg, FLyParams(theta=0.3, window=4))
    assert dec.loose == [] and dec.mismatches == []


def test_high_entropy_mismatch_then_clean_window_is_accepted_keeping_draft_token():
    d, lg = case(10, {2: UNSURE}, bonus=9)
    n, nxt = verify_greedy(d, lg, theta=0.3, window=4)
    assert (n, nxt) == (10, 9)
    dec = fly_decide(d, lg, FLyParams(theta=0.3, window=4))
    assert dec.loose == [2]
    # The emitted token at the deferred position is the DRAFT's, not the target's.
    assert int(d[2]) != int(lg[2].argmax())
    assert d[:n][2] == d[2]
    rec = dec.record()
    assert rec["raw_match"][2] is False and rec["loose_accepted"] == [2]
    assert rec["mismatch_positions"] == [2] and rec["mismatch_entropy"][0] > 0.9


def test_second_mismatch_inside_window_rejects_the_first_retroactively():
    # Mismatch at 2, then a second at 4 (inside 2's window 2..5): 2 fails after all, although
    # the mismatch at 4 has a clean window of its own.
    d, lg = case(12, {2: UNSURE, 4: UNSURE})
    dec = fly_decide(d, lg, FLyParams(theta=0.3, window=4))
    assert dec.deferred.tolist()[2] is False and dec.deferred.tolist()[4] is True
    assert (dec.n, dec.next_token) == (2, 2)  # correction = t_2 = 2
    assert dec.loose == []


def test_mismatch_too_close_to_the_end_is_rejected():
    K, W = 10, 4
    # At K-W-1 = 5 the window a_5..a_8 fits before the last position: accepted.
    d, lg = case(K, {5: UNSURE}, bonus=9)
    assert verify_greedy(d, lg, theta=0.3, window=W) == (K, 9)
    # At K-W = 6 a full window a_6..a_9 follows, but the code allows no deferral in the last
    # W positions.
    d, lg = case(K, {6: UNSURE})
    assert verify_greedy(d, lg, theta=0.3, window=W) == (6, 6)
    # At K-2 the window cannot even fill.
    d, lg = case(K, {8: UNSURE})
    assert verify_greedy(d, lg, theta=0.3, window=W) == (8, 8)


def test_low_entropy_mismatch_is_rejected_even_with_a_clean_window():
    d, lg = case(10, {2: SURE})
    dec = fly_decide(d, lg, FLyParams(theta=0.3, window=4))
    assert dec.deferred.tolist()[2] is True  # the window alone would accept it...
    assert (dec.n, dec.next_token) == (2, 2)  # ...the entropy gate does not


@pytest.mark.parametrize("K", [3, 6])
def test_draft_not_longer_than_window_has_no_deferral(K):
    # K < W: the window step is skipped; K == W: the only window reaches the last position.
    d, lg = case(K, {0: UNSURE})
    assert deferral_code(torch.tensor([False] + [True] * (K - 1)), 6).any().item() is False
    assert verify_greedy(d, lg, theta=0.3, window=6) == (0, 0)


def test_deferral_window_pattern_on_raw_flags():
    T, F = True, False
    a = torch.tensor([T, F, T, T, T, F, T, T, T, T])
    assert deferral_code(a, 3).nonzero().flatten().tolist() == [1, 5]
    assert deferral_code(a, 4).nonzero().flatten().tolist() == [1, 5]
    assert deferral_code(a, 5).nonzero().flatten().tolist() == []  # [1]: a_5 breaks it; [5]: last W
    # Paper: W following flags, j + W <= K (1-based).
    assert deferral_paper(a, 3).nonzero().flatten().tolist() == [1, 5]
    assert deferral_paper(a, 4).nonzero().flatten().tolist() == [5]


def test_paper_and_code_modes_differ():
    # Mismatch at 2 followed by exactly W-1 = 3 matches, then a mismatch at 6: the code's
    # pattern [F,T,T,T] holds at 2; the paper needs a_3..a_6 all true and rejects.
    K, W = 12, 4
    d, lg = case(K, {2: UNSURE, 6: UNSURE})
    code = fly_decide(d, lg, FLyParams(theta=0.3, window=W, mode="code"))
    paper = fly_decide(d, lg, FLyParams(theta=0.3, window=W, mode="paper"))
    assert code.n == K and code.loose == [2, 6]
    assert (paper.n, paper.next_token) == (2, 2)
    # The entropies differ too: the paper's is normalised over the whole vocabulary.
    assert paper.H[2] < code.H[2]


def test_paper_mode_entropy_threshold_is_normalised():
    d, lg = case(10, {2: UNSURE}, bonus=9)
    h = normalized_entropy(lg[2:3]).item()  # ~0.47 for this row
    assert fly_decide(d, lg, FLyParams(theta=h - 0.01, window=4, mode="paper")).n == 10
    assert fly_decide(d, lg, FLyParams(theta=h + 0.01, window=4, mode="paper")).n == 2


def test_no_window_ablation_with_theta_zero_accepts_every_mismatch():
    d, lg = case(8, {0: SURE, 1: SURE, 3: UNSURE, 7: SURE}, bonus=11)
    assert verify_greedy(d, lg, theta=0.0, window=6, no_window=True) == (8, 11)
    assert fly_decide(d, lg, FLyParams(theta=0.0, window=6, mode="paper", no_window=True)).n == 8
    # The gate still applies to no_window at theta > 0: the first low-entropy mismatch stops it.
    assert verify_greedy(d, lg, theta=0.3, window=6, no_window=True) == (0, 0)


def test_empty_draft_emits_target_token():
    lg = build_logits([5])
    assert verify_greedy(torch.empty(0, dtype=torch.long), lg, theta=0.3, window=6) == (0, 5)


def test_sampling_two_samples_and_reproducible():
    d, lg = case(10, {2: UNSURE}, bonus=9)
    lg[[i for i in range(11) if i != 2]] *= 5.0  # sure rows: p(argmax) = 1 - 15 e^-100
    runs = [fly_decide(d, lg, FLyParams(theta=2.0, window=4), SamplingParams(temperature=1.0, generator=torch.Generator().manual_seed(s)))
            for s in range(200)]
    for dec in runs:
        # Sure rows sample their argmax, which the draft matches; d_2 is not in row 2's top 3
        # (p ~ 0.002), so a_2 is False, the gate (theta = 2) rejects it, and the correction is
        # the first sample at position 2.
        assert dec.a.tolist() == [i != 2 for i in range(10)] or dec.a[2]
        if dec.n == 2:
            assert dec.next_token == int(dec.t[2]) != int(d[2])
    assert {int(dec.t[2]) for dec in runs} >= {2, 3, 4}
    again = fly_decide(d, lg, FLyParams(theta=2.0, window=4), SamplingParams(temperature=1.0, generator=torch.Generator().manual_seed(7)))
    assert again.t.tolist() == runs[7].t.tolist() and again.n == runs[7].n
    # A draft token equal to either of the two samples counts as a match.
    d2 = d.clone()
    d2[2] = 3  # a runner-up of row 2, p3 ~ 0.31
    hits = sum(bool(fly_decide(d2, lg, FLyParams(theta=2.0, window=4), SamplingParams(temperature=1.0, generator=torch.Generator().manual_seed(s))).a[2]) for s in range(400))
    # P(either of two samples is token 3) = 1 - (1 - p3)^2 ~ 0.53 (one sample would give 0.31).
    assert 0.44 < hits / 400 < 0.62


def test_verifier_class_fills_record_and_validates():
    d, lg = case(10, {2: UNSURE}, bonus=9)
    v = FLy(theta=0.3, window=4)
    verdict = v(Draft(tokens=d), TargetScores(logits=lg), SamplingParams())
    assert (verdict.num_accepted, verdict.next_token) == (10, 9)
    assert verdict.record["loose_accepted"] == [2] and v.needs_hidden is False
    with pytest.raises(ValueError):
        FLy(mode="papper")
    with pytest.raises(ValueError):
        FLy(window=0)


# ---- through the decoding loop on tiny models --------------------------------------------------


@pytest.mark.parametrize(("drafter", "mode"), [("model", "code"), ("pld", "code"), ("mla", "code"), ("model", "paper"), ("model", "vllm")])
def test_fly_with_impossible_theta_equals_spd_token_for_token(models, drafter, mode):
    target, draft, tok = models
    prompt = code_prompt(tok)
    # log 3 ~ 1.10 bounds the top-3 entropy and 1 bounds the normalised one: theta = 2 rejects
    # every mismatch, so FLy must reproduce SPD (and hence the target alone) exactly.
    kw = dict(max_new_tokens=48, record_steps=True)
    spd = generate(target, prompt, verifier=SPD(), drafter=make_drafter(drafter, draft, k=8), **kw)
    # near_limit="shrink": step-for-step like SPD up to the limit (the official full-K last step
    # would accept more there; tests/verifiers/test_official_defaults.py pins it).
    fly = generate(target, prompt, verifier=FLy(theta=2.0, window=3, mode=mode, near_limit="shrink"),
                   drafter=make_drafter(drafter, draft, k=8), **kw)
    ar = generate(target, prompt, verifier=SPD(), max_new_tokens=48)
    assert fly.new_tokens == spd.new_tokens == ar.new_tokens
    assert fly.accepted == spd.accepted
    assert all(s["loose_accepted"] == [] for s in fly.step_records)
    # Not vacuous: the drafts held both matches and mismatches.
    flags = [f for s in fly.step_records for f in s["raw_match"]]
    assert any(flags) and not all(flags)


@pytest.mark.parametrize("rule", [dict(theta=0.0, no_window=True), dict(theta=0.3, window=3)])
def test_fly_loose_accepts_keep_the_loop_consistent(models, rule):
    # Each step's last token must be the target's greedy token after the committed prefix
    # (loosely accepted draft tokens included), which holds only if the caches stayed right.
    target, draft, tok = models
    prompt = code_prompt(tok)
    out = generate(target, prompt, verifier=FLy(**rule), drafter=ModelDrafter(draft, k=8),
                   max_new_tokens=40, record_steps=True)
    assert sum(len(s["loose_accepted"]) for s in out.step_records) > 0
    if rule.get("no_window"):
        assert all(n == k for n, k in zip(out.accepted, out.drafted))  # theta = 0: every mismatch
    seq = prompt.tolist()
    with torch.inference_mode():
        for s, e in zip(out.step_records, out.emitted):
            # The last step may be cut at max_new_tokens (FLy drafts the full K near the limit).
            seq += s["draft"][: s["accepted"]][:e]
            if e == s["accepted"] + 1:
                want = int(target(torch.tensor([seq])).logits[0, -1].argmax())
                assert s["next"] == want
                seq.append(s["next"])
    assert seq[len(prompt):] == out.new_tokens


# ---- summary figures and configs -------------------------------------------------------------


def _record(steps, decode_s=1.0):
    return {"metrics": {"new_tokens": sum(s["accepted"] + 1 for s in steps), "steps": len(steps),
                        "tau": 0.0, "total_s": 2.0, "prefill_s": 1.0, "decode_s": decode_s,
                        "drafted": [len(s["raw_match"]) for s in steps],
                        "accepted": [s["accepted"] for s in steps]},
            "steps": steps}


def test_summary_reports_loose_decisions():
    T, F = True, False
    steps = [
        {"raw_match": [T, F, T, T], "accepted": 4, "loose_accepted": [1], "draft": [0] * 4, "next": 1},
        {"raw_match": [F, T, F, T], "accepted": 0, "loose_accepted": [], "draft": [0] * 4, "next": 1},
        {"raw_match": [T, T], "accepted": 2, "loose_accepted": [], "draft": [0] * 2, "next": 1},
    ]
    s = loose_summary([_record(steps)])
    assert s["mismatches"] == 3 and s["loose_accepts"] == 1
    assert s["tau_with_loose"] == pytest.approx((5 + 1 + 3) / 3)
    assert s["tau_without_loose"] == pytest.approx((2 + 1 + 3) / 3)
    assert "dropmatch_overhead" not in s
    full = summarize([_record(steps)], {}, {})
    assert full["loose_accepts"] == 1 and full["tau"] == pytest.approx(9 / 3)
    # Records without per-step decisions (SPD) add nothing.
    assert loose_summary([{"metrics": {}, "steps": [{"accepted": 1}]}]) == {}


FLY_EXPERIMENTS = sorted(p.stem for p in (CONF_DIR / "experiment").glob("fly_*.yaml"))


@pytest.mark.parametrize("name", FLY_EXPERIMENTS)
def test_fly_experiment_files_run_fly_with_deferral_possible(name):
    # Composition and sweep keys of every experiment: tests/settings/test_config.py.
    cfg = compose_config([f"experiment={name}"])
    assert cfg.experiment_name == name and cfg.method.name == "fly"
    assert cfg.drafter.k > cfg.method.window or name.startswith("fly_ablation_window")
    # Paper scale (scale=cpu: tests/conf/test_scale.py): 8B->70B; the K ablation at 405B
    # (0818abla_spdtok.sh); the EAGLE-3 comparison on Llama-3.3-70B (0922_llama33_*.sh).
    expected = {"fly_ablation_k": "llama31-8b-405b", "fly_llama33_70b": "llama33-70b-eagle3"}.get(name, "llama31-8b-70b")
    assert cfg.pair.name == expected
