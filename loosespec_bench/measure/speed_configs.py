"""Every benchmark's configuration names, declared once (issue 71 item 4): the speed benchmark's
(`python -m loosespec_bench.bench.speed`), the engine benchmark's contestants (`python -m
loosespec_bench.bench`), the batch-size bench's (bench/batch.py) and the vLLM contestants'
(bench/vllm.py).

A configuration's name is what a speed-evidence folder records in each `gen` record (`config`),
what claims.yaml selects (`b: {config: fly_mla}`), what the speed benchmark's `--configs` and
the other benches' `--contestants` take, and what their --out files record. Each name carries
here the label a reader knows it by and, for a configuration of ours, the overrides `python -m
loosespec_bench` would take for it (the conf defaults decide K, theta, W, ...: the speed
benchmark times the configurations the harness runs; the engine and batch benches set K by
their own flags), and, for SPD's draft-length series, its K. A peer's contestant (transformers'
generate(), vLLM) runs another engine's code, not a harness configuration: it names instead our
configuration it stands beside (`beside`). The benchmarks, their analyses, the folder reader
(occasion_files), the speed table and figure, and the wall-clock claims all read these; none
spells a configuration name of its own (tests/test_architecture.py pins it for bench/).

Spelling: our configurations are lower case words joined by `_`; a peer's contestant is its
engine's prefix and a hyphen (`hf-ar`, `vllm-spd`), as its files have always spelled it.

The names are stored data: folders and files written since issue 46 hold them, so a name is
never renamed silently. Where one configuration had two spellings, the declared name is one and
the other is an alias (`aliases`): commands take it, and readers of stored files map it
(`canonical`). A file may hold a name declared nowhere here (written by a later version, or by
hand): it is shown as it is spelled.

It imports nothing from the package, so that every floor may read it (measure/ is the lowest
that does: occasion_files.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping


@dataclass(frozen=True)
class BenchConfig:
    """One configuration a benchmark can time, by its declared name."""

    name: str
    overrides: tuple[str, ...]  # what `python -m loosespec_bench` takes for it, after the shared ones; () for a peer's
    label: str  # as a reader knows it (the table's rows, the figure's y axis)
    spd_k: int | None = None  # SPD with the draft model at this K: the baseline's draft-length series
    aliases: tuple[str, ...] = ()  # its old spellings: commands take them, readers of stored files map them
    beside: str | None = None  # a peer's contestant (another engine's code): our configuration it is compared with


# The target alone: every speedup is over it, and every benchmark times it.
TARGET_ALONE = "ar"
# Ours (our loop, a rule and a drafter).
SPD = "spd"
FLY = "fly"
FLY_MLA = "fly_mla"
DROPMATCH = "dropmatch"
PLD = "pld"
SPD_MLA = "spd_mla"
FLY_MLA_HF = "fly_mla_hf"
EAGLE3 = "eagle3"
EAGLE3_TREE = "eagle3_tree"
LOOKAHEAD = "lookahead"
# Peers: transformers' generate() (the engine benchmark) and vLLM (bench/vllm.py).
HF_AR = "hf-ar"
HF_ASSIST = "hf-assist"
HF_ASSIST_DYN = "hf-assist-dyn"
HF_PLD = "hf-pld"
VLLM_AR = "vllm-ar"
VLLM_SPD = "vllm-spd"
VLLM_PLD = "vllm-pld"
VLLM_EAGLE3 = "vllm-eagle3"

# The speed benchmark's configurations, in its order (its --configs default, the table's rows).
_SPEED = (
    BenchConfig(TARGET_ALONE, ("method=ar",), "target alone"),
    BenchConfig(SPD, ("method=spd", "drafter=model"), "SPD"),
    BenchConfig(FLY, ("method=fly", "drafter=model"), "FLy"),
    # The engine benchmark spelled it "fly-mla" (results/bench/peers-2026-12-04/ours.json).
    BenchConfig(FLY_MLA, ("method=fly", "drafter=mla"), "FLy + MLA", aliases=("fly-mla",)),
    # DropMatch at the paper's draft length (K = 10, as the float32 quality runs), not the model
    # drafter's CPU default of 5: its claims compare it with SPD at K = 10 (issue 45).
    BenchConfig(DROPMATCH, ("method=dropmatch", "drafter=model", "drafter.k=10"), "DropMatch"),
    BenchConfig(PLD, ("method=spd", "drafter=pld"), "PLD"),
    # SPD at several draft lengths: the baseline at its best K beside the papers' (issue 45).
    BenchConfig("spd_k5", ("method=spd", "drafter=model", "drafter.k=5"), "SPD, K = 5", spd_k=5),
    BenchConfig("spd_k10", ("method=spd", "drafter=model", "drafter.k=10"), "SPD, K = 10", spd_k=10),
    BenchConfig("spd_k15", ("method=spd", "drafter=model", "drafter.k=15"), "SPD, K = 15", spd_k=15),
    # A draft of another family and tokenizer (--pair smollm2_to_qwen25_coder): text re-tokenised.
    BenchConfig("xtok_spd", ("method=spd", "drafter=model_xtok", "drafter.k=15"), "SPD, K = 15 (cross-family draft)"),
    BenchConfig("xtok_fly", ("method=fly", "drafter=model_xtok", "drafter.k=15"), "FLy, K = 15 (cross-family draft)"),
)
# The other benchmarks' contestants. The engine benchmark spelled ours with hyphens before issue 71
# (no committed file holds these: the aliases keep its commands working).
_OTHERS = (
    BenchConfig(SPD_MLA, ("method=spd", "drafter=mla"), "SPD, MLA drafting", aliases=("spd-mla",)),
    BenchConfig(FLY_MLA_HF, ("method=fly", "drafter=mla", "drafter.lookup=hf"), "FLy + MLA (lookup=hf)",
                aliases=("fly-mla-hf",)),
    BenchConfig(EAGLE3, ("method=spd", "drafter=eagle3"), "SPD, EAGLE head, chain"),
    BenchConfig(EAGLE3_TREE, ("method=spd", "drafter=eagle3_tree"), "SPD, EAGLE head, dynamic tree",
                aliases=("eagle3-tree",)),
    BenchConfig(LOOKAHEAD, ("method=spd", "drafter=lookahead"), "Lookahead"),
    BenchConfig(HF_AR, (), "target alone, transformers generate()", beside=TARGET_ALONE),
    BenchConfig(HF_ASSIST, (), "transformers assisted generation, K constant", beside=SPD),
    BenchConfig(HF_ASSIST_DYN, (), "transformers assisted generation, heuristic K", beside=SPD),
    BenchConfig(HF_PLD, (), "transformers prompt lookup", beside=PLD),
    BenchConfig(VLLM_AR, (), "target alone on vLLM", beside=TARGET_ALONE),
    BenchConfig(VLLM_SPD, (), "SPD on vLLM", beside=SPD),
    BenchConfig(VLLM_PLD, (), "PLD (n-gram) on vLLM", beside=PLD),
    BenchConfig(VLLM_EAGLE3, (), "SPD, EAGLE-3 head on vLLM", beside=EAGLE3),
)

# The speed benchmark's (its --configs; the order of its table and figure).
CONFIGS: dict[str, BenchConfig] = {c.name: c for c in _SPEED}
# Every declared name, the speed benchmark's first.
DECLARED: dict[str, BenchConfig] = {c.name: c for c in (*_SPEED, *_OTHERS)}
# Old spelling -> declared name, for every benchmark's commands and files.
ALIASES: dict[str, str] = {alias: c.name for c in DECLARED.values() for alias in c.aliases}
# The batch-size bench (bench/batch.py) before issue 71 named FLy + MLA "fly", its only FLy, where
# every other benchmark's "fly" is FLy with the draft model: its --contestants, and its --out files
# written before it recorded that its names are declared (results/bench/batch-2026-12-07), read
# "fly" as fly_mla. Nowhere else.
BATCH_OLD_NAMES: dict[str, str] = {FLY: FLY_MLA}

# The exact count comparisons the benchmark prints, (a, b, count): "a needs fewer <count> per
# token than b" (its rows, each decided by the sign test over problems).
COUNT_TESTS: tuple[tuple[str, str, str], ...] = (
    (FLY_MLA, FLY, "draft_forwards"),
    (FLY, SPD, "target_forwards"),
    (FLY_MLA, SPD, "target_forwards"),
    (DROPMATCH, SPD, "target_forwards"),
    (PLD, TARGET_ALONE, "target_forwards"),
    ("xtok_fly", "xtok_spd", "target_forwards"),
)


def canonical(name: str, old_names: Mapping[str, str] | None = None) -> str:
    """The declared name a command or a stored file spells as `name`: an alias (ALIASES, or the
    `old_names` of one benchmark's files: BATCH_OLD_NAMES) maps to its declared name; any other
    name, declared or not, is itself."""
    if old_names and name in old_names:
        return old_names[name]
    return ALIASES.get(name, name)


def pick(names: Iterable[str], allowed: Iterable[str], old_names: Mapping[str, str] | None = None) -> tuple[list[str], list[str]]:
    """A command's list of names, each mapped to its declared name (`canonical`), duplicates
    dropped: (the names among `allowed`, in the order given; the spellings that are not)."""
    names, known = list(names), set(allowed)
    chosen = [canonical(n, old_names) for n in names]
    return list(dict.fromkeys(c for c in chosen if c in known)), [n for n, c in zip(names, chosen) if c not in known]


def config_label(name: str) -> str:
    """A configuration's name as a reader knows it ('spd_k15' -> 'SPD, K = 15'); a name declared
    nowhere here is shown as it is spelled."""
    config = DECLARED.get(name)
    return config.label if config is not None else name


def spd_draft_length(name: str) -> int | None:
    """K of a configuration in SPD's draft-length series, else None."""
    config = CONFIGS.get(name)
    return config.spd_k if config is not None else None


def declared_order(names: set[str] | list[str]) -> list[str]:
    """`names` in the speed benchmark's order (CONFIGS), then any other name in sorted order."""
    present = set(names)
    return [c for c in CONFIGS if c in present] + sorted(present - set(CONFIGS))
