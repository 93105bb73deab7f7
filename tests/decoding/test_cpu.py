"""The loop's prepacked-weight linears (decoding/cpu.py): same outputs as stock, switched on
only inside the block, following in-place weight changes, and lossless end to end; the packed GQA
attention against stock sdpa."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from transformers import DynamicCache

from loosespec_bench.decoding import generate
from loosespec_bench.decoding import cpu as cpu_paths
from loosespec_bench.decoding.cpu import PACKED_SDPA, cpu_fast_paths, packed_attention, prepack_available, prepacked_linears
from loosespec_bench.models.loading import load_model
from loosespec_bench.verifiers.spd import SPD

from ..helpers import make_drafter

pytestmark = pytest.mark.skipif(not prepack_available(), reason="this torch build has no oneDNN linear")


def _linears(model):
    return [m for m in model.modules() if type(m) is torch.nn.Linear]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("rows", [1, 6, 33])
@pytest.mark.parametrize("bias", [True, False])
def test_prepacked_linear_matches_stock(dtype, rows, bias):
    torch.manual_seed(0)
    lin = torch.nn.Linear(64, 200, bias=bias).to(dtype)
    x = torch.randn(1, rows, 64).to(dtype)  # [B, q, in]
    with torch.inference_mode():
        ref = F.linear(x, lin.weight, lin.bias)
        with prepacked_linears(lin) as n:
            assert n == 1 and "forward" in lin.__dict__
            got = lin(x)
    assert "forward" not in lin.__dict__  # stock forward again
    assert got.shape == ref.shape and got.dtype == ref.dtype
    tol = 1e-5 if dtype == torch.float32 else 1e-2
    torch.testing.assert_close(got.float(), ref.float(), rtol=tol, atol=tol)


@pytest.mark.parametrize("rows", [1, 2, 3, 16])
def test_bf16_without_native_kernels_goes_through_an_fp32_copy(monkeypatch, rows):
    """An AVX2-only CPU: oneDNN cannot reorder bf16 weights (it raised mid-run before). bf16
    layers are packed as fp32 copies for inputs of 3 rows or more; 1-2 rows keep the stock kernel."""
    monkeypatch.setattr(cpu_paths, "_bf16_packable", lambda: False)
    torch.manual_seed(1)
    lin = torch.nn.Linear(64, 96).to(torch.bfloat16)
    x = torch.randn(1, rows, 64).to(torch.bfloat16)  # [B, q, in]
    with torch.inference_mode():
        ref = F.linear(x.float(), lin.weight.float(), lin.bias.float())  # fp32 arithmetic on bf16 values
        with prepacked_linears(lin) as n:
            assert n == 1
            got = lin(x)
        assert cpu_paths._PACKED[lin][1].dtype == torch.float32  # the packed copy is fp32
    assert got.dtype == torch.bfloat16 and got.shape == ref.shape
    # One rounding of the fp32 result: exactly what the fp32 copy computes, rounded once.
    if rows >= cpu_paths._UPCAST_MIN_ROWS:
        torch.testing.assert_close(got.float(), ref.to(torch.bfloat16).float(), rtol=0, atol=0)
    else:  # the stock bf16 kernel
        torch.testing.assert_close(got.float(), ref.float(), rtol=1e-2, atol=1e-2)


def test_prepacked_weight_follows_in_place_changes():
    lin = torch.nn.Linear(32, 48)
    x = torch.randn(2, 32)
    with torch.inference_mode(), prepacked_linears(lin):
        lin(x)
    with torch.no_grad():
        lin.weight.mul_(-2.0)  # e.g. a test perturbing a copy of a model
    with torch.inference_mode():
        ref = F.linear(x, lin.weight, lin.bias)
        with prepacked_linears(lin):
            got = lin(x)
    torch.testing.assert_close(got, ref, rtol=1e-5, atol=1e-5)


def test_grad_mode_and_foreign_dtype_fall_back_to_stock():
    lin = torch.nn.Linear(16, 8)
    x = torch.randn(3, 16, requires_grad=True)
    with prepacked_linears(lin):
        y = lin(x)  # autograd on: the stock path, so backward works
        y.sum().backward()
        assert x.grad is not None
        with torch.inference_mode():
            out = lin(torch.randn(3, 16, dtype=torch.float64).float())
    assert out.shape == (3, 8)


def test_switch_off_with_env(monkeypatch):
    monkeypatch.setenv("LOOSESPEC_CPU_PREPACK", "0")
    lin = torch.nn.Linear(4, 4)
    with prepacked_linears(lin) as n:
        assert n == 0 and "forward" not in lin.__dict__


@pytest.mark.parametrize("drafter", ["model", "mla"])
def test_generate_identical_with_and_without_prepack(monkeypatch, drafter):
    """fp32 tiny pair: the loop's tokens are the same with the fast paths and without."""
    target = load_model("tiny:0", dtype="float32").model
    draft = load_model("tiny:1", dtype="float32").model
    prompt = torch.randint(0, 250, (30,), generator=torch.Generator().manual_seed(3))
    outs = []
    for env in ("beside", "0"):  # beside: the stock weights stay, and the same model runs both
        monkeypatch.setenv("LOOSESPEC_CPU_PREPACK", env)
        out = generate(target, prompt, verifier=SPD(), drafter=make_drafter(drafter, draft, k=4), max_new_tokens=24)
        outs.append(out.new_tokens)
        # Nothing stays switched after the loop.
        assert not any("forward" in m.__dict__ for m in _linears(target) + _linears(draft))
    assert outs[0] == outs[1]
    ar = generate(target, prompt, verifier=SPD(), max_new_tokens=24)
    assert ar.new_tokens == outs[0]


