"""The command line's flags that are not Hydra's, said as what this harness does instead: lm-eval's
(`--tasks gsm8k --limit 10 --output_path x`, in either spelling: `--output-path`), `--key value`
for a config key or group, and other tools' switches (vllm bench sweep's `--resume`, `--dry-run`).
One ConfigError line with the whole command's translation. Split from advice.py, whose helpers
(did-you-mean, the config's search folders, its composer) it reads.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from omegaconf import OmegaConf

from ..errors import ConfigError
from .advice import _composer, _dirs, _near, _top_level_keys
from .config import ALL_GROUPS, group_choices


def _lm_eval_task(value: str, dirs: Sequence[Any]) -> str:
    datasets = group_choices("dataset", dirs)
    tasks = [t for t in value.split(",") if t]
    if all(t in datasets for t in tasks):
        return ("-m " if len(tasks) > 1 else "") + f"dataset={','.join(tasks)}"
    # Not one of ours: lm-eval's own task through the lm_eval data set.
    return ("-m " if len(tasks) > 1 else "") + f"dataset=lm_eval dataset.task={','.join(tasks)}"


def _pair_for_model_args(value: str, dirs: Sequence[Any]) -> str:
    """`--model_args pretrained=X,dtype=Y,device=Z` as pair overrides: the pair whose target is
    X when one is declared, else pair.target.path=X."""
    args = dict(part.split("=", 1) for part in value.split(",") if "=" in part)
    out = []
    pretrained = args.get("pretrained")
    if pretrained:
        pairs = []
        for name in group_choices("pair", dirs):
            path = next((d / "pair" / f"{name}.yaml" for d in dirs if (d / "pair" / f"{name}.yaml").is_file()), None)
            node = OmegaConf.load(path) if path is not None else {}
            if str(OmegaConf.select(node, "target.path", default="")) == pretrained:
                pairs.append(name)
        out.append(f"pair={pairs[0]}" if pairs else f"pair.target.path={pretrained} pair.draft.path=DRAFT")
    if "dtype" in args:
        out.append(f"pair.dtype={args['dtype']}")
    if "device" in args:
        out.append(f"pair.device={args['device']}")
    return " ".join(out) or "pair=NAME (python -m loosespec_bench --help lists the pairs)"


def _engine_for_model(value: str, dirs: Sequence[Any]) -> str:
    engines = group_choices("engine", dirs)
    return f"engine={value}" if value in engines else f"engine=NAME (one of {', '.join(engines)})"


def _kv(value: str, prefix: str) -> str:
    return " ".join(f"{prefix}.{part}" for part in value.split(",") if "=" in part) or f"{prefix}.KEY=VALUE"


# lm-eval's flags (lm_eval --help), each with the override that does the same here; None: the
# flag has no equivalent (said so, rather than silently dropped).
LM_EVAL_FLAGS: dict[str, Callable[[str, Sequence[Any]], str] | str | None] = {
    "--tasks": _lm_eval_task,
    "--limit": lambda v, d: f"dataset.limit={v}",
    "--output_path": lambda v, d: f"paths.results_dir={v}",
    "--model_args": _pair_for_model_args,
    "--model": _engine_for_model,
    "--num_fewshot": lambda v, d: f"dataset.num_fewshot={v}",
    "--device": lambda v, d: f"pair.device={v}",
    "--seed": lambda v, d: f"seed={v}",
    "--gen_kwargs": lambda v, d: _kv(v, "generation"),
    "--wandb_args": lambda v, d: "logger=wandb " + _kv(v, "logger"),
    "--include_path": lambda v, d: f"dataset=lm_eval dataset.include_path={v}",
    "--system_instruction": lambda v, d: f"dataset.system_prompt={v!r}",
    "--apply_chat_template": "chat_template=true",
    "--fewshot_as_multiturn": "dataset.fewshot_as_multiturn=true",
    "--log_samples": "",  # samples.jsonl is always written
    "--batch_size": None,
}
# Flags of lm-eval that take no value.
LM_EVAL_SWITCHES = ("--apply_chat_template", "--fewshot_as_multiturn", "--log_samples")
# Switches of other tools (vllm bench sweep's --dry-run and --resume) that this harness answers
# with what it does instead: resume_advice, dry_run_advice. __main__ runs `--dry-run` as
# `validate`; the advice is for a caller that reaches check_flags with it.
OTHER_SWITCHES = ("--resume", "--dry_run")


def lookup_flag(flag: str) -> str:
    """A flag as lm-eval spells it: `--output-path` and `--output_path` are one flag (lm-eval
    uses underscores, most Unix tools hyphens; a user types either)."""
    return "--" + flag[2:].replace("-", "_") if flag.startswith("--") else flag


def run_folder_of(overrides: Sequence[str], config_name: str = "config") -> str | None:
    """The run folder a one-run command line writes (paths.results_dir/experiment_name/run id,
    as store/run_folder.run_dir makes it), or None where it does not compose to one run."""
    from omegaconf import open_dict

    from .run_settings import run_path

    try:
        with _composer(config_name) as compose:
            cfg = compose(list(overrides))
        with open_dict(cfg):
            del cfg["hydra"]  # as a run's config: Hydra's own node resolves only inside a job
        return str(run_path(cfg))
    except Exception:
        return None  # a sweep or a bad command: the advice names no folder


def resume_advice(overrides: Sequence[str], config_name: str = "config") -> str:
    """`--resume`: resuming is what a rerun of the same command does (docs/reports.md); a fresh
    run is a new folder."""
    command = "python -m loosespec_bench " + " ".join(overrides) if overrides else "python -m loosespec_bench"
    folder = None if any(o in ("-m", "--multirun") for o in overrides) else run_folder_of(overrides, config_name)
    where = f" ({folder})" if folder else " (results/<experiment_name>/<run id>)"
    return (f"--resume: resuming is automatic: rerun the same command without it ({command}) and it continues its run "
            f"folder{where}, keeping every finished sample; for a fresh run delete that folder, or give another "
            "experiment_name=NAME")


def dry_run_advice(overrides: Sequence[str]) -> str:
    rest = " ".join(overrides)
    return (f"--dry-run: python -m loosespec_bench validate {rest}".rstrip()
            + " composes every point and runs the pre-check without running anything (the plan of a paper "
            "experiment, its jobs and cost: python -m loosespec_bench.plan -e NAME)")


def hydra_flags() -> set[str]:
    """Every option string Hydra's own parser knows (-m, --cfg, -cn ...)."""
    from hydra._internal.utils import get_args_parser

    return set(get_args_parser()._option_string_actions)


