// Register-fed wgmma probe for tools/rs_wgmma_probe.py (docs/sm90.md, next step 1, session 20).
//
// Question answered: can the weight reach wgmma without passing through shared memory, and how
// fast does that stream? Session 19 measured that the wgmma ring kernel's MMAs cost 1.1-1.25 us
// at 1-8 tokens on 5120x4096, mostly their shared-memory reads of the weight (which the copies
// landing in the same SM wait for). Here every thread loads its share of the weight with plain
// 16-byte loads straight into wgmma's A fragment registers (`wgmma ... {a0, a1, a2, a3}, b-desc`):
// the weight never touches shared memory; only the e4m3 activations (B, 8 or 16 tokens) do.
//
// Partition: the fused kernel's plan (grid k_split x groups, CTA = 16-row tiles [tile_begin,
// tile_end) x K blocks [kb_begin, kb_end), 512 threads = 4 warpgroups, warpgroup wg takes the
// CTA's K blocks wg, wg + 4, ...). A warpgroup's wgmma covers 64 rows = 4 tiles: warp w supplies
// the rows of tile w. A CTA of 5 tiles (5120x4096 and 4608x4096 at k_split 2) also runs a tail
// wgmma per block for tile 4, whose rows come from one warp (warp i % 4 at the warpgroup's i-th
// block) while the others supply zeros: the fifth tile's bytes are loaded once, by one warp
// (where the ring kernel's overlapping window reads the CTA's share 1.6 times).
//
// The K order (the layout of A's registers and of the activations in shared memory): thread
// (warp w, lane 4g + t) loads, per 128-K block, the 16-byte pieces [16t, 16t + 16) and
// [64 + 16t, 64 + 16t + 16) of rows g and g + 8 of its tile: each warp load instruction reads
// eight 64-byte runs. K step s (32 K) of the block takes word s of each piece: a0 = row g,
// piece 0; a1 = row g + 8, piece 0; a2 = row g, piece 1; a3 = row g + 8, piece 1. wgmma reads a0
// as logical K [4t, 4t + 4) and a2 as [16 + 4t, 16 + 4t + 4) of the step (CUTLASS's
// ALayout_64x32), so physical byte p of a block is logical K index
//     32 * ((p % 16) / 4) + 16 * (p / 64) + 4 * ((p % 64) / 16) + p % 4,
// and the activations are stored in shared memory under that order (4-byte words move whole).
// The dot product inside a block does not depend on K order; the block scales stay per block.
//
// Modes: 0 = timing (each warp folds its accumulators into one float), 1 = check (every
// partial sum written to out, [slice][n][token]; slice = (rank * 4 + warpgroup) * 4 + warp slot),
// 2 = loads only (no wgmma; the loaded words folded: the same stream without the MMAs).
//
// Plain CUDA + the extension's PTX header, no torch headers: built by the .py with nvcc into a
// shared library and called through ctypes. Every host entry point returns a cudaError_t as int.

#include <cuda_runtime.h>
#include <stdint.h>

#include "../kernels/sm90/sm90_gemm_layout.h"  // kTileRows, kBlockK, kWgmmaWarpGroups
#include "../kernels/sm90/sm90_ptx.cuh"  // the kernels' 16-byte streaming load, wgmma fence/commit/wait, descriptors

