"""One GGUF file made into an ordinary transformers folder, checked: the helper the embedded
Qwen pair (models/embedded.py) and SmolLM2 (models/smollm.py) share.

convert_gguf dequantises the GGUF in float32 one tensor at a time with transformers' own steps
(stream_gguf_tensors: never the whole model in memory), into sharded safetensors in a sibling
temporary folder, with the config, generation config and tokenizer, after the model's module
fixed what its GGUF metadata gets wrong (`prepare`: EOS ids, the tokenizer's length). It then
reloads that folder the way runs load it and compares with transformers' own load of the GGUF
(in bfloat16): the same logits exactly (torch.equal: the saved folder is the same model, e.g.
an untied lm_head kept, not just a loadable one), no weight missing or left over, the same token
ids on every probe text, no quantization_config left, and the module's own checks (`check`:
chat template, EOS). Only then is the marker written and the folder renamed into place, so a
half-written folder never exists. file_lock and make_shareable are the cache's locking and
permissions, shared the same way; in_child runs a conversion in a process of its own and says
its peak resident memory.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from filelock import lock_descriptor, unlock_descriptor

from ..safe_files import open_fd

log = logging.getLogger(__name__)


# How often a waiting process asks for the cache's lock again: a conversion takes minutes.
LOCK_POLL_S = 1.0


@contextlib.contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """An exclusive lock on `path` while the block runs: one process converts, the others wait
    and then find the folder done."""
    # flock (filelock's lock_descriptor) is released by the kernel if the process dies, so a
    # crashed conversion never leaves a stale lock behind (unlike a lock file that is created
    # and deleted). Each call opens its own descriptor: two threads exclude each other as two
    # processes do.
    fd = open_fd(path, os.O_RDWR | os.O_CREAT, 0o644)  # never through a link (safe_files)
    try:
        start = time.monotonic()
        if not lock_descriptor(fd, blocking=False):
            log.info("waiting for another process converting in %s", path.parent)
            lock_descriptor(fd, blocking=True, poll_interval=LOCK_POLL_S)
            log.info("lock acquired after %.0f s", time.monotonic() - start)
        try:
            yield
        finally:
            unlock_descriptor(fd)
    finally:
        os.close(fd)


def in_child(target: str, *args: str) -> int | None:
    """Call `target` ("package.module:function", with the string args) in a fresh Python process
    and wait for it; returns the child's own peak resident memory in bytes (None where the OS does
    not say). A conversion's float32 weights then leave with the child: the process that goes on
    to run the pair never holds them (issue 72: the conversion and the run in one process held
    ~15 GB resident on the first `make run`). RuntimeError when the child fails (its own error
    went to stderr above).

    The peak is the child's VmHWM (/proc/self/status, Linux), which it writes to fd 3 as it ends:
    wait4's ru_maxrss is not the child's own, since exec carries the spawning process's
    high-water mark into it (a child spawned by a run holding 9.7 GB "peaked" at 9.7 GB).
    Elsewhere ru_maxrss is the fallback, an upper bound."""
    code = ("import importlib, logging, os, sys\n"
            "logging.basicConfig(level=os.environ.get('LOOSESPEC_LOG', 'WARNING').upper())\n"
            "module, function = sys.argv[1].split(':')\n"
            "try:\n"
            "    getattr(importlib.import_module(module), function)(*sys.argv[2:])\n"
            "finally:\n"
            "    try:\n"  # the kernel's own file, not a user's: the process's resident high-water mark
            "        hwm = [ln.split()[1] for ln in open('/proc/self/status') if ln.startswith('VmHWM:')][:1]\n"
            "        os.write(3, (hwm[0] if hwm else '').encode())\n"
            "    except OSError:\n"
            "        pass\n")
    read_end, write_end = os.pipe()
    try:
        # posix_spawn + wait4, not subprocess: wait4 gives the child's rusage (the fallback peak).
        pid = os.posix_spawn(sys.executable, [sys.executable, "-c", code, target, *args], os.environ,
                             file_actions=[(os.POSIX_SPAWN_DUP2, write_end, 3)])
    except BaseException:
        os.close(read_end)
        raise
    finally:
        os.close(write_end)  # the child's copy is its fd 3: the pipe ends when the child does
    reaped = False
    try:
        _, status, usage = os.wait4(pid, 0)
        reaped = True
        said = os.read(read_end, 64).decode(errors="replace").strip()
    finally:
        os.close(read_end)
        if not reaped:  # interrupted while waiting: the child does not outlive us
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGTERM)
                os.waitpid(pid, 0)
    code_or_signal = os.waitstatus_to_exitcode(status)
    if said.isdigit():
        peak = int(said) * 1024  # VmHWM is in kB
    else:
        peak = usage.ru_maxrss * (1 if sys.platform == "darwin" else 1024)  # bytes on macOS, KiB on Linux
    if code_or_signal != 0:
        how = (f"killed by signal {-code_or_signal}" + (" (SIGKILL: out of memory?)" if -code_or_signal == signal.SIGKILL else "")
               if code_or_signal < 0 else f"exit status {code_or_signal}")
        raise RuntimeError(f"{' '.join([target, *args])} failed in its child process ({how}, peak {peak / 2**30:.1f} GiB "
                           "resident); its error is above")
    return peak or None


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def make_shareable(path: Path) -> None:
    """Give temp-created files the permissions of ordinary ones.

    mkstemp/mkdtemp (and the safetensors writer) create 0600/0700 entries; the cache is meant
    to be shared by the team, so apply the usual umask instead.
    """
    mask = _umask()
    paths = [path, *path.rglob("*")] if path.is_dir() else [path]
    for p in paths:
        os.chmod(p, (0o777 if p.is_dir() else 0o666) & ~mask)


def strip_gguf_quantizer(lm: Any) -> None:
    """Make a GGUF-loaded model saveable with save_pretrained.

    transformers refuses save_pretrained for a GGUF-loaded model because its quantizer says
    "not serializable"; the weights are already plain dequantised tensors, so dropping the
    markers is enough. remove_quantization_config is transformers' own way to do it.
    """
    quantizer = getattr(lm, "hf_quantizer", None)
    if quantizer is not None:
        quantizer.remove_quantization_config(lm)
    for attr in ("hf_quantizer", "quantization_method"):
        if getattr(lm, attr, None) is not None:
            delattr(lm, attr)
    if getattr(lm.config, "quantization_config", None) is not None:
        lm.config.quantization_config = None  # None is not written to config.json
    lm.is_quantized = False


def _nothing(*_: Any) -> None:
    return None


# Shards of the converted folder: float32 tensors gathered up to this size, then written (the
# writer holds a shard and its bytes, so the conversion's own peak is about twice this, beside one
# tensor being dequantised). Standard sharded safetensors: from_pretrained and read_local read them.
SHARD_BYTES = 1 << 30


def stream_gguf_tensors(gguf: Path, meta_model: Any, out_dir: Path, shard_bytes: int = SHARD_BYTES) -> dict[str, str]:
    """Dequantise the GGUF's tensors one at a time into float32 safetensors shards in `out_dir`,
    with transformers' own per-tensor steps (gguf's dequantize, the architecture's tensor
    processor, the GGUF -> HF name map of `meta_model`, a model of the right config on the meta
    device): the values from_pretrained(gguf_file=...) would hold, without ever holding them all.
    Writes model.safetensors.index.json; returns {HF name: shard file}."""
    import numpy as np
    import torch
    from gguf import GGUFReader, dequantize
    from safetensors.torch import save_file
    from transformers.modeling_gguf_pytorch_utils import (
        TENSOR_PROCESSORS, TensorProcessor, get_gguf_hf_weights_map, load_gguf_checkpoint, read_field)

    from ..safe_files import atomic_write_text, check_write_target

    parsed = load_gguf_checkpoint(str(gguf), return_tensors=False)  # metadata only
    parsed["tensors"] = {}  # where some processors (MoE experts) put tensors themselves
    reader = GGUFReader(str(gguf))
    architecture = read_field(reader, "general.architecture")[0]
    processor = TENSOR_PROCESSORS.get(architecture, TensorProcessor)(config=parsed.get("config", {}))
    name_map = get_gguf_hf_weights_map(meta_model, processor)

    shards: list[list[str]] = []
    pending: dict[str, torch.Tensor] = {}
    size = total_bytes = 0
    seen: set[str] = set()
    weight_map: dict[str, str] = {}

    def flush() -> None:
        nonlocal pending, size
        if pending:
            part = check_write_target(out_dir / f".part-{len(shards):05d}.safetensors", out_dir)  # no link followed
            save_file(pending, str(part), metadata={"format": "pt"})
            shards.append(list(pending))
        pending, size = {}, 0

    def add(name: str, tensor: torch.Tensor) -> None:
        nonlocal size, total_bytes
        if name in seen:
            raise RuntimeError(f"{gguf.name}: two GGUF tensors map to {name}")
        seen.add(name)
        if size and size + tensor.numel() * tensor.element_size() > shard_bytes:
            flush()
        pending[name] = tensor
        size += tensor.numel() * tensor.element_size()
        total_bytes += tensor.numel() * tensor.element_size()

    for tensor in reader.tensors:
        weights = dequantize(tensor.data, tensor.tensor_type)
        result = processor.process(weights=weights, name=tensor.name, tensor_key_mapping=name_map, parsed_parameters=parsed)
        for name in list(parsed["tensors"]):  # put there by the processor: already torch tensors
            add(name, parsed["tensors"].pop(name).float().contiguous())
        if result.name in name_map:
            add(name_map[result.name], torch.from_numpy(np.array(result.weights, dtype=np.float32, copy=True)))
        del weights, result
    flush()
    total = len(shards)
    for i, names in enumerate(shards):
        final = f"model-{i + 1:05d}-of-{total:05d}.safetensors"
        os.replace(out_dir / f".part-{i:05d}.safetensors", check_write_target(out_dir / final, out_dir))
        weight_map.update({n: final for n in names})
    index = {"metadata": {"total_size": total_bytes}, "weight_map": dict(sorted(weight_map.items()))}
    atomic_write_text(out_dir / "model.safetensors.index.json", json.dumps(index, indent=2, sort_keys=True) + "\n")
    return weight_map


def convert_gguf(gguf: Path, hf_dir: Path, *, marker: str, marker_text: str, probe: Callable[[Any], str],
                 prepare: Callable[[Any, Any], None] = _nothing, check: Callable[[Path, Any], None] = _nothing,
                 texts: Sequence[str] = ()) -> None:
    """Dequantise `gguf` in float32 and save model + tokenizer as safetensors in `hf_dir`, checked
    (module docstring). probe(tokenizer): the text whose logits are compared; texts: more texts
    the reloaded tokenizer must split as the GGUF one does; marker: the file written last in
    hf_dir, holding marker_text (the GGUF's sha256).

    Memory (issue 72): the float32 weights are written one tensor at a time (stream_gguf_tensors),
    never held whole: from_pretrained(gguf_file=...) in float32 peaked at 8.6 GiB resident for the
    1.5B target. The saved folder is checked against transformers' own GGUF load in bfloat16 (half
    the memory): the same logits exactly, after the same rounding of the same float32 values, and
    no weight missing or left over. A wrong name, layout or config changes those logits."""
    # Lazy: importing the models' modules (registry, tests, CLI help) must not pay for torch/transformers.
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # per-tensor bars would bury the run's own output
    log.info("converting %s with transformers (GGUF -> float32 safetensors, one tensor at a time)", gguf.name)
    start = time.monotonic()
    source = dict(pretrained_model_name_or_path=str(gguf.parent), gguf_file=gguf.name)
    tokenizer = AutoTokenizer.from_pretrained(**source)
    config = AutoConfig.from_pretrained(**source)
    with torch.device("meta"):  # the layout and config alone: no weights
        lm = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    strip_gguf_quantizer(lm)
    prepare(lm, tokenizer)
    text = probe(tokenizer)
    probe_ids = tokenizer(text, return_tensors="pt").input_ids

    tmp = Path(tempfile.mkdtemp(dir=hf_dir.parent, prefix=".hf.", suffix=".partial"))
    try:
        stream_gguf_tensors(gguf, lm, tmp)
        log.info("wrote the float32 tensors in %.1f s", time.monotonic() - start)
        # What save_pretrained writes beside the weights: the config (with the class it loads
        # as and the weights' dtype) and the generation config.
        lm.config.architectures = [type(lm).__name__]
        lm.config.dtype = torch.float32
        lm.config.save_pretrained(tmp)
        lm.generation_config.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        del lm
        saved = AutoTokenizer.from_pretrained(tmp)
        for t in (text, *texts):
            if saved(t).input_ids != tokenizer(t).input_ids:
                raise RuntimeError(f"{tmp}: the reloaded tokenizer splits {t!r} differently from the GGUF one")
        check(tmp, tokenizer)
        verbosity = hf_logging.get_verbosity()
        hf_logging.set_verbosity_error()  # its note on packed GGUF kernels (not used: dequantised) is noise here
        try:
            reference = AutoModelForCausalLM.from_pretrained(**source, dtype=torch.bfloat16).eval()
        finally:
            hf_logging.set_verbosity(verbosity)
        with torch.no_grad():
            ref = reference(probe_ids).logits
        del reference
        from .local import read_local  # as runs load it: pread, not a map of the 6 GB float32 files

        info: dict[str, Any] = {}
        back = read_local(tmp, torch.bfloat16, loading_info=info)
        if back is None:
            raise RuntimeError(f"{tmp}: no safetensors checkpoint was written")
        left = {k: sorted(v) for k, v in info.items() if k in ("missing_keys", "unexpected_keys", "mismatched_keys") and v}
        if left:
            raise RuntimeError(f"{tmp}: the saved weights do not fit the model: {left}")
        if getattr(back.config, "quantization_config", None) is not None:
            raise RuntimeError(f"{tmp}: config.json still has a quantization_config")
        with torch.no_grad():
            logits = back.eval()(probe_ids).logits
        if not torch.equal(logits, ref):
            diff = (logits.float() - ref.float()).abs().max().item()
            raise RuntimeError(f"{tmp}: the reloaded model differs from the GGUF load (bf16, max |dlogit| = {diff:g})")
        del back
        make_shareable(tmp)
        (tmp / marker).write_text(marker_text + "\n")
        if hf_dir.exists():
            shutil.rmtree(hf_dir)  # stale or incomplete earlier conversion (no valid marker)
        os.replace(tmp, hf_dir)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    log.info("converted %s in %.1f s", gguf.name, time.monotonic() - start)


__all__ = ["convert_gguf", "file_lock", "in_child", "make_shareable", "stream_gguf_tensors", "strip_gguf_quantizer"]
