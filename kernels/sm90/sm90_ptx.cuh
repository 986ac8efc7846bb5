// Thin wrappers over the sm_90 instructions the kernels use, one place for inline PTX.
#pragma once

#include <cuda_runtime.h>
#include <stdint.h>

namespace sgl_fp8::sm90 {

// 16-byte streaming load of data read exactly once (the weight): read-only path, not kept in L1.
__device__ __forceinline__ uint4 load_streaming_16B(const void* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

// 16-byte load of data other blocks also read (activations): plain read-only path.
__device__ __forceinline__ uint4 load_shared_readonly_16B(const void* p) {
  uint4 v;
  asm volatile("ld.global.nc.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  return v;
}

// Asynchronous global -> shared copies (cp.async): the weight staging ring. 16 bytes through L2
// only (.cg); the 4-byte form (.ca) carries a block scale. Each thread reads back only what it
// copied itself, after its own wait_group, so no barrier is needed.
__device__ __forceinline__ uint32_t shared_address(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void copy_async_16B(uint32_t dst, const void* src) {
  asm volatile("cp.async.cg.shared.global.L2::256B [%0], [%1], 16;" ::"r"(dst), "l"(src) : "memory");
}
__device__ __forceinline__ void copy_async_4B(uint32_t dst, const void* src) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(dst), "l"(src) : "memory");
}
__device__ __forceinline__ void copy_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
// Wait until at most `pending` (0..3) of this thread's committed groups are still in flight.
__device__ __forceinline__ void copy_async_wait(int pending) {
  switch (pending) {
    case 0: asm volatile("cp.async.wait_group 0;" ::: "memory"); break;
    case 1: asm volatile("cp.async.wait_group 1;" ::: "memory"); break;
    case 2: asm volatile("cp.async.wait_group 2;" ::: "memory"); break;
    default: asm volatile("cp.async.wait_group 3;" ::: "memory"); break;
  }
}

// Two fp32 -> packed e4m3 with round-to-nearest-even; .satfinite saturates finite overflow and
// +-Inf to +-448 and keeps NaN NaN: exactly SPEC's e4m3fn_rne(clamp(v, -448, 448)).
// `lo` lands in the low byte.
__device__ __forceinline__ uint32_t cvt_e4m3x2_satfinite(float lo, float hi) {
  uint16_t packed;
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(packed) : "f"(hi), "f"(lo));
  return packed;
}

// D = A * B + C, A 16x16 f16 (row), B 16x8 f16 (col), fp32 accumulators (native HMMA).
// Fragments (PTX ISA, mma.m16n8k16 .f16), g = lane/4, q = lane%4, each register a f16 pair:
//   a0: A[g][2q..2q+1]   a1: A[g+8][2q..]   a2: A[g][8+2q..]   a3: A[g+8][8+2q..]
//   b0: B[2q..2q+1][g]   b1: B[8+2q..][g]
//   d0, d1: D[g][2q], D[g][2q+1]            d2, d3: D[g+8][2q], D[g+8][2q+1]
__device__ __forceinline__ void mma_f16_16x8x16(float4& d, uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                                uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
      : "+f"(d.x), "+f"(d.y), "+f"(d.z), "+f"(d.w)
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// Two e4m3 values (the low and high byte of `pair`) -> f16x2, exact (every e4m3 value is an
// f16 value).
__device__ __forceinline__ uint32_t cvt_e4m3x2_to_f16x2(uint32_t pair) {
  uint32_t out;
  asm("{\n.reg .b16 p;\ncvt.u16.u32 p, %1;\ncvt.rn.f16x2.e4m3x2 %0, p;\n}" : "=r"(out) : "r"(pair));
  return out;
}

// Split cluster barrier. A CTA may touch a peer's shared memory only after the peer has started:
// arrive (relaxed, non-blocking) at kernel entry, wait before the first remote access.
__device__ __forceinline__ void cluster_arrive_relaxed() {
  asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
}
__device__ __forceinline__ void cluster_wait() { asm volatile("barrier.cluster.wait.aligned;" ::: "memory"); }

// ---- TMA copies into shared memory, completed on mbarriers (the wgmma ring kernel) -----------
// One producer thread arms a barrier with the bytes it expects and issues the copies; consumers
// wait on the barrier's phase parity.
__device__ __forceinline__ void mbarrier_init(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}
// Make barrier initialisations visible (also to the async proxy) before any use.
__device__ __forceinline__ void mbarrier_init_fence() { asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory"); }
__device__ __forceinline__ void mbarrier_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}
// One arrival (release: this thread's earlier accesses are ordered before the phase completes).
__device__ __forceinline__ void mbarrier_arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}
// Block until the phase with parity `parity` has completed (try_wait may suspend the thread for a
// bounded time, so the loop does not spin hot). CLUSTER_ACQUIRE: acquire at cluster scope, for a
// phase completed by peer CTAs' st.async transactions (released at cluster scope) whose data this
// thread then reads.
template <bool CLUSTER_ACQUIRE = false>
__device__ __forceinline__ void mbarrier_wait(uint32_t bar, uint32_t parity) {
  uint32_t done = 0;
  while (!done) {
    if constexpr (CLUSTER_ACQUIRE)
      asm volatile(
          "{\n.reg .pred p;\nmbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], %2;\n"
          "selp.u32 %0, 1, 0, p;\n}\n"
          : "=r"(done)
          : "r"(bar), "r"(parity)
          : "memory");
    else
      asm volatile(
          "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
          : "=r"(done)
          : "r"(bar), "r"(parity)
          : "memory");
  }
}

// ---- Distributed shared memory (clusters) -----------------------------------------------------
// The shared::cluster address of this CTA's shared::cta address `address` in cluster CTA `rank`.
__device__ __forceinline__ uint32_t cluster_address(uint32_t address, uint32_t rank) {
  uint32_t out;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(out) : "r"(address), "r"(rank));
  return out;
}
// Two floats into a cluster CTA's shared memory (8-byte aligned shared::cluster address), counted
// as 8 bytes of transactions on that CTA's mbarrier `bar` (a shared::cluster address in the same
// CTA). Non-blocking: the receiver learns of the data from its barrier, not the sender.
__device__ __forceinline__ void store_async_to_cluster(uint32_t address, float x, float y, uint32_t bar) {
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v2.f32 [%0], {%1, %2}, [%3];" ::"r"(address),
               "f"(x), "f"(y), "r"(bar)
               : "memory");
}

