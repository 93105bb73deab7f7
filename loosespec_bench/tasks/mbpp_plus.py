"""MBPP+ (EvalPlus, Liu et al. 2023): MBPP problems with many more tests per problem.

Prompted as the FLy authors ran it: lm-eval's `mbpp_plus_instruct` (AMD-AGI/FLy@98c9e8e
lm_eval/tasks/mbpp/mbpp_plus_instruct.yaml, the same file as lm-eval 0.4.13's; run by
0811scripts/0817_mbpp_rede_405b.sh with --apply_chat_template --fewshot_as_multiturn):
zero-shot, the user turn "{prompt} Your code should satisfy the following assertion:\\n{first
test}", the assistant turn pre-filled with "Here is a solution to this programming
problem:\\n```python\\n", no stop strings (until: []), max_gen_toks 1024.

The code is the completion up to its first closing ``` (lm-eval's build_predictions takes the
first fenced block of "```" + completion); an unclosed block counts whole. Scored as EvalPlus
scores: pass@1 on the base tests and on base + plus tests, each run in the sandbox
(tasks/sandbox.py). With the local copy (EvalPlus' MbppPlus.jsonl, 399 tasks) a test is
differential, as in EvalPlus: the canonical solution's output on each input (computed by a
sandboxed program of its own, once per problem; the candidate's program only reports its outputs,
and the harness compares them, out of the program's reach) is the expected one, compared exactly,
as sets for the problems EvalPlus compares as sets, by "returned something" where EvalPlus does,
with `atol` (1e-6 for float outputs) otherwise. JSON stores tuples as lists: each input is given
the container types of the problem's first base assertion's arguments. From the hub
(evalplus/mbppplus, v0.2, 378 tasks) the base tests are its `test_list` asserts and the plus
tests its own `test` script. lm-eval's own metric (code_eval on the first assertion only) is not
what EvalPlus reports; `correct` is the plus result (EvalPlus' headline "MBPP+" number).
"""

from __future__ import annotations

import ast
import json
import logging
import math
from typing import Any

from .base import Sample, load_hub_dataset, read_jsonl
from .humaneval import HumanEval
from .sandbox import Result, run_many

log = logging.getLogger(__name__)

USER_TEMPLATE = "{prompt} Your code should satisfy the following assertion:\n{test}"
ASSISTANT_PREFIX = "Here is a solution to this programming problem:\n```python\n"

# EvalPlus' special oracles (evalplus/eval/_special_oracle.py and eval/__init__.py, v0.3.1):
# outputs compared as sets, outputs only checked for "is not None", and per-problem rules.
SET_EQ = {"similar_elements", "find_char_long", "common_in_nested_lists", "extract_singly", "larg_nnum",
          "intersection_array", "find_dissimilar", "Diff"}
NOT_NONE = {"check_str", "text_match_three", "text_starta_endb"}

