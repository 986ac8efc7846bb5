// sm_90 fused small-M FP8 block-scale GEMM: out[M, N] = x[M, K] @ dequant(w[N, K]).T
//
// Decode GEMMs stream megabytes of weight against a few tokens; the kernel is organised so that
// HBM never idles, within one launch and across back-to-back launches (docs/sm90.md has the
// measurements behind each choice):
//
//  * Swap A and B: weight rows are the wgmma's M side (64 rows = 4 warps x 16), tokens its N
//    side (8..32). FP8 wgmma runs natively on Hopper; mma.sync e4m3 is emulated through f16
//    conversions that cost more than the weight stream at M >= 8.
//  * Work unit = (16-row weight tile, 128-wide K block): 2 KB and one block scale. A lane loads
//    4 x 16 contiguous bytes per unit straight into the wgmma A registers: rows g and g+8
//    (g = lane/4) at K chunks [16q, 16q+16) and [64+16q, 64+16q+16) (q = lane%4). Inside a
//    128-block the dot product ignores K order, so the activations are stored in shared memory
//    under the same permutation. Plain and AITER-shuffled weights give each lane the same K
//    bytes; only the addresses differ (SPEC §4; 4 whole 128-byte lines per warp load when
//    shuffled).
//  * One warpgroup per CTA, several CTAs per SM: clusters of k_split CTAs own a balanced range of
//    row tiles, each CTA of a cluster a balanced range of K blocks. A CTA walks its tiles in
//    rounds of 4 (one per warp) over its K blocks.
//  * Start-up, before waiting for the previous kernel (programmatic dependent launch): ask L2 to
//    prefetch the CTA's whole weight range, let the next kernel launch, and load the first units
//    into registers. Weights never depend on the previous kernel; activations do.
//  * Then quantize the CTA's K slice of x into shared memory (SPEC §3.1/3.2, bit-exact; or copy
//    pre-quantized input) and stream: per unit, 4 wgmma (fp32 accumulate: SPEC §3.4's P) into
//    double-buffered accumulators, and acc += P * (xs * ws) once the previous unit retires.
//  * Epilogue in a fixed order (no atomics, bitwise reproducible): per-tile sums in shared
//    memory, cluster barrier, each CTA adds its share of the tiles over the cluster's CTAs in
//    rank order through distributed shared memory, adds bias, rounds to bf16/fp16, stores.
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

constexpr int kGemmWarps = 4;  // one warpgroup
constexpr int kGemmThreads = kGemmWarps * 32;
constexpr int kTileRows = 16;
constexpr int kTokensPerTile = 8;
constexpr int kChunkTokens = 32;  // tokens per launch chunk (grid.z); wgmma N up to 32
constexpr int kUnitLoads = 4;     // 16-byte weight loads per lane per unit

enum GemmFlags : int32_t {
  kStreamOnly = 1,    // diagnostics: stream the weight, skip the wgmma (output is garbage)
  kNoL2Prefetch = 2,  // diagnostics: no bulk L2 prefetch of the weight range
};

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
  int tiles, kblocks;  // N / 16, K / 128
  int k_split;         // CTAs per cluster (grid.x)
  int max_tiles_per_cta, max_blocks_per_cta;
  int flags;
};

// Byte offset, inside one (tile, K block) unit, of the 16 bytes lane (g, q) loads for weight
// row g + 8*half at K chunk `chunk` (0: [16q, 16q+16), 1: [64+16q, ...)). Taken from the layout
// formulas of SPEC §4 at tile 0, block 0; every unit is the same pattern shifted by
// tile * 16 * K + kb * (128 plain | 2048 shuffled).
__host__ __device__ inline int64_t unit_lane_offset(int lane, int half, int chunk, int64_t K, bool shuffled) {
  const int g = lane >> 2, q = lane & 3;
  return weight_chunk16_offset(g + 8 * half, 64 * chunk + 16 * q, K, shuffled);
}

