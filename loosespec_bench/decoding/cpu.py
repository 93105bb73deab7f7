"""CPU fast paths for decode-time forwards: packed GQA attention, fused sibling projections and
prepacked linear weights.

They are switched on while the decoding loop runs (cpu_fast_paths), on CPU models. Attention is
restored afterwards. The linears' packed copies either replace the stock weights of the decoder
layers (LOOSESPEC_CPU_PREPACK=replace, the default: one copy of the weights in memory, and those
layers keep computing on the packed copy after the loop) or sit beside them (=beside: two copies,
and the model computes stock outside the loop, as transformers' generate() in the engine benchmark
needs). Neither changes the arithmetic a model does, only the kernel that does it: outputs agree
to float rounding (bit-identical in the bf16 linear checks of tests/decoding/test_cpu.py).
"""

from __future__ import annotations

import os
import weakref
from contextlib import ExitStack, contextmanager
from typing import Any, Callable, Iterable, Iterator

import torch
import torch.nn.functional as F
from transformers import AttentionInterface, PreTrainedModel
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

from ..models.quantize import QuantizedLinear
from ..omp import PREPACK_ENV, prepack_mode


# -- CPU attention for short queries ---------------------------------------------------------
# transformers' "sdpa" hands a 1-token query with grouped-query attention (GQA) to
# scaled_dot_product_attention(enable_gqa=True), whose CPU bf16 kernel is slow at decode: 2.65 ms
# per layer at 500 cached tokens for Qwen2.5-1.5B shapes, against 0.31 ms for the same attention
# with the g query heads that share a KV head packed as g rows of one query (9x). That was 13% of
# a target decode forward and 19% of a draft forward on the embedded pair (CPU, bf16). Packing is
# the same arithmetic (each row attends the same keys with its own mask row); only the kernel's
# summation order differs, so fp32 outputs agree to rounding. The loop switches CPU models that
# use stock "sdpa" to it while it runs and restores "sdpa" after; anything else (long queries:
# prefill; batches; padding masks with per-head rows; accelerators) goes to stock sdpa unchanged.
PACKED_SDPA = "loosespec_packed_sdpa"
_PACK_MAX_QUERY = 16  # verification forwards are K+1 tokens; prefill stays on the flash kernel