// The same for one float (4-byte aligned address): 4 bytes of transactions.
__device__ __forceinline__ void store_async_to_cluster(uint32_t address, float x, uint32_t bar) {
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.f32 [%0], %1, [%2];" ::"r"(address), "f"(x),
               "r"(bar)
               : "memory");
}

// The same for four floats (16-byte aligned address): 16 bytes of transactions.
__device__ __forceinline__ void store_async_to_cluster(uint32_t address, float4 v, uint32_t bar) {
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.f32 [%0], {%1, %2, %3, %4}, [%5];" ::"r"(
                   address),
               "f"(v.x), "f"(v.y), "f"(v.z), "f"(v.w), "r"(bar)
               : "memory");
}

// A 3-D tensor-map box (coordinates innermost first) into this CTA's shared memory, completing
// as transactions on `bar`. `map` is the generic address of a __grid_constant__ kernel
// parameter.
// The copy is marked evict_first in the L2 (createpolicy): a streamed weight is read once per
// decode step, and without the hint its 16-48 MB pushed out of the 50 MB L2 what the next kernels
// read again, this kernel's own code among it (a GEMM after a large stream then ran slower).
__device__ __forceinline__ void tensor_copy_3d_to_shared(uint32_t dst, const void* map, int c0, int c1, int c2,
                                                         uint32_t bar) {
  uint64_t policy;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1, "
      "{%2, %3, %4}], [%5], %6;" ::"r"(dst),
      "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(bar), "l"(policy)
      : "memory");
}