// Where activation byte P (0..127) of token `token`'s quantized group sits in shared memory:
// the wgmma B operand of K step s = P/32-ish is K-major with no swizzle, built from "core
// matrices" of 8 tokens x 16 bytes; inside a 128-block, byte P feeds the logical k that the
// weight byte at the same P meets in the A registers (see unit_lane_offset):
//   c = P/64, q = (P%64)/16, h = (P%16)/8, r = P%8  ->  step 2c+h, core column r/4, byte 4q + r%4.
// token_pad tokens per block; the layout of one block is [step 4][core col 2][token/8][8][16 B].
__host__ __device__ inline int act_smem_offset(int P, int token, int token_pad) {
  const int c = P >> 6, q = (P >> 4) & 3, h = (P >> 3) & 1, r = P & 7;
  const int step = 2 * c + h, core_col = r >> 2, byte = 4 * q + (r & 3);
  return step * token_pad * 32 + core_col * token_pad * 16 + (token >> 3) * 128 + (token & 7) * 16 + byte;
}

__device__ __forceinline__ float decode_scale(const void* base, int64_t index, bool e8m0) {
  if (e8m0) return e8m0_to_float(static_cast<const uint8_t*>(base)[index]);
  return static_cast<const float*>(base)[index];
}

__device__ __forceinline__ float bf16_or_fp16_to_f32(uint32_t bits16, bool fp16) {
  return fp16 ? fp16_bits_to_f32(static_cast<uint16_t>(bits16)) : bf16_bits_to_f32(static_cast<uint16_t>(bits16));
}

// Quantize this CTA's K slice of the chunk's tokens into shared memory (SPEC §3.1 / §3.2).
// A half-warp handles one 128-group: 8 elements per lane, amax over 16 lanes. CTAs start at
// different groups so that the whole grid does not read the same L2 lines at the same time.
template <int BATCH>
__device__ __forceinline__ void quantize_activation_slice(const GemmKernelArgs& a, uint8_t* act, float* xs,
                                                          int token_pad, int m_begin, int tokens, int kb_begin,
                                                          int nblocks, int rotation) {
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
        const int rotated = (gidx + rotation) % groups;
        const int m = rotated / nblocks, lb = rotated - m * nblocks;
        raw[i] = load_shared_readonly_16B(x + (m_begin + m) * a.x_row_stride + (kb_begin + lb) * 128 + l16 * 8);
      }
    }
#pragma unroll
    for (int i = 0; i < BATCH; ++i) {
      const int gidx = base + i * kHalfWarps;
      if (gidx >= groups) continue;  // uniform across the half-warp
      const int rotated = (gidx + rotation) % groups;
      const int m = rotated / nblocks, lb = rotated - m * nblocks;
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
      const uint32_t lo = cvt_e4m3x2_satfinite(v[0] * p.inverse_scale, v[1] * p.inverse_scale) |
                          (cvt_e4m3x2_satfinite(v[2] * p.inverse_scale, v[3] * p.inverse_scale) << 16);
      const uint32_t hi = cvt_e4m3x2_satfinite(v[4] * p.inverse_scale, v[5] * p.inverse_scale) |
                          (cvt_e4m3x2_satfinite(v[6] * p.inverse_scale, v[7] * p.inverse_scale) << 16);
      uint8_t* block = act + lb * token_pad * 128;
      *reinterpret_cast<uint32_t*>(block + act_smem_offset(8 * l16, m, token_pad)) = lo;
      *reinterpret_cast<uint32_t*>(block + act_smem_offset(8 * l16 + 4, m, token_pad)) = hi;
      if (l16 == 0) xs[lb * token_pad + m] = p.scale;
    }
  }
}

// Pre-quantized input (scaled_gemm): copy the CTA's K slice of xq and decode x_scale.
// Eight lanes (16 bytes each) per 128-byte group.
template <int BATCH>
__device__ __forceinline__ void copy_prequantized_slice(const GemmKernelArgs& a, uint8_t* act, float* xs,
                                                        int token_pad, int m_begin, int tokens, int kb_begin,
                                                        int nblocks, int rotation) {
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
        const int rotated = (gidx + rotation) % groups;
        const int m = rotated / nblocks, lb = rotated - m * nblocks;
        raw[i] = load_shared_readonly_16B(xq + (m_begin + m) * a.x_row_stride + (kb_begin + lb) * 128 + l8 * 16);
      }
    }
