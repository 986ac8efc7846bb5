"""Typed wrappers over torch.ops.sgl_fp8.* and their fake (meta) implementations.

Each op below has its Python entry point and, right under it, the register_fake whose
torch._check lines restate the contract of SPEC §2 (shapes, dtypes, devices). The fakes compute
output shapes, dtypes and strides from (possibly symbolic) sizes, so the ops trace under
torch.compile(fullgraph=True, dynamic=True) without graph breaks or a recompile per M.
"""

from __future__ import annotations

from typing import Optional, Tuple

import torch

from . import _C  # noqa: F401  (loads the library: registers the kernels for schemas.py's schemas)

FP8 = torch.float8_e4m3fn
E8M0 = torch.float8_e8m0fnu
ACTIVATION_DTYPES = (torch.bfloat16, torch.float16)
SCALE_DTYPES = (torch.float32, E8M0)


# ---- shared checks (the same rules as csrc/op_checks.h) -------------------------------------


def _check_activation(op: str, name: str, x: torch.Tensor, two_dim: bool) -> None:
    torch._check(
        x.dtype in ACTIVATION_DTYPES,
        lambda: f"{op}: expected {name} to be bfloat16 or float16, but got {x.dtype}",
    )
    if two_dim:
        torch._check(x.dim() == 2, lambda: f"{op}: expected {name} to be 2-D [M, K], but got shape {tuple(x.shape)}")
    else:
        torch._check(x.dim() >= 1, lambda: f"{op}: expected {name} to have at least one dimension [..., K]")
    K = x.shape[-1]
    torch._check(
        K % 128 == 0 and K > 0,
        lambda: f"{op}: expected the last dimension of {name} (K) to be a positive multiple of 128, but got K = {K}",
    )


def _check_same_device(op: str, **tensors: Optional[torch.Tensor]) -> None:
    named = [(n, t) for n, t in tensors.items() if t is not None]
    first_name, first = named[0]
    for name, t in named[1:]:
        torch._check(
            t.device == first.device,
            lambda: f"{op}: expected {name} on {first.device} (the device of {first_name}), but it is on {t.device}",
        )


def _check_weight(op: str, K, w: torch.Tensor, w_scale: torch.Tensor, bias: Optional[torch.Tensor], out_dtype):
    torch._check(w.dtype == FP8, lambda: f"{op}: expected w to be float8_e4m3fn, but got {w.dtype}")
    torch._check(w.dim() == 2, lambda: f"{op}: expected w to be 2-D [N, K], but got shape {tuple(w.shape)}")
    N = w.shape[0]
    torch._check(w.shape[1] == K, lambda: f"{op}: expected w to have K = {K} columns, but got shape {tuple(w.shape)}")
    torch._check(N % 16 == 0 and N > 0, lambda: f"{op}: expected N = w.size(0) to be a positive multiple of 16, got {N}")
    torch._check(w.is_contiguous(), lambda: f"{op}: expected w to be contiguous, but got strides {w.stride()}")
    torch._check(w_scale.dtype in SCALE_DTYPES, lambda: f"{op}: expected w_scale float32 or float8_e8m0fnu, got {w_scale.dtype}")
    torch._check(w_scale.dim() == 2, lambda: f"{op}: expected w_scale to be 2-D, but got shape {tuple(w_scale.shape)}")
    torch._check(
        w_scale.shape[0] == (N + 127) // 128,
        lambda: f"{op}: expected w_scale of shape [ceil(N/128), K/128], but got {tuple(w_scale.shape)}",
    )
    torch._check(
        w_scale.shape[1] == K // 128,
        lambda: f"{op}: expected w_scale of shape [ceil(N/128), K/128], but got {tuple(w_scale.shape)}",
    )
    torch._check(w_scale.is_contiguous(), lambda: f"{op}: expected w_scale to be contiguous, got strides {w_scale.stride()}")
    if bias is not None:
        torch._check(bias.dim() == 1 and bias.shape[0] == N, lambda: f"{op}: expected bias of shape [N], got {tuple(bias.shape)}")
        torch._check(bias.dtype == out_dtype, lambda: f"{op}: expected bias of dtype {out_dtype}, got {bias.dtype}")
    return N


# ---- per1x128_quant -----------------------------------------------------------------------------


