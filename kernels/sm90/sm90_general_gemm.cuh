// sm_90 fused small-M FP8 block-scale GEMM: out[M, N] = x[M, K] @ dequant(w[N, K]).T
//
// Decode GEMMs stream megabytes of weight against a few tokens; the kernel is organised so that
// HBM never idles, within one launch and across back-to-back launches (docs/design/sm90.md records
// the measurements behind each choice, including the designs that lost):
//
//  * Swap A and B: 16 weight rows are the MMA's M side, tokens its N side (mma.sync m16n8k16
//    f16, tokens padded to 8 per token tile, up to 4 token tiles = 32 tokens).
//  * Work unit = (16-row weight tile, 128-wide K block): 2 KB of weight, one block scale. A lane
//    loads 4 x 16 contiguous bytes per unit straight into registers (sm90_gemm_layout.h), the
//    same K bytes in the plain and the AITER-shuffled layout (SPEC §4). Inside a 128-block the
//    dot product ignores K order, so the activations are read under the same permutation.
//  * The weight bytes are converted to f16 once per unit (exact); the quantized activations are
//    stored in shared memory as f16 (exact too), so B needs no conversion for any token count.
//  * Grid: clusters of k_split CTAs own a balanced range of row tiles; CTA `rank` of a cluster
//    owns a balanced range of K blocks. 8 warps = warps_k x warps_t split the CTA's blocks and
//    tiles; each warp keeps DEPTH units of loads in flight in registers, plus `smem_stages` more
//    through cp.async into per-thread shared-memory slots (the plan fills the shared memory left
//    under the two-CTAs-per-SM budget), and never waits for another warp in the main loop. Per
//    unit: 8 MMAs per token tile (fp32 accumulate: SPEC §3.4's P), then
//    acc += P * (xs * ws).
//  * Start-up: the first DEPTH + smem_stages units are requested before waiting for the previous kernel
//    (programmatic dependent launch: the weight never depends on it), and the next kernel may
//    launch at once; <= 128 registers per thread and a small shared-memory footprint leave room
//    for its CTA. Then the CTA's K slice of x is quantized (SPEC §3.1/3.2, bit-exact) or copied.
//  * Epilogue in a fixed order (no atomics, bitwise reproducible): warps' partials -> shared
//    memory -> summed over warps_k in order -> pushed into the owning CTA's inbox by st.async,
//    counted in bytes on its mbarrier (the cluster barrier arrived on at entry is only waited on
//    before the first send: a second one, whose release published the stores, cost a call more
//    than this whole exchange) -> summed over the cluster's ranks in order, bias, rounded to
//    bf16/fp16, stored.
#pragma once

#include "sm90_gemm_common.cuh"
#include "sm90_gemm_layout.h"
#include "sm90_ptx.cuh"

