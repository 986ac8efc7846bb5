// sm_90 fused small-M FP8 block-scale GEMM: out[M, N] = x[M, K] @ dequant(w[N, K]).T
//
// Decode GEMMs stream a weight of megabytes against a few tokens, so the kernel is organised
// around keeping the weight stream busy (see docs/sm90.md for the measured reasons):
//
//  * Swap A and B: 16 weight rows are the MMA's M side, tokens its N side (mma.sync
//    m16n8k32 e4m3, tokens padded to 8 per token tile, up to 4 token tiles = 32 tokens).
//  * Work unit = (16-row weight tile, 128-wide K block): 2 KB of weight, one scale. Each lane
//    loads 4 x 16 contiguous bytes per unit: rows g and g+8 (g = lane/4) at K chunks
//    [16q, 16q+16) and [64+16q, 64+16q+16) (q = lane%4) of the block. Inside a 128-block the
//    dot product does not care about K order, so the activation fragment uses the same
//    permutation. The same per-lane K bytes exist in both weight layouts: in AITER's shuffled
//    layout each warp load is 4 whole 128-byte lines, in the plain layout 8 rows x 64 bytes.
//  * Grid: clusters of k_split CTAs. A cluster owns a balanced range of row tiles; CTA `rank`
//    of the cluster owns a balanced range of K blocks, so each SM quantizes only its K slice of
//    the activations (the re-read of x by every SM is what limits larger M).
//  * Each CTA: 8 warps = warps_k x warps_t. A warp owns a fixed subset of the CTA's K blocks
//    and of its tiles, keeps DEPTH units of weight loads in flight in registers, and
//    accumulates per tile in fp32 registers: per block, 4 MMAs (fp32 accumulate, SPEC §3.4's P)
//    then acc += P * (xs * ws).
//  * Prologue: the first DEPTH units of weight are requested before waiting on the previous
//    grid (programmatic dependent launch); then the CTA's K slice of x is quantized into shared
//    memory (SPEC §3.1/3.2, bit-exact; or copied, for pre-quantized input).
//  * Epilogue, fixed order (no atomics, bitwise reproducible): warps' partials -> shared
//    memory -> sum over warps_k in order -> cluster barrier -> each CTA sums its share of the
//    tiles over the cluster's CTAs in rank order through distributed shared memory, adds the
//    bias, rounds to bf16/fp16 and stores.
#pragma once

#include <cooperative_groups.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "../common/fp8_quant_math.h"
#include "../common/gpu_launch.h"
#include "../common/weight_layout.h"
#include "sm90_gemm_plan.h"
#include "sm90_ptx.cuh"