def per1x128_quant(x: torch.Tensor, ue8m0: bool = False, transpose_scale: bool = False) -> Tuple[torch.Tensor, torch.Tensor]:
    """1x128 FP8 quantization of bf16/fp16 ``x`` [..., K] (SPEC §3.1, or §3.2 when ``ue8m0``).

    Returns ``q`` (float8_e4m3fn, x's shape) and ``scale`` ([..., K/128], float32 or
    float8_e8m0fnu). ``transpose_scale`` (2-D x only) returns the scale [M, K/128] with strides
    (1, M), the layout AITER's bpreshuffle GEMM and cuBLASLt blockwise scaling read.
    """
    return torch.ops.sgl_fp8.per1x128_quant.default(x, ue8m0, transpose_scale)


def _quant_outputs(x: torch.Tensor, ue8m0: bool, transpose_scale: bool):
    q = x.new_empty(x.shape, dtype=FP8)
    scale_dtype = E8M0 if ue8m0 else torch.float32
    KB = x.shape[-1] // 128
    if transpose_scale:
        M = x.shape[0]
        return q, x.new_empty_strided((M, KB), (1, M), dtype=scale_dtype)
    return q, x.new_empty((*x.shape[:-1], KB), dtype=scale_dtype)


@torch.library.register_fake("sgl_fp8::per1x128_quant")
def _per1x128_quant_fake(x, ue8m0=False, transpose_scale=False):
    op = "sgl_fp8::per1x128_quant"
    _check_activation(op, "x", x, two_dim=False)
    torch._check(not transpose_scale or x.dim() == 2, lambda: f"{op}: transpose_scale=True needs a 2-D x [M, K]")
    return _quant_outputs(x, ue8m0, transpose_scale)


# ---- smallm_gemm --------------------------------------------------------------------------------


def smallm_gemm(
    x: torch.Tensor,
    w: torch.Tensor,
    w_scale: torch.Tensor,
    w_shuffled: bool = False,
    bias: Optional[torch.Tensor] = None,
) -> torch.Tensor:
    """Fused 1x128 quant of ``x`` [M, K] + FP8 block-scale GEMM with ``w`` [N, K] (SPEC §3.4).

    ``w_scale`` [ceil(N/128), K/128] is float32 (fp32 path) or float8_e8m0fnu (e8m0 path: the
    activations get ue8m0 scales). ``w_shuffled`` says ``w`` is in AITER's (16,16) preshuffle
    layout. Returns [M, N] in x's dtype. One kernel launch on GPUs.
    """
    return torch.ops.sgl_fp8.smallm_gemm.default(x, w, w_scale, w_shuffled, bias)


@torch.library.register_fake("sgl_fp8::smallm_gemm")
def _smallm_gemm_fake(x, w, w_scale, w_shuffled=False, bias=None):
    op = "sgl_fp8::smallm_gemm"
    _check_activation(op, "x", x, two_dim=True)
    _check_same_device(op, x=x, w=w, w_scale=w_scale, bias=bias)
    N = _check_weight(op, x.shape[1], w, w_scale, bias, x.dtype)
    return x.new_empty((x.shape[0], N))


@torch.library.register_fake("sgl_fp8::_smallm_gemm_configured")
def _smallm_gemm_configured_fake(x, w, w_scale, w_shuffled, bias, config):
    return _smallm_gemm_fake(x, w, w_scale, w_shuffled, bias)


# ---- scaled_gemm --------------------------------------------------------------------------------


def scaled_gemm(
    xq: torch.Tensor,
    x_scale: torch.Tensor,
    w: torch.Tensor,
    w_scale: torch.Tensor,
    w_shuffled: bool = False,
    out_dtype: Optional[torch.dtype] = None,
    bias: Optional[torch.Tensor] = None,
) -> torch.Tensor:
    """FP8 block-scale GEMM of pre-quantized ``xq`` [M, K] with scales ``x_scale`` [M, K/128]
    (any strides; same format as ``w_scale``). Returns [M, N] in ``out_dtype`` (default bf16)."""
    return torch.ops.sgl_fp8.scaled_gemm.default(xq, x_scale, w, w_scale, w_shuffled, out_dtype, bias)


