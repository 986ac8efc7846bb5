// Lane and offset formulas of the gfx950 small-M GEMM (SPEC §4, §7), in one place.
//
// Plain C++ on purpose: the HIP kernels (kernels/gfx950/*.hip) call these functions for every index
// they compute, and tests/test_gfx950_lanes.py compiles this same header with the host C++
// compiler and checks every lane against SPEC §4 and §7. No HIP types, no device intrinsics.
//
// The instruction: v_mfma_scale_f32_16x16x128_f8f6f4 D = A x B (+ C), one wave (64 lanes).
//   A (src0) = 16 weight rows x 128 K of one 128-wide scale block   -> D rows
//   B (src1) = 128 K x 16 tokens                                    -> D columns
// SPEC §7 operand layout, used for both operands: lane l holds row/column l % 16; register bytes
// 0-15 are K = 16*(l/16) + j, bytes 16-31 are K = 64 + 16*(l/16) + j (j = 0..15).
// Result: c[i] of lane l is D[4*(l/16) + i][l % 16].
//
// The kernel never relies on the hardware's K order being exactly this: A and B fragments are
// built with the same fragment_k() map, so any K permutation the hardware applies inside the
// 128-block is applied to both operands and cancels in the dot product (the test checks the
// "same map" property). The block scales are per (row, 128-block) and per (token, 128-block), so
// they do not depend on K either.
#pragma once

#include <stdint.h>

#include "../common/fp8_quant_math.h"  // SGL_FP8_HD, kGroupSize
#include "../common/weight_layout.h"   // SPEC §4 offsets

