"""loosespec_bench.bench.vllm without vLLM: the prompt-id check against the engine benchmark's file, the
settings it adopts from there, and the side-by-side table (fake runs; no model loads)."""

from __future__ import annotations

import argparse
import json

import pytest
import torch

from loosespec_bench.bench import vllm
from loosespec_bench.bench.contestants import Run
from loosespec_bench.bench.prompts import Prompt


@pytest.fixture(scope="module")
def bv():
    return vllm


def _prompt(bv, set_, id_, ids):
    return Prompt(set_, id_, torch.tensor(ids, dtype=torch.long), None)


def test_same_prompts_pass(bv):
    mine = [_prompt(bv, "gsm8k", "7", [1, 2, 3]), _prompt(bv, "ifeval", "2", [4, 5])]
    recorded = [{"set": "gsm8k", "id": "7", "ids": [1, 2, 3]}, {"set": "ifeval", "id": "2", "ids": [4, 5]}]
    assert bv.prompt_mismatch(mine, recorded) is None


@pytest.mark.parametrize("recorded, says", [
    ([{"set": "gsm8k", "id": "8", "ids": [1, 2, 3]}], "gsm8k/7 here, gsm8k/8 in the file"),  # another problem chosen
    ([{"set": "gsm8k", "id": "7", "ids": [1, 9, 3]}], "differ from position 1"),  # another tokenization
    ([{"set": "gsm8k", "id": "7", "ids": [1, 2]}], "differ from position 2"),  # a prefix only
    ([], "1 prompts here, 0 in the file"),
])
def test_different_prompts_are_named(bv, recorded, says):
    assert says in bv.prompt_mismatch([_prompt(bv, "gsm8k", "7", [1, 2, 3])], recorded)


def test_ours_settings_are_adopted(bv, tmp_path):
    args = argparse.Namespace(ours=str(tmp_path / "ours.json"), sets="gsm8k", prompts_per_set=9, max_new_tokens=1, k=2,
                              max_prompt_tokens=None, pld_k=1, pld_max_ngram=1, repeats=1, target="t", draft="d")
    ours = {"args": {"sets": "gsm8k,humaneval", "prompts_per_set": 2, "max_new_tokens": 128, "k": 5, "pld_k": 10,
                     "repeats": 3, "fp32": False, "max_prompt_tokens": None}, "prompts": [{"set": "gsm8k", "id": "1", "ids": [1]}]}
    bv.adopt_ours_settings(args, ours)
    assert (args.sets, args.prompts_per_set, args.max_new_tokens, args.k, args.pld_k, args.repeats) == ("gsm8k,humaneval", 2, 128, 5, 10, 3)
    assert (args.pld_max_ngram, args.target) == (1, "t")  # not in the file: kept


@pytest.mark.parametrize("ours, says", [
    ({"args": {"fp32": True}, "prompts": []}, "fp32"),
    ({"args": {}, "prompts": [{"set": "gsm8k", "id": "1", "tokens": 5}]}, "does not record its prompt ids"),
])
def test_unusable_ours_file_is_one_error(bv, tmp_path, ours, says):
    args = argparse.Namespace(ours=str(tmp_path / "ours.json"))
    with pytest.raises(SystemExit, match=f"error: .*{says}"):
        bv.adopt_ours_settings(args, ours)


def _run(bv, who, prompt, repeat, wall, tokens, steps):
    return Run(contestant=who, set="gsm8k", prompt=prompt, repeat=repeat, position=0, prompt_tokens=3, wall_s=wall,
                     tokens=tokens, target_forwards=steps, draft_forwards=0, steps=steps)


