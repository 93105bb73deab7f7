"""The task interface: load samples (offline from a data directory, or from the hub), build
the chat messages, score a completion. A data set is one small module plus a config file."""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from ..errors import ConfigError
from ..params import MAX_NEW_TOKENS_CAP, Rule, integer, list_of, optional, string


# Where the data sets are read from (paths.data_dir), spelled once for `python -m
# loosespec_bench`, `make` and `python -m loosespec_bench.data`: $LOOSESPEC_DATA_DIR, else
# default_data_dir() (what `make data` fills); LOOSESPEC_DATA_DIR=null (or `hub`) loads from the
# Hugging Face hub instead. Without a default folder, a run without the variable went to the
# hub and retried for 30 s on a machine that cannot reach it.
DATA_DIR_ENV = "LOOSESPEC_DATA_DIR"
HUB_WORDS = ("null", "none", "hub")


def default_data_dir() -> Path:
    """The data sets' default folder: ~/.cache/loosespec_bench/datasets (beside the models)."""
    return Path.home() / ".cache" / "loosespec_bench" / "datasets"


def data_dir_setting(env: str | None = None) -> str | None:
    """paths.data_dir's default: the folder named by $LOOSESPEC_DATA_DIR (unset or empty: the
    default folder), or None (the hub) for null / none / hub."""
    value = os.environ.get(DATA_DIR_ENV) if env is None else env
    if value is None or not value.strip():
        return str(default_data_dir())
    if value.strip().lower() in HUB_WORDS:
        return None
    return value


@dataclass
class Sample:
    id: str  # stable across runs: resume and paired comparisons key on it
    messages: list[dict[str, str]]  # chat messages up to the turn the model answers
    reference: Any = None  # what the scorer compares against (None: not scored)
    meta: dict[str, Any] = field(default_factory=dict)  # e.g. {"language": "fr"}
    # Multi-turn data sets (MT-bench): the later user turns, each asked after the model's own
    # answer to the previous one. Empty for single-turn samples.
    followups: list[str] = field(default_factory=list)

    @property
    def problem(self) -> str:
        """The problem this sample asks: its id, unless several samples pose the same problem
        (MGSM: one GSM8K problem in several languages, meta["problem"]). n counts these."""
        return str(self.meta.get("problem", self.id))


