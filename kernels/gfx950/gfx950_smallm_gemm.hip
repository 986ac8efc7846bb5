// gfx950 (MI355X) block-scaled FP8 GEMM for decode: out[M, N] = x[M, K] . w[N, K]^T with 1x128
// activation groups and 128x128 weight blocks (SPEC §3.4), one launch per projection.
//
//   smallm_gemm : x bf16/fp16, quantized to e4m3 inside the kernel (SPEC §3.1/§3.2, bit-exact)
//   scaled_gemm : x already e4m3 with x_scale
//   fp32 path   : w_scale fp32; one v_mfma_scale_f32_16x16x128_f8f6f4 per 128-block with neutral
//                 scale operands (127), then acc += P * (xs * ws) in fp32
//   e8m0 path   : w_scale e8m0; the MFMA gets the weight and activation e8m0 bytes as its scale
//                 operands and accumulates across blocks itself (the block scale is free)
//
// Structure (see docs/design/gfx950.md):
//   * workgroup = W waves (W <= 16) over R 16-row weight tiles (R = 1 or 2) and a token slice of
//     2 (R = 1) or 1 (R = 2) 16-token MFMA chunks; grid = (ceil(N/16/R), ceil(M/slice)).
//   * wave w owns a contiguous range of K-blocks and walks it in stages of S = 4/R blocks: per
//     stage it issues the first activation loads, then all S*R*2 weight loads (16 bytes per lane,
//     non-temporal buffer loads), then quantizes while the weights are in flight.
//   * bf16/fp16 activations are quantized in registers, 16 lanes x 8 elements per 128-group
//     (amax by DPP inside a 16-lane row), staged through a wave-private LDS area in the MFMA's B
//     layout; every quantized group is reused by the R weight tiles (and both chunks reuse the
//     weight registers).
//   * partial accumulators are reduced across waves in LDS in wave order (bitwise reproducible).
// Every index comes from gfx950_mfma_layout.h, which the CPU test checks lane by lane.

#include <hip/hip_runtime.h>
#include <stdint.h>

#include "../common/fp8_quant_math.h"
#include "../common/gpu_launch.h"
#include "../common/weight_layout.h"
#include "gfx950_device.h"
#include "gfx950_mfma_layout.h"
#include "gfx950_numerics.h"

