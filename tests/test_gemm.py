"""sgl_fp8::smallm_gemm and sgl_fp8::scaled_gemm against the float64 model of SPEC §3.4.

Accuracy contract per row: ||out[m] - ref[m]|| / ||ref[m]|| <= 4e-3 with ref evaluated in float64
from the same q and scales (the model's own bit-exact quant for smallm_gemm). Separately:
smallm_gemm == per1x128_quant + scaled_gemm, bitwise run-to-run reproducibility, shuffled and
plain weights giving identical results, fp32 and e8m0 scales, bias, bf16/fp16.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import sglang_fp8ext as fx
import spec_model as sm
from sglang_fp8ext.kernel_config import Engine, KernelConfig
from conftest import (
    ACT,
    E8M0,
    FP8,
    act_bits,
    assert_gemm_contract,
    dense,
    gemm_ref_from,
    rand_act,
    rand_wscale,
    rand_weight,
    scale_vals,
    u8,
)

SPEC_SHAPES = [(5120, 4096), (4608, 4096), (4096, 2048), (8192, 1024), (4096, 1024), (1536, 4096), (2112, 7168)]
FMTS = ["fp32", "e8m0"]


def smallm_ref(x: torch.Tensor, w: torch.Tensor, ws: torch.Tensor, bias=None) -> np.ndarray:
    """§3.4 for smallm_gemm: the model's quant of x (ue8m0 iff ws is e8m0), then the float64 GEMM."""
    ue8m0 = ws.dtype == E8M0
    dt = "bf16" if x.dtype == torch.bfloat16 else "fp16"
    q, xs = sm.quant_act_bits(act_bits(x), dt, ue8m0)
    b = None if bias is None else bias.detach().cpu().double().numpy()
    return sm.gemm_ref(q, sm.scale_values(xs, ue8m0), u8(w), scale_vals(ws), b)


def case(N, K, M, dt, fmt, seed=0):
    x = rand_act((M, K), ACT[dt], seed=seed + M)
    w = rand_weight(N, K, seed)
    ws = rand_wscale(N, K, fmt == "e8m0", seed)
    return x, w, ws


def on(device, *ts):
    return [None if t is None else t.to(device) for t in ts]


def check_smallm(device, x, w, ws, bias=None, what=""):
    """Run smallm_gemm on `device`, check the contract against the model, the equivalence with
    quant + scaled_gemm, and reproducibility. Returns the output (on the CPU)."""
    xd, wd, wsd, bd = on(device, x, w, ws, bias)
    out = fx.smallm_gemm(xd, wd, wsd, False, bd)
    M, N = x.shape[0], w.shape[0]
    assert out.shape == (M, N) and out.dtype == x.dtype and out.device.type == torch.device(device).type
    ref = smallm_ref(x, w, ws, bias)
    assert_gemm_contract(out, ref, f"smallm_gemm {what}")
    # bitwise reproducible
    out2 = fx.smallm_gemm(xd, wd, wsd, False, bd)
    assert torch.equal(dense(out).view(torch.int16), dense(out2).view(torch.int16)), "smallm_gemm not reproducible"
    # the same numerics as the two-op path
    q, xs = fx.per1x128_quant(xd, ue8m0=ws.dtype == E8M0)
    out_u = fx.scaled_gemm(q, xs, wd, wsd, False, x.dtype, bd)
    if device == "cpu":
        assert torch.equal(dense(out).view(torch.int16), dense(out_u).view(torch.int16)), (
            "smallm_gemm differs from per1x128_quant + scaled_gemm"
        )
    else:
        assert_gemm_contract(out_u, ref, f"quant+scaled_gemm {what}")
    return out.cpu()


# ---- the SPEC §6 shapes ---------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("M", [1, 7, 13, 32])  # 13: sm_90 plans of 9-16 tokens (5120x4096, 4608x4096: a K split of 4)
@pytest.mark.parametrize("fmt", FMTS)
@pytest.mark.parametrize("N,K", SPEC_SHAPES, ids=[f"{n}x{k}" for n, k in SPEC_SHAPES])
def test_smallm_spec_shapes(device, N, K, fmt, M):
    x, w, ws = case(N, K, M, "bf16", fmt)
    check_smallm(device, x, w, ws, what=f"N={N} K={K} M={M} {fmt}")


