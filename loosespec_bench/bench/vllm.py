"""vLLM contestants beside our loop's, on the prompts of the engine benchmark (loosespec_bench.bench).

vLLM lives in its own environment (make install-vllm: its transformers pin is older than the
one our loop needs), so its contestants run here, in .venv-vllm, and ours in the engine benchmark (python -m loosespec_bench.bench) in
.venv, on the same prompts (the same sets, per-set count, chat template and max_new_tokens);
`--ours FILE` reads the engine benchmark's --out file: its prompt settings, K and repeats are taken
from there, the prompts are rebuilt here and must be the same token ids as the file records (one
`error:` line names the first difference otherwise), and the side-by-side table is printed, as
docs/vllm.md's markdown table too: tokens/s, tau, speedup over each engine's own target alone, the
paired time ratio ours / vLLM per (prompt, repeat) and how many outputs are the same tokens.

  vllm-ar       vLLM, target alone
  vllm-spd      vLLM, draft model (method="draft_model"), K = --k
  vllm-pld      vLLM, n-gram (method="ngram"), K = --pld-k, n-gram 1..--pld-max-ngram
  vllm-eagle3   vLLM, EAGLE-3 head (method="eagle3"), K = --k, head --eagle3-head

Contestants are interleaved prompt by prompt in rotating order after a warm-up, as in
the engine benchmark. `--batch-sizes 1,2,4,8` adds a throughput sweep: B requests at once per
contestant, total new tokens / wall time (throughput, not per-request latency).

  make bench BENCH_ARGS="--contestants ar,spd,pld --out /tmp/ours.json"
  .venv-vllm/bin/python -m loosespec_bench.bench.vllm --ours /tmp/ours.json --out /tmp/vllm.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

import torch

from loosespec_bench.engines import vllm as ve
from loosespec_bench.measure import speed_configs as configs
from loosespec_bench.measure.metrics import pair_up, paired_ratio_stats

# Our bench's prompts, Run record and summaries: the same code on both sides.
from .analysis import fmt, paired, per_contestant, prompt_interval, speedup_vs_ar
from .contestants import Run
from .prompts import DEFAULT_SETS, DRAFT, TARGET, Prompt, build_prompts, data_dir, load_avg

# By the names measure/speed_configs.py declares; each declares the configuration of ours it runs.
CONTESTANTS = (configs.VLLM_AR, configs.VLLM_SPD, configs.VLLM_PLD, configs.VLLM_EAGLE3)
# (ours in the engine benchmark, vLLM's here): the side-by-side rows.
PAIRS = tuple((configs.DECLARED[n].beside, n) for n in CONTESTANTS)
# The method column of docs/vllm.md's table, per configuration of ours.
METHOD_COLUMN = {configs.TARGET_ALONE: "target alone", configs.SPD: "SPD, draft 0.5B", configs.PLD: "prompt lookup (ngram)",
                 configs.EAGLE3: "EAGLE-3 head"}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m loosespec_bench.bench.vllm", description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--prompts-per-set", type=int, default=2)
    ap.add_argument("--sets", default=DEFAULT_SETS)
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--k", type=int, default=5)
    ap.add_argument("--pld-k", type=int, default=10)
    ap.add_argument("--pld-max-ngram", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--contestants", default=",".join(CONTESTANTS[:3]))
    ap.add_argument("--eagle3-head", default=os.path.expanduser(os.environ.get("LOOSESPEC_EAGLE3_DIR", "~/.cache/loosespec_bench/eagle3") + "/qwen2.5-coder-1.5b-instruct"))
    ap.add_argument("--batch-sizes", default="", help="throughput sweep, e.g. 1,2,4,8 (empty: none)")
    ap.add_argument("--batch-contestants", default=",".join(CONTESTANTS[:2]), help="who the batch sweep runs")
    ap.add_argument("--sequential", action="store_true", help="one engine in memory at a time (not interleaved)")
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--kvcache-gib", type=int, default=1, help="VLLM_CPU_KVCACHE_SPACE per engine")
    ap.add_argument("--max-model-len", type=int, default=4096)
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--target", default=TARGET)
    ap.add_argument("--draft", default=DRAFT)
    ap.add_argument("--ours", default=None, help="python -m loosespec_bench.bench --out file with our contestants on the same prompts")
    ap.add_argument("--runs", default=None, help="this script's earlier --out file: print the tables again (with --ours), load nothing")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    args.contestants, bad = configs.pick([c.strip() for c in args.contestants.split(",") if c.strip()], CONTESTANTS)
    if bad:
        ap.error(f"unknown contestants {bad}; choose from {', '.join(CONTESTANTS)}")
    args.batch_sizes = [int(b) for b in args.batch_sizes.split(",") if b.strip()]
    args.max_prompt_tokens = None
    if args.ours and not args.runs:
        adopt_ours_settings(args, json.loads(Path(args.ours).read_text()))
    return args


# The settings that decide which prompts run and what each contestant does: with --ours they are
# read from the engine benchmark's file, so both sides run the same prompts with the same K.
SHARED_SETTINGS = ("sets", "prompts_per_set", "max_new_tokens", "max_prompt_tokens", "k", "pld_k", "pld_max_ngram", "repeats", "target", "draft")


def adopt_ours_settings(args: argparse.Namespace, ours: dict[str, Any]) -> None:
    """Take the prompt and draft settings of the engine benchmark's run (its --out file's args)."""
    if ours.get("args", {}).get("fp32"):
        raise SystemExit(f"error: {args.ours} was measured in fp32 (--fp32); this script runs bf16: rerun python -m loosespec_bench.bench without --fp32")
    if not all("ids" in p for p in ours.get("prompts", [])):
        raise SystemExit(f"error: {args.ours} does not record its prompt ids (an older engine benchmark): rerun python -m loosespec_bench.bench --out")
    for key in SHARED_SETTINGS:
        if key in ours.get("args", {}):
            setattr(args, key, ours["args"][key])


def prompt_mismatch(prompts: list[Any], recorded: list[dict[str, Any]]) -> str | None:
    """The first difference between our prompts and the engine benchmark's recorded ones (None: the
    same sets, problem ids and token ids in the same order)."""
    if len(prompts) != len(recorded):
        return f"{len(prompts)} prompts here, {len(recorded)} in the file"
    for i, (p, r) in enumerate(zip(prompts, recorded)):
        if (p.set, p.id) != (r["set"], r["id"]):
            return f"prompt {i} is {p.set}/{p.id} here, {r['set']}/{r['id']} in the file"
        ids = p.ids.tolist()
        if ids != r["ids"]:
            at = next((j for j, (a, b) in enumerate(zip(ids, r["ids"])) if a != b), min(len(ids), len(r["ids"])))
            return f"prompt {p.set}/{p.id}: token ids differ from position {at} ({len(ids)} tokens here, {len(r['ids'])} in the file)"
    return None


def quoted(value: str) -> str:
    """A path as one Hydra override value (quoted: `~`, `=` and spaces are grammar there)."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def spec_of(name: str, args: argparse.Namespace) -> dict[str, Any] | None:
    """vLLM's speculative_config for a contestant: the engine's own mapping
    (engines.vllm.speculative_config) of the config the contestant stands for."""
    from .contestants import compose_config

    # The harness's overrides of the configuration of ours it runs, with this script's settings.
    settings = {
        configs.VLLM_AR: [],
        configs.VLLM_SPD: [f"drafter.k={args.k}"],
        configs.VLLM_PLD: [f"drafter.k={args.pld_k}", "drafter.min_ngram=1", f"drafter.max_ngram={args.pld_max_ngram}"],
        configs.VLLM_EAGLE3: [f"drafter.k={args.k}", f"drafter.head_path={quoted(args.eagle3_head)}"],
    }
    ours = configs.DECLARED[configs.DECLARED[name].beside].overrides
    return ve.speculative_config(compose_config([*ours, *settings[name], f"pair.draft.path={quoted(args.draft)}"]))


