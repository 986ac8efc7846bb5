// sm_90 fused small-M FP8 block-scale GEMM: out[M, N] = x[M, K] @ dequant(w[N, K]).T
//
// Decode GEMMs stream megabytes of weight against a few tokens; the kernel is organised so that
// HBM never idles, within one launch and across back-to-back launches (docs/sm90.md has the
// measurements behind each choice):
//
//  * Swap A and B: weight rows are the wgmma's M side (64 rows = 4 tiles of 16), tokens its N
//    side (8..32). FP8 wgmma runs natively on Hopper; mma.sync e4m3 is emulated through f16
//    conversions that cost more than the weight stream.
//  * The weight streams through a ring of 8 KB shared-memory stages filled by 16-byte cp.async
//    copies (no registers held, so the bytes in flight are set by the ring depth, not by the
//    warp count). Each copy moves one 16-byte (row, K chunk) of either weight layout (SPEC §4)
//    into wgmma's canonical K-major layout; both operands are read from shared memory.
//  * Clusters of k_split CTAs own a balanced range of 16-row tiles; each CTA of a cluster owns a
//    balanced range of 128-wide K blocks. A unit is 4 tiles (or one leftover tile) x one K
//    block: 4 wgmma k32 steps (fp32 accumulate: SPEC §3.4's P) into double-buffered
//    accumulators, then acc += P * (xs * ws) once the unit has retired.
//  * Start-up: the first stages are requested before waiting for the previous kernel
//    (programmatic dependent launch: the weight never depends on it), and the next kernel may
//    launch at once. Then the CTA's K slice of x is quantized into shared memory (SPEC
//    §3.1/3.2, bit-exact) or copied (pre-quantized input).
//  * Epilogue in a fixed order (no atomics, bitwise reproducible): each warp pushes a finished
//    tile's partial sums into the owning CTA's inbox (distributed shared memory), one cluster
//    barrier, then each CTA adds its tiles' partials in rank order, adds the bias, rounds to
//    bf16/fp16 and stores.
#pragma once

#include <cooperative_groups.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "../common/fp8_quant_math.h"
#include "../common/gpu_launch.h"
#include "sm90_gemm_layout.h"
#include "sm90_ptx.cuh"

namespace sgl_fp8::sm90 {

constexpr int kGemmWarps = 4;  // one warpgroup
constexpr int kGemmThreads = kGemmWarps * 32;
constexpr int kTokensPerTile = 8;
constexpr int kChunkTokens = 32;  // tokens per launch chunk (grid.z); the wgmma N is up to 32

enum GemmFlags : int32_t {
  kStreamOnly = 1,  // diagnostics: copy the weight but skip the wgmma (output is garbage)
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
  int stages;
  int max_tiles_per_cta, max_blocks_per_cta;
  int flags;
};

__device__ __forceinline__ float decode_scale(const void* base, int64_t index, bool e8m0) {
  if (e8m0) return e8m0_to_float(static_cast<const uint8_t*>(base)[index]);
  return static_cast<const float*>(base)[index];
}

__device__ __forceinline__ float bf16_or_fp16_to_f32(uint32_t bits16, bool fp16) {
  return fp16 ? fp16_bits_to_f32(static_cast<uint16_t>(bits16)) : bf16_bits_to_f32(static_cast<uint16_t>(bits16));
}

// Quantize this CTA's K slice of the chunk's tokens into shared memory (SPEC §3.1 / §3.2).
// A half-warp handles one 128-group: 8 elements per lane, amax over 16 lanes. CTAs start at
// different groups so that the grid does not read the same L2 lines at the same moment.
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
        raw[i] = load_shared_readonly_16B(x + (m_begin + m) * a.x_row_stride + (kb_begin + lb) * kBlockK + l16 * 8);
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
      uint2 packed;
      packed.x = cvt_e4m3x2_satfinite(v[0] * p.inverse_scale, v[1] * p.inverse_scale) |
                 (cvt_e4m3x2_satfinite(v[2] * p.inverse_scale, v[3] * p.inverse_scale) << 16);
      packed.y = cvt_e4m3x2_satfinite(v[4] * p.inverse_scale, v[5] * p.inverse_scale) |
                 (cvt_e4m3x2_satfinite(v[6] * p.inverse_scale, v[7] * p.inverse_scale) << 16);
      *reinterpret_cast<uint2*>(act + lb * token_pad * kBlockK + act_offset(8 * l16, m, token_pad)) = packed;
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
        raw[i] = load_shared_readonly_16B(xq + (m_begin + m) * a.x_row_stride + (kb_begin + lb) * kBlockK + l8 * 16);
      }
    }