@pytest.mark.parametrize("fmt", FMTS)
@pytest.mark.parametrize("N,K", SPEC_SHAPES, ids=[f"{n}x{k}" for n, k in SPEC_SHAPES])
def test_smallm_spec_shapes_fp16_bias(device, N, K, fmt):
    x, w, ws = case(N, K, 3, "fp16", fmt, seed=1)
    bias = (torch.randn(N) * 4).half()
    check_smallm(device, x, w, ws, bias, what=f"fp16 bias N={N} K={K} {fmt}")


# ---- other shapes ---------------------------------------------------------------------------------

OTHER = [
    (16, 128, 1),
    (16, 128, 32),
    (48, 256, 5),
    (144, 384, 9),
    (2112, 256, 2),
    (272, 1024, 17),
    (128, 128, 31),
    (256, 640, 33),
    (48, 512, 100),
    (2112, 128, 64),
]


@pytest.mark.parametrize("dt", ["bf16", "fp16"])
@pytest.mark.parametrize("fmt", FMTS)
@pytest.mark.parametrize("N,K,M", OTHER, ids=[f"N{n}-K{k}-M{m}" for n, k, m in OTHER])
def test_smallm_other_shapes(device, N, K, M, fmt, dt):
    x, w, ws = case(N, K, M, dt, fmt, seed=2)
    bias = (torch.randn(N) * 2).to(ACT[dt]) if M % 2 else None
    check_smallm(device, x, w, ws, bias, what=f"N={N} K={K} M={M} {fmt} {dt}")


@pytest.mark.parametrize("fmt", FMTS)
@pytest.mark.parametrize("dt", ["bf16", "fp16"])
def test_gemm_m0(device, fmt, dt):
    N, K = 48, 256
    x, w, ws = case(N, K, 0, dt, fmt)
    xd, wd, wsd = on(device, x, w, ws)
    out = fx.smallm_gemm(xd, wd, wsd)
    assert out.shape == (0, N) and out.dtype == ACT[dt]
    q, s = fx.per1x128_quant(xd, fmt == "e8m0")
    out = fx.scaled_gemm(q, s, wd, wsd, out_dtype=ACT[dt])
    assert out.shape == (0, N) and out.dtype == ACT[dt]
    out = fx.scaled_gemm(q, s, wd, wsd)
    assert out.shape == (0, N) and out.dtype == torch.bfloat16


# ---- layouts, reproducibility --------------------------------------------------------------------


def _plain_by_shuffled_kernel(xd, wd, wsd, b):
    """The plain weight read by the kernel that reads shuffled weights. On sm_90 plain weights take
    the wgmma engine up to 32 tokens (it reads plain weights only) and shuffled ones the general
    engine at every M; ``engine=general`` forces the same choice for plain ones. Elsewhere (gfx950,
    the CPU) the engine means nothing and both layouts share their kernels."""
    config = KernelConfig(engine=Engine.GENERAL).op_args()
    return torch.ops.sgl_fp8._smallm_gemm_configured(xd, wd, wsd, False, b, config)


@pytest.mark.parametrize("fmt", FMTS)
@pytest.mark.parametrize("N,K,M", [(16, 128, 1), (48, 256, 7), (2112, 7168, 4), (4096, 1024, 32), (256, 512, 40)])
def test_shuffled_equals_plain(device, N, K, M, fmt):
    """Shuffled and plain weights give the same bits when one kernel reads both (the K
    permutation cancels in each 128-block); every layout and kernel meets the §3.4 contract."""
    x, w, ws = case(N, K, M, "bf16", fmt, seed=3)
    bias = torch.randn(N).bfloat16()
    xd, wd, wsd, bd = on(device, x, w, ws, bias)
    wsh = fx.shuffle_weight(wd)
    # the shuffled tensor is really a different byte order (a test that could not fail otherwise)
    assert not torch.equal(wsh.view(torch.uint8), wd.view(torch.uint8))
    for b in (None, bd):
        ref = smallm_ref(x, w, ws, None if b is None else bias)
        plain = fx.smallm_gemm(xd, wd, wsd, False, b)
        shuf = fx.smallm_gemm(xd, wsh, wsd, True, b)
        same_kernel = _plain_by_shuffled_kernel(xd, wd, wsd, b)
        assert torch.equal(dense(same_kernel).view(torch.int16), dense(shuf).view(torch.int16)), \
            "smallm_gemm: shuffled != plain read by the same kernel"
        assert_gemm_contract(plain, ref, "plain")
        assert_gemm_contract(shuf, ref, "shuffled")
        q, s = fx.per1x128_quant(xd, fmt == "e8m0")
        p2 = fx.scaled_gemm(q, s, wd, wsd, False, None, b)
        s2 = fx.scaled_gemm(q, s, wsh, wsd, True, None, b)
        assert_gemm_contract(p2, ref, "scaled_gemm plain")
        assert_gemm_contract(s2, ref, "scaled_gemm shuffled")
        if torch.equal(dense(plain).view(torch.int16), dense(same_kernel).view(torch.int16)):
            # one kernel for both layouts here (not sm_90's wgmma engine): scaled_gemm too
            assert torch.equal(dense(p2).view(torch.int16), dense(s2).view(torch.int16)), "scaled_gemm: shuffled != plain"
    # reading a plain weight as shuffled must give something else (the flag is honoured)
    wrong = fx.smallm_gemm(xd, wd, wsd, True)
    assert not torch.equal(dense(wrong).view(torch.int16), dense(fx.smallm_gemm(xd, wd, wsd)).view(torch.int16))