namespace sgl_fp8 {
namespace gfx950 {

enum class XKind : int { kBF16 = 0, kFP16 = 1, kE4M3 = 2 };

// Kernel arguments. Uniform sizes and indices are 32-bit (the launcher checks the limits), so
// the scalar unit does the index math in single SGPRs.
struct GemmKernelArgs {
  const void* x;        // this launch's first token row
  const void* x_scale;  // scaled_gemm only, this launch's first token row
  int64_t x_scale_stride_m, x_scale_stride_kb;
  const uint8_t* w;
  const void* w_scale;
  const void* bias;  // [N] in the output type, or nullptr
  void* out;         // this launch's first output row of [M, N]
  int32_t x_row_stride;  // elements
  int32_t M, N, K;       // M: tokens of this launch
  int32_t KB;               // K / 128
  int32_t blocks_per_wave;  // K-blocks per wave (the last waves may get fewer or none)
  int32_t waves;            // W
  int32_t wave_region_bytes;
  int32_t w_shuffled;
  int32_t out_fp16;
};

// Workgroup size bound: W <= 16 waves. __launch_bounds__(1024) makes the compiler keep
// VGPR+AGPR <= 128 per lane (4 waves per SIMD), which a 16-wave workgroup needs to launch at
// all; .ci/check_gfx950.py checks it from the ISA.
constexpr int kMaxThreads = kMaxWaves * kWaveLanes;

// Token chunks of 16 per workgroup: two for R = 1 (the weight registers serve 32 tokens), one
// for R = 2 (keeps R = 2 inside the register budget).
template <int R>
constexpr int chunks_per_slice() { return R == 1 ? 2 : 1; }

template <bool kE8m0>
SGL_DEV void mma_block(f32x4& acc, const i32x8& w_frag, const i32x8& x_frag, uint32_t ws_bits, uint32_t xs_bits) {
  if constexpr (kE8m0) {
    // A = weight (scale operand 0 = weight block scale), B = activation (scale operand 1 =
    // the token's group scale). Bytes replicated: correct for any op_sel byte / K-subgroup.
    acc = __builtin_amdgcn_mfma_scale_f32_16x16x128_f8f6f4(w_frag, x_frag, acc, 0 /*A: e4m3*/, 0 /*B: e4m3*/,
                                                           0, static_cast<int>(e8m0_scale_operand(ws_bits)), 0,
                                                           static_cast<int>(e8m0_scale_operand(xs_bits)));
  } else {
    const f32x4 zero = {0.0f, 0.0f, 0.0f, 0.0f};
    const f32x4 p = __builtin_amdgcn_mfma_scale_f32_16x16x128_f8f6f4(
        w_frag, x_frag, zero, 0, 0, 0, static_cast<int>(e8m0_scale_operand(kE8m0Neutral)), 0,
        static_cast<int>(e8m0_scale_operand(kE8m0Neutral)));
    const float f = __uint_as_float(xs_bits) * __uint_as_float(ws_bits);  // xs * ws, as the CPU does
#pragma unroll
    for (int i = 0; i < kAccPerLane; ++i) acc[i] = __builtin_fmaf(p[i], f, acc[i]);
  }
}

// Activation scale bits for (token row m, block kb) of scaled_gemm: fp32 bits or e8m0 byte.
template <bool kE8m0>
SGL_DEV uint32_t load_x_scale(const GemmKernelArgs& a, int m, int kb) {
  const int64_t idx = m * a.x_scale_stride_m + kb * a.x_scale_stride_kb;
  if constexpr (kE8m0) {
    return static_cast<uint32_t>(static_cast<const uint8_t*>(a.x_scale)[idx]);
  } else {
    return static_cast<const uint32_t*>(a.x_scale)[idx];
  }
}

// The weight block scale of (tile, kb): wave-uniform. fp32 scales come through the scalar
// cache (a constant-address-space load: w_scale is not written by the kernel) into SGPRs; e8m0
// bytes have no scalar byte load on gfx9, so they take a vector byte load (exact bounds).
template <bool kE8m0>
SGL_DEV uint32_t load_w_scale(const GemmKernelArgs& a, int tile, int kb) {
  const uint32_t idx = static_cast<uint32_t>(weight_scale_index(tile, kb, a.KB));
  if constexpr (kE8m0) {
    return static_cast<uint32_t>(static_cast<const uint8_t*>(a.w_scale)[opaque_vgpr(idx)]);
  } else {
    return load_constant_u32(a.w_scale, idx);
  }
}

// Loads the raw bf16/fp16 data of one quantization piece: `tokens` tokens x 2^shift blocks from
// block kb0, through the chunk's buffer (rows past M read as zeros). Slots past the piece load
// data that is never stored. Steps past the piece get an out-of-range offset instead of a branch:
// the buffer returns zeros without touching memory, and there is no zero-init/phi for the
// compiler to resolve with an early s_waitcnt.
constexpr uint32_t kOutOfRange = 0x80000000u;  // > any num_records the launcher allows

SGL_DEV void load_piece_raw(BufferRsrc x_chunk, int x_row_stride, int tokens, int shift, int kb0, int lane_id_,
                            u32x4 (&raw)[4]) {
  const int lane = opaque_lane(lane_id_);
  const int steps = quant_steps(tokens, shift);
  const uint32_t soffset = static_cast<uint32_t>(kb0 * kBlockK * 2);
#pragma unroll
  for (int s = 0; s < 4; ++s) {
    const uint32_t voffset = static_cast<uint32_t>(quant_load_offset(s, lane, shift, x_row_stride)) * 2u;
    raw[s] = buffer_load16(x_chunk, s < steps ? voffset : kOutOfRange, soffset);
  }
}

// Quantizes a loaded piece (blocks [0, blocks) of it are real) into the wave's LDS staging area:
// rows in the MFMA B layout + one scale dword per row.
template <XKind X, bool kE8m0>
SGL_DEV void quantize_piece_to_lds(LdsByte* wave_lds, int tokens, int shift, int blocks, int lane,
                                   const u32x4 (&raw)[4]) {
  constexpr bool kFp16 = X == XKind::kFP16;
  const int steps = quant_steps(tokens, shift);
#pragma unroll
  for (int s = 0; s < 4; ++s) {
    if (s < steps) {
      const int slot = quant_group_slot(s, lane);
      const int token = quant_slot_token(slot, shift);
      const int block = quant_slot_block(slot, shift);
      bool finite;
      const GroupQuantParams p = group_params_row16(key16_to_key32<kFp16>(key16_of_8(raw[s])), kE8m0, finite);
      float v[8];
      unpack8<kFp16>(raw[s], v);
      const u32x2 q = quantize8(v, p.inverse_scale, finite);
      if (token < tokens && block < blocks) {
        const int row = lds_row(token, block, shift);
        __builtin_assume(row >= 0 && row <= kLdsMaxRows);  // lets row * 144 be a 24-bit multiply
        lds_store<u32x2>(wave_lds, lds_quant_write_offset(row, lane), q);
        if (quant_group_leader(lane)) lds_store<uint32_t>(wave_lds, lds_scale_offset(row), stored_scale_bits(p, kE8m0));
      }
    }
  }
}

// Compiler-level ordering of this wave's LDS traffic. LDS executes one wave's instructions in
// order, so writes by one lane are seen by later reads of another lane of the same wave; this
// only keeps the compiler from moving the reads above the writes.
SGL_DEV void wave_lds_order() {
  __builtin_amdgcn_fence(__ATOMIC_RELEASE, "wavefront");
  __builtin_amdgcn_wave_barrier();
  __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "wavefront");
}

SGL_DEV void workgroup_barrier() {
  __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");
  __builtin_amdgcn_s_barrier();
  __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");
}

// Buffer over the activation rows [m0, m0 + tokens) (tokens <= 16): the chunk's rows are in
// range, padding rows (m >= M) read as zeros. tokens <= 0 gives an empty buffer.
SGL_DEV BufferRsrc activation_chunk_buffer(const GemmKernelArgs& a, int m0, int tokens, int elem_bytes) {
  const uint32_t bytes = tokens > 0 ? static_cast<uint32_t>(((tokens - 1) * a.x_row_stride + a.K) * elem_bytes) : 0u;
  return make_buffer(static_cast<const uint8_t*>(a.x) + static_cast<int64_t>(m0) * a.x_row_stride * elem_bytes, bytes);
}

// scaled_gemm: the B fragments of blocks [kb0, kb0 + nblk) for the 16-token chunk at m0, loaded
// straight from xq (rows past M read as zeros) with their activation scales.
template <bool kE8m0, int S>
SGL_DEV void load_activation_fragments(const GemmKernelArgs& a, BufferRsrc x_chunk, int m0, int tokens, int kb0,
                                       int nblk, int lane_id_, i32x8 (&xfrag)[S], uint32_t (&xs_bits)[S]) {
  const int lane = opaque_lane(lane_id_);
  const uint32_t lo = static_cast<uint32_t>(activation_fragment_offset(0, 0, lane, 0, a.x_row_stride));
  const uint32_t hi = static_cast<uint32_t>(activation_fragment_offset(0, 0, lane, 1, a.x_row_stride));
  const int token = fragment_index(lane);
  // Padding tokens read row m0 + tokens - 1's scale (in bounds) and use 0; blocks past the
  // wave's range get an out-of-range offset (zeros) and a clamped scale index, so every load is
  // unconditional.
  const int m = m0 + (token < tokens ? token : tokens - 1);
#pragma unroll
  for (int b = 0; b < S; ++b) {
    const bool valid = b < nblk;
    const uint32_t soffset = static_cast<uint32_t>((kb0 + b) * kBlockK);
    xfrag[b] = make_fragment(buffer_load16(x_chunk, valid ? lo : kOutOfRange, soffset),
                             buffer_load16(x_chunk, valid ? hi : kOutOfRange, soffset));
    const uint32_t bits = load_x_scale<kE8m0>(a, m, kb0 + b < a.KB ? kb0 + b : a.KB - 1);
    xs_bits[b] = token < tokens ? bits : 0u;
  }
}

// e8m0 path: an 0xFF (NaN) scale byte makes the outputs that depend on it NaN (SPEC §3.3),
// whatever the MFMA itself makes of it. `poison` has one bit per (chunk, tile) unit c*R + r: the
// activation scale of this lane's token poisons the chunk's R units, a weight scale its tile's.
template <int R, int S, int kChunk>
SGL_DEV void note_nonfinite_scales(uint32_t& poison, uint32_t xs, const uint32_t (&ws_bits)[S][R], int b) {
  constexpr uint32_t kChunkUnits = ((1u << R) - 1u) << (kChunk * R);
  poison |= (xs & 0xFFu) == 0xFFu ? kChunkUnits : 0u;
#pragma unroll
  for (int r = 0; r < R; ++r) poison |= (ws_bits[b][r] & 0xFFu) == 0xFFu ? (1u << (kChunk * R + r)) : 0u;
}

// The MFMAs of one quantized piece: quantize it into the wave's LDS staging area, then for each
// of its blocks read the B fragment (+ scale) and run the R weight tiles on it.
template <int R, int S, bool kE8m0, XKind X, int kChunk>
SGL_DEV void mma_piece(LdsByte* wave_lds, int tokens, int shift, int pb, int pn, int lane_id_, int tile0, int n_tiles,
                       const i32x8 (&wfrag)[S][R], const uint32_t (&ws_bits)[S][R], const u32x4 (&raw)[4],
                       f32x4 (&acc)[R], uint32_t& poison) {
  const int lane = opaque_lane(lane_id_);
  quantize_piece_to_lds<X, kE8m0>(wave_lds, tokens, shift, pn, lane, raw);
  wave_lds_order();
#pragma unroll
  for (int b = 0; b < S; ++b) {
    if (b >= pb && b < pb + pn) {
      const int row = lds_fragment_row(b - pb, lane, tokens, shift);
      __builtin_assume(row >= 0 && row <= kLdsMaxRows);
      const u32x4 lo = lds_load<u32x4>(wave_lds, lds_fragment_read_offset(row, lane, 0));
      const u32x4 hi = lds_load<u32x4>(wave_lds, lds_fragment_read_offset(row, lane, 1));
      const uint32_t xs = lds_load<uint32_t>(wave_lds, lds_scale_offset(row));
      const i32x8 xf = make_fragment(lo, hi);
      if constexpr (kE8m0) note_nonfinite_scales<R, S, kChunk>(poison, xs, ws_bits, b);
      // Tiles past N have all-zero weight fragments (out-of-range loads): their MFMAs add zeros
      // to accumulators that are never stored, and no branch splits the MFMA sequence.
#pragma unroll
      for (int r = 0; r < R; ++r) mma_block<kE8m0>(acc[r], wfrag[b][r], xf, ws_bits[b][r], xs);
    }
  }
  wave_lds_order();
}

// One 16-token chunk of a stage with in-kernel quantization: pieces of 2^shift blocks. With
// kPreloaded the first piece's raw data is already in `raw` (loaded before the weights) and is
// handled outside the loop.
template <int R, int S, bool kE8m0, XKind X, bool kPreloaded, int kChunk>
SGL_DEV void quantized_chunk(const GemmKernelArgs& a, BufferRsrc x_rows, int tokens, int kb0, int nblk, int lane,
                             int tile0, int n_tiles, LdsByte* wave_lds, const i32x8 (&wfrag)[S][R],
                             const uint32_t (&ws_bits)[S][R], u32x4 (&raw)[4], f32x4 (&acc)[R], uint32_t& poison) {
  const int shift = quant_piece_shift(tokens);
  const int piece_blocks = 1 << shift;
  int pb = 0;
  if constexpr (kPreloaded) {
    mma_piece<R, S, kE8m0, X, kChunk>(wave_lds, tokens, shift, 0, nblk < piece_blocks ? nblk : piece_blocks, lane,
                                      tile0, n_tiles, wfrag, ws_bits, raw, acc, poison);
    pb = piece_blocks;
  }
  for (; pb < nblk; pb += piece_blocks) {
    load_piece_raw(x_rows, a.x_row_stride, tokens, shift, kb0 + pb, lane, raw);
    mma_piece<R, S, kE8m0, X, kChunk>(wave_lds, tokens, shift, pb, nblk - pb < piece_blocks ? nblk - pb : piece_blocks,
                                      lane, tile0, n_tiles, wfrag, ws_bits, raw, acc, poison);
  }
}

// One 16-token chunk of a stage with pre-quantized activations (scaled_gemm).
template <int R, int S, bool kE8m0, int kChunk>
SGL_DEV void mma_direct(int nblk, int tile0, int n_tiles, const i32x8 (&wfrag)[S][R], const uint32_t (&ws_bits)[S][R],
                        const i32x8 (&xfrag)[S], const uint32_t (&xs_bits)[S], f32x4 (&acc)[R], uint32_t& poison) {
#pragma unroll
  for (int b = 0; b < S; ++b) {
    if (b < nblk) {
      if constexpr (kE8m0) note_nonfinite_scales<R, S, kChunk>(poison, xs_bits[b], ws_bits, b);
#pragma unroll
      for (int r = 0; r < R; ++r) mma_block<kE8m0>(acc[r], wfrag[b][r], xfrag[b], ws_bits[b][r], xs_bits[b]);
    }
  }
}

template <int R, bool kE8m0, XKind X>
__global__ __launch_bounds__(kMaxThreads) void gfx950_block_scaled_gemm_kernel(GemmKernelArgs a) {
  constexpr int S = 4 / R;  // K-blocks per stage: S*R = 4 weight units (32 VGPRs) per wave
  constexpr int C = chunks_per_slice<R>();
  constexpr bool kQuantize = X != XKind::kE4M3;
  constexpr int kElemBytes = kQuantize ? 2 : 1;
  extern __shared__ __attribute__((aligned(16))) uint8_t lds[];

  const int lane = lane_id();
  const int wave = wave_id();
  const int tile0 = block_id_x() * R;
  const int n_tiles = a.N / kTileRows;
  const int m_slice = block_id_y() * (C * kTileTokens);
  int chunk_tokens[C];  // tokens of each chunk (<= 0: chunk absent)
  BufferRsrc x_chunk[C];
#pragma unroll
  for (int c = 0; c < C; ++c) {
    const int left = a.M - (m_slice + c * kTileTokens);
    chunk_tokens[c] = left < kTileTokens ? left : kTileTokens;
    x_chunk[c] = activation_chunk_buffer(a, m_slice + c * kTileTokens, chunk_tokens[c], kElemBytes);
  }
  const int chunks = (C == 2 && chunk_tokens[C - 1] > 0) ? 2 : 1;

  const int kb_begin = static_cast<int>(wave_first_block(wave, a.blocks_per_wave));
  const int kb_end = kb_begin + a.blocks_per_wave < a.KB ? kb_begin + a.blocks_per_wave : a.KB;

  const bool shuffled = a.w_shuffled != 0;
  // This workgroup's R tiles: unit offsets below are relative to tile0 (both layouts are affine
  // in the tile index, see weight_unit_base).
  const int wg_tiles = n_tiles - tile0 < R ? n_tiles - tile0 : R;
  const BufferRsrc w_buf = make_buffer(a.w + weight_unit_base(tile0, 0, a.K, shuffled),
                                       static_cast<uint32_t>(wg_tiles * kTileRows) * static_cast<uint32_t>(a.K));
  const uint32_t w_lane_off0 = static_cast<uint32_t>(weight_lane_offset(lane, 0, a.K, shuffled));
  const uint32_t w_lane_off1 = static_cast<uint32_t>(weight_lane_offset(lane, 1, a.K, shuffled));

  LdsByte* const lds_base = lds_bytes(lds);
  LdsByte* wave_lds = lds_base + wave * a.wave_region_bytes;
  if constexpr (kQuantize) {
    // The zero row (and its zero scale) that padding-token lanes read their B fragment from.
    if (lane < kLdsZeroRowLanes) lds_store<u32x4>(wave_lds, lds_zero_row_offset(lane), u32x4{0u, 0u, 0u, 0u});
    if (lane == 0) lds_store<uint32_t>(wave_lds, lds_scale_offset(lds_zero_row()), 0u);
  }

  f32x4 acc[C][R];
#pragma unroll
  for (int c = 0; c < C; ++c)
#pragma unroll
    for (int r = 0; r < R; ++r) acc[c][r] = f32x4{0.0f, 0.0f, 0.0f, 0.0f};
  uint32_t poison = 0;  // e8m0 path: (chunk, tile) units that met an 0xFF (NaN) scale byte

  for (int kb0 = kb_begin; kb0 < kb_end; kb0 += S) {
    const int nblk = kb_end - kb0 < S ? kb_end - kb0 : S;

    // Activations first: the vector-memory counter retires loads in order, so anything issued
    // after the weight loads would wait for them. (Later pieces / chunk 1 do wait; see docs.)
    u32x4 raw[4];
    i32x8 xfrag[S];
    uint32_t xs_bits[S];
    if constexpr (kQuantize) {
      load_piece_raw(x_chunk[0], a.x_row_stride, chunk_tokens[0], quant_piece_shift(chunk_tokens[0]), kb0, lane, raw);
    } else {
      load_activation_fragments<kE8m0, S>(a, x_chunk[0], m_slice, chunk_tokens[0], kb0, nblk, lane, xfrag, xs_bits);
    }

    // Keep the scheduler from sinking the activation loads below the weight loads (it does not
    // model the in-order vector-memory counter).
    __builtin_amdgcn_sched_barrier(0);

    // The weight stream: S blocks x R tiles, two 16-byte non-temporal loads per lane each. All
    // loads are issued unconditionally (units past the wave's range or past N get an
    // out-of-range offset: zeros, no memory traffic), so the code is straight-line and the
    // compiler's s_waitcnt counts stay exact.
    // Each unit's block scale follows its two loads: fp32 through the scalar cache (lgkmcnt, no
    // effect on the weight stream), e8m0 bytes as per-lane vector loads of a uniform address kept
    // in VGPRs (the MFMA scale operand takes a VGPR), so block b's MFMA waits for block b's
    // loads only. Clamped indices keep the scale loads in bounds for units that are not loaded.
    i32x8 wfrag[S][R];
    uint32_t ws_bits[S][R];
#pragma unroll
    for (int b = 0; b < S; ++b)
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const bool valid = b < nblk && tile0 + r < n_tiles;
        const uint32_t unit = valid ? static_cast<uint32_t>(weight_unit_base(r, kb0 + b, a.K, shuffled)) : 0u;
        wfrag[b][r] = make_fragment(buffer_load16_nt(w_buf, valid ? w_lane_off0 : kOutOfRange, unit),
                                    buffer_load16_nt(w_buf, valid ? w_lane_off1 : kOutOfRange, unit));
        const int tile_c = tile0 + r < n_tiles ? tile0 + r : n_tiles - 1;
        const int kb_c = kb0 + b < a.KB ? kb0 + b : a.KB - 1;
        ws_bits[b][r] = load_w_scale<kE8m0>(a, tile_c, kb_c);
      }

    __builtin_amdgcn_sched_barrier(0);

    // Token chunks. Chunk 0's first piece (or fragments) was loaded before the weights and is
    // consumed in straight-line code, so its s_waitcnt leaves the weight loads in flight; the
    // chunk index is static, so the accumulators stay in fixed registers.
    if constexpr (kQuantize) {
      quantized_chunk<R, S, kE8m0, X, true, 0>(a, x_chunk[0], chunk_tokens[0], kb0, nblk, lane, tile0, n_tiles,
                                               wave_lds, wfrag, ws_bits, raw, acc[0], poison);
      if constexpr (C == 2) {
        if (chunks == 2)
          quantized_chunk<R, S, kE8m0, X, false, C - 1>(a, x_chunk[C - 1], chunk_tokens[C - 1], kb0, nblk, lane, tile0,
                                                        n_tiles, wave_lds, wfrag, ws_bits, raw, acc[C - 1], poison);
      }
    } else {
      mma_direct<R, S, kE8m0, 0>(nblk, tile0, n_tiles, wfrag, ws_bits, xfrag, xs_bits, acc[0], poison);
      if constexpr (C == 2) {
        if (chunks == 2) {
          load_activation_fragments<kE8m0, S>(a, x_chunk[C - 1], m_slice + kTileTokens, chunk_tokens[C - 1], kb0, nblk,
                                              lane, xfrag, xs_bits);
          mma_direct<R, S, kE8m0, C - 1>(nblk, tile0, n_tiles, wfrag, ws_bits, xfrag, xs_bits, acc[C - 1], poison);
        }
      }
    }
  }

