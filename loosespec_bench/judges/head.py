"""AutoJudge's classifier as a verifier reads it: a standardised logistic regression on the
target's final hidden state at a draft position, and the threshold above which a mismatch is
"important" (must be corrected).

Stored as one JSON file (`judge.json`): the weights are small (hidden size + 1 numbers), so a
judge for the embedded pair can live in git with its provenance. The score is computed in
torch (no scikit-learn needed at inference):
    s_i = sigmoid(((h_i - mean) / scale) . w + b)
which is what scikit-learn's StandardScaler + LogisticRegression.predict_proba(...)[:, 1]
computes (the released code, src/train_head_gsm8k.py, fits exactly that pair).
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from ..errors import ConfigError

SETUPS = ("DT",)  # target hidden state on the sequence with the draft token (the released vLLM path)
FORMAT = "loosespec_bench.autojudge/1"


PACKAGED = "packaged:"
DATA_DIR = Path(__file__).resolve().parent / "data"


def packaged_path(name: str) -> Path:
    """`packaged:<pair>`: a judge committed with the package (loosespec_bench/judges/data/<pair>/)."""
    return DATA_DIR / name[len(PACKAGED) :] / "judge.json"


def judge_file(path: str | Path) -> Path:
    """The judge.json a rule's judge path names: `packaged:<pair>`, a file, or its folder."""
    p = packaged_path(str(path)) if str(path).startswith(PACKAGED) else Path(os.path.expanduser(str(path)))
    return p / "judge.json" if p.is_dir() else p


def judge_sha256(path: str | Path | None) -> str | None:
    """sha256 of the judge file `path` names (None when there is none: the pre-check says so).
    It goes into the resolved config (the rule's judge hash), so a retrained judge gets a new run
    id and a run folder is never resumed with another judge's samples."""
    if not path:
        return None
    p = judge_file(path)
    if not p.is_file():
        return None
    from ..digest import file_sha256

    return file_sha256(p)


def default_judge_dir(pair_name: str) -> Path:
    """Where a trained judge for a pair lives by default: $LOOSESPEC_AUTOJUDGE_DIR/<pair> or
    ~/.cache/loosespec_bench/autojudge/<pair> (beside the EAGLE-3 heads in ~/.cache/loosespec_bench)."""
    base = os.environ.get("LOOSESPEC_AUTOJUDGE_DIR") or Path.home() / ".cache" / "loosespec_bench" / "autojudge"
    return Path(base).expanduser() / pair_name.replace("/", "--")


@dataclass
class JudgeHead:
    """A fitted judge: s = sigmoid(((h - mean) / scale) . weights + bias); important iff s > threshold."""

    mean: list[float]
    scale: list[float]
    weights: list[float]
    bias: float
    threshold: float
    setup: str = "DT"
    # Training data, hyper-parameters and held-out metrics (precision/recall of "important").
    provenance: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        n = len(self.weights)
        if not (len(self.mean) == len(self.scale) == n) or n == 0:
            raise ConfigError(f"judge: mean, scale and weights must have one equal, non-zero length (got {len(self.mean)}, {len(self.scale)}, {n})")
        if self.setup not in SETUPS:
            raise ConfigError(f"judge setup={self.setup!r}: only {SETUPS} can be read at inference (the loop gives the target's hidden states)")
        self._w = torch.tensor(self.weights, dtype=torch.float32)  # [H]
        self._mean = torch.tensor(self.mean, dtype=torch.float32)  # [H]
        # StandardScaler leaves zero-variance features at scale 1 (it never divides by 0).
        self._scale = torch.tensor([s if s > 0 else 1.0 for s in self.scale], dtype=torch.float32)  # [H]

    @property
    def hidden_size(self) -> int:
        return len(self.weights)

    def score(self, hidden: torch.Tensor) -> torch.Tensor:
        """P(important) per row. hidden: [n, H] (any dtype/device). Returns [n] float32 on the CPU."""
        if hidden.shape[-1] != self.hidden_size:
            raise ValueError(f"judge expects hidden size {self.hidden_size}, got {hidden.shape[-1]} (trained for another target?)")
        x = (hidden.detach().float().cpu() - self._mean) / self._scale  # [n, H]
        return torch.sigmoid(x @ self._w + float(self.bias))  # [n]

    def score_numpy(self, features: "Any") -> "Any":
        """score() for a numpy array [n, H]; returns a numpy [n] array (training, reports)."""
        return self.score(torch.from_numpy(features)).numpy()

    def important(self, scores: torch.Tensor) -> torch.Tensor:
        """[n] bool: the judge asks for the target's token (the released rule: p >= threshold)."""
        return scores >= self.threshold

    # -- files -----------------------------------------------------------------------------
    def save(self, folder: Path | str) -> Path:
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / "judge.json"
        data = {"format": FORMAT, **{k: v for k, v in asdict(self).items()}}
        tmp = path.with_suffix(".partial")
        tmp.write_text(json.dumps(data, indent=1))
        os.replace(tmp, path)  # a crash never leaves half a judge
        return path

    @classmethod
    def load(cls, path: Path | str, setting: str = "the judge path") -> "JudgeHead":
        """A judge.json, or a folder holding one. A missing or malformed file is a ConfigError
        that names `setting` (the rule passes the config key it read `path` from)."""
        p = judge_file(path)
        if not p.is_file():
            raise ConfigError(
                f"{setting}: no trained judge at {p}; train one with python -m loosespec_bench.train.mine_autojudge and "
                f"python -m loosespec_bench.train.autojudge (docs/algorithms.md, AutoJudge) or point {setting} at a judge.json"
            )
        try:
            data = json.loads(p.read_text())
        except ValueError as err:
            raise ConfigError(f"{setting}: {p} is not valid JSON ({err})") from None
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise ConfigError(f"{setting}: {p} is not an AutoJudge judge file (format {FORMAT!r})")
        try:
            return cls(**{k: data[k] for k in ("mean", "scale", "weights", "bias", "threshold")},
                       setup=data.get("setup", "DT"), provenance=data.get("provenance", {}))
        except (KeyError, TypeError) as err:
            raise ConfigError(f"{setting}: {p} lacks a field of a judge ({err})") from None
