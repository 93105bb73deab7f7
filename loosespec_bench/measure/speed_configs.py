"""The speed benchmark's configurations (`python -m loosespec_bench.bench.speed`), declared once.

A configuration's name is what a speed-evidence folder records in each `gen` record (`config`),
what claims.yaml selects (`b: {config: fly_mla}`), and what the benchmark's `--configs` takes.
Each name carries here the overrides `python -m loosespec_bench` would take for it (the conf
defaults decide K, theta, W, ...: the benchmark times the configurations the harness runs), the
label a reader knows it by, and, for SPD's draft-length series, its K. The benchmark, its
analysis, the folder reader (occasion_files), the speed table and figure, and the wall-clock
claims all read these; none spells a configuration name of its own.

The names are stored data: folders written since issue 46 hold them, so a name is never renamed
(a new configuration gets a new name). A folder may hold a name declared nowhere here (written by
a later version, or by hand): it is shown as it is spelled.

It imports nothing from the package, so that every floor may read it (measure/ is the lowest
that does: occasion_files.py).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SpeedConfig:
    """One configuration the benchmark can time."""

    name: str
    overrides: tuple[str, ...]  # what `python -m loosespec_bench` takes for it, after the shared ones
    label: str  # as a reader knows it (the table's rows, the figure's y axis)
    spd_k: int | None = None  # SPD with the draft model at this K: the baseline's draft-length series


# The target alone: every speedup is over it, and the benchmark always times it.
TARGET_ALONE = "ar"

CONFIGS: dict[str, SpeedConfig] = {c.name: c for c in (
    SpeedConfig(TARGET_ALONE, ("method=ar",), "target alone"),
    SpeedConfig("spd", ("method=spd", "drafter=model"), "SPD"),
    SpeedConfig("fly", ("method=fly", "drafter=model"), "FLy"),
    SpeedConfig("fly_mla", ("method=fly", "drafter=mla"), "FLy + MLA"),
    # DropMatch at the paper's draft length (K = 10, as the float32 quality runs), not the model
    # drafter's CPU default of 5: its claims compare it with SPD at K = 10 (issue 45).
    SpeedConfig("dropmatch", ("method=dropmatch", "drafter=model", "drafter.k=10"), "DropMatch"),
    SpeedConfig("pld", ("method=spd", "drafter=pld"), "PLD"),
    # SPD at several draft lengths: the baseline at its best K beside the papers' (issue 45).
    SpeedConfig("spd_k5", ("method=spd", "drafter=model", "drafter.k=5"), "SPD, K = 5", spd_k=5),
    SpeedConfig("spd_k10", ("method=spd", "drafter=model", "drafter.k=10"), "SPD, K = 10", spd_k=10),
    SpeedConfig("spd_k15", ("method=spd", "drafter=model", "drafter.k=15"), "SPD, K = 15", spd_k=15),
    # A draft of another family and tokenizer (--pair smollm2_to_qwen25_coder): text re-tokenised.
    SpeedConfig("xtok_spd", ("method=spd", "drafter=model_xtok", "drafter.k=15"), "SPD, K = 15 (cross-family draft)"),
    SpeedConfig("xtok_fly", ("method=fly", "drafter=model_xtok", "drafter.k=15"), "FLy, K = 15 (cross-family draft)"),
)}

# The exact count comparisons the benchmark prints, (a, b, count): "a needs fewer <count> per
# token than b" (its rows, each decided by the sign test over problems).
COUNT_TESTS: tuple[tuple[str, str, str], ...] = (
    ("fly_mla", "fly", "draft_forwards"),
    ("fly", "spd", "target_forwards"),
    ("fly_mla", "spd", "target_forwards"),
    ("dropmatch", "spd", "target_forwards"),
    ("pld", TARGET_ALONE, "target_forwards"),
    ("xtok_fly", "xtok_spd", "target_forwards"),
)


def config_label(name: str) -> str:
    """A configuration's name as a reader knows it ('spd_k15' -> 'SPD, K = 15'); a name declared
    nowhere here is shown as it is spelled."""
    config = CONFIGS.get(name)
    return config.label if config is not None else name


def spd_draft_length(name: str) -> int | None:
    """K of a configuration in SPD's draft-length series, else None."""
    config = CONFIGS.get(name)
    return config.spd_k if config is not None else None


def declared_order(names: set[str] | list[str]) -> list[str]:
    """`names` in the order declared here, then any undeclared name in sorted order."""
    present = set(names)
    return [c for c in CONFIGS if c in present] + sorted(present - set(CONFIGS))