class Task:
    """Base class. Subclasses set `name` and implement `load_all` and `score`."""

    name: str = "task"
    # How tables, figures and captions name the set ("MBPP+", not "mbpp_plus"): declared here,
    # once, and read by config.dataset_display_name; "" means the name itself.
    display_name: str = ""
    # How the report names a prompt variant that is not the papers' (index.dataset_name's
    # "<set> (<prompt> prompt)"); a prompt not listed is named by its key.
    prompt_labels: dict[str, str] = {}
    # The per-sample score field that accuracy retention and its bootstrap interval use
    # (a bool or a number); None: the task measures speed only.
    quality_key: str | None = "correct"
    # The ranges of its config node's keys (checked by the pre-check, params.declared_rules);
    # a subclass declares only its own keys, these are every data set's.
    SETTINGS: dict[str, Rule] = {
        "data_dir": optional(string),
        "limit": optional(integer(1)),
        "max_new_tokens": optional(integer(1, MAX_NEW_TOKENS_CAP)),
        # An empty stop string matches at once: every output would be cut to "".
        "stop_strings": optional(list_of(string, nonempty=False)),
        "system_prompt": optional(string),
        "sample_seed": optional(integer(0)),  # null: the data file's order
    }
    # dataset.name values this class may be filed under (run ids, reports); None = its `name`.
    config_names: tuple[str, ...] | None = None
    # Whether `limit` takes a seeded random subset of the problems (sample_seed); False where
    # the file order is itself a design (NIAH's length x depth grid) or the loader cuts (lm-eval).
    shuffle: bool = True
    # The meta key that samples are interleaved by after shuffling (round_robin), so that a
    # small limit covers every group (MT-bench categories, Spec-Bench task groups); None: none.
    group_key: str | None = None
    # The summary figure that is the mean of score[quality_key] (summary.json's F beside F_ci_*).
    quality_figure: str = "accuracy"
    # Settings whose every entry must be one of a fixed set (e.g. MGSM's languages), declared
    # here so that the pre-check (checks.py) refuses a bad one before any model loads.
    setting_choices: dict[str, tuple[str, ...]] = {}
    # The full data set's size (dataset.limit=null) and turns per sample, for the planner's
    # estimates (plan.py) without loading anything; full_size None: unknown. size_of reads them.
    full_size: int | None = None
    full_size_exact: bool = True  # False: an approximate count (a hub split the plan cannot count)
    turns_per_sample: float = 1.0
    # lm-eval's per-task fields of a results file, recorded in summary.json ("n-shot",
    # "versions"): the exemplars the prompt carries (a task with a shot setting sets it from
    # that setting), and the version of the task's prompt and scoring, raised when either
    # changes so that figures of two versions are never read as one (lm-eval: VERSION).
    num_fewshot: int = 0
    version: str = "1.0"

    def __init__(
        self,
        *,
        data_dir: str | None = None,
        limit: int | None = None,
        max_new_tokens: int = 256,
        stop_strings: list[str] | None = None,
        system_prompt: str | None = None,
        sample_seed: int | None = 0,
    ) -> None:
        self.data_dir = Path(os.path.expanduser(data_dir)) if data_dir else None
        self.limit = limit
        self.max_new_tokens = max_new_tokens
        self.stop_strings = list(stop_strings or [])
        self.system_prompt = system_prompt
        self.sample_seed = sample_seed
        self.data_files: set[Path] = set()  # every file local_path() gave out (summary: sha256)

    @classmethod
    def name_of(cls, settings: Mapping[str, Any]) -> str:
        """The name a task built from this config node has (Task.name: the shared baseline
        store's folder, the records), from the settings alone: the node's `name`."""
        return str(settings.get("name", cls.name))

    @classmethod
    def size_of(cls, settings: Mapping[str, Any]) -> tuple[int | None, bool]:
        """(samples of the full data set a config node describes, whether the count is exact),
        before dataset.limit, from the settings alone. None: unknown, e.g. a node that reuses the
        class for other data (its name differs from the class's). A category filter makes the
        full set an upper bound."""
        if cls.full_size is None or settings.get("name", cls.name) != cls.name:
            return None, False
        return cls.full_size, cls.full_size_exact and not settings.get("categories")

    # -- loading ---------------------------------------------------------------------------
    def local_path(self, *parts: str) -> Path:
        """A file under the data directory, with a one-line error naming it when missing."""
        assert self.data_dir is not None
        path = self.data_dir.joinpath(*parts)
        if not path.exists():
            raise ConfigError(
                f"dataset {self.name}: {path} not found; prepare the data sets with `make data` "
                "(python -m loosespec_bench.data --to <folder>), or set LOOSESPEC_DATA_DIR=null to load from the hub"
            )
        # A folder (NIAH's essays): every file in it, since the task reads them all.
        self.data_files.update([path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()])
        return path

    def load_all(self) -> list[Sample]:
        raise NotImplementedError  # abstract: every task module defines it

    def samples(self) -> list[Sample]:
        """The run's samples: `load_all()` in `order()`, cut to `limit` (None = the whole set).

        The order is a fixed function of the data and `sample_seed`, so a larger limit extends
        a smaller one's selection (resume reuses its records) and the selection is recorded by
        the seed alone (summary.selection)."""
        try:
            items = self.load_all()
        except UnicodeDecodeError as err:
            raise ConfigError(f"dataset {self.name}: a data file is not UTF-8 ({err.reason}; data from {self.data_dir or 'the hub'}); fix or replace it") from None
        except IsADirectoryError as err:
            raise ConfigError(f"dataset {self.name}: {err.filename} is a folder, not a data file; fix or replace it") from None
        except KeyError as err:  # a row without a field the loader reads (the loaders that check name the line)
            raise ConfigError(
                f"dataset {self.name}: a data row has no field {err.args[0]!r} (data from {self.data_dir or 'the hub'}); "
                "fix or replace the data file"
            ) from None
        where = f"data from {self.data_dir or 'the hub'}"
        seen: set[str] = set()
        for s in items:
            if not isinstance(s.id, str) or not s.id:
                raise ConfigError(f"dataset {self.name}: a sample id is {s.id!r}, not a non-empty text ({where}); fix the data file")
            if s.id in seen:
                # Resume and the summary key on ids: a second record would be counted twice.
                raise ConfigError(f"dataset {self.name}: sample id {s.id!r} appears twice ({where}); ids must be unique")
            seen.add(s.id)
        items = self.order(items)
        items = items if self.limit is None else items[: self.limit]
        if not items:
            raise ConfigError(
                f"dataset {self.name}: the selection is empty (0 samples after dataset.limit and the filters, "
                f"data from {self.data_dir or 'the hub'}); check the data files and the dataset's filter settings"
            )
        return items

    def order(self, items: list[Sample]) -> list[Sample]:
        """The samples in the order a limit cuts them: problems in a permutation seeded by
        `sample_seed` (None, or a task with shuffle=False: the loader's order), then
        interleaved by `group_key`. Samples of the same problem stay together."""
        if self.sample_seed is not None and self.shuffle:
            problems = list(dict.fromkeys(s.problem for s in items))
            perm = seeded_permutation(len(problems), self.sample_seed)
            rank = {problems[j]: pos for pos, j in enumerate(perm)}
            items = sorted(items, key=lambda s: rank[s.problem])  # stable: a problem's samples keep their order
        return round_robin(items, self.group_key) if self.group_key else items

    def selection(self, samples: list[Sample]) -> dict[str, Any]:
        """How the run's samples were chosen, for summary.json: enough to choose them again."""
        return {
            "limit": self.limit,
            "sample_seed": self.sample_seed if self.shuffle else None,
            "order": "seeded permutation of problems" if self.shuffle and self.sample_seed is not None else "data file order",
            "group_key": self.group_key,
            "n_samples": len(samples),
            "n_problems": len({s.problem for s in samples}),
        }

    def preflight(self) -> None:
        """What must work before any model loads, beyond the settings (a code set's sandbox);
        raises ConfigError. app.run and the re-scorer call it after the samples load."""

    def with_system(self, messages: list[dict[str, str]]) -> list[dict[str, str]]:
        if self.system_prompt:
            return [{"role": "system", "content": self.system_prompt}, *messages]
        return messages

    # -- scoring ---------------------------------------------------------------------------
    def score(self, sample: Sample, completion: str) -> dict[str, Any]:
        """Per-sample score: at least {"correct": bool} for scored tasks, {} otherwise."""
        return {}

    def score_turns(self, sample: Sample, completions: list[str]) -> dict[str, Any]:
        """Score one answer per user turn; single-turn tasks score the (only) last one."""
        return self.score(sample, completions[-1])

    def score_batch(self, samples: list[Sample], completions: list[list[str]]) -> list[dict[str, Any]]:
        """Many samples at once (re-scoring); tasks with slow scorers run them in parallel."""
        return [self.score_turns(s, c) for s, c in zip(samples, completions)]

    def aggregate(self, records: list[dict[str, Any]]) -> dict[str, Any]:
        """Run-level quality figures from per-sample records (accuracy by default)."""
        scored = [r for r in records if r.get("score", {}).get("correct") is not None]
        if not scored:
            return {}
        return {"accuracy": sum(bool(r["score"]["correct"]) for r in scored) / len(scored)}


