"""Tree drafts: the tree mask and positions, cache compaction to the accepted path, lossless
greedy tree SPD (a hand-made deep tree, EAGLE's dynamic tree), loose rules on trees."""

from __future__ import annotations

import pytest
import torch
from transformers import DynamicCache

from loosespec_bench.decoding import generate
from loosespec_bench.decoding.loop import tree_inputs
from loosespec_bench.drafters import Eagle3Drafter
from loosespec_bench.drafters.base import Drafter
from loosespec_bench.errors import ConfigError
from loosespec_bench.sampling import GREEDY
from loosespec_bench.step import Draft, TargetScores, compact_to, root_to_leaf_paths
from loosespec_bench.verifiers.dropmatch import DropMatch
from loosespec_bench.verifiers.fly import FLy, FLyParams, fly_decide
from loosespec_bench.verifiers.spd import SPD
from loosespec_bench.verifiers.tree import verify

PROMPT = "Question: 3 apples and 4 apples make how many? Answer step by step."


def _prompt(tok, text: str = PROMPT) -> torch.Tensor:
    return torch.tensor(tok(text, add_special_tokens=False).input_ids)


class DecoyTreeDrafter(Drafter):
    """A test drafter: the draft model's greedy chain of `depth` tokens, where every node on
    it has a decoy sibling drafted BEFORE it (the model's 2nd choice) carrying a decoy child,
    so the accepted path is deep and its nodes are scattered through the node list."""

    name = "decoy_tree"

    def __init__(self, model, depth: int = 4) -> None:
        super().__init__(depth)
        self.model = model

    @torch.inference_mode()
    def propose(self, tokens, k, sampling=GREEDY, *, want_probs=False) -> Draft:
        toks: list[int] = []
        pars: list[int] = []
        seq = tokens.clone()
        parent = -1
        for _ in range(k):
            top2 = self.model(seq[None]).logits[0, -1].topk(2).indices.tolist()
            decoy = len(toks)
            toks += [top2[1]]
            pars += [parent]
            if len(toks) + 1 < 64:  # a decoy grandchild under the decoy
                toks += [top2[0]]
                pars += [decoy]
            toks += [top2[0]]
            pars += [parent]
            parent = len(toks) - 1
            seq = torch.cat([seq, torch.tensor([top2[0]])])
        return Draft(tokens=torch.tensor(toks), parents=torch.tensor(pars))


def test_tree_mask_and_positions():
    # pending -> 0 -> 2 ; pending -> 1 -> 3 -> 4
    d = Draft(tokens=torch.tensor([5, 6, 7, 8, 9]), parents=torch.tensor([-1, -1, 0, 1, 3]))
    ids, pos, mask = tree_inputs(d, 10, torch.float32, torch.device("cpu"))
    assert ids.shape == (1, 6) and pos.tolist() == [[10, 11, 11, 12, 12, 13]]
    vis = mask[0, 0] == 0  # [6, 16]
    assert vis[:, :10].all()  # everyone sees the prefix
    assert vis[:, 10].all()  # and the pending token
    assert vis[5, 10:].tolist() == [True, False, True, False, True, True]  # node 4: pending, 1, 3, itself
    assert vis[3, 10:].tolist() == [True, True, False, True, False, False]  # node 2: pending, 0, itself
    assert root_to_leaf_paths(d.parents) == [[0, 2], [1, 3, 4]]


def test_cache_compaction_after_a_deep_branch(tiny_pair):
    """After one tree forward, gathering the accepted (scattered) path leaves exactly the cache a
    fresh prefill of prefix + path builds, and the next step's logits agree."""
    target, _, tok = tiny_pair
    ids = _prompt(tok)[:20]
    d = Draft(tokens=torch.tensor([40, 41, 42, 43, 44, 45, 46]), parents=torch.tensor([-1, -1, 0, 1, 1, 4, 5]))
    path = [1, 4, 5, 6]  # the second root child, then its second child, then two deeper
    with torch.inference_mode():
        cache = DynamicCache(config=target.config)
        target(ids[None, :-1], cache=cache, use_cache=True)
        tid, pos, mask = tree_inputs(d, ids.numel() - 1, target.dtype, target.device)
        tid[0, 0] = int(ids[-1])
        tree_logits = target(tid, position_ids=pos, attention_mask=mask, cache=cache, use_cache=True).logits[0]
        compact_to(cache, ids.numel(), path)
        kept = torch.cat([ids, d.tokens[path]])
        fresh = DynamicCache(config=target.config)
        chain_logits = target(kept[None], cache=fresh, use_cache=True).logits[0]
        assert cache.get_seq_length() == fresh.get_seq_length() == kept.numel()
        for a, b in zip(cache.layers, fresh.layers):
            torch.testing.assert_close(a.keys, b.keys, rtol=1e-5, atol=1e-5)
            torch.testing.assert_close(a.values, b.values, rtol=1e-5, atol=1e-5)
        # The tree forward's logits at the path's nodes are the chain's logits there.
        torch.testing.assert_close(tree_logits[[0] + [1 + p for p in path]], chain_logits[ids.numel() - 1 :], rtol=1e-4, atol=1e-4)
        nxt = torch.tensor([[7, 8]])
        torch.testing.assert_close(
            target(nxt, cache=cache, use_cache=True).logits, target(nxt, cache=fresh, use_cache=True).logits,
            rtol=1e-4, atol=1e-4,
        )


