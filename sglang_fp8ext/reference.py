"""SPEC §3 in plain torch operations: the fallback for devices this build has no kernels for.

A GPU op called on such a device (a gfx950 wheel on an MI300, an sm_90a build on an A100) warns
once and redispatches to the ``sgl_fp8::_reference_*`` ops registered here, so the ops stay
correct everywhere: quantization bit-exact (SPEC §3.1-3.3), GEMMs accumulated in float64
(SPEC §3.4), norms per SPEC §3.5. They are slow: several kernels per op, no fusion.

Every step is an elementwise torch op with one IEEE rounding (a multiply, a division, a
reciprocal), integer bit manipulation, or an exact conversion, so the result does not depend on
the device; nothing syncs with the host, so the ops also run inside CUDA/HIP graphs.
"""

from __future__ import annotations

import torch

from . import schemas  # noqa: F401  (the sgl_fp8 library must exist before fragments are added)

FP8 = torch.float8_e4m3fn
E8M0 = torch.float8_e8m0fnu
_INV_448_BITS = 0x3B124925      # fl32(1/448)
_AMAX_FLOOR_BITS = 0x2EDBE6FF   # bits(1e-10f)
_CANONICAL_NAN_BITS = 0x7FC00000
_E4M3_NAN_BYTE = 0x7F


def _f32(bits: torch.Tensor) -> torch.Tensor:
    return bits.view(torch.float32)


def _scalar_f32(bits: int, like: torch.Tensor) -> torch.Tensor:
    return torch.tensor(bits, dtype=torch.int32, device=like.device).view(torch.float32)


def _exact_pow2(n: torch.Tensor) -> torch.Tensor:
    """2^n as fp32 for int32 n in [-149, 127], built from bits (no pow: exact by construction)."""
    normal = (n + 127).clamp(min=1) << 23
    subnormal = torch.ones_like(n) << (n + 149).clamp(min=0, max=22)
    return _f32(torch.where(n >= -126, normal, subnormal))


