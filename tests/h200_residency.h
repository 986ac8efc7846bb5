// How many clusters of the 4-warpgroup wgmma ring kernel (512 threads, one CTA per SM) an NVIDIA
// H200 (132 SMs) holds at once, as cudaOccupancyMaxActiveClusters answers it:
// tools/cluster_residency.cu on the device (session 25,
// docs/perf/h200_window_major_s25/call6_residency_bench/cluster_residency.txt) gives the same
// counts at every shared-memory size from 64 KB to the 227 KB limit, as the grids
// tools/config_ab.py --kernels recorded (docs/perf/h200_plan_refit_s22/). Until session 25 this
// table held 33 clusters of 4 up to ~91 KB: that count was the co-resident variant's (256 threads,
// two CTAs an SM), and with it the CPU tables put 4096x2048 at 24-32 tokens on the split of 2,
// which the device had not planned since session 24's refit. For CPU checks of the plans
// (tests/sm90_layout_check.cpp) and tools/sm90_plan_table.cpp; the launcher asks the device.
#pragma once

namespace sgl_fp8::h200 {

inline long long resident_clusters(int cluster_size, long long /*smem_bytes*/) {
  constexpr long long kResident[9] = {0, 132, 66, 39, 30, 22, 17, 15, 15};
  return cluster_size >= 1 && cluster_size <= 8 ? kResident[cluster_size] : 0;
}

}  // namespace sgl_fp8::h200
