"""Training the methods' trained parts, as `python -m` tools that install with the package:

  python -m loosespec_bench.train.eagle3           a small EAGLE-3 head for a target, on CPU (eagle3.py)
  python -m loosespec_bench.train.mine_autojudge   AutoJudge's training set: mismatches on GSM8K train
  python -m loosespec_bench.train.autojudge        AutoJudge's classifier from a mined set (needs [autojudge])

On the package's top floor (they compose configs and run the decoding loop); the trained files
they write are read by drafters/eagle and judges/, which never import them.
"""
