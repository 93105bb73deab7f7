"""claims.md and claims.csv: the decided claims as a reader sees them."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ...measure.stats.intervals import LEVEL
from ..compare import MIN_N_VERDICT
from .decide import CLUSTER_GPUS, CLUSTER_NEW_TOKENS, CLUSTER_PAIR, Decision, fmt_iv, fmt_p, spec_of
from .declaration import ADJUST_TEXT, DECLARATION_NAME, OCCASIONS_ESTIMAND, Declaration, ESTIMAND_TEXT, TEST_TEXT, load_declaration


# ---- claims.md -----------------------------------------------------------------------------------
def _estimand(d: Decision) -> str:
    text = OCCASIONS_ESTIMAND if d.claim.test == "occasions" else ESTIMAND_TEXT[(d.claim.figure, d.claim.estimand)]
    if d.claim.size is not None:
        text += f", claimed {d.claim.size[2]}"
    elif d.claim.figure == "retention":
        text += f", >= {d.claim.margin:g}"
    elif d.claim.figure == "overhead":
        text += f", {'>' if d.claim.direction > 0 else '<'} {d.claim.margin:.2%}"
    else:
        text += f", {'> 0' if d.claim.estimand == 'difference' else '> 1'}" if d.claim.direction > 0 else \
            f", {'< 0' if d.claim.estimand == 'difference' else '< 1'}"
    return text


def family_counts(decisions: list[Decision]) -> dict[str, int]:
    """Tests per family (an intersection-union claim counts once)."""
    out: dict[str, int] = {}
    for d in decisions:
        if d.iut != "member" and d.p_raw is not None:
            out[d.claim.family] = out.get(d.claim.family, 0) + 1
    return out


def verdict_category(verdict: str) -> str:
    for name in ("confirmed", "contradicted", "larger than claimed", "smaller than claimed", "not decidable",
                 "not comparable"):
        if verdict.startswith(name):
            return name
    return "undecided"


def format_claims(decisions: list[Decision], decl: Declaration | None = None) -> str:
    decl = decl or load_declaration()
    counts = family_counts(decisions)
    fams = [f"{f.title} ({ADJUST_TEXT[f.adjust]}, "
            f"{counts.get(f.id, 0)} test{'s' if counts.get(f.id, 0) != 1 else ''})"
            for f in decl.families.values() if counts.get(f.id, 0)]
    tally: dict[str, int] = {}
    for d in decisions:
        if d.iut != "member":
            tally[verdict_category(d.verdict)] = tally.get(verdict_category(d.verdict), 0) + 1
    lines = [
        f"Declaration: `{Path(decl.path).name}` sha256 `{decl.digest}` (version {decl.version}; {decl.declared}). "
        f"alpha = {decl.alpha:g} per family; power for the planner {decl.power:.0%}; budget {decl.budget_factor:g} x the run's n.",
        "",
        "Families (error control, number of tests): " + "; ".join(fams) + ".",
        "",
        "Verdicts (intersection-union members not counted): " + ", ".join(f"{k} {v}" for k, v in sorted(tally.items())) + ".",
        "",
        "| claim | family | estimand | test | data set | n | A | B | estimate [95%] | counts | raw p | adj. p | verdict "
        "| n for 80% power | CPU h at that n | 70B GPU-h at that n | note |",
        "|---|---|---|---|---|---:|---|---|---|---|---:|---:|---|---:|---:|---:|---|",
    ]
    for d in decisions:
        spec = spec_of(d.claim)
        side = ".3f" if d.claim.figure in ("accuracy", "retention") else ".2%" if d.claim.figure == "overhead" else ".2f"
        signed = d.claim.figure in ("retention", "overhead") or d.claim.estimand == "ratio"  # no "+": not a difference
        est = fmt_iv(d.diff, spec if signed else "+" + spec, d.n)
        if d.claim.figure == "retention" and d.floor is not None:
            est += f" (SPD: {fmt_iv(d.floor, spec)})"
        need = str(d.n_needed) if d.n_needed is not None else "-"
        fam = decl.families.get(d.claim.family)
        adj = "(IUT: unadjusted)" if d.iut == "member" else fmt_p(d.p_adj)
        lines.append(
            f"| {d.claim.text} ({d.claim.figure}) | {fam.title if fam else d.claim.family} | {_estimand(d)} | "
            f"{TEST_TEXT.get(d.test, '-')} | {d.dataset} | {d.n or '-'}{f' ({d.groups})' if d.groups else ''} | "
            f"{fmt_iv(d.a, side, d.n)} | {fmt_iv(d.b, side, d.n)} | {est} | {d.counts or '-'} | {fmt_p(d.p_raw)} | {adj} | "
            f"**{d.verdict}** | {need} | {'-' if d.cpu_hours is None else f'{d.cpu_hours:.1f}'} | "
            f"{'-' if d.cluster_gpu_hours is None else f'{d.cluster_gpu_hours:.0f}'} | {d.note or '-'} |"
        )
    decided = {d.claim.id for d in decisions}
    pending = [c for c in decl.claims if c.id not in decided]
    if pending:
        # Declared, but no run (or speed-evidence folder) they name exists yet: listed, so that a
        # reader sees the whole declaration, not only the claims whose data came in.
        lines += ["", f"Declared, no data yet ({len(pending)}): " + "; ".join(
            f"`{c.id}`" + (f" (folder `{c.folder}`)" if c.folder else "") for c in pending) + "."]
    lines += [
        "",
        "Every p is on the two-sided scale (2 x the one-sided p of the row's best-supported conclusion), so p < 0.05 is "
        f"\"the {LEVEL:.0%} interval excludes the line\" (not on an exact McNemar row: its interval is the exact bound's, "
        f"conservative, and can reach the line where McNemar's p is below 0.05). adj. p: within the row's family ({', '.join(sorted({ADJUST_TEXT[f.adjust] for f in decl.families.values()}))}); "
        "a conclusion stands when its adjusted p is below alpha (a planned look: below that look's nominal level). "
        "Direction claims: confirmed / contradicted. Size claims: confirmed when the interval lies inside the stated range, "
        "larger / smaller than claimed when outside it on the claimed side of no effect, contradicted on the other side. "
        "\"on every set\": one intersection-union test (its row 'every set'; each set at the unadjusted level). "
        "Undecided at this n: the n for 80% power at the observed effect (the bound facing the line shrinks as 1/sqrt(n)); "
        f"an exact McNemar row: the n for that power over its looks against a {decl.imbalance:g}:1 loss:gain split at the "
        "discordance seen so far, with the non-inferiority margin its last look supports in its note; "
        "above budget x n: not decidable at this scale. A and B: each side's figure (quality: exact Clopper-Pearson "
        f"intervals); tau and speed: {LEVEL:.0%} paired BCa bootstrap over the problems both runs answered (speed: timed in both); "
        "an overhead row (one DropMatch run): B is DropMatch's measured share of decode time, the estimate the declared "
        "estimand with its BCa interval over problems. "
        f"No verdict below n = {MIN_N_VERDICT}. Costs: the runs' own CPU seconds per problem and, for {CLUSTER_PAIR} "
        f"({CLUSTER_GPUS} GPUs a job, {CLUSTER_NEW_TOKENS} new tokens), the planner's rates (loosespec_bench/measure/costmodel.py). "
        "docs/algorithms.md 7.6 defines each verdict.",
    ]
    return "\n".join(lines)


def decisions_to_csv(decisions: list[Decision], path: Path) -> Path:
    rows = []
    for d in decisions:
        rows.append({
            "claim": d.claim.id, "paper": d.claim.paper, "text": d.claim.text, "figure": d.claim.figure, "dataset": d.dataset,
            "family": d.claim.family, "estimand": _estimand(d), "test": TEST_TEXT.get(d.test, ""), "iut": d.iut or None,
            "n": d.n, "groups": d.groups or None, **{f"a{s}": (d.a or (None, None, None))[i] for i, s in enumerate(("", "_ci_low", "_ci_high"))},
            **{f"b{s}": d.b[i] for i, s in enumerate(("", "_ci_low", "_ci_high"))},
            **{f"estimate{s}": d.diff[i] for i, s in enumerate(("", "_ci_low", "_ci_high"))},
            "counts": d.counts or None, "p_raw": d.p_raw, "p_adjusted": d.p_adj, "conclusion_tested": d.conclusion or None,
            "verdict": d.verdict, "n_for_power": d.n_needed, "cpu_hours_at_n": d.cpu_hours,
            "cluster_gpu_hours_at_n": d.cluster_gpu_hours, "note": d.note or None, "runs": ";".join(d.folders), "source": d.claim.source,
        })
    path.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


VERDICT_COLUMNS = ("confirmed", "contradicted", "larger than claimed", "smaller than claimed", "undecided", "not decidable",
                   "not comparable")


def verdict_table(csvs: list[Path]) -> str:
    """One markdown table of verdicts per family over several claims.csv files (each decided
    under the claims.yaml beside it, whose family titles it prints): tests (rows with a p; an
    intersection-union claim's members are not counted) and the rows in each verdict category."""
    import pandas as pd

    lines = ["| family | declared in | tests | " + " | ".join(VERDICT_COLUMNS) + " |",
             "|---|---|---:|" + "---:|" * len(VERDICT_COLUMNS)]
    total = dict.fromkeys(VERDICT_COLUMNS, 0)
    for path in csvs:
        df = pd.read_csv(path)
        decl_path = Path(path).with_name(DECLARATION_NAME)
        titles = {f.id: f.title for f in load_declaration(decl_path).families.values()} if decl_path.exists() else {}
        df = df[df["iut"].astype(str) != "member"]
        for family, g in df.groupby("family", sort=False):
            cats = g["verdict"].map(verdict_category).value_counts()
            for c in VERDICT_COLUMNS:
                total[c] += int(cats.get(c, 0))
            lines.append(f"| {titles.get(family, family)} | {decl_path.parent.name}/{DECLARATION_NAME} | {int(g['p_raw'].notna().sum())} | "
                         + " | ".join(str(int(cats.get(c, 0))) for c in VERDICT_COLUMNS) + " |")
    lines.append("| **all** | | | " + " | ".join(f"**{v}**" for v in total.values()) + " |")
    return "\n".join(lines) + "\n"
