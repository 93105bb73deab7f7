"""How the report names a configuration: a method label ('FLy (mla, K=15, θ=0.3, W=6)') and a
rule's own setting ('js, N=5, p=0.3'), from the knob columns loosespec_bench/schema.py declares."""

from __future__ import annotations

from typing import Any, Iterable

import pandas as pd

from ..schema import label_parts
from .render import _nan

METHOD_NAMES = {"fly": "FLy", "spd": "SPD", "dropmatch": "DropMatch", "ar": "target alone",
                "autojudge": "AutoJudge", "dropmatch_autojudge": "DropMatch + AutoJudge"}
ENGINE_NAMES = {"vllm": "vLLM"}  # engine=<name> as the tables print it (engine=hf, our loop: no tag)


def is_eagle(drafter: Any) -> bool:
    return isinstance(drafter, str) and drafter.lower().startswith("eagle")


def method_label(row: dict | pd.Series, skip: Iterable[str] = ()) -> str:
    """e.g. 'FLy (mla, K=15, θ=0.3, W=6)', 'SPD (pld, K=10)', 'EAGLE-3 + DropMatch (K=10, js)'.
    The knob parts come from loosespec_bench/schema.py (label_parts): a new rule's knobs appear
    without a change here. skip: index columns left out (the x axis of a plot)."""
    skip = set(skip)
    row = {k: (None if k in skip else v) for k, v in dict(row).items()}
    method, drafter = row.get("method"), row.get("drafter")
    if is_eagle(drafter):
        version = "EAGLE-2" if str(drafter).lower().startswith("eagle2") else "EAGLE-3"
        name = version + ("" if method == "spd" else f" + {METHOD_NAMES.get(method, str(method))}")
        # Ours says which drafting it was: the papers' EAGLE figures are dynamic trees.
        parts = [] if _nan(row.get("tree")) or row.get("tree") is None else ["tree" if row.get("tree") else "chain"]
    elif method == "spd" and drafter == "pld":
        name, parts = "PLD", []
    elif drafter == "lookahead":
        name = "Lookahead" + ("" if method == "spd" else f" + {METHOD_NAMES.get(method, str(method))}")
        parts = []
    else:
        name = METHOD_NAMES.get(method, str(method))
        parts = [str(drafter)] if drafter else []
    if not _nan(row.get("K")) and row.get("K"):
        parts.append(f"K={int(row['K'])}")
    parts += label_parts(row, skip=skip)
    # Another engine's row sits beside our loop's under the same method: the label says which.
    engine = row.get("engine")
    if isinstance(engine, str) and engine not in ("", "hf"):
        name += f" on {ENGINE_NAMES.get(engine, engine)}"
    return f"{name} ({', '.join(parts)})" if parts else name


def rule_setting(row: dict | pd.Series) -> str:
    """A rule's own knobs as text ('js, N=5, p=0.3'), from the row's knob columns (schema)."""
    return ", ".join(label_parts(row, skip=("temperature",))) or "defaults"

