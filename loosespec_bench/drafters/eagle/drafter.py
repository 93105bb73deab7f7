"""drafter=eagle3 / eagle2: chain or dynamic-tree drafting with an EAGLE head over its own KV cache.

The head (eagle3.Eagle3Head or eagle2.Eagle2Head, from checkpoint.load_head) reads the
target's hidden states. They reach the drafter without a second target pass: the loop sees
`needs_target_hidden` (indices into transformers' `hidden_states` tuple, where index i is the
input of layer i, as in the official capture) and calls `observe(features)` after the prefill
and after each verification with the kept positions only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import torch
from transformers import PreTrainedModel

from ...errors import ConfigError
from ...params import boolean, integer, knob, list_of, optional, string
from ...sampling import GREEDY, SamplingParams, sample_or_argmax
from ...step import Draft, common_prefix_len, empty_draft
from ..base import Drafter, DrafterParams
from .checkpoint import build_head, load_head
from .eagle3 import head_config_for
from .head import EagleHead


@dataclass(frozen=True)
class Eagle3Params(DrafterParams):
    """drafter=eagle3 / eagle2 (conf/drafter/eagle3.yaml explains each)."""

    head_path: str | None = knob(None, optional(string), "a head folder, a hub id or random")
    layers: list[int] | None = knob(None, optional(list_of(integer(0))), "null = the head's own")
    dtype: str | None = knob(None, optional(string), "null = the target's dtype")
    tree: bool = knob(False, boolean)
    total_token: int = knob(60, integer(2, 4096), "tokens per verification forward")
    # >= 1: the tree's first level and at least one expansion (docs/algorithms.md, EAGLE-2).
    depth: int = knob(7, integer(1, 256), "expansions after the first top_k")
    top_k: int = knob(10, integer(1), "children per expanded node")


class Eagle3Drafter(Drafter):
    """drafter=eagle3: chain drafting of K tokens with an EAGLE-3 head over its own KV cache."""

    name = "eagle3"
    config_names = ("eagle3", "eagle2")  # drafter=eagle2: the same class, the checkpoint decides the head
    vocab_top_refusal = "the EAGLE-3 head has its own reduced vocabulary; leave it null"
    Params = Eagle3Params
    needs_target = True  # build passes the target model (target=: embedding, config, device, dtype)
    batch_refusal = ("its head drafts from the target's hidden states of each row (observe) over a cache of its own, "
                     "and its trees need per-row tree masks and cache compaction: not implemented for a batch")

    @staticmethod
    def longest_path(depth: int) -> int:
        """A tree's longest path: top_k roots, then `depth` expansions (EAGLE's topK_genrate)."""
        return depth + 1

    @classmethod
    def drafts_tree(cls, settings: Mapping[str, Any]) -> bool:
        return bool(settings.get("tree"))

    @classmethod
    def draft_length(cls, settings: Mapping[str, Any]) -> int:
        return cls.longest_path(int(settings["depth"])) if cls.drafts_tree(settings) else int(settings["k"])

    def __init__(
        self,
        target: PreTrainedModel,
        head_path: str | None = None,
        head: EagleHead | None = None,
        **knobs: Any,
    ) -> None:
        super().__init__(head_path=head_path or None, **knobs)
        p = self.params
        tree, layers, dtype = p.tree, p.layers, p.dtype
        if tree:
            self.k = self.longest_path(p.depth)
        self.tree = bool(tree)
        self.total_token = p.total_token
        self.depth = p.depth
        self.top_k = p.top_k
        if head is None and not head_path:
            raise ConfigError(
                "drafter=eagle3 needs a head: this pair has no pair.eagle3_head and no "
                "loosespec_bench/conf/pair_drafter/<pair>_eagle3.yaml; set drafter.head_path=<folder or hub id>"
            )
        if head is None:
            if head_path == "random":
                # A randomly initialised head: shapes and timings only (acceptance ~ 0).
                cfg = head_config_for(target, draft_vocab_size=target.get_input_embeddings().num_embeddings)
                head = build_head(cfg, None, target.get_input_embeddings())
            else:
                head = load_head(head_path, target)
        emb = target.get_input_embeddings()
        if head.vocab_size != emb.num_embeddings:
            raise ConfigError(
                f"EAGLE-3 head {head_path!r} is for a target vocabulary of {head.vocab_size} tokens, "
                f"the target has {emb.num_embeddings}"
            )
        n_layers = target.config.num_hidden_layers
        # EAGLE-3 reads three layers (low, mid, high), EAGLE-2 the final hidden state.
        want = len(head.feature_layers(n_layers))
        layers = layers or head.feature_layers(n_layers)
        # Indices into transformers' hidden_states tuple: i = the input of layer i (0 = embeddings).
        self.needs_target_hidden: tuple[int, ...] = tuple(int(i) for i in layers)
        if len(self.needs_target_hidden) != want or not all(0 <= i <= n_layers for i in self.needs_target_hidden):
            raise ConfigError(f"drafter.layers={list(self.needs_target_hidden)}: need {want} layer indices in [0, {n_layers}]")
        torch_dtype = getattr(torch, dtype) if dtype else target.dtype
        # .to() casts floating tensors only: d2t / t2d keep their integer / bool types.
        self.head = head.to(device=target.device, dtype=torch_dtype).eval()
        if head.embed_tokens is not emb:  # the checkpoint's own embedding (outside the module tree)
            head.embed_tokens.to(device=target.device, dtype=torch_dtype)
        self._target_ids = self.head.draft_ids_of_target()  # [draft_vocab] target id of each draft id
        self.reset(torch.empty(0, dtype=torch.long))

    def modules(self) -> list[torch.nn.Module]:
        return [self.head]

    def reset(self, prompt_ids: torch.Tensor) -> None:
        self.cache: tuple[torch.Tensor, torch.Tensor] | None = None
        self.n_real = 0  # cache entries built from target features (the rest are draft entries)
        self.seen = torch.empty(0, dtype=torch.long)  # tokens 1..n_real paired with those entries
        self.pending: list[torch.Tensor] = []  # [m, 3*Ht] features observed, not yet in the cache

    def observe(self, hidden: tuple[torch.Tensor, ...]) -> None:
        """Target hidden states of newly committed positions: one [m, Ht] per needed layer."""
        # A target split over devices (device_map) gives each layer's states on its own device.
        self.pending.append(torch.cat([h.to(self.head.fc.weight.device) for h in hidden], dim=-1))

    def _crop(self, n: int) -> None:
        if self.cache is not None:
            self.cache = (self.cache[0][:, :, :n], self.cache[1][:, :, :n])

    @torch.inference_mode()
    def propose(
        self,
        tokens: torch.Tensor,
        k: int,
        sampling: SamplingParams = GREEDY,
        *,
        want_probs: bool = False,
    ) -> Draft:
        # Draft entries of the last step are dropped even where accepted: their features were the
        # head's own guesses; the target's real features for those positions arrive via observe().
        self._crop(self.n_real)
        if common_prefix_len(self.seen, tokens[1:]) < self.seen.numel():
            raise RuntimeError("eagle3: committed tokens changed under the head's cache; call reset() per sequence")
        feats = torch.cat(self.pending) if self.pending else None  # [m, 3*Ht]
        self.pending = []
        m = 0 if feats is None else feats.shape[0]
        n_feat = self.n_real + m  # target features known for positions 0..n_feat-1
        if n_feat != tokens.numel() - 1 and not (n_feat == 0 and tokens.numel() == 1):
            raise RuntimeError(
                f"eagle3: target features for {n_feat} positions but {tokens.numel()} committed tokens; "
                "the decoding loop must pass needs_target_hidden features through observe()"
            )
        if k <= 0 or n_feat == 0:  # a 1-token prompt: no feature yet, the target goes alone once
            return empty_draft()
        dev = self.head.fc.weight.device
        new_ids = tokens[self.n_real + 1 : n_feat + 1]  # [m] token j+1 for entry j
        h, self.cache = self.head.step(feats.to(dev), new_ids.to(dev), self.n_real, self.cache, fused=False)
        self.seen = torch.cat([self.seen, new_ids.cpu()])
        self.n_real = n_feat
        last = h[-1:]  # [1, H] output at the last committed position
        if self.tree:
            return self._propose_tree(last, n_feat, k, want_probs=want_probs)
        out_tokens: list[int] = []
        out_probs: list[torch.Tensor] = []
        keep_probs = want_probs or not sampling.greedy
        for s in range(k):
            logits = self.head.logits(last)[0].float()  # [draft_vocab]
            # A draw (or the argmax) in the draft vocabulary; q on the generator's device.
            i, q = sample_or_argmax(logits, sampling, want_probs=keep_probs)
            d = int(self._target_ids[i])
            out_tokens.append(d)
            if keep_probs:
                # q over the target vocabulary: zero outside the draft vocabulary.
                full = torch.zeros(self.head.vocab_size, dtype=torch.float32, device=q.device)
                full[self._target_ids.to(q.device)] = q
                out_probs.append(full.cpu())
            if s + 1 < k:
                pos = n_feat + s  # entry of drafted token d at position n_feat + s
                last, self.cache = self.head.step(last, torch.tensor([d], device=dev), pos, self.cache, fused=True)
        return Draft(
            tokens=torch.tensor(out_tokens, dtype=torch.long),
            probs=torch.stack(out_probs) if keep_probs else None,
        )

    def _propose_tree(self, last: torch.Tensor, n_feat: int, k: int, *, want_probs: bool) -> Draft:
        """EAGLE-2's dynamic draft tree (Li et al. 2024; SafeAILab/EAGLE `topK_genrate`).

        Expansion: the top_k tokens after the last committed position are the first level;
        then, `depth` times, the current top_k frontier nodes are run through the head (one
        call, each entry seeing the committed entries and its own ancestors), each proposes its
        top_k children, every child gets the cumulative draft log-probability of its path, and
        the top_k children overall become the next frontier. Reranking: of all nodes drafted
        (frontier or not), the total_token - 1 with the highest cumulative log-probability form
        the tree (plus any ancestor a tie left out), in drafting order. Paths are at most
        min(depth + 1, k) nodes long (k: the loop's cap near max_new_tokens). Greedy (T = 0).
        """
        dev = self.head.fc.weight.device
        top_k, max_len = self.top_k, min(self.longest_path(self.depth), k)
        toks: list[int] = []
        pars: list[int] = []
        scores: list[torch.Tensor] = []  # per level: [m] cumulative log-probabilities
        qrows: list[torch.Tensor] = []  # per node: index into `dists` (the parent's distribution)
        dists: list[torch.Tensor] = []  # [draft_vocab] log-probabilities, when probs are wanted
        logp = torch.log_softmax(self.head.logits(last)[0].float(), dim=-1)  # [draft_vocab]
        top = logp.topk(min(top_k, logp.numel()))
        toks += self._target_ids[top.indices].tolist()
        pars += [-1] * top.indices.numel()
        scores.append(top.values)
        if want_probs:
            dists.append(logp)
            qrows += [0] * top.indices.numel()
        frontier = list(range(len(toks)))  # node indices to expand next
        front_hidden = last.expand(len(frontier), -1)  # [F, H] each entry's parent output
        front_score = top.values  # [F]
        fed: list[int] = []  # node index of every tree entry appended to the head's cache
        for lvl in range(1, max_len):
            # Entry of node j pairs its parent's output hidden with token j, at position
            # n_feat + depth(j) - 1, and sees the committed entries plus its fed ancestors.
            f = len(frontier)
            anc = [self._ancestors(j, pars) for j in frontier]
            seen_fed = torch.tensor([[e in a for e in fed] for a in anc], dtype=torch.bool).reshape(f, len(fed))
            mask = torch.cat([torch.ones(f, n_feat, dtype=torch.bool), seen_fed, torch.eye(f, dtype=torch.bool)], dim=1)
            pos = torch.full((f,), n_feat + lvl - 1, dtype=torch.long)
            ids = torch.tensor([toks[j] for j in frontier], device=dev)
            out, self.cache = self.head.step(front_hidden, ids, 0, self.cache, fused=True, positions=pos, mask=mask)
            fed += frontier
            lp = torch.log_softmax(self.head.logits(out).float(), dim=-1)  # [F, draft_vocab]
            top = lp.topk(min(top_k, lp.shape[-1]), dim=-1)  # [F, top_k]
            cu = (front_score[:, None] + top.values).reshape(-1)  # [F * top_k] path log-probs
            first = len(toks)
            toks += self._target_ids[top.indices.reshape(-1)].tolist()
            pars += [frontier[r] for r in range(f) for _ in range(top.indices.shape[1])]
            scores.append(cu)
            if want_probs:
                dists += list(lp)
                base = len(dists) - f
                qrows += [base + r for r in range(f) for _ in range(top.indices.shape[1])]
            if lvl + 1 < max_len:
                sel = cu.topk(min(top_k, cu.numel())).indices  # [top_k] next frontier
                frontier = [first + int(i) for i in sel]
                front_hidden = out[sel // top.indices.shape[1]]
                front_score = cu[sel]
        all_scores = torch.cat(scores)  # [nodes]
        keep = set(all_scores.topk(min(self.total_token - 1, all_scores.numel())).indices.tolist())
        for j in list(keep):  # ties may leave an ancestor out: a tree needs every ancestor
            keep |= set(self._ancestors(j, pars))
        order = sorted(keep)  # drafting order: every parent before its children
        new_index = {j: i for i, j in enumerate(order)}
        probs = None
        if want_probs:
            probs = torch.zeros(len(order), self.head.vocab_size, dtype=torch.float32)
            rows = torch.stack([dists[qrows[j]] for j in order]).exp().cpu()  # [K, draft_vocab]
            probs[:, self._target_ids.cpu()] = rows
        return Draft(
            tokens=torch.tensor([toks[j] for j in order], dtype=torch.long),
            parents=torch.tensor([new_index[pars[j]] if pars[j] >= 0 else -1 for j in order], dtype=torch.long),
            probs=probs,
            info={"tree_nodes": len(order)},
        )

    @staticmethod
    def _ancestors(j: int, pars: list[int]) -> list[int]:
        """Node j and its ancestors (node indices)."""
        out = []
        while j >= 0:
            out.append(j)
            j = pars[j]
        return out