namespace sgl_fp8::sm90 {

constexpr int kGemmWarps = 8;
constexpr int kGemmThreads = kGemmWarps * 32;
constexpr int kTileRows = 16;       // weight rows per MMA (the MMA's M)
constexpr int kTokensPerTile = 8;   // tokens per MMA (the MMA's N)
constexpr int kMaxTokenTiles = 4;   // tokens per launch chunk: 32
constexpr int kChunkTokens = kMaxTokenTiles * kTokensPerTile;
constexpr int kUnitLoads = 4;       // 16-byte weight loads per lane per unit

// Everything the kernel needs, by value (graph-capturable: no device-side state).
struct GemmKernelArgs {
  const void* x;
  int64_t x_row_stride;
  bool x_is_fp16;  // else bf16 (smallm); ignored when pre-quantized
  const void* x_scale;
  int64_t x_scale_stride_m, x_scale_stride_kb;
  const uint8_t* w;
  bool w_shuffled;
  const void* w_scale;
  bool e8m0;
  const void* bias;
  void* out;
  bool out_is_fp16;
  int M, N, K;
  int tiles, kblocks;        // N / 16, K / 128
  int k_split;               // CTAs per cluster (grid.x)
  int warps_k, warps_t;      // warps_k * warps_t == kGemmWarps
  int max_tiles_per_group;   // ceil(tiles / grid.y): sizes the reduction buffer
  int max_blocks_per_cta;    // ceil(kblocks / k_split): sizes the activation buffer
  int64_t block_stride;      // bytes between consecutive K blocks of a tile: 128 plain, 2048 shuffled
  bool stream_only;          // diagnostics: stream the weight but skip the MMAs (output is garbage)
};

// Byte offset, inside one (tile, K block) unit, of the 16 bytes lane (g, q) loads for weight
// row g + 8*half at K chunk `chunk` (0: [16q, 16q+16), 1: [64+16q, ...)). Taken from the layout
// formulas of SPEC §4 at tile 0, block 0: every unit is the same pattern shifted by
// tile * 16 * K + kb * block_stride in both layouts.
__host__ __device__ inline int64_t unit_lane_offset(int lane, int half, int chunk, int64_t K, bool shuffled) {
  const int g = lane >> 2, q = lane & 3;
  return weight_chunk16_offset(g + 8 * half, 64 * chunk + 16 * q, K, shuffled);
}

// The 16-byte chunk `chunk16` (0..7) of token `token`'s quantized 128-group lives at chunk
// chunk16 ^ 4*(token & 1): lanes g (even token) and g+1 (odd) then hit different banks.
__device__ __forceinline__ int act_chunk_swizzle(int chunk16, int token) { return chunk16 ^ ((token & 1) << 2); }

__device__ __forceinline__ float decode_scale(const void* base, int64_t index, bool e8m0) {
  if (e8m0) return e8m0_to_float(static_cast<const uint8_t*>(base)[index]);
  return static_cast<const float*>(base)[index];
}

__device__ __forceinline__ float bf16_or_fp16_to_f32(uint32_t bits16, bool fp16) {
  return fp16 ? fp16_bits_to_f32(static_cast<uint16_t>(bits16)) : bf16_bits_to_f32(static_cast<uint16_t>(bits16));
}

// Quantize this CTA's K slice of the chunk's tokens into shared memory (SPEC §3.1 / §3.2).
// A half-warp handles one 128-group: 8 elements (16 bytes) per lane, amax over 16 lanes.
template <int BATCH>
__device__ __forceinline__ void quantize_activation_slice(const GemmKernelArgs& a, uint8_t* act, float* xs,
                                                          int token_pad, int m_begin, int tokens, int kb_begin,
                                                          int nblocks) {
  const int half_warp = threadIdx.x >> 4, l16 = threadIdx.x & 15;
  const unsigned half_mask = 0xFFFFu << (threadIdx.x & 16);
  const int groups = tokens * nblocks;
  constexpr int kHalfWarps = kGemmThreads / 16;
  const auto* x = static_cast<const uint16_t*>(a.x);
  for (int base = half_warp; base < groups; base += kHalfWarps * BATCH) {
    uint4 raw[BATCH];
#pragma unroll
    for (int i = 0; i < BATCH; ++i) {
      const int gidx = base + i * kHalfWarps;
      if (gidx < groups) {
        const int m = gidx / nblocks, lb = gidx - m * nblocks;
        raw[i] = load_shared_readonly_16B(x + (m_begin + m) * a.x_row_stride + (kb_begin + lb) * 128 + l16 * 8);
      }
    }
#pragma unroll
    for (int i = 0; i < BATCH; ++i) {
      const int gidx = base + i * kHalfWarps;
      if (gidx >= groups) continue;  // uniform across the half-warp
      const int m = gidx / nblocks, lb = gidx - m * nblocks;
      const uint32_t words[4] = {raw[i].x, raw[i].y, raw[i].z, raw[i].w};
      float v[8];
      uint32_t key = 0;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        v[2 * j] = bf16_or_fp16_to_f32(words[j] & 0xFFFFu, a.x_is_fp16);
        v[2 * j + 1] = bf16_or_fp16_to_f32(words[j] >> 16, a.x_is_fp16);
        key = max_key(key, max_key(magnitude_key(v[2 * j]), magnitude_key(v[2 * j + 1])));
      }
#pragma unroll
      for (int offset = 8; offset >= 1; offset >>= 1) key = max_key(key, __shfl_xor_sync(half_mask, key, offset));
      const GroupQuantParams p = group_quant_params(key, a.e8m0);
      uint2 packed;
      packed.x = cvt_e4m3x2_satfinite(v[0] * p.inverse_scale, v[1] * p.inverse_scale) |
                 (cvt_e4m3x2_satfinite(v[2] * p.inverse_scale, v[3] * p.inverse_scale) << 16);
      packed.y = cvt_e4m3x2_satfinite(v[4] * p.inverse_scale, v[5] * p.inverse_scale) |
                 (cvt_e4m3x2_satfinite(v[6] * p.inverse_scale, v[7] * p.inverse_scale) << 16);
      const int chunk16 = act_chunk_swizzle(l16 >> 1, m);
      *reinterpret_cast<uint2*>(act + (int64_t(lb) * token_pad + m) * 128 + chunk16 * 16 + (l16 & 1) * 8) = packed;
      if (l16 == 0) xs[lb * token_pad + m] = p.scale;
    }
  }
}