namespace {

using namespace sgl_fp8::sm90;

constexpr int kWarpGroups = kWgmmaWarpGroups;  // as the fused kernel
constexpr int kThreads = kWarpGroups * 128;
constexpr int kMaxBlocksPerWg = 4;  // every block of a warpgroup in flight at once (<= 80 registers)

__device__ __forceinline__ uint32_t word(const uint4& v, int s) {
  return s == 0 ? v.x : s == 1 ? v.y : s == 2 ? v.z : v.w;
}

// wgmma with A from registers (64 x 32 e4m3: this thread's a0..a3) and B from shared memory.
__device__ __forceinline__ void wgmma_rs_m64n8k32(float4& d, uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                                  uint64_t b_desc, bool accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %9, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3 {%0, %1, %2, %3}, {%4, %5, %6, %7}, %8, p, 1, 1;\n}\n"
      : "+f"(d.x), "+f"(d.y), "+f"(d.z), "+f"(d.w)
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "l"(b_desc), "r"(int(accumulate)));
}
__device__ __forceinline__ void wgmma_rs_m64n16k32(float4& d0, float4& d1, uint32_t a0, uint32_t a1, uint32_t a2,
                                                   uint32_t a3, uint64_t b_desc, bool accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %13, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n16k32.f32.e4m3.e4m3 {%0, %1, %2, %3, %4, %5, %6, %7}, {%8, %9, %10, %11}, "
      "%12, p, 1, 1;\n}\n"
      : "+f"(d0.x), "+f"(d0.y), "+f"(d0.z), "+f"(d0.w), "+f"(d1.x), "+f"(d1.y), "+f"(d1.z), "+f"(d1.w)
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "l"(b_desc), "r"(int(accumulate)));
}

template <int TT>
__device__ __forceinline__ void wgmma_rs(float4 (&d)[TT], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                         uint64_t b_desc, bool accumulate) {
  if constexpr (TT == 1)
    wgmma_rs_m64n8k32(d[0], a0, a1, a2, a3, b_desc, accumulate);
  else
    wgmma_rs_m64n16k32(d[0], d[1], a0, a1, a2, a3, b_desc, accumulate);
}

// Logical K word (0..31) of physical 4-byte word pw of a block (the header's formula / 4).
__host__ __device__ constexpr int logical_word(int pw) { return 8 * (pw % 4) + 4 * (pw / 16) + (pw % 16) / 4; }

// Byte offset of (token m, logical K byte c) in a block's B tile: K-major rows of 128 bytes,
// 8-row atoms of 1024 bytes, 128-byte swizzle (16-byte chunk index XOR row % 8).
__device__ __forceinline__ uint32_t b_tile_offset(int m, int c) {
  return uint32_t(m * 128 + (((c >> 4) ^ (m & 7)) << 4) + (c & 15));
}

struct ProbeArgs {
  const uint8_t* w;  // [n][k] e4m3
  const uint8_t* x;  // [token_pad][k] e4m3
  float* out;
  int n, k, tiles, kblocks, k_split, early, mode;
};

