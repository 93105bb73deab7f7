"""`python -m loosespec_bench.score`: re-score a result folder in place (safely) or a JSONL of
completions, without generating."""

from __future__ import annotations

import gzip
import json

from loosespec_bench.run.app import run
from loosespec_bench.score import main
from loosespec_bench.store.run_folder import RunFolder

from .conftest import compose_config

# tiny:0 drafting for tiny:0 accepts every token: the speculative runs take few target steps.
PERFECT_DRAFT = "pair.draft.path=tiny:0"


def test_rescore_result_folder_in_place(tmp_path, capsys):
    summary = run(compose_config(["experiment=smoke_tiny", "method=spd", PERFECT_DRAFT, "dataset=gsm8k", "dataset.num_fewshot=0", "dataset.limit=3", "generation.max_new_tokens=8"], results_dir=tmp_path))
    folder = tmp_path / "smoke_tiny" / summary["run_dir"].rsplit("/", 1)[-1]
    samples = folder / RunFolder.SAMPLES
    # Make the stored answers right (as if the model had said so) and the stored scores stale.
    lines = [json.loads(x) for x in samples.read_text().splitlines()]
    for rec in lines:
        rec["output_text"] = f"The final answer is {rec['reference']}"
        rec["score"] = {"correct": False, "stale": True}
    samples.write_text("".join(json.dumps(r) + "\n" for r in lines))
    before = samples.read_text()

    assert main([str(folder)]) == 0
    after = [json.loads(x) for x in samples.read_text().splitlines()]
    assert [r["id"] for r in after] == [r["id"] for r in lines]
    assert all(r["score"]["correct"] and "stale" not in r["score"] for r in after)
    assert all(r["baseline"]["score"]["correct"] is False for r in after)  # baseline answers are garbage
    assert [r["output_ids"] for r in after] == [r["output_ids"] for r in lines]  # nothing else changed
    (backup,) = folder.glob("samples.jsonl.bak-*")
    assert backup.read_text() == before
    new = json.loads((folder / RunFolder.SUMMARY).read_text())
    assert new["accuracy"] == 1.0 and new["baseline_accuracy"] == 0.0
    assert new["retention"] is None and new["tokens_per_s"] == summary["tokens_per_s"]  # speed kept
    assert new["rescored"]["backup"] == backup.name
    assert list(folder.glob("summary.json.bak-*"))
    assert '"accuracy": 1.0' in capsys.readouterr().out


