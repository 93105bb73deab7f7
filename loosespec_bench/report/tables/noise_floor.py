"""The noise floor: each loose rule's quality beside the lossless rule at the same settings."""

from __future__ import annotations

from typing import Any

import pandas as pd

from ..grouping import (
    changed_text,
    figure_cell,
    group_by_config,
    interval_notes,
    is_loose,
    lossless_key,
    lossless_key_any_drafter,
    our_runs,
    partial_notes,
    samples_of,
)
from ..labels import dataset_label, is_target_alone, method_label
from ..render import Table


# A row's role, short enough for its column; the table's notes spell each out.
TWIN = "twin"
OTHER_DRAFTER = "floor, other drafter"


def noise_floor_table(index: pd.DataFrame, published: pd.DataFrame | None = None) -> Table:
    """Each loose rule's quality on each data set, and right under it the lossless rule (SPD) at
    the same pair, drafter, K and dtype on the same data set: its retention interval is what
    numerics alone (bf16 near-ties) move quality by, the floor a loose rule is judged against."""
    del published
    runs = our_runs(index)
    runs = runs[~runs["method"].map(is_target_alone)] if not runs.empty else runs
    # Short scope names (the header of a column is set beside a dozen others at 7 pt); the notes
    # say what each is.
    columns = ["pair", "data set", "method", "role", "score", "target alone", "difference",
               "lost / gained (p)", "retention", "identical", "n"]
    # The tidy CSV keeps each figure's full name.
    figures = ("score", "target-alone score", "score − target alone", "lost / gained (sign test)", "retention",
               "identical to target alone", "n")
    meta = {c: ("", f) for c, f in zip(columns[4:], figures)}
    lossless: dict[tuple, list] = {}
    # The fallback: SPD with the same everything but the drafter (K kept). In exact arithmetic
    # SPD's output is the target's whatever drafts it; in bf16 the verified blocks' contents
    # differ, so the floor is close, not the same experiment, and its row says which drafter.
    lossless_other: dict[tuple, list] = {}
    for _, r in runs.iterrows():
        if not is_loose(r):
            lossless.setdefault((lossless_key(r), r["dataset"]), []).append(r)
            lossless_other.setdefault((lossless_key_any_drafter(r), r["dataset"]), []).append(r)
    ours, suffix, variant_notes = group_by_config(runs[[is_loose(r) for _, r in runs.iterrows()]] if not runs.empty else runs)

    def quality(members: list) -> list[Any]:
        # The set's headline quality (index `score`: accuracy, pass@1, NIAH's recall), on which
        # retention is taken.
        return [figure_cell(members, "score", "score"), figure_cell(members, "baseline_score", "score"),
                figure_cell(members, "score_diff", "diff"), changed_text(members), figure_cell(members, "retention", "score", with_n=True),
                figure_cell(members, "identical_to_target", "score"), samples_of(members) or ""]

    blocks: list[list[list[Any]]] = []  # a loose row and, right under it, its twin
    missing: list[str] = []
    other_drafter: list[str] = []
    for key, entry in ours.items():
        r0 = entry["row"]
        label = method_label(r0) + suffix.get(key, "")
        for ds, members in entry["by_ds"].items():
            block = [[r0["pair"], dataset_label(ds), label, "loose", *quality(members)]]
            twin = lossless.get((lossless_key(members[0]), ds), [])
            near = [] if twin else lossless_other.get((lossless_key_any_drafter(members[0]), ds), [])
            if twin:
                block.append([r0["pair"], dataset_label(ds), method_label(twin[0]), TWIN, *quality(twin)])
            elif near:
                # Several SPD drafters at this K would be several floors: the first by label, named.
                near = sorted(near, key=lambda r: str(method_label(r)))
                near = [r for r in near if method_label(r) == method_label(near[0])]
                block.append([r0["pair"], dataset_label(ds), method_label(near[0]), OTHER_DRAFTER, *quality(near)])
                other_drafter.append(f"{label} on {ds}")
            else:
                missing.append(f"{label} on {ds}")
            blocks.append(block)
    blocks.sort(key=lambda b: (str(b[0][0]), str(b[0][2]), str(b[0][1])))
    rows = [row for block in blocks for row in block]
    notes = [
        "twin (lossless twin): the SPD run with every setting of the loose run but the rule's own (same pair, drafter, K, dtype, data set, generation); its output differs from the target alone only by numerics (bf16 near-ties), so its retention interval is the noise floor.",
        "Columns: target alone = the target alone's score on the same problems; difference = score − target alone (paired); identical = the share of samples whose output equals the target alone's, token for token. Roles: loose = the loose rule; twin = its lossless twin; floor, other drafter = SPD with another drafter (below).",
        "lost / gained (p): samples whose score the method lowered / raised against the target alone's, and the exact two-sided sign test on them (McNemar's exact test for 0/1 scores). The difference's interval is exact for 0/1 scores (stats.exact.ExactPairedBinary); the bootstrap's, printed before, excluded 0 too easily (4 lost, 0 gained: [-0.30, -0.03], yet p = 0.125).",
        *interval_notes(runs),
        *([f"floor, other drafter: no SPD run with this drafter, so SPD at the same K with another drafter (named in the row) stands as the floor: in exact arithmetic SPD's output is the target's whatever drafts it, in bf16 the verified blocks differ, so it is the nearest floor, not the twin. For: {'; '.join(other_drafter)}."]
          if other_drafter else []),
        ("No lossless run at all for: " + "; ".join(missing) + ".") if missing else
        ("Every loose row has its lossless twin." if not other_drafter else "Every other loose row has its lossless twin."),
        *variant_notes,
        *partial_notes(runs),
    ]
    return Table("noise_floor", "Loose rules' quality beside the lossless rule (the bf16 noise floor)", columns, rows, notes, ids=4, meta=meta)