template <int TT, bool TAIL, bool MMA>
__device__ __forceinline__ void stream_blocks(const ProbeArgs& a, uint32_t act_lo, int tile_begin, int kb_begin,
                                              int per_wg, int wg, int wq, int lane, uint8_t* act, int nblocks,
                                              float4 (&acc)[TT], float4 (&acc_tail)[TT]) {
  constexpr int tokens_pad = TT * 8;
  constexpr int kActWords = kMaxBlocksPerWg * kWarpGroups * tokens_pad * 32 / kThreads;  // per thread
  const int g = lane >> 2, t = lane & 3;
  // This thread's two rows of its tile (and of the tail tile), K byte offset 16t inside a block.
  const uint8_t* row_main = a.w + size_t((tile_begin + wq) * kTileRows + g) * a.k + 16 * t;
  const uint8_t* row_tail = a.w + size_t((tile_begin + 4) * kTileRows + g) * a.k + 16 * t;
  const size_t row8 = size_t(8) * a.k;
  uint4 wm[kMaxBlocksPerWg][4];  // [block][row g piece 0, row g+8 piece 0, row g piece 1, row g+8 piece 1]
  uint4 wt[4];                   // this warp's tail block (i == wq), if any
  auto load_block = [&](int i) {
    const size_t kb = size_t(kb_begin + wg + kWarpGroups * i) * kBlockK;
    wm[i][0] = load_streaming_16B(row_main + kb);
    wm[i][1] = load_streaming_16B(row_main + kb + row8);
    wm[i][2] = load_streaming_16B(row_main + kb + 64);
    wm[i][3] = load_streaming_16B(row_main + kb + row8 + 64);
    if (TAIL && i == wq) {
      wt[0] = load_streaming_16B(row_tail + kb);
      wt[1] = load_streaming_16B(row_tail + kb + row8);
      wt[2] = load_streaming_16B(row_tail + kb + 64);
      wt[3] = load_streaming_16B(row_tail + kb + row8 + 64);
    }
  };
#pragma unroll
  for (int i = 0; i < kMaxBlocksPerWg; ++i)
    if (i < per_wg && i < a.early) load_block(i);
  if (TAIL && wq >= per_wg) wt[0] = wt[1] = wt[2] = wt[3] = make_uint4(0u, 0u, 0u, 0u);

  // The activations: after the previous grid; the held-back weight loads once the activation
  // loads are in flight.
  asm volatile("griddepcontrol.wait;" ::: "memory");
  const int words = nblocks * tokens_pad * 32;
  uint32_t xv[kActWords];
#pragma unroll
  for (int r = 0; r < kActWords; ++r) {
    const int i = threadIdx.x + r * kThreads;
    xv[r] = 0u;
    if (i < words) {
      const int pw = i % 32, m = (i / 32) % tokens_pad, lb = i / (32 * tokens_pad);
      xv[r] = *reinterpret_cast<const uint32_t*>(a.x + size_t(m) * a.k + size_t(kb_begin + lb) * kBlockK + 4 * pw);
    }
  }
#pragma unroll
  for (int i = 0; i < kMaxBlocksPerWg; ++i)
    if (i < per_wg && i >= a.early) load_block(i);
#pragma unroll
  for (int r = 0; r < kActWords; ++r) {
    const int i = threadIdx.x + r * kThreads;
    if (i < words) {
      const int pw = i % 32, m = (i / 32) % tokens_pad, lb = i / (32 * tokens_pad);
      *reinterpret_cast<uint32_t*>(act + lb * tokens_pad * 128 + b_tile_offset(m, 4 * logical_word(pw))) = xv[r];
    }
  }
  fence_proxy_async_shared();
  __syncthreads();

  if constexpr (!MMA) {  // loads only: fold what was loaded
    uint32_t f = 0;
#pragma unroll
    for (int i = 0; i < kMaxBlocksPerWg; ++i)
      if (i < per_wg)
#pragma unroll
        for (int j = 0; j < 4; ++j) f ^= wm[i][j].x ^ wm[i][j].y ^ wm[i][j].z ^ wm[i][j].w;
    if (TAIL)
#pragma unroll
      for (int j = 0; j < 4; ++j) f ^= wt[j].x ^ wt[j].y ^ wt[j].z ^ wt[j].w;
    acc[0].x = __uint_as_float(f & 0x3fffffffu);
  } else {
#pragma unroll
  for (int i = 0; i < kMaxBlocksPerWg; ++i) {
    if (i < per_wg) {  // per_wg is uniform over the CTA
      const int lb = wg + kWarpGroups * i;
      const uint32_t b_lo = act_lo + uint32_t(lb * tokens_pad * (kBlockK / 16));
      float4 P[TT], PT[TT];
      // The tail's A registers: this warp's rows at its own block, zeros elsewhere. Selected
      // before the fence: a register defined between two wgmma makes ptxas fence them (C7519).
      uint32_t ta[4][4];
#pragma unroll
      for (int s = 0; s < 4; ++s)
#pragma unroll
        for (int j = 0; j < 4; ++j) ta[s][j] = TAIL && i % 4 == wq ? word(wt[j], s) : 0u;
      wgmma_fence();
#pragma unroll
      for (int s = 0; s < 4; ++s) {
        const uint64_t db = smem_descriptor_sw128_from_lo(b_lo + 2 * s);
        wgmma_rs<TT>(P, word(wm[i][0], s), word(wm[i][1], s), word(wm[i][2], s), word(wm[i][3], s), db, s > 0);
      }
      if constexpr (TAIL) {
#pragma unroll
        for (int s = 0; s < 4; ++s) {
          const uint64_t db = smem_descriptor_sw128_from_lo(b_lo + 2 * s);
          wgmma_rs<TT>(PT, ta[s][0], ta[s][1], ta[s][2], ta[s][3], db, s > 0);
        }
      }
      wgmma_commit();
      wgmma_wait<0>();
      const float scale = 1.0f;  // the probe's block scale (the real kernel: xs * ws)
#pragma unroll
      for (int j = 0; j < TT; ++j) {
        acc[j].x += P[j].x * scale;
        acc[j].y += P[j].y * scale;
        acc[j].z += P[j].z * scale;
        acc[j].w += P[j].w * scale;
        if (TAIL && i % 4 == wq) {
          acc_tail[j].x += PT[j].x * scale;
          acc_tail[j].y += PT[j].y * scale;
          acc_tail[j].z += PT[j].z * scale;
          acc_tail[j].w += PT[j].w * scale;
        }
      }
    }
  }
  }
}

