"""LiveCodeBench code generation (Jain et al. 2024), one of DropMatch's out-of-distribution sets.

Prompted with LiveCodeBench's generic chat template (LiveCodeBench/LiveCodeBench
lcb_runner/prompts/code_generation.py: SYSTEM_MESSAGE_GENERIC as the system turn, then
"### Question:", "### Format:" with the starter code or the stdin/stdout instruction, and
"### Answer: (use the provided format with backticks)"). The program is the last ```python
block of the answer (lcb_runner/utils/extraction_utils.py: the last fenced block).

Scored as LiveCodeBench scores (lcb_runner/evaluation/testing_util.py): every public and
private test must pass. "stdin" tests run the program with the input on stdin and compare the
output line by line after stripping (numbers compared as decimals); "functional" tests call
`Solution().<func_name>` (the metadata's func_name) with the input's lines as JSON arguments
and compare with the JSON output. All tests of a problem run in one sandboxed program
(tasks/sandbox.py). pass@1 = greedy, one sample per problem.

Data: the hub's livecodebench/code_generation_lite JSONL files (`files`, e.g. test.jsonl =
release_v1), or ${data_dir}/livecodebench/<file> in the same format. Private tests in the hub
files are base64(zlib(pickle(JSON string))); they are unpickled with a loader that admits
only plain strings (no classes), so a crafted file cannot run code here.
"""

from __future__ import annotations

import base64
import io
import json
import pickle
import zlib
from typing import Any

from ..params import str_or_list
from ..safe_files import confined
from .base import Sample, hub_file, read_jsonl
from .humaneval import HumanEval
from .sandbox import run_many

SYSTEM_MESSAGE = (
    "You are an expert Python programmer. You will be given a question (problem specification) and will generate "
    "a correct Python program that matches the specification and passes all tests."
)
WITH_STARTER = "You will use the following starter code to write the solution to the problem and enclose your code within delimiters."
WITHOUT_STARTER = (
    "Read the inputs from stdin solve the problem and write the answer to stdout (do not directly test on the sample "
    "inputs). Enclose your code within delimiters as follows. Ensure that when the python program runs, it reads the "
    "inputs, runs the algorithm and writes output to STDOUT."
)


def user_prompt(question: str, starter_code: str) -> str:
    text = f"### Question:\n{question}\n\n"
    if starter_code:
        text += f"### Format: {WITH_STARTER}\n```python\n{starter_code}\n```\n\n"
    else:
        text += f"### Format: {WITHOUT_STARTER}\n```python\n# YOUR CODE HERE\n```\n\n"
    return text + "### Answer: (use the provided format with backticks)\n\n"


def extract_code(completion: str) -> str:
    """The last ``` fenced block (its language tag line dropped); '' when there is none."""
    lines = completion.split("\n")
    fences = [i for i, line in enumerate(lines) if line.strip().startswith("```")]
    if len(fences) < 2:
        return ""
    return "\n".join(lines[fences[-2] + 1 : fences[-1]])


class _StringsOnly(pickle.Unpickler):
    def find_class(self, module: str, name: str):  # any class or function: refuse
        raise pickle.UnpicklingError(f"refusing {module}.{name} in LiveCodeBench test data")


def decode_tests(raw: str) -> list[dict[str, str]]:
    """public_test_cases / private_test_cases: a JSON list, or base64(zlib(pickle(JSON)))."""
    try:
        return json.loads(raw)
    except (json.JSONDecodeError, TypeError):
        inner = _StringsOnly(io.BytesIO(zlib.decompress(base64.b64decode(raw.encode("utf-8"))))).load()
        return json.loads(inner)


# LiveCodeBench runs every program after an import header (lcb_runner/evaluation/testing_util.py
# import_string: the standard library's usual modules star-imported, typing's names included).
IMPORT_HEADER = (
    "from string import *\nfrom re import *\nfrom datetime import *\nfrom collections import *\nfrom heapq import *\n"
    "from bisect import *\nfrom copy import *\nfrom math import *\nfrom random import *\nfrom statistics import *\n"
    "from itertools import *\nfrom functools import *\nfrom operator import *\nfrom io import *\nfrom sys import *\n"
    "from json import *\nfrom builtins import *\nfrom typing import *\nimport string\nimport re\nimport datetime\n"
    "import collections\nimport heapq\nimport bisect\nimport copy\nimport math\nimport random\nimport statistics\n"
    "import itertools\nimport functools\nimport operator\nimport io\nimport sys\nimport json\nsys.setrecursionlimit(50000)\n"
)

