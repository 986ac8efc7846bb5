// Output allocation shared by every backend, so that each backend returns exactly the shapes,
// dtypes and strides the fake implementations in ops.py promise (SPEC §2).
#pragma once

#include <ATen/ATen.h>

#include <vector>

namespace sgl_fp8 {

inline at::ScalarType quant_scale_dtype(bool ue8m0) { return ue8m0 ? at::kFloat8_e8m0fnu : at::kFloat; }

// q has x's shape; scale is [..., K/128] contiguous, or [M, K/128] with strides (1, M) when
// transpose_scale (the layout AITER's bpreshuffle GEMM and cuBLASLt blockwise scaling read).
inline std::pair<at::Tensor, at::Tensor> allocate_quant_outputs(const at::Tensor& x, bool ue8m0,
                                                                bool transpose_scale) {
  at::Tensor q = at::empty(x.sizes(), x.options().dtype(at::kFloat8_e4m3fn));
  const int64_t KB = x.size(-1) / 128;
  const auto scale_options = x.options().dtype(quant_scale_dtype(ue8m0));
  if (transpose_scale) {
    const int64_t M = x.size(0);
    return {q, at::empty_strided({M, KB}, {1, M}, scale_options)};
  }
  std::vector<int64_t> scale_shape(x.sizes().begin(), x.sizes().end());
  scale_shape.back() = KB;
  return {q, at::empty(scale_shape, scale_options)};
}

// x viewed as [rows, K] with a single row stride (a copy only when the leading dimensions of a
// strided input cannot be merged; the last dimension is already checked to be unit-stride).
inline at::Tensor as_rows(const at::Tensor& x) { return x.reshape({-1, x.size(-1)}); }

}  // namespace sgl_fp8