def seeded_permutation(n: int, seed: int) -> list[int]:
    """A permutation of range(n) fixed by `seed` (numpy's PCG64): the same on every machine."""
    import numpy as np

    return [int(i) for i in np.random.default_rng(seed).permutation(n)]


def round_robin(samples: list[Sample], key: str) -> list[Sample]:
    """Interleave samples by meta[key] (first of each group, then second...), keeping the order
    within a group, so that a small `limit` covers every group."""
    groups: dict[Any, list[Sample]] = {}
    for s in samples:
        groups.setdefault(s.meta.get(key), []).append(s)
    longest = max((len(g) for g in groups.values()), default=0)
    return [g[i] for i in range(longest) for g in groups.values() if i < len(g)]


def _type_names(kind: Any) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return " or ".join({str: "text", int: "an integer", float: "a number", list: "a list", dict: "an object"}.get(k, k.__name__) for k in kinds)


def read_jsonl(
    path: Path, *, opener: Any = None, required: tuple[str, ...] = (), types: dict[str, Any] | None = None
) -> list[dict[str, Any]]:
    """Every line of a JSONL data file as an object; a line that is not UTF-8, not a JSON object,
    lacks one of the `required` keys or holds a value of another type than `types` says (a
    number where text belongs: bool is not an int here) is a ConfigError naming the file and the
    line; a file that cannot be read (a folder in its place) names the file."""
    rows = []
    try:
        from ..safe_files import open_regular  # never a link, a FIFO (a run would hang) or a device

        handle = open_regular(path, "rb")
        f = opener(handle) if opener else handle
    except OSError as err:
        raise ConfigError(f"{path}: cannot be read ({err.strerror or err}); fix or replace the data file") from None
    with handle, f:  # the opener's wrapper (gzip) leaves the file it wraps open: both closed
        lineno = 0
        try:
            for lineno, raw in enumerate(f, 1):
                try:
                    line = raw.decode("utf-8") if isinstance(raw, bytes) else raw
                except UnicodeDecodeError as err:
                    raise ConfigError(f"{path} line {lineno}: not UTF-8 ({err.reason} at byte {err.start}); fix or replace the data file") from None
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except (ValueError, RecursionError) as err:  # RecursionError: nested deeper than the parser goes
                    raise ConfigError(f"{path} line {lineno}: not valid JSON ({str(err)[:80] or 'nested too deeply'}); "
                                      "fix or replace the data file") from None
                if not isinstance(row, dict):
                    raise ConfigError(f"{path} line {lineno}: not a JSON object; fix or replace the data file")
                missing = [k for k in required if k not in row]
                if missing:
                    raise ConfigError(f"{path} line {lineno}: missing field(s) {missing}; fix or replace the data file")
                for key, kind in (types or {}).items():
                    value = row.get(key)
                    if key in row and (not isinstance(value, kind) or (isinstance(value, bool) and bool not in (kind if isinstance(kind, tuple) else (kind,)))):
                        raise ConfigError(f"{path} line {lineno}: field {key!r} is {json.dumps(value)[:40]}, not {_type_names(kind)}; fix or replace the data file")
                    if isinstance(value, float) and not math.isfinite(value):
                        raise ConfigError(f"{path} line {lineno}: field {key!r} is {value}, not a finite number; fix or replace the data file")
                rows.append(row)
        except UnicodeDecodeError as err:  # a text opener (gzip "rt") decodes before we see the line
            raise ConfigError(f"{path} line {lineno + 1}: not UTF-8 ({err.reason}); fix or replace the data file") from None
        except OSError as err:
            raise ConfigError(f"{path}: cannot be read ({err.strerror or err}); fix or replace the data file") from None
    return rows


