"""`report project --profile NAME RUN_DIR`: a run's work counts on the papers' hardware.

A hardware profile (report/profiles/<name>.yaml) gives, for a target/draft pair on a named
accelerator, what one forward costs as a function of its rows and context, every number with
its source or marked as an assumption and with a relative uncertainty:

    t(rows, ctx) = overhead + max(bytes(ctx) / (bandwidth x mem_eff), flops(rows, ctx) / (peak x compute_eff))
    bytes = params x bytes_per_param + kv_bytes_per_token x ctx
    flops = 2 x params x rows + 4 x layers x hidden x rows x ctx

(a roofline: a batch-1 decode forward reads every weight once, a wide one becomes compute-bound).
Extra LM-head passes (DropMatch) read the head's weights and do 2 x rows x hidden x vocab FLOPs;
lookups and per-step host work cost the profile's constants. Applied to each sample's counts
(work.py: rows histogram, mean context per role), this gives a projected time per sample; the
projected speedup is the pooled throughput ratio over the run's samples, as the measured one.

The interval combines a bootstrap over samples (the counts' sampling error) with the profile's
stated uncertainty (each uncertain number drawn log-uniformly within +-rel_uncertainty per
resample). A projection carries THIS pair's acceptance (its tau, its draft forwards per token)
onto the papers' hardware; it is not the papers' pair's speed, whose acceptance differs.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Iterable, Mapping

import numpy as np
import yaml

from ..errors import ConfigError
from ..measure.stats.intervals import speed_baseline
from ..measure.work import merge_work
from ..safe_files import check_regular, read_text
from ..store.run_folder import read_jsonl
from .labels import is_target_alone

PROFILES = Path(__file__).resolve().parent / "profiles"
LEVEL = 0.95


def profile_names() -> list[str]:
    return sorted(p.stem for p in PROFILES.glob("*.yaml"))


# The profile whose target the papers' 70B rows ran (DropMatch's overhead is projected onto its head).
PAPERS_70B_PROFILE = "llama31-8b-70b-h100"


def lm_head_share_of_profile(prof: Mapping[str, Any]) -> float:
    """The target's LM-head share of its weight work per token, from a profile: hidden x vocab over
    the weights a token multiplies, i.e. the parameters less the input embedding (untied in
    Llama 3.1: another vocab x hidden that is looked up, not multiplied)."""
    head = _v(prof["lm_head"], "vocab") * _v(prof["lm_head"], "hidden")
    return head / (_v(prof["target"], "params_b") * 1e9 - head)


def target_head_share(run: Mapping[str, Any]) -> float | None:
    """The LM head's share of a run's target's weight work (costmodel.lm_head_share), from its
    config.json read offline; None where that cannot be read (hub model not cached, tiny pair).
    `run`: an index row (its `config` holds the flat, dotted config keys)."""
    from ..measure.costmodel import lm_head_share
    from ..models.loading import model_config

    config = run.get("config") if isinstance(run.get("config"), dict) else {}
    path = config.get("pair.target.path")
    if not path:
        return None
    try:
        cfg = model_config(str(path))
    except ConfigError:
        return None
    return lm_head_share(cfg) if cfg else None


def head_share_70b() -> float:
    """A 70B target's LM-head share (the papers' H100 profile's target): DropMatch's cost in
    units of the head's time, times this, is its projected share of a 70B's forwards."""
    return lm_head_share_of_profile(load_profile(PAPERS_70B_PROFILE))


def load_profile(name: str) -> dict[str, Any]:
    """A profile by name (report/profiles/<name>.yaml) or path; ConfigError naming the choices."""
    path = Path(name)
    if not path.is_file():
        path = PROFILES / f"{name}.yaml"
    if not path.is_file():
        raise ConfigError(f"--profile {name!r} is neither a file nor one of: {', '.join(profile_names())}")
    from ..store.declarations import read_profile

    # Through the gate (never a link or a FIFO, bounded, no alias bomb), every {value:} leaf a
    # finite number >= 0 with a finite uncertainty >= 0 (store/declarations.py).
    prof = read_profile(path)
    if not isinstance(prof, dict):
        raise ConfigError(f"profile {path}: not a mapping of settings")
    missing = [k for k in ("name", "gpu", "target", "lm_head", "lookup_ms", "step_overhead_ms") if k not in prof]
    if missing:
        raise ConfigError(f"profile {path}: missing {', '.join(missing)}")
    for where, node in _numbers(prof):
        if "source" not in node:
            raise ConfigError(f"profile {path}: {where} has no source (a citation or 'assumption: ...')")
    return prof


def _numbers(node: Any, where: str = "") -> Iterable[tuple[str, dict[str, Any]]]:
    """Every {value: ...} leaf of a profile, with its dotted path."""
    if isinstance(node, dict):
        if "value" in node:
            yield where, node
            return
        for k, v in node.items():
            yield from _numbers(v, f"{where}.{k}" if where else k)


def draw(prof: dict[str, Any], rng: np.random.Generator | None) -> dict[str, Any]:
    """The profile with each uncertain number drawn log-uniformly in value x [1/(1+u), 1+u]
    (rng None: the stated values)."""
    out = json.loads(json.dumps(prof))
    for _, node in _numbers(out):
        u = float(node.get("rel_uncertainty", 0.0) or 0.0)
        v = float(node["value"])
        if rng is not None and u > 0:
            v *= math.exp(rng.uniform(-math.log1p(u), math.log1p(u)))
        node["value"] = v
    return out


def _v(node: Mapping[str, Any], key: str) -> float:
    return float(node[key]["value"])


def forward_s(p: Mapping[str, Any], net: Mapping[str, Any], rows: int, ctx: float) -> float:
    gpu = p["gpu"]
    bw = _v(gpu, "bandwidth_tb_s") * 1e12 * _v(gpu, "mem_eff")
    peak = _v(gpu, "peak_tflops") * 1e12 * _v(gpu, "compute_eff")
    params = _v(net, "params_b") * 1e9
    nbytes = params * _v(net, "bytes_per_param") + _v(net, "kv_bytes_per_token") * ctx
    flops = 2 * params * rows + 4 * _v(net, "layers") * _v(net, "hidden") * rows * ctx
    return _v(net, "overhead_ms") * 1e-3 + max(nbytes / bw, flops / peak)


def role_s(p: Mapping[str, Any], net: Mapping[str, Any] | None, role: Mapping[str, Any]) -> float:
    """Projected seconds of one role's forwards: its rows histogram at the role's mean context."""
    n = int(role.get("forwards", 0))
    if not n:
        return 0.0
    if net is None:
        raise ConfigError("the counts have draft forwards but the profile has no draft")
    ctx = float(role.get("ctx", 0)) / n if role.get("ctx") is not None else 0.0
    return sum(int(c) * forward_s(p, net, int(r), ctx) for r, c in (role.get("rows_hist") or {}).items())


def project_s(p: Mapping[str, Any], work: Mapping[str, Any], *, decode_only: bool = False) -> float:
    """Projected seconds of a generation with these work counts on the profile's hardware."""
    t = role_s(p, p["target"], work["target_verify"]) + role_s(p, p.get("draft"), work.get("draft") or {})
    if not decode_only:
        t += role_s(p, p["target"], work["target_prefill"]) + role_s(p, p.get("draft"), work.get("draft_prefill") or {})
    head, gpu = p["lm_head"], p["gpu"]
    extra = work.get("lm_head_extra") or {}
    if extra.get("passes"):
        bw = _v(gpu, "bandwidth_tb_s") * 1e12 * _v(gpu, "mem_eff")
        peak = _v(gpu, "peak_tflops") * 1e12 * _v(gpu, "compute_eff")
        head_bytes = _v(head, "vocab") * _v(head, "hidden") * _v(p["target"], "bytes_per_param")
        flops = 2 * extra["rows"] * _v(head, "vocab") * _v(head, "hidden")
        # Each pass reads the head's weights once; its rows' arithmetic overlaps the reads.
        t += extra["passes"] * _v(head, "overhead_ms") * 1e-3 + max(extra["passes"] * head_bytes / bw, flops / peak)
    t += float(p["lookup_ms"]["value"]) * 1e-3 * work.get("lookups", 0)
    t += float(p["step_overhead_ms"]["value"]) * 1e-3 * work.get("steps", 0)
    return t