@pytest.mark.parametrize("fmt", FMTS)
def test_smallm_strided_x_and_offset_weight(device, fmt):
    """x may have any row stride (SPEC §2), including odd strides and element offsets; a
    contiguous weight that starts inside a larger buffer works too."""
    N, K, M = 272, 1024, 5
    _, w, ws = case(N, K, M, "bf16", fmt, seed=12)
    big = torch.cat([rand_weight(16, K, 13), w, rand_weight(32, K, 14)])
    w_off = big[16 : 16 + N]
    assert w_off.is_contiguous() and w_off.storage_offset() == 16 * K
    wide = rand_act((M, 2 * K + 1), torch.bfloat16, 15)
    for x in (wide[:, :K], wide[:, 1 : 1 + K], wide[:, K + 1 :], wide[::2, 5 : 5 + K]):
        assert x.stride(-1) == 1 and not x.is_contiguous()
        xd, wd, wsd = on(device, x, w_off, ws)
        if device != "cpu":
            xd = wide.to(device).as_strided(x.shape, x.stride(), x.storage_offset())
            wd = big.to(device)[16 : 16 + N]
        out = fx.smallm_gemm(xd, wd, wsd)
        assert_gemm_contract(out, smallm_ref(x.contiguous(), w, ws), "strided x")
        exp = fx.smallm_gemm(x.contiguous().to(device), w.to(device), wsd)
        assert torch.equal(dense(out).view(torch.int16), dense(exp).view(torch.int16))


def test_rows_far_apart(gpu):
    """The sm_90 kernels address a 32-token chunk's activation rows with 32-bit byte offsets; the
    glue copies a view whose rows lie 2^27 bytes or more apart (kMaxActivationRowBytes) first.
    Such a view must give the bits its contiguous copy gives, for smallm_gemm (bf16 rows 2^27
    elements apart) and scaled_gemm (e4m3 rows 2^28 elements apart): 256 MB between rows, so that
    without the copy the offsets of tokens 16-19 would pass 2^32 (~10 GB of GPU memory)."""
    N, K, M = 272, 1024, 20
    x, w, ws = case(N, K, M, "bf16", "fp32", seed=21)
    wd, wsd = w.to(gpu), ws.to(gpu)
    stride = 1 << 27
    buf = torch.zeros((M - 1) * stride + K, dtype=torch.bfloat16, device=gpu)
    xv = buf.as_strided((M, K), (stride, 1))
    xv.copy_(x.to(gpu))
    out = fx.smallm_gemm(xv, wd, wsd)
    exp = fx.smallm_gemm(x.to(gpu), wd, wsd)
    assert torch.equal(dense(out).view(torch.int16), dense(exp).view(torch.int16))
    q, xs = fx.per1x128_quant(x.to(gpu))
    qbuf = torch.zeros((M - 1) * 2 * stride + K, dtype=FP8, device=gpu)
    qv = qbuf.as_strided((M, K), (2 * stride, 1))
    qv.copy_(q)
    out = fx.scaled_gemm(qv, xs, wd, wsd)
    exp = fx.scaled_gemm(q, xs, wd, wsd)
    assert torch.equal(dense(out).view(torch.int16), dense(exp).view(torch.int16))
    del buf, qbuf


