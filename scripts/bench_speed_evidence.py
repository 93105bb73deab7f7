"""Kept for the recorded commands (replicate.mk, results/*/README.md): the speed benchmark is
`python -m loosespec_bench.bench.speed` (same options, same folders)."""
import sys

from loosespec_bench.bench.speed import main

if __name__ == "__main__":
    sys.exit(main())