def projected_speedup(
    prof: dict[str, Any], pairs: list[tuple[tuple[Mapping[str, Any], int], tuple[Mapping[str, Any], int]]],
    *, n_boot: int = 2000, seed: int = 0, decode_only: bool = False,
) -> dict[str, Any]:
    """Point (stated profile values, all samples) and interval (bootstrap over samples x the
    profile's uncertainty) of the pooled projected speedup. pairs: per sample ((method work,
    new tokens), (target-alone work, new tokens))."""
    if not pairs:
        return {"projected_speedup": None, "ci_low": None, "ci_high": None, "n": 0}

    def pooled(p: dict[str, Any], idx: np.ndarray) -> float:
        mt = sum(project_s(p, pairs[i][0][0], decode_only=decode_only) for i in idx)
        bt = sum(project_s(p, pairs[i][1][0], decode_only=decode_only) for i in idx)
        mn = sum(pairs[i][0][1] for i in idx)
        bn = sum(pairs[i][1][1] for i in idx)
        return (mn / mt) / (bn / bt) if mt > 0 and bt > 0 and bn > 0 else float("nan")

    n = len(pairs)
    point = pooled(draw(prof, None), np.arange(n))
    rng = np.random.default_rng(seed)
    dist = np.array([pooled(draw(prof, rng), rng.integers(0, n, n)) for _ in range(n_boot)])
    dist = dist[np.isfinite(dist)]
    alpha = (1 - LEVEL) / 2
    return {"projected_speedup": point, "ci_low": float(np.quantile(dist, alpha)) if dist.size else None,
            "ci_high": float(np.quantile(dist, 1 - alpha)) if dist.size else None, "n": n}