# The differential test, EvalPlus' rule, with the checker and the expected values out of the
# program's reach: a program in one interpreter can walk its caller's frames, read the caller's
# globals (the expected outputs) or replace the checker. So the sandboxed program only computes:
# it runs one solution on every input and reports the outputs (`_OUTPUTS`, one JSON line after
# OUTPUTS_MARK); the canonical solution runs the same way, in a program of its own, once per
# problem. The harness compares the two lists of plain values (`same`), outside the sandbox.
# A program can report any values it likes, which is no more than returning them: without the
# expected outputs it cannot pass except by producing them.
OUTPUTS_MARK = "\x1eloosespec-outputs\x1e"
OUTPUT_CHARS = 8_000_000  # the reported outputs' room in the program's output (RLIMIT_FSIZE is the hard cap)
_OUTPUTS = r"""
import copy as _copy, json as _json, sys as _sys
_C = _json.loads(CONFIG)

def _conform(value, shape):
    # JSON lists back to the container types of the example argument `shape`.
    if isinstance(shape, (int, float, complex)) and not isinstance(shape, bool) and isinstance(value, str):
        try:
            return complex(value.replace(" ", ""))  # JSON keeps complex numbers as strings
        except ValueError:
            return value
    if isinstance(shape, (tuple, list, set)) and isinstance(value, list):
        items = list(shape)
        kids = []
        for i, v in enumerate(value):
            kid = items[i] if len(items) == len(value) else (items[0] if items else None)
            if isinstance(v, list) and not isinstance(kid, (tuple, list, set)):
                kid = shape  # nested deeper than the example: same container type
            kids.append(_conform(v, kid))
        return tuple(kids) if isinstance(shape, tuple) else (set(kids) if isinstance(shape, set) else kids)
    if isinstance(shape, dict) and isinstance(value, dict):
        ex = next(iter(shape.values()), None)
        return {k: _conform(v, ex) for k, v in value.items()}
    return value

def _enc(x, depth=0):
    # A value as JSON the harness decodes back (mbpp_plus.decode_output): containers tagged.
    if depth > 200:
        raise ValueError("output nested deeper than 200")
    d = depth + 1
    if x is None or isinstance(x, bool):
        return x
    if isinstance(x, int):
        return int(x)
    if isinstance(x, float):
        return float(x) if x == x and abs(x) != float("inf") else {"$": "float", "v": repr(float(x))}
    if isinstance(x, str):
        return str(x)
    if isinstance(x, complex):
        return {"$": "complex", "v": [_enc(x.real, d), _enc(x.imag, d)]}
    if isinstance(x, tuple):
        return {"$": "tuple", "v": [_enc(i, d) for i in x]}
    if isinstance(x, (set, frozenset)):
        return {"$": "set", "v": [_enc(i, d) for i in x]}
    if isinstance(x, list):
        return [_enc(i, d) for i in x]
    if isinstance(x, dict):
        return {"$": "dict", "v": [[_enc(k, d), _enc(v, d)] for k, v in x.items()]}
    if isinstance(x, (bytes, bytearray)):
        return {"$": "bytes", "v": bytes(x).hex()}
    return {"$": "other", "type": type(x).__name__, "repr": repr(x)[:200]}

_name = _C["entry_point"]
_shape = _SHAPE
_inputs = [[_conform(v, _shape[i] if _shape is not None and i < len(_shape) else None) for i, v in enumerate(inp)] for inp in _C["inputs"]]
_ns = {"__name__": "__main__"}
exec(compile(_C["code"], "solution", "exec"), _ns)
_outs = [_enc(_ns[_name](*_copy.deepcopy(_inp))) for _inp in _inputs]
_sys.stdout.flush()
_sys.stdout.write("\n" + _C["mark"] + _json.dumps(_outs) + "\n")
_sys.stdout.flush()
"""


def decode_output(text: str) -> list[Any] | None:
    """The outputs a program reported (its last OUTPUTS_MARK line), as Python values; None when
    there is no such line or it does not decode (then the program failed)."""
    at = text.rfind(OUTPUTS_MARK)
    if at == -1:
        return None
    line = text[at + len(OUTPUTS_MARK):].split("\n", 1)[0]

    def hook(obj: dict[str, Any]) -> Any:
        tag = obj.get("$")
        v = obj.get("v")
        if tag == "tuple":
            return tuple(v)
        if tag == "set":
            return set(v)
        if tag == "dict":
            return {k: val for k, val in v}
        if tag == "complex":
            return complex(*v)
        if tag == "float":
            return float(v)
        if tag == "bytes":
            return bytes.fromhex(v)
        if tag == "other":
            return Opaque(str(obj.get("type")), str(obj.get("repr")))
        return obj

    try:
        out = json.loads(line, object_hook=hook)
    except (ValueError, TypeError, RecursionError):
        return None
    return out if isinstance(out, list) else None


class Opaque:
    """A value of a type the report cannot carry (an object, a generator...): equal only to the
    same type with the same repr, as EvalPlus' `==` would mostly find."""

    def __init__(self, type_name: str, text: str) -> None:
        self.type_name, self.text = type_name, text

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Opaque) and (self.type_name, self.text) == (other.type_name, other.text)

    def __hash__(self) -> int:
        return hash((self.type_name, self.text))

    def __repr__(self) -> str:
        return f"<{self.type_name} {self.text}>"


def _floats(x: Any) -> bool:
    if isinstance(x, float):
        return True
    return isinstance(x, (list, tuple)) and len(x) > 0 and all(isinstance(i, float) for i in x)


def _close(out: Any, exp: Any, atol: float) -> bool:
    if isinstance(exp, (list, tuple)) and isinstance(out, (list, tuple)) and len(out) == len(exp):
        return all(_close(o, e, atol) for o, e in zip(out, exp))
    try:
        return math.isclose(out, exp, rel_tol=1e-07, abs_tol=atol)
    except TypeError:
        return False


def same(name: str, args: list[Any], out: Any, exp: Any, atol: float) -> bool:
    """EvalPlus' comparison of one output with the canonical solution's (its special oracles
    included), on plain values in the harness."""
    try:
        if name in SET_EQ:
            return set(out) == set(exp)
        if name in NOT_NONE:
            return out == exp if isinstance(out, bool) else (out is not None) == exp
        if name == "are_equivalent":
            return True
        if out == exp or (name == "sum_div" and out == 0):
            return True
        if name == "surface_Area":  # slant-height reading of "height" also accepted
            b, h = args
            return out == round(b * b + 2 * b * math.sqrt((b / 2) ** 2 + h * h))
        if name == "digit_distance_nums":  # zero-padded reading also accepted
            a, b = str(args[0]), str(args[1])
            n = max(len(a), len(b))
            return out == sum(abs(int(x) - int(y)) for x, y in zip(a.zfill(n), b.zfill(n)))
        if atol == 0 and _floats(exp):
            atol = 1e-6
        return atol != 0 and _close(out, exp, atol)
    except (TypeError, ValueError, ArithmeticError, RecursionError):
        return False


