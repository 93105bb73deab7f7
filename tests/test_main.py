"""Issue 14 item 5: every bad input is one `error:` line on stderr, exit code 2, no traceback,
and no result folder. `main()` runs in-process; all but the context-length cases stop before
any model loads."""

from __future__ import annotations

import gzip
import sys
from pathlib import Path

import pytest

from loosespec_bench.__main__ import main

from .conftest import shared_data_dir

# (id, overrides); every case also gets pair=tiny, progress=false, paths.results_dir=<tmp>.
CASES: list[tuple[str, list[str]]] = [
    # -- Hydra composition and override syntax --
    ("unknown-key", ["foo=1"]),
    ("append-existing", ["+seed=3"]),
    ("bad-syntax-bracket", ["generation.temperature=[1"]),
    ("bad-syntax-quote", ["experiment_name='abc"]),
    ("unknown-method", ["method=nosuch"]),
    ("unknown-dataset", ["dataset=gsm9k"]),
    ("unknown-pair", ["pair=nosuch"]),
    ("unknown-experiment", ["experiment=nosuch"]),
    ("unknown-scale", ["scale=nosuch"]),
    ("unknown-logger", ["logger=nosuch"]),
    ("sweep-without-m", ["method=fly,spd"]),
    ("sweep-bad-point", ["-m", "method=fly,spd", "method.theta=-1"]),
    ("sweep-bad-value", ["-m", "drafter.k=1,0"]),
    ("interpolation", ["generation.temperature=${nosuch.key}"]),
    ("key-of-other-method", ["method=spd", "method.theta=0.3"]),
    ("delete-generation", ["~generation"]),
    ("generation-not-a-node", ["generation=5"]),
    ("empty-value", ["generation.max_new_tokens="]),
    # -- keys a class does not take --
    ("plus-method-key", ["method=fly", "+method.foo=1"]),
    ("plus-drafter-key", ["+drafter.foo=1"]),
    ("plus-dataset-key", ["dataset=gsm8k", "+dataset.foo=1"]),
    ("plus-generation-key", ["+generation.top_p=1.5"]),
    ("plus-paths-key", ["+paths.foo=x"]),
    ("plus-root-key", ["+foo=1"]),
    ("plus-sandbox-key", ["dataset=humaneval", "+dataset.sandbox.foo=1"]),
    ("plus-fly-key-typo", ["method=fly", "+method.thetta=0.2"]),
    # -- method --
    ("fly-theta-negative", ["method=fly", "method.theta=-1"]),
    ("fly-theta-nan", ["method=fly", "method.theta=nan"]),
    ("fly-theta-inf", ["method=fly", "method.theta=inf"]),
    ("fly-theta-text", ["method=fly", "method.theta=abc"]),
    ("fly-window-zero", ["method=fly", "method.window=0"]),
    ("fly-window-float", ["method=fly", "method.window=1.5"]),
    ("fly-topk-zero", ["method=fly", "method.top_k=0"]),
    ("fly-mode", ["method=fly", "method.mode=foo"]),
    ("fly-no-window", ["method=fly", "method.no_window=maybe"]),
    ("fly-k-not-above-w", ["method=fly", "drafter.k=5"]),
    ("fly-near-limit", ["method=fly", "method.near_limit=sometimes"]),
    ("fly-draft-sampling", ["method=fly", "method.draft_sampling=perhaps"]),
    ("fly-switch-off", ["method=fly", "method.theta_switch_off=2"]),
    ("mla-lookup", ["method=fly", "drafter=mla", "drafter.lookup=vllm"]),
    ("dm-lm-head-batch", ["method=dropmatch", "+method.lm_head_batch=0"]),
    ("generation-top-p", ["generation.temperature=1", "generation.top_p=1.5"]),
    ("generation-top-p-zero", ["generation.temperature=1", "generation.top_p=0"]),
    ("generation-top-k", ["generation.top_k=-1"]),
    ("draft-quantize", ["pair.draft.quantize=int3"]),
    ("draft-vocab-top", ["drafter.vocab_top=0"]),
    ("eagle-tree-flag", ["drafter=eagle3", "drafter.tree=maybe"]),
    ("eagle-total-token", ["drafter=eagle3_tree", "drafter.total_token=1"]),
    ("eagle-tree-sampling", ["drafter=eagle3_tree", "generation.temperature=0.7"]),
    ("lookahead-window", ["drafter=lookahead", "drafter.window=0"]),
    ("dm-n-paths", ["method=dropmatch", "method.n_paths=0"]),
    ("dm-p-one", ["method=dropmatch", "method.p=1.0"]),
    ("dm-p-negative", ["method=dropmatch", "method.p=-0.1"]),
    ("dm-criterion", ["method=dropmatch", "method.criterion=foo"]),
    ("dm-majority", ["method=dropmatch", "method.majority=1.5"]),
    ("dm-clean-path", ["method=dropmatch", "method.include_clean_path=true", "method.n_paths=1"]),
    # -- drafter --
    ("k-zero", ["drafter.k=0"]),
    ("k-negative", ["drafter.k=-3"]),
    ("k-float", ["drafter.k=2.5"]),
    ("k-huge", ["drafter.k=100000"]),
    ("pld-max-ngram-zero", ["drafter=pld", "drafter.max_ngram=0"]),
    ("pld-min-ngram-zero", ["drafter=pld", "drafter.min_ngram=0"]),
    ("pld-min-above-max", ["drafter=pld", "drafter.min_ngram=5", "drafter.max_ngram=3"]),
    ("mla-num-pred", ["drafter=mla", "drafter.num_pred_tokens=0"]),
    ("xtok-special", ["drafter=model_xtok", "drafter.special_tokens=foo"]),
    ("xtok-factor", ["drafter=model_xtok", "drafter.max_draft_factor=0.5"]),
    ("xtok-context", ["drafter=model_xtok", "drafter.context_tokens=-1"]),
    ("eagle3-layers", ["drafter=eagle3", "drafter.layers=[-1,2,3]"]),
    # -- dataset --
    ("limit-zero", ["dataset.limit=0"]),
    ("limit-negative", ["dataset.limit=-1"]),
    ("limit-text", ["dataset.limit=abc"]),
    ("ds-max-new-zero", ["dataset.max_new_tokens=0"]),
    ("ds-stop-strings", ["dataset.stop_strings=5"]),
    ("gsm8k-fewshot-negative", ["dataset=gsm8k", "dataset.num_fewshot=-1"]),
    ("gsm8k-fewshot-too-many", ["dataset=gsm8k", "dataset.num_fewshot=99"]),
    ("gsm8k-match", ["dataset=gsm8k", "dataset.match=foo"]),
    ("mgsm-language", ["dataset.languages=[xx]"]),
    ("mgsm-languages-empty", ["dataset.languages=[]"]),
    ("mgsm-prompt", ["dataset.prompt=foo"]),
    ("sandbox-timeout", ["dataset=humaneval", "dataset.sandbox.timeout_s=-1"]),
    ("sandbox-memory", ["dataset=humaneval", "dataset.sandbox.memory_mb=0"]),
    ("sandbox-isolation", ["dataset=mbpp_plus", "dataset.sandbox.isolation=foo"]),
    ("sandbox-workers", ["dataset=humaneval", "dataset.sandbox.workers=0"]),
    ("judge-kind", ["dataset=mt_bench", "dataset.judge.kind=foo"]),
    ("judge-retries", ["dataset=mt_bench", "dataset.judge.retries=-1"]),
    ("niah-lengths-empty", ["dataset=niah", "dataset.context_lengths=[]"]),
    ("niah-depth", ["dataset=niah", "dataset.depths=[150]"]),
    ("niah-mode", ["dataset=niah", "dataset.mode=foo"]),
    ("niah-num-values", ["dataset=niah", "dataset.num_values=0"]),
    ("lm-eval-no-task", ["dataset=lm_eval"]),
    # -- generation --
    ("temperature-negative", ["generation.temperature=-1"]),
    ("temperature-nan", ["generation.temperature=nan"]),
    ("temperature-inf", ["generation.temperature=inf"]),
    ("temperature-text", ["generation.temperature=abc"]),
    ("max-new-zero", ["generation.max_new_tokens=0"]),
    ("max-new-1e8", ["generation.max_new_tokens=1e8"]),
    ("max-new-float", ["generation.max_new_tokens=2.5"]),
    ("max-new-huge", ["generation.max_new_tokens=100000000"]),
    # -- top level, pair, logger --
    ("seed-negative", ["seed=-1"]),
    ("seed-text", ["seed=abc"]),
    ("seed-float", ["seed=1.5"]),
    ("threads-zero", ["threads=0"]),
    ("threads-text", ["threads=abc"]),
    ("baseline", ["baseline=foo"]),
    ("warmup", ["warmup=maybe"]),
    ("chat-template", ["chat_template=3"]),
    ("experiment-name-empty", ["experiment_name=''"]),
    ("dtype", ["pair.dtype=float13"]),
    ("device", ["pair.device=tpu"]),
    ("target-path-null", ["pair.target.path=null"]),
    ("draft-path-empty", ["pair.draft.path=''"]),
    ("record-steps", ["record_steps=sometimes"]),
]


