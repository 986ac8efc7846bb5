// Do wgmma's shared-memory operand reads slow the bulk copies landing in the same SM? (session 26)
//
// The fused kernel's MMAs add 1.0-1.25 us to its period at 1-8 tokens on 5120x4096 even when they
// are issued before their blocks land (session 19), and the tensor pipe takes ~21 cycles per
// m64n8k32 whatever N (tools/wgmma_rate.cu): ~100 bytes of A a cycle, most of what shared memory
// serves. This probe streams a buffer into a shared-memory ring with bulk copies (one producer
// thread, SLOTS copies of 16 KB in flight, every SM) while 0-4 warpgroups of the same CTA either
// issue SS m64n8k32 back to back (A and B in another region of shared memory), or read that
// region with ld.shared.v4 (the LSU path), or nothing. It prints each variant's landing rate (per
// SM and in all) and the MMAs' cycles per instruction, from cold DRAM (a buffer 3x L2 or more per
// pass) and from L2 (a buffer read again and again). A standalone tool (no repository header):
//   nvcc -O3 -gencode arch=compute_90a,code=sm_90a -o /tmp/smem_contention tools/smem_contention.cu && /tmp/smem_contention
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>

constexpr int kChunk = 16 * 1024;                     // bytes a bulk copy
constexpr int kSlots = 8;                             // copies in flight a CTA
constexpr int kRing = kChunk * kSlots;                // 128 KB
constexpr int kARegion = 64 * 1024;                   // the MMAs' A windows walk through it
constexpr int kBRegion = 8 * 1024;                    // their B operand
constexpr int kSmem = kRing + kARegion + kBRegion;    // 200 KB
constexpr int kMmaWarpGroups = 4;
constexpr int kThreads = kMmaWarpGroups * 128 + 32;   // + the producer warp
constexpr int kPerGroup = 8;                          // wgmma a commit group

enum Reader { kNone = 0, kWgmma = 1, kLdShared = 2 };

__device__ __forceinline__ long long timer_ns() {
  long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
__device__ __forceinline__ uint64_t desc_sw128(uint32_t addr) {
  return uint64_t((addr & 0x3FFFF) >> 4) | (uint64_t(1) << 16) | (uint64_t(64) << 32) | (uint64_t(1) << 62);
}
__device__ __forceinline__ void ss_n8(float (&d)[4], uint64_t a, uint64_t b) {
  asm volatile("wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3 {%0,%1,%2,%3}, %4, %5, 1, 1, 1;"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]) : "l"(a), "l"(b));
}
__device__ __forceinline__ void mbar_init(uint32_t bar) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void mbar_expect(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
  asm volatile(
      "{\n .reg .pred p;\n WAIT_%=:\n"
      " mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
      " @!p bra WAIT_%=;\n}" ::"r"(bar),
      "r"(parity)
      : "memory");
}
__device__ __forceinline__ void bulk_copy(uint32_t dst, const void* src, uint32_t bytes, uint32_t bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(dst),
               "l"(src), "r"(bytes), "r"(bar)
               : "memory");
}

