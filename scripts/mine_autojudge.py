#!/usr/bin/env python
"""AutoJudge mining, now `python -m loosespec_bench.train.mine_autojudge`; this path stays for the
reports that name it (results/cpu/*.md, *.tex: the judge's data note)."""
import sys

from loosespec_bench.train.mine_autojudge import main

if __name__ == "__main__":
    sys.exit(main())
