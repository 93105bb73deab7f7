"""models/subvocab.py: drafter.vocab_top asks the drafter what it declares (Drafter.
vocab_top_refusal, vocab_network), never probes its attributes. (The restricted head itself and
its tokens: tests/models/test_quantize.py.)"""

from __future__ import annotations

import pytest

from loosespec_bench.drafters import Eagle3Drafter
from loosespec_bench.drafters.base import Drafter
from loosespec_bench.drafters.cross_tokenizer import CrossTokenizerDrafter
from loosespec_bench.errors import ConfigError
from loosespec_bench.models.subvocab import restrict_draft_vocab


@pytest.mark.parametrize("cls, says", [(Eagle3Drafter, "its own reduced vocabulary"), (CrossTokenizerDrafter, "target's tokenizer")])
def test_a_drafter_that_declares_a_refusal_is_refused_in_one_line(cls, says):
    drafter = cls.__new__(cls)  # not built: the refusal is the class's, read before anything else
    with pytest.raises(ConfigError, match=f"drafter.vocab_top: .*{says}"):
        restrict_draft_vocab(drafter, 8, tokenizer=None, data_dir=None)


def test_a_drafter_without_a_network_is_left_as_it_is():
    class Lookup(Drafter):
        def propose(self, *args, **kwargs):  # pragma: no cover (never called)
            raise AssertionError

    assert Lookup.vocab_top_refusal is None
    assert restrict_draft_vocab(Lookup.__new__(Lookup), 8, tokenizer=None, data_dir=None) == 0
