"""Speed evidence that does not depend on the occasion (issue 46, items 3 and 6).

    python -m loosespec_bench.bench.speed --out DIR [--pair NAME] [--configs a,b,...] ...

One comparison (--configs: configurations measure/speed_configs.py declares, by name; default all)
timed in ONE process per occasion, interleaved per problem in a randomized order after a
warm-up, over several occasions (separate processes started --gap-s apart). Printed and
written to OUT/report.json (the analysis: bench/speed_report.py):

- work counts per emitted token per configuration (measure/work.py) and exact sign tests on
  them over problems (e.g. FLy + MLA's draft forwards per token against FLy's);
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
    python -m loosespec_bench.bench.speed --pair qwen25_coder_embedded --problems 6 \
        --max-new-tokens 64 --occasions 2 --gap-s 60 --threads 2 --out results/speed_evidence/embedded
Smoke test on the tiny random pair (seconds):
    python -m loosespec_bench.bench.speed --pair tiny --problems 3 --max-new-tokens 16 --occasions 2 --gap-s 0 --out /tmp/se

Each occasion's generations are appended block by block to OUT/occasion-<o>.jsonl; an occasion
that finished is not rerun, and one interrupted midway resumes: its finished problem blocks are
kept, a new process (a "segment", recorded with its machine and time) warms up again and times
the problems left, in the occasion's own order. The report names every occasion that ran in
more than one segment or on more than one CPU, since its "occasion effect" then includes that
break. --analyse-only re-reads them.

The calibration (and the one this command takes first with --calibrate auto) is looked up under
$LOOSESPEC_RESULTS_DIR, else ./results, as `python -m loosespec_bench.calibrate` stores it.
scripts/bench_speed_evidence.py, the command the committed folders were made with, runs this.
"""

from __future__ import annotations

from loosespec_bench.omp import default_wait_policy

# Before torch loads libgomp, as bench/engine.py: the wait policy moves every forward's time.
default_wait_policy()

import argparse  # noqa: E402
import hashlib  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import random  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any, Sequence  # noqa: E402

from ..errors import ConfigError  # noqa: E402
from ..measure.occasion_files import ARGS, CALIBRATION, load_rows, occasion_done, unfinished_occasions  # noqa: E402
from ..measure.speed_configs import CONFIGS, TARGET_ALONE, pick  # noqa: E402
from ..safe_files import atomic_write_text, check_regular, open_regular, read_text  # noqa: E402
from ..settings.config import CONF_DIR  # noqa: E402
from .speed_report import analyse, print_report, segments_of  # noqa: E402

MODULE = "loosespec_bench.bench.speed"  # what each occasion's child process runs (python -m)
DEFAULT_MAX_OTHERS = 0.10


def error(msg: str) -> None:
    print(f"error: {msg}", file=sys.stderr)
    raise SystemExit(2)


def results_dir() -> str:
    """Where calibrations are looked up and stored (python -m loosespec_bench.calibrate's default)."""
    return os.environ.get("LOOSESPEC_RESULTS_DIR", "results")


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog=f"python -m {MODULE}", description=(__doc__ or "").split("\n")[0])
    p.add_argument("--pair", default="qwen25_coder_embedded", help="pair config name (conf/pair/<name>.yaml)")
    p.add_argument("--dataset", default="gsm8k", help="data set config name (conf/dataset/<name>.yaml)")
    p.add_argument("--problems", type=int, default=6, help="distinct problems, the first N of the data set")
    p.add_argument("--max-new-tokens", type=int, default=64)
    p.add_argument("--configs", default=",".join(CONFIGS),
                   help=f"comma list from {','.join(CONFIGS)} ({TARGET_ALONE} is always added)")
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
    p.error = lambda message: error(f"{message} (--help lists the options)")  # type: ignore[method-assign]
    argv = list(sys.argv[1:] if argv is None else argv)
    a = p.parse_args(argv)
    a.argv = list(argv)  # what each occasion's child process is started with
    names, unknown = pick([c.strip() for c in a.configs.split(",") if c.strip()], CONFIGS)  # an old spelling: its name
    if unknown:
        error(f"--configs: unknown {unknown}; choose from {', '.join(CONFIGS)}")
    a.config_names = [TARGET_ALONE] + [c for c in names if c != TARGET_ALONE]
    if a.problems < 2:
        error("--problems must be >= 2 (a bootstrap over problems needs two)")
    if a.occasions < 1 or a.max_new_tokens < 2 or a.gap_s < 0 or a.max_retimes < 0:
        error("--occasions >= 1, --max-new-tokens >= 2, --gap-s >= 0 and --max-retimes >= 0")
    if not 0 < a.max_others_share <= 1:
        error("--max-others-share must be in (0, 1]")
    for group, name in (("pair", a.pair), ("dataset", a.dataset)):
        if "/" in name or not (CONF_DIR / group / f"{name}.yaml").is_file():
            error(f"--{group} {name!r}: no conf/{group}/{name}.yaml")
    return a


