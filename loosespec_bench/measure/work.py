"""Work counts: what a generation computed, counted from the tokens alone (issue 46, item 1).

Wall-clock moves with the occasion (the machine's load, its clock, the other processes); the
number of forwards and the rows they processed do not: they depend only on the tokens, so two
configurations that emit the same tokens have the same counts on every machine, and a claim
about counts ("FLy + MLA needs fewer draft forwards per token than FLy") is decided exactly.

A `work` dict (one per generation, summed over turns and samples) holds, per forward role:

  target_prefill   the target's prompt forward(s): rows = prompt positions fed
  target_verify    the target's decode / verification forwards: rows = 1 + K (+ extras)
  draft_prefill    the draft network's first forward of a sequence (empty cache): the prompt
  draft            the draft network's other forwards (draft model, MLA's checks): rows fed

each as {forwards, rows, lm_rows, ctx, ctx_rows, rows_hist}: lm_rows = rows the LM head ran
on (logits_to_keep), ctx = sum over forwards of the cached positions before it (the KV cache
each forward reads), ctx_rows = sum of rows x cached positions (the attention's arithmetic), rows_hist = {rows: forwards} (a forward's cost is not
linear in its rows on every machine, so the cost model needs the histogram, not the sum).
Beside them: lm_head_extra {passes, rows, flops} (LM-head passes beyond the forwards' own:
DropMatch's dropout paths), lookups / lookup_hits (prompt lookup, MLA's inner lookups),
mla_saved_draft_forwards (a chain drafter's K forwards per step minus MLA's), draft_steps,
draft_tokens (candidates proposed), steps and emitted (tokens).

Ground floor: imports nothing from the package (metrics, summary and the loop all read it).
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

ROLES = ("target_prefill", "target_verify", "draft_prefill", "draft")
SCALARS = ("lookups", "lookup_hits", "mla_saved_draft_forwards", "draft_steps", "draft_tokens", "steps", "emitted")
# What a per-token figure divides by: emitted (new) tokens.
PER_TOKEN = {
    "target_forwards": ("target_verify", "forwards"),
    "target_rows": ("target_verify", "rows"),
    "draft_forwards": ("draft", "forwards"),
    "draft_rows": ("draft", "rows"),
}


def new_role() -> dict[str, Any]:
    return {"forwards": 0, "rows": 0, "lm_rows": 0, "ctx": 0, "ctx_rows": 0, "rows_hist": {}}


def new_work() -> dict[str, Any]:
    """An empty count."""
    out: dict[str, Any] = {role: new_role() for role in ROLES}
    out["lm_head_extra"] = {"passes": 0, "rows": 0, "flops": 0}
    out.update({k: 0 for k in SCALARS})
    return out


def add_forward(work: dict[str, Any], role: str, rows: int, lm_rows: int, ctx: int) -> None:
    """Count one forward of `rows` positions after `ctx` cached ones, its LM head on lm_rows."""
    r = work[role]
    r["forwards"] += 1
    r["rows"] += rows
    r["lm_rows"] += lm_rows
    r["ctx"] += ctx
    r["ctx_rows"] += rows * ctx
    key = str(rows)  # JSON object keys are strings
    r["rows_hist"][key] = r["rows_hist"].get(key, 0) + 1


def add_lm_head(work: dict[str, Any], rows: int, hidden: int, vocab: int) -> None:
    """One extra LM-head pass over `rows` hidden states: 2 x rows x hidden x vocab FLOPs."""
    e = work["lm_head_extra"]
    e["passes"] += 1
    e["rows"] += rows
    e["flops"] += 2 * rows * hidden * vocab


def merge_work(parts: Sequence[Mapping[str, Any] | None]) -> dict[str, Any]:
    """The sum of several counts (turns of a sample, samples of a run); None and {} skipped."""
    out = new_work()
    for w in parts:
        if not w:
            continue
        for role in ROLES:
            src, dst = w.get(role) or {}, out[role]
            for k in ("forwards", "rows", "lm_rows", "ctx", "ctx_rows"):
                dst[k] += int(src.get(k, 0))
            for rows, n in (src.get("rows_hist") or {}).items():
                dst["rows_hist"][str(rows)] = dst["rows_hist"].get(str(rows), 0) + int(n)
        for k in ("passes", "rows", "flops"):
            out["lm_head_extra"][k] += int((w.get("lm_head_extra") or {}).get(k, 0))
        for k in SCALARS:
            out[k] += int(w.get(k, 0))
    return out


def per_token(work: Mapping[str, Any] | None) -> dict[str, float | None]:
    """Per emitted token: target (decode) forwards and rows, draft forwards and rows, extra
    LM-head rows and lookups. None without emitted tokens (or without counts)."""
    if not work:
        return {}
    n = work.get("emitted") or 0
    out: dict[str, float | None] = {}
    for name, (role, key) in PER_TOKEN.items():
        out[name] = work[role][key] / n if n else None
    out["lm_head_extra_rows"] = work["lm_head_extra"]["rows"] / n if n else None
    out["lookups"] = work["lookups"] / n if n else None
    return out

