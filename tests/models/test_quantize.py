"""Weight-only int8/int4 draft linears (models/quantize.py, pair.draft.quantize)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from loosespec_bench.decoding import generate
from loosespec_bench.decoding.cpu import prepacked_linears
from loosespec_bench.errors import ConfigError
from loosespec_bench.models.loading import load_model
from loosespec_bench.models import quantize
from loosespec_bench.models.quantize import QuantizedLinear, int_kernels_available, quantize_drafter, quantize_linears
from loosespec_bench.verifiers.spd import SPD

from ..helpers import make_drafter

MODES = [m for m, ok in int_kernels_available().items() if ok]
pytestmark = pytest.mark.skipif(not MODES, reason="this torch build has no weight-only CPU kernels")


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("rows", [1, 3])
def test_quantized_linear_close_to_float_and_to_its_dequantised_weight(mode, dtype, rows):
    torch.manual_seed(0)
    lin = torch.nn.Linear(128, 64, bias=True).to(dtype)
    q = QuantizedLinear(lin, mode)
    x = torch.randn(2, rows, 128, dtype=dtype)
    with torch.no_grad():
        ref = lin(x).float()
        y = q(x).float()
        deq = F.linear(x.float(), q.weight.float(), q.bias.float())  # what every path multiplies by
    scale = ref.abs().max()
    rtol = {"int8": 0.02, "int4": 0.2}[mode]  # quantisation error against the float layer
    assert (y - ref).abs().max() <= rtol * scale
    # The int kernel (1 row) and F.linear (more rows) compute with the same quantised weights.
    tol = 1e-4 if dtype == torch.float32 else 0.02
    assert (y - deq).abs().max() <= tol * scale
    assert q.weight.data_ptr() != lin.weight.data_ptr()


@pytest.mark.parametrize("mode", MODES)
def test_prepacked_loop_keeps_int_kernel_for_one_row(mode):
    torch.manual_seed(0)
    q = QuantizedLinear(torch.nn.Linear(128, 64, bias=False).to(torch.bfloat16), mode)
    x1, x6 = torch.randn(1, 128, dtype=torch.bfloat16), torch.randn(6, 128, dtype=torch.bfloat16)
    with torch.no_grad():
        assert q.int_forward(x1) is not None and q.int_forward(x6) is None
        assert q.int_forward(x1.float()) is None  # fp32: oneDNN on the dequantised weight
    with torch.no_grad():
        want1, want6 = q(x1), q(x6)
        with prepacked_linears(q) as n:
            assert n == 1
            got1, got6 = q(x1), q(x6)
    assert torch.equal(got1, want1)  # the int kernel, not the packed float path
    assert torch.allclose(got6.float(), want6.float(), atol=0.05)  # oneDNN on the dequantised weight
    assert "forward" not in q.__dict__


def test_quantize_linears_swaps_all_and_unties_the_head():
    model = load_model("tiny:1", dtype="float32").model
    n_lin = sum(type(m) is torch.nn.Linear for m in model.modules())
    assert quantize_linears(model, "int8") == n_lin
    assert isinstance(model.lm_head, QuantizedLinear)
    assert not any(type(m) is torch.nn.Linear for m in model.modules())
    assert quantize_linears(model, "none") == 0
    with pytest.raises(ConfigError):
        quantize_linears(model, "int3")


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("drafter", ["model", "mla"])
@pytest.mark.parametrize("draft_dtype", ["float32", "bfloat16"])  # bf16: the int kernels run
def test_greedy_spd_with_quantized_draft_identical_to_target_alone(mode, drafter, draft_dtype):
    """Lossless stays lossless: only the draft is quantised, the fp32 target decides every token."""
    target = load_model("tiny:0", dtype="float32").model
    draft = load_model("tiny:1", dtype=draft_dtype).model
    d = make_drafter(drafter, draft, k=4)
    assert quantize_drafter(d, mode) > 0
    prompt = torch.randint(0, 250, (30,), generator=torch.Generator().manual_seed(3))
    spd = generate(target, prompt, verifier=SPD(), drafter=d, max_new_tokens=32)
    ar = generate(target, prompt, verifier=SPD(), max_new_tokens=32)
    assert spd.new_tokens == ar.new_tokens


@pytest.mark.parametrize("mode", MODES)
def test_sampled_spd_with_quantized_draft_runs(mode):
    target = load_model("tiny:0", dtype="float32").model
    draft = load_model("tiny:1", dtype="float32").model
    d = make_drafter("model", draft, k=3)
    quantize_drafter(d, mode)
    prompt = torch.randint(0, 250, (20,), generator=torch.Generator().manual_seed(4))
    out = generate(target, prompt, verifier=SPD(), drafter=d, max_new_tokens=16, temperature=0.8,
                   generator=torch.Generator().manual_seed(0))
    assert len(out.new_tokens) == 16


# -- draft sub-vocabulary (models/subvocab.py, drafter.vocab_top) -----------------------------
def _subvocab_drafter(tmp_path, monkeypatch, top, drafter="model", mode="none"):
    from loosespec_bench.models.subvocab import SubVocabHead, restrict_draft_vocab
    from loosespec_bench.models.tiny import tiny_tokenizer

    monkeypatch.setenv("LOOSESPEC_CACHE_DIR", str(tmp_path))
    data = tmp_path / "data"
    data.mkdir()
    (data / "a.jsonl").write_text('{"q": "the cat sat on the mat", "a": "0123 abc"}\n')
    draft = load_model("tiny:1", dtype="float32").model
    d = make_drafter(drafter, draft, k=4)
    n = restrict_draft_vocab(d, top, tiny_tokenizer(), data)
    quantize_drafter(d, mode)
    assert isinstance(draft.get_output_embeddings(), SubVocabHead)
    return d, draft, n


def test_subvocab_head_maps_ids_back_to_the_full_vocabulary(tmp_path, monkeypatch):
    full = load_model("tiny:1", dtype="float32").model
    d, draft, n = _subvocab_drafter(tmp_path, monkeypatch, top=40)
    head = draft.get_output_embeddings()
    assert 40 <= n == head.ids.numel() < full.config.vocab_size
    from loosespec_bench.models.tiny import tiny_tokenizer

    counted = tiny_tokenizer()("the cat", add_special_tokens=False)["input_ids"]
    assert set(counted) <= set(head.ids.tolist())  # counted tokens rank first
    x = torch.randn(3, full.config.hidden_size)
    with torch.no_grad():
        want = full.lm_head(x)
        got = head(x)
    assert got.shape == want.shape
    assert torch.allclose(got[:, head.ids], want[:, head.ids], atol=1e-6)
    outside = torch.ones(want.shape[-1], dtype=torch.bool)
    outside[head.ids] = False
    assert torch.isneginf(got[:, outside]).all()
    assert torch.isin(got.argmax(-1), head.ids).all()


@pytest.mark.parametrize("temperature", [0.0, 0.9])
@pytest.mark.parametrize("mode", ["none", *MODES])
def test_spd_with_subvocab_draft_stays_lossless(tmp_path, monkeypatch, temperature, mode):
    target = load_model("tiny:0", dtype="float32").model
    d, _, _ = _subvocab_drafter(tmp_path, monkeypatch, top=64, mode=mode)
    prompt = torch.randint(0, 250, (30,), generator=torch.Generator().manual_seed(3))
    kw = dict(max_new_tokens=24, temperature=temperature)
    out = generate(target, prompt, verifier=SPD(), drafter=d, generator=torch.Generator().manual_seed(0), **kw)
    if temperature == 0:
        assert out.new_tokens == generate(target, prompt, verifier=SPD(), **kw).new_tokens
    else:  # q_i is 0 outside the sub-vocabulary: the rule still runs (the residual covers p there)
        assert len(out.new_tokens) == 24


def test_cli_run_with_quantized_subvocab_draft(tmp_path, monkeypatch):
    """pair.draft.quantize and drafter.vocab_top reach the draft through the app; lossless SPD
    still matches the target alone (fp32 tiny pair)."""
    import json

    from ..settings.test_config import _cli

    monkeypatch.setenv("LOOSESPEC_CACHE_DIR", str(tmp_path / "cache"))
    proc = _cli("experiment=smoke_tiny", "method=spd", f"pair.draft.quantize={MODES[0]}", "drafter.vocab_top=64",
                "dataset.limit=1", tmp_path=tmp_path)
    assert proc.returncode == 0, proc.stderr
    (summary,) = (tmp_path / "smoke_tiny").glob("*/summary.json")
    rows = [json.loads(ln) for ln in (summary.parent / "samples.jsonl").read_text().splitlines()]
    assert rows and all(r["output_ids"] == r["baseline"]["output_ids"] for r in rows)


@pytest.mark.parametrize("mode", ["int8", "int4"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_quantising_in_row_blocks_gives_the_whole_matrix_bits(mode, dtype):
    """Blocks of rows bound the float32 temporaries (issue 72: the draft's LM head whole was the
    make-run peak); each row's scales are its own, so every block size gives the same bits."""
    torch.manual_seed(11)
    w = (torch.randn(272, 128) * 0.05).to(dtype)  # 272: a multiple of 16 the int4 packing needs
    fn = quantize._quantize_int8 if mode == "int8" else (lambda w, d, block: quantize._quantize_int4(w, d, 64, block=block))
    whole = fn(w, dtype, block=10**9)
    for block in (1, 16, 100, 271):
        assert all(torch.equal(a, b) for a, b in zip(fn(w, dtype, block=block), whole)), block
