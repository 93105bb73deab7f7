"""engine=hf with engine.batch_size > 1: quality runs decode problems together in our loop
(decoding/batch.py) and write the run folder batch 1 writes (same run id, records in problem
order, the same tokens, steps, decisions and scores); resume works across batch sizes and
mid-batch; the pre-check refuses what cannot batch with one line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from loosespec_bench.errors import ConfigError
from loosespec_bench.run.app import run
from loosespec_bench.settings.checks import validate
from loosespec_bench.settings.config import run_id
from loosespec_bench.store.run_folder import RunFolder

from ..conftest import compose_config
from ..decoding.test_batch import close

QUALITY = ["experiment=smoke_tiny", "warmup=false", "baseline=shared", "timing.subset=0", "generation.max_new_tokens=16",
]


def cfg_for(tmp: Path, *extra: str):
    return compose_config([*QUALITY, *extra], results_dir=tmp)


def records(summary: dict[str, Any]) -> list[dict[str, Any]]:
    path = Path(summary["run_dir"]) / RunFolder.SAMPLES
    return [json.loads(line) for line in path.read_text().splitlines()]


def content(rec: dict[str, Any]) -> dict[str, Any]:
    """What a record says about the problem, not about the clock: tokens, texts, steps,
    decisions, scores (timings and timing verdicts are clocks)."""
    def side(s: dict[str, Any] | None) -> dict[str, Any] | None:
        if s is None:
            return None
        m = s["metrics"]
        return {"ids": s["output_ids"], "text": s["output_text"], "score": s["score"],
                "steps": (m["steps"], m["accepted"], m["drafted"], m["stop_reason"], m["new_tokens"]), "work": m.get("work")}

    steps = [{k: v for k, v in st.items() if not k.endswith("_s")} for st in rec.get("steps", [])]
    return {"id": rec["id"], "prompt": rec["prompt_ids"], "method": side(rec), "baseline": side(rec.get("baseline")),
            "steps": steps, "run_id": rec["run_id"]}


def same(got: list[dict[str, Any]], want: list[dict[str, Any]]) -> bool:
    """Record for record the same content; the rule's recorded floats (entropies) to float32
    rounding (close), since the batched kernels sum in another order."""
    return len(got) == len(want) and all(close(content(a), content(b)) for a, b in zip(got, want))


# Summary keys about the clock, the machine, the moment or the folder, not the problems'
# outcome. Batch 1 also times the target alone where the store lacks it (beside the method);
# a batched run times nothing, so its speed and latency figures are empty: quality, tau, the
# loose-decision counts and the work counts must match, not the clocks.
CLOCK_WORDS = ("speedup", "ttft", "tpot", "itl", "e2e", "phase", "tokens_per_s", "timing", "date", "time", "batch_size",
               "run_dir", "hostname", "machine", "hardware", "git_", "version")


def outcome(summary: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in summary.items() if not any(w in k for w in CLOCK_WORDS) and not k.endswith("_s")}


@pytest.mark.parametrize("method", ["fly", "spd"])
def test_a_quality_run_at_batch_4_writes_what_batch_1_writes(tmp_path, method):
    one = run(cfg_for(tmp_path / "b1", f"method={method}", "dataset.limit=7"))
    four = run(cfg_for(tmp_path / "b4", f"method={method}", "dataset.limit=7", "engine.batch_size=4"))
    assert Path(one["run_dir"]).name == Path(four["run_dir"]).name  # the run id ignores the batch size
    r1, r4 = records(one), records(four)
    assert [r["id"] for r in r4] == [r["id"] for r in r1]  # problem order
    assert same(r4, r1)
    assert all(r["timing"]["status"] == "untimed" and r["timing"]["batch_size"] == 4 for r in r4)
    assert outcome(four) == outcome(one)
    assert four["batch_size"] == 4 and "quality only" in four["timing_mode"]


def test_a_folder_started_at_batch_1_resumes_at_batch_8_and_mid_batch(tmp_path):
    ref = records(run(cfg_for(tmp_path / "ref", "method=fly", "dataset.limit=9")))
    first = run(cfg_for(tmp_path / "mix", "method=fly", "dataset.limit=3"))  # batch 1, three problems
    folder = Path(first["run_dir"])
    again = run(cfg_for(tmp_path / "mix", "method=fly", "dataset.limit=9", "engine.batch_size=8"))
    assert Path(again["run_dir"]) == folder
    got = records(again)
    assert same(got, ref)
    # Killed mid-chunk: two of the batch's records kept, the third cut mid-line; resumed at batch 8.
    lines = (folder / RunFolder.SAMPLES).read_text().splitlines(keepends=True)
    (folder / RunFolder.SAMPLES).write_text("".join(lines[:5]) + lines[5][: len(lines[5]) // 2])
    resumed = run(cfg_for(tmp_path / "mix", "method=fly", "dataset.limit=9", "engine.batch_size=8"))
    assert same(records(resumed), ref)
    assert resumed["n_samples"] == 9


def test_an_interrupted_batch_keeps_every_problem_that_finished_before_it(tmp_path, monkeypatch):
    """The records of finished rows are written while the chunk's other rows decode (in problem
    order: a row that finished early waits for the ones before it), so Ctrl-C inside a batch
    loses only the rows still running; the same command resumes to batch 1's records."""
    import loosespec_bench.engines.hf as hf

    ref = records(run(cfg_for(tmp_path / "ref", "method=fly", "dataset.limit=9")))
    real = hf.generate_batch
    finished: list[int] = []
    sides: list[str] = []

    def interrupted(target, requests, *, drafter=None, on_done=None, **kw):
        sides.append("method" if drafter is not None else "target alone")
        if drafter is None:
            return real(target, requests, drafter=drafter, on_done=on_done, **kw)

        def done(i, out):
            on_done(i, out)
            finished.append(i)
            if len(finished) == 7:  # Ctrl-C with two of the nine rows still decoding
                raise KeyboardInterrupt

        return real(target, requests, drafter=drafter, on_done=done, **kw)

    monkeypatch.setattr(hf, "generate_batch", interrupted)
    cfg = cfg_for(tmp_path / "cut", "method=fly", "dataset.limit=9", "engine.batch_size=4")
    with pytest.raises(KeyboardInterrupt):
        run(cfg)
    assert sides == ["target alone", "method"]  # the cheaper side first: the method's rows write as they finish
    prefix = next(m for m in range(10) if m not in finished)  # rows 0..prefix-1 all finished
    kept = [json.loads(line) for line in next((tmp_path / "cut").rglob(RunFolder.SAMPLES)).read_text().splitlines()]
    assert prefix >= 3 and len(kept) == prefix  # this fixture's rows finish so; written the moment they could be
    assert same(kept, ref[:prefix])
    monkeypatch.setattr(hf, "generate_batch", real)
    resumed = run(cfg)
    assert same(records(resumed), ref)


