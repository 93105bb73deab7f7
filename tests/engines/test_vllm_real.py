"""The real vLLM engine on the embedded pair (marked slow and vllm): run by hand from the vLLM
environment, `make test-vllm` or
  .venv-vllm/bin/python -m pytest -q -m vllm tests/engines/test_vllm_real.py
Minutes on a 2-core CPU (two vLLM engines load: the method's and the target alone's)."""

from __future__ import annotations

import json

import pytest

from loosespec_bench.app import run

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