def base_overrides(a: argparse.Namespace) -> list[str]:
    """The overrides every configuration of the benchmark shares (an occasion's and the budget's)."""
    base = [f"pair={a.pair}", f"dataset={a.dataset}", f"dataset.limit={a.problems}", "generation.temperature=0",
            f"generation.max_new_tokens={a.max_new_tokens}", "record_steps=false"]
    if os.environ.get("LOOSESPEC_DATA_DIR"):
        base.append(f"paths.data_dir={os.environ['LOOSESPEC_DATA_DIR']}")
    return base


def overrides_of(a: argparse.Namespace, name: str) -> list[str]:
    """The whole command line `python -m loosespec_bench` takes for configuration `name`."""
    return base_overrides(a) + list(CONFIGS[name].overrides)


# ---- one occasion (a child process) ----------------------------------------------------------
def time_occasion(a: argparse.Namespace) -> None:
    import torch

    from ..build import build_task, build_verifier, instantiate, uses_drafter
    from ..engines.hf import HFEngine
    from ..measure.timing import Clocks, Probe
    from ..models import load_model
    from ..models.loading import load_options
    from ..tasks.prompting import encode_prompt
    from .contestants import compose_config

    if a.threads:
        torch.set_num_threads(a.threads)
    cfgs = {name: compose_config(overrides_of(a, name)) for name in a.config_names}
    first = cfgs[TARGET_ALONE]
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
        verifier = build_verifier(cfg)  # the target alone: TargetAlone, the speedup baseline
        engines[name] = HFEngine.from_parts(target, verifier=verifier, drafter=drafter, stop_strings=task.stop_strings)
    prompts = [encode_prompt(target.tokenizer, s, True)[1] for s in samples]
    clocks = Clocks()
    root = Path(a.out)
    out = root / f"occasion-{a.occasion}.jsonl"
    kept, finished, segment = resume_state(out)
    settings = {name: {"method": dict(cfg.method), "drafter": dict(cfg.drafter) if cfg.get("drafter") else None}
                for name, cfg in cfgs.items()}
    # What a kept block must share with this process (the data folder may move between machines).
    shared = [o for o in base_overrides(a) if not o.startswith("paths.")]
    if kept and (kept[0].get("settings") != json.loads(json.dumps(settings)) or kept[0].get("base", shared) != shared):
        error(f"{out}: an interrupted occasion with other settings (problems, tokens, pair or configurations); "
              "move it away to start this occasion afresh")
    # The kept lines only (a line cut mid-write goes), swapped in whole so that no finished block is lost.
    atomic_write_text(out, "".join(json.dumps(rec) + "\n" for rec in kept), root=root)  # never through a link
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


def machine() -> dict[str, Any]:
    from ..store.summary import machine as this_machine

    return {**this_machine(), "host": os.uname().nodename}