def batched_forward_s(p: Mapping[str, Any], net: Mapping[str, Any], batch: int, rows: int, ctx: float) -> float:
    """One forward over `batch` sequences of `rows` rows each at context ctx: the weights read
    once, each sequence's KV cache read, every row's arithmetic (forward_s at batch 1)."""
    gpu = p["gpu"]
    bw = _v(gpu, "bandwidth_tb_s") * 1e12 * _v(gpu, "mem_eff")
    peak = _v(gpu, "peak_tflops") * 1e12 * _v(gpu, "compute_eff")
    params = _v(net, "params_b") * 1e9
    n = batch * rows
    nbytes = params * _v(net, "bytes_per_param") + _v(net, "kv_bytes_per_token") * ctx * batch
    flops = 2 * params * n + 4 * _v(net, "layers") * _v(net, "hidden") * n * ctx
    return _v(net, "overhead_ms") * 1e-3 + max(nbytes / bw, flops / peak)


def batch_projection(prof: dict[str, Any], *, k: int, tau: float, batch: int, draft_model: bool, ctx: float = 1000.0,
                     n_draws: int = 2000, seed: int = 0) -> tuple[float, float, float]:
    """(point, low, high) of the speedup over the target alone of chain speculation with draft
    length k and mean accepted length tau, at `batch` sequences a step, on the profile's hardware
    (draws of its uncertain numbers give the interval; the measured tau is taken as exact).

    A step: k draft forwards over the batch (draft_model; an n-gram drafter costs a lookup per
    sequence instead) and one target forward over batch x (k + 1) rows, emitting tau tokens per
    sequence; the target alone emits one per forward over batch rows. The model is the per-forward
    roofline of forward_s: as the batch grows the target's forward turns from reading weights to
    arithmetic, and verifying k + 1 rows per sequence stops being nearly free. Not modelled: vLLM's
    scheduling, ragged batches (sequences finishing at different steps), prefill interleaving."""
    def speedup(p: dict[str, Any]) -> float:
        ar = batched_forward_s(p, p["target"], batch, 1, ctx) + float(p["step_overhead_ms"]["value"]) * 1e-3
        step = batched_forward_s(p, p["target"], batch, k + 1, ctx) + float(p["step_overhead_ms"]["value"]) * 1e-3
        if draft_model:
            step += k * batched_forward_s(p, p["draft"], batch, 1, ctx)
        else:
            step += batch * float(p["lookup_ms"]["value"]) * 1e-3
        return tau * ar / step

    point = speedup(draw(prof, None))
    rng = np.random.default_rng(seed)
    draws = np.array([speedup(draw(prof, rng)) for _ in range(n_draws)])
    low, high = np.quantile(draws, [0.025, 0.975])
    return point, float(low), float(high)