  // SPEC §3.3 on the e8m0 path: poisoned units get NaN partial sums (so the reduced output is NaN).
  if constexpr (kE8m0) {
    const float nan = __builtin_nanf("");
#pragma unroll
    for (int c = 0; c < C; ++c)
#pragma unroll
      for (int r = 0; r < R; ++r)
        if ((poison >> (c * R + r)) & 1u) acc[c][r] = f32x4{nan, nan, nan, nan};
  }

  // Cross-wave reduction: unit u = (chunk c, tile r) = c*R + r. Every wave stores its partials,
  // then wave u % W sums waves 0..W-1 in that order.
  workgroup_barrier();  // the staging areas are reused for the partials
#pragma unroll
  for (int c = 0; c < C; ++c)
#pragma unroll
    for (int r = 0; r < R; ++r)
      if (c < chunks)
        lds_store<f32x4>(lds_base, lds_reduce_offset(wave, c * R + r, lane, a.wave_region_bytes), acc[c][r]);
  workgroup_barrier();

  for (int u = wave; u < chunks * R; u += a.waves) {
    const int c = u / R;
    const int r = u % R;
    const int tile = tile0 + r;
    if (tile >= n_tiles) continue;
    f32x4 sum = lds_load<f32x4>(lds_base, lds_reduce_offset(0, u, lane, a.wave_region_bytes));
    for (int w = 1; w < a.waves; ++w)
      sum += lds_load<f32x4>(lds_base, lds_reduce_offset(w, u, lane, a.wave_region_bytes));

    const int tokens = (C == 1 || c == 0) ? chunk_tokens[0] : chunk_tokens[C - 1];
    if (acc_token(lane) >= tokens) continue;
    const int m0 = m_slice + c * kTileTokens;
    const int64_t out_off = acc_output_offset(tile, m0, lane, 0, a.N);  // i = 0..3 are consecutive
    const int n_first = tile * kTileRows + acc_row(lane, 0);
    float bias[kAccPerLane] = {0.0f, 0.0f, 0.0f, 0.0f};
    if (a.bias != nullptr) {
      const u32x2 braw = load8(static_cast<const uint16_t*>(a.bias) + n_first);
#pragma unroll
      for (int i = 0; i < kAccPerLane; ++i) {
        const uint32_t h = (braw[i >> 1] >> (16 * (i & 1))) & 0xFFFFu;
        bias[i] = a.out_fp16 ? fp16_bits_to_f32(static_cast<uint16_t>(h)) : bf16_bits_to_f32(static_cast<uint16_t>(h));
      }
    }
    uint32_t h[kAccPerLane];
#pragma unroll
    for (int i = 0; i < kAccPerLane; ++i) {
      const float v = sum[i] + bias[i];
      h[i] = a.out_fp16 ? f32_to_half_bits<true>(v) : f32_to_half_bits<false>(v);
    }
    *reinterpret_cast<u32x2*>(static_cast<uint16_t*>(a.out) + out_off) = u32x2{h[0] | (h[1] << 16), h[2] | (h[3] << 16)};
  }
}

