"""Declaration files, parsed against their declaration (issue 74): claims.yaml, calibrations and
GPU profiles. Each is read through the gate (safe_files: never a link or a FIFO, bounded, UTF-8,
no YAML alias bomb) and every field it holds is checked for its kind and range before any reader
uses it, as rule Params are (params.py): a malformed file is one ConfigError naming the file and
the field, never a traceback deep in the report and never a number used in silence (a NaN margin,
a cost of 1e999, a negative uncertainty).

A calibration is used only for the signature it was measured on (pair, dtype, threads, the
machine: `calibration_mismatch`) and only when every cost is finite (and the forward costs
positive): a NaN or negative cost prices a generation at nonsense (a predicted speedup of -0.69
or 12.2 in summary.json).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Mapping

from ..errors import ConfigError
from ..safe_files import load_json_declaration, load_yaml_declaration

# --- field kinds ------------------------------------------------------------------------------


def _show(value: Any) -> str:
    return repr(value)[:60]


def is_number(value: Any) -> bool:
    """A finite int or float (never a bool, a text, NaN or an infinity)."""
    return not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value)


def number(where: str, field: str, value: Any, *, low: float | None = None, high: float | None = None,
           low_open: bool = False) -> float:
    """`value` as a float when it is a finite number in [low, high] (low excluded with low_open),
    else a ConfigError naming the file and the field."""
    if not is_number(value):
        raise ConfigError(f"{where}: {field}={_show(value)} is not a finite number")
    v = float(value)
    if low is not None and (v < low or (low_open and v == low)):
        raise ConfigError(f"{where}: {field}={_show(value)} must be {'>' if low_open else '>='} {low:g}")
    if high is not None and v > high:
        raise ConfigError(f"{where}: {field}={_show(value)} must be <= {high:g}")
    return v


def whole(where: str, field: str, value: Any, *, low: int = 0, high: int = 1 << 31) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ConfigError(f"{where}: {field}={_show(value)} is not a whole number from {low} to {high}")
    return value


def text(where: str, field: str, value: Any) -> str:
    if not isinstance(value, str):
        raise ConfigError(f"{where}: {field}={_show(value)} is not a text")
    return value


def mapping(where: str, field: str, value: Any, *, optional: bool = True) -> Mapping[str, Any]:
    if value is None and optional:
        return {}
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: {field} holds {type(value).__name__} {_show(value)}, not a mapping")
    return value


def listing(where: str, field: str, value: Any, *, optional: bool = True) -> list[Any]:
    if value is None and optional:
        return []
    if not isinstance(value, list):
        raise ConfigError(f"{where}: {field} holds {type(value).__name__} {_show(value)}, not a list")
    return value


# --- claims.yaml ------------------------------------------------------------------------------

_CLAIM_TEXTS = ("id", "paper", "text", "figure", "estimand", "test", "graded_test", "family", "source",
                "hypothesis", "folder", "sided")


def check_claims(data: Any, where: str) -> dict[str, Any]:
    """A claims declaration's content checked for kinds and ranges (the meaning of each value is
    then checked by report/claims/declaration.py); the data, {} for an empty file."""
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: the file holds {type(data).__name__}, not a mapping (alpha:, families:, claims:)")
    for key in ("alpha", "power"):
        if key in data:
            number(where, key, data[key], low=0, high=1, low_open=True)
    for key in ("budget_factor", "imbalance"):
        if key in data:
            number(where, key, data[key], low=0, low_open=True)
    for key in ("adjust", "multiplicity", "declared"):
        if key in data and data[key] is not None:
            text(where, key, data[key])
    for fid, spec in mapping(where, "families", data.get("families")).items():
        fam = mapping(where, f"families.{fid}", spec)
        for key in ("title", "adjust"):
            if key in fam:
                text(where, f"families.{fid}.{key}", fam[key])
    ids: list[str] = []
    for i, raw in enumerate(listing(where, "claims", data.get("claims"))):
        at = f"claims[{i}]"
        claim = mapping(where, at, raw, optional=False)
        if isinstance(claim.get("id"), str):
            at = f"claim {claim['id']!r}"
            ids.append(claim["id"])
        for key in _CLAIM_TEXTS:
            if key in claim and claim[key] is not None:
                text(where, f"{at}: {key}", claim[key])
        for key in ("a", "b"):
            if key in claim and claim[key] is not None:
                mapping(where, f"{at}: {key}", claim[key], optional=False)
        if "margin" in claim:
            number(where, f"{at}: margin", claim["margin"])
        if "direction" in claim and (isinstance(claim["direction"], bool) or claim["direction"] not in (-1, 1)):
            raise ConfigError(f"{where}: {at}: direction={_show(claim['direction'])} must be the number +1 or -1")
        if "every_set" in claim and not isinstance(claim["every_set"], bool):
            raise ConfigError(f"{where}: {at}: every_set={_show(claim['every_set'])} must be true or false")
        sets = claim.get("sets")
        if sets is not None and not (isinstance(sets, list) and all(isinstance(s, str) for s in sets)):
            raise ConfigError(f"{where}: {at}: sets={_show(sets)} must be a list of data set names (or null: every set)")
        if claim.get("size") is not None:
            size = mapping(where, f"{at}: size", claim["size"], optional=False)
            for key in ("low", "high"):
                number(where, f"{at}: size.{key}", size.get(key))
        looks = claim.get("looks")
        if looks is not None:
            ns = mapping(where, f"{at}: looks", looks).get("n") if isinstance(looks, dict) else looks
            if not isinstance(ns, list) or not ns:
                raise ConfigError(f"{where}: {at}: looks={_show(looks)} must be {{n: [10, 20, 30], spending: ...}}")
            for j, n in enumerate(ns):
                whole(where, f"{at}: looks.n[{j}]", n, low=1, high=10**9)
    return data


def read_claims_declaration(path: str | Path) -> tuple[bytes, dict[str, Any]]:
    """(the file's bytes, its checked content) of a claims.yaml, through the gate."""
    from ..safe_files import parse_yaml_declaration, read_declaration_text

    raw = read_declaration_text(path, "claims declaration")
    return raw.encode("utf-8"), check_claims(parse_yaml_declaration(raw, path, "claims declaration"), str(path))


# --- calibrations -----------------------------------------------------------------------------

_MAX_COST_S = 3600.0  # no unit of work of a calibrated pair takes an hour


def _forward(where: str, field: str, node: Any) -> None:
    d = mapping(where, field, node, optional=False)
    rows = listing(where, f"{field}.rows", d.get("rows"), optional=False)
    body = listing(where, f"{field}.body_s", d.get("body_s"), optional=False)
    if not rows or len(rows) != len(body):
        raise ConfigError(f"{where}: {field}.rows and {field}.body_s must be lists of one length, not empty")
    for i, r in enumerate(rows):
        whole(where, f"{field}.rows[{i}]", r, low=1, high=1 << 20)
        if i and r <= rows[i - 1]:
            raise ConfigError(f"{where}: {field}.rows must increase (rows[{i}]={r} after {rows[i - 1]})")
    for i, b in enumerate(body):
        number(where, f"{field}.body_s[{i}]", b, low=0, high=_MAX_COST_S, low_open=True)
    whole(where, f"{field}.ctx0", d.get("ctx0"), low=0, high=1 << 24)
    number(where, f"{field}.ctx_row_s", d.get("ctx_row_s"), low=0, high=_MAX_COST_S)
    if "ctx_s" in d:  # calibrations written before the per-forward context term lack it (0)
        number(where, f"{field}.ctx_s", d.get("ctx_s"), low=0, high=_MAX_COST_S)
    number(where, f"{field}.lm_head_row_s", d.get("lm_head_row_s"), low=0, high=_MAX_COST_S)


def check_calibration(data: Any, where: str) -> dict[str, Any]:
    """A calibration's content checked: every cost a finite number (the forward bodies > 0, the
    others >= 0), the rows whole and increasing, the check a mapping of finite positive ratios,
    the signature a mapping."""
    d = mapping(where, "the calibration", data, optional=False)
    _forward(where, "target", d.get("target"))
    if d.get("draft") is not None:
        _forward(where, "draft", d["draft"])
    for key in ("extra_lm_head_row_s", "lookup_s", "step_overhead_s"):
        number(where, key, d.get(key), low=0, high=_MAX_COST_S)
    if "verify_row_s" in d:
        number(where, "verify_row_s", d["verify_row_s"], low=0, high=_MAX_COST_S)
    for key, value in mapping(where, "check", d.get("check")).items():
        number(where, f"check.{key}", value, low=0, low_open=True)
    mapping(where, "signature", d.get("signature"), optional=False)
    return d


# The signature fields a calibration must share with the run it prices: another pair, dtype,
# thread count or machine prices other forwards.
SIGNATURE_KEYS = ("pair", "target", "draft", "draft_quantize", "dtype", "device", "cpu_signature", "cpu_isa", "cpu_count",
                  "threads", "omp_wait_policy", "torch")


def calibration_mismatch(stored: Mapping[str, Any], expected: Mapping[str, Any]) -> str | None:
    """Why a calibration measured under `stored` must not price a run under `expected`, or None."""
    for key in SIGNATURE_KEYS:
        if key in expected and stored.get(key) != expected[key]:
            return f"it was measured with {key}={_show(stored.get(key))}, this run has {_show(expected[key])}"
    return None


def read_calibration(path: str | Path, expected: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A calibration file read through the gate and checked (check_calibration); with `expected`
    (a signature), refused unless measured under it."""
    data = check_calibration(load_json_declaration(path, "calibration"), str(path))
    if expected is not None:
        why = calibration_mismatch(data["signature"], expected)
        if why:
            raise ConfigError(f"{path}: not this run's calibration: {why}")
    return data


# --- GPU profiles (report project) ------------------------------------------------------------


def check_profile(data: Any, where: str) -> dict[str, Any]:
    """A GPU profile: a mapping whose {value: ...} leaves hold a finite number >= 0 (at most 1e15)
    with a finite rel_uncertainty >= 0 and a source text."""
    d = mapping(where, "the profile", data, optional=False)
    for key in ("name", "description"):
        if key in d and d[key] is not None:
            text(where, key, d[key])

    def walk(node: Any, at: str, depth: int) -> None:
        if depth > 8:
            raise ConfigError(f"{where}: {at} is nested too deeply")
        if not isinstance(node, dict):
            return
        if "value" in node:
            number(where, f"{at}.value", node["value"], low=0, high=1e15)
            if node.get("rel_uncertainty") is not None:
                number(where, f"{at}.rel_uncertainty", node["rel_uncertainty"], low=0, high=100)
            if "source" in node:
                text(where, f"{at}.source", node["source"])
            return
        for k, v in node.items():
            walk(v, f"{at}.{k}" if at else str(k), depth + 1)

    walk(d, "", 0)
    for section in ("gpu", "target", "lm_head"):
        if section in d:
            mapping(where, section, d[section], optional=False)
    if d.get("draft") is not None:
        mapping(where, "draft", d["draft"], optional=False)
    return d


def read_profile(path: str | Path) -> dict[str, Any]:
    return check_profile(load_yaml_declaration(path, "GPU profile"), str(path))