#pragma unroll
    for (int i = 0; i < BATCH; ++i) {
      const int gidx = base + i * kEighths;
      if (gidx >= groups) continue;
      const int rotated = (gidx + rotation) % groups;
      const int m = rotated / nblocks, lb = rotated - m * nblocks;
      uint8_t* block = act + lb * token_pad * 128;
      const uint32_t words[4] = {raw[i].x, raw[i].y, raw[i].z, raw[i].w};
#pragma unroll
      for (int j = 0; j < 4; ++j)
        *reinterpret_cast<uint32_t*>(block + act_smem_offset(16 * l8 + 4 * j, m, token_pad)) = words[j];
      if (l8 == 0)
        xs[lb * token_pad + m] = decode_scale(
            a.x_scale, int64_t(m_begin + m) * a.x_scale_stride_m + int64_t(kb_begin + lb) * a.x_scale_stride_kb,
            a.e8m0);
    }
  }
}

// Padding tokens (tokens .. token_pad) contribute exact zeros; their outputs are never stored.
// Each padded token owns 8 rows of 16 bytes per block: one per (K step, core column).
__device__ __forceinline__ void zero_padding_tokens(uint8_t* act, float* xs, int token_pad, int tokens,
                                                    int nblocks) {
  const int pad = token_pad - tokens;
  for (int i = threadIdx.x; i < nblocks * pad * 8; i += kGemmThreads) {
    const int step = (i & 7) >> 1, core_col = i & 1, rest = i >> 3;
    const int lb = rest / pad, m = tokens + rest % pad;
    const int P = 64 * (step >> 1) + 8 * (step & 1) + 4 * core_col;  // byte 0 of that 16-byte row
    *reinterpret_cast<uint4*>(act + lb * token_pad * 128 + act_smem_offset(P, m, token_pad)) = make_uint4(0, 0, 0, 0);
    if ((i & 7) == 0) xs[lb * token_pad + m] = 0.0f;
  }
}

struct WeightUnit {
  uint4 bytes[kUnitLoads];  // [half * 2 + chunk]: rows g / g+8, K chunks [16q,+16) / [64+16q,+16)
  float scale;              // the tile's 128x128 block scale for this K block
};

template <int TOKEN_TILES, bool PREQUANT, int DEPTH>
__global__ void __launch_bounds__(kGemmThreads, 4) block_scaled_gemm_sm90(const GemmKernelArgs a) {
  namespace cg = cooperative_groups;
  static_assert(DEPTH % 2 == 0, "the unit loop alternates two accumulator sets");
  extern __shared__ __align__(128) uint8_t smem[];
  constexpr int kTokenPad = TOKEN_TILES * kTokensPerTile;
  constexpr int kAccRegs = kTokenPad / 2;

  const int rank = blockIdx.x;   // K slice within the cluster
  const int group = blockIdx.y;  // range of row tiles
  const int m_begin = blockIdx.z * kChunkTokens;
  const int tokens = min(kTokenPad, a.M - m_begin);

  const int tile_begin = int(int64_t(group) * a.tiles / gridDim.y);
  const int tile_end = int(int64_t(group + 1) * a.tiles / gridDim.y);
  const int kb_begin = rank * a.kblocks / a.k_split;
  const int kb_end = (rank + 1) * a.kblocks / a.k_split;
  const int ntiles = tile_end - tile_begin, nblocks = kb_end - kb_begin;
  const int rounds = (ntiles + kGemmWarps - 1) / kGemmWarps;
  const int units = rounds * nblocks;  // the same for every warp: the warpgroup moves in lockstep

  const GemmSmemLayout layout(a.max_blocks_per_cta, TOKEN_TILES, a.max_tiles_per_cta);
  uint8_t* act = smem;
  float* xs = reinterpret_cast<float*>(smem + layout.xs_offset);
  float* red = reinterpret_cast<float*>(smem + layout.red_offset);

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, q = lane & 3;
  const int64_t block_stride = a.w_shuffled ? 2048 : 128;
  // Inside a unit, offsets stay below 16 * K < 2^31.
  int32_t lane_offset[2][2];
#pragma unroll
  for (int h = 0; h < 2; ++h)
#pragma unroll
    for (int c = 0; c < 2; ++c) lane_offset[h][c] = int32_t(unit_lane_offset(lane, h, c, a.K, a.w_shuffled));

  // This warp's tile in round r, or -1 when the round has fewer than 4 tiles.
  auto round_tile = [&](int r) {
    const int t = tile_begin + r * kGemmWarps + warp;
    return t < tile_end ? t : -1;
  };

  // 1. The weight does not depend on the previous kernel: have L2 fetch all of it now.
  if (!(a.flags & kNoL2Prefetch)) {
    for (int r = 0; r < rounds; ++r) {
      const int tile = round_tile(r);
      if (tile < 0) continue;
      const uint8_t* tile_base = a.w + int64_t(tile) * kTileRows * a.K;
      if (a.w_shuffled) {  // a tile's K range is contiguous
        if (lane == 0) prefetch_l2_bulk(tile_base + int64_t(kb_begin) * 2048, uint32_t(nblocks) * 2048);
      } else if (lane < kTileRows) {  // one contiguous K range per row
        prefetch_l2_bulk(tile_base + int64_t(lane) * a.K + int64_t(kb_begin) * 128, uint32_t(nblocks) * 128);
      }
    }
  }
  allow_next_grid_launch();

  auto issue_unit = [&](int u, WeightUnit& unit) {
    const int tile = round_tile(u / nblocks), kb = kb_begin + u % nblocks;
    if (tile < 0) {
#pragma unroll
      for (int i = 0; i < kUnitLoads; ++i) unit.bytes[i] = make_uint4(0, 0, 0, 0);
      unit.scale = 0.0f;
      return;
    }
    const uint8_t* base = a.w + int64_t(tile) * kTileRows * a.K + int64_t(kb) * block_stride;
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int c = 0; c < 2; ++c) unit.bytes[h * 2 + c] = load_streaming_16B(base + lane_offset[h][c]);
    unit.scale = decode_scale(a.w_scale, int64_t(tile * kTileRows / 128) * a.kblocks + kb, a.e8m0);
  };

  WeightUnit ring[DEPTH];