// ---- wgmma (warpgroup MMA, sm_90a): the wgmma ring kernel ----------------------------------
// Shared-memory matrix descriptor (PTX ISA "Matrix Descriptor Format"): bits 0-13 start address
// >> 4, 16-29 leading byte offset >> 4, 32-45 stride byte offset >> 4, 49-51 base offset, 62-63
// swizzle (1 = 128-byte). For a K-major operand under the 128-byte swizzle (rows of 128 bytes,
// 16-byte piece p of row r at p ^ (r & 7), 8-row atoms of 1024 bytes at 1024-byte aligned
// addresses) the stride byte offset is the distance between 8-row atoms (1024) and the leading
// offset is unused (1); a K step inside the 128-byte row moves the start address by its bytes.
//
// The kernel builds each descriptor from its low word: the start address field and the leading
// offset. A start address `bytes` further on (a multiple of 16) is that word plus bytes >> 4: the
// 14-bit field holds any shared-memory address (< 256 KB), so the sum never carries out of it.
// One add per wgmma then replaces the mask, shift and or of each address (the MMA loop's code is
// fetched cold in a decode step).
__device__ __forceinline__ uint32_t smem_descriptor_sw128_lo(uint32_t address) {
  return ((address & 0x3FFFF) >> 4) | (1u << 16);
}
__device__ __forceinline__ uint64_t smem_descriptor_sw128_from_lo(uint32_t lo) {
  return uint64_t(lo) | (uint64_t((1024 >> 4) | (1u << 30)) << 32);  // stride 1024, swizzle 128 B
}
// Order this thread's earlier register accesses before the warpgroup's next wgmma.
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
// Wait until at most PENDING committed wgmma groups of this warpgroup are in flight.
template <int PENDING>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(PENDING) : "memory");
}
// Shared memory written by ordinary stores must be fenced before the async proxy (wgmma) reads it.
__device__ __forceinline__ void fence_proxy_async_shared() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }

// D (64 x 8 tokens, fp32) = A (64 x 32 e4m3, descriptor) * B (32 x 8 e4m3, descriptor) [+ D].
// Thread t of the warpgroup holds D rows 16 (t / 32) + (t % 32) / 4 (+ 8) and columns 2 (t % 4)
// (+ 1): the layout of mma.m16n8k16's accumulators, warp w holding rows [16w, 16w + 16).
__device__ __forceinline__ void wgmma_m64n8k32_e4m3(float4& d, uint64_t a_desc, uint64_t b_desc, bool accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %6, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3 {%0, %1, %2, %3}, %4, %5, p, 1, 1;\n}\n"
      : "+f"(d.x), "+f"(d.y), "+f"(d.z), "+f"(d.w)
      : "l"(a_desc), "l"(b_desc), "r"(int(accumulate)));
}
// The same over 16 tokens: d0 holds columns [0, 8) and d1 columns [8, 16), each as above.
__device__ __forceinline__ void wgmma_m64n16k32_e4m3(float4& d0, float4& d1, uint64_t a_desc, uint64_t b_desc,
                                                     bool accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %10, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n16k32.f32.e4m3.e4m3 {%0, %1, %2, %3, %4, %5, %6, %7}, %8, %9, p, 1, 1;\n}\n"
      : "+f"(d0.x), "+f"(d0.y), "+f"(d0.z), "+f"(d0.w), "+f"(d1.x), "+f"(d1.y), "+f"(d1.z), "+f"(d1.w)
      : "l"(a_desc), "l"(b_desc), "r"(int(accumulate)));
}
// The same over 32 tokens: d[j] holds columns [8j, 8j + 8).
__device__ __forceinline__ void wgmma_m64n32k32_e4m3(float4 (&d)[4], uint64_t a_desc, uint64_t b_desc, bool accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n32k32.f32.e4m3.e4m3 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, "
      "%13, %14, %15}, %16, %17, p, 1, 1;\n}\n"
      : "+f"(d[0].x), "+f"(d[0].y), "+f"(d[0].z), "+f"(d[0].w), "+f"(d[1].x), "+f"(d[1].y), "+f"(d[1].z), "+f"(d[1].w),
        "+f"(d[2].x), "+f"(d[2].y), "+f"(d[2].z), "+f"(d[2].w), "+f"(d[3].x), "+f"(d[3].y), "+f"(d[3].z), "+f"(d[3].w)
      : "l"(a_desc), "l"(b_desc), "r"(int(accumulate)));
}

// Programmatic dependent launch (sm_90): no-ops when the launch did not enable it.
__device__ __forceinline__ void wait_for_previous_grid() { asm volatile("griddepcontrol.wait;" ::: "memory"); }
__device__ __forceinline__ void allow_next_grid_launch() { asm volatile("griddepcontrol.launch_dependents;"); }

// 32-bit word s (0..3) of a 16-byte value (the MMA loops' fragments).
__device__ __forceinline__ uint32_t word_of(const uint4& v, int s) {
  return s == 0 ? v.x : s == 1 ? v.y : s == 2 ? v.z : v.w;
}

}  // namespace sgl_fp8::sm90
