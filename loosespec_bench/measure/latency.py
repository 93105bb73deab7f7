"""The latency statistics every output prints, declared once: vllm bench serve's set (issue 72).

`vllm bench serve` reports each latency (TTFT, TPOT, ITL, end-to-end) by its mean, standard
deviation, median and percentiles; the field reads our figures beside theirs, so summary.json,
the table a run ends with, the batch table and W&B carry the same set under the same names:
<latency>_<stat> for stat in STATS. Percentiles interpolate linearly between order statistics
(numpy's default, as vllm bench's np.percentile); std is the population deviation (np.std,
ddof 0), as vllm bench prints it.

The latencies, per request (seconds):
- ttft_s: time to the first new token (prefill and the first step);
- tpot_s: time per output token after the first, (e2e - ttft) / (new tokens - 1);
- itl_s: inter-token latency, the time between successive emissions: one value per verification
  step after the first (a step emits its accepted tokens and the correction at once, as a
  speculative engine's stream delivers them in one chunk; vllm bench's ITL is per chunk too);
- e2e_s: the request's whole latency, from its arrival to its last token.
"""

from __future__ import annotations

import math
from typing import Iterable

import numpy as np

# (name, percentile or None for a moment): the order every output prints them in.
STATS: tuple[tuple[str, float | None], ...] = (
    ("mean", None), ("std", None), ("median", 50.0), ("p90", 90.0), ("p95", 95.0), ("p99", 99.0),
)
STAT_NAMES = tuple(name for name, _ in STATS)
LATENCIES = ("ttft_s", "tpot_s", "itl_s", "e2e_s")
LABELS = {"ttft_s": "TTFT", "tpot_s": "TPOT", "itl_s": "ITL", "e2e_s": "end-to-end"}


def stat(values: list[float], name: str) -> float | None:
    """One statistic of finite values; None without any."""
    if not values:
        return None
    q = dict(STATS)[name]
    if q is not None:
        return float(np.percentile(values, q))
    return float(np.mean(values)) if name == "mean" else float(np.std(values))


def latency_stats(xs: Iterable[float | None], name: str) -> dict[str, float | None]:
    """<name>_<stat> for every stat of STATS over the finite values of xs (None: not measured)."""
    vals = [float(x) for x in xs if x is not None and math.isfinite(x)]
    return {f"{name}_{s}": stat(vals, s) for s in STAT_NAMES}
