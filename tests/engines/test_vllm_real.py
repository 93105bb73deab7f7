"""The real vLLM engine on the embedded pair (marked slow and vllm): run by hand from the vLLM
environment, `make test-vllm` or
  .venv-vllm/bin/python -m pytest -q -m vllm tests/engines/test_vllm_real.py
Minutes on a 2-core CPU (two vLLM engines load: the method's and the target alone's)."""

from __future__ import annotations

import json

import pytest

from loosespec_bench.run.app import run

from ..conftest import compose_config

pytestmark = [pytest.mark.slow, pytest.mark.vllm]


@pytest.fixture(scope="module", autouse=True)
def _needs_vllm():
    pytest.importorskip("vllm", reason="the vLLM environment (make install-vllm; run with .venv-vllm/bin/python)")


def test_spd_on_gsm8k_through_vllm_writes_the_run_folder(tmp_path):
    cfg = compose_config(["engine=vllm", "method=spd", "dataset=gsm8k", "dataset.limit=2", "generation.max_new_tokens=48"],
                         results_dir=tmp_path)
    s = run(cfg)
    assert s["engine"] == "vllm" and s["engine_version"].startswith("vllm")
    assert s["n_samples"] == 2 and s["timing_mode"].startswith("per-request")
    assert s["tau"] > 1.5  # the 0.5B draft is accepted often on GSM8K (measured ~4.6 at K=5)
    assert s["speedup"] is not None and s["baseline_tokens_per_s"] > 0
    assert len(s["acceptance_by_position"]) == 5  # K = 5, vLLM's per-request counters
    folder = next(p for p in (tmp_path / "default").iterdir() if p.is_dir())
    recs = [json.loads(line) for line in (folder / "samples.jsonl").read_text().splitlines()]
    assert all(r["baseline"]["metrics"]["steps"] == r["baseline"]["metrics"]["new_tokens"] for r in recs)  # target alone: 1/step


def test_refusals_before_any_model_loads(tmp_path):
    from loosespec_bench.errors import ConfigError

    with pytest.raises(ConfigError, match="vLLM's FLy"):
        run(compose_config(["engine=vllm", "method=fly", "method.mode=vllm", "dataset=gsm8k"], results_dir=tmp_path))
    assert not any(tmp_path.iterdir())


def _outputs(folder_root) -> dict[str, list[int]]:
    folder = next(p for p in folder_root.rglob("samples.jsonl"))
    return {r["id"]: r["output_ids"] for r in map(json.loads, folder.read_text().splitlines())}


def test_our_fly_inside_vllm_gives_batch_ones_tokens_at_batch_four_in_float32(tmp_path):
    """Issue 47: FLy at batch > 1 decides each request as at batch 1 (our sampler runs the rule
    per request on its own rows: engines/vllm_sampler.py). In float32, where batching does not flip
    near-ties, the tokens are the same; both runs submit all at once, one engine each."""
    common = ["engine=vllm", "method=fly", "engine.fly_rule=ours", "dataset=gsm8k", "dataset.limit=4", "generation.max_new_tokens=48",
              "pair.dtype=float32", "baseline=none", "warmup=false"]
    one = run(compose_config([*common, "engine.batch_size=1"], results_dir=tmp_path / "b1"))
    four = run(compose_config([*common, "engine.batch_size=4"], results_dir=tmp_path / "b4"))
    assert one["serving"]["batch_size"] == 1 and four["serving"]["batch_size"] == 4
    a, b = _outputs(tmp_path / "b1"), _outputs(tmp_path / "b4")
    assert a.keys() == b.keys() and len(a) == 4
    assert {k: a[k] == b[k] for k in a} == {k: True for k in a}
    assert one["tau"] > 1.0 and four["tau"] == pytest.approx(one["tau"])  # the same steps: the same accepted lengths