@pytest.mark.parametrize("same_model", [True, False])
def test_lossless_tree_spd_equals_target_alone(tiny_pair, same_model):
    target, draft, tok = tiny_pair
    prompt = _prompt(tok)
    ref = generate(target, prompt, verifier=SPD(), max_new_tokens=40)
    drafter = DecoyTreeDrafter(target if same_model else draft, depth=4)
    out = generate(target, prompt, verifier=SPD(), drafter=drafter, max_new_tokens=40, record_steps=True)
    assert out.new_tokens == ref.new_tokens
    if same_model:
        # The greedy chain is always the last-drafted branch: full depth accepted past decoys.
        assert out.tau > 4.0
        assert any(r["path"] and r["path"][0] != 0 for r in out.step_records)


def test_eagle3_tree_is_lossless_and_bounded(tiny_pair):
    from ..drafters.eagle.conftest import random_head

    target, _, tok = tiny_pair
    draft_ids = torch.arange(259)
    head = random_head(target, draft_ids, seed=3)
    drafter = Eagle3Drafter(target, None, head=head, tree=True, total_token=20, depth=4, top_k=3)
    assert drafter.k == 5
    prompt = _prompt(tok)
    ref = generate(target, prompt, verifier=SPD(), max_new_tokens=30)
    out = generate(target, prompt, verifier=SPD(), drafter=drafter, max_new_tokens=30, record_steps=True)
    assert out.new_tokens == ref.new_tokens
    for r in out.step_records:
        if "parents" in r:
            assert len(r["draft"]) <= 19
            depth_of = []
            for p in r["parents"]:
                depth_of.append(1 if p < 0 else depth_of[p] + 1)
            assert max(depth_of) <= 5


def test_tree_and_chain_eagle3_share_the_head_cache_rollback(tiny_pair):
    """Tree, then chain drafting with the same head over one sequence both stay lossless (the
    head's cache is rebuilt from the accepted path's target features)."""
    from ..drafters.eagle.conftest import random_head

    target, _, tok = tiny_pair
    head = random_head(target, torch.arange(259), seed=4)
    prompt = _prompt(tok)
    ref = generate(target, prompt, verifier=SPD(), max_new_tokens=25)
    for tree in (True, False):
        d = Eagle3Drafter(target, None, head=head, tree=tree, total_token=10, depth=3, top_k=2)
        assert generate(target, prompt, verifier=SPD(), drafter=d, max_new_tokens=25).new_tokens == ref.new_tokens


def test_loose_rule_on_a_tree_keeps_the_longest_accepted_path():
    """FLy on a tree: each root-to-leaf path is a chain for the rule; the longest accepted wins.
    Path A (nodes 0, 2) stops at its mismatch; path B (1, 3, 4, 5) has a mismatch at its
    first node followed by W = 2 matches and an unsure target there, so FLy accepts it loosely."""
    V = 8
    logits = torch.full((7, V), -10.0)
    # rows: 0 pending, 1 + i node i. Target argmax after pending: token 1 (unsure: 1 vs 2 close).
    logits[0, 1], logits[0, 2] = 5.0, 4.9
    logits[1, 3] = 5.0  # after node 0 (token 1): target says 3
    logits[2, 4] = 5.0  # after node 1 (token 2): target says 4
    logits[3, 7] = 5.0  # after node 2
    logits[4, 5] = 5.0  # after node 3 (token 4): 5
    logits[5, 6] = 5.0  # after node 4 (token 5): 6
    logits[6, 0] = 5.0  # after node 5: bonus 0
    d = Draft(tokens=torch.tensor([1, 2, 6, 4, 5, 6]), parents=torch.tensor([-1, -1, 0, 1, 3, 4]))
    fly = FLy(theta=0.3, window=2, mode="code")
    v = verify(fly, d, TargetScores(logits=logits), GREEDY)
    # Chain reading of path B equals the chain rule's own verdict.
    chain = fly_decide(d.tokens[[1, 3, 4, 5]], logits[[0, 2, 4, 5, 6]], FLyParams(theta=0.3, window=2, mode="code"))
    assert v.num_accepted == chain.n and v.path == [1, 3, 4, 5][: chain.n]
    assert v.num_accepted > 1  # longer than path A's exact prefix (1 node)
    # Exact SPD on the same tree follows the argmax child: path A, one node.
    s = verify(SPD(), d, TargetScores(logits=logits), GREEDY)
    assert (s.num_accepted, s.path, s.next_token) == (1, [0], 3)