# ---- the budget, before anything runs --------------------------------------------------------
def target_alone_work(prompt_len: int, new_tokens: int) -> dict[str, Any]:
    """The work counts of the target alone generating new_tokens after a prompt_len-token prompt:
    one prefill over all but the prompt's last token, then report.project's one-row decode
    forwards at their mean context (the cost model is linear in the context, so the mean prices
    the growing context, to within half a position a token)."""
    from ..measure.work import add_forward
    from ..report.project import target_alone_work as decode_work

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

    from ..calibrate import find_calibration, pair_node
    from ..measure.costmodel import DEFAULT_TPS, TARGET_TPS
    from .contestants import compose_config

    cfg = compose_config(overrides_of(a, TARGET_ALONE))
    gens = a.problems * len(a.config_names) * a.occasions
    gaps_s = (a.occasions - 1) * a.gap_s
    line = (f"speed benchmark ({a.dataset}, pair {a.pair}): {a.problems} problems x {len(a.config_names)} configurations "
            f"({', '.join(a.config_names)}) x {a.occasions} occasions = {gens} timed generations of up to "
            f"{a.max_new_tokens} tokens, plus {gaps_s / 60:.0f} min of gaps")
    threads = a.threads or torch.get_num_threads()
    cal, source = find_calibration(results_dir(), pair_node(a.pair), threads)
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
    from ..build import build_task
    from ..tasks.niah import load_tokenizer
    from ..tasks.prompting import encode_prompt

    tokenizer = load_tokenizer(str(cfg.pair.target.path))
    return [len(encode_prompt(tokenizer, s, True)[1]) for s in build_task(cfg).samples()[:problems]]


# ---- the orchestrating parent ----------------------------------------------------------------
def ensure_calibration(a: argparse.Namespace) -> None:
    import torch

    from ..calibrate import find_calibration, pair_node

    cal, _ = find_calibration(results_dir(), pair_node(a.pair), a.threads or torch.get_num_threads())
    if cal is None and a.calibrate == "auto":
        cmd = [sys.executable, "-m", "loosespec_bench.calibrate", "--pair", a.pair, "--results", results_dir()]
        if a.threads:
            cmd += ["--threads", str(a.threads)]
        print("calibrating:", " ".join(cmd), file=sys.stderr)
        subprocess.run(cmd, check=True)


def run_occasions(a: argparse.Namespace) -> None:
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    args = {k: v for k, v in vars(a).items() if k != "argv"}
    atomic_write_text(out / ARGS, json.dumps(args, indent=1), root=out)
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
        cmd = [sys.executable, "-m", MODULE, *a.argv, "--occasion", str(o)]
        print(f"occasion {o}: {' '.join(cmd)}", file=sys.stderr)
        done = subprocess.run(cmd)
        if done.returncode:  # the child printed its own error line; its finished blocks are kept
            error(f"occasion {o} stopped (exit {done.returncode}); rerun the same command to resume it")


def run(argv: Sequence[str] | None = None) -> int:
    """The benchmark (bad input: SystemExit(2) after one error line; see main)."""
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
    import torch

    from ..calibrate import find_calibration, pair_node

    threads = (starts[0].get("threads") if starts else None) or a.threads or torch.get_num_threads()
    cal, source = find_calibration(results_dir(), pair_node(a.pair), threads)
    rep = analyse(rows, calibration=cal, n_boot=a.n_boot, seed=a.seed)
    rep["calibration"] = source
    if cal is not None:  # a copy beside the timings: the claims price the counts with what this analysis used
        atomic_write_text(out / CALIBRATION, json.dumps({**cal.to_dict(), "source": source}, indent=1), root=out)
    rep["segments"] = {str(o): v for o, v in segments_of(starts).items() if o in rep["occasions"]}
    atomic_write_text(out / "report.json", json.dumps(rep, indent=1), root=out)
    print_report(rep)
    print(f"calibration: {source}\nreport: {out / 'report.json'}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """run() with a bad input (a link, a FIFO, a damaged record: ConfigError) as one line, exit 2,
    and an interrupt (SIGINT / SIGTERM) as one line: finished occasions and blocks are on disk, the
    same command resumes."""
    from ..interrupts import ending_on_signals

    def checked(args: Sequence[str] | None) -> int:
        try:
            return run(args)
        except ConfigError as err:
            error(str(err))
        return 2  # not reached: error() exits

    return ending_on_signals(checked, argv, "the finished occasions and blocks are kept; the same command resumes")


if __name__ == "__main__":
    sys.exit(main())