def hub_file(repo_id: str, filename: str) -> Path:
    """One raw file of a hub data set repository (for sets published as JSONL, not as tables)."""
    try:
        from huggingface_hub import hf_hub_download

        return Path(hf_hub_download(repo_id, filename, repo_type="dataset"))
    except Exception as err:  # offline, no such file, no huggingface_hub: one message for all
        raise ConfigError(
            f"could not fetch {filename} from the hub data set {repo_id} "
            f"({str(err).splitlines()[0] if str(err) else type(err).__name__}); "
            "use a local copy instead (`make data` prepares one: docs/data.md)"
        ) from None


def load_hub_dataset(path: str, name: str | None, split: str):
    """datasets.load_dataset with a clear message when the library or the network is missing."""
    try:
        import datasets
    except ImportError:
        raise ConfigError(
            f"loading {path} from the hub needs the `datasets` package (pip install 'loosespec_bench[hub]'), "
            "or use a local copy (`make data` prepares one: docs/data.md)"
        ) from None
    try:
        return datasets.load_dataset(path, name, split=split)
    except Exception as err:  # network, auth, missing config: all end the same way for a user
        raise ConfigError(
            f"could not load {path} ({name}) from the hub: {str(err).splitlines()[0] if str(err) else type(err).__name__}; "
            "use a local copy instead (`make data` prepares one: docs/data.md)"
        ) from None