namespace sgl_fp8::sm90 {

constexpr int kUnitLoads = 4;     // 16-byte weight loads per lane per unit

static_assert(kGemmThreads == kStageThreads, "the staging ring is laid out for 256 threads");

struct WeightUnit {
  uint4 bytes[kUnitLoads];  // [half * 2 + chunk]: rows g / g+8, K [16q, +16) / [64+16q, +16)
  uint32_t scale_bits;      // the tile's 128x128 block scale for this K block (decode_scale_bits)
};

// One unit's contribution: P = the 16 x 128 weight block times the tokens' quantized 128-block
// (fp32 accumulation in one MMA chain), then acc += P * (xs * ws) (SPEC §3.4). `lb` is the K
// block's index within the CTA's slice; the lane's K bytes are unit_k_of's.
template <int TOKEN_TILES>
__device__ __forceinline__ void accumulate_unit(float4 (&acc)[TOKEN_TILES], const WeightUnit& unit, bool e8m0,
                                                const uint8_t* act, const float* xs, int lb, int lane) {
  constexpr int kTokenPad = TOKEN_TILES * kTokensPerTile;
  const int g = lane >> 2, q = lane & 3;
  float4 p[TOKEN_TILES];
#pragma unroll
  for (int t = 0; t < TOKEN_TILES; ++t) p[t] = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
  for (int c = 0; c < 2; ++c) {
    uint4 b[TOKEN_TILES][2];  // token 8t+g, K [unit_k_of, +16) as 8 f16 pairs
#pragma unroll
    for (int t = 0; t < TOKEN_TILES; ++t) {
      const int token = t * kTokensPerTile + g;
      const int k = unit_k_of(lane, c);
      b[t][0] = *reinterpret_cast<const uint4*>(act + act_f16_offset(lb, token, kTokenPad, k));
      b[t][1] = *reinterpret_cast<const uint4*>(act + act_f16_offset(lb, token, kTokenPad, k + 8));
    }
    const uint32_t lo[4] = {unit.bytes[c].x, unit.bytes[c].y, unit.bytes[c].z, unit.bytes[c].w};  // row g
    const uint32_t hi[4] = {unit.bytes[2 + c].x, unit.bytes[2 + c].y, unit.bytes[2 + c].z,
                            unit.bytes[2 + c].w};  // row g+8
#pragma unroll
    for (int w = 0; w < 4; ++w) {
      const uint32_t a0 = cvt_e4m3x2_to_f16x2(lo[w] & 0xFFFFu);
      const uint32_t a2 = cvt_e4m3x2_to_f16x2(lo[w] >> 16);
      const uint32_t a1 = cvt_e4m3x2_to_f16x2(hi[w] & 0xFFFFu);
      const uint32_t a3 = cvt_e4m3x2_to_f16x2(hi[w] >> 16);
#pragma unroll
      for (int t = 0; t < TOKEN_TILES; ++t) {
        const uint4& bb = b[t][w >> 1];
        const uint32_t b0 = (w & 1) ? bb.z : bb.x, b1 = (w & 1) ? bb.w : bb.y;
        mma_f16_16x8x16(p[t], a0, a1, a2, a3, b0, b1);
      }
    }
  }
  const float ws = decode_scale_bits(unit.scale_bits, e8m0);
#pragma unroll
  for (int t = 0; t < TOKEN_TILES; ++t) {
    const float4 pt = p[t];
    const float2 xs2 = *reinterpret_cast<const float2*>(xs + lb * kTokenPad + t * kTokensPerTile + 2 * q);
    const float f0 = xs2.x * ws, f1 = xs2.y * ws;
    acc[t].x += pt.x * f0;
    acc[t].y += pt.y * f1;
    acc[t].z += pt.z * f0;
    acc[t].w += pt.w * f1;
  }
}

template <int TOKEN_TILES, bool PREQUANT, int DEPTH>
__global__ void __launch_bounds__(kGemmThreads, 2) general_gemm_sm90(const GemmKernelArgs a) {
  extern __shared__ __align__(16) uint8_t smem[];

  const int rank = blockIdx.x;   // K slice within the cluster
  const int group = blockIdx.y;  // range of row tiles
  const int m_begin = blockIdx.z * (TOKEN_TILES * kTokensPerTile);  // a chunk of the instance's tokens (grid.z)
  const int tokens = min(TOKEN_TILES * kTokensPerTile, a.M - m_begin);

  const int tile_begin = int(int64_t(group) * a.tiles / gridDim.y);
  const int tile_end = int(int64_t(group + 1) * a.tiles / gridDim.y);
  const int kb_begin = rank * a.kblocks / a.k_split;
  const int kb_end = (rank + 1) * a.kblocks / a.k_split;
  const int ntiles = tile_end - tile_begin, nblocks = kb_end - kb_begin;

  const GemmSmemLayout layout(a.max_blocks_per_cta, TOKEN_TILES, a.max_tiles_per_cta, a.warps_k, a.k_split,
                              a.smem_stages);
  uint8_t* act = smem;
  float* xs = reinterpret_cast<float*>(smem + layout.xs_offset);
  float* red = reinterpret_cast<float*>(smem + layout.red_offset);
  float* inbox = reinterpret_cast<float*>(smem + layout.inbox_offset);

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int wk = warp % a.warps_k, wt = warp / a.warps_k;
  const int my_tiles = ntiles > wt ? (ntiles - wt + a.warps_t - 1) / a.warps_t : 0;
  const int my_blocks = nblocks > wk ? (nblocks - wk + a.warps_k - 1) / a.warps_k : 0;
  const int units = my_tiles * my_blocks;

  // Inside a unit, offsets stay below 16 * K < 2^31.
  int32_t lane_offset[2][2];
#pragma unroll
  for (int h = 0; h < 2; ++h)
#pragma unroll
    for (int c = 0; c < 2; ++c) lane_offset[h][c] = int32_t(unit_lane_offset(lane, h, c, a.K, a.w_shuffled));
  const int64_t block_stride = unit_block_stride(a.w_shuffled);

  auto unit_tile = [&](int u) { return tile_begin + wt + (u / my_blocks) * a.warps_t; };
  auto unit_block = [&](int u) { return kb_begin + wk + (u % my_blocks) * a.warps_k; };
  auto scale_index = [&](int u) { return int64_t(unit_tile(u) * kTileRows / 128) * a.kblocks + unit_block(u); };
  auto unit_base = [&](int u) {
    return a.w + int64_t(unit_tile(u)) * kTileRows * a.K + int64_t(unit_block(u)) * block_stride;
  };
  auto issue_unit = [&](int u, WeightUnit& unit) {
    const uint8_t* base = unit_base(u);
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int c = 0; c < 2; ++c) unit.bytes[h * 2 + c] = load_streaming_16B(base + lane_offset[h][c]);
    const int64_t si = scale_index(u);
    unit.scale_bits = a.e8m0 ? uint32_t(__ldg(static_cast<const uint8_t*>(a.w_scale) + si))
                             : __ldg(static_cast<const uint32_t*>(a.w_scale) + si);
  };

