"""The added data sets: MBPP+ (local EvalPlus copy, sandboxed base and plus tests), MGSM with the
FLy authors' 0813 prompt, MMLU and LiveCodeBench (small hand-made fixtures in the hub's format),
and one clear error for hub-only sets offline."""

from __future__ import annotations

import base64
import json
import pickle
import zlib
from pathlib import Path

import pytest

from loosespec_bench.run.app import run
from loosespec_bench.errors import ConfigError
from loosespec_bench.store.run_folder import RunFolder
from loosespec_bench.tasks.livecodebench import LiveCodeBench, decode_tests
from loosespec_bench.tasks.mbpp_plus import MBPPPlus
from loosespec_bench.tasks.mgsm import MGSM
from loosespec_bench.tasks.mmlu import MMLU

from ..conftest import compose_config

FIXTURES = Path(__file__).parent.parent / "fixtures"
SANDBOX = {"allow_same_user": True, "timeout_s": 60, "cpu_s": 60, "memory_mb": 4096}


@pytest.fixture
def offline(monkeypatch):
    import datasets
    import huggingface_hub

    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)


# -- MBPP+ -------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def mbpp(data_dir):
    task = MBPPPlus(data_dir=str(data_dir), sandbox=SANDBOX)
    return task, {s.id: s for s in task.load_all()}


def test_mbpp_plus_prompt_is_flys_mbpp_plus_instruct(mbpp):
    task, samples = mbpp
    assert len(samples) == 399
    s = samples["Mbpp/2"]
    assert s.messages == [
        {
            "role": "user",
            "content": "Write a function to find the shared elements from the given two lists. Your code should "
            "satisfy the following assertion:\nassert similar_elements((3, 4, 5, 6),(5, 7, 4, 10)) == (4, 5)",
        },
        {"role": "assistant", "content": "Here is a solution to this programming problem:\n```python\n"},
    ]


def test_mbpp_plus_prompt_shows_the_first_assert_not_the_tests_imports(mbpp):
    # EvalPlus' assertion field opens with "import math" on 10 problems; the hub's test_list
    # (what lm-eval's template indexes) holds only the asserts.
    _, samples = mbpp
    for sid, call in [("Mbpp/82", "volume_sphere(10)"), ("Mbpp/300", "count_binary_seq(1)"), ("Mbpp/137", "zero_count([0,")]:
        user = samples[sid].messages[0]["content"]
        assertion = user.split("Your code should satisfy the following assertion:\n", 1)[1]
        assert assertion.startswith("assert math.isclose(") and call in assertion, (sid, assertion)
    assert not any("assertion:\nimport" in s.messages[0]["content"] for s in samples.values())


# Plain cases plus ones that need EvalPlus' care: tuples stored as JSON lists (2, 580, nested
# deeper than the example), complex numbers stored as strings (124, 252), set comparison (2),
# float tolerance (atol > 0: 17 has none; 135 float outputs).
CANONICAL_IDS = ["Mbpp/2", "Mbpp/17", "Mbpp/124", "Mbpp/252", "Mbpp/580", "Mbpp/135"]


def test_mbpp_plus_canonical_solutions_pass_base_and_plus(mbpp):
    task, samples = mbpp
    chosen = [samples[i] for i in CANONICAL_IDS]
    scores = task.score_batch(chosen, [[task.canonical_completion(s)] for s in chosen])
    for sid, score in zip(CANONICAL_IDS, scores):
        assert score["base_correct"] and score["plus_correct"] and score["correct"], (sid, score["output"])


def test_mbpp_plus_wrong_solutions_fail(mbpp):
    task, samples = mbpp
    s = samples["Mbpp/2"]
    # Right on the base tests' shape but wrong: the first element only.
    wrong = "def similar_elements(a, b):\n    return tuple(sorted(set(a) & set(b)))[:1]\n```"
    score = task.score(s, wrong)
    assert not score["correct"] and not score["base_correct"]
    # Passes the three base inputs, fails plus (empty inputs crash it).
    base_only = "def similar_elements(a, b):\n    assert a and b\n    return tuple(set(a) & set(b))\n```"
    score = task.score(s, base_only)
    assert score["base_correct"] and not score["plus_correct"] and not score["correct"]
    agg = task.aggregate([{"score": score}, {"score": task.score(s, task.canonical_completion(s))}])
    assert agg["pass@1_base"] == 1.0 and agg["pass@1_plus"] == agg["pass@1"] == 0.5


def test_mbpp_plus_end_to_end(tmp_path):
    cfg = compose_config(
        ["experiment=smoke_tiny", "pair=tiny", "generation.max_new_tokens=8", "method=ar", "dataset=mbpp_plus",
         "dataset.limit=2", "dataset.sandbox.allow_same_user=true"],
        results_dir=tmp_path,
    )
    summary = run(cfg)
    assert summary["n_samples"] == 2 and summary["dataset"] == "mbpp_plus"
    assert {"pass@1", "pass@1_base", "pass@1_plus"} <= set(summary)
    records = RunFolder(summary["run_dir"]).records()
    assert len(records) == 2 and all("plus_correct" in r["score"] for r in records)


