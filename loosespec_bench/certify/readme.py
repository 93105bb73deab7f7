"""The committed certification's README, written from what is on disk.

    python -m loosespec_bench.certify.readme [-e EXPERIMENT ...] [--deltas 5,2] [--out FILE] [-- OVERRIDE ...]

For each ladder (every conf/experiment/certify_*.yaml unless -e names some) and margin, the
certification the command `python -m loosespec_bench.certify -e LADDER --delta D` (with the same
options and overrides) writes when it finishes, certification_<tag>.json, is read through the
gate. A finished one gives its row: the loosest certified setting, its bound, its held-out loss,
tau, the predicted speedup (the calibration's error inside the interval), correct answers per CPU
hour beside the target alone's and SPD's, n, pair, hardware, dtype. A ladder with no finished
certification gets the planner's cost and the progress on disk (problems with records per
setting, their measured time per problem), and says plainly that nothing is certified: an
unfinished run is no evidence either way.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any, Sequence

from ..errors import ConfigError

DELTAS = (5.0, 2.0)  # the margins issue 68 asks of the committed certification, accuracy points
PREFIX = "certify_"  # the ladders: conf/experiment/certify_*.yaml


def ladders() -> list[str]:
    from ..settings.config import group_choices

    return [e for e in group_choices("experiment") if e.startswith(PREFIX)]


def _request(experiment: str, delta: float, opts: argparse.Namespace, overrides: list[str]) -> Any:
    """The Request `certify -e experiment --delta delta` builds with these options."""
    from .__main__ import build_request, parser

    argv = ["-e", experiment, "--delta", f"{delta:g}", "--holdout", str(opts.holdout), "--batch-size", str(opts.batch_size)]
    if opts.looks:
        argv += ["--looks", opts.looks]
    if opts.results:
        argv += ["--results", opts.results]
    args = parser().parse_args(argv)
    return build_request(args, overrides), args


def _measured(folder: Path) -> dict[str, Any]:
    """Problems with records in a run folder, and their generation's wall seconds per problem
    (the method's, and the target alone's where this run computed it; in a batched run a
    problem's share of its batch's wall time)."""
    from ..safe_files import check_regular
    from ..store.run_folder import RunFolder

    out: dict[str, Any] = {"problems": 0, "method_s": None, "target_alone_s": None, "target_alone_n": 0}
    if not check_regular(folder / RunFolder.SAMPLES):  # a link or a FIFO: one ConfigError
        return out
    recs = RunFolder(folder, create=False).records()
    m = [float((r.get("metrics") or {}).get("total_s") or 0.0) for r in recs]
    here = [r for r in recs if (r.get("baseline_source") or {}).get("origin") == "computed here"]
    b = [float(((r.get("baseline") or {}).get("metrics") or {}).get("total_s") or 0.0) for r in here]
    out.update(problems=len(recs), method_s=sum(m) / len(m) if m else None,
               target_alone_s=sum(b) / len(b) if b else None, target_alone_n=len(b))
    return out


def ladder_state(experiment: str, delta: float, opts: argparse.Namespace, overrides: list[str]) -> dict[str, Any]:
    """One ladder at one margin: its finished certification (read through the gate), else the
    planner's cost and the progress on disk."""
    from ..safe_files import check_regular, load_json_declaration
    from ..store.run_folder import run_dir
    from ..store.status import point_status
    from .ladder import compose, plan_cost, plan_request
    from .procedure import tag

    req, args = _request(experiment, delta, opts, overrides)
    cfgs, _ = plan_request(req, auto=args.looks is None, accuracy=0.5, discordance=args.discordance)
    root = Path(req.results_dir or os.environ.get("LOOSESPEC_RESULTS_DIR") or "results")
    path = root / req.experiment_name / f"certification_{tag(req)}.json"
    state: dict[str, Any] = {"experiment": experiment, "margin": delta, "key": req.key, "values": req.values,
                             "looks": list(req.design.looks), "split": req.split, "file": str(path),
                             "cost_h": plan_cost(req, cfgs)["total_h"], "batch_size": req.batch_size,
                             "pair": str(cfgs[0].pair.name), "dtype": str(cfgs[0].pair.get("dtype")),
                             "dataset": str(cfgs[0].dataset.name)}
    if check_regular(path):  # written only when a certification has finished
        state["result"] = load_json_declaration(path, "certification")
        return state
    progress = []
    for i in range(len(req.values)):
        folder = run_dir(compose(req.point_overrides(i, req.split, req.design.looks[-1])))
        st = point_status(folder)
        progress.append({"setting": req.setting_label(i), "state": st.state, **_measured(folder)})
    state["progress"] = progress
    return state


