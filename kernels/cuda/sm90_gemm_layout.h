// Index formulas of the sm_90 block-scaled GEMM: which weight bytes each copy moves where, how
// the wgmma operands sit in shared memory, and how shared memory is carved up. Plain C++ (no
// CUDA types): the kernel uses nothing else for indexing, and tests/test_sm90_layout.py checks
// these formulas on the CPU against SPEC §4 and PTX's canonical wgmma layout.
//
// wgmma K-major operands without swizzle are built from "core matrices" of 8 rows x 16 bytes
// (128 contiguous bytes, row r at +16r). Element (row m, k) of one 32-wide K step lives at
//   start + (m % 8) * 16 + (m / 8) * SBO + (k / 16) * LBO + k % 16.
#pragma once

#include <stdint.h>

#include "../common/fp8_quant_math.h"  // SGL_FP8_HD
#include "../common/weight_layout.h"

namespace sgl_fp8::sm90 {

constexpr int kTileRows = 16;     // rows per weight tile: one warp's share of a wgmma
constexpr int kSuperRows = 64;    // rows per wgmma (M): four tiles
constexpr int kBlockK = 128;      // K per block scale
constexpr int kStepK = 32;        // K per wgmma (e4m3)
constexpr int kChunk = 16;        // bytes per copy
constexpr int kStageBytes = kSuperRows * kBlockK;  // one (64-row, 128-K) unit: 8 KB

// ---- weight stage (operand A): 64 rows x 128 K, natural K order ----------------------------
// Byte (row R, k) of a stage sits at 16 * R + 1024 * (k / 16) + k % 16: core matrices of 8
// rows are 128 bytes apart (SBO), the two 16-byte K halves of a step 1024 apart (LBO), steps
// 2048 apart.
constexpr uint32_t kStageSbo = 128, kStageLbo = 1024, kStageStepBytes = 2048;

SGL_FP8_HD int stage_offset(int row, int k) { return 16 * row + 1024 * (k / 16) + k % 16; }

// A unit is (up to) 4 tiles x one 128-K block = 512 chunks of 16 bytes; a single-tile unit
// uses chunks 0..127. Chunk c holds tile c / 128, row c % 16 of that tile, K bytes
// [16 * ((c % 128) / 16), +16) of the block. The mapping makes each warp's copies contiguous
// in the shuffled layout (512 bytes) and full 32-byte sectors in the plain one, and its shared
// memory writes conflict-free.
struct ChunkSource {
  int tile;       // 0..3 within the unit
  int row;        // 0..15 within the tile
  int k;          // 0..127 within the block, a multiple of 16
};

SGL_FP8_HD ChunkSource chunk_source(int c) {
  ChunkSource s;
  s.tile = c / 128;
  s.row = c % 16;
  s.k = 16 * ((c % 128) / 16);
  return s;
}

// Global byte offset of chunk c of the unit whose first tile starts at weight row `row0`, for
// K block kb (SPEC §4 formulas).
SGL_FP8_HD int64_t chunk_global_offset(int c, int64_t row0, int64_t kb, int64_t K, bool shuffled) {
  const ChunkSource s = chunk_source(c);
  return weight_chunk16_offset(row0 + kTileRows * s.tile + s.row, kb * kBlockK + s.k, K, shuffled);
}

SGL_FP8_HD int chunk_stage_offset(int c) {
  const ChunkSource s = chunk_source(c);
  return stage_offset(kTileRows * s.tile + s.row, s.k);
}

// ---- activations (operand B): token_pad tokens x 128 K per block, natural K order ----------
// Byte (token n, k) of block lb sits at lb * token_pad * 128 + (k / 32) * token_pad * 32 +
// ((k % 32) / 16) * token_pad * 16 + (n / 8) * 128 + (n % 8) * 16 + k % 16: per step, core
// matrices of 8 tokens are 128 bytes apart (SBO), the two K halves token_pad * 16 apart (LBO).
SGL_FP8_HD int act_offset(int k, int token, int token_pad) {
  return (k / 32) * token_pad * 32 + ((k % 32) / 16) * token_pad * 16 + (token / 8) * 128 + (token % 8) * 16 + k % 16;
}

// ---- shared memory of one CTA ----------------------------------------------------------------
// [stages x 8 KB weight ring][activations][activation scales fp32 [block][token]]
// [weight block scales fp32 [tile][block]][inbox: fp32 [owned tile][cluster rank][16][token]]
struct GemmSmemLayout {
  int64_t act_offset, xs_offset, ws_offset, inbox_offset, total;
  SGL_FP8_HD GemmSmemLayout(int stages, int max_blocks, int token_tiles, int max_tiles, int k_split) {
    const int64_t token_pad = int64_t(token_tiles) * 8;
    const int64_t max_owned = (max_tiles + k_split - 1) / k_split;
    act_offset = int64_t(stages) * kStageBytes;
    xs_offset = act_offset + int64_t(max_blocks) * token_pad * kBlockK;
    ws_offset = xs_offset + int64_t(max_blocks) * token_pad * 4;
    inbox_offset = ws_offset + ((int64_t(max_tiles) * max_blocks * 4 + 15) / 16) * 16;
    total = inbox_offset + max_owned * k_split * kTileRows * token_pad * 4;
  }
};

}  // namespace sgl_fp8::sm90
