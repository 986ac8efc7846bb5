// How many clusters of the 4-warpgroup wgmma ring kernel (one CTA per SM) an NVIDIA H200 (132 SMs)
// holds at once, as cudaOccupancyMaxActiveClusters answered it on the device: the grids that
// tools/config_ab.py --kernels recorded for forced K splits (docs/perf/h200_plan_refit_s22/,
// call 4, and session 21). Clusters of 4: 33 up to ~91 KB of shared memory a CTA, 30 above; the
// other sizes did not depend on it at the sizes the plans take. For CPU checks of the plans
// (tests/sm90_layout_check.cpp) and tools/sm90_plan_table.cpp; the launcher asks the device.
#pragma once

namespace sgl_fp8::h200 {

inline long long resident_clusters(int cluster_size, long long smem_bytes) {
  constexpr long long kResident[9] = {0, 132, 66, 39, 30, 22, 17, 15, 15};
  if (cluster_size == 4 && smem_bytes <= 91 * 1024) return 33;
  return cluster_size >= 1 && cluster_size <= 8 ? kResident[cluster_size] : 0;
}

}  // namespace sgl_fp8::h200
