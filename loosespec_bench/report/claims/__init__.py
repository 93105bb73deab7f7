"""The papers' testable claims, each decided from the runs: `python -m loosespec_bench.report claims`.

Claims are pre-registered data: a declaration file (claims.yaml; the packaged one is copied
beside the results the first time, and the copy there is what is decided, its sha256 printed in
claims.md) gives each claim its family, figure, estimand, test, direction or size, and planned
looks. A claim compares two configurations on the same problems (report/compare.py) or one
configuration with its own target alone (retention). docs/algorithms.md 7.6 says what each
verdict means; in short, per row (a claim on one set):

- a test gives one-sided p-values for each conclusion the claim allows, printed on the scale the
  claim declared (issue 70): one-sided for a claim declared one-sided (the 0/1 no-change claims,
  McNemar toward loss), else the two-sided scale (2 x one-sided, so p < 0.05 is "the 95% interval
  excludes the line"); a resampling p is floored at 1/(B+1) and carries its Monte Carlo error:
  tau and speed by the
  paired BCa bootstrap (stats.BootstrapTest), paired 0/1 quality exactly (McNemar on the
  discordant split; the intervals of difference and retention by stats.ExactPairedBinary),
  graded quality by the declared paired test (t by default, or Wilcoxon signed-rank);
- direction claims conclude confirmed or contradicted; size claims ("about 10%", "1.09-1.33x")
  confirmed (the interval inside the stated range), larger / smaller than claimed (outside it,
  on the claimed side of no effect) or contradicted (on the other side of no effect);
- the row's p is its best-supported conclusion's; a claim "on every set" is one
  intersection-union test (its p the largest of its sets'; each set at the unadjusted level);
  the p-values of every test of the file are adjusted together (Holm by default; Benjamini-
  Hochberg or none; `multiplicity: family` adjusts within each family instead), the per-family
  view printed beside as secondary, and a conclusion stands when its adjusted p is below alpha;
- each claim carries its provenance (provenance.py): declared before its data (pre-registered)
  or after it, from git and the data's own records;
- otherwise: undecided at this n, with the n for 80% power at the observed effect, or not
  decidable at this scale when that n is over budget_factor x the run's n; either says which
  conclusion its estimate leans to;
- planned looks (a group-sequential plan with O'Brien-Fleming or Pocock alpha spending) set the
  level at each look; a top-up that no claim planned leaves the verdict at the first look, and the
  topped-up figure is reported beside it as exploratory.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ..labels import is_lossless, method_label, rule_of
from .verdicts import decide
from .declaration import DECLARATION, DECLARATION_NAME, Declaration, load_declaration
from .examples import format_examples, loose_examples
from .markdown import decisions_to_csv, format_claims
from ...safe_files import atomic_write_bytes, atomic_write_text, read_bounded


def declaration_for(out: Path, claims: Path | None = None) -> Declaration:
    """The declaration a report in `out` decides: `claims` when given, else out/claims.yaml,
    else the packaged one, which is then copied to out/claims.yaml (the copy beside the results
    is the pre-registration: edit it there, and its hash in claims.md changes)."""
    if claims is not None:
        return load_declaration(claims)
    beside = out / DECLARATION_NAME
    if not beside.is_file():
        out.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(beside, read_bounded(DECLARATION), root=out)  # never through a (dangling) link
    return load_declaration(beside)


def write_claims(index: pd.DataFrame, out: Path, *, seed: int = 0, claims: Path | None = None) -> list[Path]:
    """claims.md / claims.csv (one verdict per claim and set, under the declaration in
    out/claims.yaml or `claims`) and loose_examples.md (the loose rules' runs that lost answers)
    in `out`."""
    decl = declaration_for(out, claims)
    decisions = decide(index, decl, seed=seed)
    out.mkdir(parents=True, exist_ok=True)
    from . import provenance
    from .verdicts import LAST_PROVENANCE

    rec = LAST_PROVENANCE.get(str(decl.path))
    if rec is not None:  # git's answer kept beside the declaration, for a copy without git
        provenance.write(Path(decl.path), rec)
    md = out / "claims.md"
    atomic_write_text(md, "# The papers' claims, decided\n\n" + format_claims(decisions, decl) + "\n", root=out)
    paths = [md, decisions_to_csv(decisions, out / "claims.csv")]
    # The package's loose rules (of a name no rule claims nothing is known: no examples).
    loose = index[(index["status"] == "complete") & index["method"].map(lambda m: rule_of(m) is not None and not is_lossless(m))]
    # The heading names the rule and its knobs: two DropMatch runs on one set differ only by criterion.
    examples = {f"{r['experiment']}/{r['run_id']}: {method_label(r)} on {r['dataset']}": loose_examples(Path(r["run_dir"]))
                for _, r in loose.iterrows()}
    ex = out / "loose_examples.md"
    undecoded = any(not e.get("decoded", True) for v in examples.values() for e in v)
    if undecoded and ex.is_file():
        # No tokenizer here (the model is not installed): ids instead of text would replace a
        # readable file written where it was; keep that one.
        print(f"claims: {ex} kept (the runs' tokenizer cannot be loaded offline here: it would print token ids)")
    else:
        atomic_write_text(ex, format_examples({k: v for k, v in examples.items() if v}) + "\n", root=out)
    paths.append(ex)
    return paths
