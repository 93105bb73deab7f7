"""Speed evidence that does not depend on the occasion (issue 46, items 3 and 6).

One comparison (default: target alone, SPD, FLy, FLy + MLA, DropMatch, prompt lookup) timed
in ONE process per occasion, interleaved per problem in a randomized order after a warm-up,
over several occasions (separate processes started --gap-s apart). Printed and written to
OUT/report.json:

- work counts per emitted token per configuration (work.py) and exact sign tests on them over
  problems (e.g. FLy + MLA's draft forwards per token against FLy's);
- predicted speedup (counts x this machine's calibration, costmodel.Calibration) with its
  bootstrap interval over problems, beside the measured speedup with its two-way (problems x
  occasions) bootstrap interval, and the gap;
- the occasion variance (two-way fit of the log per-problem speedup: occasion and residual
  variance components, the F test of no occasion effect) and, per configuration, its
  speedup on each occasion and the test-retest figures (the ratio of the occasions' speedups,
  ICC(2,1) of the per-problem log speedups; the target alone's tokens/s ICC and ratio);
- the load every timing was taken under: each generation's other processes' CPU share and
  own CPU share. A problem's block (all configurations) is re-timed when any single
  generation ran beside more than --max-others-share of the machine (each side judged on its
  own share, not on the difference between sides), and left out of the wall-clock figures
  (its counts still count) when it stays contaminated.

Usage (the lead's quiet-machine run, embedded pair, 2 cores):
    python scripts/bench_speed_evidence.py --pair qwen25_coder_embedded --problems 6 \
        --max-new-tokens 64 --occasions 2 --gap-s 60 --threads 2 --out results/speed_evidence/embedded
Smoke test on the tiny random pair (seconds):
    python scripts/bench_speed_evidence.py --pair tiny --problems 3 --max-new-tokens 16 --occasions 2 --gap-s 0 --out /tmp/se

Each occasion's generations are appended block by block to OUT/occasion-<o>.jsonl; an occasion
that finished is not rerun, and one interrupted midway resumes: its finished problem blocks are
kept, a new process (a "segment", recorded with its machine and time) warms up again and times
the problems left, in the occasion's own order. The report names every occasion that ran in
more than one segment or on more than one CPU, since its "occasion effect" then includes that
break. --analyse-only re-reads them.

Lab script, kept in scripts/ (not installed with the package): it is the two-occasion timing
protocol behind results/bench/speed-evidence-* and docs/speed_evidence.md, run by hand on a quiet
machine; a measurement of the harness, not a tool a run needs.
"""

from __future__ import annotations

import os
import sys

from loosespec_bench.omp import default_wait_policy  # noqa: E402

default_wait_policy()  # before torch loads libgomp, as loosespec_bench/bench/engine.py

import argparse  # noqa: E402
import hashlib  # noqa: E402
import json  # noqa: E402
import random  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

from loosespec_bench.measure.costmodel import Calibration  # noqa: E402
from loosespec_bench.measure.occasion_files import CALIBRATION, cell_table, load_rows, occasion_done, unfinished_occasions  # noqa: E402
from loosespec_bench.measure.stats.intervals import paired_bootstrap, speedup_of_sums  # noqa: E402
from loosespec_bench.measure.stats.occasions import icc_agreement, occasion_bootstrap, occasion_effects  # noqa: E402
from loosespec_bench.measure.stats.exact import count_sign_test  # noqa: E402
from loosespec_bench.measure.work import merge_work, per_token  # noqa: E402
from loosespec_bench.errors import ConfigError  # noqa: E402
from loosespec_bench.safe_files import atomic_write_text, check_regular, open_regular, read_text  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
# name -> the overrides `python -m loosespec_bench` would take for it (the conf defaults decide
# K, theta, W, ...: the benchmark times the configurations the harness runs).
CONFIGS = {
    "ar": ["method=ar"],
    "spd": ["method=spd", "drafter=model"],
    "fly": ["method=fly", "drafter=model"],
    "fly_mla": ["method=fly", "drafter=mla"],
    # DropMatch at the paper's draft length (K = 10, as the float32 quality runs), not the model
    # drafter's CPU default of 5: its claims compare it with SPD at K = 10 (issue 45).
    "dropmatch": ["method=dropmatch", "drafter=model", "drafter.k=10"],
    "pld": ["method=spd", "drafter=pld"],
    # SPD at several draft lengths: the baseline at its best K beside the paper's (issue 45).
    "spd_k5": ["method=spd", "drafter=model", "drafter.k=5"],
    "spd_k10": ["method=spd", "drafter=model", "drafter.k=10"],
    "spd_k15": ["method=spd", "drafter=model", "drafter.k=15"],
    # A draft of another family and tokenizer (--pair smollm2_to_qwen25_coder): text re-tokenised.
    "xtok_spd": ["method=spd", "drafter=model_xtok", "drafter.k=15"],
    "xtok_fly": ["method=fly", "drafter=model_xtok", "drafter.k=15"],
}
# Exact count comparisons printed (a, b, count): "a needs fewer <count> per token than b".
COUNT_TESTS = [
    ("fly_mla", "fly", "draft_forwards"),
    ("fly", "spd", "target_forwards"),
    ("fly_mla", "spd", "target_forwards"),
    ("dropmatch", "spd", "target_forwards"),
    ("pld", "ar", "target_forwards"),
    ("xtok_fly", "xtok_spd", "target_forwards"),
]
DEFAULT_MAX_OTHERS = 0.10


