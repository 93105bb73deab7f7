#!/usr/bin/env python
"""The engine benchmark, now `python -m loosespec_bench.bench` (loosespec_bench/bench/); this path
stays for the commands recorded in results/bench/*/README.md."""
from loosespec_bench.bench.engine import main

if __name__ == "__main__":
    main()
