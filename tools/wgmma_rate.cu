// How fast one SM issues FP8 wgmma of the small-N shapes a decode GEMM uses: cycles per
// instruction per SM for A and B from shared memory (SS) or A from registers (RS), with several
// warpgroups per CTA, one CTA per SM. Shapes: m64n8k32 and m64n16k32 (weights as A, tokens as
// B) and m64n80k32 (tokens as A, 80 weight rows as B); and (run_order, session 25) the fused
// kernel's two MMA orders for a CTA of 3 windows, K-block order against window-major. A
// standalone tool (no repository header):
//   nvcc -O3 -gencode arch=compute_90a,code=sm_90a -o /tmp/wgmma_rate tools/wgmma_rate.cu && /tmp/wgmma_rate
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>

__device__ __forceinline__ uint64_t desc_sw128(uint32_t addr) {
  return uint64_t((addr & 0x3FFFF) >> 4) | (uint64_t(1) << 16) | (uint64_t(64) << 32) | (uint64_t(1) << 62);
}
__device__ __forceinline__ long long timer_ns() {
  long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
__device__ __forceinline__ void fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wait() { asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory"); }

__device__ __forceinline__ void ss_n8(float (&d)[40], uint64_t a, uint64_t b) {
  asm volatile("wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3 {%0,%1,%2,%3}, %4, %5, 1, 1, 1;"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]) : "l"(a), "l"(b));
}
__device__ __forceinline__ void ss_n16(float (&d)[40], uint64_t a, uint64_t b) {
  asm volatile("wgmma.mma_async.sync.aligned.m64n16k32.f32.e4m3.e4m3 {%0,%1,%2,%3,%4,%5,%6,%7}, %8, %9, 1, 1, 1;"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
               : "l"(a), "l"(b));
}
__device__ __forceinline__ void ss_n32(float (&d)[40], uint64_t a, uint64_t b) {
  asm volatile(
      "wgmma.mma_async.sync.aligned.m64n32k32.f32.e4m3.e4m3 "
      "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15}, %16, %17, 1, 1, 1;"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]),
        "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
      : "l"(a), "l"(b));
}
__device__ __forceinline__ void rs_n8(float (&d)[40], uint4 a, uint64_t b) {
  asm volatile("wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3 {%0,%1,%2,%3}, {%4,%5,%6,%7}, %8, 1, 1, 1;"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]) : "r"(a.x), "r"(a.y), "r"(a.z), "r"(a.w), "l"(b));
}
__device__ __forceinline__ void ss_n80(float (&d)[40], uint64_t a, uint64_t b) {
  asm volatile(
      "wgmma.mma_async.sync.aligned.m64n80k32.f32.e4m3.e4m3 "
      "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,"
      "%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39}, %40, %41, 1, 1, 1;"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]),
        "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]),
        "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),
        "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]),
        "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39])
      : "l"(a), "l"(b));
}

constexpr int kSmem = 160 * 1024;
constexpr int kPerGroup = 8;  // instructions per commit group

// Small finite e4m3 bytes everywhere, visible to the async proxy (wgmma).
__device__ void fill_shared(uint8_t* smem) {
  for (int i = threadIdx.x; i < kSmem / 4; i += blockDim.x)
    reinterpret_cast<uint32_t*>(smem)[i] = 0x30303030u ^ (i * 2654435761u & 0x07070707u);
  __syncthreads();
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  __syncthreads();
}

// A kernel's start: the operands in shared memory, the accumulators zeroed; the operands' base address.
__device__ uint32_t prepare(uint8_t* smem, float (&d)[40]) {
  fill_shared(smem);
  for (int i = 0; i < 40; ++i) d[i] = 0.f;
  return uint32_t(__cvta_generic_to_shared(smem));
}

// Instruction i (j-th of its group g) of warpgroup wg: A, 64 rows x 128 bytes, windows walking
// through the first 128 KB; B, 8 KB at the end.
__device__ __forceinline__ uint32_t a_operand(uint32_t base, int i, int j, int wg) {
  return base + uint32_t((i * 8192 + wg * 2048) % (128 * 1024)) + 32 * (j & 3);
}
__device__ __forceinline__ uint32_t b_operand(uint32_t base, int j, int g) {
  return base + 128 * 1024 + 32 * (j & 3) + 1024 * (g & 7);
}

// The CTA's cycles and nanoseconds since (t0, n0); the accumulators feed a store that never
// happens, so that the MMAs are not removed.
__device__ void record(long long t0, long long n0, const float (&d)[40], long long* cycles, float* sink) {
  __syncthreads();
  const long long t1 = clock64(), n1 = timer_ns();
  if (threadIdx.x == 0) {
    cycles[blockIdx.x] = t1 - t0;
    cycles[512 + blockIdx.x] = n1 - n0;
  }
  float s = 0;
  for (int i = 0; i < 40; ++i) s += d[i];
  if (s == 12345.f) sink[threadIdx.x] = s;
}

