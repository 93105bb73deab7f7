"""Weight-only int8 / int4 linear layers for a CPU draft (pair.draft.quantize).

A decode forward on CPU streams every weight once, so its time is bytes read / bandwidth. The
embedded 0.5B draft reads ~1 GB per token in bf16; with int8 weights it reads half, with int4 a
quarter (plus the scales). The target is never quantised: lossless rules stay lossless because
the target alone decides every output token; only the draft's proposals (and so acceptance)
change.

Kernels: PyTorch's own weight-only CPU kernels, on weights converted once at load time:
  int8  aten._weight_int8pack_mm(x, w_int8 [out, in], scales [out])   per-output-channel, symmetric
  int4  aten._weight_int4pack_mm_for_cpu(x, w_packed, group, scales_and_zeros [in/group, out, 2])
        asymmetric per group of `group` input columns: w = (q - 8) * scale + zero, q in 0..15.
Both are fast only for a single row: measured on this project's 2-core CPU (AVX-512 BF16) over
the 0.5B draft's 24 layers of linear weights, 1 row, bf16 activations: oneDNN on prepacked bf16
weights 18-20 ms, int8 11.7-12 ms, int4 (group 64) 6.8-7.2 ms; at 6 rows int8 / int4 took 60+ ms
against 20 ms for oneDNN (they loop over rows). So a QuantizedLinear keeps, as its `weight`, the
DEQUANTISED weights in the model dtype (exactly the values the int kernel multiplies by), and
multi-row inputs (prefill, MLA's lookup checks, EAGLE's K+1 rows) go through F.linear or, inside
the decoding loop, oneDNN on a prepacked copy of that weight (decoding/cpu.py). Every path
computes with the same quantised weights, so the draft is one model whichever kernel runs.

Memory: the int weights plus the dequantised float copy (more than the float model alone; the
bytes a 1-row forward reads are the int ones). Tied embeddings (the Qwen drafts): the LM head
gets its own quantised copy, the input embedding stays in the model dtype.
"""

from __future__ import annotations

import functools
import logging
from typing import Any, Iterable

import torch
import torch.nn.functional as F

from ..errors import ConfigError

log = logging.getLogger(__name__)

QUANTIZE_MODES = ("none", "int8", "int4")
INT4_GROUP = 64  # input columns per int4 scale/zero (32/64/128 are what the kernel takes)
SMALL_ROWS = 1  # rows up to which the int kernel is used (measured: slower than oneDNN beyond)
# Activation dtypes the int kernels run for. fp32 activations: the int kernels were ~10x slower
# than oneDNN's fp32 matmul (the whole int4 draft forward 1.3 s against 0.5 s for the fp32
# TARGET on the embedded pair), so an fp32 quantised draft computes with the same quantised
# weights (dequantised) on oneDNN: exact lossless checks stay valid, just without the speed-up.
INT_KERNEL_DTYPES = (torch.bfloat16,)


def int_kernels_available() -> dict[str, bool]:
    ops = torch.ops.aten
    return {
        "int8": hasattr(ops, "_weight_int8pack_mm"),
        "int4": hasattr(ops, "_weight_int4pack_mm_for_cpu") and hasattr(ops, "_convert_weight_to_int4pack_for_cpu"),
    }


# Rows quantised at a time: each row's scales depend on that row alone, so blocks of rows give
# the same bits as the whole matrix, and the float32 temporaries (several per weight) stay a
# block's size. Whole, the 0.5B draft's LM head (151936 x 896) took ~2.5 GB of temporaries,
# the peak of the embedded pair's `make run` (issue 72).
ROW_BLOCK = 8192