#pragma unroll
    for (int i = 0; i < BATCH; ++i) {
      const int gidx = base + i * kEighths;
      if (gidx >= groups) continue;
      const int rotated = (gidx + rotation) % groups;
      const int m = rotated / nblocks, lb = rotated - m * nblocks;
      *reinterpret_cast<uint4*>(act + lb * token_pad * kBlockK + act_offset(16 * l8, m, token_pad)) = raw[i];
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
    const int chunk = i & 7, rest = i >> 3;
    const int lb = rest / pad, m = tokens + rest % pad;
    *reinterpret_cast<uint4*>(act + lb * token_pad * kBlockK + act_offset(16 * chunk, m, token_pad)) =
        make_uint4(0, 0, 0, 0);
    if (chunk == 0) xs[lb * token_pad + m] = 0.0f;
  }
}

template <int TOKEN_TILES, bool PREQUANT>
__global__ void __launch_bounds__(kGemmThreads, 1) block_scaled_gemm_sm90(const GemmKernelArgs a) {
  namespace cg = cooperative_groups;
  extern __shared__ __align__(1024) uint8_t smem[];
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
  // Row units: full groups of 4 tiles, then the leftover tiles one by one.
  const int full_units = ntiles / 4, row_units = full_units + ntiles % 4;
  const int units = row_units * nblocks;

  const GemmSmemLayout layout(a.stages, a.max_blocks_per_cta, TOKEN_TILES, a.max_tiles_per_cta, a.k_split);
  uint8_t* ring = smem;
  uint8_t* act = smem + layout.act_offset;
  float* xs = reinterpret_cast<float*>(smem + layout.xs_offset);
  float* ws = reinterpret_cast<float*>(smem + layout.ws_offset);
  float* inbox = reinterpret_cast<float*>(smem + layout.inbox_offset);

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, q = lane & 3;

  auto unit_first_tile = [&](int row_unit) {
    return row_unit < full_units ? tile_begin + 4 * row_unit : tile_begin + 4 * full_units + (row_unit - full_units);
  };
  // Issue this thread's copies of unit u into its ring stage (4 chunks, or 1 for a single tile).
  auto issue_unit = [&](int u) {
    const int row_unit = u / nblocks, kb = kb_begin + u % nblocks;
    const int64_t row0 = int64_t(unit_first_tile(row_unit)) * kTileRows;
    uint8_t* stage = ring + (u % a.stages) * kStageBytes;
    const int chunks = row_unit < full_units ? 4 : 1;
    for (int j = 0; j < chunks; ++j) {
      const int c = threadIdx.x + j * kGemmThreads;
      cp_async_16B(stage + chunk_stage_offset(c), a.w + chunk_global_offset(c, row0, kb, a.K, a.w_shuffled));
    }
  };

  // 1. The weight never depends on the previous kernel: fill the ring now.
  for (int u = 0; u < a.stages - 1; ++u) {
    if (u < units) issue_unit(u);
    cp_async_commit();
  }
  allow_next_grid_launch();

  // 2. Block scales of the CTA's tiles, and the activations (which come from the previous kernel).
  for (int i = threadIdx.x; i < ntiles * nblocks; i += kGemmThreads) {
    const int lt = i / nblocks, lb = i - lt * nblocks;
    ws[i] = decode_scale(a.w_scale, int64_t((tile_begin + lt) * kTileRows / 128) * a.kblocks + kb_begin + lb, a.e8m0);
  }
  wait_for_previous_grid();
  const int rotation = (group * 7 + rank * 3) % max(1, tokens * nblocks);
  if constexpr (PREQUANT) {
    copy_prequantized_slice<4>(a, act, xs, kTokenPad, m_begin, tokens, kb_begin, nblocks, rotation);
  } else {
    quantize_activation_slice<4>(a, act, xs, kTokenPad, m_begin, tokens, kb_begin, nblocks, rotation);
  }
  zero_padding_tokens(act, xs, kTokenPad, tokens, nblocks);

  // 3. Stream the units.
  cg::cluster_group cluster = cg::this_cluster();
  float acc[kAccRegs], part[2][kAccRegs];
#pragma unroll
  for (int i = 0; i < kAccRegs; ++i) acc[i] = 0.0f;

  auto launch_unit_mma = [&](int u, float (&d)[kAccRegs]) {
    const uint8_t* stage = ring + (u % a.stages) * kStageBytes;
    const uint8_t* block = act + (u % nblocks) * kTokenPad * kBlockK;
    wgmma_fence();
#pragma unroll
    for (int s = 0; s < kBlockK / kStepK; ++s) {
      const uint64_t desc_a = wgmma_smem_descriptor(stage + s * kStageStepBytes, kStageLbo, kStageSbo);
      const uint64_t desc_b = wgmma_smem_descriptor(block + s * kTokenPad * 32, kTokenPad * 16, 128);
      wgmma_e4m3_ss<kTokenPad>(d, desc_a, desc_b, s);
    }
    wgmma_commit();
  };

  // Owner (cluster rank) of the group's local tile lt: rank r finishes tiles [r*n/S, (r+1)*n/S).
  auto owner_of = [&](int lt) {
    int r = a.k_split - 1;
    while (r > 0 && r * ntiles / a.k_split > lt) --r;
    return r;
  };

  // acc += P * xs * ws for a retired unit; after a row unit's last block, push each warp's tile.
  auto retire_unit = [&](int u, const float (&d)[kAccRegs]) {
    const int row_unit = u / nblocks, lb = u % nblocks;
    const bool full = row_unit < full_units;
    const int lt = unit_first_tile(row_unit) - tile_begin + (full ? warp : 0);
    if (!full && warp != 0) return;  // a single-tile unit: rows 16..63 are not ours
    const float w_scale = ws[lt * nblocks + lb];
#pragma unroll
    for (int t = 0; t < TOKEN_TILES; ++t) {
      const float2 xs2 = *reinterpret_cast<const float2*>(xs + lb * kTokenPad + t * kTokensPerTile + 2 * q);
      const float f0 = xs2.x * w_scale, f1 = xs2.y * w_scale;
      acc[4 * t + 0] += d[4 * t + 0] * f0;
      acc[4 * t + 1] += d[4 * t + 1] * f1;
      acc[4 * t + 2] += d[4 * t + 2] * f0;
      acc[4 * t + 3] += d[4 * t + 3] * f1;
    }
    if (lb == nblocks - 1) {
      const int owner = owner_of(lt);
      const int slot = (lt - owner * ntiles / a.k_split) * a.k_split + rank;
      float* dst = (a.k_split > 1 ? cluster.map_shared_rank(inbox, owner) : inbox) + slot * kTileRows * kTokenPad;
#pragma unroll
      for (int t = 0; t < TOKEN_TILES; ++t) {
        const int col = t * kTokensPerTile + 2 * q;
        *reinterpret_cast<float2*>(dst + g * kTokenPad + col) = make_float2(acc[4 * t], acc[4 * t + 1]);
        *reinterpret_cast<float2*>(dst + (g + 8) * kTokenPad + col) = make_float2(acc[4 * t + 2], acc[4 * t + 3]);
        acc[4 * t] = acc[4 * t + 1] = acc[4 * t + 2] = acc[4 * t + 3] = 0.0f;
      }
    }
  };

  // Iteration u: wait for unit u's copies (stages - 2 later units may stay in flight), start its
  // wgmma, retire unit u-1 and refill its stage with unit u + stages - 1.
  auto step = [&](int u, float (&current)[kAccRegs], float (&previous)[kAccRegs]) {
    cp_async_wait_dynamic(a.stages - 2);
    fence_shared_for_async_proxy();
    __syncthreads();
    if (!(a.flags & kStreamOnly)) {
      launch_unit_mma(u, current);
      if (u > 0) {
        wgmma_wait<1>();
        retire_unit(u - 1, previous);
      }
    }
    if (u + a.stages - 1 < units) issue_unit(u + a.stages - 1);
    cp_async_commit();
  };
  for (int u = 0; u < units; ++u) {
    if (u & 1) {
      step(u, part[1], part[0]);
    } else {
      step(u, part[0], part[1]);
    }
  }
  if (units > 0 && !(a.flags & kStreamOnly)) {
    wgmma_wait<0>();
    if ((units - 1) & 1) {
      retire_unit(units - 1, part[1]);
    } else {
      retire_unit(units - 1, part[0]);
    }
  }
  cp_async_wait<0>();

  // 4. Every tile's partials have been pushed: sum them in rank order, add bias, round, store.
  if (a.k_split > 1) {
    cluster.sync();
  } else {
    __syncthreads();
  }
  const int owned_begin = rank * ntiles / a.k_split, owned_end = (rank + 1) * ntiles / a.k_split;
  const int tile_outputs = kTileRows * kTokenPad;
  for (int i = threadIdx.x; i < (owned_end - owned_begin) * kTileRows * tokens; i += kGemmThreads) {
    const int row = i % kTileRows, rest = i / kTileRows;
    const int m = rest % tokens, owned = rest / tokens;
    const float* slots = inbox + owned * a.k_split * tile_outputs + row * kTokenPad + m;
    float sum = 0.0f;
    for (int r = 0; r < a.k_split; ++r) sum += slots[r * tile_outputs];
    const int n = (tile_begin + owned_begin + owned) * kTileRows + row;
    const int64_t o = int64_t(m_begin + m) * a.N + n;
    if (a.out_is_fp16) {
      if (a.bias) sum += fp16_bits_to_f32(static_cast<const uint16_t*>(a.bias)[n]);
      static_cast<__half*>(a.out)[o] = __float2half_rn(sum);
    } else {
      if (a.bias) sum += bf16_bits_to_f32(static_cast<const uint16_t*>(a.bias)[n]);
      static_cast<__nv_bfloat16*>(a.out)[o] = __float2bfloat16_rn(sum);
    }
  }
}

}  // namespace sgl_fp8::sm90
