"""Every input of issue 24's hostile-input probe (its appendix), each with its expected single
`error:` line and exit code 2, before any model loads, nothing left behind.

The table below is also what python -m tests.probe_hostile_inputs runs through the real command
lines to count (tried / clean error line / traceback / silent). Here the main CLI's cases run
in-process (loosespec_bench.__main__.main, as tests/test_main.py does), the re-scorer's and the
plan's through their main(argv); a few run as subprocesses for what only the CLI shows (Hydra
flags, LOOSESPEC_LOG before --help, environment variables read at import).
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import pytest

from .conftest import REPO, shared_data_dir

from loosespec_bench.models.embedded import is_converted, missing_parts

_EMBEDDED_MISSING = not is_converted("qwen2.5-coder-0.5b-instruct") and bool(missing_parts("qwen2.5-coder-0.5b-instruct"))

GOOD_GSM8K = '{"question": "1+1?", "answer": "2 #### 2"}\n'
HE_ROW = {"task_id": "HumanEval/0", "prompt": "def f():\n", "test": "def check(c):\n    pass\n", "entry_point": "f"}


@dataclass
class Case:
    id: str
    kind: str  # L: python -m loosespec_bench; S: python -m loosespec_bench.score; P: the plan; R: the report
    args: list[str]
    fragment: str = ""  # a piece of the expected error line
    env: dict[str, str] = field(default_factory=dict)
    files: dict[str, str | bytes] = field(default_factory=dict)  # the data dir's files (L) / the run folder's (S) / the results folder's (R)
    cli_only: bool = False  # only a subprocess shows it (environment read at import, Hydra's own flags)
    # L only, through the command line: the results folder is a fresh tmpfs of this size in a
    # private mount namespace ("ro": read-only), so that a full or read-only disk is real.
    mount: str = ""
    mount_at: str = ""  # the mount's folder under the temp folder, when not the results folder
    # Made in the temp folder before the command (links, fake tools); `{TMP}` in args and env
    # values is the temp folder.
    setup: Callable[[Path], None] | None = None


# `L` cases run with pair=tiny progress=false, a fresh results folder and the shared data sets
# (or, with `files`, a data dir holding only those files).
MAIN: list[Case] = [
    # 3. a required key deleted
    *[Case(f"delete-{k}", "L", [f"~{k}"], "missing") for k in
      ("seed", "generation.temperature", "pair.target", "pair.dtype", "pair.device", "baseline", "experiment_name",
       "chat_template", "paths.results_dir")],
    # 4. devices
    Case("device-cuda", "L", ["pair.device=cuda"], "CUDA"),
    Case("device-cuda-abc", "L", ["pair.device=cuda:abc"], "pair.device"),
    Case("device-mps", "L", ["pair.device=mps"], "MPS"),
    Case("device-auto", "L", ["pair.device=auto"], "pair.device"),
    Case("draft-device-tpu", "L", ["pair.draft_device=tpu"], "pair.draft_device"),
    Case("draft-device-cuda9", "L", ["pair.draft_device=cuda:9"], "pair.draft_device"),
    # 5. corrupt data (file:line named)
    Case("gsm8k-not-utf8", "L", ["dataset=gsm8k"], "line 2", files={"gsm8k/test.jsonl": GOOD_GSM8K.encode() + b'{"question": "\xff", "answer": "1 #### 1"}\n'}),
    Case("mgsm-not-utf8", "L", [], "UTF-8", files={"mgsm/mgsm_en.tsv": b"What is 1+1?\t2\n\xff\xfe\t3\n"}),
    Case("gsm8k-test-is-a-folder", "L", ["dataset=gsm8k"], "test.jsonl", files={"gsm8k/test.jsonl/x": "x"}),
    Case("gsm8k-answer-number", "L", ["dataset=gsm8k"], "line 1", files={"gsm8k/test.jsonl": '{"question": "x", "answer": 2}\n'}),
    Case("gsm8k-question-null", "L", ["dataset=gsm8k"], "line 1", files={"gsm8k/test.jsonl": '{"question": null, "answer": "1 #### 1"}\n'}),
    Case("humaneval-task-id-int", "L", ["dataset=humaneval"], "line 1", files={"humaneval/HumanEval.jsonl.gz": gzip.compress((json.dumps({**HE_ROW, "task_id": 5}) + "\n").encode())}),
    Case("humaneval-task-id-null", "L", ["dataset=humaneval"], "line 1", files={"humaneval/HumanEval.jsonl.gz": gzip.compress((json.dumps({**HE_ROW, "task_id": None}) + "\n").encode())}),
    Case("humaneval-duplicate-id", "L", ["dataset=humaneval"], "twice", files={"humaneval/HumanEval.jsonl.gz": gzip.compress((json.dumps(HE_ROW) + "\n" + json.dumps(HE_ROW) + "\n").encode())}),
    Case("mt-bench-id-text", "L", ["dataset=mt_bench"], "line 1", files={"mt_bench/question.jsonl": '{"question_id": "eighty", "category": "math", "turns": ["a", "b"]}\n'}),
    Case("mt-bench-turns-text", "L", ["dataset=mt_bench"], "line 1", files={"mt_bench/question.jsonl": '{"question_id": 81, "category": "math", "turns": "hello"}\n'}),
    Case("spec-bench-turns-number", "L", ["dataset=spec_bench"], "line 1", files={"spec_bench/question.jsonl": '{"question_id": 1, "category": "qa", "turns": 5}\n'}),
    Case("ifeval-unknown-instruction", "L", ["dataset=ifeval", f"+dataset.nltk_data={shared_data_dir() / 'ifeval' / 'nltk_data'}"], "no:such_check", files={"ifeval/input_data.jsonl": '{"key": 1, "prompt": "Hi", "instruction_id_list": ["no:such_check"], "kwargs": [{}]}\n'}),
    # 6. results folder faults
    Case("results-dir-a-file", "L", ["paths.results_dir=/etc/hostname"], "not a folder"),
    Case("results-dir-env-a-file", "L", [], "not a folder", env={"LOOSESPEC_RESULTS_DIR": "/etc/hostname"}),
    Case("results-dir-proc", "L", ["paths.results_dir=/proc/x"], "paths.results_dir"),
    Case("results-dir-null", "L", ["paths.results_dir=null"], "paths.results_dir"),
    Case("results-dir-dict", "L", ["+paths.results_dir.x=1"], "paths.results_dir"),
    Case("results-dir-env-empty", "L", [], "paths.results_dir", env={"LOOSESPEC_RESULTS_DIR": ""}),
    # 7, 8. environment and classes
    Case("log-garbage-help", "L", ["--help"], "LOOSESPEC_LOG", env={"LOOSESPEC_LOG": "garbage"}, cli_only=True),
    Case("log-empty-help", "L", ["--help"], "LOOSESPEC_LOG", env={"LOOSESPEC_LOG": ""}, cli_only=True),
    Case("site-conf-missing", "L", [], "LOOSESPEC_SITE_CONF", env={"LOOSESPEC_SITE_CONF": "/nonexistent/site"}),
    Case("cache-dir-a-file", "L", ["drafter.vocab_top=100"], "LOOSESPEC_CACHE_DIR", env={"LOOSESPEC_CACHE_DIR": "/etc/passwd"}),
    Case("method-target-print", "L", ["method._target_=builtins.print"], "method._target_"),
    Case("drafter-target-os-system", "L", ["drafter._target_=os.system"], "drafter._target_"),
    Case("dataset-target-a-drafter", "L", ["dataset._target_=loosespec_bench.drafters.ModelDrafter"], "dataset._target_"),
    # 9. pair compatibility, model paths
    # Without the embedded pair's packages (CI's `make install`) the same input is refused for them.
    Case("draft-vocab-mismatch", "L", ["pair.draft.path=embedded:qwen2.5-coder-0.5b-instruct"],
         "needs its weight packages" if _EMBEDDED_MISSING else "vocabulary"),
    Case("target-path-etc", "L", ["pair.target.path=/etc"], "config.json"),
    Case("draft-path-missing", "L", ["pair.draft.path=/nonexistent"], "pair.draft.path"),
    Case("target-device-map-tiny", "L", ["+pair.target.device_map=auto"], "tiny"),
    # 10-12. sweeps and Hydra flags
    Case("sweep-glob", "L", ["-m", "drafter.k=glob(*)"], "no points"),
    Case("sweep-glob-group", "L", ["-m", "drafter=glob(*)", "dataset.limit=0"], "dataset.limit"),
    Case("sweep-experiment-params", "L", ["-m", "experiment=fly_ablation_k", "scale=cpu", "method.window=12"], "method.window=12"),
    Case("sweep-missing-data", "L", ["-m", "dataset=gsm8k,humaneval", "paths.data_dir=/nonexistent"], "paths.data_dir"),
    Case("sweep-past-256", "L", ["-m", "drafter.k=5,0", "seed=range(0,257)"], "drafter.k=0"),
    Case("cfg-job-bogus-method", "L", ["--cfg", "job", "method=bogus"], "method='bogus'", cli_only=True),
    Case("cn-bogus-method", "L", ["-cn", "config", "method=bogus"], "method='bogus'", cli_only=True),
    Case("cfg-job-k0", "L", ["--cfg", "job", "drafter.k=0"], "drafter.k=0", cli_only=True),
    Case("rerun-missing", "L", ["--experimental-rerun", "/nonexistent"], "experimental-rerun", cli_only=True),
    Case("cfg-resolve-bad-interpolation", "L", ["--cfg", "job", "--resolve", "seed=${nope}"], "resolved", cli_only=True),
    Case("cn-device-cuda", "L", ["-cn", "config", "pair.device=cuda"], "CUDA", cli_only=True),
    Case("cn-unknown-config", "L", ["-cn", "nope"], "nope", cli_only=True),
    # 13. path traversal
    Case("pair-name-traversal", "L", ["pair.name=../../../../escape"], "pair.name"),
    Case("experiment-name-absolute", "L", ["experiment_name=/abs/dir"], "experiment_name"),
    Case("experiment-name-climbs", "L", ["experiment_name=../../outside"], "experiment_name"),
    # 14. pair.* and hydra.* keys
    Case("pair-target-quantize", "L", ["+pair.target.quantize=int4"], "pair.target.quantize"),
    Case("pair-foo", "L", ["+pair.foo=1"], "pair.foo"),
    Case("pair-draft-bar", "L", ["+pair.draft.bar=x"], "pair.draft.bar"),
    Case("hydra-foo", "L", ["+hydra.foo=1"], "hydra.foo"),
    # 15. bookkeeping names
    Case("spd-named-fly", "L", ["method=spd", "method.name=fly"], "method.name='fly'"),
    Case("spd-named-ar", "L", ["method=spd", "method.name=ar"], "method.name='ar'"),
    Case("dataset-name-empty", "L", ["dataset.name=''"], "dataset.name"),
    Case("drafter-named-pld", "L", ["drafter.name=pld"], "drafter.name='pld'"),
    # 16. nonsense that passed
    Case("stop-string-empty", "L", ["dataset.stop_strings=['']"], "dataset.stop_strings"),
    Case("sandbox-memory-1", "L", ["dataset=humaneval", "dataset.sandbox.memory_mb=1"], "dataset.sandbox.memory_mb"),
    Case("sandbox-timeout-tiny", "L", ["dataset=humaneval", "dataset.sandbox.timeout_s=0.001"], "dataset.sandbox.timeout_s"),
    Case("sandbox-hide-root", "L", ["dataset=humaneval", "dataset.sandbox.hide_paths=[/]"], "hide_paths"),
    Case("sandbox-process-as-root", "L", ["dataset=humaneval", "dataset.sandbox.isolation=process"], "allow_same_user"),
    # 18. checks that ran only after a model loaded
    Case("nltk-data-missing", "L", ["dataset=ifeval", "+dataset.nltk_data=/nonexistent"], "nltk_data"),
    Case("max-new-beyond-context", "L", ["generation.max_new_tokens=32768"], "context"),
    Case("eagle3-head-missing", "L", ["drafter=eagle3", "drafter.head_path=/nonexistent/head"], "head_path"),
    # settings
    Case("k-zero", "L", ["drafter.k=0"], "drafter.k=0"),
    Case("k-huge", "L", ["drafter.k=100000"], "drafter.k=100000"),
    Case("temperature-nan", "L", ["generation.temperature=nan"], "generation.temperature"),
    Case("eagle-depth-zero", "L", ["drafter=eagle3", "drafter.tree=true", "drafter.depth=0"], "drafter.depth=0"),
    Case("fly-mode-bogus", "L", ["method=fly", "method.mode=bogus"], "method.mode"),
    Case("dropmatch-p-one", "L", ["method=dropmatch", "method.p=1.0"], "method.p"),
]

def _metrics() -> dict:
    from loosespec_bench.generation import GenerationOutput
    from loosespec_bench.measure.metrics import sample_metrics

    gen = GenerationOutput(new_tokens=[1, 2], stop_reason="eos", drafted=[2], accepted=[1], emitted=[2], prefill_s=0.1, decode_s=0.2)
    return sample_metrics(gen, 5)


RUN_RECORD = {
    "id": "gsm8k/0", "prompt_sha256": "x", "output_text": "The answer is 18.", "output_ids": [1, 2],
    "metrics": _metrics(), "score": {"correct": True},
}
GSM8K_CONFIG = "dataset:\n  _target_: loosespec_bench.tasks.gsm8k.GSM8K\n  name: gsm8k\n  num_fewshot: 0\n  limit: 2\n"


def _lines(*recs: object) -> str:
    return "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in recs)


# `S` cases: a run folder made of `files` ({RESULT}: the folder), or a completions file.
SCORE: list[Case] = [
    Case("config-bad-yaml", "S", ["{RESULT}"], "config.yaml", files={"config.yaml": "a: [unclosed\n", "samples.jsonl": _lines(RUN_RECORD)}),
    Case("config-a-list", "S", ["{RESULT}"], "config.yaml", files={"config.yaml": "- 1\n- 2\n", "samples.jsonl": _lines(RUN_RECORD)}),
    Case("config-empty", "S", ["{RESULT}"], "config.yaml", files={"config.yaml": "{}\n", "samples.jsonl": _lines(RUN_RECORD)}),
    Case("config-target-os-system", "S", ["{RESULT}"], "dataset._target_", files={"config.yaml": "dataset:\n  _target_: os.system\n  name: x\n", "samples.jsonl": _lines(RUN_RECORD)}),
    Case("only-incomplete-records", "S", ["{RESULT}"], "no readable sample record", files={"config.yaml": GSM8K_CONFIG, "samples.jsonl": _lines(
        {"id": "gsm8k/3", "prompt_sha256": "x"}, {**RUN_RECORD, "metrics": None}, {**RUN_RECORD, "id": ["gsm8k/0"]}, "garbage")}),
    Case("samples-a-folder", "S", ["{RESULT}"], "folder", files={"config.yaml": GSM8K_CONFIG, "samples.jsonl/x": "x"}),
    Case("set-no-equals", "S", ["{RESULT}", "--set", "foo"], "KEY=VALUE", files={"config.yaml": GSM8K_CONFIG, "samples.jsonl": _lines(RUN_RECORD)}),
    Case("set-unknown-key", "S", ["{RESULT}", "--set", "bogus=1"], "bogus", files={"config.yaml": GSM8K_CONFIG, "samples.jsonl": _lines(RUN_RECORD)}),
    Case("set-limit-text", "S", ["{RESULT}", "--set", "limit=abc"], "limit", files={"config.yaml": GSM8K_CONFIG, "samples.jsonl": _lines(RUN_RECORD)}),
    Case("workers-negative", "S", ["{RESULT}", "--workers", "-1"], "--workers", files={"config.yaml": GSM8K_CONFIG, "samples.jsonl": _lines(RUN_RECORD)}),
    Case("workers-zero", "S", ["{RESULT}", "--workers", "0"], "--workers", files={"config.yaml": GSM8K_CONFIG, "samples.jsonl": _lines(RUN_RECORD)}),
    Case("completions-empty-list", "S", ["{RESULT}/c.jsonl", "--dataset", "gsm8k"], "line 1", files={"c.jsonl": '{"id": "gsm8k/0", "completions": []}\n'}),
    Case("completions-choices-number", "S", ["{RESULT}/c.jsonl", "--dataset", "gsm8k"], "line 1", files={"c.jsonl": '{"id": "gsm8k/0", "choices": 5}\n'}),
    Case("completions-choices-no-turns", "S", ["{RESULT}/c.jsonl", "--dataset", "gsm8k"], "line 1", files={"c.jsonl": '{"id": "gsm8k/0", "choices": [{}]}\n'}),
    Case("completions-garbage", "S", ["{RESULT}/c.jsonl", "--dataset", "gsm8k"], "no readable", files={"c.jsonl": b"\x00\xffgarbage\n"}),
    Case("completions-empty-file", "S", ["{RESULT}/c.jsonl", "--dataset", "gsm8k"], "no readable", files={"c.jsonl": ""}),
]
SANDBOX_SET = [  # dataset settings of a code set through --set
    Case("set-sandbox-timeout-text", "S", ["{RESULT}/c.jsonl", "--dataset", "humaneval", "--set", "sandbox.timeout_s=abc"], "sandbox.timeout_s", files={"c.jsonl": '{"task_id": "HumanEval/0", "completion": "pass"}\n'}),
    Case("set-sandbox-timeout-negative", "S", ["{RESULT}/c.jsonl", "--dataset", "humaneval", "--set", "sandbox.timeout_s=-5"], "sandbox.timeout_s", files={"c.jsonl": '{"task_id": "HumanEval/0", "completion": "pass"}\n'}),
    Case("set-sandbox-unknown", "S", ["{RESULT}/c.jsonl", "--dataset", "humaneval", "--set", "sandbox.bogus=1"], "sandbox.bogus", files={"c.jsonl": '{"task_id": "HumanEval/0", "completion": "pass"}\n'}),
]
PLAN: list[Case] = [
    Case("plan-k0", "P", ["plan", "-e", "fly_main", "--", "scale=cpu", "drafter.k=0"], "drafter.k=0"),
    Case("plan-limit0", "P", ["plan", "-e", "fly_main", "--", "scale=cpu", "dataset.limit=0"], "dataset.limit=0"),
    Case("plan-foo", "P", ["plan", "-e", "fly_main", "--", "scale=cpu", "+foo=1"], "foo"),
    Case("plan-temperature-nan", "P", ["plan", "-e", "replicate_fly_70b", "--", "generation.temperature=nan"], "generation.temperature"),
    Case("plan-k-huge", "P", ["plan", "-e", "replicate_fly_405b", "--", "drafter.k=100000"], "drafter.k=100000"),
    Case("plan-fill-negative", "P", ["plan", "-e", "fly_main", "--fill", "-5", "--", "scale=cpu"], "--fill"),
    Case("plan-tps-x", "P", ["plan", "-e", "fly_main", "--tps", "x", "--", "scale=cpu"], "--tps"),
    Case("plan-status-results-a-file", "P", ["status", "-e", "fly_main", "--", "scale=cpu"], "LOOSESPEC_RESULTS_DIR", env={"LOOSESPEC_RESULTS_DIR": "/etc/hostname"}),
]

# Issue 50: the rest of issue 24's second round (26 inputs that still ended silently, in a
# traceback, or only after a model loaded).
REPORT_CONFIG = """experiment_name: exp
seed: 0
method:
  name: spd
  _target_: loosespec_bench.verifiers.spd.SPD