def quantize_groups(a: torch.Tensor, ue8m0: bool):
    """1x128 quantization of fp32 ``a`` [rows, K] -> (q e4m3 [rows, K], scale [rows, K/128])."""
    rows, K = a.shape
    groups = a.reshape(rows, K // 128, 128)
    # Magnitude keys: the integer max keeps NaN (above Inf) where fmax/amax might not.
    key = (groups.contiguous().view(torch.int32) & 0x7FFFFFFF).amax(dim=-1)
    key = key.clamp(min=_AMAX_FLOOR_BITS)
    s = _f32(key) * _scalar_f32(_INV_448_BITS, a)
    if ue8m0:
        bits = s.view(torch.int32)
        e = (bits >> 23) & 0xFF
        e = e + ((e < 0xFF) & ((bits & 0x7FFFFF) != 0)).to(torch.int32)
        inverse = _exact_pow2(127 - e)
        scale = e.to(torch.uint8).view(E8M0)
    else:
        inverse = torch.reciprocal(s)  # IEEE-correct division on every backend torch builds
        scale = torch.where(key > 0x7F800000, _scalar_f32(_CANONICAL_NAN_BITS, a), s)
    scaled = (groups * inverse.unsqueeze(-1)).clamp(-448.0, 448.0)  # clamp keeps NaN
    q = scaled.to(FP8).view(torch.uint8)
    q = torch.where(torch.isnan(scaled), torch.full_like(q, _E4M3_NAN_BYTE), q)  # canonical NaN
    return q.view(FP8).reshape(rows, K), scale


def decode_scales(scale: torch.Tensor) -> torch.Tensor:
    """fp32 or e8m0 scales -> float64 (e8m0: 2^(b-127), 0 -> 2^-127, 0xFF -> NaN)."""
    if scale.dtype == E8M0:
        return scale.to(torch.float32).to(torch.float64)
    return scale.to(torch.float64)


def per1x128_quant(x: torch.Tensor, ue8m0: bool = False, transpose_scale: bool = False):
    rows = x.reshape(-1, x.shape[-1]).float()
    q, scale = quantize_groups(rows, ue8m0)
    q = q.reshape(x.shape)
    if transpose_scale:
        M, KB = scale.shape
        return q, torch.empty_strided((M, KB), (1, M), dtype=scale.dtype, device=x.device).copy_(scale)
    return q, scale.reshape(*x.shape[:-1], -1)


def _plain_weight(w: torch.Tensor, w_shuffled: bool) -> torch.Tensor:
    if not w_shuffled:
        return w
    N, K = w.shape
    return w.view(torch.uint8).reshape(N // 16, K // 32, 2, 16, 16).permute(0, 3, 1, 2, 4).reshape(N, K).view(FP8)


def block_scaled_gemm(q, x_scale, w, w_scale, w_shuffled, bias, out_dtype):
    M, K = q.shape
    N = w.shape[0]
    KB = K // 128
    qf = q.to(torch.float64).reshape(M, KB, 128)
    wf = _plain_weight(w, w_shuffled).to(torch.float64).reshape(N, KB, 128)
    partial = torch.einsum("mkb,nkb->mnk", qf, wf)  # exact products, float64 sums per block
    ws_rows = decode_scales(w_scale).repeat_interleave(128, dim=0)[:N]  # [N, KB]
    out = (partial * decode_scales(x_scale).unsqueeze(1) * ws_rows.unsqueeze(0)).sum(-1)
    if bias is not None:
        out = out + bias.to(torch.float64)
    return out.to(torch.float32).to(out_dtype)


def relative_row_errors(out: torch.Tensor, ref: torch.Tensor) -> torch.Tensor:
    """SPEC §3.4's accuracy measure: ||out[m] - ref[m]|| / ||ref[m]|| per row of 2-D tensors, in
    float64 (NaN for a row of out that is not finite, so that it never passes a bound)."""
    o, r = out.double(), ref.double()
    err = (o - r).norm(dim=1) / r.norm(dim=1).clamp_min(1e-300)
    return torch.where(torch.isfinite(o).all(dim=1), err, torch.full_like(err, float("nan")))


def smallm_gemm(x, w, w_scale, w_shuffled=False, bias=None):
    q, xs = quantize_groups(x.float(), w_scale.dtype == E8M0)
    return block_scaled_gemm(q, xs, w, w_scale, w_shuffled, bias, x.dtype)


def scaled_gemm(xq, x_scale, w, w_scale, w_shuffled=False, out_dtype=None, bias=None):
    return block_scaled_gemm(xq, x_scale, w, w_scale, w_shuffled, bias, out_dtype or torch.bfloat16)


def _norm_quant(x, residual, weight, eps, ue8m0):
    h = x.float() if residual is None else x.float() + residual.float()
    residual_out = h.to(x.dtype)
    hr = residual_out.float()
    inv_rms = torch.rsqrt(hr.pow(2).mean(dim=-1, keepdim=True) + eps)
    y = (hr * inv_rms * weight.float()).to(x.dtype)
    q, scale = quantize_groups(y.reshape(-1, x.shape[-1]).float(), ue8m0)
    return q.reshape(x.shape), scale.reshape(*x.shape[:-1], -1), residual_out


def rmsnorm_quant(x, weight, eps, ue8m0=False):
    q, scale, _ = _norm_quant(x, None, weight, eps, ue8m0)
    return q, scale


def add_rmsnorm_quant(x, residual, weight, eps, ue8m0=False):
    return _norm_quant(x, residual, weight, eps, ue8m0)


# ---- registration as private ops, so the C++ GPU glue can redispatch to them -----------------

_LIBRARY = torch.library.Library("sgl_fp8", "FRAGMENT")
_SCHEMAS = {
    "per1x128_quant": "(Tensor x, bool ue8m0=False, bool transpose_scale=False) -> (Tensor, Tensor)",
    "smallm_gemm": "(Tensor x, Tensor w, Tensor w_scale, bool w_shuffled=False, Tensor? bias=None) -> Tensor",
    "scaled_gemm": "(Tensor xq, Tensor x_scale, Tensor w, Tensor w_scale, bool w_shuffled=False, "
    "ScalarType? out_dtype=None, Tensor? bias=None) -> Tensor",
    "rmsnorm_quant": "(Tensor x, Tensor weight, float eps, bool ue8m0=False) -> (Tensor, Tensor)",
    "add_rmsnorm_quant": "(Tensor x, Tensor residual, Tensor weight, float eps, bool ue8m0=False) "
    "-> (Tensor, Tensor, Tensor)",
}
_IMPLS = {
    "per1x128_quant": per1x128_quant,
    "smallm_gemm": smallm_gemm,
    "scaled_gemm": scaled_gemm,
    "rmsnorm_quant": rmsnorm_quant,
    "add_rmsnorm_quant": add_rmsnorm_quant,
}
for _name, _schema in _SCHEMAS.items():
    _LIBRARY.define(f"_reference_{_name}{_schema}")
    _LIBRARY.impl(f"_reference_{_name}", _IMPLS[_name], "CompositeExplicitAutograd")


def reference_op(name: str):
    """torch.ops.sgl_fp8._reference_<name> (the redispatch target of the GPU glue)."""
    return getattr(torch.ops.sgl_fp8, f"_reference_{name}")