def _target_alone(method: Any) -> bool:
    """A contestant's method block (settings[config]["method"]) is the target alone's rule."""
    return isinstance(method, dict) and is_target_alone(method.get("name"))


def _count(value: Any) -> bool:
    return not isinstance(value, bool) and isinstance(value, int) and 0 <= value < 1 << 40


def run_pairs(run_dir: Path) -> dict[str, list[Any]]:
    """{label: per-sample ((method work, tokens), (target-alone work, tokens))} from a run folder
    (samples.jsonl: the method against its paired target alone) or a speed-evidence folder
    (occasion-*.jsonl of scripts/bench_speed_evidence.py: each configuration against the target alone's,
    the contestant whose method is the target-alone rule in the start record's settings)."""
    samples = run_dir / "samples.jsonl"
    if check_regular(samples):  # a link or a FIFO: ConfigError (safe_files)
        seen, pairs = set(), []
        # read_jsonl: through the gate, every line a JSON object (a damaged line is skipped, named);
        # the projection needs only each side's work counts and new_tokens, checked below.
        for lineno, rec in read_jsonl(samples, run_file=False):
            if rec.get("id") in seen:
                continue
            seen.add(rec.get("id"))
            if not isinstance(rec.get("metrics") or {}, dict) or not isinstance(speed_baseline(rec) or {}, dict):
                raise ConfigError(f"{samples} line {lineno}: metrics or baseline is not an object")
            base = speed_baseline(rec) or {}  # the fresh target alone a shared-store run timed beside it
            if not isinstance(base.get("metrics") or {}, dict):
                raise ConfigError(f"{samples} line {lineno}: baseline.metrics is not an object")
            mw, bw = (rec.get("metrics") or {}).get("work"), (base.get("metrics") or {}).get("work")
            if mw and bw:
                mt, bt = rec["metrics"].get("new_tokens"), (base.get("metrics") or {}).get("new_tokens")
                if not (isinstance(mw, dict) and isinstance(bw, dict) and _count(mt) and _count(bt)):
                    raise ConfigError(f"{samples} line {lineno}: metrics.work is not a mapping of counts or "
                                      "metrics.new_tokens not a whole number")
                pairs.append(((mw, mt), (bw, bt)))
        return {"method": pairs}
    files = sorted(run_dir.glob("occasion-*.jsonl"))
    if not files:
        raise ConfigError(f"{run_dir}: neither a run folder (samples.jsonl) nor a speed-evidence folder (occasion-*.jsonl)")
    cells: dict[tuple[Any, Any, str], dict[str, Any]] = {}
    alone: set[str] = set()  # the target-alone contestants, by their rule (the start record's settings)
    for path in files:
        for n, line in enumerate(read_text(path).splitlines(), 1):  # never a link or a FIFO
            try:
                rec = json.loads(line)
            except (json.JSONDecodeError, RecursionError):
                continue
            if not isinstance(rec, dict):
                continue
            if rec.get("kind") == "start" and isinstance(rec.get("settings"), dict):
                alone |= {c for c, s in rec["settings"].items() if isinstance(s, dict) and _target_alone(s.get("method"))}
            if rec.get("kind") == "gen" and rec.get("final") and rec.get("work"):
                key = (rec.get("occasion"), rec.get("problem"), rec.get("config"))
                if not (_count(key[0]) and isinstance(key[1], str) and isinstance(key[2], str)
                        and isinstance(rec["work"], dict) and _count(rec.get("new_tokens"))):
                    raise ConfigError(f"{path} line {n}: a generation record without occasion / problem / config / "
                                      "work / new_tokens of the right kind")
                cells[key] = rec
    if len(alone) != 1:
        raise ConfigError(f"{run_dir}: the occasion files' start records name {len(alone) or 'no'} target-alone "
                          "contestant(s) (settings: method.name of a target-alone rule); the projection needs one")
    (ar,) = alone
    out: dict[str, list[Any]] = {}
    for (o, p, c), rec in cells.items():
        base = cells.get((o, p, ar))
        if c != ar and base is not None:
            out.setdefault(c, []).append(((rec["work"], rec["new_tokens"]), (base["work"], base["new_tokens"])))
    return out


