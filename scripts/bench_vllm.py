#!/usr/bin/env python
"""vLLM's contestants, now `python -m loosespec_bench.bench.vllm` (loosespec_bench/bench/vllm.py);
this path stays for the commands recorded in results/bench/vllm-2026-12-01/README.md."""
from loosespec_bench.bench.vllm import main

if __name__ == "__main__":
    main()