def error(msg: str) -> None:
    print(f"error: {msg}", file=sys.stderr)
    raise SystemExit(2)


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--pair", default="qwen25_coder_embedded", help="pair config name (conf/pair/<name>.yaml)")
    p.add_argument("--dataset", default="gsm8k", help="data set config name (conf/dataset/<name>.yaml)")
    p.add_argument("--problems", type=int, default=6, help="distinct problems, the first N of the data set")
    p.add_argument("--max-new-tokens", type=int, default=64)
    p.add_argument("--configs", default=",".join(CONFIGS), help=f"comma list from {','.join(CONFIGS)} (ar is always added)")
    p.add_argument("--occasions", type=int, default=2, help="separate processes, run one after the other (>= 2 for occasion variance)")
    p.add_argument("--gap-s", type=float, default=60.0, help="seconds between the end of one occasion and the start of the next")
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's default)")
    p.add_argument("--max-others-share", type=float, default=DEFAULT_MAX_OTHERS,
                   help="a generation timed beside more than this share of the machine's CPU is contaminated")
    p.add_argument("--max-retimes", type=int, default=2)
    p.add_argument("--calibrate", choices=("auto", "never"), default="auto",
                   help="auto: run python -m loosespec_bench.calibrate first when this machine has no calibration")
    p.add_argument("--out", required=True, help="output folder")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--n-boot", type=int, default=2000)
    p.add_argument("--analyse-only", action="store_true")
    p.add_argument("--plan", action="store_true",
                   help="print the generations this would time and their predicted CPU time, then exit (loads no model)")
    p.add_argument("--occasion", type=int, default=None, help=argparse.SUPPRESS)  # a child process: time one occasion
    a = p.parse_args(argv)
    names = [c.strip() for c in a.configs.split(",") if c.strip()]
    unknown = [c for c in names if c not in CONFIGS]
    if unknown:
        error(f"--configs: unknown {unknown}; choose from {', '.join(CONFIGS)}")
    a.config_names = ["ar"] + [c for c in names if c != "ar"]
    if a.problems < 2:
        error("--problems must be >= 2 (a bootstrap over problems needs two)")
    if a.occasions < 1 or a.max_new_tokens < 2 or a.gap_s < 0 or a.max_retimes < 0:
        error("--occasions >= 1, --max-new-tokens >= 2, --gap-s >= 0 and --max-retimes >= 0")
    if not 0 < a.max_others_share <= 1:
        error("--max-others-share must be in (0, 1]")
    if not (REPO / "loosespec_bench" / "conf" / "pair" / f"{a.pair}.yaml").is_file():
        error(f"--pair {a.pair!r}: no conf/pair/{a.pair}.yaml")
    if not (REPO / "loosespec_bench" / "conf" / "dataset" / f"{a.dataset}.yaml").is_file():
        error(f"--dataset {a.dataset!r}: no conf/dataset/{a.dataset}.yaml")
    return a


def base_overrides(a: argparse.Namespace) -> list[str]:
    """The overrides every configuration of the benchmark shares (an occasion's and the budget's)."""
    base = [f"pair={a.pair}", f"dataset={a.dataset}", f"dataset.limit={a.problems}", "generation.temperature=0",
            f"generation.max_new_tokens={a.max_new_tokens}", "record_steps=false"]
    if os.environ.get("LOOSESPEC_DATA_DIR"):
        base.append(f"paths.data_dir={os.environ['LOOSESPEC_DATA_DIR']}")
    return base


