// Launch plan of the sm_90 block-scaled GEMM: how (N, K, M) is split over clusters and CTAs.
// Plain C++ (no CUDA types) so the host compiler and CPU tests can check it.
//
// The kernel is weight-streaming bound, so the plan balances weight bytes per SM first:
//   * the grid is sized for `blocks_per_sm` one-warpgroup CTAs per SM (default 2, which leaves
//     room for the next kernel's CTAs to start streaming under programmatic dependent launch);
//   * row tiles (16 rows) are spread over `row_groups` clusters, K blocks (128) over the
//     `k_split` CTAs of a cluster: a CTA streams ceil(T/G) x ceil(KB/S) units of 2 KB, in
//     rounds of 4 tiles (one per warp; a partial last round leaves warps idle);
//   * every CTA also reads and quantizes its K slice of the activations (tokens x K/S x 2 B,
//     from L2), which favours a larger k_split as M grows; a cluster costs two barriers and a
//     distributed-shared-memory reduction.
// docs/sm90.md records the H200 measurements behind the constants.
#pragma once

#include <stdint.h>

#include "../common/fp8_quant_math.h"  // SGL_FP8_HD
#include "../common/gpu_launch.h"

namespace sgl_fp8::sm90 {

// The kernel's shared memory: the CTA's K slice of quantized activations (wgmma B layout,
// token_pad x 128 bytes per block), their scales [block][token] fp32, and per-tile sums
// [tile][16 rows][token] fp32.
struct GemmSmemLayout {
  int64_t xs_offset, red_offset, total;
  SGL_FP8_HD GemmSmemLayout(int max_blocks, int token_tiles, int max_tiles) {
    const int64_t token_pad = int64_t(token_tiles) * 8;
    xs_offset = int64_t(max_blocks) * token_pad * 128;
    red_offset = xs_offset + int64_t(max_blocks) * token_pad * 4;
    total = red_offset + int64_t(max_tiles) * 16 * token_pad * 4;
  }
};

struct GemmPlan {
  int k_split = 1;      // CTAs per cluster, each owning a K slice (grid.x)
  int row_groups = 1;   // clusters along N (grid.y)
  int token_tiles = 1;  // 8-token tiles per launch chunk (1..4): the wgmma N is 8 * token_tiles
  int chunks = 1;       // 32-token chunks (grid.z): M > 32 re-streams the weight per chunk
  int max_tiles_per_cta = 1, max_blocks_per_cta = 1;
  int64_t smem_bytes = 0;
  double cost = -1;  // the model's estimate in bytes-equivalent per SM; < 0: nothing fits
};

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Cost-model weights (bytes-equivalent): an activation byte read from L2 costs this fraction
// of a weight byte streamed from HBM; a cluster adds a fixed cost for its barriers and the
// reduction; an idle warp slot in a partial round costs this fraction of its unit.
constexpr double kActivationByteWeight = 0.5;
constexpr double kClusterCost = 4096;
constexpr double kIdleWarpWeight = 0.25;
constexpr int kDefaultBlocksPerSm = 2;
constexpr int kMaxClusterSize = 8;  // portable cluster size limit

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
  GemmPlan best;
  for (int S = 1; S <= kMaxClusterSize; ++S) {
    if (config.k_split && S != config.k_split) continue;
    if (S > KB) break;
    int64_t groups = slots / S;
    if (groups > T) groups = T;
    if (groups < 1) continue;
    const int64_t blocks = ceil_div(KB, S);
    int64_t tiles = ceil_div(T, groups);
    int64_t smem = GemmSmemLayout(int(blocks), token_tiles, int(tiles)).total;
    if (smem > max_smem) continue;
    const int64_t resident = max_clusters(S, smem);  // keep the grid to one resident wave
    if (groups > resident) {
      groups = resident;
      if (groups < 1) continue;
      tiles = ceil_div(T, groups);
      smem = GemmSmemLayout(int(blocks), token_tiles, int(tiles)).total;
      if (smem > max_smem) continue;
    }
    // Per-SM load: the busiest CTA times the CTAs an SM holds.
    const double ctas_per_sm = double(groups * S) / num_sms;
    const int64_t rounds = ceil_div(tiles, 4);
    const double weight = double(tiles * blocks) * 2048;
    const double idle = double(rounds * 4 - tiles) * double(blocks) * 2048 * kIdleWarpWeight;
    const double activation = kActivationByteWeight * double(tokens) * double(blocks) * 256;
    const double per_cta = weight + idle + activation + (S > 1 ? kClusterCost : 0);
    const double cost = per_cta * (ctas_per_sm < 1 ? 1 : ctas_per_sm);
    if (best.cost < 0 || cost < best.cost) {
      best.k_split = S;
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