def test_score_completions_jsonl_humaneval(tmp_path, data_dir):
    with gzip.open(data_dir / "humaneval" / "HumanEval.jsonl.gz", "rt") as f:
        problems = [json.loads(x) for x in f][:6]
    path = tmp_path / "completions.jsonl"
    rows = [{"task_id": p["task_id"], "completion": p["canonical_solution"] if i % 2 == 0 else "    pass\n"} for i, p in enumerate(problems)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main([str(path), "--dataset", "humaneval", "--data-dir", str(data_dir), "--workers", "3"]) == 0
    scored = [json.loads(x) for x in (tmp_path / "completions.scored.jsonl").read_text().splitlines()]
    assert [r["score"]["correct"] for r in scored] == [True, False] * 3
    summary = json.loads((tmp_path / "completions.summary.json").read_text())
    assert summary["pass@1"] == 0.5 and summary["n_samples"] == 6


def test_score_completions_jsonl_gsm8k_and_multi_turn(tmp_path, data_dir):
    path = tmp_path / "gsm.jsonl"
    path.write_text(
        json.dumps({"id": "gsm8k/0", "completion": "16 - 3 - 4 = 9, 9 * 2 = 18. The final answer is $18."}) + "\n"
        + json.dumps({"id": 1, "output_text": "The final answer is 5"}) + "\n"
    )
    assert main([str(path), "--dataset", "gsm8k", "--data-dir", str(data_dir)]) == 0
    scored = [json.loads(x)["score"]["correct"] for x in (tmp_path / "gsm.scored.jsonl").read_text().splitlines()]
    assert scored == [True, False]
    # FastChat's answer format, two turns; no judge configured: speed only, said so.
    mt = tmp_path / "mt.jsonl"
    mt.write_text(json.dumps({"question_id": 81, "choices": [{"index": 0, "turns": ["a", "b"]}]}) + "\n")
    assert main([str(mt), "--dataset", "mt_bench", "--data-dir", str(data_dir)]) == 0
    assert "not judged" in json.loads((tmp_path / "mt.summary.json").read_text())["quality"]


def test_score_cli_errors_are_one_line(tmp_path, capsys):
    path = tmp_path / "x.jsonl"
    path.write_text(json.dumps({"id": "nope", "completion": "1"}) + "\n")
    assert main([str(path)]) == 2
    assert main([str(path), "--dataset", "gsm8kk"]) == 2
    assert main([str(tmp_path / "missing")]) == 2
    err = capsys.readouterr().err
    assert "--dataset" in err and "did you mean 'gsm8k'" in err


def test_rescore_of_an_untouched_run_reproduces_its_summary(tmp_path, capsys):
    """The app and the re-scorer build summary.json with the same code (summary.build_summary)."""
    summary = run(compose_config(["experiment=smoke_tiny", "method=spd", "dataset=gsm8k", "dataset.num_fewshot=0",
                                  "dataset.limit=3", "generation.max_new_tokens=8"], results_dir=tmp_path))
    folder = tmp_path / "smoke_tiny" / summary["run_dir"].rsplit("/", 1)[-1]
    assert main([str(folder)]) == 0
    new = json.loads((folder / RunFolder.SUMMARY).read_text())
    assert new.pop("rescored")["by"] == "loosespec_bench.score"
    assert new == json.loads(json.dumps(summary))


def test_summary_only_keeps_the_scores_and_adds_new_summary_fields(tmp_path, capsys):
    # Named case: summaries from before quality_lost / quality_gained / quality_sign_p (session
    # 15): --summary-only rebuilds them without running any scorer, and leaves the records alone.
    summary = run(compose_config(["experiment=smoke_tiny", "method=spd", "dataset=gsm8k", "dataset.num_fewshot=0",
                                  "dataset.limit=3", "generation.max_new_tokens=8"], results_dir=tmp_path))
    folder = tmp_path / "smoke_tiny" / summary["run_dir"].rsplit("/", 1)[-1]
    samples = folder / RunFolder.SAMPLES
    lines = [json.loads(x) for x in samples.read_text().splitlines()]
    # A stale score the re-scorer would overwrite (the text says otherwise): kept by --summary-only.
    lines[0]["score"] = {**lines[0]["score"], "correct": True}
    samples.write_text("".join(json.dumps(r) + "\n" for r in lines))
    before = samples.read_text()
    old = json.loads((folder / RunFolder.SUMMARY).read_text())
    for key in ("quality_lost", "quality_gained", "quality_sign_p"):
        old.pop(key, None)
    (folder / RunFolder.SUMMARY).write_text(json.dumps(old))

    assert main([str(folder), "--summary-only"]) == 0
    assert samples.read_text() == before and not list(folder.glob("samples.jsonl.bak-*"))
    new = json.loads((folder / RunFolder.SUMMARY).read_text())
    base = [bool(r["baseline"]["score"]["correct"]) for r in lines]
    mine = [bool(r["score"]["correct"]) for r in lines]
    assert new["quality_lost"] == sum(b and not m for m, b in zip(mine, base))
    assert new["quality_gained"] == sum(m and not b for m, b in zip(mine, base))
    assert 0.0 < new["quality_sign_p"] <= 1.0
    assert new["accuracy"] == sum(mine) / 3  # the kept (stale) score, not a re-scored one
    assert new["rescored"]["scores"] == "kept (--summary-only)" and new["rescored"]["backup"] is None
    assert list(folder.glob("summary.json.bak-*"))