def test_cpu_fast_paths_skips_none():
    model = load_model("tiny:0", dtype="float32").model
    with cpu_fast_paths(model, None):
        assert model.config._attn_implementation != "sdpa"
        assert all("forward" in m.__dict__ for m in _linears(model))
    assert model.config._attn_implementation == "sdpa"


@pytest.mark.parametrize("mode", ["beside", "replace"])
def test_model_still_deepcopies_after_the_fast_paths(monkeypatch, mode):
    import copy

    monkeypatch.setenv("LOOSESPEC_CPU_PREPACK", mode)
    model = load_model("tiny:0", dtype="float32").model
    prompt = torch.randint(0, 250, (10,), generator=torch.Generator().manual_seed(0))
    generate(model, prompt, verifier=SPD(), max_new_tokens=3)
    clone = copy.deepcopy(model)  # no opaque packed tensor hangs off the modules
    if mode == "beside":
        assert all("forward" not in m.__dict__ for m in _linears(clone))
    with torch.inference_mode():  # the clone computes what the model does
        torch.testing.assert_close(clone(prompt[None]).logits, model(prompt[None]).logits, rtol=0, atol=0)


# ---- "replace": the packed copy instead of the stock weight (issue 72, memory) ------------------

def _decoder_linears(model):
    head = model.get_output_embeddings()
    return [m for m in model.modules() if type(m) is torch.nn.Linear and m is not head]


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("drafter", ["model", "mla"])
def test_replace_gives_the_tokens_and_steps_of_beside(monkeypatch, dtype, drafter):
    """The loop computes with the same packed copies in both modes: same tokens, same steps, on
    fresh models each time; replace leaves one copy (the decoder layers' stock weights empty)."""
    prompt = torch.randint(0, 250, (30,), generator=torch.Generator().manual_seed(5))
    outs = {}
    for mode in ("beside", "replace"):
        monkeypatch.setenv("LOOSESPEC_CPU_PREPACK", mode)
        target = load_model("tiny:0", dtype=dtype).model
        draft = load_model("tiny:1", dtype=dtype).model
        runs = [generate(target, prompt, verifier=SPD(), drafter=make_drafter(drafter, draft, k=4), max_new_tokens=24,
                         record_steps=True) for _ in range(2)]  # the second run: on the released model
        outs[mode] = [(r.new_tokens, r.drafted, r.accepted, r.step_records) for r in runs]
        emptied = [m.weight.numel() == 0 for m in _decoder_linears(target) + _decoder_linears(draft)]
        assert all(emptied) if mode == "replace" else not any(emptied)
        assert target.get_output_embeddings().weight.numel() > 0  # the head is never released
    assert outs["beside"] == outs["replace"]
    assert outs["replace"][0] == outs["replace"][1]


