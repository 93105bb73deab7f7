"""The reviewer's check (issue 70): every committed claims file, its decided claims.csv and the
README beside them are read as a hostile reviewer reads them, and the test fails on

- a claim declared after its data that is printed or counted as pre-registered (the statuses in
  claims.csv are recomputed from the committed provenance.json, and a README may not say that
  every claim is pre-registered while one is not);
- a claim declared one-sided whose p is printed on the two-sided scale (claims.csv's p against
  the exact one-sided McNemar p of its lost / gained split; a README table headed "one-sided p"
  against the same p of its own lost / gained column);
- a resampling p below its resolution, 1 / (B + 1) one-sided.

Reads committed files only (no run is decided): fast."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pandas as pd
import pytest
from scipy import stats

from loosespec_bench.report.claims import provenance as prov
from loosespec_bench.report.claims.declaration import load_declaration

ROOT = Path(__file__).resolve().parents[3]
RESULTS = ROOT / "results"
DECLARATIONS = sorted(p for p in RESULTS.rglob("claims.yaml") if (p.parent / "claims.csv").is_file()
                      and "pilot" not in p.as_posix())
READMES = sorted(RESULTS.rglob("README.md"))
EVERY_PREREG = re.compile(r"\b(every|all)\b[^.|]{0,80}\bpre-?registered", re.IGNORECASE)


def _csv(decl: Path) -> pd.DataFrame:
    return pd.read_csv(decl.parent / "claims.csv")


def _one_sided_mcnemar(lost: int, gained: int) -> float:
    n = lost + gained
    return 1.0 if n == 0 else float(stats.binom.sf(lost - 1, n, 0.5))


@pytest.mark.parametrize("decl", DECLARATIONS, ids=lambda p: p.parent.relative_to(RESULTS).as_posix())
def test_registration_is_what_the_records_say(decl: Path) -> None:
    df = _csv(decl)
    assert "registration" in df, f"{decl.parent}/claims.csv has no registration column: regenerate it (issue 70)"
    rec = prov.load(decl)
    assert rec is not None, f"{decl.parent}/provenance.json is missing: the report cannot say what was pre-registered without git"
    base = decl.resolve().parent
    for _, r in df.iterrows():
        declared = (rec.declared.get(r["claim"]) or {}).get("at")
        folders = [f for f in str(r.get("runs") or "").split(";") if f and f != "nan"]
        times = [(rec.data.get(prov.rel_path(f, base)) or {}).get("at") for f in folders]
        times = [t for t in times if t]
        want = prov.status(declared, min(times) if times else None)
        got = r["registration"]
        assert got == want, f"{decl.parent.name}:{r['claim']}/{r['dataset']}: claims.csv says {got!r}, its records say {want!r}"
    md = (decl.parent / "claims.md").read_text(encoding="utf-8")
    after = df[df["registration"] == prov.AFTER_DATA]
    if len(after):
        assert "declared after the data" in md, f"{decl.parent}/claims.md does not mark the claims declared after their data"


def test_no_readme_calls_every_claim_pre_registered() -> None:
    after = {d.parent for d in DECLARATIONS if (_csv(d)["registration"] == prov.AFTER_DATA).any()}
    for readme in READMEs_under(after):
        for m in EVERY_PREREG.finditer(readme.read_text(encoding="utf-8")):
            sentence = m.group(0)
            assert re.search(r"\bnot\b|after", sentence), (
                f"{readme.relative_to(ROOT)}: {sentence!r}, but claims under it were declared after their data")


def READMEs_under(folders: set[Path]) -> list[Path]:
    """The READMEs that speak for these folders: theirs and their parents' up to results/."""
    out = []
    for readme in READMES:
        if any(f == readme.parent or readme.parent in f.parents for f in folders):
            out.append(readme)
    return out


