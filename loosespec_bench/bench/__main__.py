"""`python -m loosespec_bench.bench ...`: the engine benchmark (engine.py; --help for its options)."""

from .engine import main

if __name__ == "__main__":
    main()
