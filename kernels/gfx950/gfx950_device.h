// Device-side building blocks of the gfx950 kernels: lane/wave ids, 16-byte loads, DPP
// reductions inside a row of 16 lanes, e4m3 packing and the 8-element 1x128 quantization step.
//
// Only hip/hip_runtime.h and headers under kernels/ (SPEC §7): bf16/fp16/fp8 are handled with bit
// operations and __builtin_amdgcn_* builtins. Work-item ids come from the builtins directly
// (not threadIdx), so the ISA has no calls into the device libraries.
#pragma once

#include <hip/hip_runtime.h>
#include <stdint.h>

#include "../common/fp8_quant_math.h"
#include "gfx950_numerics.h"

#if defined(__HIP_DEVICE_COMPILE__) && !defined(__gfx950__)
#error "kernels/gfx950/*.hip target gfx950 only (OCP e4m3 MFMA and conversions); build with --offload-arch=gfx950"
#endif

namespace sgl_fp8 {
namespace gfx950 {

typedef uint32_t u32x2 __attribute__((ext_vector_type(2)));
typedef uint32_t u32x4 __attribute__((ext_vector_type(4)));
typedef int32_t i32x8 __attribute__((ext_vector_type(8)));
typedef float f32x4 __attribute__((ext_vector_type(4)));
typedef uint16_t u16x2 __attribute__((ext_vector_type(2)));

#define SGL_DEV __device__ __forceinline__

SGL_DEV int lane_id() { return static_cast<int>(__builtin_amdgcn_workitem_id_x() & 63u); }
// Wave index inside the workgroup, made wave-uniform (an SGPR) so everything derived from it
// (K range, LDS region, scalar loads) stays scalar.
SGL_DEV int wave_id() { return __builtin_amdgcn_readfirstlane(static_cast<int>(__builtin_amdgcn_workitem_id_x() >> 6)); }
SGL_DEV int thread_id() { return static_cast<int>(__builtin_amdgcn_workitem_id_x()); }
SGL_DEV int block_id_x() { return static_cast<int>(__builtin_amdgcn_workgroup_id_x()); }
SGL_DEV int block_id_y() { return static_cast<int>(__builtin_amdgcn_workgroup_id_y()); }
SGL_DEV int uniform(int v) { return __builtin_amdgcn_readfirstlane(v); }
// The lane id as a value the compiler cannot see through: per-lane address arithmetic derived
// from it is recomputed where it is used (a few VALU ops) instead of being hoisted out of the
// K loop into registers that stay live across it (which made the GEMM spill).
SGL_DEV int opaque_lane(int lane) {
  asm volatile("" : "+v"(lane));
  return lane;
}
// A (uniform) value moved to a VGPR the compiler treats as per-lane: a load from it stays a
// vector load whose result is not read back to an SGPR (v_readfirstlane) right after issue.
SGL_DEV uint32_t opaque_vgpr(uint32_t v) {
  asm volatile("" : "+v"(v));
  return v;
}

// Buffer resources (V#) for the streamed operands: a uniform 64-bit base in SGPRs, a per-lane
// 32-bit voffset and a uniform soffset give buffer_load_dwordx4 with no per-lane 64-bit address
// math, and the range check (num_records bytes) returns zeros for padding-token rows past M.
// 0x00020000 is the gfx9-family dword-3 (32-bit data format) that CK also uses on gfx950.
typedef __amdgpu_buffer_rsrc_t BufferRsrc;
constexpr int kBufferRsrcWord3 = 0x00020000;
constexpr int kAuxNontemporal = 2;  // gfx940+ cache policy bit "nt" (what __builtin_nontemporal_load emits)

SGL_DEV BufferRsrc make_buffer(const void* base, uint32_t num_bytes) {
  return __builtin_amdgcn_make_buffer_rsrc(const_cast<void*>(base), static_cast<short>(0),
                                           static_cast<int>(num_bytes), kBufferRsrcWord3);
}
// Weight stream: 16 bytes, non-temporal (each weight byte is read once per launch; keep it from
// evicting the activations and scales that every workgroup re-reads).
SGL_DEV u32x4 buffer_load16_nt(BufferRsrc r, uint32_t voffset, uint32_t soffset) {
  return __builtin_amdgcn_raw_buffer_load_b128(r, static_cast<int>(voffset), static_cast<int>(soffset), kAuxNontemporal);
}
SGL_DEV u32x4 buffer_load16(BufferRsrc r, uint32_t voffset, uint32_t soffset) {
  return __builtin_amdgcn_raw_buffer_load_b128(r, static_cast<int>(voffset), static_cast<int>(soffset), 0);
}
// Read-only data the scalar unit may cache (address space 4, "constant"): uniform loads of it
// become s_load_dword into SGPRs.
typedef const __attribute__((address_space(4))) uint32_t ConstantU32;
SGL_DEV uint32_t load_constant_u32(const void* p, uint32_t index) {
  return ((ConstantU32*)(p))[index];  // C-style cast: generic -> constant address space
}

// LDS through 32-bit address-space-3 pointers: address math stays 32-bit (a generic pointer made
// the compiler form 64-bit LDS addresses whose high half aliased unrelated registers).
typedef __attribute__((address_space(3))) uint8_t LdsByte;
SGL_DEV LdsByte* lds_bytes(void* generic_lds) { return (LdsByte*)(generic_lds); }
template <typename T>
SGL_DEV void lds_store(LdsByte* base, uint32_t offset, T v) {
  *(__attribute__((address_space(3))) T*)(base + offset) = v;
}
template <typename T>
SGL_DEV T lds_load(const LdsByte* base, uint32_t offset) {
  return *(const __attribute__((address_space(3))) T*)(base + offset);
}

SGL_DEV u32x4 load16(const void* p) { return *reinterpret_cast<const u32x4*>(p); }
SGL_DEV u32x2 load8(const void* p) { return *reinterpret_cast<const u32x2*>(p); }

SGL_DEV i32x8 make_fragment(u32x4 lo, u32x4 hi) {
  i32x8 f;
  f[0] = static_cast<int32_t>(lo[0]);
  f[1] = static_cast<int32_t>(lo[1]);
  f[2] = static_cast<int32_t>(lo[2]);
  f[3] = static_cast<int32_t>(lo[3]);
  f[4] = static_cast<int32_t>(hi[0]);
  f[5] = static_cast<int32_t>(hi[1]);
  f[6] = static_cast<int32_t>(hi[2]);
  f[7] = static_cast<int32_t>(hi[3]);
  return f;
}

// ---- reductions inside one row of 16 lanes (DPP) ----------------------------------------------
// quad_perm [1,0,3,2] and [2,3,0,1] make each quad uniform; row_half_mirror pairs quad q with
// quad 1-q inside each 8 lanes; row_mirror pairs the two halves of the row. All 16 lanes end with
// the same value, and for a sum each lane adds the same two operands (commutatively), so the
// result is identical on every lane and from run to run.
constexpr int kDppQuadXor1 = 0xB1;
constexpr int kDppQuadXor2 = 0x4E;
constexpr int kDppRowHalfMirror = 0x141;
constexpr int kDppRowMirror = 0x140;

template <int kCtrl>
SGL_DEV uint32_t dpp_u32(uint32_t v) {
  return static_cast<uint32_t>(__builtin_amdgcn_update_dpp(0, static_cast<int>(v), kCtrl, 0xF, 0xF, false));
}

SGL_DEV uint32_t row16_max_u32(uint32_t v) {
  v = max_key(v, dpp_u32<kDppQuadXor1>(v));
  v = max_key(v, dpp_u32<kDppQuadXor2>(v));
  v = max_key(v, dpp_u32<kDppRowHalfMirror>(v));
  v = max_key(v, dpp_u32<kDppRowMirror>(v));
  return v;
}

SGL_DEV float row16_sum_f32(float v) {
  v = v + __uint_as_float(dpp_u32<kDppQuadXor1>(__float_as_uint(v)));
  v = v + __uint_as_float(dpp_u32<kDppQuadXor2>(__float_as_uint(v)));
  v = v + __uint_as_float(dpp_u32<kDppRowHalfMirror>(__float_as_uint(v)));
  v = v + __uint_as_float(dpp_u32<kDppRowMirror>(__float_as_uint(v)));
  return v;
}

// ---- 16-bit float inputs ----------------------------------------------------------------------

// Max of the 16-bit magnitude keys of the 8 values in a 16-byte load (two per dword).
SGL_DEV uint32_t key16_of_8(u32x4 raw) {
  u16x2 k0 = __builtin_bit_cast(u16x2, magnitude_key16x2(raw[0]));
  u16x2 k1 = __builtin_bit_cast(u16x2, magnitude_key16x2(raw[1]));
  u16x2 k2 = __builtin_bit_cast(u16x2, magnitude_key16x2(raw[2]));
  u16x2 k3 = __builtin_bit_cast(u16x2, magnitude_key16x2(raw[3]));
  u16x2 m = __builtin_elementwise_max(__builtin_elementwise_max(k0, k1), __builtin_elementwise_max(k2, k3));
  return max_key(static_cast<uint32_t>(m[0]), static_cast<uint32_t>(m[1]));
}

template <bool kFp16>
SGL_DEV uint32_t key16_to_key32(uint32_t key16) {
  if constexpr (kFp16) {
    return magnitude_key(static_cast<float>(__builtin_bit_cast(_Float16, static_cast<uint16_t>(key16))));
  } else {
    return key16 << 16;  // == bf16_key16_to_key32: the bf16 bits are the top half of the fp32 bits
  }
}

// Element e (0..7) of a 16-byte load of bf16/fp16 values, as fp32 (exact).
template <bool kFp16>
SGL_DEV float elem16_to_f32(u32x4 raw, int e) {
  const uint32_t word = raw[e >> 1];
  const uint32_t h = (e & 1) ? (word >> 16) : (word & 0xFFFFu);
  if constexpr (kFp16) {
    return static_cast<float>(__builtin_bit_cast(_Float16, static_cast<uint16_t>(h)));
  } else {
    return __uint_as_float((e & 1) ? (word & 0xFFFF0000u) : (word << 16));
  }
}

template <bool kFp16>
SGL_DEV void unpack8(u32x4 raw, float (&v)[8]) {
#pragma unroll
  for (int e = 0; e < 8; ++e) v[e] = elem16_to_f32<kFp16>(raw, e);
}

// fp32 -> bf16/fp16 bits, round to nearest even (the casts of SPEC §3.4 / §3.5).
template <bool kFp16>
SGL_DEV uint32_t f32_to_half_bits(float f) {
  if constexpr (kFp16) {
    return static_cast<uint32_t>(__builtin_bit_cast(uint16_t, static_cast<_Float16>(f)));  // v_cvt_f16_f32 (RNE)
  } else {
    return bf16_bits_from_f32_rne(f);
  }
}

// ---- e4m3 packing ---------------------------------------------------------------------------

// Four products a*inv of a finite group -> 4 e4m3 bytes: explicit +-448 clamp (v_med3_f32), then
// v_cvt_pk_fp8_f32 (OCP e4m3 on gfx950, round to nearest even), the sequence AITER uses. Only
// for finite groups: v_med3_f32 would turn a NaN into a number.
SGL_DEV uint32_t pack4_e4m3_finite(float a, float b, float c, float d) {
  a = __builtin_amdgcn_fmed3f(a, -kE4m3Max, kE4m3Max);
  b = __builtin_amdgcn_fmed3f(b, -kE4m3Max, kE4m3Max);
  c = __builtin_amdgcn_fmed3f(c, -kE4m3Max, kE4m3Max);
  d = __builtin_amdgcn_fmed3f(d, -kE4m3Max, kE4m3Max);
  int packed = __builtin_amdgcn_cvt_pk_fp8_f32(a, b, 0, false);
  packed = __builtin_amdgcn_cvt_pk_fp8_f32(c, d, packed, true);
  return static_cast<uint32_t>(packed);
}

// Groups holding NaN/Inf (rare; a wave-uniform branch): the same clamp + convert, then every
// NaN product gets the canonical byte 0x7F. That equals e4m3fn_from_f32_satfinite for every
// input: +-Inf clamps to +-448 (0x7E/0xFE), finite values convert as on the fast path, and NaN
// becomes 0x7F whatever v_med3_f32 / v_cvt_pk_fp8_f32 made of it (NaN signs are not portable).
// Branch-free, so the cold path stays a few instructions.
SGL_DEV uint32_t nan_byte_fixup(uint32_t packed, float v, int byte) {
  const uint32_t bits = __float_as_uint(v);
  const uint32_t nan_byte = 0x7Fu;  // canonical NaN whatever its sign, as in fp8_quant_math.h
  const uint32_t shift = 8u * static_cast<uint32_t>(byte);
  const bool is_nan = (bits & 0x7FFFFFFFu) > 0x7F800000u;
  return is_nan ? ((packed & ~(0xFFu << shift)) | (nan_byte << shift)) : packed;
}

SGL_DEV uint32_t pack4_e4m3_any(float a, float b, float c, float d) {
  uint32_t packed = pack4_e4m3_finite(a, b, c, d);
  packed = nan_byte_fixup(packed, a, 0);
  packed = nan_byte_fixup(packed, b, 1);
  packed = nan_byte_fixup(packed, c, 2);
  packed = nan_byte_fixup(packed, d, 3);
  return packed;
}

// The 1x128 quantization of this lane's 8 consecutive elements of a group (SPEC §3.1/§3.2),
// given the group's inverse scale. `finite` is this lane's group_is_finite(); the NaN fix-up
// runs only when some lane of the wave has a non-finite group (a wave-uniform branch, so the
// common case pays one s_cbranch).
SGL_DEV u32x2 quantize8(const float (&v)[8], float inverse_scale, bool finite) {
  float p[8];
#pragma unroll
  for (int e = 0; e < 8; ++e) p[e] = v[e] * inverse_scale;
  u32x2 q;
  if (__builtin_expect(__builtin_amdgcn_ballot_w64(!finite) == 0, 1)) {
    q[0] = pack4_e4m3_finite(p[0], p[1], p[2], p[3]);
    q[1] = pack4_e4m3_finite(p[4], p[5], p[6], p[7]);
  } else {
    q[0] = pack4_e4m3_any(p[0], p[1], p[2], p[3]);
    q[1] = pack4_e4m3_any(p[4], p[5], p[6], p[7]);
  }
  return q;
}

// Group parameters from this lane's local magnitude key, reduced over the 16 lanes of the group.
SGL_DEV GroupQuantParams group_params_row16(uint32_t local_key32, bool ue8m0, bool& finite) {
  const uint32_t key = row16_max_u32(local_key32);
  finite = group_is_finite(key);
  return group_quant_params(key, ue8m0);
}

// The scale as stored: fp32 bits, or the e8m0 byte.
SGL_DEV uint32_t stored_scale_bits(const GroupQuantParams& p, bool ue8m0) {
  return ue8m0 ? p.e8m0_exponent : __float_as_uint(p.scale);
}

// hipGetLastError -> nullptr or its (static) message.
inline const char* launch_error() {
  const hipError_t err = hipGetLastError();
  return err == hipSuccess ? nullptr : hipGetErrorString(err);
}

}  // namespace gfx950
}  // namespace sgl_fp8
