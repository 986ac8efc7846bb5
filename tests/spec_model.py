"""Golden model of SPEC §3 and §4, in numpy, written from the SPEC text only.

This module deliberately does not import torch or sglang_fp8ext: it is an independent statement
of the contract that the tests hold the C++ kernels to. Every function takes and returns numpy
arrays; the tests convert torch tensors with ``.view(<integer dtype>)`` so that bit patterns (not
values) cross the boundary.

Conventions
  * bf16 / fp16 tensors travel as uint16 bit patterns, fp8 (e4m3fn) and e8m0 as uint8 codes,
    fp32 as np.float32 (or uint32 bits where bits matter).
  * The quantization is computed with np.float32 scalar/array arithmetic, which is IEEE-754
    binary32 with round-to-nearest-even and gradual underflow, i.e. exactly the ``fl32(...)`` of
    the SPEC. The GEMM reference is float64.
"""

from __future__ import annotations

import numpy as np

# ----------------------------------------------------------------------------------------------
# Constants of SPEC §3.1
# ----------------------------------------------------------------------------------------------

#: fl32(1/448) as written in the SPEC: the bit pattern 0x3B124925.
INV_448 = np.array([0x3B124925], dtype=np.uint32).view(np.float32)[0]
#: the amax floor 1e-10f
AMAX_FLOOR = np.float32(1e-10)
E4M3_MAX = np.float32(448.0)
GROUP = 128

# ----------------------------------------------------------------------------------------------
# bf16 / fp16 <-> fp32 (bit patterns)
# ----------------------------------------------------------------------------------------------


def bf16_bits_to_f32(bits: np.ndarray) -> np.ndarray:
    """bf16 bit patterns (uint16) -> float32 values (exact: bf16 is the top half of fp32)."""
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << np.uint32(16)).view(np.float32)


def f32_to_bf16_bits(v: np.ndarray) -> np.ndarray:
    """float32 -> bf16 bit patterns, round-to-nearest-even; NaN stays NaN (quiet)."""
    v = np.asarray(v, dtype=np.float32)
    b = v.view(np.uint32).astype(np.uint64)
    lsb = (b >> np.uint64(16)) & np.uint64(1)
    rounded = ((b + np.uint64(0x7FFF) + lsb) >> np.uint64(16)).astype(np.uint16)
    nan = np.isnan(v)
    quiet = ((b >> np.uint64(16)).astype(np.uint16)) | np.uint16(0x0040)
    return np.where(nan, quiet, rounded).astype(np.uint16)


