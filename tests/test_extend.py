"""docs/extending.md: a new acceptance rule, data set and model pair, each added through config
and at most ONE small module outside the package, composed through Hydra's search path and run
end to end on the tiny pair (2 samples). The module and yaml files are read from that page."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

from loosespec_bench.run import app
from loosespec_bench.settings.config import CONF_DIR, catalog, check_group_overrides, search_dirs, searchpath_override
from loosespec_bench.errors import ConfigError
from loosespec_bench.tasks.base import seeded_permutation

from .conftest import REPO, shared_data_dir

def readme_examples() -> dict[str, str]:
    """The files of docs/extending.md: each fenced python / yaml block whose first
    line is `# <path>`, by path. The tests run exactly what the page shows."""
    section = (REPO / "docs" / "extending.md").read_text().split("\n## Extend it\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```(?:python|yaml)\n(.*?)```", section, re.S)
    return {b.splitlines()[0].removeprefix("# ").strip(): b for b in blocks}


EXAMPLES = readme_examples()
TOY_ROWS = [{"id": i, "question": f"What is {i} + {i}?", "answer": str(2 * i)} for i in range(3)]


def _files(*paths: str) -> dict[str, str]:
    return {path: EXAMPLES[path] for path in paths}


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def _run(conf: Path, overrides: list[str], results: Path) -> dict:
    """Check the overrides as the CLI does, compose them as the CLI would, run the point."""
    args = [f"hydra.searchpath=[file://{conf}]", *overrides]
    check_group_overrides(args)  # the harness's own check knows the new option
    base = [f"paths.data_dir={shared_data_dir()}", f"paths.results_dir={results}", "progress=false"]
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose(config_name="config", overrides=base + ["experiment=smoke_tiny", "dataset.limit=2", *args])
    return app.run(cfg)


def test_a_new_acceptance_rule(tmp_path, monkeypatch):
    _write(tmp_path, _files("ext_top2.py", "conf/method/top2.yaml"))
    monkeypatch.syspath_prepend(str(tmp_path))  # the module: on PYTHONPATH for the CLI
    summary = _run(tmp_path / "conf", ["method=top2", "drafter=model", "drafter.k=3"], tmp_path / "results")
    assert summary["method"] == "top2" and summary["n_samples"] == 2
    assert summary["tau"] >= 1.0 and summary["n_paired"] == 2
    # Its record keys feed the loose-decision figures like FLy's and DropMatch's.
    assert summary["loose_steps"] > 0 and summary["loose_accepts"] >= 0


def test_a_new_data_set(tmp_path, monkeypatch):
    _write(tmp_path, _files("ext_toy.py", "conf/dataset/toy.yaml"))
    data = tmp_path / "data"
    _write(data, {"toy/test.jsonl": "".join(json.dumps(r) + "\n" for r in TOY_ROWS)})
    monkeypatch.syspath_prepend(str(tmp_path))
    summary = _run(tmp_path / "conf", ["method=spd", "dataset=toy", f"paths.data_dir={data}"], tmp_path / "results")
    assert summary["dataset"] == "toy" and summary["n_samples"] == 2
    assert summary["accuracy"] == 0.0 and summary["baseline_accuracy"] == 0.0  # random models
    lines = (Path(summary["run_dir"]) / "samples.jsonl").read_text().splitlines()
    # dataset.limit=2 takes the first two problems of the seeded permutation (tasks/base.py)
    picked = seeded_permutation(len(TOY_ROWS), 0)[:2]
    assert [json.loads(ln)["reference"] for ln in lines] == [TOY_ROWS[i]["answer"] for i in picked]


def test_a_new_model_pair(tmp_path):
    _write(tmp_path, _files("conf/pair/tiny_seeds.yaml"))
    summary = _run(tmp_path / "conf", ["pair=tiny_seeds", "method=spd"], tmp_path / "results")
    assert summary["pair"] == "tiny_seeds" and summary["n_samples"] == 2
    config = (Path(summary["run_dir"]) / "config.yaml").read_text()
    assert "path: tiny:2" in config and "path: tiny:3" in config


def test_search_path_options_are_checked_and_listed(tmp_path, monkeypatch):
    _write(tmp_path, _files("conf/method/top2.yaml"))
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