def extract_code(completion: str) -> tuple[str, bool]:
    """The code the model wrote after the pre-filled "```python\\n": up to the first ```."""
    cut = completion.find("```")
    return (completion, False) if cut == -1 else (completion[:cut], True)


def first_call_args(assertion: str, entry_point: str) -> list[Any] | None:
    """The arguments of the first call of `entry_point` in the assert lines, as Python values."""
    for line in assertion.splitlines():
        if entry_point not in line:
            continue
        try:
            tree = ast.parse(line.strip())
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == entry_point:
                try:
                    return [ast.literal_eval(a) for a in node.args]
                except ValueError:
                    return None
    return None


class MBPPPlus(HumanEval):
    name = "mbpp_plus"
    display_name = "MBPP+"
    full_size = 399
    hub_path = "evalplus/mbppplus"

    def _rows(self) -> list[dict[str, Any]]:
        if self.data_dir is not None:
            return read_jsonl(self.local_path("mbpp_plus", "MbppPlus.jsonl"))
        return [dict(r) for r in load_hub_dataset(self.hub_path, None, "test")]

    @staticmethod
    def _prompt_text(row: dict[str, Any]) -> tuple[str, str]:
        """(problem text, first assertion) in the hub's form, for either copy."""
        if "test_list" in row:  # hub v0.2: prompt is the bare text
            return row["prompt"], row["test_list"][0]
        # Local EvalPlus file: the text sits in a ''' docstring; base tests are assert lines,
        # after the imports they need on 10 of 399 ("import math"). The hub keeps those in
        # test_imports, so its test_list[0], the line lm-eval's template shows, is the first
        # assert: showing the import instead would hide the function name the tests call.
        text = row["prompt"].strip().strip("'\"").strip()
        tests = [line.strip() for line in row["assertion"].splitlines() if line.strip().startswith("assert")]
        return text, tests[0]

    def load_all(self) -> list[Sample]:
        out = []
        for row in self._rows():
            text, first = self._prompt_text(row)
            messages = [
                {"role": "user", "content": USER_TEMPLATE.format(prompt=text, test=first)},
                {"role": "assistant", "content": ASSISTANT_PREFIX},  # lm-eval's gen_prefix
            ]
            task_id = str(row["task_id"])
            if "test_list" in row:
                reference = {"kind": "hub", "base": "\n".join(row["test_list"]), "plus": row["test"],
                             "imports": "\n".join(row.get("test_imports") or [])}
                canonical = row.get("code")
            else:
                reference = {"kind": "local", "task_id": task_id}
                canonical = row["canonical_solution"]
                self._local = getattr(self, "_local", {})
                self._local[task_id] = row
            out.append(
                Sample(
                    id=task_id if task_id.startswith("Mbpp/") else f"Mbpp/{task_id}",
                    messages=self.with_system(messages),
                    reference=reference,
                    meta={"canonical_solution": canonical},
                )
            )
        return out

    # -- programs ----------------------------------------------------------------------------
    def _local_row(self, task_id: str) -> dict[str, Any]:
        if task_id not in getattr(self, "_local", {}):
            self.load_all()
        return self._local[task_id]

    def _inputs(self, row: dict[str, Any], plus: bool) -> list[Any]:
        return list(row["base_input"] or []) + (list(row["plus_input"] or []) if plus else [])

    def _outputs_program(self, row: dict[str, Any], code: str, plus: bool) -> str:
        """A program that runs `code` on the problem's inputs and reports its outputs (_OUTPUTS)."""
        config = {"entry_point": row["entry_point"], "code": code, "inputs": self._inputs(row, plus), "mark": OUTPUTS_MARK}
        shape = first_call_args(row["assertion"], row["entry_point"])
        # The shape holds tuples and sets, which JSON would flatten: it goes in as a literal.
        return f"CONFIG = {json.dumps(json.dumps(config))}\n" + _OUTPUTS.replace("_SHAPE", repr(shape))

    def programs(self, sample: Sample, completion: str) -> tuple[str, str]:
        """(base program, base + plus program) for one completion. Hub copy: its assert scripts;
        local copy: programs that report the outputs (compared by `_verdict`)."""
        code, _ = extract_code(completion)
        ref = sample.reference
        if ref["kind"] == "hub":
            head = f"{ref['imports']}\n{code}\n"
            return head + ref["base"] + "\n", head + ref["base"] + "\n" + ref["plus"] + "\n"
        row = self._local_row(ref["task_id"])
        return self._outputs_program(row, code, plus=False), self._outputs_program(row, code, plus=True)

    def _expected(self, task_ids: list[str]) -> None:
        """The canonical solution's outputs on base + plus inputs, once per problem (a sandboxed
        program each, as EvalPlus computes them), kept in self._expected_out."""
        cache = self.__dict__.setdefault("_expected_out", {})
        todo = [t for t in dict.fromkeys(task_ids) if t not in cache]
        if not todo:
            return
        rows = [self._local_row(t) for t in todo]
        progs = [self._outputs_program(r, r["canonical_solution"], plus=True) for r in rows]
        results = run_many(progs, workers=self.workers, output_chars=OUTPUT_CHARS, **self._sandbox_kwargs())
        for t, row, res in zip(todo, rows, results):
            outs = decode_output(res.output) if res.passed else None
            if outs is None or len(outs) != len(self._inputs(row, True)):
                log.warning("MBPP+ %s: the canonical solution did not report its outputs (%s); its samples fail", t, res.status)
                cache[t] = None
                continue
            name = row["entry_point"]
            cache[t] = [(o is not None) if name in NOT_NONE and not isinstance(o, bool) else o for o in outs]

    def _verdict(self, row: dict[str, Any], result: Result, plus: bool) -> tuple[bool, str]:
        """(passed, a line saying why not) for one outputs program of the local copy."""
        if not result.passed:
            return False, result.output
        expected = self.__dict__.get("_expected_out", {}).get(str(row["task_id"]))
        if expected is None:
            return False, "the canonical solution's outputs are not available"
        inputs = self._inputs(row, plus)
        outs = decode_output(result.output)
        if outs is None or len(outs) != len(inputs):
            return False, "the program did not report one output per input"
        atol = float(row.get("atol") or 0)
        for i, (inp, out, exp) in enumerate(zip(inputs, outs, expected)):
            if not same(row["entry_point"], inp, out, exp, atol):
                return False, f"input {i}: got {out!r:.200}, expected {exp!r:.200}"
        return True, ""

    def canonical_completion(self, sample: Sample) -> str | None:
        code = sample.meta.get("canonical_solution")
        return f"{code}\n```" if code else None

    # -- scoring -----------------------------------------------------------------------------
    def score(self, sample: Sample, completion: str) -> dict[str, Any]:
        return self.score_batch([sample], [[completion]])[0]

    def score_batch(self, samples: list[Sample], completions: list[list[str]]) -> list[dict[str, Any]]:
        local = [s.reference["task_id"] for s in samples if s.reference["kind"] == "local"]
        if local:
            self._expected(local)
        progs = [p for s, c in zip(samples, completions) for p in self.programs(s, c[-1])]
        results = run_many(progs, workers=self.workers, output_chars=OUTPUT_CHARS, **self._sandbox_kwargs())
        out = []
        for i, (s, c) in enumerate(zip(samples, completions)):
            base, plus = results[2 * i], results[2 * i + 1]
            if s.reference["kind"] == "local":
                row = self._local_row(s.reference["task_id"])
                base_ok, base_why = self._verdict(row, base, plus=False)
                plus_ok, plus_why = self._verdict(row, plus, plus=True)
            else:
                base_ok, base_why, plus_ok, plus_why = base.passed, base.output, plus.passed, plus.output
            cut = lambda text: text.split(OUTPUTS_MARK, 1)[0]  # noqa: E731 - the reported outputs are not shown
            closed = extract_code(c[-1])[1]
            out.append({
                "correct": base_ok and plus_ok,  # EvalPlus: plus counts only with base passed
                "base_correct": base_ok,
                "plus_correct": base_ok and plus_ok,
                "status": plus.status if plus.status != "passed" or plus_ok else "failed",
                "base_status": base.status if base.status != "passed" or base_ok else "failed",
                "isolation": plus.isolation,
                "closed_code_block": closed,
                "exec_s": round(base.duration_s + plus.duration_s, 3),
                "output": cut(plus_why if base_ok else base_why)[-1000:],
            })
        return out

    def aggregate(self, records: list[dict[str, Any]]) -> dict[str, Any]:
        out = super().aggregate(records)
        scored = [r["score"] for r in records if "base_correct" in r.get("score", {})]
        if scored:
            out["pass@1_base"] = sum(bool(s["base_correct"]) for s in scored) / len(scored)
            out["pass@1_plus"] = sum(bool(s["plus_correct"]) for s in scored) / len(scored)
            out["pass@1"] = out["pass@1_plus"]
        return out
