"""Uncertainty and verdicts, one module per kind of procedure (split from stats.py):

  intervals   the paired bootstrap over samples and every summary figure's interval (tau, speed,
              acceptance by position, quality and retention)
  exact       exact procedures for paired 0/1 scores and counts (sign test / McNemar,
              Clopper-Pearson, the exact paired interval of a difference and of retention)
  verdicts    the claims' tests: multiplicity adjustment, the bootstrap's p-values, graded
              paired tests, power and planned looks
  occasions   speed timed on several occasions (two-way bootstrap, occasion effects, ICC)
  sizing      planning the exact McNemar test's n over planned looks, and the non-inferiority
              margin an n supports

Import from the module itself (`from loosespec_bench.measure.stats.exact import ExactPairedBinary`)."""
