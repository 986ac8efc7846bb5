// The 4-warpgroup wgmma ring kernel's partition for every K split at 17-32 tokens on the shapes of
// call2_k_split_17_32 (one line each: N K M k_split row_groups tiles blocks inbox_over_activations),
// from kernels/cuda/sm90_gemm_plan.h with the H200's cluster residency. fit_17_32.py --grid reads it.
//
//   g++ -std=c++17 -O1 -I kernels -I . docs/perf/h200_plan_17_32_s24/parts_17_32.cpp -o /tmp/parts
//   /tmp/parts > /tmp/parts.txt
#include <cstdio>

#include "cuda/sm90_gemm_plan.h"
#include "tests/h200_residency.h"

using namespace sgl_fp8;
using namespace sgl_fp8::sm90;

int main() {
  const long long shapes[][2] = {{5120, 4096}, {4608, 4096}, {4096, 2048}, {4096, 4096}, {2560, 4096},
                                 {1536, 4096}, {1024, 4096}, {2112, 7168}, {8192, 1024}, {7168, 2048}};
  for (const auto& s : shapes)
    for (int m : {17, 20, 24, 28, 32})
      for (int k_split = 1; k_split <= kMaxClusterSize; ++k_split) {
        GemmConfig config{};
        config.k_split = k_split;
        const GemmPlan p = plan_wgmma_ring_gemm(s[0], s[1], m, false, 132, 227 * 1024, config, h200::resident_clusters);
        if (!p.wgmma) continue;
        std::printf("%lld %lld %d %d %d %d %d %d\n", s[0], s[1], m, k_split, p.row_groups, p.max_tiles_per_cta,
                    p.max_blocks_per_cta, p.wgmma_layout.inbox_over_activations ? 1 : 0);
      }
  return 0;
}