# ---- one occasion (a child process) ----------------------------------------------------------
def time_occasion(a: argparse.Namespace) -> None:
    import torch

    from loosespec_bench.bench.contestants import compose_config
    from loosespec_bench.build import build_task, build_verifier, instantiate, uses_drafter
    from loosespec_bench.engines.hf import HFEngine
    from loosespec_bench.models import load_model
    from loosespec_bench.models.loading import load_options
    from loosespec_bench.tasks.prompting import encode_prompt
    from loosespec_bench.measure.timing import Clocks, Probe

    if a.threads:
        torch.set_num_threads(a.threads)
    cfgs = {name: compose_config(base_overrides(a) + CONFIGS[name]) for name in a.config_names}
    first = cfgs["ar"]
    task = build_task(first)
    samples = task.samples()[: a.problems]
    pair = first.pair
    target = load_model(pair.target.path, dtype=pair.dtype, device=pair.device, **load_options(pair.target))
    draft = None
    engines = {}
    for name, cfg in cfgs.items():
        drafter = None
        if uses_drafter(cfg):
            extra = {}
            if cfg.drafter.get("needs_model", False):
                if draft is None:
                    draft = load_model(pair.draft.path, dtype=pair.dtype, device=pair.get("draft_device") or pair.device,
                                       **load_options(pair.draft))
                extra["model"] = draft.model
            if cfg.drafter.get("needs_tokenizers", False):  # a cross-tokenizer drafter re-tokenises text
                extra.update(draft_tokenizer=draft.tokenizer, target_tokenizer=target.tokenizer)
            drafter = instantiate(cfg.drafter, **extra)
        verifier = build_verifier(cfg)  # method=ar: TargetAlone, the speedup baseline
        engines[name] = HFEngine.from_parts(target, verifier=verifier, drafter=drafter, stop_strings=task.stop_strings)
    prompts = [encode_prompt(target.tokenizer, s, True)[1] for s in samples]
    clocks = Clocks()
    out = Path(a.out) / f"occasion-{a.occasion}.jsonl"
    kept, finished, segment = resume_state(out)
    settings = {name: {"method": dict(cfg.method), "drafter": dict(cfg.drafter) if cfg.get("drafter") else None}
                for name, cfg in cfgs.items()}
    # What a kept block must share with this process (the data folder may move between machines).
    shared = [o for o in base_overrides(a) if not o.startswith("paths.")]
    if kept and (kept[0].get("settings") != json.loads(json.dumps(settings)) or kept[0].get("base", shared) != shared):
        error(f"{out}: an interrupted occasion with other settings (problems, tokens, pair or configurations); "
              "move it away to start this occasion afresh")
    # The kept lines only (a line cut mid-write goes), swapped in whole so that no finished block is lost.
    atomic_write_text(out, "".join(json.dumps(rec) + "\n" for rec in kept), root=Path(a.out))  # never through a link
    with open_regular(out, "a", encoding="utf-8") as f:
        def write(rec: dict[str, Any]) -> None:
            f.write(json.dumps(rec) + "\n")
            f.flush()

        write({"kind": "start" if segment == 0 else "resume", "occasion": a.occasion, "segment": segment,
               "pid": os.getpid(), "at": time.time(), "machine": machine(), "threads": torch.get_num_threads(),
               "configs": a.config_names, "settings": settings, "base": shared})
        # Warm-up, untimed: every configuration once on the first prompt (kernels, allocator);
        # again in a resumed segment, a new process.
        for name, eng in engines.items():
            eng.generate(list(prompts[0]), method=True, seed=0, max_new_tokens=min(8, a.max_new_tokens))
        order = list(range(len(samples)))
        random.Random(a.seed * 1000 + a.occasion).shuffle(order)  # problems in a random order per occasion
        for p in order:
            if samples[p].id in finished:
                continue
            for attempt in range(a.max_retimes + 1):
                names = list(engines)
                # Configurations in a random order per problem, drawn from the block's own seed so
                # that a resumed segment draws what an uninterrupted run would have.
                random.Random(f"{a.seed}:{a.occasion}:{samples[p].id}:{attempt}").shuffle(names)
                block = []
                for name in names:
                    probe = Probe(clocks)
                    probe.start()
                    gen = engines[name].generate(list(prompts[p]), method=True, seed=0, max_new_tokens=a.max_new_tokens)
                    probe.stop()
                    t = probe.record()
                    block.append({
                        "kind": "gen", "occasion": a.occasion, "segment": segment, "problem": samples[p].id, "config": name,
                        "attempt": attempt,
                        "new_tokens": len(gen.new_tokens), "tokens_sha": hashlib.sha1(json.dumps(gen.new_tokens).encode()).hexdigest()[:16],
                        "wall_s": t["wall_s"], "cpu_share": t["cpu_share"], "others_share": t["others_share"],
                        "ttft_s": gen.ttft_s, "prefill_s": gen.prefill_s, "decode_s": gen.decode_s, "work": gen.work,
                    })
                dirty = [r["config"] for r in block if r["others_share"] is not None and r["others_share"] > a.max_others_share]
                for r in block:
                    r["contaminated"] = bool(dirty)
                    r["final"] = not dirty or attempt == a.max_retimes
                    write(r)
                if not dirty:
                    break
                print(f"occasion {a.occasion} problem {samples[p].id}: contaminated ({', '.join(dirty)} beside other work); "
                      f"{'re-timing' if attempt < a.max_retimes else 'left out of the wall-clock figures'}", file=sys.stderr)
        write({"kind": "done", "occasion": a.occasion, "at": time.time()})