def test_replace_keeps_a_tied_head_and_its_embedding(monkeypatch):
    """A weight another tensor shares (a tied LM head / input embedding) keeps its storage."""
    monkeypatch.setenv("LOOSESPEC_CPU_PREPACK", "replace")
    model = load_model("tiny:0", dtype="float32").model
    model.lm_head.weight = model.model.embed_tokens.weight  # tie them, as Qwen's small models are
    before = model.model.embed_tokens.weight.clone()
    prompt = torch.randint(0, 250, (12,), generator=torch.Generator().manual_seed(1))
    generate(model, prompt, verifier=SPD(), max_new_tokens=4)
    assert torch.equal(model.model.embed_tokens.weight, before)
    assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()


def test_a_released_weight_refuses_what_its_packed_copy_cannot_do(monkeypatch):
    """After the loop a released layer computes inference on the CPU as before, and refuses
    autograd or another dtype with a line that says how to get the stock weight back."""
    monkeypatch.setenv("LOOSESPEC_CPU_PREPACK", "replace")
    model = load_model("tiny:0", dtype="float32").model
    prompt = torch.randint(0, 250, (12,), generator=torch.Generator().manual_seed(2))
    generate(model, prompt, verifier=SPD(), max_new_tokens=4)
    lin = _decoder_linears(model)[0]
    assert lin.weight.numel() == 0 and "forward" in lin.__dict__
    with torch.inference_mode():
        assert lin(torch.randn(2, lin.in_features)).shape == (2, lin.out_features)
    with pytest.raises(RuntimeError, match="LOOSESPEC_CPU_PREPACK=beside"):
        lin(torch.randn(2, lin.in_features, requires_grad=True))
    with pytest.raises(RuntimeError, match="oneDNN-packed copy"), torch.inference_mode():
        lin(torch.randn(2, lin.in_features, dtype=torch.float64))


def test_replace_releases_nothing_where_bf16_is_upcast(monkeypatch):
    """Without native bf16 kernels a bf16 layer's 1-2 row inputs use the stock weight: kept."""
    monkeypatch.setenv("LOOSESPEC_CPU_PREPACK", "replace")
    monkeypatch.setattr(cpu_paths, "_bf16_packable", lambda: False)
    model = load_model("tiny:0", dtype="bfloat16").model
    assert not cpu_paths.releasable(model)
    assert cpu_paths.releasable(load_model("tiny:0", dtype="float32").model)


@pytest.mark.parametrize("value", ["2", "yes", "replaced", ""])
def test_a_prepack_mode_nobody_declared_is_refused_before_a_model_loads(monkeypatch, value):
    from loosespec_bench.errors import ConfigError
    from loosespec_bench.settings.checks import check_environment

    monkeypatch.setenv("LOOSESPEC_CPU_PREPACK", value)
    with pytest.raises(ConfigError, match="LOOSESPEC_CPU_PREPACK=.* is not a prepacking mode; set it to one of replace, beside, off"):
        check_environment()


@pytest.mark.parametrize("value,mode", [("1", "beside"), ("0", "off"), ("Replace", "replace"), (" beside ", "beside")])
def test_the_prepack_values_people_used_before_still_mean_what_they_meant(monkeypatch, value, mode):
    from loosespec_bench.omp import prepack_mode

    monkeypatch.setenv("LOOSESPEC_CPU_PREPACK", value)
    assert prepack_mode() == mode


