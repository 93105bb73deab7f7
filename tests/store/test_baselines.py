"""The shared target-alone store (baselines.py) and `baseline=shared` end to end on the tiny pair."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loosespec_bench.run.app import run
from loosespec_bench.store.baselines import BaselineStore, timed_indices
from loosespec_bench.settings.config import baseline_config
from loosespec_bench.errors import ConfigError

from ..conftest import compose_config

TINY = ["experiment=smoke_tiny", "warmup=false"]
SIDE = {"output_text": "4", "output_ids": [7, 8], "metrics": {"new_tokens": 2, "total_s": 0.1}, "score": {"correct": True}}


# ---- timed_indices ----------------------------------------------------------------------------
@pytest.mark.parametrize("n, subset, expect", [
    (5, None, {0, 1, 2, 3, 4}),  # null: every sample
    (5, 9, {0, 1, 2, 3, 4}),  # more than there are: every sample
    (30, 3, {0, 10, 20}),  # no groups: evenly spaced (the rule the committed runs were timed by)
    (4, 1, {0}),
])
def test_timed_indices_spread_over_the_selection(n, subset, expect):
    assert timed_indices(n, subset) == expect


def test_timed_indices_are_distinct_and_sized():
    for n in range(1, 40):
        for subset in range(1, n + 1):
            got = timed_indices(n, subset)
            assert len(got) == subset and got <= set(range(n))


# ---- the store --------------------------------------------------------------------------------
def test_store_put_get_by_id_and_prompt_hash(tmp_path):
    store = BaselineStore(tmp_path, {"pair": "p", "dataset": {"name": "d"}}, "p_d").open()
    assert store.get("a", "h1") is None
    store.put("a", "h1", SIDE, computed_by="exp/run1", timing={"wall_s": 0.1})
    got = store.get("a", "h1")
    assert got is not None and BaselineStore.side_of(got) == SIDE
    assert got["computed_by"] == "exp/run1"
    # The same id answering another prompt (an edited data file) is not that sample's baseline.
    assert store.get("a", "h2") is None
    assert json.loads((store.path / "key.json").read_text()) == {"dataset": {"name": "d"}, "pair": "p"}


def test_store_duplicate_lines_keep_the_first(tmp_path):
    store = BaselineStore(tmp_path, {"k": 1}, "n").open()
    store.put("a", "h", SIDE, computed_by="first", timing=None)
    store.put("a", "h", {**SIDE, "output_text": "other"}, computed_by="second", timing=None)  # two points at once
    assert store.get("a", "h")["computed_by"] == "first"


def test_store_after_a_cut_off_line_appends_on_a_fresh_line(tmp_path):
    store = BaselineStore(tmp_path, {"k": 1}, "n").open()
    store.put("a", "h", SIDE, computed_by="r", timing=None)
    with (store.path / store.SAMPLES).open("a") as f:
        f.write('{"id": "b", "prompt_sha')  # a writer killed mid-line
    store.put("c", "h", SIDE, computed_by="r", timing=None)
    assert store.get("c", "h") is not None and store.get("a", "h") is not None
    assert store.get("b", "h") is None


def test_store_key_differs_with_what_the_target_alone_computes():
    base = compose_config([*TINY, "method=spd"])
    same = [compose_config([*TINY, o]) for o in ("method=fly", "drafter=pld", "method=dropmatch", "record_steps=false",
                                                  "baseline=shared", "experiment_name=other", "timing.subset=3")]
    other = [compose_config([*TINY, o]) for o in ("generation.max_new_tokens=9", "seed=1", "pair.dtype=bfloat16",
                                                   "chat_template=false", "dataset.languages=[fr]")]
    key = baseline_config(base)
    assert all(baseline_config(c) == key for c in same)
    assert all(baseline_config(c) != key for c in other)


def test_store_refuses_a_key_collision(tmp_path):
    store = BaselineStore(tmp_path, {"k": 1}, "n").open()
    (store.path / store.KEY).write_text(json.dumps({"k": 2}))
    with pytest.raises(ConfigError, match="digest collision"):
        BaselineStore(tmp_path, {"k": 1}, "n").open()


# ---- baseline=shared end to end ---------------------------------------------------------------
def _records(summary: dict) -> list[dict]:
    return [json.loads(ln) for ln in (Path(summary["run_dir"]) / "samples.jsonl").read_text().splitlines()]


def test_shared_baseline_runs_the_target_alone_once_per_sample(tmp_path):
    # timing.retime=false: under load an excluded sample would leave n_timed (not under test here)
    common = [*TINY, "dataset.limit=4", "baseline=shared", "timing.subset=2", "timing.retime=false"]
    paired = run(compose_config([*TINY, "dataset.limit=4", "experiment_name=paired"], results_dir=tmp_path))
    first = run(compose_config([*common, "experiment_name=a"], results_dir=tmp_path))
    # The first point finds an empty store: every sample's target alone runs beside it (timed)
    # and is written to the store.
    assert first["baseline_store"]["computed_here"] == [r["id"] for r in _records(first)]
    assert len(first["baseline_store"]["timed"]) == 4 and first["timing"]["untimed"] == 0
    stores = list((tmp_path / "_baselines").iterdir())
    assert len(stores) == 1 and len((stores[0] / "samples.jsonl").read_text().splitlines()) == 4

    # A second method on the same samples: the store answers, only the timing subset runs the
    # target alone again, and its tokens are checked against the store's.
    second = run(compose_config([*common, "experiment_name=b", "drafter.k=3"], results_dir=tmp_path))
    src = second["baseline_store"]
    ids = [r["id"] for r in _records(second)]
    assert src["reused"] == ids and src["computed_here"] == []
    assert src["timed"] == [ids[0], ids[2]] and src["store_mismatches"] == []
    assert second["timing"]["untimed"] == 2 and second["n_timed"] == 2 and second["n_paired"] == 4
    assert len((stores[0] / "samples.jsonl").read_text().splitlines()) == 4  # nothing added
    recs = {r["id"]: r for r in _records(second)}
    for i, sid in enumerate(ids):
        rec = recs[sid]
        assert rec["baseline_source"]["timed"] == (i in (0, 2))
        assert (rec["timing"]["status"] == "untimed") == (i in (1, 3))
        assert ("baseline" in rec["timing"]) == (i in (0, 2))  # nothing timed beside the untimed ones
        if i in (0, 2):
            assert rec["baseline_source"]["matches_store"] is True

    # Quality, retention and "identical to target alone" equal the paired protocol's.
    for key in ("baseline_accuracy", "identical_to_target"):
        assert first[key] == paired[key]
    base_paired = {r["id"]: r["baseline"]["output_ids"] for r in _records(paired)}
    assert {r["id"]: r["baseline"]["output_ids"] for r in _records(second)} == base_paired
    # Speed rests on the timed samples only; the summary line says how the baseline was found.
    assert second["speedup"] is not None and second["baseline"] == "shared"


def test_timed_indices_of_a_doubled_subset_keep_the_timed_ones():
    # A top-up from timing.subset=s to 2s re-times only new samples: the old ones are inside.
    for n in range(2, 40):
        for subset in range(1, n // 2 + 1):
            assert timed_indices(n, subset) <= timed_indices(n, 2 * subset)


def test_a_grouped_selection_times_every_groups_share():
    # Named case: MGSM's selection interleaves its languages (round_robin: fr, de, th, fr, ...),
    # and 10 evenly spaced of 30 were positions 0, 3, ..., 27: all French, whose answers under the
    # paper's prompt are ~10 tokens where German's run to 256. The speedup was French's alone.
    groups = ["fr", "de", "th"] * 10
    assert {groups[i] for i in timed_indices(30, 10)} == {"fr"}  # the old rule, kept without groups
    got = timed_indices(30, 10, groups)
    share = {g: sum(groups[i] == g for i in got) for g in ("fr", "de", "th")}
    assert len(got) == 10 and share == {"fr": 4, "de": 3, "th": 3}
    french = sorted(i // 3 for i in got if groups[i] == "fr")  # spread within the group too
    assert french[0] == 0 and french[-1] >= 5
    for k in range(1, 30):  # nested: a top-up adds timed samples, never swaps them
        assert timed_indices(30, k, groups) <= timed_indices(30, k + 1, groups)
        assert len(timed_indices(30, k, groups)) == k
    assert timed_indices(30, None, groups) == set(range(30))
    assert timed_indices(6, 3, ["a"] * 6) == timed_indices(6, 3)  # one group: the plain rule


def test_a_run_already_timed_to_its_subset_is_not_topped_up_under_a_new_rule():
    from omegaconf import OmegaConf

    from loosespec_bench.run.resume import timing_topup
    from loosespec_bench.settings.run_settings import RunSettings
    from loosespec_bench.tasks import Sample

    samples = [Sample(id=f"{g}-{i}", messages=[], reference=None, meta={"language": g})
               for i in range(3) for g in ("fr", "de")]
    groups = [s.meta["language"] for s in samples]
    # Timed under the plain rule (positions 0, 3: both French), the rest untimed.
    done = {s.id: {"timing": {"status": "clean" if i in (0, 3) else "untimed"}} for i, s in enumerate(samples)}
    cfg = OmegaConf.create({"baseline": "shared", "method": {"name": "spd"}, "timing": {"subset": 2}})
    assert timing_topup(RunSettings.read(cfg), False, samples, done, groups) == []  # 2 timed already: a resume adds none
    cfg.timing.subset = None  # all: the untimed four, on request
    assert [i for i, _ in timing_topup(RunSettings.read(cfg), False, samples, done, groups)] == [1, 2, 4, 5]
    assert timing_topup(RunSettings.read(cfg), True, samples, done, groups) == []  # the target alone: no method side to time


def test_a_top_up_on_another_cpu_is_refused_before_any_model_loads(tmp_path):
    from loosespec_bench.run.resume import check_topup_machine
    from loosespec_bench.store.summary import machine

    here = machine()
    topup = [(1, object())]
    check_topup_machine(tmp_path, topup)  # no summary: nothing to compare with
    (tmp_path / "summary.json").write_text(json.dumps({"cpu_signature": here["cpu_signature"], "cpu_isa": here["cpu_isa"]}))
    check_topup_machine(tmp_path, topup)  # the same CPU: fine
    (tmp_path / "summary.json").write_text(json.dumps({"cpu_signature": "AuthenticAMD family 25 model 1 stepping 1",
                                                       "cpu_isa": "AVX2"}))
    if here["cpu_signature"]:
        with pytest.raises(ConfigError, match="family 25 model 1 stepping 1 .*top it up on the machine that timed it"):
            check_topup_machine(tmp_path, topup)
    check_topup_machine(tmp_path, [])  # nothing to top up: nothing to refuse


def test_a_larger_timing_subset_tops_up_a_finished_run(tmp_path, capsys):
    # timing.retime=false: under load a sample stays contaminated and leaves n_timed (the
    # top-up, not the re-timing rule, is under test here).
    common = [*TINY, "dataset.limit=4", "baseline=shared", "timing.retime=false"]
    run(compose_config([*common, "experiment_name=fill"], results_dir=tmp_path))  # fills the store
    small = run(compose_config([*common, "experiment_name=b", "drafter.k=3", "timing.subset=2"], results_dir=tmp_path))
    before = {r["id"]: r for r in _records(small)}
    ids = list(before)
    assert small["timing"]["untimed"] == 2 and small["n_timed"] == 2
    capsys.readouterr()

    # The same point, resumed with every sample in the timing subset: the two untimed samples
    # run again, paired, and their timed records replace the untimed ones in place.
    full = run(compose_config([*common, "experiment_name=b", "drafter.k=3", "timing.subset=null"], results_dir=tmp_path))
    out = capsys.readouterr().out
    assert "4 already done, 2 of them re-run timed" in out and "2 of the timed ones by a later top-up" in out
    assert full["run_dir"] == small["run_dir"]  # timing.* is not part of the run id
    after = _records(full)
    assert [r["id"] for r in after] == ids  # one line per sample, in the old order
    assert full["timing"]["untimed"] == 0 and full["n_timed"] == 4 and full["timing"]["topped_up"] == 2
    assert full["baseline_store"]["timed"] == ids
    for i, rec in enumerate(after):
        if i in (1, 3):  # the topped-up ones: timed now, with what their first run measured
            assert rec["timing"]["status"] in ("clean", "retimed", "excluded") and "baseline" in rec["timing"]
            old = rec["timing"]["topped_up_from"]
            assert old["status"] == "untimed" and old["method"] == before[rec["id"]]["timing"]["method"]
            assert old["method_output_matches"] is True  # greedy: the same tokens again
            assert rec["baseline_source"]["matches_store"] is True
        else:  # timed the first time: untouched
            assert rec == before[rec["id"]]
    # Nothing more to top up: a third call runs no sample.
    again = run(compose_config([*common, "experiment_name=b", "drafter.k=3", "timing.subset=null"], results_dir=tmp_path))
    assert "re-run timed" not in capsys.readouterr().out and _records(again) == after


def test_shared_baseline_with_batches_is_one_error_line():
    from loosespec_bench.settings.checks import validate

    with pytest.raises(ConfigError, match="baseline=shared .* engine.batch_size=4"):
        validate(compose_config([*TINY, "baseline=shared", "engine=vllm", "engine.batch_size=4"]))


def test_timing_subset_must_not_be_negative():
    from loosespec_bench.settings.checks import validate

    with pytest.raises(ConfigError, match="timing.subset"):
        validate(compose_config([*TINY, "timing.subset=-1"]))


def test_timing_subset_zero_times_nothing_once_the_store_is_full(tmp_path):
    # The CPU loose-rules frontier (issue 44): speed from the work counts only, no fresh target
    # alone beside any sample once the store has them all.
    common = [*TINY, "dataset.limit=3", "baseline=shared", "timing.retime=false"]
    run(compose_config([*common, "experiment_name=fill"], results_dir=tmp_path))
    none = run(compose_config([*common, "experiment_name=b", "drafter.k=3", "timing.subset=0"], results_dir=tmp_path))
    assert none["baseline_store"]["timed"] == [] and none["timing"]["untimed"] == 3 and none["n_timed"] == 0
    assert none["speedup"] is None and none["baseline_accuracy"] is not None
    assert all(r["timing"]["status"] == "untimed" for r in _records(none))


def test_a_refused_top_up_leaves_the_run_folder_as_it_was(tmp_path):
    run(compose_config([*TINY, "dataset.limit=4", "baseline=shared", "experiment_name=fill"], results_dir=tmp_path))
    common = [*TINY, "dataset.limit=4", "baseline=shared", "experiment_name=b", "drafter.k=3"]
    small = run(compose_config([*common, "timing.subset=2"], results_dir=tmp_path))
    folder = Path(small["run_dir"])
    summary = json.loads((folder / "summary.json").read_text())
    summary.update(cpu_signature="AuthenticAMD family 25 model 1 stepping 1", cpu_isa="AVX2")
    (folder / "summary.json").write_text(json.dumps(summary))
    before = {name: (folder / name).read_text() for name in ("config.yaml", "samples.jsonl", "summary.json")}
    with pytest.raises(ConfigError, match="top it up on the machine that timed it"):
        run(compose_config([*common, "timing.subset=null"], results_dir=tmp_path))
    assert {name: (folder / name).read_text() for name in before} == before


def _tamper_store(store_dir: Path, sample_id: str) -> dict:
    """Rewrite one store record as another CPU's bf16 run might have left it: other tokens and
    the opposite score. Returns the tampered record."""
    path = store_dir / "samples.jsonl"
    rows = [json.loads(ln) for ln in path.read_text().splitlines()]
    for row in rows:
        if row["id"] == sample_id:
            row["output_ids"] = [*row["output_ids"][:1], 3, 3, 3]
            row["output_text"] = "stored elsewhere"
            row["score"] = {**row["score"], "correct": not row["score"]["correct"]}
            tampered = row
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return tampered


def _against_a_tampered_store(tmp_path: Path) -> tuple[Path, str, dict, dict]:
    """A store filled by one point, its first sample tampered (_tamper_store), then a second point
    timing 2 of 4 samples (the first among them) against it: (store, tampered id, the tampered
    record, the second point's summary). timing.retime=false: under load an excluded sample
    would leave the speed figures (the re-timing rule is not under test here)."""
    common = [*TINY, "dataset.limit=4", "baseline=shared", "timing.retime=false"]
    run(compose_config([*common, "experiment_name=fill"], results_dir=tmp_path))
    (store,) = (tmp_path / "_baselines").iterdir()
    first_id = json.loads((store / "samples.jsonl").read_text().splitlines()[0])["id"]
    tampered = _tamper_store(store, first_id)
    second = run(compose_config([*common, "experiment_name=b", "drafter.k=3", "timing.subset=2"], results_dir=tmp_path))
    return store, first_id, tampered, second


def test_a_timed_sample_is_judged_against_the_store_and_timed_against_the_fresh_run(tmp_path):
    # Named case: MGSM's store (filled on the AVX2 CPU) had the target alone 0/30 right; runs on
    # the family 26 CPU judged their timed samples against a fresh target alone that got 2 of
    # them right, and their untimed ones against the store: two baselines in one run.
    store, first_id, tampered, second = _against_a_tampered_store(tmp_path)
    recs = {r["id"]: r for r in _records(second)}
    rec = recs[first_id]
    assert rec["baseline_source"]["timed"] and rec["baseline_source"]["matches_store"] is False
    # quality: the store's; speed: the fresh run beside the method
    assert rec["baseline"]["output_ids"] == tampered["output_ids"] and rec["baseline"]["score"] == tampered["score"]
    assert rec["baseline_timed"]["output_ids"] != tampered["output_ids"]
    assert rec["timing"]["baseline"]["wall_s"] == pytest.approx(rec["baseline_timed"]["metrics"]["total_s"], abs=0.05)
    stored_correct = [json.loads(ln)["score"]["correct"] for ln in (store / "samples.jsonl").read_text().splitlines()]
    assert second["baseline_accuracy"] == sum(stored_correct) / 4  # every sample against the store
    timed = [r for r in recs.values() if r["baseline_source"]["timed"]]
    fresh = [r.get("baseline_timed") or r["baseline"] for r in timed]
    rate = sum(f["metrics"]["new_tokens"] for f in fresh) / sum(f["metrics"]["total_s"] for f in fresh)
    assert second["baseline_tokens_per_s"] == pytest.approx(rate)
    # Every timed sample the store had keeps its fresh run, agreeing tokens or not: the store's
    # metrics are another run's timing and must never enter a speedup.
    assert all("baseline_timed" in r for r in timed)


def test_a_rescore_moves_old_records_onto_the_store(tmp_path):
    from loosespec_bench.store.baselines import judge_against_store
    from loosespec_bench.score import rescore_folder

    _, first_id, tampered, second = _against_a_tampered_store(tmp_path)
    folder = Path(second["run_dir"])
    new_layout = _records(second)
    # The records as the runs before session 15 wrote them: a timed sample's fresh run as `baseline`.
    old = [{**{k: v for k, v in r.items() if k != "baseline_timed"}, "baseline": r.get("baseline_timed") or r["baseline"]}
           for r in new_layout]
    (folder / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in old))
    moved, n = judge_against_store(old, tmp_path / "_baselines")
    timed_reused = [r for r in old if r["baseline_source"]["timed"] and r["baseline_source"]["origin"].startswith("reused")]
    assert n == len(timed_reused) == 2
    assert judge_against_store(moved, tmp_path / "_baselines")[1] == 0  # idempotent
    assert judge_against_store(old, tmp_path / "elsewhere") == (old, 0)  # no store: left as it was
    summary = rescore_folder(folder, dataset=None, data_dir=None, overrides=[])
    assert summary["rescored"]["judged_against_store"] == 2
    after = {r["id"]: r for r in _records(second)}
    assert after[first_id]["baseline"]["output_ids"] == tampered["output_ids"]
    assert [r["id"] for r in after.values()] == [r["id"] for r in new_layout]
    for r in new_layout:  # the same records as the new rule writes (scores recomputed alike)
        assert after[r["id"]]["baseline"]["output_ids"] == r["baseline"]["output_ids"]
        assert (after[r["id"]].get("baseline_timed") or {}).get("output_ids") == (r.get("baseline_timed") or {}).get("output_ids") \
            or r["baseline_source"]["matches_store"] is not False
    # Speed reads the fresh runs, as the run itself did (the tampered store answer is re-scored
    # from its text, so the quality figures are not the run's own here).
    assert summary["speedup"] == pytest.approx(second["speedup"])
