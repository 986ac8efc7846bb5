// Bit-exact 1x128 FP8 quantization math (SPEC §3.1, §3.2, §3.3), shared by every backend.
//
// Free of torch headers: the CPU library, the sm_90 kernels (nvcc) and the gfx950 kernels
// (clang -x hip) all include this file, so there is exactly one definition of each formula.
// Everything here is scalar fp32 / integer arithmetic with one IEEE rounding per operation;
// nothing may be contracted into an FMA (there are no adds), and nothing relies on fast-math.
#pragma once

#include <stdint.h>

#if defined(__CUDACC__) || defined(__HIPCC__)
#define SGL_FP8_HD __host__ __device__ __forceinline__
#else
#define SGL_FP8_HD inline
#endif

namespace sgl_fp8 {

// fl32(1/448): AITER multiplies by this constant instead of dividing by 448; the two differ by
// one ulp for about half of all amax values, so the multiply is part of the contract.
constexpr uint32_t kInv448Bits = 0x3B124925u;
// AITER floors amax at 1e-10f so that an all-zero group gets a finite, nonzero scale.
constexpr uint32_t kAmaxFloorBits = 0x2EDBE6FFu;  // == bits(1e-10f)
constexpr float kE4m3Max = 448.0f;
constexpr int kGroupSize = 128;  // 1x128 activation groups, 128x128 weight blocks

SGL_FP8_HD uint32_t f32_bits(float f) {
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
  return __float_as_uint(f);
#else
  uint32_t u;
  __builtin_memcpy(&u, &f, 4);
  return u;
#endif
}

SGL_FP8_HD float f32_from_bits(uint32_t u) {
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
  return __uint_as_float(u);
#else
  float f;
  __builtin_memcpy(&f, &u, 4);
  return f;
#endif
}

// |a| as an ordered key: for non-negative IEEE floats the bit patterns order like the values,
// and every NaN pattern (> 0x7F800000) sorts above +Inf. Taking the integer max of these keys
// is therefore a max of magnitudes that cannot drop a NaN (fmaxf would, SPEC §3.3).
SGL_FP8_HD uint32_t magnitude_key(float a) { return f32_bits(a) & 0x7FFFFFFFu; }

SGL_FP8_HD uint32_t max_key(uint32_t a, uint32_t b) { return a > b ? a : b; }

// amax of a group from the integer max of its magnitude keys, floored at 1e-10f.
// NaN stays NaN, Inf stays Inf.
SGL_FP8_HD float group_amax_from_key(uint32_t max_magnitude_key) {
  return f32_from_bits(max_key(max_magnitude_key, kAmaxFloorBits));
}

// SPEC §3.1: scale = fl32(amax * fl32(1/448)).
SGL_FP8_HD float fp32_group_scale(float amax) { return amax * f32_from_bits(kInv448Bits); }

// SPEC §3.1: inv = fl32(1 / scale), IEEE-correctly rounded.
SGL_FP8_HD float fp32_group_inverse_scale(float scale) {
#if defined(__CUDA_ARCH__)
  return __frcp_rn(scale);  // correctly rounded reciprocal, independent of -prec-div
#else
  return 1.0f / scale;
#endif
}

// SPEC §3.2: the e8m0 exponent byte of s = fl32(amax/448-by-multiply), rounded up to the next
// power of two unless s already is one. Non-finite s (exponent field 0xFF) stays 0xFF.
SGL_FP8_HD uint32_t ue8m0_exponent_of_scale(float s) {
  const uint32_t bits = f32_bits(s);
  uint32_t e = (bits >> 23) & 0xFFu;
  if (e < 0xFFu && (bits & 0x7FFFFFu) != 0u) e += 1u;
  return e;
}

// Exactly 2^n as fp32 for n in [-149, 127] (subnormal results included).
SGL_FP8_HD float exact_pow2(int n) {
  if (n >= -126) return f32_from_bits(static_cast<uint32_t>(n + 127) << 23);
  return f32_from_bits(1u << (n + 149));
}

// SPEC §3.2: inv = 2^(127 - e) exactly. For e = 0xFF (non-finite group) this is 2^-128, which
// keeps NaN inputs NaN; the group's scale byte 0xFF makes every dependent output non-finite.
SGL_FP8_HD float ue8m0_inverse_scale(uint32_t e) { return exact_pow2(127 - static_cast<int>(e)); }

// e8m0 byte -> fp32, OCP MX semantics (what torch.float8_e8m0fnu and the gfx950 MFMA scale
// operands use): 2^(b-127); 0xFF is NaN. For bytes 1..254 this is SPEC §4's (byte << 23).
SGL_FP8_HD float e8m0_to_float(uint32_t b) {
  if (b == 0xFFu) return f32_from_bits(0x7FC00000u);
  if (b == 0u) return f32_from_bits(0x00400000u);  // 2^-127, subnormal in fp32
  return f32_from_bits(b << 23);
}

// OCP e4m3fn encoding of v with round-to-nearest-even, saturating finite overflow (and +-Inf)
// to +-448 and keeping NaN NaN. This equals SPEC's e4m3fn_rne(clamp(v, -448, 448)) with a
// NaN-preserving clamp, and what `cvt.rn.satfinite.e4m3x2.f32` computes on sm_90 (every NaN
// becomes 0x7F).
// Portable software version (CPU, and the reference for the device paths).
SGL_FP8_HD uint8_t e4m3fn_from_f32_satfinite(float v) {
  const uint32_t bits = f32_bits(v);
  const uint8_t sign = static_cast<uint8_t>((bits >> 24) & 0x80u);
  const uint32_t mag = bits & 0x7FFFFFFFu;
  // NaN encodes as the canonical 0x7F whatever its sign: the sign of a NaN is not portable
  // (x86 gives inf * 0 a negative NaN, GPUs a positive one) and cvt.satfinite emits 0x7F.
  if (mag > 0x7F800000u) return 0x7Fu;
  if (mag >= 0x43E00000u) return static_cast<uint8_t>(sign | 0x7Eu);  // >= 448 (and Inf): 448
  if (mag < 0x3C800000u) {
    // Below 2^-6, the smallest normal: subnormal steps of 2^-9. Round mag * 2^9 to an integer
    // (0..8) with ties to even; 8 encodes as 0x08 == 2^-6, the next binade, so it needs no
    // special case. mag * 2^9 < 8 keeps the fp32 representation exact except below 2^-9 / 2
    // where everything rounds to 0 or 1 anyway; do it on the bits to avoid libm on device.
    const int exponent = static_cast<int>(mag >> 23);  // biased
    if (exponent < 127 - 10) return sign;               // < 2^-10: rounds to 0 (half of 2^-9)
    // value = 1.m * 2^(exponent-127); in units of 2^-9: (1.m) * 2^(exponent-127+9)
    const uint32_t significand = (mag & 0x7FFFFFu) | 0x800000u;  // 24 bits, 1.m * 2^23
    const int shift = 23 - (exponent - 127 + 9);                   // >= 21 here
    const uint32_t integer = significand >> shift;
    const uint32_t remainder = significand & ((1u << shift) - 1u);
    const uint32_t half = 1u << (shift - 1);
    uint32_t rounded = integer;
    if (remainder > half || (remainder == half && (integer & 1u))) rounded += 1u;
    return static_cast<uint8_t>(sign | rounded);
  }
  // Normal: rebias the exponent (127 -> 7) and keep 3 mantissa bits, ties to even. A carry out
  // of the mantissa correctly bumps the exponent; mag < 448 keeps the result <= 0x7E.
  const uint32_t mantissa = mag & 0x7FFFFFu;
  uint32_t code = (((mag >> 23) - 120u) << 3) | (mantissa >> 20);
  const uint32_t remainder = mantissa & 0xFFFFFu;
  if (remainder > 0x80000u || (remainder == 0x80000u && (code & 1u))) code += 1u;
  return static_cast<uint8_t>(sign | code);
}

// e4m3fn byte -> fp32 (exact). 0x7F / 0xFF are NaN.
SGL_FP8_HD float e4m3fn_to_f32(uint32_t b) {
  const uint32_t sign = (b & 0x80u) << 24;
  const uint32_t exponent = (b >> 3) & 0xFu;
  const uint32_t mantissa = b & 0x7u;
  if (exponent == 0xFu && mantissa == 0x7u) return f32_from_bits(sign | 0x7FC00000u);
  if (exponent == 0u) {
    // subnormal: mantissa * 2^-9 (exact in fp32)
    const float magnitude = static_cast<float>(mantissa) * f32_from_bits(0x3B000000u);  // 2^-9
    return f32_from_bits(sign | f32_bits(magnitude));
  }
  return f32_from_bits(sign | ((exponent + 120u) << 23) | (mantissa << 20));
}

// bf16 / fp16 bit patterns <-> fp32 for code that cannot use vendor headers (SPEC §7).
SGL_FP8_HD float bf16_bits_to_f32(uint16_t h) { return f32_from_bits(static_cast<uint32_t>(h) << 16); }

SGL_FP8_HD float fp16_bits_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1Fu;
  const uint32_t mantissa = h & 0x3FFu;
  if (exponent == 0x1Fu) return f32_from_bits(sign | 0x7F800000u | (mantissa << 13));
  if (exponent == 0u) {
    const float magnitude = static_cast<float>(mantissa) * f32_from_bits(0x33800000u);  // 2^-24
    return f32_from_bits(sign | f32_bits(magnitude));
  }
  return f32_from_bits(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

// The quantization of one group, given its amax key: scale (as stored) and the multiplier.
struct GroupQuantParams {
  float scale;             // fp32 path: the stored scale; e8m0 path: its value 2^(e-127)
  float inverse_scale;     // what each element is multiplied by before rounding to e4m3
  uint32_t e8m0_exponent;  // e8m0 path: the stored byte
};

SGL_FP8_HD GroupQuantParams group_quant_params(uint32_t max_magnitude_key, bool ue8m0) {
  const float amax = group_amax_from_key(max_magnitude_key);
  const float s = fp32_group_scale(amax);
  GroupQuantParams p;
  if (ue8m0) {
    p.e8m0_exponent = ue8m0_exponent_of_scale(s);
    p.scale = e8m0_to_float(p.e8m0_exponent);
    p.inverse_scale = ue8m0_inverse_scale(p.e8m0_exponent);
  } else {
    p.e8m0_exponent = 0;
    // A NaN group stores the canonical quiet NaN: NaN payloads differ between CPUs and GPUs
    // (x86 keeps the operand's, CUDA returns 0x7FFFFFFF), and the scale is compared bitwise.
    p.scale = max_magnitude_key > 0x7F800000u ? f32_from_bits(0x7FC00000u) : s;
    p.inverse_scale = fp32_group_inverse_scale(s);
  }
  return p;
}

}  // namespace sgl_fp8
