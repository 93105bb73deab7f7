"""loosespec_bench.bench (the engine benchmark) end to end on tiny models."""

from __future__ import annotations

import json

import pytest
import torch

from loosespec_bench.bench import contestants as bench_contestants, engine

from ..conftest import shared_data_dir


def _run_smoke(bench, out):
    return bench.main([
        "--tiny", "--fp32", "--max-new-tokens", "12", "--repeats", "1", "--prompts-per-set", "1",
        "--warmup-tokens", "2", "--data-dir", str(shared_data_dir()), "--out", str(out),
        # torch is already loaded here, so the script's OMP_WAIT_POLICY default comes too late:
        # one thread keeps a loaded CI machine from spinning.
        "--threads", "1",
    ])


def test_bench_engine_tiny_fp32_smoke(tmp_path, capsys):
    bench = engine
    out = tmp_path / "bench.json"
    threads = torch.get_num_threads()
    try:
        res = _run_smoke(bench, out)
    finally:
        torch.set_num_threads(threads)  # --threads is process-wide: give the next tests theirs back
    text = capsys.readouterr().out
    # Every contestant ran on every prompt (3 sets x 1 prompt x 1 repeat).
    assert set(res["contestants"]) == set(bench_contestants.ALL_CONTESTANTS) - set(json.loads(out.read_text())["unavailable"])
    for name, s in res["contestants"].items():
        assert s["runs"] == 3, name
        assert s["tokens"] > 0 and s["tokens_per_s"] > 0
    # Lossless pairs give the same tokens in fp32 (tiny models; ties are well separated).
    for key in ("ar|hf-ar", "spd|hf-assist", "spd|hf-assist-dyn", "spd_mla|hf-assist", "pld|hf-pld"):
        c = res["comparisons"][key]
        assert c["lossless_pair"] and c["pairs"] == 3
        assert c["identical"] == 3, key
        assert c["time_ratio_median"] > 0
    assert "target alone: ours vs generate()" in text and "time ratio" in text
    assert "per verification step" in text and "cost model" in text
    # Overheads: phase shares are fractions of decode time and include the target rollback.
    o = res["overheads"]["spd"]
    assert {"draft_share", "target_share", "verify_share", "rollback_share", "commit_share"} <= set(o)
    assert 0.9 < sum(o[k] for k in ("draft_share", "target_share", "verify_share", "rollback_share", "commit_share")) <= 1.0 + 1e-6
    m = res["costmodel"]["spd"]
    assert m["c"] > 0 and m["predicted_speedup"] > 0 and m["measured_decode_speedup"] > 0
    # The JSON holds every raw timing.
    raw = json.loads(out.read_text())
    assert len(raw["runs"]) == sum(s["runs"] for s in res["contestants"].values())
    assert {"wall_s", "tokens", "target_forwards", "phase_s"} <= set(raw["runs"][0])


def test_an_engine_built_from_the_config_is_one_more_contestant(tmp_path):
    """--engine NAME=OVERRIDES: any engine the package config builds (here engine=hf with SPD and
    the draft model, as a vLLM engine would plug in) runs beside the built-in contestants."""
    bench = engine
    threads = torch.get_num_threads()
    try:
        res = bench.main([
            "--tiny", "--fp32", "--max-new-tokens", "10", "--repeats", "1", "--prompts-per-set", "1",
            "--sets", "gsm8k", "--warmup-tokens", "2", "--data-dir", str(shared_data_dir()), "--threads", "1",
            "--calibration-reps", "0", "--contestants", "ar,spd",
            "--engine", "cfg-spd=engine=hf method=spd drafter=model drafter.k=5",
        ])
    finally:
        torch.set_num_threads(threads)
    assert set(res["contestants"]) == {"ar", "spd", "cfg-spd"}
    c = res["comparisons"]["cfg-spd|ar"]
    assert c["pairs"] == 1 and c["identical"] == 1  # lossless SPD: the target alone's tokens
    assert res["contestants"]["cfg-spd"]["tau"] == res["contestants"]["spd"]["tau"]  # the same draft, K and rule