def test_dropmatch_and_fly_run_on_eagle3_trees(tiny_pair):
    from ..drafters.eagle.conftest import random_head

    target, _, tok = tiny_pair
    head = random_head(target, torch.arange(259), seed=5)
    for rule in (FLy(theta=0.0, window=2), DropMatch(n_paths=3)):
        d = Eagle3Drafter(target, None, head=head, tree=True, total_token=12, depth=3, top_k=3)
        out = generate(target, _prompt(tok), verifier=rule, drafter=d, max_new_tokens=20,
                       generator=torch.Generator().manual_seed(0))
        assert len(out.new_tokens) == 20


def test_tree_sampling_is_refused(tiny_pair):
    target, draft, tok = tiny_pair
    with pytest.raises(ConfigError, match="temperature 0"):
        generate(target, _prompt(tok), verifier=SPD(), drafter=DecoyTreeDrafter(draft, 2), max_new_tokens=5,
                 temperature=1.0, generator=torch.Generator().manual_seed(0))


def _official_eagle2_checkpoint(folder, target, seed: int = 0):
    """A random head with SafeAILab/EAGLE's EAGLE-2 (cnets1.Model) key names and config."""
    import json

    tc = target.config
    h, heads, kv = tc.hidden_size, tc.num_attention_heads, tc.num_key_value_heads
    d = h // heads
    g = torch.Generator().manual_seed(seed)

    def w(*shape):
        return torch.randn(*shape, generator=g) * 0.2

    state = {
        "fc.weight": w(h, 2 * h), "fc.bias": w(h),
        "layers.0.self_attn.q_proj.weight": w(heads * d, h), "layers.0.self_attn.k_proj.weight": w(kv * d, h),
        "layers.0.self_attn.v_proj.weight": w(kv * d, h), "layers.0.self_attn.o_proj.weight": w(h, heads * d),
        "layers.0.mlp.gate_proj.weight": w(96, h), "layers.0.mlp.up_proj.weight": w(96, h),
        "layers.0.mlp.down_proj.weight": w(h, 96), "layers.0.post_attention_layernorm.weight": torch.ones(h),
    }
    cfg = {"architectures": ["LlamaForCausalLM"], "hidden_size": h, "intermediate_size": 96,
           "num_attention_heads": heads, "num_key_value_heads": kv, "rms_norm_eps": 1e-6,
           "rope_theta": 10000.0, "vocab_size": tc.vocab_size, "num_hidden_layers": 1, "bias": True}
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(cfg))
    torch.save(state, folder / "pytorch_model.bin")
    return folder


def test_eagle2_official_head_loads_and_drafts_chain_and_tree_losslessly(tmp_path, tiny_pair):
    from loosespec_bench.drafters.eagle.eagle2 import Eagle2Head

    target, _, tok = tiny_pair
    folder = _official_eagle2_checkpoint(tmp_path / "eagle2", target)
    prompt = _prompt(tok)
    ref = generate(target, prompt, verifier=SPD(), max_new_tokens=25)
    for tree in (False, True):
        d = Eagle3Drafter(target, str(folder), tree=tree, total_token=15, depth=3, top_k=3)
        assert isinstance(d.head, Eagle2Head)
        assert d.needs_target_hidden == (target.config.num_hidden_layers,)  # the final hidden state
        assert generate(target, prompt, verifier=SPD(), drafter=d, max_new_tokens=25).new_tokens == ref.new_tokens


@pytest.mark.slow
def test_trained_head_tree_is_lossless_and_beats_its_chain_on_the_embedded_pair():
    """The CPU-trained EAGLE-3 head of the embedded target (python -m loosespec_bench.train.eagle3): greedy tree
    SPD equals the target alone in float32, and the tree accepts more per step than a chain of
    the same head."""
    import os

    from loosespec_bench.models import load_model

    from ..conftest import compose_config

    folder = os.path.expanduser(compose_config(["drafter=eagle3"]).drafter.head_path)
    if not os.path.isdir(folder):
        pytest.skip(f"no trained head in {folder}: run python -m loosespec_bench.train.eagle3")
    target = load_model("embedded:qwen2.5-coder-1.5b-instruct", dtype="float32")
    msgs = [{"role": "user", "content": "Question: Tom has 3 boxes of 12 pencils and gives away 5. How many are left?\nStep-by-Step Answer:"}]
    text = target.tokenizer.apply_chat_template(msgs, add_generation_prompt=True, tokenize=False)
    prompt = torch.tensor(target.tokenizer(text, add_special_tokens=False).input_ids)
    eos = {target.tokenizer.eos_token_id}
    ref = generate(target.model, prompt, verifier=SPD(), max_new_tokens=48, eos_token_ids=eos)
    chain = generate(target.model, prompt, verifier=SPD(), drafter=Eagle3Drafter(target.model, folder, k=5),
                     max_new_tokens=48, eos_token_ids=eos)
    tree = generate(target.model, prompt, verifier=SPD(), drafter=Eagle3Drafter(target.model, folder, tree=True),
                    max_new_tokens=48, eos_token_ids=eos)
    assert tree.new_tokens == ref.new_tokens == chain.new_tokens
    assert tree.tau > chain.tau