// out[cta]: the producer's ns (first copy requested to last landed), out[512 + cta]: the readers'
// ns, out[1024 + cta]: their cycles (warpgroup 0's thread 0). chunks: copies the producer makes
// (0: none), from its own region of `buf` (region_chunks copies long, wrapped); rounds: commit
// groups (kWgmma) or load rounds (kLdShared) of each of `readers` warpgroups.
template <int READER>
__global__ void __launch_bounds__(kThreads, 1)
    contend(const uint8_t* __restrict__ buf, long long region_chunks, int chunks, int readers, int rounds,
            long long* out, float* sink) {
  extern __shared__ __align__(1024) uint8_t smem[];
  __shared__ __align__(8) uint64_t bars[kSlots];
  const uint32_t ring = uint32_t(__cvta_generic_to_shared(smem));
  const uint32_t a_base = ring + kRing, b_base = a_base + kARegion;
  for (int i = threadIdx.x; i < (kARegion + kBRegion) / 4; i += blockDim.x)  // small finite e4m3 bytes
    reinterpret_cast<uint32_t*>(smem + kRing)[i] = 0x30303030u ^ (i * 2654435761u & 0x07070707u);
  if (threadIdx.x == 0) {
    for (int s = 0; s < kSlots; ++s) mbar_init(uint32_t(__cvta_generic_to_shared(&bars[s])));
  }
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  __syncthreads();
  const int wg = threadIdx.x / 128;
  if (wg == kMmaWarpGroups) {  // the producer warp
    if (threadIdx.x % 32 == 0 && chunks > 0) {
      const uint8_t* region = buf + blockIdx.x * region_chunks * kChunk;
      const long long t0 = timer_ns();
      for (int c = 0; c < chunks; ++c) {
        const int slot = c % kSlots;
        const uint32_t bar = uint32_t(__cvta_generic_to_shared(&bars[slot]));
        if (c >= kSlots) mbar_wait(bar, uint32_t((c / kSlots - 1) & 1));
        mbar_expect(bar, kChunk);
        bulk_copy(ring + slot * kChunk, region + (c % region_chunks) * kChunk, kChunk, bar);
      }
      for (int c = chunks - kSlots < 0 ? 0 : chunks - kSlots; c < chunks; ++c)
        mbar_wait(uint32_t(__cvta_generic_to_shared(&bars[c % kSlots])), uint32_t((c / kSlots) & 1));
      out[blockIdx.x] = timer_ns() - t0;
    }
    return;
  }
  float d[4] = {0.f, 0.f, 0.f, 0.f};
  uint4 v = make_uint4(0, 0, 0, 0);
  const long long n0 = timer_ns(), t0 = clock64();
  if (READER != kNone && wg < readers) {
    for (int r = 0; r < rounds; ++r) {
      if constexpr (READER == kWgmma) {
        asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#pragma unroll
        for (int j = 0; j < kPerGroup; ++j) {
          const int i = r * kPerGroup + j;  // a 64-row x 128-byte window, 32 bytes of K further each j
          const uint32_t a = a_base + uint32_t((i * 8192 + wg * 2048) % kARegion) + 32 * (j & 3);
          const uint32_t b = b_base + 32 * (j & 3) + 1024 * (r & 7);
          ss_n8(d, desc_sw128(a), desc_sw128(b));
        }
        asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
        asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
      } else {  // 2 KB a warpgroup a round, as many bytes as a wgmma's A
#pragma unroll
        for (int j = 0; j < kPerGroup; ++j) {
          const uint32_t at = a_base + uint32_t(((r * kPerGroup + j) * 8192 + wg * 2048 + (threadIdx.x % 128) * 16) % kARegion);
          uint4 x;
          asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(x.x), "=r"(x.y), "=r"(x.z), "=r"(x.w) : "r"(at));
          v.x ^= x.x; v.y += x.y; v.z ^= x.z; v.w += x.w;
        }
      }
    }
  }
  const long long t1 = clock64(), n1 = timer_ns();
  if (threadIdx.x == 0) {
    out[512 + blockIdx.x] = n1 - n0;
    out[1024 + blockIdx.x] = t1 - t0;
  }
  const float s = d[0] + d[1] + d[2] + d[3] + float(v.x ^ v.y ^ v.z ^ v.w);
  if (s == 12345.f) sink[threadIdx.x] = s;
}

// Landing order (session 26): thread 0 of every CTA requests its share (`chunks` bulk copies of
// `chunk` bytes from its own cold region, at most `inflight` at a time: the next one as the oldest
// lands) and records when each lands, in request order: out[cta * kMaxChunks + c] = ns since its
// first request. Do a share's copies land one after another, or all near the end?
constexpr int kMaxChunks = 32;
__global__ void __launch_bounds__(32, 1)
    landing(const uint8_t* __restrict__ buf, long long region_bytes, int chunk, int chunks, int inflight, long long* out) {
  extern __shared__ __align__(1024) uint8_t smem[];
  __shared__ __align__(8) uint64_t bars[kMaxChunks];
  if (threadIdx.x != 0) return;
  const uint32_t ring = uint32_t(__cvta_generic_to_shared(smem));
  for (int c = 0; c < chunks; ++c) mbar_init(uint32_t(__cvta_generic_to_shared(&bars[c])));
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  const uint8_t* region = buf + blockIdx.x * region_bytes;
  auto issue = [&](int c) {
    const uint32_t bar = uint32_t(__cvta_generic_to_shared(&bars[c]));
    mbar_expect(bar, uint32_t(chunk));
    bulk_copy(ring + uint32_t(c * chunk), region + size_t(c) * chunk, uint32_t(chunk), bar);
  };
  const long long t0 = timer_ns();
  for (int c = 0; c < inflight && c < chunks; ++c) issue(c);
  for (int c = 0; c < chunks; ++c) {
    mbar_wait(uint32_t(__cvta_generic_to_shared(&bars[c])), 0);
    out[blockIdx.x * kMaxChunks + c] = timer_ns() - t0;
    if (c + inflight < chunks) issue(c + inflight);
  }
}