// MODE 0: SS n8, 1: SS n16, 2: RS n8 (A fragments from registers, loaded from shared memory by
// the threads, 16 bytes per k step), 3: SS n80 (tokens as A).
// PIPE: groups in flight before waiting (0: wait after every group).
template <int MODE, int PIPE>
__global__ void __launch_bounds__(512, 1) rate(int rounds, int warpgroups, long long* cycles, float* sink) {
  extern __shared__ __align__(1024) uint8_t smem[];
  const int wg = threadIdx.x / 128;
  float d[40];
  const uint32_t base = prepare(smem, d);
  long long t0 = clock64(), n0 = timer_ns();
  if (wg < warpgroups) {
    for (int r = 0; r < rounds; ++r) {
      uint4 av[kPerGroup];
      if constexpr (MODE == 2) {
#pragma unroll
        for (int j = 0; j < kPerGroup; ++j)
          av[j] = *reinterpret_cast<const uint4*>(
              smem + ((r * kPerGroup + j) * 8192 + wg * 2048 + (threadIdx.x % 128) * 16) % (128 * 1024));
      }
      fence();
#pragma unroll
      for (int j = 0; j < kPerGroup; ++j) {
        const uint32_t a = a_operand(base, r * kPerGroup + j, j, wg), b = b_operand(base, j, r);
        if constexpr (MODE == 0) ss_n8(d, desc_sw128(a), desc_sw128(b));
        if constexpr (MODE == 1) ss_n16(d, desc_sw128(a), desc_sw128(b));
        if constexpr (MODE == 2) rs_n8(d, av[j], desc_sw128(b));
        if constexpr (MODE == 3) ss_n80(d, desc_sw128(b), desc_sw128(a));
      }
      commit();
      if constexpr (PIPE == 0) wait<0>();
      else wait<PIPE>();
    }
    wait<0>();
  }
  record(t0, n0, d, cycles, sink);
}

// The fused kernel's MMA orders for one CTA of 3 windows (session 25): warpgroups 0-1 issue G01
// commit groups of PER m64nNk32 (a block: windows x 4 K steps), warpgroup 2 G2 and warpgroup 3 G3,
// each waiting after every WAIT groups and after its last; cycles from the first issue to the
// CTA's end. Compile-time counts: with runtime ones ptxas serializes the wgmma (C7518), as it
// would in the kernel. K-block order at 16 tokens: 4 warpgroups x 2 groups of 12 (3 windows), one
// wait; window-major: 3 warpgroups x 8 groups of 4, one wait (1.035-1.07x the kernel's time at
// 8-16 tokens, H200).
template <int N, int PER, int WAIT, int G>
__device__ __forceinline__ void issue_groups(float (&d)[40], uint32_t base, int wg) {
#pragma unroll
  for (int g = 0; g < G; ++g) {
    fence();
#pragma unroll
    for (int j = 0; j < PER; ++j) {
      const uint32_t a = a_operand(base, g * PER + j, j, wg), b = b_operand(base, j, g);
      if constexpr (N == 16) ss_n16(d, desc_sw128(a), desc_sw128(b));
      if constexpr (N == 32) ss_n32(d, desc_sw128(a), desc_sw128(b));
    }
    commit();
    if ((g + 1) % WAIT == 0 || g + 1 == G) wait<0>();
  }
}
template <int N, int PER, int WAIT, int G01, int G2, int G3>
__global__ void __launch_bounds__(512, 1) burst(long long* cycles, float* sink) {
  extern __shared__ __align__(1024) uint8_t smem[];
  const int wg = threadIdx.x / 128;
  float d[40];
  const uint32_t base = prepare(smem, d);
  long long t0 = clock64(), n0 = timer_ns();
  if (wg < 2) {
    issue_groups<N, PER, WAIT, G01>(d, base, wg);
  } else if (wg == 2) {
    if constexpr (G2 > 0) issue_groups<N, PER, WAIT, G2>(d, base, wg);
  } else {
    if constexpr (G3 > 0) issue_groups<N, PER, WAIT, G3>(d, base, wg);
  }
  record(t0, n0, d, cycles, sink);
}

// The slowest CTA's cycles (record's first 512 words) and its nanoseconds (the next 512).
struct Slowest {
  long long cycles = 0, ns = 0;
};
Slowest slowest_cta(const long long* cycles, int sms) {
  long long host[1024];
  cudaMemcpy(host, cycles, sizeof(long long) * 1024, cudaMemcpyDeviceToHost);
  Slowest s;
  for (int i = 0; i < sms; ++i)
    if (host[i] > s.cycles) s = {host[i], host[512 + i]};
  return s;
}

