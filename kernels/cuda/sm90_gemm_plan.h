// Launch plan of the sm_90 block-scaled GEMM: how (N, K, M) is split over clusters, CTAs and
// warps. Plain C++ (no CUDA types) so the host compiler and CPU tests can check it.
//
// The kernel is weight-streaming bound, so the plan balances weight bytes per SM first:
//   * row tiles (16 rows) are spread over `row_groups` clusters, K blocks (128) over the
//     `k_split` CTAs of a cluster: an SM streams ceil(T/G) x ceil(KB/S) units of 2 KB;
//   * inside a CTA, 8 warps = warps_k x warps_t split the CTA's blocks and tiles; a CTA is as
//     slow as its busiest warp;
//   * every SM also reads and quantizes its K slice of the activations (tokens x K/S x 2 B,
//     from L2), which favours larger k_split as M grows; a cluster costs two cluster barriers.
// The constants below were fitted on an H200; docs/sm90.md records the measurements.
#pragma once

#include <stdint.h>

#include "../common/fp8_quant_math.h"  // SGL_FP8_HD
#include "../common/gpu_launch.h"

namespace sgl_fp8::sm90 {

struct GemmPlan {
  int k_split = 1;     // CTAs per cluster, each owning a K slice
  int row_groups = 1;  // clusters along N (grid.y)
  int warps_k = 8, warps_t = 1;
  int token_tiles = 1;  // 8-token MMA tiles per launch chunk (1..4)
  int chunks = 1;       // 32-token chunks (grid.z): M > 32 re-streams the weight per chunk
  int max_tiles_per_group = 1, max_blocks_per_cta = 1;
  int64_t smem_bytes = 0;
  double cost = 0;  // the model's estimate, bytes-equivalent per SM (for tests and tuning)
};

// The kernel's shared memory: the CTA's K slice of quantized activations [block][token][128 B],
// their scales [block][token] fp32, and the warps' partial sums [tile][warp_k][16 rows][token].
struct GemmSmemLayout {
  int token_pad;
  int64_t xs_offset, red_offset, total;
  SGL_FP8_HD GemmSmemLayout(int max_blocks, int token_tiles, int max_tiles, int warps_k) {
    token_pad = token_tiles * 8;
    xs_offset = int64_t(max_blocks) * token_pad * 128;
    red_offset = xs_offset + int64_t(max_blocks) * token_pad * 4;
    total = red_offset + int64_t(max_tiles) * warps_k * 16 * token_pad * 4;
  }
};

inline int64_t gemm_smem_bytes(int max_blocks, int token_tiles, int max_tiles, int warps_k) {
  return GemmSmemLayout(max_blocks, token_tiles, max_tiles, warps_k).total;
}

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Cost-model weights (bytes-equivalent): an activation byte read from L2 costs this fraction
// of a weight byte streamed from HBM; a cluster adds a fixed cost for its barriers and the
// distributed-shared-memory reduction.
constexpr double kActivationByteWeight = 0.5;
constexpr double kClusterCost = 8192;
constexpr int kWarpsPerCta = 8;

// max_clusters(S): how many clusters of S CTAs (with the plan's shared memory) can be resident
// at once, from cudaOccupancyMaxActiveClusters; pass nullptr to assume num_sms / S.
template <typename MaxClusters>
GemmPlan plan_block_scaled_gemm(int64_t N, int64_t K, int64_t M, int num_sms, int64_t max_smem,
                                const GemmConfig& config, MaxClusters&& max_clusters) {
  const int64_t T = N / 16, KB = K / 128;
  GemmPlan best;
  best.cost = -1;
  const int token_tiles = M >= 32 ? 4 : int(ceil_div(M < 1 ? 1 : M, 8));
  const int64_t tokens = M >= 32 ? 32 : (M < 1 ? 1 : M);
  for (int S : {1, 2, 4, 8}) {
    if (config.k_split && S != config.k_split) continue;
    if (S > KB) continue;
    int64_t groups = S == 1 ? num_sms : max_clusters(S);
    if (groups > num_sms / S) groups = num_sms / S;
    if (groups > T) groups = T;
    if (groups < 1) continue;
    const int64_t tiles = ceil_div(T, groups), blocks = ceil_div(KB, S);
    for (int wk : {8, 4, 2, 1}) {
      if (config.warps && wk != config.warps) continue;
      const int wt = kWarpsPerCta / wk;
      const int64_t smem = gemm_smem_bytes(int(blocks), token_tiles, int(tiles), wk);
      if (smem > max_smem) continue;
      const int64_t warp_units = ceil_div(tiles, wt) * ceil_div(blocks, wk);
      const double cost = double(warp_units) * kWarpsPerCta * 2048 +
                          kActivationByteWeight * double(tokens) * double(blocks) * 256 + (S > 1 ? kClusterCost : 0);
      if (best.cost < 0 || cost < best.cost) {
        best.k_split = S;
        best.row_groups = int(groups);
        best.warps_k = wk;
        best.warps_t = wt;
        best.max_tiles_per_group = int(tiles);
        best.max_blocks_per_cta = int(blocks);
        best.smem_bytes = smem;
        best.cost = cost;
      }
    }
  }
  best.token_tiles = token_tiles;
  best.chunks = int(ceil_div(M < 1 ? 1 : M, 32));
  return best;  // cost < 0: nothing fits (the launcher reports it)
}

}  // namespace sgl_fp8::sm90
