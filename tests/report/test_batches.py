"""The batch sweep's report: points per configuration and batch size (report/batches.py), the
table (tables/batch.py), the figure (plots/batch.py) and the projection onto the papers'
hardware at a batch size (project.batch_projection), on hand-built runs with known answers."""

from __future__ import annotations

import pandas as pd
import pytest

from loosespec_bench.report.batches import TARGET_ALONE, BatchPoint, batch_points, paying_text, stops_paying
from loosespec_bench.report.plots.batch import fig_batch_sweep
from loosespec_bench.report.plots.figure import caption_of
from loosespec_bench.report.project import batch_projection, load_profile
from loosespec_bench.report.tables.batch import batch_sweep_table


def _serving(batch, size, span, tokens, r):
    return {"batch": batch, "batch_size": size, "max_num_seqs": size, "request_rate": None, "makespan_s": [span] * r,
            "batch_tokens": [tokens] * r, "ttft_s": [0.5] * r, "e2e_s": [span] * r, "new_tokens": [tokens // size] * r,
            "identical_repeats": True, "load": [{"others_share": 0.01, "loadavg": 1.0}] * r}


def _records(size: int, speedup: float, n: int = 4) -> list[dict]:
    """n samples at batch `size`, 10 tokens each, each batch of the method taking 1 s and the
    target alone beside it `speedup` s; enough repeats for 3 timed batches."""
    r = max(1, -(-3 // (n // size)))
    recs = []
    for i in range(n):
        b = f"b{i // size}"
        ids = [1, 2, 3] if i else [1, 2, 4]  # one output differs from the target alone's
        recs.append({
            "id": f"s{i}", "output_ids": ids, "timing": {"status": "clean"},
            "metrics": {"new_tokens": 10, "steps": 4, "emitted": [3, 3, 2, 2], "serving": _serving(b, size, 1.0, 10 * size, r)},
            "baseline": {"output_ids": [1, 2, 3], "metrics": {"new_tokens": 10, "steps": 10, "serving": _serving(b, size, speedup, 10 * size, r)}},
        })
    return recs


RUNS = {  # run_dir -> (method, drafter, K, batch, method's speedup)
    "spd1": ("spd", "model", 5, 1, 1.5), "spd2": ("spd", "model", 5, 2, 1.2), "spd4": ("spd", "model", 5, 4, 0.5),
    "ngram4": ("spd", "pld", 10, 4, 1.1),
}


def _index() -> pd.DataFrame:
    rows = [{"run_dir": d, "status": "complete", "n_samples": 4, "engine": "vllm", "method": m, "drafter": dr, "K": k,
             "machine": "CPU X", "dataset": "spec_bench", "pair": "p", "identical_to_target": 0.75} for d, (m, dr, k, _, _) in RUNS.items()]
    rows.append({**rows[0], "run_dir": "ours", "engine": "hf"})  # our loop's run: not a served point
    return pd.DataFrame(rows)


def _records_of(run_dir):
    _, _, _, size, speedup = RUNS[run_dir]
    return _records(size, speedup)


def test_points_per_configuration_and_batch_with_the_target_alone_pooled():
    points = batch_points(_index(), _records_of)
    labels = [(p.label.split(" (")[0], p.batch) for p in points]
    assert labels.count((f"{TARGET_ALONE} on vLLM", 4)) == 1 and len(points) == 4 + 3  # 4 runs + the target alone at batch 1, 2, 4
    spd1 = next(p for p in points if p.batch == 1 and not p.target_alone)
    assert spd1.figures["throughput_speedup"][0] == pytest.approx(1.5) and spd1.figures["throughput_tok_s"][0] == pytest.approx(10.0)
    assert spd1.n_timed_batches == 4 and spd1.identical == pytest.approx(0.75) and spd1.machines == ("CPU X",)
    assert spd1.tau[0] == pytest.approx(40 / 16)
    alone4 = next(p for p in points if p.target_alone and p.batch == 4)
    # Pooled over the two batch-4 runs: 40 tokens in 0.5 s and in 1.1 s, each of 3 repeats.
    assert alone4.n_timed_batches == 6 and alone4.figures["throughput_tok_s"][0] == pytest.approx(240 / (3 * 0.5 + 3 * 1.1))
    assert "throughput_speedup" not in alone4.figures and alone4.tau is None


def test_stops_paying_from_the_first_batch_whose_interval_stays_at_or_below_one():
    def pt(label, batch, high):
        return BatchPoint(label=label, method="spd", drafter="model", k=5, batch=batch, rate=None,
                          figures={"throughput_speedup": (high, high, high)})
    pts = [pt("A", 1, 1.3), pt("A", 2, 0.9), pt("A", 4, 0.8), pt("B", 1, 1.2), pt("B", 2, 0.95), pt("B", 4, 1.05), pt("C", 1, 1.4)]
    assert stops_paying(pts) == {"A": 2, "B": None, "C": None}
    assert paying_text(pts).startswith("A: above 1 at batch 1; at or below 1 from batch 2 on; B: above 1 at batch 1, 4;")


def test_the_table_has_a_row_per_point_and_says_where_each_stops_paying():
    table = batch_sweep_table(_index(), _records_of)
    assert len(table.rows) == 7 and table.has_ours()
    md = table.to_markdown()
    assert "SPD on vLLM (model, K=5)" in md and "target alone" in md
    # spd1 and spd2 pay (their 4 and 8 timed batches all at 1.5x and 1.2x), spd4 does not (0.5x).
    assert "SPD on vLLM (model, K=5): above 1 at batch 1, 2; at or below 1 from batch 4 on" in md
    assert "PLD on vLLM (K=10): above 1 at batch 4; not at or below 1" in md and "projected speedup" in md
    # Two printed blocks (speed; latency and conditions), every column in the CSV.
    assert [title for title, _, _ in table.blocks()] == [
        "Throughput and speedup", "TTFT latency", "TPOT latency", "end-to-end latency", "Conditions"]


def test_the_figure_draws_three_panels_and_keeps_the_caption_beside_it():
    fig = fig_batch_sweep(_index(), records_of=_records_of)
    axes = [ax for ax in fig.axes if ax.get_visible()]
    assert len(axes) == 3 and fig.get_figwidth() == 7.0
    assert [ax.get_xscale() for ax in axes] == ["log"] * 3
    assert "SPD" in caption_of(fig) and "at or below 1 from batch 4 on" in caption_of(fig)
    empty = fig_batch_sweep(pd.DataFrame())
    assert "no runs served in batches" in caption_of(empty).lower()


def test_the_projection_at_batch_one_and_as_the_batch_grows():
    prof = load_profile("llama31-8b-70b-h100")
    one = batch_projection(prof, k=5, tau=3.0, batch=1, draft_model=True, n_draws=50)
    assert one[1] <= one[0] <= one[2] and 1.0 < one[0] < 3.0
    # Twice the tau, twice the speedup (the step's cost does not depend on tau).
    assert batch_projection(prof, k=5, tau=6.0, batch=1, draft_model=True, n_draws=50)[0] == pytest.approx(2 * one[0])
    # A large batch makes verification compute-bound: the gain falls, and falls more at larger K.
    big5 = batch_projection(prof, k=5, tau=3.0, batch=128, draft_model=True, n_draws=50)[0]
    big15 = batch_projection(prof, k=15, tau=3.0, batch=128, draft_model=True, n_draws=50)[0]
    assert big15 < big5 < one[0]
    # n-gram drafting has no draft forwards: at least the draft model's speedup at the same tau.
    assert batch_projection(prof, k=5, tau=3.0, batch=1, draft_model=False, n_draws=50)[0] > one[0]


def test_our_loop_served_beside_vllm_has_its_own_points_and_its_own_target_alone():
    """engine=hf_serve runs (our loop serving batches, experiment=batch_sweep_hf) beside
    engine=vllm's: each engine's method points carry its label (ours untagged, as method labels
    are), and the target alone is pooled per engine, never across them."""
    ours = {"hf_spd4": ("spd", "model", 5, 4, 2.0), "hf_dm4": ("dropmatch", "model", 5, 4, 1.6)}
    index = _index()
    extra = [{**index.iloc[0].to_dict(), "run_dir": d, "engine": "hf_serve", "method": m, "drafter": dr, "K": k}
             for d, (m, dr, k, _, _) in ours.items()]
    index = pd.concat([index, pd.DataFrame(extra)], ignore_index=True)

    def records_of(run_dir):
        _, _, _, size, speedup = {**RUNS, **ours}[run_dir]
        return _records(size, speedup)

    points = batch_points(index, records_of)
    at4 = {p.label: p for p in points if p.batch == 4}
    assert {"target alone", "target alone on vLLM"} <= set(at4)
    assert at4["target alone"].engine == "hf_serve" and at4["target alone on vLLM"].engine == "vllm"
    # Ours pools its two runs' target alone (2.0 s and 1.6 s a batch), vLLM's its own two (0.5 s, 1.1 s).
    assert at4["target alone"].figures["throughput_tok_s"][0] == pytest.approx(240 / (3 * 2.0 + 3 * 1.6))
    assert at4["target alone on vLLM"].figures["throughput_tok_s"][0] == pytest.approx(240 / (3 * 0.5 + 3 * 1.1))
    mine = [p for p in points if p.engine == "hf_serve" and not p.target_alone]
    assert len(mine) == 2 and all(" on " not in p.label for p in mine)
    assert next(p for p in mine if p.method == "spd").figures["throughput_speedup"][0] == pytest.approx(2.0)
    fig = fig_batch_sweep(index, records_of=records_of)
    assert "our loop and vLLM" in caption_of(fig)