def _fig(x: Any, fmt: str = "{:.2f}") -> str:
    return "-" if x is None else fmt.format(x)


def _per_h(d: dict[str, Any] | None) -> str:
    return f"{d['per_cpu_h']:.1f} [{d['low']:.1f}, {d['high']:.1f}] (n = {d['n']})" if d else "-"


def certified_row(state: dict[str, Any]) -> str:
    """A finished certification's row."""
    res = state["result"]
    rows = res.get("settings") or []
    cond = res.get("conditions") or {}
    k = int(res.get("certified") or 0)
    spd = rows[0] if rows and rows[0].get("loose_accepts") == 0 else None  # the lossless end did SPD's work
    spd_fig = f"{_per_h((spd.get('per_cpu_hour') or {}).get('method'))} ({spd['setting']}, 0 loose accepts)" if spd else "-"
    rule = f"`{state['experiment']}` ({res.get('ladder_key')})"
    margin = f"{100 * res['design']['margin']:g} pts"
    hw = f"{cond.get('pair', state['pair'])}, {cond.get('dtype', state['dtype'])}, {cond.get('hardware') or '-'}, batch {cond.get('batch_size', '-')}"
    if not k:
        first = rows[0] if rows else {}
        return (f"| {rule} | {margin} | **none certified**: {first.get('setting', '-')} {first.get('outcome', '')} | "
                f"{_fig(100 * first['loss_upper'] if first.get('loss_upper') is not None else None)} | - | - | - | - | - | "
                f"{spd_fig} | {first.get('n', '-')} | {hw} |")
    r = rows[k - 1]
    h = res.get("held_out")
    held = "-"
    if h and h.get("loss") is not None:
        lo, hi = h["loss_ci"]
        held = f"{100 * h['loss']:+.2f} [{100 * lo:+.2f}, {100 * hi:+.2f}] (n = {h['n']}, lost {h['lost']} / gained {h['gained']})"
    tau = r.get("tau") or [None]
    tau_s = f"{tau[0]:.2f} [{tau[1]:.2f}, {tau[2]:.2f}]" if tau[0] is not None and len(tau) == 3 and None not in tau else _fig(tau[0])
    ps = r.get("predicted_speedup")
    sp = f"{ps['point']:.2f}x [{ps['low']:.2f}, {ps['high']:.2f}]" if ps and ps.get("low") is not None else "-"
    pc = r.get("per_cpu_hour") or {}
    return (f"| {rule} | {margin} | **{r['setting']}** | {100 * r['loss_upper']:.2f} | {held} | {tau_s} | {sp} | "
            f"{_per_h(pc.get('method'))} | {_per_h(pc.get('target_alone'))} | {spd_fig} | {r.get('n', '-')} | {hw} |")


def pending_row(state: dict[str, Any]) -> str:
    """A ladder at a margin with no finished certification: the planner's cost and the progress."""
    from ..launch.power import format_hours

    looks = state["looks"]
    parts = []
    for p in state["progress"]:
        if not p["problems"] and p["state"] == "pending":
            continue
        rate = f"{p['method_s']:.0f} s" if p["method_s"] is not None else "-"
        if p["target_alone_s"] is not None:
            rate += f" + target alone {p['target_alone_s']:.0f} s (on {p['target_alone_n']})"
        # The look the problems on disk are for: the first whose n they have not passed.
        look = next((i for i, n in enumerate(looks) if p["problems"] <= n), len(looks) - 1)
        # point_status's "running" is a folder without summary.json: running now, or stopped; either
        # way it resumes. A folder short of its look's n resumes too, whatever summary an earlier look left.
        st = "unfinished, resumes" if p["state"] == "running" or p["problems"] < looks[look] else p["state"]
        parts.append(f"{p['setting']}: {p['problems']} of {looks[look]} problems of look {look + 1} ({st}; wall per problem {rate})")
    progress = "; ".join(parts) or "not started"
    return (f"| `{state['experiment']}` ({state['key']}) | {state['margin']:g} pts | **not certified** | "
            f"{', '.join(map(str, state['looks']))} | {format_hours(state['cost_h'])} | {progress} |")


