"""Resume and top-up: what a rerun of a run folder keeps, and what a resume with a larger
timing.subset times again. app.run calls them before any model loads."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any


from ..store.baselines import timed_indices
from ..errors import ConfigError
from ..tasks.prompting import sample_hash
from ..store.run_folder import RunFolder, first_per_id, read_jsonl, record_problem, utc_stamp
from ..safe_files import read_text
from ..store.summary import machine
from ..tasks import Sample
from ..measure.timing import UNTIMED
from ..settings.run_settings import RunSettings

log = logging.getLogger(__name__)


def reusable_records(folder: RunFolder, samples: list[Sample]) -> dict[str, dict[str, Any]]:
    """The records on disk that resume may keep, by sample id.

    Sample ids survive edits to a data file, so each record carries the hash of the prompt it
    answered (prompting.sample_hash). A record whose hash differs from the current sample's
    is not reused: it is regenerated, with a warning naming the sample, and moved out of
    samples.jsonl (the old file is kept as samples.jsonl.bak-<time>) so that every reader's
    first-record-per-id is the new one. Regenerating, rather than refusing, keeps a rerun
    with an edited data file a one-command affair; the backup keeps the old answers.
    Records written before the hash existed cannot be checked and are reused.
    """
    current = {s.id: sample_hash(s) for s in samples}
    kept: list[dict[str, Any]] = []
    stale: list[dict[str, Any]] = []
    own = folder.path.name
    damaged: list[dict[str, Any]] = []
    for lineno, rec in read_jsonl(folder.path / folder.SAMPLES):  # each record checked by kind (run_folder.incomplete)
        if why := record_problem(rec, need_ids=True):  # resume compares and re-scores a kept record's tokens
            log.warning("%s line %d: %s; regenerating sample %r", folder.path / folder.SAMPLES, lineno, why, rec["id"][:60])
            damaged.append(rec)
            continue
        # A record names the run it belongs to (records from before that are taken as the
        # folder's own): another run's records copied in (a target alone's into an SPD folder)
        # would be reported as this method's output.
        rid = rec.get("run_id")
        if rid is not None and rid != own:
            raise ConfigError(
                f"{folder.path / folder.SAMPLES}: the record of sample {str(rec.get('id'))[:60]!r} belongs to run "
                f"{str(rid)[:120]!r}, not to {own!r} (records copied from another run folder?); move the file away "
                "or remove those lines, then run again")
        stored = rec.get("prompt_sha256")
        if stored is not None and rec["id"] in current and stored != current[rec["id"]]:
            stale.append(rec)
        else:
            kept.append(rec)
    if damaged and not stale:
        backup = folder.rewrite_samples(kept, utc_stamp())  # readers' first record per id is then the new one
        log.warning("%s: %d damaged record(s) kept only in %s", folder.path, len(damaged), backup.name)
    if stale:
        for rec in first_per_id(stale):
            log.warning(
                "%s: sample %r was generated from a different prompt than the data now holds; regenerating it",
                folder.path, rec["id"],
            )
        backup = folder.rewrite_samples(kept, utc_stamp())
        log.warning("%s: %d stale record(s) kept only in %s", folder.path, len(stale), backup.name)
    return {r["id"]: r for r in first_per_id(kept)}


def sample_groups(task: Any, samples: list[Sample]) -> list[Any] | None:
    """Each sample's group (the task's group_key: MGSM's language), for the timing subset."""
    key = getattr(task, "group_key", None)
    return [s.meta.get(key) for s in samples] if key else None


def timing_topup(settings: RunSettings, target_alone: bool, samples: list[Sample], done: dict[str, dict[str, Any]],
                 groups: list[Any] | None = None) -> list[tuple[int, Sample]]:
    """baseline=shared: the finished samples that are now inside the timing subset but ran
    untimed (the target alone read from the store). A resume with a larger timing.subset (or
    null: all) re-runs each of them paired, the method and a fresh target alone alternating,
    so that a finished run's speed figure can rest on more problems without re-running the
    whole point. The subset's prefixes are nested (timed_indices): a larger subset keeps every
    sample timed so far. Nothing is topped up unless the subset asks for more timed samples
    than the run already has: a run timed under an earlier rule for choosing them (MGSM's
    before groups were spread) keeps its timed samples instead of gaining some at every resume,
    perhaps on another CPU. `target_alone`: the method is the target alone (method=ar), which
    has no method side to time."""
    if settings.root.baseline != "shared" or target_alone:
        return []
    subset = settings.timing.subset
    untimed = {sid for sid, rec in done.items() if (rec.get("timing") or {}).get("status") == UNTIMED}
    already = sum(1 for s in samples if s.id in done and s.id not in untimed)
    if subset is not None and already >= min(int(subset), len(samples)):
        return []
    timed = timed_indices(len(samples), None if subset is None else int(subset), groups)
    return [(i, s) for i, s in enumerate(samples) if i in timed and s.id in untimed]


def check_topup_machine(folder_path: Path, topup: list[tuple[int, Sample]]) -> None:
    """A top-up times more samples beside those a finished run timed; on another CPU its
    speedup would pool two machines' timings in one figure (speed is a property of the CPU:
    summary.machine). Refuses, before any model loads, where the run's summary names another
    CPU than this one."""
    if not topup:
        return
    try:
        before = json.loads(read_text(folder_path / "summary.json"))  # never through a link or a FIFO
    except (OSError, ValueError):
        return  # no finished summary: nothing recorded to compare with
    here = machine()
    was = (before.get("cpu_signature"), before.get("cpu_isa"))
    now = (here.get("cpu_signature"), here.get("cpu_isa"))
    if was[0] and now[0] and was != now:
        raise ConfigError(
            f"timing.subset tops up {len(topup)} sample(s) of {folder_path.name}, whose timed samples ran on "
            f"{was[0]} ({was[1]}); this machine is {now[0]} ({now[1]}). One speedup would pool two CPUs' timings: "
            "top it up on the machine that timed it, or drop timing.subset to the run's own")


def topped_up_from(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """What a topped-up sample's untimed record measured, kept in the timed record that replaces
    it: its verdict, the method's own timing then, and whether the method's tokens came out the
    same again (greedy decoding should reproduce them; bf16 kernels may not, and then the new
    record's tokens, scored again, are the ones every figure reads)."""
    old_timing = old.get("timing") or {}
    return {
        "status": old_timing.get("status"),
        "method": old_timing.get("method"),
        "method_output_matches": old.get("output_ids") == new.get("output_ids"),
    }
