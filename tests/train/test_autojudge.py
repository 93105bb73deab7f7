"""loosespec_bench.train.autojudge end to end on a synthetic mined set: the judge file with its
provenance, and one error line without a mined set."""

from __future__ import annotations

import json

import numpy as np
import pytest

from loosespec_bench.judges.head import JudgeHead
from loosespec_bench.judges.mining import MinedStore
from loosespec_bench.train import autojudge as train


def test_train_writes_a_judge_with_provenance(tmp_path, capsys):
    pytest.importorskip("sklearn")
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
    assert train.main(["--mined", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1
