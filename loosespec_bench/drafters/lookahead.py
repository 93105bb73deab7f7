"""drafter=lookahead: Lookahead decoding (Fu et al., ICML 2024; code hao-ai-lab/LookaheadDecoding).

No draft model: the target itself, in the same verification forward, runs
  - a lookahead branch: a Jacobi window of W positions kept as N-1 levels of guesses
    (level 0: W-1 tokens, levels 1..N-2: W tokens each), whose outputs refresh the window
    and yield N-grams, and
  - a verification branch: up to G cached (N-1)-gram continuations of the pending token from
    the n-gram pool, verified as a tree (shared prefixes merged) by the exact rule.
Attention in the lookahead branch (the released code's pattern, expressed as a tree): level 0
is a chain after the pending token, and the level-l token of column i sits on the diagonal
(level 0 up to column i-1, then levels 1..l of column i), so it predicts the token after the
n-gram (level0[i-1], level1[i], .., level_l[i]). Column 0's key is the pending token.

Each step, with new[i] = argmax of the target at the top level of column i:
  - warm-up (fewer than N-2 levels): new becomes the next level (no n-grams yet);
  - then the n-grams (key, level1[i], .., level_{N-2}[i], new[i]) enter the pool (LRU, at
    most G per key; key = level0[i-1], or the pending token for column 0), and the window
    moves one position (the released code's ALWAYS_FWD_ONE=1): level0 = level1[1:],
    level_l = level_{l+1}, top level = new.
The window starts from tokens drawn from the prompt (the released code: random.choice of the
prompt tokens; here a generator seeded per sequence, so runs reproduce). POOL_FROM_PROMPT=0 as
the released default: the pool starts empty.

The lookahead branch rides in the Draft's extra nodes: the target scores them in the same
forward, the loop hands their logits back through observe_scores(), and they are never
accepted or kept in the cache. The guesses are verified exactly, so the output is the target's
(greedy; tree drafts are T = 0 only).
"""

from __future__ import annotations

import random
from collections import OrderedDict
from typing import Any, Mapping

import torch

from dataclasses import dataclass

from ..errors import ConfigError
from ..params import integer, knob
from ..sampling import GREEDY, SamplingParams
from ..step import Draft
from .base import Drafter, DrafterParams


@dataclass(frozen=True)
class LookaheadParams(DrafterParams):
    k: int = 4
    window: int = knob(7, integer(2), "W, the Jacobi window")
    guess_set: int = knob(7, integer(1), "G, guesses kept per key")
    seed: int = knob(0, integer(0))

    def cross(self) -> None:
        if self.k < 2:  # a guess is an (N-1)-gram with N = k + 1 >= 3 levels
            raise ConfigError(f"drafter.k={self.k} must be >= 2 for drafter=lookahead (LEVEL N = k + 1 >= 3)")


class LookaheadDrafter(Drafter):
    """drafter=lookahead: Jacobi lookahead window + n-gram pool, verified as a tree."""

    name = "lookahead"
    config_names = ("lookahead",)
    Params = LookaheadParams
    batch_refusal = ("its draft is a tree plus a Jacobi window scored in the same forward (per-row tree masks, "
                     "cache compaction and n-gram pools per problem): not implemented for a batch")

    @classmethod
    def drafts_tree(cls, settings: Mapping[str, Any]) -> bool:
        return True  # the n-gram guesses and the Jacobi window go out as one tree

    def __init__(self, **knobs: Any) -> None:
        """k = N - 1: a guess is an (N-1)-gram, the longest path a step can accept (LEVEL N = k + 1)."""
        super().__init__(**knobs)
        p = self.params
        self.window, self.level, self.guess_set, self.seed = p.window, p.k + 1, p.guess_set, p.seed
        self.reset(torch.empty(0, dtype=torch.long))

    def reset(self, prompt_ids: torch.Tensor) -> None:
        rng = random.Random(self.seed)
        pool = prompt_ids.tolist() or [0]
        w = self.window
        self.levels: list[list[int]] = [[rng.choice(pool) for _ in range(w - 1)], [rng.choice(pool) for _ in range(w)]]
        # token -> OrderedDict of (N-1)-gram continuations, least recently used first
        self.pool: dict[int, OrderedDict[tuple[int, ...], None]] = {}
        self._key0: int | None = None  # the pending token of the last step (column 0's key)
        self._top: list[int] = []  # node indices (in the extras) of the top level's W tokens

    def _lookahead_branch(self, offset: int) -> tuple[list[int], list[int], list[int]]:
        """Tokens and parents of the lookahead branch as extra nodes after `offset` candidates;
        also the extras' indices of the top level's tokens (whose outputs are the new guesses)."""
        toks: list[int] = []
        pars: list[int] = []
        col_parent: list[int] = []  # for column i: the combined index its level-1 token hangs on
        prev = -1
        for t in self.levels[0]:  # level 0: a chain after the pending token
            col_parent.append(prev)
            toks.append(t)
            pars.append(prev)
            prev = offset + len(toks) - 1
        col_parent.append(prev)  # column W-1 hangs on the last level-0 token
        top: list[int] = []
        for i in range(self.window):
            parent = col_parent[i]
            for lvl in self.levels[1:]:
                toks.append(lvl[i])
                pars.append(parent)
                parent = offset + len(toks) - 1
            top.append(len(toks) - 1)
        return toks, pars, top

    def propose(
        self,
        tokens: torch.Tensor,
        k: int,
        sampling: SamplingParams = GREEDY,
        *,
        want_probs: bool = False,
    ) -> Draft:
        pending = int(tokens[-1])
        # Verification branch: the pool's guesses for the pending token, merged into a trie.
        cand: list[int] = []
        cpar: list[int] = []
        child: dict[tuple[int, int], int] = {}
        for gram in reversed(list(self.pool.get(pending, ()))):  # most recent first
            parent = -1
            for t in gram[:k]:
                node = child.get((parent, t))
                if node is None:
                    node = len(cand)
                    cand.append(t)
                    cpar.append(parent)
                    child[(parent, t)] = node
                parent = node
        xt, xp, self._top = self._lookahead_branch(len(cand))
        self._key0 = pending
        return Draft(
            tokens=torch.tensor(cand, dtype=torch.long),
            parents=torch.tensor(cpar, dtype=torch.long),
            extra_tokens=torch.tensor(xt, dtype=torch.long),
            extra_parents=torch.tensor(xp, dtype=torch.long),
            info={"guesses": len(self.pool.get(pending, ())), "pool_keys": len(self.pool)},
        )

    def _remember(self, key: int, gram: tuple[int, ...]) -> None:
        grams = self.pool.setdefault(key, OrderedDict())
        if gram in grams:
            grams.move_to_end(gram)
        else:
            grams[gram] = None
            if len(grams) > self.guess_set:
                grams.popitem(last=False)  # least recently used out

    def observe_scores(self, logits: torch.Tensor) -> None:
        """The lookahead branch's target logits ([E, vocab]): one Jacobi iteration."""
        new = logits[self._top].argmax(dim=-1).tolist()  # [W] the next level
        if len(self.levels) < self.level - 1:  # warm-up: fill the levels first
            self.levels.append(new)
            return
        for i in range(self.window):
            key = self._key0 if i == 0 else self.levels[0][i - 1]
            self._remember(key, tuple(lvl[i] for lvl in self.levels[1:]) + (new[i],))
        self.levels = [self.levels[1][1:], *self.levels[2:], new]