  // Staging ring: unit u into stage slot `stage` (one cp.async group, committed even when u is
  // past the end, so that "groups still in flight" counts the same in every iteration).
  // Instances with many token tiles are compiled without staging (kMaxStagedTokenTiles).
  const int stages = TOKEN_TILES <= kMaxStagedTokenTiles ? a.smem_stages : 0;
  const uint32_t ring = shared_address(smem + layout.ring_offset);
  auto stage_unit = [&](int u, int stage) {
    if (u < units) {
      const uint8_t* base = unit_base(u);
#pragma unroll
      for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int c = 0; c < 2; ++c)
          copy_async_16B(ring + stage_piece_offset(stage, h * 2 + c, threadIdx.x), base + lane_offset[h][c]);
      const int64_t si = scale_index(u);
      // cp.async moves at least 4 aligned bytes: an e8m0 scale travels in its aligned word.
      const uint8_t* word = a.e8m0 ? static_cast<const uint8_t*>(a.w_scale) + (si & ~int64_t(3))
                                   : static_cast<const uint8_t*>(a.w_scale) + 4 * si;
      copy_async_4B(ring + stage_scale_offset(stage, threadIdx.x), word);
    }
    copy_async_commit();
  };
  auto unstage_unit = [&](int u, int stage, WeightUnit& unit) {
    const uint8_t* slot = smem + layout.ring_offset;
#pragma unroll
    for (int i = 0; i < kUnitLoads; ++i)
      unit.bytes[i] = *reinterpret_cast<const uint4*>(slot + stage_piece_offset(stage, i, threadIdx.x));
    const uint32_t word = *reinterpret_cast<const uint32_t*>(slot + stage_scale_offset(stage, threadIdx.x));
    unit.scale_bits = a.e8m0 ? (word >> (8 * (scale_index(u) & 3))) & 0xFFu : word;
  };

  // With a K split the peers' sums arrive by st.async, counted on the inbox's mbarrier: thread 0
  // arms it with the bytes this CTA receives, then the CTA announces itself to its cluster; the
  // matching wait comes before the first write into a peer's shared memory (reduce_and_store), by
  // when every peer has long started and armed its barrier.
  const uint32_t inbox_bar = shared_address(smem + layout.inbox_barrier_offset);
  if (a.k_split > 1) {
    if (threadIdx.x == 0) {
      mbarrier_init(inbox_bar, 1);
      mbarrier_init_fence();
      mbarrier_arrive_expect_tx(inbox_bar, exchange_inbox_bytes(a, ntiles, rank, TOKEN_TILES * kTokensPerTile));
    }
    cluster_arrive_relaxed();
  }

  // 1. The weight never depends on the previous kernel: start streaming it, and let the next
  //    kernel launch (it still waits for this grid before reading anything this grid writes).
  //    A window of DEPTH + stages consecutive units is in flight: the first DEPTH in registers,
  //    the rest in the staging ring; a consumed unit's slot is refilled with the unit one window
  //    ahead.
  const int window = DEPTH + stages;
  WeightUnit regs[DEPTH];
#pragma unroll
  for (int d = 0; d < DEPTH; ++d)
    if (d < units) issue_unit(d, regs[d]);
  for (int st = 0; st < stages; ++st) stage_unit(DEPTH + st, st);
  allow_next_grid_launch();

  // 2. The activations come from the previous kernel.
  wait_and_load_activations<TOKEN_TILES, PREQUANT, kGemmThreads>(a, act, xs, m_begin, tokens, kb_begin, nblocks,
                                                                 group, rank);
  __syncthreads();

  // 3. Stream.
  float4 acc[TOKEN_TILES];
#pragma unroll
  for (int t = 0; t < TOKEN_TILES; ++t) acc[t] = make_float4(0.f, 0.f, 0.f, 0.f);

  auto use_unit = [&](int u, const WeightUnit& unit) {
    accumulate_unit<TOKEN_TILES>(acc, unit, a.e8m0, act, xs, unit_block(u) - kb_begin, lane);
    if ((u % my_blocks) == my_blocks - 1) park_partials(red, acc, unit_tile(u) - tile_begin, a.warps_k, wk, lane);
  };
  for (int base = 0; base < units; base += window) {
#pragma unroll
    for (int d = 0; d < DEPTH; ++d) {
      const int u = base + d;
      if (u < units) {
        use_unit(u, regs[d]);
        if (u + window < units) issue_unit(u + window, regs[d]);
      }
    }
    for (int st = 0; st < stages; ++st) {
      const int u = base + DEPTH + st;
      if (u < units) {
        // The ring's groups in flight are this unit's and the stages - 1 after it.
        copy_async_wait(stages - 1);
        WeightUnit unit;
        unstage_unit(u, st, unit);
        use_unit(u, unit);  // uses the slot's bytes before the refill below overwrites them
        stage_unit(u + window, st);
      }
    }
  }
  __syncthreads();

  // 4./5. Partials across warps and the cluster, bias, output.
  reduce_and_store<TOKEN_TILES, kGemmThreads, kGemmWarps, /*ASYNC_CAPABLE=*/true>(
      a, red, inbox, tile_begin, ntiles, nblocks, rank, m_begin, tokens, true, a.k_split > 1, inbox_bar);
}

}  // namespace sgl_fp8::sm90