def resume_state(path: Path) -> tuple[list[dict[str, Any]], set[str], int]:
    """What an occasion's file already holds: its records up to the first line that does not
    parse (a line cut mid-write, and anything after it), the problems whose final block is among
    them, and how many segments (processes) wrote it. A file that is absent or holds no start
    record starts afresh (segment 0)."""
    kept: list[dict[str, Any]] = []
    if check_regular(path):  # a link or a FIFO: ConfigError (safe_files)
        for line in read_text(path).splitlines():
            try:
                rec = json.loads(line)
            except (json.JSONDecodeError, RecursionError):
                break
            if not isinstance(rec, dict) or rec.get("kind") == "done":
                break
            kept.append(rec)
    if not kept or kept[0].get("kind") != "start":
        return [], set(), 0
    configs = set(kept[0].get("configs") or ())
    final: dict[str, set[str]] = {}
    for r in kept:
        if r.get("kind") == "gen" and r.get("final"):
            final.setdefault(r["problem"], set()).add(r["config"])
    finished = {p for p, got in final.items() if got == configs}
    # A block cut while its lines were written is timed again whole: its lines go.
    kept = [r for r in kept if r.get("kind") != "gen" or r["problem"] in finished or not r.get("final")]
    segments = sum(r.get("kind") in ("start", "resume") for r in kept)
    return kept, finished, segments


