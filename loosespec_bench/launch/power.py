"""The plan's power table (`python -m loosespec_bench.plan plan`).

Power (`plan`, DRY_RUN=1): per data set, the paired samples n at which the exact McNemar test
of method vs target alone (two-sided 5%) rejects with probability --power (default 0.8) at the
effect observed in the plan's finished paired runs on that set: d = the share of pairs where
exactly one side is right, e = the method's accuracy - the target alone's, and
n = (z_0.975 sqrt(d) + z_power sqrt(d - e^2))^2 / e^2 (Connor 1987; stats.n_for_power_mcnemar);
where no run has finished, an assumed d and e (--discordance, default 0.1; --effect, default
0.05). An n above --budget-factor (default 10) x the plan's n for the set prints "not decidable
at this scale (n = ...)". Beside it, what running every point of the plan on that set at n
samples would cost, with the plan's cost model (plan.estimate).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

DEFAULT_POWER = 0.8
DEFAULT_EFFECT = 0.05       # accuracy difference assumed where no paired run of the set has finished
DEFAULT_DISCORDANCE = 0.10  # discordance assumed likewise
DEFAULT_BUDGET_FACTOR = 10.0  # an n above this x the plan's n for the set: not decidable at this scale


def observed_discordance(folder: Path) -> tuple[int, int, int]:
    """(lost, gained, scored pairs) of a run folder's paired records (0/1 `correct` on both
    sides): lost = the target alone right and the method wrong, gained the reverse; (0, 0, 0)
    without a finished record."""
    from ..store.run_folder import RunFolder

    if not (folder / RunFolder.SAMPLES).is_file():
        return 0, 0, 0
    lost = gained = n = 0
    for rec in RunFolder(folder, create=False).records():
        base = rec.get("baseline") or {}
        a, b = (rec.get("score") or {}).get("correct"), (base.get("score") or {}).get("correct")
        if isinstance(a, bool) and isinstance(b, bool):
            n += 1
            lost += b and not a
            gained += a and not b
    return lost, gained, n


@dataclass
class Power:
    dataset: str
    discordance: float
    effect: float               # method's accuracy - the target alone's (observed, else assumed)
    observed_pairs: int         # 0: discordance and effect are assumed
    runs: int                   # finished paired runs they were observed in
    n_needed: float | None      # n for the power (inf: no effect seen; None: nothing to size from)
    n_planned: int              # the largest sample count the plan gives the set now
    budget: float | None        # budget_factor x n_planned (None: the set's size is unknown offline)
    hours_at_n: float           # every launched point of the set at n samples
    unit: str
    set_size: int = 0           # the data set's full size (0: unknown offline); an n above it is not reachable on this set

    @property
    def reachable(self) -> bool:
        return not (self.set_size and self.n_needed is not None and math.isfinite(self.n_needed) and self.n_needed > self.set_size)

    @property
    def decidable(self) -> bool:
        return self.n_needed is not None and math.isfinite(self.n_needed) and (self.budget is None or self.n_needed <= self.budget) and self.reachable


def power_verdict(r: Power) -> str:
    """The n to write in the table, or why there is none: "not decidable at this scale (n = ...)"
    above the budget, a category of its own (distinct from a run still short of its n)."""
    if r.n_needed is None:
        return "- (no discordance to size from)"
    if math.isinf(r.n_needed):
        return "not decidable at this scale (no effect seen)"
    n = f"{int(r.n_needed):,}"
    if not r.reachable:
        return f"not reachable on this set (n = {n} > its {r.set_size:,} problems)"
    if r.budget is not None and r.n_needed > r.budget:
        return f"not decidable at this scale (n = {n})"
    return n


def format_power(rows: Sequence[Power], power: float = DEFAULT_POWER, budget_factor: float = DEFAULT_BUDGET_FACTOR) -> str:
    lines = [f"power: paired samples n for {power:.0%} power of the exact McNemar test (two-sided 5%) of method vs target alone "
             "at the observed accuracy difference (assumed where no paired run has finished)",
             f"  {'dataset':<14} {'discordance':>11} {'effect':>7}  {'from':<26} {'planned':>8}  "
             f"{'n for ' + format(power, '.0%') + ' power':<42}  est. cost of the set at n"]
    for r in rows:
        src = f"{r.observed_pairs} pairs in {r.runs} run(s)" if r.observed_pairs else "assumed (no finished run)"
        cost = f"{format_hours(r.hours_at_n)} {r.unit}" if r.n_needed is not None and math.isfinite(r.n_needed) and r.reachable else "-"
        lines.append(f"  {r.dataset:<14} {r.discordance:>11.3f} {r.effect:>+7.3f}  {src:<26} {r.n_planned:>8}  "
                     f"{power_verdict(r):<42}  {cost}")
    lines.append("  n = (z_0.975 sqrt(d) + z_power sqrt(d - e^2))^2 / e^2 (Connor 1987), d = share of pairs where exactly one "
                 "side is right (0 observed: 3/pairs), e = method's accuracy - target's; "
                 f"above {budget_factor:g} x the planned n: not decidable at this scale; above the set's size: not reachable on this set "
                 "(a larger effect, or another set, is needed to decide it); "
                 "--power P, --effect E, --discordance D, --budget-factor F")
    return "\n".join(lines)


def format_hours(x: float) -> str:
    """Hours as the plan prints them: one decimal below 100, whole hours (thousands separated) above."""
    return f"{x:,.1f}" if x < 100 else f"{x:,.0f}"
