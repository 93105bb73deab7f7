"""The claims' declaration (claims.yaml): each claim's family, figure, estimand, test, direction
or size and planned looks, loaded and checked before any run is read."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from ...errors import ConfigError
from ...safe_files import confined
from .speed import check_selector
from ...measure.stats.intervals import LEVEL
from ...measure.stats.verdicts import ADJUSTMENTS, PAIRED_TESTS, SPENDINGS, sequential_boundaries


DECLARATION = Path(__file__).parent.with_name("claims.yaml")  # the packaged declaration (report/claims.yaml)
DECLARATION_NAME = "claims.yaml"  # its copy beside a report's results
# overhead: one DropMatch run's own cost (its N-path LM-head passes and criterion), against a
# stated line (`margin`): a share of decode time, or projected onto a 70B target's LM-head share.
FIGURES = ("tau", "speedup", "accuracy", "retention", "overhead")
# speedup, test occasions: a wall-clock claim decided from a speed-evidence folder (claims/speed.py),
# the configurations timed interleaved over several occasions, not from two run folders.
TESTS = {"tau": ("bootstrap",), "speedup": ("bootstrap", "occasions"), "accuracy": ("exact",), "retention": ("exact",),
         "overhead": ("bootstrap",)}
GRADED_TESTS = tuple(PAIRED_TESTS)  # a retention claim's test where the scores are graded
ESTIMANDS = {"tau": ("difference", "ratio"), "speedup": ("difference", "ratio"), "accuracy": ("difference",), "retention": ("retention",),
             "overhead": ("decode_share", "projected_70b")}

# What each estimand and test is, in the words claims.md prints.
ESTIMAND_TEXT = {
    ("tau", "difference"): "pooled tau, B - A",
    ("tau", "ratio"): "pooled tau, B / A",
    ("speedup", "difference"): "speedup (ratio of summed rates), B - A",
    ("speedup", "ratio"): "speedup (ratio of summed rates), B / A",
    ("accuracy", "difference"): "accuracy, B - A (paired)",
    ("retention", "retention"): "retention: score / target alone's, same problems",
    ("overhead", "decode_share"): "DropMatch's own time / decode time (ratio of sums over problems)",
    ("overhead", "projected_70b"): ("DropMatch's own time / the target's verification forwards, / the target's LM-head share "
                                    "x a 70B target's (ratio of sums over problems; a projection)"),
}
# A wall-clock claim's estimand (figure speedup, test occasions; estimand ratio).
OCCASIONS_ESTIMAND = "wall-clock rate (summed tokens / summed seconds), B / A (A: its best setting where several)"
ADJUST_TEXT = {"holm": "Holm", "bh": "Benjamini-Hochberg", "none": "no adjustment"}
TEST_TEXT = {
    "bootstrap": "paired BCa bootstrap",
    "occasions": "two-way (problems x occasions) percentile bootstrap; the work counts' prediction must agree",
    "exact_accuracy": "exact McNemar (discordant split)",
    "exact_retention": "exact binomial (losses and gains, conditional on the target's answers)",
    "exact_mcnemar": "exact McNemar, one-sided (discordant split vs the target alone)",
    "wilcoxon": "Wilcoxon signed-rank on score - margin x target's",
    "t": "paired t on score - margin x target's",
}


@dataclass(frozen=True)
class Claim:
    id: str
    paper: str
    text: str  # the claim as the paper (or its rule) states it
    figure: str  # tau | speedup | accuracy (compare) | retention (one run vs its target alone) | overhead (one run)
    b: Mapping[str, Any]  # the configuration the claim is about
    a: Mapping[str, Any] | None = None  # what it is compared with (None: its own target alone)
    direction: int = +1  # the claimed sign of B - A (retention: of retention - margin)
    margin: float = 0.0  # retention claims: the claimed floor (0.99)
    source: str = ""
    datasets: tuple[str, ...] | None = None  # None: every set where both configurations ran
    family: str = "claims"
    estimand: str = "difference"  # difference | ratio | retention
    test: str = "bootstrap"  # bootstrap | exact (0/1 quality) | wilcoxon
    graded_test: str = "t"  # a retention claim's test where the scores are graded (GRADED_TESTS)
    size: tuple[float, float, str] | None = None  # a size claim's range (low, high, as said)
    every_set: bool = False  # one intersection-union verdict over its sets
    looks: tuple[int, ...] | None = None  # planned looks (n per look), group-sequential
    spending: str = "obrien_fleming"
    folder: str | None = None  # test occasions: the speed-evidence folder beside the declaration
    # The declared scale of the test: "one" (one-sided toward the claimed direction, at alpha),
    # "two" (each conclusion one-sided at alpha / 2: p printed on the two-sided scale), or "" (the
    # default: one-sided for a 0/1 no-change claim, McNemar at margin 1, whose declaration reads
    # "one-sided toward loss"; two-sided for every other).
    sided: str = ""
    hypothesis: str = ""  # claims that test one hypothesis share it (one family in the per-family view)

    @property
    def one_sided(self) -> bool:
        if self.sided:
            return self.sided == "one"
        return self.figure == "retention" and self.size is None and abs(self.margin - 1.0) < 1e-9

    def __post_init__(self) -> None:
        # Quality is never bootstrapped for a verdict: a claim built in code gets its figure's test.
        if self.figure == "retention" and self.estimand != "retention":
            object.__setattr__(self, "estimand", "retention")
        if self.test not in TESTS[self.figure]:
            object.__setattr__(self, "test", TESTS[self.figure][0])

    @property
    def null(self) -> float:
        """The figure's value at no effect (retention, overhead: the claimed margin)."""
        if self.figure in ("retention", "overhead"):
            return self.margin
        return 1.0 if self.estimand == "ratio" else 0.0