struct Result {
  double copy_us = 0, read_us = 0, cycles = 0;
};

template <int READER>
Result run(const uint8_t* buf, long long region_chunks, int chunks, int readers, int rounds, long long* out,
           float* sink, int sms) {
  auto kernel = contend<READER>;
  cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem);
  long long host[1536];
  Result best;
  for (int rep = 0; rep < 3; ++rep) {  // the fastest of 3 (the first may pay for cold code)
    cudaMemset(out, 0, sizeof(long long) * 1536);
    kernel<<<sms, kThreads, kSmem>>>(buf, region_chunks, chunks, readers, rounds, out, sink);
    if (cudaDeviceSynchronize() != cudaSuccess) {
      printf("error: %s\n", cudaGetErrorString(cudaGetLastError()));
      return best;
    }
    cudaMemcpy(host, out, sizeof(host), cudaMemcpyDeviceToHost);
    Result r;
    for (int i = 0; i < sms; ++i) {  // the slowest CTA
      if (host[i] / 1e3 > r.copy_us) r.copy_us = host[i] / 1e3;
      if (host[512 + i] / 1e3 > r.read_us) r.read_us = host[512 + i] / 1e3, r.cycles = double(host[1024 + i]);
    }
    if (rep == 0 || r.copy_us < best.copy_us || (chunks == 0 && r.read_us < best.read_us)) best = r;
  }
  return best;
}