def render(states: Sequence[dict[str, Any]], command: str) -> str:
    done = [s for s in states if "result" in s]
    pending = [s for s in states if "result" not in s]
    on = ", ".join(sorted({f"{s['pair']} ({s['dtype']}) on {s['dataset']}" for s in states}))
    lines = [f"# Certified settings: {on} (issue 68)", "",
             "Written by `" + command + "` from the certifications on disk "
             "(`certification_<tag>.json`, written only when a certification finishes) and the run folders; "
             "regenerate it, do not edit it. The procedure and its guarantee: [docs/certify.md](../../docs/certify.md). "
             "Each ladder is one family (family-wise error <= alpha within it); a claim across ladders needs alpha / "
             "their number each.", ""]
    lines += ["## Finished certifications", ""]
    if done:
        lines += ["| rule (ladder) | margin | loosest certified setting | its loss upper bound (pts) | held-out loss, "
                  "pts [95% exact] | tau [95%] | predicted speedup [with calibration error] | correct / CPU h [95%] "
                  "| target alone's | SPD's | n | pair, dtype, hardware, batch |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|"]
        lines += [certified_row(s) for s in done]
        lines += ["", "Correct answers per CPU hour: wall hours of generation x the run's threads, on the setting's "
                      "deciding look (a batched run: each problem's share of its batch's wall time). SPD's: the ladder's "
                      "first setting where it kept no mismatch loosely (then its work and tokens are SPD's)."]
    else:
        lines += ["None yet: no ladder has finished at any margin, so **no setting is certified** here."]
    lines += ["", "## Not certified yet (not run, or not finished)", ""]
    if pending:
        lines += ["Nothing here is a finding: an unfinished certification says nothing about a setting's loss. "
                  "The planner's cost is its upper bound for the whole ladder (every setting to the last look, every "
                  "answer to max_new_tokens, the held-out report); the sequence stops at its first failure.", "",
                  "| rule (ladder) | margin | status | looks (n) | planner's cost (CPU h) | progress on disk |",
                  "|---|---|---|---|---|---|"]
        lines += [pending_row(s) for s in pending]
    else:
        lines += ["None: every ladder asked for has finished at every margin asked for."]
    conds = sorted({(s["pair"], s["dtype"], s["batch_size"]) for s in states})
    lines += ["", "Runs: " + "; ".join(f"pair {p}, {d}, engine.batch_size={b}" for p, d, b in conds) +
              ". Resume or extend any ladder with `python -m loosespec_bench.certify -e LADDER --delta D` "
              "(the same folders; the 5-point looks are the first problems of the 2-point ones)."]
    return "\n".join(lines) + "\n"


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m loosespec_bench.certify.readme", description=__doc__.split("\n\n")[0],
                                 epilog="Overrides after -- go to every ladder, as to the certify command's runs.")
    ap.add_argument("--experiment", "-e", action="append", help="a ladder (repeatable; default every certify_* experiment)")
    ap.add_argument("--deltas", default=",".join(f"{d:g}" for d in DELTAS), help="margins in accuracy points (default %(default)s)")
    ap.add_argument("--looks", default=None, help="the looks the certifications were run with (default: the certify command's)")
    ap.add_argument("--holdout", type=int, default=200, help="as the certify command's (default %(default)s)")
    ap.add_argument("--batch-size", type=int, default=8, help="as the certify command's (default %(default)s)")
    ap.add_argument("--results", default=None, help="results folder (default: LOOSESPEC_RESULTS_DIR, else results)")
    ap.add_argument("--out", default=None, help="the README to write (default: <results>/certify/README.md)")
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    overrides: list[str] = []
    if "--" in argv:
        cut = argv.index("--")
        argv, overrides = argv[:cut], argv[cut + 1 :]
    ap = parser()

    def error(message: str) -> None:
        print(f"error: {message} (--help lists the options)", file=sys.stderr)
        sys.exit(2)

    ap.error = error  # type: ignore[method-assign]
    opts = ap.parse_args(argv)
    try:
        try:
            deltas = [float(d) for d in opts.deltas.split(",")]
        except ValueError:
            raise ConfigError(f"--deltas {opts.deltas!r}: give margins in accuracy points, e.g. 5,2") from None
        names = opts.experiment or ladders()
        unknown = [e for e in names if e not in ladders()]
        if unknown:
            raise ConfigError(f"-e {unknown[0]}: not a certification ladder; use one of {', '.join(ladders())}")
        states = [ladder_state(e, d, opts, overrides) for e in names for d in deltas]
        root = Path(opts.results or os.environ.get("LOOSESPEC_RESULTS_DIR") or "results")
        out = Path(opts.out) if opts.out else root / "certify" / "README.md"
        out.parent.mkdir(parents=True, exist_ok=True)
        from ..safe_files import atomic_write_text

        command = "python -m loosespec_bench.certify.readme " + " ".join(argv + (["--", *overrides] if overrides else []))
        atomic_write_text(out, render(states, command.strip()))
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(f"[certify] written: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