// Pre-quantized input (scaled_gemm): copy the CTA's K slice of xq and decode x_scale.
// Eight lanes (16 bytes each) per 128-byte group.
template <int BATCH>
__device__ __forceinline__ void copy_prequantized_slice(const GemmKernelArgs& a, uint8_t* act, float* xs,
                                                        int token_pad, int m_begin, int tokens, int kb_begin,
                                                        int nblocks) {
  const int eighth = threadIdx.x >> 3, l8 = threadIdx.x & 7;
  const int groups = tokens * nblocks;
  constexpr int kEighths = kGemmThreads / 8;
  const auto* xq = static_cast<const uint8_t*>(a.x);
  for (int base = eighth; base < groups; base += kEighths * BATCH) {
    uint4 raw[BATCH];
#pragma unroll
    for (int i = 0; i < BATCH; ++i) {
      const int gidx = base + i * kEighths;
      if (gidx < groups) {
        const int m = gidx / nblocks, lb = gidx - m * nblocks;
        raw[i] = load_shared_readonly_16B(xq + (m_begin + m) * a.x_row_stride + (kb_begin + lb) * 128 + l8 * 16);
      }
    }
#pragma unroll
    for (int i = 0; i < BATCH; ++i) {
      const int gidx = base + i * kEighths;
      if (gidx >= groups) continue;
      const int m = gidx / nblocks, lb = gidx - m * nblocks;
      *reinterpret_cast<uint4*>(act + (int64_t(lb) * token_pad + m) * 128 + act_chunk_swizzle(l8, m) * 16) = raw[i];
      if (l8 == 0)
        xs[lb * token_pad + m] = decode_scale(
            a.x_scale, int64_t(m_begin + m) * a.x_scale_stride_m + int64_t(kb_begin + lb) * a.x_scale_stride_kb,
            a.e8m0);
    }
  }
}

// Padding tokens (tokens .. token_pad) contribute exact zeros; their outputs are never stored.
__device__ __forceinline__ void zero_padding_tokens(uint8_t* act, float* xs, int token_pad, int tokens,
                                                    int nblocks) {
  const int pad = token_pad - tokens;
  for (int i = threadIdx.x; i < nblocks * pad * 8; i += kGemmThreads) {
    const int chunk16 = i & 7, rest = i >> 3;
    const int lb = rest / pad, m = tokens + rest % pad;
    *reinterpret_cast<uint4*>(act + (int64_t(lb) * token_pad + m) * 128 + chunk16 * 16) = make_uint4(0, 0, 0, 0);
    if (chunk16 == 0) xs[lb * token_pad + m] = 0.0f;
  }
}

struct WeightUnit {
  uint4 bytes[kUnitLoads];  // [half * 2 + chunk]
  float scale;              // the tile's 128x128 block scale for this K block
};