@torch.library.register_fake("sgl_fp8::scaled_gemm")
def _scaled_gemm_fake(xq, x_scale, w, w_scale, w_shuffled=False, out_dtype=None, bias=None):
    op = "sgl_fp8::scaled_gemm"
    out_dtype = torch.bfloat16 if out_dtype is None else out_dtype
    torch._check(out_dtype in ACTIVATION_DTYPES, lambda: f"{op}: expected out_dtype bfloat16 or float16, got {out_dtype}")
    torch._check(xq.dtype == FP8, lambda: f"{op}: expected xq to be float8_e4m3fn, but got {xq.dtype}")
    torch._check(xq.dim() == 2, lambda: f"{op}: expected xq to be 2-D [M, K], but got shape {tuple(xq.shape)}")
    M, K = xq.shape
    torch._check(
        K % 128 == 0 and K > 0, lambda: f"{op}: expected K = xq.size(1) to be a positive multiple of 128, got {K}"
    )
    _check_same_device(op, xq=xq, x_scale=x_scale, w=w, w_scale=w_scale, bias=bias)
    N = _check_weight(op, K, w, w_scale, bias, out_dtype)
    torch._check(x_scale.dtype == w_scale.dtype, lambda: f"{op}: expected x_scale in w_scale's format {w_scale.dtype}")
    torch._check(x_scale.dim() == 2, lambda: f"{op}: expected x_scale to be 2-D [M, K/128], got {tuple(x_scale.shape)}")
    torch._check(x_scale.shape[0] == M, lambda: f"{op}: expected x_scale of shape [M, K/128], got {tuple(x_scale.shape)}")
    torch._check(
        x_scale.shape[1] == K // 128, lambda: f"{op}: expected x_scale of shape [M, K/128], got {tuple(x_scale.shape)}"
    )
    return xq.new_empty((M, N), dtype=out_dtype)


# ---- rmsnorm_quant / add_rmsnorm_quant ----------------------------------------------------------


def rmsnorm_quant(x: torch.Tensor, weight: torch.Tensor, eps: float, ue8m0: bool = False) -> Tuple[torch.Tensor, torch.Tensor]:
    """RMSNorm of ``x`` [..., K] with ``weight`` [K], then the 1x128 quant (SPEC §3.5)."""
    return torch.ops.sgl_fp8.rmsnorm_quant.default(x, weight, eps, ue8m0)


def add_rmsnorm_quant(
    x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float, ue8m0: bool = False
) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``h = x + residual``; returns (q, scale) of RMSNorm(h) and ``residual_out = h`` (SPEC §3.5)."""
    return torch.ops.sgl_fp8.add_rmsnorm_quant.default(x, residual, weight, eps, ue8m0)


def _check_norm(op, x, residual, weight, eps):
    _check_activation(op, "x", x, two_dim=False)
    K = x.shape[-1]
    torch._check(weight.dim() == 1 and weight.shape[0] == K, lambda: f"{op}: expected weight of shape [K], got {tuple(weight.shape)}")
    torch._check(weight.dtype == x.dtype, lambda: f"{op}: expected weight to have x's dtype {x.dtype}, got {weight.dtype}")
    torch._check(eps >= 0.0 and eps < 1e30, lambda: f"{op}: expected eps to be a finite non-negative number, got {eps}")
    if residual is not None:
        torch._check(residual.dim() == x.dim(), lambda: f"{op}: expected residual of x's shape, got {tuple(residual.shape)}")
        for i in range(x.dim()):
            torch._check(
                residual.shape[i] == x.shape[i], lambda: f"{op}: expected residual of x's shape, got {tuple(residual.shape)}"
            )
        torch._check(residual.dtype == x.dtype, lambda: f"{op}: expected residual of x's dtype, got {residual.dtype}")
    _check_same_device(op, x=x, residual=residual, weight=weight)


@torch.library.register_fake("sgl_fp8::rmsnorm_quant")
def _rmsnorm_quant_fake(x, weight, eps, ue8m0=False):
    _check_norm("sgl_fp8::rmsnorm_quant", x, None, weight, eps)
    return _quant_outputs(x, ue8m0, transpose_scale=False)


@torch.library.register_fake("sgl_fp8::add_rmsnorm_quant")
def _add_rmsnorm_quant_fake(x, residual, weight, eps, ue8m0=False):
    _check_norm("sgl_fp8::add_rmsnorm_quant", x, residual, weight, eps)
    q, scale = _quant_outputs(x, ue8m0, transpose_scale=False)
    return q, scale, x.new_empty(x.shape)
