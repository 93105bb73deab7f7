"""loosespec_bench.train.mine_autojudge: the features (the target's hidden state after the draft
token) and the refusal to mine an evaluation split."""

from __future__ import annotations

import numpy as np
import torch

from loosespec_bench.judges.mining import MinedProblem, Mismatch, feature_rows
from loosespec_bench.models.tiny import tiny_model
from loosespec_bench.step import crop_to
from loosespec_bench.train import mine_autojudge as mine


def test_features_are_the_target_hidden_state_after_the_draft_token():
    target = tiny_model(0)
    prompt = [5, 6, 7]
    # One unimportant mismatch at 1 (its draft token 40 is in the final answer), one important
    # at 3 (draft token 41, the answer keeps 13).
    problem = MinedProblem(target_response=[10, 11, 12, 13, 14], target_answer=None, final_response=[10, 40, 12, 13, 14],
                           mismatches=[Mismatch(1, False, 11, 40), Mismatch(3, True, 13, 41)])
    feats = mine.features(target, prompt, problem, feature_rows, crop_to)
    for (seq, pos), row in zip(feature_rows(problem), feats):
        with torch.inference_mode():
            h = target(torch.tensor([prompt + seq[: pos + 1]]), output_hidden_states=True).hidden_states[-1][0, -1]
        assert np.allclose(row, h.numpy(), atol=1e-4)
    assert feats.shape == (2, target.config.hidden_size)


def test_mining_refuses_the_test_split(capsys, tmp_path):
    assert mine.main(["--out", str(tmp_path / "m"), "pair=tiny", "dataset.split=test"]) == 2
    assert "never mine the evaluation set" in capsys.readouterr().err
    assert not (tmp_path / "m").exists()