template <int TOKEN_TILES, bool PREQUANT, int DEPTH>
__global__ void __launch_bounds__(kGemmThreads, 1) block_scaled_gemm_sm90(const GemmKernelArgs a) {
  namespace cg = cooperative_groups;
  extern __shared__ __align__(16) uint8_t smem[];
  constexpr int kTokenPad = TOKEN_TILES * kTokensPerTile;

  const int rank = blockIdx.x;  // K slice within the cluster
  const int group = blockIdx.y;  // range of row tiles
  const int m_begin = blockIdx.z * kChunkTokens;
  const int tokens = min(kTokenPad, a.M - m_begin);

  const int tile_begin = int(int64_t(group) * a.tiles / gridDim.y);
  const int tile_end = int(int64_t(group + 1) * a.tiles / gridDim.y);
  const int kb_begin = rank * a.kblocks / a.k_split;
  const int kb_end = (rank + 1) * a.kblocks / a.k_split;
  const int ntiles = tile_end - tile_begin, nblocks = kb_end - kb_begin;

  const GemmSmemLayout layout(a.max_blocks_per_cta, TOKEN_TILES, a.max_tiles_per_group, a.warps_k);
  uint8_t* act = smem;
  float* xs = reinterpret_cast<float*>(smem + layout.xs_offset);
  float* red = reinterpret_cast<float*>(smem + layout.red_offset);

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int wk = warp % a.warps_k, wt = warp / a.warps_k;
  const int my_tiles = ntiles > wt ? (ntiles - wt + a.warps_t - 1) / a.warps_t : 0;
  const int my_blocks = nblocks > wk ? (nblocks - wk + a.warps_k - 1) / a.warps_k : 0;
  const int units = my_tiles * my_blocks;

  int64_t lane_offset[2][2];
#pragma unroll
  for (int h = 0; h < 2; ++h)
#pragma unroll
    for (int c = 0; c < 2; ++c) lane_offset[h][c] = unit_lane_offset(lane, h, c, a.K, a.w_shuffled);

  auto unit_tile = [&](int u) { return tile_begin + wt + (u / my_blocks) * a.warps_t; };
  auto unit_block = [&](int u) { return kb_begin + wk + (u % my_blocks) * a.warps_k; };
  auto issue_unit = [&](int u, WeightUnit& unit) {
    const int tile = unit_tile(u), kb = unit_block(u);
    const uint8_t* base = a.w + int64_t(tile) * kTileRows * a.K + int64_t(kb) * a.block_stride;
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int c = 0; c < 2; ++c) unit.bytes[h * 2 + c] = load_streaming_16B(base + lane_offset[h][c]);
    unit.scale = decode_scale(a.w_scale, int64_t(tile * kTileRows / 128) * a.kblocks + kb, a.e8m0);
  };

  // Weight loads do not depend on the previous kernel: start them before waiting for it.
  WeightUnit ring[DEPTH];
#pragma unroll
  for (int d = 0; d < DEPTH; ++d)
    if (d < units) issue_unit(d, ring[d]);

  wait_for_previous_grid();
  if constexpr (PREQUANT) {
    copy_prequantized_slice<4>(a, act, xs, kTokenPad, m_begin, tokens, kb_begin, nblocks);
  } else {
    quantize_activation_slice<4>(a, act, xs, kTokenPad, m_begin, tokens, kb_begin, nblocks);
  }
  zero_padding_tokens(act, xs, kTokenPad, tokens, nblocks);
  __syncthreads();
  allow_next_grid_launch();

  const int g = lane >> 2, q = lane & 3;
  float4 acc[TOKEN_TILES];
