"""Issue 41: a run folder from someone else is data, never code; nothing writes outside results/;
nothing hangs. Each hostile folder gets exit 2 and one `error:` line naming what it asked for,
executes nothing from it, sends nothing anywhere, and leaves the folder and every file outside it
as they were.

FOLDER is also what python -m tests.probe_hostile_inputs runs through the command line (with the
cases of tests/test_hostile_inputs.py), counting a run past its time limit as a hang.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import pytest

from .conftest import REPO, shared_data_dir
from .test_hostile_inputs import GSM8K_CONFIG, RUN_RECORD, _lines, snapshot

OUTSIDE = "outside.txt"  # a file next to the folder: a hostile folder must never change it
OUTSIDE_TEXT = "precious, not part of any run\n"


@dataclass
class FolderCase:
    id: str
    fragment: str  # a piece of the expected error line
    files: dict[str, str] = field(default_factory=dict)  # the run folder's plain files ({DIR}: the folder)
    setup: Callable[[Path], None] | None = None  # links, FIFOs, devices... made in the folder
    args: list[str] = field(default_factory=list)  # after the folder
    kind: str = "S"  # the probe's label: S = python -m loosespec_bench.score


def _link(name: str, target: str) -> Callable[[Path], None]:
    def make(folder: Path) -> None:
        os.symlink(folder.parent / target if not target.startswith("/") else target, folder / name)
    return make


def _fifo(name: str) -> Callable[[Path], None]:
    return lambda folder: os.mkfifo(folder / name)


def _device(name: str) -> Callable[[Path], None]:
    import stat

    return lambda folder: os.mknod(folder / name, 0o600 | stat.S_IFCHR, os.makedev(1, 3))  # like /dev/null


def _include_path_module(folder: Path) -> None:
    """lm-eval task YAML with !function: importing utils.py would write a marker file."""
    tasks = folder / "tasks"
    tasks.mkdir()
    (tasks / "evil.yaml").write_text("task: evil\ndataset_path: json\noutput_type: generate_until\n"
                                     "doc_to_text: !function utils.doc_to_text\ndoc_to_target: answer\n")
    (tasks / "utils.py").write_text(f"open({str(folder.parent / 'PWNED')!r}, 'w').write('x')\n"
                                    "def doc_to_text(doc):\n    return ''\n")


HE = "  _target_: loosespec_bench.tasks.humaneval.HumanEval\n  name: humaneval\n  limit: 1\n"
MT = "  _target_: loosespec_bench.tasks.mt_bench.MTBench\n  name: mt_bench\n  limit: 1\n"
SAMPLES = _lines(RUN_RECORD)


def _shared_record(store: object) -> str:
    rec = {**RUN_RECORD, "baseline": {"output_text": "18", "output_ids": [1], "metrics": RUN_RECORD["metrics"]},
           "baseline_source": {"store": store, "timed": True, "origin": "reused from x"}}
    return _lines(rec)


FOLDER: list[FolderCase] = [
    # 1. the trust boundary: what executes or reaches out never comes from the folder
    FolderCase("folder-lm-eval-include-path", "dataset.include_path", setup=_include_path_module, files={
        "config.yaml": "dataset:\n  _target_: loosespec_bench.tasks.lm_eval_task.LmEvalTask\n  name: lm_eval-evil\n"
                       "  task: evil\n  include_path: '{DIR}/tasks'\n  limit: 1\n", "samples.jsonl": SAMPLES}),
    FolderCase("folder-judge-url-and-key", "dataset.judge.kind", files={
        "config.yaml": "dataset:\n" + MT + "  judge:\n    kind: openai\n    url: http://127.0.0.1:9/v1\n    api_key_env: HOME\n",
        "samples.jsonl": SAMPLES}),
    FolderCase("folder-judge-key-variable", "dataset.judge.api_key_env", files={
        "config.yaml": "dataset:\n" + MT + "  judge:\n    kind: null\n    api_key_env: AWS_SECRET_ACCESS_KEY\n",
        "samples.jsonl": SAMPLES}),
    FolderCase("folder-sandbox-process-same-user", "dataset.sandbox.isolation", files={
        "config.yaml": "dataset:\n" + HE + "  sandbox:\n    isolation: process\n    allow_same_user: true\n",
        "samples.jsonl": SAMPLES}),
    FolderCase("folder-sandbox-allow-same-user", "dataset.sandbox.allow_same_user", files={
        "config.yaml": "dataset:\n" + HE + "  sandbox:\n    allow_same_user: true\n", "samples.jsonl": SAMPLES}),
    FolderCase("folder-sandbox-raises-limits", "dataset.sandbox.memory_mb", files={
        "config.yaml": "dataset:\n" + HE + "  sandbox:\n    memory_mb: 1000000\n", "samples.jsonl": SAMPLES}),
    FolderCase("folder-nested-target", "dataset.stop_strings._target_", files={
        "config.yaml": GSM8K_CONFIG + "  stop_strings:\n    _target_: os.system\n    command: touch PWNED\n",
        "samples.jsonl": SAMPLES}),
    FolderCase("folder-interpolation-env", "interpolation", files={
        "config.yaml": GSM8K_CONFIG + "  system_prompt: ${oc.env:HOME}\n", "samples.jsonl": SAMPLES}),
    FolderCase("folder-unknown-class", "dataset._target_", files={
        "config.yaml": "dataset:\n  _target_: evil.Task\n  name: gsm8k\n", "samples.jsonl": SAMPLES}),
    FolderCase("folder-nltk-data", "dataset.nltk_data", files={
        "config.yaml": "dataset:\n  _target_: loosespec_bench.tasks.ifeval.IFEval\n  name: ifeval\n  nltk_data: /tmp/evil\n",
        "samples.jsonl": SAMPLES}),
    FolderCase("folder-data-file-a-path", "dataset.files", files={
        "config.yaml": "dataset:\n  _target_: loosespec_bench.tasks.livecodebench.LiveCodeBench\n  name: livecodebench\n"
                       "  files: [/dev/stdin]\n", "samples.jsonl": SAMPLES}),
    FolderCase("folder-seed-text", "seed", files={"config.yaml": GSM8K_CONFIG + "seed: abc\n", "samples.jsonl": SAMPLES}),
    # 2. nothing outside results/: links, FIFOs and devices in place of the folder's files
    FolderCase("folder-samples-link-outside", "symbolic link", setup=_link("samples.jsonl", OUTSIDE),
               files={"config.yaml": GSM8K_CONFIG}),
    FolderCase("folder-lock-link-outside", "symbolic link", setup=_link(".lock", OUTSIDE),
               files={"config.yaml": GSM8K_CONFIG, "samples.jsonl": SAMPLES}),
    FolderCase("folder-summary-link-outside", "symbolic link", setup=_link("summary.json", OUTSIDE),
               files={"config.yaml": GSM8K_CONFIG, "samples.jsonl": SAMPLES}),
    FolderCase("folder-config-link-etc", "symbolic link", setup=_link("config.yaml", "/etc/passwd"),
               files={"samples.jsonl": SAMPLES}),
    FolderCase("folder-samples-fifo", "FIFO", setup=_fifo("samples.jsonl"), files={"config.yaml": GSM8K_CONFIG}),
    FolderCase("folder-config-fifo", "FIFO", setup=_fifo("config.yaml"), files={"samples.jsonl": SAMPLES}),
    FolderCase("folder-summary-fifo", "FIFO", setup=_fifo("summary.json"),
               files={"config.yaml": GSM8K_CONFIG, "samples.jsonl": SAMPLES}),
    FolderCase("folder-lock-fifo", "FIFO", setup=_fifo(".lock"), files={"config.yaml": GSM8K_CONFIG, "samples.jsonl": SAMPLES}),
    FolderCase("folder-samples-device", "character device", setup=_device("samples.jsonl"), files={"config.yaml": GSM8K_CONFIG}),
    FolderCase("folder-store-name-climbs", "baseline_source.store", files={
        "config.yaml": GSM8K_CONFIG + "baseline: shared\n", "samples.jsonl": _shared_record("../../../x")}),
    FolderCase("folder-store-name-absolute", "baseline_source.store", files={
        "config.yaml": GSM8K_CONFIG + "baseline: shared\n", "samples.jsonl": _shared_record("/etc")}),
    FolderCase("folder-store-name-list", "baseline_source.store", files={
        "config.yaml": GSM8K_CONFIG + "baseline: shared\n", "samples.jsonl": _shared_record(["x"])}),
]


def prepare_folder(case: FolderCase, tmp: Path) -> tuple[list[str], Path]:
    """The run folder tmp/run (and tmp/outside.txt beside it); returns (score's arguments, folder)."""
    folder = tmp / "run"
    folder.mkdir()
    (tmp / OUTSIDE).write_text(OUTSIDE_TEXT)
    for rel, text in case.files.items():
        (folder / rel).write_text(text.replace("{DIR}", str(folder)))
    if case.setup:
        case.setup(folder)
    return [str(folder), *case.args], folder


def _snapshot(folder: Path) -> dict[str, object]:
    """Every entry as it is, links and special files described, never opened."""
    import stat

    out: dict[str, object] = {}
    for p in sorted(folder.rglob("*")):
        st = os.lstat(p)
        if stat.S_ISREG(st.st_mode):
            out[str(p.relative_to(folder))] = p.read_bytes()
        else:
            out[str(p.relative_to(folder))] = (stat.S_IFMT(st.st_mode), os.readlink(p) if p.is_symlink() else None)
    return out


def run_folder_cli(case: FolderCase, tmp: Path, timeout: float = 120) -> tuple[int, str, str, dict, dict]:
    """The case through `python -m loosespec_bench.score` (subprocess.TimeoutExpired: a hang).
    Returns (exit code, stdout, stderr, the tree before, after): the tree is tmp, the folder and
    the file outside it."""
    args, _ = prepare_folder(case, tmp)
    before = _snapshot(tmp)
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOOSESPEC_")}
    env.update(LOOSESPEC_DATA_DIR=str(shared_data_dir()), PYTHONPATH=str(REPO))
    proc = subprocess.run([sys.executable, "-m", "loosespec_bench.score", *args], cwd=tmp, env=env,
                          capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    return proc.returncode, proc.stdout, proc.stderr, before, _snapshot(tmp)


def assert_refused(case: FolderCase, code: int, err: str, before: dict, after: dict, tmp: Path) -> None:
    lines = [ln for ln in err.strip().splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith("error: ")]
    assert code == 2, (case.id, code, err)
    assert len(errors) == 1 and lines[-1] == errors[0], (case.id, err)
    assert "Traceback" not in err
    assert case.fragment in errors[0], (case.id, errors[0])
    assert after == before, (case.id, sorted(set(after) ^ set(before)))
    assert (tmp / OUTSIDE).read_text() == OUTSIDE_TEXT
    assert not (tmp / "PWNED").exists() and not (tmp / "run" / "PWNED").exists()


IN_PROCESS = [c for c in FOLDER if "fifo" not in c.id]  # a FIFO runs in a subprocess: a regression would hang pytest


@pytest.mark.parametrize("case", IN_PROCESS, ids=[c.id for c in IN_PROCESS])
def test_hostile_folder_is_refused_with_one_line(case, tmp_path, monkeypatch, capsys):
    from loosespec_bench.score import main as score_main

    args, _ = prepare_folder(case, tmp_path)
    for key in [k for k in os.environ if k.startswith("LOOSESPEC_")]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("LOOSESPEC_DATA_DIR", str(shared_data_dir()))
    monkeypatch.chdir(tmp_path)
    before = _snapshot(tmp_path)
    try:
        code = score_main(args)
    except SystemExit as exc:
        code = exc.code
    assert_refused(case, code, capsys.readouterr().err, before, _snapshot(tmp_path), tmp_path)


FIFOS = [c for c in FOLDER if "fifo" in c.id]


@pytest.mark.parametrize("case", FIFOS, ids=[c.id for c in FIFOS])
def test_a_fifo_in_a_folder_is_refused_not_waited_on(case, tmp_path):
    code, _, err, before, after = run_folder_cli(case, tmp_path, timeout=300)
    assert_refused(case, code, err, before, after, tmp_path)


def test_the_folders_own_settings_still_rescore_a_committed_style_folder(tmp_path, capsys):
    """The boundary keeps what is data: a folder whose sandbox and judge settings are this
    installation's, with its own (tighter) limits and its own hide_paths and data_dir, re-scores."""
    from loosespec_bench.score import trusted_dataset_node

    node = {"_target_": "loosespec_bench.tasks.humaneval.HumanEval", "name": "humaneval", "data_dir": "/elsewhere",
            "limit": 3, "max_new_tokens": 512, "system_prompt": None,
            "sandbox": {"isolation": "auto", "allow_same_user": False, "timeout_s": 5, "cpu_s": 10, "memory_mb": 1024,
                        "max_procs": 8, "file_mb": 16, "tmp_mb": 64, "workers": None, "hide_paths": ["results/cpu/runs"]}}
    out = trusted_dataset_node(node, str(shared_data_dir()), [])
    assert out.limit == 3 and out.sandbox.timeout_s == 5  # the run's own, tighter, limit
    assert out.data_dir == str(shared_data_dir())  # this machine's data, not the folder's path
    assert list(out.sandbox.hide_paths) != ["results/cpu/runs"]  # this installation's
    # --set is the user's own choice: a higher limit asked for on the command line is taken.
    raised = trusted_dataset_node({**node, "sandbox": {**node["sandbox"], "timeout_s": 30}}, None, ["sandbox.timeout_s=30"])
    assert raised.sandbox.timeout_s == 30


def test_resume_refuses_another_runs_records_and_links(tmp_path):
    """Records carry their run's id: records copied from another run folder are refused on
    resume (one error line), old records without an id are the folder's own; a samples.jsonl
    linked outside is refused and the file it points to is left as it was."""
    from loosespec_bench.run.app import run
    from loosespec_bench.errors import ConfigError

    from .conftest import compose_config

    cfg = compose_config(["pair=tiny", "dataset=gsm8k", "dataset.limit=2", "dataset.num_fewshot=0", "drafter.k=2",
                          "generation.max_new_tokens=4", "warmup=false"], results_dir=tmp_path / "results")
    first = run(cfg)
    folder = Path(first["run_dir"])
    samples = folder / "samples.jsonl"
    recs = [json.loads(x) for x in samples.read_text().splitlines()]
    assert {r["run_id"] for r in recs} == {folder.name}
    # Old records (no run id) are the folder's own: resume reuses them, nothing regenerated.
    samples.write_text("".join(json.dumps({k: v for k, v in r.items() if k != "run_id"}) + "\n" for r in recs))
    assert run(cfg)["n_samples"] == 2
    # Another run's records.
    foreign = "".join(json.dumps({**r, "run_id": "ar_none_tiny_gsm8k_00000000"}) + "\n" for r in recs)
    samples.write_text(foreign)
    with pytest.raises(ConfigError, match="belongs to run 'ar_none_tiny_gsm8k_00000000'"):
        run(cfg)
    assert samples.read_text() == foreign  # refused, nothing rewritten
    # A link to a file outside results/.
    outside = tmp_path / OUTSIDE
    outside.write_text(OUTSIDE_TEXT.rstrip("\n"))  # no final newline: a resume would have cut it back
    samples.unlink()
    samples.symlink_to(outside)
    with pytest.raises(ConfigError, match="symbolic link"):
        run(cfg)
    assert outside.read_text() == OUTSIDE_TEXT.rstrip("\n")


def test_the_index_walk_does_not_follow_links(tmp_path):
    """Two links to `.` made `report index` walk about 2^40 paths; links are not walked."""
    from loosespec_bench.report.index import find_run_dirs, load_index
    from loosespec_bench.store.run_folder import DamagedRun

    exp = tmp_path / "exp"
    run_dir = exp / "run1"
    run_dir.mkdir(parents=True)
    (run_dir / "config.yaml").write_text(GSM8K_CONFIG)
    (run_dir / "samples.jsonl").write_text(SAMPLES)
    for name in ("a", "b"):
        os.symlink(".", exp / name)
    os.symlink("/", tmp_path / "root")
    assert find_run_dirs(tmp_path) == [run_dir]
    linked = tmp_path / "linked"
    linked.mkdir()
    os.mkfifo(linked / "samples.jsonl")  # a FIFO marks a run folder; it is refused, never opened
    with pytest.raises(DamagedRun, match="FIFO"):  # strict by default: one line naming it
        load_index(tmp_path)
    df = load_index(tmp_path, skip_damaged=True)
    assert len(df) == 1 and [f for f, _ in df.attrs["skipped"]] == [str(linked)]


def test_store_files_are_not_followed(tmp_path):
    from loosespec_bench.store.baselines import judge_against_store
    from loosespec_bench.errors import ConfigError

    (tmp_path / "store_x").mkdir()
    os.symlink("/etc/passwd", tmp_path / "store_x" / "samples.jsonl")
    rec = json.loads(_shared_record("store_x"))
    with pytest.raises(ConfigError, match="symbolic link"):
        judge_against_store([rec], tmp_path)
    with pytest.raises(ConfigError, match="baseline_source.store"):
        judge_against_store([json.loads(_shared_record(".."))], tmp_path)


# -- item 4 (the checks outside the CLI's checks module and the record reader) ------------------
import gzip  # noqa: E402

from .test_hostile_inputs import HE_ROW, Case, assert_clean_refusal, run_in_process  # noqa: E402

BROKEN_TEST = {**HE_ROW, "canonical_solution": "    return 1\n", "test": "def check(c):\n    assert c( == 1\n"}
WRONG_TEST = {**HE_ROW, "task_id": "HumanEval/1", "canonical_solution": "    return 1\n", "test": "def check(c):\n    assert c() == 2\n"}
# Main-CLI cases (tests/test_hostile_inputs.Case, `L`: pair=tiny, before any model loads); the probe runs them too.
MAIN: list[Case] = [
    Case("temperature-underflow", "L", ["generation.temperature=1e-300"], "generation.temperature"),
    Case("temperature-subnormal", "L", ["generation.temperature=1e-40"], "generation.temperature"),
    Case("humaneval-test-does-not-compile", "L", ["dataset=humaneval"], "canonical solution",
         files={"humaneval/HumanEval.jsonl.gz": gzip.compress((json.dumps(BROKEN_TEST) + "\n").encode())}),
    Case("humaneval-test-wrong", "L", ["dataset=humaneval"], "canonical solution",
         files={"humaneval/HumanEval.jsonl.gz": gzip.compress((json.dumps(WRONG_TEST) + "\n").encode())}),
]


@pytest.mark.parametrize("case", MAIN, ids=[c.id for c in MAIN])
def test_item4_input_is_one_error_line(case, tmp_path, monkeypatch, capsys):
    code, err, before, after = run_in_process(case, tmp_path, monkeypatch, capsys)
    assert_clean_refusal(case, code, err, before, after, tmp_path)


def test_summary_json_is_standard_json_with_a_flag(tmp_path):
    from loosespec_bench.store.run_folder import RunFolder

    folder = RunFolder(tmp_path / "run")
    folder.write_summary({"tau": float("nan"), "speedup": float("inf"), "by": {"x": [1.0, float("-inf")]}, "n": 3})
    text = (tmp_path / "run" / "summary.json").read_text()
    assert "NaN" not in text and "Infinity" not in text
    data = json.loads(text, parse_constant=lambda c: pytest.fail(f"non-standard {c}"))
    assert data["tau"] is None and data["speedup"] is None and data["by"]["x"] == [1.0, None] and data["n"] == 3
    assert data["nonfinite_fields"] == ["tau", "speedup", "by.x[1]"]


def test_a_dead_judge_warns_once_and_fails_when_every_judgment_fails(data_dir, caplog):
    from loosespec_bench.errors import ConfigError
    from loosespec_bench.tasks.judge import JudgeError
    from loosespec_bench.tasks.mt_bench import MTBench

    class Dead:
        name, url = "gpt-4", "http://127.0.0.1:9/v1/chat/completions"

        def complete(self, system: str, user: str) -> str:
            raise JudgeError("connection refused")

    class Flaky(Dead):
        calls = 0

        def complete(self, system: str, user: str) -> str:
            Flaky.calls += 1
            if Flaky.calls % 2:
                raise JudgeError("timeout")
            return "Rating: [[7]]"

    task = MTBench(data_dir=str(data_dir))
    samples = [s for s in task.load_all() if s.reference["category"] not in ("math", "reasoning", "coding")][:2]
    task.judge = Dead()
    records = [{"meta": s.meta, "score": task.score_turns(s, ["a", "b"])} for s in samples]
    warnings = [r for r in caplog.records if "the judge" in r.getMessage()]
    assert len(warnings) == 1 and "127.0.0.1:9" in warnings[0].getMessage()
    with pytest.raises(ConfigError, match=r"every judgment failed \(4 of 4"):
        task.aggregate(records)
    task.judge = Flaky()
    records = [{"meta": s.meta, "score": task.score_turns(s, ["a", "b"])} for s in samples]
    agg = task.aggregate(records)
    assert agg["n_judge_errors"] == 2 and agg["n_judged_turns"] == 2 and agg["mt_bench_score"] == 7
