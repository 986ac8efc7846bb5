"""sgl_fp8::rmsnorm_quant and sgl_fp8::add_rmsnorm_quant against SPEC §3.5.

Contract: the dequantized q * scale matches the unfused computation (reference RMSNorm, then the
1x128 quant) within 1e-2 relative per row; residual_out is exact (fp32 sum, RNE cast).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import sglang_fp8ext as fx
import spec_model as sm
from conftest import ACT, E8M0, FP8, act_bits, u8, f32

DTYPES = ["bf16", "fp16"]


def deq_op(q: torch.Tensor, s: torch.Tensor, ue8m0: bool) -> np.ndarray:
    sc = u8(s) if ue8m0 else f32(s)
    return sm.dequant(u8(q), sc, ue8m0)


def check_norm_contract(x, weight, eps, ue8m0, q, s, residual=None, res_out=None, tol=1e-2, what=""):
    dt = "bf16" if x.dtype == torch.bfloat16 else "fp16"
    K = x.shape[-1]
    assert q.dtype == FP8 and q.shape == x.shape
    assert s.dtype == (E8M0 if ue8m0 else torch.float32) and s.shape == (*x.shape[:-1], K // 128)
    y, ro = sm.rmsnorm_ref(act_bits(x), act_bits(weight), eps, dt, None if residual is None else act_bits(residual))
    qr, sr = sm.quant_act_bits(y, dt, ue8m0)
    ref = sm.dequant(qr, sr, ue8m0).reshape(-1, K)
    got = deq_op(q, s, ue8m0).reshape(-1, K)
    assert np.isfinite(got).all(), f"{what}: non-finite dequantized output"
    for m in range(ref.shape[0]):
        rn = np.linalg.norm(ref[m])
        if rn == 0:
            assert not got[m].any(), f"{what}: row {m} should be all zero"
            continue
        err = np.linalg.norm(got[m] - ref[m]) / rn
        assert err <= tol, f"{what}: row {m} relative error {err:.3e} > {tol}"
    if residual is not None:
        assert res_out is not None and res_out.dtype == x.dtype and res_out.shape == x.shape
        got_r = act_bits(res_out)
        if not np.array_equal(got_r, ro):
            i = tuple(np.argwhere(got_r != ro)[0])
            raise AssertionError(f"{what}: residual_out not exact at {i}: got 0x{got_r[i]:04x}, expected 0x{ro[i]:04x}")


def rand_inputs(shape, dt, seed, scale=1.0):
    g = torch.Generator().manual_seed(seed)
    K = shape[-1]
    x = (torch.randn(*shape, generator=g) * scale)
    x[..., torch.randint(0, K, (4,), generator=g)] *= 30  # outlier channels
    r = torch.randn(*shape, generator=g) * scale * 2
    w = torch.rand(K, generator=g) * 2 + 0.05
    w[torch.randint(0, K, (8,), generator=g)] *= -1
    return x.to(ACT[dt]), r.to(ACT[dt]), w.to(ACT[dt])


SHAPES = [(1, 128), (7, 1024), (32, 4096), (3, 7168), (2, 3, 512), (2, 2, 2, 256)]


@pytest.mark.parametrize("ue8m0", [False, True])
@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_rmsnorm_quant(device, shape, dt, ue8m0):
    x, _, w = rand_inputs(shape, dt, seed=len(shape) * 100 + shape[-1])
    xd, wd = x.to(device), w.to(device)
    x0 = x.clone()
    q, s = fx.rmsnorm_quant(xd, wd, 1e-6, ue8m0)
    assert torch.equal(xd.cpu().view(torch.int16), x0.view(torch.int16)), "x was mutated"
    check_norm_contract(x, w, 1e-6, ue8m0, q.cpu(), s.cpu(), what=f"rmsnorm_quant {shape} {dt}")
    if device != "cpu":
        qc, sc = fx.rmsnorm_quant(x, w, 1e-6, ue8m0)
        check_norm_contract(x, w, 1e-6, ue8m0, qc, sc, what="cpu op")


@pytest.mark.parametrize("ue8m0", [False, True])
@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_add_rmsnorm_quant(device, shape, dt, ue8m0):
    x, r, w = rand_inputs(shape, dt, seed=len(shape) * 10 + shape[-1] + 1)
    xd, rd, wd = x.to(device), r.to(device), w.to(device)
    x0, r0 = x.clone(), r.clone()
    q, s, ro = fx.add_rmsnorm_quant(xd, rd, wd, 1e-6, ue8m0)
    assert torch.equal(xd.cpu().view(torch.int16), x0.view(torch.int16)), "x was mutated"
    assert torch.equal(rd.cpu().view(torch.int16), r0.view(torch.int16)), "residual was mutated"
    check_norm_contract(x, w, 1e-6, ue8m0, q.cpu(), s.cpu(), r, ro.cpu(), what=f"add_rmsnorm_quant {shape} {dt}")


@pytest.mark.parametrize("eps", [0.0, 1e-6, 1e-5, 1e-2, 1.0, 100.0])
@pytest.mark.parametrize("ue8m0", [False, True])
def test_eps_variations(device, eps, ue8m0):
    """eps enters as sqrt(mean(h^2) + eps): with rows of very different magnitude (1e-3 .. 30)
    a large eps changes the output a lot, so using it wrong (or not at all) is detected."""
    dt = "bf16"
    x, r, w = rand_inputs((6, 512), dt, seed=int(eps * 1000) + 3)
    mags = torch.tensor([1e-3, 1e-2, 0.1, 1.0, 3.0, 30.0])[:, None]
    x = (x.float() * mags).to(ACT[dt])
    r = (r.float() * mags).to(ACT[dt])
    q, s = fx.rmsnorm_quant(x.to(device), w.to(device), eps, ue8m0)
    check_norm_contract(x, w, eps, ue8m0, q.cpu(), s.cpu(), what=f"rmsnorm eps={eps}")
    q, s, ro = fx.add_rmsnorm_quant(x.to(device), r.to(device), w.to(device), eps, ue8m0)
    check_norm_contract(x, w, eps, ue8m0, q.cpu(), s.cpu(), r, ro.cpu(), what=f"add_rmsnorm eps={eps}")


def test_eps_is_used():
    """Guard: for the small-magnitude rows the model's answer with eps=1 is far from eps=0 (so the
    test above distinguishes them)."""
    x, _, w = rand_inputs((1, 256), "bf16", 0, scale=1e-2)
    a, _ = sm.rmsnorm_ref(act_bits(x), act_bits(w), 0.0, "bf16")
    b, _ = sm.rmsnorm_ref(act_bits(x), act_bits(w), 1.0, "bf16")
    fa, fb = sm.bf16_bits_to_f32(a), sm.bf16_bits_to_f32(b)
    assert np.linalg.norm(fa - fb) > 0.5 * np.linalg.norm(fa)
    qa, sa = fx.rmsnorm_quant(x, w, 0.0)
    qb, sb = fx.rmsnorm_quant(x, w, 1.0)
    assert not torch.equal(sa, sb)


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("scale", [1e-4, 1.0, 100.0])
def test_norm_magnitudes(device, dt, scale):
    x, r, w = rand_inputs((5, 1024), dt, seed=int(scale * 10) % 1000 + 5, scale=scale)
    q, s, ro = fx.add_rmsnorm_quant(x.to(device), r.to(device), w.to(device), 1e-6, False)
    check_norm_contract(x, w, 1e-6, False, q.cpu(), s.cpu(), r, ro.cpu(), what=f"scale {scale}")


def test_residual_out_exact_adversarial(device):
    """residual_out = cast(fl32(x) + fl32(residual)): sums that need rounding (ties included),
    cancellation to zero, and values of very different magnitudes."""
    rng = np.random.default_rng(4)
    for dt in DTYPES:
        K = 512
        xb = sm.f32_to_act_bits((rng.standard_normal((4, K)) * 4).astype(np.float32), dt)
        xv = sm.act_bits_to_f32(xb, dt)
        rv = np.empty_like(xv)
        rv[0] = -xv[0]  # exact cancellation
        rv[1] = xv[1] * np.float32(2.0 ** -9)  # tiny addend: rounding at the last bit
        rv[2] = xv[2] * np.float32(3.0)
        rv[3] = rng.standard_normal(K).astype(np.float32) * 1e3
        rb = sm.f32_to_act_bits(rv, dt)
        x = torch.from_numpy(xb.view(np.int16)).view(ACT[dt])
        r = torch.from_numpy(rb.view(np.int16)).view(ACT[dt])
        w = torch.ones(K, dtype=ACT[dt])
        q, s, ro = fx.add_rmsnorm_quant(x.to(device), r.to(device), w.to(device), 1e-6)
        check_norm_contract(x, w, 1e-6, False, q.cpu(), s.cpu(), r, ro.cpu(), what=f"adversarial residual {dt}")


def test_zero_rows(device):
    """A zero row (x = -residual) with eps > 0 normalizes to zero: q = 0 and the all-zero-group
    scale of §3.1."""
    x, r, w = rand_inputs((3, 256), "bf16", 6)
    r[1] = -x[1]
    q, s, ro = fx.add_rmsnorm_quant(x.to(device), r.to(device), w.to(device), 1e-6)
    assert (sm.e4m3_decode(u8(q[1])) == 0).all()  # +-0 (a negative weight gives -0)
    expect = np.float32(np.float32(1e-10) * sm.INV_448)
    assert (f32(s)[1] == expect).all()
    check_norm_contract(x, w, 1e-6, False, q.cpu(), s.cpu(), r, ro.cpu(), what="zero row")


@pytest.mark.parametrize("ue8m0", [False, True])
def test_norm_row_strided(device, ue8m0):
    wide = (torch.randn(5, 1025) * 2).bfloat16()
    rwide = (torch.randn(5, 1024)).bfloat16()
    w = (torch.rand(512) + 0.5).bfloat16()
    for xs, rs in [((256, 768), (0, 512)), ((1, 513), (3, 515))]:
        wd, rwd = wide.to(device), rwide.to(device)
        x, r = wide[:, xs[0] : xs[1]], rwide[:, rs[0] : rs[1]]
        xd, rd = wd[:, xs[0] : xs[1]], rwd[:, rs[0] : rs[1]]
        q, s = fx.rmsnorm_quant(xd, w.to(device), 1e-6, ue8m0)
        check_norm_contract(x.contiguous(), w, 1e-6, ue8m0, q.cpu(), s.cpu(), what="strided rmsnorm")
        q, s, ro = fx.add_rmsnorm_quant(xd, rd, w.to(device), 1e-6, ue8m0)
        check_norm_contract(x.contiguous(), w, 1e-6, ue8m0, q.cpu(), s.cpu(), r.contiguous(), ro.cpu(), what="strided add")


def test_norm_m0(device):
    for shape in [(0, 256), (2, 0, 128)]:
        x = torch.empty(*shape, dtype=torch.bfloat16, device=device)
        w = torch.ones(shape[-1], dtype=torch.bfloat16, device=device)
        q, s = fx.rmsnorm_quant(x, w, 1e-6)
        assert q.shape == x.shape and s.shape == (*shape[:-1], shape[-1] // 128)
        q, s, ro = fx.add_rmsnorm_quant(x, x, w, 1e-6, True)
        assert q.shape == x.shape and ro.shape == x.shape and s.dtype == E8M0


def test_norm_then_gemm_matches_unfused():
    """rmsnorm_quant's (q, scale) feed scaled_gemm like per1x128_quant's output of the reference
    rmsnorm does (the e8m0 pair included)."""
    from conftest import rand_weight, rand_wscale, gemm_ref_from

    N, K = 1536, 1024
    x, r, w = rand_inputs((4, K), "bf16", 8)
    for e8 in (False, True):
        q, s = fx.rmsnorm_quant(x, w, 1e-6, e8)
        W, WS = rand_weight(N, K, 2), rand_wscale(N, K, e8, 2)
        out = fx.scaled_gemm(q, s, W, WS)
        y, _ = sm.rmsnorm_ref(act_bits(x), act_bits(w), 1e-6, "bf16")
        yt = torch.from_numpy(y.view(np.int16)).view(torch.bfloat16)
        q2, s2 = fx.per1x128_quant(yt, e8)
        ref = gemm_ref_from(q2, s2, W, WS)
        o = out.double().numpy()
        err = np.linalg.norm(o - ref, axis=1) / np.linalg.norm(ref, axis=1)
        assert err.max() < 2e-2


def test_norm_nonuniform_leading_strides(device):
    """[..., K] views whose leading dims do not collapse to one row stride: correct, or an
    error naming x / residual; never garbage."""
    base = (torch.randn(4, 6, 256) * 3).bfloat16()
    rbase = (torch.randn(6, 4, 256)).bfloat16()
    w = (torch.rand(256) + 0.5).bfloat16()
    x = base.transpose(0, 1)  # [6, 4, 256], strides (256, 1536, 1)
    r = rbase[:, :, :]
    xd = base.to(device).transpose(0, 1)
    try:
        q, s = fx.rmsnorm_quant(xd, w.to(device), 1e-6)
        check_norm_contract(x.contiguous(), w, 1e-6, False, q.cpu(), s.cpu(), what="transposed 3-D rmsnorm")
    except (RuntimeError, ValueError) as e:
        assert "x" in str(e)
    try:
        q, s, ro = fx.add_rmsnorm_quant(xd, r.to(device), w.to(device), 1e-6)
        check_norm_contract(x.contiguous(), w, 1e-6, False, q.cpu(), s.cpu(), r, ro.cpu(), what="transposed 3-D add")
    except (RuntimeError, ValueError) as e:
        assert "x" in str(e) or "residual" in str(e)