# ---- what is published to compare with ----------------------------------------------------------
# vLLM's FLy page (docs/features/speculative_decoding/fly.md, vllm-project/vllm at commit
# 230dd26415668bc41581c66b724dfae908d37512): FLy throughput over Standard SD, Llama-3.1-70B /
# 8B, AMD MI355X, temperature 0, 10 data sets: 1.092x-1.335x. It publishes NO taus, so no tau can
# be fed through a profile from it; with the same drafter and K both sides pay the same per
# step, so the ratio is FLy's tau over SD's tau (up to the rule's own cost) on any hardware.
VLLM_FLY_RATIO = {"source": "vLLM docs/features/speculative_decoding/fly.md (commit 230dd264), AMD MI355X, "
                            "Llama-3.1-70B-Instruct / 8B-Instruct, T = 0, 10-benchmark suite",
                  "low": 1.092, "high": 1.335}
# DropMatch's SPD figure at 8B -> 70B (report/published.csv, a secondary, unverified summary):
# tau 7.62 and speedup 1.02 at K = 10. Fed through a profile as an idealised chain: per step one
# target forward of K + 1 rows, K one-row draft forwards, tau tokens.
DROPMATCH_SPD = {"source": "report/published.csv dropmatch_main (secondary summary, unverified): SPD K=10 at 8B->70B",
                 "k": 10, "tau": 7.62, "speedup": 1.02}


def idealised_chain_work(k: int, tau: float, steps: int = 1000, ctx: int = 1000) -> tuple[dict[str, Any], int]:
    """Counts of `steps` chain steps of draft length k emitting tau tokens each (no prefill)."""
    w = merge_work([])
    w["target_verify"].update(forwards=steps, rows=steps * (k + 1), lm_rows=steps * (k + 1), ctx=steps * ctx,
                              ctx_rows=steps * (k + 1) * ctx, rows_hist={str(k + 1): steps})
    w["draft"].update(forwards=steps * k, rows=steps * k, lm_rows=steps * k, ctx=steps * k * ctx, ctx_rows=steps * k * ctx,
                      rows_hist={"1": steps * k})
    w["steps"] = steps
    n = int(round(steps * tau))
    w["emitted"] = n
    return w, n


def target_alone_work(tokens: int, ctx: int = 1000) -> tuple[dict[str, Any], int]:
    w = merge_work([])
    w["target_verify"].update(forwards=tokens, rows=tokens, lm_rows=tokens, ctx=tokens * ctx, ctx_rows=tokens * ctx,
                              rows_hist={"1": tokens})
    w["steps"] = w["emitted"] = tokens
    return w, tokens


