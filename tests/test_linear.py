"""fp8_block_linear (SPEC §5) and the switches read at call time."""

from __future__ import annotations

import pytest
import torch

import sglang_fp8ext as fx
import sglang_fp8ext.ops as fx_ops
from sglang_fp8ext import switches
from conftest import (
    assert_gemm_contract,
    dense,
    gemm_ref_from,
    rand_act,
    rand_weight,
    rand_wscale,
)
from test_gemm import smallm_ref

FMTS = ["fp32", "e8m0"]


def bits(t):
    return dense(t).view(torch.int16)


def make(N, K, fmt, seed=0):
    return rand_weight(N, K, seed), rand_wscale(N, K, fmt == "e8m0", seed)


@pytest.fixture(autouse=True)
def _clean_switches(monkeypatch, tmp_path):
    for name in ("SGL_FP8_SMALLM", "SGLANG_ROCM_SMALLM_FP8_BS", "SGLANG_DSV4_DENSE_MXSCALE", "SGLANG_DSV4_DENSE_MXSCALE_SHAPES"):
        monkeypatch.delenv(name, raising=False)
    # no dispatch table (an empty directory): the paths below are the heuristic's on every device
    monkeypatch.setenv("SGL_FP8_CONFIG_DIR", str(tmp_path))


@pytest.mark.parametrize("fmt", FMTS)
@pytest.mark.parametrize("lead", [(5,), (2, 3), (1, 1, 4), (0,), (2, 0)])
@pytest.mark.parametrize("dt", [torch.bfloat16, torch.float16])
def test_linear_leading_dims(device, lead, fmt, dt):
    N, K = 272, 512
    w, ws = make(N, K, fmt, 1)
    x = rand_act((*lead, K), dt, seed=len(lead))
    bias = torch.randn(N).to(dt)
    for b in (None, bias):
        out = fx.fp8_block_linear(x.to(device), w.to(device), ws.to(device), bias=None if b is None else b.to(device))
        assert out.shape == (*lead, N) and out.dtype == dt
        x2 = x.reshape(-1, K)
        if x2.shape[0] == 0:
            continue
        ref = smallm_ref(x2, w, ws, b)
        assert_gemm_contract(out.reshape(-1, N), ref, f"fp8_block_linear {lead}")
        if device == "cpu":
            direct = fx.smallm_gemm(x2, w, ws, False, b)
            assert torch.equal(bits(out.reshape(-1, N)), bits(direct))