_TEST_PROGRAM = r'''
import io as _io, json as _json, sys as _sys
from decimal import Decimal as _D, InvalidOperation as _IO
_C = _json.loads(CONFIG)

def _lines(text):
    return [l.strip() for l in text.strip().split("\n")]

def _same_stdout(got, want):
    g, w = _lines(got), _lines(want)
    if g == w:
        return True
    if len(g) != len(w):
        return False
    for a, b in zip(g, w):
        if a == b:
            continue
        ta, tb = a.split(), b.split()
        if len(ta) != len(tb):
            return False
        try:
            if any(_D(x) != _D(y) for x, y in zip(ta, tb)):
                return False
        except _IO:
            return False
    return True

def _run_stdin(code, given):
    out = _io.StringIO()
    old = _sys.stdin, _sys.stdout
    _sys.stdin, _sys.stdout = _io.StringIO(given), out
    try:
        exec(compile(code, "solution", "exec"), {"__name__": "__main__"})
    except SystemExit:
        pass
    finally:
        _sys.stdin, _sys.stdout = old
    return out.getvalue()

def _norm(x):
    return [_norm(i) for i in x] if isinstance(x, (list, tuple)) else x

for _i, _t in enumerate(_C["tests"]):
    if _t["testtype"] == "functional":
        _ns = {"__name__": "solution"}
        exec(compile(_C["code"], "solution", "exec"), _ns)
        _fn = getattr(_ns["Solution"](), _C["func_name"]) if "Solution" in _ns else _ns[_C["func_name"]]
        _args = [_json.loads(l) for l in _t["input"].split("\n") if l.strip()]
        _got = _fn(*_args)
        _want = _json.loads(_t["output"])
        assert _norm(_got) == _norm(_want), f"test {_i}: got {_got!r:.200}, expected {_want!r:.200}"
    else:
        _got = _run_stdin(_C["code"], _t["input"])
        assert _same_stdout(_got, _t["output"]), f"test {_i}: got {_got!r:.200}, expected {_t['output']!r:.200}"
'''


class LiveCodeBench(HumanEval):
    name = "livecodebench"
    display_name = "LiveCodeBench"
    SETTINGS = {"files": str_or_list}
    full_size, full_size_exact = 400, False  # release_v1, counted approximately
    hub_repo = "livecodebench/code_generation_lite"

    def __init__(self, *, files: list[str] | str = ("test.jsonl",), **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.files = [files] if isinstance(files, str) else list(files)
        for name in self.files:  # names inside the data set's folder, never paths (a folder's config is data)
            confined("livecodebench", name, "dataset.files")

    def _rows(self) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = []
        for name in self.files:
            if self.data_dir is not None and (self.data_dir / "livecodebench" / name).exists():
                path = self.data_dir / "livecodebench" / name
            else:
                path = hub_file(self.hub_repo, name)
            rows += read_jsonl(path)
        return rows

    def load_all(self) -> list[Sample]:
        out = []
        for row in self._rows():
            meta = json.loads(row.get("metadata") or "{}")
            tests = decode_tests(row["public_test_cases"]) + decode_tests(row.get("private_test_cases") or "[]")
            messages = [
                {"role": "system", "content": self.system_prompt or SYSTEM_MESSAGE},
                {"role": "user", "content": user_prompt(row["question_content"], row.get("starter_code") or "")},
            ]
            out.append(
                Sample(
                    id=f"lcb/{row['question_id']}",
                    messages=messages,
                    reference={"tests": tests, "func_name": meta.get("func_name")},
                    meta={"platform": row.get("platform"), "difficulty": row.get("difficulty"), "contest_date": row.get("contest_date")},
                )
            )
        return out

    @staticmethod
    def program(sample: Sample, completion: str) -> str:
        config = {"code": IMPORT_HEADER + extract_code(completion), **sample.reference}
        return f"CONFIG = {json.dumps(json.dumps(config))}\n{_TEST_PROGRAM}"

    def score_batch(self, samples: list[Sample], completions: list[list[str]]) -> list[dict[str, Any]]:
        results = run_many([self.program(s, c[-1]) for s, c in zip(samples, completions)], workers=self.workers, **self._sandbox_kwargs())
        return [{**self._score(r), "has_code": bool(extract_code(c[-1]))} for r, c in zip(results, completions)]

    def score(self, sample: Sample, completion: str) -> dict[str, Any]:
        return self.score_batch([sample], [[completion]])[0]

    def aggregate(self, records: list[dict[str, Any]]) -> dict[str, Any]:
        out = super().aggregate(records)
        for level in ("easy", "medium", "hard"):
            sub = [r for r in records if r.get("meta", {}).get("difficulty") == level and "score" in r]
            if sub:
                out[f"pass@1_{level}"] = sum(bool(r["score"].get("correct")) for r in sub) / len(sub)
        return out
