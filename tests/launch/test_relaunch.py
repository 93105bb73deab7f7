"""Issue 73's pure logic, no cluster: a point's class before a launch, what a stop says, every
Slurm reason with its meaning and end, a stuck point's end with its job cancelled."""

from __future__ import annotations

import pytest

from loosespec_bench.slurm import (NEVER_CLEARS, PENDING_REASONS, STUCK, QueueEntry, QueueWatch, classify_point, describe,
                                   interrupt_line, reason_line)


@pytest.mark.parametrize(
    "done, job, state, expect",
    [
        (True, "7_0", "RUNNING", "done"),          # a summary wins, whatever Slurm says
        (False, "7_0", "RUNNING", "running"),
        (False, "7_0", "COMPLETING", "running"),
        (False, "7_0", "PENDING", "pending"),
        (False, "7_0", "REQUEUED", "pending"),
        (False, "7_0", "COMPLETED", "to run"),      # ended without a summary: resubmitted (it resumes)
        (False, "7_0", None, "to run"),             # no longer known to slurmctld
        (False, None, None, "to run"),              # never recorded
    ],
)
def test_classify_point(done, job, state, expect):
    queue = {} if state is None else {job: QueueEntry(job, state, "None", 1)}
    assert classify_point(done, job, queue) == expect


def test_classify_point_without_squeue_submits_what_is_not_done():
    assert classify_point(False, "7_0", None) == "to run" and classify_point(True, "7_0", None) == "done"


def test_interrupt_line_names_arrays_scancel_and_the_relaunch():
    line = interrupt_line({"12": "fly_ablation_k", "9": "pld_70b"}, 1, 3, 2)
    assert "\n" not in line and line.startswith("interrupted: 1 of 3 points finished, 2 still running or pending in Slurm")
    assert "`scancel 9 12` stops them" in line and "9 (pld_70b), 12 (fly_ablation_k)" in line and "attaches" in line
    assert "no job of this launch is left" in interrupt_line({}, 3, 3, 0)


@pytest.mark.parametrize("reason", ["PartitionInactive", "PartitionDown", "PartitionTimeLimit", "QOSMaxWallDurationPerJobLimit",
                                    "AssocGrpBillingMinutes"])
def test_stuck_reasons_have_a_meaning_and_an_end_naming_the_setting(reason):
    assert reason in PENDING_REASONS and reason in STUCK
    assert "hydra.launcher." in STUCK[reason]
    assert "ends after hydra.launcher.held_grace_min" in reason_line(reason)
    assert "ends after hydra.launcher.held_grace_min" in describe(QueueEntry("5", "PENDING", reason, 10))


@pytest.mark.parametrize("reason", sorted(NEVER_CLEARS))
def test_never_clearing_reasons_end_at_once(reason):
    assert "never clears" in reason_line(reason)


@pytest.mark.parametrize("reason", ["Resources", "Priority", "QOSMaxJobsPerUserLimit", "AssocGrpGRES", "QOSGrpGRES", "AssocMaxJobsLimit"])
def test_limits_that_clear_by_themselves_say_so(reason):
    assert reason_line(reason).endswith("(clears by itself)")


def test_a_stuck_reason_ends_after_the_grace_and_a_change_of_reason_restarts_it():
    w = QueueWatch("5", held_grace_s=60)
    lines, v = w.update(QueueEntry("5", "PENDING", "PartitionDown", 10), 0)
    assert v is None and "the partition is down" in lines[0][1]
    assert w.update(QueueEntry("5", "PENDING", "Resources", 10), 30)[1] is None      # cleared: the clock stops
    assert w.update(QueueEntry("5", "PENDING", "PartitionInactive", 10), 40)[1] is None
    assert w.update(QueueEntry("5", "PENDING", "PartitionInactive", 10), 90)[1] is None
    _, v = w.update(QueueEntry("5", "PENDING", "PartitionInactive", 10), 100)
    assert v is not None and v.kind == "stuck" and "hydra.launcher.partition" in v.message


def test_await_jobs_cancels_a_stuck_point_and_names_a_deleted_partition():
    from tests.test_slurm import _await, _FakeJob
    from hydra_plugins.loosespec_slurm_launcher.slurm_launcher import Unfinished

    cancelled: list[str] = []
    out, end, echoed = _await([_FakeJob("8")], lambda now: {"8": QueueEntry("8", "PENDING", "PartitionInactive", 10)},
                              grace_s=10, cancelled=cancelled)
    assert isinstance(out[0], Unfinished) and cancelled == ["8"] and 10 <= end < 15
    assert len(echoed) == 1 and "(job cancelled)" in echoed[0] and "hydra.launcher.partition" in echoed[0]

    cancelled.clear()
    out, _, _ = _await([_FakeJob("9")], lambda now: {"9": QueueEntry("9", "NODE_FAIL", "None", 10)}, cancelled=cancelled,
                       partitions=lambda: {"cpu"}, params={"partition": "gpu_old"})
    assert isinstance(out[0], Unfinished) and "partition gpu_old is gone" in str(out[0]) and "hydra.launcher.partition" in str(out[0])
    assert cancelled == ["9"]  # declared ended: cancelled, so that a requeue never runs it unwatched


def test_the_launcher_counts_a_finished_folder_short_of_its_samples_as_to_run(tmp_path):
    """A later look's larger dataset.limit extends a finished folder (plan's "short"): the plain
    -m relaunch must submit it, not skip it as done."""
    import json

    from hydra_plugins.loosespec_slurm_launcher.slurm_launcher import CheckedSlurmLauncher

    results = tmp_path / "results" / "exp"
    folders = []
    for name, lines, summary in (("full", 2, True), ("short", 1, True), ("started", 1, False)):
        folder = results / name
        folder.mkdir(parents=True)
        (folder / "samples.jsonl").write_text("".join(json.dumps({"id": f"s{i}"}) + "\n" for i in range(lines)))
        if summary:
            (folder / "summary.json").write_text("{}")
        folders.append(folder.resolve())
    launcher = CheckedSlurmLauncher.__new__(CheckedSlurmLauncher)
    launcher._expected = {f: 2 for f in folders}
    classes, attach = launcher._classify([*folders, None])
    assert classes == ["done", "to run", "to run", "to run"] and attach == [None] * 4
