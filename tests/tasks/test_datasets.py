"""Every data set loads from the local copies and builds prompts; per-task prompting, grids,
aggregation, judging and the retention interval."""

from __future__ import annotations

import json
import math
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from loosespec_bench.build import build_task
from loosespec_bench.errors import ConfigError
from loosespec_bench.models.tiny import tiny_tokenizer
from loosespec_bench.tasks.prompting import encode_messages
from loosespec_bench.measure.stats.intervals import paired_bootstrap_ratio, retention_summary
from loosespec_bench.tasks import Sample
from loosespec_bench.tasks.gsm8k import GSM8K
from loosespec_bench.tasks.ifeval import IFEval
from loosespec_bench.tasks.mgsm import MGSM
from loosespec_bench.tasks.mt_bench import NOT_JUDGED, KoMTBench, MTBench, parse_rating
from loosespec_bench.tasks.niah import NIAH
from loosespec_bench.tasks.spec_bench import SpecBench

from ..conftest import compose_config

DATASETS = ["gsm8k", "mgsm", "humaneval", "niah", "ifeval", "mt_bench", "komt_bench", "spec_bench"]
MULTI_TURN = {"mt_bench", "komt_bench"}


@pytest.mark.parametrize("name", DATASETS)
def test_every_dataset_loads_locally_and_builds_prompts(name):
    cfg = compose_config(["pair=tiny", f"dataset={name}", "dataset.limit=3"])
    task = build_task(cfg)
    samples = task.samples()
    assert len(samples) == 3
    assert len({s.id for s in samples}) == 3
    tok = tiny_tokenizer()
    for s in samples:
        text, ids = encode_messages(tok, s.messages, use_chat_template=True)
        assert s.messages[0]["content"].strip() and len(ids) > 10
        if s.messages[-1]["role"] == "assistant":  # an answer prefix is continued, not closed
            assert text.endswith(s.messages[-1]["content"])
        else:
            assert text.endswith("<|im_start|>assistant\n")
        if name in MULTI_TURN:
            assert len(s.followups) == 1 and s.followups[0].strip()


def test_gsm8k_train_split_is_separate_from_test(data_dir):
    train = GSM8K(data_dir=str(data_dir), split="train", num_fewshot=0).load_all()
    test = GSM8K(data_dir=str(data_dir), num_fewshot=0).load_all()
    assert len(train) == 7473 and len(test) == 1319
    # Train problems carry their own ids: a mined record can never pass for a test sample.
    assert train[0].id == "gsm8k-train/0" and test[0].id == "gsm8k/0"
    assert {s.messages[-1]["content"] for s in train}.isdisjoint({s.messages[-1]["content"] for s in test})
    with pytest.raises(ConfigError, match="split"):
        GSM8K(data_dir=str(data_dir), split="validation")


def test_gsm8k_fewshot_turns(data_dir):
    full = GSM8K(data_dir=str(data_dir), num_fewshot=8).load_all()[0]
    assert [m["role"] for m in full.messages] == ["user", "assistant"] * 8 + ["user"]
    assert full.messages[1]["content"].endswith("The final answer is 6")  # Wei et al.'s first exemplar
    assert "Problem: Janet" in full.messages[-1]["content"]
    assert len(GSM8K(data_dir=str(data_dir), num_fewshot=0).load_all()[0].messages) == 1
    with pytest.raises(ConfigError, match="num_fewshot"):
        GSM8K(data_dir=str(data_dir), num_fewshot=9)