#pragma unroll
  for (int d = 0; d < DEPTH; ++d)
    if (d < units) issue_unit(d, ring[d]);

  // 2. Activations come from the previous kernel.
  wait_for_previous_grid();
  const int rotation = (group * 7 + rank * 3) % max(1, tokens * nblocks);
  if constexpr (PREQUANT) {
    copy_prequantized_slice<4>(a, act, xs, kTokenPad, m_begin, tokens, kb_begin, nblocks, rotation);
  } else {
    quantize_activation_slice<4>(a, act, xs, kTokenPad, m_begin, tokens, kb_begin, nblocks, rotation);
  }
  zero_padding_tokens(act, xs, kTokenPad, tokens, nblocks);
  fence_shared_for_async_proxy();
  __syncthreads();

  // 3. Stream: unit u = (round u / nblocks, block u % nblocks).
  float acc[kAccRegs], part[2][kAccRegs];
#pragma unroll
  for (int i = 0; i < kAccRegs; ++i) acc[i] = 0.0f;

  auto launch_unit_mma = [&](int u, const WeightUnit& unit, float (&d)[kAccRegs]) {
    const int lb = u % nblocks;
    const uint8_t* block = act + lb * kTokenPad * 128;
    wgmma_fence();
#pragma unroll
    for (int s = 0; s < 4; ++s) {
      const int c = s >> 1, h = s & 1;
      const uint4 lo = unit.bytes[c], hi = unit.bytes[2 + c];  // rows g and g + 8
      const uint32_t a0 = h ? lo.z : lo.x, a2 = h ? lo.w : lo.y;
      const uint32_t a1 = h ? hi.z : hi.x, a3 = h ? hi.w : hi.y;
      const uint64_t desc = wgmma_smem_descriptor(block + s * kTokenPad * 32, kTokenPad * 16, 128);
      wgmma_e4m3_rs<kTokenPad>(d, a0, a1, a2, a3, desc, s);
    }
    wgmma_commit();
  };

  // acc += P * xs * ws for a retired unit; at the end of a round, park the tile's sums.
  auto retire_unit = [&](int u, float scale, const float (&d)[kAccRegs]) {
    const int lb = u % nblocks;
#pragma unroll
    for (int t = 0; t < TOKEN_TILES; ++t) {
      const float2 xs2 = *reinterpret_cast<const float2*>(xs + lb * kTokenPad + t * kTokensPerTile + 2 * q);
      const float f0 = xs2.x * scale, f1 = xs2.y * scale;
      acc[4 * t + 0] += d[4 * t + 0] * f0;
      acc[4 * t + 1] += d[4 * t + 1] * f1;
      acc[4 * t + 2] += d[4 * t + 2] * f0;
      acc[4 * t + 3] += d[4 * t + 3] * f1;
    }
    if (lb == nblocks - 1) {
      const int r = u / nblocks;
      if (round_tile(r) >= 0) {
        float* dst = red + (r * kGemmWarps + warp) * kTileRows * kTokenPad;
#pragma unroll
        for (int t = 0; t < TOKEN_TILES; ++t) {
          const int col = t * kTokensPerTile + 2 * q;
          *reinterpret_cast<float2*>(dst + g * kTokenPad + col) = make_float2(acc[4 * t], acc[4 * t + 1]);
          *reinterpret_cast<float2*>(dst + (g + 8) * kTokenPad + col) = make_float2(acc[4 * t + 2], acc[4 * t + 3]);
        }
      }
#pragma unroll
      for (int i = 0; i < kAccRegs; ++i) acc[i] = 0.0f;
    }
  };

  if (a.flags & kStreamOnly) {
    // Diagnostics: consume the loads without tensor-core work.
    uint32_t fold = 0;
    for (int base = 0; base < units; base += DEPTH) {
#pragma unroll
      for (int d = 0; d < DEPTH; ++d) {
        const int u = base + d;
        if (u < units) {
#pragma unroll
          for (int i = 0; i < kUnitLoads; ++i)
            fold ^= ring[d].bytes[i].x ^ ring[d].bytes[i].y ^ ring[d].bytes[i].z ^ ring[d].bytes[i].w;
          if (u + DEPTH < units) issue_unit(u + DEPTH, ring[d]);
        }
      }
    }
    acc[0] = __uint_as_float(fold & 0x007FFFFFu);
    if (rounds > 0) red[warp * kTileRows * kTokenPad + lane] = acc[0];
  } else {
    float last_scale = 0.0f;
    for (int base = 0; base < units; base += DEPTH) {
#pragma unroll
      for (int d = 0; d < DEPTH; ++d) {
        const int u = base + d;
        if (u < units) {
          launch_unit_mma(u, ring[d], part[d & 1]);
          if (u == units - 1) last_scale = ring[d].scale;
          if (u > 0) {
            // The unit before this one has retired: fold it in and reuse its registers.
            wgmma_wait<1>();
            const int prev = (d + DEPTH - 1) % DEPTH;  // compile-time after unrolling
            retire_unit(u - 1, ring[prev].scale, part[(d + 1) & 1]);
            if (u - 1 + DEPTH < units) issue_unit(u - 1 + DEPTH, ring[prev]);
          }
        }
      }
    }
    wgmma_wait<0>();
    if (units > 0) {
      const int last = units - 1;
      if (last & 1) {
        retire_unit(last, last_scale, part[1]);
      } else {
        retire_unit(last, last_scale, part[0]);
      }
    }
  }

  // 4. Cluster reduction in rank order, bias, rounding, store.
  cg::cluster_group cluster = cg::this_cluster();
  if (a.k_split > 1) {
    cluster.sync();
  } else {
    __syncthreads();
  }
  const int t0 = rank * ntiles / a.k_split, t1 = (rank + 1) * ntiles / a.k_split;
  const int tile_outputs = kTileRows * kTokenPad;
  for (int i = threadIdx.x; i < (t1 - t0) * kTileRows * tokens; i += kGemmThreads) {
    const int row = i % kTileRows, rest = i / kTileRows;
    const int m = rest % tokens, local_tile = t0 + rest / tokens;
    const int within = local_tile * tile_outputs + row * kTokenPad + m;
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
  if (a.k_split > 1) cluster.sync();  // peers may still be reading this CTA's sums
}

}  // namespace sgl_fp8::sm90