def run_once(llm: Any, sp: Any, name: str, prompts: list[Any], repeat: int, position: int) -> list[Run]:
    """One call with these prompts (1 = latency; more = a batch); each Run gets the call's wall time."""
    t0 = time.perf_counter()
    outs = llm.generate([{"prompt_token_ids": p.ids.tolist()} for p in prompts], sp, use_tqdm=False)
    wall = time.perf_counter() - t0
    runs = []
    for p, o in zip(prompts, outs):
        c = o.outputs[0]
        m = getattr(c, "spec_decode_metrics", None)
        acc, dr = (list(m.per_step_accepted), list(m.per_step_drafted)) if m is not None else ([], [])
        d, a, e = ve.steps_from_counters(len(c.token_ids), acc, dr)
        runs.append(Run(contestant=name, set=p.set, prompt=p.id, repeat=repeat, position=position,
                           prompt_tokens=int(p.ids.numel()), wall_s=wall, tokens=list(c.token_ids),
                           target_forwards=len(e), draft_forwards=0, steps=len(e), drafted=d, accepted=a))
    return runs


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    if args.runs:
        old = json.loads(Path(args.runs).read_text())
        runs = stored_runs(old["runs"])
        res = {"contestants": stored_names(old["contestants"]), "batch": stored_names(old["batch"]),
               "load_before": old["load_before"], "load_after": old["load_after"]}
        res["side_by_side"] = {}
        names = list(res["contestants"])
        if args.ours:
            diff = prompt_mismatch([Prompt(p["set"], p["id"], torch.tensor(p["ids"]), None) for p in old.get("prompts", [])],
                                   json.loads(Path(args.ours).read_text()).get("prompts", []))
            if diff:
                raise SystemExit(f"error: {args.runs} and {args.ours} did not run the same prompts: {diff}")
            side_by_side(res, runs, names, args.ours)
        report(res, names)
        return res
    from transformers import AutoTokenizer
    from vllm import LLM, SamplingParams

    os.environ["VLLM_CPU_KVCACHE_SPACE"] = str(args.kvcache_gib)
    target = ve.model_source(args.target)
    tok = AutoTokenizer.from_pretrained(target)
    prompts = build_prompts(args.sets.split(","), args.prompts_per_set, data_dir(args.data_dir), tok, args.max_prompt_tokens)
    if args.ours:
        # The same prompt ids as our contestants', or no side-by-side at all.
        diff = prompt_mismatch(prompts, json.loads(Path(args.ours).read_text())["prompts"])
        if diff:
            raise SystemExit(f"error: not the prompts of {args.ours}: {diff}; rerun both scripts from the same checkout and data")
        print(f"[bench-vllm] same {len(prompts)} prompt ids as {args.ours} (checked)", flush=True)
    _, eos, _ = ve.target_metadata(target)
    sp = SamplingParams(temperature=0.0, max_tokens=args.max_new_tokens, stop_token_ids=sorted(eos), seed=0)
    warm = SamplingParams(temperature=0.0, max_tokens=8, stop_token_ids=sorted(eos), seed=0)
    load_before = load_avg()
    names = [n for n in args.contestants if n != configs.VLLM_EAGLE3 or os.path.isdir(args.eagle3_head)]
    for n in sorted(set(args.contestants) - set(names)):
        print(f"[bench-vllm] {n}: no EAGLE-3 head at {args.eagle3_head} (python -m loosespec_bench.train.eagle3); skipped", flush=True)
    runs: list[Run] = []
    batch_runs: dict[str, dict[int, list[Run]]] = {}
    load_s = 0.0
    # One engine in memory at a time when --sequential (three at once were killed for memory on
    # this shared 24 GiB machine): contestants then run one after the other, not interleaved.
    groups = [[n] for n in names] if args.sequential else [names]
    for group in groups:
        t0 = time.perf_counter()
        llms = {}
        for name in group:
            spec = spec_of(name, args)
            llms[name] = LLM(model=target, tokenizer=target, dtype=args.dtype, seed=0, enforce_eager=True,
                             max_model_len=args.max_model_len, max_num_seqs=max([1, *args.batch_sizes]),
                             enable_prefix_caching=False, speculative_config=spec,
                             **({"per_request_spec_decode_metrics": "detailed"} if spec else {}))
        load_s += time.perf_counter() - t0
        print(f"[bench-vllm] {group} loaded in {time.perf_counter() - t0:.0f}s; {len(prompts)} prompts; load {load_avg()}", flush=True)
        for n in group:
            run_once(llms[n], warm, n, prompts[:1], -1, 0)
        for i, p in enumerate(prompts):
            for r in range(args.repeats):
                shift = (i * args.repeats + r) % len(group)
                for pos, n in enumerate(group[shift:] + group[:shift]):
                    (run,) = run_once(llms[n], sp, n, [p], r, pos)
                    runs.append(run)
                    print(f"[bench-vllm] {p.set}/{p.id} r{r} {n:<12} {len(run.tokens):>4} tok {run.wall_s:7.2f}s "
                          f"{len(run.tokens) / run.wall_s:6.2f} tok/s  load {load_avg()}", flush=True)
        for b in args.batch_sizes:
            for n in [x for x in group if x in args.batch_contestants.split(",")]:
                batch_runs.setdefault(n, {})[b] = run_once(llms[n], sp, n, [prompts[j % len(prompts)] for j in range(b)], 0, 0)
        for llm in llms.values():
            llm.llm_engine.engine_core.shutdown()
        del llms
    res: dict[str, Any] = {"contestants": {}, "batch": {}, "side_by_side": {}}
    for n in names:
        s = per_contestant(runs, n)
        s["speedup_vs_own_ar"] = (speedup_vs_ar(_renamed(runs, configs.VLLM_AR, configs.TARGET_ALONE), n)
                                  if n != configs.VLLM_AR and configs.VLLM_AR in names else None)
        res["contestants"][n] = s
    for n, sizes in batch_runs.items():
        for b, rs in sizes.items():
            tokens = sum(len(x.tokens) for x in rs)
            steps = sum(x.steps for x in rs)
            res["batch"].setdefault(n, {})[b] = {"tokens": tokens, "wall_s": rs[0].wall_s, "tokens_per_s": tokens / rs[0].wall_s,
                                                 "tau": tokens / steps if steps else None}
            print(f"[bench-vllm] batch {b} {n:<12} {tokens:>5} tok {rs[0].wall_s:7.2f}s {tokens / rs[0].wall_s:7.2f} tok/s (throughput)", flush=True)
    if args.ours:
        side_by_side(res, runs, names, args.ours)
    res["load_before"], res["load_after"] = load_before, load_avg()
    report(res, names)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps({**res, "args": vars(args), "runs": [vars(r) for r in runs],
                                              "vllm": ve.installed_version(), "model_load_s": load_s,
                                              "prompts": [{"set": p.set, "id": p.id, "ids": p.ids.tolist()} for p in prompts]}, indent=1, default=str))
        print(f"[bench-vllm] raw timings: {args.out}")
    return res


