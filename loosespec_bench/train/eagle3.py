"""Train a small EAGLE-3 head for a target on CPU, bounded in time and resumable.

    python -m loosespec_bench.train.eagle3 --data-dir /work/shared/datasets --max-minutes 60

Pipeline (each phase resumes from what is on disk in --work):
  1. corpus   training texts in the target's chat format, from the local data sets:
              GSM8K test answers (minus every question that MGSM uses, so that mgsm runs are not
              contaminated), HumanEval canonical solutions of the second half of the tasks (ids
              >= --humaneval-from; the harness's dataset.limit takes the first ones), MT-bench
              GPT-4 reference answers. These are REFERENCE answers, not text the target
              generated: EAGLE trains on self-distilled text (the target's own answers). On the
              shared 2-core CPU the target generates ~2.5 tokens/s even batched (measured: batch
              16 and 32, bf16, 24 new tokens), so self-generation would give a few thousand
              tokens per half hour. The labels are still the target's: at every position the loss
              is the cross-entropy to the target's own next-token distribution (restricted to the
              draft vocabulary), computed from its final hidden state, so only the context text
              is off-distribution.
  2. features one target forward per sample (bf16, output_hidden_states) gives the three layers'
              features (2, L//2, L-3), the final hidden state and the target's argmax: shards of
              --shard-size samples in <work>/features/; the phase stops at --extract-fraction of
              the time budget and the next run continues it.
  3. vocab    the draft vocabulary: the --draft-vocab most frequent tokens of the corpus text and
              of the target's top-1 predictions (the official training counts token
              frequencies of its data), plus the chat special tokens; fixed at the first training.
  4. train    EAGLE-3's training-time test: --ttt-steps chain depths unrolled per sequence
              (Eagle3Head.unroll: depth s >= 1 feeds the head's own hidden states, as at
              inference), loss weights 0.8**s, AdamW, warmup + cosine, autocast bf16. The
              optimizer state, step and elapsed time go to <work>/train_state.pt; the head is
              exported in the official format to --out at every save.

Deviations from the official recipe, chosen for the CPU budget: a smaller MLP
(--intermediate), a smaller draft vocabulary, a warm start (lm_head = the target's LM-head rows of
the draft vocabulary, norm = the target's final norm, fc = identity on the high layer's block),
rope positions j + s at depth s (the same positions chain drafting uses), and reference text.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import os
import random
import re
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from loosespec_bench.drafters.eagle.checkpoint import build_head, save_head
from loosespec_bench.drafters.eagle.eagle3 import Eagle3Head, head_config_for, vocab_maps
from loosespec_bench.models import load_model

DEFAULT_TARGET = "embedded:qwen2.5-coder-1.5b-instruct"


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def default_out(target: str) -> Path:
    base = os.environ.get("LOOSESPEC_EAGLE3_DIR") or Path.home() / ".cache" / "loosespec_bench" / "eagle3"
    return Path(base).expanduser() / target.split(":", 1)[-1].replace("/", "--")


# ---- 1. corpus ---------------------------------------------------------------------------
def _gsm8k(data_dir: Path) -> list[list[dict[str, str]]]:
    from loosespec_bench.tasks.mgsm import NATIVE_COT

    q_cue, cot_cue, phrase = NATIVE_COT["en"]
    mgsm = {row.split("\t")[0].strip() for row in (data_dir / "mgsm" / "mgsm_en.tsv").read_text().splitlines() if row}
    out = []
    for line in (data_dir / "gsm8k" / "test.jsonl").read_text().splitlines():
        r = json.loads(line)
        if r["question"].strip() in mgsm:
            continue  # MGSM's 250 questions are GSM8K test questions: keep them unseen
        body, _, final = r["answer"].partition("####")
        body = re.sub(r"<<[^>]*>>", "", body).strip()  # drop the calculator annotations
        answer = f"{body}\n{phrase} {final.strip()}."
        out.append([{"role": "user", "content": f"{q_cue} {r['question']}\n{cot_cue}"}, {"role": "assistant", "content": answer}])
    return out


def _humaneval(data_dir: Path, start: int) -> list[list[dict[str, str]]]:
    from loosespec_bench.tasks.humaneval import ASSISTANT_PREFIX, USER_TEMPLATE

    rows = [json.loads(l) for l in gzip.open(data_dir / "humaneval" / "HumanEval.jsonl.gz", "rt")]
    return [
        [
            {"role": "user", "content": USER_TEMPLATE.format(prompt=r["prompt"])},
            {"role": "assistant", "content": ASSISTANT_PREFIX.format(prompt=r["prompt"]) + r["canonical_solution"] + "```"},
        ]
        for r in rows[start:]
    ]


def _mt_bench(data_dir: Path) -> list[list[dict[str, str]]]:
    qs = {json.loads(l)["question_id"]: json.loads(l) for l in (data_dir / "mt_bench" / "question.jsonl").read_text().splitlines()}
    out = []
    for line in (data_dir / "mt_bench" / "reference_answer" / "gpt-4.jsonl").read_text().splitlines():
        r = json.loads(line)
        q = qs.get(r["question_id"])
        if q:
            out.append([{"role": "user", "content": q["turns"][0]}, {"role": "assistant", "content": r["choices"][0]["turns"][0]}])
    return out


def build_corpus(tokenizer, data_dir: Path, *, humaneval_from: int, max_len: int, seed: int) -> list[dict]:
    """[{ids: [T] token ids, start: first response position}] in a fixed shuffled order."""
    convs = _gsm8k(data_dir) + _humaneval(data_dir, humaneval_from) + _mt_bench(data_dir)
    random.Random(seed).shuffle(convs)  # a time-capped extraction then covers every source
    out = []
    for conv in convs:
        prompt = tokenizer.apply_chat_template(conv[:1], add_generation_prompt=True, tokenize=False)
        full = tokenizer.apply_chat_template(conv, tokenize=False)
        p_ids = tokenizer(prompt, add_special_tokens=False).input_ids
        ids = tokenizer(full, add_special_tokens=False).input_ids
        if ids[: len(p_ids)] != p_ids:
            continue  # the template re-tokenised the boundary differently: skip rather than mislabel
        if len(p_ids) > max_len - 32:
            continue  # too long a prompt for --max-len: too little response left to learn from
        out.append({"ids": ids[:max_len], "start": len(p_ids)})
    return out


# ---- 2. vocabulary -----------------------------------------------------------------------
def draft_vocabulary(corpus: list[dict], data: list[dict], size: int, vocab_size: int, always: list[int]) -> torch.Tensor:
    """The `size` most frequent tokens of the corpus text plus the target's own top-1 predictions
    on the extracted part (the reference text lacks the target's style tokens: markdown, LaTeX)."""
    counts = torch.zeros(vocab_size, dtype=torch.long)
    for s in corpus:
        counts += torch.bincount(torch.tensor(s["ids"]), minlength=vocab_size)
    for s in data:
        counts += torch.bincount(s["argmax"].long(), minlength=vocab_size)
    counts[always] = counts.max() + 1
    top = torch.topk(counts, size).indices
    return top.sort().values  # sorted target ids: d2t offsets are then >= 0, as in the official maps


# ---- 3. features -------------------------------------------------------------------------
@torch.inference_mode()
def extract(target, corpus: list[dict], taps: tuple[int, ...], folder: Path, shard_size: int, deadline: float) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    n_shards = math.ceil(len(corpus) / shard_size)
    for i in range(n_shards):
        path = folder / f"shard_{i:05d}.pt"
        if path.exists():
            continue
        if time.monotonic() > deadline:
            log(f"features: time budget reached at shard {i}/{n_shards}; rerun to continue")
            return
        t0 = time.monotonic()
        samples = []
        for s in corpus[i * shard_size : (i + 1) * shard_size]:
            ids = torch.tensor(s["ids"])
            out = target(ids[None], output_hidden_states=True)
            hs = out.hidden_states
            samples.append(
                {
                    "ids": ids.to(torch.int32),
                    "start": s["start"],
                    "feats": torch.cat([hs[j][0] for j in taps], dim=-1).to(torch.bfloat16).clone(),  # [T, 3H]
                    "final": hs[-1][0].to(torch.bfloat16).clone(),  # [T, H] after the final norm
                    "argmax": out.logits[0].argmax(-1).to(torch.int32),  # [T] target's next token
                }
            )
        tmp = path.with_suffix(".partial")
        torch.save(samples, tmp)
        os.replace(tmp, path)
        n_tok = sum(len(x["ids"]) for x in samples)
        log(f"features: shard {i + 1}/{n_shards}, {n_tok} tokens in {time.monotonic() - t0:.0f} s ({n_tok / (time.monotonic() - t0):.1f} tok/s)")


def load_shards(folder: Path) -> list[dict]:
    out = []
    for p in sorted(folder.glob("shard_*.pt")):
        out.extend(torch.load(p, weights_only=True))
    return out


# ---- 4. training -------------------------------------------------------------------------
def warm_start(head: Eagle3Head, target, draft_ids: torch.Tensor) -> None:
    with torch.no_grad():
        head.lm_head.weight.copy_(target.get_output_embeddings().weight[draft_ids].float())
        head.norm.weight.copy_(target.model.norm.weight.float())
        h = head.fc.weight.shape[0]
        head.fc.weight.zero_()
        head.fc.weight[:, 2 * h : 3 * h] += torch.eye(h)  # pass the high layer's feature through
        head.midlayer.self_attn.o_proj.weight.mul_(0.1)
        head.midlayer.mlp.down_proj.weight.mul_(0.1)


def sample_loss(head: Eagle3Head, s: dict, w_draft: torch.Tensor, in_draft: torch.Tensor, steps: int) -> tuple[torch.Tensor, list[float], list[int]]:
    """Weighted TTT loss of one sequence; per-depth (correct, counted) top-1 agreement."""
    ids = s["ids"].long()
    t = ids.numel()
    n = t - 1  # entries j = 0..T-2: feature j with token j+1
    pad = torch.zeros(steps, dtype=torch.long)
    logits = head.unroll(s["feats"][None, :n].float(), torch.cat([ids[1:], pad])[None], steps)
    total = torch.zeros(())
    correct, counted = [], []
    j = torch.arange(n)
    for d, lg in enumerate(logits):
        p = j + d + 1  # target position whose distribution labels depth d at base j
        valid = (p <= t - 1) & (p >= s["start"] - 1)
        pc = p.clamp(max=t - 1)
        valid &= in_draft[s["argmax"][pc].long()]  # the official mask: target's top-1 is draftable
        if not valid.any():
            correct.append(0.0), counted.append(0)
            continue
        with torch.no_grad():
            tgt = torch.softmax(s["final"][pc[valid]].float() @ w_draft.T, dim=-1)  # [m, Vd]
        logp = F.log_softmax(lg[0][valid].float(), dim=-1)
        total = total + (0.8**d) * -(tgt * logp).sum(-1).mean()
        with torch.no_grad():
            correct.append(float((lg[0][valid].argmax(-1) == tgt.argmax(-1)).sum()))
            counted.append(int(valid.sum()))
    return total, correct, counted


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m loosespec_bench.train.eagle3", description=__doc__.splitlines()[0])
    ap.add_argument("--target", default=DEFAULT_TARGET)
    ap.add_argument("--data-dir", default=os.environ.get("LOOSESPEC_DATA_DIR"), required=os.environ.get("LOOSESPEC_DATA_DIR") is None)
    ap.add_argument("--out", default=None, help="official-format head folder (default: ~/.cache/loosespec_bench/eagle3/<target>)")
    ap.add_argument("--work", default=None, help="corpus, features and optimizer state (default: <out>/work)")
    ap.add_argument("--max-minutes", type=float, default=60.0, help="wall-clock budget of this run, all phases")
    ap.add_argument("--extract-fraction", type=float, default=0.4, help="share of the budget feature extraction may use")
    ap.add_argument("--max-samples", type=int, default=None, help="cap on corpus samples (default: all)")
    ap.add_argument("--max-len", type=int, default=384)
    ap.add_argument("--humaneval-from", type=int, default=82)
    ap.add_argument("--draft-vocab", type=int, default=8192)
    ap.add_argument("--intermediate", type=int, default=2048)
    ap.add_argument("--ttt-steps", type=int, default=3)
    ap.add_argument("--lr", type=float, default=5e-4)
    ap.add_argument("--epochs", type=float, default=20.0, help="upper bound; the time budget usually ends training first")
    ap.add_argument("--accum", type=int, default=4, help="sequences per optimizer step")
    ap.add_argument("--heldout", type=float, default=0.1, help="share of samples kept for evaluation")
    ap.add_argument("--shard-size", type=int, default=16)
    ap.add_argument("--save-minutes", type=float, default=3.0)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)

    t_start = time.monotonic()
    deadline = t_start + 60 * args.max_minutes
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    out = Path(args.out).expanduser() if args.out else default_out(args.target)
    work = Path(args.work).expanduser() if args.work else out / "work"
    work.mkdir(parents=True, exist_ok=True)

    log(f"loading {args.target}")
    lm = load_model(args.target, dtype="bfloat16")
    target, tok = lm.model, lm.tokenizer
    target.requires_grad_(False)
    vocab_size = target.get_input_embeddings().num_embeddings

    corpus_file = work / "corpus.json"
    if corpus_file.exists():
        corpus = json.loads(corpus_file.read_text())
    else:
        corpus = build_corpus(tok, Path(args.data_dir), humaneval_from=args.humaneval_from, max_len=args.max_len, seed=args.seed)
        corpus_file.write_text(json.dumps(corpus))
    if args.max_samples:
        corpus = corpus[: args.max_samples]
    log(f"corpus: {len(corpus)} samples, {sum(len(s['ids']) for s in corpus)} tokens "
        f"({sum(len(s['ids']) - s['start'] for s in corpus)} response tokens)")

    taps = tuple(head_config_for(target, draft_vocab_size=1)["eagle_aux_hidden_state_layer_ids"])
    extract(target, corpus, taps, work / "features", args.shard_size, t_start + 60 * args.max_minutes * args.extract_fraction)

    data = load_shards(work / "features")
    if not data:
        log("no features yet: give the run more time")
        return 1
    vocab_file = work / "draft_vocab.pt"
    if vocab_file.exists():
        draft_ids = torch.load(vocab_file, weights_only=True)
    else:  # fixed at the first training run: resumed runs keep the same head shape
        special = [i for i in {tok.eos_token_id, *tok.convert_tokens_to_ids(["<|im_start|>", "<|im_end|>"])} if isinstance(i, int) and i >= 0]
        draft_ids = draft_vocabulary(corpus, data, args.draft_vocab, vocab_size, special)
        torch.save(draft_ids, vocab_file)
    d2t, t2d = vocab_maps(draft_ids, vocab_size)
    resp = torch.tensor([i for s in corpus for i in s["ids"][s["start"]:]], dtype=torch.long)
    top1 = torch.cat([s["argmax"][s["start"] - 1 : -1].long() for s in data])
    log(f"draft vocabulary: {draft_ids.numel()} tokens, covering {t2d[resp].float().mean():.2%} of the corpus's "
        f"response tokens and {t2d[top1].float().mean():.2%} of the target's top-1 predictions on them")
    cfg = head_config_for(target, draft_vocab_size=draft_ids.numel(), intermediate_size=args.intermediate)

    # Every stride-th corpus sample is held out (data[i] is corpus sample i: shards are written in
    # order), so a resumed run with more shards keeps the earlier held-out samples held out.
    stride = max(2, round(1 / args.heldout))
    train = [s for i, s in enumerate(data) if i % stride]
    heldout = [s for i, s in enumerate(data) if not i % stride]
    log(f"training on {len(train)} samples ({sum(len(s['ids']) for s in train)} tokens), "
        f"{len(heldout)} held out; head: hidden {cfg['hidden_size']}, MLP {cfg['intermediate_size']}, "
        f"draft vocab {cfg['draft_vocab_size']}, layers {taps}")

    head = build_head(cfg, None, target.get_input_embeddings())
    head.d2t.copy_(d2t), head.t2d.copy_(t2d)
    warm_start(head, target, draft_ids)
    head.float().train()
    w_draft = target.get_output_embeddings().weight[draft_ids].float()  # [Vd, H] target's LM head rows
    in_draft = t2d
    opt = torch.optim.AdamW(head.parameters(), lr=args.lr, betas=(0.9, 0.95), weight_decay=0.0)
    total_steps = max(1, int(args.epochs * len(train) / args.accum))
    warmup = min(50, total_steps // 10 + 1)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda i: min(1.0, (i + 1) / warmup) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, i / total_steps))))
    )
    state_file = work / "train_state.pt"
    step, seen, elapsed_before, history = 0, 0, 0.0, []
    if state_file.exists():
        st = torch.load(state_file, weights_only=False)
        head.load_state_dict(st["head"])
        opt.load_state_dict(st["opt"])
        sched.load_state_dict(st["sched"])
        step, seen, elapsed_before, history = st["step"], st["seen"], st["elapsed"], st["history"]
        log(f"resumed at optimizer step {step} ({seen} sequences, {elapsed_before / 60:.1f} min of training so far)")

    def evaluate() -> list[float]:
        head.eval()
        corr = [0.0] * args.ttt_steps
        cnt = [0] * args.ttt_steps
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
            for s in heldout:
                _, c, n = sample_loss(head, s, w_draft, in_draft, args.ttt_steps)
                corr = [a + b for a, b in zip(corr, c)]
                cnt = [a + b for a, b in zip(cnt, n)]
        head.train()
        return [c / max(n, 1) for c, n in zip(corr, cnt)]

    def save(tag: str) -> None:
        export = build_head(cfg, None, target.get_input_embeddings())
        export.load_state_dict(head.state_dict())
        save_head(export.to(torch.bfloat16), out)
        tmp = state_file.with_suffix(".partial")
        torch.save({"head": head.state_dict(), "opt": opt.state_dict(), "sched": sched.state_dict(), "step": step,
                    "seen": seen, "elapsed": elapsed_before + time.monotonic() - t_train, "history": history,
                    "args": vars(args)}, tmp)
        os.replace(tmp, state_file)
        (out / "training.json").write_text(json.dumps({"args": vars(args), "history": history, "config": cfg}, indent=1))
        log(f"saved ({tag}) -> {out}")

    acc0 = evaluate()
    log(f"held-out top-1 agreement with the target per depth before this run: {[f'{a:.3f}' for a in acc0]}")
    t_train = time.monotonic()
    last_save = t_train
    rng = random.Random(args.seed + step)
    order: list[int] = []
    run_loss, run_n = 0.0, 0
    while step < total_steps and time.monotonic() < deadline - 30:
        if not order:
            order = list(range(len(train)))
            rng.shuffle(order)
        s = train[order.pop()]
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss, _, _ = sample_loss(head, s, w_draft, in_draft, args.ttt_steps)
        (loss / args.accum).backward()
        run_loss, run_n, seen = run_loss + float(loss.detach()), run_n + 1, seen + 1
        if seen % args.accum == 0:
            torch.nn.utils.clip_grad_norm_(head.parameters(), 1.0)
            opt.step()
            sched.step()
            opt.zero_grad(set_to_none=True)
            step += 1
            if step % 10 == 0:
                minutes = (elapsed_before + time.monotonic() - t_train) / 60
                log(f"step {step}/{total_steps} epoch {seen / len(train):.2f} loss {run_loss / run_n:.3f} lr {sched.get_last_lr()[0]:.2e} ({minutes:.1f} min)")
                history.append({"step": step, "seen": seen, "loss": run_loss / run_n, "minutes": minutes})
                run_loss, run_n = 0.0, 0
        if time.monotonic() - last_save > 60 * args.save_minutes:
            save("periodic")
            last_save = time.monotonic()
    acc = evaluate()
    history.append({"step": step, "seen": seen, "heldout_top1_per_depth": acc})
    log(f"held-out top-1 agreement with the target per depth: {[f'{a:.3f}' for a in acc]}")
    save("final")
    log(f"done in {(time.monotonic() - t_start) / 60:.1f} min")
    return 0


if __name__ == "__main__":
    sys.exit(main())
