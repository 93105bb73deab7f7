"""The engine benchmark (`python -m loosespec_bench.bench`): our decoding loop against what a
user would pick instead, side by side, on the same prompts.

  prompts.py      the prompts (the tasks' own samples, chat-templated), the default pair and sets
  contestants.py  the contestants (engines with one method each) and one timed run
  analysis.py     per-contestant figures, paired comparisons, overheads, the cost model, the report
  engine.py       the command line: warm-up, interleaved runs, calibration, the JSON file

The bench sits on the package's top floor: it may import any module, and none imports it. No
module here imports torch at package import, so that engine.py can set the OpenMP wait policy
before torch loads (omp.py).
"""