// ---- host side ---------------------------------------------------------------------------------

struct GemmPlan {
  int tiles_per_wave;  // R
  int waves;           // W
  int blocks_per_wave;
  int lds_bytes;
  int slice_tokens;    // 16 * chunks_per_slice<R>
};

// Heuristic (untuned: no gfx950 was available to measure; GemmConfig fields override):
//  * R = 2 for more than 8 tokens when N >= 4096 (>= 128 workgroups per 16-token slice): the
//    in-kernel quantization (~65 VALU cycles per 128-group, redone by every workgroup) is then
//    the bottleneck and R tiles share it; R = 2 slices tokens by 16, so M = 17..32 reads the
//    weight twice (two slices, usually concurrently). Else R = 1 (32-token slices).
//  * W = ceil(KB / S) capped at 16: one stage per wave when K <= 16*S*128 (8192 for R = 1), so
//    every wave issues all of its weight loads at once.
//    GemmConfig: k_split = W (1..16), tiles_per_wave = R (1 or 2); the other fields are sm_90's.
inline GemmPlan plan_gemm(const GemmParams& p) {
  const int64_t KB = p.K / kBlockK;
  const int64_t tiles = p.N / kTileRows;
  GemmPlan plan;
  plan.tiles_per_wave = (p.M > 8 && tiles >= 256) ? 2 : 1;
  if (p.config.tiles_per_wave == 1 || p.config.tiles_per_wave == 2) plan.tiles_per_wave = p.config.tiles_per_wave;
  const int S = 4 / plan.tiles_per_wave;
  int64_t waves = (KB + S - 1) / S;
  if (p.config.k_split > 0) waves = p.config.k_split;
  if (waves > kMaxWaves) waves = kMaxWaves;
  if (waves > KB) waves = KB;
  if (waves < 1) waves = 1;
  plan.waves = static_cast<int>(waves);
  plan.blocks_per_wave = static_cast<int>((KB + waves - 1) / waves);
  const int chunks = plan.tiles_per_wave == 1 ? chunks_per_slice<1>() : chunks_per_slice<2>();
  plan.slice_tokens = chunks * kTileTokens;
  const int region = lds_wave_region_bytes(chunks, plan.tiles_per_wave, p.x_type != ElemType::kE4M3);
  plan.lds_bytes = region * plan.waves;
  return plan;
}

