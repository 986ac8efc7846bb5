// How many clusters of S CTAs an sm_90 GPU holds at once (cudaOccupancyMaxActiveClusters), for a
// CTA shaped like the 4-warpgroup wgmma ring kernel's: 512 threads, more than 64 registers a
// thread (so one CTA per SM by registers, as every instance of that kernel), and `smem` bytes of
// dynamic shared memory. tests/h200_residency.h holds the H200's answers for CPU checks of the
// plans (tests/sm90_layout_check.cpp, tools/sm90_plan_table.cpp); the launcher asks the device.
//
//   nvcc -O3 -arch=sm_90a -Xptxas -v tools/cluster_residency.cu -o /tmp/cluster_residency && /tmp/cluster_residency
#include <cstdio>
#include <cuda_runtime.h>

// 96 live fp32 values a thread: ptxas allocates > 64 registers (checked with -Xptxas -v).
__global__ void __launch_bounds__(512, 1) wide_cta(const float* in, float* out) {
  extern __shared__ float smem[];
  float v[96];
#pragma unroll
  for (int i = 0; i < 96; ++i) v[i] = in[threadIdx.x + 512 * i];
#pragma unroll
  for (int r = 0; r < 4; ++r)
#pragma unroll
    for (int i = 0; i < 96; ++i) v[i] = v[i] * v[(i + 1) % 96] + smem[(i * 33 + r) % 256];
  float s = 0.f;
#pragma unroll
  for (int i = 0; i < 96; ++i) s += v[i];
  out[threadIdx.x] = s;
}

int main() {
  int optin = 0;
  cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0);
  if (cudaFuncSetAttribute(wide_cta, cudaFuncAttributeMaxDynamicSharedMemorySize, optin) != cudaSuccess) {
    std::printf("cudaFuncSetAttribute failed\n");
    return 1;
  }
  cudaFuncAttributes attr;
  cudaFuncGetAttributes(&attr, wide_cta);
  std::printf("CTA: 512 threads, %d registers a thread; opt-in shared memory %d bytes\n", attr.numRegs, optin);
  std::printf("%8s", "smem KB");
  for (int s = 1; s <= 8; ++s) std::printf(" %5d", s);
  std::printf("   (clusters of S CTAs resident at once)\n");
  for (int kb = 64; kb * 1024 <= optin; kb += 2) {
    std::printf("%8d", kb);
    for (int s = 1; s <= 8; ++s) {
      cudaLaunchConfig_t config = {};
      config.gridDim = dim3(s, 1024, 1);
      config.blockDim = dim3(512, 1, 1);
      config.dynamicSmemBytes = size_t(kb) * 1024;
      cudaLaunchAttribute attribute;
      attribute.id = cudaLaunchAttributeClusterDimension;
      attribute.val.clusterDim.x = s;
      attribute.val.clusterDim.y = 1;
      attribute.val.clusterDim.z = 1;
      config.attrs = &attribute;
      config.numAttrs = 1;
      int count = -1;
      if (cudaOccupancyMaxActiveClusters(&count, wide_cta, &config) != cudaSuccess) {
        (void)cudaGetLastError();
        count = -1;
      }
      std::printf(" %5d", count);
    }
    std::printf("\n");
  }
  return 0;
}