def test_the_run_id_does_not_change_with_the_batch_size():
    a = compose_config([*QUALITY, "method=fly"])
    b = compose_config([*QUALITY, "method=fly", "engine.batch_size=8"])
    assert run_id(a) == run_id(b)


@pytest.mark.parametrize("overrides, says", [
    (["drafter=lookahead"], "drafter=lookahead cannot batch: its draft is a tree"),
    (["drafter=eagle3", "drafter.head_path=random"], "drafter=eagle3 cannot batch"),
    (["drafter=model_xtok"], "drafter=model_xtok cannot batch: it re-tokenizes"),
    (["baseline=paired"], "quality-only runs"),
    (["baseline=shared", "timing.subset=5"], "baseline=shared times a subset"),
    (["engine.batch_size=17"], "engine.batch_size=17 must be an integer in 1..16"),
])
def test_what_cannot_batch_is_refused_before_any_model_loads(overrides, says):
    base = [o for o in QUALITY if not o.startswith(("baseline=", "timing."))]
    has = {o.split("=")[0] for o in overrides}
    extra = [o for o in ("baseline=shared", "timing.subset=0") if o.split("=")[0] not in has]
    cfg = compose_config([*base, *extra, "engine.batch_size=8", *overrides])
    with pytest.raises(ConfigError, match=says) as err:
        validate(cfg)
    assert "\n" not in str(err.value)  # one line


def test_batchable_settings_pass_the_precheck():
    for extra in (["method=fly", "drafter=mla"], ["method=dropmatch"], ["method=spd", "drafter=pld"], ["method=ar"],
                  ["baseline=none", "method=fly"]):
        validate(compose_config([*QUALITY, "engine.batch_size=16", *extra]))


