"""drafters/model.py: a drafter's logic is written once, as its draft program (batch_program);
propose() drives it alone on the drafter's own cache, and the batched loop drives one per row
with batched forwards (decoding/ragged.py), so a drafter that changes its program changes both."""

from __future__ import annotations

import torch

from loosespec_bench.decoding import generate
from loosespec_bench.decoding.batch import BatchRequest, generate_batch
from loosespec_bench.drafters import ModelDrafter
from loosespec_bench.drafters.base import DraftProgram, DraftSlot
from loosespec_bench.kv import new_cache
from loosespec_bench.sampling import GREEDY, SamplingParams
from loosespec_bench.step import Draft, empty_draft
from loosespec_bench.verifiers.spd import SPD

TEXTS = ["def add(a, b):\n    return a + b\n\ndef add(", "Question: 3 + 4 = ?", "hello hello hello", "1, 2, 3, 4,"]


class SecondChoice(ModelDrafter):
    """A drafter whose own program drafts the draft model's second most likely token at every
    position: nothing in the loops knows it, so both must run this program to draft so."""

    def batch_program(self, slot: DraftSlot, tokens: torch.Tensor, k: int, sampling: SamplingParams,
                      want_probs: bool) -> DraftProgram:
        if k <= 0:
            return empty_draft()
        feed = tokens[slot.rollback(tokens):]
        out: list[int] = []
        for _ in range(k):
            logits = (yield feed, 1)[0].cpu()  # [vocab]
            slot.seen = torch.cat([slot.seen, feed])
            out.append(int(logits.topk(2).indices[1]))
            feed = torch.tensor(out[-1:], dtype=torch.long)
        return Draft(tokens=torch.tensor(out, dtype=torch.long), probs=None)


def test_propose_runs_the_drafters_own_program_on_its_cache(models):
    target, draft, tok = models
    prompt = torch.tensor(tok(TEXTS[0], add_special_tokens=False).input_ids)
    drafter = SecondChoice(draft, k=3)
    drafter.reset(prompt)
    got = drafter.propose(prompt, 3)
    # The same three second choices, one forward at a time on a fresh cache.
    cache, want, feed = new_cache(draft.config), [], prompt
    with torch.inference_mode():
        for _ in range(3):
            logits = draft(feed[None], cache=cache, use_cache=True).logits[0, -1]
            want.append(int(logits.topk(2).indices[1]))
            feed = torch.tensor(want[-1:])
    assert got.tokens.tolist() == want
    assert drafter.seen.tolist() == prompt.tolist() + want[:2]  # the last draft token is never fed
    plain = ModelDrafter(draft, k=3)
    plain.reset(prompt)
    assert plain.propose(prompt, 3, GREEDY).tokens.tolist() != want  # greedy drafts the first choices


def test_the_batched_loop_runs_the_same_program_per_row(models):
    """Batch 3 against batch 1 with SecondChoice: the same tokens and accepted counts, so the
    batched loop drafted with the drafter's program, not a copy of ModelDrafter's."""
    target, draft, tok = models
    prompts = [torch.tensor(tok(t, add_special_tokens=False).input_ids) for t in TEXTS]
    alone = [generate(target, p, verifier=SPD(), drafter=SecondChoice(draft, k=3), max_new_tokens=10) for p in prompts]
    batched = generate_batch(target, [BatchRequest(p, None, 10) for p in prompts], verifier=SPD(),
                             drafter=SecondChoice(draft, k=3), batch_size=3)
    assert [o.new_tokens for o in batched] == [o.new_tokens for o in alone]
    assert [o.accepted for o in batched] == [o.accepted for o in alone]
    greedy = [generate(target, p, verifier=SPD(), drafter=ModelDrafter(draft, k=3), max_new_tokens=10) for p in prompts]
    assert sum(map(sum, (o.accepted for o in alone))) < sum(map(sum, (o.accepted for o in greedy)))  # it drafted otherwise
