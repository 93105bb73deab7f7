"""Re-run the hostile-input probe: every input of tests/test_hostile_inputs.py (issue 24) and
tests/test_hostile_folders.py (issue 41: folders from someone else) through its real command
line (a subprocess each), then the fourth round's cases (issue 74: tests/test_hostile_round4.py
and the run's signal tests, ROUND4_NODES) in one pytest process, counted as

  clean      exit 2, one `error:` line (the last line of stderr), no traceback, nothing left behind
             (a hostile folder: the folder and the file beside it unchanged, nothing it names executed)
  traceback  a Python traceback on stderr
  silent     exit 0 (the input was accepted), or a refusal that left files behind
  hang       still running at --timeout (killed)
  other      any other ending (a non-2 exit without a traceback; round four: a failed expectation)
  skipped    round four only: the test skipped itself (W&B not installed, no mount namespace...)

    python -m tests.probe_hostile_inputs [--jobs 2] [--only ID ...] [--timeout S] [--json out.json] [--no-round4]

Prints one line per input, the counts by surface (the command or the kind of file a case attacks:
SURFACE for rounds one to three, ROUND4_SURFACES for round four) and the totals (tried / clean /
traceback / silent / hang / other).
It lives beside the tests because it replays their tables (run from the checkout's root); the
suite itself runs the same inputs in-process.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from .conftest import REPO
from .test_hostile_folders import FOLDER, MAIN as MAIN41, OUTSIDE, OUTSIDE_TEXT, FolderCase, run_folder_cli
from .test_hostile_inputs import ALL, Case, run_cli

VERDICTS = ("clean", "traceback", "silent", "hang", "other", "skipped")
# Rounds one to three: a case's surface is the command it runs (Case.kind); a folder case
# (issue 41) attacks a run folder given to the re-scorer.
SURFACE = {"L": "run (python -m loosespec_bench)", "S": "re-score", "P": "plan", "R": "report"}
FOLDER_SURFACE = "run folders (re-score)"

# Round four (issue 74): its cases are tests (what each must end in is asserted there), run in
# one pytest process; a node's surface is its test function's (ROUND4_SURFACES, which
# tests/test_hostile_round4.py checks is complete).
ROUND4_NODES = (
    "tests/test_hostile_round4.py",
    "tests/run/test_app.py::test_a_signal_during_a_run_ends_with_one_line_keeps_the_finished_records_and_the_command_resumes",
    "tests/run/test_app.py::test_a_run_stopped_before_its_first_sample_leaves_no_run_folder",
    "tests/test_architecture.py::test_every_file_access_passes_the_gate",
)
ROUND4_SURFACES = {
    "test_a_report_output_that_is_a_link_is_refused_and_its_target_unchanged": "report outputs",
    "test_the_index_csv_that_is_a_link_is_refused": "report outputs",
    "test_a_table_folder_linked_outside_its_out_folder_is_refused": "report outputs",
    "test_atomic_writes_never_write_through_a_link_and_leave_nothing_on_failure": "speed-evidence folders",
    "test_a_dangling_claims_yaml_link_plants_no_file": "claims files",
    "test_a_malformed_claims_yaml_names_the_file_and_the_field": "claims files",
    "test_the_packaged_claims_and_profiles_pass_their_declarations": "claims files",
    "test_the_losses_breakdown_reads_and_writes_through_the_gate": "claims files",
    "test_provenance_reads_through_the_gate_and_drops_what_is_not_a_date": "claims files",
    "test_a_speed_configs_identity_never_reads_an_occasion_file_through_a_link": "speed-evidence folders",
    "test_a_speed_evidence_record_out_of_range_names_its_line": "speed-evidence folders",
    "test_a_linked_wandb_folder_turns_the_tracker_away": "W&B folders",
    "test_a_stale_point_naming_a_folder_outside_results_is_skipped_with_a_line": "sweep points",
    "test_sweep_points_are_read_only_from_real_job_folders": "sweep points",
    "test_a_point_json_link_is_not_written_through": "sweep points",
    "test_a_fifo_where_a_file_belongs_never_blocks": "FIFOs (speed report, data --from, sweep point)",
    "test_a_malformed_calibration_names_its_field": "calibrations",
    "test_a_calibration_is_used_only_under_its_own_signature_and_with_finite_costs": "calibrations",
    "test_a_pair_name_never_leads_the_calibration_out_of_its_folder": "calibrations",
    "test_calibrate_refuses_bad_arguments_with_one_line": "calibrations",
    "test_a_malformed_gpu_profile_names_its_field": "GPU profiles",
    "test_json_declarations_refuse_nan_and_deep_nesting": "declarations (JSON)",
    "test_data_refuses_a_long_name_a_sparse_file_and_a_link": "data --from / --to",
    "test_records_are_checked_by_kind_and_named_by_line": "records",
    "test_a_rescore_never_reads_a_calibration_its_folder_names": "re-score",
    "test_a_rescore_on_a_full_disk_leaves_no_backup": "re-score",
    "test_the_slurm_jobs_index_is_never_written_or_read_through_a_link": "Slurm jobs index",
    "test_a_signal_during_a_report_or_a_calibration_ends_with_one_line": "signals",
    "test_a_signal_during_a_run_ends_with_one_line_keeps_the_finished_records_and_the_command_resumes": "signals",
    "test_a_run_stopped_before_its_first_sample_leaves_no_run_folder": "signals",
    "test_every_file_access_passes_the_gate": "the gate (architecture test)",
    "test_every_round4_case_has_a_surface_in_the_probe": "the probe's own table",
}
# `-v` lines ("path::test[id] PASSED [ 12%]": an id may hold spaces) and -rfE's "FAILED path::test[id] - why".
_RESULT = re.compile(r"^(\S+?::(\w+).*?) (PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)\s*(?:\[\s*\d+%\])?\s*$")
_SHORT = re.compile(r"^(FAILED|ERROR) (\S+?::.+?)(?: - (.*))?$")


def round4_functions() -> list[str]:
    """The test functions of tests/test_hostile_round4.py, by name (ast: nothing imported)."""
    tree = ast.parse((Path(__file__).parent / "test_hostile_round4.py").read_text())
    return [n.name for n in tree.body if isinstance(n, ast.FunctionDef) and n.name.startswith("test_")]


def round4(timeout: float, per_test: float) -> list[tuple[str, str, str, str]]:
    """(surface, node id, verdict, text) for each round-four node, from one pytest process
    (-v lines for the outcomes, -rfE for the failures' one-line reasons; pytest-timeout's
    per-test limit turns a hang into a failure that names it)."""
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-v", "-rfE", "--no-header", "--color=no",
           f"--timeout={per_test:g}", *ROUND4_NODES]
    try:
        out = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=timeout).stdout
        finished = True
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        finished = False
    outcomes: dict[str, tuple[str, str]] = {}
    reasons: dict[str, str] = {}
    for line in out.splitlines():
        if m := _RESULT.match(line):
            outcomes.setdefault(m.group(1), (m.group(2), m.group(3)))
        elif m := _SHORT.match(line):
            reasons[m.group(2)] = m.group(3) or ""
    rows = []
    for node, (func, outcome) in outcomes.items():
        why = reasons.get(node, "")
        if outcome in ("PASSED", "XFAIL"):
            kind = "clean"
        elif outcome == "SKIPPED":
            kind = "skipped"
        elif "Timeout" in why:
            kind = "hang"
        elif "Traceback" in why:
            kind = "traceback"
        else:
            kind = "other"
        rows.append((ROUND4_SURFACES.get(func, "unassigned"), node.split("::", 1)[1], kind, why[:160]))
    if not finished:
        rows.append(("unfinished", "round four", "hang", f"pytest still running after {timeout:.0f} s; later nodes not run"))
    return rows


def verdict(case: Case | FolderCase, timeout: float) -> tuple[str, str]:
    with tempfile.TemporaryDirectory(prefix=f"probe-{case.id}-") as tmp:
        try:
            if isinstance(case, FolderCase):
                code, _, err, before, after = run_folder_cli(case, Path(tmp), timeout=timeout)
                if (Path(tmp) / OUTSIDE).read_text() != OUTSIDE_TEXT or (Path(tmp) / "PWNED").exists():
                    return "silent", "wrote outside the folder or ran the folder's code"
            else:
                code, _, err, before, after = run_cli(case, Path(tmp), timeout=timeout)
        except subprocess.TimeoutExpired:
            return "hang", f"still running after {timeout:.0f} s"
        except Exception as exc:
            return "other", f"{type(exc).__name__}"
        lines = [ln for ln in err.strip().splitlines() if ln.strip()]
        errors = [ln for ln in lines if ln.startswith("error: ")]
        if "Traceback" in err:
            return "traceback", (lines[-1] if lines else "")[:160]
        if code == 0:
            return "silent", "exit 0"
        if code == 2 and len(errors) == 1 and lines[-1] == errors[0]:
            if after != before:
                return "silent", f"left behind: {sorted(set(after) ^ set(before))[:3]}"
            return "clean", errors[0][:160]
        return "other", f"exit {code}: {(lines[-1] if lines else '')[:140]}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--only", nargs="*", default=None)
    ap.add_argument("--timeout", type=float, default=300, help="seconds before a case counts as a hang")
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--no-round4", action="store_true", help="rounds one to three only")
    ap.add_argument("--round4-timeout", type=float, default=1800, help="seconds for the whole round-four pytest run")
    args = ap.parse_args(argv)
    cases = [c for c in [*ALL, *MAIN41, *FOLDER] if args.only is None or c.id in args.only]
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        results = list(pool.map(lambda c: (c, *verdict(c, args.timeout)), cases))
    rows = [(FOLDER_SURFACE if isinstance(c, FolderCase) else SURFACE[c.kind], c.id, kind, text) for c, kind, text in results]
    if not args.no_round4 and args.only is None:
        rows += round4(args.round4_timeout, args.timeout)
    counts = {k: 0 for k in VERDICTS}
    by_surface: dict[str, dict[str, int]] = {}
    for surface, cid, kind, text in rows:
        counts[kind] += 1
        by_surface.setdefault(surface, {k: 0 for k in VERDICTS})[kind] += 1
        print(f"{kind:<9} {surface:<32} {cid:<40} {text}")
    print()
    print(f"{'surface':<48} {'tried':>5} " + " ".join(f"{k:>9}" for k in VERDICTS))
    for surface, c in by_surface.items():
        print(f"{surface:<48} {sum(c.values()):>5} " + " ".join(f"{c[k]:>9}" for k in VERDICTS))
    tried = len(rows) - counts["skipped"]
    print(f"tried {tried} / clean {counts['clean']} / traceback {counts['traceback']} / silent {counts['silent']} "
          f"/ hang {counts['hang']} / other {counts['other']} (skipped {counts['skipped']})")
    if args.json:
        # The probe's own report, written where the caller asks (not a run folder): through the gate all the same.
        from loosespec_bench.safe_files import atomic_write_text

        atomic_write_text(args.json, json.dumps({"counts": counts, "by_surface": by_surface, "cases": [
            {"surface": s, "id": i, "kind": k, "text": t} for s, i, k, t in rows]}, indent=2))
    return 0 if counts["clean"] == tried else 1


if __name__ == "__main__":
    sys.exit(main())