def validation(prof: dict[str, Any]) -> list[str]:
    """Lines comparing the profile with what is published (see the constants above)."""
    p = draw(prof, None)
    d = DROPMATCH_SPD
    m = idealised_chain_work(d["k"], d["tau"])
    b = target_alone_work(m[1])
    proj = (m[1] / project_s(p, m[0])) / (b[1] / project_s(p, b[0]))
    r = VLLM_FLY_RATIO
    return [
        f"published SPD ({d['source']}): tau {d['tau']}, speedup {d['speedup']}x; this profile projects "
        f"{proj:.2f}x for that tau and K, {proj / d['speedup']:.1f} times the published figure: the published run's "
        "costs per forward are not this profile's (its implementation is not a bandwidth-bound one), or the summary is wrong",
        f"published FLy over SD ({r['source']}): {r['low']}x-{r['high']}x; no taus are published there, so nothing can be "
        "fed through a profile; with the same drafter and K the ratio equals FLy's tau over SD's on any hardware "
        f"(a FLy tau {r['low']:.2f}-{r['high']:.2f} times SD's), which this run's counts give directly",
    ]


def _tau(pairs: list[Any]) -> float | None:
    """Pooled tokens per target verification forward of a configuration's samples."""
    fwd = sum(m[0]["target_verify"]["forwards"] for m, _ in pairs)
    return sum(m[0]["emitted"] for m, _ in pairs) / fwd if fwd else None


def fly_over_sd(prof: dict[str, Any], groups: dict[str, list[Any]]) -> list[str]:
    """For a speed-evidence folder with SD and FLy: this run's FLy / SD tau ratio and projected
    throughput ratio on the profile, beside vLLM's published FLy / SD range."""
    if "spd" not in groups:
        return []
    out = []
    p = draw(prof, None)
    sd_time = sum(project_s(p, m[0]) for m, _ in groups["spd"])
    sd_rate = sum(m[1] for m, _ in groups["spd"]) / sd_time if sd_time else None
    for fly in ("fly", "fly_mla"):
        if fly not in groups or not sd_rate:
            continue
        t_fly, t_sd = _tau(groups[fly]), _tau(groups["spd"])
        fly_time = sum(project_s(p, m[0]) for m, _ in groups[fly])
        ratio = sum(m[1] for m, _ in groups[fly]) / fly_time / sd_rate if fly_time else None
        if t_fly and t_sd and ratio:
            out.append(f"  {fly} over spd: tau {t_fly:.2f} / {t_sd:.2f} = {t_fly / t_sd:.3f}; projected throughput ratio {ratio:.3f} "
                       f"(published, vLLM on MI355X, 70B / 8B: {VLLM_FLY_RATIO['low']}-{VLLM_FLY_RATIO['high']}; "
                       "this run's K, drafter and acceptance are not vLLM's)")
    return out


def project_report(profile: str, run_dir: str | Path, *, n_boot: int = 2000, seed: int = 0) -> str:
    prof = load_profile(profile)
    path = Path(run_dir)
    if not path.is_dir():
        raise ConfigError(f"{run_dir!r} is not a folder: name a run folder or a speed-evidence folder")
    groups = run_pairs(path)
    lines = [f"profile {prof['name']}: {prof.get('description', '')}",
             "projected speedup over the target alone (prefill + decode | decode only), "
             f"{LEVEL:.0%} interval: bootstrap over samples x the profile's stated uncertainty"]
    if not any(groups.values()):
        lines.append("no sample with work counts on both sides (runs from before work counts, or vLLM runs)")
    for label, pairs in groups.items():
        full = projected_speedup(prof, pairs, n_boot=n_boot, seed=seed)
        dec = projected_speedup(prof, pairs, n_boot=n_boot, seed=seed, decode_only=True)
        if full["projected_speedup"] is None:
            lines.append(f"  {label:<10} no paired counts")
            continue
        lines.append(f"  {label:<10} {full['projected_speedup']:.2f}x [{full['ci_low']:.2f}, {full['ci_high']:.2f}]"
                     f" | {dec['projected_speedup']:.2f}x [{dec['ci_low']:.2f}, {dec['ci_high']:.2f}]  (n = {full['n']})")
    lines += fly_over_sd(prof, groups)
    lines.append("A projection carries this pair's acceptance (its tau, its draft forwards per token) onto the profile's "
                 "hardware: it is not the papers' pair's speed.")
    lines += validation(prof)
    return "\n".join(lines)