@dataclass(frozen=True)
class Family:
    id: str
    title: str
    adjust: str


@dataclass(frozen=True)
class Declaration:
    claims: tuple[Claim, ...]
    families: Mapping[str, Family]
    alpha: float = 1 - LEVEL
    power: float = 0.8
    budget_factor: float = 10.0
    # The loss:gain split a 0/1 no-change claim (margin 1, McNemar) is sized to find with `power`
    # (issue 45: 2 losses per gain); its n is sized from the discordance seen so far.
    imbalance: float = 2.0
    digest: str = ""
    path: str = ""
    version: Any = None
    declared: str = ""
    adjust: str = "holm"  # the report-wide adjustment (the file's default `adjust`)
    # report: one adjustment over every confirmatory test of the file (the primary verdicts; the
    # per-family view is printed beside them); family: within each family only (the pre-issue-70 scheme).
    multiplicity: str = "report"


def _claim(raw: Mapping[str, Any], families: Mapping[str, Family], where: str) -> Claim:
    def need(key: str) -> Any:
        if key not in raw:
            raise ConfigError(f"{where}: claim {raw.get('id', '?')!r} has no {key!r}; declare it")
        return raw[key]

    cid, figure = str(need("id")), str(need("figure"))
    if figure not in FIGURES:
        raise ConfigError(f"{where}: claim {cid!r}: figure {figure!r} must be one of {', '.join(FIGURES)}")
    estimand = str(raw.get("estimand", "retention" if figure == "retention" else "difference"))
    if estimand not in ESTIMANDS[figure]:
        raise ConfigError(f"{where}: claim {cid!r}: estimand {estimand!r} for {figure}: use {', '.join(ESTIMANDS[figure])}")
    test = str(raw.get("test", TESTS[figure][0]))
    if test not in TESTS[figure]:
        raise ConfigError(f"{where}: claim {cid!r}: test {test!r} for {figure}: use {', '.join(TESTS[figure])}")
    graded = str(raw.get("graded_test", "t"))
    if graded not in GRADED_TESTS:
        raise ConfigError(f"{where}: claim {cid!r}: graded_test {graded!r}: use {', '.join(GRADED_TESTS)}")
    family = str(raw.get("family", "claims"))
    if family not in families:
        raise ConfigError(f"{where}: claim {cid!r}: family {family!r} is not declared under families:")
    size = raw.get("size")
    if size is not None:
        try:
            low, high = float(size["low"]), float(size["high"])
        except (KeyError, TypeError, ValueError):
            raise ConfigError(f"{where}: claim {cid!r}: size needs numbers low and high (e.g. {{low: 1.05, high: 1.15}})") from None
        if not low < high or estimand != "ratio":
            raise ConfigError(f"{where}: claim {cid!r}: a size claim needs estimand: ratio and low < high (got {estimand}, {low}, {high})")
        size = (low, high, str(size.get("said", f"{low:g}-{high:g}x")))
    looks = raw.get("looks")
    spending = "obrien_fleming"
    if looks is not None:
        spending = str(looks.get("spending", spending)) if isinstance(looks, Mapping) else spending
        ns = looks.get("n") if isinstance(looks, Mapping) else looks
        if spending not in SPENDINGS or not isinstance(ns, list) or not ns:
            raise ConfigError(f"{where}: claim {cid!r}: looks: {{n: [10, 20, 30], spending: one of {', '.join(SPENDINGS)}}}")
        looks = tuple(int(v) for v in ns)
        sequential_boundaries(looks, 0.05, spending)  # validates the n (increasing, positive)
    direction = int(raw.get("direction", +1))
    if direction not in (-1, 1):
        raise ConfigError(f"{where}: claim {cid!r}: direction must be +1 or -1")
    sets = raw.get("sets")
    if figure == "overhead" and (raw.get("a") or not 0 < float(raw.get("margin", 0.0)) < 1):
        raise ConfigError(f"{where}: claim {cid!r}: an overhead claim is about one run (b, no a) against a margin "
                          "between 0 and 1 (a share, e.g. margin: 0.02)")
    folder = raw.get("folder")
    if test == "occasions":
        if estimand != "ratio" or not isinstance(folder, str):
            raise ConfigError(f"{where}: claim {cid!r}: a wall-clock claim (test: occasions) needs estimand: ratio and "
                              "folder: <a speed-evidence folder beside this file>")
        confined(Path(where).parent, folder, f"claim {cid!r}: folder")
        check_selector(need("b"), f"{where}: claim {cid!r}", "b")
        if raw.get("a") is not None:
            check_selector(raw["a"], f"{where}: claim {cid!r}", "a")
    elif folder is not None:
        raise ConfigError(f"{where}: claim {cid!r}: folder is for wall-clock claims (figure: speedup, test: occasions)")
    return Claim(
        cid, str(need("paper")), str(need("text")), figure, dict(need("b")), dict(raw["a"]) if raw.get("a") else None,
        direction=direction, margin=float(raw.get("margin", 0.0)), source=str(raw.get("source", "")),
        datasets=tuple(map(str, sets)) if sets else None, family=family, estimand=estimand, test=test,
        graded_test=graded, size=size, every_set=bool(raw.get("every_set", False)),
        looks=looks, spending=spending, folder=folder, sided=_sided(raw, cid, where), hypothesis=str(raw.get("hypothesis") or ""),
    )