def test_table_pairs_each_engine_with_its_own_target_alone_and_ours_with_vllm(bv):
    toks = list(range(10))
    ours, theirs = [], []
    for p in ("1", "2"):
        for r in range(2):
            ours += [_run(bv, "ar", p, r, 2.0, toks, 10), _run(bv, "spd", p, r, 1.0, toks, 4)]
            theirs += [_run(bv, "vllm-ar", p, r, 1.0, toks, 10), _run(bv, "vllm-spd", p, r, 0.5, toks[:9] + [0], 3)]
    table = bv.markdown_table(ours, theirs, ["ar", "spd"], ["vllm-ar", "vllm-spd"])
    lines = table.splitlines()
    assert len(lines) == 2 + 4
    ar, spd, var, vspd = lines[2:]
    assert ar.startswith("| ours | target alone | 5.00 (5.00-5.00) | 1.00 | 1 | - | 2.00")  # 2 s vs 1 s per call
    assert ar.endswith("| 4/4 |")
    assert spd.startswith("| ours | SPD, draft 0.5B | 10.00 (10.00-10.00) | 2.50 | 2.00")
    assert "| 4/4 | 2.00" in spd and spd.endswith("| 0/4 |")  # ours == its target alone; vLLM's SPD differs in one token
    assert vspd.startswith("| vLLM | SPD, draft 0.5B | 20.00 (20.00-20.00) | 3.33 | 2.00") and "| 0/4 |" in vspd
    assert var.startswith("| vLLM | target alone | 10.00")


def test_each_contestant_is_the_engines_own_speculative_config(bv):
    """spec_of asks engines/vllm.speculative_config (no second mapping): vLLM's methods, K and
    n-gram sizes as the contestants' settings give them; the head path expanded by the engine."""
    args = argparse.Namespace(k=4, pld_k=7, pld_max_ngram=2, eagle3_head="~/heads/it's here", draft="/models/draft")
    assert bv.spec_of("vllm-ar", args) is None
    assert bv.spec_of("vllm-spd", args) == {"method": "draft_model", "num_speculative_tokens": 4, "model": "/models/draft"}
    assert bv.spec_of("vllm-pld", args) == {"method": "ngram", "num_speculative_tokens": 7, "prompt_lookup_min": 1, "prompt_lookup_max": 2}
    eagle = bv.spec_of("vllm-eagle3", args)
    assert eagle["method"] == "eagle3" and eagle["num_speculative_tokens"] == 4
    assert eagle["model"].endswith("/heads/it's here") and not eagle["model"].startswith("~")


# ---- names (issue 71 item 4): declared in measure/speed_configs.py ------------------------------
def test_each_vllm_contestant_is_declared_beside_the_configuration_of_ours_it_runs(bv):
    from loosespec_bench.measure.speed_configs import DECLARED

    assert set(bv.CONTESTANTS) <= set(DECLARED)
    assert bv.PAIRS == (("ar", "vllm-ar"), ("spd", "vllm-spd"), ("pld", "vllm-pld"), ("eagle3", "vllm-eagle3"))
    assert set(bv.METHOD_COLUMN) == {ours for ours, _ in bv.PAIRS}
    args = bv.parse_args(["--contestants", "vllm-ar,vllm-spd"])
    assert args.contestants == ["vllm-ar", "vllm-spd"]


def test_an_old_spelling_in_a_stored_file_reads_as_the_declared_name(bv):
    # The engine benchmark's file of 2026-12-04 (results/bench/peers-2026-12-04/ours.json) holds "fly-mla".
    stored = {"fly-mla": {"runs": 1}, "ar": {"runs": 1}}
    assert list(bv.stored_names(stored)) == ["fly_mla", "ar"]
    record = vars(_run(bv, "fly-mla", "1", 0, 1.0, [1], 1))
    (run,) = bv.stored_runs([record])
    assert run.contestant == "fly_mla" and record["contestant"] == "fly-mla"


def test_the_committed_side_by_side_table_prints_again_as_it_was(bv, capsys):
    """The names are read through the declaration, and the printed tables stay byte for byte those
    the run printed (results/bench/peers-2026-12-04/vllm.txt)."""
    from ..conftest import REPO

    folder = REPO / "results" / "bench" / "peers-2026-12-04"
    res = bv.main(["--runs", str(folder / "vllm.json"), "--ours", str(folder / "ours.json")])
    out = capsys.readouterr().out
    assert "fly_mla" in res["ours_contestants"] and "fly-mla" not in res["ours_contestants"]
    printed = (folder / "vllm.txt").read_text()
    report = out[out.index("\n== vLLM contestants"):]
    assert "docs/vllm.md's table" in report and report.rstrip("\n") in printed