def test_bench_rejects_unknown_contestant():
    bench = engine
    with pytest.raises(SystemExit):
        bench.parse_args(["--contestants", "ar,nope"])


def test_compare_gives_the_median_over_prompts_with_its_interval():
    """Three prompts x 2 repeats: the per-prompt medians are 0.5, 0.8 and 0.9 (ours / peer time
    per token), so the figure is their median 0.8; the repeats of a prompt count once."""
    from loosespec_bench.bench.analysis import compare, per_prompt_median, paired, _time_ratio
    from loosespec_bench.bench.contestants import Run

    def run(who, prompt, repeat, wall):
        return Run(contestant=who, set="gsm8k", prompt=prompt, repeat=repeat, position=0, prompt_tokens=3, wall_s=wall,
                   tokens=[1] * 10, target_forwards=10, draft_forwards=0, steps=10, drafted=0, accepted=0)

    ratios = {"a": (0.4, 0.6), "b": (0.8, 0.8), "c": (0.9, 0.9)}
    runs = [run("peer", p, i, 1.0) for p in ratios for i in range(2)]
    runs += [run("ours", p, i, r) for p, rs in ratios.items() for i, r in enumerate(rs)]
    pairs = paired(runs, "ours", "peer")
    assert sorted(per_prompt_median(pairs, _time_ratio)) == pytest.approx([0.5, 0.8, 0.9])
    c = compare(runs, "ours", "peer", lossless=True)
    assert c["pairs"] == 6 and c["time_ratio_prompts"] == pytest.approx(0.8)
    assert c["time_ratio_ci_low"] is None or c["time_ratio_ci_low"] <= 0.8 <= c["time_ratio_ci_high"]


# ---- names (issue 71 item 4): declared in measure/speed_configs.py ------------------------------
def test_every_contestant_and_comparison_names_a_declared_configuration():
    from loosespec_bench.measure.speed_configs import DECLARED

    assert set(bench_contestants.ALL_CONTESTANTS) <= set(DECLARED)
    assert {n for a, b, _ in bench_contestants.COMPARISONS for n in (a, b)} <= set(bench_contestants.ALL_CONTESTANTS)
    for ours, peer, _ in bench_contestants.COMPARISONS:  # a peer is compared with ours, or ours with ours
        assert DECLARED[ours].beside is None


def test_the_old_spellings_still_name_their_contestants():
    # bench.mk's peers target and docs/cpu-performance.md's commands spell them so.
    args = engine.parse_args(["--contestants", "ar,hf-ar,fly-mla,fly-mla-hf,spd-mla,eagle3-tree"])
    assert args.contestants == ["ar", "hf-ar", "fly_mla", "fly_mla_hf", "spd_mla", "eagle3_tree"]
    assert engine.parse_args(["--contestants", "fly-mla,fly_mla"]).contestants == ["fly_mla"]


@pytest.mark.parametrize("name", ["spd_mla", "fly_mla_hf", "eagle3", "eagle3_tree", "lookahead"])
def test_each_contestant_of_ours_declares_the_harness_configuration_it_is(name):
    # The engine benchmark builds these itself; their declared overrides are what the harness runs for them.
    from loosespec_bench.measure.speed_configs import DECLARED

    cfg = bench_contestants.compose_config(["pair=qwen25_coder_embedded", "dataset=gsm8k", *DECLARED[name].overrides])
    method = {"fly_mla_hf": "fly"}.get(name, "spd")
    drafter = {"spd_mla": "mla", "fly_mla_hf": "mla"}.get(name, name)
    assert cfg.method.name == method and cfg.drafter.name == drafter.removesuffix("_tree")
    assert cfg.drafter.get("lookup", None) == ("hf" if name == "fly_mla_hf" else cfg.drafter.get("lookup", None))
    assert cfg.drafter.get("tree", False) == (name == "eagle3_tree")