def _quantize_int8(w: torch.Tensor, dtype: torch.dtype, block: int = ROW_BLOCK) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Symmetric per-output-channel int8. w: [out, in] -> (q int8 [out, in], scales [out] dtype, dequant [out, in] dtype)."""
    out_f, in_f = w.shape
    q = torch.empty(out_f, in_f, dtype=torch.int8)
    scales = torch.empty(out_f, dtype=dtype)
    deq = torch.empty(out_f, in_f, dtype=dtype)
    for a in range(0, out_f, block):
        wb = w[a:a + block].detach().float()  # [rows, in]
        sb = (wb.abs().amax(dim=1) / 127.0).clamp_min(1e-12).to(dtype)  # [rows], rounded to dtype first
        s = sb.float()
        qb = torch.round(wb / s[:, None]).clamp_(-128, 127).to(torch.int8)
        q[a:a + block], scales[a:a + block] = qb, sb
        deq[a:a + block] = (qb.float() * s[:, None]).to(dtype)
    return q, scales, deq


def _quantize_int4(w: torch.Tensor, dtype: torch.dtype, group: int, block: int = ROW_BLOCK) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Asymmetric per-group int4 in the CPU kernel's layout. w: [out, in] ->
    (packed uint8, scales_and_zeros [in/group, out, 2] dtype, dequant [out, in] dtype)."""
    out_f, in_f = w.shape
    n_groups = in_f // group
    q = torch.empty(out_f, in_f, dtype=torch.int32)  # the codes 0..15, as the packing op takes them
    sz = torch.empty(n_groups, out_f, 2, dtype=dtype)  # [G, out, 2]
    deq = torch.empty(out_f, in_f, dtype=dtype)
    for a in range(0, out_f, block):
        wg = w[a:a + block].detach().float().view(-1, n_groups, group)  # [rows, G, group]
        lo, hi = wg.amin(-1), wg.amax(-1)  # [rows, G]
        scale = ((hi - lo) / 15.0).clamp_min(1e-12).to(dtype).float()
        zero = (lo + 8.0 * scale).to(dtype).float()  # w = (q - 8) * scale + zero
        qb = torch.round((wg - zero[..., None]) / scale[..., None] + 8.0).clamp_(0, 15)  # [rows, G, group]
        deq[a:a + block] = ((qb - 8.0) * scale[..., None] + zero[..., None]).view(-1, in_f).to(dtype)
        q[a:a + block] = qb.view(-1, in_f).to(torch.int32)
        sz[:, a:a + block] = torch.stack([scale, zero], dim=-1).transpose(0, 1).to(dtype)
    packed = torch.ops.aten._convert_weight_to_int4pack_for_cpu(q, 1)
    return packed, sz, deq