def side_by_side(res: dict[str, Any], runs: list[Run], names: list[str], ours_file: str) -> None:
    """Ours (the engine benchmark's --out file) against vLLM's runs on the same (prompt, repeat)."""
    ours = json.loads(Path(ours_file).read_text())
    theirs = stored_runs(ours["runs"])
    res["ours_contestants"] = stored_names(ours["contestants"])
    res["ours_load"] = (ours.get("load_before"), ours.get("load_after"))
    for a, b in PAIRS:
        if b in names and a in res["ours_contestants"]:
            pairs = pair_up({(x.set, x.prompt, x.repeat): x for x in theirs if x.contestant == a},
                            {(x.set, x.prompt, x.repeat): x for x in runs if x.contestant == b})
            res["side_by_side"][f"{a}|{b}"] = {
                "pairs": len(pairs),
                **paired_ratio_stats([x.s_per_token / y.s_per_token for x, y in pairs], [x.tokens == y.tokens for x, y in pairs], name="time_ratio"),
            }
    res["table"] = markdown_table(theirs, runs, list(res["ours_contestants"]), names)


def stored_runs(records: list[dict[str, Any]]) -> list[Run]:
    """A stored --out file's runs (this script's, or the engine benchmark's), each contestant by
    its declared name: an old spelling ("fly-mla") read as the declared one (configs.canonical)."""
    return [Run(**{**r, "contestant": configs.canonical(r["contestant"])}) for r in records]


