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

// D = A * B + C with A 16x32 e4m3 (row), B 32x8 e4m3 (col), fp32 accumulators.
// Fragments (PTX ISA, mma.m16n8k32 .e4m3): with group g = lane/4 and q = lane%4,
//   a0: A[g][4q..4q+3]   a1: A[g+8][4q..]   a2: A[g][16+4q..]   a3: A[g+8][16+4q..]
//   b0: B[4q..4q+3][g]   b1: B[16+4q..][g]
//   d0, d1: D[g][2q], D[g][2q+1]            d2, d3: D[g+8][2q], D[g+8][2q+1]
__device__ __forceinline__ void mma_e4m3_16x8x32(float4& d, uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                                 uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
      : "+f"(d.x), "+f"(d.y), "+f"(d.z), "+f"(d.w)
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// Two fp32 -> packed e4m3 with round-to-nearest-even; .satfinite saturates finite overflow and
// +-Inf to +-448 and keeps NaN NaN: exactly SPEC's e4m3fn_rne(clamp(v, -448, 448)).
// `lo` lands in the low byte.
__device__ __forceinline__ uint32_t cvt_e4m3x2_satfinite(float lo, float hi) {
  uint16_t packed;
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(packed) : "f"(hi), "f"(lo));
  return packed;
}

// Programmatic dependent launch (sm_90): no-ops when the launch did not enable it.
__device__ __forceinline__ void wait_for_previous_grid() { asm volatile("griddepcontrol.wait;" ::: "memory"); }
__device__ __forceinline__ void allow_next_grid_launch() { asm volatile("griddepcontrol.launch_dependents;"); }

}  // namespace sgl_fp8::sm90

namespace sgl_fp8::sm90 {

// Ask L2 to fetch [p, p + bytes) from HBM without occupying registers or shared memory
// (bulk prefetch through the copy engine). p 16-byte aligned, bytes a multiple of 16.
__device__ __forceinline__ void prefetch_l2_bulk(const void* p, uint32_t bytes) {
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p), "r"(bytes) : "memory");
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

// D[64 x N] (+)= A[64 x 32] * B[32 x N], e4m3 inputs, fp32 accumulators. A comes from registers:
// warp w of the warpgroup supplies rows 16w..16w+15 in the mma.m16n8k32 A-fragment layout
// (a0: row g, k 4q..4q+3; a1: row g+8; a2: row g, k 16+4q..; a3: row g+8, k 16+4q..).
// B comes from shared memory through `desc` (K-major). d[4i..4i+3] hold D[g][8i+2q], D[g][8i+2q+1],
// D[g+8][8i+2q], D[g+8][8i+2q+1] of the warp's 16 rows. accumulate = 0 overwrites d.
template <int N>
__device__ __forceinline__ void wgmma_e4m3_rs(float (&d)[N / 2], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                              uint64_t desc, int accumulate);

template <>
__device__ __forceinline__ void wgmma_e4m3_rs<8>(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                                 uint64_t desc, int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %9, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3 {%0, %1, %2, %3}, {%4, %5, %6, %7}, %8, p, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "l"(desc), "r"(accumulate));
}

template <>
__device__ __forceinline__ void wgmma_e4m3_rs<16>(float (&d)[8], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                                  uint64_t desc, int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %13, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n16k32.f32.e4m3.e4m3 {%0, %1, %2, %3, %4, %5, %6, %7}, "
      "{%8, %9, %10, %11}, %12, p, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "l"(desc), "r"(accumulate));
}

template <>
__device__ __forceinline__ void wgmma_e4m3_rs<24>(float (&d)[12], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                                  uint64_t desc, int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %17, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n24k32.f32.e4m3.e4m3 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11}, "
      "{%12, %13, %14, %15}, %16, p, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]),
        "+f"(d[9]), "+f"(d[10]), "+f"(d[11])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "l"(desc), "r"(accumulate));
}

template <>
__device__ __forceinline__ void wgmma_e4m3_rs<32>(float (&d)[16], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                                  uint64_t desc, int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %21, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n32k32.f32.e4m3.e4m3 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, "
      "%12, %13, %14, %15}, {%16, %17, %18, %19}, %20, p, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]),
        "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "l"(desc), "r"(accumulate));
}

}  // namespace sgl_fp8::sm90
