"""Acceptance rules on draft trees: every rule, applied along each root-to-leaf path.

A tree draft (Draft.parents set) is verified by one target forward in which node i sees the
prefix, the pending token and its own ancestors; TargetScores.logits row 0 is the pending
token's prediction and row 1 + i is node i's. The rule on a tree (docs/algorithms.md 6.6,
trees and Lookahead):

  For every root-to-leaf path (d_{p_1}, .., d_{p_m}) the path is a chain draft whose target
  logits are rows (0, 1 + p_1, .., 1 + p_m); the chain rule (SPD, FLy, DropMatch, unchanged)
  decides how many of its nodes it accepts and the token that follows. The step keeps the
  path with the longest accepted prefix (ties: the first leaf in node order) and emits that
  path's correction / bonus token.

For a lossless rule at T = 0 (exact SPD: Verifier.lossless) this is the usual tree walk (at each node follow the child equal to the
target's argmax), computed here as such in one pass. For FLy the gate and the deferral window
are read along the path (a window may look at nodes below the mismatch on that path only);
DropMatch's criterion is per node and so path-independent, but its masks are drawn per path.

Sampling on trees (T > 0) needs the multi-candidate recursive rejection scheme to stay
lossless; it is not implemented, so tree drafts are refused at T > 0 (ConfigError).
"""

from __future__ import annotations

import torch

from ..errors import ConfigError
from ..sampling import GREEDY, SamplingParams
from ..step import Draft, TargetScores, Verdict, root_to_leaf_paths
from .base import Verifier


def _greedy_walk(draft: Draft, logits: torch.Tensor) -> Verdict:
    """Greedy exact rule on a tree: follow the child equal to the target's argmax."""
    t = logits.argmax(dim=-1).tolist()  # [K+1]: t[0] after pending, t[1+i] after node i
    tokens = draft.tokens.tolist()
    children: dict[int, list[int]] = {}
    for i, p in enumerate(draft.parents.tolist()):
        children.setdefault(p, []).append(i)
    path: list[int] = []
    cur = -1
    while True:
        want = t[cur + 1]
        nxt = next((c for c in children.get(cur, ()) if tokens[c] == want), None)
        if nxt is None:
            return Verdict(num_accepted=len(path), next_token=want, path=path)
        path.append(nxt)
        cur = nxt


def verify(verifier: Verifier, draft: Draft, scores: TargetScores, sampling: SamplingParams = GREEDY) -> Verdict:
    """The verifier's verdict on a chain (unchanged) or a tree (the rule along each path)."""
    if draft.parents is None:
        return verifier(draft, scores, sampling)
    if not sampling.greedy:
        raise ConfigError(
            "tree drafts (drafter.tree=true, drafter=lookahead) are verified at temperature 0 only: "
            "lossless tree sampling needs multi-candidate recursive rejection, not implemented"
        )
    if draft.k == 0:
        return verifier(draft, scores, sampling)
    if type(verifier).lossless:
        # Declared by the rule (Verifier.lossless: its output is the target's own): at T = 0 it
        # accepts exactly the draft's prefix that matches the target's argmax, so the best path
        # is the argmax walk down the tree, found without verifying every path.
        return _greedy_walk(draft, scores.logits)
    best: Verdict | None = None
    best_path: list[int] = []
    for path in root_to_leaf_paths(draft.parents):
        rows = torch.tensor([0] + [1 + p for p in path], dtype=torch.long)
        sub = Draft(tokens=draft.tokens[path], probs=None if draft.probs is None else draft.probs[path])
        sub_scores = TargetScores(
            logits=scores.logits[rows.to(scores.logits.device)],  # [m+1, vocab]
            hidden=None if scores.hidden is None else scores.hidden[rows.to(scores.hidden.device)],
            lm_head=scores.lm_head,
        )
        v = verifier(sub, sub_scores, sampling)
        if best is None or v.num_accepted > best.num_accepted:
            best, best_path = v, path
    assert best is not None
    n = best.num_accepted
    record = dict(best.record or {})
    record["tree_path"] = best_path  # the winning root-to-leaf path, node indices
    return Verdict(num_accepted=n, next_token=best.next_token, record=record, path=best_path[:n])
