"""Re-run the hostile-input probe: every input of tests/test_hostile_inputs.py (issue 24) and
tests/test_hostile_folders.py (issue 41: folders from someone else) through its real command
line (a subprocess each), counted as

  clean      exit 2, one `error:` line (the last line of stderr), no traceback, nothing left behind
             (a hostile folder: the folder and the file beside it unchanged, nothing it names executed)
  traceback  a Python traceback on stderr
  silent     exit 0 (the input was accepted), or a refusal that left files behind
  hang       still running at --timeout (killed)
  other      any other ending (a non-2 exit without a traceback)

    python -m tests.probe_hostile_inputs [--jobs 2] [--only ID ...] [--timeout S] [--json out.json]

Prints one line per input and the counts (tried / clean / traceback / silent / hang / other).
It lives beside the tests because it replays their tables (run from the checkout's root); the
suite itself runs the same inputs in-process.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from .test_hostile_folders import FOLDER, MAIN as MAIN41, OUTSIDE, OUTSIDE_TEXT, FolderCase, run_folder_cli
from .test_hostile_inputs import ALL, Case, run_cli


def verdict(case: Case | FolderCase, timeout: float) -> tuple[str, str]:
    with tempfile.TemporaryDirectory(prefix=f"probe-{case.id}-") as tmp:
        try:
            if isinstance(case, FolderCase):
                code, _, err, before, after = run_folder_cli(case, Path(tmp), timeout=timeout)
                if (Path(tmp) / OUTSIDE).read_text() != OUTSIDE_TEXT or (Path(tmp) / "PWNED").exists():
                    return "silent", "wrote outside the folder or ran the folder's code"
            else:
                code, _, err, before, after = run_cli(case, Path(tmp), timeout=timeout)
        except subprocess.TimeoutExpired:
            return "hang", f"still running after {timeout:.0f} s"
        except Exception as exc:
            return "other", f"{type(exc).__name__}"
        lines = [ln for ln in err.strip().splitlines() if ln.strip()]
        errors = [ln for ln in lines if ln.startswith("error: ")]
        if "Traceback" in err:
            return "traceback", (lines[-1] if lines else "")[:160]
        if code == 0:
            return "silent", "exit 0"
        if code == 2 and len(errors) == 1 and lines[-1] == errors[0]:
            if after != before:
                return "silent", f"left behind: {sorted(set(after) ^ set(before))[:3]}"
            return "clean", errors[0][:160]
        return "other", f"exit {code}: {(lines[-1] if lines else '')[:140]}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--only", nargs="*", default=None)
    ap.add_argument("--timeout", type=float, default=300, help="seconds before a case counts as a hang")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    cases = [c for c in [*ALL, *MAIN41, *FOLDER] if args.only is None or c.id in args.only]
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        results = list(pool.map(lambda c: (c, *verdict(c, args.timeout)), cases))
    counts = {k: 0 for k in ("clean", "traceback", "silent", "hang", "other")}
    for case, kind, text in results:
        counts[kind] += 1
        print(f"{kind:<9} {case.kind} {case.id:<34} {text}")
    print(f"tried {len(results)} / clean {counts['clean']} / traceback {counts['traceback']} / silent {counts['silent']} "
          f"/ hang {counts['hang']} / other {counts['other']}")
    if args.json:
        args.json.write_text(json.dumps({"counts": counts, "cases": [{"id": c.id, "kind": k, "text": t} for c, k, t in results]}, indent=2))
    return 0 if counts["clean"] == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
