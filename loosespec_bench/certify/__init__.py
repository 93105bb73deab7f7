"""Certified settings (issue 68): which setting of a loose rule keeps quality on a pair, with a
guarantee, and what it buys. `python -m loosespec_bench.certify` (`loosespec-certify`);
docs/certify.md is the practitioner's page.

  ladder.py     the request: the rule's settings in order (strictest first) from an experiment's
                one-key sweep or --ladder, each point composed and checked before any model
                loads; the planner's cost; whether the split's n allows the margin
  procedure.py  the run: each (setting, look) the fixed-sequence procedure asks for
                (measure/stats/sequential.py), run as an ordinary resumable run folder on the
                calibration split; the certified setting's loss on held-out problems; what it
                buys (tau, predicted speedup with the calibration's error, correct answers per
                CPU hour, a measured two-occasion speedup where asked); certification.json / .md
  readme.py     `python -m loosespec_bench.certify.readme`: results/certify/README.md from the
                certifications on disk (a finished one's answer per rule and margin), the rest
                labelled not certified with the planner's cost and the progress on disk
"""
