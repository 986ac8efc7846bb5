"""The pure-torch fallback (sglang_fp8ext.reference, torch.ops.sgl_fp8._reference_*) that GPU
ops redispatch to on devices this build has no kernels for. Checked on the CPU against the
independent SPEC model, like the C++ ops."""

import numpy as np
import pytest
import torch

import sglang_fp8ext as fx
from conftest import assert_gemm_contract, check_quant, gemm_ref_from, rand_act, rand_weight, rand_wscale

REF = fx.reference


def adversarial(M, K, dtype, seed):
    x = rand_act((M, K), dtype, seed)
    x[0, :128] = 0                       # all-zero group
    x[1, 128:256] = 0
    x[1, 130] = 3.0                      # single nonzero element
    x[2, 5] = float("nan")               # NaN group
    x[3, 140] = float("inf")             # Inf group
    x[3, 141] = -float("inf")
    x[4, :128] = torch.tensor([2.0**-126, 1e-30, -3e-38, 5e-39] * 32).to(dtype)  # tiny magnitudes
    return x


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("ue8m0", [False, True])
def test_reference_quant_bit_exact_against_model(dtype, ue8m0):
    x = adversarial(7, 512, dtype, 3)
    q, s = REF.per1x128_quant(x, ue8m0)
    check_quant(x, ue8m0, q, s, "reference per1x128_quant")


@pytest.mark.parametrize("ue8m0", [False, True])
def test_reference_quant_equals_cpu_op_bitwise(ue8m0):
    x = adversarial(9, 1024, torch.bfloat16, 5)
    q_ref, s_ref = torch.ops.sgl_fp8._reference_per1x128_quant(x, ue8m0, False)
    q_cpu, s_cpu = fx.per1x128_quant(x, ue8m0)
    assert torch.equal(q_ref.view(torch.uint8), q_cpu.view(torch.uint8))
    assert torch.equal(s_ref.view(torch.uint8), s_cpu.view(torch.uint8))


def test_reference_quant_transpose_and_leading_dims():
    x = rand_act((2, 3, 256), torch.float16, 7)
    q, s = REF.per1x128_quant(x, False)
    assert q.shape == x.shape and s.shape == (2, 3, 2)
    x2 = rand_act((5, 256), torch.bfloat16, 8)
    q2, s2 = REF.per1x128_quant(x2, True, transpose_scale=True)
    assert s2.shape == (5, 2) and s2.stride() == (1, 5)
    check_quant(x2, True, q2, s2.contiguous(), "reference transpose_scale")


@pytest.mark.parametrize("e8m0", [False, True])
@pytest.mark.parametrize("shuffled", [False, True])
@pytest.mark.parametrize("N,K,M", [(48, 256, 3), (272, 512, 33), (2112, 1024, 1)])
def test_reference_gemm_contract(e8m0, shuffled, N, K, M):
    w, ws = rand_weight(N, K, seed=N + K), rand_wscale(N, K, e8m0, seed=M)
    x = rand_act((M, K), torch.bfloat16, N)
    bias = rand_act((N,), torch.bfloat16, 2, outliers=False)
    wk = fx.shuffle_weight(w) if shuffled else w
    out = torch.ops.sgl_fp8._reference_smallm_gemm(x, wk, ws, shuffled, bias)
    q, xs = fx.per1x128_quant(x, e8m0)
    assert_gemm_contract(out, gemm_ref_from(q, xs, w, ws, bias), f"reference smallm N={N} K={K} M={M}")
    out2 = torch.ops.sgl_fp8._reference_scaled_gemm(q, xs, wk, ws, shuffled, torch.bfloat16, bias)
    assert_gemm_contract(out2, gemm_ref_from(q, xs, w, ws, bias), "reference scaled_gemm")


@pytest.mark.parametrize("ue8m0", [False, True])
def test_reference_norms_match_cpu_ops(ue8m0):
    x = rand_act((4, 3, 512), torch.bfloat16, 11)
    r = rand_act((4, 3, 512), torch.bfloat16, 12)
    g = (torch.rand(512, generator=torch.Generator().manual_seed(1)) + 0.5).to(torch.bfloat16)

    def dequant(q, s):
        sv = fx.e8m0_to_scale(s) if ue8m0 else s
        return (q.float().reshape(*q.shape[:-1], -1, 128) * sv.unsqueeze(-1)).reshape(q.shape).double()

    q1, s1, ro1 = torch.ops.sgl_fp8._reference_add_rmsnorm_quant(x, r, g, 1e-6, ue8m0)
    q2, s2, ro2 = fx.add_rmsnorm_quant(x, r, g, 1e-6, ue8m0)
    assert torch.equal(ro1, ro2)  # residual_out is exact
    a, b = dequant(q1, s1), dequant(q2, s2)
    rel = ((a - b).norm(dim=-1) / b.norm(dim=-1)).max().item()
    assert rel <= 1e-2, rel
    q3, s3 = torch.ops.sgl_fp8._reference_rmsnorm_quant(x, g, 1e-6, ue8m0)
    q4, s4 = fx.rmsnorm_quant(x, g, 1e-6, ue8m0)
    a, b = dequant(q3, s3), dequant(q4, s4)
    assert ((a - b).norm(dim=-1) / b.norm(dim=-1)).max().item() <= 1e-2
    assert np.isfinite(a.numpy()).all()