# -- MGSM, FLy's 0813 prompt --------------------------------------------------------------------
def test_mgsm_0813_prompt_and_lm_eval_scoring(data_dir):
    # Problem 0 (Janet's ducks, answer 18) in every language: the file order, same problems.
    task = MGSM(data_dir=str(data_dir), languages=["fr", "de", "th"], prompt="native_cot_0813", limit=3,
                sample_seed=None, same_problems=True)
    fr, de, th = task.samples()
    question = (data_dir / "mgsm" / "mgsm_fr.tsv").read_text(encoding="utf-8").split("\t")[0]
    assert fr.messages == [{"role": "user", "content": (
        "Résolvez ce problème de mathématiques. Donnez les étapes de raisonnement avant de fournir la réponse finale "
        "sur la dernière ligne elle-même dans le format de \"La réponse est \". N'ajoutez rien d'autre que la réponse "
        "entière après \"La réponse est\".\n\n" + question
    )}]
    assert de.messages[0]["content"].startswith("Löse dieses Mathematikproblem.")
    assert task.stop_strings == ["</s>", "<|im_end|>"]
    assert task.score(fr, "16 - 3 - 4 = 9, 9 * 2 = 18\nLa réponse est 18")["correct"] is True
    # lm-eval's exact_match with ignore_punctuation drops "," and ".": "1.800" and "1,8" both read "18"...
    assert task.score(de, "Die Antwort lautet 1,8")["correct"] is True
    assert task.score(de, "Die Antwort lautet 17")["correct"] is False
    wrong_phrase = task.score(th, "18")
    assert wrong_phrase["correct_strict"] is False and wrong_phrase["correct_flexible"] is True


# -- MMLU ---------------------------------------------------------------------------------------
def test_mmlu_lm_eval_prompt_and_extraction():
    task = MMLU(data_dir=str(FIXTURES), variant="flan_cot_zeroshot", sample_seed=None)  # the file's first row
    first, *_ = task.samples()
    assert first.messages[0]["content"].startswith("The following are multiple choice questions (with answers) about anatomy.")
    assert first.messages[1]["content"].endswith("\nA: Let's think step by step.")
    assert first.reference == "(D)"
    assert task.score(first, "Arches 2 and 3 form it. The answer is (D).")["correct"] is True
    assert task.score(first, "The answer is (B).")["correct"] is False
    gen = MMLU(data_dir=str(FIXTURES), variant="generative", sample_seed=None)
    s = gen.samples()[1]
    assert s.messages[1]["content"].endswith("D. 3\nAnswer:") and s.reference == "B"
    assert gen.score(s, " B")["correct"] is True and gen.score(s, "C")["correct"] is False


# -- LiveCodeBench ------------------------------------------------------------------------------
def test_livecodebench_prompt_tests_and_scoring():
    task = LiveCodeBench(data_dir=str(FIXTURES), sandbox=SANDBOX)
    stdin, functional = task.samples()
    assert stdin.messages[0]["content"].startswith("You are an expert Python programmer.")
    assert "### Format: Read the inputs from stdin" in stdin.messages[1]["content"]
    assert functional.messages[1]["content"].endswith("### Answer: (use the provided format with backticks)\n\n")
    assert len(stdin.reference["tests"]) == 3  # one public + two private (compressed) tests
    right_stdin = "```python\na, b = map(int, input().split())\nprint(a + b)\n```"
    right_fn = (
        "```python\nclass Solution:\n    def countPairs(self, nums: List[int], k: int) -> int:\n"
        "        return sum(nums[i] + nums[j] == k for i in range(len(nums)) for j in range(i + 1, len(nums)))\n```"
    )
    only_public = "```python\nprint(3)\n```"
    scores = task.score_batch([stdin, functional, stdin, functional], [[right_stdin], [right_fn], [only_public], ["no code"]])
    assert [s["correct"] for s in scores] == [True, True, False, False]
    assert task.aggregate([{"score": s, "meta": m.meta} for s, m in zip(scores[:2], [stdin, functional])])["pass@1"] == 1.0


def test_livecodebench_private_tests_refuse_pickled_objects():
    evil = base64.b64encode(zlib.compress(pickle.dumps(Path("x")))).decode()
    with pytest.raises(pickle.UnpicklingError):
        decode_tests(evil)
    ok = base64.b64encode(zlib.compress(pickle.dumps(json.dumps([{"input": "1", "output": "1", "testtype": "stdin"}])))).decode()
    assert decode_tests(ok)[0]["input"] == "1"


# -- hub-only sets offline ----------------------------------------------------------------------
def test_hub_only_sets_offline_give_one_clear_error(offline, tmp_path):
    for task in (lambda: MMLU(data_dir=str(tmp_path)), lambda: LiveCodeBench(data_dir=str(tmp_path))):
        with pytest.raises(ConfigError) as err:
            task().samples()
        assert "\n" not in str(err.value) and "hub" in str(err.value)
