"""The shared target-alone store (`baseline=shared`): the target alone runs once per sample.

A replication runs many methods on the same samples of the same data set. Under
`baseline=paired` every one of them also runs the target alone on every sample, so the target
alone's greedy output is computed once per method point although it is the same output each
time. Under `baseline=shared` the target alone's record for a (pair, data set and prompt,
generation settings, engine, seed, threads) and a sample is kept in one store folder,

    <paths.baselines_dir>/<pair>_<dataset>_<digest>/samples.jsonl   (+ key.json: what the digest hashes)

(paths.baselines_dir null: <paths.results_dir>/_baselines, baselines_root)

and every method run with the same key reads its output, score and "identical to target alone"
from there. Speed stays paired in-process: on the run's timing subset (timing.subset) the
target alone runs again beside the method, alternating, and that fresh run is the record's
`baseline_timed`, read for speed only (its tokens are checked against the store's:
`matches_store`); quality, retention and "identical to target alone" read the store's on every
sample, timed or not, so that one run never judges its samples against two target-alone runs
(on another CPU a fresh bf16 run can differ from the store's). A sample the store does not have
yet is run paired as well (the target alone has to run once anyway), is the record's `baseline`,
and is written to the store for the next point.

Several processes may fill one store (a Slurm array's points): appends take the store's
append lock (a blocking flock: each holds it for one line), a reader takes the first record per
sample whose prompt hash matches, and a duplicate line (two points that computed the same sample
at once) is harmless.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Sequence

from filelock import lock_descriptor

from ..errors import ConfigError
from .run_folder import atomic_write, read_jsonl
from ..safe_files import check_regular, confined, open_fd, open_regular, read_text
# A store's digest is the settings' (the pre-check checks the same folder; the stores' folder is
# PathsParams.baselines_root, settings/run_settings.py).
from ..settings.config import key_digest

# What a store record keeps beside the side's own fields (output_text, output_ids, metrics,
# score, turns): which run computed it and how it was timed there.
STORE_KEYS = ("id", "prompt_sha256", "computed_by", "timing")




def timed_indices(n: int, subset: int | None, groups: Sequence[Any] | None = None) -> set[int]:
    """The sample positions (0..n-1, in the selection's seeded order) a run times paired: all
    of them (subset None or >= n), else `subset` positions, the same for every method run over
    the same selection.

    groups: each position's group (the task's group_key, e.g. MGSM's language), or None. With
    two or more groups the subset takes every group's share in turn, spread over each group
    (`_spread_order`): the selection interleaves its groups (round_robin: fr, de, th, fr, ...),
    and the evenly spaced positions below fall on one group whenever the stride is a multiple
    of the group count. MGSM's 10 of 30 were all French (answers of ~10 tokens, where German's
    ran to 256), so the speedup was French's alone. Without groups: `subset` positions spread
    evenly, (i * n) // subset, the rule the committed runs were timed by."""
    if subset is None or subset >= n:
        return set(range(n))
    if groups is not None and len(set(groups)) > 1:
        members: dict[Any, list[int]] = {}
        for pos, g in enumerate(groups):
            members.setdefault(g, []).append(pos)
        orders = [[m[j] for j in _spread_order(len(m))] for m in members.values()]
        turn = [o[r] for r in range(max(map(len, orders))) for o in orders if r < len(o)]
        return set(turn[:subset])
    return {(i * n) // subset for i in range(subset)}


def _spread_order(m: int) -> list[int]:
    """0..m-1 in an order whose every prefix is spread over the range (the base-2 van der
    Corput sequence, scaled to m, repeats dropped): 10 -> 0, 5, 2, 7, 1, 6, 3, 8, 4, 9. A
    larger subset keeps every position a smaller one timed (a top-up adds, never swaps)."""
    out: list[int] = []
    seen: set[int] = set()
    k = 0
    while len(out) < m:
        x, denom, i = 0.0, 1.0, k
        while i:
            denom *= 2
            x += (i & 1) / denom
            i >>= 1
        j = int(x * m)
        if j not in seen:
            seen.add(j)
            out.append(j)
        k += 1
    return out


class BaselineStore:
    """One store folder (see the module docstring). `key`: the config that determines the target
    alone's output (config.baseline_config); `name`: a readable prefix of the folder's name."""

    SAMPLES = "samples.jsonl"
    KEY = "key.json"
    LOCK = ".append.lock"

    def __init__(self, root: str | Path, key: dict[str, Any], name: str) -> None:
        self.digest = key_digest(key)
        self.path = Path(root).expanduser() / f"{name}_{self.digest}"
        self.key = key
        self._fh: Any = None

    def open(self) -> "BaselineStore":
        """Creates the folder and its key.json (once; a different key under the same name is a
        digest collision, refused)."""
        self.path.mkdir(parents=True, exist_ok=True)
        key_file = self.path / self.KEY
        if key_file.exists():
            try:
                stored = json.loads(read_text(key_file))
            except (OSError, ValueError):
                stored = None
            if stored is not None and json.dumps(stored, sort_keys=True, default=str) != json.dumps(self.key, sort_keys=True, default=str):
                raise ConfigError(f"{self.path}: its key.json describes other settings (a digest collision); "
                                  "move the folder away or set paths.baselines_dir elsewhere")
        if not key_file.exists():
            atomic_write(key_file, json.dumps(self.key, indent=2, sort_keys=True, default=str) + "\n")
        return self

    def get(self, sample_id: str, prompt_sha256: str) -> dict[str, Any] | None:
        """The store's first record of this sample answering this prompt, or None. Read afresh
        each time: other processes may have added it meanwhile."""
        for _, rec in read_jsonl(self.path / self.SAMPLES):
            if rec["id"] == sample_id and rec.get("prompt_sha256") == prompt_sha256:
                return rec
        return None

    def records(self) -> list[dict[str, Any]]:
        return [rec for _, rec in read_jsonl(self.path / self.SAMPLES)]

    def put(self, sample_id: str, prompt_sha256: str, side: dict[str, Any], *, computed_by: str, timing: dict[str, Any] | None) -> None:
        """Append one sample's target-alone side (the record part Runner._side builds)."""
        rec = {"id": sample_id, "prompt_sha256": prompt_sha256, **side, "computed_by": computed_by, "timing": timing}
        line = json.dumps(rec, ensure_ascii=False) + "\n"
        fd = open_fd(self.path / self.LOCK, os.O_RDWR | os.O_CREAT, 0o644)  # never through a link
        try:
            # One line at a time across processes: filelock's primitive (flock on Unix) on the
            # gate's descriptor; held for one append, so its 10 ms poll is never felt.
            lock_descriptor(fd, blocking=True, poll_interval=0.01)
            path = self.path / self.SAMPLES
            # A line cut off by a killed writer: the next line starts on a fresh one.
            if check_regular(path) and path.stat().st_size:
                with open_regular(path, "rb") as f:
                    f.seek(-1, os.SEEK_END)
                    if f.read(1) != b"\n":
                        line = "\n" + line
            with open_regular(path, "a", encoding="utf-8") as f:
                f.write(line)
                f.flush()
                os.fsync(f.fileno())
        finally:
            os.close(fd)  # releases the flock

    @staticmethod
    def side_of(rec: dict[str, Any]) -> dict[str, Any]:
        """A store record as a run record's `baseline` part (the side's own fields only)."""
        return {k: v for k, v in rec.items() if k not in STORE_KEYS}


def judge_against_store(records: list[dict[str, Any]], root: Path) -> tuple[list[dict[str, Any]], int]:
    """Records written before quality was judged against the store on every sample (session 15):
    a timed record whose target alone the store already had (`baseline_source`: reused, timed)
    kept the fresh run as its `baseline`. It now keeps that run as `baseline_timed` (speed) and
    takes the store's as `baseline` (quality). `root`: the folder of the run's stores. Returns
    the records (others unchanged) and how many changed; a store or sample not found is left as
    it was (the record is counted as not changed)."""
    cache: dict[str, dict[tuple[str, str], dict[str, Any]]] = {}
    out, changed = [], 0
    for rec in records:
        src = rec.get("baseline_source")
        if (not isinstance(src, dict) or not src.get("timed") or "baseline_timed" in rec
                or not str(src.get("origin", "")).startswith("reused") or not rec.get("baseline")):
            out.append(rec)
            continue
        name = src.get("store")
        # A store name from a record: one folder name under root, never a path (safe_files.confined).
        path = confined(root, name, "baseline_source.store") / BaselineStore.SAMPLES
        if name not in cache:
            cache[name] = {}
            if check_regular(path):
                for _, stored in read_jsonl(path):
                    cache[name].setdefault((stored["id"], stored.get("prompt_sha256")), stored)
        stored = cache[name].get((rec["id"], rec.get("prompt_sha256")))
        if stored is None:
            out.append(rec)
            continue
        out.append({**rec, "baseline": BaselineStore.side_of(stored), "baseline_timed": rec["baseline"]})
        changed += 1
    return out, changed