def stored_names(table: dict[str, Any]) -> dict[str, Any]:
    """A stored per-contestant table, keyed by declared names (configs.canonical), in its order."""
    return {configs.canonical(name): value for name, value in table.items()}


def paired_figure(pairs: list[tuple[Run, Run]], fn: Any) -> str:
    """'median [low, high]; min-max': the median over prompts of each prompt's median ratio,
    its 95% paired bootstrap interval over prompts (stats.paired_bootstrap), and the range over
    every (prompt, repeat) pair."""
    if not pairs:
        return "-"
    point, low, high = prompt_interval(pairs, fn)
    every = [fn(a, b) for a, b in pairs]
    ci = f" [{low:.2f}, {high:.2f}]" if low is not None and high is not None else ""
    return f"{point:.2f}{ci}; {min(every):.2f}-{max(every):.2f}"


def markdown_table(ours_runs: list[Run], runs: list[Run], ours_names: list[str], names: list[str]) -> str:
    """docs/vllm.md's side-by-side table: one row per engine and method on the same prompts."""
    rows = ["| engine | method | tok/s (pooled; runs min-max) | tau | speedup over own target alone | identical to own target alone "
            "| time ours / vLLM per token | identical ours = vLLM |", "|---|---|---|---|---|---|---|---|"]
    sides = [("ours", ours_runs, [a for a, _ in PAIRS if a in ours_names], configs.TARGET_ALONE),
             ("vLLM", runs, [b for _, b in PAIRS if b in names], configs.VLLM_AR)]
    partner = dict(PAIRS) | {b: a for a, b in PAIRS}
    for engine, rs, members, ar in sides:
        for n in members:
            mine = [r for r in rs if r.contestant == n]
            if not mine:
                continue
            tokens, wall, steps = sum(len(r.tokens) for r in mine), sum(r.wall_s for r in mine), sum(r.steps for r in mine)
            speeds = [len(r.tokens) / r.wall_s for r in mine]
            own = paired(rs, n, ar) if n != ar else []
            speedup = paired_figure(own, lambda a, b: b.s_per_token / a.s_per_token) if n != ar else "1"
            same_own = f"{sum(a.tokens == b.tokens for a, b in own)}/{len(own)}" if n != ar else "-"
            other = partner[n]
            pairs = (pair_up({(x.set, x.prompt, x.repeat): x for x in ours_runs if x.contestant == (n if engine == "ours" else other)},
                             {(x.set, x.prompt, x.repeat): x for x in runs if x.contestant == (other if engine == "ours" else n)}))
            ratio = paired_figure(pairs, lambda a, b: a.s_per_token / b.s_per_token) if engine == "ours" else "(row above)"
            same = f"{sum(a.tokens == b.tokens for a, b in pairs)}/{len(pairs)}" if engine == "ours" and pairs else "-"
            rows.append(f"| {engine} | {METHOD_COLUMN[configs.DECLARED[n].beside or n]} | {tokens / wall:.2f} ({min(speeds):.2f}-{max(speeds):.2f}) "
                        f"| {tokens / steps:.2f} | {speedup} | {same_own} | {ratio} | {same} |")
    return "\n".join(rows)