def packed_gqa_sdpa(
    module: torch.nn.Module,
    query: torch.Tensor,  # [B, Hq, q, D]
    key: torch.Tensor,  # [B, Hkv, kv, D]
    value: torch.Tensor,  # [B, Hkv, kv, D]
    attention_mask: torch.Tensor | None,  # [B, 1, q, kv] bool, or None when transformers skipped it
    dropout: float = 0.0,
    scaling: float | None = None,
    is_causal: bool | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    b, hq, q, d = query.shape
    hkv, kv = key.shape[1], key.shape[2]
    g = hq // hkv
    if (
        g == 1 or q > _PACK_MAX_QUERY or b != 1 or query.device.type != "cpu" or dropout
        or kwargs.get("position_bias") is not None or kwargs.get("cache") is not None
        or (attention_mask is not None and (attention_mask.dim() != 4 or attention_mask.shape[1] != 1))
    ):
        return sdpa_attention_forward(
            module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, is_causal=is_causal, **kwargs
        )
    # Query head h reads KV head h // g (repeat_kv's layout): rows [g * q] share one KV head.
    packed = query.reshape(b, hkv, g * q, d)  # [B, Hkv, g*q, D], row = (head in group, position)
    mask = None
    if attention_mask is not None:  # one mask for all heads: the same q rows for each head of a group
        mask = attention_mask[..., :kv].expand(b, 1, q, kv).repeat(1, 1, g, 1)  # [B, 1, g*q, kv]
    elif q > 1 and (is_causal if is_causal is not None else getattr(module, "is_causal", True)):
        # transformers leaves the mask out when plain causality is enough; the cached keys come
        # first, so query i sees keys 0..kv-q+i (bottom-right aligned).
        last = torch.arange(q, device=query.device)[:, None] + (kv - q)
        mask = (torch.arange(kv, device=query.device)[None, :] <= last).repeat(g, 1)  # [g*q, kv]
    out = F.scaled_dot_product_attention(packed, key, value, attn_mask=mask, scale=scaling)  # [B, Hkv, g*q, D]
    return out.reshape(b, hq, q, d).transpose(1, 2).contiguous(), None  # [B, q, Hq, D], as sdpa returns


AttentionInterface.register(PACKED_SDPA, packed_gqa_sdpa)
AttentionMaskInterface.register(PACKED_SDPA, sdpa_mask)  # the masks sdpa gets, unchanged


@contextmanager
def packed_attention(*models: torch.nn.Module | None) -> Iterator[None]:
    """Run CPU models that use stock "sdpa" on packed_gqa_sdpa inside the block, then restore."""
    switched = []
    for m in models:
        if not isinstance(m, PreTrainedModel):  # e.g. an EAGLE-3 head: its own attention code
            continue
        cfg = getattr(m, "config", None)
        if cfg is not None and getattr(cfg, "_attn_implementation", None) == "sdpa" and m.device.type == "cpu":
            cfg._attn_implementation = PACKED_SDPA
            switched.append(cfg)
    try:
        yield
    finally:
        for cfg in switched:
            cfg._attn_implementation = "sdpa"


# -- prepacked linear weights ------------------------------------------------------------------
# A decode forward on CPU is a chain of matrix-vector products that stream every weight from
# memory once, so its speed is the bandwidth the matmul kernel reaches. aten's bf16 linear on a
# plain [out, in] weight reached ~20 GB/s for the embedded 0.5B draft's layers (2 cores, AVX-512
# BF16) against ~40 GB/s for a plain sum over the same bytes; oneDNN's matmul on a weight
# reordered once into its blocked layout (the path torch.compile's CPU "freezing" takes) reached
# ~26 GB/s: 36 -> 27 ms per draft forward's layer matmuls, 1.35x at 6-token verification
# queries, 2x in fp32 (bench/, the engine benchmark, measures the effect end to end).
# Packed copies live beside the modules, not on them: an opaque oneDNN tensor attribute would
# break copy.deepcopy, pickling and state_dict walks of the model. Gone with the module.
_PACKED: "weakref.WeakKeyDictionary[torch.nn.Module, tuple[Any, torch.Tensor]]" = weakref.WeakKeyDictionary()

# Memory (issue 72): a packed copy beside each stock weight held two copies of the pair's weights
# (make run: 9.8 GiB anonymous, of which the packed copies 3.7). In "replace" mode (the default)
# a decoder-layer linear's stock weight is released once its packed copy exists: the Parameter
# keeps its dtype and device but holds no elements, and the module keeps its packed forward for
# good (after the loop too), so any other use of the weight fails loudly instead of computing on
# nothing. Not released, so that their readers keep working: the LM head (work counts read its
# shape, the sub-vocabulary and EAGLE heads read its rows), any weight whose storage another
# tensor of the model shares (a tied embedding), modules outside a transformers model (an EAGLE-3
# head), and bf16 weights on a CPU without bf16 kernels (their 1-2 row inputs use the stock one).
# A deep copy of a released model computes what the model does (its copied forwards read the
# original's packed copies) but has no weights of its own to change: load afresh for that.
_RELEASED: "weakref.WeakSet[torch.nn.Module]" = weakref.WeakSet()


def prepack_available() -> bool:
    return (
        prepack_mode() != "off"
        and torch.backends.mkldnn.is_available()
        and hasattr(torch.ops.mkldnn, "_reorder_linear_weight")
        and hasattr(torch.ops.mkldnn, "_linear_pointwise")
    )


def _bf16_packable() -> bool:
    """Whether oneDNN packs bf16 weights here: only on CPUs with native bf16 arithmetic
    (AVX-512 BW/VL/DQ or AVX-NE-CONVERT); on an AVX2-only CPU (e.g. AMD EPYC Milan)
    _reorder_linear_weight raises."""
    check = getattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported", None)
    return bool(check()) if check is not None else False


# Without native bf16 (AVX2), aten's bf16 linear is fast for one row (it streams half the bytes
# of fp32: 1.7 ms for a 1536 x 8960 layer on 2 Milan cores, bit-identical to fp32 arithmetic)
# but its time grows with every row: 1.6 / 3.0 / 4.3 / 8.6 ms at 1 / 2 / 3 / 6 rows, 23 ms at
# 16, 106 ms at 60, against 3.4 / 3.7 / 3.5 / 4.8, 7.9 and 15.6 ms for oneDNN's fp32 matmul on
# a packed fp32 copy of the same bf16 weights (the LM head 151936 x 896 crosses over at 3 rows
# too; a 60-token prefill of the 1.5B target took 11 s). So there a bf16 layer keeps the stock
# kernel below _UPCAST_MIN_ROWS rows (decode) and sends longer inputs (prefill, K+1-token
# verification, tree and MLA drafts) through the fp32 copy: exact products of bf16 values, fp32
# sums, one rounding to bf16 at the end; outputs differ from stock bf16 by a rounding (<= 2 ulp).
# The copy costs 4 bytes per weight (6 GB for the 1.5B target).
_UPCAST_MIN_ROWS = 3


def _packable(lin: torch.nn.Module) -> bool:
    # Exactly nn.Linear (quantised and LoRA subclasses bring their own forward), plain weights,
    # on the CPU, in a dtype oneDNN packs, with no accelerate hook that would move tensors.
    # Our own QuantizedLinear (pair.draft.quantize) too: its 1-row inputs keep the int kernel,
    # its multi-row inputs go to oneDNN on its dequantised weight, packed once like any other.
    w = getattr(lin, "weight", None)
    return (
        type(lin) in (torch.nn.Linear, QuantizedLinear)
        and isinstance(w, torch.Tensor)
        and w.device.type == "cpu"
        and w.dtype in (torch.float32, torch.bfloat16)
        and not hasattr(lin, "_hf_hook")
        and not lin._forward_hooks
        and not lin._forward_pre_hooks
        and lin not in _RELEASED  # its packed copy is final (and its forward stays)
        and w.numel() > 0  # a deep copy of a released layer: its copied forward computes on the original's packed copy
    )


def releasable(*models: torch.nn.Module | None) -> "weakref.WeakSet[torch.nn.Module]":
    """The linears of the models whose stock weight "replace" mode may release (see _RELEASED):
    packable linears inside a transformers model, not its LM head, sharing storage with nothing."""
    out: "weakref.WeakSet[torch.nn.Module]" = weakref.WeakSet()
    if prepack_mode() != "replace":
        return out
    for m in models:
        if not isinstance(m, PreTrainedModel):
            continue
        head = m.get_output_embeddings()
        owners: dict[int, int] = {}  # storage address -> how many tensors of the model use it
        for t in (*m.parameters(), *m.buffers()):
            if t.numel():
                owners[t.untyped_storage().data_ptr()] = owners.get(t.untyped_storage().data_ptr(), 0) + 1
        for mod in m.modules():
            if mod is head or not _packable(mod) or mod in _RELEASED:
                continue
            w = mod.weight
            upcast = w.dtype == torch.bfloat16 and not _bf16_packable()
            if not upcast and w.numel() and owners.get(w.untyped_storage().data_ptr()) == 1:
                out.add(mod)
    return out


def _release(lin: torch.nn.Module) -> None:
    """Drop lin's stock weight (its packed copy holds the values from now on)."""
    with torch.no_grad():
        lin.weight.data = torch.empty(0, dtype=lin.weight.dtype, device=lin.weight.device)
    _RELEASED.add(lin)


def _released_error(lin: torch.nn.Module) -> RuntimeError:
    return RuntimeError(
        f"{type(lin).__name__} ({lin.in_features} -> {lin.out_features}): its weight lives only in its oneDNN-packed copy "
        f"({PREPACK_ENV}=replace), which computes inference on the CPU in {lin.weight.dtype}; for autograd, another dtype "
        f"or device, load the model afresh with {PREPACK_ENV}=beside")


def _packed_weight(lin: torch.nn.Linear) -> torch.Tensor:
    """The oneDNN-blocked copy of lin.weight, made once and remade if the weight changes (a
    released weight has no other copy: its packed one is final)."""
    w = lin.weight
    key = (w.data_ptr(), w._version, tuple(w.shape), w.dtype)
    cached = _PACKED.get(lin)
    if cached is not None and lin in _RELEASED:
        return cached[1]
    if cached is None or cached[0] != key:
        with torch.no_grad():
            # bf16 without native kernels: an fp32 copy (see above), whose dtype tells the forward.
            src = w.detach().float() if w.dtype == torch.bfloat16 and not _bf16_packable() else w.detach()
            cached = (key, torch.ops.mkldnn._reorder_linear_weight(src, None))
        _PACKED[lin] = cached
    return cached[1]


def _packed_forward(lin: torch.nn.Linear, release: bool = False) -> Any:
    packed = _packed_weight(lin)
    if release:
        _release(lin)
    bias = lin.bias
    upcast = packed.dtype == torch.float32 and lin.weight.dtype == torch.bfloat16
    bias_f32 = bias.detach().float() if upcast and bias is not None else None
    int_forward = lin.int_forward if isinstance(lin, QuantizedLinear) else None

    def forward(x: torch.Tensor) -> torch.Tensor:  # x: [..., in] -> [..., out]
        if int_forward is not None:
            y = int_forward(x)  # 1-row input of a quantised layer: the int8/int4 kernel
            if y is not None:
                return y
        if x.dtype != lin.weight.dtype or x.device.type != "cpu" or torch.is_grad_enabled():
            if lin in _RELEASED:
                raise _released_error(lin)
            return F.linear(x, lin.weight, bias)  # mixed dtypes / autograd: the stock path
        if upcast:  # bf16 layer on a CPU without bf16 kernels
            if x.numel() < _UPCAST_MIN_ROWS * x.shape[-1]:
                return F.linear(x, lin.weight, bias)  # 1-2 rows: stock bf16 streams half the bytes
            y = torch.ops.mkldnn._linear_pointwise(x.float().contiguous(), packed, bias_f32, "none", [], "")
            return y.to(x.dtype)
        return torch.ops.mkldnn._linear_pointwise(x.contiguous(), packed, bias, "none", [], "")

    return forward


# -- fused sibling projections ---------------------------------------------------------------
# Linears that read the same input one after the other (an attention block's q/k/v, a gated MLP's
# gate/up) run as one oneDNN matmul over their weights stacked row-wise, packed once: 3 + 2 calls
# per layer become 1 + 1 (the 1.5B target: 197 matrix multiplies per token -> 141, the 0.5B
# draft's 169 -> 121), and the small k/v matrices (256 of 1536 output rows) stop paying a whole
# kernel launch and a thin, bandwidth-poor read each. Each output column is the same dot product
# over the same inputs as before; the module code is untouched: the group's first member called
# with an input computes all outputs, and the others, called next with that same tensor object,
# get their slice of it (any other input, or a second call, computes afresh), so a model whose
# forward does not call the members that way still gets correct outputs.
# The stacked copy replaces the members' own packed copies (no extra memory beyond prepacking).
_FUSE_GROUPS: tuple[tuple[str, ...], ...] = (("q_proj", "k_proj", "v_proj"), ("gate_proj", "up_proj"))
_FUSED: "weakref.WeakKeyDictionary[torch.nn.Module, tuple[Any, torch.Tensor, torch.Tensor | None]]" = weakref.WeakKeyDictionary()


def fuse_available() -> bool:
    return prepack_available() and os.environ.get("LOOSESPEC_CPU_FUSE", "1") != "0"


def _fusable(members: list[Any]) -> bool:
    # Plain nn.Linear members only (a quantised draft keeps its per-layer int kernels), one dtype,
    # one input width, biases on all or none.
    if not all(isinstance(m, torch.nn.Module) and type(m) is torch.nn.Linear and _packable(m) for m in members):
        return False
    w0 = members[0].weight
    return (
        all(m.weight.dtype == w0.dtype and m.weight.shape[1] == w0.shape[1] for m in members)
        and len({m.bias is None for m in members}) == 1
    )


def _fused_weight(owner: torch.nn.Module, members: list[torch.nn.Linear]) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The members' weights stacked [sum out, in] and packed by oneDNN, and their stacked bias;
    made once per owner and remade if any member's weight or bias changes."""
    key = tuple((t.data_ptr(), t._version) for m in members for t in (m.weight, m.bias) if t is not None)
    cached = _FUSED.get(owner)
    if cached is not None and all(m in _RELEASED for m in members):
        return cached[1], cached[2]  # the members' weights were released: the stacked copy is final
    if cached is None or cached[0] != key:
        with torch.no_grad():
            w = torch.cat([m.weight.detach() for m in members])  # [sum out, in]
            upcast = w.dtype == torch.bfloat16 and not _bf16_packable()
            packed = torch.ops.mkldnn._reorder_linear_weight(w.float() if upcast else w, None)
            del w  # only the packed copy stays
            bias = None
            if members[0].bias is not None:
                bias = torch.cat([m.bias.detach() for m in members])  # [sum out]
                bias = bias.float() if upcast else bias
        cached = (key, packed, bias)
        _FUSED[owner] = cached
    return cached[1], cached[2]


def _version(x: torch.Tensor) -> int:
    # An in-place write between two members' calls would make the stash stale; inference tensors
    # keep no version counter (-1: identity alone decides, as nothing writes them in the block).
    return -1 if x.is_inference() else x._version


class _FusedGroup:
    """One matmul for sibling linears; member i's forward returns its slice of the stacked output."""

    def __init__(self, owner: torch.nn.Module, members: list[torch.nn.Linear], release: bool = False) -> None:
        self.owner, self.members = owner, members
        if release:  # stack and pack now, then drop the members' own weights
            _fused_weight(owner, members)
            for m in members:
                _release(m)
        self.bounds = [0]
        for m in members:
            self.bounds.append(self.bounds[-1] + m.out_features)
        self._x: torch.Tensor | None = None  # the input the stash was computed from
        self._version = -2
        self._outs: list[torch.Tensor | None] = []  # member i's slice, until it is taken

    def _compute(self, x: torch.Tensor) -> None:
        packed, bias = _fused_weight(self.owner, self.members)
        dtype = self.members[0].weight.dtype
        if packed.dtype == torch.float32 and dtype == torch.bfloat16:  # no native bf16 (see _packed_forward)
            if x.numel() < _UPCAST_MIN_ROWS * x.shape[-1]:
                self._outs = [F.linear(x, m.weight, m.bias) for m in self.members]  # 1-2 rows: stock bf16
            else:
                y = torch.ops.mkldnn._linear_pointwise(x.float().contiguous(), packed, bias, "none", [], "").to(dtype)
                self._outs = [y[..., a:b] for a, b in zip(self.bounds, self.bounds[1:])]
        else:
            y = torch.ops.mkldnn._linear_pointwise(x.contiguous(), packed, bias, "none", [], "")  # [..., sum out]
            self._outs = [y[..., a:b] for a, b in zip(self.bounds, self.bounds[1:])]  # views, no copy
        self._x, self._version = x, _version(x)

    def forward_of(self, i: int) -> Any:
        lin = self.members[i]

        def forward(x: torch.Tensor) -> torch.Tensor:  # x: [..., in] -> [..., out_i]
            if x.dtype != lin.weight.dtype or x.device.type != "cpu" or torch.is_grad_enabled():
                if lin in _RELEASED:
                    raise _released_error(lin)
                return F.linear(x, lin.weight, lin.bias)
            if x is not self._x or _version(x) != self._version or self._outs[i] is None:
                self._compute(x)
            out, self._outs[i] = self._outs[i], None
            if all(o is None for o in self._outs):
                self._x = None  # every member took its slice: hold no tensors between calls
            assert out is not None
            return out

        return forward


def fusion_groups(*models: torch.nn.Module | None) -> list[tuple[torch.nn.Module, list[torch.nn.Linear]]]:
    """(owner, members) for every q/k/v and gate/up group the fused path takes in the models."""
    groups = []
    for m in models:
        if m is None:
            continue
        for owner in m.modules():
            for names in _FUSE_GROUPS:
                members = [getattr(owner, n, None) for n in names]
                if _fusable(members) and not any("forward" in lin.__dict__ for lin in members):
                    groups.append((owner, members))
    return groups


@contextmanager
def _instance_forwards(switches: Iterable[tuple[torch.nn.Module, Callable[..., Any]]]) -> Iterator[int]:
    """Give each module its instance-level forward inside the block and remove it afterwards,
    except from a module whose stock weight was released (it has no other forward now).
    A module that already has one (a model passed twice, or switched by an earlier fast path)
    keeps it. Yields how many modules were switched."""
    switched: list[torch.nn.Module] = []
    try:
        for mod, forward in switches:  # lazily: a module listed twice is seen switched the second time
            if "forward" not in mod.__dict__:
                mod.forward = forward
                switched.append(mod)
        yield len(switched)
    finally:
        for mod in switched:
            if mod not in _RELEASED:
                del mod.forward


def _fused_switches(models: tuple[torch.nn.Module | None, ...]) -> Iterator[tuple[torch.nn.Module, Callable[..., Any]]]:
    free = releasable(*models)
    for owner, members in fusion_groups(*models):
        if any("forward" in lin.__dict__ for lin in members):
            continue  # a model passed twice (a draft that is the target): switched already
        group = _FusedGroup(owner, members, release=all(m in free for m in members))
        for i, lin in enumerate(members):
            yield lin, group.forward_of(i)


@contextmanager
def fused_linears(*models: torch.nn.Module | None) -> Iterator[int]:
    """Run each fusable sibling group of the CPU models as one prepacked matmul inside the block
    (instance-level forwards on the members, removed afterwards). Yields how many linears."""
    with _instance_forwards(_fused_switches(models) if fuse_available() else ()) as n:
        yield n


@contextmanager
def prepacked_linears(*models: torch.nn.Module | None) -> Iterator[int]:
    """Route every packable nn.Linear of the CPU models to oneDNN on prepacked weights inside
    the block (an instance-level forward, removed afterwards). Yields how many were switched."""
    free = releasable(*models) if prepack_available() else weakref.WeakSet()
    switches = (
        (mod, _packed_forward(mod, release=mod in free))
        for m in models if m is not None
        for mod in m.modules() if _packable(mod) and "forward" not in mod.__dict__
    ) if prepack_available() else ()
    with _instance_forwards(switches) as n:
        yield n


@contextmanager
def cpu_fast_paths(*models: torch.nn.Module | None) -> Iterator[None]:
    """Both CPU fast paths for the models (None entries and accelerator models are skipped)."""
    # Models off the CPU are left alone by both (each checks where the weights live).
    cpu_models = [m for m in models if m is not None]
    with ExitStack() as stack:
        stack.enter_context(packed_attention(*cpu_models))
        stack.enter_context(fused_linears(*cpu_models))  # first: prepacking skips what it switched
        stack.enter_context(prepacked_linears(*cpu_models))
        yield