drafter:
  name: model
  k: 4
pair:
  name: tiny
  dtype: float32
  target: {path: 'tiny:0'}
  draft: {path: 'tiny:1'}
dataset:
  name: gsm8k
  limit: 1
generation:
  temperature: 0.0
"""
REPORT_SUMMARY = {"experiment": "exp", "method": "spd", "drafter": "model", "k": 4, "pair": "tiny", "dataset": "gsm8k",
                  "temperature": 0.0, "n_samples": 1, "tau": 4.8, "speedup": 1.3, "accuracy": 1.0, "baseline_accuracy": 1.0,
                  "retention": 1.0, "acceptance_by_position": [0.9, 0.8], "date": "2026-12-01T00:00:00+00:00"}


def report_run(summary: object = None, config: str | bytes = REPORT_CONFIG, samples: str | bytes | None = None, **changes: object) -> dict[str, str | bytes]:
    """One finished run folder (exp/run1) for the report, with one part damaged."""
    if summary is None:
        summary = json.dumps({**REPORT_SUMMARY, **changes})
    return {"exp/run1/config.yaml": config, "exp/run1/summary.json": summary,  # type: ignore[dict-item]
            "exp/run1/samples.jsonl": _lines(RUN_RECORD) if samples is None else samples}


REPORT = ["--results", "{RESULT}"]
ALL_OUT = ["all", *REPORT, "--out", "{OUT}"]
ROUND2_REST: list[Case] = [
    # silent: the main CLI
    Case("ar-with-drafter-k0", "L", ["method=ar", "drafter.k=0"], "drafter.k=0"),
    Case("seed-three-times", "L", ["seed=1", "seed=2", "seed=3"], "seed"),
    Case("tiny-negative-seed", "L", ["pair.target.path=tiny:-1"], "tiny:-1"),
    Case("omp-threads-text", "L", [], "OMP_NUM_THREADS", env={"OMP_NUM_THREADS": "abc"}),
    Case("wandb-mode-garbage", "L", ["logger=wandb"], "WANDB_MODE", env={"WANDB_MODE": "garbage"}),
    Case("mgsm-answer-inf", "L", [], "line 1", files={"mgsm/mgsm_en.tsv": "What is 1+1?\tinf\n"}),
    Case("mgsm-answer-nan", "L", [], "line 1", files={"mgsm/mgsm_en.tsv": "What is 1+1?\tnan\n"}),
    Case("results-dir-read-only", "L", [], "read-only", cli_only=True, mount="ro"),
    # silent: the report
    Case("report-empty-results", "R", ALL_OUT, "no run folder", files={}),
    Case("report-summary-not-json", "R", ["index", *REPORT], "summary.json", files=report_run(b"\x00\xff garbage")),
    Case("report-summary-a-list", "R", ["index", *REPORT], "summary.json", files=report_run("[1,2]")),
    Case("report-tau-text", "R", ["index", *REPORT], "tau", files=report_run(tau="fast")),
    Case("report-k-text", "R", ["index", *REPORT], "k=", files=report_run(k="five")),
    Case("report-n-samples-text", "R", ["index", *REPORT], "n_samples", files=report_run(n_samples="many")),
    Case("report-acceptance-text-index", "R", ["index", *REPORT], "acceptance_by_position", files=report_run(acceptance_by_position=["a", "b"])),
    Case("report-acceptance-text-plots", "R", ["plots", *REPORT, "--out", "{OUT}"], "acceptance_by_position", files=report_run(acceptance_by_position=["a", "b"])),
    Case("report-method-int", "R", ["index", *REPORT], "method", files=report_run(method=5)),
    Case("report-experiment-int", "R", ["index", *REPORT], "experiment", files=report_run(experiment=7)),
    Case("report-config-not-yaml", "R", ["index", *REPORT], "config.yaml", files=report_run(config="a: [1\n\x00")),
    Case("report-config-dataset-scalar", "R", ["index", *REPORT], "dataset", files=report_run(config=REPORT_CONFIG.split("dataset:")[0] + "dataset: 5\n")),
    Case("report-record-id-list", "R", ["index", *REPORT], "line 1", files=report_run(samples=_lines({**RUN_RECORD, "id": ["gsm8k/0"]}))),
    Case("report-record-metrics-text", "R", ["index", *REPORT], "metrics", files=report_run(samples=_lines({**RUN_RECORD, "metrics": "fast"}))),
    # tracebacks
    Case("report-temperature-text", "R", ALL_OUT, "temperature", files=report_run(temperature="hot")),
    Case("results-disk-full", "L", ["dataset.limit=4", "generation.max_new_tokens=48"], "results_dir", cli_only=True, mount="20k"),
    Case("sweep-data-lacks-humaneval", "L", ["-m", "dataset=gsm8k,humaneval"], "HumanEval.jsonl.gz", files={"gsm8k/test.jsonl": GOOD_GSM8K}),
    # late: a clean line, but after a model loaded
    Case("target-hub-id-offline", "L", ["pair.target.path=nosuchorg/nosuchmodel"], "nosuchorg/nosuchmodel", env={"HF_HUB_OFFLINE": "1"}),
]

# Issue 41, third round: what is checked before any model loads (checks.py, "issue 41" section).
LONG_NAME = "a" * 300  # one folder name over NAME_MAX (255 bytes)
LONG_PATH = "/".join(["b" * 200] * 25)  # every name short, the whole over PATH_MAX (4096 bytes)


def _store_root_a_file(tmp: Path) -> None:
    _write(tmp / "results" / "_baselines", "not a folder\n")


def _store_root_link_outside(tmp: Path) -> None:
    (tmp / "elsewhere").mkdir()
    (tmp / "results").mkdir()
    os.symlink(tmp / "elsewhere", tmp / "results" / "_baselines")


def _fake_slurm(sinfo: str | None) -> Callable[[Path], None]:
    """A bin folder for PATH: no Slurm client at all (sinfo None), or sbatch and a sinfo script."""
    def make(tmp: Path) -> None:
        bin_dir = tmp / "bin"
        bin_dir.mkdir()
        if sinfo is not None:
            for name, body in (("sbatch", "exit 0"), ("sinfo", sinfo)):
                (bin_dir / name).write_text(f"#!/bin/sh\n{body}\n")
                (bin_dir / name).chmod(0o755)
    return make


SLURM_DOWN = "echo 'sinfo: error: Unable to contact slurm controller (connect failure)' >&2; exit 1"
ROUND3: list[Case] = [
    # path lengths
    Case("results-dir-name-over-255", "L", [f"paths.results_dir={{TMP}}/{LONG_NAME}/r"], "error: paths.results_dir='"),
    Case("results-dir-over-path-max", "L", [f"paths.results_dir={{TMP}}/{LONG_PATH}"], "(PATH_MAX)); choose a shorter paths.results_dir"),
    Case("experiment-name-over-path-max", "L", ["experiment_name=" + "/".join(["e" * 120] * 40)], "PATH_MAX"),
    Case("data-dir-name-over-255", "L", [f"paths.data_dir=/tmp/{LONG_NAME}"], "paths.data_dir"),
    Case("cache-dir-env-over-255", "L", [], "LOOSESPEC_CACHE_DIR", env={"LOOSESPEC_CACHE_DIR": f"/tmp/{LONG_NAME}"}),
    Case("results-dir-env-over-255", "L", [], "LOOSESPEC_RESULTS_DIR", env={"LOOSESPEC_RESULTS_DIR": f"{{TMP}}/{LONG_NAME}"}),
    Case("results-dir-multibyte-name", "L", ["paths.results_dir='{TMP}/" + "\u00e9" * 150 + "'"], "is 300 bytes"),  # 150 characters
    # engine keys and names
    Case("engine-name-vllm-on-hf", "L", ["engine.name=vllm"], "engine.name='vllm'"),
    Case("engine-name-unknown", "L", ["engine.name=bogus"], "not a known engine"),
    Case("engine-unknown-key", "L", ["+engine.foo=1"], "engine.foo"),
    Case("engine-hf-batch-size", "L", ["+engine.batch_size=4"], "engine.batch_size"),
    Case("engine-target-not-an-engine", "L", ["engine._target_=builtins.print"], "engine._target_"),
    Case("engine-vllm-dropmatch", "L", ["engine=vllm", "pair=qwen25_coder_embedded", "method=dropmatch"], "engine=vllm"),
    Case("engine-vllm-unknown-key", "L", ["engine=vllm", "+engine.foo=1"], "engine.foo"),
    Case("hydra-run-dir-name-over-255", "L", [f"hydra.run.dir={{TMP}}/{LONG_NAME}"], "hydra.run.dir"),
    Case("hydra-sweep-dir-name-over-255", "L", ["-m", f"hydra.sweep.dir={{TMP}}/{LONG_NAME}", "drafter.k=3,4"], "hydra.sweep.dir"),
    Case("baselines-dir-name-over-255", "L", ["baseline=shared", f"paths.baselines_dir={{TMP}}/{LONG_NAME}"], "shorter paths.baselines_dir"),
    # Hydra's working folder
    Case("hydra-job-chdir", "L", ["hydra.job.chdir=true"], "hydra.job.chdir"),
    # the shared baseline store
    Case("store-root-a-file", "L", ["baseline=shared"], "_baselines", setup=_store_root_a_file),
    Case("store-root-link-outside", "L", ["baseline=shared"], "symbolic link", setup=_store_root_link_outside),
    Case("store-root-a-file-second-point", "L", ["-m", "baseline=paired,shared"], "sweep point baseline=shared", setup=_store_root_a_file),
    Case("baselines-dir-a-file", "L", ["baseline=shared", "paths.baselines_dir=/etc/hostname"], "paths.baselines_dir"),
    Case("baselines-dir-read-only", "L", ["baseline=shared", "paths.baselines_dir={TMP}/store"], "read-only", cli_only=True,
         mount="ro", mount_at="store"),
    # run-id collisions inside a sweep
    Case("sweep-same-point-twice", "L", ["-m", "drafter.k=3,3"], "listed twice"),
    Case("sweep-values-outside-run-id", "L", ["-m", "timing.tolerance=0.25,0.5"], "run id does not look"),
    # the Slurm launcher without a cluster
    Case("slurm-no-client", "L", ["-m", "hydra/launcher=slurm", "drafter.k=3,4"], "sbatch is not on PATH",
         env={"PATH": "{TMP}/bin"}, setup=_fake_slurm(None)),
    Case("slurm-controller-down", "L", ["-m", "hydra/launcher=slurm", "drafter.k=3,4"], "cannot be reached",
         env={"PATH": "{TMP}/bin:/usr/bin:/bin"}, setup=_fake_slurm(SLURM_DOWN)),
]
ALL = MAIN + SCORE + SANDBOX_SET + PLAN + ROUND2_REST + ROUND3


def _write(path: Path, data: str | bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data if isinstance(data, bytes) else data.encode())


def prepare(case: Case, tmp: Path) -> tuple[list[str], dict[str, str], Path]:
    """(command line after the module, environment, the folder that must stay clean)."""
    env = {"LOOSESPEC_DATA_DIR": str(shared_data_dir()), **{k: v.replace("{TMP}", str(tmp)) for k, v in case.env.items()}}
    results = tmp / "results"
    if case.setup is not None:
        case.setup(tmp)
    if case.kind == "L":
        data = str(shared_data_dir())
        if case.files:
            data_dir = tmp / "data"
            for rel, text in case.files.items():
                _write(data_dir / rel, text)
            data = str(data_dir)
        env["LOOSESPEC_DATA_DIR"] = data
        # Hydra's parser takes its flags before the overrides (-m first); a key is given once
        # (a key given twice is itself refused), so a case's own value replaces the default's.
        flags = [a for a in case.args if a in ("-m", "--multirun")]
        given = {a.lstrip("+~").split("=", 1)[0] for a in case.args}
        defaults = [d for d in ("pair=tiny", "progress=false", "dataset.limit=2") if d.split("=", 1)[0] not in given]
        args = [*flags, *defaults, *(a.replace("{TMP}", str(tmp)) for a in case.args if a not in flags)]
        if "LOOSESPEC_RESULTS_DIR" not in case.env and not any(a.lstrip("+~").startswith("paths.results_dir") for a in case.args):
            args.append(f"paths.results_dir={results}")
        return args, env, results
    if case.kind == "S":
        folder = tmp / "run"
        folder.mkdir()
        for rel, text in case.files.items():
            _write(folder / rel, text)
        return [a.replace("{RESULT}", str(folder)) for a in case.args], env, folder
    if case.kind == "R":
        results.mkdir()
        for rel, text in case.files.items():
            _write(results / rel, text)
        # The folder that must stay clean is the whole temp folder: the results and --out.
        return [a.replace("{RESULT}", str(results)).replace("{OUT}", str(tmp / "reports")) for a in case.args], env, tmp
    env.setdefault("LOOSESPEC_RESULTS_DIR", str(results))
    return list(case.args), env, results


def snapshot(folder: Path) -> dict[str, bytes]:
    if not folder.exists():
        return {}
    return {str(p.relative_to(folder)): (p.read_bytes() if p.is_file() else b"<dir>") for p in sorted(folder.rglob("*"))}


MODULE = {"L": "loosespec_bench", "S": "loosespec_bench.score", "P": "loosespec_bench.plan", "R": "loosespec_bench.report"}


def can_mount() -> bool:
    """Whether this process may mount a tmpfs in a private mount namespace (root, or
    CAP_SYS_ADMIN: the containers these tests run in)."""
    import shutil

    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "-m", "sh", "-c", "mount -t tmpfs -o size=4k tmpfs /mnt"], capture_output=True)
    return probe.returncode == 0


def mounted(case: Case, command: list[str], results: Path) -> list[str]:
    """`command` with the results folder a fresh tmpfs (case.mount: its size, or "ro" for a
    read-only one), in a private mount namespace that ends with the command."""
    import shlex

    results.mkdir(parents=True, exist_ok=True)
    opts = "size=1m,ro" if case.mount == "ro" else f"size={case.mount}"
    script = f"mount -t tmpfs -o {opts} tmpfs {shlex.quote(str(results))} && exec {shlex.join(command)}"
    return ["unshare", "-m", "sh", "-c", script]


def run_cli(case: Case, tmp: Path, timeout: float = 600) -> tuple[int, str, str, dict[str, bytes], dict[str, bytes]]:
    """The case through its real command line: (exit code, stdout, stderr, folder before, after)."""
    args, env, folder = prepare(case, tmp)
    before = snapshot(folder)
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("LOOSESPEC_")}
    full_env.update(env)
    # This checkout's package, whatever the environment has installed (the cwd is a temp folder).
    full_env["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])])
    command = [sys.executable, "-m", MODULE[case.kind], *args]
    if case.mount:
        command = mounted(case, command, tmp / case.mount_at if case.mount_at else folder)
        before = snapshot(folder)
    proc = subprocess.run(command, cwd=tmp, env=full_env, capture_output=True, text=True, timeout=timeout)
    return proc.returncode, proc.stdout, proc.stderr, before, snapshot(folder)


def run_in_process(case: Case, tmp: Path, monkeypatch, capsys) -> tuple[int, str, dict[str, bytes], dict[str, bytes]]:
    args, env, folder = prepare(case, tmp)
    for key in [k for k in os.environ if k.startswith("LOOSESPEC_")]:
        monkeypatch.delenv(key)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.chdir(tmp)
    import logging

    monkeypatch.setattr(logging.root, "handlers", [])  # an earlier Hydra job's handlers write to closed streams
    before = snapshot(folder)
    if case.kind == "L":
        from loosespec_bench.__main__ import main

        monkeypatch.setattr(sys, "argv", ["loosespec_bench", *args])
        with pytest.raises(SystemExit) as exc:
            main()
        code = exc.value.code
    elif case.kind == "S":
        from loosespec_bench.score import main as score_main

        try:
            code = score_main(args)
        except SystemExit as exc:
            code = exc.code
    elif case.kind == "R":
        from loosespec_bench.report.__main__ import main as report_main

        try:
            code = report_main(args)
        except SystemExit as exc:
            code = exc.code
    else:
        from loosespec_bench.plan import main as plan_main

        try:
            code = plan_main(args)
        except SystemExit as exc:
            code = exc.code
    return code, capsys.readouterr().err, before, snapshot(folder)


def assert_clean_refusal(case: Case, code: int, err: str, before: dict[str, bytes], after: dict[str, bytes], tmp: Path) -> None:
    # One error line, the last; warnings naming file:line (e.g. skipped records) may come before it.
    lines = [ln for ln in err.strip().splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith("error: ")]
    assert code == 2, (case.id, code, err)
    assert len(errors) == 1 and lines[-1] == errors[0], (case.id, err)
    assert "Traceback" not in err
    assert case.fragment in errors[0], (case.id, errors[0])
    assert after == before, (case.id, sorted(set(after) ^ set(before)))  # nothing left behind: no folder, .lock, _hydra
    assert not list(tmp.glob("escape*")) and not list(tmp.glob("None")) and not list(tmp.glob("{*"))


IN_PROCESS = [c for c in ALL if not c.cli_only]


@pytest.mark.parametrize("case", IN_PROCESS, ids=[c.id for c in IN_PROCESS])
def test_hostile_input_is_one_error_line(case, tmp_path, monkeypatch, capsys):
    code, err, before, after = run_in_process(case, tmp_path, monkeypatch, capsys)
    assert_clean_refusal(case, code, err, before, after, tmp_path)


CLI = [c for c in ALL if c.cli_only] + [c for c in MAIN if c.id in ("pair-name-traversal", "site-conf-missing", "sweep-past-256")]


@pytest.mark.parametrize("case", CLI, ids=[c.id for c in CLI])
def test_hostile_input_through_the_command_line(case, tmp_path):
    if case.mount and not can_mount():
        pytest.skip("needs a private mount namespace for a tmpfs (unshare -m: root or CAP_SYS_ADMIN)")
    code, _, err, before, after = run_cli(case, tmp_path)
    assert_clean_refusal(case, code, err, before, after, tmp_path)


def test_make_dry_run_of_the_plan_runs_the_precheck(tmp_path):
    env = {**os.environ, "DRY_RUN": "1", "LOOSESPEC_RESULTS_DIR": str(tmp_path), "PYTHONPATH": str(REPO)}
    proc = subprocess.run(["make", "-s", "-o", "install", "-o", "install-replicate", "replicate-cpu",
                           f"PY={sys.executable}", "ARGS=drafter.k=0"], cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("error: ")]
    assert proc.returncode == 2, proc.stderr
    assert len(errors) == 1 and "drafter.k=0" in errors[0], proc.stderr
    assert "Traceback" not in proc.stderr


def test_resume_regenerates_incomplete_records(tmp_path, caplog):
    """A finished tiny run with three kinds of incomplete line (appendix 25): resume warns with
    file:line and regenerates those samples instead of crashing."""
    from loosespec_bench.run.app import run

    from .conftest import compose_config

    cfg = compose_config(["pair=tiny", "dataset=gsm8k", "dataset.limit=3", "dataset.num_fewshot=0", "drafter.k=2",
                          "generation.max_new_tokens=4", "warmup=false"], results_dir=tmp_path)
    first = run(cfg)
    samples = Path(first["run_dir"]) / "samples.jsonl"
    recs = [json.loads(x) for x in samples.read_text().splitlines()]
    broken = [{"id": recs[0]["id"], "prompt_sha256": recs[0]["prompt_sha256"]}, {**recs[1], "metrics": None}, {**recs[2], "id": [recs[2]["id"]]}]
    samples.write_text("".join(json.dumps(r) + "\n" for r in broken))
    second = run(cfg)
    assert second["n_samples"] == 3
    assert "line 1" in caplog.text and "line 2" in caplog.text and "line 3" in caplog.text


def test_rescore_keeps_an_unknown_id_and_refuses_nothing_else(tmp_path, capsys):
    from loosespec_bench.score import main as score_main

    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "config.yaml").write_text(GSM8K_CONFIG.replace("limit: 2", "limit: null") + f"  data_dir: {shared_data_dir()}\n")
    stray = {**RUN_RECORD, "id": "gsm8k/999999"}
    (folder / "samples.jsonl").write_text(_lines(RUN_RECORD, stray))
    assert score_main([str(folder)]) == 0, capsys.readouterr().err
    ids = [json.loads(x)["id"] for x in (folder / "samples.jsonl").read_text().splitlines()]
    assert ids == ["gsm8k/0", "gsm8k/999999"]  # nothing dropped
    assert not (folder / ".lock").exists() or json.loads((folder / ".lock").read_text())["purpose"] == "re-score"


def test_a_disk_that_fills_mid_run_is_one_line_and_keeps_the_finished_samples(tmp_path, monkeypatch, capsys):
    """Issue 50: the disk fills after two of four samples (ENOSPC from the append, as a full
    results file system gives it): one `error:` line that says what to do, exit 2, no
    traceback, the two finished samples kept; the same command then resumes from them."""
    import errno

    from loosespec_bench.store.run_folder import RunFolder

    real_append = RunFolder.append
    calls = {"n": 0}

    def append(self, record):
        calls["n"] += 1
        if calls["n"] == 3:
            raise OSError(errno.ENOSPC, "No space left on device")
        real_append(self, record)

    monkeypatch.setattr(RunFolder, "append", append)
    case = Case("disk-full-mid-run", "L", ["dataset=gsm8k", "dataset.limit=4", "dataset.num_fewshot=0", "drafter.k=2",
                                            "generation.max_new_tokens=8", "warmup=false"])
    code, err, _, after = run_in_process(case, tmp_path, monkeypatch, capsys)
    lines = [ln for ln in err.strip().splitlines() if ln.strip()]
    assert code == 2 and "Traceback" not in err, err
    assert lines[-1].startswith("error: ") and sum(ln.startswith("error: ") for ln in lines) == 1, err
    assert "No space left on device" in lines[-1] and "2 finished sample(s) are kept" in lines[-1] and "rerun" in lines[-1]
    samples = [k for k in after if k.endswith("samples.jsonl")]
    assert len(samples) == 1 and len(after[samples[0]].decode().splitlines()) == 2


def test_the_free_space_check_reckons_a_lower_bound_of_what_a_run_writes():
    from loosespec_bench.settings.checks import FOLDER_BYTES, RECORD_BYTES, TOKEN_BYTES, estimated_results_bytes

    data = {"dataset": {"limit": 4}, "generation": {"max_new_tokens": 48}, "baseline": "paired", "method": {"_target_": "loosespec_bench.verifiers.spd.SPD"}}
    need, how = estimated_results_bytes(data)
    assert need == FOLDER_BYTES + 4 * (RECORD_BYTES + 2 * 48 * TOKEN_BYTES) and "4 sample(s) x 48 new tokens x 2 side(s)" == how
    # The rule's class says whether the target runs alone (Verifier.target_alone), not the file's uses_drafter.
    alone, _ = estimated_results_bytes({**data, "method": {"_target_": "loosespec_bench.verifiers.spd.TargetAlone"}})
    assert alone == FOLDER_BYTES + 4 * (RECORD_BYTES + 48 * TOKEN_BYTES)
    assert 20 * 1024 < need  # the issue's 20 KiB disk is refused before a model loads


# -- issue 41, third round: the checks' own rules --------------------------------------------------
def test_the_store_check_names_the_folder_the_store_opens_and_refuses_a_link_or_a_file_there(tmp_path):
    """check_baseline_store computes the store folder itself (baselines sits above checks):
    it must be BaselineStore's folder as app.run names it (<pair>_<task.name>), for every point,
    lm-eval's too (its task's name is not its config's lm_eval-<task>); a link or a file there is
    refused."""
    from loosespec_bench.build import build_task
    from loosespec_bench.settings.run_settings import PathsParams, section
    from loosespec_bench.store.baselines import BaselineStore
    from loosespec_bench.settings.checks import check_baseline_store
    from loosespec_bench.settings.config import baseline_config
    from loosespec_bench.errors import ConfigError

    from .conftest import compose_config

    for extra in ([], ["dataset=gsm8k", "generation.temperature=0.5", "seed=3"], ["dataset=lm_eval", "dataset.task=gsm8k_cot_llama"]):
        cfg = compose_config(["pair=tiny", "baseline=shared", *extra], results_dir=tmp_path / "results")
        task = build_task(cfg)
        store = BaselineStore(section(cfg, PathsParams).baselines_root, baseline_config(cfg), f"{cfg.pair.name}_{task.name}").path
        check_baseline_store(cfg)  # nothing there yet: passes, and creates nothing
        assert not (tmp_path / "results").exists()
        store.parent.mkdir(parents=True)
        (tmp_path / "elsewhere").mkdir()
        os.symlink(tmp_path / "elsewhere", store)
        with pytest.raises(ConfigError, match=f"{store.name} is a symbolic link"):
            check_baseline_store(cfg)
        store.unlink()
        store.write_text("x")
        with pytest.raises(ConfigError, match=f"{store.name} is not a folder"):
            check_baseline_store(cfg)
        store.unlink()
        store.mkdir()
        check_baseline_store(cfg)  # a store folder of its own: fine
        import shutil

        shutil.rmtree(tmp_path / "results")
        (tmp_path / "elsewhere").rmdir()
    method_alone = compose_config(["pair=tiny", "baseline=shared", "method=ar"], results_dir=tmp_path / "r2")
    (tmp_path / "r2").mkdir()
    (tmp_path / "r2" / "_baselines").write_text("x")
    check_baseline_store(method_alone)  # the target alone uses no store: nothing to check


def test_the_collision_check_names_the_folder_run_dir_names(tmp_path):
    """check_run_id_collisions computes the run folder itself (run_folder shares its floor)."""
    from loosespec_bench.settings.points import check_run_id_collisions
    from loosespec_bench.errors import ConfigError
    from loosespec_bench.store.run_folder import run_dir

    from .conftest import compose_config

    a = compose_config(["pair=tiny", "experiment_name=x/y"], results_dir=tmp_path)
    b = compose_config(["pair=tiny", "experiment_name=x/y", "progress=true"], results_dir=tmp_path)
    c = compose_config(["pair=tiny", "experiment_name=x/y", "drafter.k=3"], results_dir=tmp_path)
    with pytest.raises(ConfigError, match=f"#0 \\(progress=false\\) and #1 \\(progress=true\\).*{run_dir(a)}"):
        check_run_id_collisions([(["progress=false"], a), (["progress=true"], b)], {"progress"})
    check_run_id_collisions([(["drafter.k=5"], a), (["drafter.k=3"], c)], {"drafter.k"})


def test_path_lengths_count_bytes_not_characters():
    from loosespec_bench.settings.path_limits import NAME_MAX, PATH_MAX, path_length_problem

    assert path_length_problem("/tmp/" + "a" * NAME_MAX) is None
    assert "256 bytes" in path_length_problem("/tmp/" + "a" * (NAME_MAX + 1))
    assert "256 bytes" in path_length_problem("/tmp/" + "\u00e9" * 128)  # 128 characters, 2 bytes each
    assert path_length_problem("/" + "/".join(["b" * 200] * 20)) is None  # 4020 bytes
    assert "PATH_MAX" in path_length_problem("/" + "/".join(["b" * 200] * 21))
    assert PATH_MAX == 4096


def test_engine_vllm_without_vllm_is_one_line_before_any_model_loads(tmp_path, monkeypatch, capsys):
    """engine=vllm where vLLM is not installed (this machine's CPU test environment)."""
    import importlib.util

    if importlib.util.find_spec("vllm") is not None:
        pytest.skip("vLLM is installed here")
    case = Case("engine-vllm-not-installed", "L", ["engine=vllm", "pair=qwen25_coder_embedded"], "needs vLLM")
    code, err, before, after = run_in_process(case, tmp_path, monkeypatch, capsys)
    assert_clean_refusal(case, code, err, before, after, tmp_path)


def test_a_slurm_launcher_is_not_asked_for_a_single_run_or_a_printed_config(tmp_path, monkeypatch):
    """Without -m the launcher is not used, and --cfg prints without launching: no cluster needed."""
    from loosespec_bench.settings.points import precheck_points

    monkeypatch.setenv("PATH", str(tmp_path))  # no sbatch, no sinfo
    monkeypatch.setenv("LOOSESPEC_RESULTS_DIR", str(tmp_path / "results"))
    precheck_points(["hydra/launcher=slurm", "pair=tiny"], multirun=False, resources=False)
    precheck_points(["hydra/launcher=slurm", "pair=tiny", "drafter.k=3,4"], multirun=True, resources=False)
