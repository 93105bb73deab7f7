"""One GGUF file made into an ordinary transformers folder, checked: the helper the embedded
Qwen pair (models/embedded.py) and SmolLM2 (models/smollm.py) share.

convert_gguf loads the GGUF with transformers in float32 (dequantised), lets the model's module
fix what its GGUF metadata gets wrong (`prepare`: EOS ids, the tokenizer's length), takes
reference logits on a probe, saves model and tokenizer into a sibling temporary folder, reloads
that folder the way users will and compares: the same logits exactly (torch.equal: the saved
folder is the same model, e.g. an untied lm_head kept, not just a loadable one), the same token
ids on every probe text, no quantization_config left, and the module's own checks (`check`:
chat template, EOS). Only then is the marker written and the folder renamed into place, so a
half-written folder never exists. file_lock and make_shareable are the cache's locking and
permissions, shared the same way; in_child runs a conversion in a process of its own (its
float32 weights leave with it) and says its peak resident memory.
"""

from __future__ import annotations

import contextlib
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


def convert_gguf(gguf: Path, hf_dir: Path, *, marker: str, marker_text: str, probe: Callable[[Any], str],
                 prepare: Callable[[Any, Any], None] = _nothing, check: Callable[[Path, Any], None] = _nothing,
                 texts: Sequence[str] = ()) -> None:
    """Dequantise `gguf` in float32 and save model + tokenizer as safetensors in `hf_dir`, checked
    (module docstring). probe(tokenizer): the text whose logits are compared; texts: more texts
    the reloaded tokenizer must split as the GGUF one does; marker: the file written last in
    hf_dir, holding marker_text (the GGUF's sha256)."""
    # Lazy: importing the models' modules (registry, tests, CLI help) must not pay for torch/transformers.
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # per-tensor bars would bury the run's own output
    log.info("converting %s with transformers (GGUF -> float32 safetensors)", gguf.name)
    start = time.monotonic()
    tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    lm = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32).eval()
    log.info("loaded GGUF in %.1f s", time.monotonic() - start)
    strip_gguf_quantizer(lm)
    prepare(lm, tokenizer)
    text = probe(tokenizer)
    probe_ids = tokenizer(text, return_tensors="pt").input_ids
    with torch.no_grad():
        ref = lm(probe_ids).logits

    tmp = Path(tempfile.mkdtemp(dir=hf_dir.parent, prefix=".hf.", suffix=".partial"))
    try:
        lm.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        del lm  # free the float32 weights (~7 GB for the target) before the reload check
        saved = AutoTokenizer.from_pretrained(tmp)
        for t in (text, *texts):
            if saved(t).input_ids != tokenizer(t).input_ids:
                raise RuntimeError(f"{tmp}: the reloaded tokenizer splits {t!r} differently from the GGUF one")
        check(tmp, tokenizer)
        back = AutoModelForCausalLM.from_pretrained(tmp, dtype=torch.float32)
        if getattr(back.config, "quantization_config", None) is not None:
            raise RuntimeError(f"{tmp}: config.json still has a quantization_config")
        with torch.no_grad():
            logits = back(probe_ids).logits
        if not torch.equal(logits, ref):
            diff = (logits - ref).abs().max().item()
            raise RuntimeError(f"{tmp}: the reloaded model differs from the GGUF load (max |dlogit| = {diff:g})")
        make_shareable(tmp)
        (tmp / marker).write_text(marker_text + "\n")
        if hf_dir.exists():
            shutil.rmtree(hf_dir)  # stale or incomplete earlier conversion (no valid marker)
        os.replace(tmp, hf_dir)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    log.info("converted %s in %.1f s", gguf.name, time.monotonic() - start)


__all__ = ["convert_gguf", "file_lock", "in_child", "make_shareable", "strip_gguf_quantizer"]
