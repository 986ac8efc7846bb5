// The wgmma ring kernel's tensor map of a plain weight, host side (the launcher, sm90_kernels.cu).
#pragma once

#include <cuda.h>
#include <cudaTypedefs.h>  // PFN_cuTensorMapEncodeTiled: the driver function is looked up at run time
#include <cuda_runtime.h>
#include <stdint.h>

#include "sm90_gemm_layout.h"  // kBlockK

namespace sgl_fp8::sm90 {

// The wgmma ring kernel's view of plain weights (sm90_gemm_layout.h): [K block][row][128 bytes], a
// box of `box_rows` rows (the CTA's tiles) over `box_blocks` blocks, 128-byte swizzle. The dimensions are given innermost first
// with the blocks outermost although their stride (128) is the smallest: the box then lands
// block-major, a block's rows 128 bytes apart. False where the driver declines (e.g. a weight
// address not 16-byte aligned); the caller then takes another kernel.
inline bool encode_ring_weight_map(CUtensorMap* map, const void* w, int64_t N, int64_t K, int box_rows, int box_blocks) {
  using Encode = PFN_cuTensorMapEncodeTiled_v12000;
  static const Encode encode = []() -> Encode {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found;
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &found) !=
            cudaSuccess ||
        found != cudaDriverEntryPointSuccess) {
      (void)cudaGetLastError();
      return nullptr;
    }
    return reinterpret_cast<Encode>(fn);
  }();
  if (!encode || box_blocks < 1 || box_blocks > 256 || box_rows < 1 || box_rows > 256) return false;
  const cuuint64_t dims[3] = {cuuint64_t(kBlockK), cuuint64_t(N), cuuint64_t(K / kBlockK)};
  const cuuint64_t strides[2] = {cuuint64_t(K), cuuint64_t(kBlockK)};  // bytes, of dims 1 and 2
  const cuuint32_t box[3] = {cuuint32_t(kBlockK), cuuint32_t(box_rows), cuuint32_t(box_blocks)};
  const cuuint32_t element_strides[3] = {1, 1, 1};
  return encode(map, CU_TENSOR_MAP_DATA_TYPE_UINT8, 3, const_cast<void*>(w), dims, strides, box, element_strides,
                CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

}  // namespace sgl_fp8::sm90