@pytest.mark.parametrize("fmt", FMTS)
@pytest.mark.parametrize("lead", [(4,), (2, 3)])
def test_linear_prequantized_from_rmsnorm(device, lead, fmt):
    N, K = 1536, 1024
    w, ws = make(N, K, fmt, 2)
    e8 = fmt == "e8m0"
    h = rand_act((*lead, K), torch.bfloat16, 3)
    g = (torch.rand(K) + 0.5).bfloat16()
    q, s = fx.rmsnorm_quant(h.to(device), g.to(device), 1e-6, e8)
    assert q.shape == (*lead, K) and s.shape == (*lead, K // 128)
    wd, wsd = w.to(device), ws.to(device)
    out = fx.fp8_block_linear(q, wd, wsd, input_scale=s)
    assert out.shape == (*lead, N) and out.dtype == torch.bfloat16  # default out dtype
    ref = gemm_ref_from(q.reshape(-1, K), s.reshape(-1, K // 128), w, ws)
    assert_gemm_contract(out.reshape(-1, N), ref, "prequantized")
    direct = fx.scaled_gemm(q.reshape(-1, K), s.reshape(-1, K // 128), wd, wsd)
    assert torch.equal(bits(out.reshape(-1, N)), bits(direct))
    # out_dtype, and the bias dtype choosing the output dtype
    out16 = fx.fp8_block_linear(q, wd, wsd, input_scale=s, out_dtype=torch.float16)
    assert out16.dtype == torch.float16
    assert_gemm_contract(out16.reshape(-1, N), ref, "prequantized fp16")
    b16 = torch.randn(N).half()
    outb = fx.fp8_block_linear(q, wd, wsd, input_scale=s, bias=b16.to(device))
    assert outb.dtype == torch.float16
    refb = gemm_ref_from(q.reshape(-1, K), s.reshape(-1, K // 128), w, ws, b16)
    assert_gemm_contract(outb.reshape(-1, N), refb, "prequantized + bias")


def test_linear_prequantized_add_rmsnorm_transposed_scale(device):
    """A transpose_scale scale (strides (1, M)) is accepted as input_scale too."""
    N, K = 272, 512
    w, ws = make(N, K, "fp32", 4)
    x = rand_act((6, K), torch.bfloat16, 5).to(device)
    q, s = fx.per1x128_quant(x, False, True)
    out = fx.fp8_block_linear(q, w.to(device), ws.to(device), input_scale=s)
    ref_out = fx.fp8_block_linear(x, w.to(device), ws.to(device))
    assert_gemm_contract(out, gemm_ref_from(q, s, w, ws), "transposed input_scale")
    if device == "cpu":
        assert torch.equal(bits(out), bits(ref_out))


def test_linear_prequantized_input_errors():
    """input_scale must have x's leading dims (flattening both to rows would pair q's rows with
    other rows' scales: a permuted input gave a wrong result before), x must be the FP8 q, and an
    output dtype taken from the bias must be one the op can write."""
    N, K = 256, 256
    w, ws = make(N, K, "fp32", 8)
    h = rand_act((2, 3, K), torch.bfloat16, 9)
    q, s = fx.per1x128_quant(h)
    for bad in (s.transpose(0, 1), s.reshape(3, 2, 2), s.reshape(6, 2)):
        with pytest.raises(ValueError, match=r"input_scale must be \[\.\.\., K/128\] with x's leading dims \(2, 3\)"):
            fx.fp8_block_linear(q, w, ws, input_scale=bad)
    # the same rows permuted consistently are fine
    out = fx.fp8_block_linear(q.transpose(0, 1), w, ws, input_scale=s.transpose(0, 1))
    assert torch.equal(bits(out), bits(fx.fp8_block_linear(q, w, ws, input_scale=s).transpose(0, 1)))
    with pytest.raises(ValueError, match="x must be the float8_e4m3fn q"):
        fx.fp8_block_linear(h, w, ws, input_scale=s)
    with pytest.raises(ValueError, match=r"takes the bias's dtype, torch.float32.*pass out_dtype"):
        fx.fp8_block_linear(q, w, ws, input_scale=s, bias=torch.zeros(N))


@pytest.mark.parametrize("fmt", FMTS)
def test_linear_reads_is_shuffled(device, fmt):
    """w_shuffled=None reads the weight's is_shuffled attribute; an explicit value overrides it.
    A weight read in its own layout meets the §3.4 contract, one read in the other does not. (On
    sm_90 plain and shuffled weights may take different kernels, so the two layouts are compared
    through the contract, and runs of one layout bitwise.)"""
    N, K = 272, 512
    w, ws = make(N, K, fmt, 6)
    x = rand_act((3, K), torch.bfloat16, 7).to(device)
    ref = smallm_ref(x.cpu(), w, ws)
    wd, wsd = w.to(device), ws.to(device)
    plain = fx.fp8_block_linear(x, wd, wsd)
    assert_gemm_contract(plain, ref, "plain")
    ws_sh = fx.shuffle_weight(wd)
    assert ws_sh.is_shuffled
    shuffled = fx.fp8_block_linear(x, ws_sh, wsd, w_shuffled=True)
    assert_gemm_contract(shuffled, ref, "shuffled")
    assert torch.equal(bits(fx.fp8_block_linear(x, ws_sh, wsd)), bits(shuffled))  # w_shuffled=None reads the attribute
    # the same bytes without the attribute are read as plain: a different (wrong) result
    bare = ws_sh.view(torch.uint8).view(ws_sh.dtype)
    assert not getattr(bare, "is_shuffled", False)
    with pytest.raises(AssertionError):
        assert_gemm_contract(fx.fp8_block_linear(x, bare, wsd), ref, "shuffled bytes read as plain")
    assert torch.equal(bits(fx.fp8_block_linear(x, bare, wsd, w_shuffled=True)), bits(shuffled))
    # an explicit w_shuffled=False overrides the attribute
    assert torch.equal(bits(fx.fp8_block_linear(x, ws_sh, wsd, w_shuffled=False)), bits(fx.fp8_block_linear(x, bare, wsd)))
    # an unshuffled weight carries is_shuffled=False
    un = fx.unshuffle_weight(ws_sh)
    assert torch.equal(bits(fx.fp8_block_linear(x, un, wsd)), bits(plain))
    # pre-quantized input also reads the attribute
    q, s = fx.per1x128_quant(x, fmt == "e8m0")
    pre_shuffled = fx.fp8_block_linear(q, ws_sh, wsd, input_scale=s)
    assert torch.equal(bits(pre_shuffled), bits(fx.fp8_block_linear(q, ws_sh, wsd, input_scale=s, w_shuffled=True)))
    assert_gemm_contract(pre_shuffled, ref, "pre-quantized, shuffled")
    assert_gemm_contract(fx.fp8_block_linear(q, wd, wsd, input_scale=s), ref, "pre-quantized, plain")


def _spy(monkeypatch):
    calls = {"smallm_gemm": 0, "scaled_gemm": 0, "per1x128_quant": 0}
    for name in list(calls):
        orig = getattr(fx_ops, name)

        def wrapper(*a, __orig=orig, __name=name, **k):
            calls[__name] += 1
            return __orig(*a, **k)

        monkeypatch.setattr(fx_ops, name, wrapper)
    return calls


@pytest.mark.parametrize(
    "env",
    [
        {"SGL_FP8_SMALLM": "0"},
        {"SGLANG_ROCM_SMALLM_FP8_BS": "0"},
        {"SGL_FP8_SMALLM": "false"},
        {"SGL_FP8_SMALLM": "off"},
    ],
    ids=lambda e: "-".join(f"{k}={v}" for k, v in e.items()),
)
@pytest.mark.parametrize("fmt", FMTS)
def test_switch_off_same_numbers_via_unfused(device, monkeypatch, env, fmt):
    # N not a multiple of 128: cuBLASLt (scaled_mm) is never eligible, so with the fused kernel
    # off every device takes quant + scaled_gemm, and with it on M = 10 is fused everywhere
    N, K = 1040, 1024
    w, ws = make(N, K, fmt, 8)
    x = rand_act((2, 5, K), torch.bfloat16, 9).to(device)
    wd, wsd = w.to(device), ws.to(device)
    bias = torch.randn(N).bfloat16().to(device)
    calls = _spy(monkeypatch)
    fused = fx.fp8_block_linear(x, wd, wsd, bias=bias)
    assert calls["smallm_gemm"] == 1 and calls["scaled_gemm"] == 0, calls
    for k, v in env.items():
        monkeypatch.setenv(k, v)  # read at call time: no re-import
    assert not switches.fused_smallm_enabled()
    unfused = fx.fp8_block_linear(x, wd, wsd, bias=bias)
    assert calls["smallm_gemm"] == 1 and calls["scaled_gemm"] == 1 and calls["per1x128_quant"] == 1, calls
    assert unfused.shape == fused.shape and unfused.dtype == fused.dtype
    ref = smallm_ref(x.reshape(-1, K).cpu(), w, ws, bias.cpu())
    assert_gemm_contract(unfused.reshape(-1, N), ref, "unfused")
    if device == "cpu":
        assert torch.equal(bits(unfused), bits(fused))
    for k in env:
        monkeypatch.delenv(k)
    assert switches.fused_smallm_enabled()
    fx.fp8_block_linear(x, wd, wsd, bias=bias)
    assert calls["smallm_gemm"] == 2


@pytest.mark.parametrize("value", ["1", "true", "on", ""])
def test_switch_on_values_keep_fused(monkeypatch, value):
    monkeypatch.setenv("SGL_FP8_SMALLM", value)
    assert switches.fused_smallm_enabled()
    assert fx.linear.select_path(torch.device("cpu"), 4, 256, 256) == "fused"


def test_mxscale_switches(monkeypatch):
    assert not switches.mxscale_enabled_for(4096, 1024)
    monkeypatch.setenv("SGLANG_DSV4_DENSE_MXSCALE", "1")
    assert switches.mxscale_enabled_for(4096, 1024) and switches.mxscale_enabled_for(1, 1)
    monkeypatch.setenv("SGLANG_DSV4_DENSE_MXSCALE_SHAPES", "4096x1024, 8192x1024")
    assert switches.mxscale_enabled_for(4096, 1024) and switches.mxscale_enabled_for(8192, 1024)
    assert not switches.mxscale_enabled_for(1024, 4096)
    monkeypatch.setenv("SGLANG_DSV4_DENSE_MXSCALE", "0")
    assert not switches.mxscale_enabled_for(4096, 1024)
    monkeypatch.setenv("SGLANG_DSV4_DENSE_MXSCALE", "1")
    monkeypatch.setenv("SGLANG_DSV4_DENSE_MXSCALE_SHAPES", "4096by1024")
    with pytest.raises(ValueError, match="SGLANG_DSV4_DENSE_MXSCALE_SHAPES"):
        switches.mxscale_enabled_for(4096, 1024)
    # SGLang's own parser of this variable takes "N:K" items and "all": one setting serves both
    monkeypatch.setenv("SGLANG_DSV4_DENSE_MXSCALE_SHAPES", "2048:7168, 7168x2048")
    assert switches.mxscale_enabled_for(2048, 7168) and switches.mxscale_enabled_for(7168, 2048)
    assert not switches.mxscale_enabled_for(7168, 7168)
    monkeypatch.setenv("SGLANG_DSV4_DENSE_MXSCALE_SHAPES", " All ")
    assert switches.mxscale_enabled_for(7168, 7168)


@pytest.mark.parametrize("M", [1, 32, 33, 100])
def test_linear_m_range(device, M):
    """Every M is correct (the GPU policy switches path above 32)."""
    N, K = 2112, 1024
    w, ws = make(N, K, "fp32", 10)
    x = rand_act((M, K), torch.bfloat16, M)
    out = fx.fp8_block_linear(x.to(device), w.to(device), ws.to(device))
    assert_gemm_contract(out, smallm_ref(x, w, ws), f"M={M}")


@pytest.mark.filterwarnings("ignore:.*autograd kernel was not registered")
def test_linear_under_grad_mode_is_inference_only(device):
    """docs/integration.md: with inputs that require grad the forward gives the same bits as under
    no_grad, and a backward through the ops yields no gradient for their inputs."""
    N, K = 272, 512
    w, ws = make(N, K, "fp32", 13)
    w, ws = w.to(device), ws.to(device)
    x = rand_act((5, K), torch.bfloat16, 13).to(device)
    bias = rand_act((N,), torch.bfloat16, 14).to(device)
    with torch.no_grad():
        expected = fx.fp8_block_linear(x, w, ws, bias=bias)
    xg, bg = x.clone().requires_grad_(), bias.clone().requires_grad_()
    out = fx.fp8_block_linear(xg, w, ws, bias=bg)
    assert torch.equal(bits(out.detach()), bits(expected))
    out.float().sum().backward()
    assert xg.grad is None and bg.grad is None


def test_linear_out_dtype_rules():
    N, K = 48, 256
    w, ws = make(N, K, "fp32", 11)
    x = rand_act((2, K), torch.float16, 1)
    assert fx.fp8_block_linear(x, w, ws, out_dtype=torch.float16).dtype == torch.float16
    with pytest.raises((ValueError, RuntimeError), match="out_dtype"):
        fx.fp8_block_linear(x, w, ws, out_dtype=torch.bfloat16)


def test_linear_errors_name_arguments():
    N, K = 48, 256
    w, ws = make(N, K, "fp32", 12)
    x = rand_act((2, K), torch.bfloat16, 1)
    with pytest.raises((RuntimeError, ValueError), match=r"\bw\b|weight"):
        fx.fp8_block_linear(x, w.view(torch.uint8), ws)
    with pytest.raises((RuntimeError, ValueError), match=r"w_scale|weight_scale"):
        fx.fp8_block_linear(x, w, ws[:, :1])
    with pytest.raises((RuntimeError, ValueError), match=r"\bx\b|\bK\b"):
        fx.fp8_block_linear(x[:, :200], w[:, :200], ws)
    q, s = fx.per1x128_quant(x, True)
    with pytest.raises((RuntimeError, ValueError), match=r"x_scale|input_scale|w_scale|weight_scale"):
        fx.fp8_block_linear(q, w, ws, input_scale=s)  # e8m0 activations, fp32 weight scales


def test_linear_aiter_path_on_rocm_with_a_stand_in(monkeypatch):
    """On a ROCm build with AITER installed, M > 32 with a shuffled weight and fp32 scales goes to
    AITER's bpreshuffle GEMM, handed the shuffled weight and column-major activation scales.
    Checked with a stand-in module (no AMD GPU here): the stand-in computes the SPEC GEMM."""
    calls = []

    class StandIn:
        @staticmethod
        def gemm_a8w8_blockscale_bpreshuffle(q, w, x_scale, w_scale, dtype):
            calls.append((x_scale.stride(), getattr(w, "is_shuffled", None)))
            return fx.scaled_gemm(q, x_scale, fx.unshuffle_weight(w), w_scale, False, dtype)

    N, K, M = 48, 256, 40
    w, ws = make(N, K, "fp32", 21)
    x = rand_act((M, K), torch.bfloat16, 3)
    bias = rand_act((N,), torch.bfloat16, 4, outliers=False)
    dev = torch.device("cuda")  # the policy only; the call below runs on the CPU
    monkeypatch.setattr(torch.version, "hip", "7.0", raising=False)
    monkeypatch.setattr(fx.linear, "_aiter_checked", True)
    monkeypatch.setattr(fx.linear, "_aiter_module", StandIn)
    assert fx.linear.select_path(dev, M, N, K, shuffled=True) == "aiter"
    assert fx.linear.select_path(dev, M, N, K, shuffled=False) == "unfused"  # plain weight
    assert fx.linear.select_path(dev, M, N, K, shuffled=True, e8m0=True) == "unfused"
    assert fx.linear.select_path(dev, 8, N, K, shuffled=True) == "fused"
    monkeypatch.setattr(fx.linear, "choose", lambda *a, **k: fx.dispatch.Choice("aiter", None, "heuristic", "test"))
    out = fx.fp8_block_linear(x, fx.shuffle_weight(w), ws, bias=bias)
    assert calls == [((1, M), True)]
    assert_gemm_contract(out, gemm_ref_from(*fx.per1x128_quant(x), w, ws, bias), "aiter stand-in")


def test_linear_without_aiter_on_rocm_takes_the_unfused_path(monkeypatch):
    # The device facts are read (and cached) before torch.version.hip is faked: on a CUDA machine
    # torch's device_count() would otherwise take its ROCm branch and fail (seen with 2 GPUs).
    if torch.cuda.is_available():
        fx.linear.device_info(torch.device("cuda"))
    monkeypatch.setattr(torch.version, "hip", "7.0", raising=False)
    monkeypatch.setattr(fx.linear, "_aiter_checked", True)
    monkeypatch.setattr(fx.linear, "_aiter_module", None)
    assert fx.linear.select_path(torch.device("cuda"), 64, 48, 256, shuffled=True) == "unfused"
