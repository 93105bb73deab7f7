"""Mine AutoJudge's training set: important / unimportant draft-target mismatches on GSM8K train.

    flock /tmp/loosespec-heavy.lock python -m loosespec_bench.train.mine_autojudge --max-minutes 12 \
        --out ~/.cache/loosespec_bench/autojudge/qwen2.5-coder-0.5b-1.5b/mined  [hydra overrides...]

The search is loosespec_bench/judges/mining.py (the released find_important_tokens); this module
binds it to the pair and the task of a composed harness config (default: the embedded pair,
dataset=gsm8k with dataset.split=train; the prompt, chat template, stop strings, answer budget
and scorer are the harness's own, so the judge learns on what the runs later show it).

- The target's answer and every continuation are greedy target outputs produced through the
  harness's decoding loop with exact-match verification (lossless: the target's greedy tokens,
  up to bf16 near-ties). `--continue-with lookup` (default) drafts each continuation from the
  answer it was cut from (else with the pair's draft model) and keeps the target's and the
  draft's caches across a problem's continuations (loosespec_bench/drafters/reference.py, judges/continuation.py);
  `spd` drafts with the draft model from fresh caches; `ar` runs the target alone. Each
  problem's line records where its time went (`timing`: the answer, every continuation's
  prefill / decode / tokens, the draft passes, the features).
- Problems are taken in a seeded random order (`--seed`), so a time-bounded run mines a random
  subset of the 7,473 train problems; a problem whose target answer has no final number (the
  strict "The final answer is N") is recorded as skipped (its labels would all compare against
  nothing; the released trainer drops them with --remove_target_nones).
- Bounded: the run stops starting continuations after --max-minutes; an unfinished problem is
  dropped and redone by the next run. Resumable: finished problems are appended once to
  <out>/mined.jsonl (features to <out>/features.f32) and skipped on the next run.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any

import numpy as np
import torch


CONTINUE_WITH = ("lookup", "spd", "ar")
LOOKUP_K = 16  # the longest run drafted from the reference answer (a 17-token verification forward)


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def compose(overrides: list[str]) -> Any:
    from hydra import compose as hydra_compose, initialize_config_dir
    from omegaconf import OmegaConf

    from loosespec_bench.settings.config import CONF_DIR, check_group_overrides

    base = ["dataset=gsm8k", "method=spd", "drafter=model", "dataset.split=train", "dataset.limit=null"]
    check_group_overrides(base + overrides)
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = hydra_compose(config_name="config", overrides=base + overrides)
    OmegaConf.resolve(cfg)
    return cfg


def answer_valid(pred: Any) -> bool:
    from loosespec_bench.tasks.answers import parse_number

    return isinstance(pred, str) and parse_number(pred) is not None


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")  # before the tokenizer loads (no fork warnings)
    ap = argparse.ArgumentParser(prog="python -m loosespec_bench.train.mine_autojudge", description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="folder of the mined set (mined.jsonl, features.f32, meta.json)")
    ap.add_argument("--max-minutes", type=float, default=25.0, help="wall-clock budget of this run")
    ap.add_argument("--max-problems", type=int, default=None, help="stop after this many finished problems in total")
    ap.add_argument("--max-mismatches", type=int, default=None,
                    help="decide at most this many mismatches per problem (their labels are the uncapped search's; "
                         "default: all, as released): more problems per CPU hour")
    ap.add_argument("--seed", type=int, default=0, help="order in which the train problems are mined")
    ap.add_argument("--continue-with", choices=CONTINUE_WITH, default="lookup",
                    help="how the target's greedy continuations are computed (the same tokens each way): lookup = "
                         "drafts from the answer the continuation was cut from, else the draft model, caches kept "
                         "across a problem's continuations; spd = the draft model, fresh caches; ar = the target alone")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("overrides", nargs="*", help="hydra overrides of the harness config (pair=..., dataset.num_fewshot=...)")
    args = ap.parse_args(argv)
    if args.max_minutes <= 0:
        print("error: --max-minutes must be > 0", file=sys.stderr)
        return 2

    from loosespec_bench.build import build_drafter, build_task
    from loosespec_bench.decoding import PrefixCache, generate
    from loosespec_bench.drafters.reference import ReferenceDrafter
    from loosespec_bench.judges.continuation import IncrementalArgmax
    from loosespec_bench.errors import ConfigError
    from loosespec_bench.judges.mining import MinedStore, feature_rows, mine_problem, problem_record
    from loosespec_bench.models import load_model
    from loosespec_bench.models.loading import load_options
    from loosespec_bench.settings.run_settings import RunSettings
    from loosespec_bench.tasks.prompting import chat_template_kwargs, cut_at_stop, encode_prompt, eos_ids
    from loosespec_bench.step import crop_to
    from loosespec_bench.tasks import Sample
    from loosespec_bench.verifiers.spd import SPD

    try:
        cfg = compose(args.overrides)
        task = build_task(cfg)
        if getattr(task, "split", None) != "train":
            raise ConfigError("mining reads a training split (dataset=gsm8k dataset.split=train): never mine the evaluation set")
        samples = task.samples()
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    t_start = time.monotonic()
    deadline = t_start + 60 * args.max_minutes
    if args.threads:
        torch.set_num_threads(args.threads)
    order = np.random.default_rng(args.seed).permutation(len(samples))
    settings = RunSettings.read(cfg)  # the run-level settings, typed (settings/run_settings.py)
    max_new = int(settings.generation.max_new_tokens or task.max_new_tokens)

    pair = cfg.pair
    log(f"loading {pair.target.path} and {pair.draft.path}")
    target_lm = load_model(pair.target.path, dtype=pair.dtype, device=pair.device, **load_options(pair.target))
    target, tok = target_lm.model, target_lm.tokenizer
    drafter = build_drafter(cfg, target_lm)  # the pair's draft model (drafter=model)
    draft = drafter.model
    eos = eos_ids(target_lm)
    chat = settings.root.chat_template
    meta = {
        "pair": str(pair.name), "target": str(pair.target.path), "draft": str(pair.draft.path), "dtype": str(pair.dtype),
        "dataset": str(cfg.dataset.name), "split": "train", "num_fewshot": int(cfg.dataset.num_fewshot),
        "match": str(cfg.dataset.match), "max_new_tokens": max_new, "chat_template": chat, "seed": args.seed,
        "hidden_size": int(target.config.hidden_size), "setup": "DT",
        "data_file": str(task.local_path("gsm8k", "train.jsonl")) if task.data_dir is not None else "hub:openai/gsm8k/train",
    }
    try:
        store = MinedStore(args.out, meta)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    done = store.done_ids
    lookup = ReferenceDrafter(draft, k=LOOKUP_K, model_k=int(cfg.drafter.k)) if args.continue_with == "lookup" else None
    log(f"{len(done)} problems already mined in {args.out}; budget {args.max_minutes:.0f} min, max_new_tokens {max_new}")

    def text_of(answer: list[int]) -> str:
        return cut_at_stop(tok.decode(answer, skip_special_tokens=True), task.stop_strings)

    def pred_of(answer: list[int]) -> Any:
        return task.score(Sample(id="mining", messages=[], reference="0"), text_of(answer)).get("pred")

    def same(answer: list[int], reference: Any) -> bool:
        # The task's own scorer, with the TARGET's answer as the reference (the released code
        # compares the alternative with target_ref_ans, not with the gold answer).
        return bool(task.score(Sample(id="mining", messages=[], reference=reference), text_of(answer))["correct"])

    n_new = 0
    for idx in order:
        sample = samples[int(idx)]
        if sample.id in done:
            continue
        if args.max_problems is not None and len(store.records) >= args.max_problems:
            break
        if time.monotonic() > deadline:
            break
        t0 = time.monotonic()
        _, prompt = encode_prompt(tok, sample, chat, chat_template_kwargs(cfg))
        P = len(prompt)
        # Where the problem's time goes: the target's answer, the draft passes, each continuation.
        timing: dict[str, Any] = {"prompt_tokens": P, "generations": [], "draft_passes": 0, "draft_s": 0.0}
        kept = PrefixCache() if lookup is not None else None  # the target's cache, across this problem's generations
        if lookup is not None:
            lookup.forget()
        argmax = IncrementalArgmax(draft, prompt)

        def run_target(prefix: list[int], budget: int, base: list[int] | None = None) -> list[int]:
            if budget <= 0:
                return []
            tail = prefix[-8:]  # a stop string may straddle the prefix/continuation boundary

            def stop_fn(new_ids: list[int]) -> bool:
                text = tok.decode(tail + new_ids, skip_special_tokens=True)
                return any(s in text for s in task.stop_strings)

            if lookup is not None:
                lookup.set_reference(P, base or [])
                before = lookup.info()
            gen = generate(
                target, torch.tensor(prompt + prefix, dtype=torch.long), verifier=SPD(),
                drafter={"lookup": lookup, "spd": drafter, "ar": None}[args.continue_with], max_new_tokens=budget,
                eos_token_ids=eos, stop_fn=stop_fn if task.stop_strings else None, prefix_cache=kept,
            )
            row = {"at": len(prefix), "tokens": len(gen.new_tokens), "steps": len(gen.emitted),
                   "prefill_s": round(gen.prefill_s, 3), "decode_s": round(gen.decode_s, 3)}
            if lookup is not None:
                row["reused"] = kept.reused
                row.update({k: v - before[k] for k, v in lookup.info().items()})
            timing["generations"].append(row)
            return gen.new_tokens

        def draft_argmax(answer: list[int]) -> list[int]:
            t = time.perf_counter()
            out = argmax(answer)  # re-reads only what changed since the last answer
            timing["draft_passes"] += 1
            timing["draft_s"] = round(timing["draft_s"] + time.perf_counter() - t, 3)
            timing["draft_tokens_read"] = argmax.fed
            return out

        response = run_target([], max_new)
        if not answer_valid(pred_of(response)):
            rec = {"id": sample.id, "skipped": "target answer has no final number", "target_response": response,
                   "mismatches": [], "seconds": round(time.monotonic() - t0, 3)}
            store.append(rec, np.zeros((0, store.hidden), dtype=np.float32))
            n_new += 1
            log(f"{sample.id}: skipped (no final number in the target's answer)")
            continue
        timing["answer_s"] = round(time.monotonic() - t0, 3)
        problem = mine_problem(
            response, draft_argmax=draft_argmax, continue_greedy=run_target, answer_of=pred_of, same_answer=same,
            max_new_tokens=max_new, eos_ids=eos, out_of_time=lambda: time.monotonic() > deadline,
            max_mismatches=args.max_mismatches,
        )
        if problem.stop == "deadline":
            log(f"{sample.id}: unfinished at the deadline ({len(problem.mismatches)} mismatches decided): dropped, redone next run")
            break
        t_feat = time.perf_counter()
        feats = features(target, prompt, problem, feature_rows, crop_to)
        timing["features_s"] = round(time.perf_counter() - t_feat, 3)
        store.append({**problem_record(sample.id, problem, time.monotonic() - t0), "continue_with": args.continue_with,
                      "timing": timing}, feats)
        n_new += 1
        n_imp = sum(m.important for m in problem.mismatches)
        log(f"{sample.id}: {len(problem.mismatches)} mismatches ({n_imp} important), answer {problem.target_answer!r}, "
            f"{len(response)} tokens, {time.monotonic() - t0:.0f} s")
    total = sum(len(r["mismatches"]) for r in store.records)
    imp = sum(m["important"] for r in store.records for m in r["mismatches"])
    log(f"this run: {n_new} problems in {(time.monotonic() - t_start) / 60:.1f} min; mined set: {len(store.records)} problems, "
        f"{total} mismatches ({imp} important) in {args.out}")
    return 0


@torch.inference_mode()
def features(target: Any, prompt: list[int], problem: Any, feature_rows: Any, crop_to: Any) -> np.ndarray:
    """[n_mismatches, hidden] float32: the target's final hidden state (after the final norm, what
    the loop's TargetScores.hidden holds) at each mismatch, on the sequence with the draft token.
    One cached forward over the final answer gives every unimportant mismatch's row; each
    important one crops that cache to its prefix and feeds its draft token (descending order, so
    every crop shortens the cache)."""
    from transformers import DynamicCache

    P = len(prompt)
    rows = feature_rows(problem)
    out = np.zeros((len(rows), int(target.config.hidden_size)), dtype=np.float32)
    if not rows:
        return out
    cache = DynamicCache(config=target.config)
    full = torch.tensor([prompt + problem.final_response], dtype=torch.long, device=target.device)
    hs = target(full, cache=cache, use_cache=True, output_hidden_states=True).hidden_states[-1][0]  # [T, H]
    important = []
    for i, (seq, pos) in enumerate(rows):
        if seq is problem.final_response:
            out[i] = hs[P + pos].float().cpu().numpy()
        else:
            important.append((pos, i, seq[pos]))
    for pos, i, tok in sorted(important, reverse=True):
        crop_to(cache, P + pos)
        h = target(torch.tensor([[tok]], device=target.device), cache=cache, use_cache=True, output_hidden_states=True).hidden_states[-1]
        out[i] = h[0, -1].float().cpu().numpy()
    return out


if __name__ == "__main__":
    sys.exit(main())
