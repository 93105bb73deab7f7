#!/usr/bin/env python
"""Our FLy rule inside vLLM (engines/vllm_sampler.py: RuleCPUWorker), checked against our verifier.

Runs vLLM (from .venv-vllm) with the pair's draft model as proposer, K = --k, and our FLy as its
rejection sampler, greedy, on the prompts of the engine benchmark (loosespec_bench.bench); the sampler records every
verification step (draft tokens, the target's logits, the row it returned). Then, in this
process: (1) our verifier (verifiers/fly.py, a fresh FLy with the same knobs) replays every
recorded step and must reach the same (accepted, next token); (2) each request's output must be
the recorded steps' rows in order (the prefill's token is the first: vLLM passes it through the
sampler as a step with no draft), i.e. vLLM emitted what the rule decided. Also printed: tau and the loose accepts, and vLLM's SPD on the same prompts
(lossless: the tokens of vLLM's target alone) for comparison.

  .venv-vllm/bin/python scripts/check_vllm_fly.py --prompts-per-set 1 --max-new-tokens 64

Lab script, kept in scripts/ (not installed with the package): it is the check behind
results/bench/vllm-2026-12-01/check_vllm_fly.json and docs/vllm.md (our FLy inside vLLM decides as
our verifier); it needs .venv-vllm and a vLLM build, so it is no part of the wheel.
"""

from __future__ import annotations

import os

os.environ.setdefault("VLLM_USE_V2_MODEL_RUNNER", "0")  # the V1 CPU runner owns `rejection_sampler`

import argparse  # noqa: E402
import json  # noqa: E402
import shutil  # noqa: E402
import tempfile  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

from loosespec_bench.bench.prompts import DEFAULT_SETS, DRAFT, TARGET, build_prompts, data_dir, load_avg  # noqa: E402

from loosespec_bench.engines import vllm as ve  # noqa: E402
from loosespec_bench.engines.vllm_sampler import CONFIG_KEY, WORKER, class_path, replay  # noqa: E402
from loosespec_bench.verifiers.fly import FLy  # noqa: E402


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prompts-per-set", type=int, default=1)
    ap.add_argument("--sets", default=DEFAULT_SETS)
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--theta", type=float, default=0.3)
    ap.add_argument("--window", type=int, default=6)
    ap.add_argument("--record-dir", default=None, help="keep the recorded steps here (default: a temporary folder)")
    args = ap.parse_args(argv)
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    # vLLM's engine process imports our sampler (engines/vllm_sampler.py) from the installed package:
    # `make install-vllm` installs this checkout into .venv-vllm (editable), so no path is set here.
    from transformers import AutoTokenizer
    from vllm import LLM, SamplingParams

    rule_opts = {"theta": args.theta, "window": args.window, "mode": "vllm"}
    target, draft = ve.model_source(TARGET), ve.model_source(DRAFT)
    tok = AutoTokenizer.from_pretrained(target)
    data = data_dir(None)
    prompts = build_prompts(args.sets.split(","), args.prompts_per_set, data, tok, None)
    _, eos, _ = ve.target_metadata(target)
    sp = SamplingParams(temperature=0.0, max_tokens=args.max_new_tokens, stop_token_ids=sorted(eos), seed=0)
    spec = {"method": "draft_model", "model": draft, "num_speculative_tokens": args.k}
    common = dict(model=target, tokenizer=target, dtype="bfloat16", seed=0, enforce_eager=True, max_model_len=4096,
                  max_num_seqs=1, enable_prefix_caching=False, speculative_config=spec)
    root = Path(args.record_dir or tempfile.mkdtemp(prefix="vllm-fly-"))
    res: dict[str, Any] = {"prompts": [], "rule": rule_opts, "k": args.k, "vllm": ve.installed_version(), "load_before": load_avg()}
    outs_fly = []
    for i, p in enumerate(prompts):
        # One engine per prompt: its recording folder holds exactly that request's steps.
        rec = root / f"prompt_{i}"
        shutil.rmtree(rec, ignore_errors=True)
        llm = LLM(**common, worker_cls=WORKER,
                  additional_config={CONFIG_KEY: {"rule": class_path(FLy), "knobs": rule_opts, "record_dir": str(rec)}})
        (o,) = llm.generate([{"prompt_token_ids": p.ids.tolist()}], sp, use_tqdm=False)
        llm.llm_engine.engine_core.shutdown()
        del llm
        outs_fly.append(list(o.outputs[0].token_ids))
    spd = LLM(**common)
    outs_spd = [list(o.outputs[0].token_ids) for o in spd.generate([{"prompt_token_ids": p.ids.tolist()} for p in prompts], sp, use_tqdm=False)]
    spd.llm_engine.engine_core.shutdown()
    ok = True
    for i, p in enumerate(prompts):
        import torch

        rec = root / f"prompt_{i}"
        steps = sorted(rec.glob("step_*.pt"))
        ours = replay(rec, FLy(**rule_opts))
        theirs = [tuple(torch.load(f)["verdict"]) for f in steps]
        rows = [[t for t in torch.load(f)["row"].tolist() if t >= 0] for f in steps]
        drafted = [int(torch.load(f)["draft"].numel()) for f in steps]
        # The prefill's token passes through the sampler as a step with no draft (recorded like
        # the others); only when it was not recorded does the output start before the rows.
        prefill_recorded = bool(drafted) and drafted[0] == 0
        emitted = ([] if prefill_recorded else [outs_fly[i][0]]) + [t for r in rows for t in r]
        same_decisions = sum(a == b for a, b in zip(ours, theirs))
        # vLLM stops at EOS / max_tokens inside a step's row: its output is a prefix of the rows.
        same_output = emitted[: len(outs_fly[i])] == outs_fly[i]
        forwards = len(steps) if prefill_recorded else len(steps) + 1  # target forwards, prefill included
        mismatch_kept = 0
        for f, (n, _) in zip(steps, ours):
            s = torch.load(f)
            t = s["logits"].float().argmax(-1)[:n]
            mismatch_kept += int((s["draft"][:n].long() != t).sum())
        row = {"set": p.set, "id": p.id, "steps": len(steps), "decisions_equal": same_decisions, "output_is_the_rows": same_output,
               "new_tokens": len(outs_fly[i]), "tau": len(outs_fly[i]) / forwards, "drafted": sum(drafted),
               "verification_steps": sum(d > 0 for d in drafted), "tokens": outs_fly[i], "tokens_vllm_spd": outs_spd[i],
               "loose_accepts": mismatch_kept, "identical_to_vllm_spd": outs_fly[i] == outs_spd[i]}
        ok &= same_decisions == len(steps) and same_output
        res["prompts"].append(row)
        print(f"[vllm-fly] {p.set}/{p.id}: {row['verification_steps']} verification steps (+ the prefill's), our verifier agrees on {same_decisions}/{len(steps)}; "
              f"output = the rows in order: {same_output}; {len(outs_fly[i])} tokens, tau {row['tau']:.2f}, "
              f"{mismatch_kept} loose accepts (draft kept where the target's argmax differed); same tokens as vLLM SPD: {row['identical_to_vllm_spd']}",
              flush=True)
    res["load_after"] = load_avg()
    res["all_agree"] = ok
    print(f"[vllm-fly] {'OK' if ok else 'MISMATCH'}: records in {root}; load {res['load_before']} -> {res['load_after']}")
    (root / "check.json").write_text(json.dumps(res, indent=1))
    return res


if __name__ == "__main__":
    main()
