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

// Programmatic dependent launch (sm_90): no-ops when the launch did not enable it.
__device__ __forceinline__ void wait_for_previous_grid() { asm volatile("griddepcontrol.wait;" ::: "memory"); }
__device__ __forceinline__ void allow_next_grid_launch() { asm volatile("griddepcontrol.launch_dependents;"); }

}  // namespace sgl_fp8::sm90

namespace sgl_fp8::sm90 {

// 16-byte asynchronous copy global -> shared, cached in L2 only (the weight is read once).
__device__ __forceinline__ void cp_async_16B(void* smem_dst, const void* gmem_src) {
  const uint32_t dst = static_cast<uint32_t>(__cvta_generic_to_shared(smem_dst));
  asm volatile("cp.async.cg.shared.global.L2::256B [%0], [%1], 16;" ::"r"(dst), "l"(gmem_src) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int PENDING>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(PENDING) : "memory");
}
// The pending count must be an immediate: dispatch a runtime (warp-uniform) count.
__device__ __forceinline__ void cp_async_wait_dynamic(int pending) {
  switch (pending) {
    case 0: cp_async_wait<0>(); break;
    case 1: cp_async_wait<1>(); break;
    case 2: cp_async_wait<2>(); break;
    case 3: cp_async_wait<3>(); break;
    case 4: cp_async_wait<4>(); break;
    case 5: cp_async_wait<5>(); break;
    case 6: cp_async_wait<6>(); break;
    case 7: cp_async_wait<7>(); break;
    default: cp_async_wait<8>(); break;
  }
}

// Shared-memory writes by ordinary stores must be made visible to the tensor cores' async proxy
// before a wgmma reads them.
__device__ __forceinline__ void fence_shared_for_async_proxy() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int PENDING>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(PENDING) : "memory");
}

// wgmma shared-memory descriptor, no swizzle (SPEC-free PTX facts): address, LBO (distance
// between core matrices adjacent along K) and SBO (adjacent along M/N), all in 16-byte units.
__device__ __forceinline__ uint64_t wgmma_smem_descriptor(const void* smem_ptr, uint32_t lbo_bytes,
                                                          uint32_t sbo_bytes) {
  const uint32_t addr = static_cast<uint32_t>(__cvta_generic_to_shared(smem_ptr));
  return uint64_t((addr & 0x3FFFF) >> 4) | (uint64_t(lbo_bytes >> 4) << 16) | (uint64_t(sbo_bytes >> 4) << 32);
}

// D[64 x N] (+)= A[64 x 32] * B[32 x N], e4m3 inputs, fp32 accumulators, both operands in
// shared memory (K-major, described by desc_a / desc_b). Warp w of the warpgroup receives rows
// 16w..16w+15: d[4i..4i+3] = D[g][8i+2q], D[g][8i+2q+1], D[g+8][8i+2q], D[g+8][8i+2q+1]
// (g = lane/4, q = lane%4). accumulate = 0 overwrites d.
template <int N>
__device__ __forceinline__ void wgmma_e4m3_ss(float (&d)[N / 2], uint64_t desc_a, uint64_t desc_b, int accumulate);

template <>
__device__ __forceinline__ void wgmma_e4m3_ss<8>(float (&d)[4], uint64_t desc_a, uint64_t desc_b, int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %6, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3 {%0, %1, %2, %3}, %4, %5, p, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "l"(desc_a), "l"(desc_b), "r"(accumulate));
}

template <>
__device__ __forceinline__ void wgmma_e4m3_ss<16>(float (&d)[8], uint64_t desc_a, uint64_t desc_b, int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %10, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n16k32.f32.e4m3.e4m3 {%0, %1, %2, %3, %4, %5, %6, %7}, %8, %9, p, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
      : "l"(desc_a), "l"(desc_b), "r"(accumulate));
}

template <>
__device__ __forceinline__ void wgmma_e4m3_ss<24>(float (&d)[12], uint64_t desc_a, uint64_t desc_b, int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %14, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n24k32.f32.e4m3.e4m3 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11}, %12, %13, p, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11])
      : "l"(desc_a), "l"(desc_b), "r"(accumulate));
}

template <>
__device__ __forceinline__ void wgmma_e4m3_ss<32>(float (&d)[16], uint64_t desc_a, uint64_t desc_b, int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n32k32.f32.e4m3.e4m3 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, %16, %17, p, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
      : "l"(desc_a), "l"(desc_b), "r"(accumulate));
}

}  // namespace sgl_fp8::sm90