template <int N, int PER, int WAIT, int G01, int G2, int G3>
void run_order(const char* name, long long* cycles, float* sink, int sms) {
  auto kernel = burst<N, PER, WAIT, G01, G2, G3>;
  cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem);
  for (int rep = 0; rep < 3; ++rep) kernel<<<sms, 512, kSmem>>>(cycles, sink);
  if (cudaDeviceSynchronize() != cudaSuccess) {
    printf("%s: error\n", name);
    return;
  }
  const long long mx = slowest_cta(cycles, sms).cycles;
  const int instructions = (2 * G01 + G2 + G3) * PER;
  printf("m64n%dk32 %-58s %6lld cycles (%5.1f per instruction per SM)\n", N, name, mx, double(mx) / instructions);
}

template <typename K>
void run(const char* name, K kernel, int warpgroups, long long* cycles, float* sink, int sms) {
  const int rounds = 256;
  cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem);
  kernel<<<sms, 512, kSmem>>>(rounds, warpgroups, cycles, sink);
  kernel<<<sms, 512, kSmem>>>(rounds, warpgroups, cycles, sink);
  cudaError_t e = cudaDeviceSynchronize();
  if (e != cudaSuccess) {
    printf("%-34s error %s\n", name, cudaGetErrorString(e));
    return;
  }
  const Slowest slow = slowest_cta(cycles, sms);
  const long long mx = slow.cycles, ns = slow.ns;
  const double per = double(mx) / (double(rounds) * kPerGroup * warpgroups);
  printf("%-40s warpgroups %d: %6.1f cycles per instruction per SM (%5.1f per warpgroup), SM clock %4.0f MHz\n", name,
         warpgroups, per, per * warpgroups, ns > 0 ? 1e3 * double(mx) / double(ns) : 0.0);
}

// Start-up: cycles from a CTA's first wgmma to its completion, for `rounds` rounds of 8
// m64n8k32 per warpgroup (4 warpgroups), as a decode GEMM runs them (a handful per launch).
template <typename K>
void run_short(K kernel, int rounds, long long* cycles, float* sink, int sms) {
  cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem);
  for (int rep = 0; rep < 3; ++rep) kernel<<<sms, 512, kSmem>>>(rounds, 4, cycles, sink);
  cudaDeviceSynchronize();
  const Slowest slow = slowest_cta(cycles, sms);
  const long long mx = slow.cycles, ns = slow.ns;
  printf("SS m64n8k32, 4 warpgroups, %3d rounds of 8 then wait: %6lld cycles in all (%5.1f per instruction per SM), %lld ns\n",
         rounds, mx, double(mx) / (rounds * 32.0), ns);
}

int main() {
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  long long* cycles;
  float* sink;
  cudaMalloc(&cycles, sizeof(long long) * 1024);
  cudaMalloc(&sink, sizeof(float) * 1024);
  // 3 windows x 8 blocks a CTA (a K split of 4): K-block order against window-major.
  run_order<16, 12, 2, 2, 2, 2>("16 tokens, K-block order (4 wg x 2 blocks x 12)", cycles, sink, sms);
  run_order<16, 4, 8, 8, 8, 0>("16 tokens, window-major (3 wg x 8 blocks x 4)", cycles, sink, sms);
  run_order<16, 4, 8, 8, 4, 4>("16 tokens, window-major, 4 wg (8, 8, 4, 4 blocks x 4)", cycles, sink, sms);
  run_order<32, 12, 1, 2, 2, 2>("32 tokens, K-block order (4 wg x 2 blocks x 12, wait each)", cycles, sink, sms);
  run_order<32, 4, 4, 8, 8, 0>("32 tokens, window-major (3 wg x 8 blocks x 4, wait every 4)", cycles, sink, sms);
  for (int r : {1, 2, 4, 16}) run_short(rate<0, 0>, r, cycles, sink, sms);
  for (int r : {1, 2, 4, 16}) run_short(rate<0, 4>, r, cycles, sink, sms);
  for (int wgs : {4}) {
    run("SS m64n8k32, wait each group", rate<0, 0>, wgs, cycles, sink, sms);
    run("SS m64n8k32, 2 groups in flight", rate<0, 1>, wgs, cycles, sink, sms);
    run("SS m64n16k32, wait each group", rate<1, 0>, wgs, cycles, sink, sms);
    run("SS m64n16k32, 2 groups in flight", rate<1, 1>, wgs, cycles, sink, sms);
    run("RS m64n8k32, wait each group", rate<2, 0>, wgs, cycles, sink, sms);
    run("RS m64n8k32, 2 groups in flight", rate<2, 1>, wgs, cycles, sink, sms);
    run("SS m64n80k32 (tokens as A), wait", rate<3, 0>, wgs, cycles, sink, sms);
    run("SS m64n80k32 (tokens as A), 2 in flight", rate<3, 1>, wgs, cycles, sink, sms);
  }
  return 0;
}
