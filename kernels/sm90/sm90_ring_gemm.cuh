// sm_90 fused small-M FP8 block-scale GEMM, ring kernel (M <= 16): the weight travels into shared
// memory through TMA bulk copies, all of a CTA's weight requested at entry, before the kernel
// waits for the previous one.
//
// Why (docs/design/sm90.md): a read-only kernel that requests 128 KB per SM through bulk copies
// streams a decode weight near the copy bandwidth, while the register pipeline (3-4 units per warp
// in registers, 128 registers per thread) keeps only ~64 KB per SM in flight, stalls its stream
// during the activation prologue and serialises each unit's MMAs with its refill. Here:
//  * one CTA per SM, 16 warps (512 threads, up to 128 registers each); no producer warp: the
//    whole weight share is requested once, at entry, one copy per 16-row tile over the CTA's K
//    slice (a tensor-map box for plain weights: large copies stream near the floor, one 2 KB
//    copy per row far below it), spread over
//    the warps' lane 0, each into its own slot with a "full" mbarrier that the copy's bytes
//    complete (the plan gives every tile a slot, so none is refilled), before anything waits for
//    the previous kernel: the weight does not depend on it;
//  * then every warp fetches its share of the CTA's block scales, waits for the previous grid,
//    quantizes the CTA's K slice of x into shared memory (the same code as the register kernel),
//    and takes the stages as they land: warp (wt, wk) handles the K blocks wk, wk + 8, ... of
//    tiles wt, wt + 2, ... (two groups of 8 warps: with one, the stream phase was bound by
//    shared-memory and MMA latency), two units at a
//    time, with the same unit math (accumulate_unit, two MMA chains), and parks the tile's
//    partial sums; the epilogue is the register kernel's (reduce_and_store);
//  * the next kernel may launch at once; its CTA gets this SM when this one exits and requests its
//    own ring while the rest of this grid finishes (programmatic dependent launch).
// Index formulas: sm90_gemm_layout.h (ring_*), checked on the CPU by tests/sm90_layout_check.cpp.
#pragma once

#include "sm90_block_scaled_gemm.cuh"

