"""dataset=lm_eval: lm-eval's own task objects (prompt, stop strings, filters, metrics) with our
loop generating; gsm8k_cot_llama runs offline from the local GSM8K copy."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from loosespec_bench.run.app import run
from loosespec_bench.errors import ConfigError
from loosespec_bench.models.tiny import tiny_tokenizer
from loosespec_bench.tasks.prompting import encode_messages
from loosespec_bench.store.run_folder import RunFolder
from loosespec_bench.tasks.gsm8k import GSM8K
from loosespec_bench.tasks.lm_eval_task import LmEvalTask

from ..conftest import compose_config


@pytest.fixture(scope="module", autouse=True)
def _one_task_index():
    """lm-eval's TaskManager indexes every task YAML it ships (~7 CPU s each time, measured per
    test here) and build_lm_eval_task makes one per call: these tests share one per include_path
    (the index is only read; its factory builds a new task object each time)."""
    import lm_eval.tasks

    made: dict = {}
    real = lm_eval.tasks.TaskManager

    def shared(include_path=None, **kwargs):
        key = (repr(include_path), repr(sorted(kwargs.items())))
        if key not in made:
            made[key] = real(include_path=include_path, **kwargs)
        return made[key]

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(lm_eval.tasks, "TaskManager", shared)
        yield


@pytest.fixture(scope="module")
def gsm8k_cot_llama(data_dir):
    task = LmEvalTask(task="gsm8k_cot_llama", data_dir=str(data_dir), limit=3)
    task.prepare()
    return task


def lm_eval_hf_render(tokenizer):
    """lm-eval's HF model's chat rendering (HFLM.apply_chat_template), as --apply_chat_template uses it."""
    from lm_eval.models.huggingface import HFLM

    fake = SimpleNamespace(tokenizer=tokenizer, chat_template_args={})
    return lambda messages, add_generation_prompt=True: HFLM.apply_chat_template(fake, messages, add_generation_prompt)


def test_settings_come_from_the_lm_eval_task(gsm8k_cot_llama):
    t = gsm8k_cot_llama
    assert t.local  # served from data_dir, not the hub
    assert t.num_fewshot == 8
    assert t.max_new_tokens == 256  # lm-eval's default max_gen_toks
    assert "<|eot_id|>" in t.stop_strings and "Q:" in t.stop_strings
    assert t.filter_names == ["strict-match", "flexible-extract"] and t.metric == "exact_match"


def test_prompt_is_lm_evals_chat_prompt(gsm8k_cot_llama):
    """Our messages, rendered by the app, equal lm-eval's own prompt string for the same doc
    with --apply_chat_template --fewshot_as_multiturn and the same tokenizer."""
    tok = tiny_tokenizer()
    task = gsm8k_cot_llama.lm_task
    samples = gsm8k_cot_llama.samples()
    assert len(samples) == 3
    for sample, (_, doc) in zip(samples, task.doc_iterator(limit=3)):
        ours, _ = encode_messages(tok, sample.messages, use_chat_template=True)
        theirs = task.fewshot_context(
            doc, 8, apply_chat_template=True, fewshot_as_multiturn=True, chat_template=lm_eval_hf_render(tok)
        )
        assert ours == theirs
        assert len(sample.messages) == 17  # 8 exemplar turns (user + assistant) + the question


def test_prompt_matches_our_gsm8k_module(gsm8k_cot_llama, data_dir):
    """Cross-check: the hand-built GSM8K module (8-shot) asks the same chat turns."""
    ours = GSM8K(data_dir=str(data_dir), num_fewshot=8, limit=3, sample_seed=None).samples()  # lm-eval's order
    for a, b in zip(ours, gsm8k_cot_llama.samples()):
        assert a.messages == b.messages
        assert a.reference == b.reference


def test_plain_text_prompt(data_dir):
    t = LmEvalTask(task="gsm8k_cot_llama", data_dir=str(data_dir), limit=1, apply_chat_template=False, num_fewshot=2)
    (sample,) = t.samples()
    (_, doc), = t.lm_task.doc_iterator(limit=1)
    assert sample.messages == [{"role": "user", "content": t.lm_task.fewshot_context(doc, 2)}]


def test_filters_and_metrics_score_right_and_wrong(gsm8k_cot_llama):
    (sample, *_) = gsm8k_cot_llama.samples()
    assert sample.reference == "18"
    right = gsm8k_cot_llama.score(sample, "16 - 3 - 4 = 9 eggs, 9 * 2 = 18. The final answer is $18.")
    assert right["correct"] is True
    assert right["exact_match,strict-match"] == 1.0 and right["filtered,strict-match"] == "$18."
    wrong = gsm8k_cot_llama.score(sample, "16 - 3 = 13. The final answer is 26")
    assert wrong["correct"] is False and wrong["exact_match,flexible-extract"] == 0.0
    # No answer phrase: strict-match fails, flexible-extract (last number) succeeds.
    loose = gsm8k_cot_llama.score(sample, "She makes 18 dollars")
    assert loose["exact_match,strict-match"] == 0.0 and loose["exact_match,flexible-extract"] == 1.0
    agg = gsm8k_cot_llama.aggregate([{"score": right}, {"score": wrong}, {"score": loose}])
    assert agg["accuracy"] == agg["exact_match,strict-match"] == pytest.approx(1 / 3)
    assert agg["exact_match,flexible-extract"] == pytest.approx(2 / 3)


def test_end_to_end_gsm8k_cot_llama_offline(tmp_path):
    cfg = compose_config(
        ["experiment=smoke_tiny", "pair=tiny", "generation.max_new_tokens=8", "method=spd", "dataset=lm_eval",
         "dataset.task=gsm8k_cot_llama", "dataset.limit=2"],
        results_dir=tmp_path,
    )
    summary = run(cfg)
    assert summary["n_samples"] == 2 and summary["dataset"] == "gsm8k_cot_llama"
    assert "exact_match,strict-match" in summary and "accuracy" in summary
    records = RunFolder(summary["run_dir"]).records()
    assert len(records) == 2 and all("exact_match,flexible-extract" in r["score"] for r in records)
    assert "<|im_start|>" in records[0]["prompt_text"]  # the tiny target's chat template


def test_unknown_task_and_missing_task_are_config_errors():
    with pytest.raises(ConfigError, match="dataset.task"):
        LmEvalTask(task=None).samples()
    with pytest.raises(ConfigError, match="not an lm-eval task"):
        LmEvalTask(task="no_such_task_xyz").samples()


def test_hub_only_task_offline_is_one_clear_error(monkeypatch, data_dir):
    """acp_prog_gen (FLy's ACP run) has no local copy: offline, one ConfigError line, raised where
    the app catches it (task.samples(), not inside Hydra's instantiate)."""
    import datasets
    import huggingface_hub

    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    from loosespec_bench.build import build_task

    cfg = compose_config(["pair=tiny", "dataset=acp_prog_gen"])
    assert cfg.dataset.task == "acp_prog_gen" and cfg.dataset.apply_chat_template and cfg.dataset.fewshot_as_multiturn
    task = build_task(cfg)  # lm-eval's task (and its data) load on first use, outside Hydra's instantiate
    with pytest.raises(ConfigError) as err:
        task.samples()
    msg = str(err.value)
    # Without lm-eval's [acpbench] extras the task stops before the hub is tried; either way one line.
    assert "\n" not in msg and "acp_prog_gen" in msg and ("hub" in msg or "pip install" in msg)


def test_mgsm_task_runs_from_the_local_copy(data_dir):
    t = LmEvalTask(task="mgsm_native_cot_fr", data_dir=str(data_dir), limit=1)
    (sample,) = t.samples()
    assert t.local and sample.reference == "18"
    assert sample.messages[-1]["content"].startswith("Question : Les canes de Janet")
    assert t.score(sample, "... La réponse est 18.")["correct"] is True
    assert t.score(sample, "... La réponse est 17.")["correct"] is False


def test_fewshot_from_a_split_the_local_copy_lacks_is_refused(data_dir):
    """lm-eval's `gsm8k` draws 5 exemplars from the hub's train split; offline it would quietly
    draw them from the test split instead. The adapter refuses, saying what to set."""
    with pytest.raises(ConfigError, match="num_fewshot=0") as err:
        LmEvalTask(task="gsm8k", data_dir=str(data_dir), limit=1).samples()
    assert "\n" not in str(err.value)
    zero = LmEvalTask(task="gsm8k", data_dir=str(data_dir), limit=1, num_fewshot=0)
    assert len(zero.samples()[0].messages) == 1