@pytest.mark.parametrize("q", [1, 3, 6, 17])
def test_packed_attention_matches_stock_sdpa(q):
    """The loop's packed-GQA attention (decode and verification shapes) equals stock sdpa, and
    the model is back on "sdpa" afterwards."""
    model = load_model("tiny:0", dtype="float32").model
    assert model.config._attn_implementation == "sdpa"
    ids = torch.randint(0, 250, (40,), generator=torch.Generator().manual_seed(0))
    x = torch.randint(0, 250, (1, q), generator=torch.Generator().manual_seed(1))
    outs = []
    with torch.inference_mode():
        for packed in (False, True):
            cache = DynamicCache(config=model.config)
            model(ids[None], cache=cache, use_cache=True)
            if packed:
                with packed_attention(model):
                    assert model.config._attn_implementation == PACKED_SDPA
                    outs.append(model(x, cache=cache, use_cache=True).logits)
            else:
                outs.append(model(x, cache=cache, use_cache=True).logits)
        # No cache at all (transformers then passes no mask: plain causality).
        plain = model(x).logits
        with packed_attention(model):
            packed_plain = model(x).logits
    assert model.config._attn_implementation == "sdpa"
    torch.testing.assert_close(outs[1], outs[0], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(packed_plain, plain, rtol=1e-5, atol=1e-5)


# -- fused sibling projections (q/k/v, gate/up) -----------------------------------------------
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_fused_projections_give_the_unfused_logits_bit_for_bit(monkeypatch, dtype):
    """Prefill, a 1-row decode and a 9-row verification: fused and unfused outputs are equal."""
    monkeypatch.setenv("LOOSESPEC_CPU_PREPACK", "beside")  # one model runs both ways: its stock weights stay
    model = load_model("tiny:0", dtype=dtype).model.eval()
    ids = torch.randint(0, 250, (1, 40), generator=torch.Generator().manual_seed(4))
    outs = {}
    for fuse in ("1", "0"):
        monkeypatch.setenv("LOOSESPEC_CPU_FUSE", fuse)
        with torch.inference_mode(), cpu_fast_paths(model) as _:
            n_groups = len(cpu_paths.fusion_groups(model))
            cache = DynamicCache(config=model.config)
            outs[fuse] = [model(ids[:, a:b], cache=cache).logits for a, b in ((0, 30), (30, 31), (31, 40))]
    assert n_groups == 0  # inside the block every member is switched, so none is left to fuse
    assert len(cpu_paths.fusion_groups(model)) == 2 * model.config.num_hidden_layers  # q/k/v and gate/up per layer
    assert all(torch.equal(a, b) for a, b in zip(outs["1"], outs["0"]))
    assert not any("forward" in m.__dict__ for m in _linears(model))


def test_a_member_called_with_another_input_computes_its_own_output():
    torch.manual_seed(5)
    attn = torch.nn.Module()
    attn.q_proj, attn.k_proj, attn.v_proj = torch.nn.Linear(16, 32), torch.nn.Linear(16, 8), torch.nn.Linear(16, 8)
    x, y = torch.randn(1, 3, 16), torch.randn(1, 3, 16)
    with torch.inference_mode(), cpu_paths.fused_linears(attn) as n:
        assert n == 3
        q = attn.q_proj(x)
        k_other = attn.k_proj(y)  # not the stashed input: computed afresh
        k, v = attn.k_proj(x), attn.v_proj(x)  # no longer stashed for x either: computed afresh
        q_again = attn.q_proj(x)  # q took its slice already: computed afresh
        for got, lin, inp in ((q, attn.q_proj, x), (k_other, attn.k_proj, y), (k, attn.k_proj, x), (v, attn.v_proj, x), (q_again, attn.q_proj, x)):
            torch.testing.assert_close(got, F.linear(inp, lin.weight, lin.bias), rtol=1e-5, atol=1e-5)
        assert attn.q_proj.forward.__closure__ is not None and cpu_paths._FUSED[attn][1] is not None


def test_fusion_skips_mismatched_and_subclassed_members_and_switches_off(monkeypatch):
    class LoRALinear(torch.nn.Linear):  # a subclass (quantised, LoRA) brings its own forward
        pass

    mlp = torch.nn.Module()
    mlp.gate_proj, mlp.up_proj = torch.nn.Linear(16, 32, bias=False), torch.nn.Linear(16, 32, bias=True)  # bias on one only
    assert cpu_paths.fusion_groups(mlp) == []
    mlp.up_proj = torch.nn.Linear(16, 32, bias=False)
    assert len(cpu_paths.fusion_groups(mlp)) == 1
    mlp.up_proj = LoRALinear(16, 32, bias=False)
    assert cpu_paths.fusion_groups(mlp) == []
    mlp.up_proj = torch.nn.Linear(16, 32, bias=False)
    monkeypatch.setenv("LOOSESPEC_CPU_FUSE", "0")
    with cpu_paths.fused_linears(mlp) as n:
        assert n == 0


def test_fused_weight_follows_in_place_changes():
    mlp = torch.nn.Module()
    mlp.gate_proj, mlp.up_proj = torch.nn.Linear(8, 12, bias=False), torch.nn.Linear(8, 12, bias=False)
    x = torch.randn(2, 8)
    with torch.inference_mode(), cpu_paths.fused_linears(mlp):
        mlp.gate_proj(x), mlp.up_proj(x)
    with torch.no_grad():
        mlp.up_proj.weight.mul_(-3.0)
    with torch.inference_mode(), cpu_paths.fused_linears(mlp):
        got = (mlp.gate_proj(x), mlp.up_proj(x))
    torch.testing.assert_close(got[1], F.linear(x, mlp.up_proj.weight), rtol=1e-5, atol=1e-5)