def _sided(raw: Mapping[str, Any], cid: str, where: str) -> str:
    value = raw.get("sided")
    if value is None:
        return ""
    text = str(value).lower().replace("-sided", "")
    if text not in ("one", "two"):
        raise ConfigError(f"{where}: claim {cid!r}: sided {value!r}: use one or two")
    return text


def load_declaration(path: Path = DECLARATION) -> Declaration:
    """The claims declared in `path` (a claims.yaml), with the file's sha256 (first 12 hex)."""
    import yaml

    from ...store.declarations import read_claims_declaration

    try:
        text, data = read_claims_declaration(path)  # through the gate, kinds and ranges checked (store/declarations.py)
    except OSError as err:
        raise ConfigError(f"cannot read the claims declaration {path}: {err.strerror or err}; pass --claims FILE") from None
    except yaml.YAMLError as err:
        raise ConfigError(f"the claims declaration {path} is not valid YAML ({err}); fix the file") from None
    where = str(path)
    default = str(data.get("adjust", "holm"))
    fams: dict[str, Family] = {}
    for fid, spec in (data.get("families") or {}).items():
        spec = spec or {}
        how = str(spec.get("adjust", default))
        if how not in ADJUSTMENTS:
            raise ConfigError(f"{where}: family {fid!r}: adjust {how!r} must be one of {', '.join(ADJUSTMENTS)}")
        fams[str(fid)] = Family(str(fid), str(spec.get("title", fid)), how)
    if default not in ADJUSTMENTS:
        raise ConfigError(f"{where}: adjust {default!r} must be one of {', '.join(ADJUSTMENTS)}")
    fams.setdefault("claims", Family("claims", "claims", default))
    claims = tuple(_claim(c, fams, where) for c in (data.get("claims") or []))
    ids = [c.id for c in claims]
    if len(set(ids)) != len(ids):
        raise ConfigError(f"{where}: claim ids repeat ({sorted({i for i in ids if ids.count(i) > 1})}); give each its own id")
    alpha = float(data.get("alpha", 1 - LEVEL))
    power = float(data.get("power", 0.8))
    if not (0 < alpha < 1 and 0 < power < 1):
        raise ConfigError(f"{where}: alpha ({alpha}) and power ({power}) must lie in (0, 1)")
    try:
        imbalance = float(data.get("imbalance", Declaration.imbalance))
    except (TypeError, ValueError):
        imbalance = float("nan")
    if not imbalance > 1:
        raise ConfigError(f"{where}: imbalance ({data.get('imbalance')!r}) is the losses per gain to size for; give a number > 1, e.g. 2")
    return Declaration(claims, fams, alpha=alpha, power=power, budget_factor=float(data.get("budget_factor", 10)), imbalance=imbalance,
                       digest=hashlib.sha256(text).hexdigest()[:12], path=where, version=data.get("version"),
                       declared=str(data.get("declared", "")), adjust=default, multiplicity=_multiplicity(data, where))


def _multiplicity(data: Mapping[str, Any], where: str) -> str:
    value = str(data.get("multiplicity", "report"))
    if value not in ("report", "family"):
        raise ConfigError(f"{where}: multiplicity {value!r}: use report (one adjustment over the file's tests) or family")
    return value


CLAIMS: tuple[Claim, ...] = load_declaration().claims
