// Output allocation shared by every backend, so that each backend returns exactly the shapes,
// dtypes and strides the fake implementations in ops.py promise (SPEC §2). Allocation goes
// through the dispatcher (torch's allocator: graph-pool safe on the GPU).
#pragma once

#include <vector>

#include "op_checks.h"

namespace sgl_fp8 {

inline ScalarType quant_scale_dtype(bool ue8m0) { return ue8m0 ? ScalarType::Float8_e8m0fnu : ScalarType::Float; }

inline Tensor empty_like_device(IntArrayRef sizes, ScalarType dtype, const Tensor& like) {
  return torch::stable::empty(sizes, dtype, std::nullopt, like.device());
}

// q has x's shape; scale is [..., K/128] contiguous, or [M, K/128] with strides (1, M) when
// transpose_scale (the layout AITER's bpreshuffle GEMM and cuBLASLt blockwise scaling read):
// the transpose of a contiguous [K/128, M].
inline std::pair<Tensor, Tensor> allocate_quant_outputs(const Tensor& x, bool ue8m0, bool transpose_scale) {
  Tensor q = empty_like_device(x.sizes(), ScalarType::Float8_e4m3fn, x);
  const int64_t KB = x.size(-1) / 128;
  if (transpose_scale) {
    const int64_t M = x.size(0);
    const Tensor scale_t = empty_like_device({KB, M}, quant_scale_dtype(ue8m0), x);
    return {q, torch::stable::transpose(scale_t, 0, 1)};
  }
  std::vector<int64_t> scale_shape(x.sizes().begin(), x.sizes().end());
  scale_shape.back() = KB;
  return {q, empty_like_device(scale_shape, quant_scale_dtype(ue8m0), x)};
}

// x viewed as [rows, K] with a single row stride (a copy only when the leading dimensions of a
// strided input cannot be merged; the last dimension is already checked to be unit-stride).
inline Tensor as_rows(const Tensor& x) { return torch::stable::reshape(x, {-1, x.size(-1)}); }

// A 2-D view of a [..., KB] scale tensor that was allocated contiguous (or is already 2-D).
inline Tensor scale_rows(const Tensor& scale) {
  return scale.dim() == 2 ? scale : torch::stable::view(scale, {-1, scale.size(-1)});
}

}  // namespace sgl_fp8
