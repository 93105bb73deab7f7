"""settings/flags.py: lm-eval's flags in either spelling, and other tools' switches (--resume,
--dry-run) said as what this harness does instead (issue 72 item 3)."""

from __future__ import annotations

import pytest

from loosespec_bench.errors import ConfigError
from loosespec_bench.settings import flags


@pytest.mark.parametrize("flag", ["--output_path", "--output-path"])
def test_lm_evals_flags_in_either_spelling(flag):
    with pytest.raises(ConfigError, match="python -m loosespec_bench paths.results_dir=out$"):
        flags.check_flags([flag, "out"])


def test_resume_names_the_run_folder_the_command_continues(tmp_path, monkeypatch):
    monkeypatch.setenv("LOOSESPEC_RESULTS_DIR", str(tmp_path / "results"))
    folder = flags.run_folder_of(["method=fly"])
    assert folder is not None and folder.startswith(str(tmp_path / "results" / "default"))
    with pytest.raises(ConfigError) as err:
        flags.check_flags(["--resume", "method=fly"])
    assert f"continues its run folder ({folder})" in str(err.value)
    assert not (tmp_path / "results").exists()


def test_dry_run_reaching_the_flag_check_is_told_validate():
    with pytest.raises(ConfigError, match="python -m loosespec_bench validate method=fly composes every point"):
        flags.check_flags(["--dry-run", "method=fly"])