def test_reproducible_many_calls(device):
    x, w, ws = case(2112, 7168, 32, "bf16", "fp32", seed=4)
    xd, wd, wsd = on(device, x, w, ws)
    outs = [dense(fx.smallm_gemm(xd, wd, wsd)).view(torch.int16) for _ in range(4)]
    for o in outs[1:]:
        assert torch.equal(o, outs[0])


# ---- scaled_gemm on its own ----------------------------------------------------------------------


def rand_q(M, K, seed):
    """Arbitrary finite FP8 activations (all finite codes, both signs) - not from the quant."""
    rng = np.random.default_rng(seed)
    codes = rng.integers(0, 0x7F, (M, K)).astype(np.uint8) | (rng.integers(0, 2, (M, K)).astype(np.uint8) << 7)
    return torch.from_numpy(codes).view(FP8)


def rand_xscale(M, K, fmt, seed):
    g = torch.Generator().manual_seed(seed)
    if fmt == "e8m0":
        return fx.scale_to_e8m0(torch.exp2(torch.randint(-14, -2, (M, K // 128), generator=g).float()))
    return torch.rand(M, K // 128, generator=g) * 0.1 + 1e-3


@pytest.mark.parametrize("out_dtype", [None, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("fmt", FMTS)
@pytest.mark.parametrize("N,K,M", [(16, 128, 1), (48, 384, 5), (1536, 4096, 32), (2112, 7168, 2), (160, 256, 70)])
def test_scaled_gemm_contract(device, N, K, M, fmt, out_dtype):
    xq = rand_q(M, K, seed=N + M)
    xs = rand_xscale(M, K, fmt, seed=K)
    w = rand_weight(N, K, 5)
    ws = rand_wscale(N, K, fmt == "e8m0", 5)
    od = torch.bfloat16 if out_dtype is None else out_dtype
    bias = (torch.randn(N) * 3).to(od) if M % 2 else None
    xqd, xsd, wd, wsd, bd = on(device, xq, xs, w, ws, bias)
    out = fx.scaled_gemm(xqd, xsd, wd, wsd, False, out_dtype, bd)
    assert out.dtype == od and out.shape == (M, N)
    ref = gemm_ref_from(xq, xs, w, ws, bias)
    assert_gemm_contract(out, ref, f"scaled_gemm N={N} K={K} M={M} {fmt}")
    out2 = fx.scaled_gemm(xqd, xsd, wd, wsd, False, out_dtype, bd)
    assert torch.equal(dense(out).view(torch.int16), dense(out2).view(torch.int16))


@pytest.mark.parametrize("fmt", FMTS)
def test_scaled_gemm_x_scale_any_strides(device, fmt):
    """x_scale may have any strides: the transpose_scale layout (1, M), a column slice of a wider
    tensor and a broadcast (stride-0) view all give the same result as the contiguous scale."""
    N, K, M = 272, 512, 6
    x = rand_act((M, K), torch.bfloat16, 9)
    w, ws = rand_weight(N, K, 6), rand_wscale(N, K, fmt == "e8m0", 6)
    xd, wd, wsd = on(device, x, w, ws)
    q, s = fx.per1x128_quant(xd, fmt == "e8m0")
    ref_out = dense(fx.scaled_gemm(q, s, wd, wsd))
    qt, st_ = fx.per1x128_quant(xd, fmt == "e8m0", True)
    assert st_.stride() == (1, M)
    variants = [st_]
    # a column slice of a wider scale tensor (built on the CPU, then moved: a plain byte copy)
    wide = torch.zeros(M, 2 * (K // 128), dtype=s.dtype)
    wide[:, 1 : 1 + K // 128].copy_(s.cpu())
    wide = wide.to(s.device)
    variants.append(wide[:, 1 : 1 + K // 128])
    for v in variants:
        assert not v.is_contiguous()
        out = fx.scaled_gemm(q, v, wd, wsd)
        assert torch.equal(dense(out).view(torch.int16), ref_out.view(torch.int16))
    # one scale row broadcast to all rows (stride 0) vs its materialized copy
    b = s[:1].expand(M, K // 128)
    out_b = fx.scaled_gemm(q, b, wd, wsd)
    mat = s.cpu()[:1].expand(M, K // 128).contiguous().to(s.device)
    assert mat.stride() == (K // 128, 1)
    assert torch.equal(dense(out_b).view(torch.int16), dense(fx.scaled_gemm(q, mat, wd, wsd)).view(torch.int16))


def test_e8m0_path_matches_fp32_values():
    """scaled_gemm with e8m0 scales equals (within the contract) scaled_gemm with the same
    power-of-two scales given as fp32, and both meet the model."""
    N, K, M = 1536, 1024, 8
    xq = rand_q(M, K, 21)
    xs8 = rand_xscale(M, K, "e8m0", 22)
    w = rand_weight(N, K, 7)
    ws8 = rand_wscale(N, K, True, 7)
    o8 = fx.scaled_gemm(xq, xs8, w, ws8)
    o32 = fx.scaled_gemm(xq, fx.e8m0_to_scale(xs8), w, fx.e8m0_to_scale(ws8))
    ref = gemm_ref_from(xq, xs8, w, ws8)
    assert_gemm_contract(o8, ref, "e8m0")
    assert_gemm_contract(o32, ref, "fp32 from e8m0")


# ---- non-finite and bias numerics ----------------------------------------------------------------


@pytest.mark.parametrize("fmt", FMTS)
@pytest.mark.parametrize("special", [float("nan"), float("inf"), float("-inf")])
def test_smallm_nonfinite_row(device, fmt, special):
    """§3.3: a NaN/Inf in row m makes every output of row m non-finite (each depends on every
    group of the row); the other rows are finite and meet the contract."""
    N, K, M = 272, 512, 5
    x, w, ws = case(N, K, M, "bf16", fmt, seed=8)
    x[2, 300] = special
    out = fx.smallm_gemm(*on(device, x, w, ws)).cpu().float()
    assert not torch.isfinite(out[2]).any(), "a non-finite input produced a finite output"
    if special != special:  # NaN input: outputs NaN, not Inf
        assert torch.isnan(out[2]).all()
    keep = [0, 1, 3, 4]
    assert torch.isfinite(out[keep]).all()
    ref = smallm_ref(x[keep], w, ws)
    assert_gemm_contract(out[keep], ref, "rows next to a non-finite row")


@pytest.mark.parametrize("dt", ["bf16", "fp16"])
def test_bias_dominant(device, dt):
    """A bias much larger than the products: the output is the bias (to the output precision),
    plus the products, per §3.4."""
    N, K, M = 128, 256, 4
    x = (rand_act((M, K), ACT[dt], 1) * 1e-3).to(ACT[dt])
    w, ws = rand_weight(N, K, 1), rand_wscale(N, K, False, 1)
    bias = (torch.arange(N, dtype=torch.float32) - 64).to(ACT[dt]) * 8
    out = fx.smallm_gemm(*on(device, x, w, ws, bias)[:3], False, bias.to(device))
    ref = smallm_ref(x, w, ws, bias)
    assert_gemm_contract(out, ref, "bias-dominant")
    # the bias really is applied once
    nob = fx.smallm_gemm(*on(device, x, w, ws))
    diff = (out.cpu().double() - nob.cpu().double()) - bias.double()
    assert diff.abs().max() <= 0.05 * bias.double().abs().max()


# ---- the final cast is round-to-nearest-even (exact-accumulation construction) -----------------


def _int_codes(shape, rng, lim=16):
    """e4m3 codes of random integers in [-lim, lim] (every integer up to 16 is an e4m3 value)."""
    v = rng.integers(-lim, lim + 1, shape).astype(np.float32)
    return sm.e4m3fn_rne(v)


@pytest.mark.parametrize("with_bias", [False, True])
@pytest.mark.parametrize("fmt", FMTS)
@pytest.mark.parametrize("out_dtype", [torch.bfloat16, torch.float16])
def test_scaled_gemm_cast_is_rne_bit_exact(device, out_dtype, fmt, with_bias):
    """With integer-valued FP8 operands and power-of-two scales every partial sum is exact in fp32,
    whatever the accumulation order, so the output must be exactly cast_out(bias + sum), rounded to
    nearest even once (§3.4): truncation, double rounding or a bias added after the cast show up
    as bit differences."""
    N, K, M = 144, 512, 6
    rng = np.random.default_rng(hash((str(out_dtype), fmt, with_bias)) % 2**32)
    xq = torch.from_numpy(_int_codes((M, K), rng)).view(FP8)
    w = torch.from_numpy(_int_codes((N, K), rng)).view(FP8)
    xs_f = np.exp2(rng.integers(-1, 2, (M, K // 128))).astype(np.float32)
    ws_f = np.exp2(rng.integers(-1, 2, ((N + 127) // 128, K // 128))).astype(np.float32)
    if fmt == "e8m0":
        xs, ws = fx.scale_to_e8m0(torch.from_numpy(xs_f)), fx.scale_to_e8m0(torch.from_numpy(ws_f))
    else:
        xs, ws = torch.from_numpy(xs_f), torch.from_numpy(ws_f)
    dt = "bf16" if out_dtype == torch.bfloat16 else "fp16"
    bias = None
    if with_bias:
        # bias values with low-order bits, so that bias + sum needs rounding as a whole
        bias = torch.from_numpy(sm.f32_to_act_bits((rng.integers(-2000, 2000, N) + 0.5).astype(np.float32), dt).view(np.int16)).view(out_dtype)
    ref = gemm_ref_from(xq, xs, w, ws, bias)
    # every value (and partial sum) is a multiple of 1/4 below 2^22: exact in fp32
    assert np.all(np.abs(ref) < 2**22) and np.array_equal(ref * 4, np.round(ref * 4))
    expected = sm.f32_to_act_bits(ref.astype(np.float32), dt)
    exp_vals = sm.act_bits_to_f32(expected, dt)
    assert np.isfinite(exp_vals).all()
    assert (exp_vals != ref).mean() > 0.3  # most outputs really need rounding
    xqd, xsd, wd, wsd, bd = on(device, xq, xs, w, ws, bias)
    out = fx.scaled_gemm(xqd, xsd, wd, wsd, False, out_dtype, bd)
    got = act_bits(out)
    if not np.array_equal(got, expected):
        i = tuple(np.argwhere(got != expected)[0])
        raise AssertionError(
            f"{(got != expected).sum()} outputs differ from RNE(bias + sum); first at {i}: exact {ref[i]!r}, "
            f"expected {exp_vals[i]!r}, got {sm.act_bits_to_f32(got, dt)[i]!r}"
        )
    out_sh = fx.scaled_gemm(xqd, xsd, fx.shuffle_weight(wd), wsd, True, out_dtype, bd)
    assert np.array_equal(act_bits(out_sh), expected)


@pytest.mark.parametrize("dt", ["bf16", "fp16"])
def test_smallm_e8m0_bit_exact_on_exact_inputs(device, dt):
    """smallm_gemm on the e8m0 path with activations whose ue8m0 quantization is exact (integers
    with a group amax of 16 * 2^j): the whole computation is exact, so the output must equal the
    RNE cast of the exact product sum bit for bit."""
    N, K, M = 272, 384, 5
    rng = np.random.default_rng(21)
    v = rng.integers(-16, 17, (M, K)).astype(np.float32)
    v[:, ::128] = 16.0  # amax 16 in every group
    v *= np.exp2(rng.integers(-3, 4, (M, K // 128))).repeat(128, axis=1).astype(np.float32)
    x = torch.from_numpy(sm.f32_to_act_bits(v, dt).view(np.int16)).view(ACT[dt])
    w = torch.from_numpy(_int_codes((N, K), rng)).view(FP8)
    ws = fx.scale_to_e8m0(torch.from_numpy(np.exp2(rng.integers(-2, 1, (3, K // 128))).astype(np.float32)))
    q, xs = sm.quant_act_bits(act_bits(x), dt, True)
    # the quantization is exact here: q * scale == x
    assert np.array_equal(sm.dequant(q, xs, True), sm.act_bits_to_f32(act_bits(x), dt).astype(np.float64))
    ref = smallm_ref(x, w, ws)
    expected = sm.f32_to_act_bits(ref.astype(np.float32), dt)
    assert (sm.act_bits_to_f32(expected, dt) != ref).mean() > 0.3
    out = fx.smallm_gemm(*on(device, x, w, ws))
    assert np.array_equal(act_bits(out), expected), "smallm_gemm output is not RNE(exact sum)"
