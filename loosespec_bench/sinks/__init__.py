"""Sinks record: trackers (W&B) beside the local result folder (loosespec_bench.store.run_folder)."""