# engine=hf_serve: our loop serving whole batches, each timed (issue 69 item 5).
SERVED = ["experiment=smoke_tiny", "warmup=false", "engine=hf_serve", "baseline=paired", "method=spd", "dataset.limit=12",
          "generation.max_new_tokens=8", "engine.timed_batches=3"]


def test_a_served_batch_sweep_in_our_loop_writes_the_batch_sweep_points(tmp_path):
    """Batch 1 and 4 of a served sweep into one results folder: each batch size its own run
    folder (the engine node is in the run id), every record served (its batch's makespan and
    tokens, its own TTFT and end-to-end latency, the target alone beside it on the same batch),
    the tokens batch 1's, and the batch sweep's points, table and figure read both."""
    from loosespec_bench.report.batches import batch_points
    from loosespec_bench.report.index import load_index
    from loosespec_bench.report.plots.batch import fig_batch_sweep
    from loosespec_bench.report.tables.batch import batch_sweep_table

    runs = {b: run(compose_config([*SERVED, f"engine.batch_size={b}"], results_dir=tmp_path)) for b in (1, 4)}
    assert Path(runs[1]["run_dir"]) != Path(runs[4]["run_dir"])
    recs = {b: records(s) for b, s in runs.items()}
    assert [r["output_ids"] for r in recs[4]] == [r["output_ids"] for r in recs[1]]  # float32: batch 1's tokens
    for b, rs in recs.items():
        assert runs[b]["engine"] == "hf_serve" and runs[b]["batch_size"] == b
        assert ("throughput" if b > 1 else "batch 1") in runs[b]["timing_mode"]
        for r in rs:
            sv, base = r["metrics"]["serving"], r["baseline"]["metrics"]["serving"]
            assert sv["batch_size"] == b and sv["batch"] == base["batch"] and sv["requests"] == b
            assert r["timing"]["status"] in ("clean", "excluded")
            for side in (sv, base):
                assert all(m > 0 for m in side["makespan_s"]) and all(t is not None and 0 < t <= e for t, e in zip(side["ttft_s"], side["e2e_s"]))
                assert all(e <= m + 1e-6 for e, m in zip(side["e2e_s"], side["makespan_s"]))  # from the batch's start
    # Batch 4: 12 prompts are 3 distinct batches, timed once each (engine.timed_batches=3);
    # batch 1: 12 distinct batches.
    assert runs[4]["serving"]["n_timed_batches"] == 3 and runs[4]["serving"]["repeats"] == 1
    assert runs[1]["serving"]["n_timed_batches"] == 12
    index = load_index(tmp_path)
    points = batch_points(index)
    got = {(p.label.split(" (")[0], p.batch) for p in points}
    assert got == {("SPD", 1), ("SPD", 4), ("target alone", 1), ("target alone", 4)}
    for p in points:
        tok_s = p.figures["throughput_tok_s"]
        assert tok_s[0] > 0 and tok_s[1] is not None and tok_s[1] <= tok_s[0] <= tok_s[2]
        assert p.n_distinct_batches is None or p.n_distinct_batches >= 3  # the interval spans distinct batches
    spd4 = next(p for p in points if p.batch == 4 and not p.target_alone)
    assert spd4.figures["throughput_tok_s"][0] == pytest.approx(runs[4]["serving"]["throughput_tok_s"])
    assert "SPD" in batch_sweep_table(index).to_markdown()
    fig = fig_batch_sweep(index)
    assert len([ax for ax in fig.axes if ax.get_visible()]) == 3


def test_served_batches_keep_the_batch_range_and_may_be_timed():
    validate(compose_config([*SERVED, "engine.batch_size=16"]))  # paired, timed: what engine=hf refuses
    with pytest.raises(ConfigError, match="engine.batch_size=17 must be an integer in 1..16"):
        validate(compose_config([*SERVED, "engine.batch_size=17"]))
    with pytest.raises(ConfigError, match="drafter=lookahead cannot batch"):
        validate(compose_config([*SERVED, "engine.batch_size=4", "drafter=lookahead"]))
    # Unlike engine=hf's, the served engine's node is in the run id: each batch size its own folder.
    assert run_id(compose_config([*SERVED, "engine.batch_size=1"])) != run_id(compose_config([*SERVED, "engine.batch_size=4"]))