template <int TT>
__global__ void __launch_bounds__(kThreads, 1) rs_probe_kernel(const __grid_constant__ ProbeArgs a) {
  constexpr int kTokenPad = TT * 8;
  extern __shared__ __align__(1024) uint8_t probe_smem[];
  asm volatile("griddepcontrol.launch_dependents;");
  const int rank = blockIdx.x, group = blockIdx.y;
  const int tile_begin = int((long long)group * a.tiles / gridDim.y);
  const int tile_end = int((long long)(group + 1) * a.tiles / gridDim.y);
  const int kb_begin = int((long long)rank * a.kblocks / a.k_split);
  const int kb_end = int((long long)(rank + 1) * a.kblocks / a.k_split);
  const int ntiles = tile_end - tile_begin, nblocks = kb_end - kb_begin;
  const int per_wg = nblocks / kWarpGroups;  // the host checks nblocks % 4 == 0 and <= 16
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, wg = warp / 4, wq = warp % 4;
  const uint32_t act_lo = smem_descriptor_sw128_lo(shared_address(probe_smem));

  float4 acc[TT], acc_tail[TT];
#pragma unroll
  for (int j = 0; j < TT; ++j) acc[j] = acc_tail[j] = make_float4(0.f, 0.f, 0.f, 0.f);
  if (a.mode == 2) {
    if (ntiles == 5)
      stream_blocks<TT, true, false>(a, act_lo, tile_begin, kb_begin, per_wg, wg, wq, lane, probe_smem, nblocks, acc,
                                     acc_tail);
    else
      stream_blocks<TT, false, false>(a, act_lo, tile_begin, kb_begin, per_wg, wg, wq, lane, probe_smem, nblocks, acc,
                                      acc_tail);
  } else if (ntiles == 5) {
    stream_blocks<TT, true, true>(a, act_lo, tile_begin, kb_begin, per_wg, wg, wq, lane, probe_smem, nblocks, acc,
                                  acc_tail);
  } else {
    stream_blocks<TT, false, true>(a, act_lo, tile_begin, kb_begin, per_wg, wg, wq, lane, probe_smem, nblocks, acc,
                                   acc_tail);
  }

  const int g = lane >> 2, t = lane & 3;
  if (a.mode == 1) {
    // out[slice][n][token]: the main tile's rows from slot 0, the tail tile's rows from slot wq.
    const size_t slice_elems = size_t(a.n) * kTokenPad;
    auto store = [&](const float4 (&v)[TT], int tile, int slot) {
      float* base = a.out + size_t((rank * kWarpGroups + wg) * 4 + slot) * slice_elems;
#pragma unroll
      for (int j = 0; j < TT; ++j) {
        const int n0 = tile * kTileRows + g, m0 = j * 8 + 2 * t;
        base[size_t(n0) * kTokenPad + m0] = v[j].x;
        base[size_t(n0) * kTokenPad + m0 + 1] = v[j].y;
        base[size_t(n0 + 8) * kTokenPad + m0] = v[j].z;
        base[size_t(n0 + 8) * kTokenPad + m0 + 1] = v[j].w;
      }
    };
    if (wq < ntiles) store(acc, tile_begin + wq, 0);
    if (ntiles == 5) store(acc_tail, tile_begin + 4, wq);
    return;
  }
  float f = 0.f;
#pragma unroll
  for (int j = 0; j < TT; ++j) f += acc[j].x + acc[j].y + acc[j].z + acc[j].w + acc_tail[j].x + acc_tail[j].w;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) f += __shfl_xor_sync(0xffffffffu, f, o);
  if (lane == 0) a.out[(size_t(group) * gridDim.x + rank) * 16 + warp] = f;
}