def segments_of(starts: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    """Per occasion: how many processes (segments) timed it, the CPUs and hosts they ran on,
    and the hours between its first and last segment's start."""
    out: dict[int, dict[str, Any]] = {}
    for rec in starts:
        o = out.setdefault(rec.get("occasion"), {"segments": 0, "cpus": [], "hosts": [], "at": []})
        o["segments"] += 1
        m = rec.get("machine") or {}
        cpu = " / ".join(str(m.get(k)) for k in ("cpu_model", "cpu_signature", "cpu_isa")) if m else "unrecorded"
        if cpu not in o["cpus"]:
            o["cpus"].append(cpu)
        if m.get("host") and m["host"] not in o["hosts"]:
            o["hosts"].append(m["host"])
        if rec.get("at") is not None:
            o["at"].append(rec["at"])
    for o in out.values():
        o["span_h"] = (max(o["at"]) - min(o["at"])) / 3600 if o["at"] else None
        del o["at"]
    return out


def machine() -> dict[str, Any]:
    from loosespec_bench.store.summary import machine as this_machine

    return {**this_machine(), "host": os.uname().nodename}


# ---- the budget, before anything runs --------------------------------------------------------
def target_alone_work(prompt_len: int, new_tokens: int) -> dict[str, Any]:
    """The work counts of the target alone generating new_tokens after a prompt_len-token prompt:
    one prefill over all but the prompt's last token, then report.project's one-row decode
    forwards at their mean context (the cost model is linear in the context, so the mean prices
    the growing context, to within half a position a token)."""
    from loosespec_bench.report.project import target_alone_work as decode_work
    from loosespec_bench.measure.work import add_forward

    work, _ = decode_work(new_tokens, ctx=prompt_len - 1 + (new_tokens - 1) // 2)
    add_forward(work, "target_prefill", prompt_len - 1, 1, 0)
    return work


def plan(a: argparse.Namespace) -> None:
    """Print the benchmark's size and predicted time. With a calibration of this pair on this
    machine, each configuration is priced at the target alone's predicted time on the same
    problem (their measured speedups here run 0.4-1.5x), every generation at its full
    --max-new-tokens, warm-ups and re-times left out; without one, at the planner's assumed
    rate for the pair (plan.py's pricing of a sweep), prefill left out."""
    import torch

    from loosespec_bench.bench.contestants import compose_config
    from loosespec_bench.calibrate import find_calibration, pair_node
    from loosespec_bench.measure.costmodel import DEFAULT_TPS, TARGET_TPS

    cfg = compose_config(base_overrides(a) + CONFIGS["ar"])
    gens = a.problems * len(a.config_names) * a.occasions
    gaps_s = (a.occasions - 1) * a.gap_s
    line = (f"speed benchmark ({a.dataset}, pair {a.pair}): {a.problems} problems x {len(a.config_names)} configurations "
            f"({', '.join(a.config_names)}) x {a.occasions} occasions = {gens} timed generations of up to "
            f"{a.max_new_tokens} tokens, plus {gaps_s / 60:.0f} min of gaps")
    threads = a.threads or torch.get_num_threads()
    cal, source = find_calibration(os.environ.get("LOOSESPEC_RESULTS_DIR", str(REPO / "results")), pair_node(a.pair), threads)
    if cal is not None:
        try:
            lengths = prompt_lengths(cfg, a.problems)
        except Exception as err:  # data or tokenizer not here: the planner's rate still prices it
            source = f"{source}, unused: the prompts could not be read ({type(err).__name__}: {err})"
        else:
            per_problem = [cal.predict_s(target_alone_work(n, a.max_new_tokens)) for n in lengths]
            total_s = sum(per_problem) * len(a.config_names) * a.occasions + gaps_s
            print(f"{line}; predicted ~{total_s / 3600:.1f} CPU h (each configuration priced as the target alone, "
                  f"prompts {min(lengths)}-{max(lengths)} tokens; calibration: {source})")
            return
    # No calibration yet (the run takes one first and prints this line again, priced by it).
    rate = TARGET_TPS.get(str(cfg.pair.name), DEFAULT_TPS)
    total_s = gens * a.max_new_tokens / rate + gaps_s
    print(f"{line}; est. ~{total_s / 3600:.1f} CPU h at the planner's assumed {rate:g} tokens/s for this pair ({source})")


def prompt_lengths(cfg: Any, problems: int) -> list[int]:
    """Token counts of the first `problems` prompts, as an occasion encodes them (tokenizer only)."""
    from loosespec_bench.build import build_task
    from loosespec_bench.tasks.prompting import encode_prompt
    from loosespec_bench.tasks.niah import load_tokenizer

    tokenizer = load_tokenizer(str(cfg.pair.target.path))
    return [len(encode_prompt(tokenizer, s, True)[1]) for s in build_task(cfg).samples()[:problems]]

# ---- the orchestrating parent ----------------------------------------------------------------
def ensure_calibration(a: argparse.Namespace) -> None:
    from loosespec_bench.calibrate import find_calibration, pair_node

    import torch

    cal, why = find_calibration(os.environ.get("LOOSESPEC_RESULTS_DIR", str(REPO / "results")), pair_node(a.pair), a.threads or torch.get_num_threads())
    if cal is None and a.calibrate == "auto":
        cmd = [sys.executable, "-m", "loosespec_bench.calibrate", "--pair", a.pair]
        if a.threads:
            cmd += ["--threads", str(a.threads)]
        print("calibrating:", " ".join(cmd), file=sys.stderr)
        subprocess.run(cmd, check=True, cwd=REPO)


def run_occasions(a: argparse.Namespace) -> None:
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out / "args.json", json.dumps({k: v for k, v in vars(a).items()}, indent=1), root=out)
    ensure_calibration(a)
    plan(a)  # the budget, priced by the calibration just found or taken
    for o in range(1, a.occasions + 1):
        path = out / f"occasion-{o}.jsonl"
        if occasion_done(path):
            print(f"occasion {o}: already done ({path})", file=sys.stderr)
            continue
        if o > 1 and a.gap_s:
            print(f"waiting {a.gap_s:.0f} s before occasion {o}", file=sys.stderr)
            time.sleep(a.gap_s)
        cmd = [sys.executable, str(Path(__file__).resolve()), *sys.argv[1:], "--occasion", str(o)]
        print(f"occasion {o}: {' '.join(cmd)}", file=sys.stderr)
        done = subprocess.run(cmd)
        if done.returncode:  # the child printed its own error line; its finished blocks are kept
            error(f"occasion {o} stopped (exit {done.returncode}); rerun the same command to resume it")


def analyse(rows: list[dict[str, Any]], *, calibration: Calibration | None, n_boot: int = 2000, seed: int = 0) -> dict[str, Any]:
    """The report from the final generations (see the module docstring)."""
    occasions = sorted({r["occasion"] for r in rows})
    problems = sorted({r["problem"] for r in rows})
    present = set(r["config"] for r in rows)
    configs = [c for c in CONFIGS if c in present] + sorted(present - set(CONFIGS))
    cell = {(r["occasion"], r["problem"], r["config"]): r for r in rows}
    O, P = len(occasions), len(problems)

    def table(config: str, key: str, clean_only: bool = False) -> np.ndarray:
        return cell_table(cell, occasions, problems, config, lambda r: r[key], clean=clean_only)

    report: dict[str, Any] = {"occasions": occasions, "problems": problems, "n_problems": P, "n_occasions": O, "configs": {}}
    shares = [r["others_share"] for r in rows if r["others_share"] is not None]
    report["load"] = {
        "others_share_median": float(np.median(shares)) if shares else None,
        "others_share_max": float(np.max(shares)) if shares else None,
        "cpu_share_median": float(np.median([r["cpu_share"] for r in rows if r["cpu_share"]])) if rows else None,
        "contaminated_blocks": len({(r["occasion"], r["problem"]) for r in rows if r["contaminated"]}),
        "per_occasion_others_share_median": {
            o: float(np.median([r["others_share"] for r in rows if r["occasion"] == o and r["others_share"] is not None] or [np.nan]))
            for o in occasions},
    }
    ar_tok, ar_time = table("ar", "new_tokens", True), table("ar", "wall_s", True)
    ar_tps = ar_tok / ar_time
    report["target_alone_retest"] = {
        "tokens_per_s_by_occasion": [float(np.nansum(ar_tok[i]) / np.nansum(np.where(np.isfinite(ar_time[i]), ar_time[i], 0)))
                                     for i in range(O)],
        "icc": icc_agreement(np.log(ar_tps.T)) if O >= 2 and np.isfinite(ar_tps).all() else None,
    }
    tps = report["target_alone_retest"]["tokens_per_s_by_occasion"]
    report["target_alone_retest"]["ratio_last_over_first"] = tps[-1] / tps[0] if O >= 2 and tps[0] else None
    per_problem_work: dict[str, dict[str, list[float]]] = {}
    for c in configs:
        works = [r["work"] for r in rows if r["config"] == c and r.get("work")]
        total = merge_work(works)
        entry: dict[str, Any] = {"work_per_token": per_token(total), "work_total": total}
        # Tokens the same on every occasion (greedy; bf16 may tie-break differently per process).
        shas = {p: {cell[(o, p, c)]["tokens_sha"] for o in occasions if (o, p, c) in cell} for p in problems}
        entry["tokens_same_across_occasions"] = sum(len(s) == 1 for s in shas.values())
        entry["tokens_identical_to_target_alone"] = sum(
            1 for o in occasions for p in problems
            if (o, p, c) in cell and (o, p, "ar") in cell and cell[(o, p, c)]["tokens_sha"] == cell[(o, p, "ar")]["tokens_sha"])
        per_problem_work[c] = {
            k: [float(np.mean([per_token(cell[(o, p, c)]["work"]).get(k) or 0.0 for o in occasions if (o, p, c) in cell]))
                for p in problems]
            for k in ("target_forwards", "draft_forwards", "target_rows", "draft_rows")
        }
        tok, tim = table(c, "new_tokens", True), table(c, "wall_s", True)
        pt, lo, hi = occasion_bootstrap(tok, tim, ar_tok, ar_time, n_boot=n_boot, seed=seed)
        entry.update(speedup=pt, speedup_ci_low=lo, speedup_ci_high=hi)
        entry["speedup_by_occasion"] = [occasion_bootstrap(tok[i:i + 1], tim[i:i + 1], ar_tok[i:i + 1], ar_time[i:i + 1], n_boot=1)[0]
                                        for i in range(O)]
        y = np.log((tok / tim) / ar_tps)  # [O, P] log per-problem speedup
        if c != "ar" and O >= 2 and np.isfinite(y).all():
            eff = occasion_effects(y)
            entry["occasion"] = {"occasion_sd_log": eff["occasion_var"] ** 0.5, "residual_sd_log": eff["residual_var"] ** 0.5,
                                 "problem_sd_log": eff["problem_var"] ** 0.5, "occasion_p": eff["occasion_p"],
                                 "occasion_effects_log": eff["occasion_effects"]}
            entry["retest"] = {"icc": icc_agreement(y.T),
                               "ratio_last_over_first": entry["speedup_by_occasion"][-1] / entry["speedup_by_occasion"][0]
                               if entry["speedup_by_occasion"][0] else None}
        if calibration is not None and c != "ar":
            # Predicted from counts: per (occasion, problem) cell, pooled like the measurement.
            m_cells = [(cell[(o, p, c)], cell[(o, p, "ar")]) for o in occasions for p in problems
                       if (o, p, c) in cell and (o, p, "ar") in cell]
            cols = ([m["new_tokens"] for m, _ in m_cells], [calibration.predict_s(m["work"]) for m, _ in m_cells],
                    [b["new_tokens"] for _, b in m_cells], [calibration.predict_s(b["work"]) for _, b in m_cells])
            ppt, plo, phi = paired_bootstrap(cols, speedup_of_sums, n_boot=n_boot, seed=seed)
            entry.update(predicted_speedup=ppt, predicted_speedup_ci_low=plo, predicted_speedup_ci_high=phi)
            if ppt and pt:
                entry["gap"] = pt / ppt - 1.0
            entry["verdict"] = verdict(entry)
        report["configs"][c] = entry
    report["count_tests"] = []
    for a_, b_, key in COUNT_TESTS:
        if a_ in per_problem_work and b_ in per_problem_work:
            t = count_sign_test(per_problem_work[a_][key], per_problem_work[b_][key])
            report["count_tests"].append({"a": a_, "b": b_, "count": f"{key} per token", **t})
    return report


def _side(low: float | None, high: float | None) -> str:
    if low is None or high is None:
        return "undecided"
    return "faster" if low > 1 else "slower" if high < 1 else "undecided"


def verdict(entry: dict[str, Any]) -> str:
    """Whether the counts (predicted speedup's interval, on this machine's costs) and the
    wall-clock (measured speedup's two-way interval) say the same about "faster than the
    target alone", or which one disagrees."""
    counts = _side(entry.get("predicted_speedup_ci_low"), entry.get("predicted_speedup_ci_high"))
    clock = _side(entry.get("speedup_ci_low"), entry.get("speedup_ci_high"))
    if counts == clock:
        return f"counts and wall-clock agree: {counts}"
    return f"counts say {counts}, wall-clock says {clock}"


def _f(x: Any, spec: str = ".3f") -> str:
    return "-" if x is None or (isinstance(x, float) and not np.isfinite(x)) else format(x, spec)


def print_report(rep: dict[str, Any]) -> None:
    print(f"\n{rep['n_problems']} problems x {rep['n_occasions']} occasions; load: other processes "
          f"{_f(rep['load']['others_share_median'], '.0%')} median, {_f(rep['load']['others_share_max'], '.0%')} max of the CPU; "
          f"own CPU share {_f(rep['load']['cpu_share_median'], '.2f')} cores; {rep['load']['contaminated_blocks']} contaminated block(s)")
    segs = rep.get("segments") or {}
    cpus = {c for v in segs.values() for c in v["cpus"]}
    for o, v in segs.items():
        if v["segments"] > 1 or len(v["cpus"]) > 1:
            print(f"occasion {o}: {v['segments']} segments over {_f(v['span_h'], '.1f')} h on {'; '.join(v['cpus'])} "
                  "(resumed: its occasion effect includes the break)")
    if len(cpus) > 1:
        print(f"the occasions ran on {len(cpus)} CPUs ({'; '.join(sorted(cpus))}): the occasion effect includes the machine")
    print("\nwork counts per emitted token (decode; identical on every occasion when the tokens are)")
    print(f"{'config':<10} {'tgt fwd':>8} {'tgt rows':>8} {'drf fwd':>8} {'drf rows':>8} {'+LM rows':>8} {'lookups':>8} {'same tok':>8}")
    for c, e in rep["configs"].items():
        w = e["work_per_token"]
        print(f"{c:<10} {_f(w.get('target_forwards')):>8} {_f(w.get('target_rows'), '.2f'):>8} {_f(w.get('draft_forwards')):>8} "
              f"{_f(w.get('draft_rows'), '.2f'):>8} {_f(w.get('lm_head_extra_rows'), '.2f'):>8} {_f(w.get('lookups'), '.2f'):>8} "
              f"{e['tokens_same_across_occasions']:>4}/{rep['n_problems']}")
    print("\nexact sign tests over problems on the counts (a fewer than b)")
    for t in rep["count_tests"]:
        print(f"  {t['a']} vs {t['b']}, {t['count']}: fewer {t['fewer']}, more {t['more']}, ties {t['ties']}, p = {t['p']:.3g}")
    print("\nspeedup over the target alone: measured (two-way bootstrap, problems x occasions) | predicted (counts x calibration)")
    print(f"{'config':<10} {'measured':>24} {'by occasion':>18} {'predicted':>24} {'gap':>7} {'occ. sd':>8} {'resid sd':>8} {'ICC':>6}")
    for c, e in rep["configs"].items():
        if c == "ar":
            continue
        occ = e.get("occasion") or {}
        meas = f"{_f(e['speedup'], '.2f')} [{_f(e['speedup_ci_low'], '.2f')}, {_f(e['speedup_ci_high'], '.2f')}]"
        pred = (f"{_f(e.get('predicted_speedup'), '.2f')} [{_f(e.get('predicted_speedup_ci_low'), '.2f')}, "
                f"{_f(e.get('predicted_speedup_ci_high'), '.2f')}]")
        by = " ".join(_f(x, ".2f") for x in e["speedup_by_occasion"])
        print(f"{c:<10} {meas:>24} {by:>18} {pred:>24} {_f(e.get('gap'), '+.0%'):>7} {_f(occ.get('occasion_sd_log'), '.3f'):>8} "
              f"{_f(occ.get('residual_sd_log'), '.3f'):>8} {_f((e.get('retest') or {}).get('icc'), '.2f'):>6}")
    print("\nverdicts (95% intervals against 1.0x):")
    for c, e in rep["configs"].items():
        if e.get("verdict"):
            print(f"  {c:<10} {e['verdict']}")
    r = rep["target_alone_retest"]
    print(f"\ntest-retest, target alone: tokens/s by occasion {' '.join(_f(x, '.2f') for x in r['tokens_per_s_by_occasion'])}; "
          f"last/first {_f(r['ratio_last_over_first'], '.3f')}; ICC(2,1) of per-problem log tokens/s {_f(r['icc'], '.2f')}")
    print("occ. sd / resid sd: occasion and residual standard deviations of the log per-problem speedup (two-way fit); "
          "ICC: ICC(2,1) of the log per-problem speedup across occasions")


def main(argv: list[str] | None = None) -> int:
    a = parse(argv)
    if a.plan:
        plan(a)
        return 0
    if a.occasion is not None:
        time_occasion(a)
        return 0
    if not a.analyse_only:
        run_occasions(a)
    out = Path(a.out)
    for name in unfinished_occasions(out):
        print(f"{name}: unfinished occasion, left out", file=sys.stderr)
    rows, starts = load_rows(out)
    if not rows:
        error(f"{out}: no finished occasion to analyse")
    from loosespec_bench.calibrate import find_calibration, pair_node

    import torch

    threads = (starts[0].get("threads") if starts else None) or a.threads or torch.get_num_threads()
    cal, source = find_calibration(os.environ.get("LOOSESPEC_RESULTS_DIR", str(REPO / "results")), pair_node(a.pair), threads)
    rep = analyse(rows, calibration=cal, n_boot=a.n_boot, seed=a.seed)
    rep["calibration"] = source
    if cal is not None:  # a copy beside the timings: the claims price the counts with what this analysis used
        atomic_write_text(out / CALIBRATION, json.dumps({**cal.to_dict(), "source": source}, indent=1), root=out)
    rep["segments"] = {str(o): v for o, v in segments_of(starts).items() if o in rep["occasions"]}
    atomic_write_text(out / "report.json", json.dumps(rep, indent=1), root=out)
    print_report(rep)
    print(f"calibration: {source}\nreport: {out / 'report.json'}")
    return 0


def _main(argv: list[str] | None = None) -> int:
    """main() with a bad input (a link, a FIFO, a damaged record: ConfigError) as one line, exit 2,
    and an interrupt (SIGINT / SIGTERM) as one line: finished occasions and blocks are on disk, the
    same command resumes."""
    import signal

    def _term(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt(signum)

    signal.signal(signal.SIGTERM, _term)
    try:
        return main(argv)
    except ConfigError as err:
        error(str(err))
    except KeyboardInterrupt as err:
        signum = err.args[0] if err.args and isinstance(err.args[0], int) else signal.SIGINT
        print(f"stopped ({signal.Signals(signum).name}): the finished occasions and blocks are kept; the same command resumes",
              file=sys.stderr)
        return 128 + int(signum)
    return 0


if __name__ == "__main__":
    sys.exit(_main())