int main() {
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  int l2 = 0;
  cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, 0);
  long long* out;
  float* sink;
  cudaMalloc(&out, sizeof(long long) * 1536);
  cudaMalloc(&sink, sizeof(float) * 1024);
  // DRAM: every CTA its own region of 4 MB (528 MB on 132 SMs, ~10x L2), read once a pass.
  // L2: every CTA 128 KB (17 MB in all), read 32 times a pass.
  const long long dram_chunks = 4 * 1024 * 1024 / kChunk, l2_chunks = 128 * 1024 / kChunk;
  uint8_t* buf;
  if (cudaMalloc(&buf, size_t(sms) * dram_chunks * kChunk) != cudaSuccess) return 1;
  cudaMemset(buf, 0x38, size_t(sms) * dram_chunks * kChunk);
  // The landing runs' own 2 MB a CTA, written before the contention runs flush L2 (cold).
  constexpr long long kLandingRegion = 2 * 1024 * 1024;
  uint8_t* lbuf;
  if (cudaMalloc(&lbuf, size_t(sms) * kLandingRegion) != cudaSuccess) return 1;
  cudaMemset(lbuf, 0x38, size_t(sms) * kLandingRegion);
  printf("%d SMs, L2 %d MB; %d KB copies, %d in flight a CTA (one CTA an SM)\n", sms, l2 >> 20, kChunk / 1024, kSlots);
  struct Source {
    const char* name;
    long long region;
  } sources[] = {{"DRAM", dram_chunks}, {"L2", l2_chunks}};
  const int chunks = int(dram_chunks);  // 4 MB a CTA a pass
  const Result mma_alone = run<kWgmma>(buf, 1, 0, 4, 1000, out, sink, sms);
  printf("wgmma alone, 4 warpgroups x 1000 groups of 8 SS m64n8k32: %.1f us, %.1f cycles per instruction per SM\n",
         mma_alone.read_us, mma_alone.cycles / (4.0 * 1000 * kPerGroup));
  const Result ld_alone = run<kLdShared>(buf, 1, 0, 4, 1000, out, sink, sms);
  printf("ld.shared alone, 4 warpgroups x 1000 rounds of 8 x 16 B a thread: %.1f us, %.1f bytes per cycle per SM\n",
         ld_alone.read_us, 4.0 * 1000 * kPerGroup * 2048 / ld_alone.cycles);
  for (const Source& s : sources) {
    const double bytes = double(chunks) * kChunk;
    const Result alone = run<kNone>(buf, s.region, chunks, 0, 0, out, sink, sms);
    printf("%-4s copies alone: %7.1f us, %6.2f GB/s an SM, %5.2f TB/s in all\n", s.name, alone.copy_us,
           bytes / alone.copy_us / 1e3, bytes * sms / alone.copy_us / 1e6);
    // Readers that outlast the copies: rounds from the 4 warpgroups' rate alone, 2.5x the copy time.
    for (int readers : {1, 2, 4}) {
      for (int reader : {kWgmma, kLdShared}) {
        const Result& r_alone = reader == kWgmma ? mma_alone : ld_alone;
        const int rounds = int(2.5 * alone.copy_us / r_alone.read_us * 1000 * 4.0 / readers) + 1;
        const Result both = reader == kWgmma ? run<kWgmma>(buf, s.region, chunks, readers, rounds, out, sink, sms)
                                             : run<kLdShared>(buf, s.region, chunks, readers, rounds, out, sink, sms);
        const double units = double(readers) * rounds * kPerGroup;
        printf("%-4s copies + %d warpgroups of %-9s: copies %7.1f us (%.3fx alone, %6.2f GB/s an SM), readers %7.1f us, "
               "%s %.1f\n",
               s.name, readers, reader == kWgmma ? "wgmma" : "ld.shared", both.copy_us, both.copy_us / alone.copy_us,
               bytes / both.copy_us / 1e3, both.read_us,
               reader == kWgmma ? "cycles per instruction per SM" : "bytes per cycle per SM",
               reader == kWgmma ? both.cycles / units : units * 2048 / both.cycles);
      }
    }
  }
  // Landing order: a 160 KB share (5120x4096's at a K split of 2) on every SM at once, cold.
  {
    cudaFuncSetAttribute(landing, cudaFuncAttributeMaxDynamicSharedMemorySize, 160 * 1024);
    long long* lout;
    cudaMalloc(&lout, sizeof(long long) * kMaxChunks * 1024);
    struct Variant {
      int chunk, chunks, inflight;
    } variants[] = {{32768, 5, 5}, {16384, 10, 10}, {8192, 20, 20}, {32768, 5, 2}, {16384, 10, 4}, {16384, 10, 2}};
    int run_index = 0;
    for (const Variant& v : variants) {
      for (int rep = 0; rep < 2; ++rep, ++run_index) {
        const uint8_t* base = lbuf + size_t(run_index) * 160 * 1024;  // 12 runs: 1.9 of the 2 MB, each read once
        landing<<<sms, 32, 160 * 1024>>>(base, kLandingRegion, v.chunk, v.chunks, v.inflight, lout);
        if (cudaDeviceSynchronize() != cudaSuccess) {
          printf("landing: error %s\n", cudaGetErrorString(cudaGetLastError()));
          return 1;
        }
        static long long host[kMaxChunks * 1024];
        cudaMemcpy(host, lout, sizeof(long long) * kMaxChunks * sms, cudaMemcpyDeviceToHost);
        printf("landing, %2d KB x %2d, %2d in flight (run %d): us since the first request, median over CTAs [max]:",
               v.chunk / 1024, v.chunks, v.inflight, rep + 1);
        for (int c = 0; c < v.chunks; ++c) {
          long long col[1024];
          long long mx = 0;
          for (int i = 0; i < sms; ++i) col[i] = host[i * kMaxChunks + c], mx = col[i] > mx ? col[i] : mx;
          for (int i = 1; i < sms; ++i)  // insertion sort: 132 values
            for (int j = i; j > 0 && col[j] < col[j - 1]; --j) {
              const long long t = col[j];
              col[j] = col[j - 1];
              col[j - 1] = t;
            }
          if (v.chunks <= 10 || c % 4 == 3 || c == v.chunks - 1)
            printf(" %d:%.2f", c, col[sms / 2] / 1e3);
          if (c == v.chunks - 1) printf(" [%.2f]", mx / 1e3);
        }
        printf("\n");
      }
    }
  }
  return 0;
}
