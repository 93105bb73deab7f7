"""loosespec_bench: a benchmark and paper-replication harness for loose speculative decoding.

The shape of the package follows the life of one sample: the app's protocol asks an engine
(engines/; hf = our loop) to generate, with the method and with the target alone; inside the hf
engine, drafters propose -> the decoding loop scores them with the target -> verifiers decide ->
the loop commits and rolls its KV caches back; tasks load and score samples, metrics
aggregate, sinks record, reports draw.
"""

__version__ = "0.1.0"