class QuantizedLinear(torch.nn.Linear):
    """nn.Linear whose weight holds dequantised int8/int4 values; 1-row CPU inputs run the int
    kernel on the packed integers, everything else F.linear on the dequantised weight."""

    def __init__(self, lin: torch.nn.Linear, mode: str, group: int = INT4_GROUP) -> None:
        torch.nn.Module.__init__(self)
        self.in_features, self.out_features = lin.in_features, lin.out_features
        w = lin.weight
        dtype = w.dtype
        self.mode, self.group = mode, group
        if mode == "int8":
            qweight, qscales, deq = _quantize_int8(w, dtype)
        elif mode == "int4":
            qweight, qscales, deq = _quantize_int4(w, dtype, group)
        else:
            raise ConfigError(f"quantize={mode!r}: choose one of {list(QUANTIZE_MODES)}")
        # Buffers, so .to(device) moves them; not persistent: a state_dict stays the float layout.
        self.register_buffer("qweight", qweight, persistent=False)
        self.register_buffer("qscales", qscales, persistent=False)
        # A new Parameter (not lin.weight): a tied input embedding keeps its float weights.
        self.weight = torch.nn.Parameter(deq, requires_grad=False)
        self.bias = None if lin.bias is None else torch.nn.Parameter(lin.bias.detach().clone(), requires_grad=False)

    def int_forward(self, x: torch.Tensor) -> torch.Tensor | None:
        """The int kernel's output for a small CPU input, or None where it does not apply."""
        if (
            x.device.type != "cpu" or x.dtype != self.qscales.dtype or x.dtype not in INT_KERNEL_DTYPES
            or torch.is_grad_enabled()
        ):
            return None
        rows = x.numel() // self.in_features
        if rows > SMALL_ROWS:
            return None
        x2 = x.reshape(rows, self.in_features).contiguous()
        if self.mode == "int8":
            y = torch.ops.aten._weight_int8pack_mm(x2, self.qweight, self.qscales)
        else:
            y = torch.ops.aten._weight_int4pack_mm_for_cpu(x2, self.qweight, self.group, self.qscales)
        if self.bias is not None:
            y = y + self.bias
        return y.reshape(*x.shape[:-1], self.out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.int_forward(x)
        return F.linear(x, self.weight, self.bias) if y is None else y

    def extra_repr(self) -> str:
        g = f", group={self.group}" if self.mode == "int4" else ""
        return f"in_features={self.in_features}, out_features={self.out_features}, mode={self.mode}{g}"


def _quantizable(lin: torch.nn.Module, mode: str, group: int) -> bool:
    if type(lin) is not torch.nn.Linear or lin.weight.device.type != "cpu":
        return False
    if lin.weight.dtype not in (torch.float32, torch.bfloat16):
        return False
    if mode == "int4" and (lin.in_features % group or lin.out_features % 16):
        return False
    return True


@functools.cache
def _malloc_trim() -> Any:
    """glibc's malloc_trim, looked up once in the process's own symbols (None without glibc)."""
    import ctypes

    return getattr(ctypes.CDLL(None), "malloc_trim", None)


def _return_freed_heap() -> None:
    """Hand the heap's free pages back to the OS (glibc's malloc_trim; elsewhere nothing). The
    float32 temporaries of quantising (4 bytes per weight, per layer) are below glibc's mmap
    threshold, so their freed pages stayed in the process: ~1.4 GiB on the embedded 0.5B draft."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


def quantize_linears(
    model: torch.nn.Module, mode: str | None, *, group: int = INT4_GROUP, skip: Iterable[str] = ()
) -> int:
    """Swap every quantizable CPU nn.Linear of `model` (the LM head included) for a
    QuantizedLinear, in place, once. mode: "int8", "int4", or "none"/None (no-op).
    Returns how many layers were swapped. Layers whose qualified name starts with an entry of
    `skip` stay as they are."""
    if mode is None or mode == "none":
        return 0
    if mode not in QUANTIZE_MODES:
        raise ConfigError(f"quantize={mode!r}: choose one of {list(QUANTIZE_MODES)}")
    if not int_kernels_available()[mode]:
        raise ConfigError(f"quantize={mode!r}: this torch ({torch.__version__}) lacks the CPU weight-only {mode} kernel")
    skip = tuple(skip)
    targets = [
        (name, mod) for name, mod in model.named_modules()
        if _quantizable(mod, mode, group) and not (skip and name.startswith(skip))
    ]
    count = len(targets)
    while targets:
        # Popped, so that each float layer is freed as its replacement arrives: holding them all
        # until the end held the draft's float weights twice (+2 GiB at the embedded pair's peak).
        name, mod = targets.pop()
        parent_name, _, attr = name.rpartition(".")
        parent = model.get_submodule(parent_name) if parent_name else model
        setattr(parent, attr, QuantizedLinear(mod, mode, group))
        del mod
        if len(targets) % 8 == 0:
            _return_freed_heap()  # as it goes: holes between the layers' temporaries grew the heap by ~1 GiB
    cfg = getattr(model, "config", None)
    if cfg is not None and hasattr(cfg, "tie_word_embeddings"):
        # The head is no longer the embedding: a later tie_weights() must not re-tie them.
        cfg.tie_word_embeddings = False
    log.info("quantised %d linear layers to %s", count, mode)
    return count


def quantize_drafter(drafter: object, mode: str | None) -> int:
    """Quantise the networks a drafter runs (its draft model, an EAGLE-3 head; a wrapped
    drafter's too). Prompt lookup has none: a no-op. Returns how many layers were swapped."""
    if mode is None or mode == "none" or drafter is None:
        return 0
    # The drafter declares the networks it runs (Drafter.modules(): a draft model, an EAGLE-3
    # head, a wrapped drafter's); never the target, which an EAGLE-3 drafter only reads.
    return sum(quantize_linears(net, mode) for net in drafter.modules())