@pytest.mark.parametrize("decl", DECLARATIONS, ids=lambda p: p.parent.relative_to(RESULTS).as_posix())
def test_p_on_the_declared_scale(decl: Path) -> None:
    df = _csv(decl)
    claims = {c.id: c for c in load_declaration(decl).claims}
    assert "p_scale" in df, f"{decl.parent}/claims.csv does not say which scale its p is on: regenerate it (issue 70)"
    for _, r in df[df["p_raw"].notna()].iterrows():
        c = claims[r["claim"]]
        if c.one_sided and c.size is None and r["conclusion_tested"] == "confirmed":
            assert r["p_scale"] == "one-sided", f"{r['claim']}: declared one-sided, p printed {r['p_scale']}"
            m = re.search(r"lost / gained (\d+) / (\d+)", str(r["counts"]))
            if m and "McNemar" in str(r["test"]):
                want = _one_sided_mcnemar(int(m.group(1)), int(m.group(2)))
                assert math.isclose(float(r["p_raw"]), want, rel_tol=1e-6, abs_tol=1e-12), (
                    f"{r['claim']}/{r['dataset']}: p {r['p_raw']:.3g} is not the one-sided McNemar p {want:.3g}")


@pytest.mark.parametrize("decl", DECLARATIONS, ids=lambda p: p.parent.relative_to(RESULTS).as_posix())
def test_no_resampling_p_below_its_resolution(decl: Path) -> None:
    df = _csv(decl)
    assert "n_boot" in df
    rows = df[df["p_raw"].notna() & df["test"].astype(str).str.contains("bootstrap")]
    for _, r in rows.iterrows():
        assert pd.notna(r["n_boot"]), f"{r['claim']}/{r['dataset']}: a bootstrap p without its resample count"
        floor = 1 / (float(r["n_boot"]) + 1)
        assert float(r["p_raw"]) >= floor * (1 - 1e-9), (
            f"{r['claim']}/{r['dataset']}: p {r['p_raw']:.3g} below 1/(B+1) = {floor:.3g} (B = {int(r['n_boot']):,})")
        assert pd.notna(r["p_mc_se"]), f"{r['claim']}/{r['dataset']}: a bootstrap p without its Monte Carlo error"


def _tables(text: str) -> list[list[list[str]]]:
    tables, cur = [], []
    for line in text.splitlines():
        if line.startswith("|"):
            cur.append([c.strip() for c in line.strip().strip("|").split("|")])
        elif cur:
            tables.append(cur)
            cur = []
    if cur:
        tables.append(cur)
    return tables


@pytest.mark.parametrize("readme", READMES, ids=lambda p: p.relative_to(RESULTS).as_posix())
def test_readme_one_sided_columns_are_one_sided(readme: Path) -> None:
    for table in _tables(readme.read_text(encoding="utf-8")):
        head = [h.lower() for h in table[0]]
        p_col = next((i for i, h in enumerate(head) if "one-sided p" in h), None)
        lg_col = next((i for i, h in enumerate(head) if "lost / gained" in h), None)
        if p_col is None or lg_col is None:
            continue
        for row in table[2:]:
            m = re.match(r"(\d+) / (\d+)", row[lg_col])
            if not m or row[p_col] in ("-", ""):
                continue
            want = _one_sided_mcnemar(int(m.group(1)), int(m.group(2)))
            shown = row[p_col].replace("<", "").strip()
            if row[p_col].startswith("<"):
                assert want < float(shown), f"{readme.name}: {row}: one-sided p {want:.3g} is not < {shown}"
                continue
            digits = len(shown.split(".")[1]) if "." in shown else 0
            assert abs(float(shown) - want) <= 0.5 * 10 ** -digits + 1e-12 or float(f"{want:.2g}") == float(shown), (
                f"{readme.relative_to(ROOT)}: {row[:3]}: printed {shown}, the one-sided p of {m.group(0)} is {want:.3g}")


def test_the_cpu_readme_states_the_scale_first() -> None:
    """The replication's README says the pair, the CPU, the dtype, the prompt and the budget in its
    first paragraph, and every verdict bullet says at which scale it holds."""
    text = (RESULTS / "cpu" / "README.md").read_text(encoding="utf-8")
    body = text.split("\n\n")
    first = next(p for p in body[1:] if p.strip() and not p.startswith("#"))
    for needle in ("0.5B", "1.5B", "CPU", "bf16", "float32", "shot", "tokens"):
        assert needle in first, f"results/cpu/README.md's first paragraph does not say {needle!r}"
    verdicts = text.split("## Verdicts", 1)[1].split("\n## ", 1)[0]
    bullets = [b for b in re.split(r"\n- ", verdicts)[1:]]
    assert bullets, "no verdict bullets"
    for b in bullets:
        assert re.search(r"0\.5B|this pair|Qwen", b) and re.search(r"bf16|float32", b), (
            f"a verdict bullet without its scale (pair and dtype): {b[:80]!r}")
