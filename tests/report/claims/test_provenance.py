"""Declaration provenance (issue 70): a claim declared after its data is never pre-registered, and
a copy of the results without git reads what git said from provenance.json."""

from __future__ import annotations

import json
from pathlib import Path

from loosespec_bench.report.claims import provenance as prov


def test_status_is_pre_registered_only_before_the_data():
    assert prov.status("2026-12-05T01:28:15Z", "2026-12-05T22:09:57Z") == prov.PRE_REGISTERED
    assert prov.status("2026-12-06T01:26:12Z", "2026-12-05T22:09:57Z") == prov.AFTER_DATA
    assert prov.status("2026-12-06T01:26:12Z", None) == prov.NO_DATA
    assert prov.status(None, "2026-12-05T22:09:57Z") == prov.UNKNOWN


def test_without_git_the_committed_record_is_read(tmp_path: Path):
    # tmp_path lies outside any repository: git cannot answer, provenance.json does.
    run = tmp_path / "runs" / "r1"
    run.mkdir(parents=True)
    (run / "summary.json").write_text(json.dumps({"date": "2026-12-02T10:00:00+00:00", "time_s": 3600.0}))
    decl = tmp_path / "claims.yaml"
    decl.write_text("claims: []\n")
    (tmp_path / prov.PROVENANCE_NAME).write_text(json.dumps({
        "source": "git", "declared": {"c1": {"at": "2026-12-03T15:14:17Z", "commit": "abc"}},
        "data": {"runs/r1": {"at": "2026-12-02T09:00:00Z", "how": "first commit"}}, "calibration": {}}))
    rec = prov.collect(decl, [str(run)])
    assert rec.source.startswith("provenance.json")
    assert rec.declared["c1"]["at"] == "2026-12-03T15:14:17Z"
    # The folder's own record (its summary's date less its timed seconds) is read where it exists.
    assert rec.data["runs/r1"]["at"] == "2026-12-02T09:00:00Z"
    assert prov.status(rec.declared["c1"]["at"], rec.data["runs/r1"]["at"]) == prov.AFTER_DATA
    # A record not from git is never written over the committed one.
    prov.write(decl, rec)
    assert json.loads((tmp_path / prov.PROVENANCE_NAME).read_text())["declared"]["c1"]["commit"] == "abc"


def test_a_speed_folder_dates_from_its_first_timing(tmp_path: Path):
    (tmp_path / "occasion-1.jsonl").write_text(json.dumps({"kind": "start", "at": 1796548886.11}) + "\n")
    at, how = prov.data_first(tmp_path, None)  # type: ignore[misc]
    assert at == "2026-12-06T09:21:26Z" and "occasion-1.jsonl" in how
