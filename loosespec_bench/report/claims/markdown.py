"""claims.md and claims.csv: the decided claims as a reader sees them."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from ...measure.stats.intervals import LEVEL
from ..compare import MIN_N_VERDICT
from .decide import CLUSTER_GPUS, CLUSTER_NEW_TOKENS, CLUSTER_PAIR, Decision, fmt_iv, fmt_p, spec_of
from .verdicts import pooled
from .provenance import AFTER_DATA, PRE_REGISTERED
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


def fmt_p_row(d: Decision) -> str:
    """The row's p on its declared scale, with its Monte Carlo error where it was resampled:
    `0.0123 one-sided`, `0.0501 ± 0.0022 two-sided (B = 10,000)`, `<= 1/(B+1) = 0.0001 ...`."""
    if d.p_raw is None:
        return "-"
    scale = "one-sided" if d.scale == "one-sided" else "two-sided"
    if d.n_boot:
        floor = (1 if d.scale == "one-sided" else 2) / (d.n_boot + 1)
        body = f"<= {floor:.1g} (the floor, 1/(B+1))" if d.p_raw <= floor * 1.0000001 else \
            f"{d.p_raw:.4f} ± {d.p_mc:.4f}" if d.p_mc is not None else f"{d.p_raw:.4f}"
        return f"{body} {scale} (B = {d.n_boot:,})"
    return f"{fmt_p(d.p_raw)} {scale}"


def registration_text(d: Decision) -> str:
    declared = (d.declared_at or "?")[:16].replace("T", " ")
    data = (d.data_at or "-")[:16].replace("T", " ")
    mark = "pre-registered" if d.registration == PRE_REGISTERED else f"**{d.registration}**" if d.registration else "-"
    return f"{mark} (declared {declared}; data from {data})"


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
    ntests = sum(counts.values())
    tested = [d for d in decisions if d.iut != "member"]
    pre = sum(1 for d in tested if d.registration == PRE_REGISTERED)
    after = [d for d in tested if d.registration == AFTER_DATA]
    scope = (f"one {ADJUST_TEXT[decl.adjust]} over all {ntests} confirmatory tests of this file (primary); the per-family "
             "view (families that test one hypothesis merged) is printed beside it as secondary") if decl.multiplicity == "report" \
        else "within each family (declared `multiplicity: family`)"
    lines = [
        f"Declaration: `{Path(decl.path).name}` sha256 `{decl.digest}` (version {decl.version}; {decl.declared}). "
        f"alpha = {decl.alpha:g}, {scope}; power for the planner {decl.power:.0%}; budget {decl.budget_factor:g} x the run's n.",
        "",
        f"Provenance (provenance.py: the first commit naming each claim against the data's own first record): "
        f"{pre} of {len(tested)} rows pre-registered; {len(after)} **declared after the data** "
        f"({', '.join(sorted({d.claim.id for d in after})) or 'none'}): those are not pre-registered tests, whatever the "
        "declaration says.",
        "",
        "Families, the secondary view (error control, number of tests): " + "; ".join(fams) + ".",
        "",
        "Verdicts (intersection-union members not counted): " + ", ".join(f"{k} {v}" for k, v in sorted(tally.items())) + ".",
        "",
        "| claim | family | estimand | test | data set | n | A | B | estimate [95%] | counts | p (declared scale) | adj. p (all tests) "
        "| verdict | per-family view | declared | n for 80% power | CPU h at that n | 70B GPU-h at that n | note |",
        "|---|---|---|---|---|---:|---|---|---|---|---:|---:|---|---|---|---:|---:|---:|---|",
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
        verdict = f"**{d.verdict}**" + (f"; {d.lean}" if d.lean else "")
        view = "-" if d.p_adj_family is None else f"{d.family_view}: adj. p {fmt_p(d.p_adj_family)}, {d.verdict_family}"
        note = "; ".join(x for x in (d.seed_note, d.note) if x) or "-"
        lines.append(
            f"| {d.claim.text} ({d.claim.figure}) | {fam.title if fam else d.claim.family} | {_estimand(d)} | "
            f"{TEST_TEXT.get(d.test, '-')} | {d.dataset} | {d.n or '-'}{f' ({d.groups})' if d.groups else ''} | "
            f"{fmt_iv(d.a, side, d.n)} | {fmt_iv(d.b, side, d.n)} | {est} | {d.counts or '-'} | {fmt_p_row(d)} | {adj} | "
            f"{verdict} | {view} | {registration_text(d)} | {need} | {'-' if d.cpu_hours is None else f'{d.cpu_hours:.1f}'} | "
            f"{'-' if d.cluster_gpu_hours is None else f'{d.cluster_gpu_hours:.0f}'} | {note} |"
        )
    decided = {d.claim.id for d in decisions}
    pending = [c for c in decl.claims if c.id not in decided]
    if pending:
        # Declared, but no run (or speed-evidence folder) they name exists yet: listed, so that a
        # reader sees the whole declaration, not only the claims whose data came in.
        lines += ["", f"Declared, no data yet ({len(pending)}): " + "; ".join(
            f"`{c.id}`" + (f" (folder `{c.folder}`)" if c.folder else "") for c in pending) + "."]
    pools = pooled(decisions)
    if pools:
        lines += ["", "Pooled, exploratory (no claim declared it): undecided 0/1 retention rows of loose rules that share a set "
                  "and lean the same way; per problem the configurations' net change against the one target alone, tested by "
                  "sign flips over problems (the rows share problems and the target's answers, so they are not independent "
                  "tests and are not added up as such).", "",
                  "| set | lean | rows (lost/gained) | problems | lost / gained, summed | one-sided p (sign-flip) |",
                  "|---|---|---|---:|---|---:|"]
        for r in pools:
            lines.append(f"| {r['dataset']} | {r['lean']} | {'; '.join(r['rows'])} | {r['problems']} | {r['lost']} / {r['gained']} | "
                         f"{max(r['p'], 1 / (r['n_perm'] + 1)):.4f} (B = {r['n_perm']:,}) |")
    lines += [
        "",
        "p is on the scale the claim declared: one-sided where the claim was declared one-sided (the 0/1 no-change claims, "
        "McNemar toward loss, at alpha), else two-sided (2 x the one-sided p of the row's best-supported conclusion, so "
        f"p < 0.05 is \"the {LEVEL:.0%} interval excludes the line\"; not on an exact McNemar row: its interval is the exact "
        "bound's, conservative). A resampling p is never printed below its resolution, 1/(B+1) one-sided, and carries its "
        "Monte Carlo standard error (± sqrt(p(1-p)/B)); a row whose adjusted p lies within 3 such errors of alpha is re-run "
        "with 10x the resamples (up to 400,000), and one still within 2 is marked seed-dependent and left undecided. "
        f"adj. p: {scope}; "
        "a conclusion stands when its adjusted p is below alpha (a planned look: below that look's nominal level). "
        "An undecided or not-decidable row says which conclusion its estimate leans to, with the estimate. "
        "declared: the first commit of the claims file naming the claim, against the first record of its data; a claim "
        "declared after its data is not a pre-registered test. "
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
            "counts": d.counts or None, "p_raw": d.p_raw, "p_scale": d.scale if d.p_raw is not None else None,
            "p_mc_se": d.p_mc, "n_boot": d.n_boot, "level_factor": d.level_factor if math.isfinite(d.level_factor) else None,
            "p_adjusted": d.p_adj, "conclusion_tested": d.conclusion or None,
            "verdict": d.verdict, "leans": d.lean or None, "seed_note": d.seed_note or None,
            "family_view": d.family_view or None, "p_adjusted_family": d.p_adj_family, "verdict_family": d.verdict_family or None,
            "declared_at": d.declared_at, "data_first_at": d.data_at, "registration": d.registration or None, "n_for_power": d.n_needed, "cpu_hours_at_n": d.cpu_hours,
            "cluster_gpu_hours_at_n": d.cluster_gpu_hours, "note": d.note or None, "runs": ";".join(d.folders), "source": d.claim.source,
        })
    path.parent.mkdir(parents=True, exist_ok=True)
    from ...safe_files import atomic_output

    with atomic_output(path, root=path.parent) as tmp:  # never through a link, never half a file
        pd.DataFrame(rows).to_csv(tmp, index=False)
    return path


VERDICT_COLUMNS = ("confirmed", "contradicted", "larger than claimed", "smaller than claimed", "undecided", "not decidable",
                   "not comparable")


def verdict_table(csvs: list[Path]) -> str:
    """One markdown table of verdicts per family over several claims.csv files (each decided
    under the claims.yaml beside it, whose family titles it prints): tests (rows with a p; an
    intersection-union claim's members are not counted), how many of them were pre-registered
    (declared before their data) and the rows in each verdict category; under it, what one Holm
    over every test of all the files would leave standing."""
    import pandas as pd

    from ...measure.stats.verdicts import adjust_pvalues

    lines = ["| family | declared in | tests | pre-registered | declared after the data | " + " | ".join(VERDICT_COLUMNS) + " |",
             "|---|---|---:|---:|---:|" + "---:|" * len(VERDICT_COLUMNS)]
    total = dict.fromkeys(VERDICT_COLUMNS, 0)
    reg_total = [0, 0]
    joint: list[tuple[str, float, str]] = []
    for path in csvs:
        df = pd.read_csv(path)
        decl_path = Path(path).with_name(DECLARATION_NAME)
        titles = {f.id: f.title for f in load_declaration(decl_path).families.values()} if decl_path.exists() else {}
        df = df[df["iut"].astype(str) != "member"]
        reg = df["registration"] if "registration" in df else pd.Series([None] * len(df), index=df.index)
        for family, g in df.groupby("family", sort=False):
            cats = g["verdict"].map(verdict_category).value_counts()
            for c in VERDICT_COLUMNS:
                total[c] += int(cats.get(c, 0))
            greg = reg.loc[g.index]
            tested = g["p_raw"].notna()
            n_pre = int(((greg == "pre-registered") & tested).sum())
            n_after = int(((greg == "declared after the data") & tested).sum())
            reg_total[0] += n_pre
            reg_total[1] += n_after
            lines.append(f"| {titles.get(family, family)} | {decl_path.parent.name}/{DECLARATION_NAME} | {int(tested.sum())} | "
                         f"{n_pre} | {n_after} | " + " | ".join(str(int(cats.get(c, 0))) for c in VERDICT_COLUMNS) + " |")
        for _, r in df[df["p_raw"].notna()].iterrows():
            factor = r.get("level_factor")
            factor = 1.0 if factor is None or pd.isna(factor) else float(factor)
            joint.append((f"{decl_path.parent.name}:{r.get('claim', '?')}/{r.get('dataset', '?')}", min(1.0, float(r["p_raw"]) * factor),
                          str(r["verdict"])))
    lines.append(f"| **all** | | | **{reg_total[0]}** | **{reg_total[1]}** | " + " | ".join(f"**{v}**" for v in total.values()) + " |")
    if joint:
        adj = adjust_pvalues([p for _, p, _ in joint], "holm")
        concl = [(k, v) for (k, _, v), a in zip(joint, adj) if verdict_category(v) in VERDICT_COLUMNS[:4]]
        fall = [k for (k, _, v), a in zip(joint, adj) if verdict_category(v) in VERDICT_COLUMNS[:4] and not a < 0.05]
        lines += ["", f"One Holm over all {len(joint)} tests of these files (a sensitivity view; each file's own Holm is primary): "
                  f"{len(concl) - len(fall)} of the {len(concl)} conclusions stand" +
                  (f"; {len(fall)} would read undecided: {', '.join(fall)}." if fall else ".")]
    return "\n".join(lines) + "\n"