def test_mgsm_language_selection_and_mean_accuracy(data_dir):
    cfg = compose_config(["pair=tiny", "dataset=mgsm", "dataset.languages=[fr,de,th]", "dataset.limit=6"])
    task = build_task(cfg)
    samples = task.samples()
    assert [s.meta["language"] for s in samples] == ["fr", "de", "th"] * 2
    assert samples[0].messages[0]["content"].startswith("Question :")
    assert samples[2].messages[0]["content"].startswith("โจทย์:")
    # fr: 2/2, de: 1/2, th: 0/2 -> per language 1, .5, 0; mean .5
    correct = {"fr": [True, True], "de": [True, False], "th": [False, False]}
    records = [{"meta": {"language": s.meta["language"]}, "score": {"correct": correct[s.meta["language"]][i // 3]}} for i, s in enumerate(samples)]
    agg = task.aggregate(records)
    assert (agg["accuracy_fr"], agg["accuracy_de"], agg["accuracy_th"]) == (1.0, 0.5, 0.0)
    assert agg["accuracy_mean_languages"] == pytest.approx(0.5)
    assert agg["accuracy"] == pytest.approx(0.5)
    assert MGSM(data_dir=str(data_dir), languages="fr,de").languages == ["fr", "de"]
    with pytest.raises(ConfigError, match="unknown"):
        MGSM(data_dir=str(data_dir), languages=["xx"])


def test_ifeval_checker_scores_all_541_offline(data_dir):
    task = IFEval(data_dir=str(data_dir))
    samples = task.load_all()
    assert len(samples) == 541
    records = [{"score": task.score(s, "Hello world. This is a short response.")} for s in samples]
    agg = task.aggregate(records)
    for key in ("prompt_level_strict_acc", "inst_level_strict_acc", "prompt_level_loose_acc", "inst_level_loose_acc"):
        assert 0.0 <= agg[key] <= 1.0
    assert sum(len(r["score"]["inst_strict"]) for r in records) == 834  # every instruction checked
    # The official checks: no commas + all lowercase, followed and not followed.
    by_id = {s.id: s for s in samples}
    ok = Sample(id="x", messages=[], reference={**by_id["1000"].reference, "instruction_id_list": ["punctuation:no_comma"], "kwargs": [{}]})
    assert task.score(ok, "no commas here")["correct"] and not task.score(ok, "a, b")["correct"]


def test_niah_places_needles_at_requested_depths(data_dir):
    task = NIAH(data_dir=str(data_dir), context_lengths=[1024, 2048], depths=[0, 25, 50, 75, 100], mode="single", tokenizer="tiny:0")
    samples = task.load_all()
    assert len(samples) == 10
    tok = tiny_tokenizer()
    for s in samples:
        (value,) = s.reference["values"]
        needle = f"One of the special magic numbers for {s.reference['key']} is: {value}."
        context = s.messages[0]["content"]
        assert needle in context and s.messages[1]["content"].startswith("The special magic numbers for")
        # Length in target tokens, within a few tokens of the request.
        assert abs(s.meta["context_tokens"] - s.meta["context_length"]) <= 8
        # Depth: at the requested fraction of the context, moved back at most one sentence.
        frac = s.meta["needle_offsets"][0] / s.meta["context_chars"]
        want = s.meta["depth"] / 100
        assert want - 0.25 <= frac <= want + 0.01, (s.id, frac)
        assert len(tok(context).input_ids) > s.meta["context_length"]
        assert task.score(s, f"... are {value}.")["correct"] and not task.score(s, "I don't know")["correct"]


def test_niah_multivalue_and_char_approximation(data_dir):
    task = NIAH(data_dir=str(data_dir), context_lengths=[512], depths=[50], mode="multivalue", num_values=4, tokenizer=None)
    (s,) = task.load_all()
    assert len(s.reference["values"]) == 4 and all(v in s.messages[0]["content"] for v in s.reference["values"])
    assert abs(s.meta["context_chars"] / 4 - 512) <= 40  # 4 characters per token
    half = task.score(s, " ".join(s.reference["values"][:2]))
    assert half == {"correct": False, "recall": 0.5, "found": [True, True, False, False]}
    agg = task.aggregate([{"meta": s.meta, "score": half}])
    assert agg["accuracy_by_cell"] == {"L512-D50": 0.0} and agg["recall"] == 0.5


class _FakeJudge(BaseHTTPRequestHandler):
    """An OpenAI-compatible endpoint on localhost that rates every answer [[7]]."""

    requests: list[dict] = []

    def do_POST(self):  # noqa: N802 (http.server's name)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).requests.append({"auth": self.headers.get("Authorization"), "body": body})
        reply = {"choices": [{"message": {"role": "assistant", "content": "Good answer. Rating: [[7]]"}}]}
        data = json.dumps(reply).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture
def judge_url():
    server = HTTPServer(("127.0.0.1", 0), _FakeJudge)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    _FakeJudge.requests = []
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()


def test_mt_bench_single_answer_grading(data_dir, judge_url, monkeypatch):
    monkeypatch.setenv("JUDGE_KEY", "sk-test")
    judge = {"kind": "openai", "url": judge_url, "model": "gpt-4", "api_key_env": "JUDGE_KEY"}
    task = MTBench(data_dir=str(data_dir), judge=judge)
    by_id = {s.id: s for s in task.load_all()}
    assert len(by_id) == 80
    writing, math_q = by_id["81"], by_id["111"]
    score = task.score_turns(writing, ["first answer", "second answer"])
    assert score["rating_turns"] == [7.0, 7.0] and score["rating"] == 7.0
    assert [j["prompt"] for j in score["judgments"]] == ["single-v1", "single-v1-multi-turn"]
    req = _FakeJudge.requests[1]
    assert req["auth"] == "Bearer sk-test" and req["body"]["temperature"] == 0
    user = req["body"]["messages"][1]["content"]
    assert "first answer" in user and "second answer" in user and writing.followups[0] in user
    score = task.score_turns(math_q, ["a1", "a2"])
    assert [j["prompt"] for j in score["judgments"]] == ["single-math-v1", "single-math-v1-multi-turn"]
    user = _FakeJudge.requests[-1]["body"]["messages"][1]["content"]
    assert "Reference Answer" in user and task.reference_answers[111][1] in user  # GPT-4's reference
    agg = task.aggregate([{"meta": writing.meta, "score": score}])
    assert agg["mt_bench_score"] == 7.0 and agg["score_turn2"] == 7.0
    assert parse_rating("[[8.5]]") == 8.5 and parse_rating("[6]") == 6 and parse_rating("none") == -1


def test_komt_bench_penalises_non_korean_answers(data_dir, judge_url):
    judge = {"kind": "openai", "url": judge_url, "model": "gpt-4", "api_key_env": None}
    task = KoMTBench(data_dir=str(data_dir), judge=judge)
    by_id = {s.id: s for s in task.load_all()}
    korean = "하와이는 아름다운 섬입니다. 문화 체험과 명소가 많습니다."
    english = "Hawaii is a beautiful island with many cultural experiences and sights."
    score = task.score_turns(by_id["81"], [korean, english])
    assert score["rating_turns"] == [7.0, pytest.approx(math.sqrt(7.0))]
    assert task.score_turns(by_id["138"], [english, english])["rating_turns"] == [7.0, 7.0]  # JSON answers exempt


def test_no_judge_means_speed_only(data_dir):
    task = MTBench(data_dir=str(data_dir))
    s = task.load_all()[0]
    assert task.score_turns(s, ["a", "b"]) == {}
    assert task.aggregate([{"meta": s.meta, "score": {}}]) == {"quality": NOT_JUDGED}
    with pytest.raises(ConfigError, match="kind"):
        MTBench(data_dir=str(data_dir), judge={"kind": "gpt"})


def test_spec_bench_groups_and_speed(data_dir):
    task = SpecBench(data_dir=str(data_dir))
    samples = task.load_all()
    assert len(samples) == 480
    groups = [s.meta["task_group"] for s in samples[:6]]
    assert sorted(groups) == sorted(["multi_turn_conversation", "translation", "summarization", "qa", "math_reasoning", "rag"])
    assert sum(bool(s.followups) for s in samples) == 80

    def rec(s, tps, base_tps):
        m = {"new_tokens": 10, "steps": 5, "total_s": 10 / tps}
        return {"meta": s.meta, "metrics": m, "baseline": {"metrics": {"new_tokens": 10, "steps": 10, "total_s": 10 / base_tps}}}

    agg = task.aggregate([rec(s, 20.0, 10.0) for s in samples[:12]])
    assert agg["speed_by_task_group"]["translation"]["speedup"] == pytest.approx(2.0)
    assert agg["speed_by_task_group"]["qa"]["tau"] == 2.0
    assert set(agg["speed_by_task_group"]) == set(groups)


def test_paired_bootstrap_retention():
    same = [1, 0, 1, 1, 0, 1, 0, 1] * 10
    point, low, high = paired_bootstrap_ratio(same, same, seed=0)
    assert point == low == high == 1.0
    worse = [0 if i % 3 == 0 else b for i, b in enumerate(same)]
    point, low, high = paired_bootstrap_ratio(worse, same, seed=0)
    assert point < 1 and high < 1  # a real loss: the interval excludes 1
    assert paired_bootstrap_ratio(worse, same, seed=0) == (point, low, high)  # seeded
    assert paired_bootstrap_ratio([1, 1], [0, 0]) == (None, None, None)
    records = [{"score": {"correct": m}, "baseline": {"score": {"correct": b}}} for m, b in zip(worse, same)]
    out = retention_summary(records, "correct", seed=0)  # 0/1 scores: the exact interval
    assert out["retention_ci_excludes_1"] is True and out["retention_n"] == 80 and out["retention_ci_method"].startswith("exact")
    assert retention_summary(records, None) == {}


def test_hub_path_gives_the_same_samples(data_dir, monkeypatch):
    """The hub code path, fed the hub's row format (from the local copies: no network here),
    builds the same samples as the local path."""
    import gzip

    from loosespec_bench.tasks import gsm8k, humaneval, ifeval, mt_bench
    from loosespec_bench.tasks.base import read_jsonl

    def rows(name, config, split):
        if name == "openai/gsm8k":
            assert (config, split) == ("main", "test")
            return read_jsonl(data_dir / "gsm8k" / "test.jsonl")
        if name == "openai/openai_humaneval":
            with gzip.open(data_dir / "humaneval" / "HumanEval.jsonl.gz", "rt") as f:
                return [json.loads(x) for x in f]
        assert name == "google/IFEval" and split == "train"
        # The hub's IFEval rows carry every kwarg of every instruction, None where unused.
        every = {k for r in read_jsonl(data_dir / "ifeval" / "input_data.jsonl") for kw in r["kwargs"] for k in kw}
        return [
            {**r, "kwargs": [{k: kw.get(k) for k in sorted(every)} for kw in r["kwargs"]]}
            for r in read_jsonl(data_dir / "ifeval" / "input_data.jsonl")
        ]

    for module in (gsm8k, humaneval, ifeval):
        monkeypatch.setattr(module, "load_hub_dataset", rows)
    monkeypatch.setattr(mt_bench, "hub_file", lambda repo, name: data_dir / ("mt_bench/question.jsonl" if "H4" in repo else "komt_bench/question_ko.jsonl"))
    for cls in (gsm8k.GSM8K, humaneval.HumanEval, mt_bench.MTBench, mt_bench.KoMTBench):
        local, hub = cls(data_dir=str(data_dir)).load_all(), cls(data_dir=None).load_all()
        assert [(s.id, s.messages, s.reference, s.followups) for s in hub] == [(s.id, s.messages, s.reference, s.followups) for s in local]
    local, hub = ifeval.IFEval(data_dir=str(data_dir)), ifeval.IFEval(data_dir=None, nltk_data=str(data_dir / "ifeval" / "nltk_data"))
    for a, b in list(zip(local.load_all(), hub.load_all()))[:60]:
        assert a.messages == b.messages
        assert local.score(a, "A short answer, in lowercase.") == hub.score(b, "A short answer, in lowercase.")
    for cls in (NIAH, SpecBench):
        with pytest.raises(ConfigError, match="data_dir"):
            cls(data_dir=None).load_all()


def test_local_judge_model_runs(data_dir):
    judge = {"kind": "local", "path": "tiny:0", "dtype": "float32", "max_tokens": 6}
    task = MTBench(data_dir=str(data_dir), judge=judge)
    s = task.load_all()[0]
    score = task.score_turns(s, ["first", "second"])
    # A random tiny model writes no "[[rating]]": unreadable ratings are -1 and left out, as in FastChat.
    assert score["rating_turns"] == [-1.0, -1.0] and score["rating"] is None and score["judge"] == "tiny:0"
    agg = task.aggregate([{"meta": s.meta, "score": score}])
    assert agg["mt_bench_score"] is None and agg["n_judged_turns"] == 0


# -- selection: a limit takes distinct problems, seeded ------------------------------------------
def test_mgsm_limit_takes_different_problems_in_each_language(data_dir):
    """The issue's case: limit=3 over [fr, de, th] used to ask problem 0 three times."""
    task = MGSM(data_dir=str(data_dir), languages=["fr", "de", "th"], limit=3)
    samples = task.samples()
    assert [s.meta["language"] for s in samples] == ["fr", "de", "th"]
    assert len({s.problem for s in samples}) == 3
    # 83 per language (floor(250 / 3)) are still all different problems; the whole set has
    # every problem in every language.
    many = MGSM(data_dir=str(data_dir), languages=["fr", "de", "th"], limit=249).samples()
    assert len({s.problem for s in many}) == 249
    full = MGSM(data_dir=str(data_dir), languages=["fr", "de", "th"], limit=None).samples()
    assert len({s.id for s in full}) == 750 and len({s.problem for s in full}) == 250
    assert task.selection(samples)["n_problems"] == 3


def test_mgsm_same_problems_only_when_asked(data_dir):
    task = MGSM(data_dir=str(data_dir), languages=["fr", "de", "th"], limit=6, same_problems=True)
    samples = task.samples()
    assert len({s.problem for s in samples}) == 2
    assert samples[0].problem == samples[1].problem == samples[2].problem
    assert task.selection(samples) | {"same_problems": True} == task.selection(samples)


def test_limit_is_a_seeded_prefix_and_recorded(data_dir):
    """A seed fixes the selection; a larger limit extends a smaller one's (resume reuses it);
    another seed picks other problems; sample_seed=null keeps the file order."""
    small = [s.id for s in GSM8K(data_dir=str(data_dir), limit=3).samples()]
    big = [s.id for s in GSM8K(data_dir=str(data_dir), limit=10).samples()]
    assert big[:3] == small and len(set(big)) == 10
    assert [s.id for s in GSM8K(data_dir=str(data_dir), limit=3).samples()] == small
    other = [s.id for s in GSM8K(data_dir=str(data_dir), limit=3, sample_seed=1).samples()]
    assert other != small
    task = GSM8K(data_dir=str(data_dir), limit=3, sample_seed=None)
    assert [s.id for s in task.samples()] == ["gsm8k/0", "gsm8k/1", "gsm8k/2"]
    assert task.selection(task.samples())["order"] == "data file order"
    sel = GSM8K(data_dir=str(data_dir), limit=3).selection(GSM8K(data_dir=str(data_dir), limit=3).samples())
    assert sel["sample_seed"] == 0 and sel["n_problems"] == 3 and sel["limit"] == 3


def test_grouped_sets_still_cover_every_group_after_shuffling(data_dir):
    cfg = compose_config(["pair=tiny", "dataset=mt_bench", "dataset.limit=8"])
    samples = build_task(cfg).samples()
    assert len({s.meta["category"] for s in samples}) == 8