namespace sgl_fp8 {
namespace gfx950 {

constexpr int kWaveLanes = 64;
constexpr int kTileRows = 16;    // weight rows per MFMA tile (D rows)
constexpr int kTileTokens = 16;  // tokens per MFMA tile (D columns)
constexpr int kBlockK = 128;     // K per MFMA == one scale block
constexpr int kFragmentBytes = 32;  // e4m3 bytes per lane per operand per block
constexpr int kFragmentHalves = 2;  // two 16-byte loads per lane per operand per block
constexpr int kAccPerLane = 4;      // fp32 results per lane per MFMA
constexpr int kMaxWaves = 16;       // waves per workgroup (1024 threads)
constexpr int kTokensPerSlice = 32;  // tokens one workgroup handles (two 16-token chunks)
constexpr int kE8m0Neutral = 127;    // e8m0 byte of 1.0: the fp32 path's MFMA scale operands

static_assert(kGroupSize == kBlockK, "one MFMA per 1x128 activation group / 128x128 weight block");

// ---- MFMA operand fragments (both operands) ------------------------------------------------

// Row of A (weight row inside the 16-row tile) / column of B (token inside the 16-token tile)
// that lane `lane` supplies.
SGL_FP8_HD int fragment_index(int lane) { return lane & 15; }

// K inside the 128-block of register byte `byte` (0..31) of lane `lane`'s fragment.
SGL_FP8_HD int fragment_k(int lane, int byte) { return 64 * (byte >> 4) + 16 * (lane >> 4) + (byte & 15); }

// First K (inside the block) of the 16 contiguous K values in fragment half `half` (0, 1):
// half h holds register bytes 16h .. 16h+15.
SGL_FP8_HD int fragment_half_k(int lane, int half) { return fragment_k(lane, 16 * half); }

// ---- accumulator ---------------------------------------------------------------------------

// D row (weight row inside the tile) of accumulator register i (0..3) of lane `lane`.
SGL_FP8_HD int acc_row(int lane, int i) { return 4 * (lane >> 4) + i; }
// D column (token inside the 16-token chunk) of every accumulator register of lane `lane`.
SGL_FP8_HD int acc_token(int lane) { return lane & 15; }

// Output element offset in out[M, N] (row-major) of accumulator i of `lane`, for the 16-row
// weight tile `tile` and the token chunk starting at token `m0`.
SGL_FP8_HD int64_t acc_output_offset(int64_t tile, int64_t m0, int lane, int i, int64_t N) {
  return (m0 + acc_token(lane)) * N + tile * kTileRows + acc_row(lane, i);
}

// ---- weight fragments (A operand) ----------------------------------------------------------
// The byte offset of lane `lane`'s half `half` for (tile, kb) splits into a part that is the
// same for all lanes (uniform: it lives in SGPRs and feeds global_load's saddr) and a per-lane
// part that does not depend on (tile, kb) (computed once per kernel, a VGPR):
//     weight_unit_base(tile, kb) + weight_lane_offset(lane, half)
//  == weight_chunk16_offset(16*tile + fragment_index(lane), 128*kb + fragment_half_k(lane, half))
// Both layouts are affine in (tile, kb) with those strides; the test checks the identity.
// Shuffled: the 16-row tile's 128-K block is 2048 contiguous bytes, and each load instruction
// (one half, 64 lanes x 16 bytes) reads 1024 contiguous bytes of it.
SGL_FP8_HD int64_t weight_unit_base(int64_t tile, int64_t kb, int64_t K, bool shuffled) {
  return weight_chunk16_offset(tile * kTileRows, kb * kBlockK, K, shuffled);
}

SGL_FP8_HD int64_t weight_lane_offset(int lane, int half, int64_t K, bool shuffled) {
  return weight_chunk16_offset(fragment_index(lane), fragment_half_k(lane, half), K, shuffled);
}

// Index into w_scale [ceil(N/128), K/128] of the block scale of tile `tile`, block `kb`. A
// 16-row tile never straddles two 128-row scale blocks.
SGL_FP8_HD int64_t weight_scale_index(int64_t tile, int64_t kb, int64_t KB) {
  return (tile * kTileRows / kBlockK) * KB + kb;
}

// ---- pre-quantized activations (B operand, scaled_gemm) -----------------------------------
// Element offset in xq[M, K] (row stride x_row_stride) of the 16 bytes of lane `lane`'s half
// `half` for the token chunk starting at m0 and block kb.
SGL_FP8_HD int64_t activation_fragment_offset(int64_t m0, int64_t kb, int lane, int half,
                                              int64_t x_row_stride) {
  return (m0 + fragment_index(lane)) * x_row_stride + kb * kBlockK + fragment_half_k(lane, half);
}

// ---- in-kernel 1x128 quantization (bf16/fp16 activations) ---------------------------------
// A quantization step of one wave handles 4 groups of 128 elements: 16 lanes per group, 8
// consecutive elements (one 16-byte load) per lane, so a group's amax is a 16-lane reduction
// (DPP inside one row of 16 lanes).
constexpr int kQuantLanesPerGroup = 16;
constexpr int kQuantElemsPerLane = 8;
constexpr int kQuantGroupsPerStep = kWaveLanes / kQuantLanesPerGroup;  // 4

SGL_FP8_HD int quant_group_slot(int step, int lane) { return kQuantGroupsPerStep * step + (lane >> 4); }
// The lane of each 16-lane group that stores the group's scale.
SGL_FP8_HD bool quant_group_leader(int lane) { return (lane & 15) == 0; }
SGL_FP8_HD int quant_elem_k(int lane, int e) { return kQuantElemsPerLane * (lane & 15) + e; }

// A "piece" is the set of groups quantized together before their MFMAs: `tokens` tokens x
// 2^shift K-blocks (token-major: slot g -> token g >> shift, block g & (2^shift - 1)), so that a
// step's 4 groups are full when there are few tokens, and at most 16 rows go to LDS.
// `tokens` is 1..16.
SGL_FP8_HD int quant_piece_shift(int tokens) { return tokens >= 4 ? 0 : (tokens >= 2 ? 1 : 2); }
SGL_FP8_HD int quant_slot_token(int slot, int shift) { return slot >> shift; }
SGL_FP8_HD int quant_slot_block(int slot, int shift) { return slot & ((1 << shift) - 1); }
SGL_FP8_HD int quant_steps(int tokens, int shift) {
  return ((tokens << shift) + kQuantGroupsPerStep - 1) / kQuantGroupsPerStep;
}

// Wave-private LDS staging of one piece: rows of 128 e4m3 bytes (one per (token, block)),
// padded to 144 bytes so the 16 rows one fragment load instruction touches start in different
// banks; then one all-zero row that lanes of padding tokens (token >= tokens) read; then the
// group scales (one dword per row: fp32, or the e8m0 byte).
constexpr int kLdsRowBytes = kBlockK + 16;
constexpr int kLdsMaxRows = 16;  // tokens << shift <= 16
constexpr int kLdsScaleBase = (kLdsMaxRows + 1) * kLdsRowBytes;  // 2448
constexpr int kLdsQuantBytes = kLdsScaleBase + (kLdsMaxRows + 1) * 4;  // 2516

SGL_FP8_HD int lds_row(int token, int block, int shift) { return (token << shift) + block; }
SGL_FP8_HD int lds_zero_row() { return kLdsMaxRows; }
// The 16-byte slice of the zero row lane `lane` clears (lanes 0..8 cover the 144 bytes).
constexpr int kLdsZeroRowLanes = kLdsRowBytes / 16;
SGL_FP8_HD int lds_zero_row_offset(int lane) { return lds_zero_row() * kLdsRowBytes + 16 * lane; }

// Where lane `lane` of a quantization step writes its 8 bytes.
SGL_FP8_HD int lds_quant_write_offset(int row, int lane) { return row * kLdsRowBytes + quant_elem_k(lane, 0); }

// Row lane `lane` reads its B fragment from, for block `block` of the piece.
SGL_FP8_HD int lds_fragment_row(int block, int lane, int tokens, int shift) {
  return fragment_index(lane) < tokens ? lds_row(fragment_index(lane), block, shift) : lds_zero_row();
}
SGL_FP8_HD int lds_fragment_read_offset(int row, int lane, int half) {
  return row * kLdsRowBytes + fragment_half_k(lane, half);
}
SGL_FP8_HD int lds_scale_offset(int row) { return kLdsScaleBase + 4 * row; }

// Element offset, relative to (token m0, block kb0), of the 8 activation elements lane `lane`
// quantizes in step `step` of a piece.
SGL_FP8_HD int64_t quant_load_offset(int step, int lane, int shift, int64_t x_row_stride) {
  const int slot = quant_group_slot(step, lane);
  return quant_slot_token(slot, shift) * x_row_stride + quant_slot_block(slot, shift) * kBlockK + quant_elem_k(lane, 0);
}

// ---- cross-wave reduction ------------------------------------------------------------------
// After the K loop every wave writes its partial accumulators for each (chunk, tile) unit to
// LDS; unit u is then summed over waves 0..W-1 in that order by wave u % W.
constexpr int kLdsReduceUnitBytes = kWaveLanes * kAccPerLane * 4;  // 1024

SGL_FP8_HD int lds_reduce_offset(int wave, int unit, int lane, int wave_region_bytes) {
  return wave * wave_region_bytes + unit * kLdsReduceUnitBytes + lane * kAccPerLane * 4;
}

// Per-wave LDS region: the quantization staging area, reused (after a barrier) for the
// partial accumulators of (chunks x tiles) units.
SGL_FP8_HD int lds_wave_region_bytes(int chunks, int tiles_per_wave, bool quantize_in_kernel) {
  const int reduce = chunks * tiles_per_wave * kLdsReduceUnitBytes;
  const int quant = quantize_in_kernel ? ((kLdsQuantBytes + 15) / 16) * 16 : 0;
  return reduce > quant ? reduce : quant;
}

// ---- work split -----------------------------------------------------------------------------
// Wave w of a workgroup owns the contiguous K-blocks [w*bpw, min(KB, (w+1)*bpw)).
SGL_FP8_HD int64_t wave_first_block(int wave, int64_t blocks_per_wave) { return wave * blocks_per_wave; }

}  // namespace gfx950
}  // namespace sgl_fp8