template <int TT>
cudaError_t launch(const ProbeArgs& a, int groups, int pdl, cudaStream_t stream) {
  const int max_blocks = (a.kblocks + a.k_split - 1) / a.k_split;
  const size_t smem = size_t(max_blocks) * TT * 8 * 128;
  if (cudaError_t e = cudaFuncSetAttribute(rs_probe_kernel<TT>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem));
      e != cudaSuccess)
    return e;
  cudaLaunchConfig_t config = {};
  cudaLaunchAttribute attr[1];
  config.gridDim = dim3(unsigned(a.k_split), unsigned(groups), 1);
  config.blockDim = dim3(kThreads, 1, 1);
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  config.attrs = attr;
  config.numAttrs = pdl ? 1 : 0;
  return cudaLaunchKernelEx(&config, rs_probe_kernel<TT>, a);
}

}  // namespace

extern "C" {

// w: [n][k] e4m3; x: [token_tiles * 8][k] e4m3; out: mode 1 [k_split * 16][n][token_tiles * 8]
// fp32, else [groups * k_split * 16] fp32. Requirements checked here: n % 16 == 0, k % 128 == 0,
// every CTA 4-5 tiles (5 only with >= 4 per warpgroup) and K blocks a multiple of 4, <= 16.
int rs_probe_launch(const void* w, const void* x, void* out, long long n, long long k, int groups, int k_split,
                    int token_tiles, int early, int mode, int pdl, cudaStream_t stream) {
  if (n % 16 != 0 || k % 128 != 0 || groups <= 0 || k_split <= 0 || mode < 0 || mode > 2)
    return int(cudaErrorInvalidValue);
  ProbeArgs a{static_cast<const uint8_t*>(w), static_cast<const uint8_t*>(x), static_cast<float*>(out),
              int(n), int(k), int(n / 16), int(k / 128), k_split, early, mode};
  for (int r = 0; r < k_split; ++r) {
    const int nb = int((long long)(r + 1) * a.kblocks / k_split - (long long)r * a.kblocks / k_split);
    if (nb % kWarpGroups != 0 || nb > kWarpGroups * kMaxBlocksPerWg) return int(cudaErrorInvalidValue);
    if (nb / kWarpGroups < 4 && (a.tiles + groups - 1) / groups == 5) return int(cudaErrorInvalidValue);
  }
  for (int gr = 0; gr < groups; ++gr) {
    const int nt = int((long long)(gr + 1) * a.tiles / groups - (long long)gr * a.tiles / groups);
    if (nt < 4 || nt > 5) return int(cudaErrorInvalidValue);
  }
  if (token_tiles == 1) return int(launch<1>(a, groups, pdl, stream));
  if (token_tiles == 2) return int(launch<2>(a, groups, pdl, stream));
  return int(cudaErrorInvalidValue);
}

const char* rs_probe_error_string(int code) { return cudaGetErrorString(cudaError_t(code)); }

}  // extern "C"
