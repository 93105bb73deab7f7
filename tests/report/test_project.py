"""report project: hardware profiles, the roofline per forward, projections with intervals."""

from __future__ import annotations

import json

import pytest

from loosespec_bench.errors import ConfigError
from loosespec_bench.report.__main__ import main
from loosespec_bench.report.project import (
    draw, forward_s, idealised_chain_work, load_profile, profile_names, project_s, projected_speedup, run_pairs, target_alone_work,
    validation,
)
from loosespec_bench.measure.work import add_forward, new_work


def test_shipped_profiles_cite_every_number():
    names = profile_names()
    assert {"llama31-8b-70b-h100", "llama31-8b-70b-mi355x"} <= set(names)
    for name in names:
        load_profile(name)  # raises on a number without a source


def test_a_number_without_source_is_refused(tmp_path):
    prof = load_profile("llama31-8b-70b-h100")
    del prof["gpu"]["mem_eff"]["source"]
    path = tmp_path / "p.yaml"
    path.write_text(json.dumps(prof))  # JSON is YAML
    with pytest.raises(ConfigError, match="gpu.mem_eff has no source"):
        load_profile(str(path))
    with pytest.raises(ConfigError, match="neither a file nor one of"):
        load_profile("no-such-profile")


def test_roofline_forward_known_answer():
    p = draw(load_profile("llama31-8b-70b-h100"), None)
    # A 1-row forward is bandwidth-bound: 70.6e9 x 2 bytes / (3.35e12 x 0.7) + 8 ms overhead.
    assert forward_s(p, p["target"], 1, 0) == pytest.approx(70.6e9 * 2 / (3.35e12 * 0.7) + 0.008)
    # 1000 rows are compute-bound: 2 x 70.6e9 x 1000 / (989e12 x 0.5) + 8 ms.
    assert forward_s(p, p["target"], 1000, 0) == pytest.approx(2 * 70.6e9 * 1000 / (989e12 * 0.5) + 0.008)


def test_identical_counts_project_to_one_and_fewer_forwards_to_more():
    prof = load_profile("llama31-8b-70b-mi355x")
    base = target_alone_work(100)
    same = projected_speedup(prof, [(base, base)] * 3, n_boot=50)
    assert same["projected_speedup"] == pytest.approx(1.0) and same["ci_low"] == pytest.approx(1.0)
    chain = idealised_chain_work(5, 4.0, steps=25)  # 100 tokens in 25 steps
    faster = projected_speedup(prof, [(chain, base)] * 3, n_boot=200)
    assert faster["projected_speedup"] > 1.5 and faster["ci_low"] < faster["projected_speedup"] < faster["ci_high"]


def test_validation_states_what_is_published():
    lines = validation(load_profile("llama31-8b-70b-h100"))
    assert any("tau 7.62" in line for line in lines)
    assert any("no taus are published" in line and "1.092" in line for line in lines)


def test_project_reads_a_run_folder_and_prints_an_interval(tmp_path, capsys):
    def side(forwards, tokens):
        w = new_work()
        add_forward(w, "target_prefill", 50, 1, 0)
        for i in range(forwards):
            add_forward(w, "target_verify", 1, 1, 50 + i)
        w["steps"], w["emitted"] = forwards, tokens
        return {"metrics": {"work": w, "new_tokens": tokens}}

    lines = [json.dumps({"id": str(i), **side(10, 20), "baseline": side(20, 20)}) for i in range(4)]
    (tmp_path / "samples.jsonl").write_text("\n".join(lines) + "\n{\"id\": ")  # a partial last line is skipped
    assert len(run_pairs(tmp_path)["method"]) == 4
    assert main(["project", "--profile", "llama31-8b-70b-h100", "--n-boot", "50", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "projected speedup" in out and "method" in out and "[" in out
    assert "not the papers' pair's speed" in out
    assert main(["project", "--profile", "nope", str(tmp_path)]) == 2
    assert capsys.readouterr().err.startswith("error: --profile 'nope'")
    assert main(["project", "--profile", "llama31-8b-70b-h100", str(tmp_path / "missing")]) == 2


def test_extra_lm_head_passes_cost_weight_reads():
    p = draw(load_profile("llama31-8b-70b-h100"), None)
    w = new_work()
    w["lm_head_extra"] = {"passes": 2, "rows": 10, "flops": 0}
    head_bytes = 128256 * 8192 * 2
    expected = 2 * 0.05e-3 + max(2 * head_bytes / (3.35e12 * 0.7), 2 * 10 * 128256 * 8192 / (989e12 * 0.5))
    assert project_s(p, w) == pytest.approx(expected)


def test_fly_over_sd_equals_the_tau_ratio_at_the_same_k_and_drafter():
    from loosespec_bench.report.project import fly_over_sd

    prof = load_profile("llama31-8b-70b-mi355x")
    base = target_alone_work(1000)
    groups = {"spd": [(idealised_chain_work(8, 3.0), base)], "fly": [(idealised_chain_work(8, 3.6), base)]}
    (line,) = fly_over_sd(prof, groups)
    assert "tau 3.60 / 3.00 = 1.200" in line and "projected throughput ratio 1.200" in line and "1.092-1.335" in line
    assert fly_over_sd(prof, {"fly": groups["fly"]}) == []


@pytest.mark.parametrize("text, msg", [("- a\n- b\n", "not a mapping"), ("a: [\n", "not YAML"), ("name: x\n", "missing gpu")])
def test_a_malformed_profile_is_one_clear_error(tmp_path, text, msg):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=msg):
        load_profile(str(path))