def _renamed(runs: list[Run], old: str, new: str) -> list[Run]:
    """analysis.speedup_vs_ar pairs a contestant with "ar": vLLM's own target alone here."""
    return [Run(**{**vars(r), "contestant": new}) if r.contestant == old else r for r in runs]


def report(res: dict[str, Any], names: list[str]) -> None:
    print(f"\n== vLLM contestants (load {res['load_before']} -> {res['load_after']}; shared machine: timings are noisy)")
    print(f"{'contestant':<14}{'tok/s':>8}{'tau':>7}{'vs own AR':>11}")
    for n in names:
        c = res["contestants"][n]
        print(f"{n:<14}{fmt(c['tokens_per_s'], '.2f'):>8}{fmt(c['tau'], '.2f'):>7}{fmt(c.get('speedup_vs_own_ar'), '.2f', 'x'):>11}")
    if res.get("ours_contestants"):
        print(f"\n== ours (loosespec_bench.bench, load {res['ours_load'][0]} -> {res['ours_load'][1]}) vs vLLM, same prompts")
        print(f"{'pair':<20}{'ours tok/s':>11}{'vLLM tok/s':>11}{'time ours/vLLM (median)':>25}{'identical':>11}")
        for key, c in res["side_by_side"].items():
            a, b = key.split("|")
            print(f"{key:<20}{fmt(res['ours_contestants'][a]['tokens_per_s'], '.2f'):>11}"
                  f"{fmt(res['contestants'][b]['tokens_per_s'], '.2f'):>11}"
                  f"{fmt(c.get('time_ratio_median'), '.3f'):>25}{c.get('identical', '-')!s:>11}")
    if res.get("table"):
        print("\n== docs/vllm.md's table (paired per (prompt, repeat); median over prompts [95% bootstrap CI over prompts]; min-max over pairs)")
        print(res["table"])
    for n, rows in res["batch"].items():
        print(f"batch sweep {n}: " + ", ".join(f"B={b}: {r['tokens_per_s']:.1f} tok/s (tau {fmt(r['tau'], '.2f')})" for b, r in rows.items()))


if __name__ == "__main__":
    main()
