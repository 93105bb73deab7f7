"""scripts/mine_autojudge.py (features, refusals) and scripts/train_autojudge.py end to end on a
synthetic mined set."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from loosespec_bench.judges.head import JudgeHead
from loosespec_bench.judges.mining import MinedProblem, MinedStore, Mismatch, feature_rows
from loosespec_bench.models.tiny import tiny_model
from loosespec_bench.step import crop_to

from . import load_script


def _script(name):
    return load_script(name)


def test_features_are_the_target_hidden_state_after_the_draft_token():
    mine = _script("mine_autojudge")
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
    mine = _script("mine_autojudge")
    assert mine.main(["--out", str(tmp_path / "m"), "pair=tiny", "dataset.split=test"]) == 2
    assert "never mine the evaluation set" in capsys.readouterr().err
    assert not (tmp_path / "m").exists()


def test_train_writes_a_judge_with_provenance(tmp_path, capsys):
    pytest.importorskip("sklearn")
    train = _script("train_autojudge")
    rng = np.random.default_rng(0)
    store = MinedStore(tmp_path / "mined", {"hidden_size": 4, "pair": "tiny", "split": "train"})
    for p in range(40):
        y = rng.integers(0, 2, 5)
        X = rng.normal(size=(5, 4)).astype(np.float32)
        X[:, 1] += 3 * y
        store.append({"id": f"gsm8k-train/{p}", "mismatches": [{"position": i, "important": bool(v)} for i, v in enumerate(y)],
                      "seconds": 1.0}, X)
    assert train.main(["--mined", str(tmp_path / "mined")]) == 0
    head = JudgeHead.load(tmp_path)
    prov = head.provenance
    assert prov["mined_set"]["problems"] == 40 and prov["mined_set"]["mismatches"] == 200
    assert set(prov["mined_set"]["files_sha256"]) == {"mined.jsonl", "features.f32", "meta.json"}
    assert prov["heldout"]["test"]["recall"] is not None and prov["heldout"]["val"]["recall"] >= 0.9
    assert json.loads((tmp_path / "training_report.json").read_text())["C"] == prov["C"]
    assert "precision" in capsys.readouterr().out


def test_train_without_a_mined_set_is_one_error_line(tmp_path, capsys):
    train = _script("train_autojudge")
    assert train.main(["--mined", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1