template <int R, bool kE8m0, XKind X>
const char* launch_gemm_instance(const GemmKernelArgs& args, const GemmPlan& plan, int64_t slices, hipStream_t stream) {
  const int64_t tiles = args.N / kTileRows;
  const dim3 grid(static_cast<unsigned>((tiles + R - 1) / R), static_cast<unsigned>(slices), 1);
  const dim3 block(static_cast<unsigned>(plan.waves * kWaveLanes), 1, 1);
  hipLaunchKernelGGL((gfx950_block_scaled_gemm_kernel<R, kE8m0, X>), grid, block, plan.lds_bytes, stream, args);
  return launch_error();
}

template <int R, bool kE8m0>
const char* dispatch_x(const GemmKernelArgs& args, ElemType x_type, const GemmPlan& plan, int64_t slices,
                       hipStream_t stream) {
  switch (x_type) {
    case ElemType::kBF16: return launch_gemm_instance<R, kE8m0, XKind::kBF16>(args, plan, slices, stream);
    case ElemType::kFP16: return launch_gemm_instance<R, kE8m0, XKind::kFP16>(args, plan, slices, stream);
    case ElemType::kE4M3: return launch_gemm_instance<R, kE8m0, XKind::kE4M3>(args, plan, slices, stream);
    default: return "gfx950 block-scaled GEMM: x must be bf16, fp16 or e4m3";
  }
}

}  // namespace gfx950

