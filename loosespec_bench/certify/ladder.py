"""The certification's request, checked before any model loads: the ladder of settings (from an
experiment's one-key sweep, or --ladder KEY=V1,V2,...), every (setting, split) point composed
by Hydra as a run composes it and checked by the run's own pre-check, the split sizes against
the planned looks, the planner's cost, and the n a margin needs."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import Any, Sequence

from omegaconf import DictConfig, OmegaConf

from ..errors import ConfigError
from ..measure.stats.sequential import Design, n_for_certify
from ..settings.run_settings import GenerationParams, RunSettings, section

SCORES = ("task", "identical")  # the 0/1 quality: the task's own score, or "same tokens as the target alone"


@dataclass
class Request:
    """What the command was asked: the ladder, the design and where to measure."""

    experiment: str | None
    key: str
    values: list[str]
    overrides: list[str]
    design: Design
    split: str = "train"
    report_split: str = "test"
    holdout: int = 0
    score: str = "task"
    speed: int = 0
    results_dir: str | None = None
    experiment_name: str = ""
    sizes: dict[str, int] = field(default_factory=dict)
    # False for a data set with one split (MBPP+, HumanEval): no dataset.split override, and no
    # held-out report (certify on one split, report on another needs two).
    has_split: bool = True
    # engine.batch_size of the quality runs (every look and the held-out report): rows decoded
    # together, each token for token what it gets alone (docs/batching.md), so the decisions are
    # batch 1's at fewer CPU hours. The speed occasions time at batch 1 (a batched row has no time
    # of its own). Not in the run id: a folder started at one batch size resumes at another.
    batch_size: int = 1

    def setting_label(self, i: int) -> str:
        return f"{self.key}={self.values[i]}"

    def point_overrides(self, i: int, split: str, limit: int, name_suffix: str = "", with_split: bool | None = None,
                        batch: int | None = None) -> list[str]:
        """The overrides of setting i run on `limit` problems of `split` (at `batch` rows, else the
        request's batch_size): the command line a user could type (python -m loosespec_bench ...)
        to get the same run folder."""
        batch = self.batch_size if batch is None else batch
        out = [f"experiment={self.experiment}"] if self.experiment else []
        out += [f"{self.key}={self.values[i]}", *self.overrides, f"dataset.limit={limit}", "progress=false",
                f"experiment_name={self.experiment_name}{name_suffix}", f"engine.batch_size={batch}"]
        if batch > 1:
            # A batched run is quality-only (docs/batching.md): the target alone from the store,
            # nothing timed; the decisions read quality only. A protocol the user gave wins (and
            # the run's check then says what conflicts).
            given = {o.split("=", 1)[0].lstrip("+~") for o in self.overrides}
            out += [kv for kv in ("baseline=shared", "timing.subset=0") if kv.split("=", 1)[0] not in given]
        if self.results_dir:
            out.append(f"paths.results_dir={self.results_dir}")
        if self.has_split if with_split is None else with_split:
            out.append(f"dataset.split={split}")
        return out

    def speed_overrides(self, i: int, occasion: int) -> list[str]:
        """Speed occasion `occasion` of setting i: timed paired with the target alone on `speed`
        held-out problems, one problem at a time (batch 1: a batched row has no time of its own)."""
        return self.point_overrides(i, self.report_split, self.speed, f"_speed_occ{occasion}", batch=1) + [
            "baseline=paired", "timing.subset=null"]


_COMPOSED: dict[tuple[str, ...], DictConfig] = {}


def compose(overrides: list[str]) -> DictConfig:
    """One run's config, composed and checked as `python -m loosespec_bench OVERRIDES` does
    (each distinct command line composed once per process; a copy is returned)."""
    from ..settings.checks import validate
    from ..settings.points import compose_points

    # The environment the config reads (${oc.env:...}) is part of what a command line means.
    key = (os.environ.get("LOOSESPEC_DATA_DIR", ""), os.environ.get("LOOSESPEC_RESULTS_DIR", ""), *overrides)
    if key not in _COMPOSED:
        _, points = compose_points(list(overrides), multirun=False)
        (_, cfg), = points
        validate(cfg)
        _COMPOSED[key] = cfg
    return _COMPOSED[key].copy()


_ORDERS: dict[str, list[str]] = {}


def sample_order(cfg: DictConfig) -> list[str]:
    """Every sample id of the configured split in the order dataset.limit cuts it (a fixed
    function of the data and the seed: a look of n reads the first n), read once per process."""
    from ..build import build_task

    node = dict(OmegaConf.to_container(cfg.dataset, resolve=True))  # type: ignore[arg-type]
    node.pop("limit", None)
    key = repr(sorted(node.items(), key=lambda kv: kv[0]))
    if key not in _ORDERS:
        task = build_task(cfg)
        task.limit = None
        _ORDERS[key] = [s.id for s in task.samples()]
    return _ORDERS[key]


def experiment_ladder(experiment: str, overrides: Sequence[str]) -> tuple[str, list[str]]:
    """(key, values in order) of an experiment's sweep: exactly one swept key, its values as the
    file lists them (the strictest first, by the file's own declaration)."""
    from ..settings.points import compose_points

    master, _ = compose_points([f"experiment={experiment}", *overrides], multirun=True)
    params = dict(OmegaConf.select(master, "hydra.sweeper.params") or {})
    swept = {k: [v.strip() for v in str(vals).split(",")] for k, vals in params.items()}
    swept = {k: v for k, v in swept.items() if len(v) > 1}
    if len(swept) != 1:
        raise ConfigError(f"experiment={experiment} sweeps {len(swept)} keys ({', '.join(swept) or 'none'}); "
                          "a ladder is one key's values, strictest first: give --ladder KEY=V1,V2,... or an experiment that sweeps one key")
    (key, values), = swept.items()
    return key, values


def parse_ladder(text: str) -> tuple[str, list[str]]:
    key, sep, vals = text.partition("=")
    values = [v.strip() for v in vals.split(",") if v.strip()]
    if not sep or not key.strip() or len(values) < 1:
        raise ConfigError(f"--ladder {text!r}: give KEY=V1,V2,... (the settings, strictest first)")
    if len(set(values)) != len(values):
        raise ConfigError(f"--ladder {text!r}: a setting appears twice")
    return key.strip(), values


def split_size(cfg: DictConfig) -> int:
    """Samples in the configured split, the unit dataset.limit (and so a look) counts (the data
    file read, nothing else; one sample per problem for GSM8K, MBPP+, HumanEval)."""
    return len(sample_order(cfg))


def check_request(req: Request) -> list[DictConfig]:
    """Compose and check every setting at the last look on the calibration split (and on the
    report split where held-out problems are asked), the split sizes against the looks; returns
    the last look's configs (the planner prices them). Any bad input: one ConfigError."""
    if req.split == req.report_split and req.holdout:
        raise ConfigError(f"--split {req.split} and --report-split {req.report_split}: certify on one split and report on another")
    n_max = req.design.looks[-1]
    req.has_split = True
    probe = compose(req.point_overrides(0, req.split, n_max, with_split=False))
    if "split" not in probe.dataset:
        req.has_split = False
        if req.holdout:
            raise ConfigError(f"dataset={probe.dataset.name} has one split: certify on one split and report on another needs "
                              "two (give --holdout 0, and certify on its problems only)")
        if req.split != "train":
            raise ConfigError(f"--split {req.split}: dataset={probe.dataset.name} has no splits")
    cfgs = []
    for i in range(len(req.values)):
        cfg = compose(req.point_overrides(i, req.split, n_max))
        if section(cfg, GenerationParams).temperature != 0:
            raise ConfigError("certify: give greedy decoding (generation.temperature=0): one output per problem and setting")
        cfgs.append(cfg)
    rule = str(cfgs[0].method.name)
    from ..verifiers import rule_class

    cls = rule_class(rule)
    if cls is not None and cls.target_alone:
        raise ConfigError("certify: method=ar is the target alone; certify a rule against it (method=fly, threshold, ...)")
    if len({str(c.dataset.name) for c in cfgs}) != 1:
        raise ConfigError("certify: every setting must run on one data set")
    size = split_size(cfgs[0])
    req.sizes[req.split] = size
    if n_max > size:
        where = f"{cfgs[0].dataset.name}'s {req.split} split" if req.has_split else str(cfgs[0].dataset.name)
        raise ConfigError(f"--looks: the last look plans {n_max} problems, but {where} has {size}")
    if req.holdout:
        held = compose(req.point_overrides(0, req.report_split, req.holdout))
        req.sizes[req.report_split] = size_r = split_size(held)
        if req.holdout > size_r:
            raise ConfigError(f"--holdout {req.holdout}: {held.dataset.name}'s {req.report_split} split has {size_r} problems")
    return cfgs


# The batched loop's tokens per CPU second over batch 1's, by batch size, as the planner assumes
# it: results/bench/batch-2026-12-07 (embedded pair, float32 as certification runs, 16 GSM8K
# prompts, 32 new tokens, two repeats on a quiet 2-core Xeon; docs/batching.md "Measured here").
# A rule's runs take the lesser of SPD K = 10's and FLy + MLA K = 15's gains (their verification
# forwards are compute-bound: ~1.6x at 8 rows); the target alone's (the shared store's pass) its
# own. Batch 2 was not measured: it takes batch 1's. A size not listed takes the largest listed
# below it. Only an assumption for other pairs and machines: the certification's records measure
# the rate.
ASSUMED_BATCH_GAIN = {
    "method": {1: 1.0, 4: 1.53, 8: 1.56, 16: 1.58},
    "target_alone": {1: 1.0, 4: 2.53, 8: 3.54, 16: 4.12},
}


def batch_gain(batch: int, role: str = "method") -> float:
    """The assumed throughput gain of `batch` rows over one (ASSUMED_BATCH_GAIN[role])."""
    gains = ASSUMED_BATCH_GAIN[role]
    return gains[max(b for b in gains if b <= max(1, batch))]


def plan_cost(req: Request, cfgs: Sequence[DictConfig], fill: float = 1.0) -> dict[str, Any]:
    """The planner's cost (plan.estimate: its cost model's upper bound, every answer to
    max_new_tokens) of every setting to the last look, of the held-out report and of the
    optional speed occasions, in CPU hours (node-hours on a CPU)."""
    from ..measure.costmodel import LOAD_MIN, TARGET_TPS
    from ..plan import estimate

    def estimate_n(cfg: DictConfig, n: int) -> dict[str, Any]:
        """plan.estimate at n problems: the planner sizes a set by its declared size (GSM8K's
        test split, 1,319), so a larger train-split limit is scaled up from it (linear in n);
        a batched run's generation (not its model load) divided by the batch gain."""
        est = estimate(cfg, fill, dict(TARGET_TPS), {}, dict(LOAD_MIN))  # {}: each rule's declared speedup
        f = n / est["samples"] if est["samples"] else 1.0
        batch = RunSettings.read(cfg).engine.batch_size  # type: ignore[attr-defined]
        est["hours"] = est["load_h"] + (est["hours"] - est["load_h"]) * f / batch_gain(batch)
        est.update(store_h=est["store_h"] * f / batch_gain(batch, "target_alone"), tokens=est["tokens"] * f, samples=n)
        return est

    rows = []
    for i, cfg in enumerate(cfgs):
        est = estimate_n(cfg, int(cfg.dataset.limit))
        # baseline=shared: the store's pass is paid once for the ladder (the first point's bill).
        store = est["store_h"] if i == 0 else 0.0
        rows.append({"setting": req.setting_label(i), "samples": est["samples"], "hours": est["hours"] + store,
                     "load_h": est["load_h"], "store_h": store})
    total = sum(r["hours"] for r in rows)
    extra = 0.0
    if req.holdout:
        est = estimate_n(compose(req.point_overrides(0, req.report_split, req.holdout)), req.holdout)
        extra += est["hours"] + est["store_h"]
    if req.speed:
        # two occasions, each timing the target alone beside every problem (as procedure.two_occasion_speed runs them)
        est = estimate_n(compose(req.speed_overrides(0, 1)), req.speed)
        extra += 2 * est["hours"]
    return {"rows": rows, "ladder_h": total, "extra_h": extra, "total_h": total + extra}


def format_cost(req: Request, cost: dict[str, Any]) -> str:
    from ..launch.power import format_hours

    d = req.design
    lines = [f"planner's cost (upper bound: every setting to the last look, n = {d.looks[-1]}, every answer to max_new_tokens; "
             f"the sequence stops at its first failure, usually far sooner):"]
    if req.batch_size > 1:
        lines.append(f"  quality runs batched (engine.batch_size={req.batch_size}): their generation at "
                     f"{batch_gain(req.batch_size):.2f}x batch 1's throughput, the target alone's at "
                     f"{batch_gain(req.batch_size, 'target_alone'):.2f}x (measured: embedded pair, float32, a 2-core Xeon; "
                     "docs/batching.md); the speed occasions at batch 1")
    for r in cost["rows"]:
        lines.append(f"  {r['setting']:<40} {r['samples']:>6} problems  {format_hours(r['hours']):>8} CPU h")
    if cost["extra_h"]:
        lines.append(f"  {'held-out report / speed occasions':<40} {'':>6}           {format_hours(cost['extra_h']):>8} CPU h")
    lines.append(f"  total {format_hours(cost['total_h'])} CPU h")
    return "\n".join(lines)


def sized_n(req: Request, size: int, accuracy: float, discordance: float, looks: int = 3) -> int | None:
    """The n at which a balanced setting (true loss 0, `discordance` of the problems changed,
    half each way) is certified at the design's margin with 80% power (simulated)."""
    d = req.design
    return n_for_certify(d.delta, accuracy, discordance, alpha=d.alpha, looks=looks, spending=d.spending,
                         estimand=d.estimand, limit=max(4 * size, 1000), families=1000)


def sizing_line(req: Request, dataset: str, size: int, accuracy: float, discordance: float, n: int | None = None) -> str:
    """Whether `size` problems let a balanced setting be certified at the margin with 80% power."""
    d = req.design
    if n is None:
        n = sized_n(req, size, accuracy, discordance, len(d.looks))
    unit = "points" if d.estimand == "difference" else "% retention"
    head = f"{dataset} at delta {d.delta * 100:g} {unit}: 80% power at discordance {discordance:g}, accuracy {accuracy:.2f} needs"
    if n is None:
        return f"{head} more than {max(4 * size, 1000):,} problems; the {size:,} available do not allow it"
    verdict = "allows it" if n <= size else "does not allow it"
    return f"{head} n = {n:,}; the {size:,} problems available: {verdict}"


def auto_looks(n: int | None, size: int, looks: int = 3) -> tuple[int, ...]:
    """`looks` equally spaced looks ending at n (the sized n, capped at the split's size)."""
    end = min(n or size, size)
    return tuple(sorted({max(1, round(end * (i + 1) / looks)) for i in range(looks)}))


def plan_request(req: Request, *, auto: bool, accuracy: float, discordance: float) -> tuple[list[DictConfig], int | None]:
    """Every point composed and checked, and with `auto` the looks set: three equal looks ending
    at the n that certifies a balanced setting with 80% power, within the split. Returns the
    last look's configs (the planner prices them) and that n."""
    from dataclasses import replace

    cfgs = check_request(req)
    size = req.sizes[req.split]
    n = sized_n(req, size, accuracy, discordance, 3 if auto else len(req.design.looks))
    if auto:
        req.design = replace(req.design, looks=auto_looks(n, size))
        cfgs = check_request(req)
    return cfgs, n


def check_margin(delta: float | None, retention: float | None) -> tuple[float, str]:
    """(margin as a share, estimand) from --delta (accuracy points) or --retention-margin (%)."""
    if (delta is None) == (retention is None):
        raise ConfigError("give one margin: --delta POINTS (accuracy points lost) or --retention-margin PERCENT")
    value, estimand = (delta, "difference") if delta is not None else (retention, "retention")
    assert value is not None
    if not (math.isfinite(value) and 0 < value < 100):
        flag = "--delta" if delta is not None else "--retention-margin"
        raise ConfigError(f"{flag} {value:g}: give a margin in (0, 100) (points / percent)")
    return value / 100, estimand
