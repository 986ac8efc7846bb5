// How many clusters of the 4-warpgroup wgmma ring kernel (512 threads, one CTA per SM) an NVIDIA
// H200 (132 SMs) holds at once, as cudaOccupancyMaxActiveClusters answers it on the device: the
// same counts at every shared-memory size from 64 KB to the 227 KB limit, as the launched grids
// showed. (33 clusters of 4 is the co-resident variant's count, 256 threads and two CTAs an SM,
// not this kernel's.) For CPU checks of the plans (tests/sm90_layout_check.cpp); the launcher asks
// the device.
#pragma once

namespace sgl_fp8::h200 {

inline long long resident_clusters(int cluster_size, long long /*smem_bytes*/) {
  constexpr long long kResident[9] = {0, 132, 66, 39, 30, 22, 17, 15, 15};
  return cluster_size >= 1 && cluster_size <= 8 ? kResident[cluster_size] : 0;
}

}  // namespace sgl_fp8::h200
