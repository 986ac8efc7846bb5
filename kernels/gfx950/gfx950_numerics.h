// Small numeric helpers of the gfx950 kernels that are not layout formulas but must agree with
// kernels/common/fp8_quant_math.h. Plain C++ (host and device), so the CPU test
// (tests/test_gfx950_lanes.py) checks them exhaustively against the common header.
#pragma once

#include <stdint.h>

#include "../common/fp8_quant_math.h"

namespace sgl_fp8 {
namespace gfx950 {

// Magnitude key of a 16-bit float (bf16 or fp16) bit pattern. For both formats the map
// h & 0x7FFF -> magnitude_key(float(h)) is strictly increasing over all 32768 magnitudes
// (NaNs above Inf), so the integer max of 16-bit keys, converted once per group, equals the max
// of the 32-bit magnitude keys of the converted elements. Two 16-bit keys fit one dword, so the
// kernels take the max of packed pairs (v_pk_max_u16) instead of converting every element first.
SGL_FP8_HD uint32_t magnitude_key16(uint32_t h) { return h & 0x7FFFu; }
SGL_FP8_HD uint32_t magnitude_key16x2(uint32_t packed_pair) { return packed_pair & 0x7FFF7FFFu; }

// The 32-bit magnitude key of the larger of two packed 16-bit keys, for either format.
SGL_FP8_HD uint32_t bf16_key16_to_key32(uint32_t key16) { return magnitude_key(bf16_bits_to_f32(static_cast<uint16_t>(key16))); }
SGL_FP8_HD uint32_t fp16_key16_to_key32(uint32_t key16) { return magnitude_key(fp16_bits_to_f32(static_cast<uint16_t>(key16))); }

// fp32 -> bf16 bits, round to nearest even, NaN -> 0x7FC0 (what c10::BFloat16 and therefore
// the CPU backend produce, so residual_out matches bit for bit).
SGL_FP8_HD uint32_t bf16_bits_from_f32_rne(float f) {
  const uint32_t u = f32_bits(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return 0x7FC0u;
  return (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
}

// Whether a group's amax key leaves the fast conversion path valid: every element and the
// inverse scale are finite, so |a * inv| <= 448 * (1 + 2^-22) and the +-448 clamp (v_med3_f32)
// cannot meet a NaN. Groups holding NaN/Inf take the exact software conversion instead.
SGL_FP8_HD bool group_is_finite(uint32_t max_magnitude_key) { return max_magnitude_key < 0x7F800000u; }

// The dword the MFMA scale operand gets for an e8m0 byte: the byte in all four positions, so
// the operand is right whatever op_sel byte / K-subgroup the hardware reads it for.
SGL_FP8_HD uint32_t e8m0_scale_operand(uint32_t byte) { return (byte & 0xFFu) * 0x01010101u; }

}  // namespace gfx950
}  // namespace sgl_fp8