def check_flags(argv: Sequence[str]) -> None:
    """Flags Hydra does not know, said as the overrides that do the same: lm-eval's
    (`--tasks gsm8k --limit 10` -> `dataset=gsm8k dataset.limit=10`) and `--key value` for a
    config key or group (`--method fly` -> `method=fly`). ConfigError with the whole command's
    translation, so that one line is enough to fix it."""
    known = hydra_flags()
    dirs = _dirs(argv)
    top = set(_top_level_keys()) | set(ALL_GROUPS)
    said: list[str] = []
    equivalent: list[str] = []
    missing: list[str] = []
    i = 0
    args = list(argv)
    while i < len(args):
        arg = args[i]
        flag, eq, inline = arg.partition("=")
        if not arg.startswith("-") or flag in known:
            i += 1
            continue
        if not arg.startswith("--"):  # -M, -c: a short flag Hydra does not have
            same = [k for k in sorted(known) if k.lower() == flag.lower()] or _near(flag, sorted(known))
            hint = f" (did you mean {same[0]}?)" if same else ""
            raise ConfigError(f"{flag} is not an option{hint}; settings are key=value overrides "
                              "(python -m loosespec_bench --help lists them)")
        lm = lookup_flag(flag)
        if lm in OTHER_SWITCHES:
            overrides = [a for a in args if not a.startswith("-") or a in ("-m", "--multirun")]
            raise ConfigError(resume_advice(overrides) if lm == "--resume" else dry_run_advice(overrides))
        takes_value = lm not in LM_EVAL_SWITCHES
        value = inline if eq else (args[i + 1] if takes_value and i + 1 < len(args) and not args[i + 1].startswith("-") else None)
        consumed = 1 + (1 if takes_value and not eq and value is not None else 0)
        name = flag[2:].replace("-", "_")
        said.append(" ".join(args[i : i + consumed]))
        if lm in LM_EVAL_FLAGS:
            rule = LM_EVAL_FLAGS[lm]
            if rule is None:
                missing.append(f"{flag} has no equivalent: samples run one at a time, speculative decoding is timed per sequence")
            elif isinstance(rule, str):
                if rule:
                    equivalent.append(rule)
            elif value is None:
                missing.append(f"{flag} needs a value")
            else:
                equivalent.append(rule(value, dirs))
        elif name in top or name.split(".")[0] in top:
            equivalent.append(f"{name}={value}" if value is not None else f"{name}=VALUE")
        else:
            near = _near(flag, sorted(known), n=1)
            hint = f" (did you mean {near[0]}?)" if near else ""
            raise ConfigError(f"{flag} is not an option{hint}; settings are key=value overrides "
                              "(python -m loosespec_bench --help lists them)")
        i += consumed
    if not said:
        return
    rest = [a for a in args if not a.startswith("-")]
    # values consumed by the flags are not overrides
    for s in said:
        for part in s.split(" ")[1:]:
            if part in rest:
                rest.remove(part)
    parts = [*rest, *equivalent]
    command = "python -m loosespec_bench " + " ".join(parts) if parts else ""
    lm_eval = any(lookup_flag(s.split(" ")[0].split("=")[0]) in LM_EVAL_FLAGS for s in said)
    text = f"{' '.join(said)}: {'lm-eval style flags' if lm_eval else 'not flags'}; this harness takes key=value overrides"
    if command:
        text += f": {command}"
    if missing:
        text += "; " + "; ".join(missing)
    raise ConfigError(text)


__all__ = ["LM_EVAL_FLAGS", "LM_EVAL_SWITCHES", "OTHER_SWITCHES", "check_flags", "dry_run_advice", "hydra_flags", "lookup_flag",
           "resume_advice", "run_folder_of"]
