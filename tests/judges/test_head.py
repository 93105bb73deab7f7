"""The judge file and its score (judges/head.py)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from loosespec_bench.errors import ConfigError
from loosespec_bench.judges.head import JudgeHead, packaged_path


def test_score_is_sklearns_predict_proba(tmp_path):
    sk = pytest.importorskip("sklearn.linear_model")
    from sklearn.preprocessing import StandardScaler

    rng = np.random.default_rng(0)
    X = rng.normal(size=(80, 4)).astype(np.float32) * [1, 2, 3, 0.5] + [0, 1, -1, 2]
    y = (X[:, 0] + X[:, 2] > 0).astype(int)
    scaler = StandardScaler().fit(X)
    model = sk.LogisticRegression().fit(scaler.transform(X), y)
    head = JudgeHead(mean=scaler.mean_.tolist(), scale=scaler.scale_.tolist(), weights=model.coef_[0].tolist(),
                     bias=float(model.intercept_[0]), threshold=0.5)
    expected = model.predict_proba(scaler.transform(X))[:, 1]
    assert np.allclose(head.score(torch.from_numpy(X)).numpy(), expected, atol=1e-5)
    again = JudgeHead.load(head.save(tmp_path))  # round trip through judge.json
    assert np.allclose(again.score_numpy(X), expected, atol=1e-5)


def test_zero_variance_features_are_not_divided_by_zero():
    head = JudgeHead(mean=[1.0, 0.0], scale=[0.0, 1.0], weights=[5.0, 1.0], bias=0.0, threshold=0.5)
    assert torch.isfinite(head.score(torch.tensor([[3.0, 0.0]]))).all()


def test_threshold_ties_count_as_important():
    head = JudgeHead(mean=[0.0], scale=[1.0], weights=[1.0], bias=0.0, threshold=0.5)
    assert head.important(head.score(torch.tensor([[0.0], [-1.0]]))).tolist() == [True, False]  # sigmoid(0) = 0.5


def test_wrong_hidden_size_is_refused():
    head = JudgeHead(mean=[0.0], scale=[1.0], weights=[1.0], bias=0.0, threshold=0.5)
    with pytest.raises(ValueError, match="hidden size 1"):
        head.score(torch.zeros(2, 3))


@pytest.mark.parametrize("content, match", [(None, "no trained judge"), ("{", "not valid JSON"),
                                             ('{"format": "x"}', "not an AutoJudge judge"),
                                             ('{"format": "loosespec_bench.autojudge/1", "mean": [0]}', "lacks a field")])
def test_bad_judge_files_are_one_config_error(tmp_path, content, match):
    if content is not None:
        (tmp_path / "judge.json").write_text(content)
    with pytest.raises(ConfigError, match=match):
        JudgeHead.load(tmp_path)


def test_packaged_judge_for_the_embedded_pair_loads_with_its_provenance():
    path = packaged_path("packaged:qwen2.5-coder-0.5b-1.5b")
    if not path.exists():
        pytest.fail(f"the embedded pair's judge is not committed at {path}")
    head = JudgeHead.load("packaged:qwen2.5-coder-0.5b-1.5b")
    assert head.hidden_size == 1536  # Qwen2.5-Coder-1.5B's hidden size
    prov = json.loads(path.read_text())["provenance"]
    assert prov["mined_set"]["split"] == "train" and prov["mined_set"]["mismatches"] > 0
    assert any(part.get("recall") is not None for part in prov["heldout"].values())  # held-out metrics recorded
