"""`python -m loosespec_bench.certify.readme`: the committed certification's README from what is on
disk, on a tiny-pair certification: a finished ladder at a margin gets its row (the loosest
certified setting and its bound, as the certification file says), a margin not finished is
labelled not certified with the planner's cost and the progress on disk, and a certification
file that is a link is refused with one error line."""

from __future__ import annotations

import json

from loosespec_bench.certify.__main__ import main as certify
from loosespec_bench.certify.readme import ladders, main as readme

from ..conftest import shared_data_dir

LADDER = ["-e", "certify_gsm8k_threshold", "--looks", "10", "--holdout", "2"]
TINY = ["--", "pair=tiny", "drafter.k=4", "generation.max_new_tokens=8", "warmup=false"]


def test_every_certify_experiment_is_a_ladder():
    assert "certify_gsm8k" in ladders() and all(e.startswith("certify_") for e in ladders())


def test_readme_from_a_tiny_certification(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("LOOSESPEC_DATA_DIR", str(shared_data_dir()))
    out = tmp_path / "README.md"
    args = [*LADDER, "--results", str(tmp_path), "--out", str(out), "--deltas", "35,20", *TINY]

    assert readme(args) == 0  # nothing run yet: both margins are plainly not certified
    text = out.read_text()
    assert "None yet" in text and text.count("**not certified**") == 2 and "not started" in text
    assert "no loss" not in text.lower()

    assert certify(["--delta", "35", *LADDER, "--results", str(tmp_path), *TINY]) == 0
    (js,) = (tmp_path / "certify_gsm8k_threshold").glob("certification_*delta35pts*.json")
    res = json.loads(js.read_text())
    capsys.readouterr()

    assert readme(args) == 0
    text = out.read_text()
    finished, = [ln for ln in text.splitlines() if ln.startswith("| `certify_gsm8k_threshold`") and "| 35 pts |" in ln]
    pending, = [ln for ln in text.splitlines() if ln.startswith("| `certify_gsm8k_threshold`") and "| 20 pts |" in ln]
    k = res["certified"]
    if k:  # the row is the certification file's answer
        best = res["settings"][k - 1]
        assert f"**{res['loosest_certified']}**" in finished and f"| {100 * best['loss_upper']:.2f} |" in finished
    else:
        assert "**none certified**" in finished
    assert res["conditions"]["pair"] in finished and res["conditions"]["dtype"] in finished
    # The 20-point margin reads the same run folders (the problem count is not in a run id), but
    # no 20-point certification has finished: not certified, its progress shown.
    assert "**not certified**" in pending and "10 of 10 problems of look 1" in pending

    js.unlink()
    js.symlink_to(tmp_path / "README.md")
    assert readme(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and "symbolic link" in err[0]


def test_the_progress_names_the_look_its_problems_are_for():
    """A setting past its first look reads as the next look's progress, unfinished, even where
    the first look's summary is still on disk."""
    from loosespec_bench.certify.readme import pending_row

    def progress(n: int, state: str) -> dict:
        return {"setting": f"theta={n}", "problems": n, "state": state, "method_s": 40.0, "target_alone_s": None}

    state = {"experiment": "e", "key": "method.theta", "margin": 5.0, "looks": [197, 395, 592], "cost_h": 18.8,
             "progress": [progress(197, "done"), progress(229, "done"), progress(592, "done"), progress(12, "running")]}
    row = pending_row(state)
    assert "theta=197: 197 of 197 problems of look 1 (done;" in row
    assert "theta=229: 229 of 395 problems of look 2 (unfinished, resumes;" in row
    assert "theta=592: 592 of 592 problems of look 3 (done;" in row
    assert "theta=12: 12 of 197 problems of look 1 (unfinished, resumes;" in row
