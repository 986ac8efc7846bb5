// Launch plan of the sm_90 block-scaled GEMM: how (N, K, M) is split over clusters and CTAs.
// Plain C++ (no CUDA types) so the host compiler and CPU tests can check it.
//
// The kernel is weight-streaming bound, so the plan balances weight bytes per SM first:
//   * one one-warpgroup CTA per SM (blocks_per_sm), whose shared memory stays small enough for
//     the next kernel's CTA to start streaming beside it under programmatic dependent launch;
//   * row tiles (16 rows) are spread over `row_groups` clusters, K blocks (128) over the
//     `k_split` CTAs of a cluster: a CTA copies ceil(T/G) x ceil(KB/S) units of 2 KB;
//   * every CTA also reads and quantizes its K slice of the activations (tokens x K/S x 2 B,
//     from L2), which favours a larger k_split as M grows; a cluster costs a barrier and a
//     distributed-shared-memory reduction.
// docs/sm90.md records the H200 measurements behind the constants.
#pragma once

#include <stdint.h>

#include "../common/fp8_quant_math.h"  // SGL_FP8_HD
#include "../common/gpu_launch.h"
#include "sm90_gemm_layout.h"

namespace sgl_fp8::sm90 {

struct GemmPlan {
  int k_split = 1;      // CTAs per cluster, each owning a K slice (grid.x)
  int stages = 0;       // 8 KB weight stages in flight per CTA
  int row_groups = 1;   // clusters along N (grid.y)
  int token_tiles = 1;  // 8-token tiles per launch chunk (1..4): the wgmma N is 8 * token_tiles
  int chunks = 1;       // 32-token chunks (grid.z): M > 32 re-streams the weight per chunk
  int max_tiles_per_cta = 1, max_blocks_per_cta = 1;
  int64_t smem_bytes = 0;
  double cost = -1;  // the model's estimate in bytes-equivalent per SM; < 0: nothing fits
};

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Cost-model weights (bytes-equivalent): an activation byte read from L2 costs this fraction
// of a weight byte streamed from HBM; a cluster adds a fixed cost for its barrier and the
// reduction.
constexpr double kActivationByteWeight = 0.5;
constexpr double kClusterCost = 4096;
constexpr int kDefaultBlocksPerSm = 1;
constexpr int kMaxClusterSize = 8;  // portable cluster size limit
// Shared memory a CTA aims to stay under (bytes), so that a CTA of the next kernel fits beside
// it on the SM (228 KB per SM, 1 KB reserved per CTA).
constexpr int64_t kSmemBudget = 112 * 1024;
constexpr int kMinStages = 4, kMaxStages = 10;

inline int token_tiles_for(int64_t M) { return M >= 32 ? 4 : int(ceil_div(M < 1 ? 1 : M, 8)); }

// max_clusters(S, smem): how many clusters of S CTAs using smem bytes each can be resident at
// once (cudaOccupancyMaxActiveClusters); a callable returning a large number means "no limit".
template <typename MaxClusters>
GemmPlan plan_block_scaled_gemm(int64_t N, int64_t K, int64_t M, int num_sms, int64_t max_smem,
                                const GemmConfig& config, MaxClusters&& max_clusters) {
  const int64_t T = N / 16, KB = K / 128;
  const int token_tiles = token_tiles_for(M);
  const int64_t tokens = M >= 32 ? 32 : (M < 1 ? 1 : M);
  const int blocks_per_sm = config.blocks_per_sm > 0 ? config.blocks_per_sm : kDefaultBlocksPerSm;
  const int64_t slots = int64_t(num_sms) * blocks_per_sm;
  const int64_t budget = kSmemBudget / blocks_per_sm < max_smem ? kSmemBudget / blocks_per_sm : max_smem;
  GemmPlan best;
  for (int S = 1; S <= kMaxClusterSize; ++S) {
    if (config.k_split && S != config.k_split) continue;
    if (S > KB) break;
    const int64_t blocks = ceil_div(KB, S);
    int64_t groups = slots / S;
    if (groups > T) groups = T;
    if (groups < 1) continue;
    auto smem_for = [&](int stages, int64_t tiles) {
      return GemmSmemLayout(stages, int(blocks), token_tiles, int(tiles), S).total;
    };
    int64_t tiles = ceil_div(T, groups);
    if (smem_for(kMinStages, tiles) > max_smem) continue;
    const int64_t resident = max_clusters(S, smem_for(kMinStages, tiles));  // keep one resident wave
    if (groups > resident) {
      groups = resident;
      if (groups < 1) continue;
      tiles = ceil_div(T, groups);
    }
    int stages = kMaxStages;
    while (stages > kMinStages && smem_for(stages, tiles) > budget) --stages;
    const int64_t smem = smem_for(stages, tiles);
    if (smem > max_smem) continue;
    const double weight = double(tiles * blocks) * 2048;
    const double activation = kActivationByteWeight * double(tokens) * double(blocks) * 256;
    const double cost = weight + activation + (S > 1 ? kClusterCost : 0);
    if (best.cost < 0 || cost < best.cost) {
      best.k_split = S;
      best.stages = stages;
      best.row_groups = int(groups);
      best.max_tiles_per_cta = int(tiles);
      best.max_blocks_per_cta = int(blocks);
      best.smem_bytes = smem;
      best.cost = cost;
    }
  }
  best.token_tiles = token_tiles;
  best.chunks = int(ceil_div(M < 1 ? 1 : M, 32));
  return best;
}

}  // namespace sgl_fp8::sm90