namespace sgl_fp8::sm90 {

constexpr int kRingWarpsK = kGemmWarps;  // warps sharing a tile: K blocks wk, wk + 8, ...
constexpr int kRingTileGroups = 2;       // groups of kRingWarpsK warps taking alternate tiles
constexpr int kRingWarps = kRingWarpsK * kRingTileGroups;
constexpr int kRingThreads = kRingWarps * 32;

template <int TOKEN_TILES, bool PREQUANT>
__global__ void __launch_bounds__(kRingThreads, 1) ring_gemm_sm90(const __grid_constant__ GemmKernelArgs a) {
  static_assert(TOKEN_TILES <= kMaxRingTokenTiles, "the ring kernel serves one chunk of <= 16 tokens");
  extern __shared__ __align__(kRingStageAlign) uint8_t ring_kernel_smem[];
  uint8_t* smem = ring_kernel_smem;

  const int rank = blockIdx.x;   // K slice within the cluster
  const int group = blockIdx.y;  // range of row tiles
  const int tokens = min(TOKEN_TILES * kTokensPerTile, a.M);

  const int tile_begin = int(int64_t(group) * a.tiles / gridDim.y);
  const int tile_end = int(int64_t(group + 1) * a.tiles / gridDim.y);
  const int kb_begin = rank * a.kblocks / a.k_split;
  const int kb_end = (rank + 1) * a.kblocks / a.k_split;
  const int ntiles = tile_end - tile_begin, nblocks = kb_end - kb_begin;

  const GemmSmemLayout layout(a.max_blocks_per_cta, TOKEN_TILES, a.max_tiles_per_cta, kRingWarpsK, a.k_split, 0);
  const RingSmemLayout ring(layout, a.max_blocks_per_cta, a.smem_stages);
  uint8_t* act = smem;
  float* xs = reinterpret_cast<float*>(smem + layout.xs_offset);
  float* red = reinterpret_cast<float*>(smem + layout.red_offset);
  float* inbox = reinterpret_cast<float*>(smem + layout.inbox_offset);
  const uint8_t* ring_bytes = smem + ring.ring_offset;
  const uint32_t ring_address = shared_address(smem + ring.ring_offset);
  const uint32_t full = shared_address(smem + ring.barrier_offset);  // + 8 * slot
  uint32_t* unit_scales = reinterpret_cast<uint32_t*>(smem + ring.scale_offset);  // [tile][block]
  // One slot (stage) per tile of the CTA: plan_ring_gemm sets smem_stages = max_tiles_per_cta, so
  // slot s holds tile s and nothing is refilled.
  const int stages = a.smem_stages;
  const int64_t stage_bytes = ring_stage_bytes(a.max_blocks_per_cta);

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;

  if (a.k_split > 1) cluster_arrive_relaxed();  // matched in reduce_and_store
  // Plain weights: one tensor-map box per tile, always max_blocks_per_cta blocks (a CTA with
  // fewer reads a neighbour's blocks or zeros past K, and ignores them); shuffled: one bulk copy
  // of the tile's own blocks.
  const uint32_t copy_bytes = uint32_t(a.w_shuffled ? nblocks : a.max_blocks_per_cta) * kTileRows * kBlockK;
  if (threadIdx.x == 0) {
    for (int s = 0; s < stages; ++s) mbarrier_init(full + 8 * s, 1);
    mbarrier_init_fence();
    for (int s = 0; s < ntiles; ++s) mbarrier_arrive_expect_tx(full + 8 * s, copy_bytes);
  }
  __syncthreads();
  allow_next_grid_launch();

  // 1. Every stage of the CTA at once, one copy per tile, tile s from lane 0 of warp s % 16 (an
  //    issuing lane stalls while the SM's copy queue is full, and its warp with it).
  if (lane == 0) {
    for (int s = warp; s < ntiles; s += kRingWarps) {
      const uint32_t dst = ring_address + uint32_t(s * stage_bytes);
      if (a.w_shuffled) {
        const uint8_t* tile = a.w + int64_t(tile_begin + s) * kTileRows * a.K;
        bulk_copy_to_shared(dst, tile + int64_t(kb_begin) * kTileRows * kBlockK, copy_bytes, full + 8 * s);
      } else {
        tensor_copy_3d_to_shared(dst, &a.weight_map, 0, (tile_begin + s) * kTileRows, kb_begin, full + 8 * s);
      }
    }
  }
  __syncwarp();

  // 2. The block scales of every unit (they do not depend on the previous kernel either), then
  //    the activations, which do.
  {
    auto load_scale = [&](int64_t index) -> uint32_t {
      return a.e8m0 ? uint32_t(__ldg(static_cast<const uint8_t*>(a.w_scale) + index))
                    : __ldg(static_cast<const uint32_t*>(a.w_scale) + index);
    };
    for (int i = threadIdx.x; i < ntiles * nblocks; i += kRingThreads) {
      const int s = i / nblocks, lb = i - s * nblocks;
      unit_scales[s * nblocks + lb] =
          load_scale(int64_t((tile_begin + s) * kTileRows / 128) * a.kblocks + kb_begin + lb);
    }
    wait_and_load_activations<TOKEN_TILES, PREQUANT, kRingThreads>(a, act, xs, 0, tokens, kb_begin, nblocks, group,
                                                                 rank);
    __syncthreads();  // activations and unit scales written

    // 3. Stages as they land: warp (wt, wk) takes blocks wk, wk + 8, ... of tiles wt, wt + 2, ...
    const int wk = warp % kRingWarpsK, wt = warp / kRingWarpsK;
    const int my_blocks = nblocks > wk ? (nblocks - wk + kRingWarpsK - 1) / kRingWarpsK : 0;
    int32_t lane_offset[2][2];
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int c = 0; c < 2; ++c)
        lane_offset[h][c] = int32_t(ring_lane_offset(lane, h, c, a.w_shuffled));
    const int32_t block_stride = int32_t(ring_block_stride());

    float4 acc[TOKEN_TILES];
#pragma unroll
    for (int t = 0; t < TOKEN_TILES; ++t) acc[t] = make_float4(0.f, 0.f, 0.f, 0.f);
    auto load_unit = [&](const uint8_t* stage, int s, int lb, WeightUnit& unit) {
      unit.scale_bits = unit_scales[s * nblocks + lb];
      const uint8_t* block = stage + lb * block_stride;
#pragma unroll
      for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int c = 0; c < 2; ++c)
          unit.bytes[h * 2 + c] = *reinterpret_cast<const uint4*>(block + lane_offset[h][c]);
    };
    auto use_unit = [&](const WeightUnit& unit, int lb) {
      accumulate_unit<TOKEN_TILES, 2, true>(acc, unit, a.e8m0, act, xs, lb, lane);
    };
    for (int s = wt; s < ntiles; s += kRingTileGroups) {
      const int slot = s;
      mbarrier_wait(full + 8 * slot, 0);  // the slot's only phase
      const uint8_t* stage = ring_bytes + slot * stage_bytes;
      // Two units at a time: both units' shared-memory loads are issued before either's MMAs
      // (the units are still added to acc in block order, so the sum is the same).
      int i = 0;
      for (; i + 1 < my_blocks; i += 2) {
        WeightUnit first, second;
        load_unit(stage, s, wk + i * kRingWarpsK, first);
        load_unit(stage, s, wk + (i + 1) * kRingWarpsK, second);
        use_unit(first, wk + i * kRingWarpsK);
        use_unit(second, wk + (i + 1) * kRingWarpsK);
      }
      if (i < my_blocks) {
        WeightUnit unit;
        load_unit(stage, s, wk + i * kRingWarpsK, unit);
        use_unit(unit, wk + i * kRingWarpsK);
      }
      park_partials(red, acc, s, kRingWarpsK, wk, lane);
    }
  }
  __syncthreads();

  // 4./5. Partials across warps and the cluster, bias, output (the first kGemmThreads threads move
  //       the data; the others join the barriers).
  reduce_and_store<TOKEN_TILES>(a, red, inbox, tile_begin, ntiles, nblocks, rank, 0, tokens,
                                threadIdx.x < kGemmThreads);
}

}  // namespace sgl_fp8::sm90