#pragma unroll
  for (int t = 0; t < TOKEN_TILES; ++t) acc[t] = make_float4(0.f, 0.f, 0.f, 0.f);

  auto consume_unit = [&](int u, const WeightUnit& unit) {
    const int lb = unit_block(u) - kb_begin;
    if (a.stream_only) {  // keep the loads alive without the tensor-core work
      uint32_t fold = 0;
#pragma unroll
      for (int i = 0; i < kUnitLoads; ++i) fold ^= unit.bytes[i].x ^ unit.bytes[i].y ^ unit.bytes[i].z ^ unit.bytes[i].w;
      acc[0].x += __uint_as_float(fold & 0x007FFFFFu);
    } else {
#pragma unroll
    for (int t = 0; t < TOKEN_TILES; ++t) {
      const int token = t * kTokensPerTile + g;
      const uint8_t* act_row = act + (int64_t(lb) * kTokenPad + token) * 128;
      float4 p = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        const uint4 row_lo = unit.bytes[c], row_hi = unit.bytes[2 + c];  // rows g and g + 8
        const uint4 xfrag = *reinterpret_cast<const uint4*>(act_row + act_chunk_swizzle(4 * c + q, token) * 16);
        mma_e4m3_16x8x32(p, row_lo.x, row_hi.x, row_lo.y, row_hi.y, xfrag.x, xfrag.y);
        mma_e4m3_16x8x32(p, row_lo.z, row_hi.z, row_lo.w, row_hi.w, xfrag.z, xfrag.w);
      }
      const float2 xs2 = *reinterpret_cast<const float2*>(xs + lb * kTokenPad + t * kTokensPerTile + 2 * q);
      const float f0 = xs2.x * unit.scale, f1 = xs2.y * unit.scale;
      acc[t].x += p.x * f0;
      acc[t].y += p.y * f1;
      acc[t].z += p.z * f0;
      acc[t].w += p.w * f1;
    }
    }
    if ((u % my_blocks) == my_blocks - 1) {  // this warp's last block of the tile: park the partial
      const int local_tile = unit_tile(u) - tile_begin;
      float* dst = red + (int64_t(local_tile) * a.warps_k + wk) * kTileRows * kTokenPad;
#pragma unroll
      for (int t = 0; t < TOKEN_TILES; ++t) {
        const int col = t * kTokensPerTile + 2 * q;
        *reinterpret_cast<float2*>(dst + g * kTokenPad + col) = make_float2(acc[t].x, acc[t].y);
        *reinterpret_cast<float2*>(dst + (g + 8) * kTokenPad + col) = make_float2(acc[t].z, acc[t].w);
        acc[t] = make_float4(0.f, 0.f, 0.f, 0.f);
      }
    }
  };

  for (int base = 0; base < units; base += DEPTH) {
#pragma unroll
    for (int d = 0; d < DEPTH; ++d) {
      const int u = base + d;
      if (u < units) {
        consume_unit(u, ring[d]);
        if (u + DEPTH < units) issue_unit(u + DEPTH, ring[d]);
      }
    }
  }
  __syncthreads();

  // Sum the warps_k partials of each output in warp order, in place into slot 0.
  const int active_wk = min(a.warps_k, nblocks);
  const int tile_outputs = kTileRows * kTokenPad;
  for (int i = threadIdx.x; i < ntiles * tile_outputs; i += kGemmThreads) {
    const int local_tile = i / tile_outputs, within = i - local_tile * tile_outputs;
    float* slot = red + int64_t(local_tile) * a.warps_k * tile_outputs + within;
    float sum = slot[0];
    for (int k = 1; k < active_wk; ++k) sum += slot[k * tile_outputs];
    slot[0] = sum;
  }

  cg::cluster_group cluster = cg::this_cluster();
  if (a.k_split > 1) {
    cluster.sync();
  } else {
    __syncthreads();
  }

  // This CTA finishes tiles [t0, t1) of the group: sum over the cluster's CTAs in rank order.
  const int t0 = rank * ntiles / a.k_split, t1 = (rank + 1) * ntiles / a.k_split;
  for (int i = threadIdx.x; i < (t1 - t0) * kTileRows * tokens; i += kGemmThreads) {
    const int row = i % kTileRows, rest = i / kTileRows;
    const int m = rest % tokens, local_tile = t0 + rest / tokens;
    const int64_t within = int64_t(local_tile) * a.warps_k * tile_outputs + row * kTokenPad + m;
    float sum = 0.0f;
    for (int r = 0; r < a.k_split; ++r) {
      const float* peer = a.k_split > 1 ? cluster.map_shared_rank(red, r) : red;
      sum += peer[within];
    }
    const int n = (tile_begin + local_tile) * kTileRows + row;
    const int64_t o = int64_t(m_begin + m) * a.N + n;
    if (a.out_is_fp16) {
      if (a.bias) sum += fp16_bits_to_f32(static_cast<const uint16_t*>(a.bias)[n]);
      static_cast<__half*>(a.out)[o] = __float2half_rn(sum);
    } else {
      if (a.bias) sum += bf16_bits_to_f32(static_cast<const uint16_t*>(a.bias)[n]);
      static_cast<__nv_bfloat16*>(a.out)[o] = __float2bfloat16_rn(sum);
    }
  }
  if (a.k_split > 1) cluster.sync();  // peers may still be reading this CTA's partials
}

}  // namespace sgl_fp8::sm90
