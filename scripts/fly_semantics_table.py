#!/usr/bin/env python
"""Where vLLM's FLy (method.mode=vllm) and the official FLy (mode=code, the released rule;
mode=paper, Eq. 5) decide differently, on random logits, greedy (T = 0).

Each trial is one verification step: K + 1 random target rows whose sharpness varies (so the
top-3 entropy spans both sides of theta) and a draft that copies the target's argmax with
probability `match` and otherwise proposes one of the target's runners-up. Every mode decides
the same step (verifiers/fly.py: fly_decide); a step differs when (accepted, next token) differ.
Each differing step between code and vllm is put down to one cause, tested in this order:
  theta_switch_off  code mode with theta_switch_off=false agrees with vllm (theta <= 0.01:
                    the released code drops the entropy gate, vLLM keeps it);
  window            otherwise: the released pattern [F, T * (W-1)] defers a mismatch followed
                    by W-1 matches, vLLM needs W matches after it (a_{j+1..j+W}, j + W < K).
Prints a markdown table (the one in docs/fly_semantics.md) and, with --json, the raw counts.

  .venv/bin/python scripts/fly_semantics_table.py --trials 4000 --seed 0

Lab script, kept in scripts/ (not installed with the package): it regenerates the table of
docs/fly_semantics.md (docs/algorithms.md cites it); documentation's evidence, not a tool a run
needs.
"""

from __future__ import annotations

import argparse
import itertools
import json

import torch

from loosespec_bench.verifiers.fly import FLyParams, fly_decide

VOCAB = 64


def random_step(K: int, match: float, g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """(draft [K], target logits [K+1, VOCAB])."""
    scale = torch.empty(K + 1, 1).uniform_(0.5, 6.0, generator=g)  # flat to sharp rows
    logits = torch.randn(K + 1, VOCAB, generator=g) * scale
    top = logits[:K].topk(3, dim=-1).indices  # [K, 3]
    copy = torch.rand(K, generator=g) < match
    runner_up = top[torch.arange(K), torch.randint(1, 3, (K,), generator=g)]
    return torch.where(copy, top[:, 0], runner_up), logits


def decide(draft, logits, mode: str, theta: float, window: int, switch_off: bool = True) -> tuple[int, int]:
    d = fly_decide(draft, logits, FLyParams(theta=theta, window=window, mode=mode, theta_switch_off=switch_off))
    return d.n, d.next_token


def main(argv: list[str] | None = None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=4000, help="steps per cell")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", action="store_true", help="print the rows as JSON instead of markdown")
    args = ap.parse_args(argv)
    rows = []
    for K, W, theta, match in itertools.product((8, 15, 25), (4, 6), (0.005, 0.3, 0.6), (0.6, 0.85)):
        if K <= W:
            continue
        g = torch.Generator().manual_seed(args.seed)
        diff_code = diff_paper = by_switch = by_window = 0
        tau = {"code": 0, "vllm": 0, "paper": 0}
        for _ in range(args.trials):
            draft, logits = random_step(K, match, g)
            v = decide(draft, logits, "vllm", theta, W)
            c = decide(draft, logits, "code", theta, W)
            p = decide(draft, logits, "paper", theta, W)
            tau["vllm"] += v[0] + 1
            tau["code"] += c[0] + 1
            tau["paper"] += p[0] + 1
            if c != v:
                diff_code += 1
                if decide(draft, logits, "code", theta, W, switch_off=False) == v:
                    by_switch += 1
                else:
                    by_window += 1
            diff_paper += p != v
        n = args.trials
        rows.append(dict(K=K, W=W, theta=theta, match=match, trials=n, code_vs_vllm=diff_code / n,
                         cause_theta_switch_off=by_switch / n, cause_window=by_window / n,
                         paper_vs_vllm=diff_paper / n, tau_code=tau["code"] / n, tau_vllm=tau["vllm"] / n,
                         tau_paper=tau["paper"] / n))
    if args.json:
        print(json.dumps(rows, indent=1))
        return rows
    print("| K | W | θ | draft = argmax | code ≠ vllm | of which θ switch-off | of which window | paper ≠ vllm "
          "| tokens/step code | vllm | paper |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['K']} | {r['W']} | {r['theta']:g} | {r['match']:.2f} | {r['code_vs_vllm']:.1%} "
              f"| {r['cause_theta_switch_off']:.1%} | {r['cause_window']:.1%} | {r['paper_vs_vllm']:.1%} "
              f"| {r['tau_code']:.2f} | {r['tau_vllm']:.2f} | {r['tau_paper']:.2f} |")
    return rows


if __name__ == "__main__":
    main()
