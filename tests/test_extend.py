"""README "Extend it": a new acceptance rule, data set and model pair, each added through config
and at most ONE small module outside the package, composed through Hydra's search path and run
end to end on the tiny pair (2 samples). The module and yaml texts below are the README's."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

from loosespec_bench import app
from loosespec_bench.config import CONF_DIR, catalog, check_group_overrides, search_dirs, searchpath_override
from loosespec_bench.errors import ConfigError

from .conftest import shared_data_dir

# -- a new acceptance rule: method=top2 ------------------------------------------------------
TOP2_MODULE = '''
"""method=top2: accept draft token d_i when it is among the target's 2 most likely tokens."""
import torch

from loosespec_bench.step import longest_true_prefix
from loosespec_bench.verifiers.base import Verdict, Verifier


class Top2(Verifier):
    def __init__(self, top: int = 2) -> None:
        self.top = top

    def __call__(self, draft, scores, *, temperature, generator, top_k=0, top_p=1.0):
        k = draft.k
        logits = scores.logits  # [K+1, vocab]: row i scores draft position i, row K the bonus
        best = logits[:k].topk(self.top, dim=-1).indices.cpu()  # [K, top]
        ok = (best == draft.tokens.unsqueeze(-1)).any(dim=-1)  # [K]
        n = longest_true_prefix(ok)  # keep d_1..d_n
        exact = draft.tokens == logits[:k].argmax(dim=-1).cpu()  # [K] what SPD would accept
        record = {"raw_match": exact.tolist(), "loose_accepted": [i for i in range(n) if not exact[i]]}
        return Verdict(num_accepted=n, next_token=int(logits[n].argmax()), record=record)
'''
TOP2_YAML = """\
# description: accept d_i when it is among the target's top-2 tokens (greedy)
name: top2
_target_: ext_top2.Top2
top: 2
"""

# -- a new data set: dataset=toy ---------------------------------------------------------------
TOY_MODULE = '''
"""dataset=toy: questions from <data_dir>/toy/test.jsonl ({"id", "question", "answer"}), exact match."""
from loosespec_bench.tasks.base import Sample, Task, read_jsonl


class Toy(Task):
    name = "toy"

    def load_all(self):
        rows = read_jsonl(self.local_path("toy", "test.jsonl"))
        return [Sample(id=str(r["id"]), messages=self.with_system([{"role": "user", "content": r["question"]}]),
                       reference=r["answer"]) for r in rows]

    def score(self, sample, completion):
        return {"correct": completion.strip() == sample.reference}
'''
TOY_YAML = """\
# description: a toy question set (exact match)
_target_: ext_toy.Toy
name: toy
data_dir: ${paths.data_dir}
limit: 2
max_new_tokens: 16
stop_strings: []
system_prompt: null
"""
TOY_ROWS = [{"id": i, "question": f"What is {i} + {i}?", "answer": str(2 * i)} for i in range(3)]

# -- a new model pair: pair=tiny_seeds (config only) -------------------------------------------
PAIR_YAML = """\
# description: two other tiny random models (seeds 2 and 3)
name: tiny_seeds
target:
  path: tiny:2
draft:
  path: tiny:3
dtype: float32
device: cpu
draft_device: null
"""


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"))


def _run(conf: Path, overrides: list[str], results: Path) -> dict:
    """Check the overrides as the CLI does, compose them as the CLI would, run the point."""
    args = [f"hydra.searchpath=[file://{conf}]", *overrides]
    check_group_overrides(args)  # the harness's own check knows the new option
    base = [f"paths.data_dir={shared_data_dir()}", f"paths.results_dir={results}", "progress=false"]
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose(config_name="config", overrides=base + ["experiment=smoke_tiny", "dataset.limit=2", *args])
    return app.run(cfg)


def test_a_new_acceptance_rule(tmp_path, monkeypatch):
    _write(tmp_path, {"ext_top2.py": TOP2_MODULE, "conf/method/top2.yaml": TOP2_YAML})
    monkeypatch.syspath_prepend(str(tmp_path))  # the module: on PYTHONPATH for the CLI
    summary = _run(tmp_path / "conf", ["method=top2", "drafter=model", "drafter.k=3"], tmp_path / "results")
    assert summary["method"] == "top2" and summary["n_samples"] == 2
    assert summary["tau"] >= 1.0 and summary["n_paired"] == 2
    # Its record keys feed the loose-decision figures like FLy's and DropMatch's.
    assert summary["loose_steps"] > 0 and summary["loose_accepts"] >= 0


def test_a_new_data_set(tmp_path, monkeypatch):
    _write(tmp_path, {"ext_toy.py": TOY_MODULE, "conf/dataset/toy.yaml": TOY_YAML})
    data = tmp_path / "data"
    _write(data, {"toy/test.jsonl": "".join(json.dumps(r) + "\n" for r in TOY_ROWS)})
    monkeypatch.syspath_prepend(str(tmp_path))
    summary = _run(tmp_path / "conf", ["method=spd", "dataset=toy", f"paths.data_dir={data}"], tmp_path / "results")
    assert summary["dataset"] == "toy" and summary["n_samples"] == 2
    assert summary["accuracy"] == 0.0 and summary["baseline_accuracy"] == 0.0  # random models
    lines = (Path(summary["run_dir"]) / "samples.jsonl").read_text().splitlines()
    assert [json.loads(ln)["reference"] for ln in lines] == ["0", "2"]


def test_a_new_model_pair(tmp_path):
    _write(tmp_path, {"conf/pair/tiny_seeds.yaml": PAIR_YAML})
    summary = _run(tmp_path / "conf", ["pair=tiny_seeds", "method=spd"], tmp_path / "results")
    assert summary["pair"] == "tiny_seeds" and summary["n_samples"] == 2
    config = (Path(summary["run_dir"]) / "config.yaml").read_text()
    assert "path: tiny:2" in config and "path: tiny:3" in config


def test_search_path_options_are_checked_and_listed(tmp_path, monkeypatch):
    _write(tmp_path, {"conf/method/top2.yaml": TOP2_YAML})
    sp = [f"file://{tmp_path / 'conf'}"]
    assert searchpath_override([f"hydra.searchpath=[{sp[0]}]", "method=top2"]) == sp
    assert search_dirs(sp) == [CONF_DIR, tmp_path / "conf"]
    with pytest.raises(ConfigError, match="'top2' is not a known method"):
        check_group_overrides(["method=top2"])  # without the search path: unknown, as before
    with pytest.raises(ConfigError, match="did you mean 'top2'"):
        check_group_overrides([f"hydra.searchpath=[{sp[0]}]", "method=top3"])
    listed = [line.split(None, 1) for line in catalog(searchpath=sp).splitlines()]
    assert ["top2", "accept d_i when it is among the target's top-2 tokens (greedy)"] in listed
    # The site folder ($LOOSESPEC_SITE_CONF) is the default search path: options there count too.
    monkeypatch.setenv("LOOSESPEC_SITE_CONF", str(tmp_path / "conf"))
    check_group_overrides(["method=top2"])
    assert "top2" in catalog()