const char* launch_block_scaled_gemm(const GemmParams& p, void* stream) {
  using namespace gfx950;
  if (p.M <= 0 || p.N <= 0) return nullptr;
  if (p.K <= 0 || p.K % kBlockK != 0 || p.N % kTileRows != 0) return "gfx950 block-scaled GEMM: need K % 128 == 0 and N % 16 == 0";
  if (p.out_type != ElemType::kBF16 && p.out_type != ElemType::kFP16) return "gfx950 block-scaled GEMM: output must be bf16 or fp16";
  if (p.x_type == ElemType::kE4M3 && p.x_scale == nullptr) return "gfx950 block-scaled GEMM: e4m3 x needs x_scale";
  const int64_t x_elem_bytes = p.x_type == ElemType::kE4M3 ? 1 : 2;
  // 32-bit buffer offsets: a workgroup's weight rows (32*K bytes) and a 32-token slice of x must
  // each stay below 2^31 bytes; N and K fit int32.
  if (p.K >= (int64_t{1} << 26) || p.N >= (int64_t{1} << 30))
    return "gfx950 block-scaled GEMM: K >= 2^26 or N >= 2^30 exceeds the kernel's 32-bit offsets";
  // Any row stride >= 0 works (a size-1 dimension may carry any stride; overlapping rows only
  // make padding lanes read finite data they never store); it must fit the 32-bit offsets.
  const int64_t x_stride = p.M == 1 ? p.K : p.x_row_stride;
  if (x_stride < 0 || (x_stride + p.K) * x_elem_bytes * kTokensPerSlice >= (int64_t{1} << 31))
    return "gfx950 block-scaled GEMM: activation row stride out of range";

  const GemmPlan plan = plan_gemm(p);
  GemmKernelArgs args;
  args.x_scale_stride_m = p.x_scale_stride_m;
  args.x_scale_stride_kb = p.x_scale_stride_kb;
  args.w = p.w;
  args.w_scale = p.w_scale;
  args.bias = p.bias;
  args.x_row_stride = static_cast<int32_t>(x_stride);
  args.N = static_cast<int32_t>(p.N);
  args.K = static_cast<int32_t>(p.K);
  args.KB = static_cast<int32_t>(p.K / kBlockK);
  args.blocks_per_wave = plan.blocks_per_wave;
  args.waves = plan.waves;
  args.wave_region_bytes = plan.lds_bytes / plan.waves;
  args.w_shuffled = p.w_shuffled ? 1 : 0;
  args.out_fp16 = p.out_type == ElemType::kFP16 ? 1 : 0;

  hipStream_t s = static_cast<hipStream_t>(stream);
  // One launch covers up to 65535 slices (grid.y) and keeps its token offsets within int32 and
  // its activation bytes within 2^31; a larger M is split into several launches.
  int64_t rows_per_launch = int64_t{65535} * plan.slice_tokens;
  const int64_t rows_by_bytes = ((int64_t{1} << 31) / ((x_stride + p.K) * x_elem_bytes)) / plan.slice_tokens * plan.slice_tokens;
  if (rows_by_bytes < rows_per_launch) rows_per_launch = rows_by_bytes;
  for (int64_t m_done = 0; m_done < p.M; m_done += rows_per_launch) {
    const int64_t m_here = p.M - m_done < rows_per_launch ? p.M - m_done : rows_per_launch;
    GemmKernelArgs part = args;
    part.M = static_cast<int32_t>(m_here);
    part.x = static_cast<const uint8_t*>(p.x) + m_done * x_stride * x_elem_bytes;
    part.x_scale = p.x_scale == nullptr ? nullptr
                                        : static_cast<const uint8_t*>(p.x_scale) + m_done * p.x_scale_stride_m * (p.e8m0 ? 1 : 4);
    part.out = static_cast<uint8_t*>(p.out) + m_done * p.N * 2;
    const int64_t slices = (m_here + plan.slice_tokens - 1) / plan.slice_tokens;
    const char* err;
    if (plan.tiles_per_wave == 2) {
      err = p.e8m0 ? dispatch_x<2, true>(part, p.x_type, plan, slices, s) : dispatch_x<2, false>(part, p.x_type, plan, slices, s);
    } else {
      err = p.e8m0 ? dispatch_x<1, true>(part, p.x_type, plan, slices, s) : dispatch_x<1, false>(part, p.x_type, plan, slices, s);
    }
    if (err != nullptr) return err;
  }
  return nullptr;
}

}  // namespace sgl_fp8