def _write(path: Path, text: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


GOOD_GSM8K = '{"question": "1+1?", "answer": "2 #### 2"}\n'
# (id, files under the data dir, overrides): corrupt, empty or unparsable data.
DATA_CASES: list[tuple[str, dict[str, str | bytes], list[str]]] = [
    ("missing-data-dir", {}, ["dataset=gsm8k"]),
    ("gsm8k-bad-json", {"gsm8k/test.jsonl": GOOD_GSM8K + "{not json\n"}, ["dataset=gsm8k"]),
    ("gsm8k-not-object", {"gsm8k/test.jsonl": GOOD_GSM8K + "[1, 2]\n"}, ["dataset=gsm8k"]),
    ("gsm8k-missing-field", {"gsm8k/test.jsonl": GOOD_GSM8K + '{"question": "x"}\n'}, ["dataset=gsm8k"]),
    ("gsm8k-answer-not-number", {"gsm8k/test.jsonl": '{"question": "x", "answer": "so #### many"}\n'}, ["dataset=gsm8k"]),
    ("gsm8k-empty", {"gsm8k/test.jsonl": ""}, ["dataset=gsm8k"]),
    ("mgsm-bad-row", {"mgsm/mgsm_en.tsv": "What is 1+1?\t2\nno tab here\n"}, []),
    ("mgsm-answer-not-number", {"mgsm/mgsm_en.tsv": "What is 1+1?\ttwo\n"}, []),
    ("mgsm-empty", {"mgsm/mgsm_en.tsv": ""}, []),
    ("humaneval-not-gzip", {"humaneval/HumanEval.jsonl.gz": b"plain text"}, ["dataset=humaneval"]),
    ("humaneval-missing-field", {"humaneval/HumanEval.jsonl.gz": gzip.compress(b'{"task_id": "H/0"}\n')}, ["dataset=humaneval"]),
    ("spec-bench-bad-json", {"spec_bench/question.jsonl": "{oops\n"}, ["dataset=spec_bench"]),
    ("spec-bench-missing-field", {"spec_bench/question.jsonl": '{"question_id": 1}\n'}, ["dataset=spec_bench"]),
]


def run_main(args: list[str], results: Path, monkeypatch, capsys) -> tuple[int, str]:
    argv = ["loosespec_bench", "pair=tiny", "progress=false", f"paths.results_dir={results}", *args]
    monkeypatch.setattr(sys, "argv", argv)
    with pytest.raises(SystemExit) as exc:
        main()
    return exc.value.code, capsys.readouterr().err


def assert_one_error_line(code: int, err: str, results: Path) -> None:
    lines = err.strip().splitlines()
    assert code == 2, err
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert "Traceback" not in err
    leftovers = [p for p in results.rglob("*")] if results.exists() else []
    assert leftovers == [], leftovers


def test_a_refused_run_leaves_no_results_folder_it_created_and_keeps_one_it_found(tmp_path, monkeypatch, capsys):
    # Hydra makes the results folder for its job folder before the run refuses the data: the
    # command removes what it created (issue 74: an empty results/ was left behind).
    bad = ["dataset=gsm8k", "dataset.num_fewshot=99"]
    fresh = tmp_path / "new" / "results"
    code, err = run_main([f"paths.data_dir={shared_data_dir()}", *bad], fresh, monkeypatch, capsys)
    assert code == 2 and err.startswith("error: ") and not (tmp_path / "new").exists()
    kept = tmp_path / "old"
    (kept / "mine").mkdir(parents=True)
    code, err = run_main([f"paths.data_dir={shared_data_dir()}", *bad], kept, monkeypatch, capsys)
    assert code == 2 and sorted(p.name for p in kept.iterdir()) == ["mine"]


@pytest.mark.parametrize("args", [c[1] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_setting_is_one_error_line(args, tmp_path, monkeypatch, capsys):
    results = tmp_path / "results"
    code, err = run_main([f"paths.data_dir={shared_data_dir()}", *args], results, monkeypatch, capsys)
    assert_one_error_line(code, err, results)


@pytest.mark.parametrize("files,args", [c[1:] for c in DATA_CASES], ids=[c[0] for c in DATA_CASES])
def test_bad_data_is_one_error_line(files, args, tmp_path, monkeypatch, capsys):
    data = tmp_path / "data"
    data.mkdir()
    for rel, text in files.items():
        _write(data / rel, text)
    results = tmp_path / "results"
    code, err = run_main([f"paths.data_dir={data}", "dataset.limit=2", *args], results, monkeypatch, capsys)
    assert_one_error_line(code, err, results)
    if files:
        assert str(data) in err  # names the file


@pytest.mark.parametrize(
    "args",
    [
        ["experiment=smoke_tiny", "generation.max_new_tokens=40000"],  # beyond the tiny target's 32768
        ["experiment=smoke_tiny", "dataset=gsm8k", "dataset.num_fewshot=8", "generation.max_new_tokens=30000"],
    ],
    ids=["max-new-beyond-context", "prompt-beyond-context"],
)
def test_beyond_the_context_is_one_error_line(args, tmp_path, monkeypatch, capsys):
    results = tmp_path / "results"
    code, err = run_main([f"paths.data_dir={shared_data_dir()}", *args], results, monkeypatch, capsys)
    assert_one_error_line(code, err, results)
    assert "context" in err


def test_instantiate_unwraps_config_error():
    from loosespec_bench.build import instantiate
    from loosespec_bench.errors import ConfigError

    with pytest.raises(ConfigError, match="num_fewshot"):
        instantiate({"_target_": "loosespec_bench.tasks.gsm8k.GSM8K", "num_fewshot": 99})


# Settings that every helper of a method, drafter or pair declares: each composes and passes
# the pre-check (a new option that validation does not know would be rejected here).
GOOD = [
    ["method=fly", "method.mode=vllm", "drafter.k=10"],
    ["method=fly", "method.near_limit=shrink", "method.draft_sampling=true", "method.theta_switch_off=false"],
    ["method=fly", "drafter=mla", "drafter.lookup=hf"],
    ["pair.draft.quantize=int8"], ["pair.draft.quantize=int4", "drafter.vocab_top=32768"],
    ["generation.temperature=1", "generation.top_p=0.9", "generation.top_k=50"],
    ["pair=qwen3_4b_32b"], ["method=dropmatch", "+method.lm_head_batch=1"],
    ["drafter=eagle3"], ["pair=smollm2_to_qwen25_coder", "drafter=model_xtok"],
    ["method=fly", "drafter=eagle3", "drafter.tree=true"], ["drafter=eagle2"], ["drafter=lookahead"],
    ["method=dropmatch", "drafter=eagle3_tree"],
]


@pytest.mark.parametrize("args", GOOD, ids=[" ".join(g) for g in GOOD])
def test_declared_options_pass_the_precheck(args):
    from loosespec_bench.__main__ import precheck

    precheck(args, resources=False)  # the settings; GPU pairs and hub heads are not on this machine


def test_every_experiment_at_every_scale_passes_the_precheck():
    from loosespec_bench.__main__ import precheck
    from loosespec_bench.settings.config import group_choices

    import importlib.util

    from loosespec_bench.errors import ConfigError

    refused = []
    for exp in group_choices("experiment"):
        for scale in group_choices("scale"):
            try:
                precheck([f"experiment={exp}", f"scale={scale}"], resources=False)  # settings (heads, GPUs: elsewhere)
            except ConfigError as err:
                if f"{exp} is sized for pair=" in str(err) and "no cpu scale of its own" in str(err):
                    refused.append((exp, scale))  # a node-sized pair at scale=cpu (check_scale_fits)
                    continue
                # An engine=vllm experiment where vLLM is not installed (its own environment): refused
                # with the line that says how to install it, nothing else.
                if importlib.util.find_spec("vllm") is not None or "make install-vllm" not in str(err):
                    raise
    # Issue 72: the 405B replication at scale=cpu would run the embedded pair under its name.
    assert ("replicate_fly_405b", "cpu") in refused and all(scale == "cpu" for _, scale in refused), refused


# ---- subcommands (issue 72 item 3): ls, validate (and --dry-run), status -----------------------

def _cli(argv: list[str], monkeypatch, capsys) -> tuple[int, str, str]:
    """main() on argv as typed, with a run refused: (exit status, stdout, stderr)."""
    import loosespec_bench.run.app as app

    def no_run(*args, **kwargs):
        raise AssertionError(f"{argv} would have run")

    monkeypatch.setattr(app, "run_recording_errors", no_run)
    monkeypatch.setattr(sys, "argv", ["loosespec_bench", *argv])
    with pytest.raises(SystemExit) as exc:
        main()
    out = capsys.readouterr()
    return exc.value.code, out.out, out.err


def test_ls_lists_each_option_with_its_description(monkeypatch, capsys):
    from loosespec_bench.settings.config import CONF_DIR, description, group_choices

    for word, group in (("methods", "method"), ("pair", "pair"), ("datasets", "dataset"), ("drafters", "drafter")):
        code, out, err = _cli(["ls", word], monkeypatch, capsys)
        assert code == 0 and err == "", err
        rows = {line.split()[0]: line for line in out.splitlines()[1:]}
        assert sorted(rows) == sorted(group_choices(group))
        for name, line in rows.items():
            assert line.rstrip().endswith(description(CONF_DIR / group / f"{name}.yaml")), line


def test_ls_experiments_marks_those_sized_for_a_scale(monkeypatch, capsys):
    from loosespec_bench.settings.config import CONF_DIR

    code, out, _ = _cli(["ls", "experiments"], monkeypatch, capsys)
    assert code == 0
    rows = {line.split()[0]: line for line in out.splitlines()[1:]}
    for name, line in rows.items():
        assert ("[cpu]" in line) == (CONF_DIR / "experiment_scale" / "cpu" / f"{name}.yaml").is_file(), line


@pytest.mark.parametrize("argv,expected", [
    (["ls", "method"], None),
    (["ls", "metods"], "did you mean methods?"),
    (["ls"], "ls needs a group"),
    (["ls", "methods", "pairs"], "ls takes one group"),
])
def test_ls_mistakes_are_one_line(argv, expected, monkeypatch, capsys):
    code, out, err = _cli(argv, monkeypatch, capsys)
    if expected is None:
        assert code == 0 and out
        return
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1 and expected in err, err


@pytest.mark.parametrize("name", ["ls", "validate", "status"])
def test_each_subcommand_answers_help(name, monkeypatch, capsys):
    code, out, err = _cli([name, "--help"], monkeypatch, capsys)
    assert code == 0 and out.startswith(f"usage: python -m loosespec_bench {name}") and err == ""


@pytest.mark.parametrize("first", [["validate"], ["--dry-run"], ["--dry_run"]])
def test_validate_and_dry_run_print_the_points_and_run_nothing(first, tmp_path, monkeypatch, capsys):
    results = tmp_path / "results"
    argv = [*first, "-m", "experiment=smoke_tiny", "drafter.k=2,3", f"paths.results_dir={results}",
            f"paths.data_dir={shared_data_dir()}"]
    code, out, err = _cli(argv, monkeypatch, capsys)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == "ok: 2 points composed and pre-checked; nothing ran"
    assert [ln.split()[:2] for ln in lines[1:3]] == [["pending", "drafter.k=2"], ["pending", "drafter.k=3"]]
    assert all(str(results / "smoke_tiny") in ln for ln in lines[1:3])
    assert "python -m loosespec_bench.plan -e smoke_tiny -- drafter.k=2,3" in lines[3]
    assert not results.exists()  # nothing ran, no folder


def test_validate_refuses_what_a_run_refuses(tmp_path, monkeypatch, capsys):
    code, out, err = _cli(["validate", "method=fyl", f"paths.results_dir={tmp_path / 'r'}"], monkeypatch, capsys)
    assert code == 2 and out == "" and err.startswith("error: ") and "did you mean 'fly'?" in err


def test_dry_run_from_the_shell(tmp_path):
    # The real command line, as a user types it: its own process, its exit status.
    import subprocess

    argv = [sys.executable, "-m", "loosespec_bench", "experiment=smoke_tiny", "--dry-run", f"paths.results_dir={tmp_path / 'r'}",
            f"paths.data_dir={shared_data_dir()}"]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("ok: 1 point composed and pre-checked; nothing ran")
    assert not (tmp_path / "r").exists()


def test_status_reads_each_point_from_its_folder(tmp_path, monkeypatch, capsys):
    from hydra import compose, initialize_config_dir

    from loosespec_bench.settings.config import CONF_DIR
    from loosespec_bench.store.run_folder import run_dir

    results = tmp_path / "results"
    overrides = ["experiment=smoke_tiny", f"paths.results_dir={results}"]
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        done = run_dir(compose(config_name="config", overrides=[*overrides, "drafter.k=2"]))
    done.mkdir(parents=True)
    (done / "summary.json").write_text("{}")
    code, out, err = _cli(["status", "-m", *overrides, "drafter.k=2,3"], monkeypatch, capsys)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == "1 done, 1 pending of 2 points"
    assert lines[1].split()[:2] == ["done", "drafter.k=2"] and str(done) in lines[1]
    assert lines[2].split()[:2] == ["pending", "drafter.k=3"]
    assert sorted(p.name for p in results.rglob("*")) == sorted(["smoke_tiny", done.name, "summary.json"])  # wrote nothing


def test_status_of_a_bad_command_is_advice(monkeypatch, capsys):
    code, out, err = _cli(["status", "method=fyl"], monkeypatch, capsys)
    assert code == 2 and "did you mean 'fly'?" in err and len(err.strip().splitlines()) == 1


def test_a_busy_machine_is_said_once_a_run_starts_and_never_beside_an_error_line(tmp_path, monkeypatch, capsys):
    # The CI machine is loaded (the suite and two Slurm test processes share its cores): the note
    # printed before the run's own checks once turned every refusal into two lines.
    from loosespec_bench import omp

    monkeypatch.setattr(omp, "_busy_seen", (7.2, 2))  # what default_wait_policy saw at import
    monkeypatch.setenv("OMP_WAIT_POLICY", "PASSIVE")
    code, err = run_main([f"paths.data_dir={shared_data_dir()}", "dataset=gsm8k", "dataset.num_fewshot=99"],
                         tmp_path / "refused", monkeypatch, capsys)
    assert_one_error_line(code, err, tmp_path / "refused")
    monkeypatch.setattr(sys, "argv", ["loosespec_bench", "experiment=smoke_tiny", "dataset.limit=1", "progress=false",
                                      f"paths.results_dir={tmp_path / 'r'}", f"paths.data_dir={shared_data_dir()}",
                                      "hydra.run.dir=" + str(tmp_path / "h")])
    main()
    err = capsys.readouterr().err
    busy = [ln for ln in err.splitlines() if "this machine is busy" in ln]
    assert len(busy) == 1 and "load average 7.2" in busy[0] and "on 2 cores" in busy[0] and "OMP_WAIT_POLICY=PASSIVE" in busy[0]
    assert list((tmp_path / "r").rglob("summary.json")), err  # the run it was said for ran
