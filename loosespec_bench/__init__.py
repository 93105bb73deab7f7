"""loosespec_bench: a benchmark and paper-replication harness for loose speculative decoding.

The shape of the package follows the life of one sample:
drafters propose -> the decoding loop scores them with the target -> verifiers decide ->
the loop commits and rolls its KV caches back; tasks load and score samples, metrics
aggregate, sinks record, reports draw.
"""

__version__ = "0.1.0"