def fp16_bits_to_f32(bits: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        return np.asarray(bits, dtype=np.uint16).view(np.float16).astype(np.float32)


def f32_to_fp16_bits(v: np.ndarray) -> np.ndarray:
    """float32 -> fp16 bit patterns (numpy's cast is IEEE round-to-nearest-even)."""
    with np.errstate(over="ignore", invalid="ignore"):
        return np.asarray(v, dtype=np.float32).astype(np.float16).view(np.uint16)


def act_bits_to_f32(bits: np.ndarray, dtype: str) -> np.ndarray:
    """``dtype`` is "bf16" or "fp16"."""
    return bf16_bits_to_f32(bits) if dtype == "bf16" else fp16_bits_to_f32(bits)


def f32_to_act_bits(v: np.ndarray, dtype: str) -> np.ndarray:
    return f32_to_bf16_bits(v) if dtype == "bf16" else f32_to_fp16_bits(v)


# ----------------------------------------------------------------------------------------------
# OCP e4m3fn: decode table and round-to-nearest-even by enumeration
# ----------------------------------------------------------------------------------------------


def e4m3fn_decode_code(code: int) -> float:
    """Value of one e4m3fn byte (OCP: 1 sign, 4 exponent bits (bias 7), 3 mantissa bits; no
    infinities; S.1111.111 is NaN; exponent 0 is subnormal m * 2^-9)."""
    sign = -1.0 if code & 0x80 else 1.0
    e = (code >> 3) & 0xF
    m = code & 0x7
    if e == 0xF and m == 0x7:
        return float("nan")
    if e == 0:
        return sign * m * 2.0 ** -9
    return sign * (1.0 + m / 8.0) * 2.0 ** (e - 7)


#: value of every byte 0..255 as float64
E4M3_VALUES = np.array([e4m3fn_decode_code(c) for c in range(256)], dtype=np.float64)
#: the non-negative finite codes 0x00..0x7E, whose values increase with the code
_E4M3_POS = E4M3_VALUES[:0x7F]
assert np.all(np.diff(_E4M3_POS) > 0) and _E4M3_POS[-1] == 448.0 and _E4M3_POS[1] == 2.0 ** -9

E4M3_NAN = 0x7F


def e4m3_is_nan(codes: np.ndarray) -> np.ndarray:
    return (np.asarray(codes, dtype=np.uint8) & 0x7F) == 0x7F


def e4m3fn_rne(v: np.ndarray) -> np.ndarray:
    """float32 values in [-448, 448] (or NaN) -> e4m3fn codes, round-to-nearest, ties to the even
    code. Found by enumeration: the nearest of the 127 non-negative finite values to |v|, the
    candidate with the even code on a tie; the sign bit is v's sign bit (so -0 and negative values
    that round to zero give 0x80). NaN gives 0x7F (the sign of a NaN is not part of the contract).
    Values beyond 448 saturate to 448 (callers clamp first, as the SPEC does)."""
    v = np.asarray(v, dtype=np.float32)
    mag = np.abs(v.astype(np.float64))
    idx = np.searchsorted(_E4M3_POS, mag, side="left")  # _E4M3_POS[idx-1] < mag <= _E4M3_POS[idx]
    idx = np.clip(idx, 1, len(_E4M3_POS) - 1)
    lo = _E4M3_POS[idx - 1]
    hi = _E4M3_POS[idx]
    d_lo = mag - lo
    d_hi = hi - mag
    tie_pick = np.where((idx - 1) % 2 == 0, idx - 1, idx)
    code = np.where(d_lo < d_hi, idx - 1, np.where(d_hi < d_lo, idx, tie_pick))
    code = np.where(mag == 0.0, 0, code)
    code = np.where(mag >= 448.0, 0x7E, code)  # saturate (only reachable without the clamp)
    code = code.astype(np.uint8) | (np.signbit(v).astype(np.uint8) << np.uint8(7))
    return np.where(np.isnan(v), np.uint8(E4M3_NAN), code).astype(np.uint8)


def e4m3_decode(codes: np.ndarray) -> np.ndarray:
    """e4m3fn codes -> float64 values (NaN for the NaN codes)."""
    return E4M3_VALUES[np.asarray(codes, dtype=np.uint8)]


# ----------------------------------------------------------------------------------------------
# e8m0 (SPEC §3.2, §4)
# ----------------------------------------------------------------------------------------------


def e8m0_decode(codes: np.ndarray) -> np.ndarray:
    """e8m0 bytes -> float32: 2^(b-127) for 1..254 (``b << 23`` as fp32), 0 -> 2^-127,
    0xFF -> NaN (OCP MX)."""
    b = np.asarray(codes, dtype=np.uint8).astype(np.uint32)
    out = (b << np.uint32(23)).view(np.float32).copy()
    out[b == 0] = np.float32(2.0 ** -127)
    out[b == 0xFF] = np.float32(np.nan)
    return out


class E8M0ConversionError(ValueError):
    def __init__(self, index, value):
        super().__init__(f"block {index} has scale {value!r}")
        self.index = index
        self.value = value


def scale_to_e8m0(scale: np.ndarray) -> np.ndarray:
    """fp32 block scales -> e8m0 bytes (SPEC §4). Raises E8M0ConversionError(index, value) for the
    first (row-major) entry that is not a positive normal power of two."""
    s = np.ascontiguousarray(scale, dtype=np.float32)
    bits = s.view(np.uint32)
    exp = (bits >> np.uint32(23)) & np.uint32(0xFF)
    ok = ((bits >> np.uint32(31)) == 0) & ((bits & np.uint32(0x7FFFFF)) == 0) & (exp >= 1) & (exp <= 254)
    if not ok.all():
        flat = int(np.flatnonzero(~ok.reshape(-1))[0])
        index = tuple(int(i) for i in np.unravel_index(flat, s.shape))
        raise E8M0ConversionError(index, float(s.reshape(-1)[flat]))
    return exp.astype(np.uint8)


# ----------------------------------------------------------------------------------------------
# 1x128 quant (SPEC §3.1, §3.2, §3.3)
# ----------------------------------------------------------------------------------------------


def _nan_aware_amax(a: np.ndarray) -> np.ndarray:
    """max_i |a_i| over the last axis, NaN if any element is NaN (never dropped)."""
    mag = np.abs(a)
    has_nan = np.isnan(mag).any(axis=-1)
    m = np.max(np.where(np.isnan(mag), np.float32(0), mag), axis=-1)
    return np.where(has_nan, np.float32(np.nan), m).astype(np.float32)


def quant_1x128(a: np.ndarray, ue8m0: bool = False):
    """a: float32 array [..., K] (the values float32(x_i)). Returns (q codes uint8 [..., K],
    scale) where scale is float32 [..., K/128] (fp32 path) or uint8 e8m0 bytes (ue8m0 path)."""
    a = np.asarray(a, dtype=np.float32)
    K = a.shape[-1]
    assert K % GROUP == 0
    g = a.reshape(*a.shape[:-1], K // GROUP, GROUP)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore", under="ignore"):
        amax = _nan_aware_amax(g)
        # amax = max(1e-10f, amax); NaN propagates (a NaN amax is not replaced by the floor)
        amax = np.where(np.isnan(amax) | (amax > AMAX_FLOOR), amax, AMAX_FLOOR).astype(np.float32)
        s = (amax * INV_448).astype(np.float32)  # fl32(amax * 0x3B124925)
        if not ue8m0:
            scale = s
            inv = (np.float32(1.0) / s).astype(np.float32)  # IEEE fp32 division
        else:
            bits = s.view(np.uint32)
            e = ((bits >> np.uint32(23)) & np.uint32(0xFF)).astype(np.int64)
            mant = bits & np.uint32(0x7FFFFF)
            e = np.where((e < 0xFF) & (mant != 0), e + 1, e)
            scale = e.astype(np.uint8)
            # inv = 2^(127-e) exactly (for e = 255: 2^-128, an fp32 subnormal, still exact)
            inv = np.ldexp(np.float32(1.0), (127 - e).astype(np.int32)).astype(np.float32)
        prod = (g * inv[..., None]).astype(np.float32)  # fl32(a_i * inv)
        clamped = np.where(np.isnan(prod), prod, np.clip(prod, -E4M3_MAX, E4M3_MAX)).astype(np.float32)
    q = e4m3fn_rne(clamped).reshape(a.shape)
    return q, scale


def quant_act_bits(bits: np.ndarray, dtype: str, ue8m0: bool = False):
    """quant_1x128 from bf16/fp16 bit patterns."""
    return quant_1x128(act_bits_to_f32(bits, dtype), ue8m0)


def scale_values(scale: np.ndarray, ue8m0: bool) -> np.ndarray:
    """The scale as float64 values (e8m0 bytes decoded)."""
    if ue8m0:
        return e8m0_decode(scale).astype(np.float64)
    return np.asarray(scale, dtype=np.float32).astype(np.float64)


def dequant(q: np.ndarray, scale: np.ndarray, ue8m0: bool) -> np.ndarray:
    """q * scale in float64, [..., K]."""
    sv = scale_values(scale, ue8m0)
    qv = e4m3_decode(q)
    K = q.shape[-1]
    g = qv.reshape(*q.shape[:-1], K // GROUP, GROUP) * sv[..., None]
    return g.reshape(q.shape)


# ----------------------------------------------------------------------------------------------
# GEMM reference (SPEC §3.4), float64
# ----------------------------------------------------------------------------------------------


def gemm_ref(q: np.ndarray, xs: np.ndarray, w: np.ndarray, ws: np.ndarray, bias=None) -> np.ndarray:
    """out[m, n] = bias[n] + sum_kb xs[m, kb] * ws[n // 128, kb] * P[m, n, kb], in float64.

    q: e4m3 codes [M, K]; xs: float64 scale values [M, K/128]; w: e4m3 codes [N, K] (plain
    layout); ws: float64 scale values [ceil(N/128), K/128]; bias: float64 [N] or None.
    Returns float64 [M, N] (before the final cast)."""
    M, K = q.shape
    N = w.shape[0]
    KB = K // GROUP
    qv = e4m3_decode(q)
    wv = e4m3_decode(w)
    ws_n = np.repeat(np.asarray(ws, dtype=np.float64), GROUP, axis=0)[:N]  # [N, KB]
    out = np.zeros((M, N), dtype=np.float64)
    for kb in range(KB):
        sl = slice(kb * GROUP, (kb + 1) * GROUP)
        P = qv[:, sl] @ wv[:, sl].T  # exact in float64 (products of 4-bit significands)
        out += (np.asarray(xs, dtype=np.float64)[:, kb : kb + 1] * ws_n[None, :, kb]) * P
    if bias is not None:
        out += np.asarray(bias, dtype=np.float64)[None, :]
    return out


def row_rel_err(out: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """||out[m] - ref[m]|| / ||ref[m]|| for every row (float64)."""
    out = np.asarray(out, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    num = np.linalg.norm(out - ref, axis=-1)
    den = np.linalg.norm(ref, axis=-1)
    return num / den


# ----------------------------------------------------------------------------------------------
# RMSNorm + quant (SPEC §3.5)
# ----------------------------------------------------------------------------------------------


def rmsnorm_ref(x_bits, weight_bits, eps: float, dtype: str, residual_bits=None):
    """Returns (y_bits, residual_out_bits or None), following §3.5:
    h = float(x) (+ float(residual)) in fp32; residual_out = cast(h); hr = float(residual_out);
    y = cast(hr * (1/sqrt(mean(hr^2) + eps)) * float(weight)), the norm done in float64 and
    rounded to fp32 before the cast (the SPEC's computation is fp32; the contract tolerance is 1e-2)."""
    h = act_bits_to_f32(x_bits, dtype)
    res_out = None
    if residual_bits is not None:
        h = (h + act_bits_to_f32(residual_bits, dtype)).astype(np.float32)
        res_out = f32_to_act_bits(h, dtype)
        hr = act_bits_to_f32(res_out, dtype).astype(np.float64)
    else:
        hr = h.astype(np.float64)
    wv = act_bits_to_f32(weight_bits, dtype).astype(np.float64)
    r = 1.0 / np.sqrt(np.mean(hr * hr, axis=-1, keepdims=True) + eps)
    with np.errstate(over="ignore"):
        y = f32_to_act_bits((hr * r * wv).astype(np.float32), dtype)
    return y, res_out


# ----------------------------------------------------------------------------------------------
# AITER (16,16) preshuffle (SPEC §4), from the byte-offset formula
# ----------------------------------------------------------------------------------------------


def shuffle_offsets(N: int, K: int) -> np.ndarray:
    """o[n, k] = n0*16*K + k0*512 + k1*256 + n1*16 + k2 with n = 16*n0 + n1, k = 32*k0 + 16*k1 + k2."""
    n = np.arange(N)[:, None]
    k = np.arange(K)[None, :]
    n0, n1 = n // 16, n % 16
    k0, r = k // 32, k % 32
    k1, k2 = r // 16, r % 16
    return n0 * 16 * K + k0 * 512 + k1 * 256 + n1 * 16 + k2


def shuffle_bytes(w: np.ndarray) -> np.ndarray:
    """Plain [N, K] bytes -> shuffled [N, K] bytes: shuffled.flat[o(n, k)] = w[n, k]."""
    N, K = w.shape
    out = np.empty(N * K, dtype=w.dtype)
    out[shuffle_offsets(N, K).reshape(-1)] = w.reshape(-1)
    return out.reshape(N, K)


def unshuffle_bytes(ws: np.ndarray) -> np.ndarray:
    N, K = ws.shape
    return ws.reshape(-1)[shuffle_offsets(N, K)]
